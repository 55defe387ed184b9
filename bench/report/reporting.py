"""`bench/report.md` from the figures of one run: the side-by-side tables, every budget's verdict, the headlines.

Budgets are those of the design note performance.md (and issue 7); a verdict is "met" or "missed" with the number,
"reported" for a figure without a budget, or "not measured here" with where it is measured instead.
"""

from __future__ import annotations

import math
import os
import platform
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bench.billing import prices
from bench.harness import coldstart, peer_puts, replay, serve, warm
from bench.harness.sidebyside import size_label

READS = ("GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems")
PLOT_NAME = "report.png"


def machine() -> str:
    """Where the figures come from: CPUs available to this process, CPU model, OS and Python."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            model = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    python = f"{platform.python_implementation()} {platform.python_version()}"
    return f"{cpus} CPUs (nproc) · {model} · {platform.system()} {platform.release()} {platform.machine()} · {python}"


BUDGET_LIMITING_REQUESTS = 0.1
"""performance.md: rate limiting and usage metering add at most 0.1 DynamoDB requests per API request."""


@dataclass(frozen=True)
class Verdict:
    """One budget: what it says, what was measured, and whether it holds."""

    figure: str
    budget: str
    measured: str
    status: str
    """"met", "missed", "reported" (a figure without a budget) or "not measured here"."""
    reason: str = ""
    """Why it is missed, from this run's own figures ("": the reason `MISS_REASONS` records for the figure)."""


class Figures:
    """The side-by-side summary (`sidebyside.SideBySide.summary()`), with accessors."""

    def __init__(self, summary: dict[str, Any]) -> None:
        self.summary = summary
        self.results: dict[str, Any] = summary["results"]
        self.sizes: list[int] = summary["sizes"]
        self.clients: list[str] = summary["clients"]
        self.labels: dict[str, str] = summary["labels"]
        self.peers = [c for c in self.clients if c != "baton"]

    def op(self, client: str, size: int, operation: str) -> dict[str, Any]:
        """The summary of one client's operation on one size."""
        found: dict[str, Any] = self.results[client][str(size)][operation]
        return found

    def ok(self, client: str, size: int, operation: str) -> bool:
        """True when every repetition succeeded."""
        op = self.op(client, size, operation)
        return bool(op["reps"]) and op["ok"] == op["reps"]

    def metered(self, client: str, size: int, operation: str, figure: str) -> Any:
        """The most common metered value of a figure."""
        return self.op(client, size, operation)["metered"].get(figure)

    def canonical_bytes(self, size: int, step: int = 2) -> int:
        """Canonical JSON bytes of the state of a size (first or second save)."""
        info = next(iter(self.summary["info"].values()))
        value: int = info["states"][str(size)]["canonical_bytes"][step - 1]
        return value

    def accepted(self, client: str) -> list[int]:
        """The sizes whose saves this client accepted."""
        return [s for s in self.sizes if self.ok(client, s, "create") and self.ok(client, s, "update")]

    def best_peer(self, size: int, operation: str, figure: str) -> tuple[str, float] | None:
        """The peer with the lowest value of a figure at a size (successful operations only)."""
        found = [
            (peer, value)
            for peer in self.peers
            if self.ok(peer, size, operation) and (value := self.value(peer, size, operation, figure)) is not None
        ]
        return min(found, key=lambda pv: pv[1]) if found else None

    def value(self, client: str, size: int, operation: str, figure: str) -> float | None:
        """A figure as a number: `cpu_ms`; `requests` (DynamoDB and S3 requests, counted); `s3_requests` (counted);
        `stored_bytes` (item bytes and the bytes of S3 objects written); `cost` (dollars a million such operations
        cost in requests, `prices.py`); or any metered figure."""
        if figure == "cpu_ms":
            cpu: float | None = self.op(client, size, operation)["cpu_ms"]
            return cpu
        m = self.op(client, size, operation)["metered"]
        if figure == "requests":
            return float(sum(m["requests"].values()) + sum(m.get("s3_requests", {}).values()))
        if figure == "s3_requests":
            return float(sum(m.get("s3_requests", {}).values()))
        if figure == "stored_bytes":
            return float(m["item_bytes"] + (m.get("s3_stored_bytes") or 0))
        if figure == "cost":
            return prices.per_million(m["write_units"], m["read_units"], m.get("s3_requests", {}))
        value: float | None = m.get(figure)
        return value


def requests_text(shape: list[str]) -> str:
    """`["Query!", "Query", "GetItem"]` -> "2 Query (1 consistent) + 1 GetItem (eventual)"."""
    if not shape:
        return "none"
    order: list[str] = []
    counts: dict[str, list[int]] = {}
    for call in shape:
        name = call.rstrip("?!")
        if name not in counts:
            order.append(name)
            counts[name] = [0, 0, 0]
        counts[name][0] += 1
        counts[name][1] += "?" in call
        counts[name][2] += "!" in call
    parts = []
    for name in order:
        n, conditional, consistent = counts[name]
        if name in READS:
            flag = "consistent" if consistent == n else "eventual" if consistent == 0 else f"{consistent} consistent"
        else:
            flag = (
                "conditional" if conditional == n else "unconditional" if conditional == 0 else f"{conditional} cond."
            )
        parts.append(f"{n} {name} ({flag})")
    return " + ".join(parts)


def s3_requests_text(requests: dict[str, int]) -> str:
    """`{"PutObject": 1}` -> "1 PutObject"; none -> "none"."""
    return " + ".join(f"{n} {operation}" for operation, n in requests.items()) or "none"


def dollars(value: float) -> str:
    """A cost per million operations: `$45.63`, `$5.63`, `$0.525`."""
    return f"${value:,.2f}" if value >= 1 else f"${value:.3g}"


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "—"
    if digits == 0:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def _units(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:g}"


def cell(figures: Figures, client: str, size: int, operation: str, figure: str) -> str:
    """One cell of a side-by-side table."""
    op = figures.op(client, size, operation)
    if not op["reps"]:
        return "—"
    if op["ok"] == 0:
        if operation == "read" and not figures.ok(client, size, "update"):
            return "fails: its saves failed"
        return f"fails: {failure_text(op)}"
    m = op["metered"]
    if figure == "cpu_ms":
        text = f"{op['cpu_ms']:.2f} ms"
    elif figure == "requests":
        text = requests_text(m["shape"])
    elif figure == "write_units":
        text = f"{m['write_units']}"
        if m["index_write_units"]:
            actions = ", ".join(f"{n} {a}" for a, n in sorted(m["index_actions"].items()))
            text += f" ({m['index_write_units']} on indexes: {actions})"
    elif figure == "read_units":
        text = _units(m["read_units"])
    elif figure in BYTE_FIGURES:
        text = f"{m.get(figure) or 0:,}"
    elif figure == "s3_requests":
        text = s3_requests_text(m.get("s3_requests", {}))
    elif figure == "cost":
        text = dollars(figures.value(client, size, operation, "cost") or 0.0)
    else:
        text = str(m.get(figure))
    if op["ok"] < op["reps"]:
        text += f" ({op['reps'] - op['ok']} of {op['reps']} failed)"
    return text


BYTE_FIGURES = (
    "item_bytes",
    "response_bytes",
    "request_bytes",
    "s3_stored_bytes",
    "s3_request_bytes",
    "s3_response_bytes",
)


def failure_text(op: dict[str, Any]) -> str:
    """Why an operation failed, in a few words: what DynamoDB refused when it refused something (an item over its
    400 KB says so), else the client's own error."""
    errors = op["metered"].get("errors") or []
    if any("Item size has exceeded" in error for error in errors):
        return "item over DynamoDB's 400 KB"
    if errors:
        return str(errors[0])[:60]
    detail: str = op["failures"][0][0] if op["failures"] else "failed"
    return detail[:60]


ROWS = (
    ("own CPU per save, second save (median)", "update", "cpu_ms"),
    ("own CPU per save, first save (median)", "create", "cpu_ms"),
    ("own CPU per read of the latest (median)", "read", "cpu_ms"),
    ("requests per save, second save", "update", "requests"),
    ("requests per save, first save", "create", "requests"),
    ("requests per read of the latest", "read", "requests"),
    ("item bytes stored by the second save", "update", "item_bytes"),
    ("write units per save, second save", "update", "write_units"),
    ("write units per save, first save", "create", "write_units"),
    ("read units per read of the latest", "read", "read_units"),
    ("bytes sent to DynamoDB per second save", "update", "request_bytes"),
    ("bytes DynamoDB sends back per second save", "update", "response_bytes"),
    ("bytes DynamoDB sends back per read", "read", "response_bytes"),
    ("S3 requests per save, second save", "update", "s3_requests"),
    ("S3 requests per read of the latest", "read", "s3_requests"),
    ("bytes stored in S3 by the second save", "update", "s3_stored_bytes"),
    ("bytes S3 sends back per read", "read", "s3_response_bytes"),
    ("cost per million second saves (requests)", "update", "cost"),
    ("cost per million reads of the latest (requests)", "read", "cost"),
)

HEADLINES = (
    ("write units per save", "update", "write_units"),
    ("bytes stored (item + S3)", "update", "stored_bytes"),
    ("own CPU per save", "update", "cpu_ms"),
    ("own CPU per read", "read", "cpu_ms"),
    ("requests per read (DynamoDB + S3)", "read", "requests"),
    ("read units per read", "read", "read_units"),
    ("cost per million saves", "update", "cost"),
    ("cost per million reads", "read", "cost"),
)
HEADLINE_SIZES = (4_000, 32_000, 256_000, 2_000_000)


def _shown(figure: str, value: float) -> str:
    if figure == "cpu_ms":
        return f"{value:.2f} ms"
    if figure == "cost":
        return dollars(value)
    return f"{value:,g}"


def headlines(figures: Figures, sizes: tuple[int, ...] = HEADLINE_SIZES) -> list[str]:
    """Baton over the best peer, per figure and size: the ratios the README quotes."""
    lines = []
    for size in sizes:
        if size not in figures.sizes or "baton" not in figures.clients:
            continue
        parts = []
        for name, operation, figure in HEADLINES:
            ours = figures.value("baton", size, operation, figure) if figures.ok("baton", size, operation) else None
            best = figures.best_peer(size, operation, figure)
            if ours is None or best is None or not best[1]:
                continue
            peer, theirs = best
            parts.append(
                f"{name} {ours / theirs:.2f}× ({_shown(figure, ours)} vs {_shown(figure, theirs)}, "
                f"{figures.labels.get(peer, peer)})"
            )
        if parts:
            lines.append(f"{size_label(size)} state, Baton over the cheapest peer: " + "; ".join(parts))
    return lines


README_HEADLINES = ("bytes stored (item + S3)", "cost per million saves", "cost per million reads")
"""What the README quotes: what a user of Baton pays and stores, beside the peers; the budgets and their verdicts
(CPU, cold start) are the report's."""


def short_headlines(
    figures: Figures, sizes: tuple[int, ...] = HEADLINE_SIZES, shown: tuple[str, ...] = README_HEADLINES
) -> list[str]:
    """The headlines named in `shown`, in a few words each (for the README)."""
    lines = []
    for size in sizes:
        if size not in figures.sizes or "baton" not in figures.clients:
            continue
        parts = []
        for name, operation, figure in HEADLINES:
            if name not in shown:
                continue
            ours = figures.value("baton", size, operation, figure) if figures.ok("baton", size, operation) else None
            best = figures.best_peer(size, operation, figure)
            if ours is not None and best is not None and best[1]:
                parts.append(f"{name} {ours / best[1]:.2f}×")
        if parts:
            lines.append(f"{size_label(size)} state: " + ", ".join(parts))
    return lines


def verdicts(
    figures: Figures | None,
    cold: coldstart.ColdStart | None,
    warm_figures: warm.WarmFigures | None,
    recording: dict[str, Any] | None,
    steady: dict[str, Any] | None = None,
    peer_figures: peer_puts.PeerPutFigures | None = None,
    served: serve.ServeFigures | None = None,
) -> list[Verdict]:
    """Every budget of performance.md, judged on this run's figures."""
    found: list[Verdict] = []
    met = {True: "met", False: "missed"}
    if steady is not None:
        saves = steady["saves"]
        takes = steady["api"].get(replay.TAKE, 0)
        usage = steady["api"].get(replay.USAGE, 0)
        counts = steady["reaper"].get("TransactWriteItems", 0)
        added = (takes + usage + counts) / saves
        found.append(
            Verdict(
                f"DynamoDB requests rate limiting and usage metering add per API request, a steady run of {saves} "
                "saves and its stream",
                f"≤ {BUDGET_LIMITING_REQUESTS:g}",
                f"{added:.3f}: {takes} takes of the tenant's share ({takes / saves:.3f}), {usage} writes of its "
                f"usage counts ({usage / saves:.3f}) and {counts} counts by the stream consumer ({counts / saves:.3f}; "
                f"{steady['records']} records in batches of 100)",
                met[added <= BUDGET_LIMITING_REQUESTS],
            )
        )
    if figures is not None and "baton" in figures.clients:
        accepted = figures.accepted("baton")
        failed = [s for s in figures.sizes if s not in accepted]
        scope = f"{', '.join(size_label(s) for s in accepted)}"
        if failed:
            scope += f" (failed: {', '.join(size_label(s) for s in failed)})"
        if not accepted:
            found.append(
                Verdict(
                    "every count of a save (requests, item bytes, write units, bytes read back)",
                    "performance.md",
                    "Baton's first or second save failed at every size (see the oddities)",
                    "not measured here",
                )
            )
        else:
            found += _save_counts(figures, accepted, scope)
    if recording is not None:
        # A container's first request also takes its tenant's rate-limit share (judged below, per request)
        first = [
            c["operation"]
            for c in recording["requests"].get(f"{warm.WARM_SIZE}/1", [])
            if c["operation"] not in (replay.TAKE, replay.USAGE)
        ]
        later = [
            c["operation"]
            for c in recording["requests"].get(f"{warm.WARM_SIZE}/2", [])
            if c["operation"] not in (replay.TAKE, replay.USAGE)
        ]
        extra = list(first)
        for operation in later:
            if operation in extra:
                extra.remove(operation)
        found.append(
            Verdict(
                "DynamoDB requests per authentication, key not cached / cached",
                "1 / 0",
                f"first request of a container: {', '.join(first)}; the next: {', '.join(later)} "
                f"(authentication: {len(extra)} {' '.join(extra)} / 0)",
                met[extra == ["GetItem"]],
            )
        )
    if warm_figures is not None:
        refusal = warm_figures.refusal
        found.append(
            Verdict(
                "a state over the limit",
                f"≤ {warm.BUDGET_REFUSAL_RATIO:g} × refusing an invalid body of the same size",
                f"{refusal.ratio:.2f}× ({refusal.oversized_ms:.1f} ms vs {refusal.invalid_ms:.1f} ms CPU, "
                f"{refusal.body_bytes / 1e6:.2f} MB bodies, whole handler, AWS stubbed)",
                met[refusal.ratio <= warm.BUDGET_REFUSAL_RATIO],
            )
        )
        save = warm_figures.warm
        takes = save.calls_per_save.get(replay.TAKE, 0.0)
        usage = save.calls_per_save.get(replay.USAGE, 0.0)
        shares = f"one take of the tenant's share per {1 / takes:.0f} saves" if takes else "no take"
        writes = f"one write of its usage counts per {1 / usage:.0f}" if usage else "no write of its usage counts"
        found.append(
            Verdict(
                "DynamoDB requests rate limiting and usage counts add per API request, over a steady run of saves",
                f"≤ {BUDGET_LIMITING_REQUESTS:g}",
                f"{takes + usage:.3f} ({shares}, {writes})",
                met[takes + usage <= BUDGET_LIMITING_REQUESTS],
            )
        )
        found.append(
            Verdict(
                f"warm overhead of a save of a {save.state_bytes / 1000:.0f} KB state, AWS calls stubbed",
                f"median ≤ {warm.BUDGET_WARM_MS:g} ms",
                f"{save.median_ms:.3f} ms CPU, whole handler ({save.ratio:.0f}× a bare `json.loads` + `sha256` of the "
                f"same body, {save.bare_median_ms * 1000:.0f} µs); its DynamoDB request alone "
                f"{save.call_median_ms:.3f} ms",
                met[save.median_ms <= warm.BUDGET_WARM_MS],
            )
        )
        cpu = warm_figures.cpu
        found.append(
            Verdict(
                f"own CPU of a save of a {cpu.state_bytes / 1000:.0f} KB conversation state, AWS calls stubbed",
                f"median ≤ {warm.BUDGET_CPU_32_MS:g} ms",
                f"{cpu.median_ms:.2f} ms CPU, whole handler; its DynamoDB request alone {cpu.call_median_ms:.2f} ms",
                met[cpu.median_ms <= warm.BUDGET_CPU_32_MS],
            )
        )
        found += _against_botocore(warm_figures)
        found += _thread_puts(warm_figures)
    found += _peer_puts(peer_figures, warm_figures)
    if cold is not None:
        for samples in cold.targets:
            budget = samples.budget or 0.0
            found.append(
                Verdict(
                    f"cold start: {samples.label}",
                    f"≤ {budget:g} × the baseline (boto3 import, client, one stubbed call)",
                    f"{cold.cpu_ratio(samples):.2f}× CPU ({samples.median_cpu_ms:.0f} ms vs "
                    f"{cold.baseline.median_cpu_ms:.0f} ms; elapsed {cold.ratio(samples):.2f}×, "
                    f"medians of {cold.runs})",
                    met[cold.cpu_ratio(samples) <= budget],
                    {coldstart.EAGER_LABEL: _eager_reason, coldstart.LEAN_LABEL: _lean_reason}.get(
                        samples.label, lambda _: ""
                    )(cold),
                )
            )
            if samples.must_not_load:
                found.append(
                    Verdict(
                        f"modules `{samples.module}` must not load at import",
                        ", ".join(samples.must_not_load) + ": none",
                        ", ".join(samples.forbidden) or "none loaded",
                        met[not samples.forbidden],
                    )
                )
        for target in cold.absent:
            found.append(
                Verdict(
                    f"cold start: {target.label}",
                    f"≤ {target.budget:g} × the baseline",
                    f"`{target.module}` does not exist yet",
                    "not measured here",
                )
            )
    found.append(
        Verdict(
            "requests with an idempotency key or history (2); over an expired item (+1 at most); get by id "
            "(1 Query + 1 GetItem); list page (1 Query, no Scan)",
            "performance.md",
            "counted by the integration tests (botocore `before-call`), not by `make bench`; a history save is 3 "
            "(a read, the revision it keeps, the checkpoint) so that it costs the plain save's write units plus the "
            "revision's (`tests/integration/test_write_cost.py`), where a transaction would bill both twice",
            "not measured here",
        )
    )
    found += _serve_verdicts(served, figures)
    return found


SERVE_FIGURE = "a 32 KB save against a 1 KB save through `baton serve`"
SERVE_BUDGET = f"≤ {serve.BUDGET_RATIO:g} × (same run, alternating)"
THROUGHPUT_FIGURE = "local `baton serve` throughput, one client on loopback"


def _serve_verdicts(served: serve.ServeFigures | None, figures: Figures | None) -> list[Verdict]:
    """The two figures measured through `baton serve` (`bench/harness/serve.py`): the ratio, judged, and the
    throughput, reported."""
    if served is None:
        return [
            Verdict(SERVE_FIGURE, SERVE_BUDGET, _serve_proxy(figures), "not measured here"),
            Verdict(THROUGHPUT_FIGURE, "reported, no budget", "not measured in this run", "not measured here"),
        ]
    small, large = served.small, served.large
    within = served.ratio <= serve.BUDGET_RATIO
    return [
        Verdict(
            SERVE_FIGURE,
            SERVE_BUDGET,
            f"{served.ratio:.2f}× ({large.median_ms:.2f} ms vs {small.median_ms:.2f} ms, medians of {served.rounds} "
            "alternating rounds of whole round trips, one client on loopback; the handler's own "
            f"{large.handler_ms:.2f} vs {small.handler_ms:.2f} ms by its access lines)",
            "met" if within else "missed",
            "" if within else _serve_reason(served),
        ),
        Verdict(
            THROUGHPUT_FIGURE,
            "reported, no budget",
            f"{served.saves_per_second:.0f} saves a second (a 4 KB state), {served.lookups_per_second:.0f} lookups a "
            f"second (one request after another, {served.seconds:g} s each)",
            "reported",
        ),
    ]


def _serve_reason(served: serve.ServeFigures) -> str:
    """Where a 32 KB save's round trip spends its time beyond a 1 KB save's, from this run's own figures: the
    client and loopback, the gateway's hand-off to a container, and the handler."""
    small, large = served.small, served.large
    added = large.median_ms - small.median_ms
    handler = large.handler_ms - small.handler_ms
    hand_off = (large.gateway_ms - large.handler_ms) - (small.gateway_ms - small.handler_ms)
    outside = (large.median_ms - large.gateway_ms) - (small.median_ms - small.gateway_ms)
    return (
        f"the 32 KB save's round trip is {added:.2f} ms longer (medians): {handler:+.2f} ms in the handler (its "
        f"access lines: its own work and its DynamoDB requests to embedded moto, a 32 KB item written instead of a "
        f"1 KB one), {hand_off:+.2f} ms in the gateway's hand-off of the event to a container and back, "
        f"{outside:+.2f} ms in the client and loopback (the body sent and read); the section on `baton serve` below "
        "has each part."
    )


SAVE_FIGURE = "own CPU of a plain save against a bare botocore UpdateItem"
SAVE_BUDGET = (
    f"≤ {warm.BUDGET_SAVE_UPDATE_RATIO:g} × a bare botocore UpdateItem of the same item (same process, interleaved)"
)
LOOKUP_FIGURE = "own CPU of a lookup against a bare botocore GetItem"
LOOKUP_BUDGET = f"≤ {warm.BUDGET_LOOKUP_RATIO:g} × a bare botocore GetItem of the same key (same process, interleaved)"


def _against_botocore(warm_figures: warm.WarmFigures) -> list[Verdict]:
    """A plain save against a bare UpdateItem of the same item, and a lookup against a bare GetItem of the same
    key, per state size; a miss says where the rest of the time goes, from this run's figures."""
    met = {True: "met", False: "missed"}
    found = []
    saves = [save for save in warm_figures.saves if save.update_item_median_ms]
    if not saves:
        found.append(Verdict(SAVE_FIGURE, SAVE_BUDGET, "not in this run's `warm.py` figures", "not measured here"))
    for save in saves:
        found.append(
            Verdict(
                f"{SAVE_FIGURE}: a {save.state_bytes / 1000:.0f} KB state, AWS calls stubbed",
                SAVE_BUDGET,
                f"{save.update_ratio:.2f}× ({save.median_ms:.3f} ms vs {save.update_item_median_ms:.3f} ms CPU, "
                f"medians of {save.saves} interleaved pairs; the item {save.item_bytes:,} B); Baton's own "
                f"UpdateItem alone {save.call_median_ms:.3f} ms, everything else {save.beside_call_ms:.3f} ms"
                + (f"; its floor {save.floor_ms:.3f} ms, {save.floor_ratio:.2f}×" if save.floor_ms else ""),
                met[save.update_ratio <= warm.BUDGET_SAVE_UPDATE_RATIO],
                _save_reason(save),
            )
        )
    if not warm_figures.lookups:
        found.append(Verdict(LOOKUP_FIGURE, LOOKUP_BUDGET, "not in this run's `warm.py` figures", "not measured here"))
    for lookup in warm_figures.lookups:
        found.append(
            Verdict(
                f"{LOOKUP_FIGURE}: a {lookup.state_bytes / 1000:.0f} KB state, AWS calls stubbed",
                LOOKUP_BUDGET,
                f"{lookup.ratio:.2f}× ({lookup.median_ms:.3f} ms vs {lookup.get_item_median_ms:.3f} ms CPU, medians "
                f"of {lookup.lookups} interleaved pairs; the item {lookup.item_bytes:,} B); its own GetItem alone "
                f"{lookup.call_median_ms:.3f} ms, everything else {lookup.beside_get_ms:.3f} ms"
                + (f"; its floor {lookup.floor_ms:.3f} ms, {lookup.floor_ratio:.2f}×" if lookup.floor_ms else ""),
                met[lookup.ratio <= warm.BUDGET_LOOKUP_RATIO],
                _lookup_reason(lookup),
            )
        )
    return found


def _where_it_goes(profile: list[tuple[str, float]], median_ms: float, count: int = 6) -> str:
    """The largest packages of a cProfile (own time by package), each scaled to the median: "`x` ≈0.21 ms, ..."."""
    total = sum(ms for _, ms in profile)
    if not total:
        return "not profiled in this run"
    return ", ".join(f"`{name}` ≈{median_ms * ms / total:.2f} ms" for name, ms in profile[:count])


def _save_reason(save: warm.SaveFigures) -> str:
    """Why a plain save misses its budget against a bare UpdateItem: the split this run measured."""
    bare = save.update_item_median_ms
    own = save.call_median_ms
    rest = save.median_ms - own
    return (
        f"Measured in this run: the whole handler {save.median_ms:.3f} ms against {bare:.3f} ms for the bare "
        f"UpdateItem of the same {save.item_bytes:,} B item on botocore's own client. Baton's own UpdateItem, made "
        f"alone on Baton's client, costs {own:.3f} ms, {own / bare:.2f}× the bare one (which sets the same "
        "attributes with no condition and asks nothing back, where Baton's carries its condition, its "
        "`if_not_exists` expressions and asks for the item back, is written and parsed by `store/item_wire.py` and "
        "signed by `store/signing.py`), "
        f"so the request alone takes {own / bare / warm.BUDGET_SAVE_UPDATE_RATIO:.0%} of the budget. "
        f"Everything else is {rest:.3f} ms ({rest / bare:.2f}× the bare UpdateItem, where the budget leaves "
        f"{max(0.0, warm.BUDGET_SAVE_UPDATE_RATIO - own / bare):.2f}×): powertools' routing and OpenAPI validation, "
        "the key check, the strict parse and pydantic's model, the codec, Baton's plan and item mapping, the answer "
        "and the access line. Where the whole save's CPU goes (cProfile, own time by package, scaled to the median; "
        "the profiler inflates code made of many small Python calls, botocore's above all): "
        f"{_where_it_goes(save.profile, save.median_ms)}.{_save_floor(save)}"
    )


def _save_floor(save: warm.SaveFigures) -> str:
    """What a save's floor (`warm.save_floor`) says of its budget, when it was measured."""
    if not save.floor_ms:
        return ""
    said = (
        f" Its floor, timed in the same alternation (`warm.save_floor`: the strict parse, pydantic's model, the "
        f"canonical form and its hash, packing, and the same UpdateItem on Baton's client, none of the pipeline), "
        f"is {save.floor_ms:.3f} ms, {save.floor_ratio:.2f}× the bare UpdateItem"
    )
    if save.floor_ratio > warm.BUDGET_SAVE_UPDATE_RATIO:
        return (
            f"{said}: no save of this design (the contract's strict JSON, the stored form's bytes as the "
            "stored-bytes and cost-per-save budgets want them, one conditional UpdateItem that answers from what it "
            "wrote) meets this budget as set, however lean its pipeline. A decision for the budget: measured "
            f"against the floor, Baton's whole save costs {save.median_ms / save.floor_ms:.2f}× it."
        )
    return f"{said}, so the pipeline above it ({save.median_ms - save.floor_ms:.3f} ms) is what is over."


def _lookup_reason(lookup: warm.LookupFigures) -> str:
    """Why a lookup misses its budget against a bare GetItem: the split this run measured."""
    bare = lookup.get_item_median_ms
    own = lookup.call_median_ms
    rest = lookup.beside_get_ms
    takes = lookup.calls_per_lookup.get("TakeShare", 0.0)
    share = f"one lookup in {1 / takes:.0f} also takes the tenant's share, an UpdateItem" if takes else "no take"
    return (
        f"Measured in this run: the whole handler {lookup.median_ms:.3f} ms against {bare:.3f} ms for the bare "
        f"GetItem of the same key on botocore's own client ({lookup.item_bytes:,} B item, answered by the same "
        f"replay as Baton's). Baton's own GetItem, made alone on Baton's client in the same alternation, costs "
        f"{own:.3f} ms ({own / bare:.2f}× the bare one: the same request, its item parsed by `store/item_wire.py` "
        "and signed by `store/signing.py`; "
        "inside a lookup it costs more, its code and data evicted from the processor's caches by the lookup's own "
        "work, decompressing with the state's 256 KB dictionary above all). Everything "
        f"else is {rest:.3f} ms ({rest / bare:.2f}× the bare GetItem, where the budget leaves "
        f"{max(0.0, warm.BUDGET_LOOKUP_RATIO - own / bare):.2f}×): the key check, the rate limiter ({share}), "
        "powertools' routing and its validation of the query, reading the item and decompressing the stored state, "
        f"and writing the {lookup.body_bytes:,} B answer and the access line. "
        "Where the whole lookup's CPU goes (cProfile, own time by package, scaled to the median; the profiler "
        "inflates code made of many small Python calls, botocore's above all): "
        f"{_where_it_goes(lookup.profile, lookup.median_ms)}. Measured apart from this run (2026-12-04, a timer "
        "around it in a 1 KB lookup): the access line is one write to a pipe that another process reads, as "
        "Lambda's runtime reads a function's output (here the bench's parent), and waking that reader made it about "
        "0.07 ms, against 0.025 ms written to /dev/null." + _lookup_floor(lookup)
    )


def _lookup_floor(lookup: warm.LookupFigures) -> str:
    """What a lookup's floor (`warm.lookup_floor`) says of its budget, when it was measured."""
    if not lookup.floor_ms:
        return ""
    budget = warm.BUDGET_LOOKUP_RATIO * lookup.get_item_median_ms
    return (
        f" Its floor, timed in the same alternation (`warm.lookup_floor`: the same GetItem on Baton's client, the "
        f"checkpoint read from its item and the answer written, none of the pipeline), is {lookup.floor_ms:.3f} ms, "
        f"{lookup.floor_ratio:.2f}× the bare GetItem: the pipeline above it (routing and the query's validation, "
        f"the key check, the rate limiter, the usage count, the access line) costs "
        f"{lookup.median_ms - lookup.floor_ms:.3f} ms, where the budget leaves it "
        f"{max(0.0, budget - lookup.floor_ms):.3f} ms."
    )


def _eager_reason(cold: coldstart.ColdStart) -> str:
    """What the cold request costs without the lean path, against with it: what the lean path saves."""
    eager = cold.target(coldstart.EAGER_LABEL)
    lean = cold.target(coldstart.LEAN_LABEL)
    if eager is None or lean is None:
        return ""
    added = eager.median_cpu_ms - lean.median_cpu_ms
    text = (
        "This row is Baton's cold request as it was before the lean path (every family's routes included, the "
        "repositories only they use imported and powertools' whole event handler loaded by the import), measured "
        "beside the lean one to "
        f"show what the lean path saves, not as a way Baton runs: {added:.0f} ms CPU "
        f"({cold.cpu_ratio(eager):.2f}× → {cold.cpu_ratio(lean):.2f}× the baseline; the import alone "
        f"{eager.median_import_ms:.0f} ms → {lean.median_import_ms:.0f} ms). "
    )
    if cold.eager_profile is not None and cold.profile is not None:
        heaviest = cold.eager_profile.heaviest(6, unless_in=cold.profile)
        text += "Its heaviest modules the lean request does not load (`-X importtime` self time): " + ", ".join(
            f"`{name}` {own:.1f} ms" for name, own, _ in heaviest
        )
        text += ". "
    if lean.budget is not None and cold.cpu_ratio(lean) > lean.budget:
        return text + f"Why the lean request itself misses: see **cold start: {coldstart.LEAN_LABEL}**."
    return text + f"The lean request meets its budget ({cold.cpu_ratio(lean):.2f}×)."


def _lean_reason(cold: coldstart.ColdStart) -> str:
    """Where the cold request's time goes beyond the baseline's, from this run's import profile, then the reason
    `MISS_REASONS` records (what would meet the budget)."""
    lean = cold.target(coldstart.LEAN_LABEL)
    recorded = next(text for prefix, text in MISS_REASONS if prefix == "cold start: api handler")
    if lean is None or cold.profile is None:
        return recorded
    base = cold.baseline_profile.packages if cold.baseline_profile is not None else {}
    packages = cold.profile.packages
    added = sorted(packages, key=lambda name: packages[name] - base.get(name, 0.0), reverse=True)[:6]
    return (
        f"Measured in this run: {lean.median_cpu_ms:.0f} ms CPU against the baseline's "
        f"{cold.baseline.median_cpu_ms:.0f} ms, {lean.median_cpu_ms - cold.baseline.median_cpu_ms:.0f} ms more "
        f"(the budget allows {(lean.budget or 0.0) - 1:.0%} more: "
        f"{((lean.budget or 0.0) - 1) * cold.baseline.median_cpu_ms:.0f} ms). The packages it imports beyond the "
        "baseline's (`-X importtime` self time, the tool adds a little): "
        + ", ".join(f"`{name}` {packages[name] - base.get(name, 0.0):+.1f} ms" for name in added)
        + f". {recorded}"
    )


THREAD_PUT_FIGURE = "own CPU of a LangGraph thread put in the handler"
THREAD_PUT_BUDGET = (
    f"≤ {warm.BUDGET_THREAD_PUT_RATIO:g} × a bare botocore PutItem of the same item (same process, interleaved)"
)


def _thread_puts(warm_figures: warm.WarmFigures) -> list[Verdict]:
    """The LangGraph thread put's own CPU against a bare PutItem, per conversation size."""
    if not warm_figures.threads:
        return [
            Verdict(THREAD_PUT_FIGURE, THREAD_PUT_BUDGET, "not in this run's `warm.py` figures", "not measured here")
        ]
    found = []
    for put in warm_figures.threads:
        found.append(
            Verdict(
                f"{THREAD_PUT_FIGURE}: a graph step at a {put.size // 1000} KB conversation, AWS calls stubbed",
                THREAD_PUT_BUDGET,
                f"{put.ratio:.2f}× ({put.median_ms:.2f} ms vs {put.put_item_median_ms:.2f} ms CPU, medians of "
                f"{put.puts} pairs; the item {put.item_bytes:,} B, everything the put wrote); requests per put "
                f"(asserted): {' + '.join(put.requests)}; its requests alone {put.requests_alone_ms:.2f} ms; the "
                f"floor (strict parse, validation, packing, the same requests; no pipeline) {put.floor_ms:.2f} ms, "
                f"{put.floor_ratio:.2f}×",
                {True: "met", False: "missed"}[put.ratio <= warm.BUDGET_THREAD_PUT_RATIO],
            )
        )
    return found


PEER_PUT_FIGURE = "own CPU of a LangGraph put, Baton's handler + `BatonSaver.put`, against a peer's `put`"
PEER_PUT_BUDGET = (
    f"≤ {peer_puts.BUDGET_RATIO:g} × the peer's `put` of the same checkpoint (AWS stubbed alike, medians, interleaved "
    "rounds)"
)


def _peer_puts(peer_figures: peer_puts.PeerPutFigures | None, warm_figures: warm.WarmFigures | None) -> list[Verdict]:
    """Baton's whole put (handler + client) against each judged peer's `put`, per conversation size."""
    if peer_figures is None:
        return [
            Verdict(
                PEER_PUT_FIGURE, PEER_PUT_BUDGET, "not measured in this run (see the oddities)", "not measured here"
            )
        ]
    found = []
    for size in peer_figures.sizes:
        for peer in peer_puts.JUDGED:
            label = peer_figures.labels.get(peer, peer)
            figure = f"{PEER_PUT_FIGURE}: a graph step at a {size.size // 1000} KB conversation, against {label}"
            if peer not in size.peers:
                why = peer_figures.missing.get(peer, "not in this run's figures")
                found.append(Verdict(figure, PEER_PUT_BUDGET, f"{label} not measured: {why}", "not measured here"))
                continue
            ratio = size.ratio(peer)
            found.append(
                Verdict(
                    figure,
                    PEER_PUT_BUDGET,
                    f"{ratio:.2f}× (Baton {size.baton_ms:.3f} ms = handler {size.handler.median_ms:.3f} ms + client "
                    f"{size.client.median_ms:.3f} ms, against {size.peers[peer].median_ms:.3f} ms CPU; medians of "
                    f"{size.handler.puts} puts each; requests per put, asserted: Baton's handler "
                    f"{' + '.join(size.baton_requests)}, the peer {' + '.join(size.peer_requests[peer])})",
                    {True: "met", False: "missed"}[ratio <= peer_puts.BUDGET_RATIO],
                    _peer_put_reason(size, peer, label, warm_figures),
                )
            )
    return found


def _thread_put_of(warm_figures: warm.WarmFigures | None, size: int) -> warm.ThreadPutFigures | None:
    """The thread-put figures of a conversation size, if this run measured them."""
    if warm_figures is None:
        return None
    return next((put for put in warm_figures.threads if put.size == size), None)


def _peer_put_reason(size: peer_puts.SizeFigures, peer: str, label: str, warm_figures: warm.WarmFigures | None) -> str:
    """Why Baton's whole put misses against a peer's: the split this run measured, and where Baton's time goes."""
    theirs = size.peers[peer].median_ms
    handler, client = size.handler.median_ms, size.client.median_ms
    text = (
        f"Measured in this run: Baton's put costs {size.baton_ms:.3f} ms of CPU against {theirs:.3f} ms for {label}'s "
        f"`put` ({' + '.join(size.peer_requests[peer])}: unconditional writes of the whole checkpoint as LangGraph's "
        f"serializer packs it, straight from the agent's process), {size.baton_ms - theirs:.3f} ms more where the "
        "budget allows none. The "
        f"handler alone is {handler / theirs:.2f}× the peer's whole put ({handler:.3f} ms), `BatonSaver.put` in the "
        f"agent's process {client / theirs:.2f}× ({client:.3f} ms). "
    )
    thread = _thread_put_of(warm_figures, size.size)
    if thread is not None:
        text += (
            f"The handler's own DynamoDB requests ({' + '.join(thread.requests)}), made alone on its client, take "
            f"{thread.requests_alone_ms:.3f} ms ({thread.requests_alone_ms / theirs:.2f}× the peer's put) and its "
            f"floor (the strict parse, validation, packing and the same requests, none of the pipeline) "
            f"{thread.floor_ms:.3f} ms ({thread.floor_ms / theirs:.2f}×): see the thread put's own budget. "
        )
        if thread.requests_alone_ms + client >= theirs:
            text += (
                f"Its requests alone and its client ({thread.requests_alone_ms + client:.3f} ms) already cost the "
                "peer's whole put: a put through an API is a request from the agent and a request from the server, "
                "where the peer's is one request from the agent, so no handler of Baton's, however lean, meets 1× as "
                "this budget is set (a decision for the budget, not work for the code). "
            )
    return (
        text
        + "Where the handler's time goes (cProfile, own time by package, scaled to its median; the profiler inflates "
        f"code made of many small Python calls, botocore's above all): {_where_it_goes(size.handler_profile, handler)}"
        f". Where the client's goes: {_where_it_goes(size.client_profile, client)}."
    )


def _peer_put_section(figures: peer_puts.PeerPutFigures, warm_figures: warm.WarmFigures | None) -> list[str]:
    """The LangGraph put against the peers' `put`, side by side, and where Baton's CPU goes."""
    versions = "; ".join(
        f"{figures.labels.get(name, name)}: "
        + ", ".join(f"`{package}` {version}" for package, version in found.items())
        for name, found in figures.versions.items()
    )
    lines = [
        "## The LangGraph put against the peers' `put`",
        "",
        "One graph step's checkpoint, as LangGraph hands it to `put` (the checkpoint `tools` ends in "
        "`bench/harness/langgraph_steps.py`'s graph, captured on LangGraph's in-memory saver, the same one the "
        "thread put above sends; every side captures it in its own process and the run fails unless all put the "
        "same), put by Baton and by each peer, each a child of the put before it; CPU time (`time.process_time`) of "
        "each side's own process around the one call (`bench/harness/peer_puts.py`). Baton's put is both its halves: "
        "`BatonSaver.put` in the agent's process (LangGraph's serializer, the body, the SDK's retry core, httpx's "
        "request and the answer's parse), its HTTP exchange stubbed at httpx's transport, which answers with the "
        "handler's answer to an earlier put of the step (the connection, TLS and HTTP framing left out, as they are "
        "on the peers' side); then the api handler on the event of the very body the client sent, in the thread "
        "put's steady state, DynamoDB answered by the replay of what moto answered to Baton. Each peer: its saver "
        "with the options the graph steps give it (the aws saver with its S3 offload, unused at these sizes), every "
        "DynamoDB and S3 request answered at botocore's `before-send` by the replay of what moto answered to the "
        "same saver's put of the same step, recorded in the same run; no moto work in any timed region. Every timed "
        "put's requests are counted (botocore `before-call`) and asserted. Each side in its own process and "
        f"environment, interleaved: {figures.rounds} rounds, in each every process makes {figures.batch} puts "
        "(Baton: the client's, then the handler's of the same bodies) in an order that rotates every round, after "
        "one discarded batch each. Medians over every round; Baton's whole put is the sum of its halves' medians. "
        "(The handler's median here comes from puts made back to back, as each peer's are; the thread put above "
        "alternates each put with its baselines, which cools its caches: the two differ by that.)",
        "",
        f"Versions: {versions}.",
        "",
        "| conversation | side | CPU per put (median) | p90 | puts | requests per put (asserted) | Baton / this side |",
        "|---|---|---|---|---|---|---|",
    ]
    for size in figures.sizes:
        conversation = f"{size.size // 1000} KB (`messages` {size.messages_bytes:,} B, body {size.body_bytes:,} B)"
        keys = f" ({size.key_reads} also read the API key)" if size.key_reads else ""
        rows: list[tuple[str, float, peer_puts.Timing | None, str, str]] = [
            ("Baton: api handler", size.handler.median_ms, size.handler, " + ".join(size.baton_requests) + keys, ""),
            ("Baton: `BatonSaver.put` (client side)", size.client.median_ms, size.client, "none (HTTP stubbed)", ""),
            ("**Baton: the whole put**", size.baton_ms, None, "", ""),
        ]
        for peer, timing in size.peers.items():
            ratio = size.ratio(peer)
            judged = peer in peer_puts.JUDGED
            mark = ("✅" if ratio <= peer_puts.BUDGET_RATIO else "❌") if judged else "(not judged: an option)"
            rows.append(
                (
                    f"{figures.labels.get(peer, peer)} `put`",
                    timing.median_ms,
                    timing,
                    " + ".join(size.peer_requests[peer]),
                    f"{ratio:.2f}× {mark}",
                )
            )
        for side, median, spread, requests, ratio_text in rows:
            p90 = f"{spread.p90_ms:.3f} ms" if spread else "—"
            puts = str(spread.puts) if spread else "—"
            lines.append(
                f"| {conversation} | {side} | {median:.3f} ms | {p90} | {puts} | {requests or '—'} | "
                f"{ratio_text or '—'} |"
            )
    if figures.missing:
        lines += ["", *(f"- {figures.labels.get(n, n)} not measured: {why}" for n, why in figures.missing.items())]
    for size in figures.sizes:
        if not size.handler_profile and not size.client_profile:
            continue
        handler = _scaled(size.handler_profile, size.handler.median_ms)
        client = _scaled(size.client_profile, size.client.median_ms)
        names = sorted(set(handler) | set(client), key=lambda n: handler.get(n, 0.0) + client.get(n, 0.0), reverse=True)
        lines += [
            "",
            f"Where Baton's put at a {size.size // 1000} KB conversation spends its CPU ({peer_puts.PROFILED} puts "
            "profiled apart from the timed ones; cProfile's own time summed by package, each half's shares scaled to "
            "its median; the profiler inflates code made of many small Python calls against C code):",
            "",
            "| package | api handler ≈ | `BatonSaver.put` ≈ | together ≈ |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| `{name}` | {handler.get(name, 0.0):.3f} ms | {client.get(name, 0.0):.3f} ms | "
            f"{handler.get(name, 0.0) + client.get(name, 0.0):.3f} ms |"
            for name in names[:14]
        ]
    lines.append("")
    return lines


def _scaled(profile: list[tuple[str, float]], median_ms: float) -> dict[str, float]:
    """A cProfile by package with each package's share scaled to the median (ms)."""
    total = sum(ms for _, ms in profile)
    return {name: median_ms * ms / total for name, ms in profile} if total else {}


def _save_counts(figures: Figures, accepted: list[int], scope: str) -> list[Verdict]:
    """The budgets on what one save and one lookup cost, judged on the sizes Baton accepted."""
    met = {True: "met", False: "missed"}
    found: list[Verdict] = []
    shapes = {
        (size, operation): figures.metered("baton", size, operation, "shape")
        for size in accepted
        for operation in ("create", "update")
    }
    plain = bool(shapes) and all(shape == ["UpdateItem?"] for shape in shapes.values())
    seen = sorted({requests_text(shape) for shape in shapes.values()})
    # A state spilled to the bucket adds one PutObject before the UpdateItem, one GetObject after the GetItem
    # (docs/api.md, "Big states"): allowed beside the DynamoDB budget, and named.
    spill_saves = {
        size: [figures.metered("baton", size, operation, "s3_requests") or {} for operation in ("create", "update")]
        for size in accepted
    }
    spill_ok = all(requests in ({}, {"PutObject": 1}) for pair in spill_saves.values() for requests in pair)
    spilled = [size for size, pair in spill_saves.items() if any(pair)]
    found.append(
        Verdict(
            "DynamoDB requests per save (no idempotency key, no history)",
            "1 conditional UpdateItem",
            f"{'; '.join(seen)} (first and second saves, {scope})" + _s3_note(spilled, "1 PutObject before it"),
            met[plain and spill_ok],
        )
    )
    reads = {size: figures.metered("baton", size, "read", "shape") for size in accepted}
    one_get = bool(reads) and all([c.rstrip("!") for c in shape] == ["GetItem"] for shape in reads.values())
    spill_reads = {size: figures.metered("baton", size, "read", "s3_requests") or {} for size in accepted}
    one_object = all(requests in ({}, {"GetObject": 1}) for requests in spill_reads.values())
    read_spilled = [size for size, requests in spill_reads.items() if requests]
    found.append(
        Verdict(
            "DynamoDB requests per lookup",
            "1 GetItem",
            "; ".join(sorted({requests_text(s) for s in reads.values()}))
            + f" ({scope})"
            + _s3_note(read_spilled, "1 GetObject after it"),
            met[one_get and one_object],
        )
    )
    if 32_000 in accepted:
        item = figures.metered("baton", 32_000, "update", "item_bytes")
        canonical = figures.canonical_bytes(32_000)
        found.append(
            Verdict(
                "stored item bytes for a 32 KB conversation state",
                "≤ 1/3 of the canonical JSON",
                f"{item:,} B for {canonical:,} B = {item / canonical:.3f}",
                met[item * 3 <= canonical],
            )
        )
    else:
        found.append(
            Verdict(
                "stored item bytes for a 32 KB conversation state",
                "≤ 1/3 of the canonical JSON",
                "Baton's 32 KB saves failed",
                "not measured here",
            )
        )
    costs = []
    within = True
    for size in accepted:
        for operation in ("update", "create"):
            m = figures.op("baton", size, operation)["metered"]
            own = m["write_units"] - m["index_write_units"]
            within &= m["index_write_units"] <= 1 if operation == "update" else True
            costs.append((size, operation, own, m["index_write_units"]))
    text = "; ".join(
        f"{size_label(s)} {'second' if o == 'update' else 'first'} save {own} + {idx}"
        for s, o, own, idx in costs
        if o == "update"
    )
    firsts = ", ".join(f"{size_label(s)} {own} + {idx}" for s, o, own, idx in costs if o == "create")
    found.append(
        Verdict(
            "write units of a plain save, index maintenance included",
            "≤ the item's own units + 1",
            f"item + index units: {text} (first saves: {firsts})",
            met[within] if costs else "not measured here",
        )
    )
    if 1_000 in accepted and 32_000 in accepted:
        small = figures.metered("baton", 1_000, "update", "response_bytes")
        large = figures.metered("baton", 32_000, "update", "response_bytes")
        found.append(
            Verdict(
                "bytes a save reads back from DynamoDB",
                "only what its answer needs, never the state",
                f"{small:,} B for a 1 KB state, {large:,} B for a 32 KB state (grows with the state when the "
                "state comes back)",
                met[large - small < 1024],
            )
        )
    return found


def _s3_note(sizes: list[int], what: str) -> str:
    """What the sizes whose state is in the bucket add in S3 requests."""
    if not sizes:
        return ""
    return f"; state in the bucket at {', '.join(size_label(s) for s in sizes)}: S3 adds {what}"


def _served(served: serve.ServeFigures, warm_figures: warm.WarmFigures | None) -> list[str]:
    """The section on Baton through `baton serve`: the method, the 32 KB save against the 1 KB save split into where
    each spends its round trip, and one client's throughput."""
    small, large = served.small, served.large
    stubbed: dict[int, float] = {}
    if warm_figures is not None:  # the same seeded states, by their nominal sizes
        nominal = ((warm.SMALL_SIZE, warm_figures.small), (warm.CPU_SIZE, warm_figures.cpu))
        stubbed = {size: save.median_ms for size, save in nominal if save is not None}

    def row(what: str, one: float, other: float) -> str:
        ratio = f"{other / one:.2f}×" if one > 0 else "–"
        return f"| {what} | {one:.2f} ms | {other:.2f} ms | {ratio} |"

    lines = [
        "## Through `baton serve`",
        "",
        "`baton serve` started as its own process, as `make serve` starts it (embedded moto, its default containers; "
        "the reaper off, its tenant's limits raised so that nothing is refused, every answer checked), and one "
        "`httpx` client with keep-alive on loopback (`bench/harness/serve.py`). Each timed request is the whole round "
        f"trip. After {serve.WARM_UP} unmeasured saves of each, {served.rounds} rounds each save the 1 KB and the "
        f"32 KB seeded conversation states ({served.small_body_bytes:,} and {served.large_body_bytes:,} bytes of "
        "body) to subjects of their own, the order flipped every round, each subject's two states alternating. The "
        "server's share of each request comes from its own output, matched by request id: the gateway's request "
        "line (request read to answer written) and the handler's access line (`duration_ms`).",
        "",
        "| medians | 1 KB save | 32 KB save | 32 KB / 1 KB |",
        "|---|---|---|---|",
        row("round trip (the judged figure)", small.median_ms, large.median_ms),
        row("… in the client and on loopback", small.median_ms - small.gateway_ms, large.median_ms - large.gateway_ms),
        row(
            "… handing the event to a container and back",
            small.gateway_ms - small.handler_ms,
            large.gateway_ms - large.handler_ms,
        ),
        row("… in the handler (its access line)", small.handler_ms, large.handler_ms),
    ]
    own = (stubbed.get(serve.SMALL), stubbed.get(serve.LARGE))
    if own[0] is not None and own[1] is not None:
        lines += [
            row('… … its own CPU with AWS stubbed ("Baton\'s own CPU", above)', own[0], own[1]),
            row(
                "… … the rest, mostly its DynamoDB requests to embedded moto",
                small.handler_ms - own[0],
                large.handler_ms - own[1],
            ),
        ]
    lines += [
        f"| round trip, 90th percentile | {small.p90_ms:.2f} ms | {large.p90_ms:.2f} ms | |",
        "",
        f"One client, one request after another for {served.seconds:g} s each, after a few unmeasured:",
        "",
        "| | per second | round trip (median) | the handler's own (median) |",
        "|---|---|---|---|",
        f"| saves of a 4 KB state | {served.saves_per_second:.0f} | {served.saves.median_ms:.2f} ms | "
        f"{served.saves.handler_ms:.2f} ms |",
        f"| lookups of it | {served.lookups_per_second:.0f} | {served.lookups.median_ms:.2f} ms | "
        f"{served.lookups.handler_ms:.2f} ms |",
        "",
        "Nearly all of a local save is the handler waiting on embedded moto, which serves every DynamoDB request in "
        "Python, one at a time: the save's conditional UpdateItem, and the usage counts `baton serve` writes at the "
        "end of every request (a deployed function writes them every 100). Embedded moto looked at on 2026-12-04, "
        "outside the bench (each of its requests timed, then profiled): the save's UpdateItem took about 20 ms and the "
        "usage counts' about 2.5 ms, most of the former in moto parsing and validating the update expression, which "
        "does not grow with the state. So the ratio through `baton serve` stays close to 1 and says little of Baton's "
        "own work per byte, which its own CPU above measures; a deployed function's DynamoDB does moto's part on its "
        "own machines.",
        "",
    ]
    return lines


def _serve_proxy(figures: Figures | None) -> str:
    if figures is None or "baton" not in figures.clients:
        return "not measured"
    large, small = (figures.value("baton", s, "update", "cpu_ms") for s in (32_000, 1_000))
    if large is None or small is None or not figures.ok("baton", 32_000, "update"):
        return "not measured"
    return (
        f"not through `baton serve`; the handler's own CPU against moto: {large / small:.2f}× ({large:.2f} vs "
        f"{small:.2f} ms)"
    )


def beats_peers(figures: Figures) -> list[str]:
    """Issue 7's aim, row by row: Baton at most the cheapest peer on every figure a user pays for."""
    lines = ["| state | " + " | ".join(name for name, _, _ in HEADLINES) + " |", "|---|" + "---|" * len(HEADLINES)]
    for size in figures.sizes:
        cells = []
        for _, operation, figure in HEADLINES:
            best = figures.best_peer(size, operation, figure)
            if not figures.ok("baton", size, operation):
                cells.append("Baton fails")
                continue
            if best is None:
                cells.append("✅ every peer fails")
                continue
            ours = figures.value("baton", size, operation, figure)
            assert ours is not None
            mark = "✅" if ours <= best[1] else "❌"
            cells.append(f"{mark} {ours / best[1]:.2f}×" if best[1] else f"{mark}")
        lines.append(f"| {size_label(size)} | " + " | ".join(cells) + " |")
    return lines


def render(
    when: datetime,
    figures: Figures | None,
    cold: coldstart.ColdStart | None,
    warm_figures: warm.WarmFigures | None,
    recording: dict[str, Any] | None,
    notes: list[str],
    plot: bool,
    sections: tuple[str, ...] = (),
    steady: dict[str, Any] | None = None,
    peer_figures: peer_puts.PeerPutFigures | None = None,
    served: serve.ServeFigures | None = None,
) -> str:
    """The report as Markdown; `sections` (Markdown, each with its heading) go before the method."""
    lines = [
        "# Baton benchmark report",
        "",
        f"Generated by `make bench` (`bench/run.py`) on {when:%Y-%m-%d %H:%M} UTC.",
        f"Machine: {machine()}.",
        "",
        "Counts (requests, bytes, units) do not depend on the machine; timings are medians, and the cold start a",
        "ratio to a baseline measured in the same run. Budgets are Baton's performance budgets (the table below).",
        "",
    ]
    if figures is not None:
        lines += ["## Headlines", ""]
        lines += [f"- {line}" for line in headlines(figures)] or ["- (Baton or the peers were not measured)"]
        if cold is not None and cold.targets:
            target = cold.targets[0]
            lines.append(
                f"- Cold request (import + first save) {cold.cpu_ratio(target):.2f}× the boto3 baseline in CPU time "
                f"(elapsed {cold.ratio(target):.2f}×; budget ≤ "
                f"{target.budget or 0:g}×)."
            )
        lines.append("")
    lines += ["## Budgets", "", "| figure | budget | measured | verdict |", "|---|---|---|---|"]
    for v in verdicts(figures, cold, warm_figures, recording, steady, peer_figures, served):
        mark = {"met": "✅ met", "missed": "❌ **missed**"}.get(v.status, v.status)
        lines.append(f"| {v.figure} | {v.budget} | {v.measured} | {mark} |")
    lines.append("")
    lines += _misses(verdicts(figures, cold, warm_figures, recording, steady, peer_figures, served))
    if figures is not None:
        lines += _side_by_side(figures, plot)
    if warm_figures is not None:
        lines += _warm(warm_figures)
    if peer_figures is not None:
        lines += _peer_put_section(peer_figures, warm_figures)
    if cold is not None:
        lines += _cold(cold)
    if served is not None:
        lines += _served(served, warm_figures)
    if figures is not None:
        lines += _listing(figures)
    for section in sections:
        lines += [section, ""]
    if figures is not None:
        lines += _how(figures)
    lines += ["## Oddities seen in this run", ""]
    lines += [f"- {note}" for note in notes + (_oddities(figures) if figures else [])] or ["- none"]
    lines.append("")
    return "\n".join(lines)


MISS_REASONS = (
    (
        "bytes a save reads back",
        "DynamoDB has no projection for what a write returns: `UPDATED_NEW` is every attribute the update sets, the "
        "state among them (moto returns only the changed ones; DynamoDB and dynalite return all), so it would save "
        "only the keys over `ALL_NEW`. The answer needs the id, the revision and the expiry, which DynamoDB computes "
        "from the stored item; knowing them without a return costs a read first, a second request per save. Next: a "
        "per-container cache of each checkpoint's head (id, revision, ttl) would let the common save ask for nothing "
        "back, at the price of a failed conditional write when another container wrote in between.",
    ),
    (
        "warm overhead",
        "The save's one UpdateItem, made alone on the same client with nothing around it, costs about a third of the "
        'budget by itself (the column "its DynamoDB request alone" in Baton\'s own CPU below: botocore serializing, '
        "signing and parsing; its configuration knobs, such as account-id endpoints, checksums and the retry mode, "
        "move it by less than this machine's noise). The rest is powertools' routing and OpenAPI validation (about "
        "half of it), Baton's parse, plan and item mapping, and the access log line. Two costs sit outside any one "
        "function (measured 2026-12-04 with a timer around each part of a 1 KB save): the same UpdateItem costs about"
        " 0.47 ms right after a request against 0.38 ms made alone in a loop, because the request's own code evicts "
        "botocore's from the processor's caches (about 0.1 ms of every save is botocore slowed down, not Baton's code"
        " running), and writing the access line is a system call to a pipe, 30-60 µs of which most is the kernel's. "
        "Cut so far: the update expression is built once per shape of save, powertools' dependency tree once per "
        "route, the access line is written by orjson, key checks skip characters the body cannot hold, a save's "
        "answer reads only the three attributes it needs from the item DynamoDB returns, and item values are written "
        "and parsed directly (`store/item_wire.py`: botocore's parse of the item a 4 KB save gets back took about 78 "
        "µs, 28 µs now; its serialization of the request about 50 µs, 30-40 µs now), and requests are signed without "
        "the work botocore's signer repeats (`store/signing.py`: about 0.1 ms inside a request, 0.07 ms now, "
        "timed the same way). What is "
        "left beyond that means "
        "leaving botocore for the one call or powertools' validation for the save route; neither is taken here, "
        "because both carry the contract's error handling and the OpenAPI document.",
    ),
    (
        "own CPU of a save",
        "Its DynamoDB request alone is under a third of it (the bytes of a 32 KB save's item, serialized and parsed); "
        "the codec is 0.6 ms measured alone and about 0.8 ms inside a request, where its 256 KB dictionary's tables "
        "no longer sit in the cache (zstd level 6: a faster level or a smaller dictionary stores up to a write unit "
        "more per 32 KB save, and a write unit costs more than the CPU it saves); the strict parse (duplicate keys, "
        "depth, numbers) about 0.25 ms; powertools and the rest as in the warm save.",
    ),
    (
        THREAD_PUT_FIGURE,
        "The floor beside it (the section below) says how far any implementation of this design can go: the body "
        "parsed strictly and validated, the values packed as stored, and the put's own requests, with none of "
        "Baton's pipeline. At 34 KB the floor alone is over 3 ×: its two requests (the value's own item, then the "
        "checkpoint's) cost about 2.2 × the one PutItem, packing the 32 KB value (level 3) about 0.3 ms, parsing and "
        "validating the 44 KB body about 0.2 ms. At 6 KB the floor is about 1.9 ×: the UpdateItem costs about 1.2 × "
        "a PutItem of the same item (its update and condition expressions), packing the 5.7 KB value at level 6 "
        "about 0.15 ms and parsing and validating the body about 0.14 ms, which leaves some 0.05 ms for the routing, "
        "key check, planning, answer and log line that take about 0.4 ms (measured 2026-12-03). Meeting 2 × means "
        "giving up a budget that weighs more: values unpacked, or packed at level 1, cost write units on every step "
        "(bytes cost more than CPU, and the lowest $ per superstep is a budget), and a lazier parse gives up the "
        "contract's strict JSON.",
    ),
    (
        "cold start: api handler",
        "Importing botocore and creating its DynamoDB client is by itself about the whole baseline (boto3 only adds "
        "a few ms on top of botocore; see the phases in the cold start section), so 1.3× leaves about 0.3 of the "
        "baseline for everything else a cold request does. Importing pydantic with pydantic-core and annotated-types "
        "takes most of that (about 40 ms), powertools' event handler about 9 ms, and Baton's own modules the rest "
        "(measured 2026-12-04: 1.21×, 165 ms against 137 ms). What is left to cut is pydantic and powertools on the "
        "cold path, against the design's choice of both, or the init phase itself: SnapStart on the deployed "
        "function (on in prod) snapshots it, and is not measurable here. Cut so far: Baton's value objects as "
        "msgspec Structs (a frozen dataclass generated six methods with `exec` at import, about 0.4 ms each, some "
        "fifty of them: 17 ms), the routes' response documentation made with the OpenAPI document (no envelope "
        "parametrized at import, no response model analysed at a route's first request: 4 ms), pydantic's plugin "
        "scan (`PYDANTIC_DISABLE_PLUGINS`), boto3 (botocore directly), botocore's listing of every service it knows "
        "before it loads one (its loader is told which exist), its parse of the endpoints of every service in every "
        "partition (1.2 MB; a copy trimmed to Baton's three services is kept beside the store) and its JSON parsed "
        "into `OrderedDict`s (orjson now): a DynamoDB client's creation took 41 ms, 13.5 ms now; models built "
        "on first use (pydantic's `defer_build`), the X-Ray SDK and Tracer, and the lean path: "
        "every family's routes but the checkpoints' (keys, blobs, history, leases, resume, threads, MCP, OAuth, "
        "tenants, usage, audit, the console) and the repositories only they use left to the first request that "
        "needs them, powertools' unused resolvers (and asyncio with them) never imported (the row without it "
        "shows what that saves).",
    ),
)
"""Why each missed budget is missed, and what would meet it: the report names every miss and its reason."""


def _misses(found: list[Verdict]) -> list[str]:
    """The section naming each missed budget with its reason."""
    missed = [v for v in found if v.status == "missed"]
    if not missed:
        return []
    lines = ["## Budgets missed, and why", ""]
    for verdict in missed:
        reason = verdict.reason or next(
            (text for prefix, text in MISS_REASONS if verdict.figure.startswith(prefix)), "no reason recorded"
        )
        lines.append(f"- **{verdict.figure}** ({verdict.measured}; budget {verdict.budget}): {reason}")
    return [*lines, ""]


# What listing cost before issue 7, from the benchmark of 2026-12-01 03:47: each save moved the sort key of two
# local indexes (a delete and a put of a ~600 B entry in each: 4 write units), and a page read summaries from one.
LSI_ENTRY_BYTES = 600
LSI_WRITE_UNITS_PER_SAVE = 4
WRITE_UNIT_IN_READ_UNITS = round(prices.WRITE_UNIT / prices.READ_UNIT)
"""On-demand prices: a write request unit costs five read request units (us-east-1, $0.625 and $0.125 a million)."""


def _listing(figures: Figures, subjects: tuple[int, ...] = (1, 5, 20, 100), limit: int = 50) -> list[str]:
    """What dropping the local indexes moves to listing: a page now reads every checkpoint of the subject (summaries
    projected, but DynamoDB bills a Query by the items it reads), and the saves per listing from which it pays."""
    sizes = [s for s in figures.sizes if figures.ok("baton", s, "update")]
    lines = [
        "## Listing: the read cost the index reshape moves",
        "",
        "A save no longer maintains local indexes (before: 4 write units per save, a delete and a put of a ~600 B",
        "entry in each of two indexes whose sort key was `updated_at`). A page of a subject's checkpoints is now one",
        "consistent Query of the subject's partition, ordered in the function, and it reads every checkpoint of the",
        "subject; before, it read up to `limit` + 1 index entries. Read units per page, consistent, by DynamoDB's",
        f"rules (the Query's item sizes summed, then rounded to 4 KB), for pages of {limit}, and the saves per listing",
        f"above which the reshape is cheaper (a write unit priced as {WRITE_UNIT_IN_READ_UNITS} read units):",
        "",
        "| checkpoints in the subject | state | item | read units per page, before → now | pays from saves per list |",
        "|---|---|---|---|---|",
    ]
    for count in subjects:
        for size in sizes:
            item_bytes = figures.value("baton", size, "update", "item_bytes")
            assert item_bytes is not None, f"no item bytes for Baton's {size}-byte second save"
            item = int(item_bytes)
            before = max(1, math.ceil(min(count, limit + 1) * LSI_ENTRY_BYTES / 4096))
            now = max(1, math.ceil(count * item / 4096))
            extra = now - before
            saves = extra / (LSI_WRITE_UNITS_PER_SAVE * WRITE_UNIT_IN_READ_UNITS)
            lines.append(
                f"| {count} | {size_label(size)} | {item:,} B | {before} → {now} | "
                + ("always" if extra <= 0 else f"{saves:.2f}")
                + " |"
            )
    lines += [
        "",
        "An agent saves its checkpoint at every step and lists a subject when it resumes, so saves outnumber listings",
        "by far; a subject holds one checkpoint per agent and kind. A subject with hundreds of large checkpoints",
        "listed more often than it is saved would pay more than before; nothing in Baton's use looks like that.",
        "",
    ]
    return lines


def _side_by_side(figures: Figures, plot: bool) -> list[str]:
    labels = [figures.labels.get(c, c) for c in figures.clients]
    lines = [
        "## Side by side: Baton and the LangGraph DynamoDB savers",
        "",
        "The same seeded conversation states (`bench/harness/states.py`, seed 7), the same moto server, "
        f"{_reps_text(figures)} per figure, each on a fresh thread (LangGraph) or subject (Baton): "
        "a first save, a second save over it, a read of the latest. Big states: Baton spills a state whose stored "
        "form is over 16 KB to its bucket (one PutObject before the UpdateItem, one GetObject after the GetItem); "
        "both aws variants run with their S3 offload (`s3_offload_config`: a checkpoint payload over 350 KB, after "
        "gzip when on, goes to an object); `langgraph-checkpoint-amazon-dynamodb` has no offload. Peers: "
        + "; ".join(
            f"{figures.labels.get(name, name)} = "
            + ", ".join(f"`{pkg}` {version}" for pkg, version in info["versions"].items())
            for name, info in figures.summary["info"].items()
        )
        + ".",
        "",
    ]
    if plot:
        lines += [f"![write units, bytes stored and cost per save and per read against state size]({PLOT_NAME})", ""]
    lines += _costs(figures)
    lines += ["Is Baton at most the cheapest peer (second save, read of the latest)? Ratio Baton / cheapest peer:", ""]
    lines += beats_peers(figures)
    lines.append("")
    for size in figures.sizes:
        canonical = figures.canonical_bytes(size, 1)
        lines += [
            f"### {size_label(size)} state ({canonical:,} B of canonical JSON)",
            "",
            "| figure | " + " | ".join(labels) + " |",
            "|---|" + "---|" * len(labels),
        ]
        for name, operation, figure in ROWS:
            cells = [cell(figures, client, size, operation, figure) for client in figures.clients]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    for name, reason in figures.summary["missing"].items():
        lines.append(f"Not measured: {figures.labels.get(name, name)}: {reason}.")
    return lines


def _reps_text(figures: Figures) -> str:
    """ "30 repetitions" or "30 repetitions (10 for 2 MB states)"."""
    reps = figures.summary["reps"]
    fewer = {
        size: n
        for size, n in (figures.summary.get("reps_by_size") or {}).items()
        if n != reps and int(size) in figures.sizes
    }
    text = f"{reps} repetitions"
    if fewer:
        text += " (" + ", ".join(f"{n} for {size_label(int(size))} states" for size, n in fewer.items()) + ")"
    return text


def _costs(figures: Figures) -> list[str]:
    """What a million second saves and a million reads of the latest cost in requests, per size and client."""
    labels = [figures.labels.get(c, c) for c in figures.clients]
    lines = [
        "What a million second saves and a million reads of the latest cost in requests, at on-demand prices "
        f"(us-east-1): DynamoDB ${prices.WRITE_UNIT * 1e6:g} a million write units and ${prices.READ_UNIT * 1e6:g} a "
        f"million read units, S3 ${prices.S3_PUT * 1e6:g} a million PUT-class requests and ${prices.S3_GET * 1e6:g} a "
        "million GET-class requests (`bench/billing/prices.py`; storage left out). Save / read:",
        "",
        "| state | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for size in figures.sizes:
        cells = []
        for client in figures.clients:
            pair = []
            for operation in ("update", "read"):
                if figures.ok(client, size, operation):
                    pair.append(dollars(figures.value(client, size, operation, "cost") or 0.0))
                else:
                    pair.append("fails")
            cells.append(" / ".join(pair))
        lines.append(f"| {size_label(size)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "A spilled state trades write units for an S3 PUT: one PUT costs as much as "
        f"{prices.S3_PUT / prices.WRITE_UNIT:g} write units (8 KB of item), and a GET as "
        f"{prices.S3_GET / prices.READ_UNIT:g} read units. Not in these figures: Baton's reaper will tag each spilled "
        f"state's object attached once a checkpoint holds it (one PutObjectTagging, ${prices.S3_PUT * 1e6:g} a million "
        "saves that spill) and delete the object a later write replaced (DELETE requests are free); it is not built "
        "yet.",
        "",
    ]
    return lines


def _warm(figures: warm.WarmFigures) -> list[str]:
    lines = [
        "## Baton's own CPU, AWS stubbed",
        "",
        "The whole api handler on a warm container (routing, validation, the save, botocore serializing the request "
        "and parsing the answer, the access log), DynamoDB answered by a replay of what moto answered to the same "
        "request (`bench/harness/replay.py`). CPU time (`time.process_time`), a second save over an existing "
        "checkpoint. "
        "(Before 2026-12-01 the warm figure timed only the domain's parse and plan, 0.22 ms then; botocore's "
        "validation, serialization and parsing of the one call and the resolver are part of every save.)",
        "",
        'The column "its DynamoDB request alone" times the same UpdateItem made again on the same client with',
        "nothing around it (botocore serializing, signing and parsing it, answered by the same replay): what any",
        "handler built on botocore pays for this write, whatever it does besides.",
        "",
        "| state | saves | median | its DynamoDB request alone | everything else | p90 | bare `json.loads` + "
        "`sha256` | DynamoDB calls per save |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for save in (figures.warm, figures.cpu):
        calls = ", ".join(f"{n:g} {op}" for op, n in save.calls_per_save.items()) or "none"
        lines.append(
            f"| {save.state_bytes:,} B | {save.saves} | {save.median_ms:.3f} ms | {save.call_median_ms:.3f} ms | "
            f"{save.beside_call_ms:.3f} ms | {save.p90_ms:.3f} ms | {save.bare_median_ms * 1000:.0f} µs | {calls} |"
        )
    profile = figures.cpu.profile
    if profile:
        total = sum(ms for _, ms in profile)
        lines += [
            "",
            f"Where a {figures.cpu.state_bytes / 1000:.0f} KB save's CPU goes (cProfile, own time summed by package; "
            "the profiler inflates code made of many small Python calls, such as botocore and pydantic, against C "
            "code such as a compressor, so read the shares as an upper bound for the former):",
            "",
            "| package | share of profiled time | ≈ of the median |",
            "|---|---|---|",
        ]
        lines += [
            f"| `{name}` | {ms / total:.0%} | {figures.cpu.median_ms * ms / total:.2f} ms |"
            for name, ms in profile[:12]
        ]
    lines.append("")
    lines += _botocore_section(figures)
    if figures.threads:
        lines += _thread_put_section(figures.threads)
    return lines


def _botocore_section(figures: warm.WarmFigures) -> list[str]:
    """A plain save beside a bare UpdateItem of the same item, a lookup beside a bare GetItem of the same key."""
    saves = [save for save in figures.saves if save.update_item_median_ms]
    if not saves and not figures.lookups:
        return []
    lines = [
        "### A save and a lookup against bare botocore",
        "",
        "Each timed save alternates (order flipped every pair) with a bare botocore UpdateItem, on botocore's own "
        "DynamoDB client configured as Baton's (`warm.stock_client`: none of Baton's changes to its sessions, "
        "`store/item_wire.py` among them), of the item that save writes: the item as the recorded lookup read it "
        "back after the same save, every attribute but the key in one plain `SET`, no condition, nothing asked back "
        "(`replay.bare_update`), answered by the replay of moto's answer to that very UpdateItem. Each timed lookup "
        "(`GET /v1/checkpoints`, the whole handler) alternates with a bare botocore GetItem, on the same stock "
        "client, of the key it reads (as consistent), answered by the same replay as Baton's. Every timed call's "
        "input (an event, a bare call's parameters) is made just before it, outside the timer, as Lambda's runtime "
        "hands a handler the event it has just parsed (`warm._fresh`), and each answer is let go before the next "
        "call. Beside each save, its floor (`warm.save_floor`): what any save of this design must spend to keep the "
        "contract and the stored form, with none of Baton's pipeline (the strict parse, pydantic's model, the "
        "canonical form and its hash, packing, the same conditional UpdateItem on Baton's client), in the same "
        "alternation. Beside each lookup, its floor (`warm.lookup_floor`): the same GetItem on Baton's client, the "
        "checkpoint read from its item and the answer written, none of the pipeline. CPU time, medians.",
        "",
        "| state | saves | save (median) | bare UpdateItem of the same item | ratio | Baton's own UpdateItem alone "
        "| everything else | floor (ratio) | item |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {save.state_bytes:,} B | {save.saves} | {save.median_ms:.3f} ms | {save.update_item_median_ms:.3f} ms | "
        f"{save.update_ratio:.2f}× | {save.call_median_ms:.3f} ms | {save.beside_call_ms:.3f} ms | "
        + (f"{save.floor_ms:.3f} ms ({save.floor_ratio:.2f}×)" if save.floor_ms else "not measured")
        + f" | {save.item_bytes:,} B |"
        for save in saves
    ]
    if figures.lookups:
        lines += [
            "",
            "| state | lookups | lookup (median) | bare GetItem of the same key | ratio | Baton's own GetItem alone | "
            "everything else | floor (ratio) | item | answer | p90 | DynamoDB calls per lookup |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for lookup in figures.lookups:
            calls = ", ".join(f"{n:g} {op}" for op, n in lookup.calls_per_lookup.items()) or "none"
            lines.append(
                f"| {lookup.state_bytes:,} B | {lookup.lookups} | {lookup.median_ms:.3f} ms | "
                f"{lookup.get_item_median_ms:.3f} ms | {lookup.ratio:.2f}× | {lookup.call_median_ms:.3f} ms | "
                f"{lookup.beside_get_ms:.3f} ms | "
                + (f"{lookup.floor_ms:.3f} ms ({lookup.floor_ratio:.2f}×)" if lookup.floor_ms else "not measured")
                + f" | {lookup.item_bytes:,} B | {lookup.body_bytes:,} B | {lookup.p90_ms:.3f} ms | {calls} |"
            )
    lines.append("")
    return lines


def _thread_put_section(puts: list[warm.ThreadPutFigures]) -> list[str]:
    """The LangGraph thread put beside a bare PutItem of the same item, and where its CPU goes."""
    lines = [
        "### A LangGraph thread put",
        "",
        "`POST /v1/threads/{thread_id}/checkpoints` with the body `BatonSaver` sends for one graph step "
        "(`bench/harness/thread_put.py`): the put of the checkpoint `tools` ends in "
        "`bench/harness/langgraph_steps.py`'s graph, run "
        "on LangGraph's in-memory saver from its seeded conversation: `messages` new (msgpack, by LangGraph's "
        "serializer), a few small channels new, the others carried from the parent. Each timed put is a child of "
        "the one before it on a thread whose head this container touched moments ago (its steady state: no read, "
        "no touch); DynamoDB answered by a replay of what moto answered to the same puts, the head's expiry moved "
        "to now. Every timed put's requests are counted (botocore `before-call`) and must be the steady state's, "
        "else the run fails. Alternating with each put: a bare botocore PutItem, on botocore's own client "
        "configured as Baton's (`warm.stock_client`), of one item "
        "holding everything the put wrote (the checkpoint item's attributes and, at 34 KB, the value's own item), "
        "answered by the replay of moto's answer to that PutItem; and the put's floor (`warm.thread_put_floor`): "
        "what any put must spend to keep the contract and Baton's stored form, with none of Baton's pipeline "
        "(routing, the key check, planning, the answer, the log line): the body parsed strictly and validated by "
        "its pydantic model, the new values decoded and packed, the checkpoint packed, and the put's own DynamoDB "
        "requests made on Baton's client. Each input is made (or copied anew) just before its call, outside the "
        "timer (`warm._fresh`).",
        "",
        "| conversation | `messages` sent | body | puts | median | bare PutItem of the same item | ratio | its "
        "DynamoDB requests alone | everything else | floor (ratio) | Baton's pipeline above the floor | p90 | "
        "DynamoDB requests per put (asserted) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for put in puts:
        keys = f" ({put.key_reads} puts also read the API key)" if put.key_reads else ""
        lines.append(
            f"| {put.size // 1000} KB | {put.messages_bytes:,} B | {put.body_bytes:,} B | {put.puts} | "
            f"{put.median_ms:.3f} ms | {put.put_item_median_ms:.3f} ms ({put.item_bytes:,} B) | {put.ratio:.2f}× | "
            f"{put.requests_alone_ms:.3f} ms | {put.beside_requests_ms:.3f} ms | {put.floor_ms:.3f} ms "
            f"({put.floor_ratio:.2f}×) | {put.median_ms - put.floor_ms:.3f} ms | {put.p90_ms:.3f} ms | "
            f"{' + '.join(put.requests)}{keys} |"
        )
    for put in puts:
        if not put.profile:
            continue
        total = sum(ms for _, ms in put.profile)
        lines += [
            "",
            f"Where a put at a {put.size // 1000} KB conversation spends its CPU (cProfile, own time summed by "
            "package, as above):",
            "",
            "| package | share of profiled time | ≈ of the median |",
            "|---|---|---|",
        ]
        lines += [
            f"| `{name}` | {ms / total:.0%} | {put.median_ms * ms / total:.2f} ms |" for name, ms in put.profile[:12]
        ]
    lines.append("")
    return lines


def _cold(cold: coldstart.ColdStart) -> list[str]:
    base = cold.baseline
    lines = [
        "## The whole cold request",
        "",
        f"Each in {cold.runs} fresh interpreters (plus one discarded warm-up), alternating: from the start of the "
        "import to the answer (interpreter start-up left out; wall time of the whole process beside it). Baton: "
        f"`import baton_checkpoints.handlers.api`, then one plain save of a {coldstart_state()} state; without the "
        f"lean path: the same, but importing `{coldstart.EAGER_MODULE}`, which after the handler includes the "
        "deferred routers, imports the repositories' modules, makes the service logger and loads powertools' "
        "packages whole before the import ends (what the lean path leaves to the first request that needs it); the "
        "baseline "
        "(`bench/harness/baseline_boto3.py`): `import boto3`, a DynamoDB client, one GetItem. DynamoDB answered by a "
        "replay "
        "at botocore's `before-send`, for both. Lambda-like environment: dummy credentials in environment variables, "
        "no AWS config files, instance metadata disabled; every module from a .pyc.",
        "",
        "| | import → answer (median) | range | import alone | CPU | wall of the process | ratio | CPU ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for samples in (base, *cold.targets):
        ratio = "1" if samples is base else f"{cold.ratio(samples):.2f}×"
        cpu_ratio = "1" if samples is base else f"{cold.cpu_ratio(samples):.2f}×"
        lines.append(
            f"| {samples.label} | {samples.median_ms:.1f} ms | {min(samples.total_ms):.0f}–"
            f"{max(samples.total_ms):.0f} ms | {samples.median_import_ms:.1f} ms | {samples.median_cpu_ms:.1f} ms | "
            f"{samples.median_wall_ms:.0f} ms | {ratio} | {cpu_ratio} |"
        )
    for samples in (base, *cold.targets):
        lines += ["", f"Where the time goes, {samples.label} (medians):", "", "| phase | ms |", "|---|---|"]
        lines += [f"| {what} | {ms:.1f} |" for what, ms in samples.median_phases()]
    for samples in cold.targets:
        absent = [m for m in coldstart.WATCHED if m not in samples.loaded]
        lines += [
            "",
            f"After `import {samples.module}` (before the request): loaded "
            f"{', '.join(f'`{m}`' for m in samples.loaded) or 'none'}; not loaded "
            f"{', '.join(f'`{m}`' for m in absent) or 'none'}.",
        ]
    if cold.profile is not None:
        profile, baseline = cold.profile, cold.baseline_profile
        base_packages = baseline.packages if baseline is not None else {}
        added = sorted(profile.packages, key=lambda p: profile.packages[p] - base_packages.get(p, 0.0), reverse=True)
        lines += [
            "",
            f"What the cold request imports, by package, against the baseline (`-X importtime` self time, medians of "
            f"{coldstart.PROFILE_RUNS} runs: {profile.total_ms:.0f} ms against "
            f"{baseline.total_ms if baseline else 0:.0f} ms; the tool adds a little). Largest additions first:",
            "",
            "| package | Baton's cold request | baseline | added |",
            "|---|---|---|---|",
            *(
                f"| `{name}` | {profile.packages[name]:.1f} ms | {base_packages.get(name, 0.0):.1f} ms | "
                f"{profile.packages[name] - base_packages.get(name, 0.0):+.1f} ms |"
                for name in added[:14]
            ),
            "",
            "Heaviest modules the baseline does not load:",
            "",
            "| module | self | cumulative |",
            "|---|---|---|",
            *(
                f"| `{name}` | {own:.1f} ms | {total:.1f} ms |"
                for name, own, total in profile.heaviest(14, unless_in=baseline)
            ),
        ]
        if cold.eager_profile is not None:
            eager = cold.eager_profile
            kept_off = [m for m in eager.modules if m not in profile.modules]
            lines += [
                "",
                f"What the lean path keeps off the cold request: the modules the request without it "
                f"(`{coldstart.EAGER_MODULE}`) imports and the lean one does not, {len(kept_off)} of them, "
                f"{sum(eager.modules[m][0] for m in kept_off):.0f} ms of `-X importtime` self time; the heaviest:",
                "",
                "| module | self | cumulative |",
                "|---|---|---|",
                *(
                    f"| `{name}` | {own:.1f} ms | {total:.1f} ms |"
                    for name, own, total in eager.heaviest(12, unless_in=profile)
                ),
            ]
    lines.append("")
    return lines


def coldstart_state() -> str:
    """How the cold request's state is described."""
    return f"{warm.WARM_SIZE // 1000} KB conversation"


def _how(figures: Figures) -> list[str]:
    return [
        "## How the figures are made",
        "",
        "- **Isolation.** Each client runs in its own process: Baton from the repository's `.venv`, through "
        "`baton_checkpoints.handlers.api.handler` with API Gateway events only; "
        "`langgraph-checkpoint-amazon-dynamodb` from "
        "`bench/.venv-peer-amazon` and `langgraph-checkpoint-aws` from `bench/.venv-peer-aws` (the amazon saver's "
        "`aioboto3` pins a botocore the aws saver cannot use, and its module imports `aioboto3` even for the "
        "synchronous API, so each has an isolated environment, created by `make bench` from "
        "`bench/requirements-peer-*.txt`). The savers' synchronous API: `put` of the thread's next checkpoint (the "
        "state's fields as channels), `get_tuple` of the latest. Tables: Baton's from `baton_checkpoints.store.schema."
        "ensure_table`; the amazon saver creates its own (`deploy=True`); the aws saver expects one with string keys "
        "`PK`/`SK` (its CloudFormation sample's schema), created here. Savers use their defaults (no TTL).",
        "- **Own CPU** is `time.process_time()` of the client's process around the one call: moto runs in another "
        "process, so its time is left out; everything the client does (validation, serializing, compressing, "
        "botocore's signing and parsing, Baton's access log) is in.",
        "- **S3 requests** reach the same moto server, path-style; the meter counts them by operation (method, path "
        "and query tell it: PUT of a key is a PutObject, GET a GetObject, HEAD a HeadObject, PUT `?tagging` a "
        "PutObjectTagging) with the bytes sent and received and the bytes each written object stores. Costs are "
        "those counts and the units at on-demand prices (`bench/billing/prices.py`).",
        "- **Requests, bytes and units** come from the moto server's own metering (`bench/harness/meter.py`): every "
        "request's "
        "operation and body sizes, and the old and new image of every item a write touched and the whole items a read "
        "read, fetched through moto's API outside the client's clock. Units follow DynamoDB's documented rules "
        "(`bench/billing/capacity.py`): item size = names + values; a write costs ceil(max(old, new) / 1 KB) per item, "
        "transactions twice; each index entry (from DescribeTable: projected attributes + keys + 100 B) costs a put "
        "when created or when its projected attributes change, a delete when removed, both when its key changes; "
        "consistent reads ceil(size / 4 KB), eventual half; a Query sums the items it reads before rounding.",
        "- **Counts** shown are what most repetitions gave; any repetition that gave another is listed below (Baton "
        "caches an API key for 60 s, so a run longer than that shows one repetition a minute that reads the key "
        "again: one more GetItem). Byte counts are medians (compressed sizes move by a byte or two).",
        "",
    ]


def _oddities(figures: Figures) -> list[str]:
    notes = []
    for client in figures.clients:
        for size in figures.sizes:
            for operation in ("create", "update", "read"):
                op = figures.op(client, size, operation)
                label = f"{figures.labels.get(client, client)}, {size_label(size)}, {operation}"
                made = op["metered"].get("shape") or []
                errors = op["metered"].get("errors") or []
                refused = f"; DynamoDB answered {', '.join(errors)}" if errors else ""
                for detail, n in op["failures"]:
                    sent = f" (having sent {requests_text(made)}{refused})" if made else " (no DynamoDB request)"
                    notes.append(f"{label}: {n} of {op['reps']} failed: {detail[:200]}{sent}")
                for other, n in op["other_metered"]:
                    notes.append(
                        f"{label}: {n} of {op['reps']} repetitions metered differently: "
                        f"{requests_text(other['shape'])}, {other['write_units']} WU, {other['read_units']:g} RU"
                    )
    return notes
