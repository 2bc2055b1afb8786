#!/bin/bash
# ab.sh TAG ROUNDS BIN... : alternated rounds of cceh load+A at 1,2 threads; summary per binary
tag=$1; rounds=$2; shift 2
for r in $(seq $rounds); do for b in "$@"; do ./wort-$b bench ycsb --index cceh --keys 1M --ops 1M --workload load,a --request zipfian --threads 1,2 --json $tag-$b.jsonl >/dev/null 2>&1; done; done
python3 - "$tag" "$@" <<'PY'
import json,statistics as st,sys
tag=sys.argv[1]
for b in sys.argv[2:]:
    rs=[json.loads(l) for l in open(f'/tmp/h72/{tag}-{b}.jsonl')]
    for w in ['load','a']:
        out=[]
        for t in [1,2]:
            x=[r for r in rs if r['workload']==w and r['threads']==t]
            out.append('%dT %.2f Mops cpu %.0f %s'%(t,st.median(r['mops_per_s'] for r in x),st.median(r['cpu_ns_per_op'] for r in x),[round(r['cpu_ns_per_op']) for r in x]))
        print(f'{b:10s} {w:4s}',' | '.join(out))
PY
