#!/bin/bash
# server on CPU 1, client on CPU 0: a server core of its own (as on a server machine)
set -u
W=/work/wt-h40/build/wort
design=$1; out=$2
pool=/dev/shm/h40-pin-$design.pool
rm -f $pool $pool.remote $pool.rings
taskset -c 1 $W serve-remote --design $design --backend local --pool $pool --info $pool.remote --seconds 120 > $out.server 2>&1 &
sp=$!
for i in $(seq 100); do [ -s $pool.remote ] && break; sleep 0.1; done
taskset -c 0 $W bench-remote --connect $pool.remote --keys 100000 --latency-ops 5000 --range 10 --range-ops 10 --threads 1 --ycsb-ops 1000 --mix write-only --json $out.jsonl > $out 2>&1
kill -TERM $sp; wait $sp
rm -f $pool $pool.remote $pool.rings
