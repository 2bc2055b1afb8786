// Eviction of the server's store (StoreOptions::evict = kLru, `wort serve --evict lru`): a tiny
// pool written far past its size keeps accepting writes, keeps the recently read keys, stores
// items larger than any freed size class, keeps the survivors across a restart, and runs under
// several threads; with kNone (the default) a full pool still refuses writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "server/store.h"
#include "wort/alloc.h"

namespace wort::server {
namespace {

constexpr uint64_t kPool = 8ull << 20;  // a few MiB: 10x its size is written in about a second

// Keys cover byte 0x00 (not first: a leading 0x00 is the store's metadata key space), bytes
// >= 0x80, the empty key, keys that are prefixes of others, and long keys.
std::string KeyOf(uint64_t i) {
  switch (i % 4) {
    case 0: return "k" + std::to_string(i);
    case 1: return std::string("b\x00", 2) + std::to_string(i) + "\xff\x80";
    case 2: return "\xe9\xa2" + std::to_string(i);
    default: return std::string(200, 'L') + std::to_string(i);
  }
}
std::string ValueOf(uint64_t i, size_t len) {
  std::string v(len, '\0');
  for (size_t j = 0; j < len; ++j) v[j] = static_cast<char>((i * 131 + j * 7) & 0xff);
  if (len >= 8) std::memcpy(v.data(), &i, 8);
  return v;
}

struct Evict : ::testing::Test {
  test::TempPath path{"evict"};
  std::unique_ptr<Store> st;
  void Open(EvictPolicy p, const std::string& kind = "", uint64_t pool = kPool) {
    StoreOptions o;
    o.pool_path = path.str();
    o.index_kind = kind;
    o.pool_size = pool;
    o.crawler = false;
    o.evict = p;
    Status s = Store::Open(o, &st);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void TearDown() override {
    if (st) {
      std::string report;
      EXPECT_TRUE(st->CheckRecency(&report)) << report;
      EXPECT_TRUE(st->Close().ok());
    }
  }
  std::string Get(std::string_view k) {
    std::string v = "<miss>";
    st->Get(k, [&](const ItemView& it) { v.assign(it.data); });
    return v;
  }
  Result Set(std::string_view k, std::string_view v) { return st->StoreItem(StoreMode::kSet, k, 0, 0, v, 0); }
};

TEST_F(Evict, HotKeysSurviveTenTimesThePoolWritten) {
  Open(EvictPolicy::kLru);
  ASSERT_TRUE(st->evicting());
  std::vector<std::string> hot;
  hot.push_back("");  // the empty key
  hot.push_back("h");
  hot.push_back("h\x80");  // "h" is a prefix of it
  for (int i = 3; i < 50; ++i) hot.push_back("hot" + KeyOf(i));
  for (size_t i = 0; i < hot.size(); ++i) ASSERT_EQ(Set(hot[i], ValueOf(i, 100)), Result::kStored) << i;
  const size_t kVal = 400;
  const uint64_t writes = 10 * kPool / kVal;
  uint64_t i = 0;
  for (; i < writes; ++i) {
    ASSERT_EQ(Set(KeyOf(i), ValueOf(i, kVal)), Result::kStored) << "write " << i;
    if (i % 200 == 0)
      for (const auto& h : hot) Get(h);
  }
  int hot_alive = 0;
  for (size_t h = 0; h < hot.size(); ++h) {
    const std::string v = Get(hot[h]);
    if (v != "<miss>") {
      ASSERT_EQ(v, ValueOf(h, 100)) << "hot key " << h << " has a wrong value";
      ++hot_alive;
    }
  }
  // Cold keys: the first 10% written, never read.
  uint64_t cold_alive = 0, recent_alive = 0;
  const uint64_t sample = writes / 10;
  for (uint64_t j = 0; j < sample; ++j) {
    const std::string v = Get(KeyOf(j));
    if (v != "<miss>") {
      ASSERT_EQ(v, ValueOf(j, kVal));
      ++cold_alive;
    }
  }
  for (uint64_t j = writes - 1000; j < writes; ++j) {
    const std::string v = Get(KeyOf(j));
    if (v != "<miss>") {
      ASSERT_EQ(v, ValueOf(j, kVal));
      ++recent_alive;
    }
  }
  const uint64_t ev = st->counters().evictions.load();
  std::printf("evict: %llu writes of %zu bytes into a %llu MiB pool: %llu evictions (%llu unfetched), "
              "%d/%zu hot keys, %llu/%llu of the oldest cold keys, %llu/1000 of the newest alive; %llu items\n",
              (unsigned long long)writes, kVal, (unsigned long long)(kPool >> 20), (unsigned long long)ev,
              (unsigned long long)st->counters().evicted_unfetched.load(), hot_alive, hot.size(),
              (unsigned long long)cold_alive, (unsigned long long)sample, (unsigned long long)recent_alive,
              (unsigned long long)st->curr_items());
  EXPECT_GE(hot_alive, static_cast<int>(hot.size()) - 1);  // all or nearly all
  EXPECT_LT(cold_alive, sample / 20);                      // the oldest unread keys went first
  EXPECT_GT(recent_alive, 900u);
  EXPECT_GT(ev, writes / 2);
  EXPECT_GT(st->counters().evicted_unfetched.load(), writes / 2);
  EXPECT_EQ(st->tracked_items(), st->curr_items());
}

TEST_F(Evict, ItemsLargerThanTheFreedClassAreStored) {
  Open(EvictPolicy::kLru);
  uint64_t n = 0;
  // Fill with small items, then ask for sizes no small item freed: a big small-class item, an
  // item of a whole chunk and a two-chunk item (1 MiB of data + the header), then small again.
  auto fill_small = [&](uint64_t count) {
    for (uint64_t j = 0; j < count; ++j, ++n) ASSERT_EQ(Set(KeyOf(n), ValueOf(n, 40)), Result::kStored);
  };
  fill_small(3 * kPool / 200);  // items take about 100 bytes with their keys: 1.5 pools
  for (size_t len : {size_t{200000}, size_t{1} << 20, size_t{700000}, size_t{5000}, size_t{1} << 20}) {
    const std::string key = "big" + std::to_string(len);
    const Result r = Set(key, ValueOf(len, len));
    const AllocStats as = st->pool().allocator().Stats();
    ASSERT_EQ(r, Result::kStored) << len << ": chunks " << as.chunks_total << " free " << as.chunks_free << " small "
                                  << as.chunks_small << " large " << as.chunks_large << ", " << st->curr_items()
                                  << " items, " << st->tracked_items() << " tracked, pool " << st->pool().size();
    EXPECT_EQ(Get(key), ValueOf(len, len));
    fill_small(kPool / 200);
  }
  // Large items written over and over (each needs whole chunks) never starve.
  for (int r = 0; r < 20; ++r) {
    const std::string key = "L" + std::to_string(r % 5);
    ASSERT_EQ(Set(key, ValueOf(r, 600000)), Result::kStored) << r;
    fill_small(2000);
  }
  EXPECT_GT(st->counters().evictions.load(), 0u);
}

// Dozens of size classes in a pool of a few chunks: each class needs whole chunks, so writes
// keep evicting whole chunks; every write must still be stored (and read back right at once).
TEST_F(Evict, ManySizeClassesInATinyPool) {
  Open(EvictPolicy::kLru);
  for (uint64_t i = 0; i < 20000; ++i) {
    const size_t len = 10 + (i * 997) % 3000;
    ASSERT_EQ(Set(KeyOf(i), ValueOf(i, len)), Result::kStored) << i << " len " << len;
    if (i % 100 == 0) {
      ASSERT_EQ(Get(KeyOf(i)), ValueOf(i, len));
    }
  }
  std::printf("evict: 20000 values of 10..3010 bytes in an 8 MiB pool: %llu items kept, %llu evictions\n",
              (unsigned long long)st->curr_items(), (unsigned long long)st->counters().evictions.load());
}

// The read hot path with eviction on: one hash lookup and at most one relaxed store more than
// without. Prints ns per get for both; fails only if lru reads are grossly slower.
TEST_F(Evict, ReadPathCost) {
  double ns[2] = {1e12, 1e12};  // the best of two runs each, alternating (the first run warms up)
  for (int round = 0; round < 4; ++round) {
    const int mode = round % 2;
    Open(mode ? EvictPolicy::kLru : EvictPolicy::kNone, "", 64ull << 20);
    for (uint64_t i = 0; i < 20000; ++i) ASSERT_EQ(Set(KeyOf(i), ValueOf(i, 40)), Result::kStored);
    uint64_t hits = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (uint64_t r = 0; r < 200000; ++r)
      hits += st->Get(KeyOf((r * 7919) % 20000), [](const ItemView&) {});
    ns[mode] = std::min(ns[mode], std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / 200000);
    EXPECT_EQ(hits, 200000u);
    ASSERT_TRUE(st->Close().ok());
    st.reset();
    std::filesystem::remove(path.str());
  }
  std::printf("evict: get of a 40-byte item (20000 items, %s index): %.0f ns with --evict none, %.0f ns with lru\n",
              DefaultIndexKind().c_str(), ns[0], ns[1]);
  EXPECT_LT(ns[1], 5 * ns[0] + 1000);
}

TEST_F(Evict, NoneRefusesAFullPool) {
  Open(EvictPolicy::kNone);
  EXPECT_FALSE(st->evicting());
  uint64_t i = 0;
  Result r = Result::kStored;
  for (; i < 10 * kPool / 200 && r == Result::kStored; ++i) r = Set(KeyOf(i), ValueOf(i, 200));
  EXPECT_EQ(r, Result::kNoMemory);
  EXPECT_EQ(st->counters().evictions.load(), 0u);
  EXPECT_EQ(Get(KeyOf(0)), ValueOf(0, 200));  // nothing was dropped
}

// The model: after a fill, every key is either absent or has its last value; a clean restart
// keeps exactly the present ones, tracks them all (equally old) and can evict them.
TEST_F(Evict, RestartKeepsTheSurvivors) {
  Open(EvictPolicy::kLru);
  const uint64_t writes = 4 * kPool / 150;
  for (uint64_t i = 0; i < writes; ++i) ASSERT_EQ(Set(KeyOf(i % 60000), ValueOf(i, 150)), Result::kStored);
  std::map<std::string, std::string> present;
  for (uint64_t k = 0; k < 60000; ++k) {
    const std::string v = Get(KeyOf(k));
    if (v == "<miss>") continue;
    // The last write of key k was i = the largest i < writes with i % 60000 == k.
    const uint64_t last = (writes - 1 - k) / 60000 * 60000 + k;
    ASSERT_EQ(v, ValueOf(last, 150)) << k;
    present.emplace(KeyOf(k), v);
  }
  ASSERT_GT(present.size(), 1000u);
  ASSERT_LT(present.size(), 60000u);
  ASSERT_TRUE(st->Close().ok());
  Open(EvictPolicy::kLru);
  std::printf("evict: reopen with %zu items (tracked by the background count): %.1f ms\n", present.size(), st->open_seconds() * 1e3);
  st->WaitForCount();
  EXPECT_EQ(st->curr_items(), present.size());
  EXPECT_EQ(st->tracked_items(), present.size());
  for (const auto& [k, v] : present) ASSERT_EQ(Get(k), v);
  for (uint64_t i = 0; i < 2 * kPool / 150; ++i) ASSERT_EQ(Set("new" + KeyOf(i), ValueOf(i, 150)), Result::kStored);
  EXPECT_GT(st->counters().evictions.load(), 0u);
}

// A hash index cannot be scanned at open: its survivors are adopted when read.
TEST_F(Evict, HashIndexAdoptsSurvivorsOnRead) {
  ASSERT_NE(FindIndexKind("cceh"), nullptr) << "cceh is a built-in kind";
  Open(EvictPolicy::kLru, "cceh");
  for (uint64_t i = 0; i < 3 * kPool / 150; ++i) ASSERT_EQ(Set(KeyOf(i), ValueOf(i, 150)), Result::kStored) << i;
  const uint64_t items = st->curr_items();
  ASSERT_TRUE(st->Close().ok());
  Open(EvictPolicy::kLru, "cceh");
  st->WaitForCount();
  EXPECT_EQ(st->tracked_items(), 0u);
  EXPECT_EQ(st->curr_items(), items);
  uint64_t read = 0;
  for (uint64_t i = 0; i < 3 * kPool / 150; ++i)
    if (Get(KeyOf(i)) != "<miss>") ++read;
  EXPECT_EQ(read, items);
  for (uint64_t i = 0; i < 3 * kPool / 150; ++i) ASSERT_EQ(Set("n" + KeyOf(i), ValueOf(i, 150)), Result::kStored) << i;
  EXPECT_GT(st->counters().evictions.load(), 0u);
  // The adopted survivors were evictable: most of them are gone, the rest are unchanged.
  uint64_t old_alive = 0;
  for (uint64_t i = 0; i < 3 * kPool / 150; ++i) {
    const std::string v = Get(KeyOf(i));
    if (v == "<miss>") continue;
    ASSERT_EQ(v, ValueOf(i, 150));
    ++old_alive;
  }
  EXPECT_LT(old_alive, items / 2);
}

// Four writers and readers through a full pool. The contract (store.h, "Eviction"): a write
// evicts and retries at most kEvictAttempts times, then answers kNoMemory. With four writers on
// a loaded 2-core machine a writer can lose that race now and then (CI saw 1 refusal in 335,544
// writes; why is not proven - what it evicted may have gone to other writers, or waited on a
// grace period that a descheduled thread held); memcached answers "out of memory" in the same case. So: refusals are kNoMemory,
// each one counted in evict_failures, and rare (at most 1 in 1,000 writes); values never wrong.
TEST_F(Evict, ConcurrentWritersAndReaders) {
  Open(EvictPolicy::kLru);
  std::atomic<uint64_t> refused{0}, other{0}, wrong{0};
  const uint64_t per_thread = 2 * kPool / 200;
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (uint64_t i = 0; i < per_thread; ++i) {
        const uint64_t id = i * 4 + t;
        const size_t len = (i % 50 == 0) ? 30000 : 200;
        const Result r = st->StoreItem(StoreMode::kSet, KeyOf(id), 0, 0, ValueOf(id, len), 0);
        if (r == Result::kNoMemory) ++refused;
        else if (r != Result::kStored) ++other;
        if (i % 3 == 0) {
          const uint64_t back = id >= 40 ? id - 40 : id;
          const size_t blen = ((back / 4) % 50 == 0) ? 30000 : 200;
          st->Get(KeyOf(back), [&](const ItemView& it) {
            if (it.data != ValueOf(back, blen)) ++wrong;
          });
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(other.load(), 0u);
  EXPECT_LE(refused.load() * 1000, 4 * per_thread) << refused.load() << " of " << 4 * per_thread << " writes refused";
  EXPECT_EQ(st->counters().evict_failures.load(), refused.load());
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(st->counters().evictions.load(), 0u);
}

}  // namespace
}  // namespace wort::server
