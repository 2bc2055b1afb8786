#!/usr/bin/env python3
"""libwort.so exports the public API and nothing else (include/wort/export.h): every symbol in
its dynamic symbol table is a C function of wort.h or a name the public headers mark
WORT_EXPORT (a class's members, typeinfo and vtable; a function; a variable), in the headers'
namespaces (wort, wort::pm, wort::pm::detail, wort::knn); and every function and variable so marked is
exported. The allowed names are read from the headers, so a new public function needs only its
WORT_EXPORT; an internal symbol (an index kind's, the epochs', the registry's) fails the test.

    python3 tests/foundation/exports_test.py --wort PATH/TO/wort   (libwort.so is beside it)

Run by ctest as exports_py.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
LIB = None

# What a C++ symbol's demangled name may start with besides the entity itself.
SPECIAL = ("typeinfo name for ", "typeinfo for ", "vtable for ", "VTT for ", "non-virtual thunk to ",
           "guard variable for ")


def public_names():
    """(exported classes, exported functions and variables) declared in include/."""
    classes, entities = set(), set()
    for h in [os.path.join(ROOT, "include", "wort.h")] + sorted(glob.glob(os.path.join(ROOT, "include", "wort", "*.h"))):
        with open(h) as f:
            text = f.read()
        classes |= set(re.findall(r"\b(?:class|struct)\s+(?:alignas\(\d+\)\s+|\[\[\w+\]\]\s+)*WORT_EXPORT\s+(\w+)", text))
        entities |= set(re.findall(r"^WORT_EXPORT\s+(?:extern\s+)?[^;()]*?\b(\w+)\s*(?:\(|;)", text, re.M))
    return classes, entities


def exported_symbols():
    out = subprocess.run(["nm", "-D", "--defined-only", "--demangle", LIB], check=True, capture_output=True,
                         text=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            syms.append((parts[1], re.sub(r"@@?WORT_[0-9.]+$", "", parts[2])))
    return syms


class Exports(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.classes, cls.entities = public_names()
        cls.syms = exported_symbols()

    def test_headers_mark_the_api(self):
        # The parse found the API: a sample of each kind of declaration.
        for c in ("Status", "Pool", "Allocator", "Index", "KvStore", "Hook", "ThreadCounters"):
            self.assertIn(c, self.classes)
        for e in ("CreateIndex", "KvKinds", "CodeName", "SetFlushKind", "g_hook", "LocalSlow", "t_counters", "wort_open", "wort_scan"):
            self.assertIn(e, self.entities)

    def test_only_the_public_api_is_exported(self):
        allowed = self.classes | self.entities
        wrong = []
        for kind, name in self.syms:
            if kind == "A":  # the version node (cmake/libwort.map.in)
                continue
            if name.startswith("wort_"):
                if name not in self.entities:
                    wrong.append(name)
                continue
            bare = name
            for p in SPECIAL:
                if bare.startswith(p):
                    bare = bare[len(p):]
            m = re.match(r"wort::(?:pm::(?:detail::)?|knn::)?(\w+)", bare)
            if not m or m.group(1) not in allowed or re.match(r"wort::(?:knn::)?\w+::(Impl|Header)\b", bare):
                wrong.append(name)
        self.assertEqual(wrong, [], f"{len(wrong)} symbols of libwort.so are not in the public API")

    def test_every_public_function_and_variable_is_exported(self):
        names = set()
        for _, name in self.syms:
            m = re.match(r"(?:wort::(?:pm::(?:detail::)?|knn::)?)?(\w+)", name)
            if m:
                names.add(m.group(1))
        self.assertEqual(sorted(self.entities - names), [])

    def test_internal_calls_bind_locally(self):
        # Hidden symbols are called directly: the PLT holds only calls to exported functions and
        # to other libraries (libc, libstdc++), none to an internal wort function.
        out = subprocess.run(["readelf", "-rW", LIB], check=True, capture_output=True, text=True).stdout
        slots = [l.split()[4].split("@")[0] for l in out.splitlines() if "JUMP_SLOT" in l and len(l.split()) > 4]
        demangled = subprocess.run(["c++filt"], input="\n".join(slots), check=True, capture_output=True,
                                   text=True).stdout.splitlines()
        internal = [d for d in demangled if re.match(r"wort::(art|roart|hash|btree|vol|radix|sync|builtin_kinds)::", d)]
        self.assertEqual(internal, [])


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--wort", required=True)
    args, rest = ap.parse_known_args()
    LIB = os.path.join(os.path.dirname(os.path.abspath(args.wort)), "libwort.so")
    unittest.main(argv=[sys.argv[0]] + rest)
