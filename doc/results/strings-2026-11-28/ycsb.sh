#!/bin/sh
# Rounds of YCSB write-only with 1 and 2 client threads, canrt and both baselines (issue 32's
# goal: canrt >= 2x reply-wort on 2 cores): sh ycsb.sh ROUNDS WORT OUTDIR.
R=$1 W=$2 O=$3
mkdir -p "$O"
i=1
while [ "$i" -le "$R" ]; do
  echo "$i $(cat /proc/loadavg)" >> "$O/loads.txt"
  "$W" bench-remote --design canrt,reply-wort,reply-woart --backend local --keys 100000 --latency-ops 100 \
    --range 10 --range-ops 2 --threads 1,2 --ycsb-ops 20000 --mix write-only,50:50 \
    --json "$O/ycsb-$i.jsonl" > "$O/ycsb-$i.txt" 2>&1
  i=$((i + 1))
done
python3 - "$O" <<'PY'
import glob, json, statistics as st, sys, collections
V = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/ycsb-*.jsonl")):
    g = {(r["design"], r["op"], r["threads"]): r["ops_per_s"] for r in map(json.loads, filter(str.strip, open(f)))}
    for mix in ["write-only", "50:50"]:
        for t in [1, 2]:
            c = g.get(("canrt", "ycsb-" + mix, t))
            V[(mix, t, "canrt ops/s")].append(c)
            for b in ["reply-wort", "reply-woart"]:
                o = g.get((b, "ycsb-" + mix, t))
                if c and o: V[(mix, t, f"canrt/{b}")].append(c / o)
for (mix, t, w), xs in V.items():
    print(f"ycsb-{mix:10s} {t} threads {w:18s} {st.median(xs):12.2f} [{min(xs):.2f}-{max(xs):.2f}]")
PY
