#!/usr/bin/env bash
# Sets everything up and runs the main job on defaults.
# (Until `wort reproduce` lands, the main job is a demonstration of the pool and allocator.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
W=build/wort
P=/dev/shm/wort-demo.pool
rm -f "$P"
$W pool create "$P" --size 16M --max-size 1G
$W pool info "$P"
$W pool check "$P"
rm -f "$P"
