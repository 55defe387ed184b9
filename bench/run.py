"""`make bench`: Baton beside the two LangGraph DynamoDB savers, its own CPU, and its whole cold request.

Steps, in one run (a few minutes on a 2-core machine, progress printed; the first `make bench` also spends about
75 s creating the peers' environments):

1. A metered moto server on 127.0.0.1 (`harness/meter.py`, DynamoDB and S3); Baton's table from
   `baton_checkpoints.store.schema.ensure_table` and its bucket from `baton_checkpoints.store.schema.ensure_bucket`;
   an API key from `baton keys create` (`harness/baton_setup.py`).
2. Baton's answers recorded from that moto for the stubbed measurements (`harness/replay.py`), and each LangGraph
   saver's put of one graph step, each in its own environment (`harness/peer_puts.py`).
3. Side by side (`harness/sidebyside.py`): Baton, `langgraph-checkpoint-amazon-dynamodb` and `langgraph-checkpoint-aws`
   (without and with gzip, both with their S3 offload), each in its own process and environment, on the same seeded
   states (1, 4, 32, 256 KB, 2 MB): own CPU, DynamoDB and S3 requests, item and object bytes, write and read units
   and the cost at on-demand prices of a first save, a second save and a read of the latest.
   Then one LangGraph graph run step by step on `BatonSaver` and on both peers' `DynamoDBSaver`
   (`harness/langgraph_steps.py`), from conversations of 6, 34 and 309 KB: DynamoDB requests, refused conditional
   writes, write and read units, stored bytes, S3 requests, HTTPS round trips and $ per million graph steps.
   Then a steady tenant's run of saves and its stream reaped in the deployed batches (`harness/steady.py`): the
   DynamoDB requests rate limiting and usage metering add per API request.
4. Baton's own CPU with AWS stubbed (`harness/warm.py`: saves, and a LangGraph graph step's put against a bare
   botocore PutItem of the same item); the same put, Baton's handler and `BatonSaver.put` together, against each
   peer's `put` of the same checkpoint, AWS stubbed alike, interleaved (`harness/peer_puts.py`); and its whole cold
   request against a boto3 baseline (`harness/coldstart.py`). Then `baton serve` in a process of its own, over real
   HTTP (`harness/serve.py`): a 32 KB save against a 1 KB save, and one client's saves and lookups per second.
5. `bench/report.md` with every figure, every budget's verdict and the headlines (`report/reporting.py`), and
   `bench/report.png` (drawn by `report/plot.py` in the aws saver's environment, which carries matplotlib).

Each child that runs the bench's own code (`python -m bench.harness.warm`, say, or `-c` code importing `bench`) has
the repository's root on its `PYTHONPATH` (`bench.paths.with_repo_path`): the repository's .venv installs Baton, not
`bench`, and a peer's installs neither.

The peers' environments (`bench/.venv-peer-aws`, `bench/.venv-peer-amazon`) are made by `make bench` from
`bench/requirements-peer-*.txt`; a missing one is reported as not measured. `--check` exits 1 when a budget is
missed. Usage, from the repository's root: `python -m bench.run [--reps N] [--big-reps N] [--runs N] [--saves N]
[--quick] [--check]` (`--quick`: 3 repetitions per figure, 2 for 2 MB states, 3 cold-start runs, 60 stubbed saves
and puts against the peers', 3 turns of the LangGraph graph, 30 rounds and half a second per throughput figure
through `baton serve`). `--saves` also bounds the puts timed against the peers' (`peer_puts.PUTS` at most).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from bench.billing import capacity
from bench.harness import baton_setup, coldstart, langgraph_steps, peer_puts, replay, sidebyside, warm
from bench.harness import serve as serve_run
from bench.harness import steady as steady_run
from bench.harness.meter import MeteredMotoServer
from bench.paths import BENCH, REPO, RESULTS
from bench.report import reporting

REPORT = BENCH / "report.md"
README = REPO / "README.md"
README_SECTION = "## Benchmark"
PLOT = BENCH / reporting.PLOT_NAME
BATON_TABLE = baton_setup.TABLE
BATON_BUCKET = next(spec.bucket for spec in sidebyside.CLIENTS if spec.name == "baton" and spec.bucket)
PLOT_PYTHON = BENCH / ".venv-peer-aws" / "bin" / "python"

_started = time.perf_counter()
T = TypeVar("T")


def progress(message: str) -> None:
    """A line on the terminal, with the time since the start."""
    print(f"[{time.perf_counter() - _started:6.1f} s] {message}", flush=True)


def run_child(command: list[str], what: str, env: dict[str, str] | None = None) -> str:
    """Run a measuring child to completion; its stdout, or a failure with its stderr."""
    done = subprocess.run(command, capture_output=True, text=True, env=env or sidebyside.client_env(), check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{done.stderr[-4000:]}")
    return done.stdout


def child_figures(command: list[str], what: str, out: Path, load: Callable[[dict[str, Any]], T]) -> T:
    """Run a measuring child that writes its figures to `out` as JSON (`--json`), and read them with `load`."""
    run_child([*command, "--json", str(out)], what)
    return load(json.loads(out.read_text(encoding="utf-8")))


def main(argv: list[str] | None = None) -> int:
    """Run every measurement, print it, write the report and the plot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reps", type=int, default=sidebyside.REPS, help="repetitions per side-by-side figure")
    parser.add_argument("--runs", type=int, default=coldstart.RUNS, help="fresh interpreters per cold-start module")
    parser.add_argument("--saves", type=int, default=warm.SAVES, help="most timed saves per size, AWS stubbed")
    parser.add_argument(
        "--big-reps", type=int, default=sidebyside.BIG_REPS, help="repetitions at most for 1 MB states and above"
    )
    parser.add_argument(
        "--turns", type=int, default=langgraph_steps.TURNS, help="turns of the LangGraph graph (3 graph steps each)"
    )
    parser.add_argument("--steady", type=int, default=steady_run.SAVES, help="saves of the steady run")
    parser.add_argument("--quick", action="store_true", help="few repetitions: checks the bench, not Baton")
    parser.add_argument("--check", action="store_true", help="exit 1 when a budget is missed")
    args = parser.parse_args(argv)
    if args.quick:
        args.reps, args.big_reps, args.runs, args.saves, args.steady = 3, 2, 3, 60, 100
        args.turns = langgraph_steps.QUICK_TURNS
    when = datetime.now(UTC)
    capacity.self_check()  # the sizing rules every count below depends on
    RESULTS.mkdir(parents=True, exist_ok=True)
    os.environ.update({k: v for k, v in sidebyside.client_env().items() if k.startswith("AWS_")})

    notes: list[str] = []
    steady: dict[str, Any] | None = None
    server = MeteredMotoServer()
    endpoint = server.start()
    try:
        progress(f"metered moto server at {endpoint}")
        secret = baton_setup.prepare(endpoint, BATON_TABLE, BATON_BUCKET)
        recording_path = RESULTS / "recording.json"
        recording: replay.Recording | None = None
        try:
            run_child(
                [
                    *(sys.executable, "-m", "bench.harness.replay", "record", "--endpoint", endpoint),
                    *("--table", BATON_TABLE, "--secret", secret, "--out", str(recording_path)),
                ],
                "recording Baton's DynamoDB answers",
            )
            recording = replay.load(recording_path)
            progress("recorded Baton's DynamoDB answers for the stubbed runs")
        except RuntimeError as exc:
            notes.append(f"Baton's own CPU with AWS stubbed and its cold request were not measured: {_last(exc)}")
            progress(f"could not record Baton's answers ({_last(exc)})")
        peer_recordings, peers_missing = peer_puts.record_peers(endpoint)
        progress(
            f"recorded the peers' LangGraph put ({', '.join(peer_recordings) or 'none'}; "
            "bench/harness/peer_puts.py); side by side next"
        )
        side = sidebyside.measure(server.meter, endpoint, secret, args.reps, progress=progress, big_reps=args.big_reps)
        sizes = ", ".join(f"{size // 1000} KB" for size in langgraph_steps.SIZES)
        where = "bench/harness/langgraph_steps.py"
        progress(f"one LangGraph graph, {args.turns} turns, on each saver at {sizes} ({where})")
        graph_steps = langgraph_steps.measure(server.meter, endpoint, secret, args.turns, progress=progress)
        progress(f"a steady run of {args.steady} saves and its stream (bench/harness/steady.py)")
        steady_json = RESULTS / "steady.json"
        try:
            run_child(
                [
                    *(sys.executable, "-m", "bench.harness.steady", "--endpoint", endpoint, "--table", BATON_TABLE),
                    *("--bucket", BATON_BUCKET, "--secret", secret, "--saves", str(args.steady)),
                    *("--json", str(steady_json)),
                ],
                "bench.harness.steady",
            )
            steady = json.loads(steady_json.read_text(encoding="utf-8"))
        except RuntimeError as exc:
            notes.append(f"the steady run (rate limiting and metering) was not measured: {_last(exc)}")
    finally:
        server.stop()
    summary = side.summary()
    (RESULTS / "sidebyside.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    (RESULTS / "langgraph_steps.json").write_text(json.dumps(graph_steps, indent=1), encoding="utf-8")
    figures = reporting.Figures(summary)
    for line in reporting.headlines(figures):
        progress(line)

    warm_figures: warm.WarmFigures | None = None
    cold: coldstart.ColdStart | None = None
    peer_figures: peer_puts.PeerPutFigures | None = None
    if recording is not None:
        progress("Baton's own CPU with AWS stubbed")
        try:
            warm_figures = child_figures(
                [
                    *(sys.executable, "-m", "bench.harness.warm", "--recording", str(recording_path)),
                    *("--saves", str(args.saves)),
                ],
                "bench.harness.warm",
                RESULTS / "warm.json",
                warm.from_json,
            )
            print(warm.summary(warm_figures), flush=True)
        except RuntimeError as exc:
            notes.append(f"Baton's own CPU with AWS stubbed was not measured: {_last(exc)}")
        progress("the LangGraph put against the peers' put, AWS stubbed alike (bench/harness/peer_puts.py)")
        try:
            peer_figures = peer_puts.measure(
                recording_path, peer_recordings, min(args.saves, peer_puts.PUTS), peers_missing, progress
            )
            print(peer_puts.summary(peer_figures), flush=True)
            (RESULTS / "peer_puts.json").write_text(json.dumps(asdict(peer_figures), indent=1), encoding="utf-8")
        except RuntimeError as exc:
            notes.append(f"the LangGraph put against the peers' put was not measured: {_last(exc)}")
        progress("the whole cold request, in fresh interpreters")
        try:
            cold = coldstart.measure(recording_path, args.runs, progress=progress)
            print(coldstart.summary(cold), flush=True)
            (RESULTS / "coldstart.json").write_text(json.dumps(asdict(cold), default=str, indent=1), encoding="utf-8")
        except RuntimeError as exc:
            notes.append(f"the cold request was not measured: {_last(exc)}")

    progress("a 32 KB save against a 1 KB save, and one client's throughput, through `baton serve` (harness/serve.py)")
    serve: serve_run.ServeFigures | None = None
    quick_serve = ("--rounds", str(serve_run.QUICK_ROUNDS), "--seconds", str(serve_run.QUICK_SECONDS))
    try:
        serve = child_figures(
            [
                *(sys.executable, "-m", "bench.harness.serve"),
                *(quick_serve if args.quick else ()),
            ],
            "bench.harness.serve",
            RESULTS / "serve.json",
            serve_run.from_json,
        )
        print(serve_run.summary(serve), flush=True)
    except RuntimeError as exc:
        notes.append(f"the figures through `baton serve` were not measured: {_last(exc)}")

    notes += notes_from(summary)
    plotted = False
    if PLOT_PYTHON.exists():
        try:
            plot = [str(PLOT_PYTHON), "-m", "bench.report.plot", str(RESULTS / "sidebyside.json"), str(PLOT)]
            run_child(plot, "plot")
            plotted = True
        except RuntimeError as exc:
            notes.append(f"the plot could not be drawn: {_last(exc)}")
    else:
        notes.append(f"no plot: {PLOT_PYTHON} is missing (make bench creates it)")
    progress("the shipped codec's figures (bench/studies/codec_study.py)")
    codec = codec_table()
    if codec is None:
        notes.append("the shipped codec's figures are missing: `bench/studies/codec_study.py` could not report them")
    sections = (langgraph_steps.table(graph_steps), *((codec,) if codec else ()))
    report = reporting.render(
        when, figures, cold, warm_figures, recording, notes, plotted, sections, steady, peer_figures, serve
    )
    REPORT.write_text(report, encoding="utf-8")
    if update_readme(figures, when):
        progress(f"updated the {README_SECTION!r} section of README.md")
    progress(f"wrote {REPORT.relative_to(REPO)}" + (f" and {PLOT.relative_to(REPO)}" if plotted else ""))

    found = reporting.verdicts(figures, cold, warm_figures, recording, steady, peer_figures, serve)
    missed = [v for v in found if v.status == "missed"]
    for verdict in missed:
        print(f"budget missed: {verdict.figure}: {verdict.measured} (budget {verdict.budget})", file=sys.stderr)
    incomplete = recording is None or warm_figures is None or cold is None or peer_figures is None or serve is None
    if incomplete:
        print("some figures were not measured: see the report's oddities", file=sys.stderr)
    return 1 if (missed or incomplete) and args.check else 0


def _last(exc: Exception) -> str:
    """The last line of a failure (a child's traceback ends with its exception)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1][:300] if lines else type(exc).__name__


def codec_table() -> str | None:
    """The shipped codec on the seeded states, from `bench/studies/codec_study.py` (another study's figures), if it
    runs."""
    if not (BENCH / "studies" / "codec_study.py").exists():
        return None
    script = "from bench.studies import codec_study as s; print(s.chosen_table(s.chosen_figures()))"
    try:
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env=sidebyside.client_env(),
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0 or not done.stdout.strip():
        return None
    intro = (
        "The codec Baton ships (`baton_checkpoints.store.codec`), measured by `bench/studies/codec_study.py` on the "
        "seeded states:"
    )
    return f"## The state codec\n\n{intro}\n\n{done.stdout.strip()}"


def update_readme(figures: reporting.Figures, when: datetime) -> bool:
    """Rewrite the README's benchmark section with this run's headlines (only that section; False if absent)."""
    text = README.read_text(encoding="utf-8")
    start = text.find(f"\n{README_SECTION}\n")
    if start < 0:
        return False
    end = text.find("\n## ", start + 1)
    end = len(text) if end < 0 else end
    lines = [
        "",
        README_SECTION,
        "",
        "`make bench` measures Baton beside the two LangGraph DynamoDB savers (`langgraph-checkpoint-amazon-dynamodb`,",
        "`langgraph-checkpoint-aws` with and without gzip, with its S3 offload) on the same seeded agent states from",
        "1 KB to 2 MB and the same moto, DynamoDB and S3 metered, costs at on-demand prices. What Baton stores and",
        f"costs over the cheapest peer (below 1× is less), {when:%Y-%m-%d}:",
        "",
        *(f"- {line}" for line in reporting.short_headlines(figures)),
        "",
        "Every figure (requests, units, CPU, the whole cold request), the performance budgets Baton holds itself to",
        "with each one's verdict, and a plot are in [bench/report.md](bench/report.md).",
    ]
    README.write_text(text[:start] + "\n".join(lines) + "\n" + text[end:], encoding="utf-8")
    return True


def notes_from(summary: dict[str, Any]) -> list[str]:
    """What the report should say about this run beyond the tables."""
    notes = []
    for name, reason in summary["missing"].items():
        notes.append(f"{summary['labels'].get(name, name)} not measured: {reason}")
    pythons = {facts["python"] for facts in summary["info"].values()}
    if len(pythons) > 1:
        notes.append(f"the clients ran different Python versions: {', '.join(sorted(pythons))}")
    return notes


if __name__ == "__main__":
    sys.exit(main())
