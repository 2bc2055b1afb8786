#!/usr/bin/env python3
"""ycsb-20k: per binary, mix and thread count, canrt and reply-wort ops/s per run and the ratio."""
import json, glob, statistics, os
d = os.path.dirname(os.path.abspath(__file__))
for n in ("base", "new"):
    for op in ("ycsb-write-only", "ycsb-50:50"):
        for t in (1, 2):
            cs, rs, ratios, p50 = [], [], [], []
            for f in sorted(glob.glob(f"{d}/{n}-*.json")):
                recs = {}
                for l in open(f):
                    r = json.loads(l); recs[(r["design"], r["op"], r["threads"])] = r
                c, w = recs[("canrt", op, t)], recs[("reply-wort", op, t)]
                cs.append(c["ops_per_s"]); rs.append(w["ops_per_s"]); ratios.append(c["ops_per_s"] / w["ops_per_s"]); p50.append(c["p50_ns"])
            print(n, op, t, "canrt", "/".join("%.0f" % x for x in cs), "reply-wort", "/".join("%.0f" % x for x in rs),
                  "ratio", "/".join("%.2f" % x for x in ratios), "median %.2f" % statistics.median(ratios),
                  "canrt p50 ns", "/".join("%.0f" % x for x in p50))
