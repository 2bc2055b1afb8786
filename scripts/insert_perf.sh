#!/usr/bin/env bash
# Issue 31: where a single-thread insert spends its cycles beside the authors' prototype, on a
# machine WITH hardware counters (the 16-core Intel device; this 2-core VM has none: there use
# scripts/insert_callgrind.sh). The counts cover the insert loop and nothing else: perf starts
# with its events disabled (`-D -1 --control fifo:CTL,ACK`) and `wort bench` and the peers'
# driver enable them for their insert loop only (WORT_PERF_CTL / WORT_PERF_ACK: PerfWindow in
# src/bench/bench.cc and scripts/peers/driver.cc).
#
#   scripts/insert_perf.sh SRC_ROOT [--keys N] [--kinds K1,K2,...] [--dist D] [--repeat R]
#                          [--no-flush] [--out DIR] [--wort BUILD/wort] [--perf PERF] [--events E]
#
# SRC_ROOT: the peers' source trees, as for scripts/peers.sh (which builds the drivers, for this
# machine's processor). For each kind (default wort,woart,vart; also cceh, fastfair) and each of R
# repeats (default 3): `perf stat` of `wort bench --index K --ops insert --flush clflush` and of
# the peer's driver on the same keys (wort bench --keys-out), alternating; then one `perf record`
# (cycles) of each, reported per function (`perf report --sort sym`) and the hottest wort
# functions annotated. --no-flush: wort with --flush none against WORT/WOART/libart with their
# flushes emptied (peers.sh --no-flush; kinds wort, woart, vart only).
# Output: DIR/insert-perf.md (events per insert, medians, wort / peer; the per-function profiles
# and annotations), DIR/insert-perf.jsonl (one line per counted run). Defaults: 1M sparse keys,
# DIR=/tmp/wort-insert-perf, PERF=perf, events E = cycles, instructions, branch-misses,
# L1-dcache-load-misses, LLC-load-misses, dTLB-load-misses (--events task-clock,page-faults runs
# the whole script without hardware counters: how it was tested here).
# Exit status 3: perf cannot count E on this machine (the message says why).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
[ $# -ge 1 ] || { sed -n 2,24p "$0"; exit 2; }
src=$(cd "$1" && pwd); shift
keys=1M dist=sparse repeat=3 out=/tmp/wort-insert-perf wort="$repo/build/wort" kinds=wort,woart,vart perf=perf
events=cycles,instructions,branch-misses,L1-dcache-load-misses,LLC-load-misses,dTLB-load-misses flush=clflush
while [ $# -gt 0 ]; do
  case "$1" in
    --keys) keys=$2; shift 2 ;;
    --dist) dist=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --wort) wort=$2; shift 2 ;;
    --kinds) kinds=$2; shift 2 ;;
    --perf) perf=$2; shift 2 ;;
    --events) events=$2; shift 2 ;;
    --no-flush) flush=none; shift ;;
    *) echo "insert_perf.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$wort" ] || { echo "insert_perf.sh: $wort not found (build wort first)" >&2; exit 2; }
command -v "$perf" >/dev/null || { echo "insert_perf.sh: $perf not found" >&2; exit 3; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Can perf count the events here? (`<not supported>` on a machine without counters, e.g. a VM.)
if ! "$perf" stat -x, -e "$events" true >"$out/perf-check.txt" 2>&1 || grep -q '<not supported>\|<not counted>' "$out/perf-check.txt"; then
  echo "insert_perf.sh: $perf cannot count $events here:" >&2
  head -5 "$out/perf-check.txt" >&2
  exit 3
fi
# The sampling event of the profiles: cycles where the counters exist, the CPU clock otherwise.
# (cycles:P: the most precise the processor has, e.g. PEBS on Intel, so that samples land on the
# instruction that waited rather than a later one)
case ",$events," in *,cycles,*) sample=cycles:P ;; *) sample=cpu-clock ;; esac

peer_of() {
  case $1 in
    wort) echo WORT ;; woart) echo WOART ;; vart) echo libart ;; cceh) echo CCEH ;; fastfair) echo FAST_FAIR ;;
    *) echo "insert_perf.sh: --kinds: unknown kind $1 (wort, woart, vart, cceh, fastfair)" >&2; exit 2 ;;
  esac
}
for k in ${kinds//,/ }; do peer_of "$k" >/dev/null; done

# The drivers (peers.sh builds them; a tiny run, its figures are not used).
pflags=(); [ $flush = none ] && pflags=(--no-flush)
bash "$here/peers.sh" "$src" --keys 1000 --repeat 1 --kinds "$kinds" "${pflags[@]}" --out "$out/peers" >/dev/null
bld="$out/peers/build"

keyfile="$out/keys.bin"
"$wort" bench --index "${kinds%%,*}" --dist "$dist" --keys "$keys" --ops insert --flush none --keys-out "$keyfile" \
  --pool "/dev/shm/wort-insert-perf-$$.pool" >/dev/null
nkeys=$(python3 -c "import struct,sys; f=open(sys.argv[1],'rb'); f.read(8); print(struct.unpack('<Q', f.read(8))[0])" "$keyfile")

ctl="$out/perf.ctl" ack="$out/perf.ack"
rm -f "$ctl" "$ack"
mkfifo "$ctl" "$ack"
trap 'rm -f "$ctl" "$ack" "$keyfile" /dev/shm/wort-insert-perf-$$*.pool' EXIT
# counted stat|record PERF_OPTIONS... -- PROGRAM ARGS...: the program's insert loop under perf.
counted() {
  local sub=$1; shift
  "$perf" "$sub" -D -1 --control "fifo:$ctl,$ack" "$@" 2>>"$out/perf.log"
}
wort_cmd() { echo env WORT_PERF_CTL="$ctl" WORT_PERF_ACK="$ack" "$wort" bench --index "$1" --dist "$dist" --keys "$keys" \
  --seed 1 --ops insert --flush $flush --pool "/dev/shm/wort-insert-perf-$$-$1.pool"; }
peer_cmd() { echo env WORT_PERF_CTL="$ctl" WORT_PERF_ACK="$ack" "$bld/driver-$1" "$keyfile"; }

jsonl="$out/insert-perf.jsonl"
: >"$jsonl"
: >"$out/perf.log"
for r in $(seq 1 "$repeat"); do
  for k in ${kinds//,/ }; do
    p=$(peer_of "$k")
    for side in wort peer; do
      if [ $side = wort ]; then cmd=$(wort_cmd "$k") label="wort $k"
      else [ -x "$bld/driver-$p" ] || continue; cmd=$(peer_cmd "$p") label=$p; fi
      csv="$out/stat.csv"
      # shellcheck disable=SC2086
      counted stat -x, -o "$csv" -e "$events" -- $cmd >"$out/run.log" 2>&1 ||
        { echo "insert_perf.sh: $label failed (see $out/run.log)" >&2; cat "$out/run.log" >&2; exit 1; }
      python3 - "$csv" "$jsonl" "$k" "$label" "$r" "$nkeys" "$flush" <<'PY'
import csv, json, sys
path, jsonl, kind, label, rnd, n, flush = sys.argv[1:]
counts = {}
for row in csv.reader(l for l in open(path) if l.strip() and not l.startswith('#')):
    if len(row) < 3: continue
    try: v = float(row[0])
    except ValueError: continue   # <not counted> / <not supported>
    counts[row[2]] = v
rec = {"kind": kind, "side": label, "round": int(rnd), "inserts": int(n), "flush": flush,
       "per_insert": {e: v / int(n) for e, v in counts.items()}}
open(jsonl, "a").write(json.dumps(rec) + "\n")
PY
    done
  done
done
rm -f /dev/shm/wort-insert-perf-$$-*.pool

md="$out/insert-perf.md"
{
  echo "# scripts/insert_perf.sh --keys $keys --dist $dist --kinds $kinds --repeat $repeat$([ $flush = none ] && echo ' --no-flush') ($(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo
  echo "$(lscpu 2>/dev/null | grep 'Model name' | sed 's/  */ /g'); $("$perf" --version); flush $flush; the insert loop only"
  echo
  python3 - "$jsonl" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
kinds = list(dict.fromkeys(r["kind"] for r in recs))
for k in kinds:
    sides = list(dict.fromkeys(r["side"] for r in recs if r["kind"] == k))
    events = list(dict.fromkeys(e for r in recs if r["kind"] == k for e in r["per_insert"]))
    med = {s: {e: statistics.median([r["per_insert"][e] for r in recs if r["kind"] == k and r["side"] == s and e in r["per_insert"]] or [float("nan")])
               for e in events} for s in sides}
    rounds = max(r["round"] for r in recs if r["kind"] == k)
    print(f"## {k}: per insert, median of {rounds}\n")
    print("| event | " + " | ".join(sides) + (" | wort / peer |" if len(sides) == 2 else " |"))
    print("|---|" + "---:|" * (len(sides) + (1 if len(sides) == 2 else 0)))
    for e in events:
        vals = [med[s][e] for s in sides]
        row = f"| {e} | " + " | ".join(f"{v:,.2f}" for v in vals)
        if len(sides) == 2: row += f" | {vals[0] / vals[1]:.2f}x" if vals[1] else " | -"
        print(row + " |")
    if "cycles" in events and "instructions" in events:
        print("| IPC | " + " | ".join(f"{med[s]['instructions'] / med[s]['cycles']:.2f}" for s in sides) + (" | |" if len(sides) == 2 else " |"))
    print()
PY
} >"$md"

# One profile of each side: where the insert loop's samples fall, per function; the hottest
# wort functions annotated (their instructions with the share of the samples).
for k in ${kinds//,/ }; do
  p=$(peer_of "$k")
  for side in wort peer; do
    if [ $side = wort ]; then cmd=$(wort_cmd "$k") label="wort $k" tag=wort
    else [ -x "$bld/driver-$p" ] || continue; cmd=$(peer_cmd "$p") label=$p tag=peer; fi
    data="$out/rec-$k-$tag.data"
    # shellcheck disable=SC2086
    counted record -e "$sample" -o "$data" -- $cmd >"$out/run.log" 2>&1 || { echo "($label: perf record failed)" >>"$md"; continue; }
    {
      echo "## $label: functions (perf record -e $sample, the insert loop; self samples >= 0.5%)"
      echo
      echo '```'
      "$perf" report -i "$data" --stdio --no-children --sort sym --percent-limit 0.5 2>/dev/null | grep -v '^#' | sed '/^$/d' | cut -c1-180 | head -40
      echo '```'
      echo
    } >>"$md"
    if [ $side = wort ]; then
      "$perf" report -i "$data" --stdio --no-children --sort sym --percent-limit 5 -F sym 2>/dev/null |
        grep '\[\.\]' | sed 's/^ *\[\.\] *//' | head -3 >"$out/top.txt" || true  # user-space functions
      while IFS= read -r sym; do
        {
          echo "### $label: annotated: $sym (lines with >= 0.5% of its samples)"
          echo
          echo '```'
          "$perf" annotate -i "$data" --stdio -s "$sym" 2>/dev/null | awk -F: '$1+0 >= 0.5' | head -60
          echo '```'
          echo
        } >>"$md"
      done <"$out/top.txt"
    fi
    rm -f "$data"
  done
done
cat "$md"
