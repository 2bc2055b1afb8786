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

}  // namespace
}  // namespace wort
