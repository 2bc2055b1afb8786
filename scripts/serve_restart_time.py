#!/usr/bin/env python3
"""Restart time of `wort serve` at N items: fills a pool with N items (pipelined `set ... noreply`
over one connection), then restarts the server (after SIGTERM: clean; after kill -9: unclean)
and measures, from the moment the new process is started, the time to the first answered `get`
(a client connects and retries every 0.5 ms), and the time until `stats` says the background item
count is done (wort_curr_items_counting 0), with curr_items then. At the 'listening' line it also
reads how long the server's main thread had run on a core and how long it had waited for one
(/proc/PID/task/PID/schedstat): on a loaded machine most of the time to listening is that wait.

    scripts/serve_restart_time.py --wort build/wort --items 1000000 [--pool /dev/shm/rt.pool]

Prints one line per restart. Loopback only.
"""
import argparse
import os
import signal
import socket
import subprocess
import time


def start(wort, pool, extra=()):
    t0 = time.perf_counter()
    p = subprocess.Popen([wort, "serve", "--pool", pool, "-p", "0", "-t", "2", "-m", "8192", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = None
    log = []
    while port is None:
        line = p.stdout.readline()
        if not line:
            raise RuntimeError("server exited:\n" + "".join(log))
        log.append(line)
        if "listening on" in line:
            port = int(line.split("listening on ")[1].split()[0].rsplit(":", 1)[1])
    start.listen_s = time.perf_counter() - t0
    start.sched = sched(p.pid)
    return p, port, t0, log


def sched(pid):
    """CPU time the server's main thread has run and has waited for a core (ms), from
    /proc/PID/task/PID/schedstat (Linux with schedstats; None without): on a loaded machine the
    wait, not the work, is most of the time to 'listening'."""
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
            run, wait, _ = f.read().split()
        return int(run) / 1e6, int(wait) / 1e6
    except (OSError, ValueError):
        return None


def first_get(port, key, t0):
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"get " + key + b"\r\n")
            buf = b""
            while not buf.endswith(b"END\r\n"):
                d = s.recv(65536)
                if not d:
                    raise ConnectionError
                buf += d
            return time.perf_counter() - t0, buf, s
        except OSError:
            time.sleep(0.0005)


def stats(s):
    s.sendall(b"stats\r\n")
    buf = b""
    while not buf.endswith(b"END\r\n"):
        buf += s.recv(65536)
    d = {}
    for line in buf.decode().split("\r\n"):
        p = line.split(" ", 2)
        if len(p) == 3:
            d[p[1]] = p[2]
    return d


def fill(port, n):
    s = socket.create_connection(("127.0.0.1", port))
    batch = 20000
    for b in range(0, n, batch):
        s.sendall(b"".join(b"set k%d 0 0 10 noreply\r\n0123456789\r\n" % i for i in range(b, min(n, b + batch))) +
                  b"version\r\n")
        buf = b""
        while not buf.endswith(b"\r\n"):
            buf += s.recv(4096)
    st = stats(s)
    s.close()
    return int(st["curr_items"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wort", required=True)
    ap.add_argument("--items", type=int, default=1000000)
    ap.add_argument("--pool", default="/dev/shm/wort-restart-time.pool")
    ap.add_argument("--repeat", type=int, default=1, help="restarts of each kind")
    args = ap.parse_args()
    if os.path.exists(args.pool):
        os.remove(args.pool)
    p, port, _, _ = start(args.wort, args.pool)
    t = time.perf_counter()
    have = fill(port, args.items)
    print(f"filled {have} items in {time.perf_counter() - t:.1f} s", flush=True)
    assert have == args.items, have
    for how in ["clean (SIGTERM)"] * args.repeat + ["unclean (kill -9)"] * args.repeat:
        if how.startswith("clean"):
            p.send_signal(signal.SIGTERM)
        else:
            p.kill()
        p.wait(60)
        p, port, t0, log = start(args.wort, args.pool)
        t_get, reply, s = first_get(port, b"k%d" % (args.items // 2), t0)
        st = stats(s)
        counting_at_first = st.get("wort_curr_items_counting")
        while st.get("wort_curr_items_counting") != "0":
            time.sleep(0.002)
            st = stats(s)
        t_count = time.perf_counter() - t0
        s.close()
        opened = [l.strip() for l in log if "opened in" in l][0]
        cpu = (f"main thread by then: ran {start.sched[0]:.1f} ms, waited {start.sched[1]:.1f} ms for a core; "
               if start.sched else "")
        print(f"restart after {how}, {args.items} items: first get answered {t_get * 1e3:.1f} ms after exec "
              f"(its 'listening' line read at {start.listen_s * 1e3:.1f} ms, {cpu}hit: {reply.startswith(b'VALUE')}; count still running then: {counting_at_first == '1'}); "
              f"count done at {t_count * 1e3:.0f} ms, curr_items {st['curr_items']}; log: {opened.split(': ', 1)[1]}",
              flush=True)
        assert st["curr_items"] == str(args.items)
    p.send_signal(signal.SIGTERM)
    p.wait(60)
    os.remove(args.pool)


if __name__ == "__main__":
    main()
