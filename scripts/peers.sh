#!/usr/bin/env bash
# The peer comparison of issue 19: wort's kinds against the public code they are measured
# against, same keys, same order, one run. It fetches nothing and copies nothing into the
# repository: it builds each peer from a source tree you give it, in a build directory outside
# the repository, with a small driver of ours (scripts/peers/driver.cc) linked against it.
#
#   scripts/peers.sh SRC_ROOT [--keys N] [--dist sparse|dense|clustered] [--repeat R]
#                    [--seed S] [--out DIR] [--wort BUILD/wort] [--kinds K1,K2,...]
#
# SRC_ROOT holds one directory per peer, each the peer's repository tree as published:
#   SRC_ROOT/libart     https://github.com/armon/libart            (vart)
#   SRC_ROOT/WORT       https://github.com/SeKwonLee/WORT          (wort: src/wort, woart: src/woart)
#   SRC_ROOT/CCEH       https://github.com/DICL/CCEH               (cceh: src/CCEH_MSB.cpp -DINPLACE)
#   SRC_ROOT/FAST_FAIR  https://github.com/DICL/FAST_FAIR          (fastfair: single/src/btree.h)
#   SRC_ROOT/RECIPE     https://github.com/utsaslab/RECIPE         (roart vs P-ART: P-ART/Tree.cpp,
#                       clflush build; needs Debian's libtbb-dev). This pair also runs 100-key scans.
# A missing one is skipped with a note. --kinds runs only the pairs of those wort kinds (vart,
# woart, wort, cceh, fastfair, roart; default: all). --scan-len L sets the roart/P-ART scan length
# (default 100). From bare git directories, e.g.:
#   mkdir -p /tmp/peers/libart && git -C /path/libart.git archive HEAD | tar -x -C /tmp/peers/libart
#
# What runs, per repeat (default 3; the report gives the median of each figure):
#   wort bench --index K --dist D --keys N --ops insert,search --flush clflush --keys-out FILE
#   and each peer's driver on FILE, alternating (kind, peer) pairs. Every program inserts the N keys in
#   the same order (value = position + 1) and looks every key up in the same order, checking values.
# The peers flush with clflush + mfence and run in DRAM (malloc); wort runs with --flush clflush
# in a pool under /dev/shm. Lookups flush nothing in either. Figures are CPU ns per operation
# (thread CPU time): on a shared machine still an approximation; say so when quoting them.
# --no-flush (kinds wort, woart, vart only): wort runs with --flush none and WORT/WOART's copies in
# the build directory have their clflush and mfence instructions replaced by empty asm statements
# (the same compiler barriers): what each insert costs besides its flushes (issue 31).
# Output: DIR/peers.jsonl (wort bench records and the drivers' lines) and DIR/peers.md (table).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
[ $# -ge 1 ] || { sed -n 2,28p "$0"; exit 2; }
src=$(cd "$1" && pwd); shift
keys=16M dist=sparse repeat=3 seed=1 out=/tmp/wort-peers wort="$repo/build/wort" kinds=vart,woart,wort,cceh,fastfair,roart
scan_len=100 flush=clflush
while [ $# -gt 0 ]; do
  case "$1" in
    --keys) keys=$2; shift 2 ;;
    --dist) dist=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --wort) wort=$2; shift 2 ;;
    --kinds) kinds=$2; shift 2 ;;
    --scan-len) scan_len=$2; shift 2 ;;
    --no-flush) flush=none; shift ;;
    *) echo "peers.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
case "$(cd "$(dirname "$out")" && pwd)/" in "$repo"/*) echo "peers.sh: --out must be outside the repository" >&2; exit 2 ;; esac
for k in ${kinds//,/ }; do
  [ $flush = clflush ] || case $k in vart|woart|wort) ;; *) echo "peers.sh: --no-flush covers wort, woart and vart only" >&2; exit 2 ;; esac
  case $k in vart|woart|wort|cceh|fastfair|roart) ;; *) echo "peers.sh: --kinds: unknown kind $k (vart, woart, wort, cceh, fastfair, roart)" >&2; exit 2 ;; esac
done
[ -x "$wort" ] || { echo "peers.sh: $wort not found (build wort first)" >&2; exit 2; }
mkdir -p "$out"
bld="$out/build"
mkdir -p "$bld"
drv="$here/peers/driver.cc"
CXX=${CXX:-g++} CC=${CC:-gcc}
# PEERS_ARCH: the drivers' target flags (scripts/insert_callgrind.sh builds them for x86-64-v3,
# which valgrind runs; -march=native may emit instructions it does not know).
OPT="-O3 ${PEERS_ARCH:--march=native} -DNDEBUG -w"

# ---- build: one driver binary per peer ----
declare -A bin kind
build() {  # name wort-kind command...
  local name=$1 k=$2; shift 2
  if "$@" >"$bld/$name.log" 2>&1; then bin[$name]="$bld/driver-$name"; kind[$name]=$k
  else echo "peers.sh: building $name failed (see $bld/$name.log); skipped" >&2; fi
}
if [ -d "$src/libart/src" ]; then
  build libart vart bash -c "$CC $OPT -std=c99 -D_GNU_SOURCE -c '$src/libart/src/art.c' -o '$bld/art.o' &&
    $CXX $OPT -std=c++17 -DPEER_LIBART -I'$src/libart/src' '$drv' '$bld/art.o' -o '$bld/driver-libart'"
else echo "peers.sh: no $src/libart: libart skipped" >&2; fi
if [ -d "$src/WORT/src" ]; then
  for p in wort woart; do
    up=$(echo $p | tr a-z A-Z)
    # woart.c as published (commit 9fc3f51 "a bug in make_leaf") has one C++ cast in C code,
    # `l = static_cast<woart_leaf *>(ret);`: the copy compiled here (in the build directory)
    # has it replaced by the C cast `(art_leaf *)(ret)`; nothing else is changed.
    nf=()
    [ $flush = none ] && nf=(-e 's/asm volatile *("clflush %0\\n"/asm volatile (""/' -e 's/asm volatile *("mfence" *::: *"memory")/asm volatile ("" ::: "memory")/')
    sed -e 's/static_cast<woart_leaf \*>(ret)/(art_leaf *)(ret)/' "${nf[@]}" "$src/WORT/src/$p/$p.c" >"$bld/$p.c"
    if [ $flush = none ] && grep -q 'clflush\|"mfence"' "$bld/$p.c"; then echo "peers.sh: --no-flush left a flush in $p.c" >&2; exit 1; fi
    build $up $p bash -c "$CC $OPT -std=gnu99 -c '$bld/$p.c' -I'$src/WORT/src/$p' -o '$bld/$p.o' -lm &&
      $CXX $OPT -std=c++17 -DPEER_$up -I'$src/WORT/src/$p' '$drv' '$bld/$p.o' -o '$bld/driver-$up' -lm"
  done
else echo "peers.sh: no $src/WORT: WORT and WOART skipped" >&2; fi
if [ -d "$src/CCEH/src" ]; then
  build CCEH cceh bash -c "$CXX $OPT -std=c++17 -I'$src/CCEH' -DINPLACE -c '$src/CCEH/src/CCEH_MSB.cpp' -o '$bld/cceh.o' &&
    $CXX $OPT -std=c++17 -DPEER_CCEH -I'$src/CCEH' '$drv' '$bld/cceh.o' -o '$bld/driver-CCEH' -lpthread"
else echo "peers.sh: no $src/CCEH: CCEH skipped" >&2; fi
if [ -d "$src/FAST_FAIR/single/src" ]; then
  build FAST_FAIR fastfair bash -c "$CXX $OPT -std=c++17 -DPEER_FASTFAIR -I'$src/FAST_FAIR/single/src' '$drv' -o '$bld/driver-FAST_FAIR' -lrt -lm"
else echo "peers.sh: no $src/FAST_FAIR: FAST&FAIR skipped" >&2; fi
if [ -d "$src/RECIPE/P-ART" ]; then
  # Tree.cpp includes N.cpp and Epoche.cpp; -DCLFLUSH selects its clflush path (the others' flush).
  build PART roart bash -c "$CXX $OPT -std=c++17 -DCLFLUSH -mcx16 -faligned-new=64 -DPEER_PART -I'$src/RECIPE/P-ART' '$drv' \
    '$src/RECIPE/P-ART/Tree.cpp' -o '$bld/driver-PART' -ltbb -latomic"
else echo "peers.sh: no $src/RECIPE/P-ART: P-ART skipped" >&2; fi
[ ${#bin[@]} -gt 0 ] || { echo "peers.sh: no peer built" >&2; exit 1; }

# ---- run ----
keyfile="$out/keys.bin"
jsonl="$out/peers.jsonl"
: >"$jsonl"
for r in $(seq 1 "$repeat"); do
  for name in libart WOART WORT CCEH FAST_FAIR PART; do
    [ -n "${bin[$name]:-}" ] || continue
    k=${kind[$name]}
    case ",$kinds," in *",$k,"*) ;; *) continue ;; esac
    echo "== repeat $r: $k vs $name ($keys $dist keys)"
    ops=insert,search extra=()
    [ "$name" = PART ] && ops=insert,search,scan extra=(0 "$scan_len")
    "$wort" bench --index "$k" --dist "$dist" --keys "$keys" --seed "$seed" --ops "$ops" --scan-len "$scan_len" \
      --flush $flush --keys-out "$keyfile" --json "$jsonl" >"$out/wort-$k-$r.log"
    grep -E "^$k .*(insert|search|scan) " "$out/wort-$k-$r.log" | head -3 || true
    "${bin[$name]}" "$keyfile" "${extra[@]}" | tee -a "$jsonl"
  done
done
rm -f "$keyfile"

python3 - "$jsonl" "$out/peers.md" "$keys" "$dist" "$repeat" <<'PY'
import json, statistics, sys
path, md, keys, dist, repeat = sys.argv[1:]
pairs = [("vart", "libart"), ("woart", "WOART"), ("wort", "WORT"), ("cceh", "CCEH"), ("fastfair", "FAST_FAIR"),
         ("roart", "P-ART")]
w, p = {}, {}
for line in open(path):
    j = json.loads(line)
    if j.get("bench") == "index":
        w.setdefault((j["index"], j["op"]), []).append(j["cpu_ns_per_op"])
    elif j.get("bench") == "peer":
        p.setdefault((j["peer"], "insert"), []).append(j["insert_cpu_ns"])
        p.setdefault((j["peer"], "search"), []).append(j["lookup_cpu_ns"])
        if "scan_cpu_ns" in j:
            p.setdefault((j["peer"], "scan"), []).append(j["scan_cpu_ns"])
med = lambda v: statistics.median(v) if v else float("nan")
rows = [f"{keys} {dist} keys, CPU ns per operation, median of {repeat} (scripts/peers.sh)", "",
        "| wort kind | peer | lookup wort | lookup peer | ratio | insert wort | insert peer | ratio |",
        "|---|---|---:|---:|---:|---:|---:|---:|"]
for k, name in pairs:
    if (name, "search") not in p: continue
    ls, lp = med(w.get((k, "search"), [])), med(p[(name, "search")])
    is_, ip = med(w.get((k, "insert"), [])), med(p[(name, "insert")])
    rows.append(f"| {k} | {name} | {ls:.0f} | {lp:.0f} | {ls/lp:.2f}x | {is_:.0f} | {ip:.0f} | {is_/ip:.2f}x |")
scans = [(k, name) for k, name in pairs if (name, "scan") in p and (k, "scan") in w]
if scans:
    rows += ["", "Range scans (CPU ns per query of the scan length; wort: `wort bench --ops scan`):", "",
             "| wort kind | peer | scan wort | scan peer | ratio |", "|---|---|---:|---:|---:|"]
    for k, name in scans:
        sw, sp = med(w[(k, "scan")]), med(p[(name, "scan")])
        rows.append(f"| {k} | {name} | {sw:.0f} | {sp:.0f} | {sw/sp:.2f}x |")
open(md, "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
