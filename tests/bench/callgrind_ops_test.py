#!/usr/bin/env python3
"""Test of scripts/callgrind_ops.py (scripts/insert_callgrind.sh's counter of instructions, cache
misses, locked read-modify-writes, fences and flushes per operation).

    python3 tests/bench/callgrind_ops_test.py --wort PATH/TO/wort

Run by ctest as callgrind_ops_py. The instruction classes on objdump's text (locked RMWs with
and without an explicit prefix, fences, flushes, and look-alikes that are none of them), and the
parser on a callgrind file whose costs are known: a function's own cost excludes what its calls
cost, per-instruction costs add up across blocks, and missing trailing events count as zero.
"""
import os
import sys
import tempfile
import unittest

from script_test_util import main

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import callgrind_ops  # noqa: E402


class Classify(unittest.TestCase):
    def test_kinds(self):
        c = callgrind_ops.classify
        self.assertEqual(c("lock cmpxchg %rdx,(%rdi)"), "rmw")
        self.assertEqual(c("lock xadd %eax,0x8(%rbx)"), "rmw")
        self.assertEqual(c("xchg   %rax,(%rdx)"), "rmw")  # implicitly locked
        self.assertIsNone(c("xchg   %ax,%ax"))           # a register nop: not locked
        self.assertEqual(c("mfence"), "fence")
        self.assertEqual(c("sfence"), "fence")
        self.assertEqual(c("clflush (%rax)"), "flush")
        self.assertEqual(c("clflushopt (%rax)"), "flush")
        self.assertEqual(c("clwb   (%rax)"), "flush")
        self.assertIsNone(c("mov    (%rax),%rdx"))
        self.assertIsNone(c("cmpxchg %rdx,(%rdi)"))  # without lock: not atomic


CALLGRIND = """# callgrind format
version: 1
creator: test
positions: instr line
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
ob=/bin/a
fn=f
0x1000 0 10 2 1 0 1 0 0 0 0
0x1004 0 5
cob=/bin/a
cfn=g
calls=3 0x2000 0
0x1008 0 900 100 100 0 50 0 0 7 0
0x100c 0 1
fn=g
0x2000 0 300 0 0 0 0 3
fn=f
0x1000 0 10 0 0 0 2
"""


class Parse(unittest.TestCase):
    def test_self_costs_and_instructions(self):
        with tempfile.NamedTemporaryFile("w", suffix=".out", delete=False) as f:
            f.write(CALLGRIND)
            path = f.name
        try:
            events, fn_cost, ins_cost, fn_min = callgrind_ops.parse(path)
        finally:
            os.unlink(path)
        self.assertEqual(events[0], "Ir")
        ir = events.index("Ir")
        d1mw = events.index("D1mw")
        d1mr = events.index("D1mr")
        # f: 10 + 5 + 1 + 10 of its own; the call's 900 are g's, not f's.
        self.assertEqual(fn_cost[("/bin/a", "f")][ir], 26)
        self.assertEqual(fn_cost[("/bin/a", "f")][d1mr], 1 + 2)
        self.assertEqual(fn_cost[("/bin/a", "g")][ir], 300)
        self.assertEqual(fn_cost[("/bin/a", "g")][d1mw], 3)
        # The same address in two blocks of f adds up; an omitted event is 0.
        self.assertEqual(ins_cost[("/bin/a", 0x1000)][ir], 20)
        self.assertEqual(ins_cost[("/bin/a", 0x1004)][d1mr], 0)
        self.assertNotIn(("/bin/a", 0x1008), ins_cost)  # the call line is no instruction's own cost
        self.assertEqual(fn_min["/bin/a"]["f"], 0x1000)
        self.assertEqual(fn_min["/bin/a"]["g"], 0x2000)


if __name__ == "__main__":
    main()
