// The device code of the kNN GPU engines (src/knn/gpu.cu launches it; doc/knn-gpu.md): one
// thread block per query, running the steps of src/knn/search.cc's Walk for it.
//
// Every block runs Walk's steps for its query, in the same order, with the same decisions: the
// control flow (the node, `from`, `visited`, the pruning distance, the size of the k best) is
// computed redundantly and identically by every thread of the block from values in shared
// memory, and only the data-parallel parts are split among the threads:
//   - distances: each thread owns whole children (or points) and sums its child's squared
//     differences over d = 0..dim-1 in order, acc = acc + t * t with explicitly rounded
//     operations (__fsub_rn, __fmul_rn, __fadd_rn: never contracted into an FMA), then the
//     IEEE square root (__fsqrt_rn) and layout.h's MinDist/MaxDist (gpu.cu is compiled with
//     --fmad=false): the same float32 operations in the same order as the CPU, so the same bits;
//   - choices among children: the first child under Walk's strict total order (MINDIST, MAXDIST,
//     position), or the smallest qualifying index: minima that do not depend on the order the
//     block combines them in (no float sums are reduced in parallel);
//   - KthMaxDist: each thread finds, for its children j, the points below every child whose
//     MAXDIST is at most child j's (an integer sum), and the block takes the smallest MAXDIST
//     whose sum reaches k - the value the CPU's sort-and-accumulate returns;
//   - the k best: warp 0 offers the leaf's points one by one in index order (as KBest::Offer
//     does), skipping in one vote the points that cannot enter; each insertion finds its place
//     and shifts the tail with the warp's 32 lanes.
// The k best live in shared memory when they fit (12 bytes per entry, beside the query and the
// node's bounds), else in the query's slice of the output arrays in global memory.
//
// This header is compiled by nvcc (gpu.cu) and, on the CPU, by tests/knn/knn_gpu_emu_test.cc
// under a small emulation of the CUDA built-ins (tests/knn/cuda_emu.h: one OS thread per CUDA
// thread, barriers for __syncthreads and the warp operations), which runs this very code on
// machines without a GPU. It uses only what that emulation provides.
#pragma once

#include <cstdint>

#include "knn/layout.h"
#include "wort/knn.h"

namespace wort::knn::gpu::kernel {

// The largest k the GPU engines take (InvalidArgument above it): the k best are kept sorted by
// insertion, one warp per block, so a much larger k would be slow rather than wrong.
constexpr uint32_t kMaxGpuK = 65536;
// Blocks of one launch; a block takes queries blockIdx.x, blockIdx.x + gridDim.x, ...
constexpr uint32_t kMaxBlocks = 65535;
// Threads of a block: the degree rounded up to a multiple of 32, at most this (the threads loop
// over the children or points beyond it).
constexpr uint32_t kMaxThreads = 512;
constexpr uint32_t kFullMask = 0xffffffffu;
constexpr uint32_t kInfBits = 0x7f800000u;  // +infinity's bits
constexpr uint32_t kNone = 0xffffffffu;     // no child

// The tree on the device: the five arrays of the pool's TreeView, copied as they are.
struct DevTree {
  uint32_t dim;
  uint32_t degree;
  uint64_t points;
  uint64_t leaves;
  uint32_t root;
  const float* leaf_points;
  const uint64_t* leaf_ids;
  const LeafMeta* leaf_meta;
  const float* inner_spheres;
  const InnerMeta* inner_meta;
};

// The per-query counters the kernel writes (summed on the host).
struct DevCounters {
  uint64_t inner_visits;
  uint64_t leaf_visits;
  uint64_t sphere_bytes;
  uint64_t point_bytes;
};

struct Launch {
  DevTree t;
  const float* queries;  // nq x dim
  uint64_t nq;
  uint32_t k;
  Engine engine;
  bool best_in_shared;
  uint64_t* out_ids;  // nq x k
  float* out_dists;   // nq x k
  DevCounters* counters;  // nq
};

// (d, id) strictly before (bd, bid): KBest's order.
__device__ __forceinline__ bool PairBefore(float d, uint64_t id, float bd, uint64_t bid) {
  return d < bd || (d == bd && id < bid);
}

// Non-negative floats (and +infinity) order as their bits do.
__device__ __forceinline__ uint32_t Bits(float f) { return __float_as_uint(f); }

__device__ __forceinline__ uint64_t Min64(uint64_t a, uint64_t b) { return b < a ? b : a; }
__device__ __forceinline__ int64_t Max64(int64_t a, int64_t b) { return a < b ? b : a; }

// The smallest v over the block, returned to every thread. REQUIRES every thread calls it.
__device__ inline uint64_t BlockMin(uint64_t v, uint64_t* red) {
  for (int o = 16; o > 0; o >>= 1)
    v = Min64(v, static_cast<uint64_t>(__shfl_xor_sync(kFullMask, static_cast<unsigned long long>(v), o)));
  const unsigned warps = blockDim.x / 32;
  if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  v = red[0];
  for (unsigned w = 1; w < warps; ++w) v = Min64(v, red[w]);
  __syncthreads();  // red is reused by the next call
  return v;
}

__device__ __forceinline__ uint32_t WarpSum(uint32_t v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// One block's walk for one query: Walk (src/knn/search.cc) step by step.
struct BlockWalk {
  DevTree t;
  uint32_t k;
  const float* q;  // shared
  float* mind;     // shared, degree
  float* maxd;     // shared, degree
  float* dist;     // shared, degree
  uint64_t* below;  // shared, degree
  float* best_d;    // k (shared or global)
  uint64_t* best_id;
  uint32_t* shared_n;  // shared: the size of the k best, after a leaf
  uint32_t* shared_changed;
  uint64_t* red;  // shared, 32
  float prune = __builtin_huge_valf();
  uint32_t n = 0;  // the size of the k best (the same in every thread)
  // The inner node whose children's bounds are in mind/maxd (kNoParent: none yet), as Walk's.
  uint64_t bounds_of = kNoParent;
  DevCounters c{0, 0, 0, 0};

  __device__ const float* SphereRow(uint64_t node, uint32_t d) const {
    return t.inner_spheres + (node * (uint64_t{t.dim} + 1) + d) * t.degree;
  }
  __device__ uint64_t PointsBelow(const InnerMeta& m, uint32_t j) const {
    if (m.level == 0) return t.leaf_meta[m.first_child + j].count;
    const InnerMeta& ch = t.inner_meta[m.first_child + j];
    const uint64_t end = (uint64_t{ch.last_leaf} + 1) * t.degree;
    return (end < t.points ? end : t.points) - uint64_t{ch.first_leaf} * t.degree;
  }

  // ChildBounds, the counters, then KthMaxDist into the pruning distance; nothing (not a visit)
  // when the node's bounds are still there (Walk::VisitInner).
  __device__ void VisitInner(uint64_t node) {
    if (node == bounds_of) return;  // the same in every thread: no barrier is skipped by some
    bounds_of = node;
    const InnerMeta m = t.inner_meta[node];
    const uint32_t dim = t.dim;
    for (uint32_t j = threadIdx.x; j < m.count; j += blockDim.x) {
      float acc = 0.0f;
      for (uint32_t d = 0; d < dim; ++d) {
        const float x = __fsub_rn(SphereRow(node, d)[j], q[d]);
        acc = __fadd_rn(acc, __fmul_rn(x, x));
      }
      const float dd = __fsqrt_rn(acc);
      const float r = SphereRow(node, dim)[j];
      mind[j] = MinDist(dd, r);
      maxd[j] = MaxDist(dd, r);
      below[j] = PointsBelow(m, j);
    }
    ++c.inner_visits;
    c.sphere_bytes += uint64_t{m.count} * (dim + 1) * sizeof(float);
    __syncthreads();
    // KthMaxDist: the smallest MAXDIST m whose children with MAXDIST <= m hold >= k points.
    uint64_t cand = kInfBits;
    for (uint32_t j = threadIdx.x; j < m.count; j += blockDim.x) {
      const float mj = maxd[j];
      uint64_t sum = 0;
      for (uint32_t i = 0; i < m.count; ++i)
        if (maxd[i] <= mj) sum += below[i];
      if (sum >= k) cand = Min64(cand, uint64_t{Bits(mj)});
    }
    const float kth = __uint_as_float(static_cast<uint32_t>(BlockMin(cand, red)));
    if (kth < prune) prune = kth;
  }

  // LeafDistances and the offers; true iff the k best changed.
  __device__ bool ScanLeaf(uint64_t leaf) {
    const uint32_t count = t.leaf_meta[leaf].count;
    const uint32_t dim = t.dim;
    const float* pts = t.leaf_points + leaf * dim * t.degree;
    for (uint32_t j = threadIdx.x; j < count; j += blockDim.x) {
      float acc = 0.0f;
      for (uint32_t d = 0; d < dim; ++d) {
        const float x = __fsub_rn(pts[uint64_t{d} * t.degree + j], q[d]);
        acc = __fadd_rn(acc, __fmul_rn(x, x));
      }
      dist[j] = acc;
    }
    ++c.leaf_visits;
    c.point_bytes += uint64_t{count} * dim * sizeof(float);
    __syncthreads();
    if (threadIdx.x < 32) {
      const uint32_t lane = threadIdx.x;
      const uint64_t* ids = t.leaf_ids + leaf * t.degree;
      uint32_t size = n;
      bool changed = false;
      for (uint32_t base = 0; base < count; base += 32) {
        const uint32_t j = base + lane;
        const float dj = j < count ? dist[j] : 0.0f;
        const uint64_t idj = j < count ? ids[j] : 0;
        // Those that cannot enter now cannot enter later either (the k-th only improves).
        uint32_t mask =
            __ballot_sync(kFullMask, j < count && (size < k || PairBefore(dj, idj, best_d[k - 1], best_id[k - 1])));
        while (mask) {
          const int b = __ffs(mask) - 1;
          mask &= mask - 1;
          const float cd = __shfl_sync(kFullMask, dj, b);
          const uint64_t cid = __shfl_sync(kFullMask, idj, b);
          if (size == k && !PairBefore(cd, cid, best_d[k - 1], best_id[k - 1])) continue;
          // Its place: after every entry it is not before (the sorted prefix).
          uint32_t after = 0;
          for (uint32_t i = lane; i < size; i += 32) after += !PairBefore(cd, cid, best_d[i], best_id[i]);
          const uint32_t pos = WarpSum(after);
          // Shift [pos, top) up by one, from the top down, 32 entries at a time.
          const uint32_t top = size == k ? k - 1 : size;
          for (uint32_t hi = top; hi > pos; hi = hi > 32 ? hi - 32 : 0) {
            const uint32_t i = hi - lane;
            const bool act = hi >= lane && i > pos;
            float vd = 0.0f;
            uint64_t vi = 0;
            if (act) {
              vd = best_d[i - 1];
              vi = best_id[i - 1];
            }
            __syncwarp();
            if (act) {
              best_d[i] = vd;
              best_id[i] = vi;
            }
            __syncwarp();
          }
          if (lane == 0) {
            best_d[pos] = cd;
            best_id[pos] = cid;
          }
          __syncwarp();
          if (size < k) ++size;
          changed = true;
        }
      }
      if (lane == 0) {
        *shared_n = size;
        *shared_changed = changed ? 1u : 0u;
      }
    }
    __syncthreads();
    n = *shared_n;
    const bool changed = *shared_changed != 0;
    if (n == k) {
      const float w = __fsqrt_rn(best_d[k - 1]);
      if (w < prune) prune = w;
    }
    __syncthreads();  // shared_n and shared_changed are rewritten by the next leaf
    return changed;
  }

  __device__ void BruteForce() {
    for (uint64_t l = 0; l < t.leaves; ++l) ScanLeaf(l);
  }

  // The order of the children in the descents (Walk::Before: MINDIST, then MAXDIST, then
  // position). A strict total order, so the first child under it does not depend on the order
  // the block compares them in.
  __device__ bool Before(uint32_t a, uint32_t b) const {
    if (mind[a] != mind[b]) return mind[a] < mind[b];
    if (maxd[a] != maxd[b]) return maxd[a] < maxd[b];
    return a < b;
  }
  __device__ uint32_t First(uint32_t a, uint32_t b) const {
    if (a == kNone) return b;
    if (b == kNone) return a;
    return Before(b, a) ? b : a;
  }
  // The first child in Before order among those that pass `ok`; -1 if none.
  template <typename Ok>
  __device__ int64_t FirstChild(uint32_t count, Ok ok) {
    uint32_t best = kNone;
    for (uint32_t j = threadIdx.x; j < count; j += blockDim.x)
      if (ok(j)) best = First(best, j);
    for (int o = 16; o > 0; o >>= 1) best = First(best, __shfl_xor_sync(kFullMask, best, o));
    const unsigned warps = blockDim.x / 32;
    if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = best;
    __syncthreads();
    best = static_cast<uint32_t>(red[0]);
    for (unsigned w = 1; w < warps; ++w) best = First(best, static_cast<uint32_t>(red[w]));
    __syncthreads();  // red is reused by the next call
    return best == kNone ? -1 : static_cast<int64_t>(best);
  }

  __device__ void BranchAndBound() {
    uint64_t node = t.root;
    int64_t from = -1;
    for (;;) {
      VisitInner(node);
      const InnerMeta m = t.inner_meta[node];
      for (;;) {
        const float pr = prune;
        const int64_t fr = from;
        // Within the pruning distance, and after the child we came back from.
        const int64_t pick = FirstChild(m.count, [&](uint32_t j) {
          return mind[j] <= pr && (fr < 0 || Before(static_cast<uint32_t>(fr), j));
        });
        if (pick < 0) {
          if (node == t.root) return;
          from = static_cast<int64_t>(node) - t.inner_meta[m.parent].first_child;
          node = m.parent;
          break;
        }
        if (m.level == 0) {
          ScanLeaf(m.first_child + pick);
          from = pick;
          continue;
        }
        node = m.first_child + pick;
        from = -1;
        break;
      }
    }
  }

  __device__ void Psb() {
    uint64_t node = t.root;
    uint64_t first_leaf = 0;
    for (;;) {
      VisitInner(node);
      const InnerMeta m = t.inner_meta[node];
      const uint32_t best = static_cast<uint32_t>(FirstChild(m.count, [](uint32_t) { return true; }));
      if (m.level == 0) {
        first_leaf = m.first_child + best;
        break;
      }
      node = m.first_child + best;
    }
    ScanLeaf(first_leaf);
    int64_t visited = -1;
    node = t.root;
    for (;;) {
      VisitInner(node);
      const InnerMeta m = t.inner_meta[node];
      // The leftmost child within the pruning distance with leaves not yet visited.
      uint64_t key = ~uint64_t{0};
      for (uint32_t j = threadIdx.x; j < m.count; j += blockDim.x) {
        const int64_t last = m.level == 0 ? static_cast<int64_t>(m.first_child) + j
                                          : static_cast<int64_t>(t.inner_meta[m.first_child + j].last_leaf);
        if (last > visited && mind[j] <= prune) key = Min64(key, uint64_t{j});
      }
      key = BlockMin(key, red);
      if (key == ~uint64_t{0}) {
        visited = Max64(visited, static_cast<int64_t>(m.last_leaf));
        if (node == t.root) return;
        node = m.parent;
        continue;
      }
      const uint64_t child = m.first_child + key;
      const int64_t first = m.level == 0 ? static_cast<int64_t>(child) : t.inner_meta[child].first_leaf;
      visited = Max64(visited, first - 1);
      if (m.level > 0) {
        node = child;
        continue;
      }
      uint64_t leaf = child;
      for (;;) {
        const bool changed = leaf != first_leaf && ScanLeaf(leaf);
        visited = static_cast<int64_t>(leaf);
        if (!changed || leaf + 1 == t.leaves) break;
        ++leaf;
      }
      node = t.leaf_meta[leaf].parent;
    }
  }
};

// Shared memory of a block: below (8 * degree), then the k best's ids if in shared (8 * k),
// the query (4 * dim), mind, maxd, dist (4 * degree each), the k best's distances (4 * k).
__host__ __device__ inline uint64_t SharedBytes(uint32_t dim, uint32_t degree, uint32_t k, bool best) {
  return 8ull * degree + (best ? 8ull * k : 0) + 4ull * dim + 12ull * degree + (best ? 4ull * k : 0);
}

// The whole block's work: queries blockIdx.x, blockIdx.x + gridDim.x, ... `smem` is the dynamic
// shared memory (SharedBytes), `red` 32 words of shared memory, `shared_n` and `shared_changed`
// one word each.
__device__ inline void SearchBlocks(const Launch& a, unsigned char* smem, uint64_t* red, uint32_t* shared_n,
                                    uint32_t* shared_changed) {
  const uint32_t deg = a.t.degree, dim = a.t.dim, k = a.k;
  uint64_t* below = reinterpret_cast<uint64_t*>(smem);
  uint64_t* sh_ids = below + deg;
  float* q = reinterpret_cast<float*>(sh_ids + (a.best_in_shared ? k : 0));
  float* mind = q + dim;
  float* maxd = mind + deg;
  float* dist = maxd + deg;
  float* sh_d = dist + deg;
  for (uint64_t qi = blockIdx.x; qi < a.nq; qi += gridDim.x) {
    for (uint32_t d = threadIdx.x; d < dim; d += blockDim.x) q[d] = a.queries[qi * dim + d];
    __syncthreads();
    BlockWalk w{a.t,
                k,
                q,
                mind,
                maxd,
                dist,
                below,
                a.best_in_shared ? sh_d : a.out_dists + qi * k,
                a.best_in_shared ? sh_ids : a.out_ids + qi * k,
                shared_n,
                shared_changed,
                red};
    switch (a.engine) {
      case Engine::kBruteForce: w.BruteForce(); break;
      case Engine::kBranchAndBound: w.BranchAndBound(); break;
      case Engine::kPsb: w.Psb(); break;
    }
    if (a.best_in_shared) {
      for (uint32_t i = threadIdx.x; i < w.n; i += blockDim.x) {
        a.out_ids[qi * k + i] = sh_ids[i];
        a.out_dists[qi * k + i] = sh_d[i];
      }
    }
    if (threadIdx.x == 0) a.counters[qi] = w.c;
    __syncthreads();  // the query's shared arrays are rewritten for the next one
  }
}

}  // namespace wort::knn::gpu::kernel
