// Tests shared by the hybrid B-trees with DRAM inner nodes (fptree, nvtree): differential against
// std::map with Close + reopen between phases (the DRAM part rebuilt), Check after each phase,
// a crash image (copy of the open pool file) reopened and compared, PoolFull on a tiny pool, and
// the reachability contract (allocated blocks == visit's report). Instantiate with the kind name.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <set>

#include "common/index_test_util.h"
#include "common/differential.h"
#include "common/test_util.h"
#include "wort/alloc.h"
#include "wort/pool.h"

namespace wort::test {


class HybridKinds : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridKinds, RandomAgainstMapWithReopen) {
  for (KeyGen g : {KeyGen::kDense, KeyGen::kSparse, KeyGen::kBytes}) {
    IndexFixture f(GetParam(), g == KeyGen::kBytes ? KeyType::kBytes : KeyType::kU64);
    std::map<std::string, uint64_t> model;
    std::mt19937_64 rng(7 + static_cast<int>(g));
    for (int phase = 0; phase < 4; ++phase) {
      RandomOps(f.idx(), model, rng, 5000, /*ordered=*/true,
                [&] { return MakeKey(g, rng, g == KeyGen::kBytes ? 256 : 4000); });
      ExpectSame(f.idx(), model);
      f.Reopen();
      ExpectSame(f.idx(), model);
      f.ExpectCheckOk("phase " + std::to_string(phase));
    }
    for (const auto& kv : model) ASSERT_TRUE(f.idx().Remove(kv.first).ok());
    model.clear();
    ExpectSame(f.idx(), model);
  }
}

TEST_P(HybridKinds, SplitsAndCrashImage) {
  IndexFixture f(GetParam(), KeyType::kU64);
  Index* idx = &f.idx();
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
  f.CrashAndReopen();
  ExpectSame(f.idx(), model);
  f.ExpectCheckOk("crash image");
  // The rebuilt DRAM part routes new inserts correctly.
  for (uint64_t k = 5; k < 2000000; k += 997) {
    bool ins = false;
    ASSERT_TRUE(f.idx().Upsert(EncodeU64(k), k, &ins).ok());
  }
  f.ExpectCheckOk("after upserts");
}

TEST_P(HybridKinds, PoolFull) {
  IndexFixture f(GetParam(), KeyType::kBytes, SmallPoolOptions(6ull << 20));
  Index* idx = &f.idx();
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
  f.Reopen();
  ExpectSame(f.idx(), model);
}

TEST_P(HybridKinds, ValuesAreBlocksVisited) {
  IndexFixture f(GetParam(), KeyType::kU64, SmallPoolOptions(), /*values_are_blocks=*/true);
  for (uint64_t k = 0; k < 500; ++k) {
    uint64_t b = 0;
    ASSERT_TRUE(f.pool().allocator().Alloc(64, &b).ok());
    ASSERT_TRUE(f.idx().Insert(k, b).ok());
  }
  f.ExpectCheckOk("values are blocks");
}

}  // namespace wort::test
