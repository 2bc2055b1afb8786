// vbptree's own edges (src/index/volatile/vbptree.cc) against a std::map model: splits at every
// level (height >= 3) on both key representations (u64 integers; byte keys as inline head +
// buffer), byte keys whose 7-byte heads tie (only the buffer decides), keys of exactly 7 and 8
// bytes, trailing 0x00 bytes, the empty key, 4096-byte keys, suffix-truncated separators where
// one leaf's last key is a prefix of the next leaf's first, scans crossing leaves with starts of
// any length on a u64 index, drains to empty in ascending, descending and random order (emptied
// leaves leave the chain; the root collapses) and re-insertion afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/differential.h"
#include "common/test_util.h"
#include "wort/index.h"
#include "wort/pool.h"

namespace wort {
namespace {

using test::Model;

class VbpTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PoolOptions o;
    o.initial_size = 4ull << 20;
    o.max_size = 64ull << 20;
    o.background_recovery = false;
    ASSERT_TRUE(Pool::Create(path_, o, &pool_).ok());
  }
  std::unique_ptr<Index> Make(KeyType kt, const std::string& name = "t") {
    IndexOptions o;
    o.key_type = kt;
    std::unique_ptr<Index> idx;
    EXPECT_TRUE(CreateIndex(*pool_, name, "vbptree", o, &idx).ok());
    return idx;
  }
  void Fill(Index* idx, Model* m, const std::vector<std::string>& keys) {
    for (const auto& k : keys) {
      const uint64_t v = m->size() * 3 + 1;
      Status s = idx->Insert(k, v);
      if (m->count(k)) {
        ASSERT_TRUE(s.IsAlreadyExists());
      } else {
        ASSERT_TRUE(s.ok()) << s.ToString();
        (*m)[k] = v;
      }
    }
  }
  // Every scan start from the model's keys (and just-after-key starts) with a small limit, so
  // most scans cross a leaf boundary somewhere.
  void ExpectScans(const Index& idx, const Model& m, std::mt19937_64& rng, int n) {
    std::vector<std::string> keys;
    for (const auto& kv : m) keys.push_back(kv.first);
    for (int i = 0; i < n && !keys.empty(); ++i) {
      std::string start = keys[rng() % keys.size()];
      if (rng() % 3 == 0) start.push_back('\0');  // just after a key
      const size_t limit = 1 + rng() % 150;
      std::vector<std::pair<std::string, uint64_t>> got, want;
      ASSERT_TRUE(idx.Scan(start, nullptr, limit, [&](std::string_view k, uint64_t v) {
                       got.emplace_back(std::string(k), v);
                       return true;
                     }).ok());
      for (auto it = m.lower_bound(start); it != m.end() && want.size() < limit; ++it) want.emplace_back(*it);
      ASSERT_EQ(got, want) << "start of size " << start.size();
    }
  }

  test::TempPath path_{"vbp"};
  std::unique_ptr<Pool> pool_;
};

// Byte keys built to stress the head encoding: common 7-byte heads (so only the buffer
// decides), lengths around 7/8, 0x00 and 0xff bytes, prefixes of each other.
std::string TieKey(std::mt19937_64& rng) {
  static const std::string kHeads[] = {std::string(7, '\0'), std::string(7, '\xff'), "abcdefg",
                                       std::string("\x80\x00\x7f\x81\x00\x00\x01", 7)};
  const std::string& h = kHeads[rng() % 4];
  switch (rng() % 6) {
    case 0: return h.substr(0, rng() % 8);                        // 0..7 bytes: inline
    case 1: return h + std::string(1, static_cast<char>(rng()));  // exactly 8 bytes
    case 2: return h + std::string(rng() % 4, '\0');              // trailing zeros: prefix chain
    default: {
      std::string s = h;
      const size_t n = rng() % 24;
      for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(rng() % 3 == 0 ? 0 : rng()));
      return s;
    }
  }
}

TEST_F(VbpTreeTest, U64SplitsAtEveryLevelThenDrainAndRefill) {
  auto idx = Make(KeyType::kU64);
  Model m;
  std::mt19937_64 rng(7);
  std::vector<std::string> keys;
  // Ascending keys fill nodes only half (split in half), so 70,000 reach three inner levels;
  // random keys (full range and a dense low range) go in between.
  for (uint64_t i = 0; i < 70000; ++i) keys.push_back(EncodeU64((i << 20) * 5));
  for (int i = 0; i < 30000; ++i) keys.push_back(EncodeU64(rng() % 3 == 0 ? rng() : (rng() >> 40)));
  keys.push_back(EncodeU64(0));
  keys.push_back(EncodeU64(UINT64_MAX));
  keys.push_back(EncodeU64(0x8000000000000000ull));
  Fill(idx.get(), &m, keys);
  IndexStats st = idx->Stats();
  EXPECT_GE(st.avg_leaf_depth, 3.0) << "the test no longer reaches three inner levels";
  EXPECT_GT(st.volatile_bytes, m.size() * 8);
  EXPECT_LT(st.volatile_bytes, m.size() * 40) << "u64 keys should take about 16-25 bytes each";
  test::ExpectSame(*idx, m);
  ExpectScans(*idx, m, rng, 300);
  // Starts of other lengths than 8 on a u64 index: the least key >= start.
  for (const std::string& start : {std::string(), std::string(1, '\x80'), std::string("\x00\x00\x00", 3),
                                  EncodeU64(12345) + std::string(1, '\0'), std::string(9, '\xff'),
                                  EncodeU64(UINT64_MAX - 1) + "x"}) {
    std::vector<std::string> got;
    ASSERT_TRUE(idx->Scan(start, nullptr, 3, [&](std::string_view k, uint64_t) {
                       got.emplace_back(k);
                       return true;
                     }).ok());
    std::vector<std::string> want;
    for (auto it = m.lower_bound(start); it != m.end() && want.size() < 3; ++it) want.push_back(it->first);
    EXPECT_EQ(got, want) << "start of size " << start.size();
  }
  // Remove half in random order, then the rest in descending order (first children of inner
  // nodes empty first), then refill and drain ascending.
  std::vector<std::string> all;
  for (const auto& kv : m) all.push_back(kv.first);
  std::shuffle(all.begin(), all.end(), rng);
  for (size_t i = 0; i < all.size() / 2; ++i) {
    ASSERT_TRUE(idx->Remove(all[i]).ok());
    m.erase(all[i]);
  }
  test::ExpectSame(*idx, m);
  ExpectScans(*idx, m, rng, 200);
  for (auto it = m.rbegin(); it != m.rend(); ++it) ASSERT_TRUE(idx->Remove(it->first).ok());
  m.clear();
  test::ExpectSame(*idx, m);
  EXPECT_EQ(idx->Stats().avg_leaf_depth, 0.0) << "an empty tree is a single root leaf";
  EXPECT_TRUE(idx->Remove(EncodeU64(0)).IsNotFound());
  Fill(idx.get(), &m, keys);
  test::ExpectSame(*idx, m);
  for (const auto& kv : m) ASSERT_TRUE(idx->Remove(kv.first).ok());
  m.clear();
  test::ExpectSame(*idx, m);
  Fill(idx.get(), &m, {EncodeU64(5), EncodeU64(1)});
  test::ExpectSame(*idx, m);
}

TEST_F(VbpTreeTest, BytesHeadTiesSplitsAtEveryLevelAndDrain) {
  auto idx = Make(KeyType::kBytes);
  Model m;
  std::mt19937_64 rng(11);
  std::vector<std::string> keys;
  for (int i = 0; i < 30000; ++i) keys.push_back(TieKey(rng));
  // Ascending long keys with a common 7-byte head (every comparison reaches the buffer) fill
  // nodes half, to reach three inner levels.
  for (uint32_t i = 0; i < 25000; ++i) keys.push_back(std::string(7, '\x90') + EncodeU64(i).substr(5) + "\xff");
  for (int i = 0; i < 40; ++i) {
    std::string k(kMaxKeyLen, static_cast<char>(i % 2 ? 0xff : 0x00));
    k[kMaxKeyLen - 1 - i] = '\x01';  // long keys that differ only near their end
    keys.push_back(k);
  }
  keys.push_back(std::string(kMaxKeyLen - 1, '\xff'));  // a prefix of a 4096-byte key
  keys.push_back(std::string());
  Fill(idx.get(), &m, keys);
  // Sequential keys over the separator-truncation edge: each key is a prefix of the next.
  std::vector<std::string> chain;
  for (size_t n = 0; n < 300; ++n) chain.push_back(std::string(n, '\x90'));
  Fill(idx.get(), &m, chain);
  EXPECT_GE(idx->Stats().avg_leaf_depth, 3.0) << "the test no longer reaches three inner levels";
  test::ExpectSame(*idx, m);
  ExpectScans(*idx, m, rng, 400);
  // Upsert every key (replace path), then lookups of near misses.
  for (auto& [k, v] : m) {
    bool inserted = true;
    ASSERT_TRUE(idx->Upsert(k, v + 1, &inserted).ok());
    EXPECT_FALSE(inserted);
    ++v;
  }
  for (int i = 0; i < 2000; ++i) {
    const std::string k = TieKey(rng) + std::string(1, '\x7f');
    uint64_t got = 0;
    EXPECT_EQ(idx->Lookup(k, &got).ok(), m.count(k) == 1);
  }
  test::ExpectSame(*idx, m);
  // Drain in random order with checks along the way, then re-insert everything.
  std::vector<std::string> all;
  for (const auto& kv : m) all.push_back(kv.first);
  std::shuffle(all.begin(), all.end(), rng);
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_TRUE(idx->Remove(all[i]).ok());
    m.erase(all[i]);
    if (i % 10000 == 0) test::ExpectSame(*idx, m);
  }
  test::ExpectSame(*idx, m);
  EXPECT_LT(idx->Stats().volatile_bytes, 2048u) << "an empty tree holds one root leaf and no key buffers";
  Fill(idx.get(), &m, keys);
  test::ExpectSame(*idx, m);
  ExpectScans(*idx, m, rng, 100);
}

// Descending inserts split at the left edge; ascending drains empty the first leaf over and over.
TEST_F(VbpTreeTest, DescendingFillAscendingDrainBothKeyTypes) {
  for (KeyType kt : {KeyType::kU64, KeyType::kBytes}) {
    auto idx = Make(kt, kt == KeyType::kU64 ? "u" : "b");
    Model m;
    std::vector<std::string> keys;
    for (int i = 20000; i > 0; --i) {
      std::string k = EncodeU64(static_cast<uint64_t>(i) * 0x0101010101ull);
      if (kt == KeyType::kBytes) k = k.substr(0, 2 + i % 9) + std::string(i % 3, '\0');
      keys.push_back(k);
    }
    Fill(idx.get(), &m, keys);
    test::ExpectSame(*idx, m);
    std::mt19937_64 rng(3);
    ExpectScans(*idx, m, rng, 100);
    size_t n = 0;
    while (!m.empty()) {
      ASSERT_TRUE(idx->Remove(m.begin()->first).ok());
      m.erase(m.begin());
      if (++n % 4000 == 0) test::ExpectSame(*idx, m);
    }
    test::ExpectSame(*idx, m);
    Fill(idx.get(), &m, keys);
    test::ExpectSame(*idx, m);
  }
}

// Random mixes on the head-tie key set (more collisions than diff_util's byte keys).
TEST_F(VbpTreeTest, RandomOpsOnHeadTieKeys) {
  auto idx = Make(KeyType::kBytes);
  Model m;
  std::mt19937_64 rng(5);
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 20000; ++i) {
      const std::string k = TieKey(rng);
      const int op = static_cast<int>(rng() % 4);
      if (op < 2) {
        Status s = idx->Insert(k, i);
        ASSERT_EQ(s.ok(), m.count(k) == 0);
        if (s.ok()) m[k] = i;
      } else if (op == 2) {
        ASSERT_EQ(idx->Remove(k).ok(), m.erase(k) == 1);
      } else {
        uint64_t v = 0;
        ASSERT_EQ(idx->Lookup(k, &v).ok(), m.count(k) == 1);
      }
    }
    test::ExpectSame(*idx, m);
    ExpectScans(*idx, m, rng, 100);
  }
}

}  // namespace
}  // namespace wort
