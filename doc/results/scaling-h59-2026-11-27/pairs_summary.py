#!/usr/bin/env python3
"""pairs_summary.py FILE.jsonl...: per file, the median user and CPU ns per insert at 1 and 2 threads,
and the median (min-max) of the 2T/1T ratio of user ns over adjacent pairs (same process, same
moment), and the share of the 2-thread runs' epoch advance tries that were blocked."""
import json, statistics as S, sys
for f in sys.argv[1:]:
    rows = [json.loads(l) for l in open(f)]
    t1 = [r for r in rows if r['threads'] == 1]; t2 = [r for r in rows if r['threads'] == 2]
    u1 = [r['user_ns_per_op'] for r in t1]; u2 = [r['user_ns_per_op'] for r in t2]
    c1 = [r['cpu_ns_per_op'] for r in t1]; c2 = [r['cpu_ns_per_op'] for r in t2]
    rat = [b / a for a, b in zip(u1, u2)]
    bl = [r['epoch_blocked'] / max(1, r['epoch_tries']) for r in t2]
    print(f"{f.split('/')[-1]:<32} pairs {len(rat):>2}  user ns 1T {S.median(u1):4.0f} 2T {S.median(u2):4.0f}  "
          f"2T/1T {S.median(rat):.2f} [{min(rat):.2f}-{max(rat):.2f}]  cpu ns 1T {S.median(c1):4.0f} 2T {S.median(c2):4.0f}  "
          f"2T tries blocked {100 * S.median(bl):.0f}%")
