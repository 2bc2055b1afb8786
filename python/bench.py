#!/usr/bin/env python3
"""Per-operation cost of the Python binding: wort from Python vs the same C++ KV API calls in
one C++ loop (the binding's overhead is the difference), and vs LMDB's Python binding (lmdb on
PyPI, one write transaction per put, so that every put is durable as wort's are), on the same
machine, the same keys and values, pools and databases under /dev/shm.

    python/bench.py [--keys N] [--value-size B] [--kind woart] [--out FILE.json]

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--kind", default="woart")
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out")
    a = ap.parse_args()

    rng = random.Random(a.seed)
    keys = [b"key%012d" % rng.getrandbits(40) for _ in range(a.keys)]
    keys = list(dict.fromkeys(keys))  # unique, random order
    value = bytes(rng.getrandbits(8) for _ in range(a.value_size))
    n = len(keys)
    rows = []

    def add(api, op, cpu, wall):
        rows.append({"api": api, "op": op, "ops": n, "cpu_ns_per_op": cpu / n, "wall_ns_per_op": wall / n})

    work = tempfile.mkdtemp(prefix="wort-pybench-", dir=a.dir)
    try:
        # C++ KV API (one C++ loop per operation kind) and the Python binding, each on a new pool.
        for api in ("c++ kv api", "python wort"):
            with wort.open(os.path.join(work, api.replace(" ", "-") + ".pool"), kind=a.kind, size="4G") as db:
                if api == "c++ kv api":
                    impl = db._s()
                    for op in ("put", "get", "remove"):
                        cpu, wall = impl._bench_cpp(op, keys, value)
                        add(api, op, cpu, wall)
                else:
                    def put():
                        for k in keys:
                            db[k] = value

                    def get():
                        for k in keys:
                            db[k]

                    def remove():
                        for k in keys:
                            del db[k]

                    for op, fn in (("put", put), ("get", get), ("remove", remove)):
                        add(api, op, *timed(fn))
        # LMDB: one write transaction per put/delete (durable per operation, as wort), one read
        # transaction per get (as a dict-style get would).
        env = lmdb.open(os.path.join(work, "lmdb"), map_size=4 << 30)

        def lput():
            for k in keys:
                with env.begin(write=True) as t:
                    t.put(k, value)

        def lget():
            for k in keys:
                with env.begin() as t:
                    t.get(k)

        def ldel():
            for k in keys:
                with env.begin(write=True) as t:
                    t.delete(k)

        for op, fn in (("put", lput), ("get", lget), ("remove", ldel)):
            add("python lmdb", op, *timed(fn))
        env.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    cpp = {r["op"]: r["cpu_ns_per_op"] for r in rows if r["api"] == "c++ kv api"}
    print(f"{n} keys of 15 bytes, values of {a.value_size} bytes, kind {a.kind}; ns per operation")
    print(f"{'api':<14} {'op':<7} {'cpu ns/op':>10} {'wall ns/op':>11} {'cpu vs C++':>11}")
    for r in rows:
        r["cpu_vs_cpp"] = r["cpu_ns_per_op"] / cpp[r["op"]]
        print(f"{r['api']:<14} {r['op']:<7} {r['cpu_ns_per_op']:>10.0f} {r['wall_ns_per_op']:>11.0f} {r['cpu_vs_cpp']:>10.2f}x")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"keys": n, "value_size": a.value_size, "kind": a.kind, "machine": platform.node(),
                       "python": platform.python_version(), "lmdb": lmdb.version(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
