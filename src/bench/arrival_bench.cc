// Open-loop insert latency with Poisson arrivals: see arrival_bench.h.
#include "bench/arrival_bench.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <latch>
#include <random>
#include <thread>

#include "bench/bench_internal.h"
#include "wort/index.h"
#include "wort/pm.h"

namespace wort::bench {

using detail::BenchIndex;
using detail::DefaultPoolPath;
using detail::PmSettings;
using detail::ThreadCpuSeconds;

double Quantile(const std::vector<uint64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  size_t rank = static_cast<size_t>(std::ceil(q * double(sorted.size())));
  if (rank == 0) rank = 1;
  return double(sorted[rank - 1]);
}

StallStats FindStalls(const std::vector<uint64_t>& arrival, const std::vector<uint64_t>& completion, uint64_t min_ns) {
  StallStats out;
  const size_t n = std::min(arrival.size(), completion.size());
  if (n < 2) return out;
  std::vector<uint64_t> arr(arrival.begin(), arrival.begin() + n), done(completion.begin(), completion.begin() + n);
  std::sort(arr.begin(), arr.end());
  std::sort(done.begin(), done.end());
  for (size_t j = 0; j + 1 < n; ++j) {
    // The (j+2)-th completion needs j+2 arrivals: from the later of the previous completion and
    // the (j+2)-th arrival, something was in service or waiting and nothing completed.
    const uint64_t from = std::max(done[j], arr[j + 1]);
    if (done[j + 1] <= from) continue;
    const uint64_t gap = done[j + 1] - from;
    out.longest_ns = std::max(out.longest_ns, double(gap));
    if (gap >= min_ns) {
      ++out.count;
      out.total_ns += double(gap);
    }
  }
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

uint64_t NsSince(Clock::time_point t0) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

// The closed-loop batch insert time of `kind` on `keys` (one thread): ns per insert.
Status BatchInsertNs(const ArrivalBenchConfig& cfg, const IndexKind& kind, const std::vector<std::string>& keys,
                     double* ns_per_op, std::string* why) {
  BenchIndex h;
  Status s = h.Create(cfg.common, DefaultPoolPath(cfg.common, std::string(kind.name) + "-batch"), kind,
                      IsIntegerDist(cfg.dist), 4, why, cfg.index_options);
  if (!s.ok()) return s;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < keys.size(); ++i) {
    s = h.idx->Insert(keys[i], i + 1);
    if (!s.ok()) {
      *why = fmt::format("{}: batch insert {} of {}: {}", kind.name, i, keys.size(), s.ToString());
      return s;
    }
  }
  *ns_per_op = double(NsSince(t0)) / double(keys.size());
  return Status::OK();
}

Status RunOne(const ArrivalBenchConfig& cfg, const IndexKind& kind, const std::vector<std::string>& keys,
              const std::vector<uint64_t>& arrival, ArrivalResult base, ArrivalBenchReport* report, const LogFn& log) {
  const size_t n = keys.size();
  const int threads = std::max(1, cfg.common.threads);
  const bool u64 = IsIntegerDist(cfg.dist);
  BenchIndex h;
  std::string why;
  Status s = h.Create(cfg.common, DefaultPoolPath(cfg.common, cfg.indexes.size() > 1 || cfg.common.pool_path.empty()
                                                                  ? kind.name : ""),
                      kind, u64, 4, &why, cfg.index_options);
  if (!s.ok()) {
    report->skipped.push_back({kind.name, why});
    return s;
  }
  Index* idx = h.idx.get();
  std::vector<uint64_t> completion(n, 0);
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> wrong{0};
  std::atomic<bool> failed{false};
  std::vector<double> cpu(threads, 0);
  Status first_error;
  std::atomic<int> error_claimed{0};
  std::latch ready(threads + 1);
  std::latch go(1);
  Clock::time_point t0;
  auto worker = [&](int t) {
    ready.count_down();
    go.wait();
    const double c0 = ThreadCpuSeconds();
    for (;;) {
      const size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n || failed.load(std::memory_order_relaxed)) break;
      // Wait for the scheduled arrival: sleep while it is far, then yield (a spin that lets the
      // other workers run on a small machine).
      for (;;) {
        const uint64_t now = NsSince(t0);
        if (now >= arrival[i]) break;
        const uint64_t left = arrival[i] - now;
        if (left > 100000) std::this_thread::sleep_for(std::chrono::nanoseconds(left - 50000));
        else std::this_thread::yield();
      }
      Status is = idx->Insert(keys[i], i + 1);
      completion[i] = NsSince(t0);
      if (!is.ok()) {
        wrong.fetch_add(1, std::memory_order_relaxed);
        if (error_claimed.exchange(1) == 0) first_error = is;
        failed.store(true, std::memory_order_relaxed);
      }
    }
    cpu[t] = ThreadCpuSeconds() - c0;
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) ts.emplace_back(worker, t);
  ready.arrive_and_wait();
  const pm::Counters before = pm::GetCounters();
  t0 = Clock::now();
  go.count_down();
  for (auto& t : ts) t.join();
  const pm::Counters d = pm::GetCounters() - before;
  if (failed.load()) {
    why = fmt::format("{}: an insert failed: {}", kind.name, first_error.ToString());
    report->skipped.push_back({kind.name, why});
    return Status(first_error.code(), why);
  }
  // Check (untimed): the count and 1000 sampled keys.
  uint64_t errors = wrong.load();
  if (idx->Size() != n) ++errors;
  const size_t step = std::max<size_t>(1, n / 1000);
  for (size_t i = 0; i < n; i += step) {
    uint64_t v = 0;
    if (!idx->Lookup(keys[i], &v).ok() || v != i + 1) ++errors;
  }

  std::vector<uint64_t> lat(n);
  double sum = 0;
  uint64_t last = 0;
  for (size_t i = 0; i < n; ++i) {
    lat[i] = completion[i] - arrival[i];
    sum += double(lat[i]);
    last = std::max(last, completion[i]);
  }
  const StallStats st = FindStalls(arrival, completion, cfg.stall_ns);
  std::sort(lat.begin(), lat.end());
  ArrivalResult r = std::move(base);
  r.index = kind.name;
  r.key_type = u64 ? "u64" : "bytes";
  r.seconds = double(last - arrival.front()) * 1e-9;
  r.achieved_per_s = r.seconds > 0 ? double(n) / r.seconds : 0;
  r.mean_ns = sum / double(n);
  r.p50_ns = Quantile(lat, 0.5);
  r.p90_ns = Quantile(lat, 0.9);
  r.p99_ns = Quantile(lat, 0.99);
  r.p999_ns = Quantile(lat, 0.999);
  r.max_ns = double(lat.back());
  double cpu_sum = 0;
  for (double c : cpu) cpu_sum += c;
  r.cpu_ns_per_op = cpu_sum * 1e9 / double(n);
  r.flushes_per_op = double(d.lines_flushed) / double(n);
  r.longest_stall_ns = st.longest_ns;
  r.stalls = st.count;
  r.stall_ns_total = st.total_ns;
  r.errors = errors;
  // The CDF: evenly spaced fractions, then the tail in finer steps (where the stalls show).
  const size_t pts = std::max<size_t>(cfg.cdf_points, 10);
  std::vector<double> qs;
  for (size_t k = 1; k <= pts / 2; ++k) qs.push_back(0.99 * double(k) / double(pts / 2));
  for (size_t k = 1; k <= pts / 4; ++k) qs.push_back(0.99 + 0.009 * double(k) / double(pts / 4));
  for (size_t k = 1; k <= pts / 4; ++k) qs.push_back(0.999 + 0.001 * double(k) / double(pts / 4));
  double prev = -1;
  for (double q : qs) {
    const double v = Quantile(lat, q);
    if (!r.cdf.empty() && v == prev) r.cdf.back().second = q;
    else r.cdf.emplace_back(v, q);
    prev = v;
  }
  r.cdf.emplace_back(double(lat.front()), 1.0 / double(n));
  std::sort(r.cdf.begin(), r.cdf.end());
  r.cdf.back().second = 1.0;
  if (log)
    log(fmt::format("{:<10} {:<9} arrival  {:.0f}/s: p50 {:.1f} us, p99 {:.1f} us, max {:.2f} ms, longest stall "
                    "{:.2f} ms, {} stalls >= {:.1f} ms{}",
                    r.index, r.dist, r.rate, r.p50_ns / 1e3, r.p99_ns / 1e3, r.max_ns / 1e6, r.longest_stall_ns / 1e6,
                    r.stalls, double(cfg.stall_ns) / 1e6, r.errors ? fmt::format("  ({} WRONG)", r.errors) : ""));
  report->results.push_back(std::move(r));
  return Status::OK();
}

}  // namespace

Status RunArrivalBench(const ArrivalBenchConfig& cfg, ArrivalBenchReport* report, const LogFn& log) {
  if (cfg.keys == 0) return Status::InvalidArgument("--keys must be at least 1");
  if (cfg.keys > 0xffffffffull) return Status::InvalidArgument("--keys must be below 2^32");
  if (cfg.indexes.empty()) return Status::InvalidArgument("no index named (valid: " + IndexNames() + ", or all)");
  if (cfg.common.threads < 1 || cfg.common.threads > 256) return Status::InvalidArgument("--threads must be 1..256");
  if (!(cfg.rate >= 0) || std::isinf(cfg.rate)) return Status::InvalidArgument("--rate must be a finite number >= 0");
  if (!(cfg.load > 0) || std::isinf(cfg.load)) return Status::InvalidArgument("--load must be a finite number > 0");
  std::vector<const IndexKind*> kinds;
  for (const auto& name : cfg.indexes) {
    const IndexKind* k = FindIndexKind(name);
    if (!k) return Status::InvalidArgument("unknown index '" + name + "' (valid: " + IndexNames() + ", or all)");
    kinds.push_back(k);
  }
  const IndexKind* rate_kind = nullptr;
  if (cfg.rate == 0) {
    rate_kind = FindIndexKind(cfg.rate_kind);
    if (!rate_kind)
      return Status::InvalidArgument("--rate-of: unknown index '" + cfg.rate_kind + "' (valid: " + IndexNames() + ")");
  }
  PmSettings pm_settings;
  WORT_RETURN_IF_ERROR(pm_settings.Apply(cfg.common));
  report->env = CaptureEnvironment();
  const std::vector<std::string> keys = GenerateKeys(cfg.dist, cfg.keys, cfg.common.seed);
  if (keys.empty()) return Status::InvalidArgument(std::string("the ") + DistName(cfg.dist) + " workload produced no keys");

  ArrivalResult base;
  base.dist = DistName(cfg.dist);
  base.keys = keys.size();
  base.threads = cfg.common.threads;
  base.rate = cfg.rate;
  base.rate_from = "given";
  if (rate_kind) {
    std::string why;
    double ns = 0;
    Status s = BatchInsertNs(cfg, *rate_kind, keys, &ns, &why);
    if (!s.ok()) return Status(s.code(), "measuring the arrival rate: " + why);
    base.batch_ns_per_op = ns;
    base.rate = cfg.load * 1e9 / std::max(ns, 1.0);
    base.rate_from = fmt::format("{:g} x {} batch", cfg.load, rate_kind->name);
  }
  if (log)
    log(fmt::format("# wort bench arrival\nindex:          {}\ndist:           {}\nkeys:           {}\nworkers:        "
                    "{}\narrival rate:   {:.0f}/s ({}{})\nflush:          {}\nwrite latency:  {} ns\n",
                    [&] {
                      std::string s;
                      for (const auto& i : cfg.indexes) s += (s.empty() ? "" : ",") + i;
                      return s;
                    }(),
                    base.dist, base.keys, base.threads, base.rate, base.rate_from,
                    rate_kind ? fmt::format(": {:.1f} ns per insert, one thread", base.batch_ns_per_op) : "",
                    report->env.flush, report->env.write_latency_ns));
  // The Poisson schedule: exponential inter-arrival times (the same for every kind).
  std::vector<uint64_t> arrival(keys.size());
  {
    std::mt19937_64 rng(cfg.common.seed ^ 0x9e3779b97f4a7c15ull);
    std::exponential_distribution<double> gap(base.rate / 1e9);  // per ns
    double t = 0;
    for (auto& a : arrival) {
      t += gap(rng);
      a = static_cast<uint64_t>(t);
    }
  }
  Status first;
  for (const IndexKind* k : kinds) {
    Status s = RunOne(cfg, *k, keys, arrival, base, report, log);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

std::string FormatArrivalResults(const ArrivalBenchReport& r) {
  std::string s = fmt::format("{:<10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>12} {:>7} {:>12} {:>7}\n", "index",
                              "rate/s", "mean us", "p50 us", "p99 us", "p99.9 us", "max ms", "longest ms", "stalls",
                              "achieved/s", "errors");
  for (const auto& x : r.results)
    s += fmt::format("{:<10} {:>10.0f} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>10.2f} {:>12.2f} {:>7} {:>12.0f} {:>7}\n",
                     x.index, x.rate, x.mean_ns / 1e3, x.p50_ns / 1e3, x.p99_ns / 1e3, x.p999_ns / 1e3, x.max_ns / 1e6,
                     x.longest_stall_ns / 1e6, x.stalls, x.achieved_per_s, x.errors);
  for (const auto& k : r.skipped) s += "skipped: " + k.reason + "\n";
  return s;
}

nlohmann::json ToJson(const ArrivalResult& r, const ArrivalBenchConfig& cfg, const Environment& env) {
  nlohmann::json j;
  j["bench"] = "arrival";
  j["index"] = r.index;
  j["dist"] = r.dist;
  j["keys"] = r.keys;
  j["op"] = "insert";
  j["key_type"] = r.key_type;
  j["threads"] = r.threads;
  j["rate_per_s"] = r.rate;
  j["rate_from"] = r.rate_from;
  if (r.batch_ns_per_op > 0) j["rate_kind_batch_ns_per_op"] = r.batch_ns_per_op;
  j["load"] = cfg.rate == 0 ? cfg.load : 0;
  j["seconds"] = r.seconds;
  j["achieved_per_s"] = r.achieved_per_s;
  j["mean_ns"] = r.mean_ns;
  j["ns_per_op"] = r.mean_ns;  // the mean latency, for tables keyed on ns_per_op
  j["p50_ns"] = r.p50_ns;
  j["p90_ns"] = r.p90_ns;
  j["p99_ns"] = r.p99_ns;
  j["p999_ns"] = r.p999_ns;
  j["max_ns"] = r.max_ns;
  j["cpu_ns_per_op"] = r.cpu_ns_per_op;
  j["flushes_per_op"] = r.flushes_per_op;
  j["longest_stall_ns"] = r.longest_stall_ns;
  j["stall_min_ns"] = cfg.stall_ns;
  j["stalls"] = r.stalls;
  j["stall_ns_total"] = r.stall_ns_total;
  nlohmann::json c = nlohmann::json::array();
  for (const auto& [ns, f] : r.cdf) c.push_back({ns, f});
  j["cdf"] = c;
  j["errors"] = r.errors;
  AddIndexOptionsJson(cfg.index_options, &j);
  detail::AddEnvJson(env, cfg.common.seed, &j);
  return j;
}

}  // namespace wort::bench
