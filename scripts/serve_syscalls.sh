#!/usr/bin/env bash
# System calls per request of `wort serve` and of memcached under the same load (issue 35): one
# worker thread each, `wort bench-server --mix MIX` with CONNS connections and 100-byte values
# over KEYSPACE keys, filled first (not counted), then N requests counted. The server's system
# calls are counted by the kernel's tracepoints (`perf stat -e syscalls:sys_enter_...` on the
# server's PID: no ptrace, so the server runs at full speed and its batches - requests per
# epoll_wait - are what they are without the counting), with its CPU time (user and system,
# /proc/PID/stat) per request. Prints one block per server and mix. Not a test: nothing is
# asserted. Needs perf and permission to read tracepoints (root, or perf_event_paranoid <= -1).
#
#   scripts/serve_syscalls.sh [BUILD_DIR]
# Environment: SERVERS (default "memcached woart"; an index kind runs `wort serve --index KIND`),
#   MIXES ("90 50"), N (100000), CONNS (32), KEYSPACE (100000), VALUE_SIZE (100),
#   SERVER_CPUS (0) and CLIENT_CPUS (1): `taskset -c` lists.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
wort="$build/wort"
SERVERS=${SERVERS:-"memcached woart"}
MIXES=${MIXES:-"90 50"}
N=${N:-100000}
CONNS=${CONNS:-32}
KEYSPACE=${KEYSPACE:-100000}
VALUE_SIZE=${VALUE_SIZE:-100}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
[ -x "$wort" ] || { echo "serve_syscalls.sh: $wort not built" >&2; exit 2; }
command -v perf >/dev/null || { echo "serve_syscalls.sh: perf not installed" >&2; exit 2; }
perf stat -e raw_syscalls:sys_enter -- true >/dev/null 2>&1 ||
  { echo "serve_syscalls.sh: cannot count tracepoints (perf_event_paranoid?)" >&2; exit 2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
calls="read recvfrom recvmsg write writev sendto sendmsg epoll_wait epoll_pwait epoll_ctl futex membarrier"
events=raw_syscalls:sys_enter
for c in $calls; do events="$events,syscalls:sys_enter_$c"; done
tmp=$(mktemp -d)
pid=""
cleanup() { [ -z "$pid" ] || kill "$pid" 2>/dev/null || true; rm -rf "$tmp"; rm -f /dev/shm/serve-syscalls-$$.pool; }
trap cleanup EXIT
echo "# 1 worker thread; server on CPUs $SERVER_CPUS, client on CPUs $CLIENT_CPUS; wort bench-server --conns $CONNS --value-size $VALUE_SIZE --keyspace $KEYSPACE; $N requests counted after the fill"
echo "# machine: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for server in $SERVERS; do
  for mix in $MIXES; do
    port=$(free_port)
    pool=/dev/shm/serve-syscalls-$$.pool
    if [ "$server" = memcached ]; then
      taskset -c "$SERVER_CPUS" memcached -u "$(id -un)" -l 127.0.0.1 -p "$port" -U 0 -t 1 -m 4096 -c 4096 &
    else
      rm -f "$pool"
      taskset -c "$SERVER_CPUS" "$wort" serve --pool "$pool" --index "$server" -p "$port" -t 1 -c 4096 --pool-size 4G >/dev/null 2>&1 &
    fi
    pid=$!
    for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
    taskset -c "$CLIENT_CPUS" "$wort" bench-server --port "$port" --conns "$CONNS" --keyspace "$KEYSPACE" \
      --value-size "$VALUE_SIZE" --mix "$mix" --requests 0 >/dev/null
    perf stat -x, -e "$events" -p "$pid" -o "$tmp/perf.txt" &
    perf_pid=$!
    sleep 0.5  # perf attaches
    read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
    line=$(taskset -c "$CLIENT_CPUS" "$wort" bench-server --port "$port" --conns "$CONNS" --keyspace "$KEYSPACE" \
      --value-size "$VALUE_SIZE" --mix "$mix" --no-fill --requests "$N" --label "$server" | grep -v '^#' | grep -v '^server ')
    read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
    hz=$(getconf CLK_TCK)
    echo "$server, ${mix}% gets: $(echo "$line" | awk '{print $5}') ops/s; server CPU per request: user $(awk -v a="$u0" -v b="$u1" -v n="$N" -v hz="$hz" 'BEGIN{printf "%.2f", (b-a)*1e6/hz/n}') us, system $(awk -v a="$s0" -v b="$s1" -v n="$N" -v hz="$hz" 'BEGIN{printf "%.2f", (b-a)*1e6/hz/n}') us"
    awk -F, -v n="$N" '!/^#/ && NF > 2 && $1 + 0 > 0 { name = $3; sub(/^(raw_)?syscalls:sys_enter_?/, "", name); if (name == "") name = "all system calls"; printf "  %-18s %6.3f per request\n", name, $1 / n }' "$tmp/perf.txt"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=""
    rm -f "$pool"
  done
done
