# p50 (ns) of canrt and reply-wort, 1 thread, per op and run (base = main 1b78961, new = h66),
# from the --json records; ratio reply-wort/canrt; medians over the 3 alternated rounds.
import glob,json,statistics
rows={}
for f in sorted(glob.glob('*-[0-9].json')):
    run=f[:-5]
    for l in open(f):
        r=json.loads(l)
        if r.get('threads')==1 and r['design'] in('canrt','reply-wort'):
            rows.setdefault(r['op'],{}).setdefault(run,{})[r['design']]=(r['p50_ns'],r.get('atomics_per_op'),r.get('reads_per_op'))
for op in ['put','put-random','update','get']:
    print(op)
    for v in ['base','new']:
        rs=[];cs=[]
        for k in '123':
            d=rows[op][f'{v}-{k}']
            c=d['canrt'][0]; w=d['reply-wort'][0]; rs.append(w/c); cs.append(c)
            extra=f", canrt atomics/op {d['canrt'][1]:.2f} reads/op {d['canrt'][2]:.2f}" if op=='put' else ''
            print(f'  {v}-{k}: canrt p50 {c:.0f} ns, reply-wort {w:.0f} ns, ratio {w/c:.2f}x{extra}')
        print(f'  {v}: median canrt p50 {statistics.median(cs):.0f} ns, median ratio {statistics.median(rs):.2f}x, min ratio {min(rs):.2f}x')
