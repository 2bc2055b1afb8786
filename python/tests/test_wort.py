"""The Python package wort (python/wort): dict protocol, full byte range, ordered ranges,
reopen, every kind, errors mapped from Status, capabilities, threads, and a writer process
killed with SIGKILL whose acknowledged writes must all be there after reopening."""

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

import wort

DIR = os.environ.get("WORT_TEST_DIR", "/dev/shm")




EDGE_KEYS = [b"", b"\x00", b"\x00\x00", b"\x80", b"\xff", b"\xff\xff", b"a", b"ab", b"abc", b"x" * 4096]


def test_dict_protocol(path):
    with wort.open(path, kind="woart", size="64M") as db:
        assert len(db) == 0 and b"k" not in db
        db[b"k"] = b"v"
        assert db[b"k"] == b"v" and b"k" in db and len(db) == 1
        assert db.get(b"k") == b"v" and db.get(b"nope") is None and db.get(b"nope", b"d") == b"d"
        db[b"k"] = b"w" * 1000  # overwrite
        assert db[b"k"] == b"w" * 1000
        del db[b"k"]
        assert b"k" not in db and len(db) == 0
        with pytest.raises(KeyError):
            db[b"k"]
        with pytest.raises(KeyError):
            del db[b"k"]
        assert db.remove(b"k") is False
        db.put(bytearray(b"ba"), memoryview(b"mv"))
        assert db[b"ba"] == b"mv"
        with pytest.raises(TypeError):
            db["str key"] = b"v"
        with pytest.raises(TypeError):
            db[b"k"] = "str value"


def test_byte_range_sizes_and_reopen(path):
    rng = random.Random(7)
    model = {}
    for round_ in range(2):
        with wort.open(path, kind="woart", size="256M") as db:
            assert dict(db.items()) == model  # after the reopen
            for i in range(300):
                k = rng.choice(EDGE_KEYS + [b"key%d" % rng.randrange(100)])
                if rng.random() < 0.25:
                    assert db.remove(k) == (model.pop(k, None) is not None)
                else:
                    v = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 63, 64, 3000])))
                    if i % 97 == 0:
                        v = os.urandom(300 * 1024)  # more than one size-class block
                    db[k] = v
                    model[k] = v
            assert len(db) == len(model)
            for k, v in model.items():
                assert db[k] == v
            assert list(db.keys()) == sorted(model)


def test_items_are_ordered_half_open_and_batched(path):
    with wort.open(path, size="64M") as db:
        keys = sorted({os.urandom(random.Random(i).randrange(1, 6)) for i in range(2000)} | set(EDGE_KEYS))
        for k in keys:
            db[k] = k[::-1]
        assert len(keys) > 2 * wort.Store._BATCH
        assert [k for k, _ in db.items()] == keys
        assert all(v == k[::-1] for k, v in db.items())
        for a, b in [(b"", b"\x80"), (b"a", b"abc"), (b"\x00", b"\x00\x00"), (b"\xff", None), (None, b"a"), (b"b", b"a")]:
            want = [k for k in keys if (a is None or k >= a) and (b is None or k < b)]
            assert list(db.keys(start=a, end=b)) == want, (a, b)
        # a write during iteration neither repeats nor tears a pair
        seen = []
        for k, v in db.items():
            seen.append(k)
            if len(seen) == 10:
                db[b"\xff\xff\xff"] = b"late"
        assert len(seen) == len(set(seen))


def test_every_kind(path):
    kinds = wort.kinds()
    assert {"woart", "wort", "artcow", "fastfair", "cceh"} <= set(kinds)
    assert wort.Store.kinds() == kinds
    for kind in kinds:
        with wort.open(path, kind=kind, size="64M") as db:
            for k in EDGE_KEYS:
                db[k] = b"v" + k
            assert all(db[k] == b"v" + k for k in EDGE_KEYS) and len(db) == len(EDGE_KEYS)
            caps = db.capabilities()
            assert caps["kind"] == kind
            if caps["ordered"]:
                assert list(db.keys()) == sorted(EDGE_KEYS)
            else:  # a hash kind iterates in no particular order, and has no key range
                assert sorted(db.keys()) == sorted(EDGE_KEYS)
                assert dict(db.items()) == {k: b"v" + k for k in EDGE_KEYS}
                with pytest.raises(NotImplementedError):
                    list(db.items(start=b"a"))
        os.unlink(path)


def test_one_version():
    # The library's version (wort::Version()) is the installed package's (both from CMakeLists.txt).
    import importlib.metadata
    assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", wort.__version__)
    assert wort.__version__ == importlib.metadata.version("wort-pm")


def test_capabilities(path):
    with wort.open(path, kind="fastfair", size=64 << 20, key_type="u64") as db:
        c = db.capabilities()
        assert c["ordered"] and c["thread_safe"] and c["key_type"] == "u64" and c["max_key_len"] == 8
        assert c["max_value_len"] == wort.MAX_VALUE_LEN and c["durability"] in ("process-crash", "power-fail", "file-sync", "tmpfs")
        db[(5).to_bytes(8, "big")] = b"five"
        with pytest.raises(ValueError):
            db[b"short"] = b"x"


def test_errors_map_to_exceptions(path):
    with pytest.raises(ValueError):
        wort.open(path, kind="no-such-kind")
    with pytest.raises(ValueError):
        wort.open(path, size="lots")
    with pytest.raises(KeyError):
        wort.open(path, create=False)
    with pytest.raises(KeyError):
        wort.open("/nonexistent-dir/x.pool")  # no such file (NotFound)
    with pytest.raises(OSError):
        wort.open(DIR)  # a directory: the open(2) fails
    db = wort.open(path, kind="woart", size="64M")
    with pytest.raises(wort.BusyError) as e:  # one writer per pool
        wort.open(path)
    assert isinstance(e.value, OSError) and isinstance(e.value, wort.Error)
    with pytest.raises(ValueError):
        db[b"k" * (wort.MAX_KEY_LEN + 1)] = b"v"
    with pytest.raises(wort.InvalidArgumentError):
        db[b"k"] = b"v" * (wort.MAX_VALUE_LEN + 1)
    db.close()
    db.close()  # idempotent
    with pytest.raises(ValueError):
        db[b"k"] = b"v"
    with pytest.raises(ValueError):
        wort.open(path, kind="wort")  # it is a woart store
    with open(path, "wb") as f:
        f.write(b"not a pool" * 1000)
    with pytest.raises(wort.CorruptionError):
        wort.open(path)


def test_threads(path):
    """Writers and readers in threads (the GIL is released inside the store): every value read
    is one that was written whole, and the final state is the last writes."""
    with wort.open(path, size="64M") as db:
        errors = []

        def writer(w):
            for ver in range(60):
                for k in range(20):
                    db[b"w%dk%d" % (w, k)] = (b"%d:%d:%d:" % (w, k, ver)).ljust(100 + ver, b"x")

        def reader():
            for _ in range(40):
                for k, v in db.items():
                    w, kk, ver, _ = v.split(b":", 3)
                    if k != b"w%sk%s" % (w, kk) or len(v) != 100 + int(ver):
                        errors.append((k, v))

        ts = [threading.Thread(target=writer, args=(w,)) for w in range(2)] + [threading.Thread(target=reader)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors
        assert len(db) == 40 and all(db[b"w%dk%d" % (w, k)].startswith(b"%d:%d:59:" % (w, k))
                                     for w in range(2) for k in range(20))


WRITER = r"""
import sys, wort
path, seed = sys.argv[1], int(sys.argv[2])
db = wort.open(path, kind=sys.argv[3], size="256M")
print("ready", flush=True)
i = 0
while True:
    k, op, v = op_of(seed, i)
    if op == "put":
        db[k] = v
    else:
        db.remove(k)
    print(i, flush=True)  # acknowledged
    i += 1
"""

OPS = r"""
def op_of(seed, i):
    import random
    r = random.Random(seed * 1000003 + i)
    k = b"key%03d" % r.randrange(64)
    if r.random() < 0.25:
        return k, "remove", None
    return k, "put", bytes([i % 256]) * r.choice([0, 1, 100, 5000, 300 * 1024 if i % 50 == 0 else 10])
"""
exec(OPS)


@pytest.mark.parametrize("kind", ["woart", "cceh"])
def test_sigkill_writer_keeps_every_acknowledged_write(path, kind):
    model = {}
    for round_ in range(3):
        seed = round_ + 1
        proc = subprocess.Popen([sys.executable, "-c", OPS + WRITER, path, str(seed), kind],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(random.Random(seed).uniform(0.05, 0.3))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        acked = [int(x) for x in out.split()]
        start = 0 if not acked else acked[0]
        assert acked == list(range(start, start + len(acked)))
        # The writer may have acknowledged lines in the pipe we read only now: all of them count.
        for i in acked:
            k, op, v = op_of(seed, i)
            if op == "put":
                model[k] = v
            else:
                model.pop(k, None)
        # The operation after the last acknowledged one may be applied or not, as a whole.
        k, op, v = op_of(seed, len(acked))
        after = dict(model)
        if op == "put":
            after[k] = v
        else:
            after.pop(k, None)
        with wort.open(path, kind=kind) as db:
            found = {k: db[k] for k in (b"key%03d" % j for j in range(64)) if k in db}
            assert len(db) == len(found)
        assert found in (model, after), "acknowledged writes lost or a write torn"
        model = found
        assert len(acked) > 0


def test_gil_is_released_during_store_operations(path):
    """Another Python thread runs while a thread is inside a long store call (a put of a
    64 MiB value). With the GIL held inside the call, the main thread could only step at the
    edges of the call (between the timestamp and the call, forced switches every 1 ms); so
    steps are counted only more than 10 ms away from both ends of a call that took > 25 ms."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        with wort.open(path, size="1G") as db:
            big = b"\xab" * wort.MAX_VALUE_LEN
            spans = []
            done = threading.Event()

            def writer():
                for i in range(4):
                    t0 = time.perf_counter()
                    db[b"big%d" % (i % 2)] = big
                    spans.append((t0, time.perf_counter()))
                done.set()

            steps = []
            t = threading.Thread(target=writer)
            t.start()
            while not done.is_set():
                steps.append(time.perf_counter())
            t.join()
            long_spans = [(a, b) for a, b in spans if b - a > 0.025]
            assert long_spans, f"no put took more than 25 ms: {spans}"
            inside = [s for s in steps if any(a + 0.010 < s < b - 0.010 for a, b in long_spans)]
            assert inside, f"no Python step ran inside {len(long_spans)} puts of 64 MiB: the GIL was held"
            assert db[b"big1"] == big
    finally:
        sys.setswitchinterval(old)


def test_read_only_beside_a_writer_process(path):
    """read_only=True: reads beside a writing process (a forked child), writes refused, the
    file unchanged by the reader; a second writer is refused naming the holder's pid."""
    with wort.open(path, kind="woart", size="64M") as db:
        db[b"\x80k"] = b"v0"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer
        os.close(r)
        code = 1
        try:
            with wort.open(path, kind="woart") as db:
                for i in range(200):
                    db[b"\x80k"] = b"v%d" % i
                os.write(w, b"x")
                time.sleep(1.5)  # held open while the parent reads
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    assert os.read(r, 1) == b"x"
    with wort.open(path, read_only=True) as ro:
        assert ro[b"\x80k"] == b"v199"
        with pytest.raises(wort.InvalidArgumentError, match="read-only"):
            ro[b"x"] = b"y"
        with pytest.raises(wort.InvalidArgumentError):
            del ro[b"\x80k"]
        with pytest.raises(wort.BusyError, match="pid %d" % pid):
            wort.open(path, kind="woart")
    assert os.waitpid(pid, 0)[1] == 0
    with wort.open(path, read_only=True) as ro:
        assert len(ro) == 1
