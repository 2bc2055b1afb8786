// Issue 31: the allocator under concurrent allocation, free and pool growth, with checked
// accounting. Several threads allocate blocks of mixed size classes (and a few large runs),
// stamp each with (thread, sequence), free a random part of what they hold (checking the stamp:
// a block handed to two threads at once would be overwritten), while the pool grows from one
// chunk (growth runs outside the allocator's lock: the others keep refilling and freeing).
// Then: no two live blocks overlap, the allocated set equals the live set exactly (thread caches
// drained at thread exit), the pool's Check is clean, and after freeing everything nothing is
// allocated; Allocator::Stats runs beside the threads throughout. Run under ThreadSanitizer by
// scripts/tsan.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "wort/alloc.h"
#include "wort/pool.h"

namespace wort {
namespace {

struct Live {
  uint64_t off;
  size_t size;
  uint64_t stamp;
};

// A pool of `initial` bytes at `path` that may grow to `max` (0: the default limit).
void CreatePool(const std::string& path, uint64_t initial, uint64_t max, std::unique_ptr<Pool>* pool) {
  PoolOptions po;
  po.initial_size = initial;
  if (max != 0) po.max_size = max;
  ASSERT_TRUE(Pool::Create(path, po, pool).ok());
}

// A block of `size` bytes for thread t's i-th operation, stamped with (t, i) in its first and
// last words (kept in *mine); false if the allocation failed.
bool AllocStamped(Pool& pool, size_t size, int t, int i, std::vector<Live>* mine) {
  uint64_t off = 0;
  if (!pool.allocator().Alloc(size, &off).ok()) return false;
  const uint64_t stamp = (uint64_t(t) << 48) | uint64_t(i);
  std::memcpy(pool.at<char>(off), &stamp, 8);
  std::memcpy(pool.at<char>(off) + size - 8, &stamp, 8);
  mine->push_back({off, size, stamp});
  return true;
}
// Frees the k-th block of *mine (moving the last into its place); false if it lost its stamp
// (another thread was handed the block and wrote it).
bool FreeStamped(Pool& pool, std::vector<Live>* mine, size_t k) {
  const Live b = (*mine)[k];
  uint64_t first = 0, last = 0;
  std::memcpy(&first, pool.at<char>(b.off), 8);
  std::memcpy(&last, pool.at<char>(b.off) + b.size - 8, 8);
  (*mine)[k] = mine->back();
  mine->pop_back();
  pool.allocator().Free(b.off);
  return first == b.stamp && last == b.stamp;
}
// The threads' blocks at the end: each still carries its stamp (first and last word), none is
// handed out twice or overlaps another, each is as large as asked, and the allocated set is
// exactly this set. Returns them by offset.
std::map<uint64_t, Live> ExpectLiveSetExact(Pool& pool, const std::vector<std::vector<Live>>& live) {
  Allocator& a = pool.allocator();
  std::map<uint64_t, Live> all;
  for (auto& v : live)
    for (const Live& b : v) {
      uint64_t got = 0;
      std::memcpy(&got, pool.at<char>(b.off), 8);
      EXPECT_EQ(got, b.stamp);
      std::memcpy(&got, pool.at<char>(b.off) + b.size - 8, 8);
      EXPECT_EQ(got, b.stamp);
      EXPECT_TRUE(all.emplace(b.off, b).second) << "block " << b.off << " handed out twice";
    }
  uint64_t prev_end = 0;
  for (const auto& [off, b] : all) {
    EXPECT_GE(off, prev_end) << "blocks overlap at " << off;
    EXPECT_GE(a.UsableSize(off), b.size);
    prev_end = off + a.UsableSize(off);
  }
  uint64_t n = 0, extra = 0;
  a.ForEachAllocated([&](uint64_t off, size_t) {
    ++n;
    if (!all.count(off)) ++extra;
  });
  EXPECT_EQ(extra, 0u);
  EXPECT_EQ(n, all.size());
  return all;
}
// The pool's Check is clean, and it closes.
void ExpectCheckedAndClosed(Pool& pool) {
  std::string rep;
  EXPECT_TRUE(pool.Check(&rep).ok()) << rep;
  EXPECT_TRUE(pool.Close().ok());
}

TEST(AllocStress, ConcurrentAllocFreeAndGrowthKeepExactAccounting) {
  test::TempPath path("alloc-stress");
  std::unique_ptr<Pool> pool;
  // One chunk: the threads below grow the file many times.
  ASSERT_NO_FATAL_FAILURE(CreatePool(path, 1, 2ull << 30, &pool));
  Allocator& a = pool->allocator();
  const uint64_t size0 = pool->size();
  constexpr int kThreads = 4;
  const int kOps = 60000 / test::kSanitizerScale;
  static constexpr size_t kSizes[] = {16, 64, 100, 256, 640, 1024, 3000, 8192, 40000};
  std::vector<std::vector<Live>> live(kThreads);
  std::atomic<uint64_t> errors{0};
  std::atomic<int> go{0};
  auto worker = [&](int t) {
    std::mt19937_64 rng(t * 7 + 1);
    auto& mine = live[t];
    go.fetch_add(1);
    while (go.load() < kThreads) {
    }
    for (int i = 0; i < kOps; ++i) {
      if (mine.empty() || rng() % 3 != 0) {
        size_t sz = kSizes[rng() % std::size(kSizes)];
        if (i % 997 == 0) sz = 300 * 1024;  // a large run now and then
        if (!AllocStamped(*pool, sz, t, i, &mine)) ++errors;
      } else {
        if (!FreeStamped(*pool, &mine, rng() % mine.size())) ++errors;
      }
    }
  };
  // Stats beside the allocating threads (it reads their caches' counts: Bin::count, atomic; it
  // read their vectors before, a data race under TSan): its figures stay within what the
  // threads can hold (no underflow of blocks_allocated by the cached blocks subtracted).
  std::atomic<bool> done{false};
  std::atomic<uint64_t> stats_calls{0}, stats_errors{0};
  std::thread stats([&] {
    while (!done.load()) {
      const AllocStats st = a.Stats();
      if (st.blocks_allocated > uint64_t(kThreads) * kOps || st.bytes_in_thread_caches > pool->size()) ++stats_errors;
      ++stats_calls;
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) ts.emplace_back(worker, t);
  for (auto& th : ts) th.join();  // each thread's cache goes back to the allocator at exit
  done = true;
  stats.join();
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_GT(stats_calls.load(), 0u);
  EXPECT_EQ(stats_errors.load(), 0u);
  EXPECT_GT(pool->size(), size0);

  // Every live block still carries its stamp; none overlaps another; the allocated set is
  // exactly the live set.
  const std::map<uint64_t, Live> all = ExpectLiveSetExact(*pool, live);
  const AllocStats st = a.Stats();
  EXPECT_EQ(st.blocks_allocated, all.size());
  EXPECT_GT(st.grows, 1u);
  EXPECT_GT(st.lock_acquisitions, 0u);
  EXPECT_LE(st.lock_waits, st.lock_acquisitions);
  RecordProperty("lock_acquisitions", std::to_string(st.lock_acquisitions));
  RecordProperty("lock_waits", std::to_string(st.lock_waits));
  RecordProperty("grows", std::to_string(st.grows));
  std::string rep;
  EXPECT_TRUE(pool->Check(&rep).ok()) << rep;

  // Free everything (from this thread): nothing stays allocated.
  for (const auto& [off, b] : all) a.Free(off);
  a.Trim();
  EXPECT_EQ(a.Stats().blocks_allocated, 0u);
  uint64_t left = 0;
  a.ForEachAllocated([&](uint64_t, size_t) { ++left; });
  EXPECT_EQ(left, 0u);
  ExpectCheckedAndClosed(*pool);
}

// h70 (issue 31): growth ahead of the writers. Four threads allocate stamped blocks (every 4th
// freed again, some large runs) from a pool of 24 MiB that grows to about 200 MiB (30 MiB under
// TSan) while they run: the free chunks fall under the watermark again and again, and each time
// one thread grows the file while the others go on. Checked: every live block keeps its stamp, no two overlap,
// the allocated set is the live set, Check is clean, and growths were made ahead.
TEST(AllocStress, WritersAllocateWhileThePoolGrowsAhead) {
  test::TempPath path("alloc-ahead");
  std::unique_ptr<Pool> pool;
  ASSERT_NO_FATAL_FAILURE(CreatePool(path, 24ull << 20, 1ull << 30, &pool));
  Allocator& a = pool->allocator();
  const uint64_t size0 = pool->size();
  constexpr int kThreads = 4;
  const int kOps = 48000 / test::kSanitizerScale;
  static constexpr size_t kSizes[] = {64, 200, 1000, 4000};
  std::vector<std::vector<Live>> live(kThreads);
  std::atomic<uint64_t> errors{0};
  std::atomic<int> go{0};
  auto worker = [&](int t) {
    std::mt19937_64 rng(t * 13 + 5);
    auto& mine = live[t];
    go.fetch_add(1);
    while (go.load() < kThreads) {
    }
    for (int i = 0; i < kOps; ++i) {
      if (i % 4 == 3 && !mine.empty()) {
        if (!FreeStamped(*pool, &mine, rng() % mine.size())) ++errors;
        continue;
      }
      const size_t sz = i % 1999 == 0 ? 600 * 1024 : kSizes[rng() % std::size(kSizes)];
      if (!AllocStamped(*pool, sz, t, i, &mine)) ++errors;
    }
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) ts.emplace_back(worker, t);
  for (auto& th : ts) th.join();
  EXPECT_EQ(errors.load(), 0u);
  ExpectLiveSetExact(*pool, live);
  const AllocStats st = a.Stats();
  EXPECT_GT(pool->size(), size0);  // ~200 MiB (~30 MiB under TSan's smaller count)
  EXPECT_GT(st.grows_ahead, 0u);
  EXPECT_LE(st.grows_ahead, st.grows);
  RecordProperty("grows", std::to_string(st.grows));
  RecordProperty("grows_ahead", std::to_string(st.grows_ahead));
  RecordProperty("grow_waits", std::to_string(st.grow_waits));
  ExpectCheckedAndClosed(*pool);
}

// One writer never waits for growth once the pool has kAheadMinChunks (16) chunks: each growth is
// made ahead (when the free chunks fall under the watermark, before they run out), so no
// allocation finds the pool without a free chunk. Before h70 every growth of this load was a
// wait (grow_waits == grows).
TEST(AllocStress, OneWriterNeverWaitsForGrowth) {
  test::TempPath path("alloc-ahead1");
  std::unique_ptr<Pool> pool;
  ASSERT_NO_FATAL_FAILURE(CreatePool(path, 24ull << 20, 1ull << 30, &pool));
  Allocator& a = pool->allocator();
  while (pool->size() < pool->heap_offset() + (160ull << 20)) {
    uint64_t off;
    ASSERT_TRUE(a.Alloc(3000, &off).ok());
    std::memset(pool->at<char>(off), 0xa7, 3000);
  }
  const AllocStats st = a.Stats();
  EXPECT_GE(st.grows, 5u);
  EXPECT_EQ(st.grows_ahead, st.grows);
  EXPECT_EQ(st.grow_waits, 0u);
  EXPECT_EQ(st.grow_wait_ns, 0u);
  EXPECT_GT(st.grow_ns, 0u);
  ExpectCheckedAndClosed(*pool);
}

// h72: a growth ahead starts while at least as many chunks are free as it adds (before: at an
// eighth of the file free, less than the step below 512 MiB, so writers faster than the grower
// found no free chunk), and a heap past 512 MiB grows by an eighth of itself, not by 64 MiB.
// One thread takes whole 1 MiB chunks (600 KiB blocks) from a 128 MiB pool up to ~640 MiB:
// before each growth ahead the free chunks were at least the chunks it then added, and each
// added max(min(a quarter, 64), an eighth) of the file. Never a wait.
TEST(AllocStress, GrowthAheadStartsWhileAStepIsFreeAndScalesWithTheHeap) {
  test::TempPath path("alloc-ahead-step");
  std::unique_ptr<Pool> pool;
  ASSERT_NO_FATAL_FAILURE(CreatePool(path, 128ull << 20, 2ull << 30, &pool));
  Allocator& a = pool->allocator();
  const auto chunks = [&] { return (pool->size() - pool->heap_offset()) / Pool::kChunkSize; };
  uint64_t growths = 0, eighths = 0;
  while (chunks() < 600) {
    const AllocStats before = a.Stats();
    const uint64_t nfile = chunks();
    uint64_t off;
    ASSERT_TRUE(a.Alloc(600u << 10, &off).ok());
    const AllocStats after = a.Stats();
    if (after.grows_ahead == before.grows_ahead) continue;
    ++growths;
    const uint64_t added = chunks() - nfile;
    EXPECT_EQ(added, std::max<uint64_t>(std::min<uint64_t>(nfile / 4, 64), nfile / 8)) << "file of " << nfile << " chunks";
    EXPECT_GE(before.chunks_free, added) << "a growth ahead of " << added << " chunks began with " << before.chunks_free
                                         << " free (file of " << nfile << " chunks)";
    eighths += nfile / 8 > 64;
  }
  EXPECT_GE(growths, 8u);
  EXPECT_GE(eighths, 1u);  // at least one step past 512 MiB
  const AllocStats st = a.Stats();
  EXPECT_EQ(st.grows, st.grows_ahead);
  EXPECT_EQ(st.grow_waits, 0u);
  ExpectCheckedAndClosed(*pool);
}

// A pool that grows ahead up to its size limit (and, second, up to a growth limit below it) is
// full exactly as before: the file ends at the limit, the allocation that finds only the
// reserve gets the reserve's PoolFull, and the kReserveChunks chunks held back are still there
// for a ReserveScope (one chunk each for two new size classes, a third class is refused).
TEST(AllocStress, GrowthAheadStopsAtTheLimitAndKeepsTheReserve) {
  for (const bool growth_limit : {false, true}) {
    SCOPED_TRACE(growth_limit ? "growth limit" : "size limit");
    test::TempPath path("alloc-ahead-full");
    std::unique_ptr<Pool> pool;
    ASSERT_NO_FATAL_FAILURE(CreatePool(path, 24ull << 20, growth_limit ? (1ull << 30) : (48ull << 20), &pool));
    const uint64_t limit = pool->heap_offset() + (48ull << 20);
    if (growth_limit) pool->SetGrowthLimit(limit);
    Allocator& a = pool->allocator();
    Status s;
    uint64_t blocks = 0;
    for (;;) {
      uint64_t off;
      s = a.Alloc(4000, &off);
      if (!s.ok()) break;
      ++blocks;
    }
    EXPECT_TRUE(s.IsPoolFull()) << s.ToString();
    EXPECT_NE(s.message().find("held back for overwrites and deletes"), std::string::npos) << s.ToString();
    if (growth_limit) {
      EXPECT_EQ(pool->size(), limit);
    } else {  // the size limit: as many whole chunks as it holds
      EXPECT_LE(pool->size(), pool->max_size());
      EXPECT_GT(pool->size() + Pool::kChunkSize, pool->max_size());
    }
    EXPECT_GT(blocks, 10000u);
    AllocStats st = a.Stats();
    EXPECT_EQ(st.chunks_free, Allocator::kReserveChunks);
    EXPECT_GT(st.grows_ahead, 0u);
    {
      Allocator::ReserveScope rs;
      uint64_t off;
      EXPECT_TRUE(a.Alloc(100, &off).ok());
      EXPECT_TRUE(a.Alloc(20000, &off).ok());
      EXPECT_TRUE(a.Alloc(9000, &off).IsPoolFull());
    }
    st = a.Stats();
    EXPECT_EQ(st.chunks_free, 0u);
    ExpectCheckedAndClosed(*pool);
  }
}

// h70: a refill of a small class takes 64 KiB of blocks, at most 256 (64 before): 2,560 blocks
// of 64 bytes take the allocator's lock 9 times (39 before), and freeing them all returns
// them in batches of as many.
TEST(AllocStress, SmallClassRefillsTakeTheLockOncePer256Blocks) {
  test::TempPath path("alloc-batch");
  std::unique_ptr<Pool> pool;
  ASSERT_NO_FATAL_FAILURE(CreatePool(path, 24ull << 20, 0, &pool));
  Allocator& a = pool->allocator();
  uint64_t off;
  ASSERT_TRUE(a.Alloc(64, &off).ok());  // the thread's cache exists; one batch taken
  a.Free(off);
  const uint64_t t0 = a.Stats().lock_acquisitions;
  std::vector<uint64_t> blocks;
  for (int i = 0; i < 2560; ++i) {
    ASSERT_TRUE(a.Alloc(64, &off).ok());
    blocks.push_back(off);
  }
  const uint64_t t1 = a.Stats().lock_acquisitions;
  EXPECT_EQ(t1 - t0, 9u);  // the first 256 come from the cache, then 256 blocks a refill
  for (uint64_t b : blocks) a.Free(b);
  EXPECT_LE(a.Stats().lock_acquisitions - t1, 10u);  // frees go back 256 at a time
  ExpectCheckedAndClosed(*pool);
}

}  // namespace
}  // namespace wort
