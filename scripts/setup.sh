#!/usr/bin/env bash
# Installs everything wort's build, tests and benchmarks need on a fresh Debian machine, then
# configures and builds wort in build/ (Release). Safe to run twice: packages already present
# are not fetched again.
#   WORT_BUILD_DIR   build directory (default: build)
#   WORT_BUILD_TYPE  Release (default), Debug
#   WORT_SANITIZE    1 for an ASan+UBSan build
#   WORT_WERROR      1: compiler warnings are errors in wort's own targets (.ci/run sets it)
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(g++ cmake ninja-build pkg-config libgtest-dev googletest libfmt-dev nlohmann-json3-dev libcli11-dev
      python3 python3-matplotlib valgrind
      libasio-dev libmemcached-tools memcached python3-venv python3-matplotlib wamerican
      libssl-dev openssl nutcracker python3-dev
      libucx-dev ucx-utils
      libtbb-dev)  # libtbb-dev: only for building RECIPE's P-ART in scripts/peers.sh (roart-peer)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# PyPI packages, in a venv of its own; the tests look for it at $WORT_VENV (default
# ~/.cache/wort-venv): pymemcache for the server's end-to-end tests (tests/server/); pytest,
# scikit-build-core and nanobind for the Python package (python/: its ctest python_pkg builds it
# into a fresh venv, fetching the same through pip's cache); lmdb for its benchmark
# (python/bench.py); faiss-cpu and numpy for `wort knn bench`'s faiss experiment
# (scripts/knn_faiss.py: IndexFlatL2 beside wort's kNN engines); dask, distributed, fsspec,
# numpy, matplotlib for wort.mr (python/wort/mr: its tests and `python -m wort.mr bench`).
VENV=${WORT_VENV:-$HOME/.cache/wort-venv}
if ! "$VENV/bin/python3" -c 'import pymemcache, pytest, scikit_build_core, nanobind, lmdb, faiss, numpy, dask, distributed, fsspec, matplotlib' 2>/dev/null; then
  echo "setup: installing pymemcache pytest scikit-build-core nanobind lmdb faiss-cpu numpy dask distributed fsspec matplotlib into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q pymemcache pytest scikit-build-core nanobind lmdb faiss-cpu numpy dask distributed fsspec matplotlib
fi

BUILD_DIR=${WORT_BUILD_DIR:-build}
BUILD_TYPE=${WORT_BUILD_TYPE:-Release}
SAN=OFF
[ "${WORT_SANITIZE:-0}" = 1 ] && SAN=ON
WERROR=OFF
[ "${WORT_WERROR:-0}" = 1 ] && WERROR=ON
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DWORT_SANITIZE="$SAN" -DWORT_WERROR="$WERROR" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
echo "setup: built $BUILD_DIR ($BUILD_TYPE, sanitizers $SAN)"
