"""Benchmarks (not tests): EclipseMR-on-Dask vs plain Dask (dask.bag, default scheduling) on the
same LocalCluster, and the simulator's policies at 40 workers. Writes JSON and PNG files."""

from __future__ import annotations

import json
import os
import platform
import time
from typing import Dict, List, Optional

from . import data, sim
from .apps import ITERATIONS, get_app
from .engine import EclipseMR, JobStats

SCALES = {  # scale 1: the default, a couple of minutes on 2 cores
    "text": dict(blocks=8, lines=4000, words_per_line=10),
    "points": dict(blocks=8, points=20000, dim=8, centers=5),
    "labeled": dict(blocks=8, points=20000, dim=8, centers=5, labels=True),
    "graph": dict(blocks=8, nodes=20000, edges_per_node=4),
}
APP_INPUT = {"wordcount": ("text", None), "grep": ("text", r"\b[st]\w*ing\b"), "invindex": ("text", None),
             "sort": ("text", None), "kmeans": ("points", {"k": 5}), "logreg": ("labeled", {"lr": 0.5}),
             "pagerank": ("graph", None)}


def make_inputs(root: str, scale: int = 1, seed: int = 1) -> Dict[str, data.Dataset]:
    out = {}
    for kind, args in SCALES.items():
        a = dict(args)
        a["blocks"] = a["blocks"] * scale
        url = os.path.join(root, f"{kind}-s{scale}-seed{seed}")
        try:
            out[kind] = data.open_dataset(url)
        except data.InputError:
            gen = {"text": data.gen_text, "points": data.gen_points, "labeled": data.gen_points,
                   "graph": data.gen_graph}[kind]
            out[kind] = gen(url, seed=seed, **a)
    return out


# ---- plain Dask: the same application code through dask.bag ---------------------------------------

def _read_decode(block, app):
    return app.decode(block.read(), block.name)


def _map_list(obj, app, params):
    return list(app.map(obj, params))


def _first(kv):
    return kv[0]


class _Fold:
    def __init__(self, combine):
        self.combine = combine

    def binop(self, acc, kv):
        return kv[1] if acc is None else self.combine(acc, kv[1])

    def merge(self, a, b):
        if a is None:
            return b
        if b is None:
            return a
        return self.combine(a, b)


def dask_job(app, ds, params, decoded=None):
    import dask.bag as db
    bag = decoded if decoded is not None else \
        db.from_sequence(ds.blocks, npartitions=len(ds.blocks)).map(_read_decode, app)
    pairs = bag.map(_map_list, app, params).flatten()
    if app.combine:
        f = _Fold(app.combine)
        folded = dict(pairs.foldby(_first, f.binop, None, f.merge, None).compute())
        return {k: app.reduce(k, [v]) for k, v in folded.items()}
    grouped = pairs.groupby(_first).compute()
    return {k: app.reduce(k, [v for _, v in kvs]) for k, kvs in grouped}


def dask_iterate(app, ds, iterations, params, persist: bool, times: List[float]):
    import dask.bag as db
    decoded = None
    if persist:
        decoded = db.from_sequence(ds.blocks, npartitions=len(ds.blocks)).map(_read_decode, app).persist()
    state = app.init(ds, params)
    for _ in range(iterations):
        t0 = time.perf_counter()
        out = dask_job(app, ds, (params, state), decoded)
        state = app.update(state, out, params)
        times.append(time.perf_counter() - t0)
    return state


# ---- Spark local mode (optional: pyspark from PyPI, a JDK) ------------------------------------------

def spark_bench(inputs: Dict[str, data.Dataset], workers: int, apps: List[str], repeats: int = 2) -> Dict[str, dict]:
    """The same application code through Spark's RDD API in local[workers] mode: non-iterative
    jobs run `repeats` times (as separate jobs), iterative ones with the decoded blocks cached
    (rdd.cache(): Spark's reuse, as the chapter compares)."""
    import sys
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    conf = SparkConf().setMaster(f"local[{workers}]").setAppName("wort-mr-bench") \
        .set("spark.ui.enabled", "false").set("spark.ui.showConsoleProgress", "false") \
        .set("spark.driver.memory", "2g")
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    out: Dict[str, dict] = {}
    try:
        for name in apps:
            kind, params = APP_INPUT[name]
            ds = inputs[kind]
            app = get_app(name)

            def job(rdd, ps, app=app):
                pairs = rdd.flatMap(lambda o: list(app.map(o, ps)))
                if app.combine:
                    got = pairs.reduceByKey(app.combine).collect()
                    return {k: app.reduce(k, [v]) for k, v in got}
                return {k: app.reduce(k, list(vs)) for k, vs in pairs.groupByKey().collect()}

            blocks = sc.parallelize(ds.blocks, len(ds.blocks)).map(lambda b, app=app: app.decode(b.read(), b.name))
            r: Dict[str, object] = {}
            if app.iterative:
                blocks = blocks.cache()
                state = app.init(ds, params)
                its = []
                t0 = time.perf_counter()
                for _ in range(ITERATIONS[name]):
                    t1 = time.perf_counter()
                    state = app.update(state, job(blocks, (params, state)), params)
                    its.append(time.perf_counter() - t1)
                r["spark_seconds"] = time.perf_counter() - t0
                r["spark_iterations"] = its
            else:
                runs = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    app.finish(job(blocks, params), params)
                    runs.append(time.perf_counter() - t0)
                r["spark_runs"] = runs
            out[name] = r
            print("spark", name, json.dumps(r), flush=True)
    finally:
        sc.stop()
    return out


# ---- the benchmark ---------------------------------------------------------------------------------

def run_real(out_dir: str, *, workers: int = 2, scale: int = 1, data_dir: Optional[str] = None,
             apps: Optional[List[str]] = None, repeats: int = 2, spark: bool = False) -> dict:
    from distributed import Client, LocalCluster
    data_dir = data_dir or os.path.join(out_dir, "data")
    inputs = make_inputs(data_dir, scale)
    cache_dir = os.path.join(out_dir, f"cache-{os.getpid()}")
    res: Dict[str, dict] = {}
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
            Client(cl) as client:
        mr = EclipseMR(client, cache_dir=cache_dir)
        for name in apps or list(APP_INPUT):
            kind, params = APP_INPUT[name]
            ds = inputs[kind]
            app = get_app(name)
            r: Dict[str, object] = {"input_blocks": len(ds.blocks), "input_bytes": sum(b.size for b in ds.blocks)}
            if app.iterative:
                n = ITERATIONS[name]
                its: List[float] = []
                last = [time.perf_counter()]

                def tick(i, state, its=its, last=last):
                    now = time.perf_counter()
                    its.append(now - last[0])
                    last[0] = now

                t0 = time.perf_counter()
                last[0] = t0
                mine = mr.iterate(app, ds, n, params, user_id=f"bench{os.getpid()}", on_iteration=tick)
                r["eclipsemr_seconds"] = time.perf_counter() - t0
                r["eclipsemr_iterations"] = its
                t0 = time.perf_counter()
                mr.iterate(app, ds, n, params, user_id=f"bench{os.getpid()}")
                r["eclipsemr_resubmitted_seconds"] = time.perf_counter() - t0
                for persist in (False, True):
                    dt: List[float] = []
                    t0 = time.perf_counter()
                    theirs = dask_iterate(app, ds, n, params, persist, dt)
                    key = "dask_persist" if persist else "dask"
                    r[f"{key}_seconds"] = time.perf_counter() - t0
                    r[f"{key}_iterations"] = dt
                import numpy as np
                r["same_result"] = bool(np.allclose(mine, theirs, rtol=1e-9, atol=1e-12))
            else:
                runs = []
                for i in range(repeats):
                    st = JobStats(name)
                    t0 = time.perf_counter()
                    mine = mr.run(app, ds, params, user_id=f"bench{os.getpid()}", stats=st)
                    runs.append({"seconds": time.perf_counter() - t0, "icache_hits": st.icache_hits,
                                 "ocache_hits": st.ocache_hits, "reused_shuffle": st.reused_shuffle})
                r["eclipsemr_runs"] = runs
                druns = []
                for i in range(repeats):
                    t0 = time.perf_counter()
                    theirs = app.finish(dask_job(app, ds, params), params)
                    druns.append(time.perf_counter() - t0)
                r["dask_runs"] = druns
                r["same_result"] = mine == theirs
            res[name] = r
            print(name, json.dumps(r), flush=True)
        mr.client.run(lambda dask_worker: dask_worker.plugins["wort-mr"].cache.close())
    import shutil
    shutil.rmtree(cache_dir, ignore_errors=True)
    if spark:
        for name, r in spark_bench(inputs, workers, apps or list(APP_INPUT), repeats).items():
            res[name].update(r)
    return {"workers": workers, "threads_per_worker": 1, "scale": scale, "cpus": os.cpu_count(),
            "machine": platform.processor() or platform.machine(), "apps": res}


def run_sim(*, workers: int = 40, jobs: int = 4000, seeds: int = 3, cache_blocks=(16, 64, 256),
            repeat: float = 0.3) -> List[dict]:
    out = []
    for cb in cache_blocks:
        for seed in range(1, seeds + 1):
            out.extend(sim.compare(workers=workers, jobs=jobs, repeat=repeat, cache_blocks=cb, seed=seed))
    return out


def summarize_sim(rows: List[dict]) -> List[dict]:
    agg: Dict[tuple, List[dict]] = {}
    for r in rows:
        agg.setdefault((r["cache_blocks"], r["policy"]), []).append(r)
    out = []
    for (cb, pol), rs in sorted(agg.items()):
        out.append({"cache_blocks": cb, "policy": pol, "seeds": len(rs),
                    **{m: sum(r[m] for r in rs) / len(rs) for m in ("hit_ratio", "imbalance", "mean_jct")}})
    return out


def plot_real(res: dict, path_prefix: str) -> List[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    files = []
    apps = [a for a, r in res["apps"].items() if "eclipsemr_runs" in r]
    if apps:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        x = range(len(apps))
        w = 0.2
        ax.bar([i - 1.5 * w for i in x], [res["apps"][a]["eclipsemr_runs"][0]["seconds"] for a in apps], w, label="EclipseMR first run")
        ax.bar([i - 0.5 * w for i in x], [res["apps"][a]["eclipsemr_runs"][-1]["seconds"] for a in apps], w, label="EclipseMR repeated")
        ax.bar([i + 0.5 * w for i in x], [min(res["apps"][a]["dask_runs"]) for a in apps], w, label="plain Dask (bag), best")
        if all("spark_runs" in res["apps"][a] for a in apps):
            ax.bar([i + 1.5 * w for i in x], [min(res["apps"][a]["spark_runs"]) for a in apps], w, label="Spark local, best")
        ax.set_xticks(list(x), apps)
        ax.set_ylabel("seconds")
        ax.set_title(f"{res['workers']} workers x 1 thread, scale {res['scale']}")
        ax.legend()
        fig.tight_layout()
        files.append(path_prefix + "-jobs.png")
        fig.savefig(files[-1], dpi=110)
        plt.close(fig)
    its = [a for a, r in res["apps"].items() if "eclipsemr_iterations" in r]
    if its:
        fig, axs = plt.subplots(1, len(its), figsize=(4 * len(its), 3.2))
        axs = axs if len(its) > 1 else [axs]
        for ax, a in zip(axs, its):
            r = res["apps"][a]
            for key, lab in (("eclipsemr_iterations", "EclipseMR"), ("dask_iterations", "Dask bag"),
                             ("dask_persist_iterations", "Dask bag + persist"), ("spark_iterations", "Spark local + cache")):
                if key not in r:
                    continue
                ax.plot(range(1, len(r[key]) + 1), r[key], marker="o", label=lab)
            ax.set_title(a)
            ax.set_xticks(range(1, len(r["eclipsemr_iterations"]) + 1))
            ax.set_xlabel("iteration")
            ax.set_ylabel("seconds")
            ax.set_ylim(bottom=0)
        axs[0].legend()
        fig.tight_layout()
        files.append(path_prefix + "-iterations.png")
        fig.savefig(files[-1], dpi=110)
        plt.close(fig)
    return files


def plot_sim(summary: List[dict], path: str) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pols = ["laf", "ch", "dask", "delay"]
    cbs = sorted({r["cache_blocks"] for r in summary})
    fig, axs = plt.subplots(1, 2, figsize=(9, 3.4))
    w = 0.8 / len(pols)
    for j, p in enumerate(pols):
        rows = [next(r for r in summary if r["policy"] == p and r["cache_blocks"] == cb) for cb in cbs]
        xs = [i + (j - 1.5) * w for i in range(len(cbs))]
        axs[0].bar(xs, [r["hit_ratio"] for r in rows], w, label=p)
        axs[1].bar(xs, [r["imbalance"] for r in rows], w, label=p)
    for ax, t in zip(axs, ("cache hit ratio", "imbalance (max/mean tasks per worker)")):
        ax.set_xticks(range(len(cbs)), [f"cache {cb}" for cb in cbs])
        ax.set_xlabel("cache size per worker (blocks)")
        ax.set_title(t)
    axs[1].axhline(1.2, color="gray", ls="--", lw=0.8)
    axs[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
