// The kNN GPU engines (src/knn/gpu.cu, doc/knn-gpu.md) against the CPU engines: every engine on
// the GPU returns the same ids, the same float bits and the same counters as the same engine on
// the CPU, on clustered 64-d data (degree 32 and 128), uniform 2-d data with k larger than a
// leaf, duplicate-heavy data with ties, 960-d data, k = 1, k = n, 500 queries in one launch, and
// the handle's cached upload reused across searches and engines.
//
// Where wort was built without CUDA or no GPU is present, every test here is skipped and says
// so: the GPU engines were not run (tests/knn/knn_test.cc covers the CPU engines everywhere).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "knn/knn_util.h"
#include "wort/knn.h"
#include "wort/pool.h"

namespace wort::test {
namespace {

using knn::BuildMethod;
using knn::BuildOptions;
using knn::Counters;
using knn::Device;
using knn::Engine;
using knn::KnnIndex;
using knn::SearchOptions;

constexpr auto& kEngines = kKnnEngines;

#define SKIP_WITHOUT_GPU()                                                         \
  do {                                                                             \
    std::string why;                                                               \
    if (!knn::GpuAvailable(&why))                                                  \
      GTEST_SKIP() << "no GPU: " << why << "; the GPU engines were not run";       \
  } while (0)

using Result = KnnResult;

Result RunOn(const KnnIndex& idx, const Points& q, uint32_t k, Engine e, Device dev) { return RunKnn(idx, q, k, e, dev); }

// The GPU's answer is the CPU's, bit for bit, counters included.
void ExpectSame(const Result& cpu, const Result& gpu, const std::string& what) {
  EXPECT_EQ(gpu.ids, cpu.ids) << what;
  ASSERT_EQ(gpu.d.size(), cpu.d.size()) << what;
  EXPECT_EQ(0, std::memcmp(gpu.d.data(), cpu.d.data(), cpu.d.size() * sizeof(float))) << what << ": distance bits differ";
  EXPECT_EQ(gpu.c.queries, cpu.c.queries) << what;
  EXPECT_EQ(gpu.c.inner_visits, cpu.c.inner_visits) << what;
  EXPECT_EQ(gpu.c.leaf_visits, cpu.c.leaf_visits) << what;
  EXPECT_EQ(gpu.c.sphere_bytes, cpu.c.sphere_bytes) << what;
  EXPECT_EQ(gpu.c.point_bytes, cpu.c.point_bytes) << what;
}

// Builds, then runs every engine on the CPU and the GPU and compares; the GPU's answer is also
// checked against the double-precision brute force.
void ExpectGpuEqualsCpu(const Points& p, const std::vector<uint64_t>& ids, const Points& q, uint32_t k,
                        const BuildOptions& bo, const std::string& what) {
  TempPath path("knngpu");
  auto pool = NewKnnPool(path);
  ASSERT_TRUE(KnnIndex::Build(*pool, "t", p.x.data(), ids.empty() ? nullptr : ids.data(), p.n, p.dim, bo).ok());
  std::unique_ptr<KnnIndex> idx;
  ASSERT_TRUE(KnnIndex::Open(*pool, "t", &idx).ok());
  for (Engine e : kEngines) {
    const std::string w = what + " engine " + knn::EngineName(e);
    const Result cpu = RunOn(*idx, q, k, e, Device::kCpu);
    const Result gpu = RunOn(*idx, q, k, e, Device::kGpu);
    ExpectSame(cpu, gpu, w);
    for (uint64_t i = 0; i < q.n && i < 50; ++i)
      ExpectExact(p, ids, q.row(i), k, &gpu.ids[i * k], &gpu.d[i * k], w + " query " + std::to_string(i));
  }
}

TEST(KnnGpu, Clustered64dDegree32And128) {
  SKIP_WITHOUT_GPU();
  const Points p = MakePoints(20000, 64, 20, 160, 1);
  const Points q = MakePoints(40, 64, 20, 160, 1, 0, 99);
  for (uint32_t degree : {32u, 128u}) {
    for (BuildMethod m : {BuildMethod::kKMeans, BuildMethod::kHilbert}) {
      BuildOptions bo;
      bo.method = m;
      bo.degree = degree;
      const std::string w = "clustered 64d degree " + std::to_string(degree) + " " + knn::BuildMethodName(m);
      ExpectGpuEqualsCpu(p, {}, q, 32, bo, w);
      ExpectGpuEqualsCpu(p, {}, q, 1, bo, w + " k=1");
    }
  }
}

TEST(KnnGpu, Uniform2dKLargerThanLeaf) {
  SKIP_WITHOUT_GPU();
  const Points p = MakePoints(5000, 2, 0, 0, 2);
  const Points q = MakePoints(50, 2, 0, 0, 3);
  BuildOptions bo;
  bo.degree = 8;
  ExpectGpuEqualsCpu(p, {}, q, 20, bo, "uniform 2d k=20 > leaf 8");
  ExpectGpuEqualsCpu(p, {}, q, 100, bo, "uniform 2d k=100 > leaf 8");
  bo.method = BuildMethod::kHilbert;
  ExpectGpuEqualsCpu(p, {}, q, 1, bo, "uniform 2d k=1");
}

TEST(KnnGpu, DuplicateHeavyTies) {
  SKIP_WITHOUT_GPU();
  const Points p = MakePoints(3000, 4, 5, 100, 4, 37);
  const Points q = MakePoints(30, 4, 5, 100, 4, 0, 5);
  std::vector<uint64_t> ids(p.n);
  for (uint64_t i = 0; i < p.n; ++i) ids[i] = (i * 0x9e3779b97f4a7c15ull) | (1ull << 63);
  for (BuildMethod m : {BuildMethod::kHilbert, BuildMethod::kKMeans}) {
    BuildOptions bo;
    bo.method = m;
    bo.degree = 16;
    ExpectGpuEqualsCpu(p, ids, q, 50, bo, std::string("duplicates ") + knn::BuildMethodName(m));
    // Queries on the data points themselves: distance 0, ties broken by id.
    const Points qq = MakePoints(30, 4, 5, 100, 4, 37);
    ExpectGpuEqualsCpu(p, ids, qq, 7, bo, std::string("duplicates on points ") + knn::BuildMethodName(m));
    // Repeated ids too (equal (distance, id) pairs).
    std::vector<uint64_t> rep(p.n);
    for (uint64_t i = 0; i < p.n; ++i) rep[i] = i % 50;
    ExpectGpuEqualsCpu(p, rep, qq, 40, bo, std::string("repeated ids ") + knn::BuildMethodName(m));
  }
}

TEST(KnnGpu, Dim960) {
  SKIP_WITHOUT_GPU();
  const Points p = MakePoints(700, 960, 7, 40, 6);
  const Points q = MakePoints(8, 960, 7, 40, 6, 0, 7);
  BuildOptions bo;
  bo.degree = 16;
  ExpectGpuEqualsCpu(p, {}, q, 10, bo, "960d kmeans");
  bo.method = BuildMethod::kHilbert;
  ExpectGpuEqualsCpu(p, {}, q, 1, bo, "960d hilbert k=1");
}

TEST(KnnGpu, KEqualsNAndOnePointAndLargeK) {
  SKIP_WITHOUT_GPU();
  BuildOptions bo;
  bo.degree = 4;
  const Points q = MakePoints(3, 3, 0, 0, 9);
  ExpectGpuEqualsCpu(MakePoints(1, 3, 0, 0, 8), {}, q, 1, bo, "one point");
  ExpectGpuEqualsCpu(MakePoints(100, 3, 0, 0, 10), {}, q, 100, bo, "k = n");
  // k = 1024 (the k best in shared memory) and k = 20000 (in global memory, the output arrays).
  bo.degree = 64;
  const Points p = MakePoints(30000, 8, 10, 300, 30);
  const Points q2 = MakePoints(4, 8, 10, 300, 30, 0, 31);
  ExpectGpuEqualsCpu(p, {}, q2, 1024, bo, "k = 1024");
  ExpectGpuEqualsCpu(p, {}, q2, 20000, bo, "k = 20000");
}

TEST(KnnGpu, ManyQueriesOneLaunchAndCachedUpload) {
  SKIP_WITHOUT_GPU();
  const Points p = MakePoints(30000, 16, 50, 80, 11);
  const Points q = MakePoints(500, 16, 50, 80, 11, 0, 12);
  TempPath path("knngpu");
  auto pool = NewKnnPool(path);
  BuildOptions bo;
  bo.degree = 32;
  ASSERT_TRUE(KnnIndex::Build(*pool, "t", p.x.data(), nullptr, p.n, p.dim, bo).ok());
  std::unique_ptr<KnnIndex> idx;
  ASSERT_TRUE(KnnIndex::Open(*pool, "t", &idx).ok());
  for (int round = 0; round < 3; ++round) {  // the first search uploads, the others reuse it
    for (Engine e : kEngines) {
      const std::string w = "500 queries round " + std::to_string(round) + " " + knn::EngineName(e);
      ExpectSame(RunOn(*idx, q, 16, e, Device::kCpu), RunOn(*idx, q, 16, e, Device::kGpu), w);
    }
  }
  // One query at a time gives the batch's answers.
  const Result batch = RunOn(*idx, q, 16, Engine::kPsb, Device::kGpu);
  for (uint64_t i = 0; i < 20; ++i) {
    std::vector<uint64_t> ids(16);
    std::vector<float> d(16);
    SearchOptions so;
    so.device = Device::kGpu;
    ASSERT_TRUE(idx->Search(q.row(i), 1, 16, so, ids.data(), d.data()).ok());
    EXPECT_TRUE(std::equal(ids.begin(), ids.end(), batch.ids.begin() + i * 16)) << "query " << i;
  }
  // A fresh handle uploads again and answers the same.
  idx.reset();
  ASSERT_TRUE(KnnIndex::Open(*pool, "t", &idx).ok());
  EXPECT_EQ(RunOn(*idx, q, 16, Engine::kPsb, Device::kGpu).ids, batch.ids);
}

TEST(KnnGpu, AvailableSaysWhich) {
  std::string why;
  const bool ok = knn::GpuAvailable(&why);
  EXPECT_FALSE(why.empty());
  if (!ok) GTEST_SKIP() << "no GPU: " << why << "; the GPU engines were not run";
  std::cout << "GPU: " << why << "\n";
}

// ---- The chapter's measurement (a mode of this binary; scripts/knn_gpu_device.sh runs it) ------
// Disabled by default: run with --gtest_also_run_disabled_tests --gtest_filter=KnnGpuBench.*.
// The workload of the thesis's chapter V: n points (WORT_KNN_BENCH_N, 1000000) in 64 dimensions,
// 100 normal clusters (std 160, means uniform in [0, 10000)), 240 queries drawn from the same
// clusters, k = 32, degree 128, k-means build. For each engine: the CPU batch (all threads),
// the GPU batch of 240 queries in one launch (median of 5), and 240 single-query launches
// (per-query latency). Writes WORT_KNN_BENCH_OUT/knn_gpu_bench.json, and the points, queries and
// the PSB answer as raw files into WORT_KNN_BENCH_DATA (scripts/knn_torch_bench.py reads them).
uint64_t EnvU64(const char* name, uint64_t def) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : def;
}
std::string EnvStr(const char* name, const std::string& def) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : def;
}
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min<size_t>(v.size() - 1, static_cast<size_t>(q * v.size()))];
}
double Ms(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
void WriteRaw(const std::string& path, const void* data, size_t bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  EXPECT_EQ(std::fwrite(data, 1, bytes, f), bytes) << path;
  std::fclose(f);
}

TEST(KnnGpuBench, DISABLED_Chapter) {
  SKIP_WITHOUT_GPU();
  std::string gpu_name;
  knn::GpuAvailable(&gpu_name);
  const uint64_t n = EnvU64("WORT_KNN_BENCH_N", 1000000), nq = EnvU64("WORT_KNN_BENCH_Q", 240);
  const uint32_t dim = 64, k = static_cast<uint32_t>(EnvU64("WORT_KNN_BENCH_K", 32));
  const std::string out = EnvStr("WORT_KNN_BENCH_OUT", ".");
  const std::string data = EnvStr("WORT_KNN_BENCH_DATA", "");
  const std::string pool_path = EnvStr("WORT_KNN_BENCH_POOL", "/tmp/wort-knn-bench-" + std::to_string(::getpid()) + ".pool");
  using Clock = std::chrono::steady_clock;

  auto t0 = Clock::now();
  const Points p = MakePoints(n, dim, 100, 160, 42);
  const Points q = MakePoints(nq, dim, 100, 160, 42, 0, 43);
  const double gen_ms = Ms(t0, Clock::now());
  std::filesystem::remove(pool_path);
  PoolOptions po;
  po.initial_size = 64ull << 20;
  po.max_size = 8ull << 30;
  po.background_recovery = false;
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::OpenOrCreate(pool_path, po, &pool).ok()) << pool_path;
  BuildOptions bo;
  bo.method = BuildMethod::kKMeans;
  bo.degree = 128;
  knn::BuildStats bs;
  t0 = Clock::now();
  Status s = KnnIndex::Build(*pool, "bench", p.x.data(), nullptr, p.n, p.dim, bo, &bs);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const double build_ms = Ms(t0, Clock::now());
  std::unique_ptr<KnnIndex> idx;
  ASSERT_TRUE(KnnIndex::Open(*pool, "bench", &idx).ok());
  const knn::TreeInfo& info = idx->info();

  std::string json = "{\n";
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "  \"gpu\": \"%s\",\n  \"n\": %llu,\n  \"dim\": %u,\n  \"queries\": %llu,\n  \"k\": %u,\n"
                "  \"degree\": %u,\n  \"clusters\": 100,\n  \"std\": 160,\n  \"build\": \"kmeans\",\n"
                "  \"leaves\": %llu,\n  \"inner_nodes\": %llu,\n  \"height\": %u,\n  \"generate_ms\": %.1f,\n"
                "  \"build_ms\": %.1f,\n  \"engines\": [\n",
                gpu_name.c_str(), (unsigned long long)n, dim, (unsigned long long)nq, k, info.degree,
                (unsigned long long)info.leaves, (unsigned long long)info.inner_nodes, info.height, gen_ms, build_ms);
  json += buf;
  bool first_engine = true;
  for (Engine e : kEngines) {
    SearchOptions cpu_opts, gpu_opts;
    cpu_opts.engine = gpu_opts.engine = e;
    cpu_opts.threads = 0;
    gpu_opts.device = Device::kGpu;
    Result cpu, gpu;
    cpu.ids.resize(nq * k);
    cpu.d.resize(nq * k);
    gpu.ids.resize(nq * k);
    gpu.d.resize(nq * k);
    t0 = Clock::now();
    ASSERT_TRUE(idx->Search(q.x.data(), nq, k, cpu_opts, cpu.ids.data(), cpu.d.data(), &cpu.c).ok());
    const double cpu_batch_ms = Ms(t0, Clock::now());
    // CPU, one thread, one query at a time (not for brute force: seconds of scanning).
    double cpu_single_ms = -1;
    if (e != Engine::kBruteForce) {
      SearchOptions one = cpu_opts;
      one.threads = 1;
      std::vector<uint64_t> ids(k);
      std::vector<float> d(k);
      t0 = Clock::now();
      for (uint64_t i = 0; i < nq; ++i) ASSERT_TRUE(idx->Search(q.row(i), 1, k, one, ids.data(), d.data()).ok());
      cpu_single_ms = Ms(t0, Clock::now()) / nq;
    }
    // GPU: the first search (the first engine's uploads the tree), then the batch 5 times.
    t0 = Clock::now();
    s = idx->Search(q.x.data(), nq, k, gpu_opts, gpu.ids.data(), gpu.d.data(), &gpu.c);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const double gpu_first_ms = Ms(t0, Clock::now());
    ExpectSame(cpu, gpu, std::string("bench ") + knn::EngineName(e));
    const bool same = gpu.ids == cpu.ids && std::memcmp(gpu.d.data(), cpu.d.data(), gpu.d.size() * 4) == 0 &&
                      gpu.c.inner_visits == cpu.c.inner_visits && gpu.c.leaf_visits == cpu.c.leaf_visits &&
                      gpu.c.point_bytes == cpu.c.point_bytes && gpu.c.sphere_bytes == cpu.c.sphere_bytes;
    std::vector<double> batch;
    for (int r = 0; r < 5; ++r) {
      t0 = Clock::now();
      ASSERT_TRUE(idx->Search(q.x.data(), nq, k, gpu_opts, gpu.ids.data(), gpu.d.data()).ok());
      batch.push_back(Ms(t0, Clock::now()));
    }
    std::vector<double> single;
    std::vector<uint64_t> ids(k);
    std::vector<float> d(k);
    for (uint64_t i = 0; i < nq; ++i) {
      t0 = Clock::now();
      ASSERT_TRUE(idx->Search(q.row(i), 1, k, gpu_opts, ids.data(), d.data()).ok());
      single.push_back(Ms(t0, Clock::now()));
      EXPECT_TRUE(std::equal(ids.begin(), ids.end(), cpu.ids.begin() + i * k)) << knn::EngineName(e) << " query " << i;
    }
    double mean = 0;
    for (double x : single) mean += x;
    mean /= single.size();
    const double bm = Median(batch);
    std::snprintf(buf, sizeof buf,
                  "%s    {\"engine\": \"%s\", \"gpu_equals_cpu\": %s, \"cpu_batch_ms\": %.3f, "
                  "\"cpu_single_thread_ms_per_query\": %.4f, \"gpu_first_search_ms\": %.3f, \"gpu_batch_ms\": %.3f, "
                  "\"gpu_batch_ms_per_query\": %.4f, \"gpu_batch_qps\": %.1f, \"gpu_single_ms_median\": %.4f, "
                  "\"gpu_single_ms_p90\": %.4f, \"gpu_single_ms_mean\": %.4f, \"gpu_single_ms_min\": %.4f, "
                  "\"nodes_per_query\": %.2f, \"leaves_per_query\": %.2f, \"inner_per_query\": %.2f, "
                  "\"bytes_per_query\": %.0f}",
                  first_engine ? "" : ",\n", knn::EngineName(e), same ? "true" : "false", cpu_batch_ms, cpu_single_ms,
                  gpu_first_ms, bm, bm / nq, nq / (bm / 1000.0), Median(single), Quantile(single, 0.9), mean,
                  Quantile(single, 0.0), double(cpu.c.nodes_visited()) / nq, double(cpu.c.leaf_visits) / nq,
                  double(cpu.c.inner_visits) / nq, double(cpu.c.bytes()) / nq);
    json += buf;
    first_engine = false;
    if (e == Engine::kPsb && !data.empty()) {
      WriteRaw(data + "/points.f32", p.x.data(), p.x.size() * sizeof(float));
      WriteRaw(data + "/queries.f32", q.x.data(), q.x.size() * sizeof(float));
      WriteRaw(data + "/wort_ids.u64", cpu.ids.data(), cpu.ids.size() * sizeof(uint64_t));
    }
  }
  json += "\n  ]\n}\n";
  std::printf("%s", json.c_str());
  idx.reset();
  ASSERT_TRUE(pool->Close().ok());
  pool.reset();
  std::filesystem::remove(pool_path);
  std::FILE* f = std::fopen((out + "/knn_gpu_bench.json").c_str(), "w");
  ASSERT_NE(f, nullptr) << out;
  std::fputs(json.c_str(), f);
  std::fclose(f);
}

}  // namespace
}  // namespace wort::test
