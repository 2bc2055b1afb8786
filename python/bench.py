#!/usr/bin/env python3
"""Per-operation cost of the Python binding: wort from Python vs the same C++ KV API calls in
one C++ loop (the binding's overhead is the difference), and vs LMDB's Python binding (lmdb on
PyPI, one write transaction per put, so that every put is durable as wort's are), on the same
machine, the same keys and values, pools and databases under /dev/shm.

    python/bench.py [--keys N] [--value-size B] [--kind woart] [--out FILE.json]
    python/bench.py --sync --dir /var/tmp --keys 2000    # durable on disk: wort sync="msync"
                                                         # beside LMDB sync and nosync

--sync opens wort with sync="msync" (every persist msyncs the pages it flushed) and runs LMDB
both with sync=True (its default: fdatasync at each commit) and sync=False (nosync: the OS writes
back when it likes); give --dir a directory on a real disk (tmpfs makes every sync free).
Without --sync LMDB runs both ways too, wort with its default (flush + fence: no system call).

Needs the wort package installed (pip install .) and lmdb (scripts/setup.sh puts both in its
venv). Prints a table; --out writes the figures as JSON. CPU time of the calling thread is
reported beside wall time (the figures of a loaded machine: read cpu_ns_per_op).
"""

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import tempfile
import sys
import time

# The installed package, not python/wort beside this script (which has no built extension).
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import lmdb  # noqa: E402
import wort  # noqa: E402


def timed(fn):
    c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
    fn()
    return time.thread_time_ns() - c0, time.perf_counter_ns() - w0


def run_once(a, keys, value, value2, wsync, add):
    """One run of every api and op, on new pools and databases under a.dir."""
    work = tempfile.mkdtemp(prefix="wort-pybench-", dir=a.dir)
    try:
        # C++ KV API (one C++ loop per operation kind) and the Python binding, each on a new pool.
        for api in ("c++ kv api", "python wort"):
            with wort.open(os.path.join(work, api.replace(" ", "-") + ".pool"), kind=a.kind, size="4G",
                           sync=wsync) as db:
                if api == "c++ kv api":
                    impl = db._s()
                    for op in ("put", "overwrite", "get", "remove"):
                        cpu, wall = impl._bench_cpp("put" if op == "overwrite" else op, keys,
                                                    value2 if op == "overwrite" else value)
                        add(api, op, cpu, wall)
                else:
                    def put():
                        for k in keys:
                            db[k] = value

                    def overwrite():
                        for k in keys:
                            db[k] = value2

                    def get():
                        for k in keys:
                            db[k]

                    def remove():
                        for k in keys:
                            del db[k]

                    for op, fn in (("put", put), ("overwrite", overwrite), ("get", get), ("remove", remove)):
                        add(api, op, *timed(fn))
        # LMDB: one write transaction per put/delete (durable per operation, as wort), one read
        # transaction per get (as a dict-style get would); with sync (fdatasync per commit, its
        # default) and without (nosync: a commit is as durable as wort's process-crash level).
        for lsync in (True, False):
            env = lmdb.open(os.path.join(work, "lmdb-sync" if lsync else "lmdb-nosync"), map_size=4 << 30,
                            sync=lsync)

            def lput():
                for k in keys:
                    with env.begin(write=True) as t:
                        t.put(k, value)

            def lover():
                for k in keys:
                    with env.begin(write=True) as t:
                        t.put(k, value2)

            def lget():
                for k in keys:
                    with env.begin() as t:
                        t.get(k)

            def ldel():
                for k in keys:
                    with env.begin(write=True) as t:
                        t.delete(k)

            for op, fn in (("put", lput), ("overwrite", lover), ("get", lget), ("remove", ldel)):
                add("python lmdb" if lsync else "lmdb nosync", op, *timed(fn))
            env.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--kind", default="woart")
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sync", action="store_true", help="wort sync=msync; run on a disk --dir")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of the whole set (new pools and databases each); medians are reported")
    ap.add_argument("--out")
    a = ap.parse_args()
    wsync = "msync" if a.sync else "persist"

    rng = random.Random(a.seed)
    keys = [b"key%012d" % rng.getrandbits(40) for _ in range(a.keys)]
    keys = list(dict.fromkeys(keys))  # unique, random order
    value = bytes(rng.getrandbits(8) for _ in range(a.value_size))
    value2 = bytes(rng.getrandbits(8) for _ in range(a.value_size))  # "overwrite": every key again
    n = len(keys)
    samples = {}  # (api, op) -> [(cpu ns/op, wall ns/op)], one per run, in first-run order

    def add(api, op, cpu, wall):
        samples.setdefault((api, op), []).append((cpu / n, wall / n))

    for _ in range(a.repeat):
        run_once(a, keys, value, value2, wsync, add)
    rows = []
    for (api, op), v in samples.items():
        rows.append({"api": api, "op": op, "ops": n, "runs": len(v),
                     "cpu_ns_per_op": statistics.median(c for c, _ in v),
                     "wall_ns_per_op": statistics.median(w for _, w in v),
                     "wall_ns_per_op_runs": [round(w) for _, w in v]})

    cpp = {r["op"]: r["cpu_ns_per_op"] for r in rows if r["api"] == "c++ kv api"}
    print(f"{n} keys of 15 bytes, values of {a.value_size} bytes, kind {a.kind}, wort sync={wsync}, "
          f"files under {a.dir}; ns per operation")
    lm = {r["op"]: r["wall_ns_per_op"] for r in rows if r["api"] == "python lmdb"}
    print(f"{'api':<14} {'op':<9} {'cpu ns/op':>10} {'wall ns/op':>11} {'cpu vs C++':>11} {'wall vs lmdb':>13}")
    for r in rows:
        r["cpu_vs_cpp"] = r["cpu_ns_per_op"] / cpp[r["op"]]
        r["wall_vs_lmdb"] = r["wall_ns_per_op"] / lm[r["op"]]
        print(f"{r['api']:<14} {r['op']:<9} {r['cpu_ns_per_op']:>10.0f} {r['wall_ns_per_op']:>11.0f} "
              f"{r['cpu_vs_cpp']:>10.2f}x {r['wall_vs_lmdb']:>12.2f}x")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"keys": n, "repeat": a.repeat, "value_size": a.value_size, "kind": a.kind, "wort_sync": wsync, "dir": a.dir, "machine": platform.node(),
                       "python": platform.python_version(), "lmdb": lmdb.version(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
