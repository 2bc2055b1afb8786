#!/usr/bin/env python3
"""The table of scripts/device_checks.sh's "ablate" part: median CPU ns per insert (and Mops/s
for the multi-thread load) per index, variant and thread count, from its ablate.jsonl.

    python3 scripts/device_ablate_table.py ablate.jsonl > ablate.md
"""
import json
import statistics
import sys
from collections import defaultdict


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    cpu = defaultdict(list)
    mops = defaultdict(list)
    for line in open(sys.argv[1]):
        r = json.loads(line)
        k = (r["index"], r["variant"], int(r.get("threads", 1)))
        cpu[k].append(float(r["cpu_ns_per_op"]))
        mops[k].append(float(r["mops_per_s"]))
    if not cpu:
        print("no records", file=sys.stderr)
        return 1
    print("| index | variant | threads | runs | CPU ns/op, median [min-max] | Mops/s, median | speedup over 1 thread |")
    print("|---|---|---:|---:|---|---:|---:|")
    for k in sorted(cpu):
        c, m = cpu[k], mops[k]
        one = mops.get((k[0], k[1], 1))
        up = f"{statistics.median(m) / statistics.median(one):.2f}x" if one and k[2] != 1 else ""
        print(f"| {k[0]} | {k[1]} | {k[2]} | {len(c)} | {statistics.median(c):.0f} [{min(c):.0f}-{max(c):.0f}] "
              f"| {statistics.median(m):.3f} | {up} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
