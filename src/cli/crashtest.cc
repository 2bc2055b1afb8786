// `wort crashtest`: the crash explorer (crash/explorer.h) and, with --kill, the kill test
// (crash/killtest.h), for one index kind or all of them. Exits 2 on any violation.
#include <fmt/core.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "cli/command.h"
#include "crash/explorer.h"
#include "cli/options.h"
#include "crash/killtest.h"
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
};

[[noreturn]] void Fail(const std::string& m, int code = 1) {
  fmt::print(stderr, "wort crashtest: {}\n", m);
  throw CLI::RuntimeError(code);
}

// Runs one kind; returns its number of violations.
size_t RunKind(const CrashOpts& o, const std::string& name, bench::Dist dist, const std::vector<crash::OpType>& ops,
               const IndexOptions& iopts, bool from_dist) {
  size_t total_violations = 0;
  if (o.kill) {
    crash::KillConfig c;
    c.index = name;
    c.index_options = iopts;
    c.key_type_from_dist = from_dist;
    c.dist = dist;
    c.keys = o.keys;
    c.ops = ops;
    c.seed = o.seed;
    c.rounds = o.rounds;
    c.max_delay_us = o.kill_delay_us;
    c.edge_keys = !o.no_edge_keys;
    c.dir = o.dir;
    c.log = stdout;
    fmt::print("crashtest --kill {}: dist={} keys={} ops={} seed={} rounds={} max-delay={}us\n", name, o.dist, o.keys,
               o.ops, o.seed, o.rounds, o.kill_delay_us);
    std::fflush(stdout);
    crash::KillResult r;
    Status s = crash::RunKillTest(c, &r);
    if (!s.ok()) Fail(name + ": " + s.ToString());
    fmt::print("{}: kill rounds {}, acknowledged operations {}, cut operation found applied {} / absent {}, "
               "violations {}, {:.2f} s\n",
               name, r.rounds, r.acked_ops, r.pending_applied, r.pending_absent, r.violations.size(), r.seconds);
    total_violations += r.violations.size();
  } else {
    crash::ExplorerConfig c;
    c.index = name;
    c.index_options = iopts;
    c.key_type_from_dist = from_dist;
    c.dist = dist;
    c.keys = o.keys;
    c.explore_ops = o.explore;
    c.ops = ops;
    c.seed = o.seed;
    c.subsets = o.subsets;
    c.max_points = o.max_points;
    c.torn_lines = o.torn;
    c.edge_keys = !o.no_edge_keys;
    c.exercise = !o.no_exercise;
    c.isolate = o.isolate;
    c.dir = o.dir;
    c.max_violations = o.max_violations;
    c.replay_op = o.replay_op;
    c.replay_point = o.replay_point;
    c.drop_site = o.drop_site;
    c.log = o.mutate ? nullptr : stdout;
    fmt::print("crashtest {}: dist={} keys={} explore={} ops={} seed={} subsets={} max-points={} lines={}{}\n", name,
               o.dist, o.keys, o.explore, o.ops, o.seed, o.subsets, o.max_points, o.torn ? "torn (8-byte words)" : "whole",
               o.replay_op >= 0 ? fmt::format(" replay op {} point {}", o.replay_op, o.replay_point) : "");
    std::fflush(stdout);
    crash::ExplorerResult r;
    Status s = crash::RunExplorer(c, &r);
    if (!s.ok()) Fail(name + ": " + s.ToString());
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
  if (!bench::ParseDist(o.dist, &dist)) Fail("unknown distribution '" + o.dist + "'");
  std::vector<crash::OpType> ops;
  if (!crash::ParseOpTypes(o.ops, &ops)) Fail("bad --ops '" + o.ops + "' (a list of insert, upsert, delete)");
  IndexOptions iopts;
  iopts.span_bits = o.span_bits;
  bool from_dist = true;
  if (o.key_type == "u64") {
    iopts.key_type = KeyType::kU64;
    from_dist = false;
  } else if (o.key_type == "bytes") {
    iopts.key_type = KeyType::kBytes;
    from_dist = false;
  } else if (o.key_type != "auto") {
    Fail("bad --key-type '" + o.key_type + "' (auto, u64, bytes)");
  }

  std::vector<std::string> kinds;
  if (o.index == "all") {
    for (const IndexKind* k : IndexKinds())
      // The volatile references make no crash claim.
      if (k->type_id < kind_id::kTestFirst && !kind_id::IsVolatile(k->type_id))
        kinds.push_back(k->name);
    if (kinds.empty()) fmt::print("no index kinds are registered in this build\n");
  } else {
    if (!FindIndexKind(o.index)) {
      std::string known;
      for (const IndexKind* k : IndexKinds()) known += (known.empty() ? "" : ", ") + std::string(k->name);
      Fail("unknown index kind '" + o.index + "' (known: " + known + ")");
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
        code = RunKind(o, name, dist, ops, iopts, from_dist) > 0 ? 2 : 0;
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
    } else if (WEXITSTATUS(st) == 2) {
      ++total_violations;
    } else if (WEXITSTATUS(st) != 0) {
      fmt::print("{}: could not run (exit status {})\n", name, WEXITSTATUS(st));
      ++total_violations;
    }
    std::fflush(stdout);
  }
  if (total_violations > 0) Fail(fmt::format("{} violation(s)", total_violations), 2);
}

void AddCrashTest(CLI::App& app) {
  auto o = std::make_shared<CrashOpts>();
  auto* c = app.add_subcommand("crashtest", "Crash-test an index: explore crash images at every flush and fence "
                                            "(or, with --kill, SIGKILL a worker process)");
  c->add_option("--index", o->index, "Index kind, or 'all' for every registered kind")->required();
  c->add_option("--dist", o->dist, "Key distribution: dense, sparse, clustered, strings, words")->capture_default_str();
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
  c->add_flag("--isolate", o->isolate,
              "Check each image in a forked child: slower, but the run goes on when the index crashes or hangs");
  c->add_option("--check-timeout", o->check_timeout, "Seconds a check of one image may take before it is a hang")
      ->capture_default_str();
  c->add_option("--key-type", o->key_type, "auto (u64 for integer distributions), u64 or bytes")->capture_default_str();
  c->add_option("--span-bits", o->span_bits, "WORT: bits of key per level")->capture_default_str();
  c->add_option("--replay-op", o->replay_op, "Explore only this operation (0-based), as printed with a violation");
  c->add_option("--replay-point", o->replay_point, "... and only this crash point of it");
  AddCountOption(c, "--max-violations", &o->max_violations, "Stop after this many violations");
  c->add_option("--dir", o->dir, "Directory for pools and crash images")->capture_default_str();
  c->add_option("--drop-site", o->drop_site,
                "Mutation: explore as if the flush/fence/persist at this site (file:line) did not exist");
  c->add_flag("--mutate", o->mutate, "Mutation: after the run, drop each flush/fence site met in turn and report "
                                     "whether the explorer catches it");
  c->add_flag("--kill", o->kill, "Run the kill test instead of the explorer");
  c->add_option("--rounds", o->rounds, "Kill test: kill/recover rounds")->capture_default_str()->check(CLI::Range(1, 1000000));
  AddCountOption(c, "--kill-delay-us", &o->kill_delay_us, "Kill test: kill at a random moment up to this long");
  c->callback([o] { Run(*o); });
}

const bool kReg = RegisterCommand(&AddCrashTest);

}  // namespace
}  // namespace wort::cli
