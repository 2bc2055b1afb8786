#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the whole test suite with ctest.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${WORT_BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" -j"$(nproc)" --output-on-failure --timeout 900

# ThreadSanitizer run of the concurrency stress tests (scripts/tsan.sh; .ci/run always runs it):
# WORT_TSAN_RUN=1 adds it here too.
if [ "${WORT_TSAN_RUN:-0}" = 1 ]; then bash scripts/tsan.sh; fi
