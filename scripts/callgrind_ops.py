#!/usr/bin/env python3
"""Per-operation instruction profile of one callgrind run (scripts/insert_callgrind.sh runs it).

    callgrind_ops.py OUT_FILE OPS [--top N] [--json FILE] [--label NAME]

OUT_FILE: a callgrind output written with --dump-instr=yes --compress-pos=no
--compress-strings=no (and usually --cache-sim=yes --toggle-collect=FN, so that only the
operation is counted). OPS: how many operations the collected part ran (the keys inserted).

Prints, per operation: instructions (Ir), D1 misses (reads + writes), LL misses, and the count of
instructions of four kinds that callgrind does not count by itself, found by disassembling every
executed instruction's object (objdump) at the address callgrind recorded:
  rmw     locked read-modify-writes (a lock prefix, or xchg with a memory operand, which is
          locked implicitly): the atomic compare-exchanges, fetch-adds and exchanges of locks,
          version words and counters (also inside libc: pthread mutexes)
  fence   mfence / sfence / lfence
  flush   clflush / clflushopt / clwb
and then the same per function (self cost: what the function's own instructions did).
The load address of each object (valgrind maps a position-independent one where it likes) is
found by matching the functions callgrind names with the object's symbol table.
"""
import argparse
import collections
import json
import re
import subprocess
import sys


def parse(path):
    """Returns events, {(ob, fn): [costs]}, {(ob, addr): [costs]}, {ob: {fn: min addr}}."""
    events = []
    fn_cost = collections.defaultdict(lambda: None)
    ins_cost = {}
    fn_min = collections.defaultdict(dict)
    ob = fn = None
    skip_next = False
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            if line.startswith("events:"):
                events = line.split()[1:]
                continue
            c = line[0]
            if c.isdigit() or c in "+-*" or line.startswith("0x"):
                if skip_next:  # the inclusive cost of a call: not this function's own
                    skip_next = False
                    continue
                parts = line.split()
                if not parts[0].startswith("0x"):
                    continue  # (only with compressed positions)
                addr = int(parts[0], 16)
                vals = [int(x) for x in parts[2:]]
                vals += [0] * (len(events) - len(vals))
                key = (ob, addr)
                cur = ins_cost.get(key)
                ins_cost[key] = vals if cur is None else [a + b for a, b in zip(cur, vals)]
                k2 = (ob, fn)
                cur = fn_cost[k2]
                fn_cost[k2] = list(vals) if cur is None else [a + b for a, b in zip(cur, vals)]
                m = fn_min[ob].get(fn)
                if m is None or addr < m:
                    fn_min[ob][fn] = addr
                continue
            if line.startswith("calls="):
                skip_next = True
                continue
            if line.startswith("ob="):
                ob = line[3:]
            elif line.startswith("fn="):
                fn = line[3:]
    return events, {k: v for k, v in fn_cost.items() if v is not None}, ins_cost, fn_min


def symbols(obj):
    """{name: address} from the object's symbol tables (static and dynamic), names demangled."""
    out = {}
    for extra in ([], ["-D"]):
        try:
            txt = subprocess.run(["nm", "-C", "--defined-only"] + extra + [obj], capture_output=True, text=True).stdout
        except FileNotFoundError:
            return out
        for l in txt.splitlines():
            p = l.split(" ", 2)
            if len(p) == 3 and p[1] in "tTwWiI":
                out.setdefault(p[2].split("@")[0], int(p[0], 16))
    return out


def load_base(obj, fns):
    syms = symbols(obj)
    deltas = collections.Counter()
    for name, addr in fns.items():
        n = re.sub(r"^.*?:(?=[^:/]*$)", "", name) if ".c:" in name or ".S:" in name else name
        n = n.split("'")[0].split("@")[0].strip()
        if n in syms:
            deltas[addr - syms[n]] += 1
    if not deltas:
        return None
    return deltas.most_common(1)[0][0]


KINDS = {
    "fence": re.compile(r"^(mfence|sfence|lfence)\b"),
    "flush": re.compile(r"^(clflush|clflushopt|clwb)\b"),
}


def classify(text):
    t = text.strip()
    if t.startswith("lock ") or t.startswith("lock\t"):
        return "rmw"
    if re.match(r"^xchg\w*\s", t) and "(" in t:  # xchg with memory: implicitly locked
        return "rmw"
    for k, r in KINDS.items():
        if r.match(t):
            return k
    return None


def special_instructions(obj, base, addrs):
    """{runtime addr: kind} for the executed addresses of obj that are rmw / fence / flush."""
    if not addrs:
        return {}
    lo, hi = min(addrs) - base, max(addrs) - base + 16
    txt = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={lo}", f"--stop-address={hi}", obj],
                         capture_output=True, text=True).stdout
    want = set(a - base for a in addrs)
    out = {}
    for l in txt.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\s+(.*)$", l)
        if not m:
            continue
        a = int(m.group(1), 16)
        if a not in want:
            continue
        k = classify(m.group(2))
        if k:
            out[a + base] = k
    return out


def short(fn):
    fn = re.sub(r"\(anonymous namespace\)::", "", fn)
    fn = re.sub(r"\(.*", "", fn)  # drop the argument list
    fn = re.sub(r"^wort::", "", fn)
    return fn[:70]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("ops", type=float)
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("--json")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    events, fn_cost, ins_cost, fn_min = parse(a.out)
    ix = {e: i for i, e in enumerate(events)}

    def ev(v, *names):
        return sum(v[ix[n]] for n in names if n in ix)

    kind_of = {}
    for ob in {o for o, _ in ins_cost}:
        if ob is None:
            continue
        base = load_base(ob, fn_min[ob])
        if base is None:
            print(f"callgrind_ops: no symbols matched in {ob}: its rmw/fence/flush counts are missing", file=sys.stderr)
            continue
        addrs = [ad for (o, ad) in ins_cost if o == ob]
        for ad, k in special_instructions(ob, base, addrs).items():
            kind_of[(ob, ad)] = k
    per_fn_kind = collections.defaultdict(collections.Counter)
    addr_fn = {}
    # Attribute instruction counts to functions: an address belongs to the function whose cost
    # lines named it (recorded while parsing: rebuild from fn costs is not possible, so re-parse).
    ob = fn = None
    skip = False
    with open(a.out, errors="replace") as f:
        for line in f:
            if line.startswith("ob="):
                ob = line[3:].rstrip("\n")
            elif line.startswith("fn="):
                fn = line[3:].rstrip("\n")
            elif line.startswith("calls="):
                skip = True
            elif line.startswith("0x"):
                if skip:
                    skip = False
                    continue
                p = line.split()
                k = kind_of.get((ob, int(p[0], 16)))
                if k:
                    per_fn_kind[(ob, fn)][k] += int(p[2]) if len(p) > 2 else 0
    total = [0] * len(events)
    for v in fn_cost.values():
        total = [x + y for x, y in zip(total, v)]
    tot_kind = collections.Counter()
    for c in per_fn_kind.values():
        tot_kind.update(c)
    n = a.ops
    row = lambda v, kc: (ev(v, "Ir") / n, ev(v, "D1mr", "D1mw") / n, ev(v, "DLmr", "DLmw") / n,
                         kc.get("rmw", 0) / n, kc.get("fence", 0) / n, kc.get("flush", 0) / n)
    print(f"{a.label} per operation ({int(n)} operations)")
    print(f"{'function (self)':<72} {'Ir':>8} {'D1miss':>7} {'LLmiss':>7} {'rmw':>6} {'fence':>6} {'flush':>6}")
    t = row(total, tot_kind)
    print(f"{'TOTAL':<72} {t[0]:>8.1f} {t[1]:>7.2f} {t[2]:>7.2f} {t[3]:>6.2f} {t[4]:>6.2f} {t[5]:>6.2f}")
    items = sorted(fn_cost.items(), key=lambda kv: -ev(kv[1], "Ir"))
    rows = []
    for (o, f), v in items:
        r = row(v, per_fn_kind.get((o, f), {}))
        rows.append({"function": short(f), "ir": r[0], "d1_miss": r[1], "ll_miss": r[2], "rmw": r[3], "fence": r[4], "flush": r[5]})
    shown = rows[: a.top]
    # Every function with an rmw or fence is shown, however few its instructions.
    shown += [r for r in rows[a.top:] if r["rmw"] > 0.0005 or r["fence"] > 0.0005]
    for r in shown:
        print(f"{r['function']:<72} {r['ir']:>8.1f} {r['d1_miss']:>7.2f} {r['ll_miss']:>7.2f} {r['rmw']:>6.2f} {r['fence']:>6.2f} {r['flush']:>6.2f}")
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps({"label": a.label, "ops": n, "total": {"ir": t[0], "d1_miss": t[1], "ll_miss": t[2], "rmw": t[3],
                                                                   "fence": t[4], "flush": t[5]}, "functions": shown}) + "\n")


if __name__ == "__main__":
    main()
