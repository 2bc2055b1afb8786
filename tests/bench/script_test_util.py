"""What the Python tests in tests/bench/ share: the command line (--wort PATH/TO/wort, main()),
and for the tests of the table scripts (bench_table_test.py: scripts/bench_table.py,
ycsb_table_test.py: scripts/ycsb_table.py) a scratch directory with the JSON Lines file of real
`wort bench` runs, running the script, and the cells of a Markdown table row. Not a test itself
(no _test suffix)."""
import argparse
import os
import subprocess
import sys
import tempfile
import unittest

WORT = None  # the wort binary (--wort), set by main()


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


class TableScriptTest(unittest.TestCase):
    SCRIPT = None  # the script under test; set by each test class

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.jsonl = os.path.join(cls.tmp.name, "r.jsonl")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def bench(cls, *args):
        """Runs `wort bench ARGS --pool-size 256M --json <cls.jsonl>` (appending to the file)."""
        subprocess.run([WORT, "bench", *args, "--pool-size", "256M", "--json", cls.jsonl], check=True,
                       stdout=subprocess.DEVNULL)

    def render(self, *args):
        return subprocess.run([sys.executable, self.SCRIPT, *args], check=True, capture_output=True,
                              text=True).stdout

    def assert_rejects(self, content, message):
        """The script exits non-zero on a file holding `content`, saying `message` on stderr."""
        path = os.path.join(self.tmp.name, "rejected.jsonl")
        with open(path, "w") as f:
            f.write(content)
        p = subprocess.run([sys.executable, self.SCRIPT, path], capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(message, p.stderr)


def main():
    global WORT
    ap = argparse.ArgumentParser()
    ap.add_argument("--wort", required=True)
    args, rest = ap.parse_known_args()
    WORT = os.path.abspath(args.wort)
    unittest.main(module="__main__", argv=[sys.argv[0]] + rest)
