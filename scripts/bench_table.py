#!/usr/bin/env python3
"""Render `wort bench --json` records (JSON Lines) as one Markdown table per distribution.

One row per index kind: insert and search time (wall and CPU ns/op), flushes and fences per
insert, leaf depth, bytes per key, and, when the run had the restart phase, the clean restart
and post-kill recovery times (ms to the first lookup; the background GC's duration).

    python3 scripts/bench_table.py results.jsonl [more.jsonl ...] > table.md

When a (kind, distribution, op) appears more than once, the last record wins.
"""
import argparse
import sys

import jsonl  # scripts/jsonl.py


def fmt(v, digits=0):
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="JSON Lines files written by wort bench --json")
    args = ap.parse_args(argv)
    recs = {}
    order = []
    meta = {}
    for path in args.files:
        for _, r in jsonl.records(path, "index"):
            key = (r["dist"], r["index"])
            if key not in recs:
                recs[key] = {}
                order.append(key)
            recs[key][r["op"]] = r
            meta.setdefault(r["dist"], set()).add(
                (r.get("keys"), r.get("git_commit"), r.get("flush"), r.get("cpu"), r.get("threads")))
    if not recs:
        sys.exit("no index benchmark records found")
    dists = []
    for d, _ in order:
        if d not in dists:
            dists.append(d)
    out = []
    for d in dists:
        rows = [k for k in order if k[0] == d]
        has_restart = any("restart" in recs[k] for k in rows)
        for keys, commit, flush, cpu, threads in sorted(meta[d], key=str):
            out.append(f"**{d}**: {keys:,} keys, {threads} thread(s), flush {flush}, {cpu}, commit {commit}\n")
        head = ["index", "insert ns", "insert CPU-ns", "search ns", "search CPU-ns", "flushes/insert",
                "fences/insert", "leaf depth", "B/key"]
        if has_restart:
            head += ["restart ms", "recover ms", "GC ms"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for k in rows:
            ops = recs[k]
            ins, sea = ops.get("insert"), ops.get("search")
            any_r = ins or sea or next(iter(ops.values()))
            cells = [k[1],
                     fmt(ins and ins["ns_per_op"]), fmt(ins and ins["cpu_ns_per_op"]),
                     fmt(sea and sea["ns_per_op"]), fmt(sea and sea["cpu_ns_per_op"]),
                     fmt(ins and ins["flushes_per_op"], 2), fmt(ins and ins["fences_per_op"], 2),
                     fmt(any_r.get("leaf_depth"), 2), fmt(any_r.get("bytes_per_key"), 1)]
            if has_restart:
                rs, rc = ops.get("restart"), ops.get("recover")
                cells += [fmt(rs and rs["seconds"] * 1e3, 3), fmt(rc and rc["seconds"] * 1e3, 3),
                          fmt(rc and rc.get("recovery_seconds", 0) * 1e3, 3)]
            errs = sum(r.get("errors", 0) for r in ops.values())
            if errs:
                cells[0] += f" ({errs} WRONG)"
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
