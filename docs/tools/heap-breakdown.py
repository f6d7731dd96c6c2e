#!/usr/bin/env python3
"""Groups a heaptrack profile of ferro-ipam by what holds the memory.

Usage:
    heaptrack_print -f PROFILE.zst --print-peaks 0 --print-allocators 0 --print-temporary 0 \
        --print-leaks 0 --print-flamegraph STACKS --flamegraph-cost-type peak
    python3 docs/tools/heap-breakdown.py STACKS CLAIMS

STACKS holds one line per allocation stack, `frame;frame;... bytes` (root first), the bytes it
held at the moment of the heap's peak. heaptrack names a frame `function (file.rs)` without its
module, and lists inlined frames out of order, so each stack goes to the group of the first
marker below (a file, or a file and function) that one of its last 30 frames matches; the
table gives megabytes and bytes per claim
(CLAIMS: claims in the cluster). The markers name the code's files: a file that is renamed or
split needs its marker changed here. How to take the profile: docs/perf-notes.md, Measuring.
"""

import collections
import re
import sys

# (marker on `file:function`, group), in order: a stack where the address feed calls the index
# is the index's.
MARKERS = [
    (r"^registry\.rs:", "index: registry (pools of each address)"),
    (r"^feed\.rs:brought", "address feed: the listing's names (until it ends)"),
    (r"^keys\.rs:", "holder keys (claim names)"),
    (r"^entry\.rs:", "index: holds and users of each address"),
    (r"^feed\.rs:", "address feed: each address's pool"),
    (r"^queue\.rs:", "claim queue"),
    (r"^(store|claims)\.rs:", "claim store (records, ids)"),
    (r"^addresses\.rs:", "IPAddress cache (records, ids)"),
    (r"^(dispatch|conn|decode|io|bytes_mut|collected)\.rs:", "HTTP buffers, pages being read"),
]


def frame(text):
    """`function (file.rs)` as `file.rs:function`."""
    function, _, file = text.rpartition(" (")
    return f"{file.rstrip(')')}:{function}"


def group_of(frames):
    near = [frame(text) for text in frames[-30:]]
    for marker, group in MARKERS:
        if any(re.search(marker, at) for at in near):
            return group
    return "other"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    stacks, claims = sys.argv[1], int(sys.argv[2])
    held = collections.Counter()
    for line in open(stacks, encoding="utf-8", errors="replace"):
        stack, _, cost = line.rstrip("\n").rpartition(" ")
        if cost.isdigit():
            held[group_of(stack.split(";"))] += int(cost)
    total = sum(held.values())
    print("| held by | MB | bytes per claim |\n|---|---:|---:|")
    for name, cost in held.most_common():
        print(f"| {name} | {cost / 1e6:.1f} | {cost / claims:.0f} |")
    print(f"| **heap at its peak** | **{total / 1e6:.1f}** | **{total / claims:.0f}** |")


if __name__ == "__main__":
    main()
