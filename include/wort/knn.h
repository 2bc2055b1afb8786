// wort/knn.h - exact k-nearest-neighbor search over a bottom-up SS-tree kept in a pool.
//
// Design (thesis chapter V: ../shared/papers/004, sections 5.1-5.2)
// -----------------------------------------------------------------
// An SS-tree is an n-ary tree of bounding spheres. wort builds it bottom-up, in one batch: the
// points are ordered (by Hilbert curve, or grouped by k-means with k = sqrt(n/2) clusters taken
// in a chain of nearest centroids, each cluster's points in Hilbert order), cut into
// leaves filled to 100% (`degree` points each; the last leaf may hold fewer), and each level
// above groups `degree` consecutive nodes of the level below. Every node's bounding sphere is
// made by Ritter's algorithm (the thesis's Algorithm 6: farthest point from a first point,
// farthest from that, the sphere on that diameter, grown until it covers every point or child
// sphere). Children's spheres are stored as a structure of arrays (one row per dimension and one
// of radii), so that consecutive children are consecutive words; leaves store their points the
// same way (one row per dimension). Leaves are numbered left to right; every node knows its
// parent and the range of leaf ids below it.
//
// Search engines, each exact (the same k points as a brute-force scan, in the same order):
//   kBruteForce       every point of every leaf.
//   kBranchAndBound   Roussopoulos et al.'s depth-first branch-and-bound (children in MINDIST
//                     order - ties, common in many dimensions where a query lies inside several
//                     spheres, by MAXDIST, then position - pruned by MINMAXDIST and by the k-th
//                     distance found), made
//                     stackless with the parent links, as the thesis runs it on the GPU: a
//                     return to an inner node recomputes its children's bounds (counted as a
//                     visit) and takes the next child in that order.
//   kPsb              Parallel Scan and Backtrack (the thesis's Algorithm 5): a first descent
//                     to the closest leaf (the same order as above) sets the pruning distance;
//                     then leaves are visited
//                     left to right - the leftmost child within the pruning distance whose
//                     subtree has leaves not yet visited, the right sibling leaf while a leaf
//                     changed the k nearest, the parent link otherwise.
// Construction: Hilbert keys and k-means on the CPU's threads, or (BuildOptions::device) their
// data-parallel steps on the GPU, writing the same tree byte for byte.
//
// Each engine runs on the CPU (many queries on parallel threads; one query at a time on one thread)
// and, where wort was built with CUDA and a GPU is present, as a CUDA kernel (one thread block
// per query, its threads over the children of a node or the points of a leaf). The CPU and GPU
// versions of an engine compute every distance with the same operations in the same order, so
// they return the same results and the same counters.
//
// Distances are squared Euclidean distances in float32 (as FAISS's IndexFlatL2 returns them).
// Results are sorted by (distance, id) ascending: of points at equal distance the smaller id
// comes first, and the k-th place goes to the smallest id among the tied. The sphere bounds
// carry a relative margin of 1e-4 (wider than the rounding of a float32 distance in up to 4096
// dimensions), so rounding never prunes a point that the brute-force scan would return.
//
// Persistence
// -----------
// A tree lives in a pool (wort/pool.h) under a named root: a small root block whose one 8-byte
// word names the current tree. A build writes the whole new tree into fresh blocks, persists
// it, then publishes it by that one 8-byte store (persisted), and only then frees the tree it
// replaces. A crash at any instant therefore reopens either the old tree, intact, or the new
// one, complete; the blocks of a build cut by the crash are reclaimed by the pool's post-crash
// collection. Opening reads the tree's header (checked: magic, layout version, checksum, the
// geometry against the blocks' sizes) and nothing else: no rebuild, in constant time.
// References inside the tree are offsets within the pool, and node numbers within the tree.
//
// Errors: bad input is refused with InvalidArgument before anything is written (NaN or infinite
// coordinates, naming the first such point; a dimension of 0 or above kMaxDim; no points; a
// degree outside [kMinDegree, kMaxDegree]; k = 0 or k > n; a query of another dimension), so an
// existing tree of the same name stays as it was. A damaged tree is Corruption at open or in
// Check(); PoolFull leaves the old tree in place.
//
// Thread safety: Search may be called from many threads at once on one handle. A name has at
// most one open handle in a process (Open of a name already open is Busy), and Build or Drop of
// a name with an open handle is Busy: close the handle first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "wort/export.h"
#include "wort/pool.h"
#include "wort/status.h"

namespace wort::knn {

inline constexpr uint32_t kMaxDim = 4096;
inline constexpr uint32_t kMinDegree = 4;
inline constexpr uint32_t kMaxDegree = 1024;

enum class BuildMethod : uint8_t {
  kHilbert = 1,  // points in Hilbert-curve order (thesis 5.2.1)
  kKMeans = 2,   // k-means clusters in a nearest-centroid chain, then Hilbert order (5.2.2)
};
enum class Engine : uint8_t {
  kBruteForce = 1,
  kBranchAndBound = 2,
  kPsb = 3,
};
enum class Device : uint8_t {
  kCpu = 0,
  kGpu = 1,
};

// "hilbert", "kmeans"; "brute", "bnb", "psb"; "cpu", "gpu".
WORT_EXPORT const char* BuildMethodName(BuildMethod m);
WORT_EXPORT const char* EngineName(Engine e);
WORT_EXPORT const char* DeviceName(Device d);
// Parse those names (also "brute-force", "branch-and-bound", "k-means"); false if unknown.
WORT_EXPORT bool ParseBuildMethod(std::string_view s, BuildMethod* out);
WORT_EXPORT bool ParseEngine(std::string_view s, Engine* out);
WORT_EXPORT bool ParseDevice(std::string_view s, Device* out);

struct BuildOptions {
  BuildMethod method = BuildMethod::kKMeans;
  // Children of an inner node and points of a leaf (the thesis's "degree"; 128 by default, as
  // in its experiments).
  uint32_t degree = 128;
  // k-means: clusters (0: sqrt(n/2), as the thesis sets it), Lloyd iterations on the training
  // sample, and the sample's size (0: min(n, max(64 * k, 20000))); every point is then assigned
  // to its nearest centroid.
  uint32_t kmeans_k = 0;
  uint32_t kmeans_iterations = 10;
  uint64_t kmeans_sample = 0;
  uint64_t seed = 1;     // k-means's initial centroids and Ritter's first points
  unsigned threads = 0;  // 0: all hardware threads
  // Where the build's data-parallel steps run. kCpu: everything on the CPU's threads. kGpu: the
  // k-means assignments (every Lloyd iteration's on the sample, and every point's to its nearest
  // centroid at the end: the n x k x d bulk of a k-means build) and the Hilbert keys run on the
  // GPU; the k-means seeding and centroid updates, the sort, Ritter's spheres and the write-back
  // stay on the CPU. The tree is byte for byte the one kCpu builds (the GPU computes the same
  // float32 sums in the same order, no FMA, the same tie rule; the keys are integer math), so
  // either is the other's reference. NotSupported (saying why, nothing written) where wort was
  // built without CUDA or no GPU is present. doc/knn-gpu.md, "GPU construction".
  Device device = Device::kCpu;
};

struct BuildStats {
  double seconds_order = 0;    // Hilbert keys, k-means, sorting
  double seconds_spheres = 0;  // Ritter, every level
  double seconds_persist = 0;  // writing back the tree and publishing it
  uint64_t bytes = 0;          // pool bytes of the tree's blocks
  // Where the steps ran (BuildOptions::device): the k-means assignments (kmeans builds only) and
  // the Hilbert keys. The seeding, centroid updates, sort and spheres run on the CPU always.
  Device assign_device = Device::kCpu;
  Device keys_device = Device::kCpu;
  double seconds_gpu = 0;  // in the GPU steps, copies included (a part of seconds_order)
};

// Per search (summed over its queries). Every engine counts the same way on CPU and GPU:
//   inner_visits   inner nodes whose children's bounds were computed (a revisit counts again)
//   leaf_visits    leaves whose points were compared
//   sphere_bytes   bytes of child spheres read: children * (dim + 1) * 4 per inner visit
//   point_bytes    bytes of point coordinates read: points * dim * 4 per leaf visit
struct Counters {
  uint64_t queries = 0;
  uint64_t inner_visits = 0;
  uint64_t leaf_visits = 0;
  uint64_t sphere_bytes = 0;
  uint64_t point_bytes = 0;
  uint64_t nodes_visited() const { return inner_visits + leaf_visits; }
  uint64_t bytes() const { return sphere_bytes + point_bytes; }
};

struct SearchOptions {
  Engine engine = Engine::kPsb;
  Device device = Device::kCpu;
  // CPU: threads that take queries (0: all hardware threads; 1: one query at a time).
  unsigned threads = 0;
};

struct TreeInfo {
  uint32_t dim = 0;
  uint32_t degree = 0;
  uint64_t points = 0;
  uint64_t leaves = 0;
  uint64_t inner_nodes = 0;
  uint32_t height = 0;  // inner levels above the leaves (>= 1: the root is an inner node)
  BuildMethod method = BuildMethod::kKMeans;
  uint64_t seed = 0;
  uint64_t bytes = 0;   // pool bytes of the tree's blocks
};

class WORT_EXPORT KnnIndex {
 public:
  // Builds a tree of n points (row-major, n x dim float32) with their ids (null: ids 0..n-1)
  // and publishes it under `name` in `pool`, replacing a tree of that name (see Persistence).
  // The points are copied; ids may repeat (ties between equal ids keep the build's order).
  static Status Build(Pool& pool, std::string_view name, const float* points, const uint64_t* ids, uint64_t n,
                      uint32_t dim, const BuildOptions& opts, BuildStats* stats = nullptr);
  // Opens the tree published under `name`: NotFound if there is none, Corruption if it is not a
  // kNN tree or fails its header checks, Busy if a handle of it is open in this process.
  static Status Open(Pool& pool, std::string_view name, std::unique_ptr<KnnIndex>* out);
  // Unpublishes `name` and frees its tree. NotFound if absent, Busy if a handle is open.
  static Status Drop(Pool& pool, std::string_view name);

  ~KnnIndex();
  KnnIndex(const KnnIndex&) = delete;
  KnnIndex& operator=(const KnnIndex&) = delete;

  const TreeInfo& info() const;

  // The k nearest points of each of nq queries (row-major, nq x dim): ids[q * k + i] and
  // dists[q * k + i] (squared distances), i-th nearest first. REQUIRES 1 <= k <= points.
  // InvalidArgument for k out of range or a non-finite query coordinate (nothing written);
  // NotSupported for the GPU where wort was built without CUDA or no GPU is present (the
  // message says which). `counters`, if given, receives the sums over the queries.
  Status Search(const float* queries, uint64_t nq, uint32_t k, const SearchOptions& opts, uint64_t* ids,
                float* dists, Counters* counters = nullptr) const;

  // Full verification (reads everything): the checksums of every array written at build, the
  // parent, child and leaf-range links, every point inside its leaf's sphere and every child
  // sphere inside its parent's. Findings are appended to `report`; Corruption if any.
  Status Check(std::string* report) const;

  struct WORT_NO_EXPORT Impl;  // internal (src/knn/internal.h)

 private:
  explicit KnnIndex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether GPU search can run here: wort built with CUDA and a device present. `why` (optional)
// receives the device's name, or the reason it cannot.
WORT_EXPORT bool GpuAvailable(std::string* why = nullptr);

}  // namespace wort::knn
