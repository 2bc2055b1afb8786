// `wort bench ycsb`: YCSB workloads A-F and load (see bench.h for what is measured, ycsb.h for
// the generators), and the key file for the peer drivers.
#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <latch>
#include <mutex>
#include <thread>

#include "bench/bench.h"
#include "bench/bench_internal.h"
#include "index/volatile/vart.h"
#include "sync/epoch.h"
#include "wort/alloc.h"
#include "wort/index.h"

namespace wort::bench {
using namespace detail;
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kLatencySampleEvery = 8;

uint64_t SeedFor(uint64_t seed, YcsbWorkload w, int thread) {
  YcsbRng r(seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(w) * 1000003ull + static_cast<uint64_t>(thread));
  return r.Next();
}

// Inserts a workload can make: its insert share of `ops` with a generous margin (the binomial's
// standard deviation is far below 1% of ops at any size worth measuring).
uint64_t InsertBudget(YcsbWorkload w, uint64_t ops) {
  const double p = YcsbSpec(w).insert;
  if (p <= 0 || w == YcsbWorkload::kLoad) return 0;
  return static_cast<uint64_t>(p * ops * 1.2) + 1000;
}

// One per thread, on lines of its own: the counters are stored at every operation (the index
// call between two increments is opaque to the compiler), and threads' neighbouring stats in one
// line made every operation of the driver a store to a line another thread stores to (issue 31:
// vart's load, the fastest per insert, lost the most to it).
struct alignas(64) ThreadStats {
  double cpu = 0;
  double usr = 0, sys = 0;  // getrusage(RUSAGE_THREAD) over the body
  uint64_t minflt = 0, nvcsw = 0, nivcsw = 0;
  uint64_t reads = 0, updates = 0, inserts = 0, scans = 0, rmws = 0, errors = 0;
  std::vector<uint32_t> lat;  // sampled latencies, ns (saturated)
  Status status;
};

double Percentile(std::vector<uint32_t>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

// Runs body(thread, &stats) on `threads` threads released together; wall time of the whole.
template <class Body>
double RunThreads(int threads, std::vector<ThreadStats>* stats, const Body& body) {
  stats->assign(threads, ThreadStats{});
  std::latch ready(threads + 1), go(1);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      ready.count_down();
      go.wait();
      rusage r0{}, r1{};
      getrusage(RUSAGE_THREAD, &r0);
      const double c0 = ThreadCpuSeconds();
      body(t, &(*stats)[t]);
      ThreadStats& st = (*stats)[t];
      st.cpu = ThreadCpuSeconds() - c0;
      getrusage(RUSAGE_THREAD, &r1);
      auto secs = [](const timeval& a, const timeval& b) { return (b.tv_sec - a.tv_sec) + (b.tv_usec - a.tv_usec) * 1e-6; };
      st.usr = secs(r0.ru_utime, r1.ru_utime);
      st.sys = secs(r0.ru_stime, r1.ru_stime);
      st.minflt = static_cast<uint64_t>(r1.ru_minflt - r0.ru_minflt);
      st.nvcsw = static_cast<uint64_t>(r1.ru_nvcsw - r0.ru_nvcsw);
      st.nivcsw = static_cast<uint64_t>(r1.ru_nivcsw - r0.ru_nivcsw);
    });
  }
  ready.arrive_and_wait();
  const auto t0 = Clock::now();
  go.count_down();
  for (auto& t : ts) t.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

YcsbResult Summarize(const YcsbResult& base, double seconds, std::vector<ThreadStats>& stats, const pm::Counters& d) {
  YcsbResult r = base;
  double cpu = 0, usr = 0, sys = 0;
  uint64_t faults = 0;
  std::vector<uint32_t> lat;
  for (auto& s : stats) {
    cpu += s.cpu;
    usr += s.usr;
    sys += s.sys;
    faults += s.minflt;
    r.vol_switches += s.nvcsw;
    r.invol_switches += s.nivcsw;
    r.reads += s.reads;
    r.updates += s.updates;
    r.inserts += s.inserts;
    r.scans += s.scans;
    r.rmws += s.rmws;
    r.errors += s.errors;
    lat.insert(lat.end(), s.lat.begin(), s.lat.end());
  }
  r.ops = r.reads + r.updates + r.inserts + r.scans + r.rmws;
  r.seconds = seconds;
  r.ns_per_op = r.ops ? seconds * 1e9 / r.ops : 0;
  r.cpu_ns_per_op = r.ops ? cpu * 1e9 / r.ops : 0;
  r.user_ns_per_op = r.ops ? usr * 1e9 / r.ops : 0;
  r.sys_ns_per_op = r.ops ? sys * 1e9 / r.ops : 0;
  r.faults_per_op = r.ops ? double(faults) / r.ops : 0;
  r.mops_per_s = seconds > 0 ? r.ops / seconds / 1e6 : 0;
  r.flushes_per_op = r.ops ? double(d.lines_flushed) / r.ops : 0;
  r.fences_per_op = r.ops ? double(d.fences) / r.ops : 0;
  r.p50_ns = Percentile(lat, 0.50);
  r.p99_ns = Percentile(lat, 0.99);
  return r;
}

Status FirstError(const std::vector<ThreadStats>& stats) {
  for (const auto& s : stats)
    if (!s.status.ok()) return s.status;
  return Status::OK();
}

// Between two runs (issue 31): each run's index and pool live in RunOne's scope, so they are
// gone before the next run's threads start; what a run can still leave to the next is the state
// of malloc. The worker threads of a run exit with it, and glibc gives a new thread the arena of
// an exited one first, so the next run's first threads inherit the previous run's arenas with
// whatever the run freed into them (vart's tree, freed by this thread at close, went back into
// the arenas of the threads that allocated it: before vart had its own node allocator, a 16-thread
// load after a 4-thread run in the same process gave 8.4 Mops/s on the 16-core machine, started
// fresh 21-25). malloc_trim(0) consolidates every arena's free chunks and returns the free pages
// to the system, so each run starts from malloc state close to a fresh process's.
void ReleaseFreedMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

// One (kind, thread count): load, then the workloads. Appends results to the report.
Status RunOne(const YcsbBenchConfig& cfg, const IndexKind& kind, int threads, const std::vector<std::string>& keys,
              double zetan_n, YcsbBenchReport* report, const LogFn& log) {
  const size_t n = cfg.records;
  const uint64_t ops = cfg.ops ? cfg.ops : n;
  const bool u64 = IsIntegerDist(cfg.dist);
  auto skip = [&](const std::string& why) {
    report->skipped.push_back({kind.name, why});
    if (log) log("skipped: " + why);
  };
  const std::string path = DefaultPoolPath(cfg.common, fmt::format("{}-t{}", kind.name, threads));
  BenchIndex h;
  std::string why;
  if (Status s = h.Create(cfg.common, path, kind, u64, cfg.span_bits, &why); !s.ok()) {
    skip(why);
    return s;
  }
  Index* idx = h.idx.get();
  YcsbResult base;
  base.index = kind.name;
  base.dist = DistName(cfg.dist);
  base.key_type = u64 ? "u64" : "bytes";
  base.threads = threads;
  base.records = n;
  base.partition = LoadPartitionName(cfg.partition);
  // --partition index: an index (and pool) per thread; thread 0 uses h.
  std::vector<std::unique_ptr<BenchIndex>> own;
  std::vector<Index*> idx_of(threads, idx);
  if (cfg.partition == LoadPartition::kIndexPerThread) {
    for (int t = 1; t < threads; ++t) {
      own.push_back(std::make_unique<BenchIndex>());
      const std::string p = DefaultPoolPath(cfg.common, fmt::format("{}-t{}-p{}", kind.name, threads, t));
      if (Status s = own.back()->Create(cfg.common, p, kind, u64, cfg.span_bits, &why); !s.ok()) {
        skip(why);
        return s;
      }
      idx_of[t] = own.back()->idx.get();
    }
  }
  // The epoch counts of every index of the run (vart: its own manager; the others: the pool's).
  auto epoch_stats = [&] {
    sync::EpochStats sum;
    auto add = [&](const BenchIndex& b) {
      sync::EpochStats e;
      if (!vol::VartEpochStatsOf(*b.idx, &e)) e = b.pool->allocator().epoch().Stats();
      sum.epoch += e.epoch;
      sum.advance_tries += e.advance_tries;
      sum.advances_blocked += e.advances_blocked;
    };
    add(h);
    for (const auto& b : own) add(*b);
    return sum;
  };
  // The allocator counts of every pool of the run (AllocWaits).
  auto alloc_stats = [&] {
    AllocStats sum;
    auto add = [&](const BenchIndex& b) {
      const AllocStats a = b.pool->allocator().Stats();
      sum.lock_acquisitions += a.lock_acquisitions;
      sum.lock_waits += a.lock_waits;
      sum.grows += a.grows;
      sum.grows_ahead += a.grows_ahead;
      sum.grow_ns += a.grow_ns;
      sum.grow_waits += a.grow_waits;
      sum.chunks_total += a.chunks_total;
      sum.grow_wait_ns += a.grow_wait_ns;
    };
    add(h);
    for (const auto& b : own) add(*b);
    return sum;
  };
  auto emit = [&](const YcsbResult& r) {
    report->results.push_back(r);
    if (log)
      log(fmt::format("{:<10} {:<7} {:<7} x{}  {:>8.3f} Mops/s {:>9.1f} cpu-ns/op  p50 {:>7.0f} ns  p99 {:>8.0f} ns{}"
                      "  [usr {:.0f} sys {:.0f} ns/op, {:.4f} faults/op, cs {} vol {} invol, epoch +{} in {} tries, "
                      "{} blocked{}]",
                      r.index, r.workload, r.request, r.threads, r.mops_per_s, r.cpu_ns_per_op, r.p50_ns, r.p99_ns,
                      r.errors ? fmt::format("  ({} WRONG)", r.errors) : "", r.user_ns_per_op, r.sys_ns_per_op,
                      r.faults_per_op, r.vol_switches, r.invol_switches, r.epoch_advances, r.epoch_tries,
                      r.epoch_blocked, r.workload == "load" && r.partition != "slices" ? ", partition " + r.partition : "")
          + fmt::format("\n           [{}]", FormatAllocWaits(r.alloc)));
  };
  auto add_epoch = [&](YcsbResult* r, const sync::EpochStats& e0) {
    const sync::EpochStats e1 = epoch_stats();
    r->epoch_advances = static_cast<int64_t>(e1.epoch - e0.epoch);
    r->epoch_tries = static_cast<int64_t>(e1.advance_tries - e0.advance_tries);
    r->epoch_blocked = static_cast<int64_t>(e1.advances_blocked - e0.advances_blocked);
  };

  // ---- load: records 0..n-1, split over the threads as cfg.partition says ----
  // kFirstByte: each thread's records, listed before the timed run.
  std::vector<std::vector<uint32_t>> by_byte;
  if (cfg.partition == LoadPartition::kFirstByte) {
    by_byte.resize(threads);
    for (size_t i = 0; i < n; ++i) {
      const int t = keys[i].empty() ? 0 : static_cast<uint8_t>(keys[i][0]) % threads;
      by_byte[t].push_back(static_cast<uint32_t>(i));
    }
  }
  std::vector<ThreadStats> stats;
  pm::Counters before = pm::GetCounters();
  sync::EpochStats e0 = epoch_stats();
  AllocStats a0 = alloc_stats();
  double secs = RunThreads(threads, &stats, [&](int t, ThreadStats* st) {
    Index* const ix = idx_of[t];
    auto insert = [&](size_t i) {
      const bool sample = (i % kLatencySampleEvery) == 0;
      const auto t0 = sample ? Clock::now() : Clock::time_point{};
      Status is = ix->Insert(keys[i], i + 1);
      if (sample)
        st->lat.push_back(static_cast<uint32_t>(std::min<int64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(), UINT32_MAX)));
      if (is.IsAlreadyExists()) ++st->errors;
      else if (!is.ok()) {
        st->status = is;
        return false;
      }
      ++st->inserts;
      return true;
    };
    if (cfg.partition == LoadPartition::kFirstByte) {
      for (const uint32_t i : by_byte[t])
        if (!insert(i)) return;
    } else {
      const size_t b = n * t / threads, e = n * (t + 1) / threads;
      for (size_t i = b; i < e; ++i)
        if (!insert(i)) return;
    }
  });
  if (Status fs = FirstError(stats); !fs.ok()) {
    skip(fmt::format("{}: load failed: {}", kind.name, fs.ToString()));
    return fs;
  }
  {
    YcsbResult r = base;
    r.workload = "load";
    r.request = "-";
    r = Summarize(r, secs, stats, pm::GetCounters() - before);
    add_epoch(&r, e0);
    r.alloc = AllocWaitsBetween(a0, alloc_stats());
    if (cfg.partition == LoadPartition::kIndexPerThread) {
      for (int t = 0; t < threads; ++t)
        if (idx_of[t]->Size() != n * (t + 1) / threads - n * t / threads) ++r.errors;
    } else if (idx->Size() != n) {
      ++r.errors;
    }
    if (std::find(cfg.workloads.begin(), cfg.workloads.end(), YcsbWorkload::kLoad) != cfg.workloads.end()) emit(r);
  }
  base.partition = LoadPartitionName(LoadPartition::kSlices);  // the workloads are not split

  // ---- the workloads ----
  AcknowledgedCounter counter(n, keys.size() - n);
  Status first;
  for (YcsbWorkload w : cfg.workloads) {
    if (w == YcsbWorkload::kLoad) continue;
    const YcsbMix mix = YcsbSpec(w);
    if (mix.scan > 0 && !kind.ordered) {
      skip(fmt::format("{}: workload {} skipped: it is 95% range scans and a hash index has no order", kind.name,
                       YcsbName(w)));
      continue;
    }
    const uint64_t expected_inserts = InsertBudget(w, ops);
    before = pm::GetCounters();
    e0 = epoch_stats();
    a0 = alloc_stats();
    secs = RunThreads(threads, &stats, [&](int t, ThreadStats* st) {
      YcsbOpGenerator gen(w, cfg.request, n, expected_inserts, SeedFor(cfg.common.seed, w, t), zetan_n);
      const uint64_t my_ops = ops * (t + 1) / threads - ops * t / threads;
      uint64_t v = 0;
      for (uint64_t i = 0; i < my_ops; ++i) {
        YcsbOp op = gen.NextOp();
        uint64_t rec = 0;
        if (op == YcsbOp::kInsert) {
          rec = counter.Claim();
          if (rec >= keys.size()) op = YcsbOp::kRead;  // past the budget (see InsertBudget): read instead
        }
        if (op != YcsbOp::kInsert) rec = gen.NextRecord(counter.Limit());
        const std::string& key = keys[rec];
        const bool sample = (i % kLatencySampleEvery) == 0;
        const auto t0 = sample ? Clock::now() : Clock::time_point{};
        Status os;
        switch (op) {
          case YcsbOp::kRead:
            os = idx->Lookup(key, &v);
            if (os.IsNotFound()) ++st->errors, os = Status::OK();
            ++st->reads;
            break;
          case YcsbOp::kUpdate: {
            bool inserted = false;
            os = idx->Upsert(key, gen.rng().Next() | 1, &inserted);
            if (os.ok() && inserted) ++st->errors;
            ++st->updates;
            break;
          }
          case YcsbOp::kInsert:
            os = idx->Insert(key, rec + 1);
            if (os.IsAlreadyExists()) ++st->errors, os = Status::OK();
            if (os.ok()) counter.Acknowledge(rec);
            ++st->inserts;
            break;
          case YcsbOp::kScan: {
            const int len = gen.NextScanLength();
            int got = 0;
            bool first_ok = true;
            os = idx->Scan(key, nullptr, len, [&](std::string_view k, uint64_t) {
              if (got++ == 0) first_ok = k == key;
              return true;
            });
            if (os.ok() && (!first_ok || got == 0 || got > len)) ++st->errors;
            ++st->scans;
            break;
          }
          case YcsbOp::kReadModifyWrite: {
            os = idx->Lookup(key, &v);
            if (os.IsNotFound()) ++st->errors, os = Status::OK(), v = 0;
            bool inserted = false;
            if (os.ok()) os = idx->Upsert(key, v + 1, &inserted);
            if (os.ok() && inserted) ++st->errors;
            ++st->rmws;
            break;
          }
        }
        if (sample)
          st->lat.push_back(static_cast<uint32_t>(std::min<int64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(), UINT32_MAX)));
        if (!os.ok()) [[unlikely]] {
          st->status = os;
          return;
        }
      }
    });
    YcsbResult r = base;
    r.workload = YcsbName(w);
    r.request = RequestDistName(mix.latest ? RequestDist::kLatest : cfg.request);
    r = Summarize(r, secs, stats, pm::GetCounters() - before);
    add_epoch(&r, e0);
    r.alloc = AllocWaitsBetween(a0, alloc_stats());
    if (Status fs = FirstError(stats); !fs.ok()) {
      skip(fmt::format("{}: workload {} failed: {}", kind.name, YcsbName(w), fs.ToString()));
      if (first.ok()) first = fs;
      continue;
    }
    emit(r);
  }
  return first;
}

}  // namespace

const char* LoadPartitionName(LoadPartition p) {
  switch (p) {
    case LoadPartition::kSlices: return "slices";
    case LoadPartition::kFirstByte: return "first-byte";
    case LoadPartition::kIndexPerThread: return "index";
  }
  return "?";
}

bool ParseLoadPartition(const std::string& s, LoadPartition* out) {
  for (LoadPartition p : {LoadPartition::kSlices, LoadPartition::kFirstByte, LoadPartition::kIndexPerThread})
    if (s == LoadPartitionName(p)) {
      *out = p;
      return true;
    }
  return false;
}

Status ParseYcsbList(const std::string& list, std::vector<YcsbWorkload>* out) {
  std::vector<YcsbWorkload> ws;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    if (item == "all") {
      ws.assign(std::begin(kAllYcsbWorkloads), std::end(kAllYcsbWorkloads));
      continue;
    }
    YcsbWorkload w;
    if (!ParseYcsbWorkload(item, &w))
      return Status::InvalidArgument("unknown YCSB workload '" + item + "' (valid: load, a, b, c, d, e, f, or all)");
    if (std::find(ws.begin(), ws.end(), w) == ws.end()) ws.push_back(w);
  }
  if (ws.empty()) return Status::InvalidArgument("no YCSB workload named (valid: load, a, b, c, d, e, f, or all)");
  *out = std::move(ws);
  return Status::OK();
}

Status RunYcsbBench(const YcsbBenchConfig& cfg, YcsbBenchReport* report, const LogFn& log) {
  if (cfg.records == 0) return Status::InvalidArgument("--keys must be at least 1");
  if (cfg.records > 0xffffffffull) return Status::InvalidArgument("--keys must be below 2^32");
  if (cfg.indexes.empty()) return Status::InvalidArgument("no index named (valid: " + IndexNames() + ", or all)");
  if (cfg.workloads.empty()) return Status::InvalidArgument("no YCSB workload named");
  if (cfg.thread_counts.empty()) return Status::InvalidArgument("--threads names no thread count");
  for (int t : cfg.thread_counts)
    if (t < 1 || t > 256) return Status::InvalidArgument("--threads must be 1..256");
  if (cfg.partition == LoadPartition::kIndexPerThread &&
      (cfg.workloads.size() != 1 || cfg.workloads[0] != YcsbWorkload::kLoad))
    return Status::InvalidArgument("--partition index runs the load only: give --workload load");
  std::vector<const IndexKind*> kinds;
  for (const auto& name : cfg.indexes) {
    const IndexKind* k = FindIndexKind(name);
    if (!k) return Status::InvalidArgument("unknown index '" + name + "' (valid: " + IndexNames() + ", or all)");
    kinds.push_back(k);
  }
  PmSettings pm_settings;
  WORT_RETURN_IF_ERROR(pm_settings.Apply(cfg.common));
  report->env = CaptureEnvironment();
  if (log) log(FormatYcsbConfig(cfg, report->env));

  const uint64_t ops = cfg.ops ? cfg.ops : cfg.records;
  uint64_t budget = 0;
  bool latest = false;
  for (YcsbWorkload w : cfg.workloads) {
    budget += InsertBudget(w, ops);
    latest |= YcsbSpec(w).latest;
  }
  const std::vector<std::string> keys = GenerateKeys(cfg.dist, cfg.records + budget, cfg.common.seed);
  if (keys.size() < cfg.records + budget)
    return Status::InvalidArgument(fmt::format("the {} workload has only {} keys; {} needed ({} records + {} inserts)",
                                               DistName(cfg.dist), keys.size(), cfg.records + budget, cfg.records,
                                               budget));
  const double zetan_n = latest ? Zeta(cfg.records, kZipfianTheta) : 0;  // shared by every thread of d

  Status first;
  for (const IndexKind* k : kinds) {
    for (int t : cfg.thread_counts) {
      Status s = RunOne(cfg, *k, t, keys, zetan_n, report, log);
      if (!s.ok() && first.ok()) first = s;
      ReleaseFreedMemory();
    }
  }
  return first;
}

std::string FormatYcsbConfig(const YcsbBenchConfig& cfg, const Environment& env) {
  std::string s = "# wort bench ycsb\n";
  std::string idx, ws, th;
  auto join = [](std::string* to, const std::string& item) {
    if (!to->empty()) to->push_back(',');
    to->append(item);
  };
  for (const auto& i : cfg.indexes) join(&idx, i);
  for (YcsbWorkload w : cfg.workloads) join(&ws, YcsbName(w));
  for (int t : cfg.thread_counts) join(&th, std::to_string(t));
  s += fmt::format("index:          {}\n", idx);
  s += fmt::format("workloads:      {}\n", ws);
  s += fmt::format("records:        {} ({} keys)\n", cfg.records, DistName(cfg.dist));
  s += fmt::format("ops/workload:   {}\n", cfg.ops ? cfg.ops : cfg.records);
  s += fmt::format("requests:       {} (workload d: latest)\n", RequestDistName(cfg.request));
  s += fmt::format("thread counts:  {}\n", th);
  if (cfg.partition != LoadPartition::kSlices)
    s += fmt::format("load split:     {} (--partition)\n", LoadPartitionName(cfg.partition));
  s += fmt::format("flush:          {}, write latency {} ns\n", env.flush, env.write_latency_ns);
  s += fmt::format("seed:           {}\n", cfg.common.seed);
  s += fmt::format("cpu:            {} ({} hardware threads)\n", env.cpu, env.cpus);
  s += fmt::format("date:           {}\n", env.timestamp);
  s += fmt::format("git commit:     {}\n", env.git_commit);
  return s;
}

std::string FormatYcsbResults(const YcsbBenchReport& r) {
  std::string s = fmt::format("{:<10} {:<9} {:<5} {:<8} {:>7} {:>9} {:>10} {:>10} {:>9} {:>9} {:>10} {:>7}\n", "index",
                              "dist", "work", "request", "threads", "Mops/s", "ns/op", "cpu-ns/op", "p50-ns", "p99-ns",
                              "flushes/op", "errors");
  for (const auto& x : r.results)
    s += fmt::format("{:<10} {:<9} {:<5} {:<8} {:>7} {:>9.3f} {:>10.1f} {:>10.1f} {:>9.0f} {:>9.0f} {:>10.2f} {:>7}\n",
                     x.index, x.dist, x.workload, x.request, x.threads, x.mops_per_s, x.ns_per_op, x.cpu_ns_per_op,
                     x.p50_ns, x.p99_ns, x.flushes_per_op, x.errors);
  for (const auto& k : r.skipped) s += fmt::format("skipped: {}\n", k.reason);
  return s;
}

nlohmann::json ToJson(const YcsbResult& r, const YcsbBenchConfig& cfg, const Environment& env) {
  nlohmann::json j;
  j["bench"] = "ycsb";
  j["index"] = r.index;
  j["dist"] = r.dist;
  j["key_type"] = r.key_type;
  j["workload"] = r.workload;
  j["request"] = r.request;
  j["threads"] = r.threads;
  j["records"] = r.records;
  j["ops"] = r.ops;
  j["seconds"] = r.seconds;
  j["mops_per_s"] = r.mops_per_s;
  j["ns_per_op"] = r.ns_per_op;
  j["cpu_ns_per_op"] = r.cpu_ns_per_op;
  j["p50_ns"] = r.p50_ns;
  j["p99_ns"] = r.p99_ns;
  j["flushes_per_op"] = r.flushes_per_op;
  j["fences_per_op"] = r.fences_per_op;
  j["reads"] = r.reads;
  j["updates"] = r.updates;
  j["inserts"] = r.inserts;
  j["scans"] = r.scans;
  j["rmws"] = r.rmws;
  j["errors"] = r.errors;
  j["user_ns_per_op"] = r.user_ns_per_op;
  j["sys_ns_per_op"] = r.sys_ns_per_op;
  j["faults_per_op"] = r.faults_per_op;
  j["vol_switches"] = r.vol_switches;
  j["invol_switches"] = r.invol_switches;
  j["epoch_advances"] = r.epoch_advances;
  j["epoch_tries"] = r.epoch_tries;
  j["epoch_blocked"] = r.epoch_blocked;
  j["partition"] = r.partition;
  AddAllocWaitsJson(r.alloc, &j);
  j["span_bits"] = cfg.span_bits;
  AddEnvJson(env, cfg.common.seed, &j);
  return j;
}

Status WriteKeyFile(Dist d, size_t n, uint64_t seed, const std::string& path) {
  if (!IsIntegerDist(d)) return Status::InvalidArgument(std::string("--keys-out needs an integer distribution, not ") + DistName(d));
  // The same calls as RunIndexBench: the keys, then the search phase's order.
  const std::vector<uint64_t> keys = GenerateU64Keys(d, n, seed);  // = GenerateKeys, decoded
  const std::vector<uint32_t> order = Permutation(keys.size(), seed + 101);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::IOError("cannot create " + path);
  const uint64_t count = keys.size();
  bool ok = std::fwrite("WORTKEYS", 1, 8, f) == 8 && std::fwrite(&count, 8, 1, f) == 1;
  if (ok && count) ok = std::fwrite(keys.data(), 8, count, f) == count;
  if (ok && !order.empty()) ok = std::fwrite(order.data(), 4, order.size(), f) == order.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return Status::IOError("writing " + path + " failed");
  return Status::OK();
}

}  // namespace wort::bench
