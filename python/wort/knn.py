"""wort.knn: exact k-nearest-neighbor search over an SS-tree kept in a pool file (wort/knn.h).

    import numpy as np
    import wort.knn

    points = np.random.default_rng(1).normal(size=(100_000, 64)).astype(np.float32)
    wort.knn.build("vectors.pool", points, name="v", method="kmeans", degree=128)
    with wort.knn.open("vectors.pool", name="v") as tree:
        ids, dists = tree.search(points[:10], k=32)        # PSB on the CPU
        ids2, _ = tree.search(points[:10], k=32, engine="brute")
        assert (ids == ids2).all()

The tree is built bottom-up in one batch (thesis chapter V: k-means or Hilbert order, leaves
filled to 100%, Ritter's bounding spheres) and published in the pool by one 8-byte store: a
crash at any instant leaves the previous tree of that name or the new one, never a half-built
one, and opening reads only the tree's header. Every engine ("psb", "bnb" branch-and-bound,
"brute") is exact: it returns the same ids and distances as the brute-force scan. Distances
are squared Euclidean distances in float32, each row sorted by (distance, id).

Arrays: points and queries are 2-D (n, dim), converted to C-contiguous float32; ids (optional,
one per point) to uint64 (default: the row numbers). Results are numpy arrays of shape
(queries, k): ids as uint64, distances as float32. Bad input (NaN or infinite coordinates, a
dimension mismatch, k = 0 or k > points, no points) raises wort.InvalidArgumentError (a
ValueError) and leaves any existing tree untouched. The GIL is released while wort works.
"""

from __future__ import annotations

import os
from typing import Optional, Tuple, Union

import numpy as np

from . import _parse_size, _wort
from . import InvalidArgumentError

__all__ = ["build", "open", "drop", "gpu_available", "KnnIndex"]


def _matrix(x: object, what: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 2:
        raise InvalidArgumentError(f"{what} must be a 2-D array (rows, dim), not of shape {a.shape}")
    if a.dtype.kind not in "fiu":
        raise InvalidArgumentError(f"{what} must be numeric, not {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.float32)


def build(path: Union[str, os.PathLike], points: object, *, name: str = "knn", ids: Optional[object] = None,
          method: str = "kmeans", degree: int = 128, kmeans_k: int = 0, kmeans_iterations: int = 10,
          seed: int = 1, threads: int = 0, size: Union[int, str, None] = None, device: str = "cpu") -> dict:
    """Builds a tree of `points` and publishes it as `name` in the pool file at `path` (created if
    absent; its maximum size `size` - default four times the points' bytes, at least 1 GiB - is
    fixed when the pool is created). Replaces a tree of that name. Returns build timings and where
    the steps ran (assign_device, keys_device, seconds_gpu).

    device="gpu" runs the k-means assignments and the Hilbert keys on the GPU (the tree is byte
    for byte the CPU's); NotSupportedError, nothing written, where wort has no CUDA or no GPU."""
    pts = _matrix(points, "points")
    id_arr = None
    if ids is not None:
        id_arr = np.ascontiguousarray(np.asarray(ids), dtype=np.uint64)
        if id_arr.ndim != 1 or id_arr.shape[0] != pts.shape[0]:
            raise InvalidArgumentError(f"ids must be 1-D with one entry per point ({pts.shape[0]}), not {id_arr.shape}")
    if size is None:
        size_b = max(1 << 30, 4 * pts.nbytes + (64 << 20))
    else:
        size_b = _parse_size(size)
    return dict(_wort.knn_build(os.fspath(path), name, pts, id_arr, method, int(degree), int(kmeans_k),
                                int(kmeans_iterations), int(seed), int(threads), size_b, str(device)))


def open(path: Union[str, os.PathLike], *, name: str = "knn") -> "KnnIndex":
    """Opens the tree `name` of the pool file at `path` (NotFoundError if either is absent)."""
    return KnnIndex(_wort.knn_open(os.fspath(path), name))


def drop(path: Union[str, os.PathLike], *, name: str = "knn") -> None:
    """Removes the tree `name` from the pool at `path` and frees its space."""
    _wort.knn_drop(os.fspath(path), name)


def gpu_available() -> Tuple[bool, str]:
    """(True, device name) where wort was built with CUDA and a GPU is present, else (False, why)."""
    ok, why = _wort.knn_gpu_available()
    return bool(ok), str(why)


class KnnIndex:
    """An open tree. Use as a context manager, or call close(). search() may be called from many
    Python threads at once (the GIL is released while it runs)."""

    def __init__(self, impl: "_wort.KnnTree") -> None:
        self._impl: Optional[_wort.KnnTree] = impl
        self.last_counters: dict = {}

    def _live(self) -> "_wort.KnnTree":
        if self._impl is None:
            raise InvalidArgumentError("the kNN index is closed")
        return self._impl

    @property
    def info(self) -> dict:
        """dim, degree, points, leaves, inner_nodes, height, method, seed, bytes."""
        return dict(self._live().info())

    def search(self, queries: object, k: int, *, engine: str = "psb", device: str = "cpu",
               threads: int = 0) -> Tuple[np.ndarray, np.ndarray]:
        """The k nearest points of each query: (ids, squared distances), each of shape (queries, k).
        A 1-D query is taken as one row. threads: CPU threads over the queries (0: all cores).
        The counters of the search (nodes visited, bytes read) are left in `last_counters`."""
        q = np.asarray(queries)
        if q.ndim == 1:
            q = q.reshape(1, -1)
        q = _matrix(q, "queries")
        k = int(k)
        if k <= 0:
            raise InvalidArgumentError(f"k must be at least 1, not {k}")
        ids = np.empty((q.shape[0], k), dtype=np.uint64)
        dists = np.empty((q.shape[0], k), dtype=np.float32)
        self.last_counters = dict(self._live().search(q, k, engine, device, int(threads), ids, dists))
        return ids, dists

    def check(self) -> None:
        """Verifies the whole tree (checksums, links, every point inside its spheres); raises
        CorruptionError with the findings."""
        self._live().check()

    def close(self) -> None:
        if self._impl is not None:
            impl, self._impl = self._impl, None
            impl.close()

    def __enter__(self) -> "KnnIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
