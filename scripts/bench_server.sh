#!/usr/bin/env bash
# Load on `wort serve` beside memcached, same client, same settings. Two patterns:
#
# PATTERN=mix (default): the grid of issue 17: get/set 90/10 and 50/50 (MIXES), 100-byte and
# 4 KiB values (VALUE_SIZES), 1 and 2 server threads (THREAD_COUNTS), CONNS client connections;
# each run fills the key space once, then runs REQUESTS random requests; ops/s and p50/p99.
#
# PATTERN=phases: the WORT paper's Memcached experiment (section 5.4, Figure 11) on this machine: the
# mc-benchmark pattern (a series of SETs of random string keys, then a series of GETs) with 4 and
# with 50 client connections, against `wort serve` with each radix tree and against Debian's
# memcached 1.6, all started here on 127.0.0.1 with the same client (`wort bench-server`) and
# the same settings. Prints one table. Not a test: nothing is asserted.
#
#   scripts/bench_server.sh [BUILD_DIR]
# Environment (PATTERN=mix): MIXES (default "90 50"), VALUE_SIZES ("100 4096"), THREAD_COUNTS
#   ("1 2"), CONNS (default 32), REQUESTS (default 200000), KEYSPACE (default 100000), KINDS,
#   KEYS_PER_GET (default 1: keys per get request; N > 1 sends multi-gets "get k1 ... kN" so that
#   the client, on the same cores, costs little beside the server: counts are then keys),
#   PIPELINE (default 1: requests in flight per connection; N > 1 keeps each server worker busy
#   while its client parses a reply and sends the next), SERVER_CPUS and CLIENT_CPUS (unset: not
#   pinned; e.g. SERVER_CPUS=0 CLIENT_CPUS=2-15: `taskset -c` lists for the servers and the client).
# Environment (PATTERN=phases):
#   REQUESTS   requests per phase (default 200000)     KEYSPACE   distinct keys (default 100000)
#   VALUE_SIZE bytes per value (default 32)            THREADS    server worker threads (default 2)
#   KINDS      index kinds to serve (default "wort woart artcow", those this build has)
#   CONNS      client connection counts (default "4 50")
# Pools go to /dev/shm and are removed afterwards. Each phase is bounded by REQUESTS and 60 s.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
PATTERN=${PATTERN:-mix}
WORT="$BUILD_DIR/wort"
REQUESTS=${REQUESTS:-200000}
KEYSPACE=${KEYSPACE:-100000}
VALUE_SIZE=${VALUE_SIZE:-32}
THREADS=${THREADS:-2}
KINDS=${KINDS:-"wort woart artcow"}
if [ "$PATTERN" = mix ]; then CONNS=${CONNS:-32}; else CONNS=${CONNS:-"4 50"}; fi
MIXES=${MIXES:-"90 50"}
VALUE_SIZES=${VALUE_SIZES:-"100 4096"}
THREAD_COUNTS=${THREAD_COUNTS:-"1 2"}
KEYS_PER_GET=${KEYS_PER_GET:-1}
PIPELINE=${PIPELINE:-1}
SPIN=(); CPIN=()
[ -z "${SERVER_CPUS:-}" ] || SPIN=(taskset -c "$SERVER_CPUS")
[ -z "${CLIENT_CPUS:-}" ] || CPIN=(taskset -c "$CLIENT_CPUS")
[ -x "$WORT" ] || { echo "bench_server: $WORT not built" >&2; exit 1; }
command -v memcached >/dev/null || { echo "bench_server: memcached not installed (scripts/setup.sh)" >&2; exit 1; }

PIDS=()
POOLS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  for f in "${POOLS[@]}"; do rm -f "$f"; done
  rm -f "${TIMES_FILE:-}"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
  for _ in $(seq 100); do
    (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "bench_server: nothing listening on port $1" >&2
  return 1
}

run_client() {  # label port
  for c in $CONNS; do
    "$WORT" bench-server --port "$2" --conns "$c" --requests "$REQUESTS" --keyspace "$KEYSPACE" \
      --value-size "$VALUE_SIZE" --max-seconds 60 --label "$1" | grep -v '^#' | grep -v '^server '
  done
}

start_server() {  # name threads -> sets SPORT, SPID
  local name=$1 threads=$2
  SPORT=$(free_port)
  if [ "$name" = memcached ]; then
    "${SPIN[@]}" memcached -u "$(id -un)" -l 127.0.0.1 -p "$SPORT" -U 0 -t "$threads" -m 4096 -c 4096 &
    SPID=$!
  else
    local pool="/dev/shm/wort-bench-server-$$-$name.pool"
    rm -f "$pool"
    POOLS+=("$pool")
    "${SPIN[@]}" "$WORT" serve --pool "$pool" --index "$name" -p "$SPORT" -t "$threads" -c 4096 --pool-size 4G >/dev/null 2>&1 &
    SPID=$!
  fi
  PIDS+=("$SPID")
  wait_port "$SPORT"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# CHILD_CPU := the CPU seconds (user + system) of this shell's waited-for children so far, from
# the second line of the builtin `times`. Call it as a plain command, never inside $(...): in a
# subshell `times` reports the subshell's children (none yet).
TIMES_FILE=$(mktemp)
children_cpu() {
  times >"$TIMES_FILE"
  CHILD_CPU=$(sed -n 2p "$TIMES_FILE" | awk '{ t = 0; for (i = 1; i <= 2; ++i) { split($i, a, "m"); t += a[1] * 60 + a[2] } printf "%.3f", t }')
}
stop_server() {  # name
  kill "$SPID" 2>/dev/null || true
  wait "$SPID" 2>/dev/null || true
  [ "$1" = memcached ] || rm -f "/dev/shm/wort-bench-server-$$-$1.pool"
}

if [ "$PATTERN" = mix ]; then
  echo "# get/set mixes: fill $KEYSPACE keys, then $REQUESTS requests of random keys key:<uniform in $KEYSPACE>; $CONNS client connections (one blocking connection per client thread)"
  echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
  [ -z "${SERVER_CPUS:-}${CLIENT_CPUS:-}" ] || echo "# pinned: servers on CPUs ${SERVER_CPUS:-any}, client on CPUs ${CLIENT_CPUS:-any}"
  echo "# srv_cpu_us: the server process's CPU time (user+system) per request, from /proc/PID/stat: less sensitive to other load than ops/s"
  echo "# cli_cpu_us: the client's (wort bench-server's) CPU time per request: on a machine where both share the cores, 2 server"
  echo "#   threads can at most reach (cores / (srv_cpu_us + cli_cpu_us)) / (1 / srv_cpu_us of 1 thread) times one thread's ops/s"
  [ "$KEYS_PER_GET" = 1 ] || echo "# $KEYS_PER_GET keys per get request (multi-get): requests, ops/s and srv_cpu_us count keys"
  [ "$PIPELINE" = 1 ] || echo "# $PIPELINE requests in flight per connection (pipelined)"
  printf '%-16s %3s %6s %6s %10s %12s %9s %9s %9s %10s %10s %7s\n' server thr value op requests ops/s p50_us p99_us max_us srv_cpu_us cli_cpu_us errors
  for threads in $THREAD_COUNTS; do
    for vs in $VALUE_SIZES; do
      for name in memcached $KINDS; do
        if ! start_server "$name" "$threads"; then echo "# $name did not start (kind not in this build?)"; continue; fi
        label=$name
        [ "$name" = memcached ] && label="memcached-$(memcached -V | awk '{print $2}')"
        fill=""
        for mix in $MIXES; do
          if [ -z "$fill" ]; then  # fill the key space once per server, unmeasured
            "${CPIN[@]}" "$WORT" bench-server --port "$SPORT" --conns "$CONNS" --keyspace "$KEYSPACE" --value-size "$vs" \
              --mix "$mix" --requests 0 --max-seconds 60 >/dev/null
            fill="--no-fill"
          fi
          t0=$(cpu_ticks "$SPID")
          children_cpu
          c0=$CHILD_CPU
          line=$("${CPIN[@]}" "$WORT" bench-server --port "$SPORT" --conns "$CONNS" --requests "$REQUESTS" --keyspace "$KEYSPACE" \
            --value-size "$vs" --mix "$mix" $fill --keys-per-get "$KEYS_PER_GET" --pipeline "$PIPELINE" --max-seconds 60 --label "$label" | grep -v '^#' | grep -v '^server ')
          t1=$(cpu_ticks "$SPID")
          children_cpu
          c1=$CHILD_CPU
          echo "$line" | awk -v t="$threads" -v v="$vs" -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v ccpu="$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')" \
            '{printf "%-16s %3s %6s %6s %10s %12s %9s %9s %9s %10.2f %10.2f %7s\n", $1, t, v, $3, $4, $5, $6, $7, $8, ($4 > 0 ? ticks * 1e6 / hz / $4 : 0), ($4 > 0 ? ccpu * 1e6 / $4 : 0), $10}'
        done
        stop_server "$name"
      done
    done
  done
  exit 0
fi

echo "# mc-benchmark pattern: $REQUESTS SETs then $REQUESTS GETs per run, keys key:<uniform in $KEYSPACE>, ${VALUE_SIZE}-byte values"
echo "# servers: $THREADS worker threads each, on 127.0.0.1; client: wort bench-server (one blocking connection per thread)"
echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); flush instruction: wort's default (best supported)"
printf '%-16s %5s %6s %10s %12s %9s %9s %9s %7s %7s\n' server conns op requests ops/s p50_us p99_us max_us misses errors

# memcached 1.6 (DRAM only, no persistence): the reference.
port=$(free_port)
memcached -u "$(id -un)" -l 127.0.0.1 -p "$port" -U 0 -t "$THREADS" -m 1024 &
PIDS+=($!)
wait_port "$port"
run_client "memcached-$(memcached -V | awk '{print $2}')" "$port"

for kind in $KINDS; do
  pool="/dev/shm/wort-bench-server-$$-$kind.pool"
  rm -f "$pool"
  POOLS+=("$pool")
  port=$(free_port)
  "$WORT" serve --pool "$pool" --index "$kind" --port "$port" --threads "$THREADS" --pool-size 4G >/dev/null 2>&1 &
  pid=$!
  PIDS+=($pid)
  if ! wait_port "$port"; then
    echo "# wort serve --index $kind did not start (kind not in this build?)"
    continue
  fi
  run_client "wort-$kind" "$port"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
