"""LAF's rules one by one: mean over seeds 1-3 of the simulator (40 workers, 4000 jobs)."""
import sys
from wort.mr import sim
from wort.mr.ring import make_policy

VARIANTS = [("ch", None), ("laf as before: owner only (affinity=False, pin=False, spread=False)", dict(affinity=False, pin=False, spread=False)),
            ("+ affinity (pin=False, spread=False)", dict(pin=False, spread=False)),
            ("+ pinned load in the bounds (spread=False)", dict(spread=False)),
            ("+ spread (defaults)", dict()), ("defaults, slack=0.1", dict(slack=0.1))]
cache = int(sys.argv[1]) if len(sys.argv) > 1 else 64
traces = [sim.make_trace(jobs=4000, workers=40, seed=s) for s in (1, 2, 3)]
print("| rules | hit ratio | imbalance | mean job time |\n|---|---|---|---|")
for name, kw in VARIANTS:
    rs = [sim.simulate(make_policy("ch") if kw is None else make_policy("laf", **kw), t, cache_blocks=cache) for t in traces]
    print("| %s | %.4f | %.3f | %.1f |" % (name, *(sum(r[k] for r in rs) / 3 for k in ("hit_ratio", "imbalance", "mean_jct"))))
