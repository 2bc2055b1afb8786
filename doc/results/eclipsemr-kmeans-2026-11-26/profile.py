"""Where one later k-means iteration of EclipseMR spends its time (scale 1: 8 blocks of 20 000
8-d points, LocalCluster of 2 worker processes x 1 thread), and what each engine pays per block
in one process: read + parse (plain Dask, every iteration), iCache read + unpickle (wort pool),
the map itself (the same code in every engine)."""
import os, pickle, statistics, sys, time
from distributed import Client, LocalCluster
from wort.mr import EclipseMR
from wort.mr.apps import get_app
from wort.mr.bench import make_inputs
from wort.mr.cache import Cache
import wort.mr.engine as E


def per_block(ds, app, n=20):
    b = ds.blocks[0]
    pts = app.decode(b.read(), b.name)
    c = Cache("/work/mrscratch/prof-%d.pool" % os.getpid(), 64 << 20)
    c.put(b"k", pickle.dumps(pts, protocol=5))
    cent = app.init(ds, {"k": 5})
    def tm(f):
        t = time.perf_counter()
        for _ in range(n):
            f()
        return (time.perf_counter() - t) / n * 1e3
    out = {"read+parse ms": tm(lambda: app.decode(b.read(), b.name)),
           "pool get+unpickle ms": tm(lambda: pickle.loads(c.get(b"k"))),
           "map ms": tm(lambda: list(app.map(pts, (None, cent))))}
    c.close()
    os.remove(c.path)
    return out


if __name__ == "__main__":
    ds = make_inputs("/work/mrscratch/kab-data", 1)["points"]
    app = get_app("kmeans")
    print({k: round(v, 1) for k, v in per_block(ds, app).items()})
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cl, Client(cl) as c:
        mr = EclipseMR(c, cache_dir="/work/mrscratch/prof-cache-%d" % os.getpid())
        mr.iterate(app, ds, 2, {"k": 5}, user_id="prof%d" % os.getpid())  # fills the caches
        cent = app.init(ds, {"k": 5})
        og = c.gather
        marks = {}
        def gather(fs, *a, **k):
            t = time.perf_counter(); r = og(fs, *a, **k); marks["g"] = (t, time.perf_counter(), r); return r
        c.gather = gather
        rows = []
        for rep in range(int(sys.argv[1]) if len(sys.argv) > 1 else 8):
            t0 = time.perf_counter()
            st = E.JobStats("k")
            mr._run(app, ds, (None, cent), "kmeans", "prof", False, True, st)
            t1 = time.perf_counter()
            mr._save_iteration(b"o/kmeans/prof/it/x/", rep, cent, mr._ws)
            t2 = time.perf_counter()
            ga, gb, infos = marks["g"]
            busy = {}
            for i in infos:
                busy[i["worker"]] = busy.get(i["worker"], 0) + i["seconds"]
            rows.append({"job": t1 - t0, "submit": ga - t0, "maps (busiest worker)": max(busy.values()),
                         "dask wait beyond the busiest worker's maps": (gb - ga) - max(busy.values()),
                         "merge in driver": t1 - gb, "store state": t2 - t1,
                         "tasks per worker": tuple(sorted(st.placement.values()))})
        for k in rows[0]:
            if k == "tasks per worker":
                print(k, sorted({r[k] for r in rows}))
            else:
                print("%s: median %.1f ms" % (k, statistics.median(r[k] for r in rows) * 1e3))
    print("load average", os.getloadavg())
