"""`bench/report.md` (`reporting`) and `bench/report.png` (`plot`, run in `bench/.venv-peer-aws`) from one run's
figures."""
