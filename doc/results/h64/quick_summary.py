#!/usr/bin/env python3
"""quick_summary.py DIR [NAME_A NAME_B]: per op, median [min-max] over the rounds of the canrt p50
(ns) and of the client's CPU per op (ns), for the A and the B binary of quick.sh."""
import glob, json, statistics, sys
d = sys.argv[1]
names = sys.argv[2:4] if len(sys.argv) >= 4 else ["A", "B"]
recs = {}
files = glob.glob(f"{d}/[AB]-*.json")
if files:  # quick.sh's output
    for f in files:
        b = f.split("/")[-1][0]
        for line in open(f):
            j = json.loads(line)
            recs.setdefault((b, j["op"]), []).append(j)
else:  # the folders kept here: one runs.jsonl with "binary" (A/B) and "round" added
    for line in open(f"{d}/runs.jsonl"):
        j = json.loads(line)
        recs.setdefault((j["binary"], j["op"]), []).append(j)
print(f"{len(recs.get(('A', 'put'), []))} rounds; p50 ns and client CPU ns per op: median [min-max]")
for op in ["put", "put-random", "update", "get", "ycsb-write-only"]:
    row = []
    for b, name in zip("AB", names):
        rs = recs.get((b, op), [])
        if not rs:
            continue
        p = [r["p50_ns"] for r in rs]
        c = [r["cpu_ns_per_op"] for r in rs]
        row.append(f"{name}: p50 {statistics.median(p):.0f} [{min(p):.0f}-{max(p):.0f}] cpu {statistics.median(c):.0f}")
    print(f"{op:<16} " + "   ".join(row))
