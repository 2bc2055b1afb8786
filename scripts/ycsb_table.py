#!/usr/bin/env python3
"""Render `wort bench ycsb --json` records (JSON Lines) as Markdown: thread scaling per kind.

One table per (distribution, request distribution): a row per index kind, and per workload the
throughput (M operations/s, wall time) at the lowest and the highest thread count in the records
and their ratio. When a (kind, dist, request, workload, threads) appears more than once (repeated
runs appended to one file), the MEDIAN throughput is shown and the number of runs is stated.

    python3 scripts/ycsb_table.py results.jsonl [--baseline other.jsonl --label new --baseline-label old]

With --baseline, a second block of columns gives the same ratios from the baseline file (e.g. the
runs with WORT_GLOBAL_LOCK=1), so the two designs read side by side.
"""
import argparse
import statistics
import sys
from collections import defaultdict

import jsonl  # scripts/jsonl.py


def load(path):
    runs = defaultdict(list)
    meta = {}
    for n, r in jsonl.records(path, "ycsb"):
        if r.get("errors", 0):
            sys.exit(f"{path}:{n}: {r['index']} {r['workload']} had {r['errors']} errors: not a valid run")
        key = (r["dist"], r.get("request", "-"), r["index"], r["workload"], int(r["threads"]))
        runs[key].append(float(r["mops_per_s"]))
        meta.setdefault((r["dist"], r.get("request", "-")), r)
    return runs, meta


def med(runs, key):
    v = runs.get(key)
    return statistics.median(v) if v else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--baseline")
    ap.add_argument("--label", default="")
    ap.add_argument("--baseline-label", default="baseline")
    a = ap.parse_args(argv)
    runs, meta = load(a.file)
    base = load(a.baseline)[0] if a.baseline else {}
    if not runs:
        sys.exit(f"{a.file}: no ycsb records")
    order_w = ["load", "a", "b", "c", "d", "e", "f"]
    for (dist, req), m in meta.items():
        keys = [k for k in runs if k[0] == dist and k[1] == req]
        kinds = list(dict.fromkeys(k[2] for k in keys))
        works = [w for w in order_w if any(k[3] == w for k in keys)]
        threads = sorted({k[4] for k in keys})
        lo, hi = threads[0], threads[-1]
        nrun = max(len(runs[k]) for k in keys)
        print(f"**{dist}, {req}**: {m['records']:,} records, {m['ops']:,} ops per workload, "
              f"{'median of ' + str(nrun) + ' runs' if nrun > 1 else 'one run'}, flush {m.get('flush', '?')}, "
              f"commit {m.get('git_commit', '?')[:12]}\n")
        head = ["index"]
        for w in works:
            head += [f"{w} {lo}T", f"{w} {hi}T", f"{w} {hi}T/{lo}T" + (f" {a.label}" if a.label else "")]
            if base:
                head += [f"{w} {hi}T/{lo}T {a.baseline_label}"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for kind in kinds:
            row = [kind]
            for w in works:
                x1, x2 = med(runs, (dist, req, kind, w, lo)), med(runs, (dist, req, kind, w, hi))
                row += [f"{x1:.3f}" if x1 else "-", f"{x2:.3f}" if x2 else "-",
                        f"{x2 / x1:.2f}x" if x1 and x2 else "-"]
                if base:
                    b1, b2 = med(base, (dist, req, kind, w, lo)), med(base, (dist, req, kind, w, hi))
                    row += [f"{b2 / b1:.2f}x" if b1 and b2 else "-"]
            print("| " + " | ".join(row) + " |")
        print()


if __name__ == "__main__":
    main()
