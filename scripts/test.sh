#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the whole test suite with ctest.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${WORT_BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" -j"$(nproc)" --output-on-failure --timeout 900
