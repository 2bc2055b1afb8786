#!/bin/bash
# base (main 1b78961, h64 reverted) and new (h66) alternated, 3 rounds; load recorded per run
BASE=${BASE:-/tmp/h66/base/build/wort}; NEW=${NEW:-/work/wt-h66/build/wort}; OUT=$(dirname $0)
for r in 1 2 3; do for v in base new; do
  B=$BASE; [ $v = new ] && B=$NEW
  echo "$(date +%T) $v-$r load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/loads.txt
  $B bench-remote --design canrt,reply-wort --backend local --keys 100000 --latency-ops 5000 --range 10 --range-ops 10 --threads 1,2 --ycsb-ops 1000 --json $OUT/$v-$r.json > $OUT/$v-$r.txt 2>&1
done; done
echo "$(date +%T) end load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/loads.txt
