// `wort reproduce`: planner, runner, cachegrind differencing and outputs. See reproduce.h.
#include "reproduce/reproduce.h"

#include <fmt/core.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "bench/arrival_bench.h"
#include "bench/remote_bench.h"
#include "wort/index.h"

namespace wort::reproduce {
namespace {

using Clock = std::chrono::steady_clock;
using bench::Dist;
using bench::Op;

constexpr Dist kPaperDists[] = {Dist::kDense, Dist::kSparse, Dist::kClustered};

// The planner's cost model, in seconds per operation on this class of machine (2 cores, no
// PM). Only the ETA uses it, and the ETA rescales it by measured/estimated as runs finish.
constexpr double kInsertS = 1.0e-6, kSearchS = 0.5e-6, kScanKeyS = 0.03e-6, kGenS = 0.15e-6;
constexpr double kFlushesPerInsert = 3.0;
constexpr double kRunS = 0.15;  // per in-process run: pool set-up, environment capture (git)
constexpr double kCachegrindSlowdown = 60.0;  // cachegrind with cache simulation vs native
constexpr double kCachegrindStartS = 1.5;     // valgrind start-up per process
// CANRT experiment: seconds per remote operation, averaged over the three designs (a baseline's
// request costs ~100 us on the local backend under load, CANRT's put ~30 us, its get ~2 us);
// a ucx transport (emulated one-sided operations on this machine) is about 3x that.
constexpr double kRemoteOpS = 80e-6, kRemoteScanKeyS = 0.4e-6, kUcxSlowdown = 3.0;

bool ParseVariant(const std::string& name, CcehVariant* out) {
  if (name == "msb") *out = CcehVariant::kMsb;
  else if (name == "lsb") *out = CcehVariant::kLsb;
  else if (name == "exth") *out = CcehVariant::kExth;
  else return false;
  return true;
}

bool Wants(const Config& cfg, const char* exp) {
  return cfg.only.empty() || std::find(cfg.only.begin(), cfg.only.end(), exp) != cfg.only.end();
}

std::string OpsName(const std::vector<Op>& ops) {
  std::string s;
  for (Op o : ops) {
    if (!s.empty()) s += ',';
    s += bench::OpName(o);
  }
  return s;
}

std::string FormatDuration(double s) {
  if (s < 0) s = 0;
  const long t = static_cast<long>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m{:02}s", t / 3600, t / 60 % 60, t % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

// Sum of the LL (last-level) misses in a cachegrind output file: ILmr + DLmr + DLmw of the
// "summary:" line, matched by the names on its "events:" line.
Status ReadCachegrindLLMisses(const std::string& path, uint64_t* out) {
  std::ifstream in(path);
  if (!in) return Status::IOError("cannot read cachegrind output " + path);
  std::vector<std::string> events;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string head;
    ls >> head;
    if (head == "events:") {
      std::string e;
      events.clear();
      while (ls >> e) events.push_back(e);
    } else if (head == "summary:") {
      uint64_t total = 0, v = 0;
      size_t i = 0;
      bool any = false;
      while (ls >> v) {
        if (i < events.size() && (events[i] == "ILmr" || events[i] == "DLmr" || events[i] == "DLmw")) {
          total += v;
          any = true;
        }
        ++i;
      }
      if (!any) return Status::Corruption("no LL miss counts in " + path + " (was --cache-sim=yes given?)");
      *out = total;
      return Status::OK();
    }
  }
  return Status::Corruption("no summary line in " + path);
}

// The thesis chapter IV experiments (cceh-*, b3-*): their own kinds, those of `kinds` only.
template <size_t K>
std::vector<std::string> Present(const char* const (&want)[K], const std::vector<std::pair<std::string, bool>>& kinds) {
  std::vector<std::string> out;
  for (const char* w : want)
    for (const auto& k : kinds)
      if (k.first == w) out.push_back(w);
  return out;
}

void PlanThesis(const Config& cfg, const ThesisParams& tp, const std::vector<std::pair<std::string, bool>>& kinds,
                std::vector<Run>* runs, std::vector<std::string>* notes) {
  auto est = [](size_t kinds_n, size_t n, int ops, uint64_t lat) {
    return double(kinds_n) * (kRunS + n * (kGenS + ops * kInsertS + kFlushesPerInsert * lat * 1e-9));
  };
  auto explicit_only = [&](const char* exp, const std::vector<std::string>& have, const char* what) {
    if (have.empty() && Wants(cfg, exp)) notes->push_back(std::string(exp) + ": none of " + what + " in this run's kinds; skipped");
    return !have.empty() && Wants(cfg, exp);
  };
  const auto seg = Present(kCcehSegKinds, kinds);
  if (explicit_only("cceh-seg", seg, "cceh, cceh-cow")) {
    for (const auto& k : seg) {
      // cceh: also its LSB directory and legacy extendible hashing (cceh.h "Variants").
      const std::vector<std::string> variants =
          k == "cceh" ? std::vector<std::string>{"", "lsb", "exth"} : std::vector<std::string>{""};
      for (const auto& v : variants) {
        for (uint64_t b : tp.segment_bytes) {
          // EXTH reads its whole bucket per operation: above 16 KB (256 lines) a run takes minutes.
          if (v == "exth" && b > 16384) continue;
          Run r;
          r.type = Run::Type::kThesis;
          r.exp = "cceh-seg";
          r.label = v.empty() ? fmt::format("cceh-seg@{}B", b) : fmt::format("cceh-seg({})@{}B", v, b);
          r.dist = Dist::kSparse;
          r.index = k;
          r.keys = tp.cceh_keys;
          r.ops = {Op::kInsert};
          r.segment_bytes = b;
          r.cceh_variant = v;
          r.est_seconds = est(1, r.keys, 1, 0);
          runs->push_back(r);
        }
      }
    }
  }
  const auto hash = Present(kHashKinds, kinds);
  const bool lat = explicit_only("cceh-lat", hash, "the hash kinds"), search = !hash.empty() && Wants(cfg, "cceh-search");
  if (lat || search) {
    std::vector<uint64_t> lats = lat ? tp.latencies : std::vector<uint64_t>{0};
    for (uint64_t l : lats) {
      Run r;
      r.type = Run::Type::kThesis;
      r.exp = lat ? "cceh-lat" : "cceh-search";
      r.label = lat ? fmt::format("cceh-lat@{}ns", l) : "cceh-search";
      r.dist = Dist::kSparse;
      r.indexes = hash;
      r.keys = tp.cceh_keys;
      r.latency_ns = l;
      if (lat) r.ops.push_back(Op::kInsert);
      if (search && l == 0) {
        r.ops.push_back(Op::kSearch);
        if (lat) r.label += "+cceh-search";
      }
      r.est_seconds = est(hash.size(), r.keys, int(r.ops.size()), l);
      runs->push_back(r);
    }
  }
  if (explicit_only("cceh-cdf", hash, "the hash kinds")) for (double load : tp.cdf_loads) {
    Run r;
    r.load = load;
    r.type = Run::Type::kArrival;
    r.exp = "cceh-cdf";
    r.label = fmt::format("cceh-cdf@{:g}xlinp", load);
    r.dist = Dist::kSparse;
    r.indexes = hash;
    r.keys = tp.cdf_keys;
    r.ops = {Op::kInsert};
    // LINP's batch run first, then each kind at about that rate (PATH and LEVL: slower, so their
    // queues grow; the ETA learns it).
    r.est_seconds = est(hash.size() + 1, r.keys, 1, 0);
    runs->push_back(r);
  }
  const auto page = Present(kB3PageKinds, kinds);
  if (explicit_only("b3-page", page, "b3tree, wbtree, wbtree-slot, fptree, fastfair")) {
    Run r;
    r.type = Run::Type::kThesis;
    r.exp = "b3-page";
    r.label = "b3-page";
    r.dist = Dist::kSparse;
    r.indexes = page;
    r.keys = tp.b3_keys;
    r.ops = {Op::kInsert, Op::kSearch, Op::kDelete};
    r.est_seconds = est(page.size(), r.keys, 3, 0);
    runs->push_back(r);
    if (page.front() == "b3tree") {
      // Figures 12 and 14's axis: b3tree's page size (its 1 KB point is the run above).
      for (uint64_t b : tp.b3_page_sizes) {
        Run q = r;
        q.label = fmt::format("b3-page@{}B", b);
        q.indexes = {"b3tree"};
        q.b3_page_bytes = b;
        q.est_seconds = est(1, q.keys, 3, 0);
        runs->push_back(q);
      }
    }
  }
  const auto order = Present(kB3OrderKinds, kinds);
  if (explicit_only("b3-order", order, "b3tree, wbtree, fastfair")) {
    for (bool sorted : {false, true}) {
      Run r;
      r.type = Run::Type::kThesis;
      r.exp = "b3-order";
      r.label = sorted ? "b3-order(sorted)" : "b3-order(random)";
      r.dist = Dist::kSparse;
      r.indexes = order;
      r.keys = tp.b3_keys;
      r.ops = {Op::kInsert, Op::kSearch};
      r.sorted_insert = sorted;
      r.est_seconds = est(order.size(), r.keys, 2, 0);
      runs->push_back(r);
    }
    if (order.front() == "b3tree") {
      for (bool sorted : {false, true}) {
        Run r;
        r.type = Run::Type::kThesis;
        r.exp = "b3-order";
        r.label = sorted ? "b3-order(sorted,no-rebal)" : "b3-order(random,no-rebal)";
        r.dist = Dist::kSparse;
        r.indexes = {"b3tree"};
        r.keys = tp.b3_keys;
        r.ops = {Op::kInsert, Op::kSearch};
        r.sorted_insert = sorted;
        r.no_rebalance = true;
        r.est_seconds = est(1, r.keys, 2, 0);
        runs->push_back(r);
      }
    }
  }
  const auto grow = Present(kB3GrowKinds, kinds);
  if (explicit_only("b3-grow", grow, "b3tree, fastfair, wbtree, fptree")) {
    for (size_t n : tp.b3_grow) {
      Run r;
      r.type = Run::Type::kThesis;
      r.exp = "b3-grow";
      r.label = fmt::format("b3-grow@{}", n);
      r.dist = Dist::kSparse;
      r.indexes = grow;
      r.keys = n;
      r.ops = {Op::kInsert, Op::kSearch};
      r.est_seconds = est(grow.size(), n, 2, 0);
      runs->push_back(r);
    }
  }
}

}  // namespace

Status GetScale(const std::string& name, ScaleParams* out) {
  ScaleParams p;
  p.name = name;
  const std::vector<Dist> all(std::begin(kPaperDists), std::end(kPaperDists));
  if (name == "tiny") {
    // For tests: everything runs, at sizes where the whole pipeline takes seconds.
    p.keys = 2000;
    p.latencies = {0, 300};
    p.scans = 200;
    p.fig8_keys = 2000;
    p.fig8_repeats = 2;
    p.cachegrind_keys = 2000;
    p.cachegrind_dists = {Dist::kDense};
    p.canrt = {{"local", "", 500, 100, {50, 500}, 2, {1, 2}, 100}};
    p.thesis = {4000, {256, 1024, 4096, 16384, 65536}, {0, 300}, 3000, {1000, 4000}, 4000, 2, {1.0}, {256, 4096}};
  } else if (name == "quick") {
    // Sized so that every index kind (19 in this build) finishes in under 5 minutes on the
    // 2-core reference machine even when it is shared; medium and paper are the scales to
    // compare absolute figures. LLC misses on the dense keys only: at this N every index fits in
    // the simulated LLC (the report says so and shows no ratio to the paper).
    p.keys = 250000;
    p.latencies = {0, 100, 200, 300};
    p.scans = 500;
    p.fig8_keys = 20000;
    p.fig8_repeats = 3;
    p.cachegrind_keys = 10000;
    p.cachegrind_dists = {Dist::kDense};
    // CANRT: the paper's two range sizes on the local backend (10^5 keys loaded); over ucx/sm
    // (every operation emulated by the server's progress thread here) a tenth of it.
    p.canrt = {{"local", "", 100000, 2000, {10000, 100000}, 3, {1, 2}, 2000},
               {"ucx", "sm", 10000, 500, {1000, 10000}, 3, {1, 2}, 500}};
    // Thesis chapter IV: a 64th of CCEH's 16M records, a 50th of B3-tree's 10M keys.
    p.thesis = {250000, {256, 1024, 4096, 16384, 65536, 262144}, {0, 100, 300}, 200000, {50000, 200000, 800000},
                250000, 2, {1.0, 0.5}, {256, 512, 2048, 4096}};
  } else if (name == "medium") {
    p.keys = 16000000;
    p.latencies = {0, 100, 200, 300};
    p.scans = 10000;
    p.fig8_keys = 1000000;
    p.fig8_repeats = 3;
    p.cachegrind_keys = 1000000;
    p.cachegrind_dists = all;
    p.canrt = {{"local", "", 1000000, 10000, {10000, 100000}, 10, {1, 2}, 20000},
               {"ucx", "sm", 100000, 2000, {10000, 100000}, 3, {1, 2}, 2000},
               {"ucx", "tcp", 100000, 2000, {10000, 100000}, 3, {1, 2}, 2000}};
    p.thesis = {2000000, {256, 1024, 4096, 16384, 65536, 262144}, {0, 100, 200, 300}, 2000000,
                {250000, 1000000, 4000000}, 2000000, 2, {1.0, 0.5}, {256, 512, 2048, 4096}};
  } else if (name == "paper") {
    p.keys = 128000000;
    p.latencies = {0, 100, 200, 300};
    p.scans = 10000;
    p.fig8_keys = 128000000;
    p.fig8_repeats = 3;
    p.cachegrind_keys = 4000000;
    p.cachegrind_dists = all;
    p.canrt = {{"local", "", 1000000, 10000, {10000, 100000}, 10, {1, 2}, 20000},
               {"ucx", "sm", 100000, 2000, {10000, 100000}, 3, {1, 2}, 2000},
               {"ucx", "tcp", 100000, 2000, {10000, 100000}, 3, {1, 2}, 2000}};
    // The thesis's 16M CCEH records and 10M B3-tree keys; Figure 15's sizes are not given in
    // the text: 1M to 64M.
    p.thesis = {16000000, {256, 1024, 4096, 16384, 65536, 262144}, {0, 100, 200, 300}, 10000000,
                {1000000, 4000000, 16000000, 64000000}, 16000000, 2, {1.0, 0.5}, {256, 512, 2048, 4096}};
  } else {
    return Status::InvalidArgument("unknown scale '" + name + "' (valid: quick, medium, paper; tiny for tests)");
  }
  *out = p;
  return Status::OK();
}

Status Plan(const Config& cfg, const ScaleParams& sp, const std::vector<std::pair<std::string, bool>>& kinds,
            std::vector<Run>* runs, std::vector<std::string>* notes) {
  for (const auto& e : cfg.only) {
    if (std::find_if(std::begin(kExperiments), std::end(kExperiments), [&](const char* x) { return e == x; }) ==
        std::end(kExperiments))
      return Status::InvalidArgument("unknown experiment '" + e +
                                     "' (valid: fig7, fig8, fig9, fig10, table1, space, canrt, cceh-seg, cceh-lat, "
                                     "cceh-search, cceh-cdf, b3-page, b3-grow, b3-order, roart-peer)");
  }
  const size_t n = cfg.keys ? cfg.keys : sp.keys;
  const size_t cgn = cfg.cachegrind_keys ? cfg.cachegrind_keys : sp.cachegrind_keys;
  const size_t scans = sp.scans ? std::min(sp.scans, n) : std::min<size_t>(n, 10000);
  const bool fig7 = Wants(cfg, "fig7"), fig8 = Wants(cfg, "fig8"), fig9 = Wants(cfg, "fig9"),
             fig10 = Wants(cfg, "fig10"), table1 = Wants(cfg, "table1"), space = Wants(cfg, "space");
  const size_t n8 = std::min(n, sp.fig8_keys ? sp.fig8_keys : n);
  auto range_len = [&](int which) { return std::max<size_t>(1, std::min(sp.range_keys[which], n)); };
  auto scan_cost = [&](size_t len) { return scans * double(len) * kScanKeyS; };

  for (const auto& [name, ordered] : kinds) {
    if (fig10 && !ordered)
      notes->push_back(name + ": a hash table (no ordered scan): no range queries, fig10 skipped for it");
  }
  for (Dist d : kPaperDists) {
    for (const auto& [name, ordered] : kinds) {
      // base run: the insert phase at latency 0 serves fig7, fig8's first point, table1
      // (flushes, depth) and space; search and the 0.001% scans ride along.
      Run r;
      r.type = Run::Type::kBase;
      r.dist = d;
      r.index = name;
      r.keys = n;
      std::vector<std::string> labels;
      const bool need_insert = fig7 || table1 || space;
      if (need_insert) r.ops.push_back(Op::kInsert);
      if (fig7) labels.push_back("fig7");
      if (table1) labels.push_back("table1");
      if (space) labels.push_back("space");
      if (fig9) {
        r.ops.push_back(Op::kSearch);
        labels.push_back("fig9");
      }
      if (fig10 && ordered) {
        r.ops.push_back(Op::kScan);
        r.scan_len = range_len(0);
        r.range_pct = sp.range_pcts[0];
        labels.push_back(fmt::format("fig10@{}keys", r.scan_len));
      }
      if (!r.ops.empty()) {
        for (const auto& l : labels) r.label += (r.label.empty() ? "" : "+") + l;
        r.est_seconds = kRunS + n * (kGenS + kInsertS + (fig9 ? kSearchS : 0)) + (r.scan_len ? scan_cost(r.scan_len) : 0);
        runs->push_back(r);
      }
      if (fig10 && ordered) {
        Run q;
        q.type = Run::Type::kRange;
        q.dist = d;
        q.index = name;
        q.keys = n;
        q.ops = {Op::kScan};
        q.scan_len = range_len(1);
        q.range_pct = sp.range_pcts[1];
        q.label = fmt::format("fig10@{}keys", q.scan_len);
        q.est_seconds = kRunS + n * (kGenS + kInsertS) + scan_cost(q.scan_len);
        runs->push_back(q);
      }
    }
    // fig8: every kind in one bench run per (distribution, latency, repeat); repeats of a point
    // are spread over the whole experiment (rep outermost) so that a slow minute of a shared
    // machine does not hit all repeats of one point.
  }
  if (fig8) {
    std::vector<std::string> all;
    for (const auto& k : kinds) all.push_back(k.first);
    for (int rep = 0; rep < std::max(1, sp.fig8_repeats); ++rep) {
      for (Dist d : kPaperDists) {
        for (uint64_t lat : sp.latencies) {
          Run l;
          l.type = Run::Type::kLatency;
          l.label = fmt::format("fig8@{}ns#{}", lat, rep + 1);
          l.dist = d;
          l.indexes = all;
          l.repeat = rep;
          l.keys = n8;
          l.ops = {Op::kInsert};
          l.latency_ns = lat;
          l.est_seconds = double(all.size()) * (kRunS + n8 * (kGenS + kInsertS + kFlushesPerInsert * lat * 1e-9));
          runs->push_back(l);
        }
      }
    }
  }
  if (table1 && cfg.cachegrind) {
    for (Dist d : sp.cachegrind_dists) {
      Run g;
      g.type = Run::Type::kCgGen;
      g.label = "table1-llc(keygen)";
      g.dist = d;
      g.keys = cgn;
      g.est_seconds = kCachegrindStartS + cgn * kGenS * kCachegrindSlowdown;
      runs->push_back(g);
      for (const auto& [name, ordered] : kinds) {
        Run a;
        a.type = Run::Type::kCgInsert;
        a.label = "table1-llc(insert)";
        a.dist = d;
        a.index = name;
        a.keys = cgn;
        a.ops = {Op::kInsert};
        a.est_seconds = kCachegrindStartS + cgn * (kGenS + kInsertS) * kCachegrindSlowdown;
        runs->push_back(a);
        Run b = a;
        b.type = Run::Type::kCgSearch;
        b.label = "table1-llc(insert+search)";
        b.ops = {Op::kInsert, Op::kSearch};
        b.est_seconds = kCachegrindStartS + cgn * (kGenS + kInsertS + kSearchS) * kCachegrindSlowdown;
        runs->push_back(b);
      }
    }
  } else if (table1) {
    notes->push_back("table1: LLC-miss runs skipped (--no-cachegrind or valgrind not found)");
  }
  PlanThesis(cfg, sp.thesis, kinds, runs, notes);
  if (Wants(cfg, "canrt")) {
    for (size_t k = 0; k < sp.canrt.size(); ++k) {
      const CanrtParams& cp = sp.canrt[k];
      Run r;
      r.type = Run::Type::kRemote;
      r.label = "canrt(" + cp.backend + (cp.tls.empty() ? "" : "/" + cp.tls) + ")";
      r.keys = cp.keys;
      r.canrt = static_cast<int>(k);
      size_t ops = cp.keys + 2 * cp.latency_ops, scan_keys = 0, ycsb = 0;
      for (size_t len : cp.ranges) scan_keys += cp.range_ops * len;
      for (int t : cp.threads) ycsb += 4 * static_cast<size_t>(t) * cp.ycsb_ops;  // 4 mixes
      r.est_seconds = 3 * (kRunS + double(ops + ycsb) * kRemoteOpS + double(scan_keys) * kRemoteScanKeyS) *
                      (cp.backend == "ucx" ? kUcxSlowdown : 1.0);
      runs->push_back(r);
    }
  }
  return Status::OK();
}

double Eta::Remaining() const {
  std::map<int, std::pair<double, double>> by_type;  // type -> (measured, estimated)
  double all_m = 0, all_e = 0;
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (measured_[i] < 0) continue;
    auto& t = by_type[static_cast<int>(runs_[i].type)];
    t.first += measured_[i];
    t.second += runs_[i].est_seconds;
    all_m += measured_[i];
    all_e += runs_[i].est_seconds;
  }
  const double all_ratio = all_e > 0 ? all_m / all_e : 1.0;
  double rem = 0;
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (measured_[i] >= 0) continue;
    auto it = by_type.find(static_cast<int>(runs_[i].type));
    const double ratio = it != by_type.end() && it->second.second > 0 ? it->second.first / it->second.second : all_ratio;
    rem += runs_[i].est_seconds * ratio;
  }
  return rem;
}

Status Reproduce(const Config& cfg, const LogFn& progress) {
  const auto t_start = Clock::now();
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  ScaleParams sp;
  WORT_RETURN_IF_ERROR(GetScale(cfg.scale, &sp));
  if (cfg.out_dir.empty()) return Status::InvalidArgument("--out is required");

  std::vector<std::pair<std::string, bool>> kinds;
  if (cfg.indexes.empty()) {
    for (const IndexKind* k : IndexKinds()) kinds.emplace_back(k->name, k->ordered);
  } else {
    for (const auto& name : cfg.indexes) {
      const IndexKind* k = FindIndexKind(name);
      if (!k) return Status::InvalidArgument("unknown index '" + name + "' (valid: " + bench::IndexNames() + ")");
      kinds.emplace_back(k->name, k->ordered);
    }
  }
  if (kinds.empty()) return Status::InvalidArgument("no index kind registered in this build");

  std::vector<std::string> notes;
  Config c = cfg;
  if (c.cachegrind && Wants(c, "table1")) {
    if (std::system("valgrind --version >/dev/null 2>&1") != 0) {
      c.cachegrind = false;
      notes.push_back("valgrind not found: LLC misses (Table 1(a)/(c)) not measured");
    } else if (c.wort_binary.empty()) {
      c.cachegrind = false;
      notes.push_back("the wort binary's path is unknown: LLC misses not measured");
    }
  }
  std::vector<Run> runs;
  WORT_RETURN_IF_ERROR(Plan(c, sp, kinds, &runs, &notes));

  {
    std::error_code ec;
    std::filesystem::create_directories(c.out_dir, ec);  // with any missing parents
    struct stat st;
    if (stat(c.out_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return Status::IOError("cannot create output directory " + c.out_dir + (ec ? ": " + ec.message() : ""));
  }
  const std::string results_path = c.out_dir + "/results.jsonl";
  const std::string log_path = c.out_dir + "/bench.log";
  const std::string cg_dir = c.out_dir + "/cachegrind";
  {
    // Created empty first: a run whose experiments write no records of their own (roart-peer
    // alone: peers.jsonl) still leaves the results file report.py reads.
    std::ofstream rf(results_path, std::ios::trunc);
    if (!rf) return Status::IOError("cannot write " + results_path);
  }
  std::ofstream blog(log_path, std::ios::trunc);
  if (!blog) return Status::IOError("cannot write " + log_path);

  const size_t n = c.keys ? c.keys : sp.keys;
  const size_t cgn = c.cachegrind_keys ? c.cachegrind_keys : sp.cachegrind_keys;
  double est_total = 0;
  for (const auto& r : runs) est_total += r.est_seconds;
  say(fmt::format("wort reproduce: scale {} (N={}), {} index kinds ({}), {} runs, first estimate {}", sp.name, n,
                  kinds.size(),
                  [&] {
                    std::string s;
                    for (const auto& k : kinds) s += (s.empty() ? "" : ",") + k.first;
                    return s;
                  }(),
                  runs.size(), FormatDuration(est_total)));
  for (const auto& note : notes) say("note: " + note);

  Eta eta(runs);
  bench::Environment env;
  bool have_env = false;
  auto progress_line = [&](size_t i, double secs, const std::string& extra) {
    const Run& r = runs[i];
    const double elapsed = std::chrono::duration<double>(Clock::now() - t_start).count();
    say(fmt::format("[{}/{}] {:<28} {:<9} {:<10} {:<20} {:>7.1f}s  elapsed {}  ETA {}{}", i + 1, runs.size(), r.label,
                    !r.index.empty() ? r.index : (r.indexes.empty() ? "-" : "all"), bench::DistName(r.dist),
                    r.ops.empty() ? "keygen" : OpsName(r.ops), secs, FormatDuration(elapsed),
                    FormatDuration(eta.Remaining()), extra));
  };

  // ---- timed runs, one at a time, in this process ------------------------------------------
  std::vector<size_t> cg_runs;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    if (r.type == Run::Type::kCgGen || r.type == Run::Type::kCgInsert || r.type == Run::Type::kCgSearch) {
      cg_runs.push_back(i);
      continue;
    }
    if (r.type == Run::Type::kRemote) {
      const CanrtParams& cp = sp.canrt[static_cast<size_t>(r.canrt)];
      bench::RemoteBenchConfig rc;
      rc.designs = {"canrt", "reply-wort", "reply-woart"};
      rc.backend = cp.backend;
      rc.tls = cp.tls;
      rc.keys = cp.keys;
      rc.latency_ops = cp.latency_ops;
      rc.ranges = cp.ranges;
      rc.range_ops = cp.range_ops;
      rc.threads = cp.threads;
      rc.ycsb_ops = cp.ycsb_ops;
      rc.seed = c.seed;
      std::vector<bench::RemoteResult> rres;
      const auto t0 = Clock::now();
      Status s = bench::RunRemoteBench(rc, false, &rres);
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      eta.Done(i, secs);
      if (!have_env) {
        env = bench::CaptureEnvironment();
        have_env = true;
      }
      std::vector<nlohmann::json> recs;
      std::string extra;
      for (const auto& res : rres) {
        nlohmann::json j = bench::ToJson(res, rc, env);
        j["experiment"] = "canrt";
        recs.push_back(std::move(j));
        blog << fmt::format("canrt {} {} {} threads {}: {} ops, {:.0f} ops/s, p50 {:.1f} us, cpu {:.0f} ns/op, "
                            "server cpu {:.0f} ns/op, errors {}\n",
                            res.design, r.label, res.op, res.threads, res.ops, res.ops_per_s, res.p50_ns / 1e3,
                            res.cpu_ns_per_op, res.server_cpu_ns_per_op, res.errors);
        if (res.errors) extra += fmt::format("  ({} {} {} WRONG)", res.design, res.errors, res.op);
      }
      if (!s.ok()) {
        notes.push_back(fmt::format("{}: {}", r.label, s.ToString()));
        extra += "  FAILED: " + s.ToString();
      }
      if (!recs.empty()) WORT_RETURN_IF_ERROR(bench::AppendJsonLines(results_path, recs));
      progress_line(i, secs, extra);
      continue;
    }
    if (r.type == Run::Type::kArrival) {
      bench::ArrivalBenchConfig ac;
      ac.common.flush = c.flush;
      ac.common.seed = c.seed;
      ac.common.threads = sp.thesis.cdf_threads;
      ac.indexes = r.indexes;
      ac.dist = r.dist;
      ac.keys = r.keys;
      ac.rate_kind = "linp";
      ac.load = r.load;
      if (FindIndexKind("linp") == nullptr) ac.rate = 1e6;  // not built in: a fixed rate, said in the notes
      bench::ArrivalBenchReport arep;
      const auto t0 = Clock::now();
      Status s = bench::RunArrivalBench(ac, &arep, [&](const std::string& line) { blog << line << "\n"; });
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      blog.flush();
      eta.Done(i, secs);
      if (!have_env && !arep.env.timestamp.empty()) {
        env = arep.env;
        have_env = true;
      }
      std::vector<nlohmann::json> recs;
      std::string extra;
      for (const auto& res : arep.results) {
        nlohmann::json j = bench::ToJson(res, ac, arep.env);
        j["experiment"] = r.exp;
        recs.push_back(std::move(j));
        if (res.errors) extra += fmt::format("  ({} {} WRONG)", res.index, res.errors);
      }
      if (ac.rate > 0) notes.push_back("cceh-cdf: linp is not built in; arrivals at a fixed 1M/s");
      for (const auto& sk : arep.skipped) {
        notes.push_back(fmt::format("{}: {}", r.label, sk.reason));
        extra += "  SKIPPED: " + sk.reason;
      }
      if (!s.ok() && arep.skipped.empty()) {
        notes.push_back(fmt::format("{}: {}", r.label, s.ToString()));
        extra += "  FAILED: " + s.ToString();
      }
      if (!recs.empty()) WORT_RETURN_IF_ERROR(bench::AppendJsonLines(results_path, recs));
      progress_line(i, secs, extra);
      continue;
    }
    bench::IndexBenchConfig bc;
    bc.common.flush = c.flush;
    bc.common.write_latency_ns = r.latency_ns;
    bc.common.seed = c.seed;
    bc.indexes = r.indexes.empty() ? std::vector<std::string>{r.index} : r.indexes;
    bc.dist = r.dist;
    bc.keys = r.keys;
    bc.ops = r.ops;
    if (r.scan_len) bc.scan_len = r.scan_len;
    bc.scans = sp.scans;
    bc.sorted_insert = r.sorted_insert;
    bench::IndexBenchReport rep;
    // The kinds' knobs for this run, passed explicitly (a user's WORT_CCEH_* / WORT_B3_* stay
    // the defaults of the runs that set none).
    bc.index_options.cceh_segment_bytes = r.segment_bytes;
    bc.index_options.b3_no_rebalance = r.no_rebalance;
    bc.index_options.b3_page_bytes = r.b3_page_bytes;
    if (!r.cceh_variant.empty() && !ParseVariant(r.cceh_variant, &bc.index_options.cceh_variant))
      return Status::InvalidArgument("reproduce: unknown cceh variant " + r.cceh_variant);
    const auto t0 = Clock::now();
    Status s = bench::RunIndexBench(bc, &rep, [&](const std::string& line) { blog << line << "\n"; });
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    blog.flush();
    eta.Done(i, secs);
    if (!have_env && !rep.env.timestamp.empty()) {
      env = rep.env;
      have_env = true;
    }
    std::vector<nlohmann::json> recs;
    for (const auto& res : rep.results) {
      nlohmann::json j = bench::ToJson(res, bc, rep.env);
      if (r.type == Run::Type::kThesis) {
        j["experiment"] = r.exp == "cceh-lat" && res.op == "search" ? "cceh-search" : r.exp;
        if (r.segment_bytes) j["segment_bytes"] = r.segment_bytes;
        if (!r.cceh_variant.empty()) j["cceh_variant"] = r.cceh_variant;
        if (r.exp == "b3-order") j["rebalance"] = !r.no_rebalance;
        if (r.exp == "b3-page" && res.index == "b3tree") j["page_bytes"] = r.b3_page_bytes ? r.b3_page_bytes : 1024;
      } else if (res.op == "insert") j["experiment"] = r.type == Run::Type::kLatency ? "fig8" : "fig7";
      else if (res.op == "search") j["experiment"] = "fig9";
      else if (res.op == "scan") {
        j["experiment"] = "fig10";
        j["range_pct"] = r.range_pct;  // the paper's range this query length stands for
      } else j["experiment"] = "other";
      if (r.type == Run::Type::kLatency) j["repeat"] = r.repeat;
      recs.push_back(std::move(j));
    }
    std::string extra;
    for (const auto& sk : rep.skipped) {
      notes.push_back(fmt::format("{} {} ({}): {}", r.label, bench::DistName(r.dist), r.index, sk.reason));
      extra += "  SKIPPED: " + sk.reason;
    }
    if (!s.ok() && rep.skipped.empty()) {
      notes.push_back(fmt::format("{} {} ({}): {}", r.label, bench::DistName(r.dist), r.index, s.ToString()));
      extra += "  FAILED: " + s.ToString();
    }
    for (const auto& res : rep.results)
      if (res.errors) extra += fmt::format("  ({} {} WRONG)", res.errors, res.op);
    if (!recs.empty()) WORT_RETURN_IF_ERROR(bench::AppendJsonLines(results_path, recs));
    progress_line(i, secs, extra);
  }
  if (!have_env) env = bench::CaptureEnvironment();

  // ---- cachegrind runs: separate processes, cachegrind_jobs at a time ------------------------
  if (!cg_runs.empty()) {
    // Valgrind cannot run every binary (3.19 cannot execute AVX-512, which a build with
    // WORT_ARCH_FLAGS=-march=native emits on AVX-512 CPUs): try the binary once on a few keys first (here, after the timed runs, so that a binary still being
    // built when the command started can be used).
    const std::string probe = fmt::format(
        "valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null {} reproduce-keygen --keys 100 "
        ">/dev/null 2>&1",
        ShellQuote(c.wort_binary));
    if (std::system(probe.c_str()) != 0) {
      c.cachegrind = false;
      notes.push_back("table1: " + c.wort_binary +
                      " does not run under valgrind (e.g. AVX-512 code, which valgrind 3.19 cannot execute); LLC "
                      "misses not measured. Build a wort without it (cmake -DWORT_ARCH_FLAGS=-march=x86-64-v3, "
                      "the default) and pass --cachegrind-binary PATH");
      say("note: " + notes.back());
      for (size_t i : cg_runs) eta.Done(i, 0);
      cg_runs.clear();
    }
  }
  if (!cg_runs.empty()) {
    mkdir(cg_dir.c_str(), 0755);
    std::vector<std::string> out_file(runs.size());
    std::vector<int> rc(runs.size(), 0);
    std::atomic<size_t> next{0};
    std::mutex mu;
    auto worker = [&] {
      for (;;) {
        const size_t k = next.fetch_add(1);
        if (k >= cg_runs.size()) return;
        const size_t i = cg_runs[k];
        const Run& r = runs[i];
        const std::string tag = fmt::format("{}-{}-{}", r.index.empty() ? "keygen" : r.index, bench::DistName(r.dist),
                                            r.ops.empty() ? "gen" : (r.ops.size() == 1 ? "insert" : "search"));
        out_file[i] = cg_dir + "/" + tag + ".out";
        std::string cmd = fmt::format(
            "valgrind --tool=cachegrind --cache-sim=yes --LL={} --cachegrind-out-file={} {} ", c.ll,
            ShellQuote(out_file[i]), ShellQuote(c.wort_binary));
        if (r.type == Run::Type::kCgGen)
          cmd += fmt::format("reproduce-keygen --dist {} --keys {} --seed {}", bench::DistName(r.dist), r.keys, c.seed);
        else
          cmd += fmt::format("bench --index {} --dist {} --keys {} --ops {} --flush {} --seed {} --pool {}",
                             ShellQuote(r.index), bench::DistName(r.dist), r.keys, OpsName(r.ops), c.flush, c.seed,
                             ShellQuote(fmt::format("/dev/shm/wort-repro-{}-{}.pool", getpid(), tag)));
        cmd += " > " + ShellQuote(cg_dir + "/" + tag + ".log") + " 2>&1";
        const auto t0 = Clock::now();
        const int status = std::system(cmd.c_str());
        const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
        std::lock_guard<std::mutex> g(mu);
        rc[i] = status;
        eta.Done(i, secs);
        progress_line(i, secs, status == 0 ? "" : fmt::format("  FAILED (exit status {}; see {}.log)", status, tag));
      }
    };
    std::vector<std::thread> ts;
    for (int t = 0; t < std::max(1, c.cachegrind_jobs); ++t) ts.emplace_back(worker);
    for (auto& t : ts) t.join();

    // Differencing: G per dist, A and B per (index, dist).
    std::map<Dist, uint64_t> gen;
    std::map<std::pair<std::string, Dist>, std::pair<int64_t, int64_t>> ab;  // -1: missing
    for (size_t i : cg_runs) {
      const Run& r = runs[i];
      uint64_t m = 0;
      Status s = rc[i] == 0 ? ReadCachegrindLLMisses(out_file[i], &m) : Status::IOError("run failed");
      if (!s.ok()) {
        notes.push_back(fmt::format("cachegrind {} {} {}: {}", r.label, r.index, bench::DistName(r.dist), s.ToString()));
        continue;
      }
      if (r.type == Run::Type::kCgGen) gen[r.dist] = m;
      else {
        auto& e = ab.try_emplace({r.index, r.dist}, -1, -1).first->second;
        (r.type == Run::Type::kCgInsert ? e.first : e.second) = static_cast<int64_t>(m);
      }
    }
    std::vector<nlohmann::json> recs;
    for (const auto& [key, v] : ab) {
      auto g = gen.find(key.second);
      if (g == gen.end() || v.first < 0) continue;
      nlohmann::json j;
      j["experiment"] = "table1";
      j["bench"] = "cachegrind";
      j["index"] = key.first;
      j["dist"] = bench::DistName(key.second);
      j["keys"] = cgn;
      j["ll"] = c.ll;
      j["ll_misses_keygen"] = g->second;
      j["ll_misses_insert_run"] = v.first;
      j["llc_miss_per_insert"] = (double(v.first) - double(g->second)) / double(cgn);
      if (v.second >= 0) {
        j["ll_misses_search_run"] = v.second;
        j["llc_miss_per_search"] = (double(v.second) - double(v.first)) / double(cgn);
      }
      j["git_commit"] = env.git_commit;
      j["timestamp"] = env.timestamp;
      recs.push_back(std::move(j));
    }
    if (!recs.empty()) WORT_RETURN_IF_ERROR(bench::AppendJsonLines(results_path, recs));
  }

  // ---- roart-peer: P-ART built from the given sources, by scripts/peers.sh ---------------------
  std::string peers_state = "not run";
  const bool has_roart = std::any_of(kinds.begin(), kinds.end(), [](const auto& k) { return k.first == "roart"; });
  if (Wants(c, "roart-peer") && has_roart) {
    if (c.peers_src.empty()) {
      peers_state = "no --peers-src: woart stands in for P-ART";
    } else if (c.peers_script.empty() || c.peers_wort.empty()) {
      peers_state = "scripts/peers.sh or the wort binary not found: woart stands in for P-ART";
      notes.push_back("roart-peer: " + peers_state);
    } else {
      // peers.sh builds and writes outside the repository (its rule); the results are copied here.
      const std::string tmp = fmt::format("/tmp/wort-repro-peers-{}", getpid());
      const size_t pn = std::min<size_t>(n, 16000000);
      const std::string cmd = fmt::format(
          "bash {} {} --kinds roart --keys {} --dist sparse --repeat 1 --seed {} --wort {} --out {} > {} 2>&1 && cp {}/peers.jsonl "
          "{}/peers.md {}/",
          ShellQuote(c.peers_script), ShellQuote(c.peers_src), pn, c.seed, ShellQuote(c.peers_wort), ShellQuote(tmp),
          ShellQuote(c.out_dir + "/peers.log"), ShellQuote(tmp), ShellQuote(tmp), ShellQuote(c.out_dir));
      say(fmt::format("roart-peer: P-ART from {} against roart, {} sparse keys (scripts/peers.sh)", c.peers_src, pn));
      const auto t0 = Clock::now();
      const int st = std::system(cmd.c_str());
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      std::filesystem::remove_all(tmp);
      if (st != 0) {
        peers_state = fmt::format("scripts/peers.sh failed (exit status {}; see peers.log): woart stands in for P-ART", st);
        notes.push_back("roart-peer: " + peers_state);
      } else {
        peers_state = fmt::format("P-ART built from {}/RECIPE/P-ART, {} keys", c.peers_src, pn);
      }
      say(fmt::format("roart-peer: {} ({:.1f}s)", peers_state, secs));
    }
  }

  // ---- config.json ---------------------------------------------------------------------------
  const double run_s = std::chrono::duration<double>(Clock::now() - t_start).count();
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  utsname un{};
  uname(&un);
  nlohmann::json cj;
  cj["scale"] = sp.name;
  cj["keys"] = n;
  cj["latencies_ns"] = sp.latencies;
  cj["fig8_keys"] = std::min(n, sp.fig8_keys ? sp.fig8_keys : n);
  cj["fig8_repeats"] = sp.fig8_repeats;
  cj["range_pct"] = {sp.range_pcts[0], sp.range_pcts[1]};
  cj["range_keys"] = {std::min(sp.range_keys[0], n), std::min(sp.range_keys[1], n)};
  cj["scans"] = sp.scans;
  cj["cachegrind"] = c.cachegrind && Wants(c, "table1");
  cj["cachegrind_keys"] = cgn;
  cj["cachegrind_ll"] = c.ll;
  {
    nlohmann::json cr = nlohmann::json::array();
    if (Wants(c, "canrt"))
      for (const auto& cp : sp.canrt)
        cr.push_back({{"backend", cp.backend}, {"tls", cp.tls}, {"keys", cp.keys}, {"latency_ops", cp.latency_ops},
                      {"ranges", cp.ranges}, {"range_ops", cp.range_ops}, {"threads", cp.threads},
                      {"ycsb_ops", cp.ycsb_ops}});
    cj["canrt"] = cr;
  }
  cj["thesis"] = {{"cceh_keys", sp.thesis.cceh_keys},
                  {"segment_bytes", sp.thesis.segment_bytes},
                  {"latencies_ns", sp.thesis.latencies},
                  {"b3_keys", sp.thesis.b3_keys},
                  {"b3_grow", sp.thesis.b3_grow},
                  {"cdf_keys", sp.thesis.cdf_keys},
                  {"cdf_threads", sp.thesis.cdf_threads},
                  {"cdf_loads", sp.thesis.cdf_loads},
                  {"b3_page_sizes", sp.thesis.b3_page_sizes}};
  {
    std::vector<std::string> ds;
    for (Dist d : sp.cachegrind_dists) ds.push_back(bench::DistName(d));
    cj["cachegrind_dists"] = ds;
  }
  cj["only"] = c.only;
  cj["roart_peer"] = peers_state;
  cj["flush"] = env.flush;
  cj["cpu"] = env.cpu;
  cj["cpus"] = env.cpus;
  cj["host"] = env.host;
  cj["kernel"] = std::string(un.sysname) + " " + un.release;
  cj["date"] = env.timestamp;
  cj["git_commit"] = env.git_commit;
  cj["seed"] = c.seed;
  cj["run_seconds"] = run_s;
  cj["peak_rss_kib"] = self.ru_maxrss;
  cj["peak_rss_children_kib"] = children.ru_maxrss;
  nlohmann::json kj = nlohmann::json::array();
  for (const auto& [name, ordered] : kinds) kj.push_back({{"name", name}, {"ordered", ordered}});
  cj["kinds"] = kj;
  cj["notes"] = notes;
  {
    std::ofstream cf(c.out_dir + "/config.json", std::ios::trunc);
    cf << cj.dump(2) << "\n";
    if (!cf) return Status::IOError("cannot write " + c.out_dir + "/config.json");
  }
  say(fmt::format("measurements done in {} (peak RSS {:.0f} MiB; cachegrind children {:.0f} MiB); results in {}",
                  FormatDuration(run_s), self.ru_maxrss / 1024.0, children.ru_maxrss / 1024.0, results_path));

  // ---- figures and report --------------------------------------------------------------------
  if (!c.report_script.empty()) {
    std::string cmd = ShellQuote(c.python) + " " + ShellQuote(c.report_script) + " " + ShellQuote(c.out_dir);
    if (!c.published.empty()) cmd += " --published " + ShellQuote(c.published);
    say("running " + cmd);
    const int status = std::system(cmd.c_str());
    if (status != 0) return Status::IOError(fmt::format("{} failed (exit status {})", cmd, status));
  }
  return Status::OK();
}

}  // namespace wort::reproduce
