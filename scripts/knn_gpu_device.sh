#!/usr/bin/env bash
# The kNN GPU checks and measurements, for a machine with an NVIDIA GPU (written for the device
# machine lent to some sessions: 16 cores, H100 or H200, CUDA 13 with nvcc on PATH, CMake,
# PyTorch, no network). One script, about 5 minutes; results under $OUT (10 files):
#   1. builds wort there with WORT_CUDA=ON (Release, sm_90, test_knn_gpu only, all cores);
#   2. runs test_knn_gpu: every engine on the GPU against the same engine on the CPU (ids,
#      distance bits, counters equal);
#   3. the chapter's workload (1M points, 64-d, 100 clusters, std 160, 240 queries, k = 32,
#      degree 128, k-means build): CPU batch, GPU batch (one launch) and GPU per-query latency
#      (one query per launch) for brute force, branch-and-bound and PSB (knn_gpu_bench.json);
#   4. PyTorch's brute force (fp32 matrix product + topk) on the same data (knn_torch_bench.json);
#   5. test_knn_gpu_build: GPU-built trees (BuildOptions::device = kGpu) equal CPU-built ones byte
#      for byte, then the build timed at 1M x 64-d (std 160, degree 128, k-means and Hilbert), GPU
#      against CPU (all cores), byte-identity checked (knn_gpu_build_bench.json).
# Exit status: non-zero if the build or a test fails. Nothing here needs the network. Each step
# has its own time limit (90 + 240 + 150 + 180 + 90 + 120 + 200 s at worst; about 5 minutes expected), and the
# earlier steps' files are in $OUT before a later one starts: run it with a 600 s limit.
#
# Build dependencies: the machine needs what scripts/setup.sh installs for the C++ build
# (GoogleTest, fmt, nlohmann-json, CLI11, asio, OpenSSL headers, pkg-config, ninja). Where they are
# missing, run scripts/knn_gpu_device_deps.sh on a machine with Debian's packages first: it puts
# the .deb files into .gpudeps/ (ignored by git: name it in the device run's carried paths), and this script
# unpacks them under .gpudeps/root (never into /) and points CMake there.
#   OUT             results directory (default out/knn-gpu)
#   WORT_BUILD_DIR  build directory (default build-gpu)
#   WORT_CUDA_ARCHS CMAKE_CUDA_ARCHITECTURES (default 90: H100, H200)
#   WORT_KNN_BENCH_N  points of the measurement (default 1000000)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/knn-gpu}
mkdir -p "$OUT"
BUILD=${WORT_BUILD_DIR:-build-gpu}
ARCHS=${WORT_CUDA_ARCHS:-90}
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
start=$(date +%s)
say() { echo "knn_gpu_device [$(($(date +%s) - start)) s]: $*" | tee -a "$SUMMARY"; }
status=0

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
{
  echo "== nvidia-smi"; nvidia-smi 2>&1 | head -20
  echo "== nvcc"; nvcc --version 2>&1 | tail -2
  echo "== cmake"; cmake --version 2>&1 | head -1
  echo "== git"; git log --oneline -1 2>/dev/null || echo "(no git)"
} >>"$SUMMARY" 2>&1

# Build dependencies carried as .deb files (scripts/knn_gpu_device_deps.sh), unpacked here.
. scripts/device_deps_env.sh
[ -n "${deps_unpacked:-}" ] && say "unpacked $deps_unpacked carried packages into $PWD/.gpudeps/root"

# 1. Build.
if ! timeout 90 cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DWORT_CUDA=ON -DWORT_TESTS=ON \
     -DWORT_UCX=OFF -DCMAKE_CUDA_ARCHITECTURES="$ARCHS" "${cmake_extra[@]}" >"$OUT/build.txt" 2>&1; then
  say "FAILED: cmake configure (see build.txt; missing build dependencies? scripts/knn_gpu_device_deps.sh)"
  tail -30 "$OUT/build.txt"
  exit 1
fi
grep "wort: kNN GPU engines" "$OUT/build.txt" | tee -a "$SUMMARY"
if ! timeout 240 cmake --build "$BUILD" -j"$(nproc)" --target test_knn_gpu test_knn_gpu_build >>"$OUT/build.txt" 2>&1; then
  say "FAILED: build of test_knn_gpu and test_knn_gpu_build (see build.txt)"
  grep -B2 -A10 -m5 "error" "$OUT/build.txt" | head -60
  exit 1
fi
say "built $BUILD/test_knn_gpu (sm_$ARCHS)"

# 2. The equality tests (GPU = CPU, bit for bit).
timeout 150 "$BUILD/test_knn_gpu" >"$OUT/test_knn_gpu.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || status=1
say "test_knn_gpu exit $rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$OUT/test_knn_gpu.txt" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]" "$OUT/test_knn_gpu.txt" | head -20 | tee -a "$SUMMARY"
# Here the GPU tests must run: a skip (no driver, no device) is a failure of this script.
if nogpu=$(grep -m1 "^no GPU: " "$OUT/test_knn_gpu.txt"); then
  status=1
  say "FAILED: the GPU engines did not run here ($nogpu)"
fi
grep -m1 "^GPU: " "$OUT/test_knn_gpu.txt" | tee -a "$SUMMARY"

# 3. The chapter's measurement on wort's engines (a disabled test of the same binary).
DATA=$(mktemp -d "${TMPDIR:-/tmp}/wort-knn-bench.XXXXXX")
WORT_KNN_BENCH_OUT="$OUT" WORT_KNN_BENCH_DATA="$DATA" timeout 180 "$BUILD/test_knn_gpu" \
  --gtest_also_run_disabled_tests --gtest_filter='KnnGpuBench.*' >"$OUT/bench.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || status=1
say "wort GPU measurement exit $rc ($OUT/knn_gpu_bench.json)"
grep -E '"engine"' "$OUT/knn_gpu_bench.json" 2>/dev/null | tee -a "$SUMMARY"

# 4. PyTorch's brute force on the same points and queries.
if [ -s "$DATA/points.f32" ]; then
  timeout 90 python3 scripts/knn_torch_bench.py --data "$DATA" --dim 64 --k 32 --out "$OUT/knn_torch_bench.json" \
    >"$OUT/torch.txt" 2>&1
  say "torch brute force exit $? ($OUT/knn_torch_bench.json)"
  grep -E '"(batch_ms|single_ms_median|recall_of_wort_exact_ids)"' "$OUT/knn_torch_bench.json" 2>/dev/null |
    tee -a "$SUMMARY"
else
  say "torch brute force not run: the measurement wrote no data"
fi
rm -rf "$DATA"

# 5. The GPU build: byte-identical trees, then 1M x 64-d timed against the CPU build.
timeout 120 "$BUILD/test_knn_gpu_build" >"$OUT/test_knn_gpu_build.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || status=1
say "test_knn_gpu_build exit $rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ test' "$OUT/test_knn_gpu_build.txt" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]" "$OUT/test_knn_gpu_build.txt" | head -20 | tee -a "$SUMMARY"
WORT_KNN_BENCH_OUT="$OUT" timeout 200 "$BUILD/test_knn_gpu_build" --gtest_also_run_disabled_tests \
  --gtest_filter='KnnGpuBuildBench.*' >"$OUT/build_bench.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || status=1
say "GPU vs CPU build at 1M x 64-d exit $rc ($OUT/knn_gpu_build_bench.json)"
grep -E '"method"' "$OUT/knn_gpu_build_bench.json" 2>/dev/null | tee -a "$SUMMARY"
say "done, exit $status"
exit $status
