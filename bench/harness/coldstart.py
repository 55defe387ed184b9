"""Cold start counted whole: a fresh interpreter imports Baton's api handler and handles one save, AWS stubbed.

Each sample is a new interpreter (`python -c`) that times, from the start of the import to the handler's answer,
`import baton_checkpoints.handlers.api` followed by one plain save of a 4 KB conversation state
(`bench/harness/states.py`). A second target times the same request without the lean path (`eager_api.py`: its
import also loads what the handler leaves to the first request that needs it: the thread routes, the thread store,
powertools' whole event handler), to show what that path saves. Baton creates its DynamoDB client at its first
request, so that request pays for loading boto3 and creating the client: a cold request pays both, and both are in
the figure. DynamoDB is stubbed by replaying answers moto gave to the same requests (`replay.py`), at botocore's
`before-send`: botocore still serializes, signs and parses. The child finds `bench` through `PYTHONPATH`
(`bench.paths.with_repo_path`), and imports its harness before its clock starts.

The baseline (`bench/harness/baseline_boto3.py`) is the least a Python function talking to DynamoDB pays: it imports
boto3, creates a DynamoDB client at import, and its handler makes one stubbed GetItem. Both children run the same
harness before their clock starts (loading the recording, building the event), alternate, and flip order every
round, so a slow moment of this shared machine lands on both sides; medians are compared. Interpreter start-up,
which Lambda pays for every function alike, is left out (the whole process's wall time is shown beside it).

Each child also timestamps its request's phases (the import, loading boto3, creating the client, each stubbed call,
Baton's own work between them), and a few `-X importtime` runs of the whole cold request show which packages the
time goes to: that is what says what to fix.

Usage: `python -m bench.harness.coldstart --recording FILE [--runs N] [--check]` (the recording comes from
`bench/run.py`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.paths import RESULTS, with_repo_path

BASELINE_MODULE = "bench.harness.baseline_boto3"
# Rounds are cheap (~1 s for the pair) and this 2-core machine is shared: more rounds, steadier medians.
RUNS = 15
PROFILE_RUNS = 3
# Bytecode caches of the measured interpreters live here (gitignored), not in the source or venv trees: every
# module then runs from a .pyc, as an installed package does, whatever PYTHONDONTWRITEBYTECODE says.
PYCACHE_DIR = RESULTS / "pycache"


@dataclass(frozen=True)
class Target:
    """A module measured against the baseline, with its budget (a ratio).

    `request`: import it and handle one save with its `handler` (the whole cold request); otherwise the import only.
    """

    label: str
    module: str
    budget: float
    forbidden: tuple[str, ...]
    """Modules the import alone must not load."""
    request: bool


# Modules whose presence after the import says something about its cost.
WATCHED = (
    "boto3",
    "botocore",
    "botocore.session",
    "botocore.client",
    "aws_xray_sdk",
    "moto",
    "aws_lambda_powertools",
    "aws_lambda_powertools.tracing.tracer",
    "pydantic",
    "rfc8785",
    "orjson",
    "brotli",
    "zstandard",
    "cachetools",
    "asyncio",
    "ssl",
    "urllib3",
)
# What the api handler's import must not load: the AWS SDK proper (created at the first request), the X-Ray SDK
# (the Tracer), moto (local runs only). The bare `botocore` package is allowed: powertools imports it to register
# its user agent, which loads no more than botocore/__init__.py.
FORBIDDEN = ("boto3", "botocore.session", "botocore.client", "aws_xray_sdk", "moto")

LEAN_LABEL = "api handler: import + first save"
EAGER_LABEL = "api handler without the lean path: import + first save"
EAGER_MODULE = "bench.harness.eager_api"
"""The api handler with what the lean path defers loaded by its import (`eager_api.py`): every deferred router, the
repositories' modules, the service logger and powertools' packages whole. Its figure beside the handler's own is what
the lean path saves."""

TARGETS = (
    # The first target is the headline's, and the one whose imports are profiled.
    Target(LEAN_LABEL, "baton_checkpoints.handlers.api", 1.3, FORBIDDEN, request=True),
    Target(EAGER_LABEL, EAGER_MODULE, 1.3, FORBIDDEN, request=True),
    # Not written yet at the time of writing; measured as soon as the module exists. It talks to AWS on every
    # invocation, so it may create its client at import: only the X-Ray SDK and moto are ruled out.
    Target("reaper handler: import", "baton_checkpoints.handlers.reaper", 1.1, ("aws_xray_sdk", "moto"), request=False),
)

_CHILD = """\
import importlib, json, sys, time
module, recording, request, watched = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4:]
from bench.harness import replay
from bench.harness.clients import save_event, states_for
loaded = replay.load(__import__("pathlib").Path(recording))
calls = loaded["requests"][f"{replay.COLD_SIZE}/1"]
if module == BASELINE_MODULE:
    calls = [c for c in calls if c["operation"] == "GetItem"][:1]
stub = replay.Replay(script=calls)
watch = replay.install_after_import(stub, ("boto3",))
event = save_event(loaded["secret"], replay.subject(replay.COLD_SIZE), states_for(replay.COLD_SIZE)[0], "cold-1")
sys.stderr.write("\\n@@bench-cold-request-starts@@\\n"); sys.stderr.flush()
before = len(sys.modules)
started, cpu_started = time.perf_counter(), time.process_time()
handler_module = importlib.import_module(module)
imported, cpu_imported = time.perf_counter(), time.process_time()
new_modules = len(sys.modules) - before
loaded_now = [m for m in watched if m in sys.modules]
status = None
if request:
    status = handler_module.handler(event, None)["statusCode"]
answered, cpu_answered = time.perf_counter(), time.process_time()
marks = [("imported", imported), ("answered", answered)]
if "boto3" in watch.times:
    marks += [("boto3:start", watch.times["boto3"][0]), ("boto3:end", watch.times["boto3"][1])]
for label, at in stub.marks:
    marks.append((label, at))
report = {
    "import_ms": (imported - started) * 1000, "total_ms": (answered - started) * 1000,
    "cpu_import_ms": (cpu_imported - cpu_started) * 1000, "cpu_total_ms": (cpu_answered - cpu_started) * 1000,
    "status": status, "calls": stub.calls, "loaded": loaded_now, "new_modules": new_modules,
    "marks": sorted(((label, (at - started) * 1000) for label, at in marks), key=lambda m: m[1]),
}
sys.stdout.write("\\n" + json.dumps(report) + "\\n")
""".replace("BASELINE_MODULE", repr(BASELINE_MODULE))

_PROFILE_MARK = "@@bench-cold-request-starts@@"
_PROFILE_CHILD = _CHILD


def child_env(recording: dict[str, Any] | None = None) -> dict[str, str]:
    """The environment of a measured interpreter: Lambda-like, and never reaching out to the network.

    Lambda hands a function its credentials in environment variables and has no AWS config files. Without
    credentials botocore would walk its provider chain up to the instance metadata endpoint while creating the
    client, and the figures would measure this machine's network instead. The values are dummies.
    """
    # PYTHONPATH stays when someone sets it on purpose (to measure another checkout of Baton, say), after the
    # repository's root (where the child finds `bench`).
    env = {k: v for k, v in os.environ.items() if k == "PYTHONPATH" or not k.startswith(("AWS_", "PYTHON", "BATON_"))}
    env = with_repo_path(env)
    env.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "BATON_TABLE_NAME": (recording or {}).get("table", "baton-bench"),
            "PYTHONPYCACHEPREFIX": str(PYCACHE_DIR),
        }
    )
    return env


@dataclass
class Samples:
    """Every run of one module in fresh interpreters."""

    label: str
    module: str
    budget: float | None
    request: bool
    must_not_load: tuple[str, ...] = ()
    total_ms: list[float] = field(default_factory=list)
    """From the start of the import to the answer (the import alone when `request` is false)."""
    import_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    """The whole child process, interpreter start-up and exit included."""
    phases: list[list[tuple[str, float]]] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)
    new_modules: int = 0
    calls: list[str] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        """Median of the measured span."""
        return statistics.median(self.total_ms)

    @property
    def median_import_ms(self) -> float:
        """Median of the import alone."""
        return statistics.median(self.import_ms)

    @property
    def median_cpu_ms(self) -> float:
        """Median CPU time of the measured span."""
        return statistics.median(self.cpu_ms)

    @property
    def median_wall_ms(self) -> float:
        """Median wall time of the whole child."""
        return statistics.median(self.wall_ms)

    @property
    def forbidden(self) -> list[str]:
        """Modules the import loaded that it must not."""
        return [m for m in self.loaded if m in self.must_not_load]

    def median_phases(self) -> list[tuple[str, float]]:
        """The request's phases (label, median ms), in the order they happen."""
        by_label: dict[str, list[float]] = defaultdict(list)
        order: list[str] = []
        for run in self.phases:
            for label, ms in run:
                if label not in by_label:
                    order.append(label)
                by_label[label].append(ms)
        return [(label, statistics.median(by_label[label])) for label in order]


def phases(marks: list[tuple[str, float]], calls: list[str], module: str) -> list[tuple[str, float]]:
    """Name the spans between a child's timestamps (sorted): what the request spent its time on."""
    names = iter(calls)
    spans: list[tuple[str, float]] = []
    previous, previous_at = "start", 0.0
    current_call = ""
    for label, at in marks:
        if label == "before-send":
            continue  # the stubbed send is instantaneous; serialize + sign + parse are reported as one call
        if label == "before-call":
            current_call = next(names, "?")
        what = _span_name(previous, label, current_call, module)
        spans.append((what, at - previous_at))
        previous, previous_at = label, at
    merged: dict[str, float] = {}
    for what, ms in spans:
        merged[what] = merged.get(what, 0.0) + ms
    return list(merged.items())


def _span_name(previous: str, label: str, call: str, module: str) -> str:
    if previous == "start" and label == "boto3:start":
        return f"import {module}, up to boto3"
    if previous == "start":
        return f"import {module}"
    if label == "boto3:end":
        return "import boto3 (botocore with it)"
    if previous == "boto3:start":
        return "import boto3 (botocore with it)"
    if previous == "boto3:end" and label == "imported":
        return "create the DynamoDB client (at import)"
    if previous == "boto3:end" and label == "before-call":
        return "create the session and DynamoDB client, build the first request"
    if previous == "boto3:end":
        return f"after boto3 is imported, until {label}"
    if label == "after-call":
        return f"DynamoDB calls (stubbed): serialize, sign, parse ({call})"
    if previous == "imported" and label == "before-call":
        return "handler, until its first DynamoDB call"
    if previous == "imported" and label == "boto3:start":
        return "handler, until it imports boto3 (routing, validation, settings)"
    if previous == "after-call" and label == "before-call":
        return "handler, between DynamoDB calls"
    if previous == "after-call" and label == "answered":
        return "handler, after its last DynamoDB call (answer, access log)"
    if previous == "imported" and label == "answered":
        return "handler"
    return f"{previous} → {label}"


@dataclass(frozen=True)
class ImportProfile:
    """Where a cold request's time goes by module (`-X importtime`, medians over a few runs; the tool adds overhead)."""

    module: str
    packages: dict[str, float]
    """Self time (ms) summed by top-level package."""
    modules: dict[str, tuple[float, float]]
    """Module -> (self ms, cumulative ms)."""

    @property
    def total_ms(self) -> float:
        """Self time of every module loaded."""
        return sum(self.packages.values())

    def by_package(self, count: int = 12) -> list[tuple[str, float]]:
        """The packages with the largest self time, largest first."""
        return sorted(self.packages.items(), key=lambda item: item[1], reverse=True)[:count]

    def heaviest(self, count: int = 12, unless_in: ImportProfile | None = None) -> list[tuple[str, float, float]]:
        """(module, self ms, cumulative ms) of the modules with the largest self time (only those `unless_in` does
        not load, when given)."""
        names = [m for m in self.modules if unless_in is None or m not in unless_in.modules]
        names.sort(key=lambda m: self.modules[m][0], reverse=True)
        return [(m, *self.modules[m]) for m in names[:count]]


@dataclass
class ColdStart:
    """A cold-start run: the baseline, every present target, and the profile of the api handler's cold request."""

    runs: int
    baseline: Samples
    targets: list[Samples]
    absent: list[Target]
    profile: ImportProfile | None = None
    baseline_profile: ImportProfile | None = None
    eager_profile: ImportProfile | None = None
    """The cold request without the lean path (`EAGER_MODULE`), profiled as the first target's."""

    def target(self, label: str) -> Samples | None:
        """The measured target of that label, if it was measured."""
        return next((samples for samples in self.targets if samples.label == label), None)

    def ratio(self, samples: Samples) -> float:
        """Median measured span of `samples` over the baseline's whole (import, client, one call)."""
        return samples.median_ms / self.baseline.median_ms

    def cpu_ratio(self, samples: Samples) -> float:
        """The same with CPU time: the judged figure (it does not count what this shared machine gives to other
        work while the child waits for a core; on an idle machine the two agree)."""
        return samples.median_cpu_ms / self.baseline.median_cpu_ms

    def wall_ratio(self, samples: Samples) -> float:
        """The same with the wall time of the whole child process."""
        return samples.median_wall_ms / self.baseline.median_wall_ms

    def failures(self) -> list[str]:
        """What is over budget, in words (empty when everything is within budget)."""
        found = []
        for samples in self.targets:
            budget = samples.budget or 0.0
            if self.cpu_ratio(samples) > budget:
                found.append(f"{samples.label}: {self.cpu_ratio(samples):.2f}x the baseline, budget {budget:.2f}x")
            if samples.forbidden:
                found.append(f"{samples.label}: importing it loads {', '.join(samples.forbidden)}")
        return found


def sample(samples: Samples, recording_path: Path, recording: dict[str, Any]) -> None:
    """Run `samples.module` once in a fresh interpreter and record the figures."""
    command = [
        sys.executable,
        "-c",
        _CHILD,
        samples.module,
        str(recording_path),
        "1" if samples.request else "0",
        *WATCHED,
    ]
    started = time.perf_counter()
    done = subprocess.run(command, env=child_env(recording), capture_output=True, text=True, check=False)
    wall = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"cold start of {samples.module} failed:\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if samples.request and report["status"] not in (200, 201):
        raise RuntimeError(f"the cold save of {samples.module} answered {report['status']}: {done.stdout[-2000:]}")
    samples.total_ms.append(report["total_ms"])
    samples.import_ms.append(report["import_ms"])
    samples.cpu_ms.append(report["cpu_total_ms"])
    samples.wall_ms.append(wall)
    samples.loaded = report["loaded"]
    samples.new_modules = report["new_modules"]
    samples.calls = report["calls"]
    samples.phases.append(phases([tuple(m) for m in report["marks"]], report["calls"], samples.module))


def import_profile(module: str, recording_path: Path, recording: dict[str, Any], runs: int) -> ImportProfile:
    """Run the cold request under `-X importtime` a few times and summarize which modules its time goes to."""
    self_us: dict[str, list[int]] = defaultdict(list)
    cumulative_us: dict[str, list[int]] = defaultdict(list)
    for _ in range(runs):
        command = [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            _PROFILE_CHILD,
            module,
            str(recording_path),
            "1",
        ]
        done = subprocess.run(command, env=child_env(recording), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"profiling {module} failed:\n{done.stderr[-3000:]}")
        # Only what the cold request loaded: the harness's imports are reported before the mark.
        _, _, lines = done.stderr.partition(_PROFILE_MARK)
        for line in lines.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            own, total, name = line.removeprefix("import time:").split("|")
            self_us[name.strip()].append(int(own))
            cumulative_us[name.strip()].append(int(total))
    own_ms = {name: statistics.median(values) / 1000 for name, values in self_us.items()}
    packages: dict[str, float] = defaultdict(float)
    for name, ms in own_ms.items():
        packages[name.split(".")[0]] += ms
    modules = {name: (ms, statistics.median(cumulative_us[name]) / 1000) for name, ms in own_ms.items()}
    return ImportProfile(module=module, packages=dict(packages), modules=modules)


def measure(recording_path: Path, runs: int = RUNS, profile: bool = True, progress: Any = print) -> ColdStart:
    """Time the baseline and every present target, interleaved, `runs` times each."""
    recording = json.loads(recording_path.read_text(encoding="utf-8"))
    baseline = Samples("baseline: import boto3, create a client, one stubbed call", BASELINE_MODULE, None, True)
    present = [t for t in TARGETS if importlib.util.find_spec(t.module) is not None]
    absent = [t for t in TARGETS if t not in present]
    targets = [Samples(t.label, t.module, t.budget, t.request, t.forbidden) for t in present]
    group = [baseline, *targets]
    # One discarded round first: it writes missing .pyc files and warms the page cache for every module (the
    # very first run on a machine compiles all of boto3, botocore and powertools into PYCACHE_DIR: a few seconds).
    for samples in group:
        sample(Samples(samples.label, samples.module, samples.budget, samples.request), recording_path, recording)
    for round_ in range(runs):
        # Alternate the order so that neither side always runs right after the other.
        for samples in group if round_ % 2 == 0 else reversed(group):
            sample(samples, recording_path, recording)
        progress(f"  cold start: round {round_ + 1}/{runs}")
    result = ColdStart(runs=runs, baseline=baseline, targets=targets, absent=absent)
    if profile and targets and targets[0].request:
        result.profile = import_profile(targets[0].module, recording_path, recording, PROFILE_RUNS)
        result.baseline_profile = import_profile(BASELINE_MODULE, recording_path, recording, PROFILE_RUNS)
        if any(t.module == EAGER_MODULE for t in targets):
            result.eager_profile = import_profile(EAGER_MODULE, recording_path, recording, PROFILE_RUNS)
    return result


def summary(cold: ColdStart) -> str:
    """The figures as plain text, for the terminal."""
    lines = [f"cold start: median of {cold.runs} fresh interpreters each, from the import to the answer"]
    for samples in (cold.baseline, *cold.targets):
        spread = f"{min(samples.total_ms):.0f}-{max(samples.total_ms):.0f}"
        line = f"  {samples.label:52} {samples.median_ms:6.1f} ms (range {spread}), "
        line += f"import {samples.median_import_ms:.1f} ms"
        if samples.budget is not None:
            verdict = "ok" if cold.cpu_ratio(samples) <= samples.budget else "OVER BUDGET"
            line += f"\n    CPU ratio {cold.cpu_ratio(samples):.2f}x (elapsed {cold.ratio(samples):.2f}x), budget "
            line += f"{samples.budget:.2f}x: {verdict}"
        lines.append(line)
        lines.extend(f"      {ms:7.1f} ms  {what}" for what, ms in samples.median_phases())
    lines.extend(f"  {t.label}: {t.module} does not exist yet, not measured" for t in cold.absent)
    if cold.profile is not None:
        lines.append(
            f"  packages loaded by the cold request (-X importtime self time, {cold.profile.total_ms:.0f} ms):"
        )
        lines.extend(f"    {name:40} {ms:6.1f} ms" for name, ms in cold.profile.by_package(6))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure, print, and with `--check` fail when over budget."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--recording", type=Path, required=True, help="answers recorded by run.py (replay.py)")
    parser.add_argument("--runs", type=int, default=RUNS, help=f"fresh interpreters per module (default {RUNS})")
    parser.add_argument("--check", action="store_true", help="exit 1 when a figure is over its budget")
    args = parser.parse_args(argv)
    cold = measure(args.recording, args.runs)
    print(summary(cold))
    failures = cold.failures()
    for failure in failures:
        print(f"over budget: {failure}", file=sys.stderr)
    return 1 if failures and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
