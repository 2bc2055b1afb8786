#!/bin/bash
# The experiments of doc/concurrency.md "Two vart writers in one process (h59)".
# usage: experiments.sh BIN ROUNDS KEYS [EXTRA ENV...]   (prints one line per run; JSON to $OUT/*.jsonl)
set -u
BIN=$1; R=${2:-3}; KEYS=${3:-1M}; OUT=${OUT:-.}
y() { "$BIN" bench ycsb --index vart --keys "$KEYS" --ops "$KEYS" --workload load "$@" 2>&1 | grep -E "^vart +load"; }
for r in $(seq "$R"); do
  echo "# round $r, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "1T:          $(y --threads 1 --json "$OUT/t1.jsonl")"
  echo "2T slices:   $(y --threads 2 --json "$OUT/t2-slices.jsonl")"
  echo "2T 1st-byte: $(y --threads 2 --partition first-byte --json "$OUT/t2-first-byte.jsonl")"
  echo "2T index:    $(y --threads 2 --partition index --json "$OUT/t2-index.jsonl")"
  y --threads 1 --json "$OUT/p2a.jsonl" > /tmp/h59-pa.out & y --threads 1 --seed 7 --json "$OUT/p2b.jsonl" > /tmp/h59-pb.out; wait
  echo "2 procs (a): $(cat /tmp/h59-pa.out)"
  echo "2 procs (b): $(cat /tmp/h59-pb.out)"
done
