#!/usr/bin/env python3
"""`wort bench`'s side of perf's control fifo (src/bench/bench.cc, PerfWindow; used by
scripts/insert_perf.sh): with WORT_PERF_CTL / WORT_PERF_ACK set, the named phase (default insert)
sends "enable" before its operations and "disable" after them, each waiting for perf's "ack"; no
other phase writes anything, and without WORT_PERF_CTL nothing is opened. A thread here plays
perf: it reads the control fifo and answers each command on the ack fifo.

    python3 tests/bench/perf_window_test.py --wort PATH/TO/wort

Run by ctest as perf_window_py.
"""
import os
import subprocess
import tempfile
import threading
import unittest

import script_test_util


class FakePerf(threading.Thread):
    """Reads commands from ctl (one open, until EOF) and answers each with "ack" on ack."""

    def __init__(self, ctl, ack):
        super().__init__(daemon=True)
        self.ctl, self.ack, self.commands = ctl, ack, []

    def run(self):
        with open(self.ctl, "r") as c, open(self.ack, "w") as a:
            for line in c:
                self.commands.append(line.strip())
                a.write("ack\n")
                a.flush()


class PerfWindow(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.ctl = os.path.join(self.tmp.name, "ctl")
        self.ack = os.path.join(self.tmp.name, "ack")
        os.mkfifo(self.ctl)
        os.mkfifo(self.ack)

    def tearDown(self):
        self.tmp.cleanup()

    def bench(self, extra_env, *args):
        env = dict(os.environ, **extra_env)
        return subprocess.run([script_test_util.WORT, "bench", "--index", "wort", "--keys", "2000", "--pool-size", "64M",
                               "--ops", "insert,search", *args], env=env, capture_output=True, text=True, timeout=120)

    def counted(self, phase_env, *args):
        perf = FakePerf(self.ctl, self.ack)
        perf.start()
        p = self.bench(dict(WORT_PERF_CTL=self.ctl, WORT_PERF_ACK=self.ack, **phase_env), *args)
        perf.join(timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(perf.is_alive(), "the benchmark did not open the control fifo, or left it open")
        return perf.commands

    def test_insert_phase_by_default(self):
        self.assertEqual(self.counted({}), ["enable", "disable"])

    def test_named_phase(self):
        self.assertEqual(self.counted({"WORT_PERF_PHASE": "search"}), ["enable", "disable"])

    def test_several_threads_one_window(self):
        self.assertEqual(self.counted({}, "--threads", "2"), ["enable", "disable"])

    def test_no_other_phase_opens_the_fifo(self):
        # Nobody reads the fifo: a phase that opened it would block, and the run time out.
        p = self.bench(dict(WORT_PERF_CTL=self.ctl, WORT_PERF_ACK=self.ack, WORT_PERF_PHASE="no-such-phase"))
        self.assertEqual(p.returncode, 0, p.stderr)
        p = self.bench({})
        self.assertEqual(p.returncode, 0, p.stderr)


if __name__ == "__main__":
    script_test_util.main()
