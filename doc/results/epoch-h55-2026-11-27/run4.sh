#!/bin/bash
# Issue 31 (a): 4 writers on the 2 loaded cores - how often the pool epoch advances, and what the
# writers leave retired when they exit. base-stats = main's epoch code (7aa9712) with the bench's
# epoch figures; v1s, v2 as in run.sh.
out=${1:-.}
for round in 1 2 3; do
  for b in base-stats v1s v2; do
    echo "== round $round binary $b load $(cut -d' ' -f1 /proc/loadavg)"
    /tmp/h55-$b-wort bench kv --op put --index woart --keys 100000 --ops 25000 --threads 4 2>&1
  done
done > $out/put-4-threads.txt
