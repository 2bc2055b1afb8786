"""wort.mr: EclipseMR (consistent-hash placement, locality-aware fair scheduling, persistent
caches in wort pools) as a layer over Dask distributed. See doc/eclipsemr.md.

    from distributed import Client, LocalCluster
    from wort.mr import EclipseMR, get_app, data
    ds = data.gen_text("/tmp/text", blocks=8)
    with LocalCluster(n_workers=2, threads_per_worker=1) as cl, Client(cl) as client:
        mr = EclipseMR(client, cache_dir="/tmp/wort-mr-cache")
        counts = mr.run(get_app("wordcount"), ds)
"""

from .apps import APPS, ITERATIONS, App, get_app
from .cache import Cache
from .data import CorruptBlockError, Dataset, InputError, open_dataset
from .engine import AppError, EclipseMR, JobStats, ShuffleLostError, WortMRPlugin
from .ring import LAF, RING, StaticRing, hash_key, make_policy

__all__ = ["APPS", "ITERATIONS", "App", "get_app", "Cache", "CorruptBlockError", "Dataset", "InputError",
           "open_dataset", "AppError", "EclipseMR", "JobStats", "ShuffleLostError", "WortMRPlugin", "LAF",
           "RING", "StaticRing", "hash_key", "make_policy", "run_app"]


def run_app(mr: "EclipseMR", name: str, dataset, params=None, **kw):
    """Runs application `name` (iterative ones for their chapter iteration count unless
    iterations= is given)."""
    app = get_app(name)
    if app.iterative:
        it = kw.pop("iterations", ITERATIONS[name])
        return mr.iterate(app, dataset, it, params, **kw)
    kw.pop("iterations", None)
    return mr.run(app, dataset, params, **kw)
