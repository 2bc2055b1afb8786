// What btree_common gives every persistent B-tree kind (fastfair, b3tree, wbtree, wbtree-slot,
// fptree, nvtree): the root block header written by CreateTree and checked on open
// (CheckRootHeader: bad magic, bad key type), the key type and values_are_blocks flag read back
// by TreeBase after a reopen, and CheckWrite (writes on a read-only pool are refused, reads work).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "common/index_test_util.h"
#include "common/test_util.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/key.h"
#include "wort/pool.h"

namespace wort {
namespace {

using test::TempPath;

PoolOptions Opts(bool read_only = false) {
  PoolOptions o = test::SmallPoolOptions(64ull << 20);
  o.read_only = read_only;
  return o;
}

class CommonKinds : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_NE(FindIndexKind(GetParam()), nullptr) << GetParam() << " is a built-in kind";
  }
  // A closed pool holding index "t" of this kind with `keys` (value = position).
  void MakePool(KeyType kt, bool vab, const std::vector<std::string>& keys) {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(path_, Opts(), &pool).ok());
    IndexOptions o;
    o.key_type = kt;
    o.values_are_blocks = vab;
    std::unique_ptr<Index> idx;
    ASSERT_TRUE(CreateIndex(*pool, "t", GetParam(), o, &idx).ok());
    for (size_t i = 0; i < keys.size(); ++i) {
      uint64_t v = i;
      if (vab) { ASSERT_TRUE(pool->allocator().Alloc(64, &v).ok()); }
      ASSERT_TRUE(idx->Insert(keys[i], v).ok());
    }
    idx.reset();
    ASSERT_TRUE(pool->Close().ok());
  }
  // Overwrites `len` bytes at `at` in the root block of index "t".
  void PokeRootBlock(size_t at, const void* bytes, size_t len) {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Open(path_, Opts(), &pool).ok());
    const auto roots = pool->Roots();
    ASSERT_EQ(roots.size(), 1u);
    std::memcpy(pool->at<char>(roots[0].off) + at, bytes, len);
    ASSERT_TRUE(pool->Close().ok());
  }

  TempPath path_{"btcommon"};
};

std::vector<std::string> ByteKeys() {
  std::vector<std::string> k = {"", std::string(1, '\0'), std::string("\0\xff", 2), "\x80", "a", "ab", "abc",
                                std::string(kMaxKeyLen, 'z')};
  for (int i = 0; i < 300; ++i) k.push_back("key" + std::to_string(i) + std::string(i % 3, '\x81'));
  return k;
}

TEST_P(CommonKinds, ReopenKeepsKeyTypeAndFlags) {
  std::vector<std::string> keys;
  for (uint64_t i = 0; i < 300; ++i) keys.push_back(EncodeU64(i * 0x0101010101010101ull));  // 0x00.. to 0xff.. bytes
  MakePool(KeyType::kU64, /*vab=*/true, keys);
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Open(path_, Opts(), &pool).ok());
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(OpenIndex(*pool, "t", &idx).ok());
  EXPECT_EQ(idx->kind(), GetParam());
  EXPECT_EQ(idx->key_type(), KeyType::kU64);
  EXPECT_EQ(idx->Size(), keys.size());
  EXPECT_TRUE(idx->Insert("short", 1).code() == Code::kInvalidArgument);  // kU64 takes 8-byte keys only
  // values_are_blocks survived the reopen: visit reports every value block.
  size_t marked = 0;
  const auto roots = pool->Roots();
  FindIndexKindById(roots[0].type)->visit(*pool, roots[0].off, [&](uint64_t) { ++marked; });
  EXPECT_GT(marked, keys.size());
  std::string rep;
  EXPECT_TRUE(idx->Check(&rep).ok()) << rep;
}

TEST_P(CommonKinds, BadRootMagicOrKeyTypeIsCorruption) {
  MakePool(KeyType::kBytes, false, ByteKeys());
  const uint64_t bad_magic = 0x0123456789abcdefull;
  PokeRootBlock(0, &bad_magic, 8);
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Open(path_, Opts(), &pool).ok());
    std::unique_ptr<Index> idx;
    Status s = OpenIndex(*pool, "t", &idx);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.ToString().find("bad root block magic"), std::string::npos) << s.ToString();
    ASSERT_TRUE(pool->Close().ok());
  }
  // Restore the magic from a fresh index of the same kind, then break the key type.
  TempPath other("btcommon2");
  uint64_t magic = 0;
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(other, Opts(), &pool).ok());
    std::unique_ptr<Index> idx;
    ASSERT_TRUE(CreateIndex(*pool, "t", GetParam(), IndexOptions{}, &idx).ok());
    std::memcpy(&magic, pool->at<char>(pool->Roots()[0].off), 8);
  }
  PokeRootBlock(0, &magic, 8);
  const uint32_t bad_type = 77;
  PokeRootBlock(8, &bad_type, 4);
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Open(path_, Opts(), &pool).ok());
  std::unique_ptr<Index> idx;
  Status s = OpenIndex(*pool, "t", &idx);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find("bad key type"), std::string::npos) << s.ToString();
}

TEST_P(CommonKinds, ReadOnlyPoolRefusesWrites) {
  const auto keys = ByteKeys();
  MakePool(KeyType::kBytes, false, keys);
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Open(path_, Opts(/*read_only=*/true), &pool).ok());
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(OpenIndex(*pool, "t", &idx).ok());
  EXPECT_TRUE(idx->Insert("new key", 1).code() == Code::kInvalidArgument);
  EXPECT_TRUE(idx->Insert(keys[0], 1).code() == Code::kInvalidArgument);
  EXPECT_TRUE(idx->Upsert(keys[1], 5).code() == Code::kInvalidArgument);
  EXPECT_TRUE(idx->Remove(keys[2]).code() == Code::kInvalidArgument);
  EXPECT_TRUE(idx->Insert(std::string(kMaxKeyLen + 1, 'x'), 1).code() == Code::kInvalidArgument);
  // Nothing changed; reads work.
  EXPECT_EQ(idx->Size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    uint64_t v = 99999;
    ASSERT_TRUE(idx->Lookup(keys[i], &v).ok()) << i;
    EXPECT_EQ(v, i);
  }
  size_t n = 0;
  ASSERT_TRUE(idx->Scan("", nullptr, SIZE_MAX, [&](std::string_view, uint64_t) { return ++n > 0; }).ok());
  EXPECT_EQ(n, keys.size());
}

// Check() reports through btree::Findings: a broken key block (its magic overwritten) makes Check
// return Corruption whose message is the first finding, "<kind>: ...", and the report holds it.
TEST_P(CommonKinds, CheckReportsABrokenKeyBlock) {
  const auto keys = ByteKeys();
  MakePool(KeyType::kBytes, false, keys);
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Open(path_, Opts(), &pool).ok());
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(OpenIndex(*pool, "t", &idx).ok());
  std::string rep;
  ASSERT_TRUE(idx->Check(&rep).ok()) << rep;
  ASSERT_TRUE(rep.empty()) << rep;
  // The key blocks of "abc" (every block whose magic is "KEYB" and whose bytes are "abc").
  const auto roots = pool->Roots();
  int broken = 0;
  FindIndexKindById(roots[0].type)->visit(*pool, roots[0].off, [&](uint64_t off) {
    auto* b = pool->at<uint32_t>(off);
    if (b[1] == 0x4b455942 && b[0] == 3 && std::memcmp(b + 2, "abc", 3) == 0) {
      b[1] = 0;
      ++broken;
    }
  });
  ASSERT_GE(broken, 1);
  Status s = idx->Check(&rep);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_EQ(s.message().rfind(GetParam() + ": ", 0), 0u) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  EXPECT_NE(rep.find(s.message()), std::string::npos) << rep;
}

// Size() after a reopen: the B-trees count their keys on first use, not at open (instant
// restart), so writes between the open and the first Size() must be neither lost nor counted
// twice; likewise after a crash, and with Stats() or Check() as the first caller.
TEST_P(CommonKinds, SizeAfterReopenCountsWritesBeforeTheFirstSize) {
  test::IndexFixture f(GetParam(), KeyType::kU64, Opts());
  for (uint64_t i = 0; i < 3000; ++i) ASSERT_TRUE(f.idx().Insert(EncodeU64(i * 7), i).ok());
  uint64_t want = 3000;
  auto churn = [&](uint64_t base) {
    for (uint64_t i = 0; i < 40; ++i) ASSERT_TRUE(f.idx().Insert(EncodeU64(base + i * 7 + 1), i).ok());
    for (uint64_t i = 0; i < 15; ++i) ASSERT_TRUE(f.idx().Remove(EncodeU64((base / 7 + i) * 7)).ok());
    bool inserted = true;
    ASSERT_TRUE(f.idx().Upsert(EncodeU64(base + 3), 1, &inserted).ok());  // base + 3: never a key
    EXPECT_TRUE(inserted);
    ASSERT_TRUE(f.idx().Upsert(EncodeU64(base + 1), 2, &inserted).ok());  // inserted just above
    EXPECT_FALSE(inserted);
    want += 40 - 15 + 1;
  };
  f.Reopen();
  churn(700);
  EXPECT_EQ(f.idx().Size(), want);
  churn(7000);  // counted from here on
  EXPECT_EQ(f.idx().Size(), want);
  f.Reopen();
  EXPECT_EQ(f.idx().Stats().keys, want);  // Stats first
  churn(14000);
  EXPECT_EQ(f.idx().Size(), want);
  f.CrashAndReopen();
  churn(17500);
  std::string report;
  EXPECT_TRUE(f.idx().Check(&report).ok()) << report;  // Check first: nothing counted yet
  EXPECT_EQ(f.idx().Size(), want);
  EXPECT_TRUE(f.idx().Check(&report).ok()) << report;  // and with the count known
}

INSTANTIATE_TEST_SUITE_P(Kinds, CommonKinds,
                         ::testing::Values("fastfair", "b3tree", "wbtree", "wbtree-slot", "fptree", "nvtree"),
                         test::KindParamName);

}  // namespace
}  // namespace wort
