#!/bin/bash
# issue 31 on 16 cores: the 16-thread load of wort/woart under the node-lock table's size (2^14 vs 2^20
# words) and with the pool grown before the run (--pool-initial), rounds rotated.
D=$PWD/devcarry; export LD_LIBRARY_PATH=$D/lib; A=$OUT/locks.jsonl
for l in libssl.so.3 libcrypto.so.3 libstdc++.so.6 libgcc_s.so.1; do ldconfig -p | grep -q "$l " || cp "$D/lib2/$l" "$D/lib/"; done
for r in 1 2; do
  for v in b14 b20 b14pre; do
    W=$D/bin/wort.real; e=(); [ $v = b20 ] && W=$D/bin/wort20
    [ $v = b14pre ] && e=(--pool-initial 3GiB)
    timeout 100 $W bench ycsb --index wort,woart --keys 4M --ops 4M --workload load,a --request zipfian --threads 1,16 \
      --flush clwb "${e[@]}" --json /tmp/l.jsonl >>$OUT/run.log 2>&1
    python3 -c 'import json,sys; [print(json.dumps(dict(json.loads(l), variant=sys.argv[1]+"-"+json.loads(l)["workload"]))) for l in open("/tmp/l.jsonl")]' $v >>$A
    rm -f /tmp/l.jsonl
  done
done
python3 scripts/device_ablate_table.py $A > $OUT/locks.md; cat $OUT/locks.md
python3 -c '
import json,sys
for l in open(sys.argv[1]):
  r=json.loads(l)
  if r["threads"]==16: print(r["variant"],r["index"],"vol",r["vol_switches"],"sys",int(r["sys_ns_per_op"]),"user",int(r["user_ns_per_op"]),"s",round(r["seconds"],3))
' $A
