"""README's "Using the library" shows the snippets of tests/bindings/readme_* verbatim (each is
compiled and run by a test: readme_kv, readme_c in ctest, readme_python by the Python package's
pytest); this test fails when README and a snippet drift apart."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class ReadmeSnippets(unittest.TestCase):
    def test_snippets_are_in_readme(self):
        with open(os.path.join(ROOT, "README.md")) as f:
            readme = f.read()
        for name, fence in (("readme_kv.cc", "c++"), ("readme_batch.cc", "c++"), ("readme_readers.cc", "c++"),
                           ("readme_c.c", "c"), ("readme_readers.py", "python"),
                           ("readme_python.py", "python"), ("readme_batch.py", "python"), ("readme_knn.py", "python")):
            with open(os.path.join(HERE, name)) as f:
                snippet = f.read()
            self.assertIn(f"```{fence}\n{snippet}```\n", readme, f"README.md does not show tests/bindings/{name} verbatim")


if __name__ == "__main__":
    sys.argv = sys.argv[:1]  # ctest passes --wort PATH to every *_test.py
    unittest.main()
