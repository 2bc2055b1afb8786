#!/usr/bin/env bash
# Sets everything up and runs the main job on defaults: the WORT paper's evaluation at quick
# scale for every index kind in the build (wort reproduce), into out/quick/ (report.md, PNG
# plots, results.jsonl). Under 10 minutes on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT=${WORT_OUT:-out/quick}
build/wort reproduce --scale quick --out "$OUT"
echo "report: $OUT/report.md"
