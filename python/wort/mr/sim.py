"""A trace-driven simulator of the scheduling policies (ring.py's Policy classes: the same code
the Dask layer calls), at the chapter's scale (40 workers) on one machine.

Trace: jobs arrive as a Poisson process; each job reads every block of one dataset (a task per
block, its ring key the hash of dataset/block). A fraction `repeat` (default 0.3, the chapter's
"more than 30% of jobs are repeated") re-reads an earlier dataset, picked in proportion to a
heavy-tailed popularity drawn when the dataset was created; the others read a new dataset.
Dataset sizes (blocks) follow a power law (1..max_blocks).

Workers: one slot each and an LRU cache of `cache_blocks` blocks. A task takes `hit_cost` time
units when its block is in the cache of the worker that runs it, `miss_cost` otherwise (then the
block is cached there).

Placement: strict policies (laf, ch) queue the task at the worker the policy names (observe()
is called in arrival order, as the Dask layer does); 'dask' puts it on the worker with the least
outstanding work (Dask's occupancy rule for tasks without dependencies); 'delay' is Spark's
delay scheduling: a free worker takes the oldest task that prefers it (the worker caching its
block, else the block's home), else the oldest task that has waited `delay` time units.

Metrics: hit ratio, load imbalance = max/mean tasks per worker, mean job completion time.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from .ring import DelayPolicy, Policy, hash_key, make_policy


@dataclass
class Job:
    arrival: float
    dataset: int
    keys: List[int]
    repeated: bool


def make_trace(*, jobs: int = 2000, workers: int = 40, repeat: float = 0.3, max_blocks: int = 64,
               size_alpha: float = 1.2, popularity_alpha: float = 1.0, load: float = 0.7,
               hit_cost: float = 1.0, miss_cost: float = 3.0, seed: int = 1) -> List[Job]:
    rng = np.random.default_rng(seed)
    datasets: List[List[int]] = []
    pop: List[float] = []
    out: List[Job] = []
    for j in range(jobs):
        if datasets and rng.uniform() < repeat:
            p = np.asarray(pop) / sum(pop)
            d = int(rng.choice(len(datasets), p=p))
            out.append(Job(0.0, d, datasets[d], True))
        else:
            n = int(min(max_blocks, np.floor(rng.pareto(size_alpha) + 1)))
            d = len(datasets)
            datasets.append([hash_key(f"ds{d}/part-{b:05d}") for b in range(n)])
            pop.append(float(rng.pareto(popularity_alpha) + 1))
            out.append(Job(0.0, d, datasets[d], False))
    mean_tasks = np.mean([len(j.keys) for j in out])
    mean_cost = (hit_cost + miss_cost) / 2
    gap = mean_tasks * mean_cost / (workers * load)
    t = 0.0
    for job in out:
        t += rng.exponential(gap)
        job.arrival = t
    return out


class _LRU:
    def __init__(self, cap: int):
        self.cap = cap
        self.d: "OrderedDict[int, None]" = OrderedDict()

    def hit(self, key: int) -> bool:
        if key in self.d:
            self.d.move_to_end(key)
            return True
        return False

    def add(self, key: int) -> Optional[int]:
        self.d[key] = None
        if len(self.d) > self.cap:
            return self.d.popitem(last=False)[0]
        return None


def simulate(policy: Policy, trace: List[Job], *, workers: int = 40, cache_blocks: int = 64,
             hit_cost: float = 1.0, miss_cost: float = 3.0) -> Dict[str, float]:
    names = [f"w{i:02d}" for i in range(workers)]
    caches = [_LRU(cache_blocks) for _ in range(workers)]
    where: Dict[int, set] = {}  # key -> workers caching it (Spark's driver knows this)
    if isinstance(policy, DelayPolicy):
        policy.locate = lambda k: min(where[k]) if where.get(k) else None
    policy.reset(names)
    queues = [deque() for _ in range(workers)]  # strict and dask: per-worker FIFO
    central: List[Tuple[float, int, int, int]] = []  # delay: (arrival, seq, key, job)
    busy = [False] * workers
    outstanding = [0] * workers
    tasks = [0] * workers
    hits = 0
    total = 0
    events: List[Tuple[float, int, int, int]] = []  # (time, kind 0=done 1=timer, worker, job)
    left: Dict[int, int] = {}
    done_at: Dict[int, float] = {}
    seq = 0

    def start(w, key, job, now):
        nonlocal hits, total
        busy[w] = True
        total += 1
        tasks[w] += 1
        if caches[w].hit(key):
            hits += 1
            cost = hit_cost
        else:
            cost = miss_cost
            ev = caches[w].add(key)
            where.setdefault(key, set()).add(w)
            if ev is not None:
                where[ev].discard(w)
        heapq.heappush(events, (now + cost, 0, w, job))

    def dispatch_delay(w, now):
        pick = None
        for i, (arr, _, key, job) in enumerate(central):
            if policy.preferred(key) == w:
                pick = i
                break
        if pick is None:
            for i, (arr, _, key, job) in enumerate(central):
                if now - arr >= policy.delay:
                    pick = i
                    break
        if pick is not None:
            _, _, key, job = central.pop(pick)
            start(w, key, job, now)

    ji = 0
    now = 0.0
    while ji < len(trace) or events:
        if ji < len(trace) and (not events or trace[ji].arrival <= events[0][0]):
            job = trace[ji]
            now = job.arrival
            left[ji] = len(job.keys)
            policy.begin_job(len(job.keys))
            for key in job.keys:
                if policy.strict:
                    w = policy.preferred(key)
                    policy.observe(key)
                    queues[w].append((key, ji))
                    outstanding[w] += 1
                    if not busy[w]:
                        k, jj = queues[w].popleft()
                        start(w, k, jj, now)
                elif isinstance(policy, DelayPolicy):
                    p = policy.preferred(key)
                    policy.observe(key)
                    if not busy[p]:
                        start(p, key, ji, now)
                    else:
                        central.append((now, seq, key, ji))
                        seq += 1
                        heapq.heappush(events, (now + policy.delay, 1, -1, -1))
                else:
                    policy.observe(key)
                    w = min(range(workers), key=lambda i: (outstanding[i] + busy[i], i))
                    queues[w].append((key, ji))
                    outstanding[w] += 1
                    if not busy[w]:
                        k, jj = queues[w].popleft()
                        start(w, k, jj, now)
            if isinstance(policy, DelayPolicy):
                for w in range(workers):
                    if not busy[w] and central:
                        dispatch_delay(w, now)
            ji += 1
            continue
        now, kind, w, job = heapq.heappop(events)
        if kind == 0:
            busy[w] = False
            left[job] -= 1
            if left[job] == 0:
                done_at[job] = now
            if isinstance(policy, DelayPolicy):
                dispatch_delay(w, now)
            else:
                outstanding[w] -= 1
                if queues[w]:
                    k, jj = queues[w].popleft()
                    start(w, k, jj, now)
        else:
            for x in range(workers):
                if not busy[x] and central:
                    dispatch_delay(x, now)
    t = np.asarray(tasks, dtype=float)
    jct = [done_at[j] - trace[j].arrival for j in range(len(trace))]
    return {"policy": policy.name, "tasks": total, "hit_ratio": hits / max(1, total),
            "imbalance": float(t.max() / t.mean()), "mean_jct": float(np.mean(jct)),
            "makespan": float(max(done_at.values()))}


def compare(*, workers: int = 40, jobs: int = 2000, repeat: float = 0.3, cache_blocks: int = 64,
            seed: int = 1, policies=("laf", "ch", "dask", "delay"), laf: Optional[dict] = None) -> List[dict]:
    trace = make_trace(jobs=jobs, workers=workers, repeat=repeat, seed=seed)
    out = []
    for name in policies:
        p = make_policy(name, **(laf or {})) if name == "laf" else make_policy(name)
        r = simulate(p, trace, workers=workers, cache_blocks=cache_blocks)
        r.update(workers=workers, jobs=jobs, repeat=repeat, cache_blocks=cache_blocks, seed=seed)
        out.append(r)
    return out
