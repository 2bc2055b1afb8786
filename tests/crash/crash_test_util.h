// Helpers shared by the crash-testing tests (tests/crash, tests/hash/hash_crash_test.cc): run the
// explorer or the kill test, expect it to run (a Status that is not OK fails the test), and print
// its figures on one line, with the first violation when there is one.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>

#include "crash/explorer.h"
#include "crash/killtest.h"

namespace wort::crash::test {

inline ExplorerResult RunExplorerAndReport(const ExplorerConfig& c) {
  ExplorerResult r;
  Status s = RunExplorer(c, &r);
  EXPECT_TRUE(s.ok()) << c.index << ": " << s.ToString();
  std::printf("%s %s%s: operations %zu, crash points %zu (of %zu met), images %zu, violations %zu, %.2f s\n",
              c.index.c_str(), bench::DistName(c.dist), c.torn_lines ? " torn" : "", r.ops_run, r.crash_points,
              r.points_seen, r.images, r.violation_count, r.seconds);
  if (!r.violations.empty()) std::printf("  first: %s\n", r.violations.front().ToString().c_str());
  return r;
}

inline KillResult RunKillAndReport(const KillConfig& c) {
  KillResult r;
  Status s = RunKillTest(c, &r);
  EXPECT_TRUE(s.ok()) << c.index << ": " << s.ToString();
  std::printf("%s %s: kill rounds %d, acknowledged operations %llu, cut operation applied %d / absent %d, "
              "violations %zu, %.2f s\n",
              c.index.c_str(), bench::DistName(c.dist), r.rounds, static_cast<unsigned long long>(r.acked_ops),
              r.pending_applied, r.pending_absent, r.violations.size(), r.seconds);
  if (!r.violations.empty()) std::printf("  first: %s\n", r.violations.front().c_str());
  return r;
}

}  // namespace wort::crash::test
