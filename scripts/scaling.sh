#!/usr/bin/env bash
# The scaling grid of issue 31 in one command: every concurrent kind, YCSB load / A / C, 1 to
# nproc threads, one or more wort binaries side by side, and the table.
#
#   scripts/scaling.sh [--wort PATH [--label NAME]]... [--keys N] [--ops N] [--threads LIST]
#                      [--kinds LIST] [--workloads LIST] [--request zipfian|uniform]
#                      [--repeat R] [--pool-size SIZE] [--out DIR] [-- EXTRA BENCH ARGS]
#
#   --wort PATH     a wort binary (repeat the option for several: before/after in one call, run
#                   alternately, point by point order kept per repeat). Default: build/wort of the
#                   tree this script is in. With --wort the source tree and its build are not
#                   needed: this script, scaling_table.py and python3 (standard library) are all
#                   it uses.
#   --label NAME    the label of the --wort before it (default: wort1, wort2, ...).
#   --keys N        records loaded (default 2M); --ops N operations per workload (default = keys).
#   --threads LIST  thread counts (default: 1,2,4,8,... up to nproc, capped at 16, and nproc
#                   itself when it is not a power of two).
#   --kinds LIST    default woart,wort,roart,cceh,fastfair,vart; --workloads default load,a,c;
#                   --request default zipfian.
#   --repeat R      runs of the whole grid per binary (default 1); the table gives medians and
#                   min-max.
#   --pool-size     default: wort bench's own (grows on demand).
#   --out DIR       default scaling-out; DIR/LABEL.jsonl (wort bench --json records),
#                   DIR/LABEL.log (its text output), DIR/scaling.md (the table).
# What runs, per binary and repeat:
#   WORT bench ycsb --index KINDS --keys N --ops N --workload WORKLOADS --request REQ
#                   --threads LIST --json DIR/LABEL.jsonl [EXTRA]
# then python3 scaling_table.py LABEL=DIR/LABEL.jsonl ... > DIR/scaling.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
worts=()
labels=()
keys=2M
ops=
threads=
kinds=woart,wort,roart,cceh,fastfair,vart
workloads=load,a,c
request=zipfian
repeat=1
pool_size=
out=scaling-out
extra=()
die() { echo "scaling.sh: $*" >&2; exit 2; }
need() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --wort) need "$@"; worts+=("$2"); labels+=(""); shift 2 ;;
    --label)
      need "$@"
      [ ${#worts[@]} -gt 0 ] || die "--label names the --wort before it; give --wort first"
      labels[$((${#worts[@]} - 1))]="$2"; shift 2 ;;
    --keys) need "$@"; keys=$2; shift 2 ;;
    --ops) need "$@"; ops=$2; shift 2 ;;
    --threads) need "$@"; threads=$2; shift 2 ;;
    --kinds) need "$@"; kinds=$2; shift 2 ;;
    --workloads) need "$@"; workloads=$2; shift 2 ;;
    --request) need "$@"; request=$2; shift 2 ;;
    --repeat) need "$@"; repeat=$2; shift 2 ;;
    --pool-size) need "$@"; pool_size=$2; shift 2 ;;
    --out) need "$@"; out=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || die "--repeat wants a positive integer, got '$repeat'"
if [ ${#worts[@]} -eq 0 ]; then
  worts=("$here/../build/wort")
  labels=("")
fi
for i in "${!worts[@]}"; do
  [ -x "${worts[$i]}" ] || die "no executable wort binary at '${worts[$i]}' (build it, or give --wort PATH)"
  [ -n "${labels[$i]}" ] || labels[$i]="wort$((i + 1))"
  [[ "${labels[$i]}" =~ ^[A-Za-z0-9._-]+$ ]] || die "label '${labels[$i]}': letters, digits, . _ - only"
done
if [ "$(printf '%s\n' "${labels[@]}" | sort | uniq -d)" != "" ]; then die "two binaries have the same label"; fi
if [ -z "$threads" ]; then
  n=$(nproc)
  [ "$n" -gt 16 ] && n=16
  threads=1
  t=2
  while [ "$t" -le "$n" ]; do threads="$threads,$t"; t=$((t * 2)); done
  [ $((t / 2)) -eq "$n" ] || threads="$threads,$n"
fi
[ -n "$ops" ] || ops=$keys

mkdir -p "$out"
for lab in "${labels[@]}"; do rm -f "$out/$lab.jsonl" "$out/$lab.log"; done
args=(bench ycsb --index "$kinds" --keys "$keys" --ops "$ops" --workload "$workloads" --request "$request"
      --threads "$threads")
[ -z "$pool_size" ] || args+=(--pool-size "$pool_size")
echo "scaling.sh: threads $threads, keys $keys, ops $ops, kinds $kinds, workloads $workloads, $repeat repeat(s)" >&2
for r in $(seq 1 "$repeat"); do
  for i in "${!worts[@]}"; do
    lab=${labels[$i]}
    echo "scaling.sh: [$r/$repeat] $lab: ${worts[$i]} ${args[*]} ${extra[*]}" >&2
    "${worts[$i]}" "${args[@]}" --json "$out/$lab.jsonl" "${extra[@]}" >>"$out/$lab.log" 2>&1 ||
      die "$lab: wort bench failed (see $out/$lab.log)"
  done
done
table_args=()
for lab in "${labels[@]}"; do table_args+=("$lab=$out/$lab.jsonl"); done
python3 "$here/scaling_table.py" "${table_args[@]}" >"$out/scaling.md"
cat "$out/scaling.md"
echo "scaling.sh: table in $out/scaling.md" >&2
