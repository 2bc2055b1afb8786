#!/usr/bin/env python3
"""Test of scripts/bench_table.py on records written by a real (tiny) `wort bench` run.

    python3 tests/bench/bench_table_test.py --wort PATH/TO/wort

Run by ctest as bench_table_py. Checks one table per distribution, one row per kind, the restart
columns filled for a persistent kind and '-' for a volatile one, the last record winning, and
a clear error for a file that is not JSON Lines.
"""
import json
import os

from script_test_util import TableScriptTest, cells, main

HERE = os.path.dirname(os.path.abspath(__file__))


class BenchTable(TableScriptTest):
    SCRIPT = os.path.join(HERE, "..", "..", "scripts", "bench_table.py")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.bench("--index", "fptree,vart", "--dist", "dense,sparse", "--keys", "3000",
                  "--ops", "insert,search,restart", "--pool", os.path.join(cls.tmp.name, "p"))

    def rows(self, text):
        out = {}
        dist = None
        for line in text.splitlines():
            if line.startswith("**"):
                dist = line.split("**")[1]
            elif line.startswith("| ") and not line.startswith("| index"):
                c = cells(line)
                out[(dist, c[0])] = c
        return out

    def test_one_row_per_kind_and_distribution(self):
        rows = self.rows(self.render(self.jsonl))
        self.assertEqual(set(rows), {(d, k) for d in ("dense", "sparse") for k in ("fptree", "vart")})

    def test_restart_columns(self):
        rows = self.rows(self.render(self.jsonl))
        fp, va = rows[("dense", "fptree")], rows[("dense", "vart")]
        self.assertEqual(len(fp), 12)
        for c in fp[9:12]:
            self.assertGreater(float(c.replace(",", "")), 0.0)  # restart, recover, GC in ms
        self.assertEqual(va[9:12], ["-", "-", "-"])  # volatile: no restart
        self.assertEqual(va[5], "0.00")  # no flushes
        self.assertGreater(float(fp[5]), 1.0)  # FPTree flushes per insert

    def test_last_record_wins(self):
        patched = os.path.join(self.tmp.name, "patched.jsonl")
        with open(self.jsonl) as f, open(patched, "w") as g:
            lines = f.read().splitlines()
            g.write("\n".join(lines) + "\n")
            for line in lines:
                r = json.loads(line)
                if r["index"] == "fptree" and r["dist"] == "dense" and r["op"] == "insert":
                    r["flushes_per_op"] = 123.0
                    g.write(json.dumps(r) + "\n")
        rows = self.rows(self.render(patched))
        self.assertEqual(rows[("dense", "fptree")][5], "123.00")

    def test_bad_input(self):
        self.assert_rejects("{not json\n", "not JSON")


if __name__ == "__main__":
    main()
