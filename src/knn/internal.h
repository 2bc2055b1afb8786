// Internal to src/knn: the pieces the build, the CPU engines and the GPU engines share.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "knn/layout.h"
#include "wort/knn.h"
#include "wort/pool.h"

namespace wort::knn {

struct KnnIndex::Impl {
  Pool* pool = nullptr;
  std::string name;
  uint64_t root_off = 0;
  uint64_t tree_off = 0;
  TreeInfo info;
  TreeView view;
  std::shared_ptr<void> claim;  // the sole-handle claim (index/registry.h)
  // The tree's copy on the GPU, made at the first GPU search and kept for the handle's life.
  mutable std::mutex gpu_mu;
  mutable std::shared_ptr<void> gpu_tree;
};

// Threads to use for `requested` (0: hardware threads), at most `work` (at least 1).
unsigned ThreadsFor(unsigned requested, uint64_t work);
// Runs fn(begin, end) over [0, n) split into `threads` contiguous parts, one thread each.
void ParallelFor(unsigned threads, uint64_t n, const std::function<void(uint64_t, uint64_t)>& fn);

// The float32 squared distance of a query to one point of a leaf or one child's center: the
// sum over d = 0..dim-1, in that order, of (x[d] - q[d])^2, no fused multiply-add (the knn
// sources are compiled with -ffp-contract=off; the CUDA kernels with --fmad=false), so every
// engine gets the same bits.
// Distances of the query to the `count` points of a leaf (out[j], j < count).
void LeafDistances(const TreeView& v, uint64_t leaf, uint32_t count, const float* q, float* out);
// MINDIST and MAXDIST (layout.h) of the query to the children of inner node `node`.
void ChildBounds(const TreeView& v, uint64_t node, uint32_t count, const float* q, float* mind, float* maxd);

// The k best (distance, id) pairs seen so far, sorted by (distance, id) ascending.
class KBest {
 public:
  explicit KBest(uint32_t k) : k_(k) {}
  void Reset() { n_ = 0; }
  bool full() const { return n_ == k_; }
  // The k-th distance when full, else +infinity.
  float Worst() const;
  // Offers one candidate; true iff it entered the set.
  bool Offer(float d, uint64_t id);
  uint32_t size() const { return n_; }
  void CopyOut(uint64_t* ids, float* dists) const;
  void Resize(uint32_t k) {
    k_ = k;
    d_.resize(k);
    id_.resize(k);
  }

 private:
  uint32_t k_;
  uint32_t n_ = 0;
  std::vector<float> d_ = std::vector<float>(k_);
  std::vector<uint64_t> id_ = std::vector<uint64_t>(k_);
};

// The pruning bound from the children's MAXDIST (the thesis's k-th MINMAXDIST, with children
// weighted by their points): the smallest MAXDIST m such that the children whose MAXDIST is at
// most m hold at least k points (+infinity when all of them hold fewer). `points_below[j]` is
// child j's point count.
float KthMaxDist(const float* maxd, const uint64_t* points_below, uint32_t count, uint32_t k, std::vector<uint32_t>* tmp);

// CPU engines over one query.
struct QueryScratch {
  explicit QueryScratch(const TreeView& v, uint32_t k);
  KBest best;
  std::vector<float> mind, maxd, dist;
  std::vector<uint32_t> tmp;
  std::vector<uint64_t> below;
};
void SearchOneCpu(const TreeView& v, Engine e, const float* q, uint32_t k, QueryScratch* s, Counters* c);

// Points below child j of inner node `node` (for KthMaxDist).
uint64_t PointsBelow(const TreeView& v, uint64_t node, uint32_t j);

// The build's steps that BuildOptions::device = kGpu moves to the GPU, each with the CPU's
// results bit for bit (src/knn/build_kernel.h, doc/knn-gpu.md "GPU construction").
class BuildDevice {
 public:
  virtual ~BuildDevice() = default;
  // out[i] = the nearest of the k centroids (centt: d x k, centt[j * k + c]) to point i: the
  // float32 sum over j in order of (centt - p)^2, no FMA; ties to the lowest index (Nearest).
  virtual Status Assign(const float* pts, uint64_t n, uint32_t d, const float* centt, uint32_t k, uint32_t* out) = 0;
  // The Hilbert keys (n x words) of the points: HilbertCoder::Encode with its lo and scale.
  virtual Status HilbertKeys(const float* pts, uint64_t n, uint32_t dim, uint32_t bits, uint32_t words,
                             const double* lo, const double* scale, uint64_t* keys) = 0;
};

// GPU (src/knn/gpu.cu where wort is built with CUDA, src/knn/gpu_none.cc otherwise).
namespace gpu {
bool Available(std::string* why);
Status Search(const KnnIndex::Impl& impl, const float* queries, uint64_t nq, uint32_t k, Engine e, uint64_t* ids,
              float* dists, Counters* c);
// The GPU's BuildDevice; NotSupported (with the reason) where there is no CUDA or no GPU.
Status OpenBuildDevice(std::unique_ptr<BuildDevice>* out);
}  // namespace gpu

// The same steps on the CPU's threads (build.cc's own code: the reference for the GPU's).
std::unique_ptr<BuildDevice> CpuBuildDevice(unsigned threads);

// Tests only: Device::kGpu builds use make() instead of gpu::OpenBuildDevice (an empty function
// restores it). tests/knn/knn_gpu_build_emu_test.cc puts the emulated kernels there.
void SetBuildDeviceForTesting(std::function<std::unique_ptr<BuildDevice>()> make);

// The post-crash GC's visit of a kNN root (index/registry.cc installs it for kind_id::kKnn).
void VisitRoot(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark);

}  // namespace wort::knn
