"""EclipseMR over Dask distributed.

Dask does the scheduling, the workers, the transfers and the fault handling (a lost task is
recomputed by Dask; a worker killed under a Nanny is restarted by it). wort.mr adds:

* WortMRPlugin: a WorkerPlugin that opens each worker's Cache (cache.py) in
  <cache_dir>/<worker name>.pool and adds two comm handlers (wort_mr_put, wort_mr_get) through
  which map tasks push shuffle chunks into a reducer's store;
* EclipseMR: the job layer. Each map task gets the ring key of its input block; the policy
  (ring.py: LAF by default) names the worker; the task is submitted with Dask worker
  restrictions workers=[that worker's address]. allow_other_workers=True: Dask keeps the task on
  that worker while it is alive, and runs it elsewhere when it is gone (a strict restriction to
  a killed worker's address would wait forever: a restarted worker has a new address);
* proactive shuffle: a map task partitions its output by the reducers' ranges (n equal ranges of
  the ring: reducer r on worker r), combines in a per-reducer buffer, and spills the buffer to
  the reducer's store whenever it holds spill_threshold keys, while the mapper still runs;
* iterations: each worker also keeps its decoded blocks in memory (ObjectMemo, in front of the
  pool); a job whose map outputs all travelled with the map results (nothing spilled) is merged
  by the driver, which gathered them anyway, instead of a round of reduce tasks;
* oCache: a map task's combined output for a block (reused by a repeated job of the same app id
  and user id, params and input), and each iteration's output of an iterative job (a
  resubmitted job resumes after the last completed iteration).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
import time
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from distributed import get_worker
from distributed.diagnostics.plugin import WorkerPlugin
from distributed.utils import sync

from .cache import Cache, ObjectMemo, check_id, icache_key, ocache_prefix, parse_size
from .data import Block, Dataset, InputError, open_dataset
from .ring import hash_key, make_policy, Policy, StaticRing

PLUGIN = "wort-mr"


class AppError(Exception):
    """The application's code raised (the message names the application, phase and block)."""


class ShuffleLostError(Exception):
    """A shuffle chunk could be found on no worker."""


# ---- the worker side -----------------------------------------------------------------------------

def default_cache_dir() -> str:
    return os.environ.get("WORT_MR_CACHE_DIR") or os.path.join(tempfile.gettempdir(), f"wort-mr-{os.getuid()}")


class WortMRPlugin(WorkerPlugin):
    """Gives each worker a persistent wort Cache (pool <cache_dir>/<worker name>.pool)."""

    name = PLUGIN

    def __init__(self, cache_dir: Optional[str] = None, capacity="256M", kind: str = "woart", memory="64M"):
        self.cache_dir = cache_dir
        self.capacity = parse_size(capacity)
        self.memory = parse_size(memory) if memory else 0
        self.kind = kind
        self.cache: Optional[Cache] = None
        self.memo: Optional[ObjectMemo] = None

    def setup(self, worker):
        d = self.cache_dir or default_cache_dir()
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(worker.name))
        self.cache = Cache(os.path.join(d, f"{name}.pool"), self.capacity, kind=self.kind)
        self.memo = ObjectMemo(self.memory)
        cache = self.cache

        def put(key: bytes, value: bytes, ttl: Optional[float] = None):
            cache.put(key, value, ttl)
            return True

        def get(key: bytes):
            return cache.get(key)

        worker.handlers["wort_mr_put"] = put
        worker.handlers["wort_mr_get"] = get

    def teardown(self, worker):
        if self.cache is not None:
            self.cache.close()
            self.cache = None
        self.memo = None


def worker_cache() -> Cache:
    w = get_worker()
    p = w.plugins.get(PLUGIN)
    if p is None or p.cache is None:
        raise RuntimeError(f"worker {w.name} has no wort.mr cache (register WortMRPlugin: EclipseMR(client))")
    return p.cache


async def _rpc_put(w, addr, key, value, ttl):
    return await w.rpc(addr).wort_mr_put(key=key, value=value, ttl=ttl)


async def _rpc_get(w, addr, key):
    return await w.rpc(addr).wort_mr_get(key=key)


# addresses that did not answer lately (a killed worker's address never answers again: its
# restarted process gets a new one); a task then keeps a chunk locally instead of waiting
_DEAD: Dict[str, float] = {}
RPC_TIMEOUT = 5.0
INLINE_MAX = 16 << 10  # bytes of a map task's last buffer for one reducer sent with its result


def _alive(addr: str) -> bool:
    t = _DEAD.get(addr)
    return t is None or time.monotonic() - t > 60.0


def _remote_put(addr: str, key: bytes, value: bytes, ttl) -> bool:
    w = get_worker()
    if addr == w.address:
        worker_cache().put(key, value, ttl)
        return True
    if not _alive(addr):
        return False
    try:
        return bool(sync(w.loop, _rpc_put, w, addr, key, value, ttl, callback_timeout=RPC_TIMEOUT))
    except Exception:
        _DEAD[addr] = time.monotonic()
        return False


def _remote_get(addr: str, key: bytes) -> Optional[bytes]:
    w = get_worker()
    if addr == w.address:
        return worker_cache().get(key)
    if not _alive(addr):
        return None
    try:
        return sync(w.loop, _rpc_get, w, addr, key, callback_timeout=RPC_TIMEOUT)
    except Exception:
        _DEAD[addr] = time.monotonic()
        return None


# functions run on every worker through client.run (dask_worker is passed by Dask)
def _w_pin(app, user, dask_worker=None):
    dask_worker.plugins[PLUGIN].cache.pin(app, user)


def _w_unpin(app, user, dask_worker=None):
    dask_worker.plugins[PLUGIN].cache.unpin(app, user)


def _w_delete_prefix(prefix, dask_worker=None):
    return dask_worker.plugins[PLUGIN].cache.delete_prefix(prefix)


def _w_stats(dask_worker=None):
    return dask_worker.plugins[PLUGIN].cache.stats()


def _w_latest(prefix, dask_worker=None):
    c = dask_worker.plugins[PLUGIN].cache
    keys = c.keys(prefix)
    for k in reversed(keys):
        v = c.get(k)
        if v is not None:
            return int(k[len(prefix):]), v
    return None


def _w_get(key, dask_worker=None):
    return dask_worker.plugins[PLUGIN].cache.get(key)


def _w_put(key, value, ttl, dask_worker=None):
    dask_worker.plugins[PLUGIN].cache.put(key, value, ttl)


# ---- tasks --------------------------------------------------------------------------------------

def _load_block(app, block: Block, use_icache: bool):
    cache = worker_cache()
    memo = get_worker().plugins[PLUGIN].memo
    k = icache_key(block.key, app.decoder)
    if use_icache:
        obj = memo.get(k) if memo is not None else None
        if obj is not None:  # decoded in this process already: no read, no unpickling
            return obj, True
        v = cache.get(k)
        if v is not None:
            obj = pickle.loads(v)
            if memo is not None:
                memo.put(k, obj, len(v))
            return obj, True
    data = block.read()  # InputError / CorruptBlockError: clear, and nothing is cached
    try:
        obj = app.decode(data, block.name)
    except Exception as e:
        raise AppError(f"{app.name}: decoding input block {block.url} failed: {e!r}") from e
    if use_icache:
        blob = pickle.dumps(obj, protocol=5)
        cache.put(k, blob)
        if memo is not None:
            memo.put(k, obj, len(blob))
    return obj, False


def _partition(h32: int, n: int) -> int:
    return h32 * n >> 32


def _rkey(k) -> int:
    """A reduce key's 32-bit hash, the same in every process (Python's hash() is salted)."""
    if isinstance(k, str):
        return zlib.crc32(k.encode())
    if isinstance(k, bytes):
        return zlib.crc32(k)
    if isinstance(k, int) and not isinstance(k, bool):
        return ((k * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF) >> 32
    return zlib.crc32(pickle.dumps(k, protocol=4))


def map_task(app, block: Block, params, ctx: dict) -> dict:
    """One map task: mapper over one block, output partitioned, combined and spilled."""
    t0 = time.perf_counter()
    cache = worker_cache()
    w = get_worker()
    n = len(ctx["reducers"])
    mkey = ctx["map_prefix"] + b"%016x/" % block.key + ctx["params_hash"].encode()
    saved = cache.get(mkey) if ctx["reuse_map"] else None
    info = {"worker": str(w.name), "block": block.name, "icache_hit": False, "ocache_hit": saved is not None}
    chunks: Dict[int, List[Tuple[bytes, str]]] = {r: [] for r in range(n)}
    bufs: List[Any] = [({} if app.combine else []) for _ in range(n)]
    seq = [0] * n
    keep: List[Any] = [] if (ctx["reuse_map"] and saved is None) else None

    tails: Dict[int, bytes] = {}

    def spill(r, last=False):
        b = bufs[r]
        if not b:
            return
        pairs = list(b.items()) if app.combine else b
        if keep is not None:
            keep.extend(pairs)
        payload = pickle.dumps(pairs, protocol=5)
        if last and not ctx["reuse_map"] and len(payload) <= INLINE_MAX:
            # a small remainder of a job whose intermediate results are not kept travels with
            # this task's result (Dask moves it to the reducers; every reducer gets every
            # map's tails, hence the size limit): no rpc for the small outputs of iterations
            tails[r] = payload
            bufs[r] = {} if app.combine else []
            return
        ck = ctx["shuffle_prefix"] + b"%05d/%06d/%06d" % (r, ctx["map_index"], seq[r])
        seq[r] += 1
        addr = ctx["reducers"][r]
        if not _remote_put(addr, ck, payload, ctx["ttl"]):  # the reducer is gone: keep it here
            cache.put(ck, payload, ctx["ttl"])
            addr = w.address
        chunks[r].append((ck, addr))
        bufs[r] = {} if app.combine else []

    def emit(pairs):
        th = ctx["spill_threshold"]
        for k, v in pairs:
            r = _partition(_rkey(k), n)
            b = bufs[r]
            if app.combine:
                b[k] = app.combine(b[k], v) if k in b else v
            else:
                b.append((k, v))
            if len(b) >= th:
                spill(r)

    if saved is not None:
        emit(pickle.loads(saved))
    else:
        obj, info["icache_hit"] = _load_block(app, block, ctx["use_icache"])
        try:
            emit(app.map(obj, params))
        except (InputError, AppError):
            raise
        except Exception as e:
            raise AppError(f"{app.name}: map over block {block.url} raised {e!r}") from e
    for r in range(n):
        spill(r, last=True)
    if keep is not None:
        cache.put(mkey, pickle.dumps(keep, protocol=5), ctx["ttl"])
    info["chunks"] = chunks
    info["tails"] = tails
    info["seconds"] = time.perf_counter() - t0
    return info


def reduce_task(app, r: int, manifests: List[dict], params, ctx: dict):
    """Reducer r: merges its chunks (deterministic order: by map index, then spill sequence)."""
    w = get_worker()
    cache = worker_cache()
    okey = ctx["shuffle_prefix"] + b"out/%05d" % r  # this reducer's output, kept for a repeated job
    if ctx["reuse_map"]:
        done = cache.get(okey)
        if done is not None:
            return done
    # map by map (manifests are in map order), each map's chunks by sequence, then its tail
    refs: List[Tuple[bytes, Optional[str], Optional[bytes]]] = []
    for m in manifests:
        refs.extend((ck, addr, None) for ck, addr in sorted(m["chunks"].get(r, [])))
        if m.get("tails", {}).get(r) is not None:
            refs.append((b"", None, m["tails"][r]))

    def payloads():
        for ck, addr, inline in refs:
            v = inline if inline is not None else cache.get(ck)
            if v is None:
                v = _remote_get(addr, ck)
            if v is None:
                for other in sorted(_all_workers(w)):
                    v = _remote_get(other, ck)
                    if v is not None:
                        break
            if v is None:
                raise ShuffleLostError(f"{app.name}: shuffle chunk {ck.decode()} is on no worker")
            yield v

    out = _merge(app, r, payloads())
    # returned pickled: Dask moves bytes much faster than a large dict (about 1 s for a dict of
    # 16k str -> int here, measured with distributed 2026.8)
    blob = pickle.dumps(out, protocol=5)
    if ctx["reuse_map"]:
        cache.put(okey, blob, ctx["ttl"])
    return blob


def _merge(app, r: int, payloads) -> Dict[Any, Any]:
    """Reducer r's output from its pickled chunks, in the order given."""
    acc: Dict[Any, Any] = {}
    lists: Dict[Any, list] = {}
    for v in payloads:
        for k, val in pickle.loads(v):
            if app.combine:
                acc[k] = app.combine(acc[k], val) if k in acc else val
            else:
                lists.setdefault(k, []).append(val)
    try:
        if app.combine:
            return {k: app.reduce(k, [v]) for k, v in acc.items()}
        return {k: app.reduce(k, vs) for k, vs in lists.items()}
    except Exception as e:
        raise AppError(f"{app.name}: reduce (partition {r}) raised {e!r}") from e


def _all_workers(w) -> List[str]:
    from distributed import get_client
    try:
        return list(get_client().scheduler_info(n_workers=-1)["workers"])
    except Exception:
        return []


# ---- the driver ------------------------------------------------------------------------------------

@dataclass
class JobStats:
    app: str
    seconds: float = 0.0
    maps: int = 0
    icache_hits: int = 0
    ocache_hits: int = 0
    placed_as_asked: int = 0
    placement: Dict[str, int] = field(default_factory=dict)
    iterations_run: int = 0
    resumed_from: int = 0
    reused_shuffle: int = 0  # jobs answered from the reducers' stored intermediate results
    reduced_in_driver: int = 0  # jobs whose map outputs all came with the map results


class EclipseMR:
    """The job layer over a distributed.Client.

    policy        'laf' (default), 'ch' (pure consistent hashing) or 'dask' (no restrictions)
    laf           LAF parameters: bins, window, alpha, update_every (ring.LAF)
    cache_dir     where each worker's pool lives (default $WORT_MR_CACHE_DIR or <tmp>/wort-mr-<uid>);
                  a directory the worker's host keeps across restarts
    capacity      each worker's cache size (bytes or '256M')
    memory        bytes of decoded iCache blocks each worker also keeps in its memory (0: none)
    spill_threshold  keys in a per-reducer buffer before it is spilled to the reducer
    ttl           seconds an oCache entry lives (map outputs, iteration outputs, shuffle chunks)
    """

    def __init__(self, client, *, policy: str = "laf", laf: Optional[dict] = None, cache_dir: Optional[str] = None,
                 capacity="256M", spill_threshold: int = 2048, ttl: float = 24 * 3600.0, kind: str = "woart",
                 memory="64M"):
        self.client = client
        if policy == "delay":
            raise ValueError("delay scheduling exists only in the simulator (Dask has no delay scheduling)")
        self.policy: Policy = make_policy(policy, **(laf or {})) if policy == "laf" else make_policy(policy)
        self.spill_threshold = int(spill_threshold)
        if self.spill_threshold < 1:
            raise ValueError("spill_threshold must be positive")
        self.ttl = ttl
        self._names: Optional[List[str]] = None
        self._ws: Optional[List[Tuple[str, str]]] = None  # the workers as the last job saw them
        client.register_plugin(WortMRPlugin(cache_dir, capacity, kind, memory), name=PLUGIN)

    # workers sorted by name: (name, address)
    def workers(self) -> List[Tuple[str, str]]:
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        ws = sorted((str(v.get("name", a)), a) for a, v in info.items())
        if not ws:
            raise RuntimeError("the Dask cluster has no workers")
        return ws

    def _sync_policy(self, names: List[str]):
        if names != self._names:
            self.policy.reset(names)
            self._names = names

    def cache_stats(self) -> Dict[str, dict]:
        return self.client.run(_w_stats)

    def forget(self, app_id: str, user_id: str) -> None:
        """Drops every oCache entry of (app_id, user_id) on every worker."""
        self.client.run(_w_delete_prefix, ocache_prefix(app_id, user_id))

    # ---- one MapReduce job -----------------------------------------------------------------------
    def run(self, app, dataset, params=None, *, app_id: Optional[str] = None, user_id: str = "default",
            reuse: bool = True, use_icache: bool = True, stats: Optional[JobStats] = None):
        """Runs app (wort.mr.apps.App) over dataset (a Dataset or its URL); returns the reduce
        output {key: value} (app.finish() applied)."""
        ds = dataset if isinstance(dataset, Dataset) else open_dataset(dataset)
        app_id = check_id("app id", app_id or app.name)
        check_id("user id", user_id)
        self.client.run(_w_pin, app_id, user_id)
        try:
            out = self._run(app, ds, params, app_id, user_id, reuse, use_icache, stats or JobStats(app.name))
        finally:
            self.client.run(_w_unpin, app_id, user_id, on_error="ignore")
        return app.finish(out, params)

    def _run(self, app, ds: Dataset, params, app_id, user_id, reuse, use_icache, st: JobStats):
        t0 = time.perf_counter()
        ws = self._ws = self.workers()
        names = [n for n, _ in ws]
        self._sync_policy(names)
        addr = dict(ws)
        pre = ocache_prefix(app_id, user_id)
        phash = hashlib.blake2b(pickle.dumps((app.name, params), protocol=4), digest_size=8).hexdigest()
        keep = bool(reuse and app.reuse_map_output)
        if keep:  # the intermediate results stay on the reducers for a repeated job (TTL)
            job = hashlib.blake2b(pickle.dumps((phash, ds.fingerprint, names), protocol=4), digest_size=8).hexdigest()
        else:
            job = uuid.uuid4().hex[:16]
        ctx = {"reducers": [a for _, a in ws], "map_prefix": pre + b"m/", "params_hash": phash,
               "reuse_map": keep, "shuffle_prefix": pre + f"s/{job}/".encode(),
               "spill_threshold": self.spill_threshold, "ttl": self.ttl, "use_icache": use_icache}
        jkey = pre + f"j/{job}".encode()
        if keep:
            found = [v for v in self.client.run(_w_get, jkey).values() if v is not None]
            if found:
                try:
                    out = self._reduce(app, ws, pickle.loads(found[0]), params, ctx, job)
                    st.reused_shuffle += 1
                    st.seconds += time.perf_counter() - t0
                    return out
                except ShuffleLostError:
                    pass  # a chunk is gone (evicted, expired): run the whole job
        futs = []
        wanted = []
        tag = uuid.uuid4().hex[:8]  # task keys unique per run: Dask must not hand back a previous run's result
        self.policy.begin_job(len(ds.blocks))
        for i, b in enumerate(ds.blocks):
            p = self.policy.preferred(b.key)
            self.policy.observe(b.key)
            kw = {}
            if p is not None:
                kw = {"workers": [addr[names[p]]], "allow_other_workers": True}
                wanted.append(names[p])
            else:
                wanted.append(None)
            c = dict(ctx, map_index=i)
            futs.append(self.client.submit(map_task, app, b, params, c, key=f"wmr-map-{job}-{tag}-{i}", pure=False, **kw))
        ok = False
        try:
            if keep:  # the reducers start as soon as the maps are done, without the driver
                out = self._reduce(app, ws, futs, params, ctx, job)
                infos = self.client.gather(futs)
            else:
                infos = self.client.gather(futs)
                if not any(c for i in infos for c in i["chunks"].values()):
                    # every map output travelled with its map's result, which is here now:
                    # merging it here (the same order as the reducers) saves a round of tasks
                    out = {}
                    st.reduced_in_driver += 1
                    for r in range(len(ws)):
                        out.update(_merge(app, r, (i["tails"][r] for i in infos if r in i["tails"])))
                else:
                    out = self._reduce(app, ws, [{"chunks": i["chunks"], "tails": i["tails"]} for i in infos],
                                       params, ctx, job)
            ok = True
        finally:
            if not (ok and keep):
                self.client.run(_w_delete_prefix, ctx["shuffle_prefix"], on_error="ignore")
        if keep:
            manifests = [{"chunks": i["chunks"]} for i in infos]
            self._store_home(jkey, pickle.dumps(manifests, protocol=5), ws)
        st.maps += len(infos)
        for b, want, inf in zip(ds.blocks, wanted, infos):
            if want is not None and want != inf["worker"] and inf["worker"] in names:
                self.policy.ran(b.key, names.index(inf["worker"]))  # its iCache holds the block now
            st.icache_hits += inf["icache_hit"]
            st.ocache_hits += inf["ocache_hit"]
            st.placed_as_asked += (want is None or want == inf["worker"])
            st.placement[inf["worker"]] = st.placement.get(inf["worker"], 0) + 1
        st.seconds += time.perf_counter() - t0
        return out

    def _reduce(self, app, ws, manifests, params, ctx, job) -> Dict[Any, Any]:
        tag = uuid.uuid4().hex[:8]
        rfuts = [self.client.submit(reduce_task, app, r, manifests, params, ctx, key=f"wmr-reduce-{job}-{tag}-{r}",
                                    workers=[a], allow_other_workers=True, pure=False)
                 for r, (_, a) in enumerate(ws)]
        out: Dict[Any, Any] = {}
        for p in self.client.gather(rfuts):
            out.update(pickle.loads(p))
        return out

    def _store_home(self, key: bytes, blob: bytes, ws: Optional[List[Tuple[str, str]]] = None) -> None:
        """Writes an oCache entry to its home on the static ring (or the next live worker).
        `ws`: the workers as the job just saw them (saves asking the scheduler); when none of
        them takes the entry, the scheduler's current list is tried."""
        for attempt in ([ws] if ws else []) + [None]:
            ws = attempt or self.workers()
            home = StaticRing([n for n, _ in ws]).owner(hash_key(key))
            for j in range(len(ws)):
                _, a = ws[(home + j) % len(ws)]
                try:
                    self.client.run(_w_put, key, blob, self.ttl, workers=[a])
                    return
                except Exception:
                    continue
        raise RuntimeError(f"could not store {key!r} on any worker")

    # ---- iterative jobs -------------------------------------------------------------------------
    def iterate(self, app, dataset, iterations: int, params=None, *, app_id: Optional[str] = None,
                user_id: str = "default", on_iteration: Optional[Callable[[int, Any], None]] = None,
                stats: Optional[JobStats] = None):
        """Runs app.step (a MapReduce job whose params are the current state) `iterations`
        times: state = app.update(state, output). After each iteration the state is written to
        the oCache of its home worker (static ring); a resubmitted job (same app id, user id,
        input, params and iteration count) resumes after the last iteration found there."""
        ds = dataset if isinstance(dataset, Dataset) else open_dataset(dataset)
        st = stats or JobStats(app.name)
        t0 = time.perf_counter()
        app_id = check_id("app id", app_id or app.name)
        prefix = self._iter_prefix(app, ds, iterations, params, app_id, user_id)
        self.client.run(_w_pin, app_id, user_id)
        try:
            found = [v for v in self.client.run(_w_latest, prefix).values() if v is not None]
            if found:
                start, blob = max(found, key=lambda t: t[0])
                state = pickle.loads(blob)
            else:
                try:
                    start, state = 0, app.init(ds, params)
                except (InputError, AppError):
                    raise
                except Exception as e:
                    raise AppError(f"{app.name}: init over {ds.url} raised {e!r}") from e
            st.resumed_from = start
            for it in range(start, iterations):
                out = self._run(app, ds, (params, state), app_id, user_id, False, True, st)
                try:
                    state = app.update(state, out, params)
                except Exception as e:
                    raise AppError(f"{app.name}: update after iteration {it + 1} raised {e!r}") from e
                self._save_iteration(prefix, it + 1, state, self._ws)
                st.iterations_run += 1
                if on_iteration is not None:
                    on_iteration(it + 1, state)
        finally:
            self.client.run(_w_unpin, app_id, user_id, on_error="ignore")
        st.seconds = time.perf_counter() - t0
        return app.finish_state(state, params)

    def _iter_prefix(self, app, ds: Dataset, iterations, params, app_id, user_id) -> bytes:
        fp = hashlib.blake2b(pickle.dumps((app.name, params, iterations, ds.fingerprint), protocol=4),
                             digest_size=8).hexdigest()
        return ocache_prefix(app_id, user_id) + f"it/{fp}/".encode()

    def progress(self, app, dataset, iterations: int, params=None, *, app_id: Optional[str] = None,
                 user_id: str = "default") -> Dict[str, int]:
        """{worker address: the last iteration of this job stored in its oCache} (workers
        holding none are left out)."""
        ds = dataset if isinstance(dataset, Dataset) else open_dataset(dataset)
        prefix = self._iter_prefix(app, ds, iterations, params, check_id("app id", app_id or app.name), user_id)
        return {a: v[0] for a, v in self.client.run(_w_latest, prefix).items() if v is not None}

    def _save_iteration(self, prefix: bytes, it: int, state, ws=None) -> None:
        self._store_home(prefix + b"%06d" % it, pickle.dumps(state, protocol=5), ws)
