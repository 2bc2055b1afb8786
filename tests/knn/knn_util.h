// Helpers of the kNN tests: seeded data sets and the double-precision brute-force reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "wort/knn.h"
#include "wort/pool.h"

namespace wort::test {

struct Points {
  uint64_t n = 0;
  uint32_t dim = 0;
  std::vector<float> x;  // n x dim, row-major
  const float* row(uint64_t i) const { return &x[i * dim]; }
};

// `clusters` normal clusters (means uniform in [0, 10000), standard deviation `sd`); clusters = 0:
// uniform in [0, 10000). `distinct` > 0: every point is one of that many (duplicate-heavy).
// `draw_seed` != 0: the same means (from `seed`), other draws (queries that follow the data).
inline Points MakePoints(uint64_t n, uint32_t dim, uint32_t clusters, double sd, uint64_t seed, uint64_t distinct = 0,
                         uint64_t draw_seed = 0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(0, 10000);
  std::normal_distribution<double> nor(0, sd);
  std::vector<double> means(uint64_t{std::max(clusters, 1u)} * dim);
  for (auto& m : means) m = uni(rng);
  if (draw_seed) rng.seed(draw_seed);
  Points p;
  p.n = n;
  p.dim = dim;
  p.x.resize(n * dim);
  const uint64_t base = distinct ? distinct : n;
  for (uint64_t i = 0; i < base && i < n; ++i) {
    const uint32_t c = clusters ? static_cast<uint32_t>(i % clusters) : 0;
    for (uint32_t d = 0; d < dim; ++d)
      p.x[i * dim + d] = static_cast<float>(clusters ? means[uint64_t{c} * dim + d] + nor(rng) : uni(rng));
  }
  for (uint64_t i = base; i < n; ++i) {
    const uint64_t src = rng() % base;
    for (uint32_t d = 0; d < dim; ++d) p.x[i * dim + d] = p.x[src * dim + d];
  }
  return p;
}

// The exact answer in double precision: (squared distance, id) of the k nearest, ascending.
inline std::vector<std::pair<double, uint64_t>> ExactKnn(const Points& p, const std::vector<uint64_t>& ids,
                                                          const float* q, uint32_t k) {
  std::vector<std::pair<double, uint64_t>> all(p.n);
  for (uint64_t i = 0; i < p.n; ++i) {
    double s = 0;
    for (uint32_t d = 0; d < p.dim; ++d) {
      const double t = double(p.x[i * p.dim + d]) - q[d];
      s += t * t;
    }
    all[i] = {s, ids.empty() ? i : ids[i]};
  }
  std::partial_sort(all.begin(), all.begin() + k, all.end());
  all.resize(k);
  return all;
}

// The search result of query `qi` against the exact answer: every returned distance is the
// returned id's exact distance (float rounding allowed), the distances ascend, and the returned set is the exact set except for points tied (within the
// rounding of float32) with the k-th distance.
inline void ExpectExact(const Points& p, const std::vector<uint64_t>& ids, const float* q, uint32_t k,
                        const uint64_t* got_ids, const float* got_d, const std::string& what) {
  const auto want = ExactKnn(p, ids, q, k);
  const double kth = want.back().first;
  const double tol = 1e-5 * (kth + 1e-3) + 1e-6;
  std::vector<uint64_t> want_ids, got;
  for (uint32_t i = 0; i < k; ++i) {
    if (i > 0) {
      EXPECT_LE(got_d[i - 1], got_d[i]) << what << " rank " << i;
    }
    EXPECT_NEAR(got_d[i], want[i].first, 1e-5 * (want[i].first + 1e-3) + 1e-6) << what << " rank " << i;
    if (want[i].first < kth - tol) want_ids.push_back(want[i].second);
    got.push_back(got_ids[i]);
  }
  std::sort(got.begin(), got.end());
  for (uint64_t id : want_ids)
    EXPECT_TRUE(std::binary_search(got.begin(), got.end(), id)) << what << ": id " << id << " missing";
}

// The three engines, brute force first.
inline constexpr knn::Engine kKnnEngines[] = {knn::Engine::kBruteForce, knn::Engine::kBranchAndBound, knn::Engine::kPsb};

// A pool for a test's trees (1 GiB at most, recovery in the foreground).
inline std::unique_ptr<Pool> NewKnnPool(const TempPath& path, uint64_t max = 1ull << 30) {
  PoolOptions po;
  po.initial_size = 8ull << 20;
  po.max_size = max;
  po.background_recovery = false;
  std::unique_ptr<Pool> pool;
  Status s = Pool::OpenOrCreate(path, po, &pool);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return pool;
}

// One search's answers and counters.
struct KnnResult {
  std::vector<uint64_t> ids;
  std::vector<float> d;
  knn::Counters c;
};

inline KnnResult RunKnn(const knn::KnnIndex& idx, const Points& q, uint32_t k, knn::Engine e,
                        knn::Device dev = knn::Device::kCpu, unsigned threads = 2) {
  KnnResult r;
  r.ids.assign(q.n * k, 0);
  r.d.assign(q.n * k, 0.0f);
  knn::SearchOptions so;
  so.engine = e;
  so.device = dev;
  so.threads = threads;
  Status s = idx.Search(q.x.data(), q.n, k, so, r.ids.data(), r.d.data(), &r.c);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

}  // namespace wort::test
