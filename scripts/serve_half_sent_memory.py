#!/usr/bin/env python3
# Usage (the venv with pymemcache, as the server tests use): python3 scripts/serve_half_sent_memory.py build/wort /dev/shm/x.pool
# 1,000 connections each holding 900,000 bytes of a 1,000,000-byte set, default --max-buffered:
# the server's RssAnon growth (issue 35's figure for wort before: 1,002 MiB; memcached 81 MiB).
import sys, socket, time, resource
import os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "server"))
import serve_net as sn
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
wort, pool = sys.argv[1], sys.argv[2]
srv = sn.Proc(wort, pool, "-p", "0", "-t", "2", "-c", "2048")
try:
    base = sn.rss_anon_kib(srv.proc.pid)
    conns = []
    n, size, sent = 1000, 1000000, 900000
    t = time.time()
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
        s.sendall(b"set big%d 0 0 %d\r\n" % (i, size) + b"x" * sent)
        conns.append(s)
    st = sn.stats(srv.port)
    for _ in range(100):
        time.sleep(0.2)
        st2 = sn.stats(srv.port)
        if st2.get("bytes_read") == st.get("bytes_read") and int(st2.get("bytes_read", 0)) >= n * sent: break
        st = st2
    peak = sn.rss_anon_kib(srv.proc.pid)
    print(f"{n} connections x {sent} bytes of a {size}-byte set sent in {time.time()-t:.1f} s: RssAnon grew {(peak-base)/1024:.1f} MiB; "
          f"wort_buffered_bytes {st.get('wort_buffered_bytes')}, wort_buffer_refusals {st.get('wort_buffer_refusals')}, curr_connections {st.get('curr_connections')}")
    for s in conns: s.close()
finally:
    srv.stop() if hasattr(srv, "stop") else srv.proc.terminate()
