// `wort bench arrival` (src/bench/arrival_bench.h): the stall finder and quantiles on hand-made
// timelines, the open-loop run of every hash kind at tiny N (no wrong result, latencies from the
// scheduled arrival: a blocked worker makes the requests queued behind it wait), the index
// options passed through, and bad configurations refused.
#include "bench/arrival_bench.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "wort/index.h"

namespace wort::bench {
namespace {

TEST(Arrival, QuantileIsNearestRank) {
  const std::vector<uint64_t> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(Quantile(v, 0.5), 5);
  EXPECT_EQ(Quantile(v, 0.91), 10);
  EXPECT_EQ(Quantile(v, 0.0), 1);
  EXPECT_EQ(Quantile(v, 1.0), 10);
  EXPECT_EQ(Quantile({}, 0.5), 0);
}

TEST(Arrival, StallsAreBusyGapsOnly) {
  // Requests at 0, 10, 20, ... served in 1 ns: idle gaps between them are no stall (busy 1 ns).
  std::vector<uint64_t> arr, done;
  for (uint64_t i = 0; i < 10; ++i) {
    arr.push_back(i * 10);
    done.push_back(i * 10 + 1);
  }
  StallStats s = FindStalls(arr, done, 5);
  EXPECT_EQ(s.longest_ns, 1);
  EXPECT_EQ(s.count, 0u);
  // Request 5 (arrives 50) blocks for 1000 ns; 6..9 queue behind it and complete right after.
  done[5] = 1050;
  for (uint64_t i = 6; i < 10; ++i) done[i] = 1051 + i;
  s = FindStalls(arr, done, 500);
  // Completions 41 -> 1050, request 5 in service from its arrival at 50: one stall of 1000 ns.
  EXPECT_EQ(s.longest_ns, 1000);
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.total_ns, 1000);
  s = FindStalls(arr, done, 2000);
  EXPECT_EQ(s.longest_ns, 1000);
  EXPECT_EQ(s.count, 0u);
}

ArrivalBenchConfig Tiny(std::vector<std::string> kinds, size_t keys) {
  ArrivalBenchConfig c;
  c.indexes = std::move(kinds);
  c.keys = keys;
  c.common.pool_size = 256ull << 20;
  c.common.threads = 2;
  c.cdf_points = 40;
  return c;
}

TEST(Arrival, EveryHashKindAtLinpsRate) {
  ArrivalBenchConfig c = Tiny({"cceh", "cceh-cow", "levl", "linp", "cuck", "bch", "path"}, 5000);
  ArrivalBenchReport rep;
  ASSERT_TRUE(RunArrivalBench(c, &rep).ok());
  ASSERT_EQ(rep.results.size(), 7u);
  EXPECT_TRUE(rep.skipped.empty());
  for (const auto& r : rep.results) {
    SCOPED_TRACE(r.index);
    EXPECT_EQ(r.errors, 0u);
    EXPECT_EQ(r.keys, 5000u);
    EXPECT_GT(r.rate, 0);
    EXPECT_GT(r.batch_ns_per_op, 0);
    EXPECT_EQ(r.rate_from, "1 x linp batch");
    EXPECT_LE(r.p50_ns, r.p99_ns);
    EXPECT_LE(r.p99_ns, r.p999_ns);
    EXPECT_LE(r.p999_ns, r.max_ns);
    EXPECT_GT(r.max_ns, 0);
    EXPECT_GE(r.flushes_per_op, 1.0);  // every insert persists its record
    ASSERT_GE(r.cdf.size(), 2u);
    EXPECT_EQ(r.cdf.back().first, r.max_ns);
    EXPECT_EQ(r.cdf.back().second, 1.0);
    for (size_t i = 1; i < r.cdf.size(); ++i) {
      EXPECT_LE(r.cdf[i - 1].first, r.cdf[i].first);
      EXPECT_LE(r.cdf[i - 1].second, r.cdf[i].second);
    }
    // The run spans at least the schedule: N arrivals at the rate take about N / rate seconds.
    EXPECT_GT(r.seconds, 0.5 * 5000 / r.rate);
  }
}

// A given rate far above what one worker can serve: the queue grows, so the last requests wait
// for most of the run - latency is measured from the scheduled arrival, not from the start of
// service (a closed loop would report the service time only).
TEST(Arrival, OverloadMakesRequestsWait) {
  ArrivalBenchConfig c = Tiny({"linp"}, 20000);
  c.common.threads = 1;
  c.common.write_latency_ns = 2000;  // each insert >= 2 us: at most 500K/s
  c.rate = 1e8;                      // all arrivals within 0.2 ms
  ArrivalBenchReport rep;
  ASSERT_TRUE(RunArrivalBench(c, &rep).ok());
  ASSERT_EQ(rep.results.size(), 1u);
  const auto& r = rep.results[0];
  EXPECT_EQ(r.rate_from, "given");
  EXPECT_EQ(r.errors, 0u);
  EXPECT_GT(r.seconds, 0.03);               // 20000 x 2 us of service
  EXPECT_GT(r.max_ns, 0.8 * r.seconds * 1e9);  // the last arrival waited for nearly all of it
  EXPECT_GT(r.p50_ns, 10 * 2000);
}

TEST(Arrival, IndexOptionsReachTheKind) {
  ArrivalBenchConfig c = Tiny({"cceh"}, 1000);
  c.rate = 1e6;
  c.index_options.cceh_segment_bytes = 1000;  // not a power of two: refused by cceh
  ArrivalBenchReport rep;
  Status s = RunArrivalBench(c, &rep);
  EXPECT_FALSE(s.ok());
  ASSERT_EQ(rep.skipped.size(), 1u);
  EXPECT_NE(rep.skipped[0].reason.find("segment"), std::string::npos) << rep.skipped[0].reason;
}

TEST(Arrival, BadConfigurationsAreRefused) {
  ArrivalBenchReport rep;
  ArrivalBenchConfig c = Tiny({"cceh"}, 100);
  c.keys = 0;
  EXPECT_EQ(RunArrivalBench(c, &rep).code(), Code::kInvalidArgument);
  c = Tiny({"nosuch"}, 100);
  EXPECT_EQ(RunArrivalBench(c, &rep).code(), Code::kInvalidArgument);
  c = Tiny({"cceh"}, 100);
  c.rate = -1;
  EXPECT_EQ(RunArrivalBench(c, &rep).code(), Code::kInvalidArgument);
  c = Tiny({"cceh"}, 100);
  c.load = 0;
  EXPECT_EQ(RunArrivalBench(c, &rep).code(), Code::kInvalidArgument);
  c = Tiny({"cceh"}, 100);
  c.rate_kind = "nosuch";
  EXPECT_EQ(RunArrivalBench(c, &rep).code(), Code::kInvalidArgument);
  EXPECT_TRUE(rep.results.empty());
}

TEST(ArrivalCli, WritesJsonWithTheCdf) {
  const std::string json = "/tmp/wort-arrival-test-" + std::to_string(getpid()) + ".jsonl";
  std::remove(json.c_str());
  const std::string cmd = std::string(WORT_CLI_PATH) +
                          " bench arrival --index cceh,path --keys 3000 --threads 2 --json " + json + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(json);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    EXPECT_EQ(j["bench"], "arrival");
    EXPECT_EQ(j["errors"].get<uint64_t>(), 0u);
    EXPECT_GT(j["cdf"].size(), 2u);
    EXPECT_GT(j["rate_per_s"].get<double>(), 0);
    EXPECT_TRUE(j.contains("longest_stall_ns") && j.contains("max_ns") && j.contains("p99_ns"));
    ++n;
  }
  EXPECT_EQ(n, 2);
  std::remove(json.c_str());
  EXPECT_NE(std::system((std::string(WORT_CLI_PATH) + " bench arrival --index cceh --load 0 >/dev/null 2>&1").c_str()), 0);
  EXPECT_NE(std::system((std::string(WORT_CLI_PATH) + " bench arrival --index nosuch >/dev/null 2>&1").c_str()), 0);
}

}  // namespace
}  // namespace wort::bench
