// The key-value store (wort/kv.h) under concurrent writers and readers, with checked results:
// writers race on the same keys (Put and Remove), readers and a scanner check every value they
// see is whole and belongs to its key (values describe themselves), keys that are only ever
// overwritten are always found, and afterwards the content is what the writers' last
// operations allow, then exactly a reference, and the pool holds exactly the index's blocks plus
// one value block per key (no block freed twice, none leaked). scripts/tsan.sh runs it under
// ThreadSanitizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "crash/oracle.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/kv.h"
#include "wort/pool.h"

namespace wort {
namespace {

constexpr int kScale = test::kSanitizerScale;

constexpr int kWriters = 3;
constexpr int kReaders = 2;
constexpr int kKeys = 96;
constexpr int kStable = 16;  // keys [0, kStable) are put before the run and only overwritten
constexpr int kOpsPerWriter = 20000 / kScale;

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

// Keys over the full byte range, prefixes of one another, up to 40 bytes.
std::string KeyOf(int i) {
  std::string k = std::string("\xff\x00k", 3) + std::to_string(i);
  k.push_back(static_cast<char>(i * 37));
  if (i % 5 == 0) k.append(static_cast<size_t>(i % 33), static_cast<char>(0x80 + i % 7));
  return k;
}

// A value that names its key, writer and sequence number, and whose body and length follow
// from them: a torn value, another key's value, or a freed-and-reused block fails Valid.
std::string ValueOf(int key, int writer, uint64_t seq) {
  static const size_t kSizes[] = {0, 5, 40, 100, 500, 3000, 70000};
  const uint64_t h = Mix(static_cast<uint64_t>(key) << 40 ^ static_cast<uint64_t>(writer) << 32 ^ seq);
  const size_t body = kSizes[h % (h % 61 == 0 ? 7 : 6)];
  std::string v = test::Cat(std::to_string(key), ":", std::to_string(writer), ":", std::to_string(seq), ":");
  for (size_t i = 0; i < body; ++i) v.push_back(static_cast<char>(h >> (i % 57) ^ i));
  return v;
}

// The (writer, seq) the value names if it is whole and of key `key`.
std::optional<std::pair<int, uint64_t>> Valid(int key, std::string_view v) {
  int k = -1, w = -1;
  unsigned long long seq = 0;
  const std::string head(v.substr(0, 40));
  if (std::sscanf(head.c_str(), "%d:%d:%llu:", &k, &w, &seq) != 3 || k != key || w < 0 || w > kWriters) return {};
  if (v != ValueOf(k, w, seq)) return {};
  return std::make_pair(w, static_cast<uint64_t>(seq));
}

int KeyIndex(std::string_view k, const std::map<std::string, int, std::less<>>& ids) {
  auto it = ids.find(k);
  return it == ids.end() ? -1 : it->second;
}

class KvStressTest : public ::testing::TestWithParam<std::string> {
 protected:
  // A new store of the test's kind at `path`.
  std::unique_ptr<KvStore> Open(const std::string& path, uint64_t size) {
    cfg_.path = path;
    cfg_.kind = GetParam();
    cfg_.size = size;
    std::unique_ptr<KvStore> db;
    Status s = KvStore::Open(cfg_, &db);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return db;
  }
  KvConfig cfg_;
};

TEST_P(KvStressTest, RacingWritersAndCheckingReaders) {
  test::TempPath p("kvstress");
  std::unique_ptr<KvStore> db = Open(p, 512ull << 20);
  ASSERT_TRUE(db);
  const bool ordered = db->Capabilities().ordered;
  std::map<std::string, int, std::less<>> ids;
  for (int i = 0; i < kKeys; ++i) ids[KeyOf(i)] = i;
  ASSERT_EQ(ids.size(), static_cast<size_t>(kKeys));
  for (int i = 0; i < kStable; ++i) ASSERT_TRUE(db->Put(KeyOf(i), ValueOf(i, kWriters, 0)).ok());

  // Per writer and key: the result of its last operation (nullopt: a Remove), when it had any.
  struct Last {
    bool touched = false;
    std::optional<std::string> value;
  };
  std::vector<std::vector<Last>> last(kWriters, std::vector<Last>(kKeys));
  std::atomic<int> bad{0}, writers_done{0};
  std::atomic<uint64_t> reads{0}, scans{0};
  std::vector<std::string> errors(kWriters + kReaders + 1);
  auto fail = [&](int who, const std::string& what) {
    if (bad.fetch_add(1) == 0 || errors[who].empty()) errors[who] = what;
  };

  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; ++w)
    ts.emplace_back([&, w] {
      while (reads.load() < 50) std::this_thread::yield();  // the readers run meanwhile
      uint64_t r = Mix(w + 1);
      for (int op = 0; op < kOpsPerWriter; ++op) {
        r = Mix(r);
        // Half of the operations go to 8 hot keys: the writers collide on one key often.
        const int key = (r >> 8) % 2 == 0 ? static_cast<int>((r >> 16) % 8) : static_cast<int>((r >> 16) % kKeys);
        const std::string k = KeyOf(key);
        if (key >= kStable && (r >> 32) % 4 == 0) {
          Status s = db->Remove(k);
          if (!s.ok() && !s.IsNotFound()) fail(w, "remove: " + s.ToString());
          last[w][key] = Last{true, std::nullopt};
        } else {
          std::string v = ValueOf(key, w, static_cast<uint64_t>(op) + 1);
          Status s = db->Put(k, v);
          if (!s.ok()) fail(w, "put: " + s.ToString());
          last[w][key] = Last{true, std::move(v)};
        }
      }
      writers_done.fetch_add(1);
    });
  for (int rd = 0; rd < kReaders; ++rd)
    ts.emplace_back([&, rd] {
      uint64_t r = Mix(100 + rd);
      while (writers_done.load() < kWriters) {
        r = Mix(r);
        const int key = static_cast<int>(r % kKeys);
        const std::string k = KeyOf(key);
        std::string v;
        Status s = (r >> 40) % 2 ? db->Get(k, &v)
                                 : db->Get(k, [&](std::string_view view) { v.assign(view); });
        if (s.ok()) {
          if (!Valid(key, v)) fail(kWriters + rd, "a torn or foreign value of key " + std::to_string(key));
        } else if (!s.IsNotFound() || key < kStable) {
          fail(kWriters + rd, "get of key " + std::to_string(key) + ": " + s.ToString());
        }
        Status e = db->Exists(k);
        if (!e.ok() && (!e.IsNotFound() || key < kStable)) fail(kWriters + rd, "exists: " + e.ToString());
        reads.fetch_add(1);
      }
    });
  if (ordered)
    ts.emplace_back([&] {
      while (writers_done.load() < kWriters) {
        std::string prev;
        bool first = true;
        std::vector<bool> seen(kKeys, false);
        Status s = db->Scan("", std::nullopt, [&](std::string_view k, std::string_view v) {
          const int key = KeyIndex(k, ids);
          if (key < 0 || !Valid(key, v)) fail(kWriters + kReaders, "scan: a foreign key or a torn value");
          if (!first && !(CompareKeys(prev, k) < 0)) fail(kWriters + kReaders, "scan: keys out of order");
          if (key >= 0) seen[key] = true;
          prev.assign(k);
          first = false;
          reads.fetch_add(1);
          return true;
        });
        if (!s.ok()) fail(kWriters + kReaders, "scan: " + s.ToString());
        for (int i = 0; i < kStable; ++i)
          if (!seen[i]) fail(kWriters + kReaders, "scan: stable key " + std::to_string(i) + " missing");
        scans.fetch_add(1);
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  for (const std::string& e : errors) EXPECT_TRUE(e.empty()) << e;
  EXPECT_GT(reads.load(), 0u);
  if (ordered) {
    EXPECT_GT(scans.load(), 0u);
  }

  // Each key holds the result of the last operation on it, which is some writer's last one.
  for (int key = 0; key < kKeys; ++key) {
    std::string v;
    Status s = db->Get(KeyOf(key), &v);
    ASSERT_TRUE(s.ok() || s.IsNotFound()) << s.ToString();
    bool allowed = false, any = false;
    for (int w = 0; w < kWriters; ++w) {
      const Last& l = last[w][key];
      if (!l.touched) continue;
      any = true;
      allowed |= l.value ? (s.ok() && v == *l.value) : s.IsNotFound();
    }
    if (!any) allowed = key < kStable ? s.ok() && v == ValueOf(key, kWriters, 0) : s.IsNotFound();
    EXPECT_TRUE(allowed) << "key " << key << ": " << (s.ok() ? v.substr(0, 24) : s.ToString())
                         << " is no writer's last operation";
  }

  // A settling round, one writer per key, in parallel: the content is then exactly `ref`.
  std::map<std::string, std::string> ref;
  std::vector<std::thread> settle;
  for (int w = 0; w < kWriters; ++w)
    settle.emplace_back([&, w] {
      for (int key = w; key < kKeys; key += kWriters) {
        Status s = key >= kStable && key % 3 == 0 ? db->Remove(KeyOf(key)) : db->Put(KeyOf(key), ValueOf(key, w, 1u << 30));
        if (!s.ok() && !s.IsNotFound()) fail(w, "settle: " + s.ToString());
      }
    });
  for (auto& t : settle) t.join();
  for (int key = 0; key < kKeys; ++key)
    if (!(key >= kStable && key % 3 == 0)) ref[KeyOf(key)] = ValueOf(key, key % kWriters, 1u << 30);
  EXPECT_EQ(bad.load(), 0);
  uint64_t n = 0;
  ASSERT_TRUE(db->Count(&n).ok());
  EXPECT_EQ(n, ref.size());
  for (int key = 0; key < kKeys; ++key) {
    std::string v;
    Status s = db->Get(KeyOf(key), &v);
    auto it = ref.find(KeyOf(key));
    if (it == ref.end()) {
      EXPECT_TRUE(s.IsNotFound()) << key << ": " << s.ToString();
    } else {
      ASSERT_TRUE(s.ok()) << key << ": " << s.ToString();
      EXPECT_TRUE(v == it->second) << key;
    }
  }
  if (ordered) {
    auto it = ref.begin();
    ASSERT_TRUE(db->Scan("", std::nullopt, [&](std::string_view k, std::string_view v) {
                    EXPECT_TRUE(it != ref.end() && k == it->first && v == it->second);
                    if (it != ref.end()) ++it;
                    return true;
                  }).ok());
    EXPECT_TRUE(it == ref.end());
  }
  std::string rep;
  EXPECT_TRUE(db->Check(&rep).ok()) << rep;
  const AllocStats st = db->pool().allocator().Stats();
  EXPECT_EQ(st.retired_outside_epoch, 0u);
  // Every replaced or removed value block is either pending in the epochs or freed.
  const uint64_t live = st.blocks_allocated - st.retired_pending;

  // A clean close frees the pending blocks; then the allocated blocks are exactly the reachable
  // ones, and every key has its own value block.
  ASSERT_TRUE(db->Close().ok());
  EXPECT_TRUE(db->Put("x", "y").code() == Code::kInvalidArgument);
  {
    PoolOptions po;
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Open(p, po, &pool).ok());
    EXPECT_EQ(pool->allocator().Stats().retired_pending, 0u);
    EXPECT_EQ(pool->allocator().Stats().blocks_allocated, live) << "blocks freed twice or leaked";
    rep.clear();
    EXPECT_TRUE(crash::CheckReachability(*pool, &rep).ok()) << rep;
    std::unique_ptr<Index> idx;
    ASSERT_TRUE(OpenIndex(*pool, cfg_.name, &idx).ok());
    std::set<uint64_t> offs;
    for (int key = 0; key < kKeys; ++key) {
      uint64_t off = 0;
      if (idx->Lookup(KeyOf(key), &off).ok()) offs.insert(off);
    }
    EXPECT_EQ(offs.size(), ref.size()) << "two keys share a value block";
    ASSERT_TRUE(pool->Close().ok());
  }
}

// Close while readers and writers run: every call returns OK, NotFound or "closed"
// (InvalidArgument), none touches the closed pool (ThreadSanitizer and ASan would report it).
// ForEach (every kind; a hash kind's unordered iteration gathers its keys under the table's
// locks) beside writers that overwrite and remove: every pass gives each key at most once, each
// value whole and of its key, and every key that is never removed.
TEST_P(KvStressTest, ForEachBesideWriters) {
  test::TempPath p("kvstress-foreach");
  std::unique_ptr<KvStore> db = Open(p, 256ull << 20);
  ASSERT_TRUE(db);
  std::map<std::string, int, std::less<>> ids;
  for (int i = 0; i < kKeys; ++i) ids[KeyOf(i)] = i;
  for (int i = 0; i < kKeys; ++i) ASSERT_TRUE(db->Put(KeyOf(i), ValueOf(i, kWriters, 0)).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::atomic<uint64_t> passes{0};
  std::string error;
  std::vector<std::thread> ts;
  for (int w = 0; w < 2; ++w)
    ts.emplace_back([&, w] {
      uint64_t r = Mix(w + 11);
      for (int op = 0; op < kOpsPerWriter / 4 || passes.load() < 4; ++op) {
        r = Mix(r);
        const int key = static_cast<int>((r >> 16) % kKeys);
        if (key >= kStable && (r >> 32) % 3 == 0) {
          (void)db->Remove(KeyOf(key));
        } else if (!db->Put(KeyOf(key), ValueOf(key, w, static_cast<uint64_t>(op) + 1)).ok()) {
          bad.fetch_add(1);
        }
      }
    });
  std::thread it([&] {
    while (!stop.load()) {
      std::vector<int> seen(kKeys, 0);
      std::string why;
      const Status s = db->ForEach([&](std::string_view k, std::string_view v) {
        const int i = KeyIndex(k, ids);
        if (i < 0) why = "a key that was never written";
        else if (++seen[i] > 1) why = "key " + std::to_string(i) + " given twice";
        else if (!Valid(i, v)) why = "key " + std::to_string(i) + ": a torn or foreign value";
        return why.empty();
      });
      if (!s.ok()) why = s.ToString();
      for (int i = 0; i < kStable && why.empty(); ++i)
        if (seen[i] != 1) why = "stable key " + std::to_string(i) + " missing";
      if (!why.empty()) {
        if (bad.fetch_add(1) == 0) error = why;
        return;
      }
      passes.fetch_add(1);
    }
  });
  for (auto& t : ts) t.join();
  stop.store(true);
  it.join();
  EXPECT_EQ(bad.load(), 0) << error;
  EXPECT_GE(passes.load(), 4u);
  ASSERT_TRUE(db->Close().ok());
}

TEST_P(KvStressTest, CloseBesideRunningOperations) {
  test::TempPath p("kvclose");
  std::unique_ptr<KvStore> db = Open(p, 128ull << 20);
  ASSERT_TRUE(db);
  std::atomic<bool> closed{false};
  std::atomic<int> bad{0};
  std::atomic<uint64_t> ops{0}, after{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t)
    ts.emplace_back([&, t] {
      uint64_t r = Mix(t + 7);
      for (int i = 0; after.load() < 200; ++i) {
        r = Mix(r);
        const int key = static_cast<int>(r % 64);
        const bool was_closed = closed.load();
        Status s;
        std::string v;
        switch ((r >> 20) % 4) {
          case 0: s = db->Put(KeyOf(key), ValueOf(key, t, i)); break;
          case 1: s = db->Remove(KeyOf(key)); break;
          case 2:
            s = db->Get(KeyOf(key), &v);
            if (s.ok() && !Valid(key, v)) bad.fetch_add(1);
            break;
          default: s = db->Exists(KeyOf(key)); break;
        }
        if (!s.ok() && !s.IsNotFound() && s.code() != Code::kInvalidArgument) bad.fetch_add(1);
        if (was_closed && s.code() != Code::kInvalidArgument) bad.fetch_add(1);  // began after Close returned
        ops.fetch_add(1);
        if (was_closed) after.fetch_add(1);
      }
    });
  while (ops.load() < 2000 / kScale) std::this_thread::yield();
  ASSERT_TRUE(db->Close().ok());
  closed.store(true);
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  ASSERT_TRUE(db->Close().ok());  // twice is fine
  // The pool was closed cleanly.
  PoolOptions po;
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Open(p, po, &pool).ok());
  EXPECT_TRUE(pool->opened_clean());
  std::string rep;
  EXPECT_TRUE(crash::CheckReachability(*pool, &rep).ok()) << rep;
}

// The kinds whose writers run in parallel, and two whose index takes one writer at a time
// (the store must be as correct over those).
INSTANTIATE_TEST_SUITE_P(Kinds, KvStressTest,
                         ::testing::Values("woart", "wort", "artcow", "roart", "fastfair", "cceh", "cceh-cow",
                                           "wbtree", "linp"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace wort
