// FAST&FAIR writers that split the same leaves and parents at once (issue 31: splits under node
// locks, fastfair.h D4). Several writers insert interleaved keys in ascending order (so they all
// split the rightmost leaf, its parent and the root again and again), then in a shuffled order
// (splits everywhere), while contended inserts of the same keys by every writer must succeed
// exactly once and readers check every key a writer has reported inserted. The final content is
// compared with the model (Size, Lookup of every key, full scan, Check), every allocated block
// must be reachable (no leaked preallocated node or key block) and the tree must have grown to
// several levels (the splits reached the root). Keys cover the full byte range. Run under
// ThreadSanitizer by scripts/tsan.sh (sizes shrink there).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/differential.h"
#include "common/test_util.h"
#include "index/registry.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/key.h"
#include "wort/pool.h"

namespace wort {
namespace {

constexpr int kScale = test::kSanitizerScale;

// Key i: increasing in i, over the full byte range: a 0x80..0xff lead byte, the big-endian id,
// and a tail of 0..2 bytes from {00, 7f, 80, ff} (kBytes); the 8-byte big-endian id with its top
// bit set (kU64).
std::string KeyOf(uint32_t i, bool u64) {
  std::string k;
  if (u64) {
    const uint64_t w = (uint64_t{1} << 63) | (uint64_t{i} << 8) | 0xff;
    for (int b = 7; b >= 0; --b) k.push_back(static_cast<char>(w >> (8 * b)));
    return k;
  }
  static const unsigned char tail[] = {0x00, 0x7f, 0x80, 0xff};
  k.push_back(static_cast<char>(0x80 | (i >> 24)));
  for (int b = 2; b >= 0; --b) k.push_back(static_cast<char>(i >> (8 * b)));
  for (uint32_t t = 0; t < i % 3; ++t) k.push_back(static_cast<char>(tail[(i / 3 + t) % 4]));
  return k;
}
uint64_t ValOf(uint32_t i, uint64_t ver) { return (uint64_t{i} << 16) | ver; }

class FastFairConcurrentTest : public testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    SetGlobalIndexLock(false);
    PoolOptions po;
    po.initial_size = 16ull << 20;
    po.max_size = 1ull << 30;
    ASSERT_TRUE(Pool::Create(path_.str(), po, &pool_).ok());
    IndexOptions io;
    if (GetParam()) io.key_type = KeyType::kU64;
    ASSERT_TRUE(CreateIndex(*pool_, "idx", "fastfair", io, &idx_).ok());
  }
  void TearDown() override {
    idx_.reset();
    if (pool_) {
      EXPECT_TRUE(pool_->Close().ok());
    }
  }
  test::TempPath path_{"ffconc"};
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Index> idx_;
};

TEST_P(FastFairConcurrentTest, WritersSplittingTheSameNodes) {
  const bool u64 = GetParam();
  constexpr int kWriters = 4, kReaders = 2;
  const uint32_t n_asc = 24000 / kScale;       // ascending phase: ids [0, n_asc)
  const uint32_t n_rand = 24000 / kScale;      // shuffled phase: ids [n_asc, n_asc + n_rand)
  const uint32_t n_contended = 2000 / kScale;  // ids after those: every writer inserts each
  const uint32_t total = n_asc + n_rand + n_contended;
  std::vector<uint32_t> shuffled(n_rand);
  for (uint32_t i = 0; i < n_rand; ++i) shuffled[i] = n_asc + i;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(5));

  std::vector<std::atomic<int>> wins(n_contended);
  // progress[w]: how many of writer w's ascending keys are in (a reader may look them up).
  std::vector<std::atomic<uint32_t>> progress(kWriters);
  std::atomic<bool> writers_done{false};
  std::atomic<uint64_t> errors{0}, lookups{0};
  std::atomic<int> started{0};
  const int nthreads = kWriters + kReaders;
  auto fail = [&](const std::string& what) {
    if (errors.fetch_add(1) < 10) ADD_FAILURE() << what;
  };
  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; ++w)
    ts.emplace_back([&, w] {
      started++;
      while (started.load() < nthreads) std::this_thread::yield();
      uint32_t c = 0;
      // Ascending, interleaved: ids w, w + kWriters, ... (every writer at the right edge).
      for (uint32_t i = w; i < n_asc; i += kWriters) {
        Status s = idx_->Insert(KeyOf(i, u64), ValOf(i, 0));
        if (!s.ok()) fail("insert " + std::to_string(i) + ": " + s.ToString());
        progress[w].store(i / kWriters + 1, std::memory_order_release);
        if (i % 16 == 0 && c < n_contended) {
          const uint32_t id = n_asc + n_rand + c++;
          Status cs = idx_->Insert(KeyOf(id, u64), ValOf(id, 1));
          if (cs.ok()) wins[id - n_asc - n_rand]++;
          else if (!cs.IsAlreadyExists()) fail("contended insert: " + cs.ToString());
        }
      }
      // Shuffled, then an upsert of every third of them (a present key: value replaced).
      for (uint32_t j = w; j < n_rand; j += kWriters) {
        const uint32_t i = shuffled[j];
        Status s = idx_->Insert(KeyOf(i, u64), ValOf(i, 0));
        if (!s.ok()) fail("insert " + std::to_string(i) + ": " + s.ToString());
        if (j % 3 == 0) {
          bool inserted = true;
          s = idx_->Upsert(KeyOf(i, u64), ValOf(i, 2), &inserted);
          if (!s.ok() || inserted) fail("upsert " + std::to_string(i) + ": " + s.ToString());
        }
      }
    });
  for (int r = 0; r < kReaders; ++r)
    ts.emplace_back([&, r] {
      started++;
      while (started.load() < nthreads) std::this_thread::yield();
      std::mt19937_64 rng(50 + r);
      while (!writers_done.load()) {
        const int w = static_cast<int>(rng() % kWriters);
        const uint32_t done = progress[w].load(std::memory_order_acquire);
        if (done == 0) continue;
        const uint32_t i = static_cast<uint32_t>(w + kWriters * (rng() % done));
        uint64_t v = 0;
        Status s = idx_->Lookup(KeyOf(i, u64), &v);
        lookups++;
        if (!s.ok() || v != ValOf(i, 0)) fail("key " + std::to_string(i) + " reported inserted, lookup: " + s.ToString());
      }
    });
  for (int w = 0; w < kWriters; ++w) ts[w].join();
  writers_done = true;
  for (size_t i = kWriters; i < ts.size(); ++i) ts[i].join();
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_GT(lookups.load(), 0u);

  test::Model ref;
  for (uint32_t i = 0; i < n_asc; ++i) ref[KeyOf(i, u64)] = ValOf(i, 0);
  for (uint32_t j = 0; j < n_rand; ++j) ref[KeyOf(shuffled[j], u64)] = ValOf(shuffled[j], j % 3 == 0 ? 2 : 0);
  uint32_t contended_done = 0;
  for (uint32_t c = 0; c < n_contended; ++c) {
    const int n = wins[c].load();
    if (n == 0) continue;
    ++contended_done;
    EXPECT_EQ(n, 1) << "contended key " << c << ": " << n << " inserts succeeded";
    ref[KeyOf(n_asc + n_rand + c, u64)] = ValOf(n_asc + n_rand + c, 1);
  }
  EXPECT_GT(contended_done, 0u);
  ASSERT_LE(ref.size(), total);
  test::ExpectSame(*idx_, ref, "after the writers");  // Size, every Lookup, the full scan, Check

  // The splits reached the root: a tree of >= 3 levels above the leaves' (27 entries a node).
  const IndexStats st = idx_->Stats();
  EXPECT_GE(st.avg_leaf_depth, kScale == 1 ? 3.0 : 2.0);
  EXPECT_GT(st.inner_nodes, 10u);

  // No leaked block: every allocated block is reachable, and every reachable one allocated.
  RootInfo ri;
  ASSERT_TRUE(pool_->FindRoot("idx", &ri).ok());
  std::set<uint64_t> reach, alloc;
  FindIndexKind("fastfair")->visit(*pool_, ri.off, [&](uint64_t o) { reach.insert(o); });
  pool_->allocator().ForEachAllocated([&](uint64_t o, size_t) { alloc.insert(o); });
  EXPECT_EQ(alloc.size(), reach.size());
  EXPECT_TRUE(alloc == reach);
}

// Inserts beside deletes that empty leaves (rebalances: merges and redistributions under the
// writer gate's quiesce) and beside splits of the same nodes: each writer inserts its own keys,
// spread over the whole key space, and deletes its oldest key every third operation, so that
// leaves fill, split, drain and merge while the other writers insert into their neighbours.
// Every delete of a key the writer inserted must succeed, every insert of a new key too; the
// end state is compared with the model (Size, every Lookup, the full scan, Check).
TEST_P(FastFairConcurrentTest, InsertsBesideDeletesThatRebalance) {
  const bool u64 = GetParam();
  constexpr int kWriters = 3;
  // Small trees (a root over a few leaves: every split and merge changes the root) and many
  // rounds, each on a fresh index; then one larger tree.
  const int rounds = 160 / kScale;
  std::atomic<uint64_t> errors{0};
  auto fail = [&](const std::string& what) {
    if (errors.fetch_add(1) < 10) ADD_FAILURE() << what;
  };
  for (int round = 0; round <= rounds && errors.load() == 0; ++round) {
    const uint32_t ops = round < rounds ? 450 : 24000 / kScale;  // per writer
    // A pool of its own, small: it grows while the writers run (as in the kill test).
    test::TempPath rpath("ffreb");
    std::unique_ptr<Pool> rpool;
    PoolOptions po;
    po.initial_size = 1ull << 20;
    ASSERT_TRUE(Pool::Create(rpath.str(), po, &rpool).ok());
    std::unique_ptr<Index> idx;
    IndexOptions io;
    if (u64) io.key_type = KeyType::kU64;
    ASSERT_TRUE(CreateIndex(*rpool, "idx", "fastfair", io, &idx).ok());
    // Writer w's n-th key: distinct over writers and rounds, scattered over the key space (an
    // odd factor mod 2^31 is a bijection of KeyOf's 31-bit ids).
    auto id_of = [&](int w, uint32_t n) {
      const uint32_t x = (static_cast<uint32_t>(round) << 20 | n) * kWriters + static_cast<uint32_t>(w);
      return (x * 0x9e3779b1u) & 0x7fffffffu;
    };
    std::vector<std::vector<uint32_t>> live(kWriters);
    std::atomic<int> started{0};
    std::vector<std::thread> ts;
    for (int w = 0; w < kWriters; ++w)
      ts.emplace_back([&, w] {
        started++;
        while (started.load() < kWriters) std::this_thread::yield();
        uint32_t next = 0, oldest = 0;
        for (uint32_t j = 0; j < ops; ++j) {
          const std::string where = "round " + std::to_string(round) + " writer " + std::to_string(w) + " op " + std::to_string(j);
          if (j % 3 == 2) {
            Status s = idx->Remove(KeyOf(id_of(w, oldest++), u64));
            if (!s.ok()) fail(where + ": remove of its own key: " + s.ToString());
          } else {
            const uint32_t i = id_of(w, next++);
            Status s = idx->Insert(KeyOf(i, u64), ValOf(i, 0));
            if (!s.ok()) fail(where + ": insert: " + s.ToString());
          }
        }
        for (uint32_t n = oldest; n < next; ++n) live[w].push_back(id_of(w, n));
      });
    for (auto& t : ts) t.join();
    test::Model ref;
    for (const auto& l : live)
      for (uint32_t i : l) ref[KeyOf(i, u64)] = ValOf(i, 0);
    test::ExpectSame(*idx, ref, "round " + std::to_string(round));
    idx.reset();
    EXPECT_TRUE(rpool->Close().ok());
  }
  EXPECT_EQ(errors.load(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Keys, FastFairConcurrentTest, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& i) { return i.param ? "u64" : "bytes"; });

}  // namespace
}  // namespace wort
