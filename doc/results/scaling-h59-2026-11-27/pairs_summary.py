#!/usr/bin/env python3
"""pairs_summary.py [--cpu] FILE.jsonl...: per file of adjacent 1-thread/2-thread runs (same
process, same moment), the median (min-max) of their 2T/1T ratio and the share of the 2-thread
runs' epoch advance tries that were blocked.
  default: user ns per insert (the records of this branch's bench; pairs/, woart/)
  --cpu:   CPU ns per insert and the 2T/1T throughput (records of any bench, main's too; final/)"""
import json, statistics as S, sys
cpu = sys.argv[1:2] == ['--cpu']
for f in sys.argv[2 if cpu else 1:]:
    rows = [json.loads(l) for l in open(f)]
    t1 = [r for r in rows if r['threads'] == 1]; t2 = [r for r in rows if r['threads'] == 2]
    c1 = [r['cpu_ns_per_op'] for r in t1]; c2 = [r['cpu_ns_per_op'] for r in t2]
    bl = [r['epoch_blocked'] / max(1, r['epoch_tries']) for r in t2 if 'epoch_blocked' in r]
    if cpu:
        m1 = [r['mops_per_s'] for r in t1]; m2 = [r['mops_per_s'] for r in t2]
        rat = [b / a for a, b in zip(c1, c2)]
        print(f"{f.split('/')[-1]:<28} pairs {len(rat)}  CPU ns 1T {S.median(c1):.0f} 2T {S.median(c2):.0f}  "
              f"2T/1T CPU {S.median(rat):.2f} [{min(rat):.2f}-{max(rat):.2f}]  Mops/s 2T/1T {S.median([b / a for a, b in zip(m1, m2)]):.2f}"
              + (f"  blocked tries {100 * S.median(bl):.0f}%" if bl else ""))
        continue
    u1 = [r['user_ns_per_op'] for r in t1]; u2 = [r['user_ns_per_op'] for r in t2]
    rat = [b / a for a, b in zip(u1, u2)]
    print(f"{f.split('/')[-1]:<32} pairs {len(rat):>2}  user ns 1T {S.median(u1):4.0f} 2T {S.median(u2):4.0f}  "
          f"2T/1T {S.median(rat):.2f} [{min(rat):.2f}-{max(rat):.2f}]  cpu ns 1T {S.median(c1):4.0f} 2T {S.median(c2):4.0f}  "
          f"2T tries blocked {100 * S.median(bl):.0f}%")
