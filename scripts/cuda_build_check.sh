#!/usr/bin/env bash
# Proves that wort's CUDA sources (src/knn/gpu.cu) compile and link, on any machine - no GPU and
# no NVIDIA driver needed: installs NVIDIA's compiler from PyPI into a venv of its own, configures
# a separate build directory with WORT_CUDA=ON, builds libwort.so (the indexes layer with the
# kernels, linked with --no-undefined against the static CUDA runtime), test_knn_gpu and
# test_knn_gpu_build, and runs them: without a GPU their GPU tests skip and say so (the kernels are NOT run here; see
# doc/knn-gpu.md and scripts/knn_gpu_device.sh for the machine with a GPU).
#
# Exit status: non-zero if the configure, a compile or a link fails, or test_knn_gpu fails. If
# the wheels cannot be installed (no network and no pip cache), it says so and exits 0 with a
# "SKIPPED" line, or 1 where WORT_REQUIRE_CUDA_BUILD=1.
#   WORT_CUDA_VENV        the venv for the wheels (default ~/.cache/wort-cuda-venv)
#   WORT_CUDA_BUILD_DIR   the build directory (default build-cuda)
#   WORT_CUDA_ARCHS       CMAKE_CUDA_ARCHITECTURES (default: the project's, 80;90)
#   WORT_CUDA_WHEELS      the pip requirements (default: the versions this was written with)
#   WORT_WERROR           1: warnings are errors (host and device code), as in CI
set -uo pipefail
cd "$(dirname "$0")/.."

VENV=${WORT_CUDA_VENV:-$HOME/.cache/wort-cuda-venv}
BUILD=${WORT_CUDA_BUILD_DIR:-build-cuda}
# CUDA 13's wheels hold the whole compiler (nvcc, cicc, ptxas, fatbinary, nvlink) in one
# nvidia/cu13 tree; CUDA 12's nvidia-cuda-nvcc-cu12 (12.9) ships ptxas but no nvcc.
WHEELS=${WORT_CUDA_WHEELS:-"nvidia-cuda-nvcc==13.5.37 nvidia-cuda-crt==13.5.37 nvidia-nvvm==13.5.37 nvidia-cuda-runtime==13.5.37 nvidia-cuda-cccl==13.3.5.0.6"}
start=$(date +%s)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

skip() {
  echo "cuda_build_check: SKIPPED: $* - the CUDA sources were not compiled"
  if [ "${WORT_REQUIRE_CUDA_BUILD:-0}" = 1 ]; then
    echo "cuda_build_check: WORT_REQUIRE_CUDA_BUILD=1: failing"
    exit 1
  fi
  exit 0
}
fail() {
  echo "cuda_build_check: FAILED: $*"
  exit 1
}

if [ ! -x "$VENV/bin/pip" ]; then
  python3 -m venv "$VENV" >"$log" 2>&1 || { cat "$log"; skip "cannot create a venv at $VENV"; }
fi
# shellcheck disable=SC2086
if ! "$VENV/bin/pip" install -q $WHEELS >"$log" 2>&1; then
  tail -5 "$log"
  skip "could not install NVIDIA's nvcc wheels from PyPI (no network or no pip cache?)"
fi
site=$("$VENV/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ROOT="$site/nvidia/cu13"
NVCC="$ROOT/bin/nvcc"
[ -x "$NVCC" ] || fail "the wheels installed, but $NVCC is not there"
echo "cuda_build_check: $("$NVCC" --version | tail -2 | head -1) from $ROOT"

WERROR=OFF
[ "${WORT_WERROR:-0}" = 1 ] && WERROR=ON
args=(-S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWORT_CUDA=ON -DWORT_TESTS=ON -DWORT_WERROR="$WERROR"
      -DCMAKE_CUDA_COMPILER="$NVCC")
[ -n "${WORT_CUDA_ARCHS:-}" ] && args+=(-DCMAKE_CUDA_ARCHITECTURES="$WORT_CUDA_ARCHS")
cmake "${args[@]}" >"$log" 2>&1 || { cat "$log"; fail "cmake configure with WORT_CUDA=ON"; }
grep "wort: kNN GPU engines" "$log"
jobs=$(nproc)
[ "$jobs" -gt 2 ] && jobs=2
# libwort.so (--no-undefined: the kernels' host code and the CUDA runtime resolve inside it) and
# the GPU test binary (the in-tree static layers plus the tools layer every test links).
if ! cmake --build "$BUILD" -j"$jobs" --target wort_shared test_knn_gpu test_knn_gpu_build >"$log" 2>&1; then
  grep -B2 -A12 -m5 "error\|FAILED" "$log" | head -80
  fail "building wort_shared, test_knn_gpu and test_knn_gpu_build with CUDA (src/knn/gpu.cu)"
fi
# (grep -c reads all of nm's output: grep -q would stop early and fail the pipe under pipefail.)
nm -C "$BUILD/libwort.so" 2>/dev/null | grep -c "cudaLaunchKernel\|cudaGetDeviceCount" >/dev/null ||
  fail "libwort.so holds no CUDA runtime: gpu.cu was not linked in"
if ! "$BUILD/test_knn_gpu" >"$log" 2>&1; then
  tail -40 "$log"
  fail "test_knn_gpu"
fi
if ! "$BUILD/test_knn_gpu_build" >"$log.build" 2>&1; then
  tail -40 "$log.build"
  rm -f "$log.build"
  fail "test_knn_gpu_build"
fi
bpassed=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) tests?\..*/\1/p' "$log.build")
bskipped=$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) tests?, listed below.*/\1/p' "$log.build")
rm -f "$log.build"
passed=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) tests?\..*/\1/p' "$log")
skipped=$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) tests?, listed below.*/\1/p' "$log")
reason=$(grep -m1 "^no GPU: " "$log" || true)
echo "cuda_build_check: OK in $(($(date +%s) - start)) s: src/knn/gpu.cu compiled and linked into libwort.so and" \
     "test_knn_gpu; test_knn_gpu ran ${passed:-0} tests, skipped ${skipped:-0}${reason:+ - $reason};" \
     "test_knn_gpu_build ran ${bpassed:-0}, skipped ${bskipped:-0}"
