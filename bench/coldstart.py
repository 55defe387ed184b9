"""Cold start: importing Baton's handler modules in fresh interpreters, as a ratio to a boto3 baseline.

Each sample is a new `python -c` process that times its own import with `time.perf_counter` and prints it as
JSON, so interpreter start-up (which Lambda pays for every function alike) is left out; the wall time of the
whole process is reported beside it. Candidate and baseline runs alternate, and their order flips every round,
so that a slow moment of this shared machine lands on both sides; medians are compared.

The baseline (`bench/baseline_boto3.py`) imports boto3 and creates a DynamoDB client: what any Python function
that talks to DynamoDB pays. Baton's api handler should cost at most 1.3 times that, because it creates its
client lazily, at the first request; the check that boto3 is not in `sys.modules` after the import says so
directly. A one-off `-X importtime` run then shows where the handler's import time goes.

Usage: `python bench/coldstart.py [--runs N] [--check]`; `--check` exits 1 when a figure is over its budget.
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

BENCH_DIR = Path(__file__).resolve().parent
BASELINE_MODULE = "baseline_boto3"
# Rounds are cheap (~0.4 s for the pair) and this 2-core machine is shared: more rounds, steadier medians.
RUNS = 11
PROFILE_RUNS = 3
# Bytecode caches of the measured interpreters live here (gitignored), not in the source or venv trees: every
# module then runs from a .pyc, as an installed package does, whatever PYTHONDONTWRITEBYTECODE says.
PYCACHE_DIR = BENCH_DIR / "results" / "pycache"


@dataclass(frozen=True)
class Target:
    """A module whose import is timed against the baseline, with its budget (a ratio)."""

    label: str
    module: str
    budget: float
    forbidden: tuple[str, ...]
    """Modules the import must not load."""


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
    "cachetools",
    "asyncio",
    "ssl",
    "urllib3",
)
# What a handler import must not load: the AWS SDK proper (created at the first request), the X-Ray SDK (the
# Tracer), moto (local runs only). The bare `botocore` package is allowed: powertools imports it to register
# its user agent, which loads no more than botocore/__init__.py.
FORBIDDEN = ("boto3", "botocore.session", "botocore.client", "aws_xray_sdk", "moto")

TARGETS = (
    Target("api handler", "baton.handlers.api", 1.3, FORBIDDEN),
    # Not written yet at the time of writing; measured as soon as the module exists. It talks to AWS on every
    # invocation, so it may create its client at import: only the X-Ray SDK and moto are ruled out.
    Target("reaper handler", "baton.handlers.reaper", 1.1, ("aws_xray_sdk", "moto")),
)

_CHILD = """\
import json, sys, time
module, bench_dir, watched = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.path.insert(0, bench_dir)
before = len(sys.modules)
started, cpu_started = time.perf_counter(), time.process_time()
__import__(module)
elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
loaded = [m for m in watched if m in sys.modules]
report = {"import_ms": elapsed * 1000, "cpu_ms": cpu * 1000, "loaded": loaded, "new_modules": len(sys.modules) - before}
print(json.dumps(report))
"""

_PROFILE_MARK = "@@bench-import-starts@@"
_PROFILE_CHILD = f"""\
import json, sys, time
sys.path.insert(0, sys.argv[2])
sys.stderr.write("\\n{_PROFILE_MARK}\\n")
sys.stderr.flush()
__import__(sys.argv[1])
# What the first-party modules would cost to compile if the deployed asset carried no .pyc files.
own = sys.argv[1].split(".")[0]
files = [getattr(m, "__file__", None) for n, m in list(sys.modules.items()) if n == own or n.startswith(own + ".")]
files = [f for f in files if f and f.endswith(".py")]
started = time.perf_counter()
for name in files:
    with open(name, "rb") as source:
        compile(source.read(), name, "exec")
print(json.dumps({{"compile_ms": (time.perf_counter() - started) * 1000, "files": len(files)}}))
"""


def child_env() -> dict[str, str]:
    """The environment of a measured interpreter: Lambda-like, and never reaching out to the network.

    Lambda hands a function its credentials in environment variables and has no AWS config files. Without
    credentials botocore would walk its provider chain up to the instance metadata endpoint while creating the
    baseline's client, and the baseline would measure this machine's network instead. The values are dummies.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHON"))}
    env.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "BATON_TABLE_NAME": "baton-bench",
            "PYTHONPYCACHEPREFIX": str(PYCACHE_DIR),
        }
    )
    return env


@dataclass
class Samples:
    """Every run of one module: import time measured inside the child, and the wall time of the process."""

    label: str
    module: str
    budget: float | None
    must_not_load: tuple[str, ...] = ()
    import_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    """CPU time of the import: steadier than elapsed time when other work competes for the cores."""
    wall_ms: list[float] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)
    new_modules: int = 0

    @property
    def median_ms(self) -> float:
        """Median import time inside the child."""
        return statistics.median(self.import_ms)

    @property
    def median_cpu_ms(self) -> float:
        """Median CPU time of the import inside the child."""
        return statistics.median(self.cpu_ms)

    @property
    def median_wall_ms(self) -> float:
        """Median wall time of the whole child process."""
        return statistics.median(self.wall_ms)

    @property
    def forbidden(self) -> list[str]:
        """Modules the import loaded that it must not."""
        return [m for m in self.loaded if m in self.must_not_load]


@dataclass(frozen=True)
class ImportProfile:
    """Where a module's import time goes, from `-X importtime` (medians over a few runs; the tool adds overhead)."""

    module: str
    total_ms: float
    by_package: list[tuple[str, float]]
    """Self time summed by top-level package, largest first."""
    heaviest: list[tuple[str, float, float]]
    """(module, self ms, cumulative ms) of the modules with the largest self time."""
    compile_ms: float
    """Time to compile the first-party modules it loads: the extra cost when an asset ships without .pyc."""
    compiled_files: int


@dataclass
class ColdStart:
    """A cold-start run: the baseline, every present target, and the profile of the api handler."""

    runs: int
    baseline: Samples
    targets: list[Samples]
    absent: list[Target]
    profile: ImportProfile | None = None

    def ratio(self, samples: Samples) -> float:
        """Median import time of `samples` over the baseline's."""
        return samples.median_ms / self.baseline.median_ms

    def cpu_ratio(self, samples: Samples) -> float:
        """Median CPU time of `samples` over the baseline's."""
        return samples.median_cpu_ms / self.baseline.median_cpu_ms

    def wall_ratio(self, samples: Samples) -> float:
        """Median wall time of `samples` over the baseline's."""
        return samples.median_wall_ms / self.baseline.median_wall_ms

    def failures(self) -> list[str]:
        """What is over budget, in words (empty when everything is within budget)."""
        found = []
        for samples in self.targets:
            budget = samples.budget or 0.0
            if self.ratio(samples) > budget:
                found.append(f"{samples.label}: {self.ratio(samples):.2f}x the baseline, budget {budget:.2f}x")
            if samples.forbidden:
                found.append(f"{samples.label}: importing it loads {', '.join(samples.forbidden)}")
        return found


def sample(samples: Samples) -> None:
    """Import `samples.module` once in a fresh interpreter and record the figures."""
    command = [sys.executable, "-c", _CHILD, samples.module, str(BENCH_DIR), *WATCHED]
    started = time.perf_counter()
    done = subprocess.run(command, env=child_env(), capture_output=True, text=True, check=False)
    wall = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"importing {samples.module} failed:\n{done.stderr}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    samples.import_ms.append(report["import_ms"])
    samples.cpu_ms.append(report["cpu_ms"])
    samples.wall_ms.append(wall)
    samples.loaded = report["loaded"]
    samples.new_modules = report["new_modules"]


def import_profile(module: str, runs: int = PROFILE_RUNS) -> ImportProfile:
    """Run `-X importtime` on `module` a few times and summarize where its time goes."""
    self_us: dict[str, list[int]] = defaultdict(list)
    cumulative_us: dict[str, list[int]] = defaultdict(list)
    compile_ms: list[float] = []
    compiled_files = 0
    for _ in range(runs):
        command = [sys.executable, "-X", "importtime", "-c", _PROFILE_CHILD, module, str(BENCH_DIR)]
        done = subprocess.run(command, env=child_env(), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"profiling {module} failed:\n{done.stderr}")
        compiled = json.loads(done.stdout.strip().splitlines()[-1])
        compile_ms.append(compiled["compile_ms"])
        compiled_files = compiled["files"]
        # Only what the import itself loaded: interpreter start-up is reported before the mark.
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
    heaviest = sorted(own_ms, key=own_ms.__getitem__, reverse=True)[:10]
    return ImportProfile(
        module=module,
        total_ms=sum(own_ms.values()),
        by_package=sorted(packages.items(), key=lambda item: item[1], reverse=True)[:10],
        heaviest=[(name, own_ms[name], statistics.median(cumulative_us[name]) / 1000) for name in heaviest],
        compile_ms=statistics.median(compile_ms),
        compiled_files=compiled_files,
    )


def measure(runs: int = RUNS, profile: bool = True) -> ColdStart:
    """Time the baseline and every present target, interleaved, `runs` times each."""
    baseline = Samples("baseline (boto3 + DynamoDB client)", BASELINE_MODULE, None)
    present = [t for t in TARGETS if importlib.util.find_spec(t.module) is not None]
    absent = [t for t in TARGETS if t not in present]
    targets = [Samples(t.label, t.module, t.budget, t.forbidden) for t in present]
    group = [baseline, *targets]
    # One discarded round first: it writes missing .pyc files and warms the page cache for every module (the
    # very first run on a machine compiles all of boto3, botocore and powertools into PYCACHE_DIR: a few seconds).
    for samples in group:
        sample(Samples(samples.label, samples.module, samples.budget))
    for round_ in range(runs):
        # Alternate the order so that neither side always runs right after the other.
        for samples in group if round_ % 2 == 0 else reversed(group):
            sample(samples)
    result = ColdStart(runs=runs, baseline=baseline, targets=targets, absent=absent)
    if profile and targets:
        result.profile = import_profile(targets[0].module)
    return result


def summary(cold: ColdStart) -> str:
    """The figures as plain text, for the terminal."""
    lines = [f"cold start: median of {cold.runs} fresh interpreters each, import time measured inside the child"]
    for samples in (cold.baseline, *cold.targets):
        spread = f"{min(samples.import_ms):.0f}-{max(samples.import_ms):.0f}"
        line = (
            f"  {samples.label:36} import {samples.median_ms:6.1f} ms (range {spread})"
            f"  wall {samples.median_wall_ms:6.1f} ms  +{samples.new_modules} modules"
        )
        if samples.budget is not None:
            verdict = "ok" if cold.ratio(samples) <= samples.budget else "OVER BUDGET"
            line += f"\n    ratio {cold.ratio(samples):.2f}x (CPU {cold.cpu_ratio(samples):.2f}x, "
            line += f"wall {cold.wall_ratio(samples):.2f}x), budget "
            line += f"{samples.budget:.2f}x: {verdict}"
            line += f"\n    loaded: {', '.join(samples.loaded) or 'none of the watched modules'}"
            line += (
                f"\n    must not load {', '.join(samples.must_not_load)}: {', '.join(samples.forbidden) or 'none did'}"
            )
        lines.append(line)
    lines.extend(f"  {t.label}: {t.module} does not exist yet, not measured" for t in cold.absent)
    if cold.profile is not None:
        profile = cold.profile
        lines.append(f"  where {profile.module} spends its import (-X importtime, {profile.total_ms:.0f} ms in all):")
        lines.extend(f"    {name:40} {ms:6.1f} ms self" for name, ms in profile.by_package[:6])
        lines.append(
            f"    compiling its {profile.compiled_files} first-party modules (no .pyc shipped) would add "
            f"{profile.compile_ms:.0f} ms"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure, print, and with `--check` fail when over budget."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=RUNS, help=f"fresh interpreters per module (default {RUNS})")
    parser.add_argument("--check", action="store_true", help="exit 1 when a figure is over its budget")
    args = parser.parse_args(argv)
    cold = measure(args.runs)
    print(summary(cold))
    failures = cold.failures()
    for failure in failures:
        print(f"over budget: {failure}", file=sys.stderr)
    return 1 if failures and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
