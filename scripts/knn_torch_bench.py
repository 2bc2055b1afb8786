#!/usr/bin/env python3
"""Brute-force kNN with PyTorch on the GPU, for comparison with wort's GPU engines.

Reads the points and queries that tests/knn/knn_gpu_test.cc's KnnGpuBench.DISABLED_Chapter wrote
(raw float32, row-major) and wort's answer (raw uint64 ids, nq x k), and measures torch's brute
force in float32: squared distances as |q|^2 - 2 q.x + |x|^2 (one matrix product) and topk(k,
smallest). Per-query latency (one query per call, synchronized) and the batch of all queries in
one call (median of repetitions). Reports the recall of wort's exact ids in torch's answer (the
expansion loses precision in float32, so ties and near-ties may differ). Writes JSON.
"""
import argparse
import json
import os
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="directory with points.f32, queries.f32, wort_ids.u64")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--device", default="cuda", help="cuda (default); cpu only to try the script")
    a = ap.parse_args()

    def load(name, dtype, itemsize, cols):  # raw little-endian arrays, no numpy needed
        path = f"{a.data}/{name}"
        count = os.path.getsize(path) // itemsize
        return torch.from_file(path, shared=False, size=count, dtype=dtype).view(-1, cols)

    x = load("points.f32", torch.float32, 4, a.dim)
    q = load("queries.f32", torch.float32, 4, a.dim)
    wort_ids = load("wort_ids.u64", torch.int64, 8, a.k)  # ids < 2^63 (0..n-1)
    dev = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = False  # plain fp32 products (TF32 would lose bits)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    t0 = time.perf_counter()
    X = x.to(dev)
    Q = q.to(dev)
    xx = (X * X).sum(dim=1)
    sync()
    upload_ms = (time.perf_counter() - t0) * 1000

    def knn(qb):
        d = (qb * qb).sum(dim=1, keepdim=True) - 2.0 * (qb @ X.T) + xx[None, :]
        return torch.topk(d, a.k, dim=1, largest=False, sorted=True)

    for _ in range(3):  # warm-up (kernels, cuBLAS handles)
        knn(Q)
        knn(Q[:1])
    sync()

    batch = []
    for _ in range(a.reps):
        sync()
        t0 = time.perf_counter()
        vals, idx = knn(Q)
        sync()
        batch.append((time.perf_counter() - t0) * 1000)
    single = []
    for i in range(q.shape[0]):
        sync()
        t0 = time.perf_counter()
        knn(Q[i : i + 1])
        sync()
        single.append((time.perf_counter() - t0) * 1000)

    got = idx.cpu()
    hits = sum(len(set(got[i].tolist()) & set(wort_ids[i].tolist())) for i in range(q.shape[0]))
    single_sorted = sorted(single)
    res = {
        "engine": "torch brute force (fp32 matmul + topk)",
        "torch": torch.__version__,
        "tf32": False,
        "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
        "n": int(x.shape[0]),
        "dim": a.dim,
        "queries": int(q.shape[0]),
        "k": a.k,
        "upload_ms": upload_ms,
        "batch_ms": statistics.median(batch),
        "batch_ms_per_query": statistics.median(batch) / q.shape[0],
        "batch_qps": q.shape[0] / (statistics.median(batch) / 1000),
        "single_ms_median": statistics.median(single),
        "single_ms_p90": single_sorted[min(len(single) - 1, int(0.9 * len(single)))],
        "single_ms_mean": statistics.mean(single),
        "single_ms_min": single_sorted[0],
        "recall_of_wort_exact_ids": hits / (q.shape[0] * a.k),
    }
    print(json.dumps(res, indent=2))
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
