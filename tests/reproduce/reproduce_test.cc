// `wort reproduce`: the planner and ETA (in process), and a smoke test of the whole pipeline
// (the built `wort` binary at --scale tiny: bench runs, cachegrind differencing if valgrind is
// installed, scripts/report.py) checking that every output file exists and is well formed.
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "reproduce/reproduce.h"

namespace wort::reproduce {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int CountLinesContaining(const std::string& text, const std::string& needle) {
  int n = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.find(needle) != std::string::npos) ++n;
  return n;
}

TEST(ReproducePlan, ScalesAndUnknownNames) {
  ScaleParams sp;
  ASSERT_TRUE(GetScale("quick", &sp).ok());
  EXPECT_EQ(sp.keys, 250000u);
  EXPECT_EQ(sp.latencies.front(), 0u);
  ASSERT_TRUE(GetScale("paper", &sp).ok());
  EXPECT_EQ(sp.keys, 128000000u);
  EXPECT_FALSE(GetScale("huge", &sp).ok());

  Config c;
  c.only = {"fig99"};
  std::vector<reproduce::Run> runs;
  std::vector<std::string> notes;
  ASSERT_TRUE(GetScale("tiny", &sp).ok());
  EXPECT_TRUE(Plan(c, sp, {{"wort", true}}, &runs, &notes).code() == Code::kInvalidArgument);
}

TEST(ReproducePlan, HashKindsGetNoRangeQueries) {
  ScaleParams sp;
  ASSERT_TRUE(GetScale("tiny", &sp).ok());
  Config c;
  c.cachegrind = false;
  std::vector<reproduce::Run> runs;
  std::vector<std::string> notes;
  ASSERT_TRUE(Plan(c, sp, {{"wort", true}, {"cceh", false}}, &runs, &notes).ok());
  int wort_scans = 0, cceh_scans = 0, latency_runs = 0;
  for (const reproduce::Run& r : runs) {
    for (bench::Op o : r.ops)
      if (o == bench::Op::kScan) (r.index == "wort" ? wort_scans : cceh_scans)++;
    if (r.type == reproduce::Run::Type::kLatency) ++latency_runs;
    EXPECT_GT(r.est_seconds, 0);
  }
  EXPECT_EQ(wort_scans, 6);  // 2 ranges x 3 distributions
  EXPECT_EQ(cceh_scans, 0);
  // fig8: one run per (repeat, distribution, latency), every kind in it.
  EXPECT_EQ(latency_runs, sp.fig8_repeats * 3 * int(sp.latencies.size()));
  for (const reproduce::Run& r : runs)
    if (r.type == reproduce::Run::Type::kLatency) { EXPECT_EQ(r.indexes.size(), 2u); }
  bool noted = false;
  for (const auto& n : notes) noted |= n.find("cceh") != std::string::npos && n.find("fig10") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(ReproducePlan, OnlySelectsExperiments) {
  ScaleParams sp;
  ASSERT_TRUE(GetScale("tiny", &sp).ok());
  Config c;
  c.only = {"fig9"};
  std::vector<reproduce::Run> runs;
  std::vector<std::string> notes;
  ASSERT_TRUE(Plan(c, sp, {{"wort", true}, {"woart", true}}, &runs, &notes).ok());
  ASSERT_EQ(runs.size(), 6u);  // one base run per (index, dist), search only
  for (const reproduce::Run& r : runs) {
    ASSERT_EQ(r.ops.size(), 1u);
    EXPECT_EQ(r.ops[0], bench::Op::kSearch);
  }
}

TEST(ReproducePlan, EtaScalesByMeasuredOverEstimated) {
  std::vector<reproduce::Run> runs(4);
  for (auto& r : runs) r.est_seconds = 10;
  runs[3].type = reproduce::Run::Type::kCgInsert;
  Eta eta(runs);
  EXPECT_DOUBLE_EQ(eta.Remaining(), 40);
  eta.Done(0, 20);  // base runs take twice the estimate; cachegrind unmeasured: overall ratio
  EXPECT_DOUBLE_EQ(eta.Remaining(), 60);
  eta.Done(1, 20);
  eta.Done(2, 20);
  EXPECT_DOUBLE_EQ(eta.Remaining(), 20);
  eta.Done(3, 5);
  EXPECT_DOUBLE_EQ(eta.Remaining(), 0);
}

// The thesis chapter IV experiments plan their own kinds, only those of the run.
TEST(ReproducePlan, ThesisExperimentsUseTheirKinds) {
  ScaleParams sp;
  ASSERT_TRUE(GetScale("tiny", &sp).ok());
  Config c;
  c.cachegrind = false;
  c.only = {"cceh-seg", "cceh-lat", "cceh-search", "cceh-cdf", "b3-page", "b3-grow", "b3-order"};
  std::vector<reproduce::Run> runs;
  std::vector<std::string> notes;
  ASSERT_TRUE(Plan(c, sp, {{"cceh", false}, {"levl", false}, {"b3tree", true}, {"wbtree", true}, {"wort", true}},
                   &runs, &notes)
                  .ok());
  int seg = 0, lat = 0, search = 0, page = 0, grow = 0, sorted = 0, no_rebalance = 0, cdf = 0;
  std::map<std::string, int> variants;  // cceh-seg runs per cceh directory variant
  for (const reproduce::Run& r : runs) {
    if (r.exp == "cceh-cdf") {
      // Figure 26(a): one open-loop run of the hash kinds per load, at the cdf size.
      ++cdf;
      EXPECT_EQ(r.type, reproduce::Run::Type::kArrival);
      EXPECT_EQ(r.indexes, (std::vector<std::string>{"cceh", "levl"}));
      EXPECT_EQ(r.keys, sp.thesis.cdf_keys);
      EXPECT_EQ(r.load, sp.thesis.cdf_loads[size_t(cdf - 1)]);
      continue;
    }
    ASSERT_EQ(r.type, reproduce::Run::Type::kThesis) << r.label;
    EXPECT_EQ(r.dist, bench::Dist::kSparse);
    EXPECT_GT(r.est_seconds, 0);
    for (const auto& k : r.indexes) EXPECT_NE(k, "wort") << r.label;
    EXPECT_NE(r.index, "wort");
    if (r.exp == "cceh-seg") {
      ++seg;
      EXPECT_EQ(r.index, "cceh");  // cceh-cow is not in the run
      EXPECT_GT(r.segment_bytes, 0u);
      ++variants[r.cceh_variant];
      if (r.cceh_variant == "exth") {
        EXPECT_LE(r.segment_bytes, 16384u) << r.label;
      }
    } else if (r.exp == "cceh-lat") {
      ++lat;
      EXPECT_EQ(r.indexes, (std::vector<std::string>{"cceh", "levl"}));
      for (bench::Op o : r.ops) search += o == bench::Op::kSearch;
    } else if (r.exp == "b3-page") {
      // every kind at 1 KB pages, then b3tree alone at each other page size
      ++page;
      if (r.b3_page_bytes == 0) {
        EXPECT_EQ(r.indexes, (std::vector<std::string>{"b3tree", "wbtree"}));
      } else {
        EXPECT_EQ(r.indexes, std::vector<std::string>{"b3tree"});
        EXPECT_EQ(r.b3_page_bytes, sp.thesis.b3_page_sizes[size_t(page - 2)]);
      }
      EXPECT_EQ(r.ops.size(), 3u);  // insert, search, delete
    } else if (r.exp == "b3-grow") {
      ++grow;
    } else if (r.exp == "b3-order") {
      // b3tree and wbtree, then b3tree alone without rebalancing, each in both orders.
      EXPECT_EQ(r.indexes, r.no_rebalance ? std::vector<std::string>{"b3tree"}
                                          : (std::vector<std::string>{"b3tree", "wbtree"}));
      sorted += r.sorted_insert;
      no_rebalance += r.no_rebalance;
    }
  }
  // cceh as CCEH(MSB), CCEH(LSB) at every size; EXTH(LSB) up to 16 KB buckets.
  const int small = int(std::count_if(sp.thesis.segment_bytes.begin(), sp.thesis.segment_bytes.end(),
                                      [](uint64_t b) { return b <= 16384; }));
  EXPECT_EQ(variants[""], int(sp.thesis.segment_bytes.size()));
  EXPECT_EQ(variants["lsb"], int(sp.thesis.segment_bytes.size()));
  EXPECT_EQ(variants["exth"], small);
  EXPECT_EQ(seg, 2 * int(sp.thesis.segment_bytes.size()) + small);
  EXPECT_EQ(lat, int(sp.thesis.latencies.size()));
  EXPECT_EQ(search, 1);  // at write latency 0 only
  EXPECT_EQ(page, 1 + int(sp.thesis.b3_page_sizes.size()));
  EXPECT_EQ(grow, int(sp.thesis.b3_grow.size()));
  EXPECT_EQ(sorted, 2);  // a sorted and a random b3-order run, with and without rebalancing
  EXPECT_EQ(no_rebalance, 2);
  EXPECT_EQ(cdf, int(sp.thesis.cdf_loads.size()));
  ScaleParams quick, paper;
  ASSERT_TRUE(GetScale("quick", &quick).ok());
  ASSERT_TRUE(GetScale("paper", &paper).ok());
  EXPECT_EQ(paper.thesis.cdf_keys, 16000000u);  // the thesis's 16M inserts
  EXPECT_EQ(quick.thesis.cdf_loads.front(), 1.0);  // the thesis's rate first

  // A run without any of their kinds plans none of them and says so.
  runs.clear();
  notes.clear();
  ASSERT_TRUE(Plan(c, sp, {{"wort", true}}, &runs, &notes).ok());
  EXPECT_TRUE(runs.empty());
  int said = 0;
  for (const auto& n : notes) said += n.find("skipped") != std::string::npos;
  EXPECT_EQ(said, 6) << "cceh-seg, cceh-lat, cceh-cdf, b3-page, b3-grow, b3-order";
}

// The whole pipeline at N=2000: all registered kinds, both fig10 ranges, two latency points,
// cachegrind on the dense keys (skipped if valgrind is missing), report.py.
TEST(ReproducePlan, RangeQueriesHoldThePapersKeysPerQuery) {
  ScaleParams sp;
  ASSERT_TRUE(GetScale("quick", &sp).ok());
  Config c;
  c.cachegrind = false;
  c.only = {"fig10"};
  std::vector<reproduce::Run> runs;
  std::vector<std::string> notes;
  ASSERT_TRUE(Plan(c, sp, {{"wort", true}}, &runs, &notes).ok());
  std::set<size_t> lens;
  for (const reproduce::Run& r : runs) lens.insert(r.scan_len);
  // 0.001% and 0.01% of the paper's 128M keys, whatever this run's N (250K at quick).
  EXPECT_EQ(lens, (std::set<size_t>{1280, 12800}));
}

// Also: the output directory's parents do not exist yet (they are created).
TEST(ReproduceCli, TinyPipelineWritesEveryOutput) {
  const fs::path top = fs::temp_directory_path() / ("wort-repro-test-" + std::to_string(getpid()));
  const fs::path out = top / "not" / "yet";
  fs::remove_all(top);
  const bool have_valgrind = std::system("valgrind --version >/dev/null 2>&1") == 0;
  const std::string cmd = std::string(WORT_CLI_PATH) + " reproduce --scale tiny --out " + out.string() +
                          (have_valgrind ? "" : " --no-cachegrind") + " > " + (top.string() + ".log") + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = ReadAll(top.string() + ".log");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("ETA"), std::string::npos) << log;

  // results.jsonl: every line parses and has the expected fields.
  std::ifstream in(out / "results.jsonl");
  ASSERT_TRUE(in) << log;
  std::string line;
  std::set<std::string> experiments;
  std::map<std::tuple<std::string, std::string, uint64_t>, int> fig8;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    ASSERT_TRUE(j.contains("experiment") && j.contains("keys")) << line;
    const std::string e = j["experiment"];
    experiments.insert(e);
    if (e == "canrt") {  // bench-remote's records (checked in CanrtSectionComesFromARun)
      EXPECT_TRUE(j.contains("design") && j.contains("op")) << line;
      EXPECT_EQ(j["errors"].get<uint64_t>(), 0u) << line;
      continue;
    }
    ASSERT_TRUE(j.contains("index") && j.contains("dist")) << line;
    if (e == "cceh-cdf") {  // `wort bench arrival`'s latency records (checked in ThesisSectionsComeFromARun)
      for (const char* f : {"op", "ns_per_op", "max_ns", "p99_ns", "cdf", "longest_stall_ns", "flushes_per_op"})
        EXPECT_TRUE(j.contains(f)) << f << " missing: " << line;
      EXPECT_EQ(j["errors"].get<uint64_t>(), 0u) << line;
    } else if (e == "table1") {
      EXPECT_TRUE(j.contains("llc_miss_per_insert") && j.contains("llc_miss_per_search")) << line;
      EXPECT_GT(j["llc_miss_per_insert"].get<double>(), 0) << line;
    } else {
      for (const char* f : {"op", "ns_per_op", "flushes_per_op", "leaf_depth", "bytes_per_key", "write_latency_ns"})
        EXPECT_TRUE(j.contains(f)) << f << " missing: " << line;
      EXPECT_EQ(j["errors"].get<uint64_t>(), 0u) << line;
      EXPECT_GT(j["ns_per_op"].get<double>(), 0) << line;
    }
    if (e == "fig10") {
      EXPECT_TRUE(j.contains("range_pct")) << line;
      // The paper's keys per query (1,280 / 12,800), capped at N = 2000.
      EXPECT_EQ(j["scan_len"].get<size_t>(), j["range_pct"].get<double>() < 0.005 ? 1280u : 2000u) << line;
    }
    if (e == "fig8") ++fig8[{j["index"].get<std::string>(), j["dist"].get<std::string>(), j["write_latency_ns"].get<uint64_t>()}];
  }
  ASSERT_FALSE(fig8.empty());
  for (const auto& [k, count] : fig8) EXPECT_EQ(count, 2) << std::get<0>(k) << " " << std::get<1>(k) << ": repeats";
  EXPECT_GT(lines, 10);
  for (const char* e : {"fig7", "fig8", "fig9", "fig10", "canrt"}) EXPECT_TRUE(experiments.count(e)) << e;

  // config.json parses; if the cachegrind runs were possible, Table 1's LLC records exist.
  nlohmann::json cfg = nlohmann::json::parse(ReadAll(out / "config.json"), nullptr, false);
  ASSERT_FALSE(cfg.is_discarded());
  if (cfg["cachegrind"].get<bool>()) { EXPECT_TRUE(experiments.count("table1")) << log; }
  EXPECT_EQ(cfg["keys"].get<size_t>(), 2000u);

  // PNGs: signature and a non-trivial size.
  const std::string sig = "\x89PNG\r\n\x1a\n";
  for (const char* f : {"fig7.png", "fig8.png", "fig9.png", "fig10.png", "space.png"}) {
    const std::string png = ReadAll(out / f);
    ASSERT_GT(png.size(), 5000u) << f << "\n" << log;
    EXPECT_EQ(png.substr(0, 8), sig) << f;
  }

  // report.md: summary table, a line per published Table 1 value, claims.
  const std::string md = ReadAll(out / "report.md");
  EXPECT_NE(md.find("## Summary"), std::string::npos);
  EXPECT_NE(md.find("| index | dist | insert ns"), std::string::npos);
  EXPECT_GE(CountLinesContaining(md, "| wort | dense |"), 1);
  // 4 metrics x 6 published indexes x 3 distributions.
  int t1 = 0;
  for (const char* m : {"| llc_miss_per_insert", "| flushes_per_insert", "| llc_miss_per_search", "| leaf_depth"})
    t1 += CountLinesContaining(md, m);
  EXPECT_EQ(t1, 72) << md;
  EXPECT_NE(md.find("| WORT | dense | "), std::string::npos);
  EXPECT_NE(md.find("not in this build"), std::string::npos);  // FPTree/NVTree are not kinds of wort
  EXPECT_NE(md.find("fig7_clustered_slower"), std::string::npos);
  EXPECT_NE(md.find("Quartz"), std::string::npos);
  EXPECT_NE(md.find("peak memory"), std::string::npos);
  fs::remove_all(top);
  fs::remove(top.string() + ".log");
}

// The CANRT section (issue 18): `--only canrt` runs bench-remote of canrt and both baselines on
// the local backend at the tiny scale's sizes; report.md holds the section, its claims with a
// ratio per baseline, and a table whose figures are the records of this run.
TEST(ReproduceCli, CanrtSectionComesFromARun) {
  const fs::path out = fs::temp_directory_path() / ("wort-repro-canrt-" + std::to_string(getpid()));
  fs::remove_all(out);
  const std::string cmd = std::string(WORT_CLI_PATH) + " reproduce --scale tiny --only canrt --out " + out.string() +
                          " > " + out.string() + ".log 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = ReadAll(out.string() + ".log");
  ASSERT_EQ(rc, 0) << log;
  ScaleParams sp;
  ASSERT_TRUE(GetScale("tiny", &sp).ok());
  ASSERT_EQ(sp.canrt.size(), 1u);
  const CanrtParams& cp = sp.canrt[0];

  std::ifstream in(out / "results.jsonl");
  ASSERT_TRUE(in) << log;
  std::map<std::pair<std::string, std::string>, nlohmann::json> rec;  // (design, op) at 1 thread
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    ASSERT_EQ(j["experiment"], "canrt") << line;  // --only canrt: nothing else ran
    EXPECT_EQ(j["errors"].get<uint64_t>(), 0u) << line;
    EXPECT_EQ(j["backend"], "local") << line;
    EXPECT_EQ(j["keys"].get<size_t>(), cp.keys) << line;
    EXPECT_GT(j["seconds"].get<double>(), 0) << line;
    if (j["threads"].get<int>() == 1) rec[{j["design"].get<std::string>(), j["op"].get<std::string>()}] = j;
  }
  auto R = [&](const std::string& d, const std::string& op) -> const nlohmann::json& { return rec[std::make_pair(d, op)]; };
  const std::vector<std::string> ops = {"load", "put", "get", "range-" + std::to_string(cp.ranges[0]),
                                        "range-" + std::to_string(cp.ranges[1]), "ycsb-50:50"};
  for (const char* d : {"canrt", "reply-wort", "reply-woart"}) {
    for (const std::string& op : ops) ASSERT_TRUE(rec.count(std::make_pair(std::string(d), op))) << d << " " << op;
    EXPECT_EQ(R(d, "get")["ops"].get<size_t>(), cp.latency_ops);
  }
  // CANRT reads a data node with one Read, then its 16-byte header again (ReadNode's check that
  // no apply overlapped the Read: doc/remote.md), and no server involvement - two Reads, more
  // only when an apply overlapped (a re-read); a baseline's get is a request Write plus polling
  // Reads.
  EXPECT_GE(R("canrt", "get")["reads_per_op"].get<double>(), 2.0);
  EXPECT_LE(R("canrt", "get")["reads_per_op"].get<double>(), 2.2);
  EXPECT_DOUBLE_EQ(R("canrt", "get")["writes_per_op"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(R("reply-wort", "get")["writes_per_op"].get<double>(), 1.0);
  EXPECT_GE(R("canrt", "put")["atomics_per_op"].get<double>(), 1.0);

  const std::string md = ReadAll(out / "report.md");
  EXPECT_NE(md.find("## CANRT (ICA3PP 2020) beside this run"), std::string::npos) << md;
  EXPECT_NE(md.find("### Transport local: 500 records"), std::string::npos) << md;
  // Every published claim has a row with a verdict; the latency claims give a ratio per baseline.
  for (const char* claim : {"remote write latency 1.67-1.72x", "remote read latency 1.19-1.22x", "range query of 10^4",
                            "range query of 10^5", "YCSB throughput 7.44-11.15x", "server CPU is off"}) {
    const auto at = md.find(claim);
    ASSERT_NE(at, std::string::npos) << claim;
    const std::string row = md.substr(at, md.find('\n', at) - at);
    EXPECT_NE(row.find("**"), std::string::npos) << row;
    EXPECT_EQ(row.find("cannot check"), std::string::npos) << row;
  }
  {
    const std::string row = md.substr(md.find("remote read latency 1.19"));
    const std::string first = row.substr(0, row.find('\n'));
    EXPECT_NE(first.find("reply-wort "), std::string::npos) << first;
    EXPECT_NE(first.find("reply-woart "), std::string::npos) << first;
  }
  // The table's rows are this run's records: ops and p50 as results.jsonl has them.
  for (const char* d : {"canrt", "reply-wort", "reply-woart"}) {
    const nlohmann::json& g = R(d, "get");
    const std::string row = fmt::format("| {} | get | 1 | {} | ", d, g["ops"].get<size_t>());
    const auto at = md.find(row);
    ASSERT_NE(at, std::string::npos) << row << "\n" << md;
    const std::string line_md = md.substr(at, md.find('\n', at) - at);
    EXPECT_NE(line_md.find(fmt::format("| {:.2f} |", g["p50_ns"].get<double>() / 1000)), std::string::npos)
        << line_md << " p50 " << g["p50_ns"];
  }
  fs::remove_all(out);
  fs::remove(out.string() + ".log");
}

// The thesis chapter IV sections (issue 34): every claim of data/published/thesis_ch4.json gets a
// row with a verdict, computed from this run's records, and the figures are written.
TEST(ReproduceCli, ThesisSectionsComeFromARun) {
  const fs::path out = fs::temp_directory_path() / ("wort-repro-thesis-" + std::to_string(getpid()));
  fs::remove_all(out);
  const std::string cmd = std::string(WORT_CLI_PATH) +
                          " reproduce --scale tiny --only cceh-seg,cceh-lat,cceh-search,cceh-cdf,b3-page,b3-grow,b3-order --out " +
                          out.string() + " > " + out.string() + ".log 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = ReadAll(out.string() + ".log");
  ASSERT_EQ(rc, 0) << log;
  ScaleParams sp;
  ASSERT_TRUE(GetScale("tiny", &sp).ok());

  std::ifstream in(out / "results.jsonl");
  ASSERT_TRUE(in) << log;
  std::map<std::string, int> per_exp;
  std::set<std::pair<std::string, uint64_t>> segs;
  std::set<std::string> orders;
  std::map<bool, int> rebalance;
  std::set<uint64_t> page_sizes;  // b3tree's in b3-page
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    const std::string e = j["experiment"], op = j["op"], idx = j["index"];
    ++per_exp[e];
    EXPECT_EQ(j["errors"].get<uint64_t>(), 0u) << line;
    EXPECT_GT(j["ns_per_op"].get<double>(), 0) << line;
    EXPECT_EQ(j["dist"], "sparse") << line;
    // Every persistent insert and delete flushes at least the line it commits.
    if (op == "insert" || op == "delete") {
      EXPECT_GE(j["flushes_per_op"].get<double>(), 1.0) << line;
    }
    if (op == "search") {
      EXPECT_EQ(j["flushes_per_op"].get<double>(), 0.0) << line;
    }
    // Figure 25's breakdown: every hash kind's insert records carry its split and displacement time.
    if (e == "cceh-lat" && op == "insert") {
      EXPECT_TRUE(j.contains("rehash_ns_per_op") && j.contains("displacement_ns_per_op")) << line;
      if (j.contains("rehash_ns_per_op")) {
        EXPECT_LE(j["rehash_ns_per_op"].get<double>(), j["ns_per_op"].get<double>()) << line;
      }
    }
    if (e == "cceh-seg") {
      segs.insert({j.contains("cceh_variant") ? idx + ":" + j["cceh_variant"].get<std::string>() : idx,
                   j["segment_bytes"].get<uint64_t>()});
      EXPECT_EQ(j["keys"].get<size_t>(), sp.thesis.cceh_keys) << line;
    }
    if (e == "b3-page") {
      EXPECT_EQ(j["keys"].get<size_t>(), sp.thesis.b3_keys) << line;
      if (idx == "b3tree") page_sizes.insert(j["page_bytes"].get<uint64_t>());
      else EXPECT_FALSE(j.contains("page_bytes")) << line;
    }
    // Figure 26(a): open-loop latencies at LINP's batch rate, the CDF ending at the maximum.
    if (e == "cceh-cdf") {
      EXPECT_EQ(j["bench"], "arrival") << line;
      EXPECT_EQ(j["keys"].get<size_t>(), sp.thesis.cdf_keys) << line;
      EXPECT_EQ(j["threads"].get<int>(), sp.thesis.cdf_threads) << line;
      EXPECT_EQ(j["rate_from"], "1 x linp batch") << line;
      EXPECT_GT(j["rate_per_s"].get<double>(), 0) << line;
      EXPECT_LE(j["p99_ns"].get<double>(), j["max_ns"].get<double>()) << line;
      ASSERT_GE(j["cdf"].size(), 2u) << line;
      EXPECT_EQ(j["cdf"].back()[0].get<double>(), j["max_ns"].get<double>()) << line;
      EXPECT_EQ(j["cdf"].back()[1].get<double>(), 1.0) << line;
    }
    if (e == "b3-order") {
      orders.insert(j["insert_order"].get<std::string>());
      rebalance[j["rebalance"].get<bool>()]++;
    }
  }
  // cceh, cceh:lsb and cceh-cow at every size, cceh:exth up to 16 KB
  size_t small_segs = 0;
  for (uint64_t b : sp.thesis.segment_bytes) small_segs += b <= 16384;
  EXPECT_EQ(segs.size(), 3 * sp.thesis.segment_bytes.size() + small_segs);
  EXPECT_TRUE(segs.count({"cceh:exth", 1024})) << "EXTH(LSB) at 1 KB buckets";
  EXPECT_EQ(per_exp["cceh-lat"], 7 * int(sp.thesis.latencies.size()));  // 7 hash kinds
  EXPECT_EQ(per_exp["cceh-search"], 7);
  EXPECT_EQ(per_exp["cceh-cdf"], 7 * int(sp.thesis.cdf_loads.size()));
  // 5 kinds x insert, search, delete; b3tree also at the other page sizes
  EXPECT_EQ(per_exp["b3-page"], 5 * 3 + 3 * int(sp.thesis.b3_page_sizes.size()));
  EXPECT_EQ(page_sizes, (std::set<uint64_t>{256, 1024, 4096}));
  EXPECT_EQ(per_exp["b3-grow"], 4 * 2 * int(sp.thesis.b3_grow.size()));
  // b3tree, wbtree, fastfair (and b3tree without rebalancing) x random, sorted x insert, search
  EXPECT_EQ(per_exp["b3-order"], 4 * 2 * 2);
  EXPECT_EQ(rebalance[false], 2 * 2);
  EXPECT_EQ(orders, (std::set<std::string>{"random", "sorted"}));

  const std::string md = ReadAll(out / "report.md");
  ASSERT_NE(md.find("## Thesis chapter IV: CCEH (4.4.7) and B3-tree (4.3) beside this run"), std::string::npos) << md;
  const std::string pub = ReadAll(fs::path(__FILE__).parent_path() / ".." / ".." / "data" / "published" / "thesis_ch4.json");
  nlohmann::json pj = nlohmann::json::parse(pub, nullptr, false);
  ASSERT_FALSE(pj.is_discarded());
  int claims = 0;
  for (const char* sec : {"cceh", "b3"}) {
    for (const auto& c : pj[sec]) {
      ++claims;
      const std::string id = c["id"];
      const auto at = md.find("| " + id + " |");
      ASSERT_NE(at, std::string::npos) << id;
      const std::string row = md.substr(at, md.find('\n', at) - at);
      EXPECT_NE(row.find("| **"), std::string::npos) << row;
      EXPECT_EQ(row.find("cannot check"), std::string::npos) << row;
      const bool missing = c["check"] == "missing";
      EXPECT_EQ(row.find("**not reproduced") != std::string::npos, missing) << row;
      if (!missing) {
        const bool verdict = row.find("**holds") != std::string::npos || row.find("**partly holds") != std::string::npos ||
                             row.find("**direction only") != std::string::npos ||
                             row.find("**does not hold") != std::string::npos ||
                             row.find("**measured (a figure") != std::string::npos;  // Figure 25's breakdown
        EXPECT_TRUE(verdict) << row;
      }
    }
  }
  EXPECT_GE(claims, 25);
  const std::string sig = "\x89PNG\r\n\x1a\n";
  for (const char* f : {"cceh_seg.png", "cceh_lat.png", "cceh_breakdown.png", "cceh_cdf.png", "b3_page.png", "b3_order.png",
                        "b3_grow.png"}) {
    const std::string png = ReadAll(out / f);
    ASSERT_GT(png.size(), 5000u) << f << "\n" << log;
    EXPECT_EQ(png.substr(0, 8), sig) << f;
  }
  fs::remove_all(out);
  fs::remove(out.string() + ".log");
}

// roart-peer (issue 34) with a source root that holds no P-ART: the run goes on, config.json says
// why P-ART was not measured, and the ROART section labels woart as the stand-in. (The P-ART build
// itself needs its sources: scripts/peers.sh /path/to/peers --kinds roart.)
TEST(ReproduceCli, RoartPeerWithoutSourcesFallsBackToTheStandIn) {
  const fs::path out = fs::temp_directory_path() / ("wort-repro-roart-peer-" + std::to_string(getpid()));
  const fs::path empty = out.string() + "-src";
  fs::remove_all(out);
  fs::create_directories(empty);
  const std::string cmd = std::string(WORT_CLI_PATH) + " reproduce --scale tiny --only fig7,fig9,roart-peer --index roart,woart " +
                          "--no-cachegrind --peers-src " + empty.string() + " --out " + out.string() + " > " +
                          out.string() + ".log 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = ReadAll(out.string() + ".log");
  ASSERT_EQ(rc, 0) << log;
  nlohmann::json cfg = nlohmann::json::parse(ReadAll(out / "config.json"), nullptr, false);
  ASSERT_FALSE(cfg.is_discarded());
  const std::string state = cfg["roart_peer"];
  EXPECT_NE(state.find("failed"), std::string::npos) << state;
  EXPECT_NE(state.find("woart stands in"), std::string::npos) << state;
  EXPECT_NE(ReadAll(out / "peers.log").find("P-ART skipped"), std::string::npos);
  const std::string md = ReadAll(out / "report.md");
  const auto at = md.find("| ROART 20-24% higher throughput than P-ART");
  ASSERT_NE(at, std::string::npos) << md;
  const std::string row = md.substr(at, md.find('\n', at) - at);
  EXPECT_NE(row.find("stand-in"), std::string::npos) << row;
  EXPECT_NE(row.find("sparse "), std::string::npos) << row;  // woart's ratio, measured in this run
  fs::remove_all(out);
  fs::remove_all(empty);
  fs::remove(out.string() + ".log");
}

// Issue 34: `--only roart-peer` alone runs no bench of its own; results.jsonl is still written
// (empty) and report.py still writes the report (it failed on the missing file before).
TEST(ReproduceCli, RoartPeerAloneWritesTheReport) {
  const fs::path out = fs::temp_directory_path() / ("wort-repro-roart-peer-alone-" + std::to_string(getpid()));
  const fs::path empty = out.string() + "-src";
  fs::remove_all(out);
  fs::create_directories(empty);
  const std::string cmd = std::string(WORT_CLI_PATH) + " reproduce --scale tiny --only roart-peer --index roart,woart " +
                          "--no-cachegrind --peers-src " + empty.string() + " --out " + out.string() + " > " +
                          out.string() + ".log 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = ReadAll(out.string() + ".log");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_TRUE(fs::exists(out / "results.jsonl")) << log;
  EXPECT_TRUE(fs::exists(out / "config.json")) << log;
  const std::string md = ReadAll(out / "report.md");
  EXPECT_FALSE(md.empty()) << log;
  fs::remove_all(out);
  fs::remove_all(empty);
  fs::remove(out.string() + ".log");
}

TEST(ReproduceCli, RejectsBadArguments) {
  const std::string base = std::string(WORT_CLI_PATH) + " reproduce --out /tmp/wort-repro-bad-" + std::to_string(getpid());
  EXPECT_NE(std::system((base + " --scale huge >/dev/null 2>&1").c_str()), 0);
  EXPECT_NE(std::system((base + " --only fig99 >/dev/null 2>&1").c_str()), 0);
  EXPECT_NE(std::system((base + " --index nosuch >/dev/null 2>&1").c_str()), 0);
}

}  // namespace
}  // namespace wort::reproduce
