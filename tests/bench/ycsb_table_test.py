#!/usr/bin/env python3
"""Test of scripts/ycsb_table.py on records written by real (tiny) `wort bench ycsb` runs.

    python3 tests/bench/ycsb_table_test.py --wort PATH/TO/wort

Run by ctest as ycsb_table_py. Checks one row per kind, the median over repeated runs (against
the records themselves), the thread ratio, the baseline column, and clear errors for a file that
is not JSON Lines and for a record with errors.
"""
import json
import os
import statistics

from script_test_util import TableScriptTest, cells, main

HERE = os.path.dirname(os.path.abspath(__file__))


class YcsbTable(TableScriptTest):
    SCRIPT = os.path.join(HERE, "..", "..", "scripts", "ycsb_table.py")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for seed in (1, 2, 3):  # three runs appended to one file: the table takes the median
            cls.bench("ycsb", "--index", "woart,cceh", "--keys", "2000", "--workload", "load,c", "--threads", "1,2",
                      "--seed", str(seed))
        cls.recs = [json.loads(l) for l in open(cls.jsonl)]

    def rows(self, text):
        head, out = None, {}
        for line in text.splitlines():
            if line.startswith("| index"):
                head = cells(line)
            elif line.startswith("| "):
                c = cells(line)
                out.setdefault(c[0], {}).update(zip(head, c))  # load and c are two tables (requests - / zipfian)
        return out

    def median(self, kind, work, threads):
        return statistics.median(r["mops_per_s"] for r in self.recs
                                 if r["index"] == kind and r["workload"] == work and r["threads"] == threads)

    def test_median_and_ratio(self):
        text = self.render(self.jsonl)
        self.assertIn("median of 3 runs", text)
        rows = self.rows(text)
        self.assertEqual(set(rows), {"woart", "cceh"})
        for kind in ("woart", "cceh"):
            for w in ("load", "c"):
                m1, m2 = self.median(kind, w, 1), self.median(kind, w, 2)
                self.assertEqual(rows[kind][f"{w} 1T"], f"{m1:.3f}")
                self.assertEqual(rows[kind][f"{w} 2T"], f"{m2:.3f}")
                self.assertEqual(rows[kind][f"{w} 2T/1T"], f"{m2 / m1:.2f}x")

    def test_baseline_column(self):
        rows = self.rows(self.render(self.jsonl, "--baseline", self.jsonl, "--baseline-label", "old"))
        self.assertEqual(rows["cceh"]["c 2T/1T old"], rows["cceh"]["c 2T/1T"])

    def test_bad_input(self):
        self.assert_rejects("{not json\n", "not JSON")
        self.assert_rejects(json.dumps(dict(self.recs[0], errors=2)) + "\n", "errors")


if __name__ == "__main__":
    main()
