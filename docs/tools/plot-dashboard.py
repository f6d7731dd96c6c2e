#!/usr/bin/env python3
"""Draws the main panels of deploy/dashboard/ferro-ipam.json from a real scrape.

Input: the panels.json that the e2e Prometheus test writes with FERRO_IPAM_METRICS_DUMP=DIR (each
dashboard query, run as a range query over the scenario). Output: a PNG. `make metrics-plot` runs
both steps. Needs matplotlib (pip install matplotlib).

    plot-dashboard.py DIR OUT.png
"""

import json
import math
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = [
    ("Pool usage", "used / total", "percent"),
    ("Free addresses", "addresses", None),
    ("Allocations, releases and exhaustions", "per second", None),
    ("Allocation latency", "seconds", None),
    ("Claims waiting", "claims", None),
    ("Reconciles / s", "per second", None),
]


def legend(fmt, metric):
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt)
    # Pools are shown without their (long, generated) namespace.
    return re.sub(r"^(\w+ )?[\w.-]*/", r"\1", text).strip() or "value"


def main(directory, out):
    with open(f"{directory}/panels.json") as f:
        queries = json.load(f)
    start = min(float(v[0]) for q in queries for s in q["result"] for v in s["values"][:1])
    fig, axes = plt.subplots(3, 2, figsize=(14, 11))
    for ax, (title, unit, scale) in zip(axes.flat, PANELS):
        for query in (q for q in queries if q["panel"] == title):
            for series in query["result"]:
                points = [(float(t) - start, float(v)) for t, v in series["values"]]
                points = [(t, v * 100 if scale == "percent" else v) for t, v in points if not math.isnan(v)]
                if points:
                    ax.plot(*zip(*points), label=legend(query["legend"], series["metric"]), linewidth=1.4)
        ax.set_title(title)
        ax.set_xlabel("seconds into the scenario")
        ax.set_ylabel("% used" if scale == "percent" else unit)
        if scale == "percent":
            ax.axhline(90, color="red", linestyle="--", linewidth=0.8, label="alert: 90 %")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle("ferro-ipam dashboard, main panels (e2e scenario scraped by Prometheus every second)")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
