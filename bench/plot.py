"""The report's plot: write units per save and item bytes against state size, Baton beside the LangGraph savers.

Runs in `bench/.venv-peer-aws` (where the benchmark installs matplotlib, so that the repository's own environment
does not carry it): `python bench/plot.py RESULTS.json OUT.png`, RESULTS being what `sidebyside.py` summarized.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

STYLES = {
    "baton": {"color": "#1f6feb", "marker": "o", "linewidth": 2.5},
    "amazon": {"color": "#d1242f", "marker": "s", "linewidth": 1.5},
    "aws": {"color": "#9a6700", "marker": "^", "linewidth": 1.5},
    "aws-gzip": {"color": "#9a6700", "marker": "v", "linewidth": 1.5, "linestyle": "--"},
}


def series(results: dict[str, Any], client: str, figure: str) -> tuple[list[float], list[float]]:
    """(state KB, figure) of the second save (the steady state), where the save succeeded."""
    sizes, values = [], []
    for size, operations in sorted(results[client].items(), key=lambda kv: int(kv[0])):
        update = operations["update"]
        if update["ok"] and update["metered"].get(figure) is not None:
            sizes.append(int(size) / 1000)
            values.append(update["metered"][figure])
    return sizes, values


def main(source: Path, target: Path) -> None:
    """Draw the two panels and write the PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = json.loads(source.read_text(encoding="utf-8"))
    results, labels = summary["results"], summary["labels"]
    figure, (units, sizes) = plt.subplots(1, 2, figsize=(11, 4.4), dpi=110)
    panels = (
        (units, "write_units", "write units per save (index writes included)"),
        (sizes, "item_bytes", "bytes stored per save (items, as DynamoDB sizes them)"),
    )
    for axes, key, title in panels:
        for client in summary["clients"]:
            x, y = series(results, client, key)
            label = labels.get(client, client)
            failed = [f"{int(s) // 1000}" for s in summary["sizes"] if int(s) / 1000 not in x]
            if failed:
                label += f" (fails at {', '.join(failed)} KB)"
            if x:
                axes.plot(x, y, label=label, **STYLES.get(client, {}))
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel("state size (KB of canonical JSON)")
        axes.set_title(title, fontsize=10)
        axes.grid(True, which="both", alpha=0.3)
        axes.set_xticks([int(s) / 1000 for s in summary["sizes"]])
        axes.set_xticklabels([f"{int(s) // 1000}" for s in summary["sizes"]])
    units.legend(fontsize=9)
    figure.suptitle("A second save over an existing checkpoint, per state size (conversation states, one moto)")
    figure.tight_layout()
    figure.savefig(target)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
