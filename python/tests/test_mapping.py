"""wort.Store as a collections.abc.MutableMapping (update, pop, popitem, setdefault, clear, get
with a default, keys/values/items views, `in`, len), iteration of hash kinds in no particular
order, and errors that are Python's own OSError subclasses with errno set."""

import collections.abc
import errno
import os
import random
import stat

import pytest

import wort

DIR = os.environ.get("WORT_TEST_DIR", "/dev/shm")




def rand_bytes(rng, n):
    return bytes(rng.randrange(256) for _ in range(n))


@pytest.mark.parametrize("kind", ["woart", "cceh"])
def test_mutable_mapping(path, kind):
    with wort.open(path, kind=kind, size="64M") as db:
        assert isinstance(db, collections.abc.MutableMapping)
        model = {b"a": b"1", b"\x00": b"", b"\xff\x80": b"x" * 3000}
        db.update(model)
        db.update([(b"b", b"2"), (bytearray(b"c"), memoryview(b"3"))])
        model.update({b"b": b"2", b"c": b"3"})
        with pytest.raises(TypeError):
            db.update(k=b"v")  # keys are bytes
        assert dict(db) == model and db == model and len(db) == len(model)
        # get with a default, in
        assert db.get(b"a") == b"1" and db.get(b"zz") is None and db.get(b"zz", b"d") == b"d"
        assert b"a" in db and b"zz" not in db and "a" not in db and 5 not in db
        # pop
        assert db.pop(b"a") == b"1" and b"a" not in db
        assert db.pop(b"a", b"gone") == b"gone" and db.pop(b"a", None) is None
        with pytest.raises(KeyError):
            db.pop(b"a")
        del model[b"a"]
        # setdefault
        assert db.setdefault(b"b", b"other") == b"2"
        assert db.setdefault(b"new", b"n") == b"n" and db[b"new"] == b"n"
        model[b"new"] = b"n"
        with pytest.raises(TypeError):
            db.setdefault(b"absent")  # a store holds no None
        assert b"absent" not in db
        # views
        keys, values, items = db.keys(), db.values(), db.items()
        assert isinstance(keys, collections.abc.KeysView) and isinstance(items, collections.abc.ItemsView)
        assert isinstance(values, collections.abc.ValuesView)
        assert len(keys) == len(values) == len(items) == len(model)
        assert b"b" in keys and b"zz" not in keys
        assert (b"b", b"2") in items and (b"b", b"3") not in items and (b"zz", b"2") not in items
        assert b"x" * 3000 in values and b"nope" not in values
        assert set(keys) == set(model) and sorted(values) == sorted(model.values())
        assert keys & {b"b", b"q"} == {b"b"}  # the Set operations of a KeysView
        db[b"late"] = b"L"  # a view is live
        model[b"late"] = b"L"
        assert len(keys) == len(model) and b"late" in keys
        if db.capabilities()["ordered"]:
            assert list(keys) == sorted(model)
            assert list(db.keys(start=b"b", end=b"new")) == [b"b", b"c", b"late"]
            assert len(db.items(start=b"b", end=b"new")) == 3
            assert b"\x00" not in db.keys(start=b"b") and b"c" in db.keys(start=b"b")
            assert db.popitem() == (b"\x00", b"")
            del model[b"\x00"]
        else:
            k, v = db.popitem()
            assert model.pop(k) == v
        assert dict(db.items()) == model
        db.clear()
        assert len(db) == 0 and list(db) == []
        with pytest.raises(KeyError):
            db.popitem()


@pytest.mark.parametrize("kind", [k for k in wort.kinds() if k in ("cceh", "cceh-cow", "linp", "cuck", "bch", "levl", "path")])
@pytest.mark.parametrize("key_type", ["bytes", "u64"])
def test_hash_kinds_iterate_unordered(path, kind, key_type):
    rng = random.Random(3)
    model = {}
    with wort.open(path, kind=kind, size="64M", key_type=key_type) as db:
        assert db.capabilities()["ordered"] is False
        for i in range(3000):
            k = rng.getrandbits(64).to_bytes(8, "big") if key_type == "u64" else rand_bytes(rng, rng.randrange(0, 24))
            model[k] = rand_bytes(rng, rng.randrange(0, 40))
        if key_type == "u64":
            model.update({bytes(8): b"zero", b"\xff" * 8: b"max", (1).to_bytes(8, "big"): b"one"})
        db.update(model)
        for k in list(model)[::7]:
            del db[k]
            del model[k]
        got = list(db.items())
        assert len(got) == len(model) == len(db), "every pair once"
        assert dict(got) == model
        assert set(db) == set(model) and sorted(db.values()) == sorted(model.values())
        with pytest.raises(wort.NotSupportedError):
            list(db.keys(start=b"a"))
        with pytest.raises(NotImplementedError):
            list(db.items(end=b"b"))
    with wort.open(path, kind="", key_type=key_type) as db:  # reopened
        assert dict(db.items()) == model


def test_missing_file_and_directory_are_file_not_found(path):
    missing_dir = os.path.join(DIR, f"wort-pytest-no-such-dir-{os.getpid()}", "x.pool")
    for p, kw in ((missing_dir, {}), (path, {"create": False})):
        with pytest.raises(FileNotFoundError) as e:
            wort.open(p, **kw)
        err = e.value
        assert err.errno == errno.ENOENT and err.filename == p, (err.errno, err.filename)
        # still the classes wort raised before
        assert isinstance(err, wort.NotFoundError) and isinstance(err, KeyError) and isinstance(err, wort.Error)
        assert isinstance(err, wort.MissingFileError)
        assert "does not exist" in str(err) or "no pool" in str(err) or "no such pool file" in str(err), str(err)
    # a missing store in an existing pool is no file error
    wort.open(path, size="64M").close()
    with pytest.raises(KeyError) as e:
        wort.open(path, name="other", create=False)
    assert not isinstance(e.value, OSError)


def permission_denied_path(tmpdir):
    """A path whose creation Python itself refuses with PermissionError here: in a directory
    without write permission (a non-root user), or under /sys (root too: sysfs refuses)."""
    locked = os.path.join(tmpdir, "locked")
    os.mkdir(locked)
    os.chmod(locked, stat.S_IRUSR | stat.S_IXUSR)
    for p in (os.path.join(locked, "x.pool"), f"/sys/wort-pytest-{os.getpid()}.pool"):
        try:
            with open(p, "xb"):
                pass
            os.unlink(p)
        except PermissionError as e:
            return p, e.errno
        except OSError:
            continue
    pytest.fail("no path here refuses creation with PermissionError (neither a read-only directory nor /sys)")


def test_permission_is_permission_error(tmp_path):
    p, want = permission_denied_path(str(tmp_path))
    try:
        with pytest.raises(PermissionError) as e:
            wort.open(p, size="64M")
        err = e.value
        assert err.errno == want and err.filename == p
        assert isinstance(err, wort.PermissionDeniedError) and isinstance(err, wort.WortOSError)
        assert isinstance(err, wort.Error)
        assert os.strerror(want) in str(err)
    finally:
        os.chmod(os.path.join(str(tmp_path), "locked"), stat.S_IRWXU)


def test_other_oserrors_carry_errno():
    with pytest.raises(OSError) as e:
        wort.open(DIR)  # a directory: open(2) of it for writing fails with EISDIR
    assert e.value.errno == errno.EISDIR and isinstance(e.value, IsADirectoryError)
    assert isinstance(e.value, wort.WortOSError) and e.value.filename == DIR
