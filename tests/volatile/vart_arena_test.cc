// vart's node allocator (src/index/volatile/node_arena.h, issue 31): the size classes, a cache's
// reuse and accounting, the shared pool (spill and take-back), and vart under concurrent
// inserts, removes and lookups whose nodes grow, merge and are retired by other threads than
// the ones that allocated them - every key checked at the end and the arena's accounting equal
// to the tree (no block leaked, none given back twice). In scripts/tsan.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <latch>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "common/differential.h"
#include "common/test_util.h"
#include "index/volatile/node_arena.h"
#include "index/volatile/vart.h"
#include "wort/pool.h"

namespace wort {
namespace {

using vol::NodeArena;
using vol::VartMemory;

PoolOptions SmallPool() {
  PoolOptions o;
  o.initial_size = 4ull << 20;
  o.max_size = 64ull << 20;
  o.background_recovery = false;
  return o;
}

TEST(NodeArena, ClassesCoverEverySizeTightly) {
  for (size_t b = 1; b <= NodeArena::kMaxBlock; ++b) {
    const uint32_t c = NodeArena::ClassOf(b);
    ASSERT_LT(c, NodeArena::kClasses) << b;
    ASSERT_GE(NodeArena::ClassBytes(c), b) << b;
    ASSERT_EQ(NodeArena::ClassBytes(c) % 16, 0u) << b;
    if (c > 0) {
      ASSERT_LT(NodeArena::ClassBytes(c - 1), b) << b;  // the smallest class that fits
    }
  }
  EXPECT_EQ(NodeArena::ClassBytes(NodeArena::kClasses - 1), NodeArena::kMaxBlock);
}

// Blocks of every class from one cache: disjoint, writable over their whole class size, counted;
// given back through another cache (as a retire by another thread does), they are that cache's
// to hand out again, and no new chunk is mapped for them.
TEST(NodeArena, CrossCacheFreeIsReusedAndCounted) {
  NodeArena a;
  NodeArena::Cache* c1 = a.NewCache();
  NodeArena::Cache* c2 = a.NewCache();
  std::vector<std::pair<char*, uint32_t>> blocks;
  for (int round = 0; round < 20; ++round)
    for (uint32_t cls = 0; cls < NodeArena::kClasses; ++cls) {
      auto* p = static_cast<char*>(NodeArena::Alloc(c1, cls));
      std::memset(p, static_cast<int>(cls), NodeArena::ClassBytes(cls));
      blocks.push_back({p, cls});
    }
  auto sorted = blocks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i)
    ASSERT_LE(sorted[i - 1].first + NodeArena::ClassBytes(sorted[i - 1].second), sorted[i].first) << "overlap";
  for (const auto& [p, cls] : blocks)
    for (size_t i = 0; i < NodeArena::ClassBytes(cls); ++i) ASSERT_EQ(p[i], static_cast<char>(cls));
  NodeArena::Usage u = a.GetUsage();
  EXPECT_EQ(u.blocks, static_cast<int64_t>(blocks.size()));
  EXPECT_EQ(u.caches, 2u);
  const uint64_t chunks = u.chunks;
  for (const auto& [p, cls] : blocks) NodeArena::Free(c2, p, cls);
  EXPECT_EQ(a.GetUsage().blocks, 0);
  EXPECT_EQ(a.GetUsage().bytes, 0);
  std::set<char*> freed;
  for (const auto& b : blocks) freed.insert(b.first);
  for (const auto& [p, cls] : blocks) {
    char* q = static_cast<char*>(NodeArena::Alloc(c2, cls));
    EXPECT_TRUE(freed.count(q)) << "c2 hands out the blocks given back to it first";
    NodeArena::Free(c2, q, cls);
  }
  EXPECT_EQ(a.GetUsage().chunks, chunks);
}

// vart's key count (issue 31): each cache's own delta, stored by its owner without a locked
// instruction; the sum over caches is the count, whichever cache added or took away a key.
TEST(NodeArena, KeyCountsSumOverCaches) {
  NodeArena a;
  EXPECT_EQ(a.SumKeys(), 0);
  NodeArena::Cache* c1 = a.NewCache();
  NodeArena::Cache* c2 = a.NewCache();
  std::thread t([&] {
    for (int i = 0; i < 1000; ++i) NodeArena::AddKeys(c2, 1);
  });
  for (int i = 0; i < 700; ++i) NodeArena::AddKeys(c1, 1);
  t.join();
  EXPECT_EQ(a.SumKeys(), 1700);
  for (int i = 0; i < 900; ++i) NodeArena::AddKeys(c1, -1);  // keys another cache counted in
  EXPECT_EQ(c1->keys.load(), -200);
  EXPECT_EQ(a.SumKeys(), 800);
}

// A thread that only frees gives batches to the shared pool; a thread that only allocates takes
// them back when its bump region runs low: memory stays bounded over many cycles.
TEST(NodeArena, SpilledBatchesAreTakenBack) {
  NodeArena a;
  NodeArena::Cache* producer = a.NewCache();
  NodeArena::Cache* consumer = a.NewCache();
  const uint32_t cls = NodeArena::ClassOf(32);
  const size_t n = 20 * NodeArena::Batch(cls);
  uint64_t first_cycle_bytes = 0;
  for (int cycle = 0; cycle < 20; ++cycle) {
    std::vector<void*> v;
    for (size_t i = 0; i < n; ++i) v.push_back(NodeArena::Alloc(producer, cls));
    for (void* p : v) NodeArena::Free(consumer, p, cls);
    const NodeArena::Usage u = a.GetUsage();
    EXPECT_EQ(u.blocks, 0);
    EXPECT_GT(u.shared_blocks, 0u) << "a list longer than 2 x Batch spills";
    EXPECT_LE(consumer->bins[cls].n, 2 * NodeArena::Batch(cls));
    if (cycle == 0) first_cycle_bytes = u.chunk_bytes;
  }
  // Without the take-back the producer maps ~n * 32 bytes more per cycle (20 cycles: 20x).
  EXPECT_LE(a.GetUsage().chunk_bytes, 2 * first_cycle_bytes + NodeArena::kMaxChunk);
}

// ---- vart under concurrent writers whose nodes other threads grow, merge and retire ---------

uint64_t ValueOf(const std::string& k) { return std::hash<std::string>{}(k) | 1; }

// Keys of thread t (of kWriters) in group g: prefix "g" + 2 bytes (full byte range), then a byte
// b with b % kWriters == t (every writer adds children to the same nodes: they grow 4 -> 16 ->
// 48 -> 256 under several threads), and for one b in four a second key b + a long suffix (a
// NODE4 with a compressed prefix below the slot); the group's own key (a term leaf) belongs to
// thread g % kWriters.
constexpr int kWriters = 4;
std::string GroupPrefix(int g) {
  std::string p = "g";
  p.push_back(static_cast<char>(0x80 + g * 37));
  p.push_back(static_cast<char>(0xff - g));
  return p;
}
std::vector<std::string> KeysOf(int t, int g) {
  std::vector<std::string> ks;
  const std::string p = GroupPrefix(g);
  for (int b = t; b < 256; b += kWriters) {
    ks.push_back(p + static_cast<char>(b));
    if (b % 4 == 1) ks.push_back(p + static_cast<char>(b) + std::string(12, static_cast<char>(0xa0 + g)) + "\x01");
  }
  if (g % kWriters == t) ks.push_back(p);
  return ks;
}

void ExpectArenaMatchesTree(const Index& idx, const char* when) {
  VartMemory m;
  ASSERT_TRUE(vol::VartMemoryOf(idx, &m));
  EXPECT_EQ(m.blocks_live, static_cast<int64_t>(m.tree_blocks + m.retired_pending))
      << when << ": tree " << m.tree_blocks << ", retired " << m.retired_pending;
}

TEST(VartArena, ConcurrentGrowthMergeAndCrossThreadRetire) {
  test::TempPath path("varena");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, SmallPool(), &pool).ok());
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(CreateIndex(*pool, "v", "vart", IndexOptions{}, &idx).ok());
  constexpr int kGroups = 8;
  const int rounds = 40 / test::kSanitizerScale + 2;
  std::atomic<int> writers_done{0};
  std::atomic<uint64_t> wrong{0}, reads{0};
  std::vector<std::map<std::string, uint64_t>> models(kWriters);
  std::vector<std::string> failures(kWriters);
  std::vector<std::thread> ts;
  std::latch start(kWriters);
  for (int t = 0; t < kWriters; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      auto fail = [&](const std::string& what) {
        if (failures[t].empty()) failures[t] = what;
      };
      start.arrive_and_wait();  // all writers at once: they share nodes
      for (int r = 0; r < rounds; ++r) {
        for (int g = 0; g < kGroups; ++g) {
          std::vector<std::string> ks = KeysOf(t, (g + r) % kGroups);  // all writers in one group's nodes
          std::shuffle(ks.begin(), ks.end(), rng);
          for (const auto& k : ks)
            if (Status s = idx->Insert(k, ValueOf(k)); !s.ok()) fail("insert " + s.ToString());
          for (const auto& k : ks) {
            uint64_t v = 0;
            if (!idx->Lookup(k, &v).ok() || v != ValueOf(k)) fail("own key missing after insert");
          }
          const bool keep = r == rounds - 1 && g % 2 == 0;  // the last round leaves half the groups in
          if (keep) {
            for (const auto& k : ks) models[t][k] = ValueOf(k);
            continue;
          }
          std::shuffle(ks.begin(), ks.end(), rng);
          for (const auto& k : ks)
            if (Status s = idx->Remove(k); !s.ok()) fail("remove " + s.ToString());
          for (const auto& k : ks) {
            uint64_t v = 0;
            if (!idx->Lookup(k, &v).IsNotFound()) fail("own key present after remove");
          }
        }
      }
      writers_done++;
      // Each writer keeps its epoch slot (and node cache) until all are done: a thread that
      // exits early would hand both to the next thread that enrols.
      while (writers_done.load() < kWriters) std::this_thread::yield();
    });
  }
  // Readers: any key of any writer, found or not; a value found must be that key's.
  for (int rd = 0; rd < 2; ++rd) {
    ts.emplace_back([&, rd] {
      std::mt19937_64 rng(100 + rd);
      while (writers_done.load() < kWriters) {
        const int t = static_cast<int>(rng() % kWriters), g = static_cast<int>(rng() % kGroups);
        for (const auto& k : KeysOf(t, g)) {
          uint64_t v = 0;
          if (idx->Lookup(k, &v).ok() && v != ValueOf(k)) wrong++;
          reads++;
        }
      }
    });
  }
  for (auto& th : ts) th.join();
  for (int t = 0; t < kWriters; ++t) EXPECT_EQ(failures[t], "") << "writer " << t;
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(reads.load(), 0u);
  std::map<std::string, uint64_t> model;
  for (const auto& m : models) model.insert(m.begin(), m.end());
  ASSERT_FALSE(model.empty());
  test::ExpectSame(*idx, model, "after the writers");
  VartMemory m;
  ASSERT_TRUE(vol::VartMemoryOf(*idx, &m));
  EXPECT_GE(m.caches, static_cast<uint64_t>(kWriters)) << "a cache per writer thread";
  ExpectArenaMatchesTree(*idx, "after the writers");
  // Every key out (from this thread: it retires what four others allocated), then the arena
  // holds only what is still retired.
  for (const auto& [k, v] : model) ASSERT_TRUE(idx->Remove(k).ok()) << k;
  test::ExpectSame(*idx, std::map<std::string, uint64_t>{}, "emptied");
  ExpectArenaMatchesTree(*idx, "emptied");
  ASSERT_TRUE(vol::VartMemoryOf(*idx, &m));
  EXPECT_EQ(m.tree_blocks, 0u);
}

// u64 keys: leaves of one class, the YCSB load's shape (contiguous slices per thread), then
// every thread removes another thread's slice (cross-thread retire of leaves and NODE4s).
TEST(VartArena, U64SlicesRemovedByOtherThreads) {
  test::TempPath path("varena");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, SmallPool(), &pool).ok());
  IndexOptions o;
  o.key_type = KeyType::kU64;
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(CreateIndex(*pool, "u", "vart", o, &idx).ok());
  const uint64_t n = 200000 / test::kSanitizerScale;
  std::vector<uint64_t> keys(n);
  std::mt19937_64 rng(7);
  for (auto& k : keys) k = rng() | 1;  // sparse, distinct with overwhelming probability
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::shuffle(keys.begin(), keys.end(), rng);
  const size_t m = keys.size();
  auto slice = [&](int t) { return std::pair<size_t, size_t>{m * t / kWriters, m * (t + 1) / kWriters}; };
  std::atomic<int> inserted{0};
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kWriters; ++t) {
    ts.emplace_back([&, t] {
      auto [b, e] = slice(t);
      for (size_t i = b; i < e; ++i)
        if (!idx->Insert(keys[i], keys[i] ^ 0x5a).ok()) bad++;
      inserted++;
      while (inserted.load() < kWriters) std::this_thread::yield();
      // Remove the odd positions of the next thread's slice.
      auto [b2, e2] = slice((t + 1) % kWriters);
      for (size_t i = b2 + 1; i < e2; i += 2)
        if (!idx->Remove(keys[i]).ok()) bad++;
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(bad.load(), 0u);
  std::map<std::string, uint64_t> model;
  for (int t = 0; t < kWriters; ++t) {
    auto [b, e] = slice(t);
    for (size_t i = b; i < e; i += 2) model[EncodeU64(keys[i])] = keys[i] ^ 0x5a;
  }
  test::ExpectSame(*idx, model, "after the slices");
  ExpectArenaMatchesTree(*idx, "after the slices");
}

// Issue 31 (h59): a writer maps its next chunk (and takes the chunk's page faults: 0.1-10 ms on
// the development VM) before it enters vart's epoch, so no writer sits inside its epoch that long
// and holds back the other writers' epoch advances. The arena's map hook sees every chunk mapped
// by 4 writers inserting and upserting keys of every byte value and length 1..48, and none inside
// the epoch; the tree holds what the writers wrote.
struct MapCount {
  const Index* idx = nullptr;
  std::atomic<uint64_t> maps{0}, inside{0};
};
void CountMap(void* ctx) {
  auto* m = static_cast<MapCount*>(ctx);
  m->maps++;
  if (vol::VartThreadInEpoch(*m->idx)) m->inside++;
}

TEST(VartArena, ChunksAreMappedOutsideTheEpoch) {
  test::TempPath path("varena");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, SmallPool(), &pool).ok());
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(CreateIndex(*pool, "m", "vart", IndexOptions(), &idx).ok());
  MapCount mc;
  mc.idx = idx.get();
  vol::NodeArena::SetMapHookForTest(&CountMap, &mc);
  const int per = 60000 / test::kSanitizerScale;
  std::vector<std::map<std::string, uint64_t>> models(kWriters);
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kWriters; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int i = 0; i < per; ++i) {
        std::string k(1 + rng() % 48, '\0');
        for (char& c : k) c = static_cast<char>(rng());  // every byte value, >= 0x80 included
        k[0] = static_cast<char>((static_cast<uint8_t>(k[0]) & ~3u) | static_cast<uint8_t>(t));  // disjoint per writer
        const uint64_t v = rng() | 1;
        bool inserted = false;
        if (!idx->Upsert(k, v, &inserted).ok()) bad++;
        if (inserted != (models[t].count(k) == 0)) bad++;
        models[t][k] = v;
      }
    });
  }
  for (auto& th : ts) th.join();
  vol::NodeArena::SetMapHookForTest(nullptr, nullptr);
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GE(mc.maps.load(), uint64_t(kWriters)) << "every writer maps at least its first chunk";
  EXPECT_EQ(mc.inside.load(), 0u) << "chunks mapped inside the writer's epoch";
  std::map<std::string, uint64_t> model;
  for (auto& m : models) model.insert(m.begin(), m.end());
  test::ExpectSame(*idx, model, "after the writers");
  ExpectArenaMatchesTree(*idx, "after the writers");
}

}  // namespace
}  // namespace wort
