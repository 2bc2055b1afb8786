// The volatile reference indexes (vbptree, vart, vradix) against a std::map model: sequential
// fills and drains (node growth and splits), and the documented reopen behaviour (empty after
// reopen; the marker is the only block visit reports). Random op mixes against std::map on
// 8-byte and full-range byte-string keys: the conformance suite (tests/conformance).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "common/differential.h"
#include "common/test_util.h"
#include "wort/alloc.h"
#include "wort/pool.h"

namespace wort {
namespace {


PoolOptions SmallPool() {
  PoolOptions o;
  o.initial_size = 4ull << 20;
  o.max_size = 64ull << 20;
  o.background_recovery = false;
  return o;
}

class VolatileKinds : public ::testing::TestWithParam<std::string> {};

TEST_P(VolatileKinds, SequentialFillAndDrain) {
  test::TempPath path("vol");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, SmallPool(), &pool).ok());
  IndexOptions o;
  o.key_type = KeyType::kU64;
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(CreateIndex(*pool, "t", GetParam(), o, &idx).ok());
  std::map<std::string, uint64_t> model;
  for (uint64_t i = 0; i < 20000; ++i) {
    ASSERT_TRUE(idx->Insert(i * 7, i).ok());
    model[EncodeU64(i * 7)] = i;
  }
  test::ExpectSame(*idx, model);
  IndexStats st = idx->Stats();
  EXPECT_EQ(st.keys, 20000u);
  EXPECT_GT(st.volatile_bytes, 20000u * 8);
  EXPECT_GT(st.inner_nodes, 0u);
  EXPECT_GT(st.bytes_allocated, 0u);
  for (uint64_t i = 0; i < 20000; i += 2) {
    ASSERT_TRUE(idx->Remove(i * 7).ok());
    model.erase(EncodeU64(i * 7));
  }
  test::ExpectSame(*idx, model);
  // Every byte value at one position, both orders (NODE4 -> 256 growth; 0x80.. after 0x7f).
  std::unique_ptr<Index> b;
  ASSERT_TRUE(CreateIndex(*pool, "b", GetParam(), IndexOptions{}, &b).ok());
  std::map<std::string, uint64_t> bm;
  for (int c = 255; c >= 0; --c) {
    std::string k = "p" + std::string(1, static_cast<char>(c));
    ASSERT_TRUE(b->Insert(k, c).ok());
    bm[k] = c;
    ASSERT_TRUE(b->Insert(k + "x", c).ok());
    bm[k + "x"] = c;
  }
  ASSERT_TRUE(b->Insert("p", 1).ok());
  bm["p"] = 1;
  ASSERT_TRUE(b->Insert("", 2).ok());
  bm[""] = 2;
  test::ExpectSame(*b, bm);
  ASSERT_TRUE(b->Insert(std::string(kMaxKeyLen, 'z'), 3).ok());
  bm[std::string(kMaxKeyLen, 'z')] = 3;
  EXPECT_TRUE(b->Insert(std::string(kMaxKeyLen + 1, 'z'), 3).code() == Code::kInvalidArgument);
  test::ExpectSame(*b, bm);
}

TEST_P(VolatileKinds, ReopenIsEmptyAndVisitReportsMarker) {
  test::TempPath path("vol");
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(path, SmallPool(), &pool).ok());
    std::unique_ptr<Index> idx;
    IndexOptions o;
    o.key_type = KeyType::kU64;
    ASSERT_TRUE(CreateIndex(*pool, "t", GetParam(), o, &idx).ok());
    for (uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(idx->Insert(i, i).ok());
    IndexOptions bad;
    bad.values_are_blocks = true;
    std::unique_ptr<Index> x;
    EXPECT_FALSE(CreateIndex(*pool, "x", GetParam(), bad, &x).ok());
    idx.reset();
    ASSERT_TRUE(pool->Close().ok());
  }
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Open(path, SmallPool(), &pool).ok());
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(OpenIndex(*pool, "t", &idx).ok());
  EXPECT_EQ(idx->Size(), 0u);
  EXPECT_EQ(idx->key_type(), KeyType::kU64);
  EXPECT_TRUE(idx->Insert(1, 1).ok());
  RootInfo ri;
  ASSERT_TRUE(pool->FindRoot("t", &ri).ok());
  std::set<uint64_t> marked;
  FindIndexKind(GetParam())->visit(*pool, ri.off, [&](uint64_t o) { marked.insert(o); });
  EXPECT_EQ(marked, std::set<uint64_t>{ri.off});
}

// Long shared prefixes (vart keeps 8 prefix bytes in a node and reads the rest from a leaf
// below: FullPrefix): keys built from a few 0..40-byte segments over {00, 7f, 80, ff}, so paths
// compress over more than 8 bytes, keys are prefixes of one another, and random removals merge
// nodes whose prefixes then grow past 8 bytes. After every round: lookups, a full scan and Check
// (ExpectSame), and scans from starts that end inside a compressed prefix, against the model.
TEST_P(VolatileKinds, LongPrefixesAgainstModel) {
  test::TempPath path("vol");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, SmallPool(), &pool).ok());
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(CreateIndex(*pool, "t", GetParam(), IndexOptions{}, &idx).ok());
  static const unsigned char alpha[] = {0x00, 0x7f, 0x80, 0xff};
  std::mt19937_64 rng(42);
  std::vector<std::string> segs;
  for (int i = 0; i < 6; ++i) {
    std::string sg(rng() % 41, '\0');
    for (auto& c : sg) c = static_cast<char>(alpha[rng() % 2 ? 0 : rng() % 4]);
    segs.push_back(sg);
  }
  auto key = [&] {
    std::string k;
    const int parts = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < parts; ++i) k += segs[rng() % segs.size()] + static_cast<char>(alpha[rng() % 4]);
    return k.substr(0, k.size() - rng() % 3);
  };
  std::map<std::string, uint64_t> model;
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 400; ++i) {
      const std::string k = key();
      const uint64_t v = rng();
      if (rng() % 3 == 0) {
        const Status s = idx->Remove(k);
        ASSERT_EQ(s.ok(), model.erase(k) == 1) << s.ToString();
      } else {
        bool inserted = false;
        ASSERT_TRUE(idx->Upsert(k, v, &inserted).ok());
        ASSERT_EQ(inserted, model.count(k) == 0);
        model[k] = v;
      }
    }
    test::ExpectSame(*idx, model);
    for (int i = 0; i < 50; ++i) {
      std::string start = key();
      start.resize(rng() % (start.size() + 1));
      auto it = model.lower_bound(start);
      ASSERT_TRUE(idx->Scan(start, nullptr, 20, [&](std::string_view k, uint64_t v) {
                       EXPECT_TRUE(it != model.end() && k == it->first && v == it->second);
                       if (it != model.end()) ++it;
                       return true;
                     }).ok());
    }
  }
  // Drain: merges all the way up.
  for (auto it = model.begin(); it != model.end();) {
    ASSERT_TRUE(idx->Remove(it->first).ok());
    it = model.erase(it);
    if (model.size() % 97 == 0) test::ExpectSame(*idx, model);
  }
  test::ExpectSame(*idx, model);
}

INSTANTIATE_TEST_SUITE_P(All, VolatileKinds, ::testing::Values("vbptree", "vart", "vradix"));

std::string HexKey(std::string_view k) {
  static const char d[] = "0123456789abcdef";
  std::string h;
  for (const char c : k) {
    h += d[static_cast<uint8_t>(c) >> 4];
    h += d[static_cast<uint8_t>(c) & 15];
  }
  return h;
}

// vart's 8-byte lookup (issue 31, h67: LookupAttempt8, one copy of the step per depth, and
// LookupGeneral for what it leaves alone): every node type at every depth 1..7, absent bytes in
// each (NODE4/16/48/256), leaves reached at every depth, compressed paths (the general walk),
// bytes >= 0x80; in a bytes tree also keys of 7 and 9 bytes beside 8-byte ones (a leaf of another
// length where an 8-byte key's walk ends, an inner node at depth 8 with and without a term leaf,
// term leaves at the depths an 8-byte walk passes). Then the same lookups round-robin over five
// trees, so that the thread's epoch slot is never among its cached ones (the general path from
// the start).
TEST(VartLookup, EightByteKeysOnEveryPath) {
  for (const bool bytes : {false, true}) {
    SCOPED_TRACE(bytes ? "bytes" : "u64");
    test::TempPath path("vol");
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(path, SmallPool(), &pool).ok());
    IndexOptions o;
    o.key_type = bytes ? KeyType::kBytes : KeyType::kU64;
    std::vector<std::unique_ptr<Index>> trees(5);
    const char* const names[] = {"t0", "t1", "t2", "t3", "t4"};
    for (size_t t = 0; t < trees.size(); ++t) ASSERT_TRUE(CreateIndex(*pool, names[t], "vart", o, &trees[t]).ok());
    std::map<std::string, uint64_t> model;
    std::vector<std::string> absent;
    uint64_t next = 1;
    auto put = [&](const std::string& k) {
      if (model.count(k) != 0) return;
      model[k] = next;
      for (auto& t : trees) ASSERT_TRUE(t->Insert(k, next).ok()) << t->kind();
      ++next;
    };
    for (const uint64_t base : {0x0123456789abcdefull, 0xf0e1d2c3b4a59687ull, 0x8080808080808080ull}) {
      const std::string b = EncodeU64(base);
      put(b);
      // At each depth d, a node whose children grow through NODE4 (2), NODE16 (5), NODE48 (17)
      // and NODE256 (49) for the three bases; byte d takes values of both halves.
      const int fan = base == 0x0123456789abcdefull ? 2 : base == 0xf0e1d2c3b4a59687ull ? 5 : 49;
      for (size_t d = 1; d < 8; ++d) {
        for (int i = 1; i < fan; ++i) {
          std::string k = b;
          k[d] = static_cast<char>(static_cast<uint8_t>(k[d]) ^ static_cast<uint8_t>(i * 37));
          put(k);
          std::string a = k;
          a[7] = static_cast<char>(static_cast<uint8_t>(a[7]) ^ 0x5a);  // same path, another last byte
          if (d != 7) absent.push_back(a);
        }
        std::string miss = b;
        miss[d] = static_cast<char>(static_cast<uint8_t>(miss[d]) ^ 0xc3);  // a byte no child has
        if (model.count(miss) == 0) absent.push_back(miss);
      }
    }
    // 17 children at depth 3 below one more path: a NODE48.
    for (int i = 0; i < 17; ++i) put(EncodeU64(0x7766550000000000ull | (uint64_t(i * 15) << 32) | 0x11));
    absent.push_back(EncodeU64(0x7766550000000000ull | (uint64_t(0xff) << 32) | 0x11));
    // Compressed paths: two keys sharing bytes 1..5 below byte 0x33, and below 0xcc at depth 2.
    put(EncodeU64(0x33aabbccddee0102ull));
    put(EncodeU64(0x33aabbccddee0304ull));
    absent.push_back(EncodeU64(0x33aabbccd0ee0102ull));  // differs inside the stored prefix
    absent.push_back(EncodeU64(0x33aabbccddee0105ull));
    put(EncodeU64(0xcc11223344556677ull));
    put(EncodeU64(0xcc12223344556677ull));
    put(EncodeU64(0xcc12223344556688ull));
    absent.push_back(EncodeU64(0xcc12223344550077ull));
    absent.push_back(EncodeU64(0x44));  // an empty slot of the root
    if (bytes) {
      // A 9-byte key alone below byte 0x99: an 8-byte walk reaches a leaf of another length.
      put(std::string("\x99\x01\x02\x03\x04\x05\x06\x07\x08", 9));
      absent.push_back(std::string("\x99\x01\x02\x03\x04\x05\x06\x07", 8));
      // A 7-byte key alone below 0x9a; its 8-byte extension is absent.
      put(std::string("\x9a\x01\x02\x03\x04\x05\x06", 7));
      absent.push_back(std::string("\x9a\x01\x02\x03\x04\x05\x06\x07", 8));
      // An inner node at depth 8: 9-byte keys extending an 8-byte key (its term leaf), and the
      // same below a path whose 8-byte key is absent (no term leaf).
      const std::string t8("\xa0\x81\x82\x83\x84\x85\x86\x87", 8), u8("\xa0\x81\x82\x83\x84\x85\x86\x88", 8);
      put(t8);
      put(t8 + "\x01");
      put(t8 + "\xff");
      put(u8 + "\x01");
      put(u8 + "\x02");
      absent.push_back(u8);
      // Term leaves at depths 1..7 on an 8-byte walk's path (keys of 1..7 bytes, prefixes of it).
      const std::string w("\xb0\xb1\xb2\xb3\xb4\xb5\xb6\xb7", 8);
      for (size_t len = 1; len <= 8; ++len) put(w.substr(0, len));
      put(std::string("\xb0\xb1\xb2\xb3\xb4\xb5\xb6\xb8", 8));
      put(std::string("\xb0\xb1\xb2\x00\xb4\xb5\xb6\xb8", 8));
      absent.push_back(std::string("\xb0\xb1\xb2\xb3\xb4\xb5\xb6\xb9", 8));
    }
    for (const std::string& a : absent) ASSERT_EQ(model.count(a), 0u);
    auto check = [&](const Index& t, const std::string& k) {
      uint64_t v = 0;
      const Status s = t.Lookup(k, &v);
      const auto it = model.find(k);
      if (it == model.end()) {
        EXPECT_TRUE(s.IsNotFound()) << HexKey(k) << " " << s.ToString();
      } else {
        EXPECT_TRUE(s.ok()) << HexKey(k) << " " << s.ToString();
        EXPECT_EQ(v, it->second) << HexKey(k);
      }
    };
    // One tree, its slot cached: the unrolled walk.
    for (const auto& [k, v] : model) check(*trees[0], k);
    for (const std::string& a : absent) check(*trees[0], a);
    // Round-robin over five trees: the general path.
    for (const auto& [k, v] : model)
      for (auto& t : trees) check(*t, k);
    for (const std::string& a : absent)
      for (auto& t : trees) check(*t, a);
    test::ExpectSame(*trees[0], model);
  }
}

}  // namespace
}  // namespace wort
