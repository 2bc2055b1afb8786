// The benchmark library (see bench.h for what is measured and how).
#include "bench/bench.h"
#include "wort/version.h"

#include <fmt/core.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <source_location>
#include <thread>
#include <tuple>
#include <type_traits>

#include "bench/bench_internal.h"
#include "index/hash/hash_common.h"
#include "index/kind_ids.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort::bench {
using namespace detail;
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(pos, comma - pos);
    const auto b = item.find_first_not_of(" \t");
    const auto e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    if (!item.empty()) out.push_back(item);
    pos = comma + 1;
  }
  return out;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        const auto b = line.find_first_not_of(' ', colon + 1);
        return b == std::string::npos ? "" : line.substr(b);
      }
    }
  }
  return "unknown";
}

// The commit the binary was built from, with "-dirty" when tracked files differed from it
// (baked in at build time: cmake/git_commit.cmake); $WORT_GIT_COMMIT overrides it.
std::string GitCommit() {
  if (const char* env = std::getenv("WORT_GIT_COMMIT"); env && *env) return env;
  return BuildGitCommit();
}

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace
namespace detail {

// The pool file a run uses: --pool as given, or /dev/shm/wort-bench-<pid>-<index>.pool per index.
std::string DefaultPoolPath(const CommonConfig& c, const std::string& suffix) {
  std::string base = c.pool_path.empty() ? fmt::format("/dev/shm/wort-bench-{}", getpid()) : c.pool_path;
  if (c.pool_path.empty()) return base + (suffix.empty() ? "" : "-" + suffix) + ".pool";
  return suffix.empty() ? base : base + "." + suffix;
}

PoolOptions BenchPoolOptions(const CommonConfig& c) {
  PoolOptions o;
  o.max_size = c.pool_size ? c.pool_size : (16ull << 30);
  o.initial_size = std::min<uint64_t>(c.pool_initial ? c.pool_initial : 64ull << 20, o.max_size);
  o.background_recovery = false;
  o.sync = c.pool_sync;
  return o;
}

Status CreateBenchPool(const CommonConfig& c, const std::string& path, std::unique_ptr<Pool>* out) {
  if (access(path.c_str(), F_OK) == 0)
    return Status::AlreadyExists("pool file " + path + " exists; remove it or choose another --pool");
  Status s = Pool::Create(path, BenchPoolOptions(c), out);
  if (!s.ok()) return Status(s.code(), "creating pool " + path + ": " + s.message());
  return s;
}

// CPU time of the calling thread: unlike wall time, it does not grow while the thread waits
// for a core, so it stays meaningful on a machine shared with other work.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// A random permutation of 0..n-1 (the dense workload, shifted).
std::vector<uint32_t> Permutation(size_t n, uint64_t seed) {
  const std::vector<uint64_t> d = GenerateU64Keys(Dist::kDense, n, seed);
  std::vector<uint32_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint32_t>(d[i] - 1);
  return p;
}

BenchIndex::~BenchIndex() {
  idx.reset();
  if (pool) {
    Status cs = pool->Close();
    if (!cs.ok()) fmt::print(stderr, "wort bench: closing {}: {}\n", path, cs.ToString());
    pool.reset();
  }
  if (!path.empty() && !keep) unlink(path.c_str());
}

Status BenchIndex::Create(const CommonConfig& c, const std::string& file, const IndexKind& kind, bool u64,
                          uint32_t span_bits, std::string* why, const IndexOptions& base) {
  Status s = CreateBenchPool(c, file, &pool);
  if (!s.ok()) {
    *why = std::string(kind.name) + ": " + s.ToString();
    return s;
  }
  path = file;
  keep = c.keep_pool;
  IndexOptions opts = base;
  opts.key_type = u64 ? KeyType::kU64 : KeyType::kBytes;
  opts.span_bits = span_bits;
  s = CreateIndex(*pool, "bench", kind.name, opts, &idx);
  if (!s.ok()) *why = fmt::format("{}: cannot create an index with {} keys: {}", kind.name, u64 ? "u64" : "bytes", s.ToString());
  return s;
}

void AddEnvJson(const Environment& env, uint64_t seed, nlohmann::json* j) {
  (*j)["flush"] = env.flush;
  (*j)["write_latency_ns"] = env.write_latency_ns;
  (*j)["seed"] = seed;
  (*j)["timestamp"] = env.timestamp;
  (*j)["git_commit"] = env.git_commit;
  (*j)["wort_version"] = env.wort_version;
  (*j)["cpu"] = env.cpu;
  (*j)["host"] = env.host;
}

}  // namespace detail

AllocWaits AllocWaitsBetween(const AllocStats& a, const AllocStats& b) {
  AllocWaits w;
  w.lock_acquisitions = b.lock_acquisitions - a.lock_acquisitions;
  w.lock_waits = b.lock_waits - a.lock_waits;
  w.grows = b.grows - a.grows;
  w.grows_ahead = b.grows_ahead - a.grows_ahead;
  w.grow_waits = b.grow_waits - a.grow_waits;
  w.grow_ms = double(b.grow_ns - a.grow_ns) * 1e-6;
  w.grow_wait_ms = double(b.grow_wait_ns - a.grow_wait_ns) * 1e-6;
  w.file_chunks = b.chunks_total;
  return w;
}

void AddAllocWaitsJson(const AllocWaits& w, nlohmann::json* j) {
  (*j)["alloc_lock_acquisitions"] = w.lock_acquisitions;
  (*j)["alloc_lock_waits"] = w.lock_waits;
  (*j)["pool_grows"] = w.grows;
  (*j)["pool_grows_ahead"] = w.grows_ahead;
  (*j)["pool_grow_ms"] = w.grow_ms;
  (*j)["pool_grow_waits"] = w.grow_waits;
  (*j)["pool_grow_wait_ms"] = w.grow_wait_ms;
  (*j)["pool_file_mib"] = w.file_chunks;  // 1 MiB chunks
}

std::string FormatAllocWaits(const AllocWaits& w) {
  return fmt::format("alloc lock {} waits of {}, pool grown {}x ({} ahead, {:.1f} ms), {} grow waits {:.1f} ms",
                     w.lock_waits, w.lock_acquisitions, w.grows, w.grows_ahead, w.grow_ms, w.grow_waits,
                     w.grow_wait_ms);
}

namespace {

// Runs fn(i, &wrong) for i in [0, n), split into `threads` contiguous slices, and times the
// whole (wall clock, from the release of all threads to the last one finishing). The first
// non-OK status stops every thread.
struct PhaseOutcome {
  double seconds = 0;
  double cpu_seconds = 0;  // summed over the threads
  pm::Counters counters;
  uint64_t msyncs = 0;     // sync mode
  uint64_t wrong = 0;
  uint64_t done = 0;  // operations completed (n unless a failure stopped the phase)
  Status status;
};

// While a long phase runs, a line on the terminal (stderr, only when it is one) with how far it
// got and an estimate of the time left; erased when the phase ends. Nothing when stderr is a file
// or a pipe, so logs and JSON output are the same as without it.
class PhaseProgress {
 public:
  PhaseProgress(const char* what, size_t n) : what_(what), n_(n) {
    if (n >= 200000 && ::isatty(STDERR_FILENO)) th_ = std::thread([this] { Loop(); });
  }
  ~PhaseProgress() {
    if (!th_.joinable()) return;
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    th_.join();
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  void Add(uint64_t k) { done_.fetch_add(k, std::memory_order_relaxed); }

 private:
  void Loop() {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> g(mu_);
    while (!cv_.wait_for(g, std::chrono::milliseconds(500), [&] { return stop_; })) {
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double f = std::min(1.0, double(done_.load(std::memory_order_relaxed)) / double(n_));
      const double eta = f > 0 ? el * (1 - f) / f : 0;
      std::fprintf(stderr, "\r\033[K  %s: %3.0f%% of %zu ops, %.0f s, about %.0f s left", what_, f * 100, n_, el, eta);
      std::fflush(stderr);
    }
  }
  const char* what_;
  size_t n_;
  std::atomic<uint64_t> done_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread th_;
};

// A phase counted alone by `perf stat` / `perf record` (scripts/insert_perf.sh, issue 31): perf
// runs the benchmark with its events disabled (`-D -1 --control fifo:CTL,ACK`), and with
// WORT_PERF_CTL=CTL and WORT_PERF_ACK=ACK in the environment the phases named by WORT_PERF_PHASE
// (default "insert") send "enable" before their first operation and "disable" after their last,
// each waiting for perf's "ack": the counts then cover those phases' operations and nothing else
// (no key generation, no pool creation, no checks). Without WORT_PERF_CTL it does nothing.
class PerfWindow {
 public:
  explicit PerfWindow(const char* what) {
    const char* ctl = std::getenv("WORT_PERF_CTL");
    if (ctl == nullptr || *ctl == '\0') return;
    const char* phase = std::getenv("WORT_PERF_PHASE");
    if (std::string_view(phase && *phase ? phase : "insert") != what) return;
    ctl_ = std::fopen(ctl, "w");
    if (const char* ack = std::getenv("WORT_PERF_ACK"); ack && *ack) ack_ = std::fopen(ack, "r");
    if (ctl_ == nullptr) std::fprintf(stderr, "wort bench: WORT_PERF_CTL %s cannot be opened; the phase is not counted\n", ctl);
    Send("enable");
  }
  ~PerfWindow() {
    Send("disable");
    if (ctl_) std::fclose(ctl_);
    if (ack_) std::fclose(ack_);
  }
  PerfWindow(const PerfWindow&) = delete;
  PerfWindow& operator=(const PerfWindow&) = delete;

 private:
  void Send(const char* cmd) {
    if (ctl_ == nullptr) return;
    std::fprintf(ctl_, "%s\n", cmd);
    std::fflush(ctl_);
    char line[16];
    if (ack_ && std::fgets(line, sizeof line, ack_) == nullptr) {  // perf is gone: count nothing more
      std::fclose(ack_);
      ack_ = nullptr;
    }
  }
  FILE* ctl_ = nullptr;
  FILE* ack_ = nullptr;
};

// fn(i, &wrong) returns the operation's Status; or, for a phase whose loop must stay lean (the
// lookups: at millions of keys each instruction per operation costs time, doc/concurrency.md),
// fn(i, &wrong, &err) returns false and sets err on a failure - no Status returned by value per
// operation.
template <class Fn>
PhaseOutcome RunPhase(int threads, size_t n, const Fn& fn, const char* what = "phase") {
  constexpr bool kLean = std::is_invocable_r_v<bool, const Fn&, size_t, uint64_t*, Status*>;
  PhaseOutcome out;
  threads = std::max(1, threads);
  PhaseProgress progress(what, n);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> wrong{0}, done{0};
  std::mutex mu;
  double cpu = 0;
  auto body = [&](size_t begin, size_t end) {
    const double c0 = ThreadCpuSeconds();
    uint64_t w = 0, d = 0;
    Status err;  // an operation's failure
    auto fail = [&] {
      std::lock_guard<std::mutex> g(mu);
      if (out.status.ok()) out.status = err;
      stop.store(true, std::memory_order_relaxed);
    };
    if constexpr (kLean) {
      // Blocks of 1024 operations: the inner loop does nothing but the operations (no progress
      // count, no stop check), and the operation's captures are copied into this frame instead
      // of being reloaded through a reference each time.
      const Fn f = fn;
      for (size_t blk = begin; blk < end;) {
        const size_t e = std::min(end, blk + 1024);
        size_t i = blk;
        while (i < e && f(i, &w, &err)) ++i;
        d += i - blk;
        progress.Add(i - blk);
        if (i < e) [[unlikely]] {
          fail();
          break;
        }
        blk = e;
        if (stop.load(std::memory_order_relaxed)) break;
      }
    } else {
      for (size_t i = begin; i < end; ++i) {
        Status s = fn(i, &w);
        if (!s.ok()) [[unlikely]] {
          err = std::move(s);
          fail();
          break;
        }
        ++d;
        if ((d & 1023) == 0) [[unlikely]] {
          progress.Add(1024);
          if (stop.load(std::memory_order_relaxed)) break;
        }
      }
    }
    const double c1 = ThreadCpuSeconds();
    wrong += w;
    done += d;
    std::lock_guard<std::mutex> g(mu);
    cpu += c1 - c0;
  };
  const pm::Counters before = pm::GetCounters();
  const uint64_t msyncs_before = pm::GetSyncCounters().msyncs;
  if (threads == 1) {
    PerfWindow perf(what);
    const auto t0 = Clock::now();
    body(0, n);
    out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  } else {
    std::latch ready(threads + 1), go(1);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      const size_t b = n * t / threads, e = n * (t + 1) / threads;
      ts.emplace_back([&, b, e] {
        ready.count_down();
        go.wait();
        body(b, e);
      });
    }
    ready.arrive_and_wait();
    PerfWindow perf(what);
    const auto t0 = Clock::now();
    go.count_down();
    for (auto& t : ts) t.join();
    out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  out.counters = pm::GetCounters() - before;
  out.msyncs = pm::GetSyncCounters().msyncs - msyncs_before;
  out.wrong = wrong.load();
  out.done = done.load();
  out.cpu_seconds = cpu;
  return out;
}

std::string Explain(const Status& s, const std::string& index, const std::string& phase, uint64_t done,
                    const CommonConfig& c) {
  if (s.IsPoolFull())
    return fmt::format("{}: pool full during {} after {} operations (pool max size {} bytes); allow a larger pool "
                       "with --pool-size",
                       index, phase, done, BenchPoolOptions(c).max_size);
  return fmt::format("{}: {} failed after {} operations: {}", index, phase, done, s.ToString());
}

// The restart phase (see bench.h). On return *pool/*idx hold the cleanly reopened index, or
// are empty if reopening failed.
Status BenchRestart(const IndexBenchConfig& cfg, const IndexKind& kind, const std::vector<std::string>& keys,
                    const IndexResult& base, const std::string& pool_path, std::unique_ptr<Pool>* pool,
                    std::unique_ptr<Index>* idx, IndexBenchReport* report, const LogFn& log) {
  const size_t n = keys.size();
  // The kill image: the file as it is now. Every operation has returned, so it holds all of
  // them; what it lacks is the clean close (the allocator's bitmaps, the clean flag).
  const std::string kill_path = pool_path + ".killed";
  std::error_code ec;
  std::filesystem::copy_file(pool_path, kill_path, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return Status::IOError("copying " + pool_path + " to " + kill_path + ": " + ec.message());
  struct Unlink {
    std::string path;
    bool keep;
    ~Unlink() {
      if (!keep) unlink(path.c_str());
    }
  } unlink_kill{kill_path, cfg.common.keep_pool};

  // Opens `path`, times Open + OpenIndex + one lookup, then checks a sample (untimed).
  auto reopen = [&](const std::string& path, bool background, const char* op, std::unique_ptr<Pool>* p,
                    std::unique_ptr<Index>* ix) -> Status {
    PoolOptions po = BenchPoolOptions(cfg.common);
    po.background_recovery = background;
    const pm::Counters before = pm::GetCounters();
    const double c0 = ThreadCpuSeconds();
    const auto t0 = Clock::now();
    Status s = Pool::Open(path, po, p);
    if (s.ok()) s = OpenIndex(**p, "bench", ix);
    uint64_t v = 0;
    if (s.ok()) s = (*ix)->Lookup(keys[0], &v);
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const double cpu = ThreadCpuSeconds() - c0;
    const pm::Counters d = pm::GetCounters() - before;
    if (!s.ok()) return Status(s.code(), fmt::format("{} of {}: {}", op, path, s.message()));
    IndexResult r = base;
    r.op = op;
    r.ops = 1;
    r.seconds = secs;
    r.ns_per_op = secs * 1e9;
    r.cpu_ns_per_op = cpu * 1e9;
    r.mops_per_s = secs > 0 ? 1e-6 / secs : 0;
    r.flushes_per_op = double(d.lines_flushed);
    r.fences_per_op = double(d.fences);
    // Values as the phases before left them: the upsert phase adds n.
    const uint64_t shift = std::find(cfg.ops.begin(), cfg.ops.end(), Op::kUpsert) != cfg.ops.end() ? n : 0;
    if (v != 1 + shift) ++r.errors;
    std::mt19937_64 rng(cfg.common.seed + 505);
    for (int i = 0; i < 1000; ++i) {
      const size_t k = rng() % n;
      if (!(*ix)->Lookup(keys[k], &v).ok() || v != k + 1 + shift) ++r.errors;
    }
    if (background) {
      Status ws = (*p)->WaitForRecovery();
      if (!ws.ok()) return Status(ws.code(), fmt::format("{} of {}: recovery: {}", op, path, ws.message()));
      r.recovery_seconds = (*p)->recovery_seconds();
    }
    if ((*ix)->Size() != n) ++r.errors;
    report->results.push_back(r);
    if (log)
      log(fmt::format("{:<10} {:<9} {:<7} {:>10.3f} ms to the first lookup ({:.3f} ms CPU){}{}", r.index, r.dist, r.op,
                      secs * 1e3, cpu * 1e3,
                      background ? fmt::format(", background GC {:.3f} ms", r.recovery_seconds * 1e3) : "",
                      r.errors ? fmt::format("  ({} WRONG)", r.errors) : ""));
    return Status::OK();
  };

  // Clean restart.
  idx->reset();
  Status s = (*pool)->Close();
  pool->reset();
  if (!s.ok()) return Status(s.code(), "closing " + pool_path + ": " + s.message());
  s = reopen(pool_path, false, "restart", pool, idx);
  if (!s.ok()) {
    idx->reset();
    pool->reset();
    return s;
  }
  // Restart after a kill, on the copy.
  std::unique_ptr<Pool> kpool;
  std::unique_ptr<Index> kidx;
  s = reopen(kill_path, true, "recover", &kpool, &kidx);
  kidx.reset();
  if (kpool) {
    Status cs = kpool->Close();
    if (s.ok() && !cs.ok()) s = cs;
  }
  return s;
}

// The keys of a timed phase in one contiguous buffer (fixed-width keys: n * width bytes, no
// offsets; otherwise offsets beside the bytes), so that fetching the key of an operation costs
// what it costs the peers' drivers (scripts/peers/driver.cc reads an 8-byte array): a
// std::vector<std::string> spends 32 bytes per key (512 MB at 16M keys), four times the memory
// that every random-order operation reaches into.
class FlatKeys {
 public:
  explicit FlatKeys(const std::vector<std::string>& keys) {
    width_ = keys.empty() ? 0 : keys[0].size();
    size_t total = 0;
    for (const std::string& k : keys) {
      total += k.size();
      if (k.size() != width_) width_ = SIZE_MAX;
    }
    bytes_.reserve(total);
    if (width_ == SIZE_MAX) offsets_.reserve(keys.size() + 1);
    for (const std::string& k : keys) {
      if (width_ == SIZE_MAX) offsets_.push_back(bytes_.size());
      bytes_.append(k);
    }
    if (width_ == SIZE_MAX) offsets_.push_back(bytes_.size());
  }
  // A copyable view (three words) for a lean per-operation loop: captured by value, its fields
  // stay in registers instead of being reloaded through a reference on every operation.
  struct View {
    const char* bytes;
    size_t width;
    const uint64_t* offsets;
    std::string_view operator[](size_t i) const {
      if (width != SIZE_MAX) [[likely]] return {bytes + i * width, width};
      return {bytes + offsets[i], offsets[i + 1] - offsets[i]};
    }
  };
  View view() const { return {bytes_.data(), width_, offsets_.data()}; }
  std::string_view operator[](size_t i) const { return view()[i]; }

 private:
  size_t width_ = 0;
  std::string bytes_;
  std::vector<uint64_t> offsets_;
};

// Counts the lines flushed per call site while installed (IndexBenchConfig::flush_sites). The
// hook installed before it (if any) still sees every flush and fence.
class SiteCounter final : public pm::Hook {
 public:
  SiteCounter() : prev_(pm::SetHook(this)) {}
  ~SiteCounter() override { pm::SetHook(prev_); }
  SiteCounter(const SiteCounter&) = delete;
  SiteCounter& operator=(const SiteCounter&) = delete;
  void OnFlushLine(const void* line, const std::source_location& w) override {
    if (prev_) prev_->OnFlushLine(line, w);
    std::lock_guard<std::mutex> g(mu_);
    ++n_[{w.file_name(), w.line(), w.function_name()}];
  }
  void OnFence(const std::source_location& w) override {
    if (prev_) prev_->OnFence(w);
  }
  // The counts since the last call, per operation of `ops`, most first; then starts over.
  std::vector<std::pair<std::string, double>> Take(uint64_t ops) {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<std::pair<std::string, double>> out;
    for (const auto& [k, c] : n_) {
      std::string file = std::get<0>(k);
      if (const size_t at = file.rfind("/src/"); at != std::string::npos) file = file.substr(at + 1);
      std::string fn = std::get<2>(k);  // "Status wort::...::F(args)": the qualified name only
      if (const size_t p = fn.find('('); p != std::string::npos) fn = fn.substr(0, p);
      if (const size_t sp = fn.rfind(' '); sp != std::string::npos) fn = fn.substr(sp + 1);
      out.emplace_back(fmt::format("{}:{} {}", file, std::get<1>(k), fn), ops ? double(c) / double(ops) : 0.0);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    n_.clear();
    return out;
  }

 private:
  pm::Hook* prev_;
  std::mutex mu_;
  std::map<std::tuple<const char*, uint32_t, const char*>, uint64_t> n_;
};

// Benchmarks one index kind; appends its results to `report`.
Status BenchOneIndex(const IndexBenchConfig& cfg, const IndexKind& kind, const std::vector<std::string>& keys,
                     IndexBenchReport* report, const LogFn& log, const std::string& pool_path) {
  const size_t n = keys.size();
  const bool u64 = IsIntegerDist(cfg.dist);
  const int threads = std::max(1, cfg.common.threads);
  auto skip = [&](const std::string& reason) { report->skipped.push_back({kind.name, reason}); };

  BenchIndex h;
  std::string why;
  Status s = h.Create(cfg.common, pool_path, kind, u64, cfg.span_bits, &why, cfg.index_options);
  if (!s.ok()) {
    skip(why);
    return s;
  }
  std::unique_ptr<Pool>& pool = h.pool;
  std::unique_ptr<Index>& idx = h.idx;

  IndexResult base;
  base.index = kind.name;
  base.dist = DistName(cfg.dist);
  base.key_type = u64 ? "u64" : "bytes";
  base.keys = n;
  base.pool_path = pool_path;
  base.durability = DurabilityName(pool->durability());

  std::unique_ptr<SiteCounter> sites;
  if (cfg.flush_sites) sites = std::make_unique<SiteCounter>();
  auto finish = [&](IndexResult r, const PhaseOutcome& p) {
    if (sites) r.flush_sites = sites->Take(p.done);
    r.ops = p.done;
    r.seconds = p.seconds;
    r.ns_per_op = p.done ? p.seconds * 1e9 / p.done : 0;
    r.cpu_ns_per_op = p.done ? p.cpu_seconds * 1e9 / p.done : 0;
    r.mops_per_s = p.seconds > 0 ? p.done / p.seconds / 1e6 : 0;
    r.flushes_per_op = p.done ? double(p.counters.lines_flushed) / p.done : 0;
    r.fences_per_op = p.done ? double(p.counters.fences) / p.done : 0;
    r.msyncs_per_op = p.done ? double(p.msyncs) / p.done : 0;
    r.errors = p.wrong;
    return r;
  };
  auto wants = [&](Op op) { return std::find(cfg.ops.begin(), cfg.ops.end(), op) != cfg.ops.end(); };
  auto logline = [&](const IndexResult& r) {
    if (log) {
      log(fmt::format("{:<10} {:<9} {:<7} {:>10.1f} ns/op {:>10.1f} cpu-ns/op {:>7.2f} flushes/op {:>7.2f} fences/op{}",
                      r.index, r.dist, r.op, r.ns_per_op, r.cpu_ns_per_op, r.flushes_per_op, r.fences_per_op,
                      r.errors ? fmt::format("  ({} WRONG)", r.errors) : ""));
      for (const auto& [site, per_op] : r.flush_sites)
        if (per_op >= 0.001) log(fmt::format("    {:>8.4f} flushes/op  {}", per_op, site));
    }
  };

  // ---- insert phase (always) --------------------------------------------------------------
  if (sites) sites->Take(0);  // the creation's flushes are no phase's
  const bool hash_kind = dynamic_cast<const hash::HashIndexBase*>(idx.get()) != nullptr;
  if (hash_kind) hash::ResetHashCounters(*idx);
  const AllocStats insert_a0 = pool->allocator().Stats();
  PhaseOutcome p =
      RunPhase(threads, n, [&](size_t i, uint64_t*) { return idx->Insert(keys[i], i + 1); }, "insert");
  const AllocWaits insert_waits = AllocWaitsBetween(insert_a0, pool->allocator().Stats());
  const hash::HashCounters insert_hc = hash_kind ? hash::GetHashCounters(*idx) : hash::HashCounters{};
  if (!p.status.ok()) {
    const std::string why = Explain(p.status, kind.name, "insert", p.done, cfg.common);
    skip(why);
    return Status(p.status.code(), why);
  }
  const IndexStats st = idx->Stats();
  base.leaf_depth = st.avg_leaf_depth;
  base.bytes_allocated = st.bytes_allocated;
  base.volatile_bytes = st.volatile_bytes;
  base.bytes_per_key = n ? double(st.bytes_allocated + st.volatile_bytes) / n : 0;
  {
    IndexResult r = base;
    r.op = "insert";
    r = finish(r, p);
    r.alloc = insert_waits;
    if (hash_kind && p.done) {
      r.has_breakdown = true;
      r.rehash_ns_per_op = double(insert_hc.rehash_ns) / double(p.done);
      r.displacement_ns_per_op = double(insert_hc.displacement_ns) / double(p.done);
    }
    if (idx->Size() != n) r.errors += 1;  // lost or duplicated keys
    if (wants(Op::kInsert)) {
      report->results.push_back(r);
      logline(r);
    }
  }
  if (log)
    log(fmt::format("{:<10} {:<9} after insert: {} keys, avg leaf depth {:.2f}, {:.1f} pool bytes/key", kind.name,
                    base.dist, idx->Size(), base.leaf_depth, base.bytes_per_key));

  Status first_failure;
  auto fail = [&](const PhaseOutcome& ph, const char* phase) {
    const std::string why = Explain(ph.status, kind.name, phase, ph.done, cfg.common);
    skip(why);
    if (first_failure.ok()) first_failure = Status(ph.status.code(), why);
  };

  // ---- search ------------------------------------------------------------------------------
  if (wants(Op::kSearch)) {
    const std::vector<uint32_t> order = Permutation(n, cfg.common.seed + 101);
    const FlatKeys flat(keys);
    // Captured by value: the loop reloads nothing through a reference per lookup.
    p = RunPhase(threads, n, [ord = order.data(), keys = flat.view(), ix = idx.get()](size_t i, uint64_t* wrong,
                                                                                     Status* err) {
      const uint32_t k = ord[i];
      uint64_t v = 0;
      Status ls = ix->Lookup(keys[k], &v);
      if (ls.ok() && v == k + 1) [[likely]] return true;
      if (ls.ok() || ls.IsNotFound()) {
        ++*wrong;
        return true;
      }
      *err = std::move(ls);
      return false;
    }, "search");
    IndexResult r = base;
    r.op = "search";
    r = finish(r, p);
    if (!p.status.ok()) fail(p, "search");
    report->results.push_back(r);
    logline(r);
  }

  // ---- scan --------------------------------------------------------------------------------
  if (wants(Op::kScan)) {
    if (!kind.ordered) {
      skip(fmt::format("{}: scan not supported (unordered index)", kind.name));
    } else {
      const size_t scan_len =
          cfg.range_frac > 0 ? std::max<size_t>(1, static_cast<size_t>(std::llround(cfg.range_frac * n))) : cfg.scan_len;
      const size_t scans = cfg.scans ? cfg.scans : std::min<size_t>(n, 10000);
      const std::vector<std::string> starts = SampleKeys(keys, scans, cfg.common.seed + 202);
      std::atomic<uint64_t> returned{0};
      p = RunPhase(threads, starts.size(), [&](size_t i, uint64_t* wrong) {
        size_t got = 0;
        uint64_t sink = 0;
        bool first_ok = true;
        Status ss = idx->Scan(starts[i], nullptr, scan_len, [&](std::string_view key, uint64_t value) {
          if (got == 0) first_ok = key == starts[i];
          sink += value;
          ++got;
          return true;
        });
        if (ss.ok() && (!first_ok || got == 0 || got > scan_len)) ++*wrong;
        returned.fetch_add(got, std::memory_order_relaxed);
        return ss;
      }, "scan");
      IndexResult r = base;
      r.op = "scan";
      r = finish(r, p);
      r.scan_len = scan_len;
      r.keys_per_op = p.done ? double(returned.load()) / p.done : 0;
      if (p.status.code() == Code::kNotSupported) {
        skip(fmt::format("{}: scan: {}", kind.name, p.status.ToString()));
      } else {
        if (!p.status.ok()) fail(p, "scan");
        report->results.push_back(r);
        logline(r);
      }
    }
  }

  // ---- upsert ------------------------------------------------------------------------------
  if (wants(Op::kUpsert)) {
    const std::vector<uint32_t> order = Permutation(n, cfg.common.seed + 303);
    p = RunPhase(threads, n, [&](size_t i, uint64_t* wrong) {
      const uint32_t k = order[i];
      bool inserted = true;
      Status us = idx->Upsert(keys[k], k + 1 + n, &inserted);
      if (us.ok() && inserted) ++*wrong;
      return us;
    }, "upsert");
    IndexResult r = base;
    r.op = "upsert";
    r = finish(r, p);
    if (!p.status.ok()) fail(p, "upsert");
    report->results.push_back(r);
    logline(r);
  }

  // ---- restart ------------------------------------------------------------------------------
  if (wants(Op::kRestart) && kind_id::IsVolatile(kind.type_id)) {
    skip(fmt::format("{}: restart: a volatile index keeps nothing across a restart", kind.name));
  } else if (wants(Op::kRestart)) {
    Status rs = BenchRestart(cfg, kind, keys, base, pool_path, &pool, &idx, report, log);
    if (!rs.ok()) {
      skip(fmt::format("{}: restart: {}", kind.name, rs.ToString()));
      if (first_failure.ok()) first_failure = rs;
      if (!idx) return first_failure;  // nothing left to run the delete phase on
    }
  }

  // ---- delete (last: it empties the index) ---------------------------------------------------
  if (wants(Op::kDelete)) {
    const std::vector<uint32_t> order = Permutation(n, cfg.common.seed + 404);
    p = RunPhase(threads, n, [&](size_t i, uint64_t* wrong) {
      Status rs = idx->Remove(keys[order[i]]);
      if (rs.IsNotFound()) {
        ++*wrong;
        return Status::OK();
      }
      return rs;
    }, "delete");
    IndexResult r = base;
    r.op = "delete";
    r = finish(r, p);
    if (p.status.ok() && idx->Size() != 0) r.errors += 1;
    if (!p.status.ok()) fail(p, "delete");
    report->results.push_back(r);
    logline(r);
  }
  return first_failure;
}

}  // namespace

// ---- names -------------------------------------------------------------------------------

const char* OpName(Op op) {
  switch (op) {
    case Op::kInsert: return "insert";
    case Op::kSearch: return "search";
    case Op::kScan: return "scan";
    case Op::kUpsert: return "upsert";
    case Op::kRestart: return "restart";
    case Op::kDelete: return "delete";
  }
  return "?";
}

bool ParseOp(const std::string& name, Op* out) {
  for (Op op : kAllOps) {
    if (name == OpName(op)) {
      *out = op;
      return true;
    }
  }
  return false;
}

std::string IndexNames() {
  std::string s;
  for (const IndexKind* k : IndexKinds()) {
    if (!s.empty()) s += ", ";
    s += std::string(k->name);
  }
  return s.empty() ? "(none registered)" : s;
}

std::string OpNames() {
  std::string s;
  for (Op op : kAllOps) {
    if (!s.empty()) s += ", ";
    s += std::string(OpName(op));
  }
  return s;
}

std::string DistNames() {
  std::string s;
  for (Dist d : kAllDists) {
    if (!s.empty()) s += ", ";
    s += std::string(DistName(d));
  }
  return s;
}

Status ParseIndexList(const std::string& list, std::vector<std::string>* out) {
  std::vector<std::string> names;
  for (const std::string& item : SplitList(list)) {
    if (item == "all") {
      for (const IndexKind* k : IndexKinds()) names.push_back(k->name);
      continue;
    }
    if (!FindIndexKind(item))
      return Status::InvalidArgument("unknown index '" + item + "' (valid: " + IndexNames() + ", or all)");
    names.push_back(item);
  }
  if (names.empty()) return Status::InvalidArgument("no index named (valid: " + IndexNames() + ", or all)");
  // Keep the first mention of each.
  std::vector<std::string> uniq;
  for (auto& nm : names)
    if (std::find(uniq.begin(), uniq.end(), nm) == uniq.end()) uniq.push_back(nm);
  *out = std::move(uniq);
  return Status::OK();
}

Status ParseOpList(const std::string& list, std::vector<Op>* out) {
  std::vector<Op> ops;
  for (const std::string& item : SplitList(list)) {
    if (item == "all") {
      ops.assign(std::begin(kAllOps), std::end(kAllOps));
      continue;
    }
    Op op;
    if (!ParseOp(item, &op)) return Status::InvalidArgument("unknown op '" + item + "' (valid: " + OpNames() + ", or all)");
    ops.push_back(op);
  }
  if (ops.empty()) return Status::InvalidArgument("no op named (valid: " + OpNames() + ")");
  *out = std::move(ops);
  return Status::OK();
}

std::string FormatIndexOptions(const IndexOptions& o) {
  std::string s;
  auto add = [&](const std::string& x) { s += (s.empty() ? "" : ", ") + x; };
  if (o.cceh_segment_bytes) add(fmt::format("cceh segment {} B", o.cceh_segment_bytes));
  if (o.cceh_variant != CcehVariant::kDefault) add(std::string("cceh variant ") + CcehVariantName(o.cceh_variant));
  if (o.b3_no_rebalance) add("b3tree without rebalancing");
  if (o.b3_page_bytes) add(fmt::format("b3tree pages {} B", o.b3_page_bytes));
  return s;
}

void AddIndexOptionsJson(const IndexOptions& o, nlohmann::json* j) {
  if (o.cceh_segment_bytes) (*j)["option_cceh_segment_bytes"] = o.cceh_segment_bytes;
  if (o.cceh_variant != CcehVariant::kDefault) (*j)["option_cceh_variant"] = CcehVariantName(o.cceh_variant);
  if (o.b3_no_rebalance) (*j)["option_b3_rebalance"] = false;
  if (o.b3_page_bytes) (*j)["option_b3_page_bytes"] = o.b3_page_bytes;
}

const char* CcehVariantName(CcehVariant v) {
  switch (v) {
    case CcehVariant::kMsb: return "msb";
    case CcehVariant::kLsb: return "lsb";
    case CcehVariant::kExth: return "exth";
    case CcehVariant::kDefault: break;
  }
  return "default";
}

Status ParseDistName(const std::string& name, Dist* out) {
  if (!ParseDist(name, out)) return Status::InvalidArgument("unknown distribution '" + name + "' (valid: " + DistNames() + ")");
  return Status::OK();
}

// ---- environment -------------------------------------------------------------------------

Environment CaptureEnvironment() {
  Environment e;
  e.flush = pm::FlushKindName(pm::GetFlushKind());
  e.write_latency_ns = pm::GetWriteLatencyNs();
  e.cpu = CpuModel();
  e.cpus = static_cast<int>(std::thread::hardware_concurrency());
  e.timestamp = UtcNow();
  e.git_commit = GitCommit();
  e.wort_version = Version();
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) e.host = host;
  return e;
}

// ---- index bench -------------------------------------------------------------------------

Status RunIndexBench(const IndexBenchConfig& cfg, IndexBenchReport* report, const LogFn& log) {
  if (cfg.keys == 0) return Status::InvalidArgument("--keys must be at least 1");
  if (cfg.keys > 0xffffffffull) return Status::InvalidArgument("--keys must be below 2^32");
  if (cfg.indexes.empty()) return Status::InvalidArgument("no index named (valid: " + IndexNames() + ", or all)");
  if (cfg.common.threads < 1 || cfg.common.threads > 256) return Status::InvalidArgument("--threads must be 1..256");
  if (cfg.range_frac < 0 || cfg.range_frac > 1) return Status::InvalidArgument("--range-frac must be in [0, 1]");
  if (cfg.scan_len == 0) return Status::InvalidArgument("--scan-len must be at least 1");
  std::vector<const IndexKind*> kinds;
  for (const auto& name : cfg.indexes) {
    const IndexKind* k = FindIndexKind(name);
    if (!k) return Status::InvalidArgument("unknown index '" + name + "' (valid: " + IndexNames() + ", or all)");
    kinds.push_back(k);
  }
  PmSettings pm_settings;
  WORT_RETURN_IF_ERROR(pm_settings.Apply(cfg.common));
  report->env = CaptureEnvironment();
  if (log) log(FormatIndexConfig(cfg, report->env));

  std::vector<std::string> keys = GenerateKeys(cfg.dist, cfg.keys, cfg.common.seed);
  if (cfg.sorted_insert) std::sort(keys.begin(), keys.end());  // byte order = the indexes' key order
  if (keys.size() < cfg.keys && log)
    log(fmt::format("note: the {} workload has only {} keys", DistName(cfg.dist), keys.size()));
  if (keys.empty()) return Status::InvalidArgument(std::string("the ") + DistName(cfg.dist) + " workload produced no keys");

  Status first;
  for (const IndexKind* k : kinds) {
    const std::string path = DefaultPoolPath(cfg.common, kinds.size() > 1 || cfg.common.pool_path.empty() ? k->name : "");
    Status s = BenchOneIndex(cfg, *k, keys, report, log, path);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

// ---- alloc bench -------------------------------------------------------------------------

namespace {

struct AllocPattern {
  const char* name;
  size_t min_size, max_size;
};
constexpr AllocPattern kAllocPatterns[] = {{"mixed-64-1024", 64, 1024}, {"fixed-64", 64, 64}};

// One thread's share of one run: `rounds` rounds of (allocate batch, free batch in shuffled
// order), after one untimed warm-up round. Each thread times its own phases; the threads meet
// at a barrier before every phase so that the phases overlap.
struct ThreadTimes {
  double alloc_s = 0, free_s = 0;
  double alloc_cpu_s = 0, free_cpu_s = 0;
  pm::Counters alloc_c, free_c;
};

}  // namespace

Status RunAllocBench(const AllocBenchConfig& cfg, AllocBenchReport* report, const LogFn& log) {
  if (cfg.batch == 0 || cfg.ops_per_thread == 0) return Status::InvalidArgument("batch and ops must be positive");
  if (cfg.batch > 0xffffffffull) return Status::InvalidArgument("batch must be below 2^32");
  if (cfg.repeats < 1) return Status::InvalidArgument("repeats must be at least 1");
  for (int t : cfg.thread_counts)
    if (t < 1 || t > 256) return Status::InvalidArgument("thread counts must be 1..256");
  PmSettings pm_settings;
  WORT_RETURN_IF_ERROR(pm_settings.Apply(cfg.common));
  report->env = CaptureEnvironment();
  if (log) log(FormatAllocConfig(cfg, report->env));

  // glibc would give the freed batch back to the kernel (trim the heap top) after every round
  // and page-fault it in again in the next one, while the pool keeps its pages: compare the
  // steady state of both by switching trimming off for the process.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);

  const std::string path = DefaultPoolPath(cfg.common, "alloc");
  std::unique_ptr<Pool> pool;
  WORT_RETURN_IF_ERROR(CreateBenchPool(cfg.common, path, &pool));
  Allocator& alloc = pool->allocator();
  const size_t rounds = (cfg.ops_per_thread + cfg.batch - 1) / cfg.batch;
  Status failure;

  // One run of one (pattern, threads, allocator); false on an allocation failure.
  auto run_once = [&](const AllocPattern& pat, int threads, bool is_wort, AllocResult* r) {
    std::vector<ThreadTimes> times(threads);
    std::barrier<> sync(threads);
    std::atomic<bool> failed{false};
    std::mutex mu;
    auto worker = [&](int t) {
      // Same sizes and free order for both allocators (seeded by thread and pattern).
      const uint64_t seed = cfg.common.seed * 1000 + t * 10 + (&pat - kAllocPatterns);
      std::vector<size_t> sizes(cfg.batch);
      {
        const std::vector<uint64_t> rnd = GenerateU64Keys(Dist::kSparse, cfg.batch, seed);
        for (size_t i = 0; i < cfg.batch; ++i) sizes[i] = pat.min_size + rnd[i] % (pat.max_size - pat.min_size + 1);
      }
      const std::vector<uint32_t> free_order = Permutation(cfg.batch, seed + 1);
      std::vector<uint64_t> offs(cfg.batch);
      std::vector<void*> ptrs(cfg.batch);
      ThreadTimes& tt = times[t];
      for (size_t round = 0; round <= rounds; ++round) {  // round 0: warm-up, untimed
        sync.arrive_and_wait();
        // `failed` is only set in an allocation phase, which every thread has left (the
        // barrier below) before anyone gets here: all threads see the same value.
        if (failed.load()) break;
        const pm::Counters c0 = pm::ThisThreadCounters();
        const double u0 = ThreadCpuSeconds();
        const auto t0 = Clock::now();
        size_t got = cfg.batch;
        // Each block's first word is written, as its user would.
        if (is_wort) {
          for (size_t i = 0; i < cfg.batch; ++i) {
            Status s = alloc.Alloc(sizes[i], &offs[i]);
            if (!s.ok()) [[unlikely]] {
              std::lock_guard<std::mutex> g(mu);
              if (failure.ok()) failure = s;
              failed = true;
              got = i;
              break;
            }
            *pool->at<uint64_t>(offs[i]) = i;
          }
        } else {
          for (size_t i = 0; i < cfg.batch; ++i) {
            ptrs[i] = std::malloc(sizes[i]);
            *static_cast<uint64_t*>(ptrs[i]) = i;
          }
        }
        const auto t1 = Clock::now();
        const double u1 = ThreadCpuSeconds();
        const pm::Counters c1 = pm::ThisThreadCounters();
        sync.arrive_and_wait();
        if (is_wort) {
          if (got == cfg.batch) {
            for (size_t i = 0; i < cfg.batch; ++i) alloc.Free(offs[free_order[i]]);
          } else {
            for (size_t i = 0; i < got; ++i) alloc.Free(offs[i]);
          }
        } else {
          for (size_t i = 0; i < cfg.batch; ++i) std::free(ptrs[free_order[i]]);
        }
        const auto t2 = Clock::now();
        const double u2 = ThreadCpuSeconds();
        const pm::Counters c2 = pm::ThisThreadCounters();
        if (round > 0) {
          tt.alloc_s += std::chrono::duration<double>(t1 - t0).count();
          tt.free_s += std::chrono::duration<double>(t2 - t1).count();
          tt.alloc_cpu_s += u1 - u0;
          tt.free_cpu_s += u2 - u1;
          const pm::Counters da = c1 - c0, df = c2 - c1;
          tt.alloc_c.lines_flushed += da.lines_flushed;
          tt.alloc_c.fences += da.fences;
          tt.free_c.lines_flushed += df.lines_flushed;
          tt.free_c.fences += df.fences;
        }
      }
    };
    std::vector<std::thread> ts;
    for (int t = 1; t < threads; ++t) ts.emplace_back(worker, t);
    worker(0);
    for (auto& th : ts) th.join();
    if (failed) return false;
    r->allocator = is_wort ? "wort" : "malloc";
    r->pattern = pat.name;
    r->threads = threads;
    r->allocs = uint64_t(threads) * rounds * cfg.batch;
    uint64_t af = 0, afe = 0, ff = 0, ffe = 0;
    double acpu = 0, fcpu = 0;
    for (const auto& tt : times) {  // the phases overlap: wall time = the slowest thread's
      acpu += tt.alloc_cpu_s;
      fcpu += tt.free_cpu_s;
      r->alloc_seconds = std::max(r->alloc_seconds, tt.alloc_s);
      r->free_seconds = std::max(r->free_seconds, tt.free_s);
      af += tt.alloc_c.lines_flushed;
      afe += tt.alloc_c.fences;
      ff += tt.free_c.lines_flushed;
      ffe += tt.free_c.fences;
    }
    r->allocs_per_s = r->alloc_seconds > 0 ? r->allocs / r->alloc_seconds : 0;
    r->frees_per_s = r->free_seconds > 0 ? r->allocs / r->free_seconds : 0;
    r->ns_per_alloc = r->allocs ? r->alloc_seconds * 1e9 / r->allocs : 0;
    r->ns_per_free = r->allocs ? r->free_seconds * 1e9 / r->allocs : 0;
    r->cpu_ns_per_alloc = r->allocs ? acpu * 1e9 / r->allocs : 0;
    r->cpu_ns_per_free = r->allocs ? fcpu * 1e9 / r->allocs : 0;
    r->flushes_per_alloc = r->allocs ? double(af) / r->allocs : 0;
    r->fences_per_alloc = r->allocs ? double(afe) / r->allocs : 0;
    r->flushes_per_free = r->allocs ? double(ff) / r->allocs : 0;
    r->fences_per_free = r->allocs ? double(ffe) / r->allocs : 0;
    return true;
  };

  for (const AllocPattern& pat : kAllocPatterns) {
    for (int threads : cfg.thread_counts) {
      for (bool is_wort : {true, false}) {
        // The run with the highest allocation rate of `repeats` (the least disturbed by other
        // processes); its free figures are its own.
        AllocResult best;
        for (int rep = 0; rep < cfg.repeats; ++rep) {
          AllocResult r;
          if (!run_once(pat, threads, is_wort, &r)) {
            const std::string why =
                failure.IsPoolFull()
                    ? fmt::format("alloc bench: pool full (max size {} bytes); allow a larger pool with --pool-size",
                                  BenchPoolOptions(cfg.common).max_size)
                    : "alloc bench: " + failure.ToString();
            Status cs = pool->Close();
            if (!cs.ok()) fmt::print(stderr, "wort bench: closing {}: {}\n", path, cs.ToString());
            if (!cfg.common.keep_pool) unlink(path.c_str());
            return Status(failure.code(), why);
          }
          if (rep == 0 || r.allocs_per_s > best.allocs_per_s) best = r;
        }
        report->results.push_back(best);
        if (log)
          log(fmt::format("{:<7} {:<14} {} thread(s): {:>7.2f} M allocs/s {:>7.2f} M frees/s  {:.4f} flushes/alloc "
                          "{:.4f} fences/alloc",
                          best.allocator, best.pattern, best.threads, best.allocs_per_s / 1e6, best.frees_per_s / 1e6,
                          best.flushes_per_alloc, best.fences_per_alloc));
      }
    }
  }
  Status cs = pool->Close();
  pool.reset();
  if (!cfg.common.keep_pool) unlink(path.c_str());
  return cs;
}

// ---- output ------------------------------------------------------------------------------

namespace {
std::string FormatEnv(const Environment& env, const CommonConfig& c, const std::string& pools) {
  std::string s;
  s += fmt::format("flush:          {}\n", env.flush);
  s += fmt::format("write latency:  {} ns per flushed line (emulated)\n", env.write_latency_ns);
  s += fmt::format("pool:           {} (max {} bytes, {}{})\n", pools, BenchPoolOptions(c).max_size,
                   c.keep_pool ? "kept" : "removed after", c.pool_sync ? ", sync mode: persist msyncs" : "");
  if (c.threads > 0) s += fmt::format("threads:        {}\n", c.threads);
  s += fmt::format("seed:           {}\n", c.seed);
  s += fmt::format("cpu:            {} ({} hardware threads)\n", env.cpu, env.cpus);
  s += fmt::format("host:           {}\n", env.host);
  s += fmt::format("date:           {}\n", env.timestamp);
  s += fmt::format("git commit:     {} (wort {})\n", env.git_commit, env.wort_version);
  return s;
}
}  // namespace

std::string FormatIndexConfig(const IndexBenchConfig& cfg, const Environment& env) {
  std::string s = "# wort bench\n";
  std::string idx, ops;
  for (const auto& i : cfg.indexes) {
    if (!idx.empty()) idx += ",";
    idx += i;
  }
  for (Op o : cfg.ops) {
    if (!ops.empty()) ops += ",";
    ops += std::string(OpName(o));
  }
  s += fmt::format("index:          {}\n", idx);
  s += fmt::format("dist:           {}\n", DistName(cfg.dist));
  s += fmt::format("keys:           {}\n", cfg.keys);
  s += fmt::format("ops:            {}\n", ops);
  if (std::find(cfg.ops.begin(), cfg.ops.end(), Op::kScan) != cfg.ops.end()) {
    if (cfg.range_frac > 0)
      s += fmt::format("scan:           {} of the keys per range query, {} queries\n", cfg.range_frac,
                       cfg.scans ? cfg.scans : std::min<size_t>(cfg.keys, 10000));
    else
      s += fmt::format("scan:           {} keys per range query, {} queries\n", cfg.scan_len,
                       cfg.scans ? cfg.scans : std::min<size_t>(cfg.keys, 10000));
  }
  s += fmt::format("span bits:      {} (wort)\n", cfg.span_bits);
  if (cfg.sorted_insert) s += "insert order:   ascending keys (--sorted-insert)\n";
  if (const std::string ko = FormatIndexOptions(cfg.index_options); !ko.empty())
    s += fmt::format("index options:  {}\n", ko);
  std::string pools;
  for (size_t i = 0; i < cfg.indexes.size() && i < 3; ++i)
    pools += (i ? ", " : "") + DefaultPoolPath(cfg.common, cfg.indexes.size() > 1 || cfg.common.pool_path.empty()
                                                             ? cfg.indexes[i] : "");
  if (cfg.indexes.size() > 3) pools += fmt::format(", ... (one per index kind, {} in all)", cfg.indexes.size());
  s += FormatEnv(env, cfg.common, pools);
  return s;
}

std::string FormatIndexResults(const IndexBenchReport& r) {
  // Per-operation rows: time per operation over the whole phase (ns/op: wall clock; cpu-ns/op:
  // thread CPU time, robust to a busy machine), cache lines flushed and fences per operation.
  // restart/recover are one reopen each: they are listed apart, in seconds.
  bool sync = false;
  for (const auto& x : r.results) sync |= x.msyncs_per_op > 0;
  std::string s = fmt::format("{:<10} {:<9} {:<7} {:>10} {:>10} {:>9} {:>11} {:>10} {:>10} {:>10} {:>7}{}\n", "index",
                              "dist", "op", "ns/op", "cpu-ns/op", "Mops/s", "flushes/op", "fences/op", "leafdepth",
                              "bytes/key", "errors", sync ? "  msyncs/op" : "");
  std::string reopen;
  std::string durability;
  for (const auto& x : r.results) {
    if (!x.durability.empty()) durability = x.durability;
    if (x.op == "restart" || x.op == "recover") {
      reopen += fmt::format("  {:<10} {:<9} {:<7} {:.3f} s to the first lookup ({:.3f} s CPU){}{}\n", x.index, x.dist,
                            x.op, x.seconds, x.cpu_ns_per_op * 1e-9,
                            x.op == "recover" ? fmt::format(", then the post-crash GC took {:.3f} s", x.recovery_seconds)
                                              : " after a clean close",
                            x.errors ? fmt::format("  ({} WRONG)", x.errors) : "");
      continue;
    }
    s += fmt::format("{:<10} {:<9} {:<7} {:>10.1f} {:>10.1f} {:>9.3f} {:>11.2f} {:>10.2f} {:>10.2f} {:>10.1f} {:>7}{}\n",
                     x.index, x.dist, x.op, x.ns_per_op, x.cpu_ns_per_op, x.mops_per_s, x.flushes_per_op, x.fences_per_op,
                     x.leaf_depth, x.bytes_per_key, x.errors, sync ? fmt::format("  {:>9.2f}", x.msyncs_per_op) : "");
  }
  if (!reopen.empty())
    s += "reopen of the pool (restart: after a clean close; recover: a copy of the pool taken before the close, "
         "as after kill -9):\n" + reopen;
  if (!durability.empty()) s += fmt::format("pool durability: {}\n", durability);
  for (const auto& k : r.skipped) s += fmt::format("skipped: {}\n", k.reason);
  return s;
}

std::string FormatAllocConfig(const AllocBenchConfig& cfg, const Environment& env) {
  std::string s = "# wort bench alloc\n";
  std::string th;
  for (int t : cfg.thread_counts) {
    if (!th.empty()) th += ",";
    th += std::to_string(t);
  }
  s += fmt::format("patterns:       mixed-64-1024 (uniform sizes), fixed-64\n");
  s += fmt::format("per thread:     {} allocations and frees, in batches of {} (frees in shuffled order)\n",
                   cfg.ops_per_thread, cfg.batch);
  s += fmt::format("thread counts:  {}\n", th);
  s += fmt::format("repeats:        {} (the run with the best allocation rate is reported)\n", cfg.repeats);
  s += "malloc:         glibc, heap trimming off (M_TRIM_THRESHOLD 1 GiB); every block's first word is written\n";
  CommonConfig c = cfg.common;
  c.threads = 0;
  s += FormatEnv(env, c, DefaultPoolPath(cfg.common, "alloc"));
  return s;
}

std::string FormatAllocResults(const AllocBenchReport& r) {
  std::string s = fmt::format("{:<7} {:<14} {:>7} {:>10} {:>10} {:>9} {:>9} {:>13} {:>12} {:>13} {:>12}\n", "alloc",
                              "pattern", "threads", "Mallocs/s", "Mfrees/s", "ns/alloc", "ns/free", "cpu-ns/alloc",
                              "cpu-ns/free", "flushes/alloc", "fences/alloc");
  for (const auto& x : r.results)
    s += fmt::format("{:<7} {:<14} {:>7} {:>10.2f} {:>10.2f} {:>9.1f} {:>9.1f} {:>13.1f} {:>12.1f} {:>13.4f} {:>12.4f}\n",
                     x.allocator, x.pattern, x.threads, x.allocs_per_s / 1e6, x.frees_per_s / 1e6, x.ns_per_alloc,
                     x.ns_per_free, x.cpu_ns_per_alloc, x.cpu_ns_per_free, x.flushes_per_alloc, x.fences_per_alloc);
  // wort / malloc ratio per (pattern, threads).
  for (const auto& w : r.results) {
    if (w.allocator != "wort") continue;
    for (const auto& m : r.results)
      if (m.allocator == "malloc" && m.pattern == w.pattern && m.threads == w.threads && m.allocs_per_s > 0)
        s += fmt::format("wort/malloc allocation rate, {} x{}: {:.2f} by wall time, {:.2f} by CPU time\n", w.pattern,
                         w.threads, w.allocs_per_s / m.allocs_per_s,
                         w.cpu_ns_per_alloc > 0 ? m.cpu_ns_per_alloc / w.cpu_ns_per_alloc : 0.0);
  }
  return s;
}

nlohmann::json ToJson(const IndexResult& r, const IndexBenchConfig& cfg, const Environment& env) {
  nlohmann::json j;
  j["bench"] = "index";
  j["index"] = r.index;
  j["dist"] = r.dist;
  j["keys"] = r.keys;
  j["op"] = r.op;
  j["ns_per_op"] = r.ns_per_op;
  j["cpu_ns_per_op"] = r.cpu_ns_per_op;
  j["mops_per_s"] = r.mops_per_s;
  j["flushes_per_op"] = r.flushes_per_op;
  j["fences_per_op"] = r.fences_per_op;
  if (r.has_breakdown) {
    j["rehash_ns_per_op"] = r.rehash_ns_per_op;
    j["displacement_ns_per_op"] = r.displacement_ns_per_op;
  }
  if (cfg.flush_sites) {
    nlohmann::json fs = nlohmann::json::object();
    for (const auto& [site, per_op] : r.flush_sites) fs[site] = per_op;
    j["flush_sites"] = fs;
  }
  j["leaf_depth"] = r.leaf_depth;
  j["bytes_per_key"] = r.bytes_per_key;
  j["bytes_allocated"] = r.bytes_allocated;
  j["volatile_bytes"] = r.volatile_bytes;
  j["ops"] = r.ops;
  j["seconds"] = r.seconds;
  j["errors"] = r.errors;
  j["key_type"] = r.key_type;
  if (r.op == "recover") j["recovery_seconds"] = r.recovery_seconds;
  if (r.op == "insert") AddAllocWaitsJson(r.alloc, &j);
  j["durability"] = r.durability;
  j["pool_sync"] = cfg.common.pool_sync;
  if (cfg.common.pool_sync) j["msyncs_per_op"] = r.msyncs_per_op;
  if (r.op == "scan") {
    j["scan_len"] = r.scan_len;
    j["keys_per_op"] = r.keys_per_op;
    if (cfg.range_frac > 0) j["range_frac"] = cfg.range_frac;
  }
  j["span_bits"] = cfg.span_bits;
  j["insert_order"] = cfg.sorted_insert ? "sorted" : "random";
  j["threads"] = cfg.common.threads;
  AddIndexOptionsJson(cfg.index_options, &j);
  AddEnvJson(env, cfg.common.seed, &j);
  return j;
}

nlohmann::json ToJson(const AllocResult& r, const AllocBenchConfig& cfg, const Environment& env) {
  nlohmann::json j;
  j["bench"] = "alloc";
  j["allocator"] = r.allocator;
  j["pattern"] = r.pattern;
  j["threads"] = r.threads;
  j["allocs"] = r.allocs;
  j["allocs_per_s"] = r.allocs_per_s;
  j["frees_per_s"] = r.frees_per_s;
  j["ns_per_alloc"] = r.ns_per_alloc;
  j["ns_per_free"] = r.ns_per_free;
  j["cpu_ns_per_alloc"] = r.cpu_ns_per_alloc;
  j["cpu_ns_per_free"] = r.cpu_ns_per_free;
  j["flushes_per_alloc"] = r.flushes_per_alloc;
  j["fences_per_alloc"] = r.fences_per_alloc;
  j["flushes_per_free"] = r.flushes_per_free;
  j["fences_per_free"] = r.fences_per_free;
  j["batch"] = cfg.batch;
  AddEnvJson(env, cfg.common.seed, &j);
  return j;
}

Status AppendJsonLines(const std::string& path, const std::vector<nlohmann::json>& records) {
  std::ofstream out(path, std::ios::app);
  if (!out) return Status::IOError("cannot open " + path + " for appending");
  for (const auto& j : records) out << j.dump() << '\n';
  out.flush();
  if (!out) return Status::IOError("writing " + path + " failed");
  return Status::OK();
}

}  // namespace wort::bench
