#!/usr/bin/env bash
# Server CPU per request, counted by callgrind (instructions, deterministic: no hardware counters
# needed, and the load of other processes does not change the count), for `wort serve` and for
# memcached under the same load: THREADS worker threads (default 1), `wort bench-server --mix MIX` with CONNS
# connections and 100-byte values over KEYSPACE keys, filled first (not counted), then N requests
# counted. Prints one line per server: instructions in the server process during the counted
# phase, and per request; the callgrind files stay in OUT_DIR (callgrind_annotate FILE shows where
# they go). Not a test: nothing is asserted. Kernel time (the socket syscalls) is not counted:
# scripts/serve_syscalls.sh counts the system calls per request (strace slows the server enough
# to change them); scripts/callgrind_groups.py sums these files' instructions by what the code does.
#
#   scripts/serve_callgrind.sh [BUILD_DIR] [OUT_DIR]
# Environment: SERVERS (default "memcached woart"; an index kind runs `wort serve --index KIND`),
#   MIXES (default "90 50"), N (20000), CONNS (8), KEYSPACE (5000), VALUE_SIZE (100), THREADS (1:
#   the servers' worker threads, -t; valgrind runs one thread at a time, so several threads count
#   the instructions each request costs with the connections spread over them, not contention).
#
# memcached sets RLIMIT_NOFILE's hard limit at start, which valgrind refuses: a two-line
# LD_PRELOAD shim (built here with cc) makes that setrlimit succeed, for memcached only.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-$(mktemp -d)}
mkdir -p "$out"
wort="$build/wort"
SERVERS=${SERVERS:-"memcached woart"}
MIXES=${MIXES:-"90 50"}
N=${N:-20000}
CONNS=${CONNS:-8}
KEYSPACE=${KEYSPACE:-5000}
VALUE_SIZE=${VALUE_SIZE:-100}
THREADS=${THREADS:-1}
[ -x "$wort" ] || { echo "serve_callgrind.sh: $wort not built" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "serve_callgrind.sh: valgrind not installed" >&2; exit 2; }
shim="$out/setrlimit-shim.so"
printf '#include <sys/resource.h>\nint setrlimit(__rlimit_resource_t r, const struct rlimit *l) { (void)r; (void)l; return 0; }\n' |
  cc -shared -fPIC -O2 -x c -o "$shim" -
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
echo "# $THREADS worker thread(s); wort bench-server --conns $CONNS --value-size $VALUE_SIZE --keyspace $KEYSPACE; $N requests counted after the fill"
printf '%-12s %5s %8s %14s %12s %18s\n' server mix requests instructions instr/req ops/s_in_valgrind
for server in $SERVERS; do
  for mix in $MIXES; do
    port=$(free_port)
    cg="$out/callgrind.$server.$mix"
    pool="/dev/shm/serve-callgrind-$$.pool"
    if [ "$server" = memcached ]; then
      LD_PRELOAD="$shim" valgrind --tool=callgrind --callgrind-out-file="$cg" --instr-atstart=no \
        memcached -u "$(id -un)" -l 127.0.0.1 -p "$port" -U 0 -t "$THREADS" -m 1024 -c 512 2>"$cg.log" &
    else
      rm -f "$pool"
      valgrind --tool=callgrind --callgrind-out-file="$cg" --instr-atstart=no \
        "$wort" serve --pool "$pool" --index "$server" -p "$port" -t "$THREADS" -c 512 --pool-size 1G >/dev/null 2>"$cg.log" &
    fi
    pid=$!
    for _ in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
    "$wort" bench-server --port "$port" --conns "$CONNS" --keyspace "$KEYSPACE" --value-size "$VALUE_SIZE" --mix "$mix" \
      --requests 0 >/dev/null
    callgrind_control -i on "$pid" >/dev/null 2>&1
    line=$("$wort" bench-server --port "$port" --conns "$CONNS" --keyspace "$KEYSPACE" --value-size "$VALUE_SIZE" \
      --mix "$mix" --no-fill --requests "$N" --label "$server" | grep -v '^#' | grep -v '^server ')
    callgrind_control -i off "$pid" >/dev/null 2>&1
    kill -TERM "$pid"
    wait "$pid" || true
    rm -f "$pool"
    ir=$(callgrind_annotate "$cg" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
    printf '%-12s %5s %8s %14s %12.0f %18s\n' "$server" "$mix" "$N" "$ir" "$(awk -v a="$ir" -v n="$N" 'BEGIN { print a / n }')" \
      "$(echo "$line" | awk '{ print $5 }')"
  done
done
[ $# -ge 2 ] || echo "# callgrind files in $out"
