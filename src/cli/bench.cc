// `wort bench` (indexes) and `wort bench alloc` (the allocator against glibc malloc): thin
// wrappers over the benchmark library, src/bench/bench.h.
#include <fmt/core.h>

#include <cctype>
#include <memory>

#include "bench/bench.h"
#include "cli/command.h"
#include "cli/options.h"

namespace wort::cli {
namespace {

[[noreturn]] void Fail(const Status& s) {
  fmt::print(stderr, "wort bench: {}\n", s.ToString());
  throw CLI::RuntimeError(s.code() == Code::kInvalidArgument ? 2 : 1);
}

struct CommonOpts {
  std::string flush = "auto";
  uint64_t write_latency_ns = 0;
  std::string pool;
  uint64_t pool_size = 0;
  bool keep_pool = false;
  bool pool_sync = false;
  uint64_t seed = 1;
  std::string json;
};

void AddCommonOptions(CLI::App* app, CommonOpts* o) {
  app->add_option("--flush", o->flush, "Flush instruction: clwb|clflushopt|clflush|none|auto")->capture_default_str();
  AddCountOption(app, "--write-latency-ns", &o->write_latency_ns, "Emulated PM write latency per flushed cache line (ns)");
  app->add_option("--pool", o->pool,
                  "Pool file; must not exist (default: one per index kind, /dev/shm/wort-bench-PID-KIND.pool)");
  AddSizeOption(app, "--pool-size", &o->pool_size, "Maximum size the pool may grow to")
      ->default_str("16GiB");
  app->add_flag("--keep-pool", o->keep_pool, "Keep the pool file afterwards");
  app->add_flag("--pool-sync", o->pool_sync,
                "Sync mode (a pool on a file without DAX): every persist also msyncs, so it survives an OS crash; "
                "measures what that costs (JSON msyncs_per_op)");
  app->add_option("--seed", o->seed, "Workload seed")->capture_default_str();
  app->add_option("--json", o->json, "Append one JSON object per result to this file (JSON Lines)");
}

bench::CommonConfig ToCommon(const CommonOpts& o) {
  bench::CommonConfig c;
  c.flush = o.flush;
  c.write_latency_ns = o.write_latency_ns;
  c.pool_path = o.pool;
  c.pool_size = o.pool_size;
  c.keep_pool = o.keep_pool;
  c.pool_sync = o.pool_sync;
  c.seed = o.seed;
  return c;
}

void AddBench(CLI::App& app) {
  struct Opts {
    CommonOpts common;
    std::string index = "all", dist = "dense", ops = "insert,search";
    uint64_t keys = 1000000, scan_len = 100, scans = 0;
    double range_frac = 0;
    int threads = 1;
    uint32_t span_bits = 4;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "bench", "Benchmark indexes: insert N keys in random order, then search/scan/upsert/delete them");
  cmd->add_option("--index", o->index, "Index kinds, comma list, or 'all'")->capture_default_str();
  cmd->add_option("--dist", o->dist, "Key distributions, comma list: " + bench::DistNames())->capture_default_str();
  AddCountOption(cmd, "--keys", &o->keys, "Number of keys");
  cmd->add_option("--ops", o->ops, "Ops, comma list: " + bench::OpNames() + " (run in that order)")->capture_default_str();
  AddCountOption(cmd, "--scan-len", &o->scan_len, "Keys per range query");
  cmd->add_option("--range-frac", o->range_frac, "Keys per range query as a fraction of --keys (overrides --scan-len)");
  AddCountOption(cmd, "--scans", &o->scans, "Number of range queries (0: min(keys, 10000))");
  cmd->add_option("--threads", o->threads, "Threads (the keys are split between them)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--span-bits", o->span_bits, "WORT: key bits per tree level (4 or 8)")->capture_default_str();
  AddCommonOptions(cmd, &o->common);

  struct AllocOpts {
    CommonOpts common;
    uint64_t ops = 2000000, batch = 4096;
    std::string threads = "1,2";
    int repeats = 3;
  };
  auto a = std::make_shared<AllocOpts>();
  auto* alloc = cmd->add_subcommand("alloc", "Benchmark the persistent allocator against glibc malloc/free");
  AddCountOption(alloc, "--ops", &a->ops, "Allocations (and frees) per thread");
  AddCountOption(alloc, "--batch", &a->batch, "Blocks live at once per thread");
  alloc->add_option("--threads", a->threads, "Thread counts to run, comma list")->capture_default_str();
  alloc->add_option("--repeat", a->repeats, "Runs per configuration (the best allocation rate is reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  AddCommonOptions(alloc, &a->common);

  alloc->callback([a] {
    bench::AllocBenchConfig cfg;
    cfg.common = ToCommon(a->common);
    cfg.ops_per_thread = a->ops;
    cfg.batch = a->batch;
    cfg.repeats = a->repeats;
    cfg.thread_counts.clear();
    size_t pos = 0;
    while (pos <= a->threads.size()) {
      size_t comma = a->threads.find(',', pos);
      if (comma == std::string::npos) comma = a->threads.size();
      const std::string item = a->threads.substr(pos, comma - pos);
      if (item.empty()) continue;
      uint64_t n = 0;
      Status ps = ParseCount(item, &n);
      if (!ps.ok() || n == 0 || n > 1024) Fail(Status::InvalidArgument("--threads: '" + item + "' is not a thread count (1..1024)"));
      cfg.thread_counts.push_back(static_cast<int>(n));
      pos = comma + 1;
    }
    if (cfg.thread_counts.empty()) Fail(Status::InvalidArgument("--threads names no thread count"));
    cfg.common.threads = cfg.thread_counts.back();
    bench::AllocBenchReport report;
    auto log = [](const std::string& line) {
      fmt::print("{}\n", line);
      std::fflush(stdout);
    };
    Status s = bench::RunAllocBench(cfg, &report, log);
    if (!report.results.empty()) fmt::print("\n{}", bench::FormatAllocResults(report));
    if (!a->common.json.empty() && !report.results.empty()) {
      std::vector<nlohmann::json> recs;
      for (const auto& r : report.results) recs.push_back(bench::ToJson(r, cfg, report.env));
      Status js = bench::AppendJsonLines(a->common.json, recs);
      if (!js.ok()) Fail(js);
      fmt::print("appended {} records to {}\n", recs.size(), a->common.json);
    }
    if (!s.ok()) Fail(s);
  });

  cmd->callback([o, alloc] {
    if (alloc->parsed()) return;  // `wort bench alloc` ran instead
    bench::IndexBenchConfig cfg;
    cfg.common = ToCommon(o->common);
    cfg.common.threads = o->threads;
    Status s = bench::ParseIndexList(o->index, &cfg.indexes);
    if (!s.ok()) Fail(s);
    std::vector<bench::Dist> dists;
    for (size_t pos = 0; pos <= o->dist.size();) {
      size_t comma = o->dist.find(',', pos);
      if (comma == std::string::npos) comma = o->dist.size();
      const std::string item = o->dist.substr(pos, comma - pos);
      pos = comma + 1;
      if (item.empty()) continue;
      bench::Dist d;
      s = bench::ParseDistName(item, &d);
      if (!s.ok()) Fail(s);
      dists.push_back(d);
    }
    if (dists.empty()) Fail(Status::InvalidArgument("--dist names no distribution"));
    s = bench::ParseOpList(o->ops, &cfg.ops);
    if (!s.ok()) Fail(s);
    cfg.keys = o->keys;
    cfg.scan_len = o->scan_len;
    cfg.range_frac = o->range_frac;
    cfg.scans = o->scans;
    cfg.span_bits = o->span_bits;
    auto log = [](const std::string& line) {
      fmt::print("{}\n", line);
      std::fflush(stdout);
    };
    // One run per distribution; results are printed and appended as each finishes.
    bench::IndexBenchReport all;
    Status first_failure;
    for (bench::Dist d : dists) {
      cfg.dist = d;
      bench::IndexBenchReport report;
      s = bench::RunIndexBench(cfg, &report, log);
      if (!o->common.json.empty() && !report.results.empty()) {
        std::vector<nlohmann::json> recs;
        for (const auto& r : report.results) recs.push_back(bench::ToJson(r, cfg, report.env));
        Status js = bench::AppendJsonLines(o->common.json, recs);
        if (!js.ok()) Fail(js);
        fmt::print("appended {} records to {}\n", recs.size(), o->common.json);
      }
      all.env = report.env;
      all.results.insert(all.results.end(), report.results.begin(), report.results.end());
      all.skipped.insert(all.skipped.end(), report.skipped.begin(), report.skipped.end());
      if (!s.ok() && first_failure.ok()) first_failure = s;
      if (s.code() == Code::kInvalidArgument) break;  // the same for every distribution
    }
    if (!all.results.empty() || !all.skipped.empty()) fmt::print("\n{}", bench::FormatIndexResults(all));
    if (!first_failure.ok()) Fail(first_failure);
  });
}

const bool kRegistered = RegisterCommand(&AddBench);

}  // namespace
}  // namespace wort::cli
