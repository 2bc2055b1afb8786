#!/usr/bin/env bash
# The full mutation and coverage gate of the crash explorer (issue 15; .ci/run runs it; about 4
# minutes on 2 cores): for every persistent index kind and `wort serve`'s item store (the pseudo-kind
# "server": crash/server_explorer.h, src/server/store.cc's sites), `wort crashtest --index K --coverage
# --mutate` runs K's plan, checks that it meets its persist sites, then drops each site it judges,
# one at a time, and reruns the plan step that met it: a site is caught (the explorer reports a
# violation), or noted redundant beside the site with its reason, or MISSED, which fails the run
# (doc/crash-model.md, "The gates"). The suite's MutationGate.Kind tests judge 6 sites per kind
# (a rotation); this judges all of them. Kinds run two at a time, the longest first; each kind's
# output goes to DIR/<kind>.log (default: a temporary directory, kept on failure).
#
#   scripts/mutation-gate.sh [BUILD_DIR] [OUT_DIR]
#
# Exits non-zero if any kind has a violation, an unmet site or a missed mutant.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-$(mktemp -d)}
mkdir -p "$out"
wort="$build/wort"
[ -x "$wort" ] || { echo "mutation-gate.sh: $wort not found (build first: scripts/test.sh)" >&2; exit 2; }
# B3-tree's run is the longest (about 4 minutes): it starts first.
kinds="b3tree wbtree fastfair wort cceh fptree linp nvtree roart woart artcow wbtree-slot cceh-cow cuck bch levl path server"
start=$(date +%s)
printf '%s\n' $kinds | xargs -P 2 -I{} bash -c '
  if "$0" crashtest --index {} --coverage --mutate >"$1/{}.log" 2>&1; then
    echo "== {}: ok ($(grep -h "mutation:" "$1/{}.log" | head -1))"
  else
    echo "== {}: FAILED (exit $?; see $1/{}.log)"; grep -E "MISSED|unmet|violation" "$1/{}.log" | head -20; exit 255
  fi' "$wort" "$out" || { echo "mutation-gate.sh: FAILED after $(( $(date +%s) - start )) s (logs in $out)" >&2; exit 1; }
echo "mutation-gate.sh: every kind passed in $(( $(date +%s) - start )) s"
[ $# -ge 2 ] || rm -rf "$out"
