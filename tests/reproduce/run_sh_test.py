#!/usr/bin/env python3
"""README's main command, scripts/run.sh, as a fresh clone runs it - into an output directory
whose parents do not exist (the command once failed there), at the tiny scale, with a progress
line and an ETA per run.

    python3 tests/reproduce/run_sh_test.py --wort PATH/TO/wort

Run by ctest as run_sh_py. .ci/run runs the same command on every kind (WORT_SCALE=tiny).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
WORT = None


class RunSh(unittest.TestCase):
    def test_fresh_output_directory_with_missing_parents(self):
        tmp = tempfile.mkdtemp(prefix="wort-run-sh-")
        try:
            out = os.path.join(tmp, "a", "b", "c")
            env = dict(os.environ, WORT_SKIP_SETUP="1", WORT_BIN=WORT, WORT_SCALE="tiny", WORT_OUT=out)
            p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "run.sh"), "--index", "wort,fptree",
                                "--no-cachegrind"], env=env, capture_output=True, text=True, timeout=600)
            self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
            self.assertIn("ETA", p.stdout)
            self.assertIn("report: " + out + "/report.md", p.stdout)
            for f in ("report.md", "results.jsonl", "config.json"):
                self.assertTrue(os.path.getsize(os.path.join(out, f)) > 0, f)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_readme_names_the_scale_variable(self):
        with open(os.path.join(ROOT, "README.md")) as f:
            readme = f.read()
        self.assertIn("bash scripts/run.sh", readme)
        self.assertIn("WORT_SCALE=tiny", readme)
        with open(os.path.join(ROOT, ".ci", "run")) as f:
            self.assertIn("WORT_SCALE=tiny", f.read())


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--wort", required=True)
    args, rest = ap.parse_known_args()
    WORT = os.path.abspath(args.wort)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
