"""Batches of the Python package (Store.batch(): all-or-nothing puts and deletes) and the
corruption error of a value whose bytes were changed in the pool file."""

import os

import pytest

import wort

DIR = os.environ.get("WORT_TEST_DIR", "/dev/shm")




def test_batch_context_manager(path):
    with wort.open(path, kind="woart", size="64M") as db:
        db[b"gone"] = b"x"
        with db.batch() as b:
            b.put(b"\x80a", b"1")
            b.put(b"\x00", b"0")
            b.put(b"\x00", b"2")  # the last operation of a key counts
            b.delete(b"gone")
            b.delete(b"never")  # no error
            assert len(b) == 5
            assert b"\x80a" not in db  # nothing before the block ends
        assert db[b"\x80a"] == b"1" and db[b"\x00"] == b"2" and b"gone" not in db and len(db) == 2
    with wort.open(path, kind="woart", size="64M") as db:  # durable
        assert dict(db.items()) == {b"\x00": b"2", b"\x80a": b"1"}


def test_batch_exception_discards(path):
    with wort.open(path, kind="woart", size="64M") as db:
        with pytest.raises(RuntimeError):
            with db.batch() as b:
                b.put(b"k", b"v")
                raise RuntimeError("changed my mind")
        assert b"k" not in db and len(db) == 0


def test_batch_errors_change_nothing(path):
    with wort.open(path, kind="cceh", size="64M") as db:
        db[b"keep"] = b"v"
        with pytest.raises(wort.InvalidArgumentError):
            with db.batch() as b:
                b.put(b"ok", b"1")
                b.put(b"k" * (wort.MAX_KEY_LEN + 1), b"too long")
        assert b"ok" not in db and len(db) == 1
        with pytest.raises(TypeError):
            db.batch().put("text", b"v")
        # write() applies what was collected and empties the batch; it is reusable.
        b = db.batch()
        b[b"a"] = b"1"
        b.write()
        assert len(b) == 0 and db[b"a"] == b"1"
        del b[b"a"]
        b.write()
        assert b"a" not in db


def test_batch_limit_is_exported():
    assert wort.Batch.MAX_OPS == 1 << 20 and wort.Batch.MAX_BYTES == 1 << 30


def test_flipped_value_bit_is_a_corruption_error(path):
    value = b"\xab" * 300
    with wort.open(path, kind="woart", size="64M") as db:
        db[b"k"] = value
    data = bytearray(open(path, "rb").read())
    at = data.find(value)
    assert at > 0
    data[at + 150] ^= 0x10
    with open(path, "r+b") as f:
        f.seek(at + 150)
        f.write(bytes([data[at + 150]]))
    with wort.open(path, kind="woart", size="64M") as db:
        with pytest.raises(wort.CorruptionError, match="checksum"):
            db[b"k"]
