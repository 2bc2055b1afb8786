// `wort reproduce` (the paper's evaluation, src/reproduce/reproduce.h) and the hidden
// `wort reproduce-keygen` (key generation only: the baseline of the cachegrind differencing).
#include <algorithm>
#include <fmt/core.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <memory>

#include "bench/bench.h"
#include "workload/workload.h"
#include "cli/command.h"
#include "cli/files.h"
#include "cli/options.h"
#include "reproduce/reproduce.h"

namespace wort::cli {
namespace {

void AddReproduce(CLI::App& app) {
  struct Opts {
    std::string scale = "quick", only, indexes, out, flush = "auto", ll = "15728640,15,64";
    uint64_t seed = 1;
    uint64_t keys = 0, cachegrind_keys = 0;
    bool no_cachegrind = false, no_report = false;
    int jobs = 2;
    std::string cachegrind_binary;
    std::string peers_src;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "reproduce",
      "Run the WORT paper's evaluation (fig7-fig10, Table 1, space) for every registered index kind, and "
      "the CANRT paper's remote comparison (canrt: bench-remote of canrt vs reply-wort/reply-woart), the "
      "thesis chapter IV's CCEH and B3-tree evaluations (cceh-*, b3-*), ROART vs P-ART (roart-peer, with "
      "--peers-src); "
      "write results.jsonl, PNG plots and report.md beside the published values");
  cmd->add_option("--scale", o->scale,
                  "quick (N=250K, under 5 min), medium (N=16M), paper (N=128M); tiny (N=2000: seconds, for tests and CI)")
      ->capture_default_str();
  cmd->add_option("--only", o->only, "Experiments, comma list: fig7,fig8,fig9,fig10,table1,space,canrt,cceh-seg,cceh-lat,cceh-search,"
                  "cceh-cdf,b3-page,b3-grow,b3-order,roart-peer (default all)");
  cmd->add_option("--index", o->indexes, "Index kinds, comma list (default: every registered kind)");
  cmd->add_option("--out", o->out, "Output directory")->required();
  AddCountOption(cmd, "--keys", &o->keys, "Override the scale's N for the timed runs (0: the scale's)");
  AddCountOption(cmd, "--cachegrind-keys", &o->cachegrind_keys, "Override the scale's N for the cachegrind runs (0: the scale's)");
  cmd->add_option("--ll", o->ll, "Simulated LLC for cachegrind: size,assoc,line")->capture_default_str();
  cmd->add_option("--jobs", o->jobs, "Cachegrind processes at once")->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--cachegrind-binary", o->cachegrind_binary,
                  "wort executable to run under valgrind (default $WORT_CACHEGRIND_BINARY, else this one); it "
                  "must not use AVX-512, e.g. built with -DCMAKE_CXX_FLAGS=-mno-avx512f");
  cmd->add_option("--peers-src", o->peers_src,
                  "SRC_ROOT of scripts/peers.sh: build P-ART from SRC_ROOT/RECIPE/P-ART (outside the repository) "
                  "and compare roart with it on the same keys (default $WORT_PEERS_SRC; without it woart stands in "
                  "for P-ART)");
  cmd->add_flag("--no-cachegrind", o->no_cachegrind, "Skip the LLC-miss runs (Table 1(a)/(c))");
  cmd->add_flag("--no-report", o->no_report, "Do not run scripts/report.py at the end");
  cmd->add_option("--flush", o->flush, "Flush instruction: clwb|clflushopt|clflush|none|auto")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Workload seed")->capture_default_str();
  cmd->callback([o] {
    reproduce::Config c;
    c.scale = o->scale;
    c.only = SplitComma(o->only);
    c.indexes = SplitComma(o->indexes);
    c.out_dir = o->out;
    c.flush = o->flush;
    c.seed = o->seed;
    c.keys = o->keys;
    c.cachegrind_keys = o->cachegrind_keys;
    c.cachegrind = !o->no_cachegrind;
    c.cachegrind_jobs = o->jobs;
    c.ll = o->ll;
    c.wort_binary = o->cachegrind_binary;
    if (const char* e = std::getenv("WORT_CACHEGRIND_BINARY"); c.wort_binary.empty() && e && *e) c.wort_binary = e;
    if (c.wort_binary.empty()) c.wort_binary = SelfExe();
    if (!o->no_report) {
      c.report_script = FindFile("WORT_REPORT_SCRIPT", "scripts/report.py");
      if (c.report_script.empty()) fmt::print(stderr, "wort reproduce: scripts/report.py not found; no plots or report.md\n");
      c.python = FindPython();
    }
    c.published = FindFile("WORT_PUBLISHED", "data/published/wort_fast17.json");
    c.peers_src = o->peers_src;
    if (const char* e = std::getenv("WORT_PEERS_SRC"); c.peers_src.empty() && e && *e) c.peers_src = e;
    if (!c.peers_src.empty()) {
      c.peers_script = FindFile("WORT_PEERS_SCRIPT", "scripts/peers.sh");
      c.peers_wort = SelfExe();
      const bool wants_peer =
          c.only.empty() || std::find(c.only.begin(), c.only.end(), "roart-peer") != c.only.end();
      // Asked for P-ART and cannot build it: say so before anything runs, not after the other
      // experiments with woart standing in (a binary copied out of its build tree finds no script).
      if (c.peers_script.empty() && wants_peer)
        Fail("wort reproduce",
             Status::NotFound("--peers-src (or WORT_PEERS_SRC) is set but scripts/peers.sh was not found beside this "
                              "binary (a build tree inside the source tree) or in its source tree; set "
                              "WORT_PEERS_SCRIPT=/path/to/wort/scripts/peers.sh, or drop --peers-src to let woart "
                              "stand in for P-ART"));
    }
    Status s = reproduce::Reproduce(c, [](const std::string& line) {
      fmt::print("{}\n", line);
      std::fflush(stdout);
    });
    if (!s.ok()) {
      Fail("wort reproduce", s);
    }
  });

  // Hidden: generates the keys exactly as the bench does, and nothing else.
  struct GenOpts {
    std::string dist = "dense";
    uint64_t keys = 1000;
    uint64_t seed = 1;
  };
  auto g = std::make_shared<GenOpts>();
  auto* gen = app.add_subcommand("reproduce-keygen", "Generate a workload's keys only (cachegrind baseline)");
  gen->group("");
  gen->add_option("--dist", g->dist);
  AddCountOption(gen, "--keys", &g->keys, "Keys");
  gen->add_option("--seed", g->seed);
  gen->callback([g] {
    bench::Dist d;
    Status s = bench::ParseDistName(g->dist, &d);
    if (!s.ok()) {
      fmt::print(stderr, "wort reproduce-keygen: {}\n", s.ToString());
      throw CLI::RuntimeError(kExitUsage);
    }
    const auto keys = bench::GenerateKeys(d, g->keys, g->seed);
    fmt::print("{} keys\n", keys.size());
  });
}

const bool kRegistered = RegisterCommand(&AddReproduce, {"reproduce", "reproduce-keygen"});

}  // namespace
}  // namespace wort::cli
