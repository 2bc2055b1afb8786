import json,sys,glob,statistics,collections
d=sys.argv[1]; dists=sys.argv[2].split(',') if len(sys.argv)>2 else ['sparse']
rows=collections.defaultdict(dict)
for f in sorted(glob.glob(d+'/*.jsonl')):
    b,r=f.split('/')[-1][:-6].split('-')
    for l in open(f):
        j=json.loads(l)
        if j.get('bench')!='index': continue
        rows[(b,int(r))][(j['index'],j['dist'],j['op'])]=j
for dist in dists:
  for b in ['base','new']:
    rs=sorted(r for (bb,r) in rows if bb==b)
    print(f"== {dist} {b}")
    for op in ['insert','search','scan']:
        for idx in ['roart','vart','woart']:
            v=[rows[(b,r)].get((idx,dist,op),{}).get('cpu_ns_per_op') for r in rs]
            if None in v: continue
            print(f"  {op:6} {idx:6} " + ' '.join(f"{x:9.0f}" for x in v) + f"   median {statistics.median(v):9.0f}")
    rat=[rows[(b,r)][('roart',dist,'search')]['cpu_ns_per_op']/rows[(b,r)][('vart',dist,'search')]['cpu_ns_per_op'] for r in rs]
    print("  search roart/vart " + ' '.join(f"{x:.2f}" for x in rat) + f"  median {statistics.median(rat):.2f}")
    if ('woart',dist,'scan') in rows[(b,rs[0])]:
        rat=[rows[(b,r)][('woart',dist,'scan')]['cpu_ns_per_op']/rows[(b,r)][('roart',dist,'scan')]['cpu_ns_per_op'] for r in rs]
        print("  scan woart/roart " + ' '.join(f"{x:.2f}" for x in rat) + f"  median {statistics.median(rat):.2f}")
    print(f"  bytes/key roart {rows[(b,rs[0])][('roart',dist,'insert')]['bytes_per_key']:.1f}")
