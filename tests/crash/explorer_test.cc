// The crash explorer can pass and can fail: a correct persistent list passes, copies with one
// persist removed or two persists swapped are caught, and the torn-line model is what it says.
#include "crash/explorer.h"

#include <gtest/gtest.h>

#include "crash/crash_test_util.h"
#include "crash/test_list.h"

namespace wort::crash {
namespace {

class ExplorerTest : public ::testing::Test {
 protected:
  void SetUp() override { testlist::RegisterTestLists(); }

  static ExplorerConfig Config(const std::string& index, bench::Dist dist) {
    ExplorerConfig c;
    c.index = index;
    c.dist = dist;
    c.keys = 30;
    c.explore_ops = 24;
    c.seed = 7;
    c.subsets = 3;
    c.max_points = 16;
    return c;
  }

  static ExplorerResult Run(const ExplorerConfig& c) { return test::RunExplorerAndReport(c); }
};

TEST_F(ExplorerTest, CorrectListHasNoViolations) {
  for (bench::Dist d : {bench::Dist::kStrings, bench::Dist::kDense, bench::Dist::kSparse}) {
    ExplorerResult r = Run(Config("test-list", d));
    EXPECT_EQ(r.ops_run, 24u);
    EXPECT_GT(r.crash_points, 24u);  // at least the return of each operation, plus flushes and fences
    EXPECT_GT(r.images, r.crash_points);
    EXPECT_EQ(r.violation_count, 0u) << (r.violations.empty() ? "" : r.violations[0].ToString());
  }
}

TEST_F(ExplorerTest, CorrectUnorderedListHasNoViolations) {
  // An unordered kind is compared by Lookup of every key instead of Scan.
  ExplorerResult r = Run(Config("test-list-unordered", bench::Dist::kStrings));
  EXPECT_GT(r.images, 0u);
  EXPECT_EQ(r.violation_count, 0u) << (r.violations.empty() ? "" : r.violations[0].ToString());
}

TEST_F(ExplorerTest, MissingPersistIsCaught) {
  ExplorerConfig c = Config("test-list-nopersist", bench::Dist::kStrings);
  c.ops = {OpType::kInsert};
  ExplorerResult r = Run(c);
  ASSERT_GE(r.violation_count, 1u);
  const Violation& v = r.violations.front();
  EXPECT_NE(v.op_desc.find("insert"), std::string::npos) << v.ToString();
  // The crash point names a flush or fence in the test list or the pool, or the return.
  EXPECT_FALSE(v.point_desc.empty());
  EXPECT_NE(v.replay.find("--replay-op"), std::string::npos);
}

TEST_F(ExplorerTest, SwappedPersistsAreCaught) {
  ExplorerConfig c = Config("test-list-swapped", bench::Dist::kDense);
  ExplorerResult r = Run(c);
  ASSERT_GE(r.violation_count, 1u);
  const Violation& v = r.violations.front();
  // The window opens at the link's store8: first a subset with the (dirty) link but not the node,
  // then, once the link is fenced, even the image with nothing in flight is broken.
  EXPECT_NE(v.point_desc.find("test_list.h"), std::string::npos) << v.ToString();
  bool nothing = false;
  for (const Violation& x : r.violations) nothing |= x.image.find("nothing") != std::string::npos;
  EXPECT_TRUE(nothing);
}

TEST_F(ExplorerTest, ViolationReplaysFromItsOpAndPoint) {
  ExplorerConfig c = Config("test-list-swapped", bench::Dist::kStrings);
  c.max_violations = 1;
  ExplorerResult r = Run(c);
  ASSERT_EQ(r.violations.size(), 1u);
  ExplorerConfig rc = c;
  rc.replay_op = static_cast<int64_t>(r.violations[0].op);
  rc.replay_point = static_cast<int64_t>(r.violations[0].point);
  ExplorerResult rr = Run(rc);
  ASSERT_GE(rr.violation_count, 1u);
  EXPECT_EQ(rr.violations[0].op, r.violations[0].op);
  EXPECT_EQ(rr.violations[0].point, r.violations[0].point);
  EXPECT_EQ(rr.violations[0].point_desc, r.violations[0].point_desc);
  EXPECT_EQ(rr.crash_points, 1u);
}

// The torn-line choice: by default a cache line reaches memory whole, so a structure that
// publishes two words of one line with one persist (linepair) passes; with torn lines the two
// words can reach memory apart, and the explorer finds it. The correct list relies only on
// 8-byte atomicity and ordering: it passes both models.
TEST_F(ExplorerTest, TornLineModel) {
  ExplorerConfig c = Config("test-list-linepair", bench::Dist::kStrings);
  c.ops = {OpType::kInsert, OpType::kUpsert};
  c.subsets = 8;
  ExplorerResult whole = Run(c);
  EXPECT_EQ(whole.violation_count, 0u) << (whole.violations.empty() ? "" : whole.violations[0].ToString());

  c.torn_lines = true;
  ExplorerResult torn = Run(c);
  ASSERT_GE(torn.violation_count, 1u);
  EXPECT_NE(torn.violations[0].what.find("count"), std::string::npos) << torn.violations[0].ToString();
  EXPECT_NE(torn.violations[0].image.find("subset"), std::string::npos) << torn.violations[0].ToString();

  ExplorerConfig ok = Config("test-list", bench::Dist::kStrings);
  ok.torn_lines = true;
  ok.subsets = 6;
  ExplorerResult r = Run(ok);
  EXPECT_EQ(r.violation_count, 0u) << (r.violations.empty() ? "" : r.violations[0].ToString());
}

// Runs `c` once per persist site of the test list that a run of `c` meets, with that site
// dropped (ExplorerConfig::drop_site); judge(site, times met, result) each. Returns the count.
template <class Judge>
size_t ForEachDroppedListSite(const ExplorerConfig& c, size_t max_violations, const Judge& judge) {
  ExplorerResult base = test::RunExplorerAndReport(c);
  EXPECT_EQ(base.violation_count, 0u) << (base.violations.empty() ? "" : base.violations[0].ToString());
  size_t list_sites = 0;
  for (auto& [site, met] : base.sites) {
    if (site.find("test_list.h") == std::string::npos) continue;
    ++list_sites;
    ExplorerConfig m = c;
    m.drop_site = site;
    m.max_violations = max_violations;
    judge(site, met, test::RunExplorerAndReport(m));
  }
  return list_sites;
}

// Mutation: dropping any one persist of the correct list is caught; each is necessary.
TEST_F(ExplorerTest, EveryPersistOfTheListIsNecessary) {
  ExplorerConfig c = Config("test-list", bench::Dist::kStrings);
  const size_t list_sites =
      ForEachDroppedListSite(c, 1, [](const std::string& site, uint64_t met, const ExplorerResult& r) {
        EXPECT_GE(r.violation_count, 1u) << "dropping " << site << " (met " << met << "x) was not caught";
      });
  EXPECT_GE(list_sites, 4u);  // insert: node + link; upsert: value; remove: link
  ExplorerConfig none = c;
  none.drop_site = "tests/crash/test_list.h:1";  // no flush there: nothing changes
  EXPECT_EQ(Run(none).violation_count, 0u);
}

// The return rule (ExplorerConfig::op_persists): an operation returns with every line it wrote
// persistent. The correct list keeps it; each dropped persist of the list breaks it, at the
// return of the operation that dropped it (besides what the crash images find).
TEST_F(ExplorerTest, ReturnRuleCatchesEveryDroppedPersistOfTheList) {
  ExplorerConfig c = Config("test-list", bench::Dist::kStrings);
  c.op_persists = true;
  const size_t list_sites =
      ForEachDroppedListSite(c, 100, [](const std::string& site, uint64_t met, const ExplorerResult& r) {
        bool at_return = false;
        for (const Violation& v : r.violations)
          at_return |= v.point_desc == "no crash (the live pool after the operation)" &&
                       v.what.find("not yet persistent") != std::string::npos;
        EXPECT_TRUE(at_return) << "dropping " << site << " (met " << met << "x): no violation of the return rule";
      });
  EXPECT_GE(list_sites, 4u);
}

// What the return rule exempts - an AllocZeroed block's zero fill that the index never writes
// (B3-tree flushes a new page up to its count only) and the lines of a block the operation
// freed - and what it does not: a live node's line left dirty (ROART's version lock word, which
// is why ROART's plan does not check the rule).
TEST_F(ExplorerTest, ReturnRuleExemptsZeroFillAndFreedBlocksOnly) {
  ExplorerConfig c = Config("b3tree", bench::Dist::kDense);
  c.keys = 300;
  c.explore_ops = 320;
  c.ops = {OpType::kInsert, OpType::kDelete};
  c.subsets = 0;
  c.max_points = 1;
  c.op_persists = true;
  ExplorerResult r = Run(c);
  EXPECT_EQ(r.violation_count, 0u) << r.violations[0].ToString();
  c.index = "roart";
  c.max_violations = 1;
  r = Run(c);
  ASSERT_EQ(r.violation_count, 1u);
  EXPECT_NE(r.violations[0].what.find("not yet persistent"), std::string::npos) << r.violations[0].ToString();
  EXPECT_NE(r.violations[0].what.find("(block 0x"), std::string::npos) << r.violations[0].ToString();
}

// An index that crashes or hangs on a crash image is a violation, not the end of the explorer.
TEST_F(ExplorerTest, CrashAndHangInRecoveryAreReported) {
  for (bool isolate : {false, true}) {
    ExplorerConfig c = Config("test-list-segv", bench::Dist::kDense);
    c.explore_ops = 3;
    c.isolate = isolate;
    c.max_violations = 2;
    ExplorerResult r;
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer keeps SIGSEGV to itself
    r = Run(c);
    ASSERT_GE(r.violation_count, 1u);
    EXPECT_NE(r.violations[0].what.find("crashed: signal"), std::string::npos) << r.violations[0].ToString();
    // In process, the first crash ends the run; isolated, the run goes on.
    EXPECT_EQ(r.stopped_early.empty(), isolate);
    if (isolate) { EXPECT_EQ(r.violations.size(), 2u); }
#endif
    c.index = "test-list-hang";
    c.check_timeout_s = 1;
    c.max_violations = 1;
    r = Run(c);
    ASSERT_GE(r.violation_count, 1u);
    EXPECT_NE(r.violations[0].what.find("did not finish"), std::string::npos) << r.violations[0].ToString();
  }
  // The guard leaves the process as it was: a correct run still passes.
  EXPECT_EQ(Run(Config("test-list", bench::Dist::kDense)).violation_count, 0u);
}

// A block orphaned without any crash is caught on the live pool (a crash image would hide it:
// recovery reclaims unreachable blocks).
TEST_F(ExplorerTest, LiveLeakIsCaught) {
  ExplorerConfig c = Config("test-list-leaky", bench::Dist::kDense);
  c.ops = {OpType::kDelete};
  ExplorerResult r = Run(c);
  ASSERT_GE(r.violation_count, 1u);
  EXPECT_NE(r.violations[0].point_desc.find("live pool"), std::string::npos) << r.violations[0].ToString();
  EXPECT_NE(r.violations[0].what.find("leak"), std::string::npos) << r.violations[0].ToString();
  // The recovered images leak too, but only through the deletes run after recovery.
  for (size_t i = 1; i < r.violations.size(); ++i)
    EXPECT_NE(r.violations[i].what.find("after recovery and further operations, allocator"), std::string::npos)
        << r.violations[i].ToString();
}

TEST_F(ExplorerTest, RejectsBadConfigs) {
  ExplorerConfig c = Config("no-such-index", bench::Dist::kDense);
  ExplorerResult r;
  EXPECT_EQ(RunExplorer(c, &r).code(), Code::kInvalidArgument);
  c = Config("test-list", bench::Dist::kStrings);
  c.key_type_from_dist = false;
  c.index_options.key_type = KeyType::kU64;
  EXPECT_EQ(RunExplorer(c, &r).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace wort::crash
