"""The file layer: a dataset is a directory of block files in any fsspec file system, with a
manifest (_manifest.json: block names, sizes, BLAKE2b checksums). A block's ring key is the hash
of the dataset's URL and the block's name, so a repeated job finds the same blocks under the
same keys. Seeded generators write the applications' inputs."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import List, Optional

import fsspec
import numpy as np

from .ring import hash_key

MANIFEST = "_manifest.json"
WORDS = "/usr/share/dict/words"


class InputError(Exception):
    """Missing or unreadable input (dataset, manifest or block)."""


class CorruptBlockError(InputError):
    """A block's contents do not match the checksum in the manifest."""


@dataclass(frozen=True)
class Block:
    url: str      # the block file
    name: str
    size: int
    digest: str   # BLAKE2b-128 hex of the contents
    key: int      # ring key

    def read(self) -> bytes:
        try:
            with fsspec.open(self.url, "rb") as f:
                data = f.read()
        except FileNotFoundError as e:
            raise InputError(f"input block {self.url} is missing") from e
        except OSError as e:
            raise InputError(f"input block {self.url} cannot be read: {e}") from e
        if len(data) != self.size or _digest(data) != self.digest:
            raise CorruptBlockError(f"input block {self.url} is corrupt: {len(data)} bytes, checksum "
                                    f"{_digest(data)}, the manifest says {self.size} bytes, {self.digest}")
        return data


@dataclass(frozen=True)
class Dataset:
    url: str
    kind: str
    blocks: List[Block]
    meta: dict

    @property
    def fingerprint(self) -> str:
        h = hashlib.blake2b(digest_size=8)
        h.update(self.url.encode())
        for b in self.blocks:
            h.update(b.digest.encode())
        return h.hexdigest()


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _join(url: str, name: str) -> str:
    return url.rstrip("/") + "/" + name


def open_dataset(url: str) -> Dataset:
    """Reads a dataset's manifest (InputError when it is missing or malformed)."""
    url = os.path.abspath(url) if "://" not in url else url
    murl = _join(url, MANIFEST)
    try:
        with fsspec.open(murl, "rt") as f:
            m = json.load(f)
    except FileNotFoundError as e:
        raise InputError(f"input dataset {url}: no {MANIFEST} (write it with wort.mr.data.write_*)") from e
    except (OSError, ValueError) as e:
        raise InputError(f"input dataset {url}: unreadable {MANIFEST}: {e}") from e
    try:
        blocks = [Block(_join(url, b["name"]), b["name"], int(b["size"]), b["digest"],
                        hash_key(f"{url}/{b['name']}")) for b in m["blocks"]]
        return Dataset(url, m["kind"], blocks, m.get("meta", {}))
    except (KeyError, TypeError) as e:
        raise InputError(f"input dataset {url}: malformed {MANIFEST}: {e!r}") from e


def write_dataset(url: str, kind: str, blocks: List[bytes], meta: Optional[dict] = None) -> Dataset:
    url = os.path.abspath(url) if "://" not in url else url
    fs, path = fsspec.core.url_to_fs(url)
    fs.makedirs(path, exist_ok=True)
    entries = []
    for i, data in enumerate(blocks):
        name = f"part-{i:05d}"
        with fs.open(path.rstrip("/") + "/" + name, "wb") as f:
            f.write(data)
        entries.append({"name": name, "size": len(data), "digest": _digest(data)})
    with fs.open(path.rstrip("/") + "/" + MANIFEST, "w") as f:
        json.dump({"kind": kind, "blocks": entries, "meta": meta or {}}, f)
    return open_dataset(url)


def import_text(src: str, url: str, block_size: int = 4 << 20) -> Dataset:
    """Splits a text file (any fsspec URL) into blocks of about block_size bytes, cut at line
    ends, and writes them as a dataset at url."""
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, not {block_size}")
    try:
        with fsspec.open(src, "rb") as f:
            raw = f.read()
    except FileNotFoundError as e:
        raise InputError(f"{src} is missing") from e
    blocks, start = [], 0
    while start < len(raw):
        end = min(len(raw), start + block_size)
        if end < len(raw):
            nl = raw.rfind(b"\n", start, end)
            end = nl + 1 if nl >= start else (raw.find(b"\n", end) + 1 or len(raw))
        blocks.append(raw[start:end])
        start = end
    return write_dataset(url, "text", blocks, {"source": src})


def word_list(path: str = WORDS) -> List[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            words = sorted({w.strip().lower() for w in f if w.strip().isalpha() and w.strip().isascii()})
    except FileNotFoundError as e:
        raise InputError(f"{path} is missing: install the Debian package wamerican") from e
    if not words:
        raise InputError(f"{path} holds no words")
    return words


def gen_text(url: str, *, blocks: int = 8, lines: int = 500, words_per_line: int = 10,
             zipf: float = 1.1, seed: int = 1, vocabulary: Optional[List[str]] = None) -> Dataset:
    """Text whose words follow a Zipf law over the word list (rank 1 = a random word)."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary or word_list()
    order = rng.permutation(len(vocab))
    p = 1.0 / np.arange(1, len(vocab) + 1) ** zipf
    p /= p.sum()
    out = []
    for _ in range(blocks):
        idx = order[rng.choice(len(vocab), size=(lines, words_per_line), p=p)]
        out.append("".join(" ".join(vocab[j] for j in row) + "\n" for row in idx).encode())
    return write_dataset(url, "text", out, {"zipf": zipf, "seed": seed})


def gen_points(url: str, *, blocks: int = 8, points: int = 2000, dim: int = 4, centers: int = 5,
               labels: bool = False, seed: int = 1) -> Dataset:
    """CSV points around `centers` Gaussian centres (labels=True: a 0/1 label last, from a
    hidden linear model, for logistic regression)."""
    rng = np.random.default_rng(seed)
    c = rng.uniform(-10, 10, size=(centers, dim))
    w = rng.normal(size=dim)
    out = []
    for _ in range(blocks):
        x = c[rng.integers(centers, size=points)] + rng.normal(size=(points, dim))
        if labels:
            x = x / 10.0
            y = (1 / (1 + np.exp(-(x @ w))) > rng.uniform(size=points)).astype(float)
            x = np.column_stack([x, y])
        out.append("".join(",".join(f"{v:.6f}" for v in row) + "\n" for row in x).encode())
    return write_dataset(url, "labeled" if labels else "points", out,
                         {"dim": dim, "centers": centers, "seed": seed})


def gen_graph(url: str, *, blocks: int = 8, nodes: int = 5000, edges_per_node: int = 4, seed: int = 1) -> Dataset:
    """A power-law graph (preferential attachment); each line 'src dst dst ...' (adjacency)."""
    rng = np.random.default_rng(seed)
    targets: List[int] = [0]
    adj: List[List[int]] = [[] for _ in range(nodes)]
    for v in range(1, nodes):
        k = min(edges_per_node, v)
        picks = {targets[i] for i in rng.integers(len(targets), size=k)}
        for u in sorted(picks):
            adj[v].append(u)
            targets.append(u)
        targets.extend([v] * len(picks))
    per = -(-nodes // blocks)
    out = []
    for b in range(blocks):
        lines = []
        for v in range(b * per, min(nodes, (b + 1) * per)):
            lines.append(" ".join(str(x) for x in [v] + adj[v]) + "\n")
        out.append("".join(lines).encode())
    return write_dataset(url, "graph", out, {"nodes": nodes, "seed": seed})
