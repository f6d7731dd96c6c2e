#!/usr/bin/env python3
"""Draws claims per second against N for the floor, ferro-ipam and the in-cluster provider,
one panel per pool count, from the results.json that `make bench` writes.

Usage: bench-plot.py RESULTS_JSON OUTPUT_PNG
Needs matplotlib (pip install matplotlib)."""
import json
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

STYLE = {
    "floor": dict(color="#888888", marker="s", linestyle="--", label="floor (same writes, no allocation)"),
    "ferro-ipam": dict(color="#c0392b", marker="o", label="ferro-ipam"),
    "in-cluster": dict(color="#2471a3", marker="^", label="in-cluster provider v1.1.0"),
}


def main(source, target):
    with open(source) as f:
        results = json.load(f)
    runs = defaultdict(list)
    for r in results["runs"]:
        runs[(r["pools"], r["subject"], r["claims"])].append(r["claims"] / r["seconds"])
    pool_counts = sorted({p for p, _, _ in runs})
    fig, axes = plt.subplots(1, len(pool_counts), figsize=(5.5 * len(pool_counts), 4.2), squeeze=False)
    for ax, pools in zip(axes[0], pool_counts):
        for subject, style in STYLE.items():
            points = sorted((n, statistics.median(v)) for (p, s, n), v in runs.items() if p == pools and s == subject)
            if points:
                ax.plot([n for n, _ in points], [r for _, r in points], **style)
        ax.set_xscale("log")
        ax.set_ylim(bottom=0, top=1.15 * max(statistics.median(v) for (p, _, _), v in runs.items() if p == pools))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(sorted({n for (p, _, n) in runs if p == pools}))
        ax.set_xlabel("claims created at once (N)")
        ax.set_title(f"{pools} pool" + ("" if pools == 1 else "s"))
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("claims per second until all have addresses (median)")
    axes[0][-1].legend(loc="lower right", fontsize=8)
    setup = results.get("setup", {})
    fig.suptitle(f"End to end on one kube-apiserver ({setup.get('cpus', '?')} CPUs)", fontsize=11)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    print(f"wrote {target}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
