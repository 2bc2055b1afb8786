#!/usr/bin/env python3
"""Summarise pairs.sh runs: per binary, per run, canrt and reply-wort p50s and the ratio
reply-wort/canrt per op; medians over the runs. usage: summary.py DIR NAME [NAME...]"""
import glob, json, statistics, sys

OPS = ["put", "put-random", "update", "get", "range-10", "ycsb-write-only", "ycsb-50:50", "ycsb-95:5", "ycsb-read-only"]

def load(path):
    recs = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            recs[(r["design"], r["op"])] = r
    return recs

def metric(r, op):
    # YCSB: throughput (ops/s); else p50 latency (ns)
    return r["ops_per_s"] if op.startswith("ycsb") else r["p50_ns"]

d = sys.argv[1]
for name in sys.argv[2:]:
    files = sorted(glob.glob(f"{d}/{name}-*.json"))
    print(f"== {name}: {len(files)} runs ({', '.join(f.split('/')[-1] for f in files)})")
    print(f"{'op':<16} {'canrt p50 ns / ops/s':>28} {'reply-wort':>28} {'ratio rw/canrt (ycsb: canrt/rw)':>40}")
    for op in OPS:
        cs, rs, ratios = [], [], []
        for f in files:
            recs = load(f)
            c, w = recs.get(("canrt", op)), recs.get(("reply-wort", op))
            if not c or not w:
                continue
            cv, wv = metric(c, op), metric(w, op)
            cs.append(cv); rs.append(wv)
            ratios.append(cv / wv if op.startswith("ycsb") else wv / cv)
        if not cs:
            continue
        fmt = lambda xs: "/".join(f"{x:.0f}" for x in xs)
        print(f"{op:<16} {fmt(cs):>28} {fmt(rs):>28} {'/'.join(f'{x:.2f}' for x in ratios):>30} med {statistics.median(ratios):.2f}")
    extra = []
    for f in files:
        c = load(f).get(("canrt", "put"))
        if c:
            extra.append(f"quiet_p50 {c.get('quiet_p50_ns', -1):.0f} cpu {c['cpu_ns_per_op']:.0f} srv {c['server_cpu_ns_per_op']:.0f} rd/op {c.get('reads_per_op',0):.2f} B/op {c.get('bytes_read_per_op',0):.0f}")
    for e in extra:
        print("  put:", e)
