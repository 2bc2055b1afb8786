"""The chapter's applications and a single-process reference for each (the tests compare them).

An App has: decode(block bytes, block name) -> object (what the iCache keeps), map(object, params) ->
iterable of (key, value), combine(v, v) -> v (associative; None: no combining), reduce(key,
values) -> value, finish(output dict, params) -> the job's result. Iterative apps add
init(dataset, params) -> state, update(state, output, params) -> state, finish_state; their map
gets params = (params, state).
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List

import numpy as np

from .data import Dataset


class App:
    name = "app"
    reuse_map_output = True  # a repeated job may reuse a block's map output from the oCache
    iterative = False
    combine = None
    decoder = "utf8"  # names decode(): the iCache keeps a block once per decoder

    def decode(self, data: bytes, name: str):
        return data.decode("utf-8")

    def map(self, obj, params) -> Iterable:
        raise NotImplementedError

    def reduce(self, key, values: List[Any]):
        return values[0] if len(values) == 1 else values

    def finish(self, out: Dict, params):
        return out

    def reference(self, ds: Dataset, params=None):
        """The same result computed in this process, straight from the block files."""
        raise NotImplementedError


def _add(a, b):
    return a + b


class WordCount(App):
    name = "wordcount"
    combine = staticmethod(_add)

    def map(self, text, params):
        for w in text.split():
            yield w, 1

    def reduce(self, key, values):
        return sum(values)

    def reference(self, ds, params=None):
        out: Dict[str, int] = {}
        for b in ds.blocks:
            for w in b.read().decode().split():
                out[w] = out.get(w, 0) + 1
        return out


class Grep(App):
    """Counts the matches of a regular expression (params: the pattern; Hadoop's grep)."""

    name = "grep"
    combine = staticmethod(_add)

    def map(self, text, pattern):
        for m in re.finditer(pattern, text):
            yield m.group(0), 1

    def reduce(self, key, values):
        return sum(values)

    def reference(self, ds, pattern=None):
        out: Dict[str, int] = {}
        for b in ds.blocks:
            for m in re.finditer(pattern, b.read().decode()):
                out[m.group(0)] = out.get(m.group(0), 0) + 1
        return out


class InvertedIndex(App):
    """word -> sorted list of documents (a document is a line: 'block:line')."""

    name = "invindex"

    decoder = "named-utf8"

    def decode(self, data, name):
        return name, data.decode("utf-8")

    def map(self, obj, params):
        tag, body = obj
        for i, line in enumerate(body.splitlines()):
            for w in set(line.split()):
                yield w, f"{tag}:{i}"

    def reduce(self, key, values):
        return sorted(values)

    def reference(self, ds, params=None):
        out: Dict[str, List[str]] = {}
        for b in ds.blocks:
            for i, line in enumerate(b.read().decode().splitlines()):
                for w in set(line.split()):
                    out.setdefault(w, []).append(f"{b.name}:{i}")
        return {k: sorted(v) for k, v in out.items()}


class Sort(App):
    """Sorts the lines of the input: the result is the list of lines in order (duplicates kept)."""

    name = "sort"
    combine = staticmethod(_add)

    def map(self, text, params):
        for line in text.splitlines():
            yield line, 1

    def reduce(self, key, values):
        return sum(values)

    def finish(self, out, params):
        res: List[str] = []
        for line in sorted(out):
            res.extend([line] * out[line])
        return res

    def reference(self, ds, params=None):
        return sorted(line for b in ds.blocks for line in b.read().decode().splitlines())


def _csv(data: bytes) -> np.ndarray:
    a = np.loadtxt(data.decode().splitlines(), delimiter=",", ndmin=2)
    return np.ascontiguousarray(a, dtype=np.float64)


class KMeans(App):
    """params: k (default 5). State: the centroids (k x dim), initially the first k points."""

    name = "kmeans"
    iterative = True
    reuse_map_output = False
    combine = staticmethod(lambda a, b: (a[0] + b[0], a[1] + b[1]))

    decoder = "csv"

    def decode(self, data, name):
        return _csv(data)

    def init(self, ds, params):
        k = (params or {}).get("k", 5)
        pts = _csv(ds.blocks[0].read())
        if len(pts) < k:
            raise ValueError(f"kmeans: the first block has {len(pts)} points, fewer than k={k}")
        return pts[:k].copy()

    @staticmethod
    def assign(pts, cent):
        d = ((pts[:, None, :] - cent[None, :, :]) ** 2).sum(axis=2)
        return d.argmin(axis=1)

    def map(self, pts, ps):
        _, cent = ps
        lab = self.assign(pts, cent)
        for c in np.unique(lab):
            sel = pts[lab == c]
            yield int(c), (sel.sum(axis=0), len(sel))

    def reduce(self, key, values):
        return values[0]

    def update(self, cent, out, params):
        new = cent.copy()
        for c, (s, n) in out.items():
            new[c] = s / n
        return new

    def finish_state(self, state, params):
        return state

    def reference(self, ds, params=None, iterations=5):
        pts = [_csv(b.read()) for b in ds.blocks]
        cent = self.init(ds, params)
        for _ in range(iterations):
            sums = np.zeros_like(cent)
            cnt = np.zeros(len(cent))
            for p in pts:
                lab = self.assign(p, cent)
                for c in range(len(cent)):
                    sums[c] += p[lab == c].sum(axis=0)
                    cnt[c] += (lab == c).sum()
            for c in range(len(cent)):
                if cnt[c]:
                    cent[c] = sums[c] / cnt[c]
        return cent


class LogReg(App):
    """Batch gradient descent on the logistic loss; params: lr (default 1.0). State: weights
    (dim + 1: the last is the bias)."""

    name = "logreg"
    iterative = True
    reuse_map_output = False
    combine = staticmethod(lambda a, b: (a[0] + b[0], a[1] + b[1]))

    decoder = "csv"

    def decode(self, data, name):
        return _csv(data)

    def init(self, ds, params):
        d = _csv(ds.blocks[0].read()).shape[1] - 1
        return np.zeros(d + 1)

    @staticmethod
    def grad(a, w):
        x, y = a[:, :-1], a[:, -1]
        z = x @ w[:-1] + w[-1]
        e = 1 / (1 + np.exp(-z)) - y
        return np.append(x.T @ e, e.sum()), len(y)

    def map(self, a, ps):
        _, w = ps
        yield 0, self.grad(a, w)

    def reduce(self, key, values):
        return values[0]

    def update(self, w, out, params):
        g, n = out[0]
        return w - (params or {}).get("lr", 1.0) * g / n

    def finish_state(self, state, params):
        return state

    def reference(self, ds, params=None, iterations=10):
        blocks = [_csv(b.read()) for b in ds.blocks]
        w = self.init(ds, params)
        for _ in range(iterations):
            g = np.zeros_like(w)
            n = 0
            for a in blocks:
                gi, ni = self.grad(a, w)
                g += gi
                n += ni
            w = w - (params or {}).get("lr", 1.0) * g / n
        return w


def _adj(data: bytes) -> List[List[int]]:
    return [[int(x) for x in line.split()] for line in data.decode().splitlines() if line.strip()]


class PageRank(App):
    """rank = 0.15/N + 0.85 * sum(rank[u]/outdeg[u]); dangling nodes' rank is spread evenly.
    State: the rank vector (N = dataset meta 'nodes')."""

    name = "pagerank"
    iterative = True
    reuse_map_output = False
    combine = staticmethod(_add)

    decoder = "adjacency"

    def decode(self, data, name):
        return _adj(data)

    def init(self, ds, params):
        n = int(ds.meta["nodes"])
        return np.full(n, 1.0 / n)

    def map(self, adj, ps):
        _, rank = ps
        for row in adj:
            u, outs = row[0], row[1:]
            if outs:
                share = rank[u] / len(outs)
                for v in outs:
                    yield v, share
            else:
                yield -1, rank[u]  # dangling mass

    def reduce(self, key, values):
        return values[0]

    def update(self, rank, out, params):
        n = len(rank)
        new = np.zeros(n)
        dangling = 0.0
        for v, s in out.items():
            if v == -1:
                dangling = s
            else:
                new[v] = s
        return 0.15 / n + 0.85 * (new + dangling / n)

    def finish_state(self, state, params):
        return state

    def reference(self, ds, params=None, iterations=2):
        adj = [row for b in ds.blocks for row in _adj(b.read())]
        rank = self.init(ds, params)
        n = len(rank)
        for _ in range(iterations):
            new = np.zeros(n)
            dangling = 0.0
            for row in adj:
                u, outs = row[0], row[1:]
                if outs:
                    for v in outs:
                        new[v] += rank[u] / len(outs)
                else:
                    dangling += rank[u]
            rank = 0.15 / n + 0.85 * (new + dangling / n)
        return rank


APPS = {a.name: a for a in (WordCount, Grep, InvertedIndex, Sort, KMeans, LogReg, PageRank)}
ITERATIONS = {"kmeans": 5, "logreg": 10, "pagerank": 2}


def get_app(name: str) -> App:
    try:
        return APPS[name]()
    except KeyError:
        raise ValueError(f"unknown application {name!r}: {', '.join(sorted(APPS))}") from None
