#!/bin/sh
# Rounds of the issue-32 latency command with the three designs (put-string = the paper's random
# strings, put-random = keys between the records): sh run.sh ROUNDS WORT OUTDIR.
# The load average before each round goes to OUTDIR/loads.txt.
R=$1 W=$2 O=$3
mkdir -p "$O"
i=1
while [ "$i" -le "$R" ]; do
  echo "$i $(cat /proc/loadavg)" >> "$O/loads.txt"
  "$W" bench-remote --design canrt,reply-wort,reply-woart --backend local --keys 100000 --latency-ops 5000 \
    --range 10 --range-ops 10 --threads 1 --ycsb-ops 1000 --json "$O/round-$i.jsonl" > "$O/round-$i.txt" 2>&1
  i=$((i + 1))
done
