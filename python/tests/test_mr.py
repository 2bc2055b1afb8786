"""Tests of wort.mr (EclipseMR over Dask): applications against single-process references, the
rings and LAF, the cache's eviction and persistence, a worker killed with SIGKILL, bad input.
Clusters are small (2 workers, 1 thread each); only the kill test uses processes."""

import os
import pickle
import random
import signal
import time

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")  # the mr extra: pip install .[mr]
from distributed import Client, LocalCluster  # noqa: E402

from wort.mr import (LAF, RING, AppError, Cache, CorruptBlockError, EclipseMR, InputError, JobStats,  # noqa: E402
                     StaticRing, get_app, hash_key, run_app)
from wort.mr import data, sim  # noqa: E402
from wort.mr.apps import App, ITERATIONS  # noqa: E402
from wort.mr.cache import ObjectMemo, icache_key, ocache_prefix  # noqa: E402
from wort.mr.engine import _w_delete_prefix  # noqa: E402
from wort.mr.ring import make_policy  # noqa: E402


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("mrdata")
    return {
        "text": data.gen_text(str(d / "text"), blocks=6, lines=200, seed=3),
        "points": data.gen_points(str(d / "points"), blocks=4, points=400, seed=4),
        "labeled": data.gen_points(str(d / "labeled"), blocks=4, points=400, labels=True, seed=5),
        "graph": data.gen_graph(str(d / "graph"), blocks=4, nodes=1500, seed=6),
        "dir": d,
    }


@pytest.fixture(scope="module")
def mr(tmp_path_factory):
    cache = tmp_path_factory.mktemp("mrcache")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cl, \
            Client(cl) as client:
        yield EclipseMR(client, cache_dir=str(cache), spill_threshold=100)


APP_INPUT = {"wordcount": ("text", None), "grep": ("text", r"\b[st]\w*ing\b"), "invindex": ("text", None),
             "sort": ("text", None), "kmeans": ("points", {"k": 5}), "logreg": ("labeled", {"lr": 0.5}),
             "pagerank": ("graph", None)}


def _same(out, ref):
    if isinstance(ref, np.ndarray):
        return out.shape == ref.shape and np.allclose(out, ref, rtol=1e-9, atol=1e-12)
    return out == ref


@pytest.mark.parametrize("name", sorted(APP_INPUT))
def test_application_equals_reference(mr, inputs, name):
    kind, params = APP_INPUT[name]
    ds = inputs[kind]
    app = get_app(name)
    ref = app.reference(ds, params)
    assert ref is not None and len(ref) > 0
    first = JobStats(name)
    out = run_app(mr, name, ds, params, user_id="ref", stats=first)
    assert _same(out, ref)
    assert first.maps == len(ds.blocks) * ITERATIONS.get(name, 1)
    assert first.placed_as_asked == first.maps  # every map task ran on the worker LAF named
    # resubmitted: the same result, from the caches (map outputs, or the stored iterations)
    again = JobStats(name)
    assert _same(run_app(mr, name, ds, params, user_id="ref", stats=again), ref)
    if app.iterative:
        assert again.resumed_from == ITERATIONS[name] and again.iterations_run == 0
    else:  # the reducers' stored intermediate results answer it: no map task runs
        assert again.reused_shuffle == 1 and again.maps == 0
        # without them (dropped here), each map task reuses its block's output in the oCache
        mr.client.run(_w_delete_prefix, ocache_prefix(name, "ref") + b"j/")
        third = JobStats(name)
        assert _same(run_app(mr, name, ds, params, user_id="ref", stats=third), ref)
        assert third.ocache_hits == third.maps == len(ds.blocks) and third.reused_shuffle == 0


def test_iterations_reuse_decoded_blocks_and_reduce_in_driver(mr, inputs):
    """Later iterations take the decoded blocks from the workers' memory; k-means' small map
    outputs all travel with the map results, so the driver merges them (no reduce tasks);
    page rank's spill (threshold 100 keys here) and go through the reducers."""
    before = sum(mr.client.run(lambda dask_worker: dask_worker.plugins["wort-mr"].memo.hits).values())
    st = JobStats("kmeans")
    mr.iterate(get_app("kmeans"), inputs["points"], 3, {"k": 5}, user_id="memo", stats=st)
    hits = sum(mr.client.run(lambda dask_worker: dask_worker.plugins["wort-mr"].memo.hits).values())
    assert hits - before >= 2 * len(inputs["points"].blocks)  # iterations 2 and 3 at least
    assert st.reduced_in_driver == 3
    st = JobStats("pagerank")
    out = mr.iterate(get_app("pagerank"), inputs["graph"], 2, user_id="memo", stats=st)
    assert st.reduced_in_driver == 0
    assert _same(out, get_app("pagerank").reference(inputs["graph"]))


@pytest.mark.parametrize("name", sorted(APP_INPUT))
def test_map_does_not_modify_its_input(inputs, name):
    """Workers hand the same decoded block to every map task (ObjectMemo)."""
    kind, params = APP_INPUT[name]
    app = get_app(name)
    b = inputs[kind].blocks[0]
    obj = app.decode(b.read(), b.name)
    before = pickle.dumps(obj)
    ps = (params, app.init(inputs[kind], params)) if app.iterative else params
    list(app.map(obj, ps))
    assert pickle.dumps(obj) == before


def test_object_memo_is_bounded():
    m = ObjectMemo(100)
    m.put(b"a", [1], 60)
    m.put(b"b", [2], 30)
    assert m.get(b"a") == [1]  # a is now the most recently used
    m.put(b"c", [3], 40)  # 130 > 100: b goes
    assert m.get(b"b") is None and m.get(b"a") == [1] and m.get(b"c") == [3]
    m.put(b"d", [4], 101)  # larger than the whole memo: not kept
    assert m.get(b"d") is None and len(m) == 2
    assert ObjectMemo(0).get(b"a") is None


def test_spill_threshold_one_and_plain_policies(mr, inputs, tmp_path):
    """Many small spills (threshold 1 key) and the other real policies give the same counts."""
    ds = inputs["text"]
    ref = get_app("wordcount").reference(ds)
    for policy in ("ch", "dask"):
        m = EclipseMR(mr.client, policy=policy, cache_dir=str(tmp_path / policy), spill_threshold=1)
        assert m.run(get_app("wordcount"), ds, user_id=policy, reuse=False) == ref


# ---- rings and LAF ------------------------------------------------------------------------------

def _check_cover(laf):
    b = laf.bounds
    assert b[0] == 0 and b[-1] == RING and len(b) == laf.n + 1
    assert all(b[i] <= b[i + 1] for i in range(laf.n))
    for _ in range(50):
        k = random.getrandbits(64)
        o = laf.owner(k)
        assert b[o] <= k < b[o + 1]  # the one range holding k


@pytest.mark.parametrize("n,alpha,skew", [(1, 1.0, 0.0), (3, 0.5, 4.0), (40, 0.2, 8.0), (7, 1.0, 30.0)])
def test_laf_bounds_cover_ring_exactly_once(n, alpha, skew):
    rng = random.Random(n)
    laf = LAF(n, bins=256, window=512, alpha=alpha, update_every=16, tolerance=0.0)
    _check_cover(laf)
    for i in range(3000):
        # a skewed, drifting stream: most keys near a moving hot spot
        centre = (i // 1000) / 3
        x = (centre + rng.random() ** (1 + skew) * rng.choice((-1, 1)) * 0.2) % 1.0
        laf.observe(min(RING - 1, int(x * RING)))
        if i % 97 == 0:
            _check_cover(laf)
    _check_cover(laf)
    assert n == 1 or laf.moves > 0


def test_laf_converges_on_stationary_distribution():
    rng = np.random.default_rng(7)
    n = 8
    laf = LAF(n, bins=512, window=4096, alpha=0.3, update_every=64, tolerance=0.02)

    def draw(m):  # stationary and skewed: half the keys in a tenth of the ring
        hot = rng.uniform(0.30, 0.40, m // 2)
        cold = rng.uniform(0.0, 1.0, m - m // 2)
        return (np.concatenate([hot, cold]) * float(RING)).astype(np.uint64)

    def cdf(x):  # of the stationary distribution
        return 0.5 * min(1.0, max(0.0, (x - 0.30) / 0.10)) + 0.5 * x

    def quantile(q):
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if cdf(mid) < q else (lo, mid)
        return lo

    true = [quantile(j / n) for j in range(1, n)]
    errors = [max(abs(b / RING - t) for b, t in zip(laf.bounds[1:-1], true))]
    for step in range(40):
        for k in rng.permutation(draw(1024)):
            laf.observe(int(k))
        errors.append(max(abs(b / RING - t) for b, t in zip(laf.bounds[1:-1], true)))
    assert errors[0] > 0.08  # it started far from the fair bounds (equal ranges)...
    assert max(errors[-10:]) < 0.03  # ...and stays near them (within the histogram's noise)
    fresh = draw(40000)
    counts = np.bincount([laf.owner(int(k)) for k in fresh], minlength=n)
    assert counts.max() / counts.mean() < 1.15  # each worker gets about the same share
    equal = np.bincount([min(n - 1, int(k) * n >> 64) for k in fresh], minlength=n)
    assert equal.max() / equal.mean() > 1.5  # (equal ranges would not be fair on this input)


def test_static_ring_moves_only_the_leaving_workers_keys():
    names = [f"w{i}" for i in range(5)]
    a, b = StaticRing(names), StaticRing(names[:2] + names[3:])
    keys = [hash_key(str(i)) for i in range(2000)]
    for k in keys:
        if names[a.owner(k)] != "w2":
            assert (names[:2] + names[3:])[b.owner(k)] == names[a.owner(k)]
    assert len({a.owner(k) for k in keys}) == 5
    with pytest.raises(ValueError):
        StaticRing(["x", "x"])


def test_simulator_policies_at_40_workers():
    res = {r["policy"]: r for r in sim.compare(workers=40, jobs=1500, seed=2)}
    assert set(res) == {"laf", "ch", "dask", "delay"}
    assert all(r["tasks"] == res["laf"]["tasks"] > 0 for r in res.values())
    assert res["laf"]["imbalance"] < res["ch"]["imbalance"]
    assert res["laf"]["hit_ratio"] > 2 * res["dask"]["hit_ratio"]


def test_laf_keeps_sending_a_block_where_it_is_cached():
    """After a bound moves, a key goes on to the worker that ran it (and caches its block) while
    that worker is not overloaded, then to its new owner; affinity=False always the owner."""
    names = ["a", "b", "c", "d"]
    for affinity in (True, False):
        p = make_policy("laf", affinity=affinity, slack=0.5, update_every=10 ** 6)
        p.reset(names)
        for i in range(40):  # ten tasks on every worker
            x = (i % 4) * (RING // 4) + RING // 5 + i
            p.preferred(x)
            p.observe(x)
        k = RING // 8 + 12345  # in worker 0's range
        assert p.preferred(k) == 0
        p.observe(k)
        p.laf.bounds = [0, RING // 16] + p.laf.bounds[2:]  # the bound moves: k is worker 1's now
        assert p.laf.owner(k) == 1
        assert p.preferred(k) == (0 if affinity else 1)
        p.observe(k)
        for i in range(20):  # worker 0 gets busy with its own keys
            x = RING // 32 + i
            p.preferred(x)
            p.observe(x)
        assert p.preferred(k) == 1  # overloaded: the owner takes it (a miss there)
        p.observe(k)
        assert p.preferred(k) == 1  # and from now on it is cached there
    with pytest.raises(ValueError):
        make_policy("laf", slack=-1)


def test_laf_spreads_a_job_over_the_workers():
    """No worker gets more than its share (rounded up) of one job's tasks, even when it caches
    all of their blocks; spread=False keeps them where the blocks are."""
    keys = [hash_key(f"points/part-{i:05d}") for i in range(8)]
    for spread in (True, False):
        p = make_policy("laf", spread=spread, slack=100.0)
        p.reset(["a", "b"])
        for k in keys:
            p.ran(k, 0)  # every block is cached on worker 0
        for _ in range(3):
            p.begin_job(len(keys))
            placed = []
            for k in keys:
                placed.append(p.preferred(k))
                p.observe(k)
            assert sorted(placed).count(0) == (4 if spread else 8)


def test_laf_bounds_share_out_the_load_that_can_move():
    """Tasks pinned to a worker (its cache holds their blocks) count as its load: the bounds give
    it a smaller share of the other keys, so the total is fair; the ranges still cover the ring."""
    rng = np.random.default_rng(7)
    laf = LAF(2, bins=64, window=3000, alpha=1.0, update_every=30, tolerance=0.0)
    for i in range(3000):
        if i % 3 == 2:
            laf.observe(int(rng.random() * RING), pinned=0)
        else:
            laf.observe(int(rng.random() * RING))
        if i % 300 == 0:
            _check_cover(laf)
    # 1000 pinned to worker 0 of 3000: fair is 1500 each, so worker 0 should own 500 of the
    # 2000 unpinned keys: a quarter of the ring
    assert abs(laf.bounds[1] / RING - 0.25) < 0.06
    assert laf.max_share() < 1.1
    laf = LAF(3, bins=64, window=300, alpha=1.0, update_every=30, tolerance=0.0)
    for i in range(300):  # worker 1's pinned load alone exceeds its fair share: an empty range
        laf.observe(int(rng.random() * RING), pinned=1 if i % 2 else None)
    assert laf.bounds[2] - laf.bounds[1] < RING // 64
    _check_cover(laf)


def test_laf_affinity_keeps_the_hits_of_consistent_hashing():
    tr = sim.make_trace(jobs=1500, workers=40, seed=2)
    for cb in (16, 256):
        laf = sim.simulate(make_policy("laf"), tr, cache_blocks=cb)
        plain = sim.simulate(make_policy("laf", affinity=False), tr, cache_blocks=cb)
        ch = sim.simulate(make_policy("ch"), tr, cache_blocks=cb)
        assert laf["hit_ratio"] >= 0.98 * ch["hit_ratio"]
        assert laf["hit_ratio"] > 1.1 * plain["hit_ratio"]
        assert laf["imbalance"] < 0.8 * ch["imbalance"]


def test_policies_are_shared_objects():
    """The simulator and EclipseMR both take ring.make_policy's objects."""
    p = make_policy("laf", window=64)
    p.reset(["a", "b", "c"])
    k = hash_key("block")
    assert p.preferred(k) == p.laf.owner(k)
    with pytest.raises(ValueError):
        make_policy("fifo")


# ---- the cache ----------------------------------------------------------------------------------

def test_eviction_never_drops_pinned_ocache(tmp_path):
    c = Cache(str(tmp_path / "w.pool"), capacity=20000, pool_size=16 << 20)
    c.pin("km", "u1")
    pre = ocache_prefix("km", "u1")
    for i in range(30):  # 30 x 1000 bytes of a running job's outputs: more than the capacity
        c.put(pre + b"it/%03d" % i, bytes([i]) * 1000)
        c.put(icache_key(i), b"x" * 1500)
        c.put(ocache_prefix("other", "u") + b"m/%03d" % i, b"y" * 500)
    for i in range(30):
        assert c.get(pre + b"it/%03d" % i) == bytes([i]) * 1000
    assert c.get(icache_key(0)) is None and c.stats()["evictions"] > 0
    assert c.stats()["over"] > 0  # it says that it exceeded its capacity to keep them
    c.close()
    c = Cache(str(tmp_path / "w.pool"), capacity=20000, pool_size=16 << 20)  # reopened: still there
    assert all(c.get(pre + b"it/%03d" % i) is not None for i in range(30))
    c.unpin("km", "u1")
    c.put(icache_key(99), b"z" * 1500)  # now the job is over, its outputs may go
    assert c.stats()["bytes"] <= 20000
    assert c.get(icache_key(99)) == b"z" * 1500
    c.close()


def test_evicted_space_is_reused(tmp_path):
    """30 MB written through a cache of 1 MB in an 8 MB pool: eviction frees pool space."""
    c = Cache(str(tmp_path / "r.pool"), capacity=1 << 20, pool_size=8 << 20)
    for i in range(100):
        c.put(icache_key(i), bytes([i]) * 300000)
    assert c.get(icache_key(99)) == bytes([99]) * 300000 and c.stats()["bytes"] <= 1 << 20
    c.close()


def test_ttl_and_lru_order_survive_reopen(tmp_path):
    p = str(tmp_path / "t.pool")
    c = Cache(p, capacity=3000, pool_size=16 << 20)
    c.put(b"o/a/u/x", b"1" * 1000, ttl=0.2)
    c.put(b"o/a/u/y", b"2" * 1000)
    c.put(b"o/a/u/z", b"3" * 1000)
    c.get(b"o/a/u/y")
    time.sleep(0.3)
    assert c.get(b"o/a/u/x") is None  # expired
    c.close()
    c = Cache(p, capacity=3000, pool_size=16 << 20)
    c.put(b"o/a/u/w", b"4" * 1500)  # evicts the least recent by write time: y, then z
    assert c.get(b"o/a/u/z") is not None or c.get(b"o/a/u/y") is None
    assert c.stats()["bytes"] <= 3000
    c.close()
    with pytest.raises(ValueError):
        ocache_prefix("bad/app", "u")


def test_small_cache_job_keeps_its_iterations(mr, inputs, tmp_path):
    """Capacity far below the job's data: iCache blocks are evicted, the running job's
    iteration outputs are not, and the result is still right."""
    ds = inputs["points"]
    m = EclipseMR(mr.client, cache_dir=str(tmp_path / "tiny"), capacity=4096)
    app = get_app("kmeans")
    st = JobStats("kmeans")
    out = m.iterate(app, ds, 5, {"k": 5}, user_id="tiny", stats=st)
    assert _same(out, app.reference(ds, {"k": 5}))
    assert sum(s["evictions"] for s in m.cache_stats().values()) > 0
    assert max(m.progress(app, ds, 5, {"k": 5}, user_id="tiny").values()) == 5
    EclipseMR(mr.client, cache_dir=str(mr_cache_dir(mr)))  # back to the module's cache


def mr_cache_dir(mr):
    return mr.client.run(lambda dask_worker: os.path.dirname(dask_worker.plugins["wort-mr"].cache.path)).popitem()[1]


# ---- bad input ------------------------------------------------------------------------------------

class Boom(App):
    name = "boom"

    def map(self, text, params):
        yield "a", 1
        raise RuntimeError("boom in the mapper")


def _still_works(mr, inputs):
    ds = inputs["text"]
    assert mr.run(get_app("wordcount"), ds, user_id="after", reuse=False) == get_app("wordcount").reference(ds)
    assert all(s["entries"] >= 0 for s in mr.cache_stats().values())


def test_missing_input(mr, inputs, tmp_path):
    with pytest.raises(InputError, match="no _manifest.json"):
        mr.run(get_app("wordcount"), str(tmp_path / "nothing"))
    ds = data.gen_text(str(tmp_path / "t"), blocks=3, lines=20, seed=9)
    os.remove(ds.blocks[1].url)
    with pytest.raises(InputError, match="part-00001 is missing"):
        mr.run(get_app("wordcount"), ds, user_id="missing")
    _still_works(mr, inputs)


def test_corrupt_block(mr, inputs, tmp_path):
    ds = data.gen_text(str(tmp_path / "c"), blocks=3, lines=20, seed=10)
    with open(ds.blocks[2].url, "r+b") as f:
        f.seek(5)
        f.write(b"#")
    with pytest.raises(CorruptBlockError, match="part-00002 is corrupt"):
        mr.run(get_app("wordcount"), ds, user_id="corrupt")
    # nothing of the corrupt block was cached
    assert not any(mr.client.run(lambda dask_worker, k=icache_key(ds.blocks[2].key, "utf8"):
                                 dask_worker.plugins["wort-mr"].cache.get(k) is not None).values())
    _still_works(mr, inputs)


def test_application_that_raises(mr, inputs):
    with pytest.raises(AppError, match="boom: map over block .*boom in the mapper"):
        mr.run(Boom(), inputs["text"], user_id="boom")
    with pytest.raises(AppError, match="kmeans: init over .*could not convert"):
        mr.iterate(get_app("kmeans"), inputs["text"], 2, user_id="badk")  # text is not CSV points
    with pytest.raises(AppError, match="kmeans: decoding input block .*part-00001"):
        bad = data.write_dataset(str(inputs["dir"] / "badpts"), "points",
                                 [inputs["points"].blocks[0].read(), b"1,2,3,x\n"])
        mr.iterate(get_app("kmeans"), bad, 2, user_id="badk")
    _still_works(mr, inputs)


# ---- a worker killed with SIGKILL -------------------------------------------------------------------

class Stop(Exception):
    pass


def test_sigkill_during_kmeans(tmp_path, inputs):
    ds = data.gen_points(str(tmp_path / "pts"), blocks=6, points=300, seed=11)
    app = get_app("kmeans")
    params = {"k": 4}
    ref = app.reference(ds, params)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
            Client(cl) as client:
        mr = EclipseMR(client, cache_dir=str(tmp_path / "cache"))

        def kill_holder(user, it):
            held = mr.progress(app, ds, 5, params, user_id=user)
            addr = next(a for a, i in held.items() if i == it)
            pid = client.run(os.getpid, workers=[addr])[addr]
            os.kill(pid, signal.SIGKILL)
            return addr

        # 1. killed during the run: the job completes with the same result
        killed = []

        def during(it, state):
            if it == 2:
                killed.append(kill_holder("kill1", 2))

        st = JobStats("kmeans")
        out = mr.iterate(app, ds, 5, params, user_id="kill1", on_iteration=during, stats=st)
        assert killed and _same(out, ref) and st.iterations_run == 5

        # 2. the job dies after iteration 3, whose output is on a worker killed with it; the
        # resubmitted job restarts from iteration 3 (read back from the restarted worker's pool)
        def stop(it, state):
            if it == 3:
                kill_holder("kill2", 3)
                raise Stop

        with pytest.raises(Stop):
            mr.iterate(app, ds, 5, params, user_id="kill2", on_iteration=stop)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if len(client.scheduler_info()["workers"]) == 2 and 3 in mr.progress(app, ds, 5, params, user_id="kill2").values():
                    break
            except Exception:
                pass
            time.sleep(0.5)
        st2 = JobStats("kmeans")
        out2 = mr.iterate(app, ds, 5, params, user_id="kill2", stats=st2)
        assert st2.resumed_from == 3 and st2.iterations_run == 2
        assert _same(out2, ref)
        # and the first job's outputs are all still there: a third run computes nothing
        st3 = JobStats("kmeans")
        assert _same(mr.iterate(app, ds, 5, params, user_id="kill1", stats=st3), ref)
        assert st3.resumed_from == 5 and st3.maps == 0


# ---- README ---------------------------------------------------------------------------------------

def test_readme_mr_snippet(tmp_path, monkeypatch, capsys):
    """README's wort.mr snippet is python/tests/readme_mr.py verbatim, and it runs."""
    here = os.path.dirname(os.path.abspath(__file__))
    snippet = os.path.join(here, "readme_mr.py")
    with open(snippet) as f, open(os.path.join(here, "..", "..", "README.md")) as r:
        assert f"```python\n{f.read()}```\n" in r.read()
    monkeypatch.chdir(tmp_path)
    import runpy
    runpy.run_path(snippet, run_name="__main__")
    out = capsys.readouterr().out
    assert out.startswith("[(") and (tmp_path / "wort-mr-cache" / "0.pool").exists()


def test_cli_import_and_run(tmp_path):
    """`python -m wort.mr import` splits a text file at line ends; `run --input --check` runs
    word count on it on a LocalCluster and matches the reference."""
    import json
    import subprocess
    import sys
    src = tmp_path / "in.txt"
    lines = [" ".join(f"w{(i * 7 + j) % 13}" for j in range(i % 5)) for i in range(400)]
    src.write_text("\n".join(lines) + "\n")
    env = dict(os.environ, WORT_MR_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run([sys.executable, "-m", "wort.mr", "import", str(src), str(tmp_path / "ds"), "--block-size", "700"],
                   check=True, env=env, cwd=tmp_path)
    ds = data.open_dataset(str(tmp_path / "ds"))
    assert len(ds.blocks) > 3 and b"".join(b.read() for b in ds.blocks) == src.read_bytes()
    assert all(b.read().endswith(b"\n") for b in ds.blocks)
    p = subprocess.run([sys.executable, "-m", "wort.mr", "run", "wordcount", "--workers", "2", "--in-process", "--input",
                        str(tmp_path / "ds"), "--check", "--json", str(tmp_path / "out.json")],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["equals_reference"] is True and out["result"]["keys"] == 13
    bad = subprocess.run([sys.executable, "-m", "wort.mr", "run", "wordcount", "--input", str(tmp_path / "nope")],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "no _manifest.json" in bad.stderr
