"""k-means later iterations, EclipseMR vs plain Dask bag, interleaved rounds (medians)."""
import json, os, statistics, sys, time
from distributed import Client, LocalCluster
from wort.mr import EclipseMR
from wort.mr.apps import get_app
from wort.mr.bench import dask_iterate, make_inputs

if __name__ == "__main__":
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    ds = make_inputs("/work/mrscratch/kab-data", 1)["points"]
    app = get_app("kmeans")
    mine, theirs = [], []
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cl, Client(cl) as c:
        mr = EclipseMR(c, cache_dir="/work/mrscratch/kab-cache-%d" % os.getpid())
        for r in range(rounds):
            its, last = [], [time.perf_counter()]
            def tick(i, s):
                now = time.perf_counter(); its.append(now - last[0]); last[0] = now
            last[0] = time.perf_counter()
            mr.iterate(app, ds, 5, {"k": 5}, user_id=f"kab{os.getpid()}r{r}", on_iteration=tick)
            mine += its[1:]
            dt = []
            dask_iterate(app, ds, 5, {"k": 5}, False, dt)
            theirs += dt[1:]
    m, t = statistics.median(mine), statistics.median(theirs)
    print(json.dumps({"rounds": rounds, "eclipsemr_later_median": m, "dask_later_median": t, "ratio": t / m,
                      "eclipsemr_later": mine, "dask_later": theirs, "load": os.getloadavg()}))
