#!/usr/bin/env python3
"""End-to-end tests of `wort serve`'s process and network side: memcached's command line, the unix
socket, connection limits, idle timeouts, graceful shutdown, authentication, TLS, and a cluster
behind twemproxy (nutcracker) or a client-side ketama ring.

Run by tests/server/serve_net_test.cc (one gtest per mode), or by hand:
    serve_net.py MODE --wort build/wort --pool /dev/shm/x.pool
MODE is one of:
  flags     memcached's flags start a server with the same meaning (checked in `stats settings`);
            unsupported flags, a bad or volatile --index, a bad -Y or -Z setup exit with code 2
            and leave no pool file behind.
  unix      -s PATH -a MODE: the socket file has the mode, commands work over it, a stale socket
            file is replaced, the file is removed at shutdown.
  limits    -c: the connection past the limit gets memcached's "ERROR Too many open connections"
            and is closed, the others keep working; -o idle_timeout: idle connections are closed,
            busy ones are not.
  shutdown  SIGTERM/SIGINT while clients pipeline writes: exit code 0, every acknowledged write is
            there after the restart and the restart finds a clean pool (no post-crash GC); an idle
            client does not delay the shutdown; one that never reads its replies holds it ~10 s.
  auth      -Y: memcached's text-protocol authentication, replies as memcached 1.6.
  tls       -Z with a certificate made here by openssl: Python's ssl module and `openssl s_client`
            speak to it (with and without -Y); a plaintext client gets nothing served.
  restart   a reopened pool answers while its items are counted in the background; kill -9 during
            the count, restart: curr_items is exact again.
  memory    many connections each holding most of a 1 MB set: the server's resident memory stays
            within --max-buffered (the rest refused with memcached's out-of-memory error); a
            half-sent request is closed after --partial-timeout.
  cluster   scripts/cluster.sh: 3 nodes behind nutcracker (ketama), 10,000 keys through the proxy,
            each node holds >= 20%, kill -9 one node: the others' keys stay readable, restart it:
            every acknowledged key is readable again; the same with pymemcache's HashClient.
Exit status 0 iff every check passed. Everything listens on 127.0.0.1 only; every loop is bounded.
"""
import argparse
import os
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_e2e import FAILURES, Server, bin_parse_all, bin_request, check, recv_until, stats, talk  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Proc(Server):
    """A `wort serve` started with any arguments (memcached's flags, -s, ...)."""

    def __init__(self, wort, pool, *extra):
        self._launch([wort, "serve", "--pool", pool, *extra])

    def stop(self, sig=signal.SIGTERM, timeout=30):
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        # Its last lines ("pool closed cleanly") may still be in the pipe: read them before a
        # check looks at self.log (the drain thread ends at the pipe's end).
        self._drainer.join(10)
        return rc


def parse_stats(raw):
    d = {}
    for line in raw.decode(errors="replace").split("\r\n"):
        p = line.split(" ", 2)
        if len(p) == 3 and p[0] == "STAT":
            d[p[1]] = p[2]
    return d


def run(args_list, timeout=60):
    return subprocess.run(args_list, capture_output=True, text=True, timeout=timeout)


# ---- flags ----------------------------------------------------------------------------------

def mode_flags(args):
    w, pool = args.wort, args.pool
    # Refused before any pool file exists (exit code 2, a message naming the problem).
    refused = [
        (["--index", "nosuch"], "unknown index kind"),
        (["--index", "vart"], "volatile"),
        (["-d"], "-d/--daemon is not supported"),
        (["-P", "/tmp/x.pid"], "-P/--pidfile is not supported"),
        (["-S"], "-S/--enable-sasl is not supported"),
        (["-e", "/dev/shm/x"], "--memory-file is not supported"),
        (["-U", "11211"], "UDP is not supported"),
        (["-o", "hashpower=20"], "-o hashpower: not supported"),
        (["-o", "idle_timeout"], "needs a value"),
        (["-a", "9"], "octal"),
        (["-I", "100"], "between 1k and 1024m"),
        (["-I", "2x"], "unknown suffix"),
        (["-m", "abc"], "is not a number"),
        (["-m", "1"], "at least 8 MiB"),
        (["-M", "--evict", "lru"], "contradicts"),
        (["-u", "no-such-user-wort"], "does not switch users"),
        (["-Y", "/nonexistent/wort-auth"], "cannot read the password file"),
        (["-Z"], "needs a certificate"),
        (["-Z", "-o", "ssl_chain_cert=/nonexistent.pem"], "TLS setup"),
        (["-o", "ssl_chain_cert=/x.pem"], "without -Z"),
        (["--no-such-option"], "not expected"),
    ]
    for extra, msg in refused:
        if os.path.exists(pool):
            os.remove(pool)
        r = run([w, "serve", "--pool", pool, "--port", "0", *extra])
        out = r.stdout + r.stderr
        check(r.returncode == 2, f"{extra}: exit code {r.returncode} (want 2): {out[-300:]}")
        check(msg in out, f"{extra}: message {msg!r} not in {out[-300:]!r}")
        check(not os.path.exists(pool), f"{extra}: a pool file was left behind")
    # A bad authfile line.
    with tempfile.NamedTemporaryFile("w", suffix=".auth", delete=False) as f:
        f.write("alice:pw\nbob\n")
    r = run([w, "serve", "--pool", pool, "-Y", f.name])
    os.unlink(f.name)
    check(r.returncode == 2 and "line 2" in r.stderr, f"malformed authfile: {r.returncode} {r.stderr}")
    check(not os.path.exists(pool), "malformed authfile: a pool file was left behind")

    r = run([w, "serve", "-V"])
    check(r.returncode == 0 and r.stdout.startswith("wort serve ") and not os.path.exists(pool), f"-V: {r}")

    # memcached's command line as an init script writes it, plus --pool.
    srv = Proc(w, pool, "-p", "0", "-l", "127.0.0.1", "-U", "0", "-c", "17", "-t", "2", "-m", "64", "-I", "2m",
               "-M", "-v", "-b", "64", "-o", "maxconns_fast,idle_timeout=100")
    try:
        st = stats(srv.port, "settings")
        check(st.get("maxconns") == "17", f"-c: {st.get('maxconns')}")
        check(st.get("num_threads") == "2", f"-t: {st.get('num_threads')}")
        check((64 << 20) <= int(st.get("maxbytes", 0)) <= (65 << 20), f"-m 64: maxbytes {st.get('maxbytes')}")
        check(st.get("item_size_max") == str(2 << 20), f"-I: {st.get('item_size_max')}")
        check(st.get("evictions") == "off", f"-M: {st.get('evictions')}")
        check(st.get("verbosity") == "1", f"-v: {st.get('verbosity')}")
        check(st.get("idle_timeout") == "100", f"-o idle_timeout: {st.get('idle_timeout')}")
        check(st.get("tcpport") == str(srv.port), f"tcpport: {st.get('tcpport')}")
        check(st.get("inter") == "127.0.0.1", f"-l: {st.get('inter')}")
        # The pool is under /dev/shm: tmpfs durability, in the start line and in stats.
        check(any("durability tmpfs" in l for l in srv.log), f"durability in the start line: {srv.log[:2]}")
        check(stats(srv.port).get("wort_durability") == "tmpfs", "stats wort_durability")
        big = b"x" * (1536 << 10)  # 1.5 MiB: over the default 1m, under -I 2m
        out = talk(srv.port, b"set big 0 0 %d\r\n" % len(big) + big + b"\r\n", timeout=5)
        check(out == b"STORED\r\n", f"-I 2m: a 1.5 MiB value: {out[:80]!r}")
    finally:
        check(srv.stop() == 0, "flags: clean exit")
    os.remove(pool)
    # -vv, long forms, two listen addresses given as memcached's comma list.
    srv = Proc(w, pool, "--port", "0", "--listen", "127.0.0.1,127.0.0.2", "-vv", "--conn-limit", "5",
               "--threads", "1")
    try:
        check(stats(srv.port, "settings").get("verbosity") == "2", "-vv: verbosity 2")
        for addr in ("127.0.0.1", "127.0.0.2"):
            s = socket.create_connection((addr, srv.port), timeout=5)
            s.sendall(b"version\r\n")
            check(recv_until(s, b"\r\n").startswith(b"VERSION "), f"listening on {addr}")
            s.close()
    finally:
        check(srv.stop() == 0, "flags -vv: clean exit")
    check(any("new client connection" in l for l in srv.log), f"-vv logs connections: {srv.log[-5:]}")


# ---- unix -----------------------------------------------------------------------------------

def mode_unix(args):
    d = tempfile.mkdtemp(prefix="wort-unix-")
    path = os.path.join(d, "mc.sock")
    try:
        # A stale socket file (a server that was killed) is replaced.
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(path)
        stale.close()
        srv = Proc(args.wort, args.pool, "-s", path, "-a", "660", "-t", "2")
        try:
            st = os.stat(path)
            check(stat.S_ISSOCK(st.st_mode), "-s: the path is a socket")
            check(stat.S_IMODE(st.st_mode) == 0o660, f"-a 660: mode {oct(stat.S_IMODE(st.st_mode))}")
            out = talk(path, b"set k 5 0 3\r\nabc\r\nget k\r\n")
            check(out == b"STORED\r\nVALUE k 5 3\r\nabc\r\nEND\r\n", f"unix: {out!r}")
            st = parse_stats(talk(path, b"stats settings\r\n"))
            check(st.get("domain_socket") == path and st.get("umask") == "660", f"stats settings: {st}")
            # Many clients at once over the socket.
            errs = []

            def client(i):
                try:
                    for j in range(50):
                        key = b"u%d:%d" % (i, j)
                        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        c.settimeout(10)
                        c.connect(path)
                        c.sendall(b"set %s 0 0 2\r\nok\r\nget %s\r\n" % (key, key))
                        o = recv_until(c, b"END\r\n")
                        c.close()
                        if o != b"STORED\r\nVALUE %s 0 2\r\nok\r\nEND\r\n" % key:
                            errs.append(o)
                except Exception as e:  # noqa: BLE001
                    errs.append(repr(e))
            ts = [threading.Thread(target=client, args=(i,)) for i in range(8)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(60)
            check(not errs, f"8 unix clients: {errs[:3]}")
        finally:
            check(srv.stop() == 0, "unix: clean exit")
        check(not os.path.exists(path), "the socket file is removed at shutdown")
        # Restart on the pool over the socket: the items are there.
        srv = Proc(args.wort, args.pool, "--unix-socket", path)
        try:
            check(talk(path, b"get k\r\n") == b"VALUE k 5 3\r\nabc\r\nEND\r\n", "unix: item after restart")
            check(stat.S_IMODE(os.stat(path).st_mode) == 0o700, "default -a is 700 as memcached")
        finally:
            check(srv.stop() == 0, "unix restart: clean exit")
        # A path that is not a socket is never removed.
        with open(path, "w") as f:
            f.write("precious")
        r = run([args.wort, "serve", "--pool", args.pool, "-s", path])
        check(r.returncode != 0 and "not a socket" in r.stderr, f"regular file at -s: {r.returncode} {r.stderr}")
        check(open(path).read() == "precious", "a regular file at -s is kept")
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- limits ---------------------------------------------------------------------------------

def mode_limits(args):
    srv = Proc(args.wort, args.pool, "-p", "0", "-c", "4", "-t", "2")
    try:
        conns = []
        for i in range(4):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            s.sendall(b"version\r\n")
            check(recv_until(s, b"\r\n").startswith(b"VERSION"), f"connection {i} under the limit")
            conns.append(s)
        for _ in range(3):
            out = talk(srv.port, b"version\r\n", expect_close=True)
            check(out == b"ERROR Too many open connections\r\n<EOF>", f"past -c 4: {out!r}")
        for i, s in enumerate(conns):
            s.sendall(b"set c%d 0 0 1\r\nx\r\n" % i)
            check(recv_until(s, b"\r\n") == b"STORED\r\n", f"connection {i} still works after refusals")
        conns[0].sendall(b"stats\r\n")
        st = parse_stats(recv_until(conns[0], b"END\r\n"))
        check(st.get("rejected_connections") == "3", f"rejected_connections {st.get('rejected_connections')}")
        for s in conns:
            s.close()
        # Closed connections free their slots.
        deadline = time.time() + 5
        ok = False
        while time.time() < deadline and not ok:
            ok = talk(srv.port, b"version\r\n").startswith(b"VERSION")
            time.sleep(0.05)
        check(ok, "a slot is free again once connections close")
    finally:
        check(srv.stop() == 0, "limits: clean exit")

    # Idle timeout: a silent connection is closed after ~1-2 s; one that keeps talking is not.
    srv = Proc(args.wort, args.pool, "-p", "0", "-o", "idle_timeout=1", "-t", "2")
    try:
        idle = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        half = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        half.sendall(b"set half 0 0 10\r\nabc")  # half a request, then silence
        busy = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        t0 = time.time()
        busy_ok = True
        while time.time() - t0 < 3.5:
            busy.sendall(b"version\r\n")
            busy_ok &= recv_until(busy, b"\r\n").startswith(b"VERSION")
            time.sleep(0.25)
        check(busy_ok, "a busy connection is served throughout")
        for name, s in (("idle", idle), ("half", half)):
            s.settimeout(5)
            try:
                d = s.recv(100)
            except OSError:
                d = b"<error>"
            check(d == b"", f"{name} connection closed by the idle timeout: {d!r}")
        st = stats(srv.port)
        check(st.get("idle_kicks") == "2", f"idle_kicks {st.get('idle_kicks')}")
        check(talk(srv.port, b"get half\r\n") == b"END\r\n", "the half request was not stored")
    finally:
        check(srv.stop() == 0, "idle: clean exit")


# ---- memory outside the pool ------------------------------------------------------------------

def rss_anon_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def mode_memory(args):
    """Many connections each holding most of a 1 MB set: the server's anonymous resident memory
    stays within its input buffer budget (--max-buffered) plus a fixed allowance; the requests past
    the budget get memcached's "SERVER_ERROR out of memory storing object" and their data is
    discarded (the connection goes on); the others are stored once complete. A request left half
    sent is closed after --partial-timeout; an idle connection with nothing pending is not."""
    n, size, sent = 160, 1000000, 900000
    budget_mib = 16
    srv = Proc(args.wort, args.pool, "-p", "0", "-t", "2", "--max-buffered", f"{budget_mib}m")
    try:
        base = rss_anon_kib(srv.proc.pid)
        conns = []
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
            s.sendall(b"set big%d 0 0 %d\r\n" % (i, size) + b"x" * sent)
            conns.append(s)
        deadline = time.time() + 20
        st = stats(srv.port)
        while time.time() < deadline:  # until the server has read everything sent so far
            time.sleep(0.2)
            st2 = stats(srv.port)
            if st2.get("bytes_read") == st.get("bytes_read") and int(st2.get("bytes_read", 0)) >= n * sent:
                break
            st = st2
        grown = (rss_anon_kib(srv.proc.pid) - base) / 1024
        print(f"memory: {n} half-sent sets of {size} bytes ({sent} sent): RssAnon grew {grown:.1f} MiB "
              f"(budget {budget_mib} MiB; unbounded it would be ~{n * sent / 2**20:.0f} MiB); "
              f"wort_buffered_bytes {st.get('wort_buffered_bytes')}, refusals {st.get('wort_buffer_refusals')}", flush=True)
        check(grown < budget_mib + 24, f"resident memory grew {grown:.1f} MiB under {n} half-sent 1 MB sets")
        check(int(st.get("wort_buffered_bytes", 0)) <= budget_mib << 20, f"buffered {st.get('wort_buffered_bytes')}")
        refused = int(st.get("wort_buffer_refusals", 0))
        check(0 < refused < n, f"some requests refused, not all: {refused}")
        stored = errors = 0
        for i, s in enumerate(conns):
            s.sendall(b"x" * (size - sent) + b"\r\nversion\r\n")
        for i, s in enumerate(conns):
            out = b""
            while not (b"VERSION" in out and out.endswith(b"\r\n")):
                d = s.recv(4096)
                if not d:
                    break
                out += d
            if out.startswith(b"STORED\r\n"):
                stored += 1
            elif out.startswith(b"SERVER_ERROR out of memory storing object\r\n"):
                errors += 1
            else:
                check(False, f"connection {i}: {out[:80]!r}")
            s.close()
        check(stored + errors == n and errors == refused, f"{stored} stored, {errors} refused of {n}")
        check(talk(srv.port, b"get big%d\r\n" % 0).endswith(b"END\r\n"), "a get after the storm")
    finally:
        check(srv.stop() == 0, "memory: clean exit")
    srv = Proc(args.wort, args.pool, "-p", "0", "-t", "2", "--partial-timeout", "2")
    try:
        # The partial-request timeout: a half-sent set is closed after ~2-3 s, an idle one is not.
        half = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        half.sendall(b"set half 0 0 10\r\nabc")
        idle = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        time.sleep(4.5)
        half.settimeout(5)
        try:
            d = half.recv(100)
        except OSError:
            d = b"<error>"
        check(d == b"", f"half-sent request closed by the partial timeout: {d!r}")
        idle.sendall(b"version\r\n")
        check(recv_until(idle, b"\r\n").startswith(b"VERSION"), "an idle connection stays open")
        check(stats(srv.port).get("wort_partial_kicks") == "1", "wort_partial_kicks")
    finally:
        check(srv.stop() == 0, "partial timeout: clean exit")


# ---- restart: the background item count -------------------------------------------------------

def mode_restart(args):
    """A reopened pool answers at once while its item count is made in the background (stats
    wort_curr_items_counting 1); kill -9 during that count, restart: the count is exact again."""
    n = 300000
    srv = Proc(args.wort, args.pool, "-p", "0", "-t", "2", "-m", "1024")
    try:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        for b in range(0, n, 20000):
            s.sendall(b"".join(b"set r\xc3%d 0 0 4 noreply\r\nvvvv\r\n" % i for i in range(b, min(n, b + 20000))) +
                      b"version\r\n")
            recv_until(s, b"\r\n")
        s.close()
        check(stats(srv.port).get("curr_items") == str(n), "filled")
    finally:
        check(srv.stop() == 0, "restart: clean exit")
    killed_while_counting = False
    for attempt in range(5):
        srv = Proc(args.wort, args.pool, "-p", "0", "-t", "2")
        st = stats(srv.port)
        counting = st.get("wort_curr_items_counting") == "1"
        srv.proc.kill()
        srv.proc.wait(30)
        if counting:
            killed_while_counting = True
            check(int(st.get("curr_items", -1)) < n, f"partial count while counting: {st.get('curr_items')}")
            break
    check(killed_while_counting, "a restart was killed while its count ran")
    srv = Proc(args.wort, args.pool, "-p", "0", "-t", "2")
    try:
        check(talk(srv.port, b"get r\xc37\r\n") == b"VALUE r\xc37 0 4\r\nvvvv\r\nEND\r\n", "a get at once")
        deadline = time.time() + 60
        st = stats(srv.port)
        while st.get("wort_curr_items_counting") != "0" and time.time() < deadline:
            time.sleep(0.05)
            st = stats(srv.port)
        check(st.get("curr_items") == str(n), f"curr_items after kill -9 during the count: {st.get('curr_items')}")
    finally:
        check(srv.stop() == 0, "restart: clean exit after the count")


# ---- shutdown -------------------------------------------------------------------------------

def mode_shutdown(args):
    for sig in (signal.SIGTERM, signal.SIGINT):
        if os.path.exists(args.pool):
            os.remove(args.pool)
        srv = Proc(args.wort, args.pool, "-p", "0", "-t", "2")
        idle = socket.create_connection(("127.0.0.1", srv.port), timeout=10)  # must not hold the shutdown
        acked = {}
        errors = []
        started = threading.Barrier(5)

        def writer(t):
            # Pipelined batches of sets; a key counts as acknowledged when its STORED arrived.
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
            started.wait()
            try:
                for batch in range(1000):
                    keys = [b"w%d:%d:%d" % (t, batch, i) for i in range(50)]
                    val = b"v" * 3000
                    s.sendall(b"".join(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(val), val) for k in keys))
                    buf = b""
                    got = 0
                    while got < len(keys):
                        d = s.recv(1 << 16)
                        if not d:
                            return  # closed by the shutdown
                        buf += d
                        while b"\r\n" in buf:
                            line, buf = buf.split(b"\r\n", 1)
                            if line != b"STORED":
                                errors.append(line)
                            acked[keys[got]] = val
                            got += 1
            except OSError:
                return
        ts = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        for t in ts:
            t.start()
        started.wait()
        time.sleep(0.5)
        t0 = time.time()
        rc = srv.stop(sig)
        took = time.time() - t0
        for t in ts:
            t.join(30)
        idle.close()
        check(rc == 0, f"{sig.name}: exit code {rc}: {srv.log[-3:]}")
        check(took < 8, f"{sig.name}: shutdown took {took:.1f} s with an idle client connected")
        check(any("pool closed cleanly" in l for l in srv.log), f"{sig.name}: {srv.log[-3:]}")
        check(not errors, f"{sig.name}: unexpected replies {errors[:3]}")
        check(len(acked) > 0, f"{sig.name}: no write was acknowledged before the signal")
        srv = Proc(args.wort, args.pool, "-p", "0")
        try:
            check(any("clean shutdown" in l for l in srv.log), f"{sig.name}: restart needs no GC: {srv.log}")
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
            missing = 0
            keys = list(acked)
            for i in range(0, len(keys), 100):
                chunk = keys[i:i + 100]
                s.sendall(b"get " + b" ".join(chunk) + b"\r\n")
                out = recv_until(s, b"END\r\n")
                missing += sum(1 for k in chunk if b"VALUE " + k + b" " not in out)
            check(missing == 0, f"{sig.name}: {missing} of {len(keys)} acknowledged writes missing after restart")
            print(f"{sig.name}: {len(keys)} acknowledged writes, all present after the restart", flush=True)
        finally:
            check(srv.stop() == 0, "shutdown restart: clean exit")

    # A client that never reads its replies holds the shutdown at most ~10 s (then the loops are
    # stopped; the pool is still closed cleanly).
    srv = Proc(args.wort, args.pool, "-p", "0", "-t", "1")
    big = b"b" * (1 << 20)
    talk(srv.port, b"set big 0 0 %d\r\n%s\r\n" % (len(big), big), timeout=5)
    hog = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    hog.sendall(b"get big\r\n" * 64)  # 64 MiB of replies it will not read
    time.sleep(0.5)
    t0 = time.time()
    rc = srv.stop()
    took = time.time() - t0
    hog.close()
    check(rc == 0 and any("pool closed cleanly" in l for l in srv.log), f"stuck reader: {rc} {srv.log[-3:]}")
    check(took < 20, f"a client that does not read held the shutdown {took:.1f} s")
    print(f"shutdown with a client that does not read: {took:.1f} s", flush=True)


# ---- auth -----------------------------------------------------------------------------------

def write_authfile():
    f = tempfile.NamedTemporaryFile("w", suffix=".auth", delete=False)
    f.write("alice:s3cret\nbob:pass with spaces:and colons\n")
    f.close()
    return f.name


def mode_auth(args):
    authfile = write_authfile()
    srv = Proc(args.wort, args.pool, "-p", "0", "-Y", authfile)
    try:
        p = srv.port
        check(talk(p, b"get foo\r\n") == b"CLIENT_ERROR unauthenticated\r\n", "get before auth")
        check(talk(p, b"stats\r\n") == b"CLIENT_ERROR unauthenticated\r\n", "stats before auth")
        check(talk(p, b"set x 0 0 12\r\nalice s3creT\r\n") == b"CLIENT_ERROR authentication failure\r\n", "bad password")
        check(talk(p, b"set x 0 0 11\r\nalice s3cre\r\n") == b"CLIENT_ERROR authentication failure\r\n", "prefix password")
        check(talk(p, b"set x 0 0 12\r\nalice_s3cret\r\n") == b"CLIENT_ERROR bad authentication token format\r\n", "no space")
        out = talk(p, b"set x 0 0 12\r\nalice s3cret\r\nset k 0 0 2\r\nhi\r\nget k x\r\n")
        check(out == b"STORED\r\nSTORED\r\nVALUE k 0 2\r\nhi\r\nEND\r\n", f"authenticated session: {out!r}")
        tok = b"bob pass with spaces:and colons"
        out = talk(p, b"set a 0 0 %d\r\n%s\r\nget k\r\n" % (len(tok), tok))
        check(out == b"STORED\r\nVALUE k 0 2\r\nhi\r\nEND\r\n", f"second user: {out!r}")
        # The auth set stores nothing: key x was never written.
        # Failed, then good, on one connection; the request cut into single bytes.
        s = socket.create_connection(("127.0.0.1", p), timeout=5)
        for b in b"get k\r\nset x 0 0 12\r\nalice s3cret\r\nget k\r\n":
            s.sendall(bytes([b]))
        out = recv_until(s, b"END\r\n")
        check(out == b"CLIENT_ERROR unauthenticated\r\nSTORED\r\nVALUE k 0 2\r\nhi\r\nEND\r\n", f"byte by byte: {out!r}")
        s.sendall(b"stats\r\n")
        st = parse_stats(recv_until(s, b"END\r\n"))
        check(st.get("auth_errors") == "2", f"auth_errors {st.get('auth_errors')}")
        check(int(st.get("auth_cmds", 0)) >= 6, f"auth_cmds {st.get('auth_cmds')}")
        s.sendall(b"stats settings\r\n")
        check(b"STAT auth_enabled_ascii " + authfile.encode() in recv_until(s, b"END\r\n"), "stats settings auth")
        s.close()
        check(talk(p, b"set x 0 0 99999\r\n") == b"CLIENT_ERROR auth token too long\r\n", "too long")
        # A binary-protocol client authenticates with SASL PLAIN against the same file; before
        # that, version and SASL only: anything else gets "auth error" and the connection closes.
        out = talk(p, bin_request("version") + bin_request("noop") + bin_request("noop"), expect_close=True)
        pk, _ = bin_parse_all(out[:-5] if out.endswith(b"<EOF>") else out)
        check([(x["op"], x["status"]) for x in pk] == [(0x0b, 0), (0x0a, 0x20)] and out.endswith(b"<EOF>"),
              f"binary client before SASL: {out!r}")
        sasl = lambda pw: bin_request(0x21, b"", b"PLAIN", b"\0alice\0" + pw)
        out = talk(p, bin_request(0x20) + sasl(b"wrong") + sasl(b"s3cret") + bin_request("get", key=b"k"))
        pk, _ = bin_parse_all(out)
        check([(x["status"], x["value"]) for x in pk] ==
              [(0, b"PLAIN"), (0x20, b"Auth failure."), (0, b"Authenticated"), (0, b"hi")], f"SASL PLAIN: {pk!r}")
        check(talk(p, b"x" * 3000, expect_close=True).endswith(b"<EOF>"), "3000 bytes without a newline: closed")
    finally:
        check(srv.stop() == 0, "auth: clean exit")
        os.unlink(authfile)


# ---- tls ------------------------------------------------------------------------------------

def make_cert(d, name="server"):
    cert, key = os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")
    r = run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
             "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
    if r.returncode != 0:
        raise RuntimeError("openssl req: " + r.stderr)
    return cert, key


def tls_conn(port, cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="localhost")


def mode_tls(args):
    d = tempfile.mkdtemp(prefix="wort-tls-")
    try:
        cert, key = make_cert(d)
        other_cert, other_key = make_cert(d, "other")
        # A key that does not match the certificate is refused before a pool exists.
        r = run([args.wort, "serve", "--pool", args.pool, "-Z", "-o", f"ssl_chain_cert={cert},ssl_key={other_key}"])
        check(r.returncode == 2 and not os.path.exists(args.pool), f"mismatched key: {r.returncode} {r.stderr}")
        authfile = write_authfile()
        for with_auth in (False, True):
            extra = ["-Y", authfile] if with_auth else []
            srv = Proc(args.wort, args.pool, "-p", "0", "-t", "2", "-Z", "-o", f"ssl_chain_cert={cert},ssl_key={key}",
                       *extra)
            try:
                s = tls_conn(srv.port, cert)
                check(s.version() in ("TLSv1.2", "TLSv1.3"), f"TLS version {s.version()}")
                if with_auth:
                    s.sendall(b"get k\r\n")
                    check(recv_until(s, b"\r\n") == b"CLIENT_ERROR unauthenticated\r\n", "TLS+auth: unauthenticated")
                    s.sendall(b"set x 0 0 12\r\nalice s3cret\r\n")
                    check(recv_until(s, b"\r\n") == b"STORED\r\n", "TLS+auth: authenticated")
                val = os.urandom(1 << 20)  # 1 MiB of every byte value
                s.sendall(b"set tk 9 0 %d\r\n%s\r\nget tk\r\n" % (len(val), val))
                out = recv_until(s, b"END\r\n")
                check(out == b"STORED\r\nVALUE tk 9 %d\r\n%s\r\nEND\r\n" % (len(val), val), "TLS: 1 MiB round trip")
                s.close()
                # A client that does not verify the certificate against it fails (the CA check).
                try:
                    ssl.create_default_context(cafile=other_cert).wrap_socket(
                        socket.create_connection(("127.0.0.1", srv.port), timeout=5), server_hostname="localhost")
                    check(False, "a client trusting another CA connected")
                except ssl.SSLError:
                    pass
                # Plain text on the TLS port: nothing is served.
                out = talk(srv.port, b"get tk\r\n", expect_close=True)
                check(b"VALUE" not in out and out.endswith(b"<EOF>"), f"plaintext on the TLS port: {out[:60]!r}")
                # openssl s_client, a second real client.
                script = (b"set x 0 0 12\r\nalice s3cret\r\n" if with_auth else b"") + b"get tk\r\nquit\r\n"
                r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{srv.port}", "-CAfile", cert,
                                    "-verify_return_error", "-quiet", "-servername", "localhost"],
                                   input=script, capture_output=True, timeout=30)
                check(b"VALUE tk 9 %d\r\n" % len(val) in r.stdout and r.stdout.endswith(b"END\r\n"),
                      f"openssl s_client: {r.stdout[:80]!r} {r.stderr[-300:]!r}")
                s = tls_conn(srv.port, cert)
                if with_auth:
                    s.sendall(b"set x 0 0 12\r\nalice s3cret\r\n")
                    recv_until(s, b"\r\n")
                s.sendall(b"stats settings\r\n")
                st = parse_stats(recv_until(s, b"END\r\n"))
                s.close()
                check(st.get("ssl_enabled") == "yes" and st.get("ssl_chain_cert") == cert, f"stats settings: {st}")
            finally:
                check(srv.stop() == 0, "tls: clean exit")
        os.unlink(authfile)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- cluster --------------------------------------------------------------------------------

def mode_cluster(args):
    from pymemcache.client.base import Client
    from pymemcache.client.hash import HashClient

    cluster = os.path.join(REPO, "scripts", "cluster.sh")
    d = tempfile.mkdtemp(prefix="wort-cluster-", dir="/dev/shm")
    env = dict(os.environ, WORT=args.wort, CLUSTER_DIR=d)

    def sh(*a):
        r = subprocess.run(["bash", cluster, *a], env=env, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"cluster.sh {a}: {r.returncode} {r.stdout[-500:]} {r.stderr[-500:]}")
        return r.stdout

    try:
        sh("start", "3")
        info = dict(line.split("=", 1) for line in open(os.path.join(d, "cluster.env")).read().split())
        proxy = int(info["PROXY_PORT"])
        nodes = [int(p) for p in info["NODE_PORTS"].split(",")]
        check(len(nodes) == 3, f"3 nodes: {nodes}")
        pc = Client(("127.0.0.1", proxy), connect_timeout=5, timeout=10)
        acked = {}
        for i in range(10000):
            k, v = f"key:{i}", f"value-{i}-" + "x" * (i % 50)
            if pc.set(k, v, noreply=False):
                acked[k] = v.encode()
        check(len(acked) == 10000, f"through the proxy: {len(acked)} of 10000 sets acknowledged")

        def held(port):
            return set(k for k, v in Client(("127.0.0.1", port), timeout=10).get_many(list(acked)).items())
        per_node = [held(p) for p in nodes]
        for p, ks in zip(nodes, per_node):
            check(len(ks) >= 2000, f"node {p} holds {len(ks)} of 10000 keys (want >= 20%)")
        check(sum(len(k) for k in per_node) == len(acked), "each key is on exactly one node")
        print("per node:", [len(k) for k in per_node], flush=True)

        # kill -9 node 1; the other nodes' keys stay readable through the proxy.
        sh("kill", "1")
        others = [k for k in acked if k not in per_node[1]]
        bad = 0
        for i in range(0, len(others), 100):
            chunk = others[i:i + 100]
            got = pc.get_many(chunk)
            bad += sum(1 for k in chunk if got.get(k) != acked[k])
        check(bad == 0, f"node 1 down: {bad} of {len(others)} keys of the other nodes unreadable")
        sh("restart", "1")
        bad = 0
        deadline = time.time() + 30
        while True:
            try:
                bad = sum(1 for k, v in pc.get_many(list(acked)).items() if v != acked[k])
                got = pc.get_many(list(acked))
                bad = sum(1 for k in acked if got.get(k) != acked[k])
            except Exception:  # noqa: BLE001  the proxy may still count the node as failed
                bad = -1
            if bad == 0 or time.time() > deadline:
                break
            time.sleep(0.5)
        check(bad == 0, f"node 1 restarted: {bad} acknowledged keys unreadable through the proxy")

        # The same with client-side ketama (pymemcache's HashClient; no proxy).
        hc = HashClient([("127.0.0.1", p) for p in nodes], connect_timeout=5, timeout=10, use_pooling=False,
                        retry_attempts=1, dead_timeout=1, ignore_exc=True)
        hacked = {}
        for i in range(10000):
            k = f"hc:{i}"
            if hc.set(k, str(i), noreply=False):
                hacked[k] = str(i).encode()
        check(len(hacked) == 10000, f"HashClient: {len(hacked)} of 10000 acknowledged")
        counts = [len(set(Client(("127.0.0.1", p), timeout=10).get_many(list(hacked)))) for p in nodes]
        check(all(c >= 2000 for c in counts), f"HashClient spread: {counts}")
        sh("kill", "2")
        on2 = set(Client(("127.0.0.1", nodes[0]), timeout=10).get_many(list(hacked))) | set(
            Client(("127.0.0.1", nodes[1]), timeout=10).get_many(list(hacked)))
        bad = sum(1 for k in on2 if hc.get(k) != hacked[k])
        check(bad == 0, f"HashClient, node 2 down: {bad} keys of the other nodes unreadable")
        sh("restart", "2")
        time.sleep(1.5)  # past dead_timeout: the client retries the node
        hc2 = HashClient([("127.0.0.1", p) for p in nodes], connect_timeout=5, timeout=10, use_pooling=False)
        bad = sum(1 for k, v in hacked.items() if hc2.get(k) != v)
        check(bad == 0, f"HashClient, node 2 restarted: {bad} acknowledged keys unreadable")
    finally:
        subprocess.run(["bash", cluster, "clean"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(d, ignore_errors=True)


def main():
    modes = {"flags": mode_flags, "unix": mode_unix, "limits": mode_limits, "shutdown": mode_shutdown,
             "auth": mode_auth, "tls": mode_tls, "cluster": mode_cluster, "memory": mode_memory,
             "restart": mode_restart}
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=list(modes))
    ap.add_argument("--wort", required=True)
    ap.add_argument("--pool", required=True)
    args = ap.parse_args()
    try:
        modes[args.mode](args)
    finally:
        if os.path.exists(args.pool):
            os.remove(args.pool)
    print(f"{args.mode}: {len(FAILURES)} failures", flush=True)
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
