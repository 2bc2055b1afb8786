// Crash exploration of the hash tables' growth paths. The suite in tests/crash runs every kind
// with its default geometry, where a few hundred keys never split a 16 KiB CCEH segment nor
// rehash a 2048-record table; here the tables start tiny (WORT_HASH_CAPACITY=16, 256-byte CCEH
// segments) and the explored operations are mostly inserts, so that segment splits, directory
// doublings, cuckoo displacements, LEVL resizes and full-table rehashes are cut at every flush
// and fence.
#include <gtest/gtest.h>

#include "crash/crash_test_util.h"
#include "hash/hash_test_util.h"

namespace wort::hash::test {
namespace {

class HashCrashTest : public ::testing::TestWithParam<std::string> {};

// A parameter is a kind, or "cceh:VARIANT" (cceh.h "Variants": the lsb and exth directories).
TEST_P(HashCrashTest, GrowthPathsSurviveCrashes) {
  const std::string p = GetParam(), kind = p.substr(0, p.find(':'));
  const std::string variant = p.find(':') == std::string::npos ? "" : p.substr(p.find(':') + 1);
  ASSERT_NE(FindIndexKind(kind), nullptr) << kind << " is a built-in kind";
  ScopedEnv seg("WORT_CCEH_SEGMENT_BYTES", "256");
  ScopedEnv cap("WORT_HASH_CAPACITY", "16");
  ScopedEnv var("WORT_CCEH_VARIANT", variant);
  {
    // The same geometry grows within as many inserts as are explored below.
    HashFixture f(kind, KeyType::kU64);
    for (uint64_t i = 0; i < 70; ++i) ASSERT_TRUE(f.idx().Insert(i * 0x9e3779b97f4a7c15ull, i).ok());
    const HashCounters c = GetHashCounters(f.idx());
    EXPECT_GT(c.splits + c.rehashes, 1u) << "no growth with this geometry";
  }
  struct Case {
    bench::Dist dist;
    std::vector<crash::OpType> ops;
  };
  for (const Case& c : {Case{bench::Dist::kSparse, {crash::OpType::kInsert}},
                        Case{bench::Dist::kStrings, {crash::OpType::kInsert, crash::OpType::kInsert, crash::OpType::kDelete,
                                                     crash::OpType::kUpsert}}}) {
    crash::ExplorerConfig cfg;
    cfg.index = kind;
    cfg.cceh_variant = variant;
    cfg.dist = c.dist;
    cfg.keys = 10;
    cfg.explore_ops = 60;
    cfg.ops = c.ops;
    cfg.seed = 7;
    cfg.subsets = 3;
    cfg.max_points = 96;
    cfg.max_violations = 3;
    const crash::ExplorerResult r = crash::test::RunExplorerAndReport(cfg);
    EXPECT_EQ(r.ops_run, cfg.explore_ops);
    EXPECT_EQ(r.violation_count, 0u) << (r.violations.empty() ? "" : r.violations.front().ToString());
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, HashCrashTest, ::testing::Values("cceh", "cceh-cow", "cceh:lsb", "cceh:exth", "linp", "cuck", "bch", "levl", "path"),
                         ::wort::test::KindParamName);

}  // namespace
}  // namespace wort::hash::test
