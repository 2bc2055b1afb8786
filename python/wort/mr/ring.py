"""The two consistent-hashing rings of EclipseMR and the scheduling policies that use them.

Keys live on a ring of 2**64 positions (``hash_key``: the first 8 bytes of BLAKE2b).

* ``StaticRing``: the file layer's ring (a DHT with fixed ranges). Each worker name gets
  ``vnodes`` positions; a key belongs to the first position clockwise from it. It changes only
  when workers join or leave.
* ``LAF``: the cache layer's ring, whose ranges the Locality-Aware Fair scheduler moves. The
  ring is cut into n contiguous ranges ``[bounds[i], bounds[i+1])`` with ``bounds[0] == 0`` and
  ``bounds[n] == 2**64``, so the ranges cover the ring exactly once by construction. The
  scheduler keeps a histogram (``bins`` buckets) of the keys of the last ``window`` tasks; every
  ``update_every`` tasks it computes the bounds that give each worker an equal share of that
  histogram (the expected tasks) and moves the current bounds a fraction ``alpha`` of the way
  towards them (an exponential moving average: alpha=1 jumps, small alpha moves slowly and keeps
  more of the cached data where it is). To keep cached data in place, the bounds move only when
  the largest worker's share of the histogram exceeds (1 + ``tolerance``) times the fair share.

The policies (``Policy`` subclasses) are the one piece of code that both the simulator
(wort.mr.sim) and the Dask scheduler layer (wort.mr.engine) call: ``preferred(key)`` names the
worker a task should run on (None: any), ``observe(key)`` feeds the task's key to the policy.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import deque
from typing import Callable, List, Optional, Sequence

RING = 1 << 64


def hash_key(data) -> int:
    """The ring position of a str/bytes key (64 bits of BLAKE2b)."""
    if isinstance(data, str):
        data = data.encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


class StaticRing:
    """Consistent hashing with virtual nodes: the file layer (block homes)."""

    def __init__(self, names: Sequence[str], vnodes: int = 16):
        if not names:
            raise ValueError("a ring needs at least one worker")
        if len(set(names)) != len(names):
            raise ValueError(f"worker names must be distinct: {list(names)}")
        self.names = list(names)
        pts = sorted((hash_key(f"{n}#{v}"), i) for i, n in enumerate(self.names) for v in range(vnodes))
        self._pos = [p for p, _ in pts]
        self._owner = [i for _, i in pts]

    def owner(self, key: int) -> int:
        """Index (into names) of the worker that is the key's home."""
        j = bisect.bisect_left(self._pos, key)
        return self._owner[j % len(self._pos)]


class LAF:
    """The adaptive cache ring (see the module docstring for the parameters)."""

    def __init__(self, n_workers: int, *, bins: int = 1024, window: int = 4096, alpha: float = 0.5,
                 update_every: int = 64, prior: float = 0.01, tolerance: float = 0.1):
        if n_workers < 1:
            raise ValueError("LAF needs at least one worker")
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], not {alpha}")
        if bins < 1 or window < 1 or update_every < 1:
            raise ValueError("bins, window and update_every must be positive")
        self.n = n_workers
        self.bins = bins
        self.alpha = alpha
        self.update_every = update_every
        self.prior = prior  # weight added to every bin: an empty histogram gives equal ranges
        self.tolerance = tolerance  # move only when some worker's share exceeds (1+tolerance)/n
        self.bounds: List[int] = [i * RING // n_workers for i in range(n_workers + 1)]
        self._window: deque = deque(maxlen=window)
        self.hist = [0] * bins
        self._seen = 0
        self.moves = 0

    def owner(self, key: int) -> int:
        i = bisect.bisect_right(self.bounds, key) - 1
        return min(max(i, 0), self.n - 1)

    def observe(self, key: int) -> None:
        b = (key * self.bins) >> 64
        if len(self._window) == self._window.maxlen:
            self.hist[self._window[0]] -= 1
        self._window.append(b)
        self.hist[b] += 1
        self._seen += 1
        if self._seen % self.update_every == 0:
            self.rebalance()

    def target(self) -> List[int]:
        """The bounds that split the histogram into n equal shares (interpolating in a bin)."""
        w = [h + self.prior for h in self.hist]
        total = sum(w)
        width = RING / self.bins
        out = [0]
        acc = 0.0
        b = 0
        for j in range(1, self.n):
            goal = total * j / self.n
            while b < self.bins and acc + w[b] < goal:
                acc += w[b]
                b += 1
            if b >= self.bins:
                out.append(RING)
                continue
            frac = (goal - acc) / w[b]
            out.append(min(RING, int((b + frac) * width)))
        out.append(RING)
        return out

    def _cdf(self, w: List[float], cum: List[float], x: int) -> float:
        pos = x * self.bins / RING
        b = min(int(pos), self.bins)
        if b >= self.bins:
            return cum[-1]
        return cum[b] + (pos - b) * w[b]

    def max_share(self) -> float:
        """The largest worker's share of the histogram under the current bounds, times n (1.0
        is perfectly fair)."""
        w = [h + self.prior for h in self.hist]
        cum = [0.0]
        for x in w:
            cum.append(cum[-1] + x)
        c = [self._cdf(w, cum, b) for b in self.bounds]
        return max(c[i + 1] - c[i] for i in range(self.n)) * self.n / cum[-1]

    def rebalance(self) -> None:
        if self.max_share() <= 1.0 + self.tolerance:
            return
        t = self.target()
        a = self.alpha
        new = [0] + [int((1 - a) * o + a * g) for o, g in zip(self.bounds[1:-1], t[1:-1])] + [RING]
        # a convex combination of two sorted sequences is sorted; the max() guards rounding
        for i in range(1, len(new)):
            new[i] = max(new[i], new[i - 1])
        if new != self.bounds:
            self.moves += 1
        self.bounds = new


# ---- policies: shared by the simulator and the Dask layer -------------------------------------

class Policy:
    """Where a task with ring key `key` should run. `strict`: the task waits for that worker."""

    name = "policy"
    strict = True
    delay = 0.0

    def reset(self, names: Sequence[str]) -> None:
        self.names = list(names)

    def preferred(self, key: int) -> Optional[int]:
        raise NotImplementedError

    def observe(self, key: int) -> None:
        pass


class LAFPolicy(Policy):
    """Locality-aware fair: the owner of the key on the adaptive cache ring."""

    name = "laf"

    def __init__(self, **laf_args):
        self.laf_args = laf_args
        self.laf: Optional[LAF] = None

    def reset(self, names):
        old = getattr(self, "names", None)
        super().reset(names)
        if self.laf is None or old is None or len(old) != len(names):
            self.laf = LAF(len(names), **self.laf_args)

    def preferred(self, key):
        return self.laf.owner(key)

    def observe(self, key):
        self.laf.observe(key)


class HashPolicy(Policy):
    """Pure consistent hashing: the key's home on the static ring, ranges never move."""

    name = "ch"

    def __init__(self, vnodes: int = 16):
        self.vnodes = vnodes

    def reset(self, names):
        super().reset(names)
        self.ring = StaticRing(self.names, self.vnodes)

    def preferred(self, key):
        return self.ring.owner(key)


class DaskDefaultPolicy(Policy):
    """No preference: Dask places a task without dependencies on the least occupied worker."""

    name = "dask"
    strict = False

    def preferred(self, key):
        return None


class DelayPolicy(Policy):
    """Delay scheduling (Spark): prefer a worker that caches the block (else the block's home on
    the static ring); when that worker is busy, wait up to `delay` time units, then run anywhere.
    `locate(key)` -> worker index holding the key in cache, or None (the simulator supplies it:
    Spark's driver knows where cached partitions are)."""

    name = "delay"
    strict = False

    def __init__(self, delay: float = 3.0, vnodes: int = 16, locate: Optional[Callable[[int], Optional[int]]] = None):
        self.delay = delay
        self.vnodes = vnodes
        self.locate = locate

    def reset(self, names):
        super().reset(names)
        self.ring = StaticRing(self.names, self.vnodes)

    def preferred(self, key):
        if self.locate is not None:
            w = self.locate(key)
            if w is not None:
                return w
        return self.ring.owner(key)


def make_policy(name: str, **kw) -> Policy:
    if name == "laf":
        return LAFPolicy(**kw)
    if name == "ch":
        return HashPolicy(**kw)
    if name == "dask":
        return DaskDefaultPolicy()
    if name == "delay":
        return DelayPolicy(**kw)
    raise ValueError(f"unknown policy {name!r}: laf, ch, dask or delay")
