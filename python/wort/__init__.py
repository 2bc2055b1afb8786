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

A Store is a collections.abc.MutableMapping: get(k, default), pop, popitem, setdefault,
update, clear, `in`, len() and keys()/values()/items() views (which also take a key range:
items(start=b"a", end=b"b")). Ordered kinds iterate in ascending byte order; hash kinds
(capabilities()["ordered"] is False) iterate in no particular order and refuse a key range.

Errors: a missing key is KeyError (db[k], del db[k]); bad arguments (a key too long, an
unknown kind) are ValueError; a failing system call is OSError with errno set, as Python's own
subclass: a missing pool file or directory is FileNotFoundError (errno.ENOENT), no permission is
PermissionError (errno.EACCES or EPERM), a directory given as the pool IsADirectoryError. Each is also a wort.Error (FileNotFoundError is
MissingFileError, also a NotFoundError; PermissionError is PermissionDeniedError, also a
WortOSError), as are PoolFullError, CorruptionError, BusyError (an OSError: the pool is open for
writing in another process) and NotSupportedError (a NotImplementedError).
"""

from __future__ import annotations

import collections.abc
import errno as _errno
import os as _os
import re
from typing import Iterable, Iterator, Mapping, Optional, Tuple, Union

from . import _wort

__all__ = [
    "open", "kinds", "Store", "Batch", "Error", "NotFoundError", "InvalidArgumentError", "PoolFullError",
    "CorruptionError", "WortOSError", "NotSupportedError", "BusyError", "AlreadyExistsError",
    "MissingFileError", "PermissionDeniedError",
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
    """The store's kind does not offer this (e.g. a key range, items(start=...), of a hash kind)."""


class BusyError(Error, OSError):
    """The pool is open for writing by another process."""


class MissingFileError(FileNotFoundError, NotFoundError):
    """The pool file, or the directory it should be created in, does not exist (errno.ENOENT)."""

    __str__ = OSError.__str__


class PermissionDeniedError(PermissionError, WortOSError):
    """The pool file or its directory may not be read or written (errno.EACCES or EPERM)."""


# wort::Code values (wort/status.h) -> classes.
_CLASSES = {
    1: NotFoundError, 2: AlreadyExistsError, 3: InvalidArgumentError, 4: PoolFullError,
    5: CorruptionError, 6: WortOSError, 7: NotSupportedError, 8: BusyError,
}
# The errnos a failed system call may report; the C++ message carries strerror(errno) (the same
# C library's text as os.strerror), or, for a missing file, one of wort's own phrasings.
_ERRNOS = [getattr(_errno, n) for n in (
    "ENOENT", "EACCES", "EPERM", "EROFS", "ENOSPC", "EDQUOT", "EEXIST", "ENOTDIR", "EISDIR", "EBUSY", "EAGAIN",
    "ENOMEM", "EFBIG", "EMFILE", "ENFILE", "ENODEV", "EINVAL", "EIO", "ELOOP", "ENAMETOOLONG", "ETXTBSY",
    "EOVERFLOW") if hasattr(_errno, n)]
_MISSING_FILE = re.compile(r"no such pool file|no pool at |directory .* does not exist")


def _errno_of(code: int, message: str) -> Optional[int]:
    if code == 1:  # NotFound: a file only when the message says so (else a key, a store, a root)
        return _errno.ENOENT if _MISSING_FILE.search(message) else None
    if code not in (6, 8):  # IOError, Busy
        return None
    for e in _ERRNOS:
        if _os.strerror(e) in message:
            return e
    return _errno.EBUSY if code == 8 else None


_OS_CLASSES: dict = {}


def _os_class(e: int, cls: type) -> type:
    """cls, or for an errno that Python maps to an OSError subclass (IsADirectoryError,
    BlockingIOError...) a class that is both."""
    builtin = type(OSError(e, ""))
    if builtin is OSError or issubclass(cls, builtin):
        return cls
    key = (builtin, cls)
    if key not in _OS_CLASSES:
        _OS_CLASSES[key] = type(builtin.__name__, (builtin, cls), {"__module__": __name__})
    return _OS_CLASSES[key]


def _error(code: int, message: str) -> BaseException:
    """The exception for a wort::Status (called by the extension)."""
    e = _errno_of(code, message)
    if e == _errno.ENOENT and code in (1, 6):
        return MissingFileError(e, message)
    if e in (_errno.EACCES, _errno.EPERM) and code == 6:
        return PermissionDeniedError(e, message)
    cls = _CLASSES.get(code, Error)
    if e is not None and issubclass(cls, OSError):
        return _os_class(e, cls)(e, message)
    return cls(message)


_wort._set_error_factory(_error)

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


def open(path: str, kind: Optional[str] = None, size: Union[int, str, None] = None, *, name: str = "kv",
         key_type: str = "bytes", sync: str = "persist", create: bool = True,
         read_only: bool = False) -> "Store":
    """Opens the store `name` of the pool file at `path`, creating the pool and the store when
    they are absent (unless create=False: then NotFoundError).

    kind      index kind of a new store (wort.kinds()); an existing store must be of this kind,
              or pass kind="" to open whatever it is.
    size      the pool's size limit: bytes, or "64M", "1G", "2GiB"...; None: none (the file
              starts at about 1 MiB and grows as the disk allows, up to 1 TiB). Opening with
              another size replaces the limit, so a store can grow past its first size.
    key_type  "bytes" (0..MAX_KEY_LEN bytes) or "u64" (exactly 8 bytes, big-endian integers).
    sync      "persist" (flush + fence per write, the default) or "msync" (also msync the file:
              power-fail durable on any filesystem, slow).
    read_only open an existing store without writing to the pool: beside one process that has
              it open for writing (LMDB's model: that process's acknowledged writes are seen,
              never a torn value), or on a file this process cannot write. put/del raise
              InvalidArgumentError. kind defaults to "" (any) here, "woart" otherwise.
    """
    if not isinstance(path, str):
        path = _os.fspath(path)
    try:
        if kind is None:
            kind = "" if read_only else "woart"
        return Store(_wort.open(path, kind, 0 if size is None else _parse_size(size), name, key_type, sync,
                                create and not read_only, read_only))
    except OSError as e:
        if e.errno is not None and e.filename is None:
            e.filename = path
        raise


def _key(key: object) -> bytes:
    if isinstance(key, bytes):
        return key
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    raise TypeError(f"keys and values are bytes, not {type(key).__name__}")


_MISSING = object()


class Store(collections.abc.MutableMapping):
    """A persistent dict of bytes -> bytes (a collections.abc.MutableMapping). Use as a context
    manager, or call close()."""

    _BATCH = 256  # pairs fetched per call while iterating (the store's lock is not held between)

    def __init__(self, impl: "_wort.Store") -> None:
        self._impl: Optional[_wort.Store] = impl
        self._ordered: bool = bool(impl.capabilities()["ordered"])

    def _s(self) -> "_wort.Store":
        if self._impl is None:
            raise InvalidArgumentError("the store is closed")
        return self._impl

    # ---- mapping protocol -------------------------------------------------------------------
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
        if not isinstance(key, (bytes, bytearray, memoryview)):
            return False  # as a dict answers for a key of another type
        return self._s().exists(bytes(key))

    def __len__(self) -> int:
        return self._s().count()

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.keys())

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

    def pop(self, key: bytes, default: object = _MISSING) -> object:
        """Removes key and returns its value; default (or KeyError) when absent. The read and
        the removal are two operations: a writer of the same key in between may be overwritten
        (not a lost write: its value is what pop returns, or it lands after the removal)."""
        s = self._s()
        k = _key(key)
        v = s.get(k)
        if v is None or not s.remove(k):
            if default is _MISSING:
                raise NotFoundError(key)
            return default
        return v

    def popitem(self) -> Tuple[bytes, bytes]:
        """Removes and returns a pair: the smallest key's of an ordered kind, any of a hash
        kind. KeyError when the store is empty."""
        for k, v in self._pairs(None, None, 1):
            if self._s().remove(k):
                return k, v
        raise NotFoundError("popitem(): the store is empty")

    def setdefault(self, key: bytes, default: Optional[bytes] = None) -> bytes:  # type: ignore[override]
        """The value of key; when absent, stores default (bytes: a store holds no None) and
        returns it."""
        k = _key(key)
        v = self._s().get(k)
        if v is not None:
            return v
        if default is None:
            raise TypeError("setdefault() of a wort store needs a bytes default (a store holds no None)")
        self._s().put(k, _key(default))
        return default

    def update(self, other: Union[Mapping[bytes, bytes], Iterable[Tuple[bytes, bytes]]] = (),  # type: ignore[override]
               **kwargs: bytes) -> None:
        """Puts every pair of a mapping or an iterable of (key, value) pairs (each put is
        failure-atomic by itself; the update as a whole is not). Keyword arguments are refused:
        their keys are str, a store's are bytes."""
        if kwargs:
            raise TypeError("update() takes no keyword arguments: a store's keys are bytes, not str")
        s = self._s()
        if isinstance(other, collections.abc.Mapping):
            pairs: Iterable = other.items()
        elif hasattr(other, "keys"):
            pairs = ((k, other[k]) for k in other.keys())  # type: ignore[index]
        else:
            pairs = other
        for pair in pairs:
            k, v = pair
            s.put(_key(k), _key(v))

    def clear(self) -> None:
        """Removes every key (one removal at a time: not atomic; keys written meanwhile may
        stay)."""
        s = self._s()
        while True:
            batch = [k for k, _ in self._pairs(None, None, self._BATCH)]
            if not batch:
                return
            for k in batch:
                s.remove(k)
            if len(batch) < self._BATCH:
                return

    def _pairs(self, start: Optional[bytes], end: Optional[bytes], limit: Optional[int] = None) -> Iterator[Tuple[bytes, bytes]]:
        s = self._s()
        if not self._ordered:
            if start is not None or end is not None:
                raise NotSupportedError(f"{s.capabilities()['kind']} is a hash kind: no key range (iterate the whole store)")
            pairs = s.items_unordered(limit if limit is not None else 0)
            yield from pairs
            return
        cur = b"" if start is None else _key(start)
        stop = None if end is None else _key(end)
        skip = False
        left = limit
        while True:
            n = self._BATCH if left is None else min(left, self._BATCH)
            batch = s.scan(cur, stop, n, skip)
            yield from batch
            if left is not None:
                left -= len(batch)
                if left <= 0:
                    return
            if len(batch) < n:
                return
            cur, skip = batch[-1][0], True

    def items(self, start: Optional[bytes] = None, end: Optional[bytes] = None) -> "ItemsView":  # type: ignore[override]
        """A view of the (key, value) pairs with start <= key < end, in ascending byte order
        (a hash kind: every pair, in no particular order; a range is NotSupportedError). Read
        in batches while iterating: a write made meanwhile may or may not be seen, but no pair
        is seen twice or torn."""
        return ItemsView(self, start, end)

    def keys(self, start: Optional[bytes] = None, end: Optional[bytes] = None) -> "KeysView":  # type: ignore[override]
        """A view of the keys (see items())."""
        return KeysView(self, start, end)

    def values(self, start: Optional[bytes] = None, end: Optional[bytes] = None) -> "ValuesView":  # type: ignore[override]
        """A view of the values, in key order (see items())."""
        return ValuesView(self, start, end)

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


class _RangeView:
    """What the three views share: the store and the key range [start, end)."""

    def __init__(self, store: Store, start: Optional[bytes] = None, end: Optional[bytes] = None) -> None:
        self._store = store
        self._start = None if start is None else _key(start)
        self._end = None if end is None else _key(end)

    def _whole(self) -> bool:
        return self._start is None and self._end is None

    def _in_range(self, key: bytes) -> bool:
        return (self._start is None or key >= self._start) and (self._end is None or key < self._end)

    def __len__(self) -> int:
        if self._whole():
            return len(self._store)
        return sum(1 for _ in self._store._pairs(self._start, self._end))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


class KeysView(_RangeView, collections.abc.KeysView):
    def __iter__(self) -> Iterator[bytes]:
        return (k for k, _ in self._store._pairs(self._start, self._end))

    def __contains__(self, key: object) -> bool:
        return isinstance(key, (bytes, bytearray, memoryview)) and self._in_range(bytes(key)) and key in self._store


class ItemsView(_RangeView, collections.abc.ItemsView):
    def __iter__(self) -> Iterator[Tuple[bytes, bytes]]:
        return self._store._pairs(self._start, self._end)

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, tuple) or len(item) != 2:
            return False
        k, v = item
        if not isinstance(k, (bytes, bytearray, memoryview)) or not self._in_range(bytes(k)):
            return False
        return self._store.get(bytes(k)) == v


class ValuesView(_RangeView, collections.abc.ValuesView):
    def __iter__(self) -> Iterator[bytes]:
        return (v for _, v in self._store._pairs(self._start, self._end))

    def __contains__(self, value: object) -> bool:
        return any(v == value for v in self)
