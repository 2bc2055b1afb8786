#!/bin/bash
# Clean window (no helper running): YCSB scaling, bytes keys, server scaling + memcached experiment, CANRT.
W=/work/build2/wort
C=/work/results/clean
stamp() { echo "== $1 $(date +%T) load: $(cut -d' ' -f1-3 /proc/loadavg)"; }
cd /work/main
K=wort,woart,artcow,fastfair,cceh,roart
for rep in 1 2 3; do
  modes="new"; [ $rep = 2 ] && modes="new global"
  for mode in $modes; do
    stamp "ycsb rep $rep $mode"
    if [ $mode = global ]; then export WORT_GLOBAL_LOCK=1; else unset WORT_GLOBAL_LOCK; fi
    $W bench ycsb --index $K --keys 1M --workload load,a,b,c,e --request zipfian --threads 1,2 \
      --json $C/ycsb-$mode.jsonl > $C/ycsb-$mode-$rep.log 2>&1
  done
done
unset WORT_GLOBAL_LOCK
stamp bytes
for t in 1 2; do
  $W bench --index roart,woart,fastfair,vart --dist bytes --keys 1M --ops insert,search,scan --threads $t \
    --json $C/bytes.jsonl > $C/bytes-$t.log 2>&1
done
stamp server-scaling
for rep in 1 2; do
  MIXES=100 VALUE_SIZES=100 THREAD_COUNTS="1 2" KINDS="woart roart" CONNS=2 KEYS_PER_GET=50 REQUESTS=20000 \
    KEYSPACE=100000 bash scripts/bench_server.sh /work/build2 > $C/server-scaling-$rep.txt 2>&1
done
stamp memcached-experiment
PATTERN=phases THREADS=1 KINDS="roart woart fastfair" CONNS="4 50" REQUESTS=200000 KEYSPACE=100000 \
  bash scripts/bench_server.sh /work/build2 > $C/memcached-phases.txt 2>&1
stamp canrt
$W bench-remote --design canrt,reply-wort,reply-woart --backend local --keys 100000 --latency-ops 5000 \
  --range 10,100,1000 --range-ops 50 --threads 1,2 --ycsb-ops 20000 --json $C/remote-local.jsonl > $C/remote-local.txt 2>&1
$W bench-remote --design canrt,reply-wort --backend ucx --tls sm --keys 100000 --latency-ops 2000 \
  --range 10,100,1000 --range-ops 20 --threads 1,2 --ycsb-ops 5000 --json $C/remote-ucx-sm.jsonl > $C/remote-ucx-sm.txt 2>&1
stamp done
