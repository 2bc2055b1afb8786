#!/usr/bin/env bash
# The 16-core checks of issues 31 and 35 in one device call, with binaries built HERE (no build
# and no package install there: the device machine has no network and ~15 minutes a session).
#
#   scripts/device_checks.sh prepare BUILD_DIR PEERS_SRC   # here: fills devcarry/ (ignored by git)
#   scripts/device_checks.sh run                           # there, as one `run` carrying devcarry
#
# prepare copies BUILD_DIR/wort (Release; e.g. cmake -DWORT_TESTS=OFF -DWORT_UCX=OFF, target
# wort), Debian's memcached, the shared libraries the device may lack (used only where its loader
# has none of that name), and the peers' sources (libart, WORT, CCEH, FAST_FAIR under PEERS_SRC,
# as scripts/peers.sh takes them; their drivers are built there with -march=native).
# run writes to $OUT (at most 8 files come back): summary.txt, memcached.txt (scripts/bench_server.sh
# mixes 100/90/50/0% gets, 100-byte values, woart beside memcached 1.6.18, server threads T on
# CPUs 0..T-1, client on the others, REPEAT rounds of T=1,4,8), peers.md/peers.jsonl (single thread
# against the prototypes, 1M sparse keys), scaling.md/scaling.jsonl (16T/1T: load of KEYS records,
# A and C of OPS operations, GRID_REPEAT runs), run.log.
# Environment for run: REPEAT (default 3), MC_REQUESTS (default 400000), KEYS (default 4M), OPS (default 4M),
# GRID_REPEAT (default 2), PARTS (default "memcached peers grid"; also "ablate", "growth", "profile"), PEER_KINDS (default
# vart,wort,woart,cceh,fastfair), PEER_ARGS (more scripts/peers.sh options, e.g. --no-flush).
# The part "ablate" (issue 31: what costs wort's inserts more on that machine than on this one) times
# `wort bench --index wort,woart --dist sparse --keys 1M --ops insert` single-threaded under each of
# --flush clflush|clflushopt|clwb|none, WORT_POOL_HUGEPAGE=0 and WORT_EPOCH_FENCE=symmetric (clflush),
# ABL_REPEAT rounds (default 3) rotated, then the 16-thread load of KEYS records for wort under
# clwb and none (is the flush the limit at 16 threads?): ablate.jsonl, ablate.md.
# The part "profile" (issue 31: find what wort's insert pays on Intel beyond WORT's) runs
# scripts/insert_perf.sh with the perf that prepare carries (PROFILE_KINDS, default wort,woart,vart;
# PROF_REPEAT, default 3), with clflush and with no flush: insert-perf-clflush.md, insert-perf-none.md
# (events per insert in the insert loop only, wort / prototype; per-function profiles; the
# hottest wort functions annotated).
# The part "growth" (issue 31, h70: do writers wait for pool growth?) runs the YCSB load of KEYS
# records for wort, woart, cceh and fastfair at 1 and 16 threads (zipfian, clwb) with the pool
# grown on demand (default) and pre-grown (--pool-initial 3GiB), GROW_REPEAT rounds (default 2)
# rotated; with BASE_BUILD given to prepare (a second wort, e.g. main's), that binary alternates
# with this one: growth.jsonl, growth.md (scripts/growth_table.py: Mops/s, 16T/1T, default over
# pre-grown, sys ns/op, voluntary switches, the allocator's lock waits and growth counters).
set -uo pipefail
cd "$(dirname "$0")/.."
D=$PWD/devcarry
case "${1:-}" in
prepare)
  b=${2:?BUILD_DIR}; p=${3:?PEERS_SRC}
  rm -rf "$D"; mkdir -p "$D/bin" "$D/lib" "$D/lib2" "$D/peers"
  grep -qx '/devcarry/' "$(git rev-parse --git-common-dir)/info/exclude" 2>/dev/null ||
    echo /devcarry/ >>"$(git rev-parse --git-common-dir)/info/exclude"
  cp "$b/wort" "$D/bin/wort.real"; cp "$(command -v memcached)" "$D/bin/memcached.real"
  [ -n "${BASE_BUILD:-}" ] && cp "$BASE_BUILD/wort" "$D/bin/wort-base.real"
  for l in libfmt.so.9 libevent-2.1.so.7 libsasl2.so.2; do cp -L "/lib/x86_64-linux-gnu/$l" "$D/lib/"; done
  for l in libssl.so.3 libcrypto.so.3 libstdc++.so.6 libgcc_s.so.1; do cp -L "/lib/x86_64-linux-gnu/$l" "$D/lib2/"; done
  for n in wort wort-base memcached; do
    [ -f "$D/bin/$n.real" ] || continue
    printf '#!/bin/bash\nd=$(dirname "$(readlink -f "$0")")\nexport LD_LIBRARY_PATH=$d/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexec $d/%s.real "$@"\n' "$n" >"$D/bin/$n"
    chmod +x "$D/bin/$n"
  done
  # perf and the libraries it needs beyond the C runtime, for the part "profile" (the device may
  # have no perf of its own).
  if pf=$(command -v perf); then
    mkdir -p "$D/perf/lib"; cp -L "$pf" "$D/perf/perf.real"
    ldd "$pf" | awk '$3 ~ /^\// {print $3}' | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s)\.so' | xargs -r cp -L -t "$D/perf/lib/"
    printf '#!/bin/bash\nd=$(dirname "$(readlink -f "$0")")\nexport LD_LIBRARY_PATH=$d/lib:$d/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexec $d/perf.real "$@"\n' >"$D/perf/perf"
    chmod +x "$D/perf/perf"
  fi
  for x in WORT CCEH FAST_FAIR libart; do [ -d "$p/$x" ] && cp -r "$p/$x" "$D/peers/"; done
  rm -rf "$D/peers/libart/tests"
  echo "device_checks: devcarry/ is $(du -sh "$D" | cut -f1); run there: bash scripts/device_checks.sh run (carry devcarry)"
  ;;
run)
  : "${OUT:?OUT, the output folder of the device tool}"
  REPEAT=${REPEAT:-3} KEYS=${KEYS:-4M} OPS=${OPS:-4M} GRID_REPEAT=${GRID_REPEAT:-2} MC_REQUESTS=${MC_REQUESTS:-400000}
  for l in libssl.so.3 libcrypto.so.3 libstdc++.so.6 libgcc_s.so.1; do ldconfig -p | grep -q "$l " || cp "$D/lib2/$l" "$D/lib/"; done
  export PATH=$D/bin:$PATH
  W=$D/bin/wort S=$OUT/summary.txt t0=$(date +%s)
  { date; nproc; lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)|Thread"; $W --version; memcached -V; } >"$S" 2>&1
  $W --version >/dev/null 2>&1 || { echo "device_checks: wort does not run here"; ldd "$D/bin/wort.real"; exit 1; }
  PARTS=${PARTS:-memcached peers grid}
  has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
  if has memcached; then for r in $(seq "$REPEAT"); do
    for T in 1 4 8; do
      MIXES="100 90 50 0" VALUE_SIZES=100 THREAD_COUNTS=$T KINDS=woart REQUESTS=$MC_REQUESTS KEYSPACE=100000 CONNS=32 \
        SERVER_CPUS=0-$((T - 1)) CLIENT_CPUS=$T-15 timeout 80 bash scripts/bench_server.sh "$D/bin" 2>&1 |
        grep -E "^(memcached|woart)" >>"$OUT/memcached.txt"
    done
  done
  echo "memcached rounds done at $(($(date +%s) - t0)) s" >>"$S"; fi
  if has ablate; then
    A=$OUT/ablate.jsonl
    for r in $(seq "${ABL_REPEAT:-3}"); do
      for v in clflush clflushopt clwb none hp0 symfence; do
        f=$v e=()
        case $v in hp0) f=clflush e=(WORT_POOL_HUGEPAGE=0) ;; symfence) f=clflush e=(WORT_EPOCH_FENCE=symmetric) ;; esac
        env "${e[@]}" timeout 60 $W bench --index wort,woart --dist sparse --keys 1M --ops insert --flush $f --seed 1 \
          --json /tmp/dc-abl.jsonl >>"$OUT/run.log" 2>&1
        python3 -c 'import json,sys; [print(json.dumps(dict(json.loads(l), variant=sys.argv[1], round=int(sys.argv[2])))) for l in open("/tmp/dc-abl.jsonl")]' \
          "$v" "$r" >>"$A"; rm -f /tmp/dc-abl.jsonl
      done
    done
    for f in clwb none; do
      timeout 120 $W bench ycsb --index wort,woart,vart --keys "$KEYS" --ops "$KEYS" --workload load --request zipfian \
        --threads 1,16 --flush $f --json /tmp/dc-abl16.jsonl >>"$OUT/run.log" 2>&1
      python3 -c 'import json,sys; [print(json.dumps(dict(json.loads(l), variant=sys.argv[1]))) for l in open("/tmp/dc-abl16.jsonl")]' \
        "load16-$f" >>"$A"; rm -f /tmp/dc-abl16.jsonl
    done
    python3 scripts/device_ablate_table.py "$A" >"$OUT/ablate.md"
    echo "ablate done at $(($(date +%s) - t0)) s" >>"$S"; cat "$OUT/ablate.md"
  fi
  if has growth; then
    G=$OUT/growth.jsonl bins=new
    [ -x "$D/bin/wort-base" ] && bins="base new"
    for r in $(seq "${GROW_REPEAT:-2}"); do
      for b in $bins; do
        exe=$W; [ "$b" = base ] && exe=$D/bin/wort-base
        for p in default pregrown; do
          e=(); [ "$p" = pregrown ] && e=(--pool-initial 3GiB)
          timeout 150 "$exe" bench ycsb --index wort,woart,cceh,fastfair --keys "$KEYS" --ops "$KEYS" --workload load \
            --request zipfian --threads 1,16 --flush clwb "${e[@]}" --json /tmp/dc-grow.jsonl >>"$OUT/run.log" 2>&1
          python3 -c 'import json,sys; [print(json.dumps(dict(json.loads(l), binary=sys.argv[1], pool=sys.argv[2], round=int(sys.argv[3])))) for l in open("/tmp/dc-grow.jsonl")]' \
            "$b" "$p" "$r" >>"$G"; rm -f /tmp/dc-grow.jsonl
        done
      done
    done
    python3 scripts/growth_table.py "$G" >"$OUT/growth.md"
    echo "growth done at $(($(date +%s) - t0)) s" >>"$S"; cat "$OUT/growth.md"
  fi
  if has profile; then
    # Issue 31: wort's single-thread insert against WORT/WOART/libart under the hardware counters,
    # the insert loop only (scripts/insert_perf.sh), with clflush and without any flush.
    PF=$D/perf/perf; [ -x "$PF" ] || PF=perf
    for m in clflush none; do
      nf=(); [ $m = none ] && nf=(--no-flush)
      timeout 240 bash scripts/insert_perf.sh "$D/peers" --keys 1M --kinds "${PROFILE_KINDS:-wort,woart,vart}" --repeat "${PROF_REPEAT:-3}" \
        "${nf[@]}" ${PROFILE_EVENTS:+--events "$PROFILE_EVENTS"} --perf "$PF" --wort "$W" --out /tmp/dc-prof-$m >>"$OUT/run.log" 2>&1
      echo "profile $m rc=$? at $(($(date +%s) - t0)) s" >>"$S"
      cp /tmp/dc-prof-$m/insert-perf.md "$OUT/insert-perf-$m.md" 2>/dev/null || cp /tmp/dc-prof-$m/perf-check.txt "$OUT/perf-check.txt" 2>/dev/null
    done
  fi
  if has peers; then timeout 170 bash scripts/peers.sh "$D/peers" --keys 1M --repeat 2 --kinds "${PEER_KINDS:-vart,wort,woart,cceh,fastfair}" ${PEER_ARGS:-} --wort "$W" \
    --out /tmp/dc-peers >>"$OUT/run.log" 2>&1
  echo "peers rc=$? at $(($(date +%s) - t0)) s" >>"$S"
  cp /tmp/dc-peers/peers.md /tmp/dc-peers/peers.jsonl "$OUT/" 2>/dev/null; fi
  if has grid; then timeout 300 bash scripts/scaling.sh --wort "$W" --label new --keys "$KEYS" --ops "$OPS" --threads 1,16 --repeat "$GRID_REPEAT" \
    --out /tmp/dc-grid >>"$OUT/run.log" 2>&1
  echo "grid rc=$? at $(($(date +%s) - t0)) s" >>"$S"
  cp /tmp/dc-grid/scaling.md "$OUT/"; cp /tmp/dc-grid/new.jsonl "$OUT/scaling.jsonl"; fi
  cat "$S"; for f in peers.md scaling.md; do [ -f "$OUT/$f" ] && cat "$OUT/$f"; done
  [ -f "$OUT/memcached.txt" ] && python3 scripts/memcached_ratios.py "$OUT/memcached.txt"
  ;;
*) sed -n 2,20p "$0"; exit 2 ;;
esac
