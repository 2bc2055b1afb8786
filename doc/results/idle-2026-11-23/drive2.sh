#!/bin/bash
# Idle-machine figures, part 2 (after the YCSB scaling run). Binary: main at 218658b (copied).
W=/work/results/bin/wort
R=/work/results/roart
bash /work/results/ycsb/run.sh > /work/results/ycsb/driver.log 2>&1
stamp() { echo "== $1 $(date +%T) load: $(cut -d' ' -f1-3 /proc/loadavg)"; }
stamp roart16m
$W bench --index roart,woart,vart,fastfair --dist dense,sparse,clustered,strings --keys 16M \
  --ops insert,search,scan,restart --json $R/roart16m.jsonl > $R/roart16m.log 2>&1
stamp ycsb-df
$W bench ycsb --index roart,woart,fastfair --keys 1M --workload load,d,f --request zipfian --threads 1,2 \
  --json $R/ycsb-df.jsonl > $R/ycsb-df.log 2>&1
stamp scanlen
for L in 10 100 1000; do
  $W bench --index roart,woart,fastfair --dist sparse --keys 1M --ops insert,scan --scan-len $L \
    --json $R/scanlen.jsonl > $R/scanlen-$L.log 2>&1
done
stamp peers16m
bash /work/main/scripts/peers.sh /tmp/peers --keys 16M --repeat 3 --out /work/results/peers16m --wort $W \
  > /work/results/peers16m.log 2>&1
stamp done
