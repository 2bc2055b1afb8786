// YCSB generators (src/bench/ycsb.h): the mixes, the zipfian skew, determinism by seed, and a
// short `RunYcsbBench` that must report every workload with no wrong outcome.
#include "bench/ycsb.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "bench/bench.h"

namespace wort::bench {
namespace {

TEST(Ycsb, NamesAndSpecMixes) {
  YcsbWorkload w;
  ASSERT_TRUE(ParseYcsbWorkload("A", &w));
  EXPECT_EQ(w, YcsbWorkload::kA);
  ASSERT_TRUE(ParseYcsbWorkload("ycsb-e", &w));
  EXPECT_EQ(w, YcsbWorkload::kE);
  ASSERT_TRUE(ParseYcsbWorkload("insert", &w));
  EXPECT_EQ(w, YcsbWorkload::kLoad);
  EXPECT_FALSE(ParseYcsbWorkload("g", &w));
  std::vector<YcsbWorkload> ws;
  EXPECT_FALSE(ParseYcsbList("a,zz", &ws).ok());
  ASSERT_TRUE(ParseYcsbList("all", &ws).ok());
  EXPECT_EQ(ws.size(), 7u);
  for (YcsbWorkload x : kAllYcsbWorkloads) {
    const YcsbMix m = YcsbSpec(x);
    EXPECT_NEAR(m.read + m.update + m.insert + m.scan + m.rmw, 1.0, 1e-12) << YcsbName(x);
  }
  EXPECT_EQ(YcsbSpec(YcsbWorkload::kB).read, 0.95);
  EXPECT_EQ(YcsbSpec(YcsbWorkload::kD).insert, 0.05);
  EXPECT_TRUE(YcsbSpec(YcsbWorkload::kD).latest);
  EXPECT_EQ(YcsbSpec(YcsbWorkload::kE).scan, 0.95);
  EXPECT_EQ(YcsbSpec(YcsbWorkload::kF).rmw, 0.5);
}

// The drawn operation shares match the spec within 5 standard deviations.
TEST(Ycsb, MixProportions) {
  constexpr int kN = 200000;
  for (YcsbWorkload w : kAllYcsbWorkloads) {
    YcsbOpGenerator g(w, RequestDist::kUniform, 1000, 0, 7);
    std::map<YcsbOp, int> count;
    for (int i = 0; i < kN; ++i) ++count[g.NextOp()];
    const YcsbMix m = YcsbSpec(w);
    const std::pair<YcsbOp, double> want[] = {{YcsbOp::kRead, m.read},
                                              {YcsbOp::kUpdate, m.update},
                                              {YcsbOp::kInsert, m.insert},
                                              {YcsbOp::kScan, m.scan},
                                              {YcsbOp::kReadModifyWrite, m.rmw}};
    for (auto [op, p] : want) {
      const double sd = std::sqrt(kN * p * (1 - p));
      EXPECT_NEAR(count[op], kN * p, 5 * sd + 1e-9) << YcsbName(w) << " " << YcsbOpName(op);
    }
  }
}

TEST(Ycsb, ZetaAndFnv) {
  EXPECT_NEAR(Zeta(1, 0.99), 1.0, 1e-12);
  EXPECT_NEAR(Zeta(2, 0.99), 1.0 + std::pow(0.5, 0.99), 1e-12);
  // Continuing a sum equals computing it whole.
  EXPECT_NEAR(Zeta(1000, 2000, 0.99, Zeta(1000, 0.99)), Zeta(2000, 0.99), 1e-9);
  // FNV-1a-64 of the 8 bytes of 0: the offset basis run through 8 zero bytes (known value).
  uint64_t h = 0xCBF29CE484222325ull;
  for (int i = 0; i < 8; ++i) h *= 1099511628211ull;
  const int64_t sh = static_cast<int64_t>(h);
  EXPECT_EQ(FnvHash64(0), static_cast<uint64_t>(sh < 0 ? -sh : sh));
  EXPECT_NE(FnvHash64(1), FnvHash64(2));
  EXPECT_LT(FnvHash64(12345), 1ull << 63);  // Math.abs: never negative
}

// Zipfian theta 0.99: item 0 is drawn with probability 1/zeta(n), item 1 with 0.5^theta/zeta(n)
// (the generator's first two cases are exact), and the head dominates.
TEST(Ycsb, ZipfianSkew) {
  constexpr uint64_t kItems = 10000;
  constexpr int kN = 400000;
  ZipfianGenerator z(kItems);
  YcsbRng rng(3);
  std::vector<int> count(kItems);
  for (int i = 0; i < kN; ++i) {
    const uint64_t v = z.Next(rng);
    ASSERT_LT(v, kItems);
    ++count[v];
  }
  const double p0 = 1 / Zeta(kItems, 0.99), p1 = std::pow(0.5, 0.99) / Zeta(kItems, 0.99);
  EXPECT_NEAR(count[0], kN * p0, 5 * std::sqrt(kN * p0));
  EXPECT_NEAR(count[1], kN * p1, 5 * std::sqrt(kN * p1));
  int top10 = 0, last_half = 0;
  for (uint64_t i = 0; i < 10; ++i) top10 += count[i];
  for (uint64_t i = kItems / 2; i < kItems; ++i) last_half += count[i];
  EXPECT_GT(top10, kN / 4);       // ~30% of draws hit 0.1% of the items
  EXPECT_LT(last_half, kN / 10);  // ~7% hit the colder half
  // Uniform for comparison: the top 10 get ~0.1%.
  YcsbOpGenerator u(YcsbWorkload::kC, RequestDist::kUniform, kItems, 0, 3);
  int utop = 0;
  for (int i = 0; i < kN; ++i) utop += u.NextRecord(kItems) < 10;
  EXPECT_LT(utop, kN / 200);
}

// Scrambled zipfian: the same skew, spread over the record numbers, all within range.
TEST(Ycsb, ScrambledZipfianSpreadsTheHotItems) {
  constexpr uint64_t kItems = 100000;
  constexpr int kN = 200000;
  YcsbOpGenerator g(YcsbWorkload::kC, RequestDist::kZipfian, kItems, 0, 11);
  std::map<uint64_t, int> count;
  for (int i = 0; i < kN; ++i) {
    const uint64_t r = g.NextRecord(kItems);
    ASSERT_LT(r, kItems);
    ++count[r];
  }
  std::vector<std::pair<int, uint64_t>> by_count;
  for (auto [r, c] : count) by_count.push_back({c, r});
  std::sort(by_count.rbegin(), by_count.rend());
  int top10 = 0;
  uint64_t lo = kItems, hi = 0;
  for (int i = 0; i < 10; ++i) {
    top10 += by_count[i].first;
    lo = std::min(lo, by_count[i].second);
    hi = std::max(hi, by_count[i].second);
  }
  EXPECT_GT(top10, kN / 10);          // the head is hot (10 items of 100000 get > 10%)
  EXPECT_GT(hi - lo, kItems / 10);    // and not clustered at the low record numbers
  // Records past the limit (not inserted yet) are never returned.
  for (int i = 0; i < 10000; ++i) ASSERT_LT(g.NextRecord(500), 500u);
}

// Latest: the newest records are the hottest; a growing limit is followed.
TEST(Ycsb, LatestFavoursNewRecords) {
  YcsbOpGenerator g(YcsbWorkload::kD, RequestDist::kUniform, 10000, 100, 5);
  int newest = 0;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t r = g.NextRecord(10000);
    ASSERT_LT(r, 10000u);
    newest += r >= 9990;
  }
  EXPECT_GT(newest, 100000 / 4);
  for (int i = 0; i < 1000; ++i) ASSERT_LT(g.NextRecord(10500), 10500u);
  int above = 0;
  for (int i = 0; i < 1000; ++i) above += g.NextRecord(10500) >= 10000;
  EXPECT_GT(above, 200);
}

TEST(Ycsb, DeterministicBySeed) {
  for (RequestDist d : {RequestDist::kUniform, RequestDist::kZipfian}) {
    YcsbOpGenerator a(YcsbWorkload::kA, d, 100000, 0, 42), b(YcsbWorkload::kA, d, 100000, 0, 42),
        c(YcsbWorkload::kA, d, 100000, 0, 43);
    int differ = 0;
    for (int i = 0; i < 1000; ++i) {
      const YcsbOp oa = a.NextOp(), ob = b.NextOp(), oc = c.NextOp();
      const uint64_t ra = a.NextRecord(100000), rb = b.NextRecord(100000), rc = c.NextRecord(100000);
      ASSERT_EQ(oa, ob);
      ASSERT_EQ(ra, rb);
      differ += ra != rc || oa != oc;
    }
    EXPECT_GT(differ, 900) << RequestDistName(d);
  }
}

TEST(Ycsb, AcknowledgedCounterAdvancesOverContiguousAcks) {
  AcknowledgedCounter c(100, 10);
  EXPECT_EQ(c.Limit(), 100u);
  const uint64_t a = c.Claim(), b = c.Claim(), d = c.Claim();
  EXPECT_EQ(a, 100u);
  c.Acknowledge(b);
  EXPECT_EQ(c.Limit(), 100u);  // 100 not yet done
  c.Acknowledge(a);
  EXPECT_EQ(c.Limit(), 102u);
  c.Acknowledge(d);
  EXPECT_EQ(c.Limit(), 103u);
}

// A short run of every workload, 2 threads, an ordered and a hash kind: every workload is
// reported (e skipped for the hash kind, with a note), with no wrong outcome.
TEST(YcsbBench, RunsEveryWorkloadWithoutErrors) {
  YcsbBenchConfig cfg;
  cfg.indexes = {"fastfair", "cceh"};
  cfg.records = 3000;
  cfg.ops = 4000;
  cfg.thread_counts = {2};
  cfg.common.flush = "none";
  cfg.common.pool_size = 64ull << 20;
  cfg.common.pool_path = "/dev/shm/wort-ycsb-test-" + std::to_string(getpid());
  for (RequestDist d : {RequestDist::kUniform, RequestDist::kZipfian}) {
    cfg.request = d;
    YcsbBenchReport r;
    ASSERT_TRUE(RunYcsbBench(cfg, &r).ok());
    EXPECT_EQ(r.results.size(), 7u + 6u);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_NE(r.skipped[0].reason.find("cceh: workload e"), std::string::npos);
    for (const auto& x : r.results) {
      EXPECT_EQ(x.errors, 0u) << x.index << " " << x.workload;
      EXPECT_EQ(x.ops, x.workload == "load" ? cfg.records : cfg.ops) << x.index << " " << x.workload;
      EXPECT_GT(x.mops_per_s, 0);
      EXPECT_LE(x.p50_ns, x.p99_ns);
      if (x.workload == "e") { EXPECT_GT(x.scans, x.inserts); }
      if (x.workload == "c") { EXPECT_EQ(x.reads, x.ops); }
    }
  }
}

// --partition (issue 31, h59): first-byte gives each thread the records whose first key byte is
// its number mod T, index gives each thread an index of its own; either way every record is
// loaded once with no wrong outcome, and the run reports where its CPU time went (user, system)
// and its epoch manager's advances. index runs the load only.
TEST(YcsbBench, LoadPartitionsLoadEveryRecordOnce) {
  YcsbBenchConfig cfg;
  cfg.indexes = {"vart", "woart"};
  cfg.dist = Dist::kBytes;  // keys of every byte value, first bytes >= 0x80 included
  cfg.records = 5000;
  cfg.workloads = {YcsbWorkload::kLoad};
  cfg.thread_counts = {1, 3};
  cfg.common.flush = "none";
  cfg.common.pool_size = 64ull << 20;
  cfg.common.pool_path = "/dev/shm/wort-ycsb-part-test-" + std::to_string(getpid());
  for (LoadPartition p : {LoadPartition::kSlices, LoadPartition::kFirstByte, LoadPartition::kIndexPerThread}) {
    cfg.partition = p;
    YcsbBenchReport r;
    ASSERT_TRUE(RunYcsbBench(cfg, &r).ok()) << LoadPartitionName(p);
    ASSERT_EQ(r.results.size(), 4u) << LoadPartitionName(p);
    for (const auto& x : r.results) {
      const std::string what = x.index + " x" + std::to_string(x.threads) + " " + LoadPartitionName(p);
      EXPECT_EQ(x.errors, 0u) << what;  // includes the Size() check of every index
      EXPECT_EQ(x.inserts, cfg.records) << what;
      EXPECT_EQ(x.partition, LoadPartitionName(p)) << what;
      EXPECT_GE(x.epoch_advances, 0) << what;
      EXPECT_GE(x.epoch_tries, x.epoch_blocked) << what;
      EXPECT_GE(x.user_ns_per_op + x.sys_ns_per_op, 0.0) << what;
      EXPECT_LE(x.user_ns_per_op + x.sys_ns_per_op, x.cpu_ns_per_op * 1.5 + 2000) << what;
      // vart retires a node per growth (hundreds in 5,000 inserts) and advances its own epoch.
      if (x.index == "vart" && x.threads == 1) {
        EXPECT_GT(x.epoch_advances, 0) << what;
      }
    }
  }
  cfg.partition = LoadPartition::kIndexPerThread;
  cfg.workloads = {YcsbWorkload::kLoad, YcsbWorkload::kA};
  YcsbBenchReport r;
  const Status s = RunYcsbBench(cfg, &r);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.ToString().find("load only"), std::string::npos) << s.ToString();
  LoadPartition q;
  EXPECT_TRUE(ParseLoadPartition("first-byte", &q));
  EXPECT_EQ(q, LoadPartition::kFirstByte);
  EXPECT_FALSE(ParseLoadPartition("bytes", &q));
}

}  // namespace
}  // namespace wort::bench
