#!/usr/bin/env python3
"""Groups a heaptrack profile of ferro-ipam by what holds the memory.

Usage:
    heaptrack_print -f PROFILE.zst --print-peaks 0 --print-allocators 0 --print-temporary 0 \
        --print-leaks 0 --print-flamegraph STACKS --flamegraph-cost-type peak
    python3 docs/tools/heap-breakdown.py STACKS CLAIMS

STACKS holds one line per allocation stack, `frame;frame;... bytes`, the bytes it held at the
moment of the heap's peak. Each stack goes to the first group whose frames match, in the order
below; the table gives megabytes and bytes per claim (CLAIMS: claims in the cluster).
"""

import collections
import re
import sys

# (group, test on the frames of one stack joined by ';', test on the frames after the store's
# apply_watcher_event when the group is one of the reflector store's)
GROUPS = [
    ("IPAddress cache (objects, keys, tables)", lambda s: "address_cache" in s or "AddressCacheWriter" in s),
    ("reflector stores", lambda s: "apply_watcher_event" in s),
    ("controller queues (kube's scheduler)",
     lambda s: re.search(r"pop_queue_message_into_pending|schedule_message|debounced_scheduler", s)),
    ("index (holds, users, registry)", lambda s: re.search(r"set_hold|add_user|upsert_pool|Registry|PoolEntry|index::", s)),
    ("listing pages being read", lambda s: "serde" in s and "deserialize" in s.lower()),
    ("HTTP buffers", lambda s: re.search(r"hyper|h2::|bytes_mut", s)),
]

STORE_PARTS = [
    ("reflector stores: keys' strings and objects' contents", lambda t: "clone" in t or "to_vec" in t or "to_object_ref" in t),
    ("reflector stores: hash tables", lambda t: "find_or_find_insert" in t or "reserve" in t),
    ("reflector stores: object structs", lambda t: True),
]


def group_of(frames):
    joined = ";".join(frames)
    for name, test in GROUPS:
        if test(joined):
            if name != "reflector stores":
                return name
            at = max(i for i, f in enumerate(frames) if "apply_watcher_event" in f)
            after = " ".join(frames[at + 1 : at + 6])
            return next(part for part, test in STORE_PARTS if test(after))
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
    print(f"| held by | MB | bytes per claim |\n|---|---:|---:|")
    for name, cost in held.most_common():
        print(f"| {name} | {cost / 1e6:.1f} | {cost / claims:.0f} |")
    print(f"| **heap at its peak** | **{total / 1e6:.1f}** | **{total / claims:.0f}** |")


if __name__ == "__main__":
    main()
