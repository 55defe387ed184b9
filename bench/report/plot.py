"""The report's plot: what a second save and a read cost against state size, Baton beside the LangGraph savers.

Four panels, state size on a log scale from 1 KB to 2 MB: write units per save, bytes stored per save (the items
and any S3 object), and the cost in requests of a million saves and of a million reads at on-demand prices
(`bench/billing/prices.py`: write and read units, S3 PUT and GET requests).

Runs in `bench/.venv-peer-aws` (where the benchmark installs matplotlib, so that the repository's own environment
does not carry it), the repository's root on `PYTHONPATH`: `python -m bench.report.plot RESULTS.json OUT.png`,
RESULTS being what `bench/harness/sidebyside.py` summarized.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.billing import prices

STYLES = {
    "baton": {"color": "#1f6feb", "marker": "o", "linewidth": 2.5},
    "amazon": {"color": "#d1242f", "marker": "s", "linewidth": 1.5},
    "aws": {"color": "#9a6700", "marker": "^", "linewidth": 1.5},
    "aws-gzip": {"color": "#9a6700", "marker": "v", "linewidth": 1.5, "linestyle": "--"},
}


def size_label(size: int) -> str:
    """`4`, `256`, `2 MB` (ticks in KB; a megabyte or more named so)."""
    return f"{size // 1_000_000} MB" if size >= 1_000_000 and size % 1_000_000 == 0 else f"{size // 1000}"


def figure_of(operation: dict[str, Any], figure: str) -> float | None:
    """One plotted figure of an operation's summary (`sidebyside.OperationSamples.summary`)."""
    metered = operation["metered"]
    s3 = metered.get("s3_requests") or {}
    if figure == "stored_bytes":
        return float(metered["item_bytes"] + (metered.get("s3_stored_bytes") or 0))
    if figure == "cost":
        return prices.per_million(metered["write_units"], metered["read_units"], s3)
    value = metered.get(figure)
    return None if value is None else float(value)


def series(results: dict[str, Any], client: str, operation: str, figure: str) -> tuple[list[float], list[float]]:
    """(state KB, figure) of an operation where every repetition succeeded."""
    sizes, values = [], []
    for size, operations in sorted(results[client].items(), key=lambda kv: int(kv[0])):
        done = operations[operation]
        value = figure_of(done, figure) if done["reps"] and done["ok"] == done["reps"] else None
        if value is not None:
            sizes.append(int(size) / 1000)
            values.append(value)
    return sizes, values


def main(source: Path, target: Path) -> None:
    """Draw the four panels and write the PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = json.loads(source.read_text(encoding="utf-8"))
    results, labels = summary["results"], summary["labels"]
    figure, axes_grid = plt.subplots(2, 2, figsize=(12, 8.4), dpi=110)
    panels = (
        (axes_grid[0][0], "update", "write_units", "write units per save (index writes included)"),
        (axes_grid[0][1], "update", "stored_bytes", "bytes stored per save (items + S3 object)"),
        (axes_grid[1][0], "update", "cost", "$ per million saves (DynamoDB units + S3 requests)"),
        (axes_grid[1][1], "read", "cost", "$ per million reads of the latest (units + S3 requests)"),
    )
    for axes, operation, key, title in panels:
        for client in summary["clients"]:
            x, y = series(results, client, operation, key)
            label = labels.get(client, client)
            failed = [size_label(int(s)) for s in summary["sizes"] if int(s) / 1000 not in x]
            if failed:
                label += f" (fails at {', '.join(failed)})"
            if x:
                axes.plot(x, y, label=label, **STYLES.get(client, {}))
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel("state size (KB of canonical JSON)")
        axes.set_title(title, fontsize=10)
        axes.grid(True, which="both", alpha=0.3)
        axes.set_xticks([int(s) / 1000 for s in summary["sizes"]])
        axes.set_xticklabels([size_label(int(s)) for s in summary["sizes"]])
    axes_grid[0][0].legend(fontsize=9)
    figure.suptitle("A second save over an existing checkpoint and a read of it, per state size (one moto)")
    figure.tight_layout()
    figure.savefig(target)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
