#!/usr/bin/env python3
"""Medians [min-max] over the runs of each binary (files PREFIX-LABEL-N.jsonl from wort bench-remote
--json): canrt mean wall time per op (seconds/ops, what `wort reproduce`'s write-latency verdict
uses), p50, the mean and p50 of the ops that asked for a resize (rz_), of the quiet ops, and
reply-wort/canrt ratios of mean and p50. python3 summarize.py DIR PREFIX."""
import glob,json,statistics as st,sys,collections
d=sys.argv[1]; pre=sys.argv[2]
V=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(f'{d}/{pre}-*.jsonl')):
    v=f.split('/')[-1][len(pre)+1:].rsplit('-',1)[0]
    rs=[json.loads(l) for l in open(f) if l.strip()]
    g={(r['design'],r['op'],r.get('threads',1)):r for r in rs}
    for op in ['put-random','put','update','load']:
        c=g.get(('canrt',op,1)); o=g.get(('reply-wort',op,1))
        if not c: continue
        m=c['seconds']*1e6/c['ops']
        V[v][op+' mean'].append(m); V[v][op+' p50'].append(c['p50_ns']/1e3)
        if c.get('resize_mean_ns'): V[v][op+' rz_mean'].append(c['resize_mean_ns']/1e3); V[v][op+' rz_p50'].append(c['resize_p50_ns']/1e3)
        if c.get('quiet_mean_ns'): V[v][op+' quiet_mean'].append(c['quiet_mean_ns']/1e3)
        if o: V[v][op+' rw/canrt mean'].append(o['seconds']/o['ops']/(c['seconds']/c['ops'])); V[v][op+' rw/canrt p50'].append(o['p50_ns']/c['p50_ns'])
    for op in ['get','range-10']:
        c=g.get(('canrt',op,1)); o=g.get(('reply-wort',op,1))
        if c: V[v][op+' p50'].append(c['p50_ns']/1e3)
        if c and o: V[v][op+' rw/canrt p50'].append(o['p50_ns']/c['p50_ns'])
keys=list(next(iter(V.values())).keys())
for k in keys:
    print(f'{k:28s}'+'  '.join(f'{v}: {st.median(V[v][k]):7.2f} [{min(V[v][k]):.2f}-{max(V[v][k]):.2f}]' for v in V if V[v][k]))
