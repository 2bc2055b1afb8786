// Tests shared by the hybrid B-trees with DRAM inner nodes (fptree, nvtree): differential against
// std::map with Close + reopen between phases (the DRAM part rebuilt), Check after each phase,
// a crash image (copy of the open pool file) reopened and compared, PoolFull on a tiny pool, and
// the reachability contract (allocated blocks == visit's report). Instantiate with the kind name.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <set>

#include "common/test_util.h"
#include "volatile/diff_util.h"
#include "wort/alloc.h"
#include "wort/pool.h"

namespace wort::test {

inline PoolOptions HybridPool(uint64_t max = 256ull << 20) {
  PoolOptions o;
  o.initial_size = 4ull << 20;
  o.max_size = max;
  o.background_recovery = false;
  return o;
}

// Every allocated block is reported by visit and vice versa (after recovery / a clean open).
inline void ExpectReachability(Pool& pool, const std::string& kind) {
  std::set<uint64_t> alloc, marked;
  pool.allocator().ForEachAllocated([&](uint64_t off, size_t) { alloc.insert(off); });
  for (const RootInfo& r : pool.Roots())
    FindIndexKindById(r.type)->visit(pool, r.off, [&](uint64_t o) { marked.insert(o); });
  EXPECT_EQ(alloc, marked) << kind;
}

class HybridKinds : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridKinds, RandomAgainstMapWithReopen) {
  for (KeyGen g : {KeyGen::kDense, KeyGen::kSparse, KeyGen::kBytes}) {
    TempPath path("hyb");
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(path, HybridPool(), &pool).ok());
    IndexOptions o;
    o.key_type = g == KeyGen::kBytes ? KeyType::kBytes : KeyType::kU64;
    std::unique_ptr<Index> idx;
    ASSERT_TRUE(CreateIndex(*pool, "t", GetParam(), o, &idx).ok());
    std::map<std::string, uint64_t> model;
    std::mt19937_64 rng(7 + static_cast<int>(g));
    for (int phase = 0; phase < 4; ++phase) {
      RandomOps(idx.get(), &model, g, g == KeyGen::kBytes ? 256 : 4000, 5000, rng);
      ExpectSame(*idx, model);
      idx.reset();
      ASSERT_TRUE(pool->Close().ok());
      pool.reset();
      ASSERT_TRUE(Pool::Open(path, HybridPool(), &pool).ok());
      ASSERT_TRUE(OpenIndex(*pool, "t", &idx).ok());
      ExpectSame(*idx, model);
      ExpectReachability(*pool, GetParam());
    }
    for (const auto& kv : model) ASSERT_TRUE(idx->Remove(kv.first).ok());
    model.clear();
    ExpectSame(*idx, model);
  }
}

TEST_P(HybridKinds, SplitsAndCrashImage) {
  TempPath path("hyb"), copy("hybcopy");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, HybridPool(), &pool).ok());
  IndexOptions o;
  o.key_type = KeyType::kU64;
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(CreateIndex(*pool, "t", GetParam(), o, &idx).ok());
  std::map<std::string, uint64_t> model;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 30000; ++i) {  // ascending, descending and random: many splits
    const uint64_t k = i < 10000 ? i : (i < 20000 ? 1000000 - i : rng());
    if (idx->Insert(k, i).ok()) model[EncodeU64(k)] = i;
  }
  ExpectSame(*idx, model);
  IndexStats st = idx->Stats();
  EXPECT_EQ(st.keys, model.size());
  EXPECT_GT(st.leaves, 100u);
  EXPECT_GT(st.inner_nodes, 0u);
  EXPECT_GT(st.volatile_bytes, 0u);
  EXPECT_GT(st.bytes_allocated, st.leaves * 64);
  // A crash image: the file as it is while the pool is open.
  CopyFile(path, copy);
  {
    std::unique_ptr<Pool> p2;
    ASSERT_TRUE(Pool::Open(copy, HybridPool(), &p2).ok());
    EXPECT_FALSE(p2->opened_clean());
    ASSERT_TRUE(p2->WaitForRecovery().ok());
    std::unique_ptr<Index> i2;
    ASSERT_TRUE(OpenIndex(*p2, "t", &i2).ok());
    ExpectSame(*i2, model);
    ExpectReachability(*p2, GetParam());
    // The rebuilt DRAM part routes new inserts correctly.
    for (uint64_t k = 5; k < 2000000; k += 997) {
      bool ins = false;
      ASSERT_TRUE(i2->Upsert(EncodeU64(k), k, &ins).ok());
    }
    std::string rep;
    EXPECT_TRUE(i2->Check(&rep).ok()) << rep;
  }
}

TEST_P(HybridKinds, PoolFull) {
  TempPath path("hybfull");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, HybridPool(6ull << 20), &pool).ok());
  IndexOptions o;
  o.key_type = KeyType::kBytes;
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(CreateIndex(*pool, "t", GetParam(), o, &idx).ok());
  std::map<std::string, uint64_t> model;
  Status s;
  uint64_t i = 0;
  for (; i < 10000000; ++i) {
    std::string k = "key-" + std::to_string(i * 7919 % 1000003) + std::string(200, 'x');
    s = idx->Insert(k, i);
    if (!s.ok()) break;
    model[k] = i;
  }
  ASSERT_TRUE(s.IsPoolFull()) << s.ToString();
  ExpectSame(*idx, model);
  // Removes still work and make room.
  for (int j = 0; j < 100 && !model.empty(); ++j) {
    ASSERT_TRUE(idx->Remove(model.begin()->first).ok());
    model.erase(model.begin());
  }
  ExpectSame(*idx, model);
  idx.reset();
  ASSERT_TRUE(pool->Close().ok());
  pool.reset();
  ASSERT_TRUE(Pool::Open(path, HybridPool(), &pool).ok());
  ASSERT_TRUE(OpenIndex(*pool, "t", &idx).ok());
  ExpectSame(*idx, model);
}

TEST_P(HybridKinds, ValuesAreBlocksVisited) {
  TempPath path("hybvab");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, HybridPool(), &pool).ok());
  IndexOptions o;
  o.key_type = KeyType::kU64;
  o.values_are_blocks = true;
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(CreateIndex(*pool, "t", GetParam(), o, &idx).ok());
  for (uint64_t k = 0; k < 500; ++k) {
    uint64_t b = 0;
    ASSERT_TRUE(pool->allocator().Alloc(64, &b).ok());
    ASSERT_TRUE(idx->Insert(k, b).ok());
  }
  ExpectReachability(*pool, GetParam());
}

// Opt-in measurement (WORT_REBUILD_KEYS=N): insert N random 8-byte keys, then time the reopen
// of the index (the DRAM rebuild from the leaf chain) after a clean close and on a crash image.
inline void MeasureRebuild(const std::string& kind, double (*last_rebuild)(const Index&)) {
  const char* env = std::getenv("WORT_REBUILD_KEYS");
  if (!env) GTEST_SKIP() << "set WORT_REBUILD_KEYS=N to measure";
  const uint64_t n = std::strtoull(env, nullptr, 10);
  TempPath path("rbm"), copy("rbmcopy");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, HybridPool(8ull << 30), &pool).ok());
  IndexOptions o;
  o.key_type = KeyType::kU64;
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(CreateIndex(*pool, "t", kind, o, &idx).ok());
  std::mt19937_64 rng(1);
  for (uint64_t i = 0; i < n; ++i) (void)idx->Insert(rng(), i);
  CopyFile(path, copy);
  idx.reset();
  ASSERT_TRUE(pool->Close().ok());
  pool.reset();
  ASSERT_TRUE(Pool::Open(path, HybridPool(), &pool).ok());
  ASSERT_TRUE(OpenIndex(*pool, "t", &idx).ok());
  std::printf("%s: %llu keys, rebuild after clean close %.3f ms\n", kind.c_str(), (unsigned long long)idx->Size(),
              last_rebuild(*idx) * 1e3);
  idx.reset();
  pool.reset();
  ASSERT_TRUE(Pool::Open(copy, HybridPool(), &pool).ok());
  ASSERT_TRUE(OpenIndex(*pool, "t", &idx).ok());
  std::printf("%s: %llu keys, rebuild on a crash image %.3f ms\n", kind.c_str(), (unsigned long long)idx->Size(),
              last_rebuild(*idx) * 1e3);
}

}  // namespace wort::test
