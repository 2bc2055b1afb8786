// Tests shared by the hybrid B-trees with DRAM inner nodes (fptree, nvtree), beside the
// conformance suite's (random differential runs with reopens, tests/conformance): the DRAM part
// rebuilt from a leaf list with removed key ranges and refilled, splits in three insert orders
// and a crash image (copy of the open pool file) reopened and compared, PoolFull on a tiny pool,
// and the reachability contract (allocated blocks == visit's report). Instantiate with the kind
// name. Comparisons go through the shared harness (common/differential.h).
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

// What the conformance suite's random differential runs (every kind, reopen between phases)
// do not aim at: the DRAM inner nodes rebuilt from a persistent leaf list in which whole key
// ranges were removed (leaves emptied or left with one key), then routing inserts back into
// those ranges. Phases: an ascending fill of many leaves; remove two whole ranges, every other
// key of a third and all but one key of a fourth; reopen (rebuild); compare; refill the
// removed ranges in descending order; a crash image (rebuild again); drain and reopen empty.
TEST_P(HybridKinds, RebuildAfterRangeRemoves) {
  IndexFixture f(GetParam(), KeyType::kU64);
  Model model;
  constexpr uint64_t kN = 20000;
  for (uint64_t k = 0; k < kN; ++k) {
    ASSERT_TRUE(f.idx().Insert(k * 4, k).ok());
    model[EncodeU64(k * 4)] = k;
  }
  const uint64_t leaves_filled = f.idx().Stats().leaves;
  ASSERT_GT(leaves_filled, 50u);
  auto remove_if = [&](auto&& pred) {
    for (auto it = model.begin(); it != model.end();) {
      const uint64_t k = DecodeU64(it->first) / 4;
      if (pred(k)) {
        ASSERT_TRUE(f.idx().Remove(it->first).ok()) << k;
        it = model.erase(it);
      } else {
        ++it;
      }
    }
  };
  remove_if([](uint64_t k) {
    return k < 1500 || (k >= 9000 && k < 11000) || (k >= 14000 && k < 15000 && k % 2) ||
           (k >= 17000 && k < 18500 && k != 17777);
  });
  ExpectSame(f.idx(), model, "ranges removed");
  f.Reopen();  // the DRAM part is rebuilt from the leaves
  ExpectSame(f.idx(), model, "reopened after range removes");
  f.ExpectCheckOk("reopened after range removes");
  // Keys routed into the emptied ranges, descending, between and on the old keys.
  for (uint64_t k = 18600; k-- > 0;) {
    if (!(k < 1500 || (k >= 9000 && k < 11000) || (k >= 17000 && k < 18500)) || k % 3) continue;
    const std::string key = EncodeU64(k * 4 + (k % 2));
    bool inserted = false;
    ASSERT_TRUE(f.idx().Upsert(key, k + 7, &inserted).ok()) << k;
    ASSERT_EQ(inserted, model.count(key) == 0) << k;
    model[key] = k + 7;
  }
  ExpectSame(f.idx(), model, "refilled");
  f.CrashAndReopen();
  ExpectSame(f.idx(), model, "crash image after refill");
  f.ExpectCheckOk("crash image after refill");
  for (const auto& kv : model) ASSERT_TRUE(f.idx().Remove(kv.first).ok());
  model.clear();
  f.Reopen();
  ExpectSame(f.idx(), model, "drained and reopened");
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
