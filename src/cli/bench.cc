// `wort bench` (indexes) and `wort bench alloc` (the allocator against glibc malloc): thin
// wrappers over the benchmark library, src/bench/bench.h.
#include <fmt/core.h>

#include <cctype>
#include <memory>

#include "bench/bench.h"
#include "cli/command.h"

namespace wort::cli {
namespace {

// Plain number, or with a suffix: for byte sizes K/M/G/T are powers of 1024; for counts they
// are powers of 1000 (so --keys 16M is 16 000 000).
uint64_t ParseScaled(const std::string& s, bool binary, const char* what) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (...) {
    throw CLI::ValidationError(what, "not a number: '" + s + "'");
  }
  double mul = 1;
  if (pos < s.size()) {
    const double k = binary ? 1024.0 : 1000.0;
    switch (std::toupper(static_cast<unsigned char>(s[pos]))) {
      case 'K': mul = k; break;
      case 'M': mul = k * k; break;
      case 'G': mul = k * k * k; break;
      case 'T': mul = k * k * k * k; break;
      default: throw CLI::ValidationError(what, "bad suffix in '" + s + "'");
    }
    if (pos + 1 != s.size() && !(binary && (s.substr(pos + 1) == "B" || s.substr(pos + 1) == "iB")))
      throw CLI::ValidationError(what, "bad suffix in '" + s + "'");
  }
  if (v < 0) throw CLI::ValidationError(what, "must not be negative: '" + s + "'");
  return static_cast<uint64_t>(v * mul + 0.5);
}

[[noreturn]] void Fail(const Status& s) {
  fmt::print(stderr, "wort bench: {}\n", s.ToString());
  throw CLI::RuntimeError(s.code() == Code::kInvalidArgument ? 2 : 1);
}

struct CommonOpts {
  std::string flush = "auto";
  uint64_t write_latency_ns = 0;
  std::string pool;
  std::string pool_size;
  bool keep_pool = false;
  uint64_t seed = 1;
  std::string json;
};

void AddCommonOptions(CLI::App* app, CommonOpts* o) {
  app->add_option("--flush", o->flush, "Flush instruction: clwb|clflushopt|clflush|none|auto")->capture_default_str();
  app->add_option("--write-latency-ns", o->write_latency_ns, "Emulated PM write latency per flushed cache line (ns)")
      ->capture_default_str();
  app->add_option("--pool", o->pool, "Pool file (default /dev/shm/wort-bench-<pid>-<index>.pool); must not exist");
  app->add_option("--pool-size", o->pool_size, "Pool's maximum size (bytes, or with K/M/G/T); default 16G");
  app->add_flag("--keep-pool", o->keep_pool, "Keep the pool file afterwards");
  app->add_option("--seed", o->seed, "Workload seed")->capture_default_str();
  app->add_option("--json", o->json, "Append one JSON object per result to this file (JSON Lines)");
}

bench::CommonConfig ToCommon(const CommonOpts& o) {
  bench::CommonConfig c;
  c.flush = o.flush;
  c.write_latency_ns = o.write_latency_ns;
  c.pool_path = o.pool;
  c.pool_size = o.pool_size.empty() ? 0 : ParseScaled(o.pool_size, true, "--pool-size");
  c.keep_pool = o.keep_pool;
  c.seed = o.seed;
  return c;
}

void AddBench(CLI::App& app) {
  struct Opts {
    CommonOpts common;
    std::string index = "all", dist = "dense", keys = "1000000", ops = "insert,search";
    size_t scan_len = 100;
    double range_frac = 0;
    size_t scans = 0;
    int threads = 1;
    uint32_t span_bits = 4;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "bench", "Benchmark indexes: insert N keys in random order, then search/scan/upsert/delete them");
  cmd->add_option("--index", o->index, "Index kinds, comma list, or 'all'")->capture_default_str();
  cmd->add_option("--dist", o->dist, "Key distributions, comma list: " + bench::DistNames())->capture_default_str();
  cmd->add_option("--keys", o->keys, "Number of keys (K/M/G = 10^3/10^6/10^9)")->capture_default_str();
  cmd->add_option("--ops", o->ops, "Ops, comma list: " + bench::OpNames() + " (run in that order)")->capture_default_str();
  cmd->add_option("--scan-len", o->scan_len, "Keys per range query")->capture_default_str();
  cmd->add_option("--range-frac", o->range_frac, "Keys per range query as a fraction of --keys (overrides --scan-len)");
  cmd->add_option("--scans", o->scans, "Number of range queries (default min(keys, 10000))");
  cmd->add_option("--threads", o->threads, "Threads (the keys are split between them)")->capture_default_str();
  cmd->add_option("--span-bits", o->span_bits, "WORT: key bits per tree level (4 or 8)")->capture_default_str();
  AddCommonOptions(cmd, &o->common);

  struct AllocOpts {
    CommonOpts common;
    std::string ops = "2M";
    size_t batch = 4096;
    std::string threads = "1,2";
    int repeats = 3;
  };
  auto a = std::make_shared<AllocOpts>();
  auto* alloc = cmd->add_subcommand("alloc", "Benchmark the persistent allocator against glibc malloc/free");
  alloc->add_option("--ops", a->ops, "Allocations (and frees) per thread (K/M = 10^3/10^6)")->capture_default_str();
  alloc->add_option("--batch", a->batch, "Blocks live at once per thread")->capture_default_str();
  alloc->add_option("--threads", a->threads, "Thread counts to run, comma list")->capture_default_str();
  alloc->add_option("--repeat", a->repeats, "Runs per configuration (the best allocation rate is reported)")
      ->capture_default_str();
  AddCommonOptions(alloc, &a->common);

  alloc->callback([a] {
    bench::AllocBenchConfig cfg;
    cfg.common = ToCommon(a->common);
    cfg.ops_per_thread = ParseScaled(a->ops, false, "--ops");
    cfg.batch = a->batch;
    cfg.repeats = a->repeats;
    cfg.thread_counts.clear();
    size_t pos = 0;
    while (pos <= a->threads.size()) {
      size_t comma = a->threads.find(',', pos);
      if (comma == std::string::npos) comma = a->threads.size();
      const std::string item = a->threads.substr(pos, comma - pos);
      if (!item.empty()) cfg.thread_counts.push_back(static_cast<int>(ParseScaled(item, false, "--threads")));
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
    cfg.keys = ParseScaled(o->keys, false, "--keys");
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
