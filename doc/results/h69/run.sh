#!/bin/sh
# Alternated rounds of base (main at f313fac + the bench's resize fields, b220b83) and new (h69):
# sh run.sh ROUNDS BASE_WORT NEW_WORT OUTDIR. Load average before each run in OUTDIR/loads.txt.
R=$1 B=$2 N=$3 O=$4
mkdir -p "$O"
i=1
while [ "$i" -le "$R" ]; do
  for v in base new; do
    if [ "$v" = base ]; then w=$B; else w=$N; fi
    echo "$v $i $(cat /proc/loadavg)" >> "$O/loads.txt"
    "$w" bench-remote --design canrt,reply-wort --backend local --keys 100000 --latency-ops 5000 \
      --range 10 --range-ops 10 --threads 1 --ycsb-ops 1000 --json "$O/full-$v-$i.jsonl" > "$O/full-$v-$i.txt" 2>&1
  done
  i=$((i + 1))
done
