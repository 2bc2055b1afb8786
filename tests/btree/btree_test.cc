// The persistent B-trees (fastfair, b3tree, wbtree, wbtree-slot), each against a std::map model:
// random mixes of insert/upsert/lookup/remove/scan on 8-byte keys (dense, sparse, clustered) and
// byte-string keys (full byte range, the empty key, prefix chains, long keys; the shared key
// generators of common/differential.h), with the pool
// closed and reopened between phases and Check() after each phase; sequential fills and drains
// that cross every split, merge and redistribution boundary; PoolFull on a tiny pool; the
// reachability contract (allocated blocks == what visit reports); values_are_blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/differential.h"
#include "common/index_test_util.h"
#include "common/test_util.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pool.h"

namespace wort {
namespace {

using test::IndexFixture;
using test::SmallPoolOptions;

using test::Model;

// The shared harness's comparison (Size, a Lookup of every key, the full scan); Check runs
// where the tests call ExpectCheckOk.
void ExpectSameContents(const Index& idx, const Model& m, const char* phase) {
  test::ExpectSame(idx, m, phase, /*ordered=*/true, /*check=*/false);
}

// ---- key universes ------------------------------------------------------------------------

using test::KeyGen;

// n distinct keys drawn from the shared generators (common/differential.h), shuffled: dense
// (every key < n), sparse (the u64 edge keys, then MakeKey's small and random words), clustered
// (runs of consecutive keys), bytes (the edge byte keys: full byte range, a prefix chain, the
// longest keys; then ByteKeys over the universe so far: prefixes and extensions of its keys,
// shared stems, long keys).
std::vector<std::string> MakeKeys(KeyGen g, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Model seen;  // the universe so far (ByteKeys draws prefixes and extensions of its keys)
  std::vector<std::string> out;
  auto add = [&](std::string key) {
    // (An extension of a longest key is one too long: not a key of the universe.)
    if (out.size() < n && key.size() <= kMaxKeyLen && seen.emplace(key, 0).second) out.push_back(std::move(key));
  };
  if (g == KeyGen::kSparse)
    for (auto& k : test::EdgeU64Keys()) add(std::move(k));
  if (g == KeyGen::kBytes)
    for (auto& k : test::EdgeByteKeys()) add(std::move(k));
  test::ByteKeys bytes(seed);
  while (out.size() < n) add(g == KeyGen::kBytes ? bytes.Next(seen) : test::MakeKey(g, rng, n));
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

struct Param {
  std::string kind;
};

class BTreeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_NE(FindIndexKind(GetParam()), nullptr) << GetParam() << " is a built-in kind";
  }
};

// Random mix against the model, with reopen + Check between phases.
void RunMix(const std::string& kind, KeyGen keys, size_t nkeys, size_t ops, uint64_t seed) {
  const KeyType kt = keys == KeyGen::kBytes ? KeyType::kBytes : KeyType::kU64;
  IndexFixture h(kind, kt);
  const auto universe = MakeKeys(keys, nkeys, seed);
  std::mt19937_64 rng(seed * 7 + 1);
  Model m;
  const int phases = 4;
  for (int phase = 0; phase < phases; ++phase) {
    // Phase 0 mostly inserts, later phases mix in more removes, the last drains most keys.
    const int ins_w = phase == phases - 1 ? 2 : 6, rem_w = phase == 0 ? 1 : (phase == phases - 1 ? 8 : 4);
    for (size_t i = 0; i < ops; ++i) {
      const std::string& k = universe[rng() % universe.size()];
      const int r = static_cast<int>(rng() % (ins_w + rem_w + 6));
      const uint64_t v = rng() % 4 == 0 ? 0 : rng() % 8;  // many equal values, including 0
      if (r < ins_w) {
        Status s = h.idx().Insert(k, v);
        if (m.count(k)) {
          ASSERT_TRUE(s.IsAlreadyExists()) << s.ToString();
        } else {
          ASSERT_TRUE(s.ok()) << s.ToString();
          m[k] = v;
        }
      } else if (r < ins_w + rem_w) {
        Status s = h.idx().Remove(k);
        if (m.erase(k)) ASSERT_TRUE(s.ok()) << s.ToString();
        else ASSERT_TRUE(s.IsNotFound()) << s.ToString();
      } else if (r < ins_w + rem_w + 2) {
        bool inserted = false;
        ASSERT_TRUE(h.idx().Upsert(k, v + 100, &inserted).ok());
        ASSERT_EQ(inserted, m.count(k) == 0);
        m[k] = v + 100;
      } else if (r < ins_w + rem_w + 5) {
        uint64_t got = 12345;
        Status s = h.idx().Lookup(k, &got);
        auto it = m.find(k);
        if (it == m.end()) {
          ASSERT_TRUE(s.IsNotFound());
          ASSERT_EQ(got, 12345u);
        } else {
          ASSERT_TRUE(s.ok()) << s.ToString();
          ASSERT_EQ(got, it->second);
        }
      } else {
        // A short scan from a random key (present or not), sometimes bounded by an end key.
        const std::string& start = universe[rng() % universe.size()];
        const size_t limit = 1 + rng() % 40;
        std::string endk = universe[rng() % universe.size()];
        const std::string_view endv = endk;
        const bool use_end = rng() & 1;
        std::vector<std::pair<std::string, uint64_t>> got;
        ASSERT_TRUE(h.idx().Scan(start, use_end ? &endv : nullptr, limit, [&](std::string_view k2, uint64_t v2) {
                         got.emplace_back(std::string(k2), v2);
                         return true;
                       }).ok());
        std::vector<std::pair<std::string, uint64_t>> want;
        for (auto it = m.lower_bound(start); it != m.end() && want.size() < limit; ++it) {
          if (use_end && it->first > endk) break;
          want.emplace_back(it->first, it->second);
        }
        ASSERT_EQ(got, want) << "scan from a key of length " << start.size();
      }
    }
    h.ExpectCheckOk("after phase");
    ExpectSameContents(h.idx(), m, "after phase");
    h.Reopen();
    h.ExpectCheckOk("after reopen");
    ExpectSameContents(h.idx(), m, "after reopen");
  }
  // Every remaining key can be looked up and removed.
  for (const auto& [k, v] : m) {
    uint64_t got = 0;
    ASSERT_TRUE(h.idx().Lookup(k, &got).ok());
    ASSERT_EQ(got, v);
  }
  for (const auto& [k, v] : m) ASSERT_TRUE(h.idx().Remove(k).ok());
  EXPECT_EQ(h.idx().Size(), 0u);
  h.ExpectCheckOk("after drain");
}

TEST_P(BTreeTest, MixDense) { RunMix(GetParam(), KeyGen::kDense, 3000, 12000, 1); }
TEST_P(BTreeTest, MixSparse) { RunMix(GetParam(), KeyGen::kSparse, 3000, 12000, 2); }
TEST_P(BTreeTest, MixClustered) { RunMix(GetParam(), KeyGen::kClustered, 3000, 12000, 3); }
TEST_P(BTreeTest, MixBytes) { RunMix(GetParam(), KeyGen::kBytes, 2500, 10000, 4); }
// Few keys, many operations: nodes fill and empty again and again around the boundaries.
TEST_P(BTreeTest, MixFewKeysHighChurn) { RunMix(GetParam(), KeyGen::kSparse, 150, 20000, 5); }

// Ascending, descending and interleaved fills, then drains in several orders, with Check after
// every step near the boundaries (every insert while small, then periodically).
TEST_P(BTreeTest, FillAndDrainOrders) {
  for (int order = 0; order < 4; ++order) {
    IndexFixture h(GetParam(), KeyType::kU64);
    const uint64_t n = 2500;
    std::vector<uint64_t> ks(n);
    for (uint64_t i = 0; i < n; ++i) ks[i] = i * 3;
    if (order == 1) std::reverse(ks.begin(), ks.end());
    if (order == 2) std::shuffle(ks.begin(), ks.end(), std::mt19937_64(9));
    if (order == 3) {  // outside-in
      std::vector<uint64_t> t;
      for (uint64_t i = 0; i < n / 2; ++i) {
        t.push_back(ks[i]);
        t.push_back(ks[n - 1 - i]);
      }
      ks = t;
    }
    Model m;
    for (size_t i = 0; i < ks.size(); ++i) {
      ASSERT_TRUE(h.idx().Insert(ks[i], ks[i] + 1).ok());
      m[EncodeU64(ks[i])] = ks[i] + 1;
      if (i < 200 || i % 97 == 0) h.ExpectCheckOk("fill");
    }
    ExpectSameContents(h.idx(), m, "filled");
    IndexStats st = h.idx().Stats();
    EXPECT_EQ(st.keys, m.size());
    EXPECT_GT(st.leaves, 1u);
    EXPECT_GT(st.inner_nodes, 0u);
    EXPECT_GT(st.bytes_allocated, 0u);
    h.Reopen();
    // Drain in a different order: every other key first (half-full nodes everywhere), then the
    // rest ascending or descending.
    std::vector<uint64_t> drain;
    for (size_t i = 0; i < n; i += 2) drain.push_back(i * 3);
    std::vector<uint64_t> rest;
    for (size_t i = 1; i < n; i += 2) rest.push_back(i * 3);
    if (order & 1) std::reverse(rest.begin(), rest.end());
    drain.insert(drain.end(), rest.begin(), rest.end());
    for (size_t i = 0; i < drain.size(); ++i) {
      ASSERT_TRUE(h.idx().Remove(drain[i]).ok()) << i;
      m.erase(EncodeU64(drain[i]));
      if (drain.size() - i < 200 || i % 97 == 0) h.ExpectCheckOk("drain");
      if (i == drain.size() / 2) {
        ExpectSameContents(h.idx(), m, "half drained");
        test::ExpectReachable(h.pool(), "half drained");
      }
    }
    EXPECT_EQ(h.idx().Size(), 0u);
    st = h.idx().Stats();
    EXPECT_EQ(st.keys, 0u);
    test::ExpectReachable(h.pool(), "drained");
    // The empty tree works again.
    for (uint64_t i = 0; i < 300; ++i) ASSERT_TRUE(h.idx().Insert(i, i).ok());
    h.ExpectCheckOk("refill");
  }
}

TEST_P(BTreeTest, ScanBoundsAndStarts) {
  IndexFixture h(GetParam(), KeyType::kU64);
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_TRUE(h.idx().Insert(i * 10, i).ok());
  auto collect = [&](std::string_view start, const std::string_view* end, size_t limit) {
    std::vector<uint64_t> out;
    EXPECT_TRUE(h.idx().Scan(start, end, limit, [&](std::string_view k, uint64_t) {
                     out.push_back(DecodeU64(k));
                     return true;
                   }).ok());
    return out;
  };
  auto v = collect(U64Key(15), nullptr, 3);
  EXPECT_EQ(v, (std::vector<uint64_t>{20, 30, 40}));
  std::string e = EncodeU64(50);
  std::string_view ev = e;
  v = collect(U64Key(20), &ev, 100);
  EXPECT_EQ(v, (std::vector<uint64_t>{20, 30, 40, 50}));
  v = collect("", nullptr, 2);  // an empty start is before every key
  EXPECT_EQ(v, (std::vector<uint64_t>{0, 10}));
  v = collect(std::string("\0\0\0\0\0\0\0\x0a\x01", 9), nullptr, 2);  // longer than 8: after 10
  EXPECT_EQ(v, (std::vector<uint64_t>{20, 30}));
  v = collect(U64Key(9990), nullptr, 10);
  EXPECT_EQ(v, (std::vector<uint64_t>{9990}));
  v = collect(U64Key(9991), nullptr, 10);
  EXPECT_TRUE(v.empty());
  v = collect(U64Key(0), nullptr, 0);
  EXPECT_TRUE(v.empty());
  // Stopping early from the callback; the callback may use the index.
  int calls = 0;
  ASSERT_TRUE(h.idx().Scan(U64Key(0), nullptr, 1000, [&](std::string_view k, uint64_t) {
                   uint64_t x;
                   EXPECT_TRUE(h.idx().Lookup(k, &x).ok());
                   return ++calls < 150;
                 }).ok());
  EXPECT_EQ(calls, 150);
  // A long full scan crosses many leaves and batches.
  v = collect(U64Key(0), nullptr, SIZE_MAX);
  ASSERT_EQ(v.size(), 1000u);
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], i * 10);
}

TEST_P(BTreeTest, PoolFullIsClean) {
  for (KeyType kt : {KeyType::kU64, KeyType::kBytes}) {
    IndexFixture h(GetParam(), kt, SmallPoolOptions(8ull << 20));  // a few chunks only
    Model m;
    std::mt19937_64 rng(11);
    Status s;
    uint64_t i = 0;
    for (;; ++i) {
      std::string k = kt == KeyType::kU64 ? EncodeU64(rng()) : std::string(200 + rng() % 200, static_cast<char>('a' + i % 26)) + std::to_string(i);
      s = h.idx().Insert(k, i);
      if (!s.ok()) break;
      m[k] = i;
    }
    ASSERT_TRUE(s.IsPoolFull()) << s.ToString();
    h.ExpectCheckOk("full");
    ExpectSameContents(h.idx(), m, "full");
    // Still usable: lookups, removes, and inserts after space is freed.
    size_t removed = 0;
    for (auto it = m.begin(); it != m.end() && removed < m.size() / 2;) {
      ASSERT_TRUE(h.idx().Remove(it->first).ok());
      it = m.erase(it);
      ++removed;
      if (it != m.end()) ++it;
    }
    h.ExpectCheckOk("after removes");
    for (int j = 0; j < 100; ++j) {
      // Same sizes as the removed keys, so the freed size classes serve them.
      std::string k = kt == KeyType::kU64 ? EncodeU64(rng()) : std::string(200 + rng() % 200, 'z') + std::to_string(j);
      Status st = h.idx().Insert(k, 1);
      ASSERT_TRUE(st.ok()) << st.ToString() << " after " << j << " inserts, key type " << static_cast<int>(kt);
      m[k] = 1;
    }
    ExpectSameContents(h.idx(), m, "refilled");
    test::ExpectReachable(h.pool(), "pool full");
    h.Reopen();
    h.ExpectCheckOk("reopened");
    ExpectSameContents(h.idx(), m, "reopened");
  }
}

TEST_P(BTreeTest, ValuesAreBlocksAreReported) {
  IndexFixture h(GetParam(), KeyType::kU64, SmallPoolOptions(256ull << 20), /*values_are_blocks=*/true);
  std::set<uint64_t> values;
  for (uint64_t i = 0; i < 500; ++i) {
    uint64_t off = 0;
    ASSERT_TRUE(h.pool().allocator().Alloc(64, &off).ok());
    ASSERT_TRUE(h.idx().Insert(i, off).ok());
    values.insert(off);
  }
  const IndexKind* k = FindIndexKind(GetParam());
  RootInfo ri;
  ASSERT_TRUE(h.pool().FindRoot(IndexFixture::kRoot, &ri).ok());
  std::set<uint64_t> reached;
  k->visit(h.pool(), ri.off, [&](uint64_t off) { reached.insert(off); });
  for (uint64_t v : values) ASSERT_TRUE(reached.count(v)) << v;
  test::ExpectReachable(h.pool(), "vab");
  // Bytes allocated counts the index's own blocks, not the values.
  const IndexStats st = h.idx().Stats();
  EXPECT_LT(st.bytes_allocated, h.pool().allocator().Stats().bytes_allocated);
}

// A crash image taken with no operation in flight (the pool's clean flag left unset) reopens
// with every key, and post-crash recovery keeps exactly the reachable blocks.
TEST_P(BTreeTest, ReopenAfterCrashImage) {
  IndexFixture h(GetParam(), KeyType::kBytes);
  Model m;
  auto keys = MakeKeys(KeyGen::kBytes, 1500, 21);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(h.idx().Insert(keys[i], i).ok());
    m[keys[i]] = i;
  }
  for (size_t i = 0; i < keys.size(); i += 3) {
    ASSERT_TRUE(h.idx().Remove(keys[i]).ok());
    m.erase(keys[i]);
  }
  h.CrashAndReopen();  // the live pool file, not closed: it reopens as after a crash
  h.ExpectCheckOk("crash image");
  ExpectSameContents(h.idx(), m, "crash image");
}

// Several threads write disjoint key ranges while others look up and scan; then every key is
// there and Check passes.
TEST_P(BTreeTest, ConcurrentWritersAndReaders) {
  IndexFixture h(GetParam(), KeyType::kU64);
  constexpr int kWriters = 3, kPerWriter = 3000;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; ++w)
    ts.emplace_back([&, w] {
      for (uint64_t i = 0; i < kPerWriter; ++i) {
        const uint64_t k = i * kWriters + w;
        if (!h.idx().Insert(k, k + 1).ok()) bad++;
        if (i % 3 == 0 && !h.idx().Remove(k).ok()) bad++;
        if (i % 3 == 0 && !h.idx().Insert(k, k + 1).ok()) bad++;
      }
    });
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      std::mt19937_64 rng(r);
      while (!stop.load()) {
        uint64_t v = 0;
        const uint64_t k = rng() % (kWriters * kPerWriter);
        if (h.idx().Lookup(k, &v).ok() && v != k + 1) bad++;
        uint64_t prev = 0;
        bool first = true;
        (void)h.idx().Scan(U64Key(k), nullptr, 50, [&](std::string_view key, uint64_t val) {
          const uint64_t x = DecodeU64(key);
          if (val != x + 1 || (!first && x <= prev)) bad++;
          prev = x;
          first = false;
          return true;
        });
      }
    });
  for (int w = 0; w < kWriters; ++w) ts[w].join();
  stop = true;
  for (size_t i = kWriters; i < ts.size(); ++i) ts[i].join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(h.idx().Size(), static_cast<uint64_t>(kWriters * kPerWriter));
  h.ExpectCheckOk("concurrent");
}

// Instant restart: the post-crash GC (visit) runs in the background while the reopened index
// is written; afterwards the allocated blocks are exactly the reachable ones.
TEST_P(BTreeTest, WritesDuringBackgroundRecovery) {
  IndexFixture h(GetParam(), KeyType::kBytes);
  Model m;
  auto keys = MakeKeys(KeyGen::kBytes, 3000, 31);
  for (size_t i = 0; i < 2000; ++i) {
    ASSERT_TRUE(h.idx().Insert(keys[i], i).ok());
    m[keys[i]] = i;
  }
  h.CrashAndReopen(/*background=*/true);
  for (size_t i = 2000; i < keys.size(); ++i) {
    ASSERT_TRUE(h.idx().Insert(keys[i], i).ok());
    m[keys[i]] = i;
    if (i % 2 == 0) {
      ASSERT_TRUE(h.idx().Remove(keys[i - 1500]).ok());
      m.erase(keys[i - 1500]);
    }
  }
  ASSERT_TRUE(h.pool().WaitForRecovery().ok());
  h.ExpectCheckOk("after background recovery");
  ExpectSameContents(h.idx(), m, "after background recovery");
}

// b3tree without rebalancing (issue 34, kRootNoRebalance in b3tree.h): every rebuilt page holds a
// chain instead of a complete BST; the same model checks (splits, merges, redistributions,
// reopen, Check) hold. The option is a creation knob (WORT_B3_REBALANCE=0 here) kept in the root.
class B3NoRebalance : public ::testing::Test {
 protected:
  void SetUp() override { setenv("WORT_B3_REBALANCE", "0", 1); }
  void TearDown() override { unsetenv("WORT_B3_REBALANCE"); }
};

TEST_F(B3NoRebalance, MixSparse) { RunMix("b3tree", KeyGen::kSparse, 3000, 12000, 21); }
TEST_F(B3NoRebalance, MixBytes) { RunMix("b3tree", KeyGen::kBytes, 2500, 10000, 22); }

TEST_F(B3NoRebalance, AscendingInsertsThenRandomRemoves) {
  IndexFixture h("b3tree", KeyType::kU64);
  unsetenv("WORT_B3_REBALANCE");  // read at create only: the pool's root keeps the choice
  Model m;
  for (uint64_t i = 0; i < 4000; ++i) {
    const std::string k = EncodeU64(i * 7 + 0x8000000000000000ull);  // keys with the top byte >= 0x80
    ASSERT_TRUE(h.idx().Insert(k, i).ok());
    m[k] = i;
  }
  h.ExpectCheckOk("ascending");
  h.Reopen();
  ExpectSameContents(h.idx(), m, "ascending");
  std::mt19937_64 rng(5);
  std::vector<std::string> ks;
  for (const auto& [k, v] : m) ks.push_back(k);
  std::shuffle(ks.begin(), ks.end(), rng);
  for (size_t i = 0; i < ks.size() * 3 / 4; ++i) {
    ASSERT_TRUE(h.idx().Remove(ks[i]).ok());
    m.erase(ks[i]);
  }
  h.ExpectCheckOk("after removes");
  ExpectSameContents(h.idx(), m, "after removes");
}

// The BST of the leftmost leaf page after ascending inserts (the persistent layout of b3tree.h):
// its root node's left reference, and the root block's flags.
std::pair<uint64_t, uint32_t> LeftmostLeafRootLeft(Pool& pool) {
  RootInfo ri;
  EXPECT_TRUE(pool.FindRoot(IndexFixture::kRoot, &ri).ok());
  const uint32_t flags = *pool.at<uint32_t>(ri.off + 12);
  uint64_t page = *pool.at<uint64_t>(ri.off + 16);
  for (int guard = 0; guard < 64; ++guard) {
    uint64_t r = *pool.at<uint64_t>(page);  // the page's BST root reference
    if (*pool.at<uint32_t>(page + 32) == 0) {  // level 0: a leaf page
      EXPECT_TRUE(r & 1) << "a leaf page's root is a BST node";
      return {*pool.at<uint64_t>(page + 64 + 32 * (r >> 1) + 16), flags};
    }
    while (r & 1) r = *pool.at<uint64_t>(page + 64 + 32 * (r >> 1) + 16);  // leftmost: follow `left`
    page = r;
  }
  ADD_FAILURE() << "no leaf level";
  return {0, flags};
}

TEST(B3Rebalance, NoRebalanceLeavesChainsWhereRebalancingBuildsCompleteBsts) {
  for (const bool rebalance : {true, false}) {
    if (!rebalance) setenv("WORT_B3_REBALANCE", "0", 1);
    IndexFixture h("b3tree", KeyType::kU64);
    unsetenv("WORT_B3_REBALANCE");
    for (uint64_t i = 0; i < 2000; ++i) ASSERT_TRUE(h.idx().Insert(EncodeU64(i), i).ok());
    const auto [left, flags] = LeftmostLeafRootLeft(h.pool());
    EXPECT_EQ((flags & 2) != 0, !rebalance);
    if (rebalance) EXPECT_NE(left, 0u) << "a complete BST's root has a left subtree";
    else EXPECT_EQ(left, 0u) << "a chain in ascending order starts at its smallest key";
  }
}

TEST(B3Rebalance, BadKnobIsRejected) {
  test::TempPath path("b3-badknob");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path.str(), SmallPoolOptions(), &pool).ok());
  setenv("WORT_B3_REBALANCE", "maybe", 1);
  std::unique_ptr<Index> idx;
  IndexOptions io;
  io.key_type = KeyType::kU64;
  Status s = CreateIndex(*pool, "idx", "b3tree", io, &idx);
  unsetenv("WORT_B3_REBALANCE");
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  io.b3_no_rebalance = true;  // the option itself
  ASSERT_TRUE(CreateIndex(*pool, "idx", "b3tree", io, &idx).ok());
  for (uint64_t i = 0; i < 500; ++i) ASSERT_TRUE(idx->Insert(EncodeU64(i), i).ok());
  std::string report;
  EXPECT_TRUE(idx->Check(&report).ok()) << report;
  idx.reset();
  (void)pool->Close();
}

// ---- b3tree page size (IndexOptions::b3_page_bytes, b3tree.h "Page size") --------------------

// Byte-string keys over the full byte range (bytes >= 0x80, 0x00 inside), 1..24 bytes.
std::vector<std::string> FullRangeKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::set<std::string> seen;
  std::vector<std::string> keys;
  while (keys.size() < n) {
    std::string k(1 + rng() % 24, '\0');
    for (char& c : k) c = static_cast<char>(rng() & 0xff);
    if (seen.insert(k).second) keys.push_back(k);
  }
  return keys;
}

// Every page size: inserts, lookups, deletes (merges), reopen - the size is the root block's, so
// the reopened tree has the same pages - with Check after each step, against a std::map.
TEST(B3PageSize, EveryPageSizeHoldsAndReopensWithIt) {
  std::map<uint64_t, uint64_t> leaves_at;  // page size -> leaf pages after the inserts
  for (uint64_t bytes : {256ull, 512ull, 1024ull, 2048ull, 4096ull}) {
    SCOPED_TRACE(bytes);
    test::TempPath path("b3-page-" + std::to_string(bytes));
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(path.str(), SmallPoolOptions(64ull << 20), &pool).ok());
    IndexOptions io;
    io.key_type = KeyType::kBytes;
    io.b3_page_bytes = bytes;
    std::unique_ptr<Index> idx;
    ASSERT_TRUE(CreateIndex(*pool, "idx", "b3tree", io, &idx).ok());
    const std::vector<std::string> keys = FullRangeKeys(3000, bytes);
    std::map<std::string, uint64_t> model;
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(idx->Insert(keys[i], i + 1).ok()) << i;
      model[keys[i]] = i + 1;
    }
    std::string report;
    ASSERT_TRUE(idx->Check(&report).ok()) << report;
    leaves_at[bytes] = idx->Stats().leaves;
    for (size_t i = 0; i < keys.size(); i += 2) {
      ASSERT_TRUE(idx->Remove(keys[i]).ok()) << i;
      model.erase(keys[i]);
    }
    ASSERT_TRUE(idx->Check(&report).ok()) << report;
    // The root block: 1 KB pages keep the original format (magic "2B3TREE", no size word).
    RootInfo ri;
    ASSERT_TRUE(pool->FindRoot("idx", &ri).ok());
    const uint64_t magic = *pool->at<uint64_t>(ri.off), stored = *pool->at<uint64_t>(ri.off + 24);
    EXPECT_EQ(magic, bytes == 1024 ? 0x45455254334232ull : 0x53455254334232ull);
    EXPECT_EQ(stored, bytes == 1024 ? 0u : bytes);
    idx.reset();
    ASSERT_TRUE(pool->Close().ok());
    pool.reset();
    ASSERT_TRUE(Pool::Open(path.str(), PoolOptions(), &pool).ok());
    ASSERT_TRUE(OpenIndex(*pool, "idx", &idx).ok());
    EXPECT_EQ(idx->Size(), model.size());
    for (const auto& [k, v] : model) {
      uint64_t got = 0;
      ASSERT_TRUE(idx->Lookup(k, &got).ok());
      EXPECT_EQ(got, v);
    }
    // Keep writing after the reopen: the pages it splits and merges have the stored size.
    for (size_t i = 0; i < keys.size(); i += 2) ASSERT_TRUE(idx->Insert(keys[i], 7).ok());
    for (size_t i = 1; i < keys.size(); i += 2) ASSERT_TRUE(idx->Remove(keys[i]).ok());
    ASSERT_TRUE(idx->Check(&report).ok()) << report;
    EXPECT_EQ(idx->Size(), keys.size() / 2);
    std::string prev;
    size_t scanned = 0;
    ASSERT_TRUE(idx->Scan("", nullptr, keys.size(), [&](std::string_view k, uint64_t v) {
      EXPECT_TRUE(scanned == 0 || prev < k);
      EXPECT_EQ(v, 7u);
      prev = std::string(k);
      ++scanned;
      return true;
    }).ok());
    EXPECT_EQ(scanned, keys.size() / 2);
    idx.reset();
    (void)pool->Close();
  }
  // Larger pages hold more keys: fewer leaves (6, 14, 30, 62, 126 nodes per page).
  EXPECT_GT(leaves_at[256], 3 * leaves_at[1024]);
  EXPECT_GT(leaves_at[1024], 3 * leaves_at[4096]);
}

TEST(B3PageSize, InvalidSizesAreRefused) {
  test::TempPath path("b3-page-bad");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path.str(), SmallPoolOptions(), &pool).ok());
  for (uint64_t bytes : {1ull, 128ull, 300ull, 1000ull, 8192ull, 1ull << 40}) {
    IndexOptions io;
    io.b3_page_bytes = bytes;
    std::unique_ptr<Index> idx;
    const Status s = CreateIndex(*pool, "bad", "b3tree", io, &idx);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bytes << ": " << s.ToString();
    EXPECT_NE(s.message().find("page size"), std::string::npos) << s.ToString();
  }
  RootInfo ri;
  EXPECT_FALSE(pool->FindRoot("bad", &ri).ok()) << "a refused create publishes nothing";
  (void)pool->Close();
}

// A root block whose page-size word is damaged is refused at open, not read with some size.
TEST(B3PageSize, DamagedPageSizeWordIsRefusedAtOpen) {
  test::TempPath path("b3-page-damaged");
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(path.str(), SmallPoolOptions(), &pool).ok());
    IndexOptions io;
    io.b3_page_bytes = 512;
    std::unique_ptr<Index> idx;
    ASSERT_TRUE(CreateIndex(*pool, "idx", "b3tree", io, &idx).ok());
    for (uint64_t i = 0; i < 200; ++i) ASSERT_TRUE(idx->Insert(EncodeU64(i), i).ok());
    idx.reset();
    RootInfo ri;
    ASSERT_TRUE(pool->FindRoot("idx", &ri).ok());
    *pool->at<uint64_t>(ri.off + 24) = 768;  // not a power of two
    ASSERT_TRUE(pool->Close().ok());
  }
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Open(path.str(), PoolOptions(), &pool).ok());
  std::unique_ptr<Index> idx;
  const Status s = OpenIndex(*pool, "idx", &idx);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("page size"), std::string::npos) << s.ToString();
  (void)pool->Close();
}

INSTANTIATE_TEST_SUITE_P(Kinds, BTreeTest, ::testing::Values("fastfair", "b3tree", "wbtree", "wbtree-slot"),
                         test::KindParamName);

}  // namespace
}  // namespace wort
