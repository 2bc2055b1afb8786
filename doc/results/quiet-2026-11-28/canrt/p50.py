#!/usr/bin/env python3
"""Medians over runs of CANRT's 1-thread p50 (ns) per phase and binary, with reply-wort's p50 over
canrt's: python3 p50.py [DIR] (files full-LABEL-N.jsonl from wort bench-remote --json)."""
import glob, json, os, re, statistics as st, sys
d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
runs = {}
for f in sorted(glob.glob(f"{d}/full-*-*.jsonl")):
    label = re.match(r"full-(.+)-\d+\.jsonl", os.path.basename(f)).group(1)
    rs = [json.loads(l) for l in open(f) if l.strip()]
    by = {(r.get("design"), r.get("op")): r for r in rs if r.get("threads", 1) == 1 and "p50_ns" in r}
    runs.setdefault(label, []).append(by)
ops = ["put", "put-random", "update", "get", "range-10"]
print("| binary | runs | " + " | ".join(f"{o} p50 (reply-wort/canrt)" for o in ops) + " |")
print("|---|---:|" + "---|" * len(ops))
for label, rr in runs.items():
    cells = []
    for o in ops:
        c = [r[("canrt", o)]["p50_ns"] for r in rr if ("canrt", o) in r]
        q = [r[("reply-wort", o)]["p50_ns"] / r[("canrt", o)]["p50_ns"] for r in rr if ("canrt", o) in r and ("reply-wort", o) in r]
        cells.append(f"{st.median(c):,.0f} ({st.median(q):.2f}x)" if c and q else "-")
    print(f"| {label} | {len(rr)} | " + " | ".join(cells) + " |")
