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
from collections import OrderedDict, deque
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
        self.pinned = [0] * n_workers  # tasks of the window that run where their block is cached
        self._seen = 0
        self.moves = 0

    def owner(self, key: int) -> int:
        i = bisect.bisect_right(self.bounds, key) - 1
        return min(max(i, 0), self.n - 1)

    def observe(self, key: int, pinned: Optional[int] = None) -> None:
        """Counts a task. `pinned`: the worker it runs on because that worker caches its block
        (it does not follow the bounds): its load counts against that worker, and the bounds
        share out the other tasks."""
        b = (key * self.bins) >> 64 if pinned is None else -1 - pinned
        if len(self._window) == self._window.maxlen:
            old = self._window[0]
            if old >= 0:
                self.hist[old] -= 1
            else:
                self.pinned[-1 - old] -= 1
        self._window.append(b)
        if b >= 0:
            self.hist[b] += 1
        else:
            self.pinned[pinned] += 1
        self._seen += 1
        if self._seen % self.update_every == 0:
            self.rebalance()

    def target(self) -> List[int]:
        """The bounds that give each worker an equal share of the load: its pinned tasks plus
        the histogram's mass in its range (quantiles of the histogram, interpolating in a bin;
        a worker whose pinned tasks exceed the fair share gets an empty range)."""
        w = [h + self.prior for h in self.hist]
        total = sum(w)
        fair = (total + sum(self.pinned)) / self.n
        want = [max(0.0, fair - p) for p in self.pinned]
        scale = total / sum(want) if sum(want) > 0 else 0.0
        width = RING / self.bins
        out = [0]
        acc = 0.0
        b = 0
        goal = 0.0
        for j in range(1, self.n):
            goal += want[j - 1] * scale if scale else total / self.n
            while b < self.bins and acc + w[b] < goal:
                acc += w[b]
                b += 1
            if b >= self.bins:
                out.append(RING)
                continue
            frac = min(1.0, max(0.0, (goal - acc) / w[b]))
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
        """The largest worker's load (pinned tasks plus its share of the histogram under the
        current bounds), times n over the total (1.0 is perfectly fair)."""
        w = [h + self.prior for h in self.hist]
        cum = [0.0]
        for x in w:
            cum.append(cum[-1] + x)
        c = [self._cdf(w, cum, b) for b in self.bounds]
        loads = [c[i + 1] - c[i] + self.pinned[i] for i in range(self.n)]
        return max(loads) * self.n / (cum[-1] + sum(self.pinned))

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

    def ran(self, key: int, w: int) -> None:
        """The task of `key` ran on worker index `w` (told when that is not where it was sent)."""

    def begin_job(self, tasks: int) -> None:
        """The next `tasks` calls of preferred/observe are the map tasks of one job."""


class LAFPolicy(Policy):
    """Locality-aware fair: the owner of the key on the adaptive cache ring, unless the block is
    cached elsewhere.

    The policy keeps a directory of where it sent the last `remember` keys (the worker that ran
    a task caches its block: iCache) and the workers of its last `window` tasks (`window` is
    LAF's). A task whose key the directory places on a worker other than its owner goes to that
    worker if it is not overloaded: its share of the recent tasks, this one included, at most
    (1 + `slack`) times fair; otherwise to the owner. So a bound that moves does not take the
    cached blocks of the range it moves away from their worker.

    With `pin` (default), a task that runs where the directory says its block is cached is
    counted by LAF as that worker's pinned load (LAF.observe(key, pinned=w)), not in the key
    histogram: the bounds then share out the tasks that can move (keys cached nowhere) so that
    each worker's pinned load plus its range's share is equal. `affinity=False` gives the plain
    LAF rule (always the owner)."""

    name = "laf"

    def __init__(self, *, affinity: bool = True, remember: int = 1 << 16, slack: float = 0.5, pin: bool = True,
                 spread: bool = True, **laf_args):
        if remember < 0 or slack < 0:
            raise ValueError("remember and slack must be >= 0")
        self.affinity = affinity
        self.remember = remember
        self.slack = slack
        self.pin = pin
        self.spread = spread
        self.laf_args = laf_args
        self.laf: Optional[LAF] = None
        self.affine = 0  # tasks sent to the worker caching their block instead of the owner

    def reset(self, names):
        old = getattr(self, "names", None)
        super().reset(names)
        if self.laf is None or old is None or len(old) != len(names):
            self.laf = LAF(len(names), **self.laf_args)
            self._where: "OrderedDict[int, int]" = OrderedDict()
            self._recent: deque = deque(maxlen=self.laf._window.maxlen)
            self._load = [0] * len(names)
            self._pending: Optional[tuple] = None
        self._job: Optional[List[int]] = None

    def begin_job(self, tasks: int) -> None:
        self._job = [0] * self.laf.n
        self._job_cap = -(-tasks // self.laf.n) if self.spread else tasks

    def _choose(self, key: int) -> int:
        o = self.laf.owner(key)
        w = o
        if self.affinity:
            h = self._where.get(key)
            if h is not None and h != o:
                fair = (len(self._recent) + 1) / self.laf.n
                if self._load[h] + 1 <= (1.0 + self.slack) * fair:
                    w = h
        job = self._job
        if job is not None and job[w] >= self._job_cap:
            # the job has its share on w already: its owner, else the worker with the fewest
            # of the job's tasks (then the fewest recent tasks) takes it
            w = min(range(self.laf.n), key=lambda i: (job[i] >= self._job_cap, self._load[i], i))
        return w

    def preferred(self, key):
        w = self._choose(key)
        self._pending = (key, w)
        return w

    def observe(self, key):
        p = self._pending
        w = p[1] if p is not None and p[0] == key else self._choose(key)
        self._pending = None
        if w != self.laf.owner(key):
            self.affine += 1
        pin = w if self.pin and self._where.get(key) == w else None
        self.ran(key, w)
        if len(self._recent) == self._recent.maxlen:
            self._load[self._recent[0]] -= 1
        self._recent.append(w)
        self._load[w] += 1
        if self._job is not None:
            self._job[w] += 1
        self.laf.observe(key, pin)

    def ran(self, key: int, w: int) -> None:
        """The task of `key` ran on worker `w` (which now caches its block)."""
        if not self.remember:
            return
        self._where[key] = w
        self._where.move_to_end(key)
        if len(self._where) > self.remember:
            self._where.popitem(last=False)


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
