// The kNN build's GPU kernels (src/knn/build_kernel.h) run on the CPU under the emulation of the
// CUDA built-ins (tests/knn/cuda_emu.h), against the CPU's own steps (build.cc, through
// CpuBuildDevice): the same nearest centroid for every point (ties included) and the same Hilbert
// keys, for several shapes; then whole trees built with Device::kGpu through the emulated kernels
// (SetBuildDeviceForTesting) equal the CPU-built trees byte for byte. This runs everywhere; it
// checks the kernels' logic and arithmetic order, not nvcc's code (tests/knn/knn_gpu_build_test.cc
// does that where a GPU is present).
#include "knn/cuda_emu.h"
// cuda_emu.h first: it defines the CUDA keywords and built-ins the kernel header uses.
#include "knn/build_kernel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "knn/internal.h"
#include "knn/knn_util.h"
#include "knn/layout.h"
#include "wort/knn.h"
#include "wort/pool.h"

namespace wort::test {
namespace {

using knn::BuildMethod;
using knn::BuildOptions;
using knn::Device;
using knn::KnnIndex;
namespace bk = knn::gpu::build_kernel;

// The kernels as src/knn/gpu.cu launches them, on host memory. `hilbert_blocks` x 64 threads
// for the keys (fewer threads than points: the grid-stride loop and the interleaved scratch).
class EmuBuildDevice final : public knn::BuildDevice {
 public:
  struct Calls {
    int assign = 0, hilbert = 0;
  };
  explicit EmuBuildDevice(Calls* calls = nullptr, unsigned hilbert_blocks = 3)
      : calls_(calls ? calls : &own_), hilbert_blocks_(hilbert_blocks) {}
  Status Assign(const float* pts, uint64_t n, uint32_t d, const float* centt, uint32_t k, uint32_t* out) override {
    ++calls_->assign;
    bk::AssignArgs a{pts, n, d, centt, k, out};
    std::vector<float> tile(bk::kTileFloats);
    const unsigned blocks = static_cast<unsigned>((n + bk::kAssignThreads - 1) / bk::kAssignThreads);
    cuda_emu::Launch(blocks, bk::kAssignThreads, [&] { bk::AssignBlock(a, tile.data()); });
    return Status::OK();
  }
  Status HilbertKeys(const float* pts, uint64_t n, uint32_t dim, uint32_t bits, uint32_t words, const double* lo,
                     const double* scale, uint64_t* keys) override {
    ++calls_->hilbert;
    constexpr unsigned kThreads = 64;
    std::vector<uint32_t> scratch(uint64_t{hilbert_blocks_} * kThreads * dim);
    bk::HilbertArgs a{pts, n, dim, bits, words, lo, scale, keys, scratch.data()};
    cuda_emu::Launch(hilbert_blocks_, kThreads, [&] { bk::HilbertThread(a); });
    return Status::OK();
  }

 private:
  Calls own_;
  Calls* calls_;
  unsigned hilbert_blocks_;
};

// The CPU's and the emulated kernel's nearest centroids of `p` (centroids: the rows of `cent`).
void ExpectSameAssignment(const Points& p, const std::vector<float>& cent, uint32_t k, const std::string& what) {
  const uint32_t d = p.dim;
  std::vector<float> centt(uint64_t{k} * d);
  for (uint32_t c = 0; c < k; ++c)
    for (uint32_t j = 0; j < d; ++j) centt[uint64_t{j} * k + c] = cent[uint64_t{c} * d + j];
  std::vector<uint32_t> cpu(p.n, 7777), emu(p.n, 9999);
  ASSERT_TRUE(knn::CpuBuildDevice(2)->Assign(p.x.data(), p.n, d, centt.data(), k, cpu.data()).ok());
  EmuBuildDevice dev;
  ASSERT_TRUE(dev.Assign(p.x.data(), p.n, d, centt.data(), k, emu.data()).ok());
  EXPECT_EQ(cpu, emu) << what;
}

// Centroids: points of the set (distance 0 to some point), a duplicate of centroid 1 at a
// higher index (exact ties: the lowest index wins), perturbed points for the rest.
std::vector<float> MakeCentroids(const Points& p, uint32_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> cent(uint64_t{k} * p.dim);
  for (uint32_t c = 0; c < k; ++c) {
    const uint64_t src = rng() % p.n;
    for (uint32_t j = 0; j < p.dim; ++j)
      cent[uint64_t{c} * p.dim + j] = p.x[src * p.dim + j] + (c % 3 == 0 ? 0.0f : float(rng() % 1000) / 100.0f);
  }
  if (k > 2) std::copy_n(&cent[p.dim], p.dim, &cent[uint64_t{k - 1} * p.dim]);
  return cent;
}

TEST(KnnGpuBuildEmulation, AssignmentEqualsCpu) {
  struct Shape {
    uint64_t n;
    uint32_t d, k;
  } shapes[] = {{700, 2, 19}, {500, 64, 33}, {260, 960, 40}, {300, 65, 32}, {130, 1, 3}, {50, 7, 1}};
  for (const Shape& s : shapes) {
    const Points p = MakePoints(s.n, s.d, 5, 100, s.n + s.d);
    const std::string what = std::to_string(s.n) + " x " + std::to_string(s.d) + "d, k " + std::to_string(s.k);
    ExpectSameAssignment(p, MakeCentroids(p, s.k, s.d), s.k, what);
  }
  // Every centroid equal: every point ties everywhere, centroid 0 wins.
  const Points p = MakePoints(200, 5, 0, 0, 3);
  std::vector<float> same(uint64_t{40} * 5);
  for (uint32_t c = 0; c < 40; ++c) std::copy_n(&p.x[0], 5, &same[uint64_t{c} * 5]);
  ExpectSameAssignment(p, same, 40, "all centroids equal");
}

TEST(KnnGpuBuildEmulation, HilbertKeysEqualCpu) {
  struct Shape {
    uint64_t n;
    uint32_t d;
  } shapes[] = {{1000, 2}, {400, 3}, {300, 64}, {90, 960}, {200, 129}};
  for (const Shape& s : shapes) {
    Points p = MakePoints(s.n, s.d, 4, 300, 11 + s.d);
    for (uint64_t i = 0; i < p.n; ++i) p.x[i * s.d] = 5.0f;  // a constant dimension: scale 0
    const uint32_t bits = std::clamp<uint32_t>(2048 / s.d, 2, 16);
    const uint32_t words = static_cast<uint32_t>((uint64_t{s.d} * bits + 63) / 64);
    std::vector<double> lo(s.d, std::numeric_limits<double>::infinity()), hi(s.d, -lo[0]), scale(s.d);
    for (uint64_t i = 0; i < p.n; ++i)
      for (uint32_t j = 0; j < s.d; ++j) {
        lo[j] = std::min<double>(lo[j], p.x[i * s.d + j]);
        hi[j] = std::max<double>(hi[j], p.x[i * s.d + j]);
      }
    const double cells = std::ldexp(1.0, static_cast<int>(bits)) - 1;
    for (uint32_t j = 0; j < s.d; ++j) scale[j] = hi[j] > lo[j] ? cells / (hi[j] - lo[j]) : 0.0;
    std::vector<uint64_t> cpu(p.n * words, 1), emu(p.n * words, 2);
    ASSERT_TRUE(knn::CpuBuildDevice(2)->HilbertKeys(p.x.data(), p.n, s.d, bits, words, lo.data(), scale.data(),
                                                     cpu.data()).ok());
    EmuBuildDevice dev;
    ASSERT_TRUE(dev.HilbertKeys(p.x.data(), p.n, s.d, bits, words, lo.data(), scale.data(), emu.data()).ok());
    EXPECT_EQ(cpu, emu) << s.n << " x " << s.d << "d";
  }
}

// The tree's arrays (header fields and the five arrays) as bytes.
std::vector<std::string> TreeBytes(Pool& pool, const std::string& name) {
  RootInfo ri;
  EXPECT_TRUE(pool.FindRoot(name, &ri).ok());
  const auto* h = pool.at<knn::TreeHeader>(pool.at<knn::RootBlock>(ri.off)->tree);
  auto bytes = [&](uint64_t off, uint64_t len) { return std::string(pool.at<char>(off), len); };
  std::vector<std::string> out;
  knn::TreeHeader hh;  // the header without its offsets and its own CRC
  std::memcpy(&hh, h, sizeof hh);
  hh.off_leaf_points = hh.off_leaf_ids = hh.off_leaf_meta = hh.off_inner_spheres = hh.off_inner_meta = 0;
  hh.header_crc = 0;
  out.push_back(std::string(reinterpret_cast<const char*>(&hh), sizeof hh));
  out.push_back(bytes(h->off_leaf_points, knn::LeafPointsBytes(h->leaves, h->dim, h->degree)));
  out.push_back(bytes(h->off_leaf_ids, knn::LeafIdsBytes(h->leaves, h->degree)));
  out.push_back(bytes(h->off_leaf_meta, h->leaves * sizeof(knn::LeafMeta)));
  out.push_back(bytes(h->off_inner_spheres, knn::InnerSpheresBytes(h->inner, h->dim, h->degree)));
  out.push_back(bytes(h->off_inner_meta, h->inner * sizeof(knn::InnerMeta)));
  return out;
}

TEST(KnnGpuBuildEmulation, WholeTreeEqualsCpu) {
  struct Case {
    uint64_t n;
    uint32_t dim, degree;
  } cases[] = {{3000, 2, 8}, {2500, 64, 128}, {300, 960, 8}, {1200, 16, 32}};
  TempPath path("knnbuildemu");
  PoolOptions po;
  po.initial_size = 64ull << 20;
  po.max_size = 1ull << 30;
  po.background_recovery = false;
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::OpenOrCreate(path, po, &pool).ok());
  EmuBuildDevice::Calls calls;
  knn::SetBuildDeviceForTesting([&] { return std::make_unique<EmuBuildDevice>(&calls); });
  for (const Case& c : cases)
    for (BuildMethod m : {BuildMethod::kKMeans, BuildMethod::kHilbert}) {
      const Points p = MakePoints(c.n, c.dim, 8, 200, c.n + c.dim);
      const std::string what = std::to_string(c.n) + " x " + std::to_string(c.dim) + "d degree " +
                               std::to_string(c.degree) + " " + knn::BuildMethodName(m);
      BuildOptions bo;
      bo.method = m;
      bo.degree = c.degree;
      bo.kmeans_iterations = 4;
      calls = {};
      knn::BuildStats sc, sg;
      ASSERT_TRUE(KnnIndex::Build(*pool, "cpu", p.x.data(), nullptr, p.n, p.dim, bo, &sc).ok()) << what;
      bo.device = Device::kGpu;
      ASSERT_TRUE(KnnIndex::Build(*pool, "gpu", p.x.data(), nullptr, p.n, p.dim, bo, &sg).ok()) << what;
      EXPECT_EQ(sc.keys_device, Device::kCpu);
      EXPECT_EQ(sg.keys_device, Device::kGpu) << what;
      EXPECT_EQ(sg.assign_device, m == BuildMethod::kKMeans ? Device::kGpu : Device::kCpu) << what;
      EXPECT_EQ(calls.hilbert, 1) << what;
      EXPECT_EQ(calls.assign, m == BuildMethod::kKMeans ? 4 + 1 : 0) << what;
      const auto a = TreeBytes(*pool, "cpu"), b = TreeBytes(*pool, "gpu");
      ASSERT_EQ(a.size(), b.size());
      const char* names[] = {"header", "leaf points", "leaf ids", "leaf meta", "inner spheres", "inner meta"};
      for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i] == b[i]) << what << ": " << names[i] << " differ";
    }
  knn::SetBuildDeviceForTesting(nullptr);
}

}  // namespace
}  // namespace wort::test
