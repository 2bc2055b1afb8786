// The kNN GPU kernel's code (src/knn/gpu_kernel.h) run on the CPU under an emulation of the CUDA
// built-ins (tests/knn/cuda_emu.h), against the CPU engines: ids, distance bits and counters
// equal, for every engine, with the k best in "shared" memory and in the output arrays, blocks
// of one and several warps and of fewer threads than children, several queries per block. This
// runs everywhere; it checks the kernel's logic, not nvcc's code or a GPU's timing
// (tests/knn/knn_gpu_test.cc does that where a GPU is present).
#include "knn/cuda_emu.h"
// cuda_emu.h first: it defines the CUDA keywords and built-ins the kernel header uses.
#include "knn/gpu_kernel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "knn/knn_util.h"
#include "knn/layout.h"
#include "wort/knn.h"
#include "wort/pool.h"

namespace wort::test {
namespace {

using knn::BuildMethod;
using knn::BuildOptions;
using knn::Counters;
using knn::Engine;
using knn::KnnIndex;
using knn::SearchOptions;
namespace kern = knn::gpu::kernel;

constexpr auto& kEngines = kKnnEngines;

using Result = KnnResult;

// The tree's arrays, straight from the pool (the emulated kernel reads host memory).
kern::DevTree TreeOf(Pool& pool, const std::string& name) {
  RootInfo ri;
  EXPECT_TRUE(pool.FindRoot(name, &ri).ok());
  const knn::TreeHeader* h = pool.at<knn::TreeHeader>(pool.at<knn::RootBlock>(ri.off)->tree);
  kern::DevTree t{};
  t.dim = h->dim;
  t.degree = h->degree;
  t.points = h->points;
  t.leaves = h->leaves;
  t.root = static_cast<uint32_t>(h->inner - 1);
  t.leaf_points = pool.at<float>(h->off_leaf_points);
  t.leaf_ids = pool.at<uint64_t>(h->off_leaf_ids);
  t.leaf_meta = pool.at<knn::LeafMeta>(h->off_leaf_meta);
  t.inner_spheres = pool.at<float>(h->off_inner_spheres);
  t.inner_meta = pool.at<knn::InnerMeta>(h->off_inner_meta);
  return t;
}

// One emulated launch, as src/knn/gpu.cu makes it (threads: the degree rounded up to a multiple
// of 32, at most kMaxThreads), with `blocks` blocks.
Result Emulate(const kern::DevTree& t, const Points& q, uint32_t k, Engine e, bool best_in_shared, unsigned blocks) {
  Result r;
  r.ids.assign(q.n * k, 0);
  r.d.assign(q.n * k, 0.0f);
  std::vector<kern::DevCounters> per(q.n);
  kern::Launch a{};
  a.t = t;
  a.queries = q.x.data();
  a.nq = q.n;
  a.k = k;
  a.engine = e;
  a.best_in_shared = best_in_shared;
  a.out_ids = r.ids.data();
  a.out_dists = r.d.data();
  a.counters = per.data();
  const unsigned threads = std::max<uint32_t>(32, (std::min<uint32_t>(t.degree, kern::kMaxThreads) + 31) / 32 * 32);
  std::vector<uint64_t> smem((kern::SharedBytes(t.dim, t.degree, k, best_in_shared) + 7) / 8 + 2, 0);
  uint64_t red[32] = {};
  uint32_t shared_n = 0, shared_changed = 0;
  cuda_emu::Launch(blocks, threads, [&] {
    kern::SearchBlocks(a, reinterpret_cast<unsigned char*>(smem.data()), red, &shared_n, &shared_changed);
  });
  r.c.queries = q.n;
  for (const auto& x : per) {
    r.c.inner_visits += x.inner_visits;
    r.c.leaf_visits += x.leaf_visits;
    r.c.sphere_bytes += x.sphere_bytes;
    r.c.point_bytes += x.point_bytes;
  }
  return r;
}

void ExpectEmulationEqualsCpu(const Points& p, const std::vector<uint64_t>& ids, const Points& q, uint32_t k,
                              const BuildOptions& bo, const std::string& what) {
  TempPath path("knnemu");
  PoolOptions po;
  po.initial_size = 8ull << 20;
  po.max_size = 1ull << 30;
  po.background_recovery = false;
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::OpenOrCreate(path, po, &pool).ok());
  ASSERT_TRUE(KnnIndex::Build(*pool, "t", p.x.data(), ids.empty() ? nullptr : ids.data(), p.n, p.dim, bo).ok());
  std::unique_ptr<KnnIndex> idx;
  ASSERT_TRUE(KnnIndex::Open(*pool, "t", &idx).ok());
  const kern::DevTree t = TreeOf(*pool, "t");
  for (Engine e : kEngines) {
    Result cpu;
    cpu.ids.resize(q.n * k);
    cpu.d.resize(q.n * k);
    SearchOptions so;
    so.engine = e;
    so.threads = 1;
    ASSERT_TRUE(idx->Search(q.x.data(), q.n, k, so, cpu.ids.data(), cpu.d.data(), &cpu.c).ok());
    for (bool shared : {true, false}) {
      const unsigned blocks = shared ? static_cast<unsigned>(q.n) : 2;  // 2: several queries per block
      const Result emu = Emulate(t, q, k, e, shared, blocks);
      const std::string w = what + " engine " + knn::EngineName(e) + (shared ? " (k best shared)" : " (k best global)");
      EXPECT_EQ(emu.ids, cpu.ids) << w;
      EXPECT_EQ(0, std::memcmp(emu.d.data(), cpu.d.data(), cpu.d.size() * sizeof(float))) << w << ": distance bits";
      EXPECT_EQ(emu.c.inner_visits, cpu.c.inner_visits) << w;
      EXPECT_EQ(emu.c.leaf_visits, cpu.c.leaf_visits) << w;
      EXPECT_EQ(emu.c.sphere_bytes, cpu.c.sphere_bytes) << w;
      EXPECT_EQ(emu.c.point_bytes, cpu.c.point_bytes) << w;
    }
  }
}

TEST(KnnGpuEmulation, ClusteredTwoWarps) {
  const Points p = MakePoints(3000, 16, 10, 120, 1);
  const Points q = MakePoints(5, 16, 10, 120, 1, 0, 2);
  for (BuildMethod m : {BuildMethod::kKMeans, BuildMethod::kHilbert}) {
    BuildOptions bo;
    bo.method = m;
    bo.degree = 64;  // 64 threads: two warps
    ExpectEmulationEqualsCpu(p, {}, q, 10, bo, std::string("clustered 16d ") + knn::BuildMethodName(m));
  }
}

TEST(KnnGpuEmulation, Uniform2dKLargerThanLeafOneWarp) {
  const Points p = MakePoints(2000, 2, 0, 0, 3);
  const Points q = MakePoints(6, 2, 0, 0, 4);
  BuildOptions bo;
  bo.degree = 8;  // 32 threads, 24 of them idle over a node's children
  ExpectEmulationEqualsCpu(p, {}, q, 20, bo, "uniform 2d k=20 > leaf 8");
  ExpectEmulationEqualsCpu(p, {}, q, 1, bo, "uniform 2d k=1");
}

TEST(KnnGpuEmulation, DuplicatesTiesAndRepeatedIds) {
  const Points p = MakePoints(1500, 4, 5, 100, 5, 37);
  const Points q = MakePoints(4, 4, 5, 100, 5, 37);  // data points: distance 0, ties by id
  std::vector<uint64_t> ids(p.n), rep(p.n);
  for (uint64_t i = 0; i < p.n; ++i) {
    ids[i] = (i * 0x9e3779b97f4a7c15ull) | (1ull << 63);
    rep[i] = i % 50;
  }
  BuildOptions bo;
  bo.degree = 40;  // 64 threads, a partial second warp
  ExpectEmulationEqualsCpu(p, ids, q, 70, bo, "duplicates k=70");
  ExpectEmulationEqualsCpu(p, rep, q, 45, bo, "repeated ids k=45");
}

TEST(KnnGpuEmulation, KEqualsNAndHighDim) {
  BuildOptions bo;
  bo.degree = 4;
  ExpectEmulationEqualsCpu(MakePoints(100, 3, 0, 0, 6), {}, MakePoints(3, 3, 0, 0, 7), 100, bo, "k = n");
  bo.degree = 16;
  ExpectEmulationEqualsCpu(MakePoints(300, 300, 4, 40, 8), {}, MakePoints(2, 300, 4, 40, 8, 0, 9), 5, bo, "300d");
}

TEST(KnnGpuEmulation, MoreChildrenThanThreads) {
  // Degree 600: 512 threads, each looping over a second child or point.
  const Points p = MakePoints(1500, 3, 6, 300, 10);
  const Points q = MakePoints(1, 3, 6, 300, 10, 0, 11);
  BuildOptions bo;
  bo.degree = 600;
  ExpectEmulationEqualsCpu(p, {}, q, 40, bo, "degree 600");
}

}  // namespace
}  // namespace wort::test
