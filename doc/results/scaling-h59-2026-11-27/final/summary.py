#!/usr/bin/env python3
"""summary.py FILE.jsonl...: medians of CPU ns per insert at 1 and 2 threads, the median [min-max]
of the adjacent pairs' 2T/1T CPU ratio, the median 2T/1T throughput ratio, the 2T blocked share."""
import json, statistics as S, sys
for f in sys.argv[1:]:
    rows = [json.loads(l) for l in open(f)]
    t1 = [r for r in rows if r['threads'] == 1]; t2 = [r for r in rows if r['threads'] == 2]
    c1 = [r['cpu_ns_per_op'] for r in t1]; c2 = [r['cpu_ns_per_op'] for r in t2]
    m1 = [r['mops_per_s'] for r in t1]; m2 = [r['mops_per_s'] for r in t2]
    rat = [b / a for a, b in zip(c1, c2)]
    bl = [r['epoch_blocked'] / max(1, r['epoch_tries']) for r in t2 if 'epoch_blocked' in r]
    print(f"{f.split('/')[-1]:<28} pairs {len(rat)}  CPU ns 1T {S.median(c1):.0f} 2T {S.median(c2):.0f}  "
          f"2T/1T CPU {S.median(rat):.2f} [{min(rat):.2f}-{max(rat):.2f}]  Mops/s 2T/1T {S.median([b / a for a, b in zip(m1, m2)]):.2f}"
          + (f"  blocked tries {100 * S.median(bl):.0f}%" if bl else ""))
