#!/bin/bash
# h70: the same tree's counters with growth ahead off (noahead: the election disabled), on (new)
# and on with 4x refill batches for small classes (batch), rotated, default pool.
# usage: ab3.sh DIR_WITH_BINARIES ROUNDS OUTDIR
set -u
d=$1 rounds=$2 out=$3
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for bin in noahead new2 batch; do
    echo "round $r $bin $(uptime)" >> "$out/load.txt"
    "$d/wort-$bin" bench ycsb --index wort,woart --keys 4M --ops 4M --workload load --request zipfian \
      --threads 1,2 --flush clwb --json "$out/$bin-default.jsonl" > "$out/$bin-r$r.log" 2>&1
  done
done
