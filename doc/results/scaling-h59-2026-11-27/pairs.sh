#!/bin/bash
# pairs.sh BIN [PARTITIONS] [REPS] [INDEX]: 1 and 2 threads alternating in one process (a fresh index
# per count), so that each 2-thread run has a 1-thread run beside it under the same machine load;
# JSON to $OUT/<label>-<partition>.jsonl. Summary: pairs_summary.py.
set -u
BIN=$1; PARTS=${2:-slices first-byte index}; REPS=${3:-2}; INDEX=${4:-vart}; OUT=${OUT:-.}; LABEL=${LABEL:-new}
for rep in $(seq "$REPS"); do
  for p in $PARTS; do
    "$BIN" bench ycsb --index "$INDEX" --keys 1M --ops 1M --workload load --threads 1,2,1,2,1,2,1,2 --partition "$p" \
        --json "$OUT/$LABEL-$INDEX-$p.jsonl" > /dev/null
  done
done
