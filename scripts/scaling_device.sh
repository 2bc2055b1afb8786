#!/usr/bin/env bash
# Issue 31's scaling grid (scripts/scaling.sh) on the device machine lent to some sessions (16
# cores; no network): builds the wort CLI of this tree there and, given BASE, of that commit too
# (from this checkout's git history), then runs the grid with both binaries side by side in one
# call, so that before and after are measured on the same machine.
#
#   scripts/scaling_device.sh [BASE_COMMIT] [-- ARGS FOR scripts/scaling.sh]
#
# Results under $OUT (default out/scaling-device): scaling.md (the table), base.jsonl and
# new.jsonl (wort bench records), their logs, and the build logs. Build dependencies missing
# there come as .deb files in .gpudeps/ (scripts/knn_gpu_device_deps.sh; carry .gpudeps), unpacked
# by scripts/device_deps_env.sh. Exit status: non-zero if a build or the grid fails.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/scaling-device}
mkdir -p "$OUT"
base=
if [ $# -gt 0 ] && [ "$1" != "--" ]; then base=$1; shift; fi
[ "${1:-}" = "--" ] && shift
start=$(date +%s)
say() { echo "scaling_device [$(($(date +%s) - start)) s]: $*" | tee -a "$OUT/summary.txt"; }
. scripts/device_deps_env.sh
{ nproc; lscpu | grep -E "Model name|^CPU\(s\)|Thread|NUMA node\(s\)"; git log --oneline -1; } >>"$OUT/summary.txt" 2>&1

build() {  # SOURCE_DIR LOG: configures SOURCE_DIR/build-scaling (Release, no tests, no UCX) and builds wort
  cmake -S "$1" -B "$1/build-scaling" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DWORT_TESTS=OFF -DWORT_UCX=OFF \
    "${cmake_extra[@]}" >"$2" 2>&1 && cmake --build "$1/build-scaling" -j"$(nproc)" --target wort >>"$2" 2>&1
}
args=()
if [ -n "$base" ]; then
  bdir=$(mktemp -d "${TMPDIR:-/tmp}/wort-base.XXXXXX")
  git archive "$base" | tar -x -C "$bdir" || { say "FAILED: git archive $base"; exit 1; }
  build "$bdir" "$OUT/build-base.txt" &
  bpid=$!
fi
build "$PWD" "$OUT/build-new.txt" || { say "FAILED: build of this tree (build-new.txt)"; tail -20 "$OUT/build-new.txt"; exit 1; }
if [ -n "$base" ]; then
  wait "$bpid" || { say "FAILED: build of $base (build-base.txt)"; tail -20 "$OUT/build-base.txt"; exit 1; }
  args+=(--wort "$bdir/build-scaling/wort" --label base)
fi
args+=(--wort "$PWD/build-scaling/wort" --label new)
say "built ${base:+$base and }this tree"
bash scripts/scaling.sh "${args[@]}" --out "$OUT" "$@" >"$OUT/grid.txt" 2>&1
rc=$?
say "scaling.sh exit $rc"
cat "$OUT/scaling.md" 2>/dev/null
exit $rc
