#!/usr/bin/env bash
# pairs.sh OUT ROUNDS NAME_A BIN_A NAME_B BIN_B [extra bench-remote args...]
# A B A B ... runs of the command; per run: NAME-i.txt (output), NAME-i.json (records),
# NAME-i.load (uptime before and after).
set -u
out=$1 rounds=$2 na=$3 ba=$4 nb=$5 bb=$6
shift 6
mkdir -p "$out"
for i in $(seq 1 "$rounds"); do
  for pair in "$na $ba" "$nb $bb"; do
    set -- $pair "$@"
    name=$1 bin=$2
    shift 2
    uptime > "$out/$name-$i.load"
    "$bin" bench-remote --design canrt,reply-wort,reply-woart --backend local --keys 100000 --latency-ops 5000 \
      --range 10 --range-ops 10 --threads 1,2 --ycsb-ops 1000 --json "$out/$name-$i.json" "$@" > "$out/$name-$i.txt" 2>&1
    uptime >> "$out/$name-$i.load"
  done
done
