// The expected-state oracle: workload keys, the op mix, content matching, key printing.
#include "crash/oracle.h"

#include <gtest/gtest.h>

#include <set>

namespace wort::crash {
namespace {

TEST(Oracle, ParseOpTypes) {
  std::vector<OpType> v;
  ASSERT_TRUE(ParseOpTypes("insert,upsert,delete", &v));
  EXPECT_EQ(v.size(), 3u);
  ASSERT_TRUE(ParseOpTypes("delete", &v));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0], OpType::kDelete);
  EXPECT_EQ(OpTypesName({OpType::kInsert, OpType::kUpsert}), "insert,upsert");
  EXPECT_FALSE(ParseOpTypes("", &v));
  EXPECT_FALSE(ParseOpTypes("insert,", &v));
  EXPECT_FALSE(ParseOpTypes("insert,scan", &v));
}

TEST(Oracle, StringWorkloadHoldsTheEdgeKeys) {
  Workload wl(bench::Dist::kStrings, KeyType::kBytes, 40, 40, /*edge_keys=*/true, 3);
  const std::set<std::string> keys(wl.keys().begin(), wl.keys().end());
  EXPECT_EQ(keys.size(), wl.keys().size()) << "keys are distinct";
  EXPECT_TRUE(keys.count(""));
  EXPECT_TRUE(keys.count(std::string(1, '\0')));
  EXPECT_TRUE(keys.count(std::string(2, '\0')));
  EXPECT_TRUE(keys.count("\xff"));
  EXPECT_TRUE(keys.count("p") && keys.count("pr") && keys.count("prefix"));
  size_t longest = 0;
  for (auto& k : keys) longest = std::max(longest, k.size());
  EXPECT_EQ(longest, kMaxKeyLen);
  // Edge keys are spread over both the setup part and the insert candidates.
  bool setup_edge = false, insert_edge = false;
  for (size_t i = 0; i < wl.keys().size(); ++i) {
    const bool edge = wl.keys()[i].size() < 8 || wl.keys()[i].size() > 64;
    (i < wl.setup_count() ? setup_edge : insert_edge) |= edge;
  }
  EXPECT_TRUE(setup_edge);
  EXPECT_TRUE(insert_edge);
  // Fresh keys are outside the universe.
  ASSERT_FALSE(wl.fresh().empty());
  for (auto& f : wl.fresh()) EXPECT_FALSE(keys.count(f));
}

TEST(Oracle, IntegerWorkloadHasOnly8ByteKeys) {
  Workload wl(bench::Dist::kSparse, KeyType::kU64, 50, 50, /*edge_keys=*/true, 3);
  EXPECT_EQ(wl.setup_count(), 50u);
  EXPECT_EQ(wl.keys().size(), 100u);
  for (auto& k : wl.keys()) EXPECT_EQ(k.size(), 8u);
}

TEST(Oracle, OpMixIsMostlyEffectiveWithSomeMisses) {
  Workload wl(bench::Dist::kDense, KeyType::kU64, 100, 100, false, 5);
  Contents m;
  for (size_t i = 0; i < wl.setup_count(); ++i) m[wl.keys()[i]] = i;
  Rng rng(9);
  std::map<OpType, int> ok, miss;
  const std::vector<OpType> all = {OpType::kInsert, OpType::kUpsert, OpType::kDelete};
  for (int i = 0; i < 3000; ++i) {
    const Op op = wl.Next(m, all, rng);
    const bool present = m.count(wl.keys()[op.key]) != 0;
    const Code c = wl.Apply(op, &m);
    const bool effective = op.type == OpType::kUpsert ? present : c == Code::kOk;
    (effective ? ok : miss)[op.type]++;
  }
  for (OpType t : all) {
    EXPECT_GT(ok[t], 700) << OpTypeName(t);
    EXPECT_GT(miss[t], 30) << OpTypeName(t);
    EXPECT_LT(miss[t], 250) << OpTypeName(t);
  }
}

TEST(Oracle, MatchContents) {
  Contents before{{"a", 1}, {"b", 2}};
  Contents after = before;
  after["c"] = 3;
  std::string diff;
  EXPECT_EQ(MatchContents(before, {&before, &after}, KeyType::kBytes, &diff), 0);
  EXPECT_EQ(MatchContents(after, {&before, &after}, KeyType::kBytes, &diff), 1);
  Contents wrong = before;
  wrong["b"] = 7;
  EXPECT_EQ(MatchContents(wrong, {&before, &after}, KeyType::kBytes, &diff), -1);
  EXPECT_NE(diff.find("key \"b\": found 0x7, before 0x2, after 0x2"), std::string::npos) << diff;
  EXPECT_EQ(MatchContents(before, {&after}, KeyType::kBytes, &diff), -1);
  EXPECT_NE(diff.find("expected 0x3"), std::string::npos) << diff;
  // std::map<std::string> orders keys as unsigned bytes, the index order.
  Contents order{{std::string("\x80"), 1}, {std::string("\x7f"), 2}, {std::string(), 3}};
  EXPECT_EQ(order.begin()->first, "");
  EXPECT_EQ(std::next(order.begin())->first, "\x7f");
}

TEST(Oracle, KeyToString) {
  EXPECT_EQ(KeyToString(EncodeU64(42), KeyType::kU64), "42");
  EXPECT_EQ(KeyToString("abc", KeyType::kBytes), "\"abc\"");
  EXPECT_EQ(KeyToString(std::string("\x00\xff", 2), KeyType::kBytes), "0x00ff");
  EXPECT_EQ(KeyToString("", KeyType::kBytes), "\"\" (empty)");
  EXPECT_NE(KeyToString(std::string(100, 'x'), KeyType::kBytes).find("(100 bytes)"), std::string::npos);
}

TEST(Oracle, ShortSourcePath) {
  EXPECT_EQ(ShortSourcePath("/a/b/src/index/radix/wort.cc"), "src/index/radix/wort.cc");
  EXPECT_EQ(ShortSourcePath("/x/tests/crash/test_list.h"), "tests/crash/test_list.h");
  EXPECT_EQ(ShortSourcePath("plain.cc"), "plain.cc");
}

}  // namespace
}  // namespace wort::crash
