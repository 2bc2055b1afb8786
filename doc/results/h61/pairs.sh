#!/bin/bash
# Alternated runs of two wort binaries (A B A B ...) of the command; JSON per run.
# usage: pairs.sh OUTDIR ROUNDS NAME_A BIN_A NAME_B BIN_B [extra bench-remote args]
set -e
out=$1 rounds=$2 na=$3 ba=$4 nb=$5 bb=$6; shift 6
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for pair in "$na:$ba" "$nb:$bb"; do
    n=${pair%%:*} b=${pair#*:}
    uptime > "$out/$n-$r.load"
    "$b" bench-remote --design canrt,reply-wort --backend local --keys 100000 --latency-ops 5000 --range 10 \
      --range-ops 10 --threads 1 --ycsb-ops 1000 --json "$out/$n-$r.json" "$@" > "$out/$n-$r.txt" 2>&1
    uptime >> "$out/$n-$r.load"
  done
done
