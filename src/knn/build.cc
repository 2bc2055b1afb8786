// The bottom-up construction of the SS-tree (thesis 5.2): point order (Hilbert curve or k-means
// clusters), leaves filled to 100%, bounding spheres by Ritter's algorithm level by level, and
// the write-back and publication of the tree (layout.h: order of persistent writes).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <thread>

#include "index/kind_ids.h"
#include "index/registry.h"
#include "knn/internal.h"
#include "util/crc32c.h"
#include "wort/alloc.h"
#include "wort/pm.h"

namespace wort::knn {

unsigned ThreadsFor(unsigned requested, uint64_t work) {
  unsigned t = requested ? requested : std::max(1u, std::thread::hardware_concurrency());
  if (work < t) t = static_cast<unsigned>(std::max<uint64_t>(1, work));
  return t;
}

void ParallelFor(unsigned threads, uint64_t n, const std::function<void(uint64_t, uint64_t)>& fn) {
  if (n == 0) return;
  threads = ThreadsFor(threads, n);
  if (threads == 1) {
    fn(0, n);
    return;
  }
  std::vector<std::thread> ts;
  ts.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) {
    const uint64_t b = n * t / threads, e = n * (t + 1) / threads;
    ts.emplace_back([&fn, b, e] { fn(b, e); });
  }
  for (auto& t : ts) t.join();
}

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The GPU's build steps for Device::kGpu (null for kCpu), and the time spent in them.
struct GpuSteps {
  BuildDevice* dev = nullptr;
  double seconds = 0;
};

std::mutex build_device_mu;
std::function<std::unique_ptr<BuildDevice>()>* build_device_for_testing = nullptr;

// ---- Hilbert keys ------------------------------------------------------------------------------
// Each coordinate is quantized to `bits` bits over the data's range in its dimension; the key is
// the point's position along the Hilbert curve of that grid (Skilling's transform of the axes to
// the curve's transposed index, then its bits interleaved, most significant first), stored in
// `words` 64-bit words, most significant word first.
struct HilbertCoder {
  uint32_t dim = 0;
  uint32_t bits = 0;
  uint32_t words = 0;
  std::vector<double> lo, scale;

  HilbertCoder() = default;
  HilbertCoder(const float* pts, uint64_t n, uint32_t d, unsigned threads) : dim(d) {
    bits = std::clamp<uint32_t>(2048 / d, 2, 16);
    words = static_cast<uint32_t>((uint64_t{d} * bits + 63) / 64);
    lo.assign(d, std::numeric_limits<double>::infinity());
    std::vector<double> hi(d, -std::numeric_limits<double>::infinity());
    std::mutex mu;
    ParallelFor(threads, n, [&](uint64_t b, uint64_t e) {
      std::vector<double> l(d, std::numeric_limits<double>::infinity()), h(d, -std::numeric_limits<double>::infinity());
      for (uint64_t i = b; i < e; ++i)
        for (uint32_t k = 0; k < d; ++k) {
          l[k] = std::min<double>(l[k], pts[i * d + k]);
          h[k] = std::max<double>(h[k], pts[i * d + k]);
        }
      std::lock_guard<std::mutex> g(mu);
      for (uint32_t k = 0; k < d; ++k) {
        lo[k] = std::min(lo[k], l[k]);
        hi[k] = std::max(hi[k], h[k]);
      }
    });
    scale.resize(d);
    const double cells = std::ldexp(1.0, static_cast<int>(bits)) - 1;
    for (uint32_t k = 0; k < d; ++k) scale[k] = hi[k] > lo[k] ? cells / (hi[k] - lo[k]) : 0.0;
  }

  // Writes the key of point p (dim floats) to key[0..words).
  void Encode(const float* p, uint64_t* key, std::vector<uint32_t>* xs) const {
    std::vector<uint32_t>& x = *xs;
    x.resize(dim);
    const uint32_t top = (1u << bits) - 1;
    for (uint32_t k = 0; k < dim; ++k) {
      const double c = (p[k] - lo[k]) * scale[k];
      x[k] = c <= 0 ? 0u : std::min<uint32_t>(top, static_cast<uint32_t>(c));
    }
    // Axes to transposed Hilbert index (Skilling, "Programming the Hilbert curve", 2004).
    const uint32_t m = 1u << (bits - 1);
    for (uint32_t q = m; q > 1; q >>= 1) {
      const uint32_t p1 = q - 1;
      for (uint32_t i = 0; i < dim; ++i) {
        if (x[i] & q) {
          x[0] ^= p1;
        } else {
          const uint32_t t = (x[0] ^ x[i]) & p1;
          x[0] ^= t;
          x[i] ^= t;
        }
      }
    }
    for (uint32_t i = 1; i < dim; ++i) x[i] ^= x[i - 1];
    uint32_t t = 0;
    for (uint32_t q = m; q > 1; q >>= 1)
      if (x[dim - 1] & q) t ^= q - 1;
    for (uint32_t i = 0; i < dim; ++i) x[i] ^= t;
    // Interleave: bit (bits-1) of x[0], x[1], ..., then bit (bits-2) ...
    std::fill(key, key + words, 0);
    uint64_t pos = 0;
    for (int b = static_cast<int>(bits) - 1; b >= 0; --b)
      for (uint32_t i = 0; i < dim; ++i, ++pos)
        if ((x[i] >> b) & 1u) key[pos / 64] |= uint64_t{1} << (63 - pos % 64);
  }
};

// Keys of every point, words per point consecutive (on the GPU where gs->dev is set).
Status HilbertKeys(const HilbertCoder& hc, const float* pts, uint64_t n, unsigned threads, GpuSteps* gs,
                   std::vector<uint64_t>* out) {
  std::vector<uint64_t>& keys = *out;
  keys.assign(n * hc.words, 0);
  if (gs->dev) {
    const auto t0 = Clock::now();
    Status s = gs->dev->HilbertKeys(pts, n, hc.dim, hc.bits, hc.words, hc.lo.data(), hc.scale.data(), keys.data());
    gs->seconds += Since(t0);
    return s;
  }
  ParallelFor(threads, n, [&](uint64_t b, uint64_t e) {
    std::vector<uint32_t> xs;
    for (uint64_t i = b; i < e; ++i) hc.Encode(pts + i * hc.dim, &keys[i * hc.words], &xs);
  });
  return Status::OK();
}

// Sorts `order` by (group[i] if given, key of i, i).
void SortByKey(std::vector<uint64_t>* order, const std::vector<uint64_t>& keys, uint32_t words,
               const std::vector<uint32_t>* group) {
  auto less = [&](uint64_t a, uint64_t b) {
    if (group && (*group)[a] != (*group)[b]) return (*group)[a] < (*group)[b];
    const uint64_t* ka = &keys[a * words];
    const uint64_t* kb = &keys[b * words];
    for (uint32_t w = 0; w < words; ++w)
      if (ka[w] != kb[w]) return ka[w] < kb[w];
    return a < b;
  };
  std::sort(order->begin(), order->end(), less);
}

// ---- k-means -----------------------------------------------------------------------------------
// A squared distance for the clustering only (its order of summation is free: eight partial
// sums, which the compiler vectorizes).
float SqDist(const float* a, const float* b, uint32_t d) {
  float part[8] = {};
  uint32_t k = 0;
  for (; k + 8 <= d; k += 8)
    for (uint32_t l = 0; l < 8; ++l) {
      const float t = a[k + l] - b[k + l];
      part[l] += t * t;
    }
  float s = 0;
  for (; k < d; ++k) s += (a[k] - b[k]) * (a[k] - b[k]);
  for (float p : part) s += p;
  return s;
}

// The nearest centroid of p. The centroids are transposed (centt[j * k + c]: coordinate j of
// centroid c), so that the loop runs across centroids, vectorized, each sum still in order.
uint32_t Nearest(const float* p, const std::vector<float>& centt, uint32_t k, uint32_t d, std::vector<float>* acc) {
  std::vector<float>& a = *acc;
  a.assign(k, 0.0f);
  for (uint32_t j = 0; j < d; ++j) {
    const float* row = &centt[uint64_t{j} * k];
    const float pj = p[j];
    for (uint32_t c = 0; c < k; ++c) {
      const float t = row[c] - pj;
      a[c] = a[c] + t * t;
    }
  }
  uint32_t best = 0;
  for (uint32_t c = 1; c < k; ++c)
    if (a[c] < a[best]) best = c;
  return best;
}

std::vector<float> Transposed(const std::vector<float>& cent, uint32_t k, uint32_t d) {
  std::vector<float> t(cent.size());
  for (uint32_t c = 0; c < k; ++c)
    for (uint32_t j = 0; j < d; ++j) t[uint64_t{j} * k + c] = cent[uint64_t{c} * d + j];
  return t;
}

// out[i] = Nearest(point i) for the n points: on the CPU's threads, or on the GPU (the same bits).
Status AssignAll(const float* pts, uint64_t n, uint32_t d, const std::vector<float>& centt, uint32_t k,
                 unsigned threads, GpuSteps* gs, uint32_t* out) {
  if (gs->dev) {
    const auto t0 = Clock::now();
    Status s = gs->dev->Assign(pts, n, d, centt.data(), k, out);
    gs->seconds += Since(t0);
    return s;
  }
  ParallelFor(threads, n, [&](uint64_t b, uint64_t e) {
    std::vector<float> acc;
    for (uint64_t i = b; i < e; ++i) out[i] = Nearest(pts + i * d, centt, k, d, &acc);
  });
  return Status::OK();
}

// Cluster of every point: k-means++ seeding and Lloyd iterations on a seeded sample, then every
// point assigned to its nearest centroid. Returns the centroids (k x d) in *cent.
Status KMeans(const float* pts, uint64_t n, uint32_t d, const BuildOptions& o, unsigned threads, GpuSteps* gs,
              uint32_t* k_out, std::vector<float>* cent, std::vector<uint32_t>* assign_out) {
  uint32_t k = o.kmeans_k ? o.kmeans_k : static_cast<uint32_t>(std::max(1.0, std::round(std::sqrt(n / 2.0))));
  k = static_cast<uint32_t>(std::min<uint64_t>(k, n));
  uint64_t s = o.kmeans_sample ? o.kmeans_sample : std::max<uint64_t>(uint64_t{64} * k, 20000);
  s = std::min(s, n);
  std::mt19937_64 rng(o.seed ^ 0x6b6d65616e73ull);
  // Sample without replacement (partial Fisher-Yates over the indices).
  std::vector<uint64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  for (uint64_t i = 0; i < s; ++i) std::swap(idx[i], idx[i + rng() % (n - i)]);
  idx.resize(s);
  std::vector<float> sample(s * d);
  for (uint64_t i = 0; i < s; ++i) std::memcpy(&sample[i * d], pts + idx[i] * d, d * sizeof(float));
  // k-means++ seeding.
  cent->assign(uint64_t{k} * d, 0);
  std::vector<float> d2(s, std::numeric_limits<float>::infinity());
  uint64_t first = rng() % s;
  std::memcpy(cent->data(), &sample[first * d], d * sizeof(float));
  for (uint32_t c = 1; c < k; ++c) {
    const float* last = &(*cent)[uint64_t{c - 1} * d];
    ParallelFor(threads, s, [&](uint64_t b, uint64_t e) {
      for (uint64_t i = b; i < e; ++i) d2[i] = std::min(d2[i], SqDist(&sample[i * d], last, d));
    });
    double total = 0;
    for (float v : d2) total += v;
    uint64_t pick = rng() % s;
    if (total > 0) {
      double r = std::uniform_real_distribution<double>(0, total)(rng);
      for (uint64_t i = 0; i < s; ++i) {
        r -= d2[i];
        if (r <= 0) {
          pick = i;
          break;
        }
      }
    }
    std::memcpy(&(*cent)[uint64_t{c} * d], &sample[pick * d], d * sizeof(float));
  }
  // Lloyd iterations on the sample.
  std::vector<uint32_t> sa(s);
  for (uint32_t it = 0; it < o.kmeans_iterations; ++it) {
    const std::vector<float> centt = Transposed(*cent, k, d);
    WORT_RETURN_IF_ERROR(AssignAll(sample.data(), s, d, centt, k, threads, gs, sa.data()));
    std::vector<double> sum(uint64_t{k} * d, 0.0);
    std::vector<uint64_t> cnt(k, 0);
    for (uint64_t i = 0; i < s; ++i) {
      ++cnt[sa[i]];
      for (uint32_t j = 0; j < d; ++j) sum[uint64_t{sa[i]} * d + j] += sample[i * d + j];
    }
    for (uint32_t c = 0; c < k; ++c)
      if (cnt[c])  // an empty cluster keeps its centroid
        for (uint32_t j = 0; j < d; ++j) (*cent)[uint64_t{c} * d + j] = static_cast<float>(sum[uint64_t{c} * d + j] / cnt[c]);
  }
  std::vector<uint32_t>& assign = *assign_out;
  assign.assign(n, 0);
  const std::vector<float> centt = Transposed(*cent, k, d);
  WORT_RETURN_IF_ERROR(AssignAll(pts, n, d, centt, k, threads, gs, assign.data()));
  *k_out = k;
  return Status::OK();
}

// The order of the clusters: from centroid 0 (the first k-means++ pick, seeded), each next one the nearest centroid not yet taken (ties: the
// lowest number). O(k^2 d): 707 clusters of 64 dimensions take milliseconds.
std::vector<uint32_t> CentroidChain(const std::vector<float>& cent, uint32_t k, uint32_t d) {
  std::vector<uint32_t> chain;
  chain.reserve(k);
  std::vector<char> taken(k, 0);
  uint32_t cur = 0;
  for (uint32_t i = 0; i < k; ++i) {
    chain.push_back(cur);
    taken[cur] = 1;
    uint32_t next = k;
    float best = std::numeric_limits<float>::infinity();
    for (uint32_t c = 0; c < k; ++c) {
      if (taken[c]) continue;
      const float s = SqDist(&cent[uint64_t{cur} * d], &cent[uint64_t{c} * d], d);
      if (s < best) {
        best = s;
        next = c;
      }
    }
    if (next == k) break;
    cur = next;
  }
  return chain;
}

// ---- Ritter's bounding sphere (thesis Algorithm 6) --------------------------------------------
// Over `count` items with centers item(j) (d floats) and radii r(j) (0 for points): the farthest
// item from a first one, the farthest from that, the sphere on their diameter, grown toward the
// farthest item until every item is inside. The arithmetic is in double; the radius written is
// then the exact cover of the items around the float32 center, rounded up (K2 in layout.h).
template <class CenterFn, class RadiusFn>
void Ritter(uint32_t count, uint32_t d, uint64_t seed, CenterFn item, RadiusFn radius, float* center_out,
            float* radius_out) {
  std::vector<double> c(d);
  auto far_from = [&](const double* x, double* best_d) {
    uint32_t best = 0;
    double bd = -1;
    for (uint32_t j = 0; j < count; ++j) {
      const float* p = item(j);
      double s = 0;
      for (uint32_t k = 0; k < d; ++k) s += (p[k] - x[k]) * (p[k] - x[k]);
      const double dist = std::sqrt(s) + radius(j);
      if (dist > bd) {
        bd = dist;
        best = j;
      }
    }
    *best_d = bd;
    return best;
  };
  const uint32_t first = static_cast<uint32_t>(seed % count);
  for (uint32_t k = 0; k < d; ++k) c[k] = item(first)[k];
  double dd;
  const uint32_t a = far_from(c.data(), &dd);
  for (uint32_t k = 0; k < d; ++k) c[k] = item(a)[k];
  const uint32_t b = far_from(c.data(), &dd);
  // The sphere on the diameter between the far sides of a and b (for points: a and b).
  const float* pa = item(a);
  const float* pb = item(b);
  double ab = 0;
  for (uint32_t k = 0; k < d; ++k) ab += (double(pa[k]) - pb[k]) * (double(pa[k]) - pb[k]);
  ab = std::sqrt(ab);
  double r = (ab + radius(a) + radius(b)) / 2;
  for (uint32_t k = 0; k < d; ++k) {
    // From a's far side toward b's far side: the midpoint of the diameter.
    const double u = ab > 0 ? (pb[k] - double(pa[k])) / ab : 0;
    c[k] = pa[k] - u * radius(a) + u * r;
  }
  if (count == 1) r = radius(0);
  // Grow toward the farthest item until every item is inside (a bounded number of passes; the
  // exact cover below makes the result right whatever the passes did).
  for (int pass = 0; pass < 64; ++pass) {
    const uint32_t f = far_from(c.data(), &dd);
    if (dd <= r) break;
    const float* pf = item(f);
    double dc = 0;
    for (uint32_t k = 0; k < d; ++k) dc += (pf[k] - c[k]) * (pf[k] - c[k]);
    dc = std::sqrt(dc);
    const double nr = (r + dd) / 2;
    if (dc > 0)
      for (uint32_t k = 0; k < d; ++k) c[k] += (nr - r) * (pf[k] - c[k]) / dc;
    r = nr;
  }
  for (uint32_t k = 0; k < d; ++k) center_out[k] = static_cast<float>(c[k]);
  // The exact cover around the float center.
  double cover = 0;
  for (uint32_t j = 0; j < count; ++j) {
    const float* p = item(j);
    double s = 0;
    for (uint32_t k = 0; k < d; ++k) s += (double(p[k]) - center_out[k]) * (double(p[k]) - center_out[k]);
    cover = std::max(cover, std::sqrt(s) + radius(j));
  }
  float rf = static_cast<float>(cover * (1 + 1e-6));
  if (static_cast<double>(rf) < cover) rf = std::nextafter(rf, std::numeric_limits<float>::infinity());
  *radius_out = rf;
}

// ---- geometry ----------------------------------------------------------------------------------
struct Geometry {
  uint64_t leaves = 0;
  uint64_t inner = 0;
  uint32_t height = 0;
  uint64_t level_start[kMaxLevels + 1] = {};
};

Status GeometryOf(uint64_t n, uint32_t degree, Geometry* g) {
  g->leaves = (n + degree - 1) / degree;
  if (g->leaves >= kNoParent) return Status::InvalidArgument("knn: too many points for the degree (leaves >= 2^32)");
  uint64_t below = g->leaves;
  g->inner = 0;
  g->height = 0;
  do {
    if (g->height == kMaxLevels) return Status::InvalidArgument("knn: the tree would be too high");
    const uint64_t cnt = (below + degree - 1) / degree;
    g->level_start[g->height++] = g->inner;
    g->inner += cnt;
    below = cnt;
  } while (below > 1);
  g->level_start[g->height] = g->inner;
  if (g->inner >= kNoParent) return Status::InvalidArgument("knn: too many inner nodes");
  return Status::OK();
}

struct Blocks {
  uint64_t header = 0, leaf_points = 0, leaf_ids = 0, leaf_meta = 0, inner_spheres = 0, inner_meta = 0;
};

void FreeBlocks(Allocator& a, const Blocks& b) {
  for (uint64_t off : {b.header, b.leaf_points, b.leaf_ids, b.leaf_meta, b.inner_spheres, b.inner_meta})
    if (off) a.Free(off);
}

Status ValidateBuild(const float* points, uint64_t n, uint32_t dim, const BuildOptions& o) {
  if (n == 0) return Status::InvalidArgument("knn build: no points");
  if (points == nullptr) return Status::InvalidArgument("knn build: null points");
  if (dim == 0 || dim > kMaxDim)
    return Status::InvalidArgument("knn build: dimension " + std::to_string(dim) + " outside [1, " +
                                   std::to_string(kMaxDim) + "]");
  if (o.degree < kMinDegree || o.degree > kMaxDegree)
    return Status::InvalidArgument("knn build: degree " + std::to_string(o.degree) + " outside [" +
                                   std::to_string(kMinDegree) + ", " + std::to_string(kMaxDegree) + "]");
  if (o.method != BuildMethod::kHilbert && o.method != BuildMethod::kKMeans)
    return Status::InvalidArgument("knn build: unknown build method");
  if (o.device != Device::kCpu && o.device != Device::kGpu) return Status::InvalidArgument("knn build: unknown device");
  for (uint64_t i = 0; i < n * dim; ++i)
    if (!std::isfinite(points[i]))
      return Status::InvalidArgument("knn build: point " + std::to_string(i / dim) + " has a non-finite coordinate (" +
                                     std::to_string(i % dim) + ")");
  return Status::OK();
}

}  // namespace

void SetBuildDeviceForTesting(std::function<std::unique_ptr<BuildDevice>()> make) {
  std::lock_guard<std::mutex> g(build_device_mu);
  delete build_device_for_testing;
  build_device_for_testing = make ? new std::function<std::unique_ptr<BuildDevice>()>(std::move(make)) : nullptr;
}

namespace {
// The CPU's steps behind the BuildDevice interface (the tests' reference for the GPU's).
class CpuSteps final : public BuildDevice {
 public:
  explicit CpuSteps(unsigned threads) : threads_(threads) {}
  Status Assign(const float* pts, uint64_t n, uint32_t d, const float* centt, uint32_t k, uint32_t* out) override {
    GpuSteps none;
    return AssignAll(pts, n, d, std::vector<float>(centt, centt + uint64_t{d} * k), k, ThreadsFor(threads_, n), &none,
                     out);
  }
  Status HilbertKeys(const float* pts, uint64_t n, uint32_t dim, uint32_t bits, uint32_t words, const double* lo,
                     const double* scale, uint64_t* keys) override {
    HilbertCoder hc;
    hc.dim = dim;
    hc.bits = bits;
    hc.words = words;
    hc.lo.assign(lo, lo + dim);
    hc.scale.assign(scale, scale + dim);
    GpuSteps none;
    std::vector<uint64_t> k;
    WORT_RETURN_IF_ERROR(knn::HilbertKeys(hc, pts, n, ThreadsFor(threads_, n), &none, &k));
    std::memcpy(keys, k.data(), k.size() * sizeof(uint64_t));
    return Status::OK();
  }

 private:
  unsigned threads_;
};
}  // namespace

std::unique_ptr<BuildDevice> CpuBuildDevice(unsigned threads) { return std::make_unique<CpuSteps>(threads); }

uint64_t PointsBelow(const TreeView& v, uint64_t node, uint32_t j) {
  const InnerMeta& m = v.inner_meta[node];
  if (m.level == 0) return v.leaf_meta[m.first_child + j].count;
  const InnerMeta& c = v.inner_meta[m.first_child + j];
  return std::min<uint64_t>(v.points, (uint64_t{c.last_leaf} + 1) * v.degree) - uint64_t{c.first_leaf} * v.degree;
}

// The tree's header: geometry and offsets, each array's CRC, the header's CRC.
uint64_t HeaderCrc(const TreeHeader& h) { return Crc64(&h, offsetof(TreeHeader, header_crc)); }

// Defined in tree.cc. ClaimForBuild: claims the tree of `name` if there is one (Busy while a
// handle is open; InvalidArgument if the name holds another kind), before any work is done.
// PublishTree: publishes a built tree under `name`, replacing and freeing an older one (the
// caller holds the claim).
Status ClaimForBuild(Pool& pool, std::string_view name, std::shared_ptr<void>* claim);
Status PublishTree(Pool& pool, std::string_view name, uint64_t tree_off);

Status KnnIndex::Build(Pool& pool, std::string_view name, const float* points, const uint64_t* ids, uint64_t n,
                       uint32_t dim, const BuildOptions& o, BuildStats* stats) {
  if (pool.read_only()) return Status::InvalidArgument("knn build: the pool is open read-only");
  if (name.empty() || name.size() > Pool::kMaxRootName)
    return Status::InvalidArgument("knn build: name must be 1.." + std::to_string(Pool::kMaxRootName) + " bytes");
  WORT_RETURN_IF_ERROR(ValidateBuild(points, n, dim, o));
  Geometry g;
  WORT_RETURN_IF_ERROR(GeometryOf(n, o.degree, &g));
  // The GPU's steps (Device::kGpu): NotSupported here, before anything is claimed or written,
  // where there is no CUDA or no GPU.
  std::unique_ptr<BuildDevice> bdev;
  if (o.device == Device::kGpu) {
    std::unique_lock<std::mutex> lk(build_device_mu);
    if (build_device_for_testing) {
      bdev = (*build_device_for_testing)();
    } else {
      lk.unlock();
      Status s = gpu::OpenBuildDevice(&bdev);
      if (!s.ok()) return s;
    }
    if (!bdev) return Status::NotSupported("knn build on the GPU: no build device");
  }
  GpuSteps gs;
  gs.dev = bdev.get();
  std::shared_ptr<void> claim;
  WORT_RETURN_IF_ERROR(ClaimForBuild(pool, name, &claim));
  const uint32_t deg = o.degree;
  const unsigned threads = ThreadsFor(o.threads, n);
  BuildStats st;

  // 1. The order of the points.
  auto t0 = Clock::now();
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  {
    HilbertCoder hc(points, n, dim, threads);
    std::vector<uint64_t> keys;
    WORT_RETURN_IF_ERROR(HilbertKeys(hc, points, n, threads, &gs, &keys));
    st.keys_device = o.device;
    if (o.method == BuildMethod::kHilbert) {
      SortByKey(&order, keys, hc.words, nullptr);
    } else {
      uint32_t k = 0;
      std::vector<float> cent;
      std::vector<uint32_t> assign;
      WORT_RETURN_IF_ERROR(KMeans(points, n, dim, o, threads, &gs, &k, &cent, &assign));
      st.assign_device = o.device;
      // Clusters in a chain of nearest centroids, so that consecutive leaves - which the levels
      // above group - hold nearby clusters (a Hilbert order of the centroids keeps little
      // locality in many dimensions).
      const std::vector<uint32_t> corder = CentroidChain(cent, k, dim);
      std::vector<uint32_t> rank(k);
      for (uint32_t r = 0; r < k; ++r) rank[corder[r]] = r;
      for (auto& a : assign) a = rank[a];
      SortByKey(&order, keys, hc.words, &assign);
    }
  }
  st.seconds_order = Since(t0);
  st.seconds_gpu = gs.seconds;
  bdev.reset();  // the GPU's buffers

  // 2. The blocks (sizes follow from n, dim and degree alone).
  Allocator& alloc = pool.allocator();
  Blocks b;
  const uint64_t bytes_points = LeafPointsBytes(g.leaves, dim, deg), bytes_ids = LeafIdsBytes(g.leaves, deg),
                 bytes_lmeta = g.leaves * sizeof(LeafMeta), bytes_spheres = InnerSpheresBytes(g.inner, dim, deg),
                 bytes_imeta = g.inner * sizeof(InnerMeta);
  {
    struct Want {
      uint64_t* off;
      uint64_t bytes;
    } wants[] = {{&b.header, sizeof(TreeHeader)}, {&b.leaf_points, bytes_points}, {&b.leaf_ids, bytes_ids},
                 {&b.leaf_meta, bytes_lmeta},    {&b.inner_spheres, bytes_spheres}, {&b.inner_meta, bytes_imeta}};
    for (const Want& w : wants) {
      Status s = alloc.Alloc(w.bytes, w.off);
      if (!s.ok()) {
        FreeBlocks(alloc, b);
        return Status::PoolFull("knn build: the pool has no room for the tree (" + std::to_string(w.bytes) +
                                " bytes more): " + s.message());
      }
    }
  }
  TreeView v;
  v.dim = dim;
  v.degree = deg;
  v.points = n;
  v.leaves = g.leaves;
  v.inner = g.inner;
  v.root = static_cast<uint32_t>(g.inner - 1);
  auto* leaf_points = pool.at<float>(b.leaf_points);
  auto* leaf_ids = pool.at<uint64_t>(b.leaf_ids);
  auto* leaf_meta = pool.at<LeafMeta>(b.leaf_meta);
  auto* spheres = pool.at<float>(b.inner_spheres);
  auto* imeta = pool.at<InnerMeta>(b.inner_meta);
  v.leaf_points = leaf_points;
  v.leaf_ids = leaf_ids;
  v.leaf_meta = leaf_meta;
  v.inner_spheres = spheres;
  v.inner_meta = imeta;

  // 3. Leaves: points in order, structure of arrays, filled to 100%.
  t0 = Clock::now();
  ParallelFor(threads, g.leaves, [&](uint64_t lb, uint64_t le) {
    for (uint64_t l = lb; l < le; ++l) {
      const uint32_t count = static_cast<uint32_t>(std::min<uint64_t>(deg, n - l * deg));
      for (uint32_t dd = 0; dd < dim; ++dd) {
        float* row = leaf_points + (l * dim + dd) * deg;
        for (uint32_t j = 0; j < count; ++j) row[j] = points[order[l * deg + j] * dim + dd];
        std::fill(row + count, row + deg, 0.0f);
      }
      uint64_t* lid = leaf_ids + l * deg;
      for (uint32_t j = 0; j < count; ++j) {
        const uint64_t src = order[l * deg + j];
        lid[j] = ids ? ids[src] : src;
      }
      std::fill(lid + count, lid + deg, 0);
      leaf_meta[l] = LeafMeta{static_cast<uint32_t>(l / deg), count};
    }
  });
  // 4. Inner nodes, level by level from the bottom: links, then the child spheres (each child's
  // Ritter sphere, written into its slot of the parent). Slots past a node's count are zero.
  std::memset(spheres, 0, bytes_spheres);
  for (uint32_t lv = 0; lv < g.height; ++lv) {
    const uint64_t start = g.level_start[lv], cnt = g.level_start[lv + 1] - start;
    const uint64_t below = lv == 0 ? g.leaves : g.level_start[lv] - g.level_start[lv - 1];
    const uint64_t below_start = lv == 0 ? 0 : g.level_start[lv - 1];
    for (uint64_t i = 0; i < cnt; ++i) {
      InnerMeta m{};
      m.parent = lv + 1 < g.height ? static_cast<uint32_t>(g.level_start[lv + 1] + i / deg) : kNoParent;
      m.count = static_cast<uint32_t>(std::min<uint64_t>(deg, below - i * deg));
      m.first_child = static_cast<uint32_t>(below_start + i * deg);
      m.level = lv;
      if (lv == 0) {
        m.first_leaf = m.first_child;
        m.last_leaf = m.first_child + m.count - 1;
      } else {
        m.first_leaf = imeta[m.first_child].first_leaf;
        m.last_leaf = imeta[m.first_child + m.count - 1].last_leaf;
      }
      imeta[start + i] = m;
    }
    // Spheres of this level's children.
    ParallelFor(threads, cnt, [&](uint64_t nb, uint64_t ne) {
      std::vector<float> center(dim);
      for (uint64_t i = start + nb; i < start + ne; ++i) {
        const InnerMeta& m = imeta[i];
        for (uint32_t j = 0; j < m.count; ++j) {
          const uint64_t child = m.first_child + j;
          float r = 0;
          if (lv == 0) {
            const uint32_t pc = leaf_meta[child].count;
            std::vector<float> pts(uint64_t{pc} * dim);  // the leaf's points, row-major
            for (uint32_t dd = 0; dd < dim; ++dd) {
              const float* row = v.LeafRow(child, dd);
              for (uint32_t q = 0; q < pc; ++q) pts[uint64_t{q} * dim + dd] = row[q];
            }
            Ritter(pc, dim, o.seed + child, [&](uint32_t q) { return &pts[uint64_t{q} * dim]; },
                   [](uint32_t) { return 0.0; }, center.data(), &r);
          } else {
            const InnerMeta& cm = imeta[child];
            std::vector<float> cc(uint64_t{cm.count} * dim);  // the child's children's centers
            for (uint32_t dd = 0; dd < dim; ++dd) {
              const float* row = v.SphereRow(child, dd);
              for (uint32_t q = 0; q < cm.count; ++q) cc[uint64_t{q} * dim + dd] = row[q];
            }
            const float* rad = v.Radii(child);
            Ritter(cm.count, dim, o.seed + child, [&](uint32_t q) { return &cc[uint64_t{q} * dim]; },
                   [&](uint32_t q) { return double(rad[q]); }, center.data(), &r);
          }
          for (uint32_t dd = 0; dd < dim; ++dd) spheres[(i * (uint64_t{dim} + 1) + dd) * deg + j] = center[dd];
          spheres[(i * (uint64_t{dim} + 1) + dim) * deg + j] = r;
        }
      }
    });
  }
  st.seconds_spheres = Since(t0);

  // 5. The header, the checksums, the write-back; then the publication.
  t0 = Clock::now();
  auto* h = pool.at<TreeHeader>(b.header);
  std::memset(h, 0, sizeof(TreeHeader));
  h->magic = kTreeMagic;
  h->version = kLayoutVersion;
  h->dim = dim;
  h->points = n;
  h->degree = deg;
  h->method = static_cast<uint32_t>(o.method);
  h->leaves = g.leaves;
  h->inner = g.inner;
  h->height = g.height;
  h->seed = o.seed;
  h->off_leaf_points = b.leaf_points;
  h->off_leaf_ids = b.leaf_ids;
  h->off_leaf_meta = b.leaf_meta;
  h->off_inner_spheres = b.inner_spheres;
  h->off_inner_meta = b.inner_meta;
  for (uint32_t i = 0; i <= g.height; ++i) h->level_start[i] = g.level_start[i];
  h->crc_leaf_points = Crc64(leaf_points, bytes_points);
  h->crc_leaf_ids = Crc64(leaf_ids, bytes_ids);
  h->crc_leaf_meta = Crc64(leaf_meta, bytes_lmeta);
  h->crc_inner_spheres = Crc64(spheres, bytes_spheres);
  h->crc_inner_meta = Crc64(imeta, bytes_imeta);
  h->header_crc = HeaderCrc(*h);
  // Every array and the header reach persistence before the tree is published (K1).
  pm::flush(leaf_points, bytes_points);
  pm::flush(leaf_ids, bytes_ids);
  pm::flush(leaf_meta, bytes_lmeta);
  pm::flush(spheres, bytes_spheres);
  pm::flush(imeta, bytes_imeta);
  pm::persist(h, sizeof(TreeHeader));
  Status s = PublishTree(pool, name, b.header);
  if (!s.ok()) {
    FreeBlocks(alloc, b);
    return s;
  }
  st.seconds_persist = Since(t0);
  st.bytes = sizeof(TreeHeader) + bytes_points + bytes_ids + bytes_lmeta + bytes_spheres + bytes_imeta;
  if (stats) *stats = st;
  return Status::OK();
}

}  // namespace wort::knn
