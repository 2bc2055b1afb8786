#!/usr/bin/env bash
# Throughput of 1, 2 and 3 `wort serve` nodes, behind nutcracker (scripts/cluster.sh) and direct
# (the load client partitions keys over the nodes itself, as a client-side hash does), with the
# same client: `wort bench-server --mix`, fill then get/set mix. Not a test: nothing is asserted.
#
#   scripts/bench_cluster.sh [BUILD_DIR]
# Environment: NODES (default "1 2 3"), MIX (default 90), VALUE_SIZE (100), CONNS (32),
#   REQUESTS (100000), KEYSPACE (50000), NODE_ARGS (extra `wort serve` arguments, default "-t 1")
# Every process runs on this machine: on 2 cores, N nodes + nutcracker + the client share them,
# so more nodes cannot add throughput here; the figures show the proxy's cost, not scaling.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
export WORT="$BUILD_DIR/wort"
export CLUSTER_DIR=${CLUSTER_DIR:-/dev/shm/wort-bench-cluster-$$}
export NODE_ARGS=${NODE_ARGS:-"-t 1"}
export POOL_SIZE=${POOL_SIZE:-2G}
NODES=${NODES:-"1 2 3"}
MIX=${MIX:-90}
VALUE_SIZE=${VALUE_SIZE:-100}
CONNS=${CONNS:-32}
REQUESTS=${REQUESTS:-100000}
KEYSPACE=${KEYSPACE:-50000}
trap 'scripts/cluster.sh clean >/dev/null 2>&1 || true' EXIT

echo "# $CONNS connections, fill $KEYSPACE keys then $REQUESTS requests, ${MIX}% gets, ${VALUE_SIZE}-byte values; nodes: wort serve $NODE_ARGS"
echo "# machine: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-8s %6s %10s %12s %9s %9s %7s\n' nodes path op requests ops/s p50_us p99_us errors
for n in $NODES; do
  scripts/cluster.sh start "$n" >/dev/null
  # shellcheck disable=SC1091
  . "$CLUSTER_DIR/cluster.env"
  IFS=, read -r -a ports <<<"$NODE_PORTS"
  more=$(IFS=,; echo "${ports[*]:1}")
  for path in proxy direct; do
    if [ "$path" = proxy ]; then args=(--port "$PROXY_PORT"); else args=(--port "${ports[0]}"); [ -n "$more" ] && args+=(--more-ports "$more"); fi
    "$WORT" bench-server "${args[@]}" --conns "$CONNS" --requests "$REQUESTS" --keyspace "$KEYSPACE" \
      --value-size "$VALUE_SIZE" --mix "$MIX" --max-seconds 60 --label "$n-$path" |
      grep -v '^#' | grep -v '^server ' | grep -v ' FILL ' |
      awk -v n="$n" -v p="$path" '{printf "%-6s %-8s %6s %10s %12s %9s %9s %7s\n", n, p, $3, $4, $5, $6, $7, $10}'
  done
  scripts/cluster.sh clean >/dev/null
done
