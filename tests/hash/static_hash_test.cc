// Baseline-specific tests: the duplicate sweep after an interrupted displacement (CUCK, BCH,
// LEVL), LINP tombstones and its aux slot, and every kind written beside the post-crash GC.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "hash/hash_test_util.h"
#include "index/hash/static_hash.h"

namespace wort::hash::test {
namespace {

const TableHeader* HeaderOf(Pool& pool) {
  RootInfo ri;
  EXPECT_TRUE(pool.FindRoot("idx", &ri).ok());
  return pool.at<const TableHeader>(pool.at<const HashRoot>(ri.off)->table);
}

// A crash between a displaced record's arrival and the overwrite of its old slot leaves it in
// two slots. Made by hand: copy records into empty slots among their candidates; Open after the
// crash removes the copies, and the table is whole again.
class DuplicateSweepTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DuplicateSweepTest, RemovesCopies) {
  HashFixture f(GetParam(), KeyType::kU64);
  std::unordered_map<uint64_t, uint64_t> model;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 3000; ++i) {
    const uint64_t k = rng();
    ASSERT_TRUE(f.idx().Insert(k, k ^ 1).ok());
    model[k] = k ^ 1;
  }
  const TableHeader* th = HeaderOf(f.pool());
  const unsigned spb = GetParam() == "cuck" ? 1 : 4;
  auto* a0 = f.pool().at<HSlot>(th->array[0]);
  const uint64_t n = th->n;
  // For some records in array 0, copy them into an empty slot of their other bucket (CUCK/BCH:
  // the other hash position; LEVL: the other top bucket) - exactly what a cut move leaves.
  size_t copies = 0;
  for (uint64_t b = 0; b < n && copies < 50; ++b) {
    for (unsigned j = 0; j < spb && copies < 50; ++j) {
      const HSlot s = a0[b * spb + j];
      if (!s.key) continue;
      const uint64_t h = s.key, g = MixU64(h, 0x5bd1e9955bd1e995ull);
      const uint64_t other = (h & (n - 1)) == b ? (g & (n - 1)) : (h & (n - 1));
      if (other == b) continue;
      for (unsigned t = 0; t < spb; ++t) {
        HSlot* d = &a0[other * spb + t];
        if (d->key == 0) {
          d->value = s.value;
          pm::store8(&d->key, s.key);
          pm::persist(d, 16);
          ++copies;
          break;
        }
      }
    }
  }
  ASSERT_GT(copies, 0u);
  std::string report;
  EXPECT_FALSE(f.idx().Check(&report).ok()) << "duplicates must be reported";
  f.CrashAndReopen();
  f.ExpectCheckOk("after the duplicate sweep");
  EXPECT_EQ(f.idx().Size(), model.size());
  for (auto& [k, v] : model) {
    uint64_t got = 0;
    ASSERT_TRUE(f.idx().Lookup(k, &got).ok());
    ASSERT_EQ(got, v);
  }
  // Remove everything: no stale copy may survive a remove.
  for (auto& [k, v] : model) ASSERT_TRUE(f.idx().Remove(k).ok());
  for (auto& [k, v] : model) {
    uint64_t got = 0;
    ASSERT_TRUE(f.idx().Lookup(k, &got).IsNotFound());
  }
  f.ExpectCheckOk("emptied");
}

INSTANTIATE_TEST_SUITE_P(Kinds, DuplicateSweepTest, ::testing::Values("cuck", "bch", "levl"));

// LINP: removes leave tombstones that probes walk over; the key whose mixed value equals the
// tombstone word lives in the aux slot.
TEST(LinpTest, TombstonesAndAuxSlot) {
  ScopedEnv seed("WORT_HASH_SEED", "777");
  HashFixture f("linp", KeyType::kU64);
  // The key whose mixed value is 1 (splitmix64's finalizer inverted).
  const uint64_t k1 = UnmixU64(1, 777);
  ASSERT_EQ(MixU64(k1, 777), 1u);
  ASSERT_TRUE(f.idx().Insert(k1, 11).ok());
  uint64_t v = 0;
  ASSERT_TRUE(f.idx().Lookup(k1, &v).ok());
  EXPECT_EQ(v, 11u);
  std::unordered_map<uint64_t, uint64_t> model = {{k1, 11}};
  std::mt19937_64 rng(3);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 1500; ++i) keys.push_back(rng() % 4000);
  for (int round = 0; round < 20; ++round)
    for (uint64_t k : keys) {
      if (rng() % 2) {
        if (f.idx().Insert(k, k + round).ok()) model[k] = k + round;
      } else if (f.idx().Remove(k).ok()) {
        model.erase(k);
      }
    }
  f.ExpectCheckOk("tombstones");
  f.Reopen();
  EXPECT_EQ(f.idx().Size(), model.size());
  for (auto& [k, val] : model) {
    ASSERT_TRUE(f.idx().Lookup(k, &v).ok());
    ASSERT_EQ(v, val);
  }
  ASSERT_TRUE(f.idx().Remove(k1).ok());
  EXPECT_TRUE(f.idx().Lookup(k1, &v).IsNotFound());
}

// Every hash kind written (inserts, removes) while the post-crash GC marks in the background.
class GcBesideWritersTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GcBesideWritersTest, NothingLostNothingLeaked) {
  ASSERT_NE(FindIndexKind(GetParam()), nullptr) << GetParam() << " is a built-in kind";
  RunWritesBesideGc(GetParam(), 30000, 10000, 2);
}

INSTANTIATE_TEST_SUITE_P(Kinds, GcBesideWritersTest, ::testing::Values("linp", "cuck", "bch", "levl", "path"));

}  // namespace
}  // namespace wort::hash::test
