"""wort.knn: exact kNN over the SS-tree from Python (numpy in, numpy out)."""
import numpy as np
import pytest

import wort
import wort.knn


def clustered(n, dim, seed, clusters=10, sd=50.0, means_seed=7):
    means = np.random.default_rng(means_seed).uniform(0, 10000, size=(clusters, dim))
    rng = np.random.default_rng(seed)
    return (means[rng.integers(0, clusters, n)] + rng.normal(0, sd, size=(n, dim))).astype(np.float32)


def exact(points, queries, k):
    d = ((queries.astype(np.float64)[:, None, :] - points.astype(np.float64)[None, :, :]) ** 2).sum(-1)
    order = np.lexsort((np.broadcast_to(np.arange(points.shape[0]), d.shape), d), axis=-1)[:, :k]
    return order, np.take_along_axis(d, order, axis=1)


@pytest.mark.parametrize("method", ["kmeans", "hilbert"])
def test_every_engine_is_exact(tmp_path, method):
    pts = clustered(4000, 16, 1)
    qs = clustered(25, 16, 2)
    path = tmp_path / "v.pool"
    st = wort.knn.build(path, pts, name="v", method=method, degree=32)
    assert st["bytes"] > pts.nbytes
    want_ids, want_d = exact(pts, qs, 10)
    with wort.knn.open(path, name="v") as t:
        assert t.info["points"] == 4000 and t.info["dim"] == 16 and t.info["method"] == method
        t.check()
        results = {}
        for engine in ("brute", "bnb", "psb"):
            ids, d = t.search(qs, 10, engine=engine)
            assert ids.dtype == np.uint64 and d.dtype == np.float32 and ids.shape == (25, 10)
            np.testing.assert_allclose(d, want_d, rtol=1e-5, atol=1e-3)
            assert (ids == want_ids).mean() > 0.99  # float32 near-ties may swap
            results[engine] = (ids, d, dict(t.last_counters))
        for engine in ("bnb", "psb"):
            assert (results[engine][0] == results["brute"][0]).all()
            assert (results[engine][1] == results["brute"][1]).all()
            assert results[engine][2]["point_bytes"] < results["brute"][2]["point_bytes"]


def test_ids_reopen_replace_drop(tmp_path):
    pts = clustered(1000, 4, 3)
    path = tmp_path / "v.pool"
    ids = np.arange(1000, dtype=np.uint64) * 3 + (1 << 63)
    wort.knn.build(path, pts, ids=ids, degree=16)
    with wort.knn.open(path) as t:
        got, d = t.search(pts[5], 1)  # a 1-D query is one row
        assert got[0, 0] == ids[5] and d[0, 0] == 0.0
    with wort.knn.open(path) as t:  # reopened: the same tree
        assert t.info["points"] == 1000
    wort.knn.build(path, pts[:100], degree=16)  # replace
    with wort.knn.open(path) as t:
        assert t.info["points"] == 100
    wort.knn.drop(path)
    with pytest.raises(wort.NotFoundError):
        wort.knn.open(path)


def test_bad_input_is_refused_and_the_tree_stays(tmp_path):
    pts = clustered(500, 3, 4)
    path = tmp_path / "v.pool"
    wort.knn.build(path, pts, degree=8)
    bad = pts.copy()
    bad[17, 1] = np.nan
    with pytest.raises(ValueError, match="point 17"):
        wort.knn.build(path, bad, degree=8)
    with pytest.raises(ValueError):
        wort.knn.build(path, np.zeros((0, 3), np.float32))
    with pytest.raises(ValueError):
        wort.knn.build(path, pts[:, 0])  # 1-D
    with pytest.raises(ValueError):
        wort.knn.build(path, pts, degree=2)
    with wort.knn.open(path) as t:
        assert t.info["points"] == 500
        with pytest.raises(ValueError):
            t.search(pts[:2, :2], 3)  # dimension mismatch
        with pytest.raises(ValueError):
            t.search(pts[:2], 0)
        with pytest.raises(ValueError):
            t.search(pts[:2], 501)
        q = pts[:2].copy()
        q[1, 2] = np.inf
        with pytest.raises(ValueError):
            t.search(q, 3)
        with pytest.raises(ValueError):
            t.search(pts[:2], 3, engine="nope")


def test_gpu_is_reported(tmp_path):
    ok, why = wort.knn.gpu_available()
    assert isinstance(why, str) and why
    path = tmp_path / "v.pool"
    pts = clustered(2000, 8, 5)
    wort.knn.build(path, pts, degree=16)
    with wort.knn.open(path) as t:
        if not ok:
            with pytest.raises(wort.NotSupportedError):
                t.search(pts[:1], 1, device="gpu")
            return
        for engine in ("brute", "bnb", "psb"):  # the GPU returns the CPU's bits
            gi, gd = t.search(pts[:50], 7, engine=engine, device="gpu")
            ci, cd = t.search(pts[:50], 7, engine=engine, device="cpu")
            assert (gi == ci).all() and (gd == cd).all()


def test_readme_snippet_runs(tmp_path, monkeypatch, capsys):
    """README's kNN snippet (tests/bindings/readme_knn.py, shown verbatim in README.md) runs."""
    import os
    import runpy
    here = os.path.dirname(os.path.abspath(__file__))
    monkeypatch.chdir(tmp_path)
    runpy.run_path(os.path.join(here, "..", "..", "tests", "bindings", "readme_knn.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert out.startswith("0 {") and "leaf_visits" in out
    assert (tmp_path / "vectors.pool").exists()
