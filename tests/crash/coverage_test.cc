// The coverage and mutation gates of the crash explorer (crash/sites.h, crash/plans.h), and its
// determinism.
//
//   Inventory.*       the generated site inventory holds the known sites, and every file with
//                     sites has an owner entry (or a reason it is outside index operations).
//   CoveragePlan.Kind each kind's plan runs with no violation and meets no site the inventory
//                     lacks (so the extractor cannot silently miss one); it records the sites it
//                     met under the build directory.
//   CoverageGate.EverySiteMet   every gated site of every kind is met by some owner's plan (a
//                     kind whose record is missing or stale is run here).
//   MutationGate.Kind  each kind drops a deterministic slice of its met sites one at a time and
//                     fails on a mutant not caught whose site has no note; the slice rotates with
//                     WORT_MUTATION_ROTATION (.ci/run: the commit count), so that successive
//                     commits' CI runs judge every site.
//   ServerSites.*     every persist site of src/server/ is gated and owned by the server store's
//                     plan (the pseudo-kind "server", crash/server_explorer.h): CoveragePlan.server,
//                     CoverageGate and MutationGate.server judge it as they judge the index kinds.
//   Determinism.*     the same run meets the same crash points; a printed replay line, run by the
//                     `wort` binary, reproduces its violation.
#include <gtest/gtest.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/index_test_util.h"
#include "crash/crash_test_util.h"
#include "crash/plans.h"
#include "crash/sites.h"
#include "index/kind_ids.h"
#include "wort/index.h"

namespace wort::crash {
namespace {

// Every crash-tested index kind, then the server store's pseudo-kind (crash/plans.h).
std::vector<std::string> CrashKinds() { return GateKinds(); }

TEST(Inventory, HoldsTheKnownSitesAndEveryFileHasAnOwner) {
  const auto& inv = PmSites();
  ASSERT_GT(inv.size(), 100u);
  std::set<std::string> files;
  size_t gated = 0;
  for (const PmSite& s : inv) {
    files.insert(s.file);
    gated += SiteGated(s);
    EXPECT_TRUE(std::string(s.call) == "flush" || std::string(s.call) == "fence" || std::string(s.call) == "persist");
  }
  for (const char* f : {"src/alloc/alloc.cc", "src/index/radix/wort.cc", "src/index/radix/art_tree.cc",
                        "src/index/btree/fastfair.cc", "src/index/btree/b3tree.cc", "src/index/hash/cceh.cc",
                        "src/index/hash/static_hash.cc", "src/pm/pool.cc"})
    EXPECT_TRUE(files.count(f)) << f << " has no site in the inventory";
  for (const std::string& f : files) {
    std::string outside;
    const auto owners = SiteOwners(f, &outside);
    EXPECT_TRUE(!owners.empty() || !outside.empty())
        << f << " has persist sites but no owner entry in src/crash/sites.cc (kSiteOwners)";
  }
  // Every crash-tested kind owns sites.
  for (const std::string& k : CrashKinds()) EXPECT_FALSE(SitesOfKind(k).empty()) << k;
  std::printf("inventory: %zu sites in %zu files, %zu gated\n", inv.size(), files.size(), gated);
}

// The server's persist sites are under the gates: each is gated, owned by the server pseudo-kind
// alone and judged by its mutation gate; the gates' kinds end with it.
TEST(ServerSites, EveryServerSiteIsGatedAndOwnedByTheServerPlan) {
  ASSERT_FALSE(CrashKinds().empty());
  EXPECT_EQ(CrashKinds().back(), kServerGateKind);
  size_t n = 0;
  for (const PmSite& s : PmSites()) {
    if (std::string(s.file).rfind("src/server/", 0) != 0) continue;
    ++n;
    EXPECT_TRUE(SiteGated(s)) << s.Name() << ": a persist site of the server outside the gates";
    EXPECT_EQ(SiteOwners(s.file), std::vector<std::string>{kServerGateKind}) << s.Name();
    EXPECT_TRUE(SiteMutatedBy(s, kServerGateKind)) << s.Name();
  }
  // The record, meta creation, touch, gat, mg T, mg W, flush_all (two words): at least these.
  EXPECT_GE(n, 8u);
  EXPECT_EQ(SitesOfKind(kServerGateKind).size(), n);
  EXPECT_GE(KindPlan(kServerGateKind).size(), 2u);  // every command's path, and eviction
}

// The stable ids: unique over the inventory, and unmoved by an edit that shifts lines.
TEST(Inventory, StableIdsAreUniqueAndSurviveShiftedLines) {
  const auto& inv = PmSites();
  std::set<std::string> ids;
  size_t no_func = 0;
  for (const PmSite& s : inv) {
    EXPECT_TRUE(ids.insert(SiteStableId(s)).second) << s.Name() << ": id " << SiteStableId(s) << " not unique";
    EXPECT_FALSE(std::string(s.code).empty()) << s.Name();
    no_func += std::string(s.func).empty();
  }
  EXPECT_EQ(no_func, 0u) << "sites outside any function the extractor recognised";
  // The b3tree sites, as after an edit: 7 lines added above the second half of the file's sites,
  // and a new site (new code text) added in a function of the first half; and the same list
  // with a site removed from the end.
  const std::vector<PmSite> before = SitesOfKind("b3tree");
  std::vector<PmSite> mine;
  for (const PmSite& s : before)
    if (std::string(s.file) == "src/index/btree/b3tree.cc") mine.push_back(s);
  ASSERT_GE(mine.size(), 10u);
  const std::vector<std::string> ids0 = StableSiteIds(mine);
  std::vector<PmSite> shifted = mine;
  for (size_t i = shifted.size() / 2; i < shifted.size(); ++i) shifted[i].line += 7;
  PmSite extra = mine[1];
  extra.line += 1;
  extra.code = "pm::persist(&something_new, 8);";
  shifted.insert(shifted.begin() + 2, extra);
  std::vector<std::string> ids1 = StableSiteIds(shifted);
  ids1.erase(ids1.begin() + 2);
  EXPECT_EQ(ids0, ids1);
  // An identical call added in the same function before a site is the one edit that renumbers
  // the ordinals of that function's calls of the same text (and only those).
  size_t with_twin = mine.size();
  for (size_t i = 1; i < mine.size() && with_twin == mine.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (std::string(mine[i].code) == mine[j].code && std::string(mine[i].func) == mine[j].func) with_twin = i;
  ASSERT_LT(with_twin, mine.size()) << "b3tree.cc has repeated calls in one function (Replace)";
  EXPECT_NE(ids0[with_twin].substr(ids0[with_twin].size() - 2), "#0");
  // Line numbers do not enter the id.
  for (size_t i = 0; i < mine.size(); ++i)
    EXPECT_EQ(ids0[i].find(":" + std::to_string(mine[i].line)), std::string::npos) << ids0[i];
}

// ---- the per-kind plan runs, recorded for the gate ---------------------------------------

// Beside the wort binary, in the build directory.
std::string RecordDir() { return std::filesystem::path(WORT_CLI_PATH).parent_path().string() + "/crash-coverage"; }

// Identifies this build of the library (the wort binary links the same objects as this test: the
// explorer, the plans, the kinds): a record written by another build is stale.
std::string BuildStamp() {
  struct stat st {};
  if (::stat(WORT_CLI_PATH, &st) != 0) return "?";
  return std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "." + std::to_string(st.st_size);
}

void WriteRecord(const CoverageResult& cov) {
  std::filesystem::create_directories(RecordDir());
  const std::string path = RecordDir() + "/" + cov.kind + ".sites";
  std::ofstream f(path + ".tmp");
  f << BuildStamp() << "\n";
  // site, the plan step and the operation that first met it, then (step, operation) for every
  // later step that met it (the mutation gate reruns those: crash::kJudgeSteps).
  for (auto& [site, n] : cov.met) {
    auto it = cov.first.find(site);
    f << site << " " << (it == cov.first.end() ? 0 : it->second.first) << " "
      << (it == cov.first.end() ? 0 : it->second.second);
    if (auto st = cov.steps.find(site); st != cov.steps.end())
      for (size_t i = 1; i < st->second.size(); ++i) f << " " << st->second[i].first << " " << st->second[i].second;
    f << "\n";
  }
  f.close();
  std::filesystem::rename(path + ".tmp", path);
}

bool ReadRecord(const std::string& kind, CoverageResult* cov) {
  std::ifstream f(RecordDir() + "/" + kind + ".sites");
  std::string line;
  if (!std::getline(f, line) || line != BuildStamp()) return false;
  cov->kind = kind;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string site;
    size_t step = 0, op = 0;
    if (!(in >> site >> step >> op)) continue;
    cov->met[site] = 1;
    cov->first[site] = {step, op};
    auto& steps = cov->steps[site];
    steps.push_back({step, op});
    while (in >> step >> op) steps.push_back({step, op});
  }
  return true;
}
bool ReadRecord(const std::string& kind, std::set<std::string>* met) {
  CoverageResult cov;
  if (!ReadRecord(kind, &cov)) return false;
  for (auto& [site, n] : cov.met) met->insert(site);
  return true;
}

CoverageResult RunPlan(const std::string& kind) {
  CoverageResult cov;
  const auto plan = KindPlan(kind);
  Status s = RunCoverage(kind, plan, &cov);
  EXPECT_TRUE(s.ok()) << kind << ": " << s.ToString();
  return cov;
}

class CoveragePlan : public ::testing::TestWithParam<std::string> {};

TEST_P(CoveragePlan, Kind) {
  const std::string kind = GetParam();
  const CoverageResult cov = RunPlan(kind);
  EXPECT_EQ(cov.violations, 0u) << kind << ":\n" << (cov.violation_text.empty() ? "" : cov.violation_text.front());
  size_t gated = 0, met = 0, unreachable = 0;
  std::string unmet;
  for (const PmSite& s : SitesOfKind(kind)) {
    if (!SiteGated(s)) continue;
    ++gated;
    if (cov.met.count(s.Name())) ++met;
    else if (SiteNotedUnreachable(s)) ++unreachable;
    else unmet += "  unmet: " + s.Name() + " (" + s.call + ")\n";
  }
  for (auto& [site, n] : cov.met) EXPECT_NE(FindSite(site), nullptr) << site << " met but not in the inventory";
  // The same line as `wort crashtest --coverage` (scripts/crash_gate_table.py reads either).
  std::printf("%s: coverage %zu/%zu persist sites met (%.1f%%), by its own plan, %zu unreachable (noted), %zu violations, "
              "%zu images, %.1f s\n%s",
              kind.c_str(), met, gated, gated ? 100.0 * met / gated : 100.0, unreachable, cov.violations, cov.images,
              cov.seconds, unmet.c_str());
  WriteRecord(cov);
}

// A parameterized suite instantiated after CoveragePlan, so that it runs (and is listed for
// ctest) after the per-kind plans; a kind with no record from this build is run here.
class CoverageGate : public ::testing::TestWithParam<std::string> {};

TEST_P(CoverageGate, EverySiteMet) {
  std::map<std::string, std::set<std::string>> met;
  for (const std::string& k : CrashKinds()) {
    if (ReadRecord(k, &met[k])) continue;
    const CoverageResult cov = RunPlan(k);  // no (fresh) record: run the plan here
    for (auto& [site, n] : cov.met) met[k].insert(site);
  }
  // A site noted "crash-site: unreachable: REASON" beside it (crash/sites.h) must stay unmet;
  // every other gated site must be met by a plan of one of its owner kinds.
  size_t gated = 0, unmet = 0, unreachable = 0;
  for (const PmSite& s : PmSites()) {
    if (!SiteGated(s)) continue;
    ++gated;
    bool ok = false;
    for (const std::string& k : SiteOwners(s.file)) ok = ok || met[k].count(s.Name());
    if (SiteNotedUnreachable(s)) {
      ++unreachable;
      EXPECT_FALSE(ok) << s.Name() << " is noted unreachable but a plan meets it: remove the note";
      std::printf("unreachable (noted beside the site): %s (%s): %s\n", s.Name().c_str(), s.call, s.reason);
      continue;
    }
    if (!ok) {
      ++unmet;
      ADD_FAILURE() << s.Name() << " (" << s.call << ") is met by no plan of its kinds";
    }
  }
  std::printf("coverage gate: %zu/%zu gated sites met, %zu unreachable (noted beside the site), %zu unmet\n",
              gated - unmet - unreachable, gated, unreachable, unmet);
}

// ---- the mutation gate -------------------------------------------------------------------
// Each kind drops, one at a time, gated sites its plan met (crash/plans.h RunMutation: the plan
// step that first met the site, then a focused pass over the operations meeting it) and fails on
// any mutant the explorer does not catch whose site carries no "redundant" (or "uncaught") note.
// Bounded for CI: a deterministic slice of kMutantsPerKind sites per kind. The sites are ordered
// by a hash of their stable id (file, function, code text, ordinal: crash::SiteStableId - so a
// slice spreads over the kind's files, is the same on every run and every machine, and does not
// change when an unrelated edit moves lines); rotation r (environment WORT_MUTATION_ROTATION, a
// non-negative integer, 0 when unset) takes the kMutantsPerKind sites from position
// r * kMutantsPerKind on, wrapping around, so rotations 0 .. ceil(n / kMutantsPerKind) - 1 judge
// every one of a kind's n sites. .ci/run sets it to the commit count (git rev-list --count HEAD):
// each commit's CI judges the next slice, and the whole set is judged over successive commits.
// `wort crashtest --index K --coverage --mutate` runs all of them at once. A site of a shared file
// (the allocator, the pool, common code) is dropped by one owner only (crash::SiteMutatedBy).
constexpr size_t kMutantsPerKind = 6;

// WORT_MUTATION_ROTATION: false (and *error) when it is set to anything but a decimal integer.
bool MutationRotation(uint64_t* rotation, std::string* error) {
  *rotation = 0;
  const char* env = std::getenv("WORT_MUTATION_ROTATION");
  if (env == nullptr || *env == '\0') return true;
  const std::string v(env);
  if (v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
    *error = "WORT_MUTATION_ROTATION must be a non-negative decimal integer, got \"" + v + "\"";
    return false;
  }
  *rotation = std::stoull(v);
  return true;
}

// The slice of rotation `rotation` over n sites (positions in the hash order): kMutantsPerKind
// positions from rotation * kMutantsPerKind on, modulo n (all of them when n <= kMutantsPerKind).
std::vector<size_t> RotationSlice(size_t n, uint64_t rotation) {
  std::vector<size_t> slice;
  if (n <= kMutantsPerKind) {
    for (size_t i = 0; i < n; ++i) slice.push_back(i);
    return slice;
  }
  const uint64_t start = (rotation % n) * kMutantsPerKind % n;
  for (size_t j = 0; j < kMutantsPerKind; ++j) slice.push_back((start + j) % n);
  return slice;
}

// Successive rotations cover every position; rotation 0 is the first kMutantsPerKind (the subset
// the gate judged before it rotated).
TEST(MutationRotation, SuccessiveRotationsCoverEverySite) {
  for (size_t n : {1, 5, 6, 7, 12, 13, 39}) {
    const size_t rounds = (n + kMutantsPerKind - 1) / kMutantsPerKind;
    std::set<size_t> seen;
    for (uint64_t r = 0; r < rounds; ++r) {
      const std::vector<size_t> s = RotationSlice(n, r);
      EXPECT_EQ(s.size(), std::min(n, kMutantsPerKind)) << n;
      EXPECT_EQ(std::set<size_t>(s.begin(), s.end()).size(), s.size()) << n << ": a slice repeats a site";
      seen.insert(s.begin(), s.end());
    }
    EXPECT_EQ(seen.size(), n) << n << " sites, " << rounds << " rotations";
    const std::vector<size_t> first = RotationSlice(n, 0);
    for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i], i);
    // Any run of `rounds` consecutive rotations covers them too (CI's commit counts).
    std::set<size_t> later;
    for (uint64_t r = 1000; r < 1000 + rounds; ++r)
      for (size_t i : RotationSlice(n, r)) later.insert(i);
    EXPECT_EQ(later.size(), n) << n;
  }
}

uint64_t NameHash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

class MutationGate : public ::testing::TestWithParam<std::string> {};

TEST_P(MutationGate, Kind) {
  const std::string kind = GetParam();
  uint64_t rotation = 0;
  std::string bad;
  ASSERT_TRUE(MutationRotation(&rotation, &bad)) << bad;
  CoverageResult cov;
  if (!ReadRecord(kind, &cov)) cov = RunPlan(kind);  // no (fresh) record: run the plan here
  std::vector<PmSite> sites;
  for (const PmSite& s : SitesOfKind(kind))
    if (SiteGated(s) && cov.first.count(s.Name()) && SiteMutatedBy(s, kind)) sites.push_back(s);
  if (sites.empty()) {
    std::printf("%s: mutation: no site of its own met\n", kind.c_str());
    return;
  }
  std::sort(sites.begin(), sites.end(),
            [](const PmSite& a, const PmSite& b) { return NameHash(SiteStableId(a)) < NameHash(SiteStableId(b)); });
  const size_t all = sites.size();
  {
    std::vector<PmSite> slice;
    for (size_t i : RotationSlice(all, rotation)) slice.push_back(sites[i]);
    sites = std::move(slice);
  }
  std::vector<MutantResult> mr;
  // A site noted uncaught is judged on its first plan step only here (the full gate,
  // `wort crashtest --coverage --mutate`, tries kJudgeSteps steps): the suite's time stays as it
  // was; an unnoted site the first step misses gets the further steps.
  const Status st = RunMutation(kind, KindPlan(kind), cov, sites, /*deadline_s=*/0, &mr, /*rejudge_uncaught=*/false);
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (const MutantResult& m : mr)
    if (m.verdict == MutantVerdict::kMissed) ADD_FAILURE() << kind << ": dropping " << m.site << " is not caught: " << m.detail;
  // The same line as `wort crashtest --coverage --mutate` (scripts/crash_gate_table.py reads it).
  std::printf("%s\n", MutationSummary(kind, mr).c_str());
  const size_t rounds = (all + kMutantsPerKind - 1) / kMutantsPerKind;
  std::printf("  rotation %llu (WORT_MUTATION_ROTATION): %zu of the %zu sites this kind judges, from position %zu of "
              "their hash order (%zu rotations cover them all; wort crashtest --index %s --coverage --mutate: all at once)\n",
              static_cast<unsigned long long>(rotation), sites.size(), all, RotationSlice(all, rotation).front(), rounds,
              kind.c_str());
  for (size_t i = 0; i < sites.size() && i < mr.size(); ++i)
    std::printf("    %s  %s  %s\n", sites[i].Name().c_str(), SiteStableId(sites[i]).c_str(), MutantVerdictName(mr[i].verdict));
}

// ---- determinism -------------------------------------------------------------------------

ExplorerConfig SmallCceh() {
  ExplorerConfig c;
  c.index = "cceh";
  c.dist = bench::Dist::kSparse;
  c.keys = 40;
  c.explore_ops = 40;
  c.seed = 3;
  c.subsets = 2;
  c.max_points = 16;
  c.index_options.hash_capacity = 16;
  c.index_options.cceh_segment_bytes = 256;
  return c;
}

TEST(Determinism, SameRunMeetsTheSameCrashPoints) {
  ASSERT_NE(FindIndexKind("cceh"), nullptr) << "cceh is a built-in kind";
  const ExplorerResult a = test::RunExplorerAndReport(SmallCceh());
  const ExplorerResult b = test::RunExplorerAndReport(SmallCceh());
  EXPECT_EQ(a.points_seen, b.points_seen);
  EXPECT_EQ(a.crash_points, b.crash_points);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.sites, b.sites);
  EXPECT_EQ(a.violation_count, 0u);
}

TEST(Determinism, ReplayLineReproducesItsViolation) {
  ASSERT_NE(FindIndexKind("cceh"), nullptr) << "cceh is a built-in kind";
  // A mutant the explorer catches: drop, in turn, the cceh sites the run meets until one is.
  ExplorerConfig c = SmallCceh();
  const ExplorerResult base = test::RunExplorerAndReport(c);
  Violation v;
  for (auto& [site, n] : base.sites) {
    if (site.find("cceh.cc") == std::string::npos) continue;
    ExplorerConfig m = c;
    m.drop_site = site;
    m.max_violations = 1;
    ExplorerResult r;
    ASSERT_TRUE(RunExplorer(m, &r).ok());
    if (r.violation_count > 0) {
      v = r.violations.front();
      break;
    }
  }
  ASSERT_FALSE(v.replay.empty()) << "no cceh site of the run is caught when dropped";
  ASSERT_NE(v.replay.find("--replay-point"), std::string::npos);
  // The printed line, run by the CLI, finds the violation again, at the same point.
  const std::string cmd = std::string(WORT_CLI_PATH) + " crashtest " + v.replay + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int st = ::pclose(p);
  EXPECT_EQ(WEXITSTATUS(st), 3) << cmd << "\n" << out;
  EXPECT_NE(out.find(fmt::format("crash point {} ", v.point)), std::string::npos) << cmd << "\n" << out;
  EXPECT_NE(out.find(v.point_desc.substr(0, v.point_desc.find(','))), std::string::npos) << cmd << "\n" << out;
}

INSTANTIATE_TEST_SUITE_P(Kinds, CoveragePlan, ::testing::ValuesIn(CrashKinds()), ::wort::test::KindParamName);
INSTANTIATE_TEST_SUITE_P(AllKinds, CoverageGate, ::testing::Values(std::string("all")));
INSTANTIATE_TEST_SUITE_P(Kinds, MutationGate, ::testing::ValuesIn(CrashKinds()), ::wort::test::KindParamName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CoveragePlan);

}  // namespace
}  // namespace wort::crash
