import json,sys,glob
for f in sorted(glob.glob(sys.argv[1]+'/rep-*.jsonl')):
    rs=[json.loads(l) for l in open(f) if l.strip()]
    g={(r.get('design'),r.get('op'),r.get('backend')):r for r in rs if r.get('experiment')=='canrt' and r.get('threads',1)==1}
    out=[]
    for d in ['canrt','reply-wort','reply-woart']:
        r=g.get((d,'put-random','local'))
        if r: out.append(f"{d} {r['seconds']*1e6/r['ops']:.2f}us")
    c=g.get(('canrt','put-random','local'))
    print(f.split('/')[-1], ' '.join(out), 'resize%', round(100*c.get('resizes_per_op',0),2), 'rz_mean', round(c.get('resize_mean_ns',0)/1e3,1) if c.get('resize_mean_ns') else '-')
