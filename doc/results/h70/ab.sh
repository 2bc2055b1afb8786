#!/bin/bash
# h70: base (main at 720bed0) and new wort binaries alternated (base new base new ...), each with
# the pool grown on demand (default, 64 MiB at creation) and pre-grown (--pool-initial 3GiB).
# usage: ab.sh BASE_WORT NEW_WORT ROUNDS OUTDIR
set -u
base=$1 new=$2 rounds=$3 out=$4
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for bin in base new; do
    exe=$base; [ $bin = new ] && exe=$new
    for pool in default pregrown; do
      extra=(); [ $pool = pregrown ] && extra=(--pool-initial 3GiB)
      echo "round $r $bin $pool $(uptime)" >> "$out/load.txt"
      "$exe" bench ycsb --index wort,woart,cceh,fastfair --keys 4M --ops 4M --workload load --request zipfian \
        --threads 1,2 --flush clwb "${extra[@]}" --json "$out/$bin-$pool.jsonl" > "$out/$bin-$pool-r$r.log" 2>&1
    done
  done
done
