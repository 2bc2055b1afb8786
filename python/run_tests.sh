#!/usr/bin/env bash
# Installs the wort Python package from this repository into a fresh venv and runs its pytest
# tests (ctest: python_pkg).   run_tests.sh PYTHON WORKDIR [pytest args...]
# The venv is new on every run (what a user's `pip install .` sees); the build requirements
# (scikit-build-core, nanobind), pytest and the extra "mr" (dask, distributed, fsspec, numpy:
# wort.mr's tests, test_mr.py) come from PyPI through pip's cache. The extension's
# CMake build directory is WORKDIR/build (or $WORT_PY_BUILD_DIR), so that reruns rebuild only
# what changed.
set -euo pipefail
PY=$1
WORK=$2
shift 2
SRC=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$WORK/venv"
mkdir -p "$WORK"
"$PY" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q --disable-pip-version-check pytest numpy
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
if command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
  export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
fi
"$VPY" -m pip install -q --disable-pip-version-check "$SRC[mr]" --config-settings=build-dir="${WORT_PY_BUILD_DIR:-$WORK/build}"
cd "$WORK"  # not the source tree: `import wort` must find the installed package
exec "$VPY" -m pytest -q -p no:cacheprovider "$SRC/python/tests" "$@"
