"""`make bench`: Baton beside the LangGraph DynamoDB savers, its own CPU and its whole cold request.

`python -m bench.run` (what `make bench` runs, from the repository's root) writes `bench/report.md`. The package:

* `bench.harness`: what runs and measures (the seeded states, the metered moto server, the measured clients and
  their child processes, the stubbed and cold-start runs);
* `bench.billing`: what DynamoDB and S3 bill for what was measured (sizing rules, on-demand prices);
* `bench.report`: `report.md` and `report.png` from the figures;
* `bench.studies`: one-off studies behind a design choice (the codec, the spill threshold, a checkpoint's size);
* `bench.tools`: tools run by hand (the zstd dictionary Baton ships);
* `bench.paths`: where the files are, and the `PYTHONPATH` a child needs to import `bench`.

Imports point one way: `run` > `report` > `harness` > `billing`, and `studies` > `harness`, `billing`, `tools`
(import-linter's `bench-acyclic` contract in pyproject.toml: no cycle between the modules of any of these packages).
The packages' `__init__` modules import nothing. A peer's environment (`bench/.venv-peer-*`, without Baton) runs
`bench.harness.clients`, `bench.harness.langgraph_steps` and `bench.report.plot`, with the repository's root on its
`PYTHONPATH` (`bench.paths.with_repo_path`): what they import at their top is the standard library and
`bench.harness.states`, `bench.billing.prices` and `bench.paths`, which import nothing else.
"""
