#!/bin/bash
# tri.sh KIND PEERDRIVER ROUNDS OUT (BASEBIN, NEWBIN: the two wort binaries; KEYS: default 1M; h63s script with the base binary a variable): base wort, new wort and the peer's driver on one keys file, rotated per round
K=$1; D=$2; R=$3; OUT=$4
mkdir -p $OUT; : > $OUT/runs.jsonl
${BASEBIN:-/tmp/h67-base-wort} bench --index $K --dist sparse --keys ${KEYS:-1M} --seed 1 --ops insert --flush clflush --keys-out $OUT/keys.bin --pool /dev/shm/h67-tri-$K.pool > /dev/null; rm -f /dev/shm/h67-tri-$K.pool
for r in $(seq 1 $R); do
  echo "round $r $(uptime)" >> $OUT/load.txt
  if [ $((r % 3)) = 1 ]; then order="base new peer"; elif [ $((r % 3)) = 2 ]; then order="new peer base"; else order="peer base new"; fi
  for who in $order; do
    case $who in
      base|new) [ $who = base ] && B=${BASEBIN:-/tmp/h67-base-wort} || B=$NEWBIN
        $B bench --index $K --dist sparse --keys ${KEYS:-1M} --seed 1 --ops insert,search --flush clflush --pool /dev/shm/h67-tri-$K.pool --json $OUT/tmp.jsonl > /dev/null; rm -f /dev/shm/h67-tri-$K.pool
        python3 -c "
import json,sys
for l in open('$OUT/tmp.jsonl'):
    d=json.loads(l)
    if d.get('op') in ('insert','search'): print(json.dumps({'round':$r,'who':'$who','op':d['op'],'cpu_ns':d['cpu_ns_per_op']}))
" >> $OUT/runs.jsonl; rm -f $OUT/tmp.jsonl ;;
      peer) $D $OUT/keys.bin | python3 -c "
import json,sys
d=json.loads(sys.stdin.read())
print(json.dumps({'round':$r,'who':'peer','op':'insert','cpu_ns':d['insert_cpu_ns']}))
print(json.dumps({'round':$r,'who':'peer','op':'search','cpu_ns':d['lookup_cpu_ns']}))" >> $OUT/runs.jsonl ;;
    esac
  done
done
rm -f $OUT/keys.bin
