#!/usr/bin/env python3
"""Test of scripts/knn_report.py on synthetic `wort knn bench` records whose ratios are known.

    python3 tests/knn/knn_report_test.py [--wort PATH/TO/wort]

Run by ctest as knn_report_py (the --wort argument is accepted and not needed). Checks that a
claim whose measured ratio equals the chapter's is 'holds', one on the right side of 1 but far
off is 'direction only', one on the wrong side 'does not hold'; that the report says the GPU
claims were measured on the CPU; and that WRONG records are counted.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "knn_report.py")


def rec(exp, engine, ns, mode="single", **kw):
    r = {"experiment": exp, "engine": engine, "device": "cpu", "mode": mode, "ns_per_query": ns, "p50_ns": ns, "p99_ns": ns,
         "qps": 1e9 / ns, "n": 1000, "queries": 10, "dim": 64, "std": 160.0, "k": 32, "degree": 128, "method": "kmeans",
         "nodes_visited_per_query": 10.0, "bytes_per_query": 1000.0, "sphere_bytes_per_query": 100.0,
         "point_bytes_per_query": 900.0, "build_seconds": 0.1, "status": "ok", "cpu": "test cpu", "nproc": 2,
         "git_commit": "abc", "timestamp": "t"}
    r.update(kw)
    return r


def records(psb_vs_brute, psb_vs_bnb, wrong=False):
    out = []
    for dim in (4, 64):
        psb = 1000.0
        out.append(rec("fig32", "psb", psb, dim=dim, bytes_per_query=100.0, status="WRONG" if wrong else "ok"))
        out.append(rec("fig32", "brute", psb * psb_vs_brute, dim=dim, bytes_per_query=1000.0))
        out.append(rec("fig32", "bnb", psb * psb_vs_bnb, dim=dim, bytes_per_query=200.0))
    for m, nodes, ns in (("hilbert", 160.0, 7100.0), ("kmeans", 10.0, 1000.0)):
        out.append(rec("fig28", "bnb", ns, dim=4, method=m, nodes_visited_per_query=nodes))
    return out


def run_report(recs):
    d = tempfile.TemporaryDirectory()
    with open(os.path.join(d.name, "results.jsonl"), "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(d.name, "config.json"), "w") as f:
        json.dump({"scale": "test", "n": 1000, "queries": 10, "dim": 64, "std": 160, "k": 32, "degree": 128,
                   "threads": 2, "gpu_why": "no GPU in the test"}, f)
    p = subprocess.run([sys.executable, SCRIPT, d.name], capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"knn_report.py failed: {p.stdout}{p.stderr}")
    with open(os.path.join(d.name, "report.md")) as f:
        text = f.read()
    d.cleanup()
    return text


def claim_row(text, start):
    for line in text.splitlines():
        if line.startswith("| ") and start in line:
            return line
    raise AssertionError(f"no row with {start!r} in:\n{text}")


class KnnReport(unittest.TestCase):
    def test_published_ratios_hold(self):
        t = run_report(records(4.0, 1.25))
        self.assertIn("**holds", claim_row(t, "about 4x faster than brute-force"))
        self.assertIn("**holds", claim_row(t, "25% faster than branch-and-bound"))
        self.assertIn("**holds", claim_row(t, "16x more nodes"))
        self.assertIn("**holds", claim_row(t, "7.1x slower"))
        self.assertIn("**holds**", claim_row(t, "fewer bytes than brute force"))
        self.assertIn("0 WRONG record(s)", t)

    def test_far_and_wrong_side(self):
        t = run_report(records(40.0, 0.8, wrong=True))
        self.assertIn("**direction only", claim_row(t, "about 4x faster than brute-force"))
        self.assertIn("**does not hold", claim_row(t, "25% faster than branch-and-bound"))
        self.assertIn("2 WRONG record(s)", t)

    def test_says_gpu_claims_are_measured_on_the_cpu(self):
        t = run_report(records(4.0, 1.25))
        self.assertIn("this run has no GPU", t)
        self.assertIn("time, CPU", claim_row(t, "about 4x faster than brute-force"))
        self.assertIn("faiss", t)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--wort")
    args, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)
