#!/usr/bin/env bash
# Issue 31: where a single-thread insert spends its instructions, beside the authors' prototype
# (works without hardware counters: callgrind's instruction counts and cache simulation).
#
#   scripts/insert_callgrind.sh SRC_ROOT [--keys N] [--kinds K1,K2,...] [--dist D] [--out DIR]
#                               [--wort BUILD/wort] [--ll BYTES]
#
# SRC_ROOT: the peers' source trees, as for scripts/peers.sh (which builds the drivers here, for
# x86-64-v3 so that valgrind runs them). For each kind (default woart,wort,cceh; also fastfair,
# vart) it runs, under callgrind with cache simulation, `wort bench --index K --ops insert
# --flush clflush` and the peer's driver on the same keys (wort bench --keys-out), collecting only
# inside the insert call of each (--toggle-collect: wort's Insert/Put, the peer's insert
# function), so neither side's loop, key generation or lookups count. scripts/callgrind_ops.py
# then gives, per insert: instructions, D1 and LL misses, locked read-modify-writes, fences and
# flushes (found by disassembling the executed instructions), in total and per function.
# Output: DIR/insert-callgrind.txt (the tables) and DIR/insert-callgrind.jsonl. Defaults: 200K
# sparse keys, DIR=/tmp/wort-insert-callgrind. About a minute per kind on one core.
# --ll BYTES: simulate a last level of BYTES (8-way, 64-byte lines) instead of this machine's
# L3, e.g. --ll 524288 for a core's L2 here: "LL misses" are then the L2 misses, which the L3's
# size hides (issue 31, h60: the DRAM version words show there). Use 1M keys or more with it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
[ $# -ge 1 ] || { sed -n 2,20p "$0"; exit 2; }
src=$(cd "$1" && pwd); shift
keys=200K dist=sparse out=/tmp/wort-insert-callgrind wort="$repo/build/wort" kinds=woart,wort,cceh ll=
while [ $# -gt 0 ]; do
  case "$1" in
    --keys) keys=$2; shift 2 ;;
    --dist) dist=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --wort) wort=$2; shift 2 ;;
    --kinds) kinds=$2; shift 2 ;;
    --ll) ll=$2; shift 2 ;;
    *) echo "insert_callgrind.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "insert_callgrind.sh: valgrind not found" >&2; exit 2; }
[ -x "$wort" ] || { echo "insert_callgrind.sh: $wort not found (build wort first)" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The drivers (peers.sh builds them; a tiny run, its figures are not used).
PEERS_ARCH="-march=x86-64-v3" bash "$here/peers.sh" "$src" --keys 1000 --repeat 1 --kinds "$kinds" --out "$out/peers" >/dev/null
bld="$out/peers/build"

keyfile="$out/keys.bin"
"$wort" bench --index "${kinds%%,*}" --dist "$dist" --keys "$keys" --ops insert --flush none --keys-out "$keyfile" \
  --pool "/dev/shm/wort-insert-callgrind-$$.pool" >/dev/null
nkeys=$(python3 -c "import struct,sys; f=open(sys.argv[1],'rb'); f.read(8); print(struct.unpack('<Q', f.read(8))[0])" "$keyfile")

CG=(valgrind --tool=callgrind --cache-sim=yes --dump-instr=yes --compress-pos=no --compress-strings=no)
[ -z "$ll" ] || CG+=("--LL=$ll,8,64")
txt="$out/insert-callgrind.txt" jsonl="$out/insert-callgrind.jsonl"
: >"$txt"
: >"$jsonl"
{
  echo "# scripts/insert_callgrind.sh $src --keys $keys --dist $dist --kinds $kinds ($(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?'))"
  if [ -z "$ll" ]; then echo "# per insert, $nkeys keys; callgrind $(valgrind --version), cache simulation of this machine's caches"
  else echo "# per insert, $nkeys keys; callgrind $(valgrind --version), cache simulation with a last level of $ll bytes (LLmiss = misses of that level)"; fi
} >>"$txt"
for k in ${kinds//,/ }; do
  case $k in
    woart) wfn='wort::art::ArtTree::Insert(*' peer=WOART pfn='art_insert' ;;
    wort) wfn='wort::radix::*WortTree<*>::Insert(*' peer=WORT pfn='art_insert' ;;
    cceh) wfn='wort::hash::*Cceh::Put(*' peer=CCEH pfn='CCEH::Insert(*' ;;
    fastfair) wfn='wort::btree::ff::*FastFair::Put(*' peer=FAST_FAIR pfn='btree::btree_insert(*' ;;
    vart) wfn='wort::vol::*VArt::Insert(*' peer=libart pfn='art_insert' ;;
    *) echo "insert_callgrind.sh: --kinds: unknown kind $k (woart, wort, cceh, fastfair, vart)" >&2; exit 2 ;;
  esac
  pool="/dev/shm/wort-insert-callgrind-$$-$k.pool"
  "${CG[@]}" --toggle-collect="$wfn" --callgrind-out-file="$out/cg.$k.wort" \
    "$wort" bench --index "$k" --dist "$dist" --keys "$keys" --ops insert --flush clflush --pool "$pool" >"$out/cg.$k.wort.log" 2>&1
  rm -f "$pool"
  python3 "$here/callgrind_ops.py" "$out/cg.$k.wort" "$nkeys" --label "wort $k" --json "$jsonl" >>"$txt"
  echo >>"$txt"
  if [ -x "$bld/driver-$peer" ]; then
    # The driver then looks every key up; only its inserts are collected.
    "${CG[@]}" --toggle-collect="$pfn" --callgrind-out-file="$out/cg.$k.peer" "$bld/driver-$peer" "$keyfile" >"$out/cg.$k.peer.log" 2>&1
    python3 "$here/callgrind_ops.py" "$out/cg.$k.peer" "$nkeys" --label "$peer" --json "$jsonl" >>"$txt"
  else
    echo "($peer not built: no comparison)" >>"$txt"
  fi
  echo >>"$txt"
done
rm -f "$keyfile"
cat "$txt"
