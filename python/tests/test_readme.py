"""README's Python snippet (tests/bindings/readme_python.py, shown verbatim in README.md) runs."""
import os
import runpy


def test_readme_snippet_runs(tmp_path, monkeypatch, capsys):
    here = os.path.dirname(os.path.abspath(__file__))
    snippet = os.path.join(here, "..", "..", "tests", "bindings", "readme_python.py")
    monkeypatch.chdir(tmp_path)
    runpy.run_path(snippet, run_name="__main__")
    out = capsys.readouterr().out
    assert "b'alice'" in out and "woart" in out
    assert (tmp_path / "data.pool").exists()


def test_readme_batch_snippet_runs(tmp_path, monkeypatch):
    here = os.path.dirname(os.path.abspath(__file__))
    snippet = os.path.join(here, "..", "..", "tests", "bindings", "readme_batch.py")
    monkeypatch.chdir(tmp_path)
    runpy.run_path(snippet, run_name="__main__")
    assert (tmp_path / "data.pool").exists()


def test_readme_readers_snippet_runs(tmp_path, monkeypatch):
    here = os.path.dirname(os.path.abspath(__file__))
    snippet = os.path.join(here, "..", "..", "tests", "bindings", "readme_readers.py")
    monkeypatch.chdir(tmp_path)
    runpy.run_path(snippet, run_name="__main__")
    assert (tmp_path / "data.pool").exists()
