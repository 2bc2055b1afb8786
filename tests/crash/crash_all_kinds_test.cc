// Every registered index kind (test kinds excepted) gets crash testing by existing: a bounded
// crash-explorer run per key distribution and a short kill test, each asserting zero violations.
// Budget: about a second or two per kind in Release, so that 3-10 kinds stay well under 3 min.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/index_test_util.h"
#include "crash/crash_test_util.h"
#include "index/kind_ids.h"
#include "index/registry.h"
#include "wort/index.h"

namespace wort::crash {
namespace {

std::vector<std::string> KindNames() {
  std::vector<std::string> v;
  for (const IndexKind* k : IndexKinds())
    // The volatile references (ids 30..39, names "v...") make no crash claim.
    if (k->type_id < kind_id::kTestFirst && !(k->type_id >= 30 && k->type_id <= 39 && k->name[0] == 'v'))
      v.push_back(k->name);
  return v;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "(none)" : s;
}

// The covered set is every built-in kind except the three volatile references: a persistent
// kind given an id in the volatile range, or a kind missing from the table of built-in kinds,
// would escape the crash suite unnoticed otherwise.
TEST(CrashAllKinds, CoversEveryPersistentBuiltinKind) {
  const auto names = KindNames();
  std::printf("kinds covered by the crash suite: %s\n", Join(names).c_str());
  std::vector<std::string> expected;
  for (const IndexKind* k : BuiltinIndexKinds()) {
    const std::string n = k->name;
    if (n != "vart" && n != "vbptree" && n != "vradix") expected.push_back(n);
  }
  EXPECT_EQ(Join(names), Join(expected));
  for (const char* n : {"wort", "woart", "roart", "artcow", "fastfair", "fptree", "nvtree", "wbtree", "b3tree", "cceh"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

struct Case {
  bench::Dist dist;
  size_t keys;
};

class ExplorerAllKinds : public ::testing::TestWithParam<std::string> {};

TEST_P(ExplorerAllKinds, NoViolations) {
  const std::string kind = GetParam();
  for (const Case& c : {Case{bench::Dist::kDense, 300}, Case{bench::Dist::kSparse, 150}, Case{bench::Dist::kClustered, 100},
                        Case{bench::Dist::kStrings, 60}}) {
    ExplorerConfig cfg;
    cfg.index = kind;
    cfg.dist = c.dist;
    cfg.keys = c.keys;
    cfg.explore_ops = 50;
    cfg.seed = 42;
    cfg.subsets = 4;
    cfg.max_points = 48;
    cfg.max_violations = 3;
    const ExplorerResult r = test::RunExplorerAndReport(cfg);
    EXPECT_EQ(r.ops_run, cfg.explore_ops) << kind;
    EXPECT_GT(r.images, 0u) << kind;
    EXPECT_EQ(r.violation_count, 0u) << kind << " " << bench::DistName(c.dist) << ":\n"
                                     << (r.violations.empty() ? "" : r.violations.front().ToString());
  }
}

class KillAllKinds : public ::testing::TestWithParam<std::string> {};

TEST_P(KillAllKinds, NoViolations) {
  const std::string kind = GetParam();
  for (bench::Dist d : {bench::Dist::kDense, bench::Dist::kStrings}) {
    KillConfig cfg;
    cfg.index = kind;
    cfg.dist = d;
    cfg.keys = 200;
    cfg.insert_keys = 1000;
    cfg.rounds = 3;
    cfg.max_delay_us = 5000;
    cfg.seed = 42;
    const KillResult r = test::RunKillAndReport(cfg);
    EXPECT_EQ(r.rounds, cfg.rounds) << kind;
    EXPECT_TRUE(r.violations.empty()) << r.violations.front();
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, ExplorerAllKinds, ::testing::ValuesIn(KindNames()), ::wort::test::KindParamName);
INSTANTIATE_TEST_SUITE_P(Kinds, KillAllKinds, ::testing::ValuesIn(KindNames()), ::wort::test::KindParamName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ExplorerAllKinds);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(KillAllKinds);

}  // namespace
}  // namespace wort::crash
