// The kill test: SIGKILLed children, recovery checked against the acknowledged operations.
#include "crash/killtest.h"

#include <gtest/gtest.h>

#include "crash/crash_test_util.h"
#include "crash/test_list.h"

namespace wort::crash {
namespace {

class KillTestTest : public ::testing::Test {
 protected:
  void SetUp() override { testlist::RegisterTestLists(); }

  static KillConfig Config(const std::string& index, bench::Dist dist) {
    KillConfig c;
    c.index = index;
    c.dist = dist;
    c.keys = 50;
    c.insert_keys = 300;
    c.rounds = 4;
    c.max_delay_us = 5000;
    c.seed = 11;
    return c;
  }
  static KillResult Run(const KillConfig& c) { return test::RunKillAndReport(c); }
};

TEST_F(KillTestTest, CorrectListSurvivesKills) {
  int cut = 0;
  for (bench::Dist d : {bench::Dist::kStrings, bench::Dist::kDense}) {
    KillConfig c = Config("test-list", d);
    c.rounds = 6;
    KillResult r = Run(c);
    EXPECT_EQ(r.rounds, 6);
    EXPECT_GT(r.acked_ops, 0u);
    EXPECT_TRUE(r.violations.empty()) << r.violations.front();
    cut += r.pending_applied + r.pending_absent;
  }
  // About half the kills land inside an operation; all twelve missing is a 1-in-4000 event.
  EXPECT_GT(cut, 0);
}

TEST_F(KillTestTest, EarlyLinkIsCaught) {
  // Every insert spends ~300 us with an empty node linked: most kills land in that window.
  KillConfig c = Config("test-list-earlylink", bench::Dist::kStrings);
  c.ops = {OpType::kInsert};
  c.rounds = 20;  // the run stops at the first violation, usually in round 1
  c.keep_failed = false;
  KillResult r = Run(c);
  ASSERT_FALSE(r.violations.empty());
  EXPECT_NE(r.violations.front().find("round"), std::string::npos);
}

TEST_F(KillTestTest, RejectsUnknownKind) {
  KillResult r;
  EXPECT_EQ(RunKillTest(Config("no-such-index", bench::Dist::kDense), &r).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace wort::crash
