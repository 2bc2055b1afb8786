// The concurrency layer (src/sync): version lock verbs, the DRAM lock table, epoch-based
// reclamation, and stress tests of both with checked results.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/test_util.h"
#include "sync/sync.h"
#include "wort/alloc.h"
#include "wort/pool.h"

namespace wort::sync {
namespace {

TEST(VersionLockTest, ReadCheckUpgradeUnlock) {
  VersionLock l;
  uint64_t v;
  ASSERT_TRUE(l.ReadLockOrRestart(&v));
  EXPECT_TRUE(l.CheckOrRestart(v));
  EXPECT_TRUE(l.ReadUnlockOrRestart(v));
  ASSERT_TRUE(l.UpgradeToWriteLock(v));
  uint64_t v2;
  EXPECT_FALSE(l.ReadLockOrRestart(&v2));  // locked
  EXPECT_FALSE(l.CheckOrRestart(v));       // the word changed
  EXPECT_FALSE(l.UpgradeToWriteLock(v));   // a second writer cannot take it
  l.WriteUnlock();
  ASSERT_TRUE(l.ReadLockOrRestart(&v2));
  EXPECT_NE(v2, v);                        // the version moved on
  EXPECT_FALSE(l.UpgradeToWriteLock(v));   // a stale version cannot lock
  EXPECT_TRUE(l.UpgradeToWriteLock(v2));
  l.WriteUnlock();
}

TEST(VersionLockTest, ObsoleteStaysObsolete) {
  VersionLock l;
  ASSERT_TRUE(l.WriteLockOrRestart());
  l.WriteUnlockObsolete();
  uint64_t v;
  EXPECT_FALSE(l.ReadLockOrRestart(&v));
  EXPECT_FALSE(l.WriteLockOrRestart());
  EXPECT_TRUE(VersionLock::IsObsolete(l.Load()));
  EXPECT_FALSE(VersionLock::IsLocked(l.Load()));
}

TEST(VersionLockTest, WriteLockAndVersionsGrow) {
  VersionLock l;
  uint64_t last = l.Load();
  for (int i = 0; i < 1000; ++i) {
    l.WriteLock();
    EXPECT_TRUE(VersionLock::IsLocked(l.Load()));
    l.WriteUnlock();
    EXPECT_GT(l.Load(), last);
    EXPECT_FALSE(VersionLock::IsLocked(l.Load()));
    last = l.Load();
  }
}

TEST(VersionLockTableTest, SameOffsetSameWordAndSpread) {
  VersionLockTable t(10);
  EXPECT_EQ(t.size(), 1024u);
  EXPECT_EQ(&t.For(4096), &t.For(4096));
  EXPECT_TRUE(t.SameWord(4096, 4096));
  // Consecutive 64-byte blocks spread over many words.
  int used = 0;
  for (uint64_t off = 0; off < 64 * 1024; off += 64)
    used += t.SameWord(off, off + 64) ? 0 : 1;
  EXPECT_GT(used, 900);
}

// Writers keep a == b under the lock; optimistic readers that pass their check must see a == b.
TEST(VersionLockTest, StressOptimisticReadersSeeConsistentPairs) {
  VersionLock l;
  std::atomic<uint64_t> a{0}, b{0};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> validated{0}, restarts{0}, bad{0};
  constexpr int kWrites = 20000;
  std::atomic<int> readers_running{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < 2; ++w)
    ts.emplace_back([&] {
      while (readers_running.load() < 2) std::this_thread::yield();
      for (int i = 0; i < kWrites; ++i) {
        if (!l.WriteLockOrRestart()) continue;
        const uint64_t x = a.load(std::memory_order_relaxed) + 1;
        a.store(x, std::memory_order_relaxed);
        b.store(x, std::memory_order_relaxed);
        l.WriteUnlock();
      }
    });
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&] {
      readers_running++;
      while (!stop.load()) {
        uint64_t v;
        if (!l.ReadLockOrRestart(&v)) {
          restarts++;
          continue;
        }
        const uint64_t x = a.load(std::memory_order_relaxed);
        const uint64_t y = b.load(std::memory_order_relaxed);
        if (!l.CheckOrRestart(v)) {
          restarts++;
          continue;
        }
        validated++;
        if (x != y) bad++;
      }
    });
  ts[0].join();
  ts[1].join();
  stop = true;
  ts[2].join();
  ts[3].join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(a.load(), 2u * kWrites);
  EXPECT_EQ(b.load(), 2u * kWrites);
  EXPECT_GT(validated.load(), 0u);
}

// ---- epochs ----------------------------------------------------------------------------------
struct Reclaimed {
  std::atomic<uint64_t> n{0};
  std::vector<std::atomic<int>>* state = nullptr;  // per item: 1 live, 2 retired, 3 reclaimed
};
void MarkReclaimed(void* ctx, uint64_t item) {
  auto* r = static_cast<Reclaimed*>(ctx);
  r->n++;
  if (r->state) (*r->state)[item].store(3);
}

TEST(EpochTest, RetiredBlockWaitsForReaderInside) {
  Reclaimed r;
  EpochManager m(MarkReclaimed, &r);
  std::atomic<int> phase{0};
  std::thread reader([&] {
    m.Enter();
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
    m.Exit();
    phase = 3;
  });
  while (phase.load() != 1) std::this_thread::yield();
  m.Retire(7);
  for (int i = 0; i < 10; ++i) m.Collect();
  EXPECT_EQ(r.n.load(), 0u) << "reclaimed while a reader that entered before the retire is inside";
  EXPECT_EQ(m.Stats().pending, 1u);
  phase = 2;
  while (phase.load() != 3) std::this_thread::yield();
  for (int i = 0; i < 3; ++i) m.Collect();
  EXPECT_EQ(r.n.load(), 1u);
  EXPECT_EQ(m.Stats().pending, 0u);
  reader.join();
}

TEST(EpochTest, NestedEnterKeepsTheOuterEpoch) {
  Reclaimed r;
  EpochManager m(MarkReclaimed, &r);
  std::atomic<int> phase{0};
  std::thread reader([&] {
    m.Enter();
    m.Enter();
    m.Exit();  // inner exit: still inside
    EXPECT_TRUE(m.InEpoch());
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
    m.Exit();
    EXPECT_FALSE(m.InEpoch());
    phase = 3;
  });
  while (phase.load() != 1) std::this_thread::yield();
  m.Retire(1);
  for (int i = 0; i < 10; ++i) m.Collect();
  EXPECT_EQ(r.n.load(), 0u);
  phase = 2;
  while (phase.load() != 3) std::this_thread::yield();
  for (int i = 0; i < 3; ++i) m.Collect();
  EXPECT_EQ(r.n.load(), 1u);
  reader.join();
}

TEST(EpochTest, RetireInsideOwnEpochAndDrainOnDestruction) {
  Reclaimed r;
  {
    EpochManager m(MarkReclaimed, &r);
    {
      EpochGuard g(m);
      for (uint64_t i = 0; i < 10; ++i) m.Retire(i);
      m.Collect();
      EXPECT_EQ(r.n.load(), 0u);  // the retiring thread itself is inside
    }
    EXPECT_EQ(m.Stats().retired, 10u);
  }
  EXPECT_EQ(r.n.load(), 10u);  // the destructor drained the rest
}

TEST(EpochTest, ExitedThreadsSlotIsReusedAndItsBlocksReclaimed) {
  Reclaimed r;
  EpochManager m(MarkReclaimed, &r);
  for (int t = 0; t < 8; ++t) {
    std::thread th([&] {
      EpochGuard g(m);
      m.Retire(1);
    });
    th.join();
  }
  EXPECT_EQ(m.Stats().threads, 1u) << "each exited thread's slot is reused";
  for (int i = 0; i < 4; ++i) m.Collect();
  m.Drain();
  EXPECT_EQ(r.n.load(), 8u);
  EXPECT_EQ(m.Stats().pending, 0u);
}

// A thread's exit reclaims its slot's items that are old enough (Release) while another thread
// Drains (a clean close, the tests' reachability checks): each item exactly once. The exiting
// thread is held inside its first reclaim until that Drain has returned (or 300 ms passed):
// before the slot's release took the manager's mutex, the Drain reclaimed the same items
// meanwhile - the server's StoreStress.ItemCountBesideWriters failed that way (its item-count
// thread exiting with an exited writer's slot beside the test's Drain; records freed twice, some
// reused in between: reachable blocks free). Fails every run without the mutex.
struct ExitRace {
  std::atomic<std::thread::id> exiting{};
  std::atomic<int> phase{0};  // 1: the exiting thread is in its first reclaim; 2: the Drain returned
  std::vector<std::atomic<int>> seen = std::vector<std::atomic<int>>(64);
};
void ReclaimHoldingTheExit(void* ctx, uint64_t item) {
  auto* x = static_cast<ExitRace*>(ctx);
  x->seen[item].fetch_add(1);
  int idle = 0;
  if (std::this_thread::get_id() == x->exiting.load() && x->phase.compare_exchange_strong(idle, 1)) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (x->phase.load() != 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  }
}

TEST(EpochTest, DrainBesideAnExitingThreadReclaimsEachItemOnce) {
  ExitRace x;  // outlives the manager (its destructor drains)
  EpochManager m(ReclaimHoldingTheExit, &x);
  constexpr uint64_t kItems = 40;  // < kRetireBatch: the thread itself collects nothing
  static_assert(kItems < EpochManager::kRetireBatch);
  std::atomic<int> step{0};
  std::thread th([&] {
    x.exiting.store(std::this_thread::get_id());
    {
      EpochGuard g(m);
      for (uint64_t i = 0; i < kItems; ++i) m.Retire(i);
    }
    m.Collect();  // tags the items with the epoch now (Retire leaves that to the next Collect)
    step = 1;
    while (step.load() != 2) std::this_thread::yield();
  });  // its exit: Release reclaims the kItems items (two epochs old by then)
  while (step.load() != 1) std::this_thread::yield();
  // Two advances (no thread is inside an epoch): this thread retires an item and collects.
  m.Retire(kItems);
  m.Collect();
  m.Collect();
  EXPECT_EQ(x.seen[kItems].load(), 1) << "the epoch did not advance twice";
  step = 2;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (x.phase.load() != 1 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  ASSERT_EQ(x.phase.load(), 1) << "the exiting thread reclaimed nothing at its exit";
  m.Drain();  // beside the exiting thread's reclaims
  x.phase.store(2);
  th.join();
  m.Drain();
  for (uint64_t i = 0; i <= kItems; ++i) EXPECT_EQ(x.seen[i].load(), 1) << "item " << i << " reclaimed that many times";
  EXPECT_EQ(m.Stats().pending, 0u);
}

// SlotReclaimFn (vart's per-thread node caches): every item goes back with the state of the
// slot of the thread that retired it - on that thread (Retire's collection), at its exit
// (Release) and in the destructor's Drain - exactly once; a null state is made on first use.
struct SlotTag {
  int thread;
  std::atomic<uint64_t> got{0};
};
struct SlotReclaims {
  std::atomic<uint64_t> n{0}, wrong{0}, made{0};
  std::vector<std::atomic<int>> seen = std::vector<std::atomic<int>>(4 * 10000);
  SlotTag lazy{3};
};
void ReclaimToSlot(void* ctx, void*& state, uint64_t item) {
  auto* r = static_cast<SlotReclaims*>(ctx);
  if (state == nullptr) {  // thread 3 never set its state
    state = &r->lazy;
    r->made++;
  }
  auto* tag = static_cast<SlotTag*>(state);
  if (static_cast<uint64_t>(tag->thread) != item / 10000) r->wrong++;
  tag->got++;
  r->seen[item].fetch_add(1);
  r->n++;
}

TEST(EpochTest, SlotReclaimGetsTheRetiringThreadsState) {
  SlotReclaims r;
  SlotTag tags[3] = {{0}, {1}, {2}};
  {
    EpochManager m(static_cast<EpochManager::SlotReclaimFn>(&ReclaimToSlot), &r);
    std::vector<std::thread> ts;
    std::atomic<int> started{0};
    for (int t = 0; t < 4; ++t) {
      ts.emplace_back([&, t] {
        {
          EpochGuard g(m);
          if (t < 3) g.slot()->state = &tags[t];
        }
        started++;
        while (started.load() < 4) std::this_thread::yield();  // four slots, all owned at once
        for (uint64_t i = 0; i < 10000; ++i) {
          EpochGuard g(m);
          m.Retire(static_cast<uint64_t>(t) * 10000 + i);
        }
      });
    }
    for (auto& th : ts) th.join();
    EXPECT_EQ(m.Stats().threads, 4u);
    EXPECT_GT(r.n.load(), 0u) << "retiring threads reclaim their own items as they go";
  }
  EXPECT_EQ(r.n.load(), 40000u);
  EXPECT_EQ(r.wrong.load(), 0u) << "an item went back with another thread's state";
  EXPECT_EQ(r.made.load(), 1u) << "the null state is made once and kept in the slot";
  for (int t = 0; t < 3; ++t) EXPECT_EQ(tags[t].got.load(), 10000u) << t;
  EXPECT_EQ(r.lazy.got.load(), 10000u);
  for (size_t i = 0; i < r.seen.size(); ++i) ASSERT_EQ(r.seen[i].load(), 1) << "item " << i;
}

TEST(EpochTest, ThreadOutlivingItsManagerIsSafe) {
  Reclaimed r;
  auto m = std::make_unique<EpochManager>(MarkReclaimed, &r);
  std::atomic<int> phase{0};
  std::thread th([&] {
    { EpochGuard g(*m); }
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
    // Manager destroyed; a new one (possibly at the same address) enrols this thread afresh.
    EpochManager m2(MarkReclaimed, &r);
    EpochGuard g(m2);
    m2.Retire(5);
  });
  while (phase.load() != 1) std::this_thread::yield();
  m.reset();
  phase = 2;
  th.join();
  EXPECT_EQ(r.n.load(), 1u);
}

// Writers replace items in shared cells and retire the old ones; readers inside an epoch must
// never reach a reclaimed item. Memory held back stays bounded and everything is reclaimed.
TEST(EpochTest, StressNoReaderSeesAReclaimedItem) {
  constexpr int kCells = 64, kWriters = 2, kReaders = 2, kReplacesPerWriter = 100000;
  // A writer goes on past kReplacesPerWriter (up to kMaxPerWriter) until something was reclaimed:
  // a reader preempted inside its epoch blocks every advance while it is off the processor, and
  // on 2 loaded cores that can outlast 100,000 replaces (~20 ms since the reclaim pass stopped
  // scanning the whole retired list, h59).
  constexpr int kMaxPerWriter = 20 * kReplacesPerWriter;
  const size_t kItems = kCells + size_t(kWriters) * kMaxPerWriter;
  std::vector<std::atomic<int>> state(kItems);
  Reclaimed r;
  r.state = &state;
  std::atomic<uint64_t> bad{0}, reads{0};
  uint64_t total = 0;  // items retired
  {
    EpochManager m(MarkReclaimed, &r);
    std::vector<std::atomic<uint64_t>> cells(kCells);
    for (int i = 0; i < kCells; ++i) {
      state[i] = 1;
      cells[i] = i;
    }
    std::atomic<uint64_t> next{kCells};
    std::atomic<bool> stop{false};
    std::atomic<int> readers_running{0};
    std::vector<std::thread> ts;
    for (int w = 0; w < kWriters; ++w)
      ts.emplace_back([&, w] {
        while (readers_running.load() < kReaders) std::this_thread::yield();
        std::mt19937 rng(w);
        for (int i = 0; i < kMaxPerWriter; ++i) {
          if (i >= kReplacesPerWriter && i % 1024 == 0 && m.Stats().reclaimed > 0) break;
          EpochGuard g(m);
          const uint64_t item = next.fetch_add(1);
          state[item] = 1;
          const uint64_t old = cells[rng() % kCells].exchange(item);
          state[old] = 2;
          m.Retire(old);
        }
      });
    for (int rd = 0; rd < kReaders; ++rd)
      ts.emplace_back([&, rd] {
        std::mt19937 rng(100 + rd);
        readers_running++;
        while (!stop.load()) {
          EpochGuard g(m);
          for (int k = 0; k < 8; ++k) {
            const uint64_t item = cells[rng() % kCells].load();
            // The item may be retired (2) but never reclaimed (3) while we are inside.
            if (state[item].load() == 3) bad++;
            reads++;
          }
        }
      });
    for (int w = 0; w < kWriters; ++w) ts[w].join();
    stop = true;
    for (size_t i = kWriters; i < ts.size(); ++i) ts[i].join();
    const EpochStats st = m.Stats();
    total = next.load() - kCells;
    EXPECT_EQ(st.retired, total);
    EXPECT_GE(st.retired, uint64_t(kWriters) * kReplacesPerWriter);
    // Reclamation went on during the run (a reader preempted inside its epoch holds back what
    // is retired meanwhile, so the peak depends on scheduling; the bound is tested below).
    EXPECT_GT(st.reclaimed, 0u);
    EXPECT_LT(st.peak_pending, st.retired);
    RecordProperty("peak_pending", std::to_string(st.peak_pending));
  }
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(reads.load(), 0u);
  EXPECT_EQ(r.n.load(), total);
}

// Issue 31 (a): a thread that exits with retired items not yet old enough leaves them in its
// slot. Before, only the slot's next owner or Drain (a close) reclaimed them: with no new thread,
// an exited writer's records were held until close. Now the next Collect of a live thread
// reclaims them once they are old enough.
TEST(EpochTest, ExitedThreadsItemsAreReclaimedByALiveThreadsCollect) {
  Reclaimed r;
  EpochManager m(MarkReclaimed, &r);
  { EpochGuard g(m); }  // this thread's slot first: it does not take the exited thread's
  std::thread th([&] {
    EpochGuard g(m);
    for (uint64_t i = 0; i < 40; ++i) m.Retire(i);
  });
  th.join();
  EXPECT_EQ(m.Stats().threads, 2u);
  EXPECT_EQ(m.Stats().pending, 40u) << "nothing was two epochs old at the exit";
  m.Retire(40);
  for (int i = 0; i < 4; ++i) m.Collect();
  EXPECT_EQ(r.n.load(), 41u) << "the exited thread's items wait for a close";
  EXPECT_EQ(m.Stats().pending, 0u);
}

// Issue 31 (a): an advance that a thread inside an older epoch blocks (on a loaded machine: one
// preempted in its operation) is tried again kRetryAfter retires later, not a whole kRetireBatch
// later (before: with 4 writers on 2 loaded cores the epoch advanced 30-75 times in 16,000
// operations).
TEST(EpochTest, BlockedAdvanceIsTriedAgainSoon) {
  Reclaimed r;
  EpochManager m(MarkReclaimed, &r);
  m.Retire(1000);
  m.Collect();  // tags and advances: this thread's last look is the new epoch
  std::atomic<int> phase{0};
  std::thread blocker([&] {
    EpochGuard g(m);
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
  });
  while (phase.load() != 1) std::this_thread::yield();
  m.Collect();  // advances past the blocker's epoch: from here on it blocks
  const uint64_t e = m.Stats().epoch;
  for (uint64_t i = 0; i < EpochManager::kRetireBatch; ++i) m.Retire(i);  // the batch's advance: blocked
  EXPECT_EQ(m.Stats().epoch, e) << "advanced past a thread inside an older epoch";
  phase = 2;
  blocker.join();
  for (uint64_t i = 0; i < EpochManager::kRetryAfter; ++i) m.Retire(100 + i);
  EXPECT_EQ(m.Stats().epoch, e + 1) << "the blocked advance was not tried again after kRetryAfter retires";
}

// Issue 31 (h59): while a thread sits inside an older epoch, every Collect's advance is blocked
// and the retired list only grows; a blocked advance is retried every kRetryAfter retires, and
// each retry's reclaim pass looked at the whole list (quadratic in the blocked time). Now a pass
// stops at the first item not old enough: the items looked at are the reclaimed ones plus at most
// one per pass. Every item is still reclaimed exactly once, and none while the blocker is inside.
TEST(EpochTest, BlockedReclaimPassesLookAtOneItem) {
  constexpr uint64_t kN = EpochManager::kRetireBatch * 200;
  std::vector<std::atomic<int>> state(kN + 1);
  Reclaimed r;
  r.state = &state;
  EpochManager m(MarkReclaimed, &r);
  m.Retire(kN);
  m.Collect();  // tags and advances: this thread's last look is the new epoch
  std::atomic<int> phase{0};
  std::thread blocker([&] {
    EpochGuard g(m);
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
  });
  while (phase.load() != 1) std::this_thread::yield();
  m.Collect();  // advances past the blocker's epoch: from here on it blocks
  const EpochStats s0 = m.Stats();
  const uint64_t reclaimed0 = r.n.load();
  for (uint64_t i = 0; i < kN; ++i) {
    state[i].store(2);
    m.Retire(i);
  }
  const EpochStats s1 = m.Stats();
  EXPECT_EQ(s1.epoch, s0.epoch) << "advanced past a thread inside an older epoch";
  EXPECT_GE(s1.advances_blocked - s0.advances_blocked, (kN - EpochManager::kRetireBatch) / EpochManager::kRetryAfter);
  // One pass per Collect; a pass that reclaims nothing looks at one item (a whole-list scan: ~kN^2/16).
  const uint64_t reclaimed = r.n.load() - reclaimed0;
  EXPECT_LE(s1.reclaim_scanned - s0.reclaim_scanned, reclaimed + (s1.advance_tries - s0.advance_tries) + 2);
  for (uint64_t i = 0; i < kN; ++i) ASSERT_EQ(state[i].load(), 2) << "item " << i << " reclaimed under the blocker";
  phase = 2;
  blocker.join();
  for (int i = 0; i < 3; ++i) m.Collect();  // two advances, then the reclaim of everything tagged before
  for (uint64_t i = 0; i < kN; ++i) ASSERT_EQ(state[i].load(), 3) << "item " << i << " not reclaimed";
  EXPECT_EQ(r.n.load(), kN + 1);  // each once (with the first item)
  EXPECT_EQ(m.Stats().pending, 0u);
}

// A Drain (a clean close's, a test's reachability check) while the thread has items retired and
// not yet tagged: the items retired after it are reclaimed by the next Collects (the slot's
// untagged count went with the drained list; left behind, they kept no epoch and were held
// until the next Drain - and blocked every item behind them).
TEST(EpochTest, ItemsRetiredAfterADrainAreReclaimed) {
  constexpr uint64_t kN = EpochManager::kRetireBatch * 4;
  std::vector<std::atomic<int>> state(2 * kN);
  Reclaimed r;
  r.state = &state;
  EpochManager m(MarkReclaimed, &r);
  for (uint64_t i = 0; i < 5; ++i) m.Retire(i);  // untagged: no Collect yet
  m.Drain();
  EXPECT_EQ(r.n.load(), 5u);
  for (uint64_t i = kN; i < 2 * kN; ++i) m.Retire(i);
  for (int i = 0; i < 4; ++i) m.Collect();
  for (uint64_t i = kN; i < 2 * kN; ++i) ASSERT_EQ(state[i].load(), 3) << "item " << i << " not reclaimed";
  EXPECT_EQ(m.Stats().pending, 0u);
}

// Writers that come and go (short-lived threads, each leaving retired items in its slot at its
// exit) beside a long-lived writer and readers: no reader reaches a reclaimed item, each item is
// reclaimed exactly once, and once every thread is gone a live thread's Collects reclaim all
// that the exited ones left (no Drain).
std::vector<std::atomic<int>>* g_churn_seen = nullptr;
void CountReclaim(void* ctx, uint64_t item) {
  auto* r = static_cast<Reclaimed*>(ctx);
  r->n++;
  (*r->state)[item].store(3);
  (*g_churn_seen)[item].fetch_add(1);
}

TEST(EpochTest, StressExitingWritersItemsReclaimedOnce) {
  constexpr int kCells = 64, kReaders = 2, kChurners = 40, kPerChurner = 300, kLongWrites = 30000;
  const size_t kItems = kCells + size_t(kChurners) * kPerChurner + kLongWrites + 1;
  std::vector<std::atomic<int>> state(kItems), seen(kItems);
  g_churn_seen = &seen;
  Reclaimed r;
  r.state = &state;
  std::atomic<uint64_t> bad{0}, reads{0};
  EpochManager m(CountReclaim, &r);
  { EpochGuard g(m); }  // this thread's slot first
  std::vector<std::atomic<uint64_t>> cells(kCells);
  for (int i = 0; i < kCells; ++i) {
    state[i] = 1;
    cells[i] = i;
  }
  std::atomic<uint64_t> next{kCells};
  std::atomic<bool> stop{false};
  auto replace = [&](std::mt19937& rng) {
    EpochGuard g(m);
    const uint64_t item = next.fetch_add(1);
    state[item] = 1;
    const uint64_t old = cells[rng() % kCells].exchange(item);
    state[old] = 2;
    m.Retire(old);
  };
  std::vector<std::thread> ts;
  ts.emplace_back([&] {  // the long-lived writer
    std::mt19937 rng(7);
    for (int i = 0; i < kLongWrites; ++i) replace(rng);
  });
  ts.emplace_back([&] {  // writers that come and go, one after the other
    for (int c = 0; c < kChurners; ++c) {
      std::thread w([&, c] {
        std::mt19937 rng(1000 + c);
        for (int i = 0; i < kPerChurner; ++i) replace(rng);
      });
      w.join();
    }
  });
  for (int rd = 0; rd < kReaders; ++rd)
    ts.emplace_back([&, rd] {
      std::mt19937 rng(100 + rd);
      while (!stop.load()) {
        EpochGuard g(m);
        for (int k = 0; k < 8; ++k) {
          if (state[cells[rng() % kCells].load()].load() == 3) bad++;
          reads++;
        }
      }
    });
  ts[0].join();
  ts[1].join();
  stop = true;
  for (size_t i = 2; i < ts.size(); ++i) ts[i].join();
  // Every other thread is gone: this thread's Collects advance the epoch and reclaim what the
  // exited threads left in their slots.
  m.Retire(kItems - 1);
  for (int i = 0; i < 4; ++i) m.Collect();
  const EpochStats st = m.Stats();
  EXPECT_EQ(st.retired, uint64_t(kChurners) * kPerChurner + kLongWrites + 1);
  EXPECT_EQ(st.pending, 0u) << "items of exited threads still wait for a close";
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(reads.load(), 0u);
  uint64_t twice = 0;
  for (size_t i = 0; i < kItems; ++i) twice += seen[i].load() > 1;
  EXPECT_EQ(twice, 0u) << "items reclaimed more than once";
  EXPECT_EQ(r.n.load(), st.retired);
  g_churn_seen = nullptr;
}

// The writer gate (issue 31): writers store only to their own slot; a quiescer, once
// QuiesceWriters returns, sees no writer between WriterEnter and WriterExit until EndQuiesce.
// Each writer bumps two counters one after the other inside the gate; every quiesce must find
// them equal (a writer caught between the two would make them differ), and the writers' own
// tallies must add up at the end. Nested WriterEnter is exercised too.
TEST(EpochTest, WriterGateQuiescesEveryWriter) {
  Reclaimed r;
  EpochManager m(MarkReclaimed, &r);
  constexpr int kWriters = 3;
  const int kIters = 200000 / test::kSanitizerScale;
  std::atomic<uint64_t> a{0}, b{0};
  std::atomic<int> writers_done{0};
  std::atomic<uint64_t> quiesces_done{0};
  std::vector<uint64_t> mine(kWriters, 0);
  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; ++w)
    ts.emplace_back([&, w] {
      // Until both: kIters writes done and 50 quiesces met (so that the quiescer runs beside
      // writers however the threads are scheduled).
      for (int i = 0; i < kIters || quiesces_done.load(std::memory_order_relaxed) < 50; ++i) {
        m.WriterEnter();
        if (i % 16 == 0) m.WriterEnter();  // nested
        a.fetch_add(1, std::memory_order_relaxed);
        b.fetch_add(1, std::memory_order_relaxed);
        if (i % 16 == 0) m.WriterExit();
        m.WriterExit();
        ++mine[w];
      }
      writers_done.fetch_add(1);
    });
  uint64_t quiesces = 0, bad = 0;
  while (writers_done.load() < kWriters) {
    m.QuiesceWriters();
    if (a.load(std::memory_order_relaxed) != b.load(std::memory_order_relaxed)) ++bad;
    m.EndQuiesce();
    ++quiesces;
    quiesces_done.store(quiesces, std::memory_order_relaxed);
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad, 0u) << quiesces << " quiesces";
  EXPECT_GE(quiesces, 50u);
  uint64_t total = 0;
  for (uint64_t n : mine) {
    EXPECT_GE(n, uint64_t(kIters));
    total += n;
  }
  EXPECT_EQ(total, a.load());
  EXPECT_EQ(total, b.load());
}

// Enter's fence is asymmetric (epoch.cc) wherever the kernel offers membarrier's private
// expedited command, and symmetric under ThreadSanitizer (which does not model membarrier).
TEST(EpochTest, FencesAreAsymmetricWhereMembarrierExists) {
  Reclaimed r;
  EpochManager m(MarkReclaimed, &r);  // the first manager decides
#if defined(__SANITIZE_THREAD__)
  EXPECT_FALSE(EpochAsymmetricFences());
#else
  const long q = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0u, 0);
  const bool kernel_has_it = q >= 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0;
  const char* e = std::getenv("WORT_EPOCH_FENCE");
  const bool forced_symmetric = e && std::string_view(e) == "symmetric";
  EXPECT_EQ(EpochAsymmetricFences(), kernel_has_it && !forced_symmetric) << "membarrier query " << q;
#endif
}

// membarrier's registration belongs to the address space: a child of fork() must still be able
// to advance the epoch and reclaim (the heavy fence registers again when told EPERM).
TEST(EpochTest, ForkedChildStillAdvancesAndReclaims) {
  Reclaimed parent_r;
  EpochManager parent(MarkReclaimed, &parent_r);
  {
    EpochGuard g(parent);
  }
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Reclaimed r;
    EpochManager m(MarkReclaimed, &r);
    for (uint64_t i = 0; i < 10 * EpochManager::kRetireBatch; ++i) {
      EpochGuard g(m);
      m.Retire(i);
    }
    _exit(m.Stats().reclaimed > 0 && m.Stats().epoch > 2 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the forked child reclaimed nothing";
}

// With no other thread inside an epoch, memory held back is bounded by a few retire batches:
// every kRetireBatch retires advance the epoch once and reclaim what is two epochs old. (With
// other threads, a thread preempted inside its epoch holds back what is retired meanwhile.)
TEST(EpochTest, HeldBackMemoryIsBounded) {
  Reclaimed r;
  EpochManager m(MarkReclaimed, &r);
  for (uint64_t i = 0; i < 100000; ++i) {
    EpochGuard g(m);
    m.Retire(i);
  }
  const EpochStats st = m.Stats();
  EXPECT_EQ(st.retired, 100000u);
  EXPECT_LE(st.peak_pending, 3 * EpochManager::kRetireBatch) << "peak " << st.peak_pending;
  RecordProperty("peak_pending", std::to_string(st.peak_pending));
}

// The allocator's hook: Retire frees only after readers left, and a clean close frees the rest
// (a clean reopen finds the retired blocks free).
TEST(EpochTest, AllocatorRetireWaitsForReadersAndCloseFreesTheRest) {
  test::TempPath path("epoch");
  PoolOptions po;
  po.initial_size = 8 << 20;
  uint64_t kept = 0;
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(path, po, &pool).ok());
    Allocator& a = pool->allocator();
    uint64_t b1, b2;
    ASSERT_TRUE(a.Alloc(64, &b1).ok());
    ASSERT_TRUE(a.Alloc(64, &b2).ok());
    ASSERT_TRUE(a.Alloc(64, &kept).ok());
    std::atomic<int> phase{0};
    std::thread reader([&] {
      EpochGuard g(a.epoch());
      phase = 1;
      while (phase.load() != 2) std::this_thread::yield();
    });
    while (phase.load() != 1) std::this_thread::yield();
    a.Retire(b1);
    for (int i = 0; i < 5; ++i) a.epoch().Collect();
    EXPECT_EQ(a.Stats().retired_pending, 1u);
    phase = 2;
    reader.join();
    for (int i = 0; i < 3; ++i) a.epoch().Collect();
    EXPECT_EQ(a.Stats().retired_pending, 0u);
    EXPECT_EQ(a.Stats().retired_peak, 1u);
    a.Retire(b2);  // pending at close
    EXPECT_EQ(a.Stats().retired_pending, 1u);
    ASSERT_TRUE(pool->Close().ok());
  }
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Open(path, po, &pool).ok());
  EXPECT_EQ(pool->allocator().Stats().blocks_allocated, 1u) << "only `kept` is allocated after a clean reopen";
  uint64_t n = 0;
  pool->allocator().ForEachAllocated([&](uint64_t off, size_t) {
    n++;
    EXPECT_EQ(off, kept);
  });
  EXPECT_EQ(n, 1u);
}

// A thread's exit reclaims its old enough retired blocks (EpochManager::Release, from the epoch's
// thread-local destructor) - after the thread's allocator caches were drained when that thread
// first entered the epoch and then allocated (thread-local destructors run in reverse order of
// first use). Those frees must reach the chunks: before, they went into the exited thread's
// cache, drained already and never used again - the blocks were lost until close (issue 31 (c)).
TEST(EpochTest, BlocksReclaimedAtAThreadsExitGoBackToTheirChunks) {
  test::TempPath path("epoch_exit_free");
  PoolOptions po;
  po.initial_size = 8 << 20;
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, po, &pool).ok());
  Allocator& a = pool->allocator();
  constexpr int kBlocks = 20;  // < kRetireBatch: the thread collects nothing before its exit
  static_assert(kBlocks < EpochManager::kRetireBatch);
  std::atomic<int> step{0};
  std::atomic<int> bad{0};
  std::thread retirer([&] {
    {
      EpochGuard g(a.epoch());  // the epoch's thread-local first, the allocator's second
      for (int i = 0; i < kBlocks; ++i) {
        uint64_t off = 0;
        if (!a.Alloc(4096, &off).ok()) bad++;
        else a.Retire(off);
      }
    }
    a.epoch().Collect();  // tags the blocks with the epoch now (Retire leaves that to the next Collect)
    step = 1;
    while (step.load() != 2) std::this_thread::yield();
  });  // its exit: Release reclaims the kBlocks blocks (two epochs old by then)
  while (step.load() != 1) std::this_thread::yield();
  // Two advances (no thread inside an epoch), by a thread that retires a block of its own.
  std::thread advancer([&] {
    uint64_t off = 0;
    if (!a.Alloc(64, &off).ok()) bad++;
    {
      EpochGuard g(a.epoch());
      a.Retire(off);
    }
    a.epoch().Collect();
    a.epoch().Collect();
  });
  advancer.join();
  ASSERT_EQ(bad.load(), 0);
  EXPECT_EQ(a.Stats().retired_pending, static_cast<uint64_t>(kBlocks))
      << "the advancer's block is reclaimed (two advances); the retirer's wait for its exit";
  step = 2;
  retirer.join();
  const AllocStats st = a.Stats();
  EXPECT_EQ(st.retired_pending, 0u) << "the exit reclaimed every block";
  EXPECT_EQ(st.blocks_allocated, 0u);
  EXPECT_EQ(st.bytes_in_thread_caches, 0u)
      << "blocks freed at a thread's exit were left in that thread's drained cache (no live thread has one)";
  // And the space is back: Trim returns every wholly free chunk.
  a.Trim();
  EXPECT_EQ(a.Stats().chunks_small, 0u) << "a chunk still counts blocks freed into a dead cache";
}

// ShardedCounter (counter.h): more threads than shards add and subtract at once while a reader
// sums; every intermediate sum lies between the smallest and largest possible count, the final
// sum is exact, and Clear zeroes it.
TEST(ShardedCounter, ConcurrentAddsSumExactly) {
  ShardedCounter c;
  const int threads = static_cast<int>(ShardedCounter::kShards) + 6;  // some threads share shards
  const int per = 20000 / test::kSanitizerScale;
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    while (!done.load()) {
      const int64_t s = c.Sum();
      if (s < 0 || s > int64_t{threads} * (per + 1)) bad++;  // a thread's share: 0 .. per + 1
    }
  });
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < per; ++i) {
        c.Add(2);
        c.Add(-1);  // a thread's share never goes below 0 nor above per + 1
      }
    });
  for (auto& t : ts) t.join();
  done = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(c.Sum(), int64_t{threads} * per);
  c.Clear();
  EXPECT_EQ(c.Sum(), 0);
}

}  // namespace
}  // namespace wort::sync
