#!/usr/bin/env python3
"""Test of scripts/scaling_table.py (the table of scripts/scaling.sh) and of scaling.sh itself.

    python3 tests/bench/scaling_table_test.py --wort PATH/TO/wort

Run by ctest as scaling_table_py. The table function on records whose figures are known (the
median and range of repeated runs, the speedup over one thread, CPU ns and the cores used, two
labels side by side, missing points), its clear errors, and one tiny real grid: scaling.sh with
two --wort/--label binaries (the same binary twice) writes both record files and a table with a
row per (kind, workload, label).
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from script_test_util import cells, main
import script_test_util

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "..", "scripts")
sys.path.insert(0, SCRIPTS)
import scaling_table  # noqa: E402


def rec(kind, work, threads, mops, cpu_ns=1000.0, seconds=1.0, ops=1000):
    return {"bench": "ycsb", "index": kind, "workload": work, "threads": threads, "mops_per_s": mops,
            "cpu_ns_per_op": cpu_ns, "seconds": seconds, "ops": ops, "records": ops, "request": "zipfian",
            "dist": "sparse", "errors": 0}


def rows(text, table):
    """{(kind, workload, label): {column: cell}} of table 0 (throughput) or 1 (CPU)."""
    out, head, n = {}, None, -1
    for line in text.splitlines():
        if line.startswith("| index"):
            n += 1
            head = cells(line)
        elif line.startswith("| ") and n == table:
            c = cells(line)
            out[(c[0], c[1], c[2])] = dict(zip(head, c))
    return out


class TableFunction(unittest.TestCase):
    def test_median_range_speedup(self):
        before = [rec("fastfair", "load", 1, 1.0), rec("fastfair", "load", 1, 3.0), rec("fastfair", "load", 1, 2.0),
                  rec("fastfair", "load", 2, 3.0), rec("fastfair", "load", 2, 4.0), rec("fastfair", "load", 2, 5.0)]
        after = [rec("fastfair", "load", 1, 2.0, cpu_ns=500.0, seconds=0.25, ops=1000),
                 rec("fastfair", "load", 2, 7.0, cpu_ns=600.0, seconds=0.5, ops=1000)]
        text = scaling_table.tables([("before", before), ("after", after)])
        t = rows(text, 0)
        self.assertEqual(t[("fastfair", "load", "before")]["1T"], "2.000 [1.000-3.000]")
        self.assertEqual(t[("fastfair", "load", "before")]["2T"], "4.000 [3.000-5.000] (2.00x)")
        self.assertEqual(t[("fastfair", "load", "after")]["2T"], "7.000 (3.50x)")
        c = rows(text, 1)
        # cores used = cpu ns/op * ops / (wall * threads): 500e-9*1000/(0.25*1) = 0.002
        self.assertEqual(c[("fastfair", "load", "after")]["1T"], "500 / 0.00")
        self.assertEqual(c[("fastfair", "load", "after")]["2T"], "600 / 0.00")
        self.assertIn("median of 3 runs", text)

    def test_utilization_and_order(self):
        recs = [rec("vart", "c", 1, 1.0, cpu_ns=1e6, seconds=1.0, ops=1000),   # 1 s CPU in 1 s: 1 core
                rec("vart", "c", 4, 2.0, cpu_ns=1e6, seconds=0.5, ops=1000),   # 1 s CPU in 0.5 s x 4: 0.5
                rec("vart", "load", 1, 1.0), rec("cceh", "a", 1, 1.0)]
        text = scaling_table.tables([("x", recs)])
        c = rows(text, 1)
        self.assertEqual(c[("vart", "c", "x")]["1T"], "1000000 / 1.00")
        self.assertEqual(c[("vart", "c", "x")]["4T"], "1000000 / 0.50")
        self.assertEqual(c[("vart", "load", "x")]["4T"], "-")
        order = [k for k in rows(text, 0)]
        self.assertEqual(order, [("vart", "load", "x"), ("vart", "c", "x"), ("cceh", "a", "x")])

    def test_errors(self):
        with self.assertRaises(ValueError):
            scaling_table.tables([("x", [])])
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.jsonl")
            with open(bad, "w") as f:
                f.write(json.dumps(rec("vart", "a", 1, 1.0)) + "\nnot json\n")
            p = subprocess.run([sys.executable, os.path.join(SCRIPTS, "scaling_table.py"), "x=" + bad],
                               capture_output=True, text=True)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("bad.jsonl:2: not JSON", p.stderr)
            errs = os.path.join(d, "errs.jsonl")
            r = rec("vart", "a", 1, 1.0)
            r["errors"] = 3
            with open(errs, "w") as f:
                f.write(json.dumps(r) + "\n")
            p = subprocess.run([sys.executable, os.path.join(SCRIPTS, "scaling_table.py"), "x=" + errs],
                               capture_output=True, text=True)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("had 3 errors", p.stderr)
            p = subprocess.run([sys.executable, os.path.join(SCRIPTS, "scaling_table.py"), errs],
                               capture_output=True, text=True)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("expected LABEL=FILE.jsonl", p.stderr)


class ScalingScript(unittest.TestCase):
    def test_two_binaries_side_by_side(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out")
            p = subprocess.run(["bash", os.path.join(SCRIPTS, "scaling.sh"), "--wort", script_test_util.WORT,
                                "--label", "old", "--wort", script_test_util.WORT, "--label", "new",
                                "--keys", "2000", "--threads", "1,2", "--kinds", "fastfair,vart",
                                "--workloads", "load,c", "--pool-size", "64M", "--out", out],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            for lab in ("old", "new"):
                with open(os.path.join(out, lab + ".jsonl")) as f:
                    recs = [json.loads(l) for l in f]
                self.assertEqual({(r["index"], r["workload"], r["threads"]) for r in recs},
                                 {(k, w, t) for k in ("fastfair", "vart") for w in ("load", "c") for t in (1, 2)})
            with open(os.path.join(out, "scaling.md")) as f:
                text = f.read()
            t = rows(text, 0)
            self.assertEqual(len(t), 8)  # 2 kinds x 2 workloads x 2 labels
            self.assertRegex(t[("vart", "c", "new")]["2T"], r"^\d+\.\d{3} \(\d+\.\d\dx\)$")

    def test_bad_arguments(self):
        for args, msg in ((["--wort", "/nonexistent/wort"], "no executable wort binary"),
                          (["--label", "x"], "give --wort first"),
                          (["--repeat", "0", "--wort", script_test_util.WORT], "positive integer"),
                          (["--bogus"], "unknown argument")):
            p = subprocess.run(["bash", os.path.join(SCRIPTS, "scaling.sh"), *args], capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(msg, p.stderr)


if __name__ == "__main__":
    main()
