#!/usr/bin/env python3
"""wort serve's ops/s over memcached's, per server thread count and get/set mix, from the rows
that scripts/bench_server.sh prints (PATTERN=mix; memcached's row and the wort kind's row of each
(threads, mix) in the same round are paired in order). Prints a markdown table: the median ratio
with its range over the rounds, and the server CPU per request of each (median).

    python3 scripts/memcached_ratios.py FILE [FILE...]
"""
import statistics
import sys
from collections import defaultdict

rows = defaultdict(lambda: defaultdict(list))  # (threads, value, op) -> server kind -> [(ops, cpu)]
for path in sys.argv[1:]:
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 11 or p[0].startswith('#') or p[0] == 'server':
                continue
            kind = 'memcached' if p[0].startswith('memcached') else p[0]
            rows[(int(p[1]), int(p[2]), p[3])][kind].append((float(p[5]), float(p[9])))
if not rows:
    sys.exit('memcached_ratios: no rows')


def order(op):  # MIX100 (gets only) first, MIX0 (sets only) last
    return -int(op[3:]) if op.startswith('MIX') else 0


print('| server threads | value | gets % | kind | rounds | ops/s ratio, median [min-max] | ops/s kind / memcached (medians) | srv_cpu_us kind / memcached |')
print('|---:|---:|---:|---|---:|---|---|---|')
for (thr, value, op) in sorted(rows, key=lambda k: (k[0], k[1], order(k[2]))):
    by = rows[(thr, value, op)]
    mc = by.get('memcached', [])
    for kind, runs in sorted(by.items()):
        if kind == 'memcached':
            continue
        n = min(len(runs), len(mc))
        if n == 0:
            continue
        ratios = [runs[i][0] / mc[i][0] for i in range(n)]
        med = lambda xs: statistics.median(xs)
        print(f'| {thr} | {value} | {op[3:] if op.startswith("MIX") else op} | {kind} | {n} | '
              f'**{med(ratios):.2f}x** [{min(ratios):.2f}-{max(ratios):.2f}] | '
              f'{med([r[0] for r in runs[:n]]):,.0f} / {med([m[0] for m in mc[:n]]):,.0f} | '
              f'{med([r[1] for r in runs[:n]]):.2f} / {med([m[1] for m in mc[:n]]):.2f} |')
