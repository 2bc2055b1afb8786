#!/usr/bin/env python3
"""Medians [min-max] over the rounds (OUTDIR/round-N.jsonl from run.sh) of canrt's mean wall time
per op (seconds/ops: what `wort reproduce`'s write-latency verdict uses), its p50, its resize share,
and baseline/canrt ratios of the mean and the p50, per write phase. python3 summarize.py OUTDIR"""
import collections, glob, json, statistics as st, sys

d = sys.argv[1]
V = collections.defaultdict(list)
rounds = sorted(glob.glob(f"{d}/round-*.jsonl"))
for f in rounds:
    g = {(r["design"], r["op"]): r for r in map(json.loads, filter(str.strip, open(f))) if r.get("threads", 1) == 1}
    for op in ["put-string", "put-random", "put", "update", "load"]:
        c = g.get(("canrt", op))
        if not c:
            continue
        m = c["seconds"] / c["ops"]
        V[(op, "canrt mean us")].append(m * 1e6)
        V[(op, "canrt p50 us")].append(c["p50_ns"] / 1e3)
        V[(op, "canrt resize %")].append(100 * (c.get("resizes_per_op") or 0))
        for b in ["reply-wort", "reply-woart"]:
            o = g.get((b, op))
            if o:
                V[(op, f"{b}/canrt mean")].append(o["seconds"] / o["ops"] / m)
                V[(op, f"{b}/canrt p50")].append(o["p50_ns"] / c["p50_ns"])
print(f"{len(rounds)} rounds")
for (op, what), xs in V.items():
    print(f"{op:11s} {what:22s} {st.median(xs):8.2f} [{min(xs):.2f}-{max(xs):.2f}]")
