// crash/plans.h - per-kind exploration plans, and the coverage and mutation gates built on them.
//
// A plan is a list of explorer runs (ExplorerConfig) chosen so that every structural change of
// the kind happens inside an explored operation: node growth and shrink, prefix split and path
// merge, B-tree splits at every level and root growth, copy-on-write, segment split and
// directory doubling, hash resize, the allocator's new chunk and chunk release. Each run is
// `novel_only` (an operation is explored where it first meets a persist site), so a plan can
// run thousands of operations - enough for the structure to change - at the cost of exploring
// a few dozen. Every distribution and key type appears in every kind's plan; small
// segment/table sizes are IndexOptions test fields (wort/index.h), not environment variables.
//
// Coverage: the sites a plan met (crash/sites.h) against the sites the kind owns. Mutation: each
// gated site met is dropped in turn (ExplorerConfig::drop_site) and the plan step that first met
// it is rerun up to that operation; the site is caught, redundant (its note says why), or missed.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "crash/explorer.h"
#include "crash/sites.h"

namespace wort::crash {

struct PlanStep {
  std::string what;   // what the step is for ("dense inserts: leaf and inner splits, root growth")
  ExplorerConfig cfg;
  // The mutation gate's focused pass on this step explores this many operations that meet the
  // dropped site (0: the default, 12). A step whose catch needs a dropped write-back to stay
  // dirty across many meetings (B3-tree's long delete step) raises it.
  size_t judge_focus_ops = 0;
  // The mutation gate's first pass on this step explores the operation that first met the
  // dropped site and this many operations in all from it (0: the default, 4). A step whose
  // catch needs a page freed at the meeting to be handed out again a few operations later
  // (B3-tree's step 0e) raises it.
  size_t judge_first_ops = 0;
  // A step run by another driver over the same explorer model (PathExplorer): the server store's
  // (crash/server_explorer.h), given `cfg` as its ExplorerConfig (drop_site, explore_ops, seed,
  // subsets, max_points, novel_only, max_violations honoured). Empty: RunExplorer. Such a driver
  // has no focused pass (focus_site, explore_from): the gate judges its steps by the first pass.
  std::function<Status(const ExplorerConfig&, ExplorerResult*)> run = nullptr;
  Status Run(const ExplorerConfig& c, ExplorerResult* r) const { return run ? run(c, r) : RunExplorer(c, r); }
};

// The pseudo-kind of the gates that is not an index kind: `wort serve`'s item store, whose plan
// is crash::ServerPlan (crash/server_explorer.h) and whose sites are src/server/'s
// (src/crash/sites.cc). KindPlan, RunCoverage and RunMutation take it as a kind name.
inline constexpr const char* kServerGateKind = "server";

// The kinds the coverage and mutation gates judge: every crash-tested index kind, then "server".
std::vector<std::string> GateKinds();

// The kind's plan (kServerGateKind: the server store's).
std::vector<PlanStep> KindPlan(const std::string& kind, const std::string& dir = "/dev/shm");

struct CoverageResult {
  std::string kind;
  std::map<std::string, uint64_t> met;                           // site -> times met, all steps
  std::map<std::string, std::pair<size_t, size_t>> first;        // site -> (step, operation)
  // site -> every step that met it, in plan order, each with the first operation of that step
  // that met it (first[site] is the front).
  std::map<std::string, std::vector<std::pair<size_t, size_t>>> steps;
  size_t violations = 0;
  std::vector<std::string> violation_text;  // the first few, with replay lines
  size_t images = 0;
  double seconds = 0;
};

// Runs the kind's plan; a non-OK status only when a step could not run.
Status RunCoverage(const std::string& kind, const std::vector<PlanStep>& plan, CoverageResult* out);

// kKnownMiss: not caught, and the site carries a "crash-site: uncaught: REASON" note (a gap
// of the explorer, written down; the gate accepts it, the figures count it as missed).
// kCaughtAtReturn: not caught by any crash image, only by the rule that an operation returns
// with what it wrote persistent (ExplorerConfig::op_persists): the dropped persist leaves a line
// dirty after the operation, which a crash drawn later (once what it names is freed and reused)
// would lose. The gate judges every site without that rule first.
enum class MutantVerdict { kCaught, kRedundant, kMissed, kNotMet, kSkipped, kKnownMiss, kCaughtAtReturn };
const char* MutantVerdictName(MutantVerdict v);

struct MutantResult {
  std::string site;
  MutantVerdict verdict = MutantVerdict::kNotMet;
  std::string detail;  // where it was caught, or the redundancy reason
  double seconds = 0;
};
// The gate's summary line of a kind (scripts/crash_gate_table.py reads it): "K: mutation: N sites
// met, C caught, R redundant, M missed, S skipped (time), U missed and noted (crash-site:
// uncaught); A of the caught only at return".
std::string MutationSummary(const std::string& kind, const std::vector<MutantResult>& results);

// Drops each site of `sites` in turn (those the coverage run met), rerunning the plan step
// that first met it; a site not caught there is judged again on the next steps that met it, up
// to kJudgeSteps steps in all, stopping at the first catch (a site whose note says it is
// redundant is judged on its first step only: its reason says no step can catch it; with
// `rejudge_uncaught` false, so is a site noted uncaught - the suite's bounded gate does that, to
// keep its time: an unnoted site, which would fail the gate, always gets the further steps).
// `deadline_s` > 0 bounds the whole run: the rest are kSkipped.
inline constexpr size_t kJudgeSteps = 3;
Status RunMutation(const std::string& kind, const std::vector<PlanStep>& plan, const CoverageResult& cov,
                   const std::vector<PmSite>& sites, double deadline_s, std::vector<MutantResult>* out,
                   bool rejudge_uncaught = true);

}  // namespace wort::crash
