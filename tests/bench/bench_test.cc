// Smoke tests of the benchmark library and `wort bench`: every registered index kind runs every
// op at tiny N without a wrong result, the JSON records carry the documented fields, bad names
// are rejected with the valid ones listed, and PoolFull is reported as such. No timing checks.
#include "bench/bench.h"
#include "bench/kv_bench.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "common/test_util.h"
#include "wort/index.h"
#include "wort/pm.h"

namespace wort::bench {
namespace {

std::string TempPath(const std::string& tag) {
  return "/tmp/wort-bench-test-" + std::to_string(getpid()) + "-" + tag;
}

std::vector<std::string> AllKinds() {
  std::vector<std::string> v;
  for (const IndexKind* k : IndexKinds()) v.push_back(k->name);
  return v;
}

IndexBenchConfig TinyConfig(Dist d, size_t keys) {
  IndexBenchConfig c;
  c.indexes = AllKinds();
  c.dist = d;
  c.keys = keys;
  c.ops.assign(std::begin(kAllOps), std::end(kAllOps));
  c.scan_len = 10;
  c.scans = 200;
  c.common.pool_size = 256ull << 20;
  return c;
}

const char* kIndexFields[] = {"index", "dist", "keys", "op", "ns_per_op", "flushes_per_op", "fences_per_op",
                              "leaf_depth", "bytes_per_key", "flush", "write_latency_ns", "seed", "threads",
                              "timestamp", "git_commit", "cpu", "errors", "ops"};

void CheckRun(Dist d, size_t keys, int threads) {
  IndexBenchConfig cfg = TinyConfig(d, keys);
  cfg.common.threads = threads;
  if (cfg.indexes.empty()) {
    std::printf("no index kinds registered yet: nothing to run\n");
    return;
  }
  IndexBenchReport rep;
  std::vector<std::string> lines;
  Status s = RunIndexBench(cfg, &rep, [&](const std::string& l) { lines.push_back(l); });
  for (const auto& sk : rep.skipped) std::printf("skipped: %s\n", sk.reason.c_str());
  EXPECT_TRUE(s.ok()) << s.ToString();
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("# wort bench"), std::string::npos);  // the configuration comes first
  EXPECT_NE(lines[0].find("git commit:"), std::string::npos);
  EXPECT_NE(lines[0].find("cpu:"), std::string::npos);
  std::string ran;
  for (const auto& name : cfg.indexes) {
    const IndexKind* k = FindIndexKind(name);
    size_t n_ops = 0;
    for (const auto& r : rep.results) {
      if (r.index != name) continue;
      ++n_ops;
      EXPECT_EQ(r.errors, 0u) << name << " " << r.op;
      EXPECT_EQ(r.keys, keys);
      EXPECT_EQ(r.dist, DistName(d));
      EXPECT_GT(r.ns_per_op, 0) << name << " " << r.op;
      if (k->ordered) {
        EXPECT_GT(r.leaf_depth, 0) << name;  // hash tables have no depth
      }
      EXPECT_GT(r.bytes_per_key, 0) << name;
      if (r.op == "scan") {
        EXPECT_EQ(r.ops, 200u);
        EXPECT_GT(r.keys_per_op, 1.0);
        EXPECT_LE(r.keys_per_op, 10.0);
      } else if (r.op == "restart" || r.op == "recover") {
        EXPECT_EQ(r.ops, 1u) << name << " " << r.op;  // one reopen, timed to the first lookup
        EXPECT_GT(r.seconds, 0) << name << " " << r.op;
      } else {
        EXPECT_EQ(r.ops, keys) << name << " " << r.op;
      }
      // The volatile references (ids 30..39) make no pm call by design.
      const bool is_volatile = k->type_id >= 30 && k->type_id <= 39;
      if (r.op == "restart" || r.op == "recover") { EXPECT_FALSE(is_volatile) << name; }
      if (!is_volatile && (r.op == "insert" || r.op == "upsert" || r.op == "delete")) {
        EXPECT_GT(r.flushes_per_op, 0) << name << " " << r.op;
      }
      if (r.op == "search") {
        EXPECT_EQ(r.flushes_per_op, 0) << name;
      }
      const nlohmann::json j = ToJson(r, cfg, rep.env);
      for (const char* f : kIndexFields) EXPECT_TRUE(j.contains(f)) << f;
      EXPECT_EQ(j["index"], name);
      EXPECT_EQ(j["op"], r.op);
      EXPECT_EQ(j["keys"], keys);
      EXPECT_EQ(j["threads"], threads);
      EXPECT_EQ(j.contains("recovery_seconds"), r.op == "recover") << name << " " << r.op;
    }
    bool skipped = false;
    for (const auto& sk : rep.skipped) skipped |= sk.index == name;
    if (n_ops) ran += name + " ";
    // insert, search, scan, upsert, restart + recover, delete; an unordered kind has no scan and
    // a volatile one no restart (both listed as skipped).
    const bool is_volatile = k->type_id >= 30 && k->type_id <= 39;
    if (n_ops) EXPECT_EQ(n_ops, 4u + (k->ordered ? 1 : 0) + (is_volatile ? 0 : 2)) << name;
    else EXPECT_TRUE(skipped) << name << " neither ran nor was listed as skipped";
  }
  std::printf("%s x%d: kinds that ran: %s\n", DistName(d), threads, ran.c_str());
}

TEST(Bench, EveryKindDense) { CheckRun(Dist::kDense, 3000, 1); }
TEST(Bench, EveryKindSparse) { CheckRun(Dist::kSparse, 3000, 1); }
TEST(Bench, EveryKindClustered) { CheckRun(Dist::kClustered, 3000, 1); }
TEST(Bench, EveryKindStrings) { CheckRun(Dist::kStrings, 2000, 1); }
TEST(Bench, EveryKindTwoThreads) { CheckRun(Dist::kSparse, 3000, 2); }

TEST(Bench, RangeFracSetsTheScanLength) {
  IndexBenchConfig cfg = TinyConfig(Dist::kDense, 2000);
  cfg.indexes.clear();
  for (const IndexKind* k : IndexKinds())
    if (k->ordered) cfg.indexes.push_back(k->name);
  ASSERT_FALSE(cfg.indexes.empty()) << "the built-in kinds include ordered ones";
  cfg.indexes.resize(1);
  cfg.ops = {Op::kScan};
  cfg.range_frac = 0.01;  // 20 keys
  IndexBenchReport rep;
  ASSERT_TRUE(RunIndexBench(cfg, &rep).ok());
  ASSERT_EQ(rep.results.size(), 1u);  // insert not requested: not reported
  EXPECT_EQ(rep.results[0].op, "scan");
  EXPECT_EQ(rep.results[0].scan_len, 20u);
  EXPECT_EQ(ToJson(rep.results[0], cfg, rep.env)["scan_len"], 20);
}

// --sorted-insert (issue 34, thesis Figure 13): ascending inserts into FAST&FAIR append at the
// end of a leaf (no shifts), so they flush fewer lines per insert than random ones, which shift
// half a leaf on average; every lookup afterwards (random order) is still right.
TEST(Bench, SortedInsertIsAscending) {
  double flushes[2] = {0, 0};
  for (int sorted = 0; sorted < 2; ++sorted) {
    IndexBenchConfig cfg = TinyConfig(Dist::kSparse, 3000);
    cfg.indexes = {"fastfair"};
    cfg.ops = {Op::kInsert, Op::kSearch};
    cfg.sorted_insert = sorted;
    IndexBenchReport rep;
    ASSERT_TRUE(RunIndexBench(cfg, &rep).ok());
    ASSERT_EQ(rep.results.size(), 2u);
    for (const auto& r : rep.results) EXPECT_EQ(r.errors, 0u) << r.op;
    flushes[sorted] = rep.results[0].flushes_per_op;
    EXPECT_EQ(ToJson(rep.results[0], cfg, rep.env)["insert_order"], sorted ? "sorted" : "random");
  }
  EXPECT_LT(flushes[1] * 1.5, flushes[0]) << "sorted " << flushes[1] << " random " << flushes[0];
}

// --flush-sites: the per-site counts sum to the phase's flushes per op and name the index's own
// persist sites (b3tree: Algorithm 1's three persists in Put, one line each per insert).
TEST(Bench, FlushSitesSumToTheFlushCount) {
  IndexBenchConfig cfg = TinyConfig(Dist::kSparse, 3000);
  cfg.indexes = {"b3tree"};
  cfg.ops = {Op::kInsert, Op::kDelete};
  cfg.flush_sites = true;
  IndexBenchReport rep;
  std::vector<std::string> lines;
  ASSERT_TRUE(RunIndexBench(cfg, &rep, [&](const std::string& l) { lines.push_back(l); }).ok());
  ASSERT_EQ(rep.results.size(), 2u);
  EXPECT_EQ(pm::SetHook(nullptr), nullptr) << "the counting hook is removed after the run";
  for (const auto& r : rep.results) {
    ASSERT_FALSE(r.flush_sites.empty()) << r.op;
    double sum = 0;
    int put_sites = 0;
    for (const auto& [site, per_op] : r.flush_sites) {
      sum += per_op;
      EXPECT_EQ(site.rfind("src/", 0), 0u) << site;
      if (site.find("b3tree.cc") != std::string::npos && site.find("Put") != std::string::npos && per_op > 0.99)
        ++put_sites;
    }
    EXPECT_NEAR(sum, r.flushes_per_op, 1e-9) << r.op;
    if (r.op == "insert") {
      EXPECT_EQ(put_sites, 3) << "node, count, link";
    }
    const auto j = ToJson(r, cfg, rep.env);
    ASSERT_TRUE(j.contains("flush_sites"));
    EXPECT_EQ(j["flush_sites"].size(), r.flush_sites.size());
  }
  bool printed = false;
  for (const auto& l : lines) printed |= l.find("flushes/op  src/index/btree/b3tree.cc:") != std::string::npos;
  EXPECT_TRUE(printed);
}

// Hash kinds' insert records carry the Figure 25 breakdown (rehash, displacement); others not.
TEST(Bench, HashInsertBreakdown) {
  IndexBenchConfig cfg = TinyConfig(Dist::kSparse, 20000);
  cfg.indexes = {"cceh", "cuck", "fastfair"};
  cfg.ops = {Op::kInsert};
  IndexBenchReport rep;
  ASSERT_TRUE(RunIndexBench(cfg, &rep).ok());
  ASSERT_EQ(rep.results.size(), 3u);
  for (const auto& r : rep.results) {
    const auto j = ToJson(r, cfg, rep.env);
    if (r.index == "fastfair") {
      EXPECT_FALSE(r.has_breakdown);
      EXPECT_FALSE(j.contains("rehash_ns_per_op"));
      continue;
    }
    ASSERT_TRUE(r.has_breakdown) << r.index;
    // 20000 keys from a 2048-record table: cceh splits, cuck rehashes and displaces.
    EXPECT_GT(r.rehash_ns_per_op, 0) << r.index;
    EXPECT_LT(r.rehash_ns_per_op + r.displacement_ns_per_op, r.ns_per_op * 1.01) << r.index;
    if (r.index == "cuck") {
      EXPECT_GT(r.displacement_ns_per_op, 0);
    }
    if (r.index == "cceh") {
      EXPECT_EQ(r.displacement_ns_per_op, 0);
    }
    EXPECT_TRUE(j.contains("rehash_ns_per_op")) << r.index;
  }
}

TEST(Bench, RestoresPmSettings) {
  const pm::FlushKind before = pm::GetFlushKind();
  const uint64_t lat = pm::GetWriteLatencyNs();
  IndexBenchConfig cfg = TinyConfig(Dist::kDense, 100);
  ASSERT_FALSE(cfg.indexes.empty());
  cfg.indexes.resize(1);
  cfg.common.flush = "clflush";
  cfg.common.write_latency_ns = 50;
  IndexBenchReport rep;
  ASSERT_TRUE(RunIndexBench(cfg, &rep).ok());
  EXPECT_EQ(rep.env.flush, "clflush");
  EXPECT_EQ(rep.env.write_latency_ns, 50u);
  EXPECT_EQ(pm::GetFlushKind(), before);
  EXPECT_EQ(pm::GetWriteLatencyNs(), lat);
}

TEST(Bench, BadNamesListTheValidOnes) {
  std::vector<std::string> idx;
  Status s = ParseIndexList("wort,nosuchindex", &idx);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("nosuchindex"), std::string::npos);
  EXPECT_NE(s.message().find("valid:"), std::string::npos);
  for (const IndexKind* k : IndexKinds()) EXPECT_NE(s.message().find(k->name), std::string::npos);

  std::vector<Op> ops;
  s = ParseOpList("insert,lookup", &ops);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("lookup"), std::string::npos);
  EXPECT_NE(s.message().find("search"), std::string::npos);
  ASSERT_TRUE(ParseOpList(" search , insert ", &ops).ok());
  EXPECT_EQ(ops, (std::vector<Op>{Op::kSearch, Op::kInsert}));

  Dist d;
  s = ParseDistName("zipf", &d);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("clustered"), std::string::npos);

  IndexBenchConfig cfg = TinyConfig(Dist::kDense, 10);
  cfg.indexes = {"nosuchindex"};
  IndexBenchReport rep;
  EXPECT_EQ(RunIndexBench(cfg, &rep).code(), Code::kInvalidArgument);
  cfg.indexes = AllKinds();
  cfg.common.flush = "clflushx";
  EXPECT_EQ(RunIndexBench(cfg, &rep).code(), Code::kInvalidArgument);
  cfg.common.flush = "auto";
  cfg.keys = 0;
  EXPECT_EQ(RunIndexBench(cfg, &rep).code(), Code::kInvalidArgument);

  if (!IndexKinds().empty()) {
    ASSERT_TRUE(ParseIndexList("all", &idx).ok());
    EXPECT_EQ(idx.size(), IndexKinds().size());
  }
}

TEST(Bench, PoolFullIsReportedAsSuch) {
  IndexBenchConfig cfg = TinyConfig(Dist::kStrings, 200000);
  ASSERT_FALSE(cfg.indexes.empty());
  cfg.indexes.resize(1);
  cfg.ops = {Op::kInsert};
  cfg.common.pool_size = 4ull << 20;  // a few chunks: far too small for 200k string keys
  IndexBenchReport rep;
  Status s = RunIndexBench(cfg, &rep);
  EXPECT_TRUE(s.IsPoolFull()) << s.ToString();
  EXPECT_NE(s.message().find("--pool-size"), std::string::npos) << s.message();
  ASSERT_EQ(rep.skipped.size(), 1u);
  EXPECT_TRUE(rep.results.empty());
}

TEST(Bench, JsonLinesAppend) {
  const std::string path = TempPath("lines.jsonl");
  std::remove(path.c_str());
  IndexBenchConfig cfg = TinyConfig(Dist::kDense, 10);
  Environment env = CaptureEnvironment();
  EXPECT_FALSE(env.cpu.empty());
  EXPECT_FALSE(env.git_commit.empty());
  EXPECT_EQ(env.timestamp.size(), 20u);  // 2026-01-02T03:04:05Z
  IndexResult r;
  r.index = "x";
  r.op = "insert";
  r.ns_per_op = 12.5;
  ASSERT_TRUE(AppendJsonLines(path, {ToJson(r, cfg, env)}).ok());
  ASSERT_TRUE(AppendJsonLines(path, {ToJson(r, cfg, env), ToJson(r, cfg, env)}).ok());
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["ns_per_op"], 12.5);
    EXPECT_EQ(j["bench"], "index");
    ++n;
  }
  EXPECT_EQ(n, 3);
  std::remove(path.c_str());
  EXPECT_EQ(AppendJsonLines("/nonexistent-dir/x.jsonl", {}).code(), Code::kIOError);
}

TEST(Bench, AllocBenchRuns) {
  AllocBenchConfig cfg;
  cfg.ops_per_thread = 3000;
  cfg.batch = 500;
  cfg.repeats = 1;
  cfg.common.pool_size = 256ull << 20;
  AllocBenchReport rep;
  Status s = RunAllocBench(cfg, &rep);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(rep.results.size(), 8u);  // 2 patterns x 2 thread counts x 2 allocators
  for (const auto& r : rep.results) {
    EXPECT_EQ(r.allocs, uint64_t(r.threads) * 6 * 500) << r.allocator << " " << r.pattern;
    EXPECT_GT(r.allocs_per_s, 0);
    EXPECT_GT(r.frees_per_s, 0);
    if (r.allocator == "malloc") {
      EXPECT_EQ(r.flushes_per_alloc, 0);
    }
    const auto j = ToJson(r, cfg, rep.env);
    for (const char* f : {"allocator", "pattern", "threads", "allocs_per_s", "frees_per_s", "flushes_per_alloc",
                          "fences_per_alloc", "flush", "git_commit", "timestamp", "seed"})
      EXPECT_TRUE(j.contains(f)) << f;
  }
  EXPECT_NE(FormatAllocResults(rep).find("wort/malloc allocation rate"), std::string::npos);
}

// ---- the CLI ------------------------------------------------------------------------------

int RunCli(const std::string& args, std::string* out) {
  return wort::test::RunShell(std::string(WORT_CLI_PATH) + " " + args, out);
}

TEST(BenchCli, SortedInsertCannotWriteTheRandomKeyOrder) {
  std::string out;
  EXPECT_NE(RunCli("bench --index fastfair --dist sparse --keys 10 --sorted-insert --keys-out /tmp/wort-sorted-keys-" +
                       std::to_string(getpid()),
                   &out),
            0);
  EXPECT_NE(out.find("cannot go with --sorted-insert"), std::string::npos) << out;
}

TEST(BenchCli, UnknownNamesFailWithTheValidNames) {
  std::string out;
  EXPECT_NE(RunCli("bench --index nosuchindex --keys 10", &out), 0);
  EXPECT_NE(out.find("unknown index 'nosuchindex'"), std::string::npos) << out;
  out.clear();
  EXPECT_NE(RunCli("bench --dist zipf --keys 10", &out), 0);
  EXPECT_NE(out.find("dense, sparse, clustered, strings, words"), std::string::npos) << out;
  out.clear();
  EXPECT_NE(RunCli("bench --ops insert,lookup --keys 10", &out), 0);
  EXPECT_NE(out.find("unknown op 'lookup'"), std::string::npos) << out;
}

TEST(BenchCli, WritesConfigurationAndJson) {
  ASSERT_FALSE(IndexKinds().empty());
  const std::string json = TempPath("cli.jsonl");
  std::remove(json.c_str());
  std::string out;
  const std::string kind = IndexKinds()[0]->name;
  ASSERT_EQ(RunCli("bench --index " + kind + " --dist sparse --keys 2K --ops insert,search --json " + json, &out), 0) << out;
  for (const char* s : {"index:", "dist:", "keys:", "flush:", "write latency:", "pool:", "cpu:", "date:", "git commit:",
                        "ns/op", "flushes/op", "fences/op"})
    EXPECT_NE(out.find(s), std::string::npos) << s << "\n" << out;
  std::ifstream in(json);
  std::string line;
  std::vector<nlohmann::json> recs;
  while (std::getline(in, line)) recs.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0]["op"], "insert");
  EXPECT_EQ(recs[1]["op"], "search");
  EXPECT_EQ(recs[0]["keys"], 2000);
  EXPECT_EQ(recs[0]["index"], kind);
  std::remove(json.c_str());
}

// `wort bench kv`: every Get finds its key's value (the bench checks each one), one result per
// thread count and run, and bad configurations are refused before anything is created.
TEST(KvBench, RunsCheckedGetsOnEachThreadCount) {
  test::TempPath p("kvbench");
  std::remove(p.str().c_str());
  KvBenchConfig c;
  c.pool_path = p;
  c.pool_size = 64ull << 20;
  c.keys = 3000;
  c.value_size = 100;
  c.ops_per_thread = 5000;
  c.thread_counts = {1, 2};
  c.repeats = 2;
  std::vector<KvBenchResult> rs;
  std::vector<std::string> lines;
  ASSERT_TRUE(RunKvBench(c, &rs, [&](const std::string& l) { lines.push_back(l); }).ok());
  ASSERT_EQ(rs.size(), 4u);
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(rs[i].threads, i < 2 ? 1 : 2);
    EXPECT_EQ(rs[i].ops, c.ops_per_thread * rs[i].threads);
    EXPECT_EQ(rs[i].errors, 0u);
    EXPECT_GT(rs[i].mops_per_s, 0);
  }
  EXPECT_EQ(lines.size(), 6u);  // the header, the load's put line, a line per run
  EXPECT_NE(::access(p.str().c_str(), F_OK), 0) << "the pool is removed afterwards";
  c.value_size = 7;
  EXPECT_EQ(RunKvBench(c, &rs, [](const std::string&) {}).code(), Code::kInvalidArgument);
  c.value_size = 8;
  c.kind = "vart";  // volatile: no store
  EXPECT_EQ(RunKvBench(c, &rs, [](const std::string&) {}).code(), Code::kInvalidArgument);
  EXPECT_EQ(rs.size(), 4u);
}

}  // namespace
}  // namespace wort::bench
