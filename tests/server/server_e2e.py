#!/usr/bin/env python3
"""End-to-end tests of `wort serve` through real memcached clients.

Run by tests/server/server_e2e_test.cc (one gtest per mode), or by hand:
    server_e2e.py MODE --wort build/wort --pool /dev/shm/x.pool
MODE is one of:
  clients  every command through pymemcache, the libmemcached tools and a raw socket: noreply,
           multi-get, cas conflicts, expiry, flush_all, big values, malformed input (each gets its
           error line and the server stays up), range scans, many concurrent clients, max-conns,
           restart on the same pool.
  kill     load through several connections, SIGKILL the server mid-load, restart it on the same
           pool and read back every acknowledged write (twice), then `wort pool check` (no leak).
  oom      a small pool fills up: writes answer SERVER_ERROR out of memory, reads keep working
           (the default --evict none; stats settings says evictions off).
  evict    --evict lru on an 8 MiB pool: ten times the pool written through pymemcache while a
           hot set is read, every set STORED, the hot keys kept, stats evictions counted, values
           larger than anything freed stored, a restart keeps the survivors unchanged.
  killevict  the kill mode on a small pool with --evict lru: an acknowledged key may be absent
           (evicted) after the kill, never a wrong value; then `wort pool check`.
  unordered  with a hash index, range answers SERVER_ERROR and the rest works.
  meta     the meta commands (mg ms md ma me mn) over a loopback socket: pipelines of quiet
           commands ended by mn, every reply code, cas conflicts, ma on a non-numeric value,
           one recache winner among 8 concurrent vivifying clients,
           binary keys via b, malformed requests, stale/win state across a restart, and
           SIGKILL during a load of ms/ma/md I, then every acknowledged write and `wort pool check`.
--binary runs the binary twin of a mode: its clients speak memcached's binary protocol (BinClient
below, with pymemcache's interface; the libmemcached tools with --binary), and the raw-socket
checks send binary packets.
Exit status 0 iff every check passed. Everything listens on 127.0.0.1 only; every loop is bounded.
"""
import argparse
import itertools
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheServerError, MemcacheClientError

FAILURES = []
# The `version` reply: memcached's protocol version, then wort's (main() reads `wort --version`).
VERSION_REPLY = b"1.6.18-wort"


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, flush=True)


# ---- a binary-protocol client -------------------------------------------------------------
# pymemcache speaks only the text protocol; BinClient has its interface (the subset these tests
# use) over memcached's binary protocol, so that the same checks run on both protocols.

BINARY = False  # --binary: Server.client() returns a BinClient, writers send binary packets

OP = dict(get=0x00, set=0x01, add=0x02, replace=0x03, delete=0x04, incr=0x05, decr=0x06, quit=0x07, flush=0x08,
          getq=0x09, noop=0x0a, version=0x0b, getk=0x0c, getkq=0x0d, append=0x0e, prepend=0x0f, stat=0x10,
          setq=0x11, addq=0x12, replaceq=0x13, deleteq=0x14, incrq=0x15, decrq=0x16, quitq=0x17, flushq=0x18,
          appendq=0x19, prependq=0x1a, verbosity=0x1b, touch=0x1c, gat=0x1d, gatq=0x1e, gatk=0x23, gatkq=0x24)
ST_OK, ST_NOT_FOUND, ST_EXISTS, ST_TOO_LARGE, ST_INVALID, ST_NOT_STORED, ST_NON_NUMERIC = 0, 1, 2, 3, 4, 5, 6
ST_UNKNOWN, ST_NO_MEMORY = 0x81, 0x82


def bin_request(op, extras=b"", key=b"", value=b"", opaque=0, cas=0):
    if isinstance(op, str):
        op = OP[op]
    return struct.pack(">BBHBBHIIQ", 0x80, op, len(key), len(extras), 0, 0, len(extras) + len(key) + len(value),
                       opaque, cas) + extras + key + value


def bin_read(sock, buf=b""):
    """Reads one response packet: (packet dict, rest of the buffer)."""
    while len(buf) < 24:
        d = sock.recv(1 << 20)
        if not d:
            raise ConnectionError("closed")
        buf += d
    magic, op, keylen, extlen, _, status, bodylen, opaque, cas = struct.unpack(">BBHBBHIIQ", buf[:24])
    while len(buf) < 24 + bodylen:
        d = sock.recv(1 << 20)
        if not d:
            raise ConnectionError("closed")
        buf += d
    body = buf[24:24 + bodylen]
    pkt = dict(magic=magic, op=op, status=status, opaque=opaque, cas=cas, extras=body[:extlen],
               key=body[extlen:extlen + keylen], value=body[extlen + keylen:])
    return pkt, buf[24 + bodylen:]


def bin_parse_all(data):
    """Splits bytes into response packets (dicts); a trailing partial packet is returned raw."""
    out = []
    while len(data) >= 24:
        bodylen = struct.unpack(">I", data[8:12])[0]
        if len(data) < 24 + bodylen:
            break
        magic, op, keylen, extlen, _, status, _, opaque, cas = struct.unpack(">BBHBBHIIQ", data[:24])
        body = data[24:24 + bodylen]
        out.append(dict(magic=magic, op=op, status=status, opaque=opaque, cas=cas, extras=body[:extlen],
                        key=body[extlen:extlen + keylen], value=body[extlen + keylen:]))
        data = data[24 + bodylen:]
    return out, data


class BinClient:
    """pymemcache's Client interface (the parts used here) over the binary protocol."""

    def __init__(self, server, connect_timeout=5, timeout=10, **_):
        self.sock = socket.create_connection(server, timeout=connect_timeout)
        self.sock.settimeout(timeout)
        self.buf = b""
        self.ids = itertools.count(1)
        self.quiet = {}   # opaque -> key of quiet requests sent and not yet resolved
        self.failed = {}  # opaque -> key of quiet requests that answered (failed)

    @staticmethod
    def _key(k):
        return k.encode() if isinstance(k, str) else k

    def _send(self, data):
        self.sock.sendall(data)

    def _read(self):
        pkt, self.buf = bin_read(self.sock, self.buf)
        return pkt

    def _other(self, pkt):
        """A packet for an earlier request: a quiet request answers only when it fails."""
        key = self.quiet.pop(pkt["opaque"], None)
        if key is not None:
            self.failed[pkt["opaque"]] = key

    def _call(self, op, extras=b"", key=b"", value=b"", cas=0):
        """Sends one request and returns its response."""
        opaque = next(self.ids)
        self._send(bin_request(op, extras, self._key(key), value, opaque, cas))
        while True:
            pkt = self._read()
            if pkt["opaque"] == opaque:
                return pkt
            self._other(pkt)

    @staticmethod
    def _raise(pkt):
        msg = f"binary status 0x{pkt['status']:02x}: {pkt['value'].decode(errors='replace')}"
        if pkt["status"] in (ST_TOO_LARGE, ST_NO_MEMORY):
            raise MemcacheServerError(msg)
        raise MemcacheClientError(msg)

    def _store(self, op, key, value, expire=0, noreply=None, flags=None, cas=0):
        extras = b"" if op in ("append", "prepend") else struct.pack(">II", flags or 0, expire)
        if noreply:
            opaque = next(self.ids)
            self.quiet[opaque] = key
            self._send(bin_request(op + "q", extras, self._key(key), value, opaque, cas))
            return True
        pkt = self._call(op, extras, key, value, cas)
        if pkt["status"] == ST_OK:
            return True
        if cas and pkt["status"] == ST_NOT_FOUND:
            return None  # cas of a missing key, as pymemcache's NOT_FOUND
        if pkt["status"] in (ST_EXISTS, ST_NOT_STORED) or (pkt["status"] == ST_NOT_FOUND and op != "set"):
            return False
        self._raise(pkt)

    def set(self, key, value, expire=0, noreply=None, flags=None):
        return self._store("set", key, value, expire, noreply, flags)

    def add(self, key, value, expire=0, noreply=None, flags=None):
        return self._store("add", key, value, expire, noreply, flags)

    def replace(self, key, value, expire=0, noreply=None, flags=None):
        return self._store("replace", key, value, expire, noreply, flags)

    def append(self, key, value, expire=0, noreply=None, flags=None):
        return self._store("append", key, value, 0, noreply)

    def prepend(self, key, value, expire=0, noreply=None, flags=None):
        return self._store("prepend", key, value, 0, noreply)

    def cas(self, key, value, cas, expire=0, noreply=None, flags=None):
        return self._store("set", key, value, expire, noreply, flags, cas=int(cas))

    def set_many(self, values, expire=0, noreply=None, flags=None):
        sent = []
        for k, v in values.items():
            opaque = next(self.ids)
            sent.append(opaque)
            self.quiet[opaque] = k
            self._send(bin_request("setq", struct.pack(">II", flags or 0, expire), self._key(k), v, opaque))
        self.noop()
        failed = [self.failed.pop(o) for o in sent if o in self.failed]
        return [] if noreply else failed

    def noop(self):
        """Ends a pipeline of quiet requests: once its answer arrives, every quiet request
        before it that did not fail has succeeded."""
        opaque = next(self.ids)
        self._send(bin_request("noop", opaque=opaque))
        while True:
            pkt = self._read()
            if pkt["opaque"] == opaque:
                break
            self._other(pkt)
        self.quiet.clear()
        return True

    def get(self, key, default=None):
        pkt = self._call("get", key=key)
        if pkt["status"] == ST_OK:
            return pkt["value"]
        if pkt["status"] == ST_NOT_FOUND:
            return default
        self._raise(pkt)

    def gets(self, key):
        pkt = self._call("get", key=key)
        if pkt["status"] == ST_OK:
            return pkt["value"], pkt["cas"]
        return None, None

    def gat(self, key, expire):
        pkt = self._call("gat", struct.pack(">I", expire), key)
        return pkt["value"] if pkt["status"] == ST_OK else None

    def get_many(self, keys):
        if not keys:
            return {}
        opaque0 = next(self.ids)
        data = b"".join(bin_request("getkq", b"", self._key(k), b"", opaque0) for k in keys)
        self._send(data)
        end = next(self.ids)
        self._send(bin_request("noop", opaque=end))
        got = {}
        while True:
            pkt = self._read()
            if pkt["opaque"] == end:
                break
            if pkt["opaque"] == opaque0 and pkt["status"] == ST_OK:
                k = pkt["key"]
                got[k.decode() if isinstance(keys[0], str) else k] = pkt["value"]
            elif pkt["opaque"] != opaque0:
                self._other(pkt)
        return got

    def delete(self, key, noreply=None):
        if noreply:
            opaque = next(self.ids)
            self.quiet[opaque] = key
            self._send(bin_request("deleteq", key=self._key(key), opaque=opaque))
            return True
        return self._call("delete", key=key)["status"] == ST_OK

    def _arith(self, op, key, value, noreply=None):
        pkt = self._call(op, struct.pack(">QQI", int(value), 0, 0xffffffff), key)
        if pkt["status"] == ST_OK:
            return struct.unpack(">Q", pkt["value"])[0]
        if pkt["status"] == ST_NOT_FOUND:
            return None
        if pkt["status"] == ST_NON_NUMERIC:
            raise MemcacheClientError("cannot increment or decrement non-numeric value")
        self._raise(pkt)

    def incr(self, key, value, noreply=False):
        return self._arith("incr", key, value)

    def decr(self, key, value, noreply=False):
        return self._arith("decr", key, value)

    def touch(self, key, expire=0, noreply=None):
        return self._call("touch", struct.pack(">I", expire), key)["status"] == ST_OK

    def flush_all(self, delay=0, noreply=None):
        extras = struct.pack(">I", delay) if delay else b""
        return self._call("flush", extras)["status"] == ST_OK

    def version(self):
        return self._call("version")["value"]

    def stats(self, *groups):
        opaque = next(self.ids)
        self._send(bin_request("stat", key=" ".join(groups).encode(), opaque=opaque))
        out = {}
        while True:
            pkt = self._read()
            if pkt["opaque"] != opaque:
                self._other(pkt)
                continue
            if pkt["status"] != ST_OK:
                self._raise(pkt)
            if not pkt["key"]:
                return out
            v = pkt["value"]
            out[pkt["key"]] = int(v) if v.isdigit() else v

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Server:
    """A `wort serve` process on a free loopback port."""

    index = ""  # --index for new pools ("" = the server's default)

    def __init__(self, wort, pool, *extra):
        idx = ["--index", Server.index] if Server.index else []
        self._launch([wort, "serve", "--pool", pool, "--port", "0", "--threads", "2", *idx, *extra])
        self.ordered = not any(f"index {k}," in l for l in self.log for k in ("cceh", "ccehc", "linp", "cuck", "bch", "levl", "path"))

    def _launch(self, cmd):
        """Starts cmd and waits for its `listening on` line (port None for a unix socket)."""
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.log = []
        self.port = None
        listening = False
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.log.append(line.rstrip())
            if "listening on" in line:
                where = line.split("listening on ")[1].split()[0]
                if where != "unix":
                    self.port = int(where.rsplit(":", 1)[1])
                listening = True
                break
        if not listening:
            self.proc.kill()
            raise RuntimeError("server did not start:\n" + "\n".join(self.log))
        # Keep draining its output so that it never blocks on a full pipe.
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self):
        for line in self.proc.stdout:
            self.log.append(line.rstrip())

    def client(self, **kw):
        if BINARY:
            return BinClient(("127.0.0.1", self.port), connect_timeout=5, timeout=10, **kw)
        return Client(("127.0.0.1", self.port), connect_timeout=5, timeout=10, **kw)

    def raw(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return s

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(30)
        check(rc == 0, f"clean shutdown exit code {rc}: {self.log[-5:]}")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)


def talk(port, data, expect_close=False, timeout=2.0):
    """Sends raw bytes, returns everything the server replied until it goes quiet. `port` may be
    the path of a unix socket."""
    if isinstance(port, str):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(port)
    else:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    out = b""
    s.settimeout(0.3)
    end = time.time() + timeout
    while time.time() < end:
        try:
            d = s.recv(1 << 20)
        except socket.timeout:
            if not expect_close:
                break
            continue
        if not d:
            out += b"<EOF>"
            break
        out += d
    s.close()
    return out


def recv_until(sock, terminator):
    buf = b""
    while not buf.endswith(terminator):
        d = sock.recv(1 << 20)
        if not d:
            raise ConnectionError("closed")
        buf += d
    return buf


# ---- clients ------------------------------------------------------------------------------

def test_pymemcache(srv):
    c = srv.client()
    check(c.version().startswith(b"1.6"), "version")
    # set / get / flags / noreply
    check(c.set("k1", b"v1", noreply=False) is True, "set")
    check(c.get("k1") == b"v1", "get")
    check(c.set("k2", b"v2", noreply=True) is True, "set noreply")
    check(c.get("k2") == b"v2", "get after noreply set")
    check(c.get("missing") is None, "get miss")
    # multi-get
    many = {f"mk{i}": f"val{i}".encode() for i in range(200)}
    check(c.set_many(many, noreply=False) == [], "set_many")
    got = c.get_many(list(many) + ["nope1", "nope2"])
    check(got == many, f"get_many ({len(got)} of {len(many)})")
    # add / replace
    check(c.add("k1", b"x", noreply=False) is False, "add existing -> NOT_STORED")
    check(c.add("k3", b"v3", noreply=False) is True, "add new")
    check(c.replace("k3", b"v3b", noreply=False) is True, "replace existing")
    check(c.replace("nokey", b"x", noreply=False) is False, "replace missing -> NOT_STORED")
    check(c.get("k3") == b"v3b", "replace took effect")
    # append / prepend
    check(c.append("k3", b"++", noreply=False) is True, "append")
    check(c.prepend("k3", b"--", noreply=False) is True, "prepend")
    check(c.get("k3") == b"--v3b++", "append+prepend value")
    check(c.append("nokey", b"x", noreply=False) is False, "append missing")
    # gets / cas
    v, cas = c.gets("k1")
    check(v == b"v1" and int(cas) > 0, "gets")
    check(c.cas("k1", b"new", cas, noreply=False) is True, "cas match")
    check(c.cas("k1", b"newer", cas, noreply=False) is False, "cas conflict -> EXISTS")
    check(c.cas("nokey", b"x", cas, noreply=False) is None, "cas missing -> NOT_FOUND")
    v2, cas2 = c.gets("k1")
    check(v2 == b"new" and int(cas2) > int(cas), "cas increases")
    # two clients racing on cas: exactly one wins
    c2 = srv.client()
    _, cas3 = c.gets("k1")
    r1 = c.cas("k1", b"A", cas3, noreply=False)
    r2 = c2.cas("k1", b"B", cas3, noreply=False)
    check((r1, r2) == (True, False) and c.get("k1") == b"A", "cas race")
    # delete
    check(c.delete("k2", noreply=False) is True, "delete")
    check(c.delete("k2", noreply=False) is False, "delete missing")
    check(c.get("k2") is None, "deleted is gone")
    # incr / decr
    c.set("n", b"10", noreply=False)
    check(c.incr("n", 5) == 15, "incr")
    check(c.decr("n", 100) == 0, "decr floors at 0")
    check(c.incr("nokey", 1) is None, "incr missing")
    c.set("big", b"18446744073709551615", noreply=False)
    check(c.incr("big", 2) == 1, "incr wraps at 2^64")
    c.set("txt", b"abc", noreply=False)
    try:
        c.incr("txt", 1)
        check(False, "incr non-numeric must fail")
    except MemcacheClientError as e:
        check("non-numeric" in str(e), f"incr non-numeric error: {e}")
    # touch / gat / gats
    check(c.touch("k1", 100, noreply=False) is True, "touch")
    check(c.touch("nokey", 100, noreply=False) is False, "touch missing")
    # pymemcache has no gat/gats: raw socket
    check(talk(srv.port, b"gat 100 k1 nokey\r\n") == b"VALUE k1 0 1\r\nA\r\nEND\r\n", "gat")
    r = talk(srv.port, b"gats 100 k1\r\n")
    check(r.startswith(b"VALUE k1 0 1 ") and r.endswith(b"\r\nA\r\nEND\r\n"), f"gats: {r!r}")
    c.set("g", b"x", noreply=False)
    check(talk(srv.port, b"gat -1 g\r\nget g\r\n") == b"VALUE g 0 1\r\nx\r\nEND\r\nEND\r\n", "gat -1 expires")
    # expiry: relative, absolute, negative; touch to expire
    # (exptimes have 1-second granularity: an item set with exptime N expires N-1..N s later)
    t_set = time.time()
    c.set("e1", b"x", expire=2, noreply=False)
    c.set("e2", b"x", expire=int(time.time()) + 2, noreply=False)  # absolute (> 30 days)
    c.set("e3", b"x", expire=100, noreply=False)
    c.set("e4", b"x", expire=2, noreply=False)
    c.touch("e4", 0)  # never expires now
    alive = c.get("e1") == b"x" and c.get("e2") == b"x"
    check(alive or time.time() - t_set > 0.9, "not yet expired")  # (a slow machine may take > 1 s)
    time.sleep(3.2)
    check(c.get("e1") is None, "relative exptime expired")
    check(c.get("e2") is None, "absolute exptime expired")
    check(c.get("e3") == b"x", "long exptime alive")
    check(c.get("e4") == b"x", "touch 0 removed the expiry")
    check(c.add("e1", b"again", noreply=False) is True, "add over an expired item")
    check(c.replace("e2", b"x", noreply=False) is False, "replace of an expired item")
    # values: binary bytes, empty, exactly 1 MiB, too large
    binv = bytes(range(256)) + b"\r\n\r\nEND\r\n" + b"\x00" * 10
    c.set("bin", binv, noreply=False)
    check(c.get("bin") == binv, "binary value")
    c.set("empty", b"", noreply=False)
    check(c.get("empty") == b"", "empty value")
    mib = os.urandom(1 << 20)
    check(c.set("mib", mib, noreply=False) is True, "1 MiB value")
    check(c.get("mib") == mib, "1 MiB value back")
    try:
        c.set("mib", mib + b"x", noreply=False)
        check(False, "too large must fail")
    except MemcacheServerError as e:
        check(("Too large." if BINARY else "object too large for cache") in str(e), f"too large error: {e}")
    check(c.get("mib") is None, "a failed set of a too-large value removed the old value (memcached)")
    check(c.get("k1") == b"A", "connection usable after too large")
    # key limits through pymemcache
    k250 = "k" * 250
    c.set(k250, b"long", noreply=False)
    check(c.get(k250) == b"long", "250-byte key")
    # stats
    st = c.stats()
    for f in (b"pid", b"uptime", b"time", b"version", b"curr_connections", b"total_connections", b"cmd_get",
              b"cmd_set", b"get_hits", b"get_misses", b"curr_items", b"total_items", b"bytes", b"threads",
              b"cas_badval", b"cas_hits", b"touch_hits", b"incr_hits", b"delete_hits", b"limit_maxbytes"):
        check(f in st, f"stats field {f}")
    check(st.get(b"get_hits", 0) > 0 and st.get(b"cmd_set", 0) > 0, "stats counts")
    check(b"item_size_max" in c.stats("settings"), "stats settings")
    # flush_all: immediate, then delayed
    c.set("f1", b"x", noreply=False)
    check(c.flush_all(noreply=False) is True, "flush_all")
    check(c.get("f1") is None and c.get("k1") is None, "flush_all removed everything")
    if srv.ordered:
        # The crawler reclaims the flushed items' space in the background.
        deadline = time.time() + 10
        while time.time() < deadline and int(c.stats()[b"curr_items"]) > 0:
            time.sleep(0.1)
        check(int(c.stats()[b"curr_items"]) == 0, f"crawler reclaimed flushed items: {c.stats()[b'curr_items']}")
    c.set("f2", b"y", noreply=False)
    check(c.get("f2") == b"y", "set after flush_all")
    t_flush = time.time()
    c.flush_all(delay=2, noreply=False)
    check(c.get("f2") == b"y" or time.time() - t_flush > 0.9, "delayed flush_all not yet")
    time.sleep(3.1)
    check(c.get("f2") is None, "delayed flush_all happened")
    c.set("f3", b"z", noreply=False)
    check(c.get("f3") == b"z", "set after delayed flush_all")
    c.close()
    c2.close()


def test_raw_protocol(srv):
    p = srv.port
    cases = [
        # (request, exact expected reply)
        (b"set r 5 0 3\r\nabc\r\nget r\r\n", b"STORED\r\nVALUE r 5 3\r\nabc\r\nEND\r\n"),
        (b"bogus\r\n", b"ERROR\r\n"),
        (b"\r\n", b"ERROR\r\n"),
        (b"get\r\n", b"ERROR\r\n"),
        (b"set r 0 0 -1\r\n", b"CLIENT_ERROR bad command line format\r\n"),
        (b"set r 0 0\r\n", b"ERROR\r\n"),
        (b"set r 0 0 2\r\nxyz\r\nget r\r\n", b"CLIENT_ERROR bad data chunk\r\nERROR\r\nVALUE r 5 3\r\nabc\r\nEND\r\n"),
        (b"get " + b"k" * 251 + b"\r\n", b"CLIENT_ERROR bad command line format\r\n"),
        # keys as memcached 1.6.18 takes them: control bytes (memaslap's 0x10) are key bytes,
        # a 0x00 ends the line
        (b"set a\x10\x01b 0 0 1\r\nx\r\nget a\x10\x01b\r\n", b"STORED\r\nVALUE a\x10\x01b 0 1\r\nx\r\nEND\r\n"),
        (b"get a\x00junk\r\nset a\x00b 0 0 1\r\nx\r\n", b"END\r\nERROR\r\nERROR\r\n"),
        (b"delete r 5\r\n", b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"),
        (b"incr r abc\r\n", b"CLIENT_ERROR invalid numeric delta argument\r\n"),
        (b"touch r soon\r\n", b"CLIENT_ERROR invalid exptime argument\r\n"),
        (b"flush_all later\r\n", b"CLIENT_ERROR invalid exptime argument\r\n"),
        (b"verbosity 1\r\nverbosity\r\n", b"OK\r\nERROR\r\n"),
        (b"stats nosuchgroup\r\n", b"ERROR\r\n"),
        (b"cas r 0 0 1\r\nq\r\n", b"ERROR\r\nERROR\r\n"),
        (b"mg r v f\r\n", b"VA 3 f5\r\nabc\r\n"),  # meta commands: mode meta
        (b"set n 0 -1 1\r\nx\r\nget n\r\n", b"STORED\r\nEND\r\n"),  # negative exptime: expired at once
        (b"set q 0 0 1 noreply\r\nx\r\nget q\r\n", b"VALUE q 0 1\r\nx\r\nEND\r\n"),
        (b"delete q noreply\r\nincr q 1 noreply\r\ntouch q 1 noreply\r\nget q\r\n", b"END\r\n"),
        (b"set n2 0 0 2\r\n10\r\ndecr n2 1\r\nget n2\r\n", b"STORED\r\n9\r\nVALUE n2 0 1\r\n9\r\nEND\r\n"),
        # too large with data, then the connection keeps working
        (b"set big 0 0 2000000\r\n" + b"x" * 2000000 + b"\r\nget r\r\n",
         b"SERVER_ERROR object too large for cache\r\nVALUE r 5 3\r\nabc\r\nEND\r\n"),
        # keys with bytes >= 0x80, prefixes of each other, flags at the maximum
        (b"set \xc3\xa9 1 0 1\r\na\r\nset \xc3\xa9\xc3\xa9 4294967295 0 1\r\nb\r\nget \xc3\xa9 \xc3\xa9\xc3\xa9 \xc3\r\n",
         b"STORED\r\nSTORED\r\nVALUE \xc3\xa9 1 1\r\na\r\nVALUE \xc3\xa9\xc3\xa9 4294967295 1\r\nb\r\nEND\r\n"),
        (b"version junk\r\n", b"VERSION " + VERSION_REPLY + b"\r\n"),
        (b"slabs automove 1\r\nslabs automove 9\r\n", b"OK\r\nERROR\r\n"),
        (b"GET /foo\r\n", b"ERROR\r\n"),
    ]
    for req, want in cases:
        got = talk(p, req)
        check(got == want, f"raw {req[:60]!r}: got {got[:200]!r} want {want[:200]!r}")
    # A line too long: error, then the server closes the connection.
    got = talk(p, b"a" * 5000, expect_close=True)
    check(got == b"CLIENT_ERROR line too long\r\n<EOF>", f"line too long: {got[:100]!r}")
    # quit closes
    check(talk(p, b"quit\r\nget r\r\n", expect_close=True) == b"<EOF>", "quit")
    # An HTTP request line closes the connection without a reply, as memcached does.
    got = talk(p, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", expect_close=True)
    check(got == b"<EOF>", f"HTTP request line: {got!r}")
    # Pipelined requests arriving a byte at a time.
    s = srv.raw()
    for b in b"set slow 0 0 4\r\nabcd\r\nget slow\r\n":
        s.sendall(bytes([b]))
    check(recv_until(s, b"END\r\n") == b"STORED\r\nVALUE slow 0 4\r\nabcd\r\nEND\r\n", "byte-at-a-time pipeline")
    s.close()
    # Half a request, then the client vanishes: nobody else notices.
    for _ in range(20):
        h = srv.raw()
        h.sendall(b"set half 0 0 100000\r\nabc")
        h.close()
        h = srv.raw()
        h.sendall(b"get " + b"x" * 1000)
        h.close()
    check(talk(p, b"get r\r\n") == b"VALUE r 5 3\r\nabc\r\nEND\r\n", "server fine after half requests")
    # Large multi-get reply, bigger than the handler's output high-water mark (1 MiB).
    c = srv.client()
    val = b"v" * 100000
    for i in range(30):
        c.set(f"mg{i}", val, noreply=False)
    got = c.get_many([f"mg{i}" for i in range(30)])
    check(len(got) == 30 and all(v == val for v in got.values()), "3 MB multi-get")
    c.close()


def test_raw_binary(srv):
    """The binary twin of test_raw_protocol: exact packets, malformed headers, partial input."""
    p = srv.port
    SETX = lambda k, v, fl=0, op="set": bin_request(op, struct.pack(">II", fl, 0), k, v, opaque=7)
    GET = lambda k, op="get": bin_request(op, b"", k, b"", opaque=8)
    talk(p, SETX(b"r", b"abc", 5))

    def packets(data, expect_close=False):
        got = talk(p, data, expect_close=expect_close)
        eof = got.endswith(b"<EOF>")
        pk, rest = bin_parse_all(got[:-5] if eof else got)
        return [(x["op"], x["status"], x["key"], x["value"]) for x in pk], rest, eof

    cases = [
        (SETX(b"r", b"abc", 5) + GET(b"r"), [(1, 0, b"", b""), (0, 0, b"", b"abc")]),
        (GET(b"nope") + GET(b"nope", "getk"), [(0, 1, b"", b"Not found"), (0x0c, 1, b"nope", b"")]),
        (bin_request(0x50, b"", b"k", b"junk") + bin_request("noop"), [(0x50, 0x81, b"", b"Unknown command"), (0x0a, 0, b"", b"")]),
        (bin_request("version"), [(0x0b, 0, b"", VERSION_REPLY)]),
        # too large with data, then the connection keeps working
        (SETX(b"big", b"x" * 2000000) + GET(b"r"), [(1, 3, b"", b"Too large."), (0, 0, b"", b"abc")]),
        # keys of any byte: spaces, control bytes, 0x00, >= 0x80 (binary keys are not tokens)
        (SETX(b"a b\x00\x10\xff", b"v") + GET(b"a b\x00\x10\xff", "getk"), [(1, 0, b"", b""), (0x0c, 0, b"a b\x00\x10\xff", b"v")]),
        (GET(b"k" * 250), [(0, 1, b"", b"Not found")]),
    ]
    for req, want in cases:
        got, rest, eof = packets(req)
        check(got == want and not rest and not eof, f"raw binary {req[:40]!r}: got {got!r} want {want!r}")
    # Malformed headers: the spec's error then a close, or a close; never a hang.
    got, rest, eof = packets(bin_request("get", b"", b"k" * 251), expect_close=True)
    check(got == [(0, 4, b"", b"Invalid arguments")] and eof, f"key > 250 bytes: {got!r} {eof}")
    bad = bytearray(SETX(b"d", b"value"))
    bad[8:12] = struct.pack(">I", 4)  # bodylen < extlen + keylen
    got, rest, eof = packets(bytes(bad) + SETX(b"e", b"v"), expect_close=True)
    check(got == [(1, 0x81, b"", b"Unknown command")] and eof, f"lengths that disagree: {got!r} {eof}")
    got, rest, eof = packets(b"\x80" + b"\x00" * 7 + b"\x80\x00\x00\x00" + b"\x00" * 12, expect_close=True)
    check(got == [(0, 4, b"", b"Invalid arguments")] and eof, f"bodylen 2 GiB: {got!r} {eof}")
    # A set or an unknown opcode with a body over 1 GiB: memcached 1.6.18 answers "too large" /
    # "unknown command" once it has read the body and stays open; wort answers at once, skips the
    # body as it arrives, and stays open.
    big = bytearray(SETX(b"g", b""))
    big[8:12] = struct.pack(">I", (1 << 30) + 100)
    got, rest, eof = packets(bytes(big))
    check(got == [(1, 3, b"", b"Too large.")] and not eof, f"set with a body over 1 GiB: {got!r} {eof}")
    big = bytearray(bin_request(0x50, b"", b"", b""))
    big[8:12] = struct.pack(">I", (1 << 30) + 100)
    got, rest, eof = packets(bytes(big))
    check(got == [(0x50, 0x81, b"", b"Unknown command")] and not eof, f"unknown opcode, body over 1 GiB: {got!r} {eof}")
    # A malformed verbosity: "unknown command" (as memcached, which answers every verbosity so),
    # its body skipped, and the connection goes on.
    got, rest, eof = packets(bin_request("verbosity", b"\x00" * 8, b"", b"") + bin_request("noop"))
    check(got == [(0x1b, 0x81, b"", b"Unknown command"), (0x0a, 0, b"", b"")] and not eof, f"bad verbosity: {got!r} {eof}")
    got, rest, eof = packets(SETX(b"f", b"v") + b"\x81" + bytes(GET(b"f"))[1:], expect_close=True)
    check(got == [(1, 0, b"", b"")] and eof, f"bad magic closes silently: {got!r} {eof}")
    got, _, _ = packets(GET(b"d") + GET(b"e"))
    check(got == [(0, 1, b"", b"Not found")] * 2, f"nothing of the refused packets was stored: {got!r}")
    # quit answers, then closes; quitq closes silently
    got, rest, eof = packets(bin_request("quit") + GET(b"r"), expect_close=True)
    check(got == [(7, 0, b"", b"")] and eof, f"quit: {got!r}")
    got, rest, eof = packets(bin_request("quitq") + GET(b"r"), expect_close=True)
    check(got == [] and eof, f"quitq: {got!r}")
    # Pipelined requests arriving a byte at a time.
    s = srv.raw()
    for b in SETX(b"slow", b"abcd") + GET(b"slow"):
        s.sendall(bytes([b]))
    a, buf = bin_read(s)
    g, buf = bin_read(s, buf)
    check(a["status"] == 0 and g["value"] == b"abcd", "byte-at-a-time binary pipeline")
    s.close()
    # Half a request, then the client vanishes: nobody else notices.
    for _ in range(20):
        h = srv.raw()
        h.sendall(SETX(b"half", b"x" * 100000)[:5000])
        h.close()
        h = srv.raw()
        h.sendall(GET(b"r")[:10])
        h.close()
    got, _, _ = packets(GET(b"r"))
    check(got == [(0, 0, b"", b"abc")], "server fine after half binary requests")
    got, _, _ = packets(GET(b"half"))
    check(got == [(0, 1, b"", b"Not found")], f"half a set stored nothing: {got!r}")
    # A reply bigger than the output high-water mark (1 MiB): 30 getkq of 100 KB + noop.
    c = srv.client()
    val = b"v" * 100000
    check(c.set_many({f"mg{i}": val for i in range(30)}, noreply=False) == [], "binary set_many")
    got = c.get_many([f"mg{i}" for i in range(30)] + ["nope"])
    check(len(got) == 30 and all(v == val for v in got.values()), "3 MB binary multi-get")
    c.close()


def test_admin_views(srv):
    """stats items / slabs (both protocols), stats cachedump through pymemcache, memcdump and
    lru_crawler metadump (text): the fields memcached names, all items in class 1."""
    c = srv.client()
    keys = {f"dump:{i}": f"v{i}".encode() for i in range(50)}
    check(c.set_many(keys, noreply=False) == [], "admin: set_many")
    items = c.stats("items")
    check(int(items.get(b"items:1:number", 0)) >= 50, f"stats items: {list(items.items())[:3]}")
    slabs = c.stats("slabs")
    check(int(slabs.get(b"active_slabs", 0)) == 1 and b"1:chunk_size" in slabs, f"stats slabs: {list(slabs)[:4]}")
    if not BINARY:
        dump = c.stats("cachedump", "1", "0")
        check(all(k.encode() in dump for k in keys), f"pymemcache stats cachedump: {len(dump)} keys")
        check(dump.get(b"dump:7") == b"[2 b; 0 s]", f"cachedump entry: {dump.get(b'dump:7')!r}")
        r = subprocess.run(["memcdump", f"--servers=127.0.0.1:{srv.port}"], capture_output=True, timeout=30)
        listed = set(r.stdout.decode(errors="replace").split())
        check(r.returncode == 0 and set(keys) <= listed, f"memcdump: rc {r.returncode}, {len(listed)} keys")
        s = srv.raw()
        s.sendall(b"lru_crawler metadump all\r\n")
        md = recv_until(s, b"END\r\n")
        check(md.count(b"\nkey=dump%3A") + md.startswith(b"key=dump%3A") >= 50 and b" cls=1 " in md,
              f"lru_crawler metadump: {md[:120]!r}")
        s.sendall(b"stats conns\r\n")
        conns = recv_until(s, b"END\r\n")
        check(conns.count(b":addr tcp:127.0.0.1:") >= 2 and b":state conn_parse_cmd" in conns, f"stats conns: {conns[:200]!r}")
        s.close()
    c.close()


def test_range(srv):
    c = srv.client()
    keys = [f"r:{i:04d}" for i in range(0, 300, 3)]
    for k in keys:
        c.set(k, k.encode() + b"!", noreply=False)
    s = srv.raw()
    s.sendall(b"range r:0010 r:0100 1000\r\n")
    reply = recv_until(s, b"END\r\n")
    got = [l[4:].decode() for l in reply.split(b"\r\n") if l.startswith(b"KEY ")]
    want = [k for k in keys if "r:0010" <= k <= "r:0100"]
    check(got == want, f"range keys: {got[:5]}... want {want[:5]}...")
    s.sendall(b"range r:0000 r:9999 5 values\r\n")
    reply = recv_until(s, b"END\r\n")
    check(reply.startswith(b"VALUE r:0000 0 7\r\nr:0000!\r\nVALUE r:0003 0 7\r\n") and reply.count(b"VALUE ") == 5,
          f"range values: {reply[:120]!r}")
    # Dead items are skipped.
    c.delete("r:0003", noreply=False)  # wait for it: the range below goes over another connection
    s.sendall(b"range r:0000 r:0009 10\r\n")
    reply = recv_until(s, b"END\r\n")
    check(reply == b"KEY r:0000\r\nKEY r:0006\r\nKEY r:0009\r\nEND\r\n", f"range after delete: {reply!r}")
    s.sendall(b"range z a 10\r\n")
    check(recv_until(s, b"END\r\n") == b"END\r\n", "empty range")
    s.sendall(b"range a z 0\r\n")
    check(recv_until(s, b"\r\n").startswith(b"CLIENT_ERROR"), "range limit 0")
    s.close()
    c.close()


def test_concurrency(srv):
    errors = []

    def worker(t):
        try:
            c = srv.client()
            for i in range(300):
                k = f"t{t}:{i % 50}"
                v = f"{t}-{i}".encode()
                c.set(k, v, noreply=False)
                if c.get(k) != v:
                    errors.append(f"thread {t} op {i}")
            c.incr("ctr", 1)
            c.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    c = srv.client()
    c.set("ctr", b"0", noreply=False)
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    check(not errors, f"concurrent clients: {errors[:3]}")
    check(c.get("ctr") == b"16", "concurrent incr")
    # many idle connections hold no thread
    idle = [srv.raw() for _ in range(200)]
    check(c.get("ctr") == b"16", "server serves with 200 idle connections")
    for s in idle:
        s.close()
    c.close()


def test_libmemcached_tools(srv):
    servers = f"--servers=127.0.0.1:{srv.port}"
    env = dict(os.environ)
    proto = ["--binary"] if BINARY else []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "toolfile")
        data = os.urandom(5000)
        with open(path, "wb") as f:
            f.write(data)

        def run(*args):
            return subprocess.run(list(args), capture_output=True, timeout=30, env=env)

        r = run("memccp", *proto, servers, path)
        check(r.returncode == 0, f"memccp: {r.stderr!r}")
        r = run("memccat", *proto, servers, "toolfile")
        check(r.returncode == 0 and r.stdout in (data, data + b"\n"), f"memccat: rc {r.returncode} {len(r.stdout)} bytes")
        r = run("memcexist", *proto, servers, "toolfile")
        check(r.returncode == 0, f"memcexist: {r.stderr!r}")
        r = run("memctouch", *proto, servers, "--expire=100", "toolfile")
        check(r.returncode == 0, f"memctouch: {r.stderr!r}")
        # memaslap (libmemcached's load generator; its keys hold control bytes such as 0x10)
        r = run("memcaslap", "-s", f"127.0.0.1:{srv.port}", "-t", "1s", "-T", "1", "-c", "4", *(["-B"] if BINARY else []))
        check(r.returncode == 0 and b"Run time" in r.stdout and b"get_misses: 0" in r.stdout,
              f"memaslap: rc {r.returncode} {r.stdout[-300:]!r} {r.stderr[-300:]!r}")
        r = run("memcping", servers)
        check(r.returncode == 0, f"memcping: {r.stderr!r}")
        r = run("memcstat", *proto, servers)
        check(r.returncode == 0 and b"curr_items" in r.stdout, f"memcstat: {r.stdout[:200]!r}")
        r = run("memcrm", *proto, servers, "toolfile")
        check(r.returncode == 0, f"memcrm: {r.stderr!r}")
        r = run("memccat", *proto, servers, "toolfile")
        check(r.returncode != 0, "memccat after memcrm must fail")
        run("memccp", *proto, servers, path)
        r = run("memcflush", *proto, servers)
        check(r.returncode == 0, f"memcflush: {r.stderr!r}")
        r = run("memccat", *proto, servers, "toolfile")
        check(r.returncode != 0, "memccat after memcflush must fail")
        # libmemcached's conformance test: -a the text protocol, -b the binary one (27 tests each).
        flag = "-b" if BINARY else "-a"
        r = run("memccapable", "-h", "127.0.0.1", "-p", str(srv.port), flag)
        passed = r.stdout.count(b"[pass]")
        check(r.returncode == 0 and passed == 27, f"memccapable {flag}: {passed} passed: {r.stdout[-400:]!r}{r.stderr[-400:]!r}")


def test_max_conns(args):
    pool = args.pool + ".mc"
    srv = Server(args.wort, pool, "--max-conns", "3")
    try:
        held = [srv.raw() for _ in range(3)]
        for s in held:
            s.sendall(b"version\r\n")
            recv_until(s, b"\r\n")
        got = talk(srv.port, b"version\r\n", expect_close=True)
        check(got == b"ERROR Too many open connections\r\n<EOF>", f"max-conns: {got!r}")
        held[0].close()
        ok = False
        for _ in range(50):  # the server notices the close asynchronously
            time.sleep(0.1)
            if talk(srv.port, b"version\r\n").startswith(b"VERSION"):
                ok = True
                break
        check(ok, "accepts again below max-conns")
        for s in held[1:]:
            s.close()
    finally:
        srv.stop()
        os.unlink(pool)


def mode_clients(args):
    fresh = not os.path.exists(args.pool)
    srv = Server(args.wort, args.pool)
    try:
        if fresh:  # issue 35: a pool just created was logged "(clean shutdown)"
            opened = [l for l in srv.log if " opened in " in l]
            check(len(opened) == 1 and "(new store)" in opened[0] and "no items" in opened[0]
                  and "shutdown" not in opened[0], f"start line of a new pool: {opened}")
        test_pymemcache(srv)
        test_raw_binary(srv) if BINARY else test_raw_protocol(srv)
        test_range(srv)
        test_admin_views(srv)
        test_concurrency(srv)
        test_libmemcached_tools(srv)
        check(srv.alive(), "server still running after everything")
        # Restart on the same pool: the data is there, new cas values are larger.
        c = srv.client()
        c.set("persist", b"across restarts", flags=7, noreply=False)
        _, cas_before = c.gets("persist")
        c.close()
    finally:
        srv.stop()
    srv = Server(args.wort, args.pool)
    try:
        check(any("clean shutdown" in l for l in srv.log), f"restart log: {srv.log}")
        check(talk(srv.port, b"get persist\r\n") == b"VALUE persist 7 15\r\nacross restarts\r\nEND\r\n",
              "value survives a restart")
        c = srv.client()
        c.set("after", b"x", noreply=False)
        _, cas_after = c.gets("after")
        check(int(cas_after) > int(cas_before), f"cas grows across restarts ({cas_before} -> {cas_after})")
        c.close()
    finally:
        srv.stop()
    test_max_conns(args)


# ---- kill ---------------------------------------------------------------------------------

VALUE_SIZES = None  # killevict: a few fixed sizes (an 8 MiB pool has room for few size classes)


def value_for(key, version):
    n = 10 + (hash((key, version)) % 3000)
    if VALUE_SIZES:
        n = VALUE_SIZES[hash((key, version)) % len(VALUE_SIZES)]
    return (f"{key}:{version}:".encode() * (n // 8 + 1))[:n]


def mode_kill(args, extra=(), evicting=False, keys_per_writer=2000):
    rounds = 2
    acked = {}      # key -> version acknowledged last
    inflight = {}   # key -> version sent but not acknowledged when the server died
    deleted_ack = set()
    srv = Server(args.wort, args.pool, *extra)
    total_acks = 0
    try:
        for rnd in range(rounds):
            stop = threading.Event()
            lock = threading.Lock()

            def writer(t):
                nonlocal total_acks
                rng = random.Random(rnd * 100 + t)
                try:
                    s = srv.raw()
                    i = 0
                    while not stop.is_set() and i < 200000:
                        i += 1
                        key = f"w{t}:{rng.randrange(keys_per_writer)}"
                        if rng.random() < 0.1 and key in acked:
                            with lock:
                                inflight[key] = None
                            if BINARY:
                                s.sendall(bin_request("delete", key=key.encode(), opaque=i))
                                pkt, _ = bin_read(s)
                                deleted = pkt["status"] == ST_OK
                            else:
                                s.sendall(f"delete {key}\r\n".encode())
                                deleted = recv_until(s, b"\r\n") == b"DELETED\r\n"
                            with lock:
                                inflight.pop(key, None)
                                acked.pop(key, None)
                                if deleted:
                                    deleted_ack.add(key)
                            continue
                        ver = acked.get(key, 0) + 1 if key not in acked else acked[key] + 1
                        v = value_for(key, ver)
                        with lock:
                            inflight[key] = ver
                        if BINARY:
                            s.sendall(bin_request("set", struct.pack(">II", ver, 0), key.encode(), v, opaque=i))
                            pkt, _ = bin_read(s)
                            if pkt["status"] != ST_OK or pkt["opaque"] != i:
                                raise RuntimeError(f"set answered {pkt!r}")
                        else:
                            s.sendall(f"set {key} {ver} 0 {len(v)}\r\n".encode() + v + b"\r\n")
                            r = recv_until(s, b"\r\n")
                            if r != b"STORED\r\n":
                                raise RuntimeError(f"set answered {r!r}")
                        with lock:
                            inflight.pop(key, None)
                            acked[key] = ver
                            deleted_ack.discard(key)
                            total_acks += 1
                except (ConnectionError, OSError):
                    pass  # the server was killed

            threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
            for t in threads:
                t.start()
            time.sleep(1.5 + random.random())
            if evicting:
                EVICTED.append(int(stats(srv.port).get("evictions", 0)))
            srv.kill9()  # mid-load
            stop.set()
            for t in threads:
                t.join(30)
            print(f"round {rnd}: {total_acks} acknowledged sets so far, {len(acked)} live keys, "
                  f"{len(inflight)} in flight at the kill", flush=True)
            srv = Server(args.wort, args.pool, *extra)
            check(any("unclean shutdown" in l for l in srv.log), f"restart after kill: {srv.log}")
            print("\n".join(srv.log), flush=True)
            # Every acknowledged write is there with its value; an in-flight one may be old or new.
            c = srv.client()
            keys = sorted(set(acked) | set(inflight) | deleted_ack)
            got = {}
            for i in range(0, len(keys), 100):
                got.update(c.get_many(keys[i:i + 100]))
            bad = 0
            for k in keys:
                options = set()
                if k in acked:
                    options.add(value_for(k, acked[k]))
                else:
                    options.add(None)
                if k in inflight:
                    iv = inflight[k]
                    options.add(None if iv is None else value_for(k, iv))
                if evicting:
                    options.add(None)  # evicted: absent is fine, a wrong value never
                if got.get(k) not in options:
                    bad += 1
                    if bad <= 3:
                        print(f"key {k}: got {got.get(k)!r:.60} acked {acked.get(k)} inflight {inflight.get(k)}")
            check(bad == 0, f"round {rnd}: {bad} of {len(keys)} keys lost or wrong after SIGKILL")
            # Settle in-flight keys to what the server has, for the next round.
            for k, iv in list(inflight.items()):
                if got.get(k) is None:
                    acked.pop(k, None)
                elif iv is not None and got.get(k) == value_for(k, iv):
                    acked[k] = iv
            inflight.clear()
            c.close()
        check(total_acks > 1000, f"enough load before the kills ({total_acks})")
        deadline = time.time() + 60
        while time.time() < deadline and not any("recovery finished" in l for l in srv.log):
            time.sleep(0.1)
        check(any("recovery finished" in l for l in srv.log), f"post-crash recovery finished: {srv.log[-3:]}")
        if evicting:
            check(sum(EVICTED) > 0, f"evictions happened under the load ({EVICTED})")
    finally:
        srv.stop()
    # The pool is consistent and nothing leaked: allocated blocks == blocks the index reaches.
    r = subprocess.run([args.wort, "pool", "check", args.pool], capture_output=True, text=True, timeout=120)
    print(r.stdout[-2000:], r.stderr[-2000:], flush=True)
    check(r.returncode == 0, "wort pool check after the kills")


# ---- oom ----------------------------------------------------------------------------------

EVICTED = []  # killevict: `stats evictions` after each restart's load (read before each kill)


def stats(port, group=""):
    out = talk(port, f"stats {group}".strip().encode() + b"\r\n")
    d = {}
    for line in out.decode(errors="replace").split("\r\n"):
        p = line.split(" ", 2)
        if len(p) == 3 and p[0] == "STAT":
            d[p[1]] = p[2]
    return d


def mode_oom(args):
    srv = Server(args.wort, args.pool, "--pool-size", "24M")
    try:
        c = srv.client()
        c.set("keep", b"kept value", noreply=False)
        val = b"o" * 200000
        stored, full = 0, False
        for i in range(1000):
            try:
                c.set(f"fill{i}", val, noreply=False)
                stored += 1
            except MemcacheServerError as e:
                check(("Out of memory" if BINARY else "out of memory storing object") in str(e), f"oom error text: {e}")
                full = True
                break
        check(full, f"pool never filled ({stored} values)")
        check(c.get("keep") == b"kept value", "reads work when full")
        check(c.get("fill0") == val, "old values readable when full")
        check(talk(srv.port, b"set x 0 0 200000\r\n" + val + b"\r\nget keep\r\n") ==
              b"SERVER_ERROR out of memory storing object\r\nVALUE keep 0 10\r\nkept value\r\nEND\r\n",
              "raw oom reply, connection usable")
        for i in range(stored // 2):
            c.delete(f"fill{i}")
        check(c.set("after", val, noreply=False) is True, "writes work again after deletes")
        c.close()
        check(stats(srv.port, "settings").get("evictions") == "off", "stats settings: evictions off by default")
        check(stats(srv.port).get("evictions") == "0", "no evictions without --evict lru")
        check(srv.alive(), "server alive after oom")
        print(f"oom: {stored} values of 200000 bytes fit in a 24 MiB pool", flush=True)
    finally:
        srv.stop()


# ---- evict --------------------------------------------------------------------------------

def mode_evict(args):
    srv = Server(args.wort, args.pool, "--pool-size", "8M", "--evict", "lru")
    try:
        check(stats(srv.port, "settings").get("evictions") == "on", "stats settings: evictions on")
        c = srv.client(allow_unicode_keys=True)
        # Hot keys: binary-safe bytes >= 0x80 in the key (UTF-8), prefixes of each other.
        hot = [f"h\u00e9{i}" for i in range(50)] + ["h", "h\u00e9"]
        for i, k in enumerate(hot):
            check(c.set(k, f"hot{i}".encode() * 10, noreply=False) is True, f"hot set {k}")
        val = lambda i: (f"{i}:".encode() * 250)[:1000]
        writes = 10 * (8 << 20) // 1000
        refused = 0
        for i in range(writes):
            try:
                if c.set(f"c{i}", val(i), noreply=False) is not True:
                    refused += 1
            except MemcacheServerError:
                refused += 1
            if i % 100 == 0:
                c.get_many(hot)
        check(refused == 0, f"every set stored with --evict lru ({refused} refused)")
        got = c.get_many(hot)
        alive = sum(1 for i, k in enumerate(hot) if got.get(k) == f"hot{i}".encode() * 10)
        check(alive >= len(hot) - 1, f"hot keys kept: {alive}/{len(hot)}")
        check(all(got.get(k) in (None, f"hot{i}".encode() * 10) for i, k in enumerate(hot)), "no wrong hot value")
        st = stats(srv.port)
        check(int(st.get("evictions", 0)) > writes // 2, f"stats evictions {st.get('evictions')}")
        check("evicted_unfetched" in st, "stats evicted_unfetched")
        # Bigger than anything freed so far: a 500 KB value and a 1 MiB value (two chunks).
        for n in (500000, 1000000):
            big = b"B" * n
            check(c.set(f"big{n}", big, noreply=False) is True, f"big value of {n} bytes stored")
            check(c.get(f"big{n}") == big, f"big value of {n} bytes read back")
        # Survivors of a clean restart are unchanged.
        sample = [f"c{i}" for i in range(writes - 3000, writes)]
        before = {}
        for i in range(0, len(sample), 100):
            before.update(c.get_many(sample[i:i + 100]))
        st2 = stats(srv.port)
        print("evict stats:", {k: v for k, v in st2.items() if "evict" in k or k == "curr_items"}, flush=True)
        # The big values evicted whole chunks; what is left is mostly the newest keys.
        check(len(before) > 300 and len(before) + len(hot) + 2 >= int(st2["curr_items"]) * 0.8,
              f"recent keys alive before the restart ({len(before)} of {st2['curr_items']} items)")
        c.close()
        srv.stop()
        srv = Server(args.wort, args.pool, "--evict", "lru")
        c = srv.client(allow_unicode_keys=True)
        after = {}
        for i in range(0, len(sample), 100):
            after.update(c.get_many(sample[i:i + 100]))
        check(after == before, f"restart keeps the survivors ({len(after)} of {len(before)})")
        for i in range(writes // 4):
            c.set(f"d{i}", val(i), noreply=True)
        check(c.get(f"d{writes // 4 - 1}") == val(writes // 4 - 1), "writes after the restart evict and store")
        c.close()
        print(f"evict: {writes} sets of 1000 bytes into an 8 MiB pool, {st.get('evictions')} evictions, "
              f"{alive}/{len(hot)} hot keys kept", flush=True)
    finally:
        srv.stop()


def mode_killevict(args):
    global VALUE_SIZES
    # The allocator gives each size class whole 1 MiB chunks: with values of 3000 sizes an 8 MiB
    # pool would hold a handful of classes only. Three sizes, 20000 keys: about 13 MB of values.
    VALUE_SIZES = (100, 400, 1500)
    mode_kill(args, ("--pool-size", "8M", "--evict", "lru"), evicting=True, keys_per_writer=5000)


# ---- unordered ----------------------------------------------------------------------------

def mode_unordered(args):
    """A hash index serves everything but range, which gets a clear SERVER_ERROR."""
    srv = Server(args.wort, args.pool)
    try:
        c = srv.client()
        c.set("a", b"1", noreply=False)
        check(c.get("a") == b"1", "get on a hash index")
        got = talk(srv.port, b"range a z 10\r\nget a\r\n")
        check(got.startswith(b"SERVER_ERROR range needs an ordered index") and got.endswith(b"VALUE a 0 1\r\n1\r\nEND\r\n"),
              f"range on a hash index: {got!r}")
        c.close()
    finally:
        srv.stop()



def mode_loadgen(args):
    """`wort bench-server` (the load client of scripts/bench_server.sh) counts right: single and
    multi-get requests over a filled key space (every key a hit), then over a key space twice the
    filled one (misses counted per key), pipelined (replies matched to requests in order), and a
    bad --keys-per-get or --pipeline is refused."""
    srv = Server(args.wort, args.pool)
    try:
        def run(*extra):
            p = subprocess.run([args.wort, "bench-server", "--port", str(srv.port), "--conns", "2",
                                "--value-size", "20", "--label", "lg", *extra], capture_output=True, text=True, timeout=120)
            rows = [l.split() for l in p.stdout.splitlines() if l and not l.startswith(("#", "server "))]
            return p.returncode, rows, p.stderr
        # fill keys 0..499, then 100 single gets
        rc, rows, err = run("--keyspace", "500", "--mix", "100", "--requests", "100")
        check(rc == 0 and [r[2] for r in rows] == ["FILL", "MIX100"], f"fill + single gets: rc {rc} {rows} {err}")
        check(rows[0][3] == "500" and rows[1][3] == "100" and rows[1][8:] == ["0", "0"],
              f"single gets: 100 keys, no miss, no error: {rows}")
        # 50 requests of 20 keys each = 1000 keys, all present
        rc, rows, err = run("--keyspace", "500", "--mix", "100", "--no-fill", "--requests", "50", "--keys-per-get", "20")
        check(rc == 0 and len(rows) == 1 and rows[0][3] == "1000" and rows[0][8:] == ["0", "0"],
              f"multi-get of 20 keys: 1000 keys, no miss: rc {rc} {rows} {err}")
        # key space 1000, half of it present: misses counted per key, about half
        rc, rows, err = run("--keyspace", "1000", "--mix", "100", "--no-fill", "--requests", "50", "--keys-per-get", "20")
        misses = int(rows[0][8]) if rc == 0 and rows else -1
        check(rows and rows[0][3] == "1000" and 300 < misses < 700 and rows[0][9] == "0",
              f"multi-get over a half-filled key space: ~500 of 1000 keys missed, got {rows} {err}")
        # pipelined: 8 requests in flight per connection, the same counts (replies matched in order)
        rc, rows, err = run("--keyspace", "500", "--mix", "100", "--no-fill", "--requests", "50", "--keys-per-get", "20",
                            "--pipeline", "8")
        check(rc == 0 and len(rows) == 1 and rows[0][3] == "1000" and rows[0][8:] == ["0", "0"],
              f"pipelined multi-gets: 1000 keys, no miss, no error: rc {rc} {rows} {err}")
        rc, rows, err = run("--keyspace", "1000", "--mix", "50", "--no-fill", "--requests", "400", "--pipeline", "16")
        misses = int(rows[0][8]) if rc == 0 and rows else -1
        check(rc == 0 and rows and rows[0][3] == "400" and 50 < misses < 350 and rows[0][9] == "0",
              f"pipelined sets and gets, half the key space filled: 400 requests, some gets missed, no error: {rows} {err}")
        rc, rows, err = run("--keyspace", "500", "--mix", "100", "--keys-per-get", "0")
        check(rc != 0 and "keys-per-get" in err, f"--keys-per-get 0 refused: rc {rc} {err}")
        rc, rows, err = run("--keyspace", "500", "--mix", "100", "--pipeline", "0")
        check(rc != 0 and "pipeline" in err, f"--pipeline 0 refused: rc {rc} {err}")
    finally:
        srv.stop()


# ---- meta ---------------------------------------------------------------------------------

def mode_meta(args):
    import base64
    srv = Server(args.wort, args.pool)
    try:
        p = srv.port
        cases = [
            (b"mn\r\n", b"MN\r\n"),
            (b"ms m1 3 F9 T0\r\nabc\r\nmg m1 v f t s k Oop\r\n", b"HD\r\nVA 3 f9 t-1 s3 km1 Oop\r\nabc\r\n"),
            (b"mg nope v\r\nmg nope v q\r\nmg nope k O7\r\nmn\r\n", b"EN\r\nEN knope O7\r\nMN\r\n"),
            (b"md nope\r\nms nope 1 MR\r\nx\r\nma nope\r\nme nope\r\n", b"NF\r\nNS\r\nNF\r\nEN\r\n"),
            (b"ma m1\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
            (b"ma cnt N0 J41 v\r\nma cnt v\r\nma cnt MD D50 v\r\n", b"VA 2\r\n41\r\nVA 2\r\n42\r\nVA 1\r\n0\r\n"),
            (b"mg m1 v v\r\nmg m1 h\r\nms m1 2 zz\r\nhi\r\nmg m1 s\r\n",
             b"CLIENT_ERROR duplicate flag\r\nCLIENT_ERROR flag h is not supported: wort serve keeps no hit-before data\r\n"
             b"CLIENT_ERROR invalid flag\r\nHD s3\r\n"),
            (b"mg " + b"k" * 251 + b" v\r\nmn\r\n", b"CLIENT_ERROR bad command line format\r\nMN\r\n"),
        ]
        for req, want in cases:
            got = talk(p, req)
            check(got == want, f"meta {req[:60]!r}: got {got[:200]!r} want {want[:200]!r}")

        # A pipeline of 500 quiet sets and 500 quiet gets (half of them misses) in one send,
        # ended by mn: only the hits come back, in order, then MN.
        s = srv.raw()
        req = b"".join(b"ms q%d 4 q\r\nv%03d\r\n" % (i, i % 1000) for i in range(0, 1000, 2))
        req += b"".join(b"mg q%d v q k\r\n" % i for i in range(1000))
        req += b"mn\r\n"
        s.sendall(req)
        got = recv_until(s, b"MN\r\n")
        want = b"".join(b"VA 4 kq%d\r\nv%03d\r\n" % (i, i) for i in range(0, 1000, 2)) + b"MN\r\n"
        check(got == want, f"quiet pipeline: {len(got)} bytes, want {len(want)}")
        s.close()

        # cas conflicts via C, as two clients racing on one key.
        a, b = srv.raw(), srv.raw()
        a.sendall(b"ms race 1 c\r\n0\r\n")
        cas = int(recv_until(a, b"\r\n").split()[1][1:])
        b.sendall(b"ms race 1 C%d\r\nB\r\n" % cas)
        check(recv_until(b, b"\r\n") == b"HD\r\n", "first C wins")
        a.sendall(b"ms race 1 C%d\r\nA\r\n" % cas)
        check(recv_until(a, b"\r\n") == b"EX\r\n", "second C with the same cas: EX")
        a.sendall(b"md race C%d\r\n" % cas)
        check(recv_until(a, b"\r\n") == b"EX\r\n", "md with an old cas: EX")
        a.close()
        b.close()

        # Dog-pile protection: 8 clients ask for a missing key with N at once; exactly one wins.
        for rnd in range(5):
            barrier = threading.Barrier(8)
            replies = []

            def viv():
                c = srv.raw()
                barrier.wait(10)
                c.sendall(b"mg pile%d N30 s\r\n" % rnd)
                replies.append(recv_until(c, b"\r\n"))
                c.close()

            ts = [threading.Thread(target=viv) for _ in range(8)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(30)
            wins = sum(1 for r in replies if r.rstrip().endswith(b" W"))
            zs = sum(1 for r in replies if r.rstrip().endswith(b" Z"))
            check(len(replies) == 8 and wins == 1 and zs == 7, f"one winner among 8 vivifying clients: {replies}")

        # Binary keys via b: 0x00, >= 0x80, prefix keys, a long key; back through k.
        keys = [b"\x00", b"\x00\x00", b"\xff\x80", b"\xff\x80\x00", bytes(range(256))[:180], b"sp ace\r\n"]
        for i, k in enumerate(keys):
            e = base64.b64encode(k)
            got = talk(p, b"ms %s 2 b\r\nb%d\r\nmg %s b k v\r\n" % (e, i, e))
            check(got == b"HD\r\nVA 2 k%s b\r\nb%d\r\n" % (e, i), f"binary key {k[:8]!r}: {got!r}")
        check(talk(p, b"mg !!!! b v\r\n") == b"CLIENT_ERROR error decoding key\r\n", "bad base64")

        # Stale (md I) and the recache token survive a restart (state bits in the record).
        check(talk(p, b"ms st 3\r\nold\r\nmd st I\r\nmg st v\r\n") == b"HD\r\nHD\r\nVA 3 X W\r\nold\r\n",
              "md I marks stale; the first reader wins")
        check(talk(p, b"mg viv N60 s\r\n") == b"HD s0 W\r\n", "N vivifies and wins")
    finally:
        srv.stop()
    srv = Server(args.wort, args.pool)
    try:
        p = srv.port
        check(talk(p, b"mg st v\r\n") == b"VA 3 Z X\r\nold\r\n", "stale + token sent after a restart")
        check(talk(p, b"mg viv s\r\n") == b"HD s0 Z\r\n", "vivified stub after a restart")
        e = base64.b64encode(keys[4])
        check(talk(p, b"mg %s b v\r\n" % e) == b"VA 2\r\nb4\r\n", "binary key after a restart")
        check(talk(p, b"mg q998 v\r\n") == b"VA 4\r\nv998\r\n", "quiet set after a restart")
    finally:
        srv.stop()
    meta_kill(args)


def recv_meta(sock):
    """One meta reply: a line, plus its data line after VA (values here hold no CR LF)."""
    buf = recv_until(sock, b"\r\n")
    while buf.startswith(b"VA") and buf.count(b"\r\n") < 2:
        buf += recv_until(sock, b"\r\n")
    return buf


def meta_kill(args):
    """SIGKILL during a load of ms / ma / md I on binary keys: after the restart every
    acknowledged value and stale mark is there (the request in flight may be old or new), and
    `wort pool check` finds no leaked or lost block."""
    import base64
    srv = Server(args.wort, args.pool)
    acked = {}  # base64 key -> (value, stale)
    state = {"inflight": None, "acks": 0}
    stop = threading.Event()

    def load():
        rng = random.Random(5)
        try:
            s = srv.raw()
            i = 0
            while not stop.is_set() and i < 200000:
                i += 1
                k = base64.b64encode(bytes([0, 0x80 + rng.randrange(64), rng.randrange(256)]))
                state["inflight"] = k
                op = rng.random()
                if op < 0.6:
                    v = b"%d" % i
                    s.sendall(b"ms %s %d b T0\r\n%s\r\n" % (k, len(v), v))
                    if recv_until(s, b"\r\n") != b"HD\r\n":
                        raise RuntimeError("ms")
                    acked[k] = (v, False)
                elif op < 0.8:
                    s.sendall(b"ma %s b N0 J0 v\r\n" % k)
                    r = recv_meta(s)
                    v = r.split(b"\r\n")[1]
                    acked[k] = (v, acked.get(k, (b"", False))[1])
                else:
                    s.sendall(b"md %s b I\r\n" % k)
                    r = recv_until(s, b"\r\n")
                    if r == b"HD\r\n":
                        acked[k] = (acked[k][0], True)
                state["inflight"] = None
                state["acks"] += 1
        except (ConnectionError, OSError):
            pass  # the kill
        except Exception as e:  # noqa: BLE001 - reported as a failure
            check(False, f"meta load: {e!r}")

    try:
        t = threading.Thread(target=load)
        t.start()
        time.sleep(1.5)
        print(f"meta load: {state['acks']} acknowledged before the kill", flush=True)
        srv.kill9()
        stop.set()
        t.join(30)
        srv = Server(args.wort, args.pool)
        check(any("unclean shutdown" in l for l in srv.log), f"meta restart after kill: {srv.log}")
        bad = 0
        s = srv.raw()
        for k, (v, stale) in acked.items():
            if k == state["inflight"]:
                continue
            s.sendall(b"mg %s b v\r\n" % k)
            r = recv_meta(s)
            head, _, rest = r.partition(b"\r\n")
            ok = head.startswith(b"VA") and rest == v + b"\r\n" and ((b" X" in head) == stale)
            if not ok:
                bad += 1
                if bad <= 3:
                    print(f"meta key {k!r}: got {r!r} want {v!r} stale={stale}")
        s.close()
        print(f"meta load: {len(acked)} keys read back after the kill, "
              f"{sum(1 for v in acked.values() if v[1])} of them stale", flush=True)
        check(state["acks"] > 200, f"enough meta load before the kill ({state['acks']})")
        check(bad == 0, f"{bad} of {len(acked)} meta keys lost or wrong after SIGKILL")
        deadline = time.time() + 60
        while time.time() < deadline and not any("recovery finished" in l for l in srv.log):
            time.sleep(0.1)
    finally:
        srv.stop()
    r = subprocess.run([args.wort, "pool", "check", args.pool], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"wort pool check after the meta kill: {r.stdout[-500:]} {r.stderr[-500:]}")


def main():
    global VERSION_REPLY
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["clients", "kill", "oom", "unordered", "meta", "evict", "killevict", "loadgen"])
    ap.add_argument("--wort", required=True)
    ap.add_argument("--pool", required=True)
    ap.add_argument("--index", default="", help="index kind (default: the server's)")
    ap.add_argument("--binary", action="store_true", help="the binary twin: clients speak the binary protocol")
    args = ap.parse_args()
    ver = subprocess.run([args.wort, "--version"], capture_output=True, text=True, timeout=30).stdout.split()
    if len(ver) == 2 and ver[0] == "wort":
        VERSION_REPLY = b"1.6.18-wort-" + ver[1].encode()
    global BINARY
    BINARY = args.binary
    Server.index = args.index
    {"clients": mode_clients, "kill": mode_kill, "oom": mode_oom, "unordered": mode_unordered,
     "meta": mode_meta, "evict": mode_evict, "killevict": mode_killevict, "loadgen": mode_loadgen}[args.mode](args)
    print(f"{args.mode}{' (binary)' if BINARY else ''}: {len(FAILURES)} failures", flush=True)
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
