// Scan edges of every ordered persistent B-tree kind (fastfair, b3tree, wbtree, wbtree-slot,
// fptree, nvtree), all served by btree_common's RoundUpU64Start and (for the first four)
// ScanInBatches: kU64 starts shorter and longer than 8 bytes, a start above the largest key and
// one whose rounding up overflows, end keys (inclusive, below the start, not 8 bytes), limits 0,
// 1 and one batch exactly, the callback stopping the scan, byte-string keys (0x00, >= 0x80, the
// empty key, prefix chains, long keys) and a scan racing an inserting thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/differential.h"
#include "common/index_test_util.h"
#include "common/test_util.h"
#include "index/btree/btree_common.h"
#include "wort/index.h"
#include "wort/pool.h"

namespace wort {
namespace {

// ---- RoundUpU64Start on its own ----------------------------------------------------------------

TEST(RoundUpU64Start, EveryLength) {
  std::string out;
  ASSERT_TRUE(btree::RoundUpU64Start("", &out));
  EXPECT_EQ(out, EncodeU64(0));
  ASSERT_TRUE(btree::RoundUpU64Start(std::string("\x01\x80", 2), &out));  // shorter: zero-padded
  EXPECT_EQ(out, EncodeU64(0x0180000000000000ull));
  ASSERT_TRUE(btree::RoundUpU64Start(std::string(7, '\xff'), &out));
  EXPECT_EQ(out, EncodeU64(0xffffffffffffff00ull));
  ASSERT_TRUE(btree::RoundUpU64Start(EncodeU64(0x8000000000000000ull), &out));  // 8 bytes: itself
  EXPECT_EQ(out, EncodeU64(0x8000000000000000ull));
  ASSERT_TRUE(btree::RoundUpU64Start(EncodeU64(41) + std::string(1, '\0'), &out));  // longer: prefix + 1
  EXPECT_EQ(out, EncodeU64(42));
  ASSERT_TRUE(btree::RoundUpU64Start(EncodeU64(0x00ffffffffffffffull) + "x", &out));  // carry
  EXPECT_EQ(out, EncodeU64(0x0100000000000000ull));
  out = "unchanged?";
  EXPECT_FALSE(btree::RoundUpU64Start(std::string(9, '\xff'), &out));  // prefix + 1 overflows
  EXPECT_FALSE(btree::RoundUpU64Start(std::string(300, '\xff'), &out));
  ASSERT_TRUE(btree::RoundUpU64Start(std::string(8, '\xff'), &out));  // the largest key itself
  EXPECT_EQ(out, EncodeU64(UINT64_MAX));
}

// ---- every kind through Index::Scan -----------------------------------------------------------

class ScanKinds : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_NE(FindIndexKind(GetParam()), nullptr) << GetParam() << " is a built-in kind";
  }
  void Make(KeyType kt) {
    f_ = std::make_unique<test::IndexFixture>(GetParam(), kt);
    idx_ = &f_->idx();
  }
  // The keys (as stored) the scan reports; fn stops after `stop_after` calls when non-zero.
  using Pairs = std::vector<std::pair<std::string, uint64_t>>;
  // The pairs a scan reports; with stop_after, the callback stops it after that many.
  Pairs Collect(std::string_view start, const std::string* end, size_t limit, size_t stop_after = 0) {
    Pairs out;
    std::string_view ev = end ? std::string_view(*end) : std::string_view();
    Status s = idx_->Scan(start, end ? &ev : nullptr, limit, [&](std::string_view k, uint64_t v) {
      out.emplace_back(k, v);
      return stop_after == 0 || out.size() < stop_after;
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }
  // What Collect must return: the shared harness's model scan (common/index_test_util.h).
  Pairs Want(const test::Model& m, std::string_view start, const std::string* end, size_t limit,
             size_t stop_after = 0) {
    const std::string_view ev = end ? std::string_view(*end) : std::string_view();
    return test::ModelScan(m, start, end ? &ev : nullptr, stop_after ? std::min(limit, stop_after) : limit);
  }

  std::unique_ptr<test::IndexFixture> f_;
  Index* idx_ = nullptr;
};

TEST_P(ScanKinds, U64StartsEndsAndLimits) {
  Make(KeyType::kU64);
  test::Model m;
  // 0, multiples of 10 up to 2990 (several leaves and batches), keys with bit 63 set, the maximum.
  std::vector<uint64_t> ks;
  for (uint64_t i = 0; i < 300; ++i) ks.push_back(i * 10);
  for (uint64_t i = 0; i < 100; ++i) ks.push_back(0x8000000000000000ull + i);
  ks.push_back(UINT64_MAX);
  for (uint64_t k : ks) {
    ASSERT_TRUE(idx_->Insert(k, k).ok());
    m[EncodeU64(k)] = k;
  }
  const std::string e50 = EncodeU64(50), e0 = EncodeU64(0), short_end("\0\0\0\0\0\0\x01", 7);
  struct Case {
    std::string start;
    const std::string* end;
    size_t limit;
  };
  const std::vector<Case> cases = {
      {"", nullptr, 3},                                     // empty start: before every key
      {std::string("\0\0\0", 3), nullptr, 2},              // shorter than 8
      {std::string("\0\0\0\0\0\0\0", 7), &e50, 100},       // shorter, with an end key
      {std::string("\0\0\0\0\0\0\x01", 7), nullptr, 5},    // shorter: 256 -> 260 ...
      {EncodeU64(10) + std::string(1, '\0'), nullptr, 2},  // longer than 8: after 10
      {EncodeU64(15), nullptr, 3},                          // absent key
      {EncodeU64(20), &e50, 100},                           // end key present: inclusive
      {EncodeU64(20), &e0, 100},                            // end below the start: nothing
      {EncodeU64(20), &short_end, 100},                     // end not 8 bytes (byte order)
      {EncodeU64(2990), nullptr, 10},                       // the largest key below bit 63
      {EncodeU64(2991), nullptr, 1000},                     // into the bit-63 keys
      {std::string("\x80", 1), nullptr, 1000},              // shorter, byte >= 0x80
      {EncodeU64(0x8000000000000063ull) + "z", nullptr, 5},  // longer: only the maximum remains
      {std::string(8, '\xff'), nullptr, 10},                // the maximum itself
      {std::string(9, '\xff'), nullptr, 10},                // above every key: rounding overflows
      {std::string(20, '\xff'), nullptr, 10},
      {EncodeU64(0), nullptr, 0},                           // limit 0
      {EncodeU64(0), nullptr, 1},                           // limit 1
      {EncodeU64(0), nullptr, 64},                          // exactly one batch
      {EncodeU64(0), nullptr, 65},
      {EncodeU64(0), nullptr, SIZE_MAX},                    // everything, across many batches
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("start of " + std::to_string(c.start.size()) + " bytes, limit " + std::to_string(c.limit));
    EXPECT_EQ(Collect(c.start, c.end, c.limit), Want(m, c.start, c.end, c.limit));
  }
  EXPECT_TRUE(Collect(std::string(9, '\xff'), nullptr, 10).empty());
  EXPECT_EQ(Collect(std::string(8, '\xff'), nullptr, 10), (Pairs{{EncodeU64(UINT64_MAX), UINT64_MAX}}));
  // The callback stopping the scan: at once, and after more keys than one batch.
  EXPECT_EQ(Collect("", nullptr, SIZE_MAX, 1), (Pairs{{EncodeU64(0), 0}}));
  EXPECT_EQ(Collect("", nullptr, SIZE_MAX, 150), Want(m, "", nullptr, SIZE_MAX, 150));
  EXPECT_EQ(Collect("", nullptr, SIZE_MAX).size(), m.size());
}

TEST_P(ScanKinds, ByteKeys) {
  Make(KeyType::kBytes);
  test::Model m;
  // The shared edge keys (full byte range, a prefix chain, the longest keys) and a few more.
  std::vector<std::string> ks = test::EdgeByteKeys();
  for (std::string k : {std::string("\0\x01", 2), std::string(3, '\xff'), std::string("abcd"),
                        std::string(kMaxKeyLen, 'a'), std::string(kMaxKeyLen, '\xff'), std::string(300, 'p') + '\0'})
    ks.push_back(std::move(k));
  for (int i = 0; i < 200; ++i) ks.push_back(test::Cat("k", std::to_string(i * 7), std::string(i % 5, '\x90')));
  uint64_t v = 0;
  for (const std::string& k : ks) {
    ASSERT_TRUE(idx_->Insert(k, ++v).ok()) << k.size();
    m[k] = v;
  }
  const std::string e_ab = "ab", e_80 = "\x80", e_empty;
  const std::vector<std::string> starts = {"",         std::string(1, '\0'), "a", "ab", "abcde", "\x80", "\x81",
                                           "k", "k7", std::string(kMaxKeyLen, 'a'), std::string(3, '\xff'),
                                           std::string(4, '\xff')};
  for (const std::string& s : starts) {
    for (const std::string* e : {static_cast<const std::string*>(nullptr), &e_ab, &e_80, &e_empty}) {
      for (size_t limit : {size_t{0}, size_t{1}, size_t{5}, SIZE_MAX}) {
        SCOPED_TRACE("start of " + std::to_string(s.size()) + " bytes, limit " + std::to_string(limit));
        EXPECT_EQ(Collect(s, e, limit), Want(m, s, e, limit));
      }
    }
  }
}

// A scan while another thread inserts: every key present before the scan began and never removed
// is reported, in strictly ascending order. The scanner does not use the index from fn.
TEST_P(ScanKinds, WhileAnotherThreadInserts) {
  Make(KeyType::kU64);
  constexpr uint64_t kN = 4000;
  for (uint64_t i = 0; i < kN; ++i) ASSERT_TRUE(idx_->Insert(i * 2, i).ok());
  std::atomic<bool> writing{true};
  std::thread writer([&] {
    for (uint64_t i = 0; i < kN; ++i) (void)idx_->Insert(i * 2 + 1, i);
    writing = false;
  });
  int rounds = 0;
  for (int round = 0; round < 5 || (writing.load() && round < 10000); ++round) {
    ++rounds;
    uint64_t evens = 0, prev = 0;
    bool first = true, ordered = true;
    ASSERT_TRUE(idx_->Scan("", nullptr, SIZE_MAX, [&](std::string_view k, uint64_t) {
                      const uint64_t x = DecodeU64(k);
                      if (!first && x <= prev) ordered = false;
                      if (x % 2 == 0) ++evens;
                      prev = x;
                      first = false;
                      return true;
                    }).ok());
    EXPECT_TRUE(ordered) << "round " << round;
    EXPECT_EQ(evens, kN) << "round " << round;
  }
  writer.join();
  EXPECT_EQ(idx_->Size(), 2 * kN) << rounds << " scans";
  f_->ExpectCheckOk("after the race");
}

INSTANTIATE_TEST_SUITE_P(Kinds, ScanKinds,
                         ::testing::Values("fastfair", "b3tree", "wbtree", "wbtree-slot", "fptree", "nvtree"),
                         test::KindParamName);

}  // namespace
}  // namespace wort
