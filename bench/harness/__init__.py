"""What runs and measures: the seeded states, the metered moto server, the measured clients, the stubbed runs.

Modules that a child process runs are started as `python -m bench.harness.<module>` (`bench.paths.with_repo_path`).
"""
