// src/bench/remote_bench.cc - `wort bench-remote` (remote_bench.h).
#include "bench/remote_bench.h"

#include <fmt/core.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <functional>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <thread>
#include <unordered_set>

#include "bench/bench_internal.h"
#include "remote/designs.h"

namespace wort::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::size_t k = std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

std::string Value(std::uint64_t i) {
  std::string v = fmt::format("v{:014d}", i % 100000000000000ull);  // 15 bytes
  return v;
}

// n distinct keys of 16 random letters and digits (the paper's "random String" keys).
std::vector<std::string> RandomStringKeys(std::size_t n, std::uint64_t seed) {
  static constexpr char kChars[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::mt19937_64 rng(seed);
  std::unordered_set<std::string> seen;
  std::vector<std::string> keys;
  keys.reserve(n);
  while (keys.size() < n) {
    std::string k(16, ' ');
    for (char& c : k) c = kChars[rng() % (sizeof(kChars) - 1)];
    if (seen.insert(k).second) keys.push_back(std::move(k));
  }
  return keys;
}

// The mixes: percentage of reads (the rest are updates).
bool MixReadPercent(const std::string& mix, int* pct) {
  if (mix == "write-only") *pct = 0;
  else if (mix == "50:50") *pct = 50;
  else if (mix == "95:5") *pct = 95;
  else if (mix == "read-only") *pct = 100;
  else return false;
  return true;
}

struct Run {
  const RemoteBenchConfig& cfg;
  const remote::RemoteDesign* design;
  remote::RegionInfo info;
  bool server_here;
  bool print;
  std::vector<RemoteResult>* out;

  RemoteResult Base(const std::string& op, int threads) const {
    RemoteResult r;
    r.design = design->name;
    r.backend = info.backend;
    r.tls = info.backend == "ucx" ? (std::getenv("UCX_TLS") ? std::getenv("UCX_TLS") : "default") : "";
    r.op = op;
    r.threads = threads;
    return r;
  }

  void Emit(RemoteResult r) {
    if (print) {
      fmt::print("{:<12} {:<6} {:<7} {:<16} {:>7} {:>9} {:>11.0f} {:>10.1f} {:>10.1f} {:>12.0f} {:>12.0f} {:>7} {:>8}\n", r.design,
                 r.backend, r.tls.empty() ? "-" : r.tls, r.op, r.threads, r.ops, r.ops_per_s, r.p50_ns / 1e3, r.p99_ns / 1e3,
                 r.cpu_ns_per_op, r.server_cpu_ns_per_op, r.errors,
                 r.resizes_per_op < 0 ? std::string("-") : fmt::format("{:.2f}", 100 * r.resizes_per_op));
      std::fflush(stdout);
    }
    out->push_back(std::move(r));
  }

  // One client (this thread): fn(i) for i in [0, n), each timed.
  // fn(kv, i); with connect = false kv is null and fn uses its own client (transport phases).
  template <class Fn>
  Status Single(const std::string& op, std::size_t n, Fn fn, RemoteResult* res = nullptr, bool connect = true,
                bool writes = false) {
    std::unique_ptr<remote::RemoteKV> kv;
    if (connect) WORT_RETURN_IF_ERROR(design->connect(info, &kv));
    RemoteResult r = Base(op, 1);
    std::vector<double> lat;
    lat.reserve(n);
    remote::Connection::Counters c0;
    std::uint64_t f0 = 0;
    if (kv) c0 = kv->transport_counters(), f0 = kv->post_fallbacks();
    // Per op of a write phase: 1 = it requested a resize, 2 = it waited for an apply (no resize).
    std::vector<unsigned char> cause;
    const bool causes = writes && kv;
    if (causes) cause.reserve(n);
    std::uint64_t w_0 = causes ? kv->apply_waits() : 0;
    const std::uint64_t w_first = w_0;
    std::uint64_t r_0 = causes ? kv->resize_requests() : 0;
    double p0 = ProcessCpuSeconds(), t0 = detail::ThreadCpuSeconds();
    auto w0 = Clock::now();
    for (std::size_t i = 0; i < n; ++i) {
      auto a = Clock::now();
      Status s = fn(kv.get(), i);
      lat.push_back(std::chrono::duration<double, std::nano>(Clock::now() - a).count());
      if (causes) {
        const std::uint64_t w1 = kv->apply_waits(), r1 = kv->resize_requests();
        cause.push_back(r1 != r_0 ? 1 : w1 != w_0 ? 2 : 0);
        w_0 = w1, r_0 = r1;
      }
      if (!s.ok()) {
        if (r.errors++ == 0 && print) fmt::print(stderr, "wort bench-remote: {} {}: {}\n", design->name, op, s.ToString());
      }
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - w0).count();
    double client = detail::ThreadCpuSeconds() - t0, proc = ProcessCpuSeconds() - p0;
    if (causes && n) {
      std::vector<double> quiet, resized;
      for (std::size_t i = 0; i < n; ++i) {
        if (cause[i] == 0) quiet.push_back(lat[i]);
        if (cause[i] == 1) resized.push_back(lat[i]);
      }
      auto mean = [](const std::vector<double>& v) {
        double s = 0;
        for (double x : v) s += x;
        return s / static_cast<double>(v.size());
      };
      r.apply_waits_per_op = static_cast<double>(w_0 - w_first) / static_cast<double>(n);
      if (!quiet.empty()) {
        r.quiet_mean_ns = mean(quiet);
        r.quiet_p50_ns = Percentile(quiet, 0.50), r.quiet_p99_ns = Percentile(quiet, 0.99);
      }
      if (!resized.empty()) r.resize_mean_ns = mean(resized), r.resize_p50_ns = Percentile(resized, 0.50);
      std::vector<double> sorted = lat;
      const double p99 = Percentile(sorted, 0.99);
      std::size_t tail = 0, rs = 0, ws = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (lat[i] >= p99) ++tail, rs += cause[i] == 1, ws += cause[i] == 2;
      if (tail) r.tail_resize_share = static_cast<double>(rs) / static_cast<double>(tail),
                r.tail_wait_share = static_cast<double>(ws) / static_cast<double>(tail);
    }
    Finish(&r, n, lat, client, proc);
    if (kv) {
      remote::Connection::Counters d = kv->transport_counters();
      AddCounters(&d, c0, false);
      SetPerOp(&r, d, n);
      if (writes && n) r.resizes_per_op = static_cast<double>(kv->resize_requests()) / static_cast<double>(n);
      if (writes && n) r.post_fallbacks_per_op = static_cast<double>(kv->post_fallbacks() - f0) / static_cast<double>(n);
    }
    if (res) *res = r;
    Emit(r);
    return Status::OK();
  }

  // *sum += c (add) or *sum -= c (subtract; counters only grow, so no underflow).
  static void AddCounters(remote::Connection::Counters* sum, const remote::Connection::Counters& c, bool add) {
    auto f = [add](std::uint64_t& a, std::uint64_t b) { a = add ? a + b : a - b; };
    f(sum->reads, c.reads);
    f(sum->writes, c.writes);
    f(sum->atomics, c.atomics);
    f(sum->notifies, c.notifies);
    f(sum->bytes_read, c.bytes_read);
    f(sum->bytes_written, c.bytes_written);
  }
  static void SetPerOp(RemoteResult* r, const remote::Connection::Counters& d, std::uint64_t n) {
    if (n == 0) return;
    const double k = 1.0 / static_cast<double>(n);
    r->reads_per_op = static_cast<double>(d.reads) * k;
    r->writes_per_op = static_cast<double>(d.writes) * k;
    r->atomics_per_op = static_cast<double>(d.atomics) * k;
    r->notifies_per_op = static_cast<double>(d.notifies) * k;
    r->bytes_read_per_op = static_cast<double>(d.bytes_read) * k;
    r->bytes_written_per_op = static_cast<double>(d.bytes_written) * k;
  }

  void Finish(RemoteResult* r, std::uint64_t n, std::vector<double>& lat, double client_cpu, double proc_cpu) const {
    r->ops = n;
    r->ops_per_s = r->seconds > 0 ? static_cast<double>(n) / r->seconds : 0;
    r->p50_ns = Percentile(lat, 0.50);
    r->p99_ns = Percentile(lat, 0.99);
    r->cpu_ns_per_op = n ? client_cpu * 1e9 / static_cast<double>(n) : 0;
    if (server_here) r->server_cpu_ns_per_op = n ? std::max(0.0, proc_cpu - client_cpu) * 1e9 / static_cast<double>(n) : 0;
  }

  Status Ycsb(const std::string& mix, int threads) {
    int read_pct = 0;
    if (!MixReadPercent(mix, &read_pct)) return Status::InvalidArgument("unknown mix '" + mix + "'");
    std::vector<std::unique_ptr<remote::RemoteKV>> kvs(static_cast<std::size_t>(threads));
    for (auto& kv : kvs) WORT_RETURN_IF_ERROR(design->connect(info, &kv));
    remote::Connection::Counters before;
    for (auto& kv : kvs) AddCounters(&before, kv->transport_counters(), true);
    std::vector<std::vector<double>> lats(kvs.size());
    std::vector<double> cpus(kvs.size(), 0);
    // Wall time: from the first thread's start to the last one's end, taken by the threads (the
    // main thread's clock after a barrier can be late by a whole time slice on a loaded machine:
    // a run of 10,000 reads once measured 89 us).
    std::vector<Clock::time_point> starts(kvs.size()), ends(kvs.size());
    std::atomic<std::uint64_t> errors{0};
    std::barrier sync(threads + 1);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        std::mt19937_64 rng(cfg.seed * 1000 + static_cast<std::uint64_t>(t) + 17);
        auto& lat = lats[static_cast<std::size_t>(t)];
        lat.reserve(cfg.ycsb_ops);
        remote::RemoteKV& kv = *kvs[static_cast<std::size_t>(t)];
        std::string v;
        sync.arrive_and_wait();
        starts[static_cast<std::size_t>(t)] = Clock::now();
        double c0 = detail::ThreadCpuSeconds();
        for (std::size_t i = 0; i < cfg.ycsb_ops; ++i) {
          std::uint64_t rec = rng() % cfg.keys;
          bool read = static_cast<int>(rng() % 100) < read_pct;
          auto a = Clock::now();
          Status s = read ? kv.Get(RemoteBenchKey(rec), &v) : kv.Put(RemoteBenchKey(rec), Value(rec + i));
          lat.push_back(std::chrono::duration<double, std::nano>(Clock::now() - a).count());
          if (!s.ok()) ++errors;
        }
        cpus[static_cast<std::size_t>(t)] = detail::ThreadCpuSeconds() - c0;
        ends[static_cast<std::size_t>(t)] = Clock::now();
        sync.arrive_and_wait();
      });
    }
    double p0 = ProcessCpuSeconds();
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    RemoteResult r = Base("ycsb-" + mix, threads);
    r.seconds = std::chrono::duration<double>(*std::max_element(ends.begin(), ends.end()) -
                                              *std::min_element(starts.begin(), starts.end())).count();
    double proc = ProcessCpuSeconds() - p0;
    for (auto& t : ts) t.join();
    std::vector<double> all;
    for (auto& l : lats) all.insert(all.end(), l.begin(), l.end());
    r.errors = errors.load();
    Finish(&r, all.size(), all, std::accumulate(cpus.begin(), cpus.end(), 0.0), proc);
    remote::Connection::Counters d;
    for (auto& kv : kvs) AddCounters(&d, kv->transport_counters(), true);
    AddCounters(&d, before, false);
    SetPerOp(&r, d, all.size());
    Emit(r);
    return Status::OK();
  }

  Status All() {
    std::vector<std::uint64_t> perm(cfg.keys);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937_64(cfg.seed));
    WORT_RETURN_IF_ERROR(Single("load", cfg.keys, [&](remote::RemoteKV* kv, std::size_t i) {
      return kv->Put(RemoteBenchKey(perm[i]), Value(perm[i]));
    }, nullptr, true, true));
    WORT_RETURN_IF_ERROR(Single("put", cfg.latency_ops, [&](remote::RemoteKV* kv, std::size_t i) {
      return kv->Put(RemoteBenchKey(cfg.keys + i), Value(cfg.keys + i));
    }, nullptr, true, true));
    std::mt19937_64 rng(cfg.seed + 1);
    std::string v;
    WORT_RETURN_IF_ERROR(Single("get", cfg.latency_ops, [&](remote::RemoteKV* kv, std::size_t) {
      std::uint64_t rec = rng() % cfg.keys;
      WORT_RETURN_IF_ERROR(kv->Get(RemoteBenchKey(rec), &v));
      if (v != Value(rec)) return Status::Corruption("get returned a wrong value for record " + std::to_string(rec));
      return Status::OK();
    }));
    // Overwrites with the same value (the ranges and gets after it check values).
    WORT_RETURN_IF_ERROR(Single("update", cfg.latency_ops, [&](remote::RemoteKV* kv, std::size_t) {
      std::uint64_t rec = rng() % cfg.keys;
      return kv->Put(RemoteBenchKey(rec), Value(rec));
    }, nullptr, true, true));
    for (std::size_t range : cfg.ranges) {
      RemoteResult rr;
      WORT_RETURN_IF_ERROR(Single(
          "range-" + std::to_string(range), cfg.range_ops,
          [&](remote::RemoteKV* kv, std::size_t) {
            std::uint64_t from = rng() % (cfg.keys - range + 1);
            std::size_t got = 0;
            std::uint64_t expect = from;
            bool ordered = true;
            WORT_RETURN_IF_ERROR(kv->Scan(RemoteBenchKey(from), "", range, [&](std::string_view k, std::string_view) {
              ordered &= k == RemoteBenchKey(expect++);
              ++got;
              return true;
            }));
            if (got != range || !ordered) {
              return Status::Corruption(fmt::format("scan from record {} returned {} keys (expected {}){}", from, got, range,
                                                    ordered ? "" : ", not the next records in order"));
            }
            return Status::OK();
          },
          &rr));
      out->back().range_keys = range;
    }
    for (int t : cfg.threads)
      for (const auto& mix : cfg.mixes) WORT_RETURN_IF_ERROR(Ycsb(mix, t));
    // New keys spread over the key space: record j's key with its last digit replaced by one of
    // ':' ';' '<' '=' '>' '?' (after '9': the key sorts after record j's decade and before the
    // next); decades in a random order, each suffix used once per decade.
    const std::uint64_t decades = (cfg.keys + 9) / 10;
    std::vector<std::uint64_t> order(decades);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(cfg.seed + 2));
    const std::size_t n = std::min<std::size_t>(cfg.latency_ops, decades * 6);
    WORT_RETURN_IF_ERROR(Single("put-random", n, [&](remote::RemoteKV* kv, std::size_t i) {
      std::string k = RemoteBenchKey(order[i % decades] * 10);
      k.back() = static_cast<char>(':' + i / decades);
      return kv->Put(k, Value(i));
    }, nullptr, true, true));
    // The paper's latency workload (section 4.1: "random String workload"): new keys of 16 random
    // letters and digits, drawn up front (distinct), each read back after the phase. They sort
    // around the records' "key..." prefix, not between two records, so the ranges above are not
    // disturbed (this phase runs last anyway).
    std::vector<std::string> strings = RandomStringKeys(cfg.latency_ops, cfg.seed + 3);
    WORT_RETURN_IF_ERROR(Single("put-string", strings.size(), [&](remote::RemoteKV* kv, std::size_t i) {
      return kv->Put(strings[i], Value(i));
    }, nullptr, true, true));
    std::unique_ptr<remote::RemoteKV> check;
    WORT_RETURN_IF_ERROR(design->connect(info, &check));
    for (std::size_t i = 0; i < strings.size(); ++i) {
      WORT_RETURN_IF_ERROR(check->Get(strings[i], &v));
      if (v != Value(i)) return Status::Corruption("put-string: key " + std::to_string(i) + " reads back a wrong value");
    }
    return Status::OK();
  }
};

void PrintHeader() {
  fmt::print("{:<12} {:<6} {:<7} {:<16} {:>7} {:>9} {:>11} {:>10} {:>10} {:>12} {:>12} {:>7} {:>8}\n", "design", "backend",
             "tls", "op", "threads", "ops", "ops/s", "p50_us", "p99_us", "cpu_ns/op", "srv_cpu_ns/op", "errors", "resize%");
}

// The transport's operations, one client, each timed (RemoteBenchConfig::transport).
Status TransportBench(const RemoteBenchConfig& cfg, bool print, std::vector<RemoteResult>* out) {
  const std::string path = fmt::format("{}/wort-bench-transport-{}.region", cfg.dir, ::getpid());
  constexpr std::uint64_t kSize = 1 << 20;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ::ftruncate(fd, kSize) != 0) {
    if (fd >= 0) ::close(fd);
    return Status::IOError("cannot create " + path);
  }
  void* base = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return Status::IOError("cannot map " + path);
  std::atomic<std::uint64_t> notified{0};
  std::unique_ptr<remote::Server> srv;
  Status s = remote::Listen(cfg.backend, base, kSize, path, [&](std::uint32_t, std::string_view) { ++notified; }, &srv);
  std::unique_ptr<remote::Connection> c;
  if (s.ok()) s = remote::Connect(srv->info(), &c);
  if (s.ok()) {
    remote::RemoteDesign d{"transport", "", nullptr, nullptr};
    Run run{cfg, &d, srv->info(), true, print, out};
    char buf[2048] = {};
    std::uint64_t old;
    struct {
      const char* op;
      std::function<Status(std::size_t)> fn;
    } ops[] = {
        {"read-8", [&](std::size_t i) { return c->Read(64 * (i % 1024), buf, 8); }},
        {"read-2048", [&](std::size_t i) { return c->Read(2048 * (i % 256), buf, 2048); }},
        {"write-64", [&](std::size_t i) { return c->Write(64 * (i % 1024), buf, 64); }},
        {"fetch-add", [&](std::size_t i) { return c->FetchAdd64(8 * (i % 1024), 1, &old); }},
        {"compare-swap", [&](std::size_t i) { return c->CompareSwap64(8 * (i % 1024), i, i + 1, &old); }},
        {"notify", [&](std::size_t) { return c->Notify("0123456789abcdef"); }},
    };
    for (auto& o : ops) {
      s = run.Single(o.op, cfg.transport_ops, [&](remote::RemoteKV*, std::size_t i) { return o.fn(i); }, nullptr, false);
      if (!s.ok()) break;
    }
  }
  c.reset();
  if (srv) srv->Stop();
  srv.reset();
  ::munmap(base, kSize);
  ::unlink(path.c_str());
  return s;
}

}  // namespace

std::string RemoteBenchKey(std::uint64_t i) { return fmt::format("key{:013d}", i % 10000000000000ull); }

Status RunRemoteBench(const RemoteBenchConfig& cfg, bool print, std::vector<RemoteResult>* out) {
  if (cfg.keys == 0) return Status::InvalidArgument("--keys must be at least 1");
  for (std::size_t r : cfg.ranges)
    if (r == 0 || r > cfg.keys) return Status::InvalidArgument(fmt::format("range size {} is not in [1, --keys = {}]", r, cfg.keys));
  for (int t : cfg.threads)
    if (t < 1 || t > 64) return Status::InvalidArgument("--threads must be in [1, 64]");
  for (const auto& m : cfg.mixes) {
    int p;
    if (!MixReadPercent(m, &p)) return Status::InvalidArgument("unknown mix '" + m + "' (write-only, 50:50, 95:5, read-only)");
  }
  if (cfg.backend != "local" && cfg.backend != "ucx") return Status::InvalidArgument("--backend must be local or ucx");
  if (!cfg.tls.empty()) ::setenv("UCX_TLS", cfg.tls.c_str(), 1);
  if (cfg.transport) {
    if (print) PrintHeader();
    return TransportBench(cfg, print, out);
  }
  if (print) PrintHeader();
  if (!cfg.connect.empty()) {
    std::string name;
    remote::RegionInfo info;
    WORT_RETURN_IF_ERROR(remote::ReadInfoFile(cfg.connect, &name, &info));
    const remote::RemoteDesign* d = remote::FindRemoteDesign(name);
    if (d == nullptr) return Status::InvalidArgument("the server runs design '" + name + "', unknown to this build");
    Run run{cfg, d, info, false, print, out};
    return run.All();
  }
  for (const auto& name : cfg.designs) {
    const remote::RemoteDesign* d = remote::FindRemoteDesign(name);
    if (d == nullptr) return Status::InvalidArgument("unknown design '" + name + "' (" + remote::RemoteDesignNames() + ")");
    remote::ServeOptions so;
    so.backend = cfg.backend;
    so.pool = fmt::format("{}/wort-bench-remote-{}-{}.pool", cfg.dir, ::getpid(), name);
    so.pool_size = cfg.pool_size;
    std::filesystem::remove(so.pool);
    std::unique_ptr<remote::RemoteService> svc;
    Status s = d->serve(so, &svc);
    if (s.ok()) {
      Run run{cfg, d, svc->info(), true, print, out};
      s = run.All();
      Status st = svc->Stop();
      if (s.ok()) s = st;
    }
    svc.reset();
    std::filesystem::remove(so.pool);
    WORT_RETURN_IF_ERROR(s);
  }
  return Status::OK();
}

nlohmann::json ToJson(const RemoteResult& r, const RemoteBenchConfig& cfg, const Environment& env) {
  nlohmann::json j;
  j["bench"] = "remote";
  j["design"] = r.design;
  j["backend"] = r.backend;
  j["tls"] = r.tls;
  j["op"] = r.op;
  j["threads"] = r.threads;
  j["ops"] = r.ops;
  j["seconds"] = r.seconds;
  j["ops_per_s"] = r.ops_per_s;
  j["p50_ns"] = r.p50_ns;
  j["p99_ns"] = r.p99_ns;
  j["cpu_ns_per_op"] = r.cpu_ns_per_op;
  j["server_cpu_ns_per_op"] = r.server_cpu_ns_per_op;
  j["errors"] = r.errors;
  j["keys"] = cfg.keys;
  if (r.range_keys) j["range_keys"] = r.range_keys;
  if (r.reads_per_op >= 0) {
    j["reads_per_op"] = r.reads_per_op;
    j["writes_per_op"] = r.writes_per_op;
    j["atomics_per_op"] = r.atomics_per_op;
    j["notifies_per_op"] = r.notifies_per_op;
    j["bytes_read_per_op"] = r.bytes_read_per_op;
    j["bytes_written_per_op"] = r.bytes_written_per_op;
  }
  if (r.resizes_per_op >= 0) j["resizes_per_op"] = r.resizes_per_op;
  if (r.post_fallbacks_per_op >= 0) j["post_fallbacks_per_op"] = r.post_fallbacks_per_op;
  if (r.apply_waits_per_op >= 0) j["apply_waits_per_op"] = r.apply_waits_per_op;
  if (r.quiet_p50_ns >= 0) j["quiet_p50_ns"] = r.quiet_p50_ns, j["quiet_p99_ns"] = r.quiet_p99_ns;
  if (r.quiet_mean_ns >= 0) j["quiet_mean_ns"] = r.quiet_mean_ns;
  if (r.resize_p50_ns >= 0) j["resize_p50_ns"] = r.resize_p50_ns, j["resize_mean_ns"] = r.resize_mean_ns;
  if (r.tail_resize_share >= 0) j["tail_resize_share"] = r.tail_resize_share, j["tail_wait_share"] = r.tail_wait_share;
  j["server_in_process"] = cfg.connect.empty();
  detail::AddEnvJson(env, cfg.seed, &j);
  return j;
}

}  // namespace wort::bench
