// The device code of the kNN build's GPU steps (src/knn/gpu.cu launches it; doc/knn-gpu.md,
// "GPU construction"): the k-means assignment of points to their nearest centroid and the
// Hilbert keys, computing the same bits as src/knn/build.cc's Nearest and HilbertCoder::Encode,
// so that a tree built with BuildOptions::device = kGpu is byte for byte the CPU's.
//
//   - Assignment: one thread per point; the block walks the centroids in tiles of kTileC, their
//     coordinates staged through shared memory kTileD dimensions at a time. Each thread keeps
//     one float32 sum per centroid of the tile, acc = acc + t * t with t = c[j] - p[j], over
//     j = 0..d-1 in order, with explicitly rounded operations (__fsub_rn, __fmul_rn, __fadd_rn:
//     never an FMA) - the CPU's a[c] = a[c] + t * t under -ffp-contract=off, the same sum in the
//     same order for every (point, centroid). The argmin takes the centroids in ascending order
//     with a strict `<`: ties go to the lowest index, as on the CPU.
//   - Hilbert keys: one thread per point (grid-stride), Skilling's transform in 32-bit integers;
//     the quantization is the CPU's double arithmetic ((p - lo) * scale, then truncation), IEEE
//     on both sides (a subtraction then a product: nothing to contract). The thread's transposed
//     index lives in a global scratch array, interleaved across threads (x[i * threads + t]).
//
// This header is compiled by nvcc (gpu.cu) and, on the CPU, by tests/knn/knn_gpu_build_emu_test.cc
// under tests/knn/cuda_emu.h, which runs this very code without a GPU. It uses only what that
// emulation provides.
#pragma once

#include <cstdint>

namespace wort::knn::gpu::build_kernel {

constexpr uint32_t kAssignThreads = 128;  // threads (points) per block
constexpr uint32_t kTileC = 32;           // centroids per tile: sums in registers per thread
constexpr uint32_t kTileD = 64;           // dimensions of a tile staged at once
constexpr uint32_t kTileFloats = kTileC * kTileD;

struct AssignArgs {
  const float* pts;    // n x d, row-major
  uint64_t n;
  uint32_t d;
  const float* centt;  // d x k: centt[j * k + c] is coordinate j of centroid c
  uint32_t k;
  uint32_t* out;       // n
};

// Block blockIdx.x takes points [blockIdx.x * blockDim.x, +blockDim.x) (blockDim.x <= kAssignThreads).
// `tile` is kTileFloats floats of shared memory.
__device__ inline void AssignBlock(const AssignArgs& a, float* tile) {
  const uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const bool live = i < a.n;
  const float* p = live ? a.pts + i * a.d : a.pts;
  float best_d = 0;
  uint32_t best = 0;
  bool have = false;
  for (uint32_t c0 = 0; c0 < a.k; c0 += kTileC) {
    const uint32_t nc = a.k - c0 < kTileC ? a.k - c0 : kTileC;
    float acc[kTileC];
    for (uint32_t c = 0; c < kTileC; ++c) acc[c] = 0.0f;
    for (uint32_t j0 = 0; j0 < a.d; j0 += kTileD) {
      const uint32_t nd = a.d - j0 < kTileD ? a.d - j0 : kTileD;
      __syncthreads();  // the previous tile is no longer read
      for (uint32_t e = threadIdx.x; e < nd * kTileC; e += blockDim.x) {
        const uint32_t jj = e / kTileC, c = e % kTileC;
        tile[e] = c < nc ? a.centt[uint64_t{j0 + jj} * a.k + c0 + c] : 0.0f;
      }
      __syncthreads();
      if (live)
        for (uint32_t jj = 0; jj < nd; ++jj) {
          const float pj = p[j0 + jj];
          const float* row = tile + jj * kTileC;
          for (uint32_t c = 0; c < kTileC; ++c) {
            const float t = __fsub_rn(row[c], pj);
            acc[c] = __fadd_rn(acc[c], __fmul_rn(t, t));
          }
        }
    }
    if (live)
      for (uint32_t c = 0; c < nc; ++c)
        if (!have || acc[c] < best_d) {
          best_d = acc[c];
          best = c0 + c;
          have = true;
        }
  }
  if (live) a.out[i] = best;
}

struct HilbertArgs {
  const float* pts;     // n x dim, row-major
  uint64_t n;
  uint32_t dim;
  uint32_t bits;        // per coordinate, 2..16
  uint32_t words;       // 64-bit words per key
  const double* lo;     // dim: the data's minimum per dimension
  const double* scale;  // dim: (2^bits - 1) / (hi - lo), or 0
  uint64_t* keys;       // n x words, most significant word first
  uint32_t* scratch;    // dim x (gridDim.x * blockDim.x)
};

// The key of point i (HilbertCoder::Encode's steps), x[k] at x[k * stride].
__device__ inline void HilbertEncodeOne(const HilbertArgs& a, uint64_t i, uint32_t* x, uint64_t stride) {
  const float* p = a.pts + i * a.dim;
  const uint32_t dim = a.dim;
  const uint32_t top = (1u << a.bits) - 1;
  for (uint32_t k = 0; k < dim; ++k) {
    const double c = (static_cast<double>(p[k]) - a.lo[k]) * a.scale[k];
    uint32_t q = 0;
    if (!(c <= 0)) {
      const uint32_t t = static_cast<uint32_t>(c);
      q = t < top ? t : top;
    }
    x[k * stride] = q;
  }
  const uint32_t m = 1u << (a.bits - 1);
  for (uint32_t q = m; q > 1; q >>= 1) {
    const uint32_t p1 = q - 1;
    for (uint32_t d = 0; d < dim; ++d) {
      const uint32_t xd = x[d * stride];
      if (xd & q) {
        x[0] ^= p1;
      } else {
        const uint32_t t = (x[0] ^ xd) & p1;
        x[0] ^= t;
        x[d * stride] ^= t;
      }
    }
  }
  for (uint32_t d = 1; d < dim; ++d) x[d * stride] ^= x[(d - 1) * stride];
  uint32_t t = 0;
  const uint32_t last = x[(dim - 1) * stride];
  for (uint32_t q = m; q > 1; q >>= 1)
    if (last & q) t ^= q - 1;
  for (uint32_t d = 0; d < dim; ++d) x[d * stride] ^= t;
  uint64_t* key = a.keys + i * a.words;
  uint64_t w = 0;
  uint64_t pos = 0;
  for (int b = static_cast<int>(a.bits) - 1; b >= 0; --b)
    for (uint32_t d = 0; d < dim; ++d, ++pos) {
      if ((x[d * stride] >> b) & 1u) w |= uint64_t{1} << (63 - pos % 64);
      if (pos % 64 == 63) {
        key[pos / 64] = w;
        w = 0;
      }
    }
  if (pos % 64 != 0) key[pos / 64] = w;
}

__device__ inline void HilbertThread(const HilbertArgs& a) {
  const uint64_t threads = uint64_t{gridDim.x} * blockDim.x;
  const uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (uint64_t i = t; i < a.n; i += threads) HilbertEncodeOne(a, i, a.scratch + t, threads);
}

}  // namespace wort::knn::gpu::build_kernel
