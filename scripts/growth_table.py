#!/usr/bin/env python3
"""Pool growth in the YCSB load (issue 31, h70): per binary, pool (grown on demand or pre-grown
with --pool-initial), index and thread count, the medians over rounds of Mops/s, the speedup over
one thread, system CPU ns per op, voluntary context switches and the allocator's counters
(`wort bench ycsb` JSON: alloc_lock_waits of alloc_lock_acquisitions, pool_grows (ahead),
pool_grow_waits and their ms, pool_file_mib: the file's heap at the end, h72), and "default/pre-grown", the default pool's Mops/s over the
pre-grown one's (1.0: growth costs the writers nothing).

    python3 scripts/growth_table.py FILE.jsonl... > growth.md

A record's binary and pool come from its "binary" and "pool" fields (scripts/device_checks.sh's
part "growth" adds them) or else from its file's name, BINARY-POOL[-anything].jsonl
(doc/results/h70/ab.sh writes base-default.jsonl, new-pregrown.jsonl, ...).
"""
import json
import os
import statistics
import sys
from collections import defaultdict


def med(v):
    return statistics.median(v) if v else float("nan")


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    rec = defaultdict(lambda: defaultdict(list))
    for path in sys.argv[1:]:
        parts = os.path.basename(path).rsplit(".", 1)[0].split("-")
        for line in open(path):
            r = json.loads(line)
            if r.get("workload") != "load":
                continue
            b = r.get("binary", parts[0])
            p = r.get("pool", parts[1] if len(parts) > 1 else "?")
            k = (r["index"], b, p, int(r["threads"]))
            for f in ("mops_per_s", "sys_ns_per_op", "vol_switches", "alloc_lock_waits", "alloc_lock_acquisitions",
                      "pool_grows", "pool_grows_ahead", "pool_grow_waits", "pool_grow_wait_ms", "pool_grow_ms",
                      "pool_file_mib"):
                if f in r:
                    rec[k][f].append(float(r[f]))
    if not rec:
        print("no load records", file=sys.stderr)
        return 1
    print("| index | binary | pool | threads | runs | Mops/s median [min-max] | x 1 thread | default/pre-grown | sys ns/op | "
          "vol cs | lock waits / takings | grows (ahead) | grow waits, ms | grow ms | file MiB |")
    print("|---|---|---|---:|---:|---|---:|---:|---:|---:|---|---|---|---:|---:|")

    def m(k, f):
        return med(rec[k].get(f, []))

    def opt(k, f, fmt="{:.0f}"):
        v = rec[k].get(f)
        return fmt.format(med(v)) if v else "-"

    for k in sorted(rec):
        idx, b, p, t = k
        mo = rec[k]["mops_per_s"]
        one = (idx, b, p, 1)
        sp = m(k, "mops_per_s") / m(one, "mops_per_s") if one in rec and t != 1 else float("nan")
        other = (idx, b, "pregrown", t)
        ratio = m(k, "mops_per_s") / m(other, "mops_per_s") if p == "default" and other in rec else float("nan")
        print(f"| {idx} | {b} | {p} | {t} | {len(mo)} | {med(mo):.3f} [{min(mo):.3f}-{max(mo):.3f}] | "
              f"{'-' if sp != sp else f'{sp:.2f}x'} | {'-' if ratio != ratio else f'{ratio:.2f}'} | "
              f"{opt(k, 'sys_ns_per_op')} | {opt(k, 'vol_switches')} | "
              f"{opt(k, 'alloc_lock_waits')} / {opt(k, 'alloc_lock_acquisitions')} | "
              f"{opt(k, 'pool_grows')} ({opt(k, 'pool_grows_ahead')}) | "
              f"{opt(k, 'pool_grow_waits')}, {opt(k, 'pool_grow_wait_ms', '{:.1f}')} | {opt(k, 'pool_grow_ms', '{:.0f}')} | "
              f"{opt(k, 'pool_file_mib')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
