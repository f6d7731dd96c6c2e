#!/usr/bin/env python3
"""Draws claims per second against N for the floor, ferro-ipam and the in-cluster provider from
the results.json that `make bench` writes: one panel per pool kind, one line per subject and pool
count, and the configurations that are not a line (many pools with one claim each, pool-edit
storms) as separate markers.

Usage: bench-plot.py RESULTS_JSON OUTPUT_PNG
Needs matplotlib (pip install matplotlib, or Debian's python3-matplotlib); uses nothing newer
than matplotlib 3.3."""
import json
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

SUBJECTS = {
    "floor": dict(color="#888888", marker="s", label="floor (same writes, no allocation)"),
    "ferro-ipam": dict(color="#c0392b", marker="o", label="ferro-ipam"),
    "in-cluster": dict(color="#2471a3", marker="^", label="in-cluster provider v1.1.0"),
}
LINESTYLES = ["-", "--", ":", "-."]
# Above this many pools, a configuration is one of many pools (each a /24), not a line.
MAX_WIDE_POOLS = 256


def configuration(run):
    """(kind, pools, edits per second) of a run; results.json of older benchmarks have neither
    kind nor edits."""
    return run.get("kind", "addresses"), run["pools"], run.get("edits_per_second", 0) or 0


def mark(ax, point, style, marker, size, label, note, rise):
    """One configuration as a lone marker with a note beside it."""
    ax.plot([point[0]], [point[1]], color=style["color"], marker=marker, markersize=size, linestyle="none", label=label)
    ax.annotate(note, point, textcoords="offset points", xytext=(6, rise), fontsize=7)


def main(source, target):
    with open(source) as f:
        results = json.load(f)
    rates = defaultdict(list)
    for r in results.get("runs", []):
        if not r.get("seconds"):
            continue
        kind, pools, edits = configuration(r)
        rates[(kind, pools, edits, r["subject"], r["claims"])].append(r["claims"] / r["seconds"])
    if not rates:
        print(f"no allocation runs in {source}: nothing to draw")
        return
    medians = {key: statistics.median(values) for key, values in rates.items()}
    kinds = sorted({key[0] for key in medians})
    fig, axes = plt.subplots(1, len(kinds), figsize=(7.5 * len(kinds), 5.2), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        here = {key: rate for key, rate in medians.items() if key[0] == kind}
        line_pools = sorted({p for (_, p, e, _, _) in here if e == 0 and p <= MAX_WIDE_POOLS})
        for subject, style in SUBJECTS.items():
            for index, pools in enumerate(line_pools):
                points = sorted(
                    (n, rate) for (_, p, e, s, n), rate in here.items() if s == subject and p == pools and e == 0
                )
                if points:
                    ax.plot(
                        [n for n, _ in points],
                        [rate for _, rate in points],
                        color=style["color"],
                        marker=style["marker"],
                        linestyle=LINESTYLES[index % len(LINESTYLES)],
                        label=f"{style['label']}, {pools} pool" + ("" if pools == 1 else "s"),
                    )
            # Many pools (one claim or a few each): a star per configuration.
            many = sorted((p, n, rate) for (_, p, e, s, n), rate in here.items() if s == subject and e == 0 and p > MAX_WIDE_POOLS)
            for number, (pools, n, rate) in enumerate(many):
                mark(ax, (n, rate), style, "*", 14, f"{style['label']}, {pools} pools" if number == 0 else None,
                     f"{pools} pools", 4)
            # Storms: a cross per configuration.
            storms = sorted((e, p, n, rate) for (_, p, e, s, n), rate in here.items() if s == subject and e > 0)
            for number, (edits, pools, n, rate) in enumerate(storms):
                mark(ax, (n, rate), style, "X", 11, f"{style['label']}, pool-edit storm" if number == 0 else None,
                     f"{pools} pools, {edits} edits/s", -10)
        ax.set_xscale("log")
        ax.set_ylim(bottom=0, top=1.2 * max(here.values()))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(sorted({n for (_, _, _, _, n) in here}))
        ax.set_xlabel("claims created at once (N)")
        ax.set_ylabel("claims per second until all have addresses (median)")
        ax.set_title(f"pools of {kind}")
        ax.grid(True, which="both", alpha=0.3)
        # Below the panel, so that it covers no point.
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=7)
    setup = results.get("setup", {})
    fig.suptitle(f"End to end on one kube-apiserver ({setup.get('cpus', '?')} CPUs)", fontsize=11)
    fig.tight_layout()
    fig.savefig(target, dpi=110, bbox_inches="tight")
    print(f"wrote {target}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
