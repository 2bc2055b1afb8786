#!/usr/bin/env bash
# Sets everything up and runs the main job on defaults: the WORT paper's evaluation at quick
# scale for every index kind in the build (wort reproduce), into out/quick/ (report.md, PNG
# plots, results.jsonl), with a progress line and an estimate of the time left after each run.
# Measurements about 2-3 minutes on a quiet 2-core machine (about 10 with other jobs beside it).
#   WORT_SCALE        quick (default), medium, paper; tiny runs the whole pipeline in seconds
#                     (.ci/run uses it to check this command on every change)
#   WORT_OUT          output directory (default out/<scale>); missing parents are created
#   WORT_SKIP_SETUP   1: do not run scripts/setup.sh (already set up)
#   WORT_BIN          the wort binary (default build/wort)
# Any arguments are passed on to `wort reproduce` (e.g. --index wort,woart --no-cachegrind, or
# --peers-src SRC_ROOT to measure ROART against P-ART built from SRC_ROOT/RECIPE/P-ART).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${WORT_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh
SCALE=${WORT_SCALE:-quick}
OUT=${WORT_OUT:-out/$SCALE}
"${WORT_BIN:-${WORT_BUILD_DIR:-build}/wort}" reproduce --scale "$SCALE" --out "$OUT" "$@"
echo "report: $OUT/report.md"
