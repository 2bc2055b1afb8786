"""python -m wort.mr run APP | bench | simulate | import SRC DEST | plot DIR   (see doc/eclipsemr.md)"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _cmd_run(a) -> int:
    import numpy as np
    from distributed import Client, LocalCluster

    from . import run_app
    from .apps import ITERATIONS, get_app
    from .bench import APP_INPUT, make_inputs
    from .data import open_dataset
    from .engine import EclipseMR, JobStats

    app = get_app(a.app)
    kind, params = APP_INPUT[a.app]
    if a.pattern and a.app == "grep":
        params = a.pattern
    ds = open_dataset(a.input) if a.input else make_inputs(a.data, a.scale, a.seed)[kind]
    if a.scheduler:
        client = Client(a.scheduler)
        cluster = None
    else:
        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=not a.in_process,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        mr = EclipseMR(client, policy=a.policy, cache_dir=a.cache_dir, capacity=a.capacity)
        st = JobStats(a.app)
        t0 = time.perf_counter()
        kw = {"iterations": a.iterations or ITERATIONS.get(a.app)} if app.iterative else {}
        out = run_app(mr, a.app, ds, params, user_id=a.user, stats=st, **kw)
        dt = time.perf_counter() - t0
        summary = {"app": a.app, "input": ds.url, "blocks": len(ds.blocks), "seconds": dt,
                   "workers": len(mr.workers()), "stats": st.__dict__}
        if a.check:
            ref = app.reference(ds, params, **kw) if app.iterative else app.reference(ds, params)
            ok = bool(np.allclose(out, ref, rtol=1e-9, atol=1e-12)) if isinstance(ref, np.ndarray) else out == ref
            summary["equals_reference"] = ok
        if isinstance(out, dict):
            top = sorted(out.items(), key=lambda kv: kv[1] if isinstance(kv[1], (int, float)) else 0,
                         reverse=True)[:5] if a.app != "invindex" else []
            summary["result"] = {"keys": len(out), "sample": [[str(k), str(v)[:60]] for k, v in top]}
        elif isinstance(out, list):
            summary["result"] = {"items": len(out), "first": out[:3]}
        else:
            summary["result"] = np.asarray(out).round(6).tolist()[:10]
        print(json.dumps(summary, indent=1, default=str))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(summary, f, indent=1, default=str)
        return 0 if summary.get("equals_reference", True) else 1
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _cmd_simulate(a) -> int:
    from .bench import plot_sim, run_sim, summarize_sim
    os.makedirs(a.out, exist_ok=True)
    rows = run_sim(workers=a.workers, jobs=a.jobs, seeds=a.seeds, cache_blocks=a.cache_blocks, repeat=a.repeat)
    summary = summarize_sim(rows)
    with open(os.path.join(a.out, "simulate.json"), "w") as f:
        json.dump({"args": vars(a), "rows": rows, "summary": summary}, f, indent=1, default=str)
    png = plot_sim(summary, os.path.join(a.out, "simulate.png"))
    for r in summary:
        print(f"cache {r['cache_blocks']:4d} blocks/worker  {r['policy']:6s} hit ratio {r['hit_ratio']:.3f}  "
              f"imbalance {r['imbalance']:.3f}  mean job time {r['mean_jct']:.1f}")
    print("wrote", os.path.join(a.out, "simulate.json"), png)
    return 0


def _cmd_bench(a) -> int:
    from .bench import plot_real, plot_sim, run_real, run_sim, summarize_sim
    os.makedirs(a.out, exist_ok=True)
    res = run_real(a.out, workers=a.workers, scale=a.scale, apps=a.apps or None, spark=a.spark)
    res["args"] = vars(a)
    with open(os.path.join(a.out, "bench.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    files = plot_real(res, os.path.join(a.out, "bench"))
    if not a.no_sim:
        rows = run_sim(workers=40, jobs=a.sim_jobs, seeds=a.sim_seeds)
        summary = summarize_sim(rows)
        with open(os.path.join(a.out, "simulate.json"), "w") as f:
            json.dump({"rows": rows, "summary": summary}, f, indent=1)
        files.append(plot_sim(summary, os.path.join(a.out, "simulate.png")))
    print("wrote", os.path.join(a.out, "bench.json"), *files)
    return 0


def _cmd_import(a) -> int:
    from .cache import parse_size
    from .data import import_text
    ds = import_text(a.src, a.dest, parse_size(a.block_size))
    print(f"wrote {ds.url}: {len(ds.blocks)} blocks, {sum(b.size for b in ds.blocks)} bytes")
    return 0


def _cmd_plot(a) -> int:
    from .bench import plot_real, plot_sim
    files = []
    bj = os.path.join(a.dir, "bench.json")
    if os.path.exists(bj):
        with open(bj) as f:
            files += plot_real(json.load(f), os.path.join(a.dir, "bench"))
    sj = os.path.join(a.dir, "simulate.json")
    if os.path.exists(sj):
        with open(sj) as f:
            files.append(plot_sim(json.load(f)["summary"], os.path.join(a.dir, "simulate.png")))
    print("wrote", *files)
    return 0 if files else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m wort.mr", description="EclipseMR over Dask with wort caches")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run one application")
    r.add_argument("app", choices=["wordcount", "grep", "invindex", "sort", "kmeans", "logreg", "pagerank"])
    r.add_argument("--workers", type=int, default=2, help="LocalCluster workers (1 thread each)")
    r.add_argument("--in-process", action="store_true", help="LocalCluster workers as threads of this process")
    r.add_argument("--scheduler", help="address of an existing Dask scheduler (instead of a LocalCluster)")
    r.add_argument("--input", help="an existing dataset URL (default: generate one under --data)")
    r.add_argument("--data", default=os.path.join(os.getcwd(), "wort-mr-data"))
    r.add_argument("--scale", type=int, default=1)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--pattern", help="grep's regular expression")
    r.add_argument("--iterations", type=int)
    r.add_argument("--policy", default="laf", choices=["laf", "ch", "dask"])
    r.add_argument("--cache-dir", help="each worker's pool directory (default $WORT_MR_CACHE_DIR or <tmp>/wort-mr-<uid>)")
    r.add_argument("--capacity", default="256M", help="each worker's cache size")
    r.add_argument("--user", default="default", help="user id of the oCache entries")
    r.add_argument("--check", action="store_true", help="compare with the single-process reference")
    r.add_argument("--json", help="write the summary here")
    b = sub.add_parser("bench", help="EclipseMR vs plain Dask, and the simulator; JSON + PNG")
    b.add_argument("--out", default="wort-mr-bench")
    b.add_argument("--workers", type=int, default=2)
    b.add_argument("--scale", type=int, default=1, help="input size multiplier (1: a couple of minutes)")
    b.add_argument("--apps", nargs="*")
    b.add_argument("--no-sim", action="store_true")
    b.add_argument("--spark", action="store_true", help="also Spark local mode (needs pyspark and a JDK)")
    b.add_argument("--sim-jobs", type=int, default=4000)
    b.add_argument("--sim-seeds", type=int, default=3)
    s = sub.add_parser("simulate", help="the policies at the chapter's scale; JSON + PNG")
    s.add_argument("--out", default="wort-mr-bench")
    s.add_argument("--workers", type=int, default=40)
    s.add_argument("--jobs", type=int, default=4000)
    s.add_argument("--seeds", type=int, default=3)
    s.add_argument("--repeat", type=float, default=0.3)
    s.add_argument("--cache-blocks", type=int, nargs="+", default=[16, 64, 256])
    i = sub.add_parser("import", help="split a text file into a dataset (blocks + manifest) for run --input")
    i.add_argument("src", help="a text file (any fsspec URL)")
    i.add_argument("dest", help="the dataset's directory (any fsspec URL every worker can read)")
    i.add_argument("--block-size", default="4M")
    q = sub.add_parser("plot", help="redraw the PNG files of a bench/simulate output directory from its JSON")
    q.add_argument("dir")
    a = p.parse_args(argv)
    return {"run": _cmd_run, "bench": _cmd_bench, "simulate": _cmd_simulate, "plot": _cmd_plot,
            "import": _cmd_import}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
