"""wort: persistent-memory key-value stores (radix trees, B-trees, hash tables) in a pool file.

    import wort
    with wort.open("/dev/shm/data.pool", kind="woart", size="1G") as db:
        db[b"k"] = b"v"
        assert db[b"k"] == b"v" and b"k" in db and len(db) == 1
        for key, value in db.items(start=b"a", end=b"z"):
            ...

Keys and values are bytes. A write that returned is durable: it survives a crash of the
process at any instant (and a power failure on a DAX filesystem, or with sync="msync"). The
store is the C++ API of wort/kv.h; the GIL is released while the store works, so threads
run their operations in parallel (readers never wait; writers of different keys run in parallel
where the kind allows it: capabilities()["parallel_writes"]).

Errors: a missing key is KeyError (db[k], del db[k]); bad arguments (a key too long, an
unknown kind) are ValueError; a failing system call is OSError. Each is also a wort.Error, as
are PoolFullError, CorruptionError, BusyError (an OSError: the pool is open for writing in
another process) and NotSupportedError (a NotImplementedError: scans of a hash kind).
"""

from __future__ import annotations

import re
from typing import Iterator, Optional, Tuple, Union

from . import _wort

__all__ = [
    "open", "kinds", "Store", "Batch", "Error", "NotFoundError", "InvalidArgumentError", "PoolFullError",
    "CorruptionError", "WortOSError", "NotSupportedError", "BusyError", "AlreadyExistsError",
    "MAX_KEY_LEN", "MAX_VALUE_LEN", "__version__",
]

# wort's one version (CMakeLists.txt's project()): the library's wort::Version(), as
# `wort --version` prints it, and this package's version.
__version__: str = _wort.VERSION

MAX_KEY_LEN: int = _wort.MAX_KEY_LEN
MAX_VALUE_LEN: int = _wort.MAX_VALUE_LEN


class Error(Exception):
    """Base class of every error wort raises (the C++ Status codes)."""


class NotFoundError(Error, KeyError):
    """The key, store or pool does not exist."""

    def __str__(self) -> str:  # KeyError quotes its argument; a message reads better plain
        return Exception.__str__(self)


class AlreadyExistsError(Error):
    """The pool or store exists already."""


class InvalidArgumentError(Error, ValueError):
    """A bad argument: a key or value too long, an unknown kind, a wrong key type."""


class PoolFullError(Error):
    """The pool has no space left (and may not grow further); nothing was changed."""


class CorruptionError(Error):
    """The file is not a pool, or a checksum or an invariant is broken."""


class WortOSError(Error, OSError):
    """A system call failed (open, mmap, ftruncate...)."""


class NotSupportedError(Error, NotImplementedError):
    """The store's kind does not offer this (e.g. items() of a hash kind)."""


class BusyError(Error, OSError):
    """The pool is open for writing by another process."""


# wort::Code values (wort/status.h) -> classes.
_wort._set_errors({
    1: NotFoundError, 2: AlreadyExistsError, 3: InvalidArgumentError, 4: PoolFullError,
    5: CorruptionError, 6: WortOSError, 7: NotSupportedError, 8: BusyError,
})

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _parse_size(size: Union[int, str]) -> int:
    if isinstance(size, int) and not isinstance(size, bool):
        if size <= 0:
            raise InvalidArgumentError(f"size must be positive, not {size}")
        return size
    if isinstance(size, str):
        m = re.fullmatch(r"\s*(\d+)\s*([kKmMgGtT]?)(i?[bB])?\s*", size)
        if m:
            return int(m.group(1)) * _UNITS[m.group(2).lower()]
    raise InvalidArgumentError(f"size must be a number of bytes or a string like '1G', not {size!r}")


def kinds() -> list[str]:
    """The index kinds a store can use (e.g. 'woart', 'wort', 'fastfair', 'cceh')."""
    return list(_wort.kinds())


def open(path: str, kind: str = "woart", size: Union[int, str] = "1G", *, name: str = "kv",
         key_type: str = "bytes", sync: str = "persist", create: bool = True) -> "Store":
    """Opens the store `name` of the pool file at `path`, creating the pool and the store when
    they are absent (unless create=False: then NotFoundError).

    kind      index kind of a new store (wort.kinds()); an existing store must be of this kind,
              or pass kind="" to open whatever it is.
    size      the pool's maximum size when it is created: bytes, or "64M", "1G", "2GiB"...
    key_type  "bytes" (0..MAX_KEY_LEN bytes) or "u64" (exactly 8 bytes, big-endian integers).
    sync      "persist" (flush + fence per write, the default) or "msync" (also msync the file:
              power-fail durable on any filesystem, slow).
    """
    if not isinstance(path, str):
        path = __import__("os").fspath(path)
    return Store(_wort.open(path, kind, _parse_size(size), name, key_type, sync, create))


def _key(key: object) -> bytes:
    if isinstance(key, bytes):
        return key
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    raise TypeError(f"keys and values are bytes, not {type(key).__name__}")


class Store:
    """A persistent dict of bytes -> bytes. Use as a context manager, or call close()."""

    _BATCH = 256  # pairs fetched per call while iterating (the store's lock is not held between)

    def __init__(self, impl: "_wort.Store") -> None:
        self._impl: Optional[_wort.Store] = impl

    def _s(self) -> "_wort.Store":
        if self._impl is None:
            raise InvalidArgumentError("the store is closed")
        return self._impl

    # ---- dict protocol ----------------------------------------------------------------------
    def __getitem__(self, key: bytes) -> bytes:
        v = self._s().get(_key(key))
        if v is None:
            raise NotFoundError(key)
        return v

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self._s().put(_key(key), _key(value))

    def __delitem__(self, key: bytes) -> None:
        if not self._s().remove(_key(key)):
            raise NotFoundError(key)

    def __contains__(self, key: object) -> bool:
        return self._s().exists(_key(key))

    def __len__(self) -> int:
        return self._s().count()

    def __iter__(self) -> Iterator[bytes]:
        return self.keys()

    def get(self, key: bytes, default: Optional[bytes] = None) -> Optional[bytes]:
        """The value of key, or default when absent."""
        v = self._s().get(_key(key))
        return default if v is None else v

    def put(self, key: bytes, value: bytes) -> None:
        """Sets key to value (insert or overwrite, failure-atomic; durable when it returns)."""
        self._s().put(_key(key), _key(value))

    def remove(self, key: bytes) -> bool:
        """Removes key; returns whether it was present."""
        return self._s().remove(_key(key))

    def items(self, start: Optional[bytes] = None, end: Optional[bytes] = None) -> Iterator[Tuple[bytes, bytes]]:
        """(key, value) pairs with start <= key < end in ascending byte order (ordered kinds
        only: NotSupportedError for hash kinds). Fetched in batches: a write made while
        iterating may or may not be seen, but no pair is seen twice or torn."""
        s = self._s()
        cur = b"" if start is None else _key(start)
        stop = None if end is None else _key(end)
        skip = False
        while True:
            batch = s.scan(cur, stop, self._BATCH, skip)
            yield from batch
            if len(batch) < self._BATCH:
                return
            cur, skip = batch[-1][0], True

    def keys(self, start: Optional[bytes] = None, end: Optional[bytes] = None) -> Iterator[bytes]:
        """Keys in ascending order (see items())."""
        return (k for k, _ in self.items(start, end))

    def values(self, start: Optional[bytes] = None, end: Optional[bytes] = None) -> Iterator[bytes]:
        """Values in ascending key order (see items())."""
        return (v for _, v in self.items(start, end))

    # ---- batches ----------------------------------------------------------------------------
    def batch(self) -> "Batch":
        """A batch of puts and deletes applied all-or-nothing, failure-atomically, when its
        `with` block ends without an exception (or at write()); an exception discards it:

            with store.batch() as b:
                b.put(b"k1", b"v1")
                b.delete(b"k2")

        The last operation of a key counts; deleting an absent key is no error."""
        return Batch(self)

    # ---- information ------------------------------------------------------------------------
    def capabilities(self) -> dict:
        """What this store offers: kind, description, ordered, thread_safe, parallel_writes,
        key_type, max_key_len, max_value_len, durability ("power-fail", "file-sync", "process-crash" or "tmpfs": the pool's level),
        sync."""
        return self._s().capabilities()

    @staticmethod
    def kinds() -> list[str]:
        """The index kinds a store can use (as wort.kinds())."""
        return kinds()

    # ---- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        """Closes the pool cleanly (a later reopen scans nothing). Idempotent."""
        if self._impl is not None:
            impl, self._impl = self._impl, None
            impl.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._impl is None:
            return "<wort.Store (closed)>"
        return f"<wort.Store kind={self._impl.capabilities()['kind']}>"


class Batch:
    """Puts and deletes collected in memory and applied to a Store at once (Store.batch())."""

    MAX_OPS = _wort.MAX_BATCH_OPS
    MAX_BYTES = _wort.MAX_BATCH_BYTES

    def __init__(self, store: Store) -> None:
        self._store = store
        self._ops: list[Tuple[bytes, Optional[bytes]]] = []

    def put(self, key: bytes, value: bytes) -> None:
        self._ops.append((_key(key), _key(value)))

    def delete(self, key: bytes) -> None:
        self._ops.append((_key(key), None))

    remove = delete
    __setitem__ = put
    __delitem__ = delete

    def __len__(self) -> int:
        return len(self._ops)

    def write(self) -> None:
        """Applies the operations collected so far (all or none of them) and empties the batch."""
        ops, self._ops = self._ops, []
        self._store._s().write(ops)

    def clear(self) -> None:
        self._ops = []

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.write()
        else:
            self._ops = []
