"""Each worker's persistent cache: one wort store in a pool file, size-bounded, LRU.

Keys in the store (bytes; ids are [A-Za-z0-9_.-]+ so '/' separates fields):

    i/<16 hex digits>/<decoder>               iCache: an input block (decoded) by its ring key
    o/<app>/<user>/m/<16 hex>/<params hash>   oCache: a map task's combined output for a block
    o/<app>/<user>/it/<000007>                oCache: the state after iteration 7 of a job
    o/<app>/<user>/s/<job>/<reducer>/<map>/<seq>  shuffle chunks spilled to the reducer
    o/<app>/<user>/s/<job>/out/<reducer>      a reducer's output (kept for a repeated job)
    o/<app>/<user>/j/<job>                    a job's map manifests (where its chunks are)
    p/<app>/<user>                            a pin: a running job needs o/<app>/<user>/...

Every value starts with a 16-byte header: expiry (float seconds since the epoch, 0 = never) and
the time of the write; the payload follows. The LRU order lives in memory and is rebuilt from
the write times when the pool is reopened (after a restart or a kill -9: every write that
returned is durable, wort's guarantee). Eviction removes the least recently used entries until
the payloads fit `capacity` bytes, skipping every key under a live pin: a running job's oCache
entries are never evicted (the cache may then exceed its capacity; `stats()['over']` counts it).
Expired entries are removed first.
"""

from __future__ import annotations

import os
import re
import struct
import threading
import time
from collections import OrderedDict
from typing import Dict, List, Optional

import wort

_HDR = struct.Struct("<dd")
_ID = re.compile(r"[A-Za-z0-9_.\-]+")


def check_id(what: str, value: str) -> str:
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise ValueError(f"{what} must be a non-empty string of letters, digits, '_', '.', '-': {value!r}")
    return value


def icache_key(ring_key: int, decoder: str = "raw") -> bytes:
    return b"i/%016x/" % ring_key + check_id("decoder", decoder).encode()


def ocache_prefix(app: str, user: str) -> bytes:
    return f"o/{check_id('app id', app)}/{check_id('user id', user)}/".encode()


class Cache:
    def __init__(self, path: str, capacity: int = 256 << 20, *, pool_size: Optional[int] = None,
                 kind: str = "woart", pin_lease: float = 6 * 3600.0):
        if capacity <= 0:
            raise ValueError(f"cache capacity must be positive, not {capacity}")
        self.path = path
        self.capacity = capacity
        self.pin_lease = pin_lease
        os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
        self.db = wort.open(path, kind, size=pool_size or (4 * capacity + (64 << 20)))
        self._lock = threading.RLock()
        self._lru: "OrderedDict[bytes, int]" = OrderedDict()
        self._used = 0
        self.hits = self.misses = self.evictions = self.over = 0
        entries = []
        for k, v in self.db.items():
            if k[:2] in (b"i/", b"o/"):
                exp, stamp = _HDR.unpack_from(v)
                entries.append((stamp, k, len(v) - _HDR.size))
        for _, k, n in sorted(entries):
            self._lru[k] = n
            self._used += n
        self.expire()

    # ---- entries ------------------------------------------------------------------------------
    def get(self, key: bytes) -> Optional[bytes]:
        with self._lock:
            v = self.db.get(key)
            if v is None:
                self.misses += 1
                return None
            exp, _ = _HDR.unpack_from(v)
            if exp and exp < time.time():
                self._drop(key)
                self.misses += 1
                return None
            if key in self._lru:
                self._lru.move_to_end(key)
            self.hits += 1
            return v[_HDR.size:]

    def put(self, key: bytes, payload: bytes, ttl: Optional[float] = None) -> None:
        if len(payload) + _HDR.size > wort.MAX_VALUE_LEN:
            raise ValueError(f"cache entry {key!r} of {len(payload)} bytes exceeds wort's value limit "
                             f"({wort.MAX_VALUE_LEN - _HDR.size}); use smaller blocks")
        now = time.time()
        with self._lock:
            self.db[key] = _HDR.pack(now + ttl if ttl else 0.0, now) + payload
            if key in self._lru:
                self._used -= self._lru.pop(key)
            self._lru[key] = len(payload)
            self._used += len(payload)
            self._evict()

    def delete(self, key: bytes) -> bool:
        with self._lock:
            return self._drop(key)

    def delete_prefix(self, prefix: bytes) -> int:
        with self._lock:
            keys = list(self.db.keys(prefix, _prefix_end(prefix)))
            for k in keys:
                self._drop(k)
            return len(keys)

    def keys(self, prefix: bytes) -> List[bytes]:
        with self._lock:
            return list(self.db.keys(prefix, _prefix_end(prefix)))

    def __contains__(self, key: bytes) -> bool:
        return self.get(key) is not None

    # ---- pins ---------------------------------------------------------------------------------
    def pin(self, app: str, user: str) -> None:
        """A running job needs o/<app>/<user>/...: never evict it until unpin (or the lease ends:
        a pin outlives a driver that died by at most pin_lease seconds)."""
        with self._lock:
            self.db[b"p/" + ocache_prefix(app, user)[2:]] = struct.pack("<d", time.time() + self.pin_lease)

    def unpin(self, app: str, user: str) -> None:
        with self._lock:
            self.db.remove(b"p/" + ocache_prefix(app, user)[2:])

    def _pins(self) -> List[bytes]:
        now = time.time()
        out = []
        for k, v in self.db.items(b"p/", b"p0"):
            if struct.unpack("<d", v)[0] > now:
                out.append(b"o/" + k[2:])
        return out

    # ---- housekeeping ---------------------------------------------------------------------------
    def _drop(self, key: bytes) -> bool:
        n = self._lru.pop(key, None)
        if n is not None:
            self._used -= n
        return self.db.remove(key)

    def expire(self) -> int:
        now = time.time()
        with self._lock:
            dead = []
            for k in list(self._lru):
                v = self.db.get(k)
                if v is None:
                    dead.append(k)
                    continue
                exp, _ = _HDR.unpack_from(v)
                if exp and exp < now:
                    dead.append(k)
            for k in dead:
                self._drop(k)
            return len(dead)

    def _evict(self) -> None:
        if self._used <= self.capacity:
            return
        self.expire()
        pins = self._pins()
        for k in list(self._lru):
            if self._used <= self.capacity:
                return
            if any(k.startswith(p) for p in pins):
                continue
            self._drop(k)
            self.evictions += 1
        if self._used > self.capacity:
            self.over += 1

    def stats(self) -> Dict[str, int]:
        with self._lock:
            return {"entries": len(self._lru), "bytes": self._used, "capacity": self.capacity,
                    "hits": self.hits, "misses": self.misses, "evictions": self.evictions, "over": self.over}

    def close(self) -> None:
        with self._lock:
            self.db.close()


class ObjectMemo:
    """Decoded iCache blocks kept in the worker's memory in front of its pool, so that the
    later iterations of an iterative job neither read nor unpickle their blocks again. Bounded
    by `capacity` bytes (each object counted by the size of its pickle), LRU. A map task gets the
    same object every time: applications must not modify their input (the tests check it for
    the applications here). capacity 0 keeps nothing."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._d: "OrderedDict[bytes, tuple]" = OrderedDict()
        self._used = 0
        self._lock = threading.Lock()
        self.hits = 0

    def get(self, key: bytes):
        with self._lock:
            e = self._d.get(key)
            if e is None:
                return None
            self._d.move_to_end(key)
            self.hits += 1
            return e[0]

    def put(self, key: bytes, obj, nbytes: int) -> None:
        if nbytes > self.capacity:
            return
        with self._lock:
            old = self._d.pop(key, None)
            if old is not None:
                self._used -= old[1]
            self._d[key] = (obj, nbytes)
            self._used += nbytes
            while self._used > self.capacity:
                _, (_, n) = self._d.popitem(last=False)
                self._used -= n

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
            self._used = 0

    def __len__(self) -> int:
        return len(self._d)


def _prefix_end(prefix: bytes) -> bytes:
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return b"\xff" * 8
    p[-1] += 1
    return bytes(p)


def parse_size(s) -> int:
    return wort._parse_size(s)

