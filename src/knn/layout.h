// Internal: the on-media layout of a kNN tree (wort/knn.h), the view the search engines read,
// and the bounds every engine - CPU and GPU - computes the same way.
//
// Blocks of one tree (all from the pool's allocator; offsets are pool offsets):
//   RootBlock      the named root's block (type kind_id::kKnn). `tree` is the commit word: the
//                  offset of the current TreeHeader (one 8-byte failure-atomic store).
//   TreeHeader     geometry, the offsets of the five arrays below, their CRC32C (checked by
//                  Check()), and the header's own CRC32C (checked at every open).
//   leaf_points    float[leaves][dim][degree]: leaf l's point j, coordinate d at
//                  (l * dim + d) * degree + j (structure of arrays per leaf). Slots j >= count
//                  are 0.
//   leaf_ids       uint64[leaves][degree]: the id of each point (slots j >= count: 0).
//   leaf_meta      LeafMeta[leaves]: parent inner node, count of points (degree but in the last).
//   inner_spheres  float[inner][dim + 1][degree]: inner node i's child j, coordinate d of its
//                  center at (i * (dim + 1) + d) * degree + j, its radius at row dim. Slots
//                  j >= count are 0.
//   inner_meta     InnerMeta[inner].
// Inner nodes are numbered level by level from the bottom: level 0 (whose children are leaves)
// first, the root last (number inner - 1). A node's children are consecutive: leaves or inner
// nodes [first_child, first_child + count). Leaves are numbered left to right, so the leaves
// below an inner node are the range [first_leaf, last_leaf].
//
// Invariants after any crash (the tree is never changed in place; a build writes new blocks):
//   K1. The root block's `tree` is 0 (no tree yet: never published so) or the offset of a
//       complete, persistent tree: every array below was persistent before the word was stored.
//   K2. Every point of leaf l lies within its sphere (the child slot of l in its parent), and
//       every child sphere within its parent's sphere, under float32 distances with the margin
//       of ChildBound (Check() verifies it).
//   K3. Parent links, child ranges and leaf ranges agree (Check() verifies them).
// Order of persistent writes of a build: the arrays and the header (persist), then the root
// block's `tree` (persist) - or, for a new name, the root block (persist) and the pool's root
// entry (Pool::AddRoot publishes it) - then the old tree's blocks are freed.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "wort/knn.h"

namespace wort::knn {

inline constexpr uint64_t kRootMagic = 0x31544f4f524e4e4bull;  // "KNNROOT1"
inline constexpr uint64_t kTreeMagic = 0x31454552544e4e4bull;  // "KNNTREE1"
inline constexpr uint32_t kLayoutVersion = 1;
inline constexpr uint32_t kMaxLevels = 32;

// The relative margin of the sphere bounds: a float32 squared distance in up to kMaxDim
// dimensions is within (dim + 2) * 2^-24 of the exact one (summation error); its square root
// within half that. 1e-4 covers every dimension up to kMaxDim with room.
inline constexpr float kMargin = 1e-4f;

struct RootBlock {
  uint64_t magic;  // kRootMagic
  uint64_t tree;   // commit word: offset of the current TreeHeader (0: none)
  uint64_t pad[6];
};
static_assert(sizeof(RootBlock) == 64);

struct LeafMeta {
  uint32_t parent;  // inner node
  uint32_t count;   // points in the leaf, 1..degree
};
static_assert(sizeof(LeafMeta) == 8);

struct InnerMeta {
  uint32_t parent;       // inner node; kNoParent for the root
  uint32_t count;        // children, 1..degree
  uint32_t first_child;  // leaf (level 0) or inner node (level > 0)
  uint32_t level;        // 0: children are leaves
  uint32_t first_leaf;   // leaves below: [first_leaf, last_leaf]
  uint32_t last_leaf;
  uint32_t pad[2];
};
static_assert(sizeof(InnerMeta) == 32);
inline constexpr uint32_t kNoParent = 0xffffffffu;

struct TreeHeader {
  uint64_t magic;  // kTreeMagic
  uint32_t version;
  uint32_t dim;
  uint64_t points;
  uint32_t degree;
  uint32_t method;  // BuildMethod
  uint64_t leaves;
  uint64_t inner;
  uint32_t height;  // inner levels
  uint32_t pad0;
  uint64_t seed;
  uint64_t off_leaf_points;
  uint64_t off_leaf_ids;
  uint64_t off_leaf_meta;
  uint64_t off_inner_spheres;
  uint64_t off_inner_meta;
  uint64_t level_start[kMaxLevels + 1];  // first inner node of each level; [height] = inner
  uint64_t crc_leaf_points;  // CRC32C (util/crc32c.h) of each array, checked by Check()
  uint64_t crc_leaf_ids;
  uint64_t crc_leaf_meta;
  uint64_t crc_inner_spheres;
  uint64_t crc_inner_meta;
  uint64_t header_crc;  // CRC32C of every byte above; checked at open
};

// Array sizes in bytes.
inline uint64_t LeafPointsBytes(uint64_t leaves, uint32_t dim, uint32_t degree) {
  return leaves * dim * degree * sizeof(float);
}
inline uint64_t LeafIdsBytes(uint64_t leaves, uint32_t degree) { return leaves * degree * sizeof(uint64_t); }
inline uint64_t InnerSpheresBytes(uint64_t inner, uint32_t dim, uint32_t degree) {
  return inner * (uint64_t{dim} + 1) * degree * sizeof(float);
}

// What the engines read: the arrays of one tree, resolved to addresses.
struct TreeView {
  uint32_t dim = 0;
  uint32_t degree = 0;
  uint64_t points = 0;
  uint64_t leaves = 0;
  uint64_t inner = 0;
  uint32_t root = 0;  // inner - 1
  const float* leaf_points = nullptr;
  const uint64_t* leaf_ids = nullptr;
  const LeafMeta* leaf_meta = nullptr;
  const float* inner_spheres = nullptr;
  const InnerMeta* inner_meta = nullptr;

  const float* LeafRow(uint64_t leaf, uint32_t d) const {
    return leaf_points + (leaf * dim + d) * degree;
  }
  const uint64_t* LeafIds(uint64_t leaf) const { return leaf_ids + leaf * degree; }
  const float* SphereRow(uint64_t node, uint32_t d) const {
    return inner_spheres + (node * (uint64_t{dim} + 1) + d) * degree;
  }
  const float* Radii(uint64_t node) const { return SphereRow(node, dim); }
};

// The bounds of a query at distance `dist` (float32, the square root of the float32 squared
// distance to a child's center) from a sphere of radius r, with the margin:
//   MINDIST = max(0, dist * (1 - kMargin) - r)      no point of the child is nearer
//   MAXDIST = dist * (1 + kMargin) + r              every point of the child is nearer
// Written out once here; the CUDA kernels use the same expressions (src/knn/gpu.cu).
// Host and device functions in the CUDA sources (src/knn/gpu.cu, compiled with --fmad=false, so
// each is one rounded multiply and one rounded add or subtract there as here); plain inline
// functions everywhere else.
#ifdef __CUDACC__
#define WORT_KNN_HOST_DEVICE __host__ __device__
#else
#define WORT_KNN_HOST_DEVICE
#endif
WORT_KNN_HOST_DEVICE inline float MinDist(float dist, float r) {
  const float m = dist * (1.0f - kMargin) - r;
  return m > 0.0f ? m : 0.0f;
}
WORT_KNN_HOST_DEVICE inline float MaxDist(float dist, float r) { return dist * (1.0f + kMargin) + r; }

}  // namespace wort::knn
