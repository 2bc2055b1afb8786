#!/usr/bin/env python3
"""The bench records' git_commit is the commit the binary was built from: cmake/git_commit.cmake
writes it into a generated source at build time. Runs the script on scratch trees - a git
checkout (clean, with a tracked file changed, with only an untracked file), a directory that is
not one (a tarball), and a subdirectory of another project's checkout - and checks the binary
passed with --wort reports its own build's value (`wort bench --json`, with WORT_GIT_COMMIT unset,
run from a directory outside any checkout).

    python3 tests/bench/git_commit_test.py --wort PATH/TO/wort

Run by ctest as git_commit_py.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import script_test_util

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SCRIPT = os.path.join(ROOT, "cmake", "git_commit.cmake")
GIT = shutil.which("git")
CMAKE = shutil.which("cmake")


def git(cwd, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t", GIT_CONFIG_NOSYSTEM="1", HOME=cwd)
    return subprocess.run([GIT, *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


class GitCommitScript(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="wort-git-commit-")
        self.out = os.path.join(self.tmp, "git_commit.cc")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def value(self, source_dir, with_git=True):
        args = [CMAKE, "-DSOURCE_DIR=" + source_dir, "-DOUTPUT=" + self.out]
        if with_git:
            args.append("-DGIT=" + GIT)
        p = subprocess.run(args + ["-P", SCRIPT], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.out) as f:
            m = re.search(r'BuildGitCommit\(\) \{ return "([^"]*)"; \}', f.read())
        self.assertIsNotNone(m)
        return m.group(1)

    def repo(self, name):
        d = os.path.join(self.tmp, name)
        os.makedirs(os.path.join(d, "sub"))
        git(d, "init", "-q")
        for f in ("a.cc", os.path.join("sub", "b.cc")):
            with open(os.path.join(d, f), "w") as fh:
                fh.write("int x;\n")
        git(d, "add", ".")
        git(d, "commit", "-qm", "first")
        return d

    def test_checkout_clean_dirty_and_untracked(self):
        d = self.repo("repo")
        head = git(d, "rev-parse", "--short=12", "HEAD")
        self.assertRegex(head, r"^[0-9a-f]{12}$")
        self.assertEqual(self.value(d), head)
        with open(os.path.join(d, "untracked.txt"), "w") as f:
            f.write("not part of the build's commit\n")
        self.assertEqual(self.value(d), head)  # untracked files do not make it dirty
        with open(os.path.join(d, "a.cc"), "a") as f:
            f.write("int y;\n")
        self.assertEqual(self.value(d), head + "-dirty")
        git(d, "commit", "-qam", "second")
        second = git(d, "rev-parse", "--short=12", "HEAD")
        self.assertNotEqual(second, head)
        self.assertEqual(self.value(d), second)

    def test_unchanged_value_leaves_the_file_alone(self):
        d = self.repo("repo")
        self.value(d)
        os.utime(self.out, (1000000000, 1000000000))
        self.value(d)
        self.assertEqual(os.stat(self.out).st_mtime, 1000000000)  # nothing to recompile

    def test_not_a_checkout(self):
        d = os.path.join(self.tmp, "tarball")
        os.makedirs(d)
        self.assertEqual(self.value(d), "unknown")

    def test_inside_another_projects_checkout(self):
        d = self.repo("parent")
        self.assertEqual(self.value(os.path.join(d, "sub")), "unknown")

    def test_no_git(self):
        self.assertEqual(self.value(self.repo("repo"), with_git=False), "unknown")


class BinaryRecordsItsBuild(unittest.TestCase):
    def test_bench_json_carries_the_build_commit(self):
        # The value baked into this build (what the build's generated source says).
        wort = script_test_util.WORT
        gen = os.path.join(os.path.dirname(wort), "generated", "git_commit.cc")
        with open(gen) as f:
            built = re.search(r'return "([^"]*)"', f.read()).group(1)
        self.assertRegex(built, r"^([0-9a-f]{12}(-dirty)?|unknown)$")
        tmp = tempfile.mkdtemp(prefix="wort-git-commit-run-")
        try:
            out = os.path.join(tmp, "r.jsonl")
            env = {k: v for k, v in os.environ.items() if k != "WORT_GIT_COMMIT"}
            p = subprocess.run([wort, "bench", "--index", "wort", "--keys", "1000", "--ops", "insert",
                                "--json", out], cwd=tmp, env=env, capture_output=True, text=True,
                               timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])
            with open(out) as f:
                records = [json.loads(line) for line in f if line.strip()]
            self.assertTrue(records)
            for r in records:
                self.assertEqual(r["git_commit"], built)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    script_test_util.main()
