#!/bin/bash
# before-after.sh BASE NEW ROUNDS KEYS: vart load at 1 and 2 threads, the two binaries interleaved.
set -u
BASE=$1; NEW=$2; R=${3:-3}; KEYS=${4:-1M}; OUT=${OUT:-.}
y() { local bin=$1; shift; "$bin" bench ycsb --index vart --keys "$KEYS" --ops "$KEYS" --workload load "$@" 2>&1 | grep -E "^vart +load"; }
for r in $(seq "$R"); do
  echo "# round $r, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for t in 1 2; do
    echo "base ${t}T: $(y "$BASE" --threads $t --json "$OUT/base-t$t.jsonl")"
    echo "new  ${t}T: $(y "$NEW" --threads $t --json "$OUT/new-t$t.jsonl")"
  done
done
