// The kNN SS-tree (wort/knn.h): exactness of every engine against a double-precision brute force
// on clustered, uniform and duplicate-heavy data (2, 64 and 960 dimensions, k = 1 and k larger
// than a leaf), the engines' agreement with each other, reopen, replace, drop, Check, and bad
// input that must leave an existing tree as it was.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "knn/knn_util.h"
#include "knn/layout.h"
#include "wort/alloc.h"
#include "wort/index.h"
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

constexpr auto& kEngines = kKnnEngines;

// Builds, then checks every engine on every query against the exact answer and against each
// other (the same ids and the same float bits as brute force), and the tree's Check().
void ExpectAllExact(const Points& p, const std::vector<uint64_t>& ids, const Points& q, uint32_t k,
                    const BuildOptions& bo, const std::string& what) {
  TempPath path("knn");
  auto pool = NewKnnPool(path);
  ASSERT_TRUE(KnnIndex::Build(*pool, "t", p.x.data(), ids.empty() ? nullptr : ids.data(), p.n, p.dim, bo).ok());
  std::unique_ptr<KnnIndex> idx;
  ASSERT_TRUE(KnnIndex::Open(*pool, "t", &idx).ok());
  std::string report;
  EXPECT_TRUE(idx->Check(&report).ok()) << what << ": " << report;
  const KnnResult brute = RunKnn(*idx, q, k, Engine::kBruteForce);
  EXPECT_EQ(brute.c.point_bytes, q.n * p.n * p.dim * sizeof(float)) << what;
  EXPECT_EQ(brute.c.leaf_visits, q.n * idx->info().leaves) << what;
  for (Engine e : kEngines) {
    const KnnResult r = e == Engine::kBruteForce ? brute : RunKnn(*idx, q, k, e);
    const std::string w = what + " engine " + knn::EngineName(e);
    for (uint64_t i = 0; i < q.n; ++i)
      ExpectExact(p, ids, q.row(i), k, &r.ids[i * k], &r.d[i * k], w + " query " + std::to_string(i));
    EXPECT_EQ(r.ids, brute.ids) << w;
    EXPECT_EQ(0, std::memcmp(r.d.data(), brute.d.data(), r.d.size() * sizeof(float))) << w;
    EXPECT_EQ(r.c.queries, q.n);
    if (e != Engine::kBruteForce) {
      EXPECT_GT(r.c.inner_visits, 0u) << w;
    }
  }
}

TEST(Knn, ExactClustered64dBothBuilds) {
  const Points p = MakePoints(6000, 64, 20, 160, 1);
  const Points q = MakePoints(40, 64, 20, 160, 1, 0, 99);  // the data's clusters, other draws
  const Points qq = MakePoints(40, 64, 20, 160, 1);          // points of the data themselves
  for (BuildMethod m : {BuildMethod::kHilbert, BuildMethod::kKMeans}) {
    BuildOptions bo;
    bo.method = m;
    bo.degree = 32;
    ExpectAllExact(p, {}, q, 32, bo, std::string("clustered ") + knn::BuildMethodName(m));
    ExpectAllExact(p, {}, qq, 1, bo, std::string("clustered k=1 ") + knn::BuildMethodName(m));
  }
}

TEST(Knn, ExactUniform2dKLargerThanLeaf) {
  const Points p = MakePoints(5000, 2, 0, 0, 2);
  const Points q = MakePoints(50, 2, 0, 0, 3);
  BuildOptions bo;
  bo.degree = 8;
  ExpectAllExact(p, {}, q, 20, bo, "uniform 2d k=20 > leaf 8");
  bo.method = BuildMethod::kHilbert;
  ExpectAllExact(p, {}, q, 1, bo, "uniform 2d k=1");
}

TEST(Knn, ExactDuplicateHeavyTiesByIdWithOwnIds) {
  // 3000 points that are 37 distinct ones: ties everywhere; the k-th place goes to the smallest
  // id among the tied, in every engine.
  const Points p = MakePoints(3000, 4, 5, 100, 4, 37);
  const Points q = MakePoints(30, 4, 5, 100, 4, 0, 5);
  std::vector<uint64_t> ids(p.n);
  for (uint64_t i = 0; i < p.n; ++i) ids[i] = (i * 0x9e3779b97f4a7c15ull) | (1ull << 63);  // high bit set
  for (BuildMethod m : {BuildMethod::kHilbert, BuildMethod::kKMeans}) {
    BuildOptions bo;
    bo.method = m;
    bo.degree = 16;
    ExpectAllExact(p, ids, q, 50, bo, std::string("duplicates ") + knn::BuildMethodName(m));
  }
  // The tie order itself: a query on a duplicated point gets the smallest ids first.
  TempPath path("knn");
  auto pool = NewKnnPool(path);
  BuildOptions bo;
  bo.degree = 16;
  ASSERT_TRUE(KnnIndex::Build(*pool, "t", p.x.data(), ids.data(), p.n, p.dim, bo).ok());
  std::unique_ptr<KnnIndex> idx;
  ASSERT_TRUE(KnnIndex::Open(*pool, "t", &idx).ok());
  std::vector<uint64_t> same;
  for (uint64_t i = 0; i < p.n; ++i)
    if (std::memcmp(p.row(i), p.row(0), p.dim * sizeof(float)) == 0) same.push_back(ids[i]);
  std::sort(same.begin(), same.end());
  ASSERT_GT(same.size(), 5u);
  for (Engine e : kEngines) {
    std::vector<uint64_t> got(5);
    std::vector<float> d(5);
    SearchOptions so;
    so.engine = e;
    ASSERT_TRUE(idx->Search(p.row(0), 1, 5, so, got.data(), d.data()).ok());
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(got[i], same[i]) << knn::EngineName(e) << " rank " << i;
      EXPECT_EQ(d[i], 0.0f);
    }
  }
}

TEST(Knn, Exact960d) {
  const Points p = MakePoints(700, 960, 7, 40, 6);
  const Points q = MakePoints(8, 960, 7, 40, 6, 0, 7);
  BuildOptions bo;
  bo.degree = 16;
  ExpectAllExact(p, {}, q, 10, bo, "960d kmeans");
  bo.method = BuildMethod::kHilbert;
  ExpectAllExact(p, {}, q, 1, bo, "960d hilbert k=1");
}

TEST(Knn, OnePointAndKEqualsN) {
  const Points p = MakePoints(1, 3, 0, 0, 8);
  const Points q = MakePoints(3, 3, 0, 0, 9);
  BuildOptions bo;
  bo.degree = 4;
  ExpectAllExact(p, {}, q, 1, bo, "one point");
  const Points p2 = MakePoints(100, 3, 0, 0, 10);
  ExpectAllExact(p2, {}, q, 100, bo, "k = n");
}

TEST(Knn, TreeSearchReadsLessThanBruteForceOnClusters) {
  // Not a speed claim: the counters of a tight clustered set show the pruning at work.
  const Points p = MakePoints(20000, 16, 50, 40, 11);
  const Points q = MakePoints(20, 16, 50, 40, 11, 0, 12);
  TempPath path("knn");
  auto pool = NewKnnPool(path);
  BuildOptions bo;
  bo.degree = 32;
  ASSERT_TRUE(KnnIndex::Build(*pool, "t", p.x.data(), nullptr, p.n, p.dim, bo).ok());
  std::unique_ptr<KnnIndex> idx;
  ASSERT_TRUE(KnnIndex::Open(*pool, "t", &idx).ok());
  const KnnResult brute = RunKnn(*idx, q, 16, Engine::kBruteForce);
  for (Engine e : {Engine::kBranchAndBound, Engine::kPsb}) {
    const KnnResult r = RunKnn(*idx, q, 16, e);
    EXPECT_LT(r.c.point_bytes * 10, brute.c.point_bytes) << knn::EngineName(e);
    EXPECT_LT(r.c.leaf_visits * 10, brute.c.leaf_visits) << knn::EngineName(e);
  }
  // One thread and many give the same answers and counters.
  const KnnResult a = RunKnn(*idx, q, 16, Engine::kPsb, knn::Device::kCpu, 1), b = RunKnn(*idx, q, 16, Engine::kPsb, knn::Device::kCpu, 3);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.c.inner_visits, b.c.inner_visits);
  EXPECT_EQ(a.c.point_bytes, b.c.point_bytes);
}

TEST(Knn, ReopenReplaceDropAndSpace) {
  TempPath path("knn");
  const Points p = MakePoints(3000, 8, 10, 200, 13), p2 = MakePoints(2000, 8, 10, 200, 14);
  const Points q = MakePoints(10, 8, 10, 200, 13, 0, 15);
  BuildOptions bo;
  bo.degree = 16;
  KnnResult before;
  uint64_t bytes_one = 0;
  {
    auto pool = NewKnnPool(path);
    const uint64_t base = pool->allocator().Stats().bytes_allocated;
    ASSERT_TRUE(KnnIndex::Build(*pool, "a", p.x.data(), nullptr, p.n, p.dim, bo).ok());
    bytes_one = pool->allocator().Stats().bytes_allocated - base;
    std::unique_ptr<KnnIndex> idx;
    ASSERT_TRUE(KnnIndex::Open(*pool, "a", &idx).ok());
    before = RunKnn(*idx, q, 5, Engine::kPsb);
    ASSERT_TRUE(pool->Close().ok());
  }
  {
    auto pool = NewKnnPool(path);
    std::unique_ptr<KnnIndex> idx;
    ASSERT_TRUE(KnnIndex::Open(*pool, "a", &idx).ok());
    EXPECT_EQ(idx->info().points, p.n);
    EXPECT_EQ(idx->info().dim, p.dim);
    EXPECT_EQ(RunKnn(*idx, q, 5, Engine::kPsb).ids, before.ids);
    // Busy while a handle is open: a second handle, a rebuild, a drop.
    std::unique_ptr<KnnIndex> second;
    EXPECT_EQ(KnnIndex::Open(*pool, "a", &second).code(), Code::kBusy);
    EXPECT_EQ(KnnIndex::Build(*pool, "a", p2.x.data(), nullptr, p2.n, p2.dim, bo).code(), Code::kBusy);
    EXPECT_EQ(KnnIndex::Drop(*pool, "a").code(), Code::kBusy);
    idx.reset();
    // Replace: the old tree's blocks are freed (the space stays that of one tree).
    const uint64_t before_replace = pool->allocator().Stats().bytes_allocated;
    ASSERT_TRUE(KnnIndex::Build(*pool, "a", p2.x.data(), nullptr, p2.n, p2.dim, bo).ok());
    EXPECT_LT(pool->allocator().Stats().bytes_allocated, before_replace);
    ASSERT_TRUE(KnnIndex::Open(*pool, "a", &idx).ok());
    EXPECT_EQ(idx->info().points, p2.n);
    for (uint64_t i = 0; i < q.n; ++i) {
      std::vector<uint64_t> ids(5);
      std::vector<float> d(5);
      ASSERT_TRUE(idx->Search(q.row(i), 1, 5, {}, ids.data(), d.data()).ok());
      ExpectExact(p2, {}, q.row(i), 5, ids.data(), d.data(), "replaced");
    }
    idx.reset();
    const uint64_t with_tree = pool->allocator().Stats().bytes_allocated;
    ASSERT_TRUE(KnnIndex::Drop(*pool, "a").ok());
    EXPECT_LT(pool->allocator().Stats().bytes_allocated + bytes_one / 2, with_tree);
    EXPECT_EQ(KnnIndex::Open(*pool, "a", &idx).code(), Code::kNotFound);
    EXPECT_EQ(KnnIndex::Drop(*pool, "a").code(), Code::kNotFound);
  }
}

TEST(Knn, BadInputIsRefusedAndTheTreeStays) {
  TempPath path("knn");
  auto pool = NewKnnPool(path);
  const Points p = MakePoints(500, 4, 5, 100, 16);
  const Points q = MakePoints(5, 4, 5, 100, 16, 0, 17);
  BuildOptions bo;
  bo.degree = 8;
  ASSERT_TRUE(KnnIndex::Build(*pool, "t", p.x.data(), nullptr, p.n, p.dim, bo).ok());
  std::unique_ptr<KnnIndex> idx;
  ASSERT_TRUE(KnnIndex::Open(*pool, "t", &idx).ok());
  const KnnResult ref = RunKnn(*idx, q, 7, Engine::kPsb);
  idx.reset();
  const uint64_t bytes = pool->allocator().Stats().bytes_allocated;

  Points bad = p;
  bad.x[123 * 4 + 2] = std::numeric_limits<float>::quiet_NaN();
  Status s = KnnIndex::Build(*pool, "t", bad.x.data(), nullptr, bad.n, bad.dim, bo);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("point 123"), std::string::npos) << s.message();
  bad.x[123 * 4 + 2] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(KnnIndex::Build(*pool, "t", bad.x.data(), nullptr, bad.n, bad.dim, bo).code(), Code::kInvalidArgument);
  EXPECT_EQ(KnnIndex::Build(*pool, "t", p.x.data(), nullptr, 0, p.dim, bo).code(), Code::kInvalidArgument);
  EXPECT_EQ(KnnIndex::Build(*pool, "t", p.x.data(), nullptr, p.n, 0, bo).code(), Code::kInvalidArgument);
  EXPECT_EQ(KnnIndex::Build(*pool, "t", p.x.data(), nullptr, 1, knn::kMaxDim + 1, bo).code(), Code::kInvalidArgument);
  BuildOptions deg = bo;
  deg.degree = 2;
  EXPECT_EQ(KnnIndex::Build(*pool, "t", p.x.data(), nullptr, p.n, p.dim, deg).code(), Code::kInvalidArgument);
  deg.degree = knn::kMaxDegree + 1;
  EXPECT_EQ(KnnIndex::Build(*pool, "t", p.x.data(), nullptr, p.n, p.dim, deg).code(), Code::kInvalidArgument);
  EXPECT_EQ(KnnIndex::Build(*pool, "", p.x.data(), nullptr, p.n, p.dim, bo).code(), Code::kInvalidArgument);
  EXPECT_EQ(pool->allocator().Stats().bytes_allocated, bytes);

  ASSERT_TRUE(KnnIndex::Open(*pool, "t", &idx).ok());
  EXPECT_EQ(RunKnn(*idx, q, 7, Engine::kPsb).ids, ref.ids);
  std::vector<uint64_t> ids(600);
  std::vector<float> d(600);
  EXPECT_EQ(idx->Search(q.x.data(), 1, 0, {}, ids.data(), d.data()).code(), Code::kInvalidArgument);
  EXPECT_EQ(idx->Search(q.x.data(), 1, 501, {}, ids.data(), d.data()).code(), Code::kInvalidArgument);
  Points badq = q;
  badq.x[3] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(idx->Search(badq.x.data(), 1, 3, {}, ids.data(), d.data()).code(), Code::kInvalidArgument);
  // The name of another kind's root is refused, not overwritten.
  std::unique_ptr<Index> other;
  ASSERT_TRUE(OpenOrCreateIndex(*pool, "kv", "woart", {}, &other).ok());
  other.reset();
  EXPECT_EQ(KnnIndex::Build(*pool, "kv", p.x.data(), nullptr, p.n, p.dim, bo).code(), Code::kInvalidArgument);
  EXPECT_EQ(KnnIndex::Open(*pool, "kv", &idx).code(), Code::kInvalidArgument);
}

TEST(Knn, GpuSearchWithoutAGpuIsNotSupported) {
  std::string why;
  if (knn::GpuAvailable(&why)) GTEST_SKIP() << "a GPU is present (" << why << "): tests/knn/knn_gpu_test.cc covers it";
  TempPath path("knn");
  auto pool = NewKnnPool(path);
  const Points p = MakePoints(100, 3, 0, 0, 18);
  ASSERT_TRUE(KnnIndex::Build(*pool, "t", p.x.data(), nullptr, p.n, p.dim, {}).ok());
  std::unique_ptr<KnnIndex> idx;
  ASSERT_TRUE(KnnIndex::Open(*pool, "t", &idx).ok());
  std::vector<uint64_t> ids(4);
  std::vector<float> d(4);
  SearchOptions so;
  so.device = knn::Device::kGpu;
  Status s = idx->Search(p.x.data(), 1, 4, so, ids.data(), d.data());
  EXPECT_EQ(s.code(), Code::kNotSupported);
  EXPECT_FALSE(why.empty());
}

TEST(Knn, PoolFullLeavesTheOldTree) {
  TempPath path("knn");
  auto pool = NewKnnPool(path, 24ull << 20);
  const Points small = MakePoints(1000, 8, 5, 100, 19);
  ASSERT_TRUE(KnnIndex::Build(*pool, "t", small.x.data(), nullptr, small.n, small.dim, {}).ok());
  const Points big = MakePoints(200000, 32, 5, 100, 20);  // 25 MB of points
  Status s = KnnIndex::Build(*pool, "t", big.x.data(), nullptr, big.n, big.dim, {});
  EXPECT_EQ(s.code(), Code::kPoolFull) << s.ToString();
  std::unique_ptr<KnnIndex> idx;
  ASSERT_TRUE(KnnIndex::Open(*pool, "t", &idx).ok());
  EXPECT_EQ(idx->info().points, small.n);
  std::string report;
  EXPECT_TRUE(idx->Check(&report).ok()) << report;
}

TEST(Knn, CorruptionIsDetected) {
  TempPath path("knn");
  const Points p = MakePoints(2000, 6, 5, 100, 21);
  {
    auto pool = NewKnnPool(path);
    ASSERT_TRUE(KnnIndex::Build(*pool, "t", p.x.data(), nullptr, p.n, p.dim, {}).ok());
    ASSERT_TRUE(pool->Close().ok());
  }
  // A point's coordinate changed: Check() sees the checksum (and the sphere) fail.
  {
    auto pool = NewKnnPool(path);
    std::unique_ptr<KnnIndex> idx;
    ASSERT_TRUE(KnnIndex::Open(*pool, "t", &idx).ok());
    RootInfo ri;
    ASSERT_TRUE(pool->FindRoot("t", &ri).ok());
    const uint64_t tree = pool->at<knn::RootBlock>(ri.off)->tree;
    const uint64_t pts = pool->at<knn::TreeHeader>(tree)->off_leaf_points;
    const float orig = pool->at<float>(pts)[5];
    pool->at<float>(pts)[5] = orig + 1e6f;
    std::string report;
    EXPECT_EQ(idx->Check(&report).code(), Code::kCorruption);
    EXPECT_NE(report.find("leaf points checksum"), std::string::npos) << report;
    pool->at<float>(pts)[5] = orig;
    report.clear();
    EXPECT_TRUE(idx->Check(&report).ok()) << report;
    // A header byte changed: Open refuses it.
    idx.reset();
    pool->at<char>(tree)[20] ^= 1;
    EXPECT_EQ(KnnIndex::Open(*pool, "t", &idx).code(), Code::kCorruption);
    pool->at<char>(tree)[20] ^= 1;
    EXPECT_TRUE(KnnIndex::Open(*pool, "t", &idx).ok());
  }
}

}  // namespace
}  // namespace wort::test

namespace wort::test {
namespace {

// Many threads searching one handle at once (wort/knn.h: Search is safe from many threads), each
// search itself on two threads: every answer equals the single-threaded one. Run under
// ThreadSanitizer by scripts/tsan.sh.
TEST(KnnConcurrent, SearchersShareOneHandle) {
  TempPath path("knn");
  auto pool = NewKnnPool(path);
  const Points p = MakePoints(4000, 8, 10, 100, 31);
  const Points q = MakePoints(24, 8, 10, 100, 31, 0, 32);
  knn::BuildOptions bo;
  bo.degree = 16;
  ASSERT_TRUE(KnnIndex::Build(*pool, "t", p.x.data(), nullptr, p.n, p.dim, bo).ok());
  std::unique_ptr<KnnIndex> idx;
  ASSERT_TRUE(KnnIndex::Open(*pool, "t", &idx).ok());
  std::vector<KnnResult> want;
  for (Engine e : kEngines) want.push_back(RunKnn(*idx, q, 8, e, knn::Device::kCpu, 1));
  std::atomic<int> wrong{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int round = 0; round < 6; ++round) {
        const size_t e = static_cast<size_t>(t + round) % 3;
        const KnnResult r = RunKnn(*idx, q, 8, kEngines[e], knn::Device::kCpu, 2);
        if (r.ids != want[e].ids || r.c.inner_visits != want[e].c.inner_visits ||
            r.c.point_bytes != want[e].c.point_bytes)
          ++wrong;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace wort::test
