// Open-loop insert latency with Poisson arrivals (`wort bench arrival`; the thesis's Figure 26(a),
// 4.4.7.3): the latency of concurrent inserts *including the time they wait*, the way a server's
// clients see a full-table rehash that blocks everyone.
//
// Per index kind: a fresh pool and index (as RunIndexBench), then N inserts (the bench's keys of
// the distribution, in their generated order) whose arrival times are a Poisson process of rate
// lambda: inter-arrival times drawn from an exponential distribution (seeded; the same schedule
// for every kind). `threads` workers serve them in arrival order: a worker takes the next request,
// waits until its scheduled arrival if it is early (sleeping, then yielding for the last 50 us),
// inserts, and records latency = completion - scheduled arrival. A request that arrives while
// every worker is busy (or blocked on the index) waits, and that wait is in its latency: the
// generator never slows down to the system's pace (an open loop; a closed loop would hide it).
//
// lambda: `rate` arrivals per second, or (rate == 0) `load` x the batch insert throughput of the
// kind `rate_kind` (the thesis: LINP's), measured first on the same keys with one thread and no
// waiting (a fresh index, timed like RunIndexBench's insert phase).
//
// Stalls (the CDF's flat regions): sorting arrivals a[] and completions c[], the (j+2)-th
// completion c[j+1] needs j+2 arrivals, so from max(c[j], a[j+1]) to c[j+1] some request was in
// service or waiting and nothing completed - a blocking rehash, a split holding a lock, or (on a
// shared machine) every worker descheduled at once. (An idle gap, nothing arrived, only counts
// the next request's own service time.) The longest such gap is the longest stall,
// and the gaps of at least `stall_ns` are counted: a request arriving at the start of a stall of
// length S waits S, those after it less, so the CDF climbs slowly over a span of about S - the
// thesis's "flat region, whose length represents how long each full-table rehashing takes".
//
// Results per kind: the latency distribution (mean, p50, p90, p99, p99.9, max and `cdf_points`
// points of the CDF), the stalls, the achieved throughput, flushes per insert, wrong outcomes
// (an insert not OK, or a key missing afterwards: 1000 sampled keys are looked up).
//
// Thread safety: one run per process at a time (pm settings are global), as RunIndexBench.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench.h"

namespace wort::bench {

struct ArrivalBenchConfig {
  CommonConfig common;               // common.threads: workers serving the arrivals
  std::vector<std::string> indexes;  // kind names
  Dist dist = Dist::kSparse;
  size_t keys = 1000000;
  double rate = 0;                   // arrivals per second; 0: load x rate_kind's batch throughput
  std::string rate_kind = "linp";
  double load = 1.0;
  uint64_t stall_ns = 1000000;       // gaps counted as stalls (flat regions): >= 1 ms
  size_t cdf_points = 200;
  IndexOptions index_options;        // as IndexBenchConfig::index_options
};

struct ArrivalResult {
  std::string index, dist, key_type;
  size_t keys = 0;
  int threads = 1;
  double rate = 0;                 // lambda, arrivals per second
  std::string rate_from;           // "given", or "<load> x <kind> batch"
  double batch_ns_per_op = 0;      // rate_kind's closed-loop insert time (0 when the rate was given)
  double seconds = 0;              // first arrival to last completion
  double achieved_per_s = 0;       // completions per second over that time
  double mean_ns = 0, p50_ns = 0, p90_ns = 0, p99_ns = 0, p999_ns = 0, max_ns = 0;
  double cpu_ns_per_op = 0;        // the workers' CPU time / inserts (waiting spins included)
  double flushes_per_op = 0;
  double longest_stall_ns = 0;
  uint64_t stalls = 0;             // gaps >= stall_ns
  double stall_ns_total = 0;       // their summed length
  std::vector<std::pair<double, double>> cdf;  // (latency ns, fraction of requests <= it), ascending
  uint64_t errors = 0;
};

struct ArrivalBenchReport {
  Environment env;
  std::vector<ArrivalResult> results;
  std::vector<Skipped> skipped;
};

// InvalidArgument for a bad configuration (unknown kind, keys 0, rate < 0, load <= 0, threads out
// of 1..256, rate 0 with rate_kind not registered). A kind that fails is listed in
// report->skipped and the others run; the first failure's status is returned.
Status RunArrivalBench(const ArrivalBenchConfig& cfg, ArrivalBenchReport* report, const LogFn& log = nullptr);

// Latency quantile q (0..1) of `sorted` (ascending): the nearest-rank value.
double Quantile(const std::vector<uint64_t>& sorted, double q);
// Longest busy gap between consecutive completions, and the count and sum of those >= min_ns.
// arrival[i] and completion[i] are ns since a common origin; completion[i] >= arrival[i].
struct StallStats {
  double longest_ns = 0;
  uint64_t count = 0;
  double total_ns = 0;
};
StallStats FindStalls(const std::vector<uint64_t>& arrival, const std::vector<uint64_t>& completion, uint64_t min_ns);

std::string FormatArrivalResults(const ArrivalBenchReport& r);
nlohmann::json ToJson(const ArrivalResult& r, const ArrivalBenchConfig& cfg, const Environment& env);

}  // namespace wort::bench
