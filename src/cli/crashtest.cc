// `wort crashtest`: the crash explorer (crash/explorer.h) and, with --kill, the kill test
// (crash/killtest.h), for one index kind or all of them. Exits 2 on any violation.
#include <fmt/core.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "cli/command.h"
#include "crash/explorer.h"
#include "cli/options.h"
#include "crash/killtest.h"
#include "crash/plans.h"
#include "crash/sites.h"
#include "index/hash/hash_common.h"
#include "index/kind_ids.h"
#include "wort/index.h"

namespace wort::cli {
namespace {

struct CrashOpts {
  std::string index;
  std::string dist = "dense";
  uint64_t keys = 100;
  uint64_t explore = 30;
  std::string ops = "insert,upsert,delete";
  uint64_t seed = 1;
  int subsets = 4;
  uint64_t max_points = 64;
  bool torn = false;
  bool no_edge_keys = false;
  bool no_exercise = false;
  bool read_only_first = false;
  bool dirty_free_space = false;
  bool recovery_persists = false;
  bool op_persists = false;
  bool isolate = false;
  int check_timeout = 60;
  std::string key_type = "auto";
  uint32_t span_bits = IndexOptions{}.span_bits;
  int64_t replay_op = -1;
  int64_t replay_point = -1;
  uint64_t max_violations = 10;
  std::string dir = "/dev/shm";
  bool kill = false;
  int rounds = 5;
  uint64_t kill_delay_us = 20000;
  std::string drop_site;
  bool mutate = false;
  bool coverage = false;
  bool novel_only = false;
  bool explore_recovery = false;
  bool explore_lifecycle = false;
  size_t explore_from = 0;
  uint64_t pool_size = crash::ExplorerConfig{}.pool_initial_size;
  double mutate_budget = 0;
  uint64_t hash_capacity = 0;
  uint64_t cceh_segment_bytes = 0;
  bool b3_no_rebalance = false;
  uint64_t b3_page_bytes = 0;
  std::string cceh_variant;
  uint64_t hash_seed = 0;
  bool hash_special_keys = false;
  uint64_t hash_skew_keys = 0;
  uint64_t insert_keys = 0;
  std::string focus_site;
  uint64_t focus_ops = 0;
  bool single_line_images = false;
};

[[noreturn]] void Fail(const std::string& m, int code = kExitError) {
  fmt::print(stderr, "wort crashtest: {}\n", m);
  throw CLI::RuntimeError(code);
}

// --coverage: runs the kind's plan (crash/plans.h), prints sites met / present (gated ones),
// the unmet sites by file:line, and with --mutate the mutation gate over the sites met. Returns
// the number of failures (violations, unmet gated sites, missed mutants).
size_t RunCoveragePlan(const CrashOpts& o, const std::string& name) {
  const auto plan = crash::KindPlan(name, o.dir);
  fmt::print("crashtest --coverage {}: {} plan steps\n", name, plan.size());
  for (const auto& st : plan) fmt::print("  step: {}\n    wort crashtest {}\n", st.what, crash::ExplorerArgs(st.cfg));
  std::fflush(stdout);
  crash::CoverageResult cov;
  Status s = crash::RunCoverage(name, plan, &cov);
  if (!s.ok()) Fail(name + ": " + s.ToString(), ExitStatusOf(s));
  for (auto& v : cov.violation_text) fmt::print("{}\n", v);
  size_t present = 0, met = 0, outside = 0, own_met = 0;
  std::vector<std::string> unmet, unreachable, wrong_note;
  const auto sites = crash::SitesOfKind(name);
  for (const crash::PmSite& st : sites) {
    if (!crash::SiteGated(st)) {
      ++outside;
      continue;
    }
    ++present;
    if (cov.met.count(st.Name())) {
      ++met;
      ++own_met;
      if (crash::SiteNotedUnreachable(st)) wrong_note.push_back(st.Name());
    } else if (crash::SiteNotedUnreachable(st)) {
      unreachable.push_back(st.Name() + " (" + st.call + "): " + st.reason);
    } else {
      unmet.push_back(st.Name() + " (" + st.call + ")");
    }
  }
  // Sites met that the inventory does not hold: the extractor missed them.
  std::vector<std::string> unknown;
  for (auto& [site, n] : cov.met)
    if (!crash::FindSite(site)) unknown.push_back(site);
  fmt::print("{}: coverage {}/{} persist sites met ({:.1f}%), {} unreachable (noted), {} outside index operations, "
             "{} violations, {} images, {:.1f} s\n",
             name, met, present, present ? 100.0 * met / present : 100.0, unreachable.size(), outside, cov.violations,
             cov.images, cov.seconds);
  for (auto& u : unmet) fmt::print("  unmet: {}\n", u);
  for (auto& u : unreachable) fmt::print("  unreachable (noted beside the site): {}\n", u);
  for (auto& u : wrong_note)
    fmt::print("  MET BUT NOTED UNREACHABLE: {} (the plan reaches it: remove its crash-site: unreachable note)\n", u);
  for (auto& u : unknown) fmt::print("  NOT IN THE INVENTORY: {} (scripts/pm_sites.py missed it)\n", u);
  std::fflush(stdout);
  size_t failures = cov.violations + unknown.size() + wrong_note.size();
  (void)own_met;
  if (o.mutate) {
    std::vector<crash::PmSite> gated;
    for (const auto& st : sites)  // a shared site: judged by its first owner only
      if (crash::SiteGated(st) && crash::SiteMutatedBy(st, name) && (o.drop_site.empty() || st.Name() == o.drop_site))
        gated.push_back(st);
    if (!o.drop_site.empty() && gated.empty())
      Fail(name + ": --drop-site " + o.drop_site + " is not a site this kind's mutation gate judges", kExitUsage);
    std::vector<crash::MutantResult> mr;
    s = crash::RunMutation(name, plan, cov, gated, o.mutate_budget, &mr);
    if (!s.ok()) Fail(name + ": " + s.ToString(), ExitStatusOf(s));
    size_t missed = 0;
    for (auto& m : mr) {
      if (m.verdict == crash::MutantVerdict::kMissed) ++missed;
      fmt::print("  drop {}: {}{}{} ({:.1f} s)\n", m.site, crash::MutantVerdictName(m.verdict), m.detail.empty() ? "" : ": ",
                 m.detail, m.seconds);
    }
    fmt::print("{}\n", crash::MutationSummary(name, mr));
    failures += missed;
  }
  std::fflush(stdout);
  return failures;
}

// The settings the kill test and the explorer share (crash::KillConfig, crash::ExplorerConfig).
template <class Config>
Config SharedConfig(const CrashOpts& o, const std::string& name, bench::Dist dist,
                    const std::vector<crash::OpType>& ops, const IndexOptions& iopts, bool from_dist) {
  Config c;
  c.index = name;
  c.index_options = iopts;
  c.key_type_from_dist = from_dist;
  c.dist = dist;
  c.keys = o.keys;
  c.ops = ops;
  c.seed = o.seed;
  c.edge_keys = !o.no_edge_keys;
  c.dir = o.dir;
  return c;
}

// Runs one kind; returns its number of violations.
size_t RunKind(const CrashOpts& o, const std::string& name, bench::Dist dist, const std::vector<crash::OpType>& ops,
               const IndexOptions& iopts, bool from_dist) {
  size_t total_violations = 0;
  if (o.coverage) return RunCoveragePlan(o, name);
  if (o.kill) {
    auto c = SharedConfig<crash::KillConfig>(o, name, dist, ops, iopts, from_dist);
    c.rounds = o.rounds;
    c.max_delay_us = o.kill_delay_us;
    c.log = stdout;
    fmt::print("crashtest --kill {}: dist={} keys={} ops={} seed={} rounds={} max-delay={}us\n", name, o.dist, o.keys,
               o.ops, o.seed, o.rounds, o.kill_delay_us);
    std::fflush(stdout);
    crash::KillResult r;
    Status s = crash::RunKillTest(c, &r);
    if (!s.ok()) Fail(name + ": " + s.ToString(), ExitStatusOf(s));
    fmt::print("{}: kill rounds {}, acknowledged operations {}, cut operation found applied {} / absent {}, "
               "violations {}, {:.2f} s\n",
               name, r.rounds, r.acked_ops, r.pending_applied, r.pending_absent, r.violations.size(), r.seconds);
    total_violations += r.violations.size();
  } else {
    auto c = SharedConfig<crash::ExplorerConfig>(o, name, dist, ops, iopts, from_dist);
    c.explore_ops = o.explore;
    c.cceh_variant = o.cceh_variant;
    c.subsets = o.subsets;
    c.max_points = o.max_points;
    c.torn_lines = o.torn;
    c.exercise = !o.no_exercise;
    c.read_only_first = o.read_only_first;
    c.dirty_free_space = o.dirty_free_space;
    c.recovery_persists = o.recovery_persists;
    c.op_persists = o.op_persists;
    c.isolate = o.isolate;
    c.check_timeout_s = o.check_timeout;
    c.max_violations = o.max_violations;
    c.replay_op = o.replay_op;
    c.replay_point = o.replay_point;
    c.drop_site = o.drop_site;
    c.novel_only = o.novel_only;
    c.explore_recovery = o.explore_recovery;
    c.explore_lifecycle = o.explore_lifecycle;
    c.explore_from = o.explore_from;
    c.hash_special_keys = o.hash_special_keys;
    c.hash_skew_keys = o.hash_skew_keys;
    c.insert_keys = o.insert_keys;
    c.focus_site = o.focus_site;
    c.focus_ops = o.focus_ops;
    c.single_line_images = o.single_line_images;
    c.pool_initial_size = o.pool_size;
    c.log = o.mutate ? nullptr : stdout;
    // On a terminal, a progress line on stderr (redrawn at most 10 times a second, erased at the
    // end); otherwise nothing until the final line below.
    if (!o.mutate && ::isatty(STDERR_FILENO)) {
      auto last = std::make_shared<std::chrono::steady_clock::time_point>();
      c.progress = [last, name](size_t done, size_t total, size_t images, size_t violations) {
        const auto now = std::chrono::steady_clock::now();
        if (done == total) {
          std::fprintf(stderr, "\r\033[K");
          std::fflush(stderr);
          return;
        }
        if (now - *last < std::chrono::milliseconds(100)) return;
        *last = now;
        std::fprintf(stderr, "\r\033[K%s: operation %zu of %zu (%.0f%%), %zu images, %zu violations", name.c_str(), done,
                     total, total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0, images,
                     violations);
        std::fflush(stderr);
      };
    }
    fmt::print("crashtest {}: dist={} keys={} explore={} ops={} seed={} subsets={} max-points={} lines={}{}\n", name,
               o.dist, o.keys, o.explore, o.ops, o.seed, o.subsets, o.max_points, o.torn ? "torn (8-byte words)" : "whole",
               o.replay_op >= 0 ? fmt::format(" replay op {} point {}", o.replay_op, o.replay_point) : "");
    std::fflush(stdout);
    crash::ExplorerResult r;
    Status s = crash::RunExplorer(c, &r);
    if (!s.ok()) Fail(name + ": " + s.ToString(), ExitStatusOf(s));
    fmt::print("{}: operations {}, crash points {} (of {} met), images {}, violations {}, {:.2f} s\n", name,
               r.ops_run, r.crash_points, r.points_seen, r.images, r.violation_count, r.seconds);
    if (o.mutate && r.violation_count > 0) {
      for (auto& v : r.violations) fmt::print("{}\n", v.ToString());
    }
    if (!r.stopped_early.empty()) fmt::print("{}: {}\n", name, r.stopped_early);
    total_violations += r.violation_count;
    if (o.mutate) {
      // Drop each flush/fence site in turn: the explorer should notice.
      size_t caught = 0;
      std::vector<std::string> missed;
      for (auto& [site, met] : r.sites) {
        crash::ExplorerConfig m = c;
        m.drop_site = site;
        m.max_violations = 1;
        m.log = nullptr;
        crash::ExplorerResult mr;
        Status ms = crash::RunExplorer(m, &mr);
        if (!ms.ok()) {
          fmt::print("  drop {} (met {}x): could not run: {}\n", site, met, ms.ToString());
          continue;
        }
        if (mr.violation_count > 0) {
          ++caught;
          const auto& v = mr.violations.front();
          std::string what = v.what.size() > 140 ? v.what.substr(0, 140) + "..." : v.what;
          fmt::print("  drop {} (met {}x): caught at op #{} {} [{}]: {}\n", site, met, v.op, v.point_desc, v.image, what);
        } else {
          missed.push_back(site);
          fmt::print("  drop {} (met {}x): NOT caught ({} images)\n", site, met, mr.images);
        }
        std::fflush(stdout);
      }
      fmt::print("{}: mutation: {} flush/fence sites, {} caught when dropped, {} not caught{}\n", name,
                 r.sites.size(), caught, missed.size(), missed.empty() ? "" : " (redundant, or not covered by this workload)");
    }
  }
  std::fflush(stdout);
  return total_violations;
}

void Run(const CrashOpts& o) {
  bench::Dist dist;
  if (!bench::ParseDist(o.dist, &dist)) Fail("unknown distribution '" + o.dist + "'", kExitUsage);
  std::vector<crash::OpType> ops;
  if (!crash::ParseOpTypes(o.ops, &ops)) Fail("bad --ops '" + o.ops + "' (a list of insert, upsert, delete)", kExitUsage);
  IndexOptions iopts;
  iopts.span_bits = o.span_bits;
  iopts.hash_capacity = o.hash_capacity;
  iopts.cceh_segment_bytes = o.cceh_segment_bytes;
  iopts.b3_no_rebalance = o.b3_no_rebalance;
  iopts.b3_page_bytes = o.b3_page_bytes;
  iopts.hash_seed = o.hash_seed;
  if (!o.cceh_variant.empty() && !hash::ParseCcehVariant(o.cceh_variant, &iopts.cceh_variant))
    Fail("bad --cceh-variant '" + o.cceh_variant + "' (msb, lsb or exth)", kExitUsage);
  bool from_dist = true;
  if (o.key_type == "u64") {
    iopts.key_type = KeyType::kU64;
    from_dist = false;
  } else if (o.key_type == "bytes") {
    iopts.key_type = KeyType::kBytes;
    from_dist = false;
  } else if (o.key_type != "auto") {
    Fail("bad --key-type '" + o.key_type + "' (auto, u64, bytes)", kExitUsage);
  }

  std::vector<std::string> kinds;
  if (o.index == "all") {
    for (const IndexKind* k : IndexKinds())
      // The volatile references make no crash claim.
      if (k->type_id < kind_id::kTestFirst && !kind_id::IsVolatile(k->type_id))
        kinds.push_back(k->name);
    if (kinds.empty()) fmt::print("no index kinds are registered in this build\n");
    // The gates judge the server store too (crash/plans.h kServerGateKind).
    if (o.coverage) kinds.push_back(crash::kServerGateKind);
  } else if (o.index == crash::kServerGateKind) {
    // `wort serve`'s item store: its plan under the coverage and mutation gates only.
    if (!o.coverage)
      Fail("--index server runs the server store's plan under the gates: it needs --coverage (and --mutate for the "
           "mutation gate)",
           kExitUsage);
    kinds.push_back(o.index);
  } else {
    if (!FindIndexKind(o.index)) {
      std::string known;
      for (const IndexKind* k : IndexKinds()) known += (known.empty() ? "" : ", ") + std::string(k->name);
      Fail("unknown index kind '" + o.index + "' (known: " + known + ")", kExitUsage);
    }
    kinds.push_back(o.index);
  }

  // With several kinds, each runs in a child process: an index that crashes the run (in its
  // live operations, outside the explorer's guard) is reported and the others still run.
  size_t total_violations = 0;
  for (const std::string& name : kinds) {
    if (kinds.size() == 1) {
      total_violations += RunKind(o, name, dist, ops, iopts, from_dist);
      break;
    }
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) Fail(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      int code = 0;
      try {
        code = RunKind(o, name, dist, ops, iopts, from_dist) > 0 ? kExitCorruption : kExitOk;
      } catch (const CLI::RuntimeError& e) {
        code = e.get_exit_code();
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(st)) {
      // The child could not remove its pools and images: do it for it.
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(o.dir, ec)) {
        const std::string f = e.path().filename().string();
        for (const char* tag : {"crash-live", "crash-img", "kill"})
          if (f.rfind(fmt::format("wort-{}-{}-", tag, pid), 0) == 0) std::filesystem::remove(e.path(), ec);
      }
      fmt::print("{}: VIOLATION the run crashed: signal {} ({})\n", name, WTERMSIG(st), strsignal(WTERMSIG(st)));
      ++total_violations;
    } else if (WEXITSTATUS(st) == kExitCorruption) {
      ++total_violations;
    } else if (WEXITSTATUS(st) != 0) {
      fmt::print("{}: could not run (exit status {})\n", name, WEXITSTATUS(st));
      ++total_violations;
    }
    std::fflush(stdout);
  }
  if (total_violations > 0) Fail(fmt::format("{} violation(s)", total_violations), kExitCorruption);
}

void AddCrashTest(CLI::App& app) {
  auto o = std::make_shared<CrashOpts>();
  auto* c = app.add_subcommand("crashtest", "Crash-test an index: explore crash images at every flush and fence "
                                            "(or, with --kill, SIGKILL a worker process)");
  c->add_option("--index", o->index, "Index kind, or 'all' for every registered kind (with --coverage: and the server store), or 'server' "
                 "(with --coverage: wort serve's item store)")->required();
  c->add_option("--dist", o->dist, "Key distribution: dense, sparse, clustered, strings, words, bytes")->capture_default_str();
  AddCountOption(c, "--keys", &o->keys, "Keys loaded before exploring (not explored)");
  AddCountOption(c, "--explore", &o->explore, "Operations explored");
  c->add_option("--ops", o->ops, "Operation types in the explored mix")->capture_default_str();
  c->add_option("--seed", o->seed, "Seed of the workload, the sampling and the images")->capture_default_str();
  c->add_option("--subsets", o->subsets, "Random in-flight/dirty subsets per crash point (besides nothing and all)")
      ->capture_default_str();
  AddCountOption(c, "--max-points", &o->max_points, "Crash points per operation (a seeded sample beyond)");
  c->add_flag("--torn", o->torn, "Tear in-flight and dirty lines at 8-byte granularity (default: whole lines)");
  c->add_flag("--no-edge-keys", o->no_edge_keys, "Do not add the edge keys (empty, 0x00/0xff bytes, prefixes, long)");
  c->add_flag("--no-exercise", o->no_exercise, "Do not run operations on each recovered image");
  c->add_flag("--read-only-first", o->read_only_first,
              "Before recovering each image, open it read-only and check the contents the kind's readers see of the "
              "crash state as it is (a full read and a lookup of every key)");
  c->add_flag("--dirty-free-space", o->dirty_free_space,
              "Before creating the index, allocate, fill with 0xa5, persist and free blocks of every size class up to 1 KiB, and of 2 and 4 KiB: the "
              "index's first blocks reuse space that is not zero in persistent memory");
  c->add_flag("--recovery-persists", o->recovery_persists,
              "With --explore-recovery: a recovery that returns with a line it wrote not yet persistent is a violation");
  c->add_flag("--op-persists", o->op_persists,
              "An operation that returns with a line not yet persistent (dirty or in flight) is a violation, "
              "explored or not");
  c->add_flag("--isolate", o->isolate,
              "Check each image in a forked child: slower, but the run goes on when the index crashes or hangs");
  c->add_option("--check-timeout", o->check_timeout, "Seconds a check of one image may take before it is a hang")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  c->add_option("--key-type", o->key_type, "auto (u64 for integer distributions), u64 or bytes")->capture_default_str();
  c->add_option("--span-bits", o->span_bits, "WORT: bits of key per level")->capture_default_str();
  c->add_option("--replay-op", o->replay_op, "Explore only this operation (0-based), as printed with a violation");
  c->add_option("--replay-point", o->replay_point, "... and only this crash point of it");
  AddCountOption(c, "--max-violations", &o->max_violations, "Stop after this many violations");
  c->add_option("--dir", o->dir, "Directory for pools and crash images")->capture_default_str();
  c->add_option("--drop-site", o->drop_site,
                "Mutation: explore as if the flush/fence/persist at this site (file:line) did not exist (with "
                "--coverage --mutate: judge only this site)");
  c->add_flag("--mutate", o->mutate, "Mutation: after the run, drop each flush/fence site met in turn and report "
                                     "whether the explorer catches it");
  c->add_flag("--coverage", o->coverage,
              "Run the kind's exploration plan and print the persist sites met / present and the unmet ones "
              "(with --mutate: the mutation gate over the plan); exits 2 on a violation or a missed mutant");
  c->add_option("--mutate-budget", o->mutate_budget, "With --coverage --mutate: seconds per kind (0: no bound)")
      ->capture_default_str();
  c->add_flag("--novel-only", o->novel_only,
              "Explore an operation only when it meets a persist site no earlier operation met");
  c->add_flag("--explore-recovery", o->explore_recovery,
              "Crash during recovery too: explore the crash points of each image's recovery");
  c->add_flag("--explore-lifecycle", o->explore_lifecycle,
              "Explore the index's creation and the pool's close too (operations #explore and #explore+1)");
  c->add_option("--pool-size", o->pool_size, "Initial size of the explored pool in bytes (rounded up to 1 MiB chunks)")
      ->capture_default_str();
  c->add_option("--explore-from", o->explore_from, "Operations before this one run unexplored");
  c->add_option("--hash-capacity", o->hash_capacity, "Hash kinds: initial capacity in records (0: default)");
  c->add_option("--cceh-segment-bytes", o->cceh_segment_bytes, "cceh: segment size in bytes (0: default)");
  c->add_flag("--b3-no-rebalance", o->b3_no_rebalance, "b3tree: rebalancing off (rebuilt pages hold chains)");
  c->add_option("--b3-page-bytes", o->b3_page_bytes, "b3tree: page size in bytes, a power of two in [256, 4096] (0: 1024)");
  c->add_option("--cceh-variant", o->cceh_variant, "cceh: directory variant msb, lsb or exth (index/hash/cceh.h)")
      ->check(CLI::IsMember({"msb", "lsb", "exth"}));
  c->add_option("--hash-seed", o->hash_seed, "Hash kinds: the hash seed (0: derived from --seed)");
  c->add_flag("--hash-special-keys", o->hash_special_keys,
              "u64 keys: the keys whose mixed hash words are 0 and 1 (the hash tables' special slots) are insert candidates");
  c->add_option("--hash-skew-keys", o->hash_skew_keys,
                "u64 keys: load this many extra keys at setup whose mixed hash words have their top 5 bits 0 (a deep "
                "region of a CCEH directory beside shallow ones)");
  c->add_option("--focus-site", o->focus_site,
                "Explore an operation only from its first meeting of this site (file:line) on");
  c->add_option("--focus-ops", o->focus_ops, "With --focus-site: stop after this many explored operations (0: all)");
  c->add_flag("--single-line-images", o->single_line_images,
              "Also check, at each crash point, each image where only one open line reached memory (first 32 lines)");
  c->add_option("--insert-keys", o->insert_keys, "Insert candidates besides the setup keys (0: --explore + 8)");
  c->add_flag("--kill", o->kill, "Run the kill test instead of the explorer");
  c->add_option("--rounds", o->rounds, "Kill test: kill/recover rounds")->capture_default_str()->check(CLI::Range(1, 1000000));
  AddCountOption(c, "--kill-delay-us", &o->kill_delay_us, "Kill test: kill at a random moment up to this long");
  c->callback([o] { Run(*o); });
}

const bool kReg = RegisterCommand(&AddCrashTest, {"crashtest"});

}  // namespace
}  // namespace wort::cli
