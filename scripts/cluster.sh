#!/usr/bin/env bash
# A local cluster of `wort serve` nodes behind twemproxy (nutcracker) with ketama consistent
# hashing: what memcached users do when one machine is not enough (doc/server.md, "A cluster").
#
#   scripts/cluster.sh start N     start N nodes (each on its own pool) and nutcracker in front
#   scripts/cluster.sh stop        stop nutcracker and the nodes (SIGTERM: pools closed cleanly; a
#                                  later `start N` reopens them: nutcracker hashes on the node
#                                  names node0..node<N-1>, not on the ports)
#   scripts/cluster.sh clean       stop, then remove $CLUSTER_DIR (pools and logs)
#   scripts/cluster.sh status      print the ports and which processes are alive
#   scripts/cluster.sh kill I      kill -9 node I (0-based), to try a failure
#   scripts/cluster.sh restart I   start node I again on its pool and port (after kill or a crash)
#
# Clients talk to the proxy (PROXY_PORT in $CLUSTER_DIR/cluster.env), or directly to the nodes
# with a client-side consistent hash (NODE_PORTS). Everything listens on 127.0.0.1.
# Environment:
#   WORT          the wort binary (default: build/wort)
#   CLUSTER_DIR   pools, logs, pid files, nutcracker.yml, cluster.env (default: /dev/shm/wort-cluster)
#   NODE_ARGS     extra `wort serve` arguments for every node (e.g. "--index wort -t 2")
#   POOL_SIZE     each node's pool size (default 1G)
#   BASE_PORT     first node port (nodes use BASE_PORT+i, the proxy BASE_PORT+N, its stats port
#                 BASE_PORT+N+1); default: free ports picked by the OS
# nutcracker settings: hash fnv1a_64, distribution ketama, auto_eject_hosts false (a dead node's
# keys fail until it is back instead of moving to another node, so no write lands on the wrong
# node and every acknowledged key is found again after a restart), server_retry_timeout 1 s.
set -euo pipefail
cd "$(dirname "$0")/.."
WORT=${WORT:-build/wort}
DIR=${CLUSTER_DIR:-/dev/shm/wort-cluster}
POOL_SIZE=${POOL_SIZE:-1G}
NODE_ARGS=${NODE_ARGS:-}

die() { echo "cluster: $*" >&2; exit 2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {  # port pid
  for _ in $(seq 150); do
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
load_env() {
  [ -f "$DIR/cluster.env" ] || die "no cluster in $DIR (run: $0 start N)"
  # shellcheck disable=SC1091
  . "$DIR/cluster.env"
  IFS=, read -r -a PORTS <<<"$NODE_PORTS"
}
start_node() {  # index port
  local i=$1 port=$2
  # shellcheck disable=SC2086
  "$WORT" serve --pool "$DIR/node$i.pool" --pool-size "$POOL_SIZE" -l 127.0.0.1 -p "$port" $NODE_ARGS \
    </dev/null >>"$DIR/node$i.log" 2>&1 &
  local pid=$!
  echo "$pid" >"$DIR/node$i.pid"
  wait_port "$port" "$pid" || { tail -5 "$DIR/node$i.log" >&2; die "node $i did not start (log: $DIR/node$i.log)"; }
  echo "node $i: 127.0.0.1:$port pid $pid pool $DIR/node$i.pool"
}
stop_pid() {  # pidfile
  [ -f "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$1"
}

cmd=${1:-}
case "$cmd" in
  start)
    n=${2:-}
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "usage: $0 start N (N >= 1 nodes)"
    [ -x "$WORT" ] || die "$WORT not built"
    command -v nutcracker >/dev/null || die "nutcracker (twemproxy) is not installed: scripts/setup.sh installs it"
    [ -f "$DIR/cluster.env" ] && die "a cluster is already set up in $DIR: $0 stop first"
    mkdir -p "$DIR"
    ports=()
    for ((i = 0; i < n; i++)); do
      if [ -n "${BASE_PORT:-}" ]; then ports+=($((BASE_PORT + i))); else ports+=("$(free_port)"); fi
    done
    if [ -n "${BASE_PORT:-}" ]; then proxy=$((BASE_PORT + n)); pstats=$((BASE_PORT + n + 1));
    else proxy=$(free_port); pstats=$(free_port); fi
    {
      echo "NODE_PORTS=$(IFS=,; echo "${ports[*]}")"
      echo "PROXY_PORT=$proxy"
      echo "PROXY_STATS_PORT=$pstats"
      echo "NODES=$n"
    } >"$DIR/cluster.env"
    for ((i = 0; i < n; i++)); do start_node "$i" "${ports[$i]}"; done
    {
      echo "wort:"
      echo "  listen: 127.0.0.1:$proxy"
      echo "  hash: fnv1a_64"
      echo "  distribution: ketama"
      echo "  timeout: 2000"
      echo "  preconnect: false"
      echo "  auto_eject_hosts: false"
      echo "  server_retry_timeout: 1000"
      echo "  server_failure_limit: 1"
      echo "  servers:"
      for ((i = 0; i < n; i++)); do echo "   - 127.0.0.1:${ports[$i]}:1 node$i"; done
    } >"$DIR/nutcracker.yml"
    nutcracker -t -c "$DIR/nutcracker.yml" >/dev/null 2>&1 || die "nutcracker rejects $DIR/nutcracker.yml"
    nutcracker -c "$DIR/nutcracker.yml" -s "$pstats" -a 127.0.0.1 -o "$DIR/nutcracker.log" </dev/null \
      >/dev/null 2>&1 &
    echo $! >"$DIR/nutcracker.pid"
    wait_port "$proxy" "$(cat "$DIR/nutcracker.pid")" || die "nutcracker did not start (log: $DIR/nutcracker.log)"
    echo "proxy: nutcracker on 127.0.0.1:$proxy (ketama over $n nodes; stats on port $pstats)"
    ;;
  stop)
    [ -d "$DIR" ] || exit 0
    stop_pid "$DIR/nutcracker.pid"
    for f in "$DIR"/node*.pid; do [ -e "$f" ] && stop_pid "$f"; done
    rm -f "$DIR/cluster.env"
    echo "cluster in $DIR stopped (pools and logs kept)"
    ;;
  clean)
    "$0" stop
    rm -rf "$DIR"
    ;;
  kill)
    load_env
    i=${2:-}
    [[ "$i" =~ ^[0-9]+$ ]] && ((i < NODES)) || die "usage: $0 kill I (0 <= I < $NODES)"
    kill -KILL "$(cat "$DIR/node$i.pid")" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$(cat "$DIR/node$i.pid")" 2>/dev/null || break; sleep 0.1; done
    echo "node $i killed (kill -9)"
    ;;
  restart)
    load_env
    i=${2:-}
    [[ "$i" =~ ^[0-9]+$ ]] && ((i < NODES)) || die "usage: $0 restart I (0 <= I < $NODES)"
    stop_pid "$DIR/node$i.pid"
    start_node "$i" "${PORTS[$i]}"
    ;;
  status)
    load_env
    for ((i = 0; i < NODES; i++)); do
      pid=$(cat "$DIR/node$i.pid" 2>/dev/null || echo -)
      state=down; kill -0 "$pid" 2>/dev/null && state=up
      echo "node $i: 127.0.0.1:${PORTS[$i]} $state"
    done
    pid=$(cat "$DIR/nutcracker.pid" 2>/dev/null || echo -)
    state=down; kill -0 "$pid" 2>/dev/null && state=up
    echo "proxy: 127.0.0.1:$PROXY_PORT $state"
    ;;
  *)
    die "usage: $0 start N | stop | clean | status | kill I | restart I"
    ;;
esac
