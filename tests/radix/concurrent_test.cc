// Multi-threaded stress of the concurrent ordered kinds (the radix trees wort, woart, artcow,
// roart, the volatile ART vart, and the B-tree fastfair), in the concurrent mode and in the global-lock mode: N writers + M readers + a scanner on overlapping keys, every result
// checked (see CheckedStress below). Also: a scan callback that writes to the same index.
// Sizes shrink under ThreadSanitizer (scripts/test.sh runs this binary built with WORT_TSAN).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
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

// Keys over the full byte range with shared prefixes: 1..9 bytes from {00, 01, 7f, 80, ff}
// (so keys are prefixes of one another and paths compress), plus 8-byte random keys; with u64,
// 8-byte keys only (KeyType::kU64 indexes), half of them built from that alphabet.
std::vector<std::string> MakeKeys(size_t n, uint64_t seed, bool u64 = false) {
  static const unsigned char alpha[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
  std::mt19937_64 rng(seed);
  std::set<std::string> s;
  while (s.size() < n) {
    std::string k;
    if (rng() % 2) {
      const size_t len = u64 ? 8 : 1 + rng() % 9;
      for (size_t i = 0; i < len; ++i) k.push_back(static_cast<char>(alpha[rng() % 5]));
    } else {
      for (int i = 0; i < 8; ++i) k.push_back(static_cast<char>(rng()));
    }
    s.insert(k);
  }
  std::vector<std::string> v(s.begin(), s.end());
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

// value = key id << 20 | version: a reader checks that a value belongs to its key.
uint64_t Val(size_t id, uint64_t ver) { return (uint64_t(id) << 20) | (ver & 0xfffff); }
size_t IdOf(uint64_t v) { return static_cast<size_t>(v >> 20); }

struct Param {
  const char* kind;
  bool global_lock;
  bool u64 = false;  // KeyType::kU64 (8-byte keys)
};
std::string Name(const testing::TestParamInfo<Param>& i) {
  return std::string(i.param.kind) + (i.param.global_lock ? "_global_lock" : "_concurrent") + (i.param.u64 ? "_u64" : "");
}

class ConcurrentTest : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    SetGlobalIndexLock(GetParam().global_lock);
    PoolOptions po;
    po.initial_size = 16ull << 20;
    po.max_size = 1ull << 30;
    ASSERT_TRUE(Pool::Create(path_.str(), po, &pool_).ok());
    IndexOptions io;
    if (GetParam().u64) io.key_type = KeyType::kU64;
    ASSERT_TRUE(CreateIndex(*pool_, "idx", GetParam().kind, io, &idx_).ok());
  }
  void TearDown() override {
    idx_.reset();
    if (pool_) { EXPECT_TRUE(pool_->Close().ok()); }
    SetGlobalIndexLock(false);
  }
  // Every allocated block is reachable and every reachable block allocated (no leak, no loss).
  void ExpectAllocatedIsReachable() {
    RootInfo ri;
    ASSERT_TRUE(pool_->FindRoot("idx", &ri).ok());
    std::set<uint64_t> reach, alloc;
    FindIndexKind(GetParam().kind)->visit(*pool_, ri.off, [&](uint64_t o) { reach.insert(o); });
    pool_->allocator().ForEachAllocated([&](uint64_t o, size_t) { alloc.insert(o); });
    EXPECT_EQ(alloc.size(), reach.size());
    EXPECT_TRUE(alloc == reach);
  }
  test::TempPath path_{"conc"};
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Index> idx_;
};

// Key ids: [0, kStable) inserted before the threads start and never removed; [kStable,
// kStable + kContended) inserted by every writer at once (exactly one Insert each succeeds);
// the rest owned by writer (id % kWriters): inserted, upserted and removed by that writer only,
// which keeps an exact model of them.
TEST_P(ConcurrentTest, CheckedStress) {
  constexpr int kWriters = 2, kReaders = 2;
  constexpr size_t kStable = 1500, kContended = 500, kOwned = 3000;
  // Global-lock mode: a tenth of the operations. Its writers take the index lock exclusively
  // and wait behind the readers' and the scanner's shared holds (glibc's rwlock prefers
  // readers), so 30,000 operations a writer took 55-110 s; the checks are the same (every
  // contended key reached more than 300 times, owned keys inserted, upserted and removed).
  const int ops_per_writer = (GetParam().global_lock ? 3000 : 30000) / kScale;
  const auto keys = MakeKeys(kStable + kContended + kOwned, 7, GetParam().u64);
  std::set<std::string> stable_sorted;
  for (size_t i = 0; i < kStable; ++i) {
    ASSERT_TRUE(idx_->Insert(keys[i], Val(i, 0)).ok());
    stable_sorted.insert(keys[i]);
  }
  std::vector<std::atomic<int>> wins(kContended);
  std::vector<std::map<size_t, uint64_t>> models(kWriters);
  std::atomic<bool> writers_done{false};
  std::atomic<uint64_t> errors{0}, lookups{0}, scans{0};
  std::atomic<int> started{0}, readers_going{0};  // readers_going: readers and scanner past their first batch
  const int nthreads = kWriters + kReaders + 1;
  auto fail = [&](const std::string& what) {
    if (errors.fetch_add(1) < 10) ADD_FAILURE() << what;
  };
  auto hex = [](const std::string& k) {
    std::string o;
    char b[4];
    for (unsigned char c : k) std::snprintf(b, sizeof b, "%02x", c), o += b;
    return o;
  };
  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; ++w)
    ts.emplace_back([&, w] {
      started++;
      while (started.load() < nthreads) std::this_thread::yield();
      // The readers and the scanner are running before the first write (so they overlap the
      // writers even when the writers' operations are few: global-lock mode).
      while (readers_going.load() < kReaders + 1) std::this_thread::yield();
      std::mt19937_64 rng(100 + w);
      auto& model = models[w];
      size_t next_contended = 0;
      for (int op = 0; op < ops_per_writer; ++op) {
        if (op % 8 == 0 && next_contended < kContended) {
          // Contended: every writer inserts the same keys in the same order.
          const size_t id = kStable + next_contended++;
          Status s = idx_->Insert(keys[id], Val(id, 1));
          if (s.ok()) wins[id - kStable]++;
          else if (!s.IsAlreadyExists()) fail("contended insert: " + s.ToString());
          continue;
        }
        size_t id = kStable + kContended + rng() % kOwned;
        id -= (id - kStable - kContended) % kWriters;  // round down to an id of this writer:
        id += w;
        if (id >= keys.size()) continue;
        const std::string& k = keys[id];
        const uint64_t v = Val(id, op);
        const bool present = model.count(id) != 0;
        switch (rng() % 3) {
          case 0: {
            Status s = idx_->Insert(k, v);
            if (present ? !s.IsAlreadyExists() : !s.ok()) fail("insert " + hex(k) + ": " + s.ToString());
            if (!present && s.ok()) model[id] = v;
            break;
          }
          case 1: {
            bool inserted = false;
            Status s = idx_->Upsert(k, v, &inserted);
            if (!s.ok() || inserted == present) fail("upsert " + hex(k) + ": " + s.ToString());
            model[id] = v;
            break;
          }
          default: {
            Status s = idx_->Remove(k);
            if (present ? !s.ok() : !s.IsNotFound()) fail("remove " + hex(k) + ": " + s.ToString());
            model.erase(id);
          }
        }
      }
    });
  for (int r = 0; r < kReaders; ++r)
    ts.emplace_back([&, r] {
      started++;
      while (started.load() < nthreads) std::this_thread::yield();
      std::mt19937_64 rng(200 + r);
      bool going = false;
      while (!writers_done.load()) {
        for (int i = 0; i < 64; ++i) {
          const size_t id = rng() % keys.size();
          uint64_t v = 0;
          Status s = idx_->Lookup(keys[id], &v);
          lookups++;
          if (id < kStable) {
            // Inserted before this lookup began and never removed: always found, unchanged.
            if (!s.ok() || v != Val(id, 0)) fail("stable key " + hex(keys[id]) + " lost: " + s.ToString());
          } else if (s.ok() && IdOf(v) != id) {
            fail("key " + hex(keys[id]) + " has another key's value");
          } else if (!s.ok() && !s.IsNotFound()) {
            fail("lookup: " + s.ToString());
          }
        }
        if (!going) going = true, readers_going++;
      }
    });
  ts.emplace_back([&] {
    started++;
    while (started.load() < nthreads) std::this_thread::yield();
    std::mt19937_64 rng(300);
    bool going = false;
    while (!writers_done.load()) {
      const std::string start = keys[rng() % keys.size()].substr(0, 1 + rng() % 3);
      std::vector<std::string> got;
      bool bad_value = false;
      Status s = idx_->Scan(start, nullptr, 300, [&](std::string_view k, uint64_t v) {
        got.emplace_back(k);
        if (IdOf(v) >= keys.size() || keys[IdOf(v)] != k) bad_value = true;
        return true;
      });
      scans++;
      if (!going) going = true, readers_going++;
      if (!s.ok()) fail("scan: " + s.ToString());
      if (bad_value) fail("scan returned a value of another key");
      for (size_t i = 1; i < got.size(); ++i)
        if (CompareKeys(got[i - 1], got[i]) >= 0) {
          fail("scan out of order: " + hex(got[i - 1]) + " then " + hex(got[i]));
          break;
        }
      if (!got.empty() && CompareKeys(got.front(), start) < 0) fail("scan returned a key below start");
      // Every stable key in the range covered must be there.
      const std::set<std::string> seen(got.begin(), got.end());
      auto it = stable_sorted.lower_bound(start);
      for (; it != stable_sorted.end(); ++it) {
        if (got.size() == 300 && CompareKeys(*it, got.back()) > 0) break;
        if (!seen.count(*it)) {
          fail("scan from " + hex(start) + " missed stable key " + hex(*it));
          break;
        }
      }
    }
  });
  for (int w = 0; w < kWriters; ++w) ts[w].join();
  writers_done = true;
  for (size_t i = kWriters; i < ts.size(); ++i) ts[i].join();
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_GT(lookups.load(), 0u);
  EXPECT_GT(scans.load(), 0u);
  size_t contended_done = 0;
  for (size_t c = 0; c < kContended; ++c) {
    const int n = wins[c].load();
    if (n == 0) continue;  // not reached by the writers (too few operations)
    ++contended_done;
    EXPECT_EQ(n, 1) << "contended key " << c << ": " << n << " inserts succeeded";
  }
  EXPECT_GT(contended_done, 0u);
  // Final content equals the reference.
  test::Model ref;
  for (size_t i = 0; i < kStable; ++i) ref[keys[i]] = Val(i, 0);
  for (size_t c = 0; c < kContended; ++c)
    if (wins[c].load()) ref[keys[kStable + c]] = Val(kStable + c, 1);
  for (const auto& m : models)
    for (const auto& [id, v] : m) ref[keys[id]] = v;
  // Size, a Lookup of every key, the full scan, Check (the shared harness).
  test::ExpectSame(*idx_, ref, "final content");
  ExpectAllocatedIsReachable();
}

// Check, Stats and the first Size() exclude writers (IndexModeLock::kQuiesce: the writer gate's
// QuiesceWriters, or the index lock in global-lock mode) while writers insert and remove (for
// fastfair: deletes that rebalance, which quiesce the writers too). Check compares the keys it
// walks with Size(), so a writer that ran during it makes it fail (a mutant whose kQuiesce
// waits for nobody fails here); Stats runs beside them too; at the end the content must equal
// the writers' models. Keys over the full byte range (MakeKeys).
TEST_P(ConcurrentTest, QuiescersBesideWriters) {
  constexpr int kWriters = 2;
  const size_t kStable = 20000 / kScale;  // a tree large enough for a Check to take a while
  constexpr size_t kOwned = 2000;
  const int ops_per_writer = 20000 / kScale;
  const uint64_t min_checks = 40 / kScale;  // the writers go on until the checker did as many
  const auto keys = MakeKeys(kStable + kOwned, 11, GetParam().u64);
  for (size_t i = kOwned; i < keys.size(); ++i) ASSERT_TRUE(idx_->Insert(keys[i], Val(i, 0)).ok());
  std::vector<std::map<size_t, uint64_t>> models(kWriters);
  std::atomic<bool> writers_done{false};
  std::atomic<uint64_t> errors{0}, checks{0}, progress{0};
  std::atomic<int> started{0};
  const int nthreads = kWriters + 1;
  auto fail = [&](const std::string& what) {
    if (errors.fetch_add(1) < 10) ADD_FAILURE() << what;
  };
  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; ++w)
    ts.emplace_back([&, w] {
      started++;
      while (started.load() < nthreads) std::this_thread::yield();
      std::mt19937_64 rng(400 + w);
      auto& model = models[w];
      for (int op = 0; op < ops_per_writer || checks.load() < min_checks; ++op) {
        progress.fetch_add(1, std::memory_order_relaxed);
        size_t id = rng() % kOwned;
        id -= id % kWriters;
        id += w;
        if (id >= keys.size()) continue;
        const bool present = model.count(id) != 0;
        // Inserts twice as often as removes: the tree grows (splits) and shrinks (merges).
        if (rng() % 3 != 0) {
          bool inserted = false;
          Status s = idx_->Upsert(keys[id], Val(id, op), &inserted);
          if (!s.ok() || inserted == present) fail("upsert: " + s.ToString());
          model[id] = Val(id, op);
        } else {
          Status s = idx_->Remove(keys[id]);
          if (present ? !s.ok() : !s.IsNotFound()) fail("remove: " + s.ToString());
          model.erase(id);
        }
      }
    });
  ts.emplace_back([&] {
    started++;
    while (started.load() < nthreads) std::this_thread::yield();
    (void)idx_->Size();  // the first count (fastfair: a walk of the leaves, writers quiesced)
    while (!writers_done.load()) {
      // Let the writers run between two quiesces (back to back, the quiescer starves them).
      const uint64_t next = progress.load() + 200;
      while (progress.load() < next && !writers_done.load()) std::this_thread::yield();
      std::string report;
      Status s = idx_->Check(&report);
      if (!s.ok()) fail("Check beside writers: " + s.ToString() + " " + report);
      const IndexStats st = idx_->Stats();
      if (st.keys < kStable || st.keys > kStable + kOwned) fail("Stats beside writers: " + std::to_string(st.keys) + " keys");
      checks++;
    }
  });
  for (int w = 0; w < kWriters; ++w) ts[w].join();
  writers_done = true;
  ts.back().join();
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_GE(checks.load(), min_checks);
  RecordProperty("checks", static_cast<int>(checks.load()));
  test::Model ref;
  for (size_t i = kOwned; i < keys.size(); ++i) ref[keys[i]] = Val(i, 0);
  for (const auto& m : models)
    for (const auto& [id, v] : m) ref[keys[id]] = v;
  test::ExpectSame(*idx_, ref, "final content");
  ExpectAllocatedIsReachable();
}

// A scan callback may write to the index it scans (no lock is held while it runs). Run with
// a deadline: a deadlock fails the test instead of hanging the suite.
TEST_P(ConcurrentTest, ScanCallbackThatWritesDoesNotDeadlock) {
  const auto keys = MakeKeys(2000, 11, GetParam().u64);
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_TRUE(idx_->Insert(keys[i], Val(i, 0)).ok());
  auto fut = std::async(std::launch::async, [&] {
    size_t n = 0;
    Status s = idx_->Scan("", nullptr, SIZE_MAX, [&](std::string_view k, uint64_t v) {
      // Remove the key just seen and insert a key after it (which the scan may or may not see).
      if (!idx_->Remove(k).ok()) return false;
      std::string after(k);
      if (GetParam().u64) after.back() = static_cast<char>(after.back() + 1);  // (8 bytes; may exist)
      else after += '\x01';
      (void)idx_->Upsert(after, v);
      return ++n < 1000;
    });
    return s.ok() ? n : 0;
  });
  if (fut.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "scan callback that writes deadlocked (%s)\n", GetParam().kind);
    std::_Exit(1);
  }
  EXPECT_EQ(fut.get(), 1000u);
  std::string report;
  EXPECT_TRUE(idx_->Check(&report).ok()) << report;
  ExpectAllocatedIsReachable();
}

INSTANTIATE_TEST_SUITE_P(Radix, ConcurrentTest,
                         testing::Values(Param{"woart", false}, Param{"artcow", false}, Param{"wort", false},
                                         Param{"roart", false}, Param{"woart", true}, Param{"artcow", true},
                                         Param{"wort", true}, Param{"roart", true}),
                         Name);
// fastfair in the concurrent mode only: in the global-lock mode its longer scans keep the
// index's reader-writer lock shared almost always, writers starve (40-50 s on a loaded machine)
// and the mode is kept for benchmark comparisons only.
// vart: the volatile ART (optimistic lock coupling in DRAM; nothing of it is in the pool).
INSTANTIATE_TEST_SUITE_P(Volatile, ConcurrentTest,
                         testing::Values(Param{"vart", false}, Param{"vart", true}, Param{"vart", false, true}), Name);
INSTANTIATE_TEST_SUITE_P(BTree, ConcurrentTest,
                         testing::Values(Param{"fastfair", false}, Param{"fastfair", false, true}), Name);

}  // namespace
}  // namespace wort
