// `wort serve`'s item store under the crash explorer (crash/server_explorer.h): its plan meets
// every persist site of src/server/ (the site inventory, crash/sites.h) with no violation, and
// dropping any one of those sites (as if the pm::persist call did not exist) is caught: the
// server's own coverage and mutation gate, as the index kinds have theirs (crash/plans.h).
#include "crash/server_explorer.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "crash/sites.h"

namespace wort::crash {
namespace {

std::string Report(const ExplorerResult& r) {
  std::string s;
  for (const Violation& v : r.violations) s += v.ToString() + "\n";
  return s;
}

std::vector<std::string> ServerSites() {
  std::vector<std::string> v;
  for (const PmSite& s : PmSites())
    if (std::string(s.file).rfind("src/server/", 0) == 0) v.push_back(s.Name());
  return v;
}

// The plan runs once (its sites and the step that first met each are shared by the tests).
struct PlanRun {
  std::vector<ExplorerResult> steps;
  std::map<std::string, std::pair<size_t, size_t>> first;  // site -> (step, operation)
  Status status;
};
const PlanRun& Plan() {
  static const PlanRun run = [] {
    PlanRun r;
    const auto plan = ServerPlan();
    for (size_t i = 0; i < plan.size() && r.status.ok(); ++i) {
      ExplorerResult res;
      r.status = RunServerExplorer(plan[i], &res);
      for (auto& [site, op] : res.first_op)
        if (!r.first.count(site)) r.first[site] = {i, op};
      for (auto& [site, n] : res.sites)
        if (!r.first.count(site)) r.first[site] = {i, 0};
      r.steps.push_back(std::move(res));
    }
    return r;
  }();
  return run;
}

TEST(ServerCrash, PlanMeetsEveryServerSiteWithoutViolation) {
  const PlanRun& p = Plan();
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  for (const ExplorerResult& r : p.steps) {
    std::printf("server plan step: %zu ops, %zu explored, %zu crash points, %zu images, %.1f s\n", r.ops_run,
                r.ops_explored, r.crash_points, r.images, r.seconds);
    EXPECT_EQ(r.violation_count, 0u) << Report(r);
    EXPECT_GT(r.crash_points, 0u);
    EXPECT_GT(r.images, r.crash_points);
  }
  const std::vector<std::string> sites = ServerSites();
  ASSERT_GE(sites.size(), 8u);  // the record, meta creation, touch, gat, mg T, mg W, flush_all x2
  for (const std::string& s : sites) EXPECT_TRUE(p.first.count(s)) << "the server's plan never meets " << s;
}

// Each persist site of src/server/ dropped in turn: the step that first met it, run up to a few
// operations past that meeting, must report a violation.
TEST(ServerCrash, DroppingAnyServerPersistIsCaught) {
  const PlanRun& p = Plan();
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  const auto plan = ServerPlan();
  for (const std::string& site : ServerSites()) {
    auto it = p.first.find(site);
    if (it == p.first.end()) continue;  // the test above fails for it
    ServerExplorerConfig c = plan[it->second.first];
    c.explore.drop_site = site;
    c.explore.explore_ops = it->second.second + 4;
    c.explore.max_violations = 1;
    c.explore.subsets = 16;  // more random images: a dropped persist shows in some of them
    ExplorerResult r;
    ASSERT_TRUE(RunServerExplorer(c, &r).ok());
    EXPECT_GE(r.violation_count, 1u) << "dropping " << site << " was not caught (step " << it->second.first
                                     << ", first met at operation " << it->second.second << ")";
  }
}

}  // namespace
}  // namespace wort::crash
