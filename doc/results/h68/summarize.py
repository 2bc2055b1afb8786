#!/usr/bin/env python3
"""Summarises doc/results/h68/{short,full}-{base,new}-N.jsonl: put-random mean/p50/p99 and resize
share, and the canrt/reply-wort put-random mean ratio that `wort reproduce`'s write-latency
verdict uses (scripts/report.py canrt_section: mean wall time per op = seconds/ops; 'holds' when
within 1.5x of the paper's 1.67-1.72x, i.e. reply-wort/canrt >= 1.147)."""
import glob, json, os, statistics as st, sys
d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))  # the records folder (default: this one)
def recs(f):
    return [json.loads(l) for l in open(f) if l.strip()]
def get(rs, design, op, threads=1):
    for r in rs:
        if r.get("design") == design and r.get("op") == op and r.get("threads", 1) == threads:
            return r
def mean_us(r):
    return r["seconds"] * 1e6 * r.get("threads", 1) / r["ops"]
for kind in ["short", "full"]:
    print(f"## {kind}")
    for op in ["load", "put", "update", "put-random"] + (["range-10", "get"] if kind == "full" else []):
        row = []
        for v in ["base", "new"]:
            ms, p50, p99, rz, ratio = [], [], [], [], []
            for f in sorted(glob.glob(f"{d}/{kind}-{v}-*.jsonl")):
                rs = recs(f)
                r = get(rs, "canrt", op)
                if not r:
                    continue
                ms.append(mean_us(r)); p50.append(r["p50_ns"] / 1e3); p99.append(r["p99_ns"] / 1e3)
                if r.get("resizes_per_op") is not None:
                    rz.append(100 * r["resizes_per_op"])
                o = get(rs, "reply-wort", op)
                if o:
                    ratio.append(mean_us(o) / mean_us(r))
            if not ms:
                continue
            s = (f"{v}: mean {st.median(ms):.2f} us [{min(ms):.2f}-{max(ms):.2f}], p50 {st.median(p50):.2f}, "
                 f"p99 {st.median(p99):.1f} [{min(p99):.1f}-{max(p99):.1f}]")
            if rz:
                s += f", resize {st.median(rz):.2f}%"
            if ratio:
                s += f", reply-wort/canrt mean {st.median(ratio):.2f}x [{min(ratio):.2f}-{max(ratio):.2f}]"
            row.append(s)
        print(f"- {op}: " + "; ".join(row))
