// The allocator: randomized alloc/free against a model; clean reopen keeps every block; crash
// images recover with no leak and nothing reachable freed; instant restart; SIGKILL at random
// moments while allocating and freeing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "index/registry.h"
#include "wort/alloc.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort {
namespace {

using test::TempPath;

// A test "index": a root block holding kSlots offsets of blocks (0 = empty). Each linked block
// starts with its own offset and size (so that recovery can be checked for overlap and content).
// Write order: block filled -> persist -> slot store8 -> persist (link); unlink: slot store8 0 ->
// persist -> Free.
constexpr uint32_t kBlockListType = 1001;
constexpr size_t kSlots = 512;
struct BlockListRoot {
  uint64_t magic;
  uint64_t slots[kSlots];
};
std::atomic<int> g_visit_delay_ms{0};

void VisitBlockList(const Pool& p, uint64_t root, const std::function<void(uint64_t)>& mark) {
  if (int d = g_visit_delay_ms.load()) std::this_thread::sleep_for(std::chrono::milliseconds(d));
  mark(root);
  const auto* r = p.at<BlockListRoot>(root);
  for (size_t i = 0; i < kSlots; ++i) {
    const uint64_t off = pm::load8(&r->slots[i]);
    if (off != 0 && p.contains(off, 64)) mark(off);
  }
}
const IndexKind kBlockList = {"test-blocklist", kBlockListType, "test", false, nullptr, nullptr, &VisitBlockList};
const bool kReg = RegisterIndexKind(&kBlockList);

PoolOptions Opts(bool background = false) {
  PoolOptions o;
  o.initial_size = 4 << 20;
  o.max_size = 256 << 20;
  o.background_recovery = background;
  return o;
}

BlockListRoot* MakeRoot(Pool& p) {
  uint64_t off;
  EXPECT_TRUE(p.allocator().AllocZeroed(sizeof(BlockListRoot), &off).ok());
  auto* r = p.at<BlockListRoot>(off);
  r->magic = 42;
  pm::persist(r, sizeof(*r));
  EXPECT_TRUE(p.AddRoot("list", kBlockListType, off).ok());
  return r;
}
BlockListRoot* GetRoot(Pool& p) {
  RootInfo ri;
  EXPECT_TRUE(p.FindRoot("list", &ri).ok());
  return p.at<BlockListRoot>(ri.off);
}

size_t SizeFor(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0: return 16 + rng() % 48;
    case 1: return 64 + rng() % 1000;
    case 2: return 1024 + rng() % 16000;
    default: return rng() % 50 == 0 ? (1 << 20) + rng() % (1 << 20) : 100 + rng() % 300;  // some large
  }
}

// Link a new block into slot i (correct order).
Status Link(Pool& p, BlockListRoot* r, size_t i, size_t size) {
  uint64_t off;
  WORT_RETURN_IF_ERROR(p.allocator().Alloc(size, &off));
  auto* b = p.at<uint64_t>(off);
  b[0] = off;
  b[1] = size;
  pm::persist(b, 16);
  pm::store8(&r->slots[i], off);
  pm::persist(&r->slots[i], 8);
  return Status::OK();
}
void Unlink(Pool& p, BlockListRoot* r, size_t i) {
  const uint64_t off = r->slots[i];
  pm::store8(&r->slots[i], 0);
  pm::persist(&r->slots[i], 8);
  p.allocator().Free(off);
}

// Checks the allocator invariant: allocated set == reachable set, blocks don't overlap, and each
// linked block still holds its own header.
void ExpectAllocatedEqualsReachable(Pool& p) {
  std::set<uint64_t> reach;
  RootInfo ri;
  ASSERT_TRUE(p.FindRoot("list", &ri).ok());
  VisitBlockList(p, ri.off, [&](uint64_t o) { reach.insert(o); });
  std::map<uint64_t, size_t> alloc;
  p.allocator().ForEachAllocated([&](uint64_t o, size_t n) { alloc[o] = n; });
  std::set<uint64_t> alloc_set;
  for (auto& [o, n] : alloc) alloc_set.insert(o);
  EXPECT_EQ(alloc_set, reach) << "allocated " << alloc_set.size() << " reachable " << reach.size();
  uint64_t end = 0;
  for (auto& [o, n] : alloc) {
    EXPECT_GE(o, end) << "overlapping blocks";
    EXPECT_EQ(o % 64, 0u);
    end = o + n;
  }
  auto* r = p.at<BlockListRoot>(ri.off);
  for (size_t i = 0; i < kSlots; ++i) {
    if (!r->slots[i]) continue;
    const auto* b = p.at<uint64_t>(r->slots[i]);
    EXPECT_EQ(b[0], r->slots[i]);
    EXPECT_GE(p.allocator().UsableSize(r->slots[i]), b[1]);
  }
  std::string rep;
  EXPECT_TRUE(p.Check(&rep).ok()) << rep;
}

TEST(Alloc, RandomizedAgainstAModel) {
  TempPath path;
  std::unique_ptr<Pool> p;
  ASSERT_TRUE(Pool::Create(path, Opts(), &p).ok());
  Allocator& a = p->allocator();
  std::mt19937_64 rng(7);
  std::map<uint64_t, std::pair<size_t, uint8_t>> live;  // off -> (size, fill byte)
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 100 < 55) {
      const size_t n = SizeFor(rng);
      uint64_t off;
      ASSERT_TRUE(a.Alloc(n, &off).ok());
      ASSERT_EQ(off % 64, 0u);
      ASSERT_GE(a.UsableSize(off), n);
      auto it = live.lower_bound(off);
      if (it != live.end()) { ASSERT_GE(it->first, off + n) << "overlaps the next block"; }
      if (it != live.begin()) {
        auto pr = std::prev(it);
        ASSERT_LE(pr->first + pr->second.first, off) << "overlaps the previous block";
      }
      const uint8_t fill = static_cast<uint8_t>(rng());
      std::memset(p->at(off), fill, n);
      live[off] = {n, fill};
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      const auto* c = p->at<uint8_t>(it->first);
      ASSERT_EQ(c[0], it->second.second);
      ASSERT_EQ(c[it->second.first - 1], it->second.second) << "block content changed while allocated";
      a.Free(it->first);
      live.erase(it);
    }
  }
  std::string rep;
  EXPECT_TRUE(p->Check(&rep).ok()) << rep;
  // Every allocated block is one of ours (thread-cache blocks excluded by ForEachAllocated).
  size_t n = 0;
  a.ForEachAllocated([&](uint64_t off, size_t) {
    EXPECT_TRUE(live.count(off)) << off;
    ++n;
  });
  EXPECT_EQ(n, live.size());
  for (auto& [off, v] : live) a.Free(off);
  EXPECT_EQ(a.Stats().blocks_allocated, 0u);
}

TEST(Alloc, TwoThreadsAllocateAndFreeWithoutSharingABlock) {
  TempPath path;
  std::unique_ptr<Pool> p;
  ASSERT_TRUE(Pool::Create(path, Opts(), &p).ok());
  std::vector<uint64_t> kept[2];
  std::atomic<int> errors{0};
  auto work = [&](int t) {
    std::mt19937_64 rng(t);
    std::vector<uint64_t>& mine = kept[t];
    for (int i = 0; i < 30000; ++i) {
      if (mine.empty() || rng() % 3 != 0) {
        uint64_t off;
        if (!p->allocator().Alloc(64 + (rng() % 8) * 64, &off).ok()) { ++errors; return; }
        std::memset(p->at(off), 'a' + t, 64);  // stamp: owner thread
        mine.push_back(off);
      } else {
        const size_t k = rng() % mine.size();
        if (p->at<char>(mine[k])[63] != 'a' + t) ++errors;  // someone else wrote our block
        p->allocator().Free(mine[k]);
        mine[k] = mine.back();
        mine.pop_back();
      }
    }
  };
  std::thread a(work, 0), b(work, 1);
  a.join();
  b.join();
  EXPECT_EQ(errors.load(), 0);
  std::set<uint64_t> all;
  for (int t = 0; t < 2; ++t)
    for (uint64_t o : kept[t]) {
      EXPECT_TRUE(all.insert(o).second) << "block handed out twice";
      EXPECT_EQ(p->at<char>(o)[0], 'a' + t);
    }
  std::string rep;
  EXPECT_TRUE(p->Check(&rep).ok()) << rep;
}

TEST(Alloc, CleanReopenKeepsEveryBlockAndScansNothing) {
  TempPath path;
  std::set<uint64_t> before;
  {
    std::unique_ptr<Pool> p;
    ASSERT_TRUE(Pool::Create(path, Opts(), &p).ok());
    auto* r = MakeRoot(*p);
    std::mt19937_64 rng(3);
    for (size_t i = 0; i < kSlots; ++i) ASSERT_TRUE(Link(*p, r, i, SizeFor(rng)).ok());
    for (size_t i = 0; i < kSlots; i += 3) Unlink(*p, r, i);
    p->allocator().ForEachAllocated([&](uint64_t o, size_t) { before.insert(o); });
    ASSERT_TRUE(p->Close().ok());
  }
  std::unique_ptr<Pool> p;
  ASSERT_TRUE(Pool::Open(path, Opts(), &p).ok());
  EXPECT_TRUE(p->opened_clean());
  EXPECT_TRUE(p->recovery_done());
  EXPECT_EQ(p->recovery_seconds(), 0.0);  // no GC ran
  std::set<uint64_t> after;
  p->allocator().ForEachAllocated([&](uint64_t o, size_t) { after.insert(o); });
  EXPECT_EQ(before, after);
  ExpectAllocatedEqualsReachable(*p);
  // New allocations never return a live block.
  for (int i = 0; i < 2000; ++i) {
    uint64_t off;
    ASSERT_TRUE(p->allocator().Alloc(100, &off).ok());
    ASSERT_FALSE(before.count(off));
  }
}

// Issue 35's open: a clean reopen reads no chunk header (only the chunk table), whatever the
// pool's size; each chunk's bitmap is read when that chunk is first needed, and space freed
// before the close is reused (from the old chunks, not by growing the file).
TEST(Alloc, CleanOpenReadsNoChunkHeaderAndLoadsEachChunkWhenNeeded) {
  TempPath path;
  std::vector<uint64_t> live, freed;
  {
    std::unique_ptr<Pool> p;
    ASSERT_TRUE(Pool::Create(path, Opts(), &p).ok());
    // 40 chunks of 1000-byte blocks (class 1024: 1020 a chunk), every second one freed again.
    for (int i = 0; i < 40 * 1020; ++i) {
      uint64_t off;
      ASSERT_TRUE(p->allocator().Alloc(1000, &off).ok());
      std::memset(p->at<char>(off), static_cast<char>(0x80 + i % 100), 1000);
      (i % 2 ? freed : live).push_back(off);
    }
    for (uint64_t off : freed) p->allocator().Free(off);
    ASSERT_GE(p->allocator().Stats().chunks_small, 40u);
    ASSERT_TRUE(p->Close().ok());
  }
  std::unique_ptr<Pool> p;
  ASSERT_TRUE(Pool::Open(path, Opts(), &p).ok());
  EXPECT_TRUE(p->opened_clean());
  EXPECT_EQ(p->allocator().ChunkHeadersRead(), 0u);
  const uint64_t size = p->size();
  // A free loads the one chunk it returns a block to.
  freed.push_back(live.back());
  p->allocator().Free(live.back());
  live.pop_back();
  // (The free sits in the thread cache until a batch goes back: Trim returns it now.)
  p->allocator().Trim();
  EXPECT_EQ(p->allocator().ChunkHeadersRead(), 1u);
  // Allocations of that class take free blocks of the old chunks (loading them as they go):
  // never a live block, and no growth.
  std::set<uint64_t> live_set(live.begin(), live.end());
  for (size_t i = 0; i < freed.size() / 2; ++i) {
    uint64_t off;
    ASSERT_TRUE(p->allocator().Alloc(1000, &off).ok());
    ASSERT_FALSE(live_set.count(off)) << "a live block handed out again";
  }
  EXPECT_EQ(p->size(), size);
  EXPECT_LT(p->allocator().ChunkHeadersRead(), 40u);
  // Stats and Check read the rest; every live block kept its bytes.
  const AllocStats st = p->allocator().Stats();
  EXPECT_EQ(st.blocks_allocated, live.size() + freed.size() / 2);
  EXPECT_GE(p->allocator().ChunkHeadersRead(), 40u);
  for (size_t i = 0; i < live.size(); ++i)
    ASSERT_EQ(p->at<unsigned char>(live[i])[999], static_cast<unsigned char>(0x80 + (2 * i) % 100));
  std::string report;
  EXPECT_TRUE(p->Check(&report).ok()) << report;
}

TEST(Alloc, CrashImageRecoversWithNoLeakAndNothingReachableFreed) {
  TempPath path, image("img");
  std::unique_ptr<Pool> p;
  ASSERT_TRUE(Pool::Create(path, Opts(), &p).ok());
  auto* r = MakeRoot(*p);
  std::mt19937_64 rng(11);
  for (size_t i = 0; i < kSlots; ++i) ASSERT_TRUE(Link(*p, r, i, SizeFor(rng)).ok());
  for (size_t i = 0; i < kSlots; i += 2) Unlink(*p, r, i);
  // Allocations cut by the "crash": allocated, never linked.
  for (int i = 0; i < 300; ++i) {
    uint64_t off;
    ASSERT_TRUE(p->allocator().Alloc(SizeFor(rng), &off).ok());
  }
  test::CopyFile(path, image);  // the pool as a crash would leave it (clean flag 0)
  std::unique_ptr<Pool> q;
  ASSERT_TRUE(Pool::Open(image, Opts(), &q).ok());
  EXPECT_FALSE(q->opened_clean());
  ASSERT_TRUE(q->WaitForRecovery().ok());
  ExpectAllocatedEqualsReachable(*q);
  // The recovered pool allocates and closes cleanly, and then reopens without a GC.
  auto* qr = GetRoot(*q);
  for (size_t i = 0; i < kSlots; i += 2) ASSERT_TRUE(Link(*q, qr, i, SizeFor(rng)).ok());
  ExpectAllocatedEqualsReachable(*q);
  ASSERT_TRUE(q->Close().ok());
  ASSERT_TRUE(Pool::Open(image, Opts(), &q).ok());
  EXPECT_TRUE(q->opened_clean());
  ExpectAllocatedEqualsReachable(*q);
}

// Issue 35's restart after a crash: the opening thread's work does not grow with the pool. Its
// page faults in Pool::Open of a crash image holding 6 SMALL chunks and one holding 180 differ
// by a few pages at most (the chunk table and the per-chunk DRAM metadata); the old chunks'
// bitmaps are made by the GC thread. (Made in the opener, two 2 KiB bitmaps a chunk, they were
// about a page fault per chunk: 1,400 at 10M server items.) Counted, not timed.
TEST(Alloc, OpenAfterACrashDoesNoWorkPerChunkInTheOpener) {
  auto faults_of_open = [](int chunks) -> long {
    TempPath path, image("img");
    {
      std::unique_ptr<Pool> p;
      EXPECT_TRUE(Pool::Create(path, Opts(), &p).ok());
      if (!p) return -1;
      for (int i = 0; i < chunks * 15; ++i) {  // 64 KiB blocks: 15 to a chunk
        uint64_t off;
        EXPECT_TRUE(p->allocator().Alloc(64 << 10, &off).ok());
        p->at<unsigned char>(off)[0] = 0x80;
      }
      EXPECT_GE(p->allocator().Stats().chunks_small, uint64_t(chunks));
      test::CopyFile(path, image);  // the pool as a crash would leave it (clean flag 0)
    }
    rusage before{}, after{};
    getrusage(RUSAGE_THREAD, &before);
    std::unique_ptr<Pool> q;
    EXPECT_TRUE(Pool::Open(image, Opts(/*background=*/true), &q).ok());
    getrusage(RUSAGE_THREAD, &after);
    if (!q) return -1;
    EXPECT_FALSE(q->opened_clean());
    EXPECT_TRUE(q->WaitForRecovery().ok());
    EXPECT_EQ(q->allocator().Stats().blocks_allocated, 0u);  // nothing was reachable: all reclaimed
    std::string report;
    EXPECT_TRUE(q->Check(&report).ok()) << report;
    return after.ru_minflt - before.ru_minflt;
  };
  (void)faults_of_open(6);  // warm: the process's own first-time faults
  const long small = faults_of_open(6), large = faults_of_open(180);
  ASSERT_GE(small, 0);
  std::printf("page faults of Pool::Open after a crash: %ld with 6 chunks, %ld with 180\n", small, large);
  EXPECT_LE(large, small + 24) << "the opener's page faults grow with the chunks: " << small << " with 6, " << large
                               << " with 180";
}

TEST(Alloc, InstantRestartServesAllocationsWhileTheGcRuns) {
  TempPath path, image("img");
  {
    std::unique_ptr<Pool> p;
    ASSERT_TRUE(Pool::Create(path, Opts(), &p).ok());
    auto* r = MakeRoot(*p);
    std::mt19937_64 rng(5);
    for (size_t i = 0; i < kSlots; ++i) ASSERT_TRUE(Link(*p, r, i, 200).ok());
    test::CopyFile(path, image);
  }
  g_visit_delay_ms = 300;  // a slow mark phase
  std::unique_ptr<Pool> q;
  ASSERT_TRUE(Pool::Open(image, Opts(/*background=*/true), &q).ok());
  EXPECT_FALSE(q->recovery_done());
  // Reads and writes are served at once: new blocks come from fresh chunks.
  auto* r = GetRoot(*q);
  std::set<uint64_t> old(r->slots, r->slots + kSlots);
  for (size_t i = 0; i < 100; ++i) {
    const uint64_t prev = r->slots[i];
    ASSERT_EQ(q->at<uint64_t>(prev)[0], prev);
    Unlink(*q, r, i);  // deferred free
    ASSERT_TRUE(Link(*q, r, i, 200).ok());
    ASSERT_FALSE(old.count(r->slots[i])) << "an old block was handed out during recovery";
  }
  EXPECT_FALSE(q->recovery_done());
  EXPECT_GT(q->allocator().Stats().deferred_frees, 0u);
  ASSERT_TRUE(q->WaitForRecovery().ok());
  g_visit_delay_ms = 0;
  EXPECT_GE(q->recovery_seconds(), 0.25);
  ExpectAllocatedEqualsReachable(*q);
}

// Trim: a pool filled with small blocks, all freed, can hold a large block again. Without Trim
// the freed space may stay with the small class (this thread's cache, the class's reserve
// chunk); after it every wholly free chunk is FREE, and nothing live is touched.
TEST(Alloc, TrimReturnsWhollyFreeChunksForOtherSizes) {
  TempPath path("trim");
  std::unique_ptr<Pool> p;
  PoolOptions o = Opts();
  o.initial_size = 1 << 20;
  o.max_size = 12 << 20;
  ASSERT_TRUE(Pool::Create(path, o, &p).ok());
  BlockListRoot* r = MakeRoot(*p);
  ASSERT_TRUE(Link(*p, r, 0, 100).ok());  // one live small block, kept throughout
  std::vector<uint64_t> blocks;
  for (;;) {
    uint64_t off;
    Status s = p->allocator().Alloc(64, &off);
    if (s.IsPoolFull()) break;
    ASSERT_TRUE(s.ok()) << s.ToString();
    blocks.push_back(off);
  }
  ASSERT_GT(blocks.size(), 50000u);  // most of the pool
  uint64_t big = 0;
  EXPECT_TRUE(p->allocator().Alloc(4 << 20, &big).IsPoolFull());
  for (uint64_t b : blocks) p->allocator().Free(b);
  // Every chunk but the two of the root block and the live block, as one run: it fits only if
  // no chunk stays with the 64-byte class.
  // (Less the chunks held back for overwrites and deletes: see Allocator::ReserveScope.)
  const uint64_t limit_chunks = (p->max_size() - p->heap_offset()) / Pool::kChunkSize;
  const uint64_t held = limit_chunks >= Allocator::kReserveMinChunks ? Allocator::kReserveChunks : 0;
  const size_t run = (limit_chunks - 2 - held) * Pool::kChunkSize;
  p->allocator().Trim();
  Status s = Link(*p, r, 1, run);
  ASSERT_TRUE(s.ok()) << s.ToString() << " (" << limit_chunks << " chunks)";
  ExpectAllocatedEqualsReachable(*p);
  ASSERT_TRUE(p->Close().ok());
  p.reset();
  ASSERT_TRUE(Pool::Open(path, Opts(), &p).ok());
  ExpectAllocatedEqualsReachable(*p);
}

// Out of fresh space while the GC runs: the allocation fails at once with PoolFull naming the
// GC (it must not wait: its caller may hold a lock the GC's visit needs), and succeeds after
// WaitForRecovery, which reclaims what the crash left unreachable.
TEST(Alloc, NoFreshSpaceDuringTheGcIsPoolFullNotAWait) {
  TempPath path, image("img");
  PoolOptions o = Opts();
  o.initial_size = 1 << 20;
  o.max_size = 12 << 20;
  {
    std::unique_ptr<Pool> p;
    ASSERT_TRUE(Pool::Create(path, o, &p).ok());
    MakeRoot(*p);
    uint64_t off;
    while (p->allocator().Alloc(64, &off).ok()) {
    }  // the pool is full of blocks no root reaches
    test::CopyFile(path, image);
  }
  g_visit_delay_ms = 300;  // a slow mark phase
  PoolOptions bg = o;
  bg.background_recovery = true;
  std::unique_ptr<Pool> q;
  ASSERT_TRUE(Pool::Open(image, bg, &q).ok());
  uint64_t off;
  Status s;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100000 && (s = q->allocator().Alloc(64, &off)).ok(); ++i) {
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(s.IsPoolFull()) << s.ToString();
  EXPECT_NE(s.message().find("post-crash GC"), std::string::npos) << s.ToString();
  EXPECT_FALSE(q->recovery_done());
  EXPECT_LT(waited, 0.25);  // did not wait for the 300 ms mark phase
  ASSERT_TRUE(q->WaitForRecovery().ok());
  g_visit_delay_ms = 0;
  EXPECT_TRUE(q->allocator().Alloc(64, &off).ok());
}

TEST(Alloc, UnknownRootKindLeavesOldSpaceReservedNeverFreed) {
  TempPath path, image("img");
  std::unique_ptr<Pool> p;
  ASSERT_TRUE(Pool::Create(path, Opts(), &p).ok());
  uint64_t off;
  ASSERT_TRUE(p->allocator().Alloc(100, &off).ok());
  std::memset(p->at(off), 7, 100);
  pm::persist(p->at(off), 100);
  ASSERT_TRUE(p->AddRoot("mystery", 999999, off).ok());
  test::CopyFile(path, image);
  std::unique_ptr<Pool> q;
  ASSERT_TRUE(Pool::Open(image, Opts(), &q).ok());
  Status s = q->WaitForRecovery();
  EXPECT_EQ(s.code(), Code::kNotSupported) << s.ToString();
  // The old block's memory is never handed out again in this session.
  for (int i = 0; i < 5000; ++i) {
    uint64_t o;
    ASSERT_TRUE(q->allocator().Alloc(100, &o).ok());
    ASSERT_NE(o, off);
  }
  EXPECT_EQ(q->at<char>(off)[99], 7);
}

// A child links and unlinks blocks as fast as it can; the parent kills it at a random moment.
TEST(Alloc, SigkillAtRandomMomentsLeavesARecoverablePool) {
  std::mt19937_64 rng(1234);
  for (int round = 0; round < 12; ++round) {
    TempPath path;
    {
      std::unique_ptr<Pool> p;
      ASSERT_TRUE(Pool::Create(path, Opts(), &p).ok());
      MakeRoot(*p);
      ASSERT_TRUE(p->Close().ok());
    }
    const uint64_t seed = rng();
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(ready[0]);
      std::unique_ptr<Pool> p;
      if (!Pool::Open(path, Opts(), &p).ok()) ::_exit(2);
      // The kill must come after the open (on a loaded machine the sleep below can end first).
      if (::write(ready[1], "r", 1) != 1) ::_exit(4);
      auto* r = GetRoot(*p);
      std::mt19937_64 crng(seed);
      for (;;) {
        const size_t i = crng() % kSlots;
        if (r->slots[i]) Unlink(*p, r, i);
        else if (!Link(*p, r, i, SizeFor(crng)).ok()) ::_exit(3);
      }
    }
    ::close(ready[1]);
    char byte = 0;
    const bool opened = ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng() % 30000));
    ::kill(pid, SIGKILL);
    int st;
    ::waitpid(pid, &st, 0);
    ASSERT_TRUE(opened) << "the child did not open the pool";
    ASSERT_TRUE(WIFSIGNALED(st)) << "child exited on its own with " << WEXITSTATUS(st);
    std::unique_ptr<Pool> p;
    ASSERT_TRUE(Pool::Open(path, Opts(), &p).ok());
    EXPECT_FALSE(p->opened_clean());
    ASSERT_TRUE(p->WaitForRecovery().ok());
    ExpectAllocatedEqualsReachable(*p);
    // No block is handed out twice: new blocks never collide with reachable ones.
    std::set<uint64_t> live;
    auto* r = GetRoot(*p);
    for (size_t i = 0; i < kSlots; ++i)
      if (r->slots[i]) live.insert(r->slots[i]);
    for (int i = 0; i < 500; ++i) {
      uint64_t o;
      ASSERT_TRUE(p->allocator().Alloc(SizeFor(rng), &o).ok());
      ASSERT_FALSE(live.count(o));
    }
  }
}

}  // namespace
}  // namespace wort
