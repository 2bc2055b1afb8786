#!/usr/bin/env python3
"""faiss-cpu's exact flat index (IndexFlatL2) on the data `wort knn bench` wrote, for its faiss
experiment.

    python3 scripts/knn_faiss.py --data D.fvecs --queries Q.fvecs --k 32 --threads T \
        [--ids-out IDS.ivecs]

Runs the queries one at a time on one thread ("single": mean, p50 and p99 latency), then all
at once on T threads ("batch": queries/s), and prints one JSON object per mode on stdout, with
the CPU time per query beside the wall time (cpu_ns_per_query: this thread's in single mode, the
process's in batch mode). The
single mode's ids go to --ids-out (.ivecs, k per query), so that the bench can compare them with
its brute-force engine. Needs numpy and faiss (scripts/setup.sh installs faiss-cpu into
~/.cache/wort-venv).
"""
import argparse
import json
import sys
import time


def read_fvecs(path):
    import numpy as np
    raw = np.fromfile(path, dtype="<i4")
    if raw.size == 0:
        sys.exit(f"knn_faiss.py: {path}: empty file")
    dim = int(raw[0])
    if dim <= 0 or raw.size % (dim + 1) != 0:
        sys.exit(f"knn_faiss.py: {path}: not an .fvecs file of dim {dim}")
    rows = raw.reshape(-1, dim + 1)
    if (rows[:, 0] != dim).any():
        sys.exit(f"knn_faiss.py: {path}: rows of different dims")
    return np.ascontiguousarray(rows[:, 1:]).view("<f4")


def write_ivecs(path, ids):
    import numpy as np
    n, k = ids.shape
    out = np.empty((n, k + 1), dtype="<i4")
    out[:, 0] = k
    out[:, 1:] = ids
    out.tofile(path)


def percentile(sorted_values, p):
    rank = max(1, -(-int(p * 1000) * len(sorted_values) // 1000))  # ceil(p * n), nearest rank
    return sorted_values[min(len(sorted_values), rank) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ids-out")
    a = ap.parse_args()
    import faiss
    import numpy as np

    xb = read_fvecs(a.data)
    xq = read_fvecs(a.queries)
    if xb.shape[1] != xq.shape[1]:
        sys.exit(f"knn_faiss.py: data has {xb.shape[1]} dims, queries {xq.shape[1]}")
    index = faiss.IndexFlatL2(xb.shape[1])
    index.add(xb)
    common = {"engine": "faiss-flat", "device": "cpu", "faiss_version": getattr(faiss, "__version__", "unknown")}

    faiss.omp_set_num_threads(1)
    index.search(xq[:1], a.k)  # warm-up
    lat, ids = [], np.empty((xq.shape[0], a.k), dtype=np.int64)
    t_all, cpu_all = time.perf_counter(), time.thread_time()  # one OpenMP thread: this one
    for i in range(xq.shape[0]):
        t0 = time.perf_counter()
        _, ids[i:i + 1] = index.search(xq[i:i + 1], a.k)
        lat.append((time.perf_counter() - t0) * 1e9)
    total, cpu = time.perf_counter() - t_all, time.thread_time() - cpu_all
    s = sorted(lat)
    print(json.dumps(dict(common, mode="single", threads=1, seconds=total, ns_per_query=sum(lat) / len(lat),
                          p50_ns=percentile(s, 0.50), p99_ns=percentile(s, 0.99), qps=len(lat) / total,
                          cpu_ns_per_query=cpu * 1e9 / len(lat))))
    if a.ids_out:
        write_ivecs(a.ids_out, ids)

    faiss.omp_set_num_threads(a.threads)
    index.search(xq[:a.threads], a.k)  # warm-up: starts the OpenMP threads
    t0, cpu0 = time.perf_counter(), time.process_time()
    index.search(xq, a.k)
    total, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    print(json.dumps(dict(common, mode="batch", threads=a.threads, seconds=total, ns_per_query=total * 1e9 / xq.shape[0],
                          qps=xq.shape[0] / total, cpu_ns_per_query=cpu * 1e9 / xq.shape[0])))


if __name__ == "__main__":
    main()
