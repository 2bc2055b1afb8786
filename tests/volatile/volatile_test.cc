// The volatile reference indexes (vbptree, vart, vradix) against a std::map model: sequential
// fills and drains (node growth and splits), and the documented reopen behaviour (empty after
// reopen; the marker is the only block visit reports). Random op mixes against std::map on
// 8-byte and full-range byte-string keys: the conformance suite (tests/conformance).
#include <gtest/gtest.h>

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

INSTANTIATE_TEST_SUITE_P(All, VolatileKinds, ::testing::Values("vbptree", "vart", "vradix"));

}  // namespace
}  // namespace wort
