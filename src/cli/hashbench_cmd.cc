// `wort hashbench`: the thesis' hash-table experiment (section 4.4.7): N random 8-byte keys
// inserted one by one into a table created for a small capacity (2048 records by default),
// then searches for present and absent keys. Reports ns/insert with its breakdown into bucket
// write, rehash (segment splits, directory doublings, full-table rehashes) and cuckoo
// displacement (from the indexes' own counters, hash_common.h), cache lines flushed per insert,
// insertion latency percentiles and the maximum, and ns/search (present, absent).
//
// The initial capacity is passed to the kinds' create through WORT_HASH_CAPACITY (set for the
// process by --capacity); the CCEH segment size through WORT_CCEH_SEGMENT_BYTES (--segment-bytes).
// Single-threaded; one pool per kind under /dev/shm, removed afterwards.
#include <fmt/core.h>
#include <unistd.h>
#include <x86intrin.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>

#include "workload/workload.h"
#include "cli/command.h"
#include "cli/options.h"
#include "index/hash/hash_common.h"
#include "wort/index.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort::cli {
namespace {

struct Opts {
  std::string indexes = "cceh";
  uint64_t keys = 1000000;
  uint64_t capacity = 2048;
  uint64_t segment_bytes = 16384;
  std::string flush = "auto";
  uint64_t latency = 0;
  uint64_t seed = 1;
};

std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

[[noreturn]] void Fail(const std::string& what, const Status& s) {
  cli::Fail("wort hashbench: " + what, s);
}

double ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

double Percentile(std::vector<uint32_t>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1)));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

void RunOne(const Opts& o, const std::string& kind, const std::vector<uint64_t>& keys, size_t n) {
  const std::string path = "/dev/shm/wort-hashbench-" + std::to_string(::getpid()) + "-" + kind + ".pool";
  std::filesystem::remove(path);
  PoolOptions po;
  po.initial_size = 64ull << 20;
  po.max_size = 64ull << 30;
  std::unique_ptr<Pool> pool;
  Status s = Pool::Create(path, po, &pool);
  if (!s.ok()) Fail("pool", s);
  std::unique_ptr<Index> idx;
  IndexOptions io;
  io.key_type = KeyType::kU64;
  s = CreateIndex(*pool, "idx", kind, io, &idx);
  if (!s.ok()) Fail(kind, s);
  hash::ResetHashCounters(*idx);

  std::vector<uint32_t> lat(n);
  const pm::Counters c0 = pm::GetCounters();
  const double cpu0 = ThreadCpuNs();
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t tsc0 = __rdtsc();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t a = __rdtsc();
    s = idx->Insert(keys[i], i + 1);
    const uint64_t b = __rdtsc();
    lat[i] = static_cast<uint32_t>(std::min<uint64_t>(b - a, UINT32_MAX));
    if (!s.ok()) Fail(kind + " insert", s);
  }
  const uint64_t tsc1 = __rdtsc();
  const double ins_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  const double ins_cpu = ThreadCpuNs() - cpu0;
  const pm::Counters c1 = pm::GetCounters();
  const hash::HashCounters hc = hash::GetHashCounters(*idx);
  const double ns_per_cycle = ins_ns / double(tsc1 - tsc0);

  // Searches: present keys in another order, then absent keys.
  std::vector<uint64_t> order(keys.begin(), keys.begin() + n);
  std::mt19937_64 rng(o.seed + 7);
  std::shuffle(order.begin(), order.end(), rng);
  uint64_t errors = 0, v = 0;
  auto t1 = std::chrono::steady_clock::now();
  double cpu1 = ThreadCpuNs();
  for (uint64_t k : order) errors += !idx->Lookup(k, &v).ok();
  const double hit_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t1).count();
  const double hit_cpu = ThreadCpuNs() - cpu1;
  t1 = std::chrono::steady_clock::now();
  cpu1 = ThreadCpuNs();
  for (size_t i = n; i < 2 * n; ++i) errors += !idx->Lookup(keys[i], &v).IsNotFound();
  const double miss_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t1).count();
  const double miss_cpu = ThreadCpuNs() - cpu1;
  const IndexStats st = idx->Stats();

  const double per = 1.0 / double(n);
  const double rehash = hc.rehash_ns * per, disp = hc.displacement_ns * per, total = ins_ns * per;
  const double p50 = Percentile(lat, 0.5) * ns_per_cycle, p99 = Percentile(lat, 0.99) * ns_per_cycle;
  const double p9999 = Percentile(lat, 0.9999) * ns_per_cycle;
  const double mx = *std::max_element(lat.begin(), lat.end()) * ns_per_cycle;
  fmt::print("{:<9} insert {:8.1f} ns wall, {:7.1f} ns cpu  (write {:7.1f}, rehash {:7.1f}, displacement {:6.1f} wall)  "
             "flushes/insert {:5.2f}  fences/insert {:5.2f}\n",
             kind, total, ins_cpu * per, total - rehash - disp, rehash, disp,
             (c1.lines_flushed - c0.lines_flushed) * per, (c1.fences - c0.fences) * per);
  fmt::print("{:<9} latency p50 {:.0f} ns, p99 {:.0f} ns, p99.99 {:.0f} ns, max {:.3f} ms; longest split/doubling/rehash "
             "{:.3f} ms; splits {}, doublings {}, full rehashes {}, displaced records {}\n",
             "", p50, p99, p9999, mx / 1e6, hc.max_rehash_ns / 1e6, hc.splits, hc.doublings, hc.rehashes,
             hc.displacements);
  fmt::print("{:<9} search present {:7.1f} ns wall {:7.1f} ns cpu, absent {:7.1f} ns wall {:7.1f} ns cpu; "
             "{:.1f} bytes/key in the pool; errors {}\n",
             "", hit_ns * per, hit_cpu * per, miss_ns * per, miss_cpu * per, double(st.bytes_allocated) / double(n),
             errors);
  std::fflush(stdout);
  idx.reset();
  (void)pool->Close();
  pool.reset();
  std::filesystem::remove(path);
}

void AddHashBench(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("hashbench",
                                 "Hash tables as in the thesis (4.4.7): N random 8-byte keys into a table created for "
                                 "--capacity records; insert breakdown, flushes, max latency, search hit/miss");
  cmd->add_option("--index", o->indexes, "Hash kinds, comma list (cceh, cceh-cow, linp, cuck, bch, levl, path)")
      ->capture_default_str();
  AddCountOption(cmd, "--keys", &o->keys, "Keys to insert")->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  AddCountOption(cmd, "--capacity", &o->capacity, "Initial capacity in records (WORT_HASH_CAPACITY)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  AddSizeOption(cmd, "--segment-bytes", &o->segment_bytes, "CCEH segment size (WORT_CCEH_SEGMENT_BYTES)")
      ->check(CLI::Range(uint64_t{256}, uint64_t{1} << 30));
  cmd->add_option("--flush", o->flush, "clwb|clflushopt|clflush|none|auto")->capture_default_str();
  AddCountOption(cmd, "--write-latency-ns", &o->latency, "Emulated PM write latency per flushed line (ns)");
  cmd->add_option("--seed", o->seed, "Key seed")->capture_default_str();
  cmd->callback([o] {
    pm::FlushKind fk;
    bool is_auto = false;
    if (!pm::ParseFlushKind(o->flush, &fk, &is_auto)) Fail("--flush", Status::InvalidArgument(o->flush));
    if (is_auto) fk = pm::BestFlushKind();
    if (!pm::SetFlushKind(fk)) Fail("--flush", Status::NotSupported(o->flush + " not supported by this CPU"));
    pm::SetWriteLatencyNs(o->latency);
    ::setenv("WORT_HASH_CAPACITY", std::to_string(o->capacity).c_str(), 1);
    ::setenv("WORT_CCEH_SEGMENT_BYTES", std::to_string(o->segment_bytes).c_str(), 1);
    const size_t n = o->keys;
    fmt::print("hashbench: keys={} (uniform random 64-bit, distinct) capacity={} segment={} B flush={} "
               "write-latency={} ns seed={}\n",
               n, o->capacity, o->segment_bytes, pm::FlushKindName(fk), o->latency, o->seed);
    fmt::print("machine: {} ({} cpus)\n", CpuModel(), ::sysconf(_SC_NPROCESSORS_ONLN));
    std::fflush(stdout);
    // 2n distinct keys: the first n are inserted, the rest are the absent keys.
    const std::vector<uint64_t> keys = bench::GenerateU64Keys(bench::Dist::kSparse, 2 * n, o->seed);
    std::stringstream ss(o->indexes);
    std::string kind;
    while (std::getline(ss, kind, ',')) {
      if (!FindIndexKind(kind)) Fail(kind, Status::InvalidArgument("unknown index kind"));
      RunOne(*o, kind, keys, n);
    }
  });
}

[[maybe_unused]] const bool kReg = RegisterCommand(&AddHashBench, {"hashbench"});

}  // namespace
}  // namespace wort::cli
