#!/usr/bin/env python3
"""The scaling grid's table (scripts/scaling.sh): `wort bench ycsb --json` records of one or more
binaries (a label each) as Markdown.

    python3 scripts/scaling_table.py LABEL=FILE.jsonl [LABEL=FILE.jsonl ...]

Two tables. The first gives, per (index kind, workload) and label, the throughput (M ops/s, wall
time) at every thread count and its speedup over 1 thread (over the lowest thread count when 1
was not run). The second makes noise visible: per thread count the CPU time per operation (ns,
all threads together) and the cores the run actually got, CPU time / (wall time x threads): a
run whose threads shared cores with other work shows utilization well below 1 and a throughput
that says nothing about the design. Repeated runs of one point (several records, e.g. --repeat)
show the median, and the Mops/s cell gives the min-max range. Python 3 standard library only (the
script travels with prebuilt binaries to machines without a build tree).
"""
import json
import statistics
import sys
from collections import defaultdict

WORK_ORDER = ["load", "a", "b", "c", "d", "e", "f"]


def read_records(path):
    """The ycsb records of a JSON Lines file. Raises ValueError naming the line that is not JSON
    or that reports errors (such a run is not valid)."""
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON: {e}") from None
            if r.get("bench") != "ycsb":
                continue
            if r.get("errors", 0):
                raise ValueError(f"{path}:{n}: {r.get('index')} {r.get('workload')} had {r['errors']} errors: not a valid run")
            out.append(r)
    return out


def _point(recs):
    """Median Mops/s, min, max, median CPU ns/op and median utilization of repeated runs."""
    mops = [float(r["mops_per_s"]) for r in recs]
    cpu = [float(r.get("cpu_ns_per_op", 0)) for r in recs]
    util = []
    for r in recs:
        wall, t, ops = float(r.get("seconds", 0)), int(r["threads"]), int(r.get("ops", 0))
        if wall > 0 and t > 0:
            util.append(float(r.get("cpu_ns_per_op", 0)) * ops / 1e9 / (wall * t))
    return {"mops": statistics.median(mops), "lo": min(mops), "hi": max(mops), "cpu": statistics.median(cpu),
            "util": statistics.median(util) if util else None, "n": len(recs)}


def tables(labelled):
    """labelled: a list of (label, records). Returns the Markdown text of both tables."""
    pts = defaultdict(list)  # (kind, workload, label, threads) -> records
    kinds, works, threads, labels = [], set(), set(), []
    for label, recs in labelled:
        labels.append(label)
        for r in recs:
            k = (r["index"], r["workload"], label, int(r["threads"]))
            pts[k].append(r)
            if r["index"] not in kinds:
                kinds.append(r["index"])
            works.add(r["workload"])
            threads.add(int(r["threads"]))
    if not pts:
        raise ValueError("no ycsb records")
    works = sorted(works, key=lambda w: (WORK_ORDER.index(w) if w in WORK_ORDER else len(WORK_ORDER), w))
    threads = sorted(threads)
    base_t = threads[0]
    rows = [(k, w, lab) for k in kinds for w in works for lab in labels
            if any((k, w, lab, t) in pts for t in threads)]
    summary = {key: _point(v) for key, v in pts.items()}
    nruns = max(p["n"] for p in summary.values())
    first = next(iter(pts.values()))[0]
    all_recs = [r for v in pts.values() for r in v]
    requests = ",".join(sorted({r.get("request", "-") for r in all_recs} - {"-"})) or "-"

    out = []
    out.append(f"{first.get('records', 0):,} records, {first.get('ops', 0):,} ops per workload, request "
               f"{requests} (load: none), dist {first.get('dist', '-')}, flush {first.get('flush', '?')}, "
               f"{'median of ' + str(nruns) + ' runs (min-max)' if nruns > 1 else 'one run'}; "
               f"cpu {first.get('cpu', '?')}\n")
    out.append(f"**Throughput, M ops/s (speedup over {base_t} thread{'s' if base_t != 1 else ''})**\n")
    head = ["index", "workload", "label"] + [f"{t}T" for t in threads]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for k, w, lab in rows:
        b = summary.get((k, w, lab, base_t))
        cells = [k, w, lab]
        for t in threads:
            p = summary.get((k, w, lab, t))
            if p is None:
                cells.append("-")
                continue
            c = f"{p['mops']:.3f}"
            if p["n"] > 1:
                c += f" [{p['lo']:.3f}-{p['hi']:.3f}]"
            if t != base_t and b and b["mops"] > 0:
                c += f" ({p['mops'] / b['mops']:.2f}x)"
            cells.append(c)
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out.append("**CPU ns per operation / cores used (CPU time / (wall x threads))**\n")
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for k, w, lab in rows:
        cells = [k, w, lab]
        for t in threads:
            p = summary.get((k, w, lab, t))
            if p is None:
                cells.append("-")
            else:
                cells.append(f"{p['cpu']:.0f} / {p['util']:.2f}" if p["util"] is not None else f"{p['cpu']:.0f} / -")
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    return "\n".join(out)


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if not args or any(a in ("-h", "--help") for a in args):
        print(__doc__)
        return 0 if args else 2
    labelled = []
    try:
        for a in args:
            label, sep, path = a.partition("=")
            if not sep or not label or not path:
                raise ValueError(f"argument {a!r}: expected LABEL=FILE.jsonl")
            labelled.append((label, read_records(path)))
        sys.stdout.write(tables(labelled))
    except (ValueError, OSError) as e:
        print(f"scaling_table: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
