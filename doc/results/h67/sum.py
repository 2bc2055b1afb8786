import json,statistics as st,sys
for kind in sys.argv[1:]:
  rows=[json.loads(l) for l in open(f'tri-{kind}.jsonl')]
  R=sorted(set(r['round'] for r in rows))
  for op in ('search','insert'):
    rb,rn,nb=[],[],[]
    print(f'{kind} {op}: round base new peer | base/peer new/peer new/base')
    for r in R:
      d={x['who']:x['cpu_ns'] for x in rows if x['round']==r and x['op']==op}
      if len(d)<3: continue
      rb.append(d['base']/d['peer']); rn.append(d['new']/d['peer']); nb.append(d['new']/d['base'])
      print(f"  {r} {d['base']:.0f} {d['new']:.0f} {d['peer']:.0f} | {rb[-1]:.2f} {rn[-1]:.2f} {nb[-1]:.2f}")
    med=lambda w: st.median([x['cpu_ns'] for x in rows if x['op']==op and x['who']==w])
    print(f"  median ns: base {med('base'):.0f} new {med('new'):.0f} peer {med('peer'):.0f}; median ratios base/peer {st.median(rb):.2f} new/peer {st.median(rn):.2f} new/base {st.median(nb):.2f} ({len(rb)} rounds)")
