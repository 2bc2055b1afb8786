#!/usr/bin/env python3
"""Summarise pairs.sh runs. usage: summary.py DIR NAME [NAME...]
Per binary NAME: for each op, canrt p50/p99 (ns; YCSB: ops/s) per run, the medians, and the
median over runs of reply-wort / canrt and reply-woart / canrt (latency: baseline p50 / canrt p50;
YCSB throughput: canrt / baseline), plus canrt's client and server CPU per op."""
import glob, json, statistics, sys

OPS = [("put", 1), ("put-random", 1), ("update", 1), ("get", 1), ("range-10", 1),
       ("ycsb-write-only", 1), ("ycsb-write-only", 2), ("ycsb-50:50", 1), ("ycsb-50:50", 2),
       ("ycsb-95:5", 1), ("ycsb-95:5", 2), ("ycsb-read-only", 1), ("ycsb-read-only", 2)]

def load(path):
    recs = {}
    for line in open(path):
        line = line.strip()
        if line:
            r = json.loads(line)
            recs[(r["design"], r["op"], r["threads"])] = r
    return recs

med = statistics.median
d = sys.argv[1]
for name in sys.argv[2:]:
    files = sorted(glob.glob(f"{d}/{name}-*.json"))
    runs = [load(f) for f in files]
    print(f"== {name}: {len(files)} runs")
    print(f"{'op':<18}{'thr':>3} {'canrt p50 (ycsb ops/s) per run':>34} {'med':>9} {'p99 med':>9} "
          f"{'rw/canrt':>16} {'rwoart/canrt':>16} {'cli cpu':>8} {'srv cpu':>8}")
    for op, t in OPS:
        y = op.startswith("ycsb")
        cs, p99, r1, r2, cc, sc = [], [], [], [], [], []
        for recs in runs:
            c = recs.get(("canrt", op, t))
            if not c:
                continue
            v = c["ops_per_s"] if y else c["p50_ns"]
            cs.append(v); p99.append(c["p99_ns"]); cc.append(c["cpu_ns_per_op"]); sc.append(c["server_cpu_ns_per_op"])
            for base, out in (("reply-wort", r1), ("reply-woart", r2)):
                b = recs.get((base, op, t))
                if b:
                    bv = b["ops_per_s"] if y else b["p50_ns"]
                    out.append(v / bv if y else bv / v)
        if not cs:
            continue
        f = lambda xs: "/".join(f"{x:.0f}" for x in xs)
        g = lambda xs: f"{med(xs):.2f}" + f" [{min(xs):.2f}-{max(xs):.2f}]" if xs else "-"
        print(f"{op:<18}{t:>3} {f(cs):>34} {med(cs):>9.0f} {med(p99):>9.0f} {g(r1):>16} {g(r2):>16} "
              f"{med(cc):>8.0f} {med(sc):>8.0f}")
    for recs in runs:
        c = recs.get(("canrt", "put", 1))
        if c:
            print(f"  put: atomics/op {c.get('atomics_per_op',0):.2f} reads/op {c.get('reads_per_op',0):.2f} "
                  f"notifies/op {c.get('notifies_per_op',0):.3f} post fallbacks/op {c.get('post_fallbacks_per_op',0):.3f} "
                  f"apply waits/op {c.get('apply_waits_per_op',0):.3f}")
