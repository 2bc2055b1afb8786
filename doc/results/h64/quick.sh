#!/bin/bash
# Short alternated runs of two binaries (A B A B ...), canrt only (the sizes, fewer range
# and YCSB ops): quick.sh OUTDIR ROUNDS BIN_A BIN_B. One JSON per run: OUTDIR/{A,B}-r.json
set -e
out=$1 n=$2 A=$3 B=$4
mkdir -p "$out"
uptime > "$out/load"
for r in $(seq 1 "$n"); do for b in A B; do bin=${!b}
  "$bin" bench-remote --design canrt --backend local --keys 100000 --latency-ops 5000 --range 10 --range-ops 2 \
    --threads 1 --ycsb-ops 200 --mix write-only --json "$out/$b-$r.json" > /dev/null 2>&1
done; done
uptime >> "$out/load"
