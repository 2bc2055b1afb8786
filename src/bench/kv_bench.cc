// `wort bench kv` (kv_bench.h).
#include "bench/kv_bench.h"

#include <fmt/core.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "bench/bench_internal.h"
#include "wort/alloc.h"
#include "wort/kv.h"

namespace wort::bench {

namespace {

// Key i: 16 bytes, the mixed index big-endian then the index (unique; random order in the index).
std::string KeyOf(uint64_t i) {
  uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull;
  h ^= h >> 29;
  std::string k(16, '\0');
  for (int b = 0; b < 8; ++b) k[b] = static_cast<char>(h >> (56 - 8 * b));
  std::memcpy(&k[8], &i, 8);
  return k;
}

// Value of key i: i in the first 8 bytes (Gets check it), then filler.
std::string ValueOf(uint64_t i, size_t n) {
  std::string v(n, static_cast<char>('a' + i % 26));
  std::memcpy(v.data(), &i, 8);
  return v;
}

}  // namespace

Status RunKvBench(const KvBenchConfig& cfg, std::vector<KvBenchResult>* out,
                  const std::function<void(const std::string&)>& log) {
  if (cfg.keys == 0) return Status::InvalidArgument("--keys must be at least 1");
  if (cfg.value_size < 8 || cfg.value_size > kMaxValueLen)
    return Status::InvalidArgument("--value-size must be from 8 to " + std::to_string(kMaxValueLen));
  if (cfg.thread_counts.empty()) return Status::InvalidArgument("no thread count");
  if (cfg.repeats < 1) return Status::InvalidArgument("--repeat must be at least 1");
  const std::string path =
      cfg.pool_path.empty() ? fmt::format("/dev/shm/wort-kvbench-{}.pool", ::getpid()) : cfg.pool_path;
  if (::access(path.c_str(), F_OK) == 0) return Status::InvalidArgument("pool " + path + " exists; give a new path");
  KvConfig kc;
  kc.path = path;
  kc.kind = cfg.kind;
  kc.size = cfg.pool_size;
  std::unique_ptr<KvStore> db;
  WORT_RETURN_IF_ERROR(KvStore::Open(kc, &db));
  struct Remove {
    std::string p;
    bool keep;
    ~Remove() {
      if (!keep) std::remove(p.c_str());
    }
  } remove_pool{path, cfg.keep_pool};
  const std::vector<uint32_t> order = detail::Permutation(cfg.keys, cfg.seed);
  const double l0 = detail::ThreadCpuSeconds();
  const auto w0 = std::chrono::steady_clock::now();
  for (uint32_t i : order) WORT_RETURN_IF_ERROR(db->Put(KeyOf(i), ValueOf(i, cfg.value_size)));
  const double load_cpu = detail::ThreadCpuSeconds() - l0;
  const double load_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  log(fmt::format("kv bench: {} keys of 16 bytes, {}-byte values, kind {}", cfg.keys, cfg.value_size, cfg.kind));
  // The load: one thread's Puts of new keys (value block written, checksummed and persisted, then
  // the index's insert).
  log(fmt::format("put (load) threads=1 ops={} seconds={:.3f} cpu_ns_per_op={:.0f}", cfg.keys, load_secs,
                  load_cpu * 1e9 / static_cast<double>(cfg.keys)));
  for (int t : cfg.thread_counts) {
    for (int run = 0; run < cfg.repeats; ++run) {
      std::atomic<int> ready{0};
      std::atomic<bool> go{false};
      std::atomic<uint64_t> errors{0};
      std::vector<double> cpu(t, 0);
      std::vector<std::thread> ts;
      for (int w = 0; w < t; ++w)
        ts.emplace_back([&, w] {
          // The keys this thread asks for, made before the clock starts.
          uint64_t x = cfg.seed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(w + 1) * 0x9e3779b97f4a7c15ull + run;
          std::vector<std::string> keys;
          const uint64_t distinct = std::min<uint64_t>(cfg.ops_per_thread, 1 << 20);
          keys.reserve(distinct);
          std::vector<uint64_t> ids;
          for (uint64_t i = 0; i < distinct; ++i) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            ids.push_back(x % cfg.keys);
            keys.push_back(KeyOf(ids.back()));
          }
          std::string v;
          uint64_t bad = 0;
          ready.fetch_add(1);
          while (!go.load(std::memory_order_acquire)) {
          }
          const double c0 = detail::ThreadCpuSeconds();
          if (cfg.puts) {
            // Overwrites: the value block written, checksummed and persisted, the index's
            // update, the old block retired (and the writes' brackets for readers in other processes).
            std::vector<std::string> vals;
            for (uint64_t j = 0; j < std::min<uint64_t>(distinct, 4096); ++j) vals.push_back(ValueOf(ids[j], cfg.value_size));
            for (uint64_t i = 0, j = 0; i < cfg.ops_per_thread; ++i, j = j + 1 == distinct ? 0 : j + 1)
              if (!db->Put(keys[j], j < vals.size() ? vals[j] : ValueOf(ids[j], cfg.value_size)).ok()) ++bad;
            cpu[w] = detail::ThreadCpuSeconds() - c0;
            errors.fetch_add(bad);
            return;
          }
          for (uint64_t i = 0, j = 0; i < cfg.ops_per_thread; ++i, j = j + 1 == distinct ? 0 : j + 1) {
            uint64_t got = ~uint64_t{0};
            if (!db->Get(keys[j], &v).ok() || v.size() != cfg.value_size || (std::memcpy(&got, v.data(), 8), got != ids[j]))
              ++bad;
          }
          cpu[w] = detail::ThreadCpuSeconds() - c0;
          errors.fetch_add(bad);
        });
      while (ready.load() < t) std::this_thread::yield();
      const AllocStats a0 = db->pool().allocator().Stats();
      const auto t0 = std::chrono::steady_clock::now();
      go.store(true, std::memory_order_release);
      for (auto& th : ts) th.join();
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      KvBenchResult r;
      r.threads = t;
      r.run = run;
      r.ops = cfg.ops_per_thread * static_cast<uint64_t>(t);
      r.seconds = secs;
      r.mops_per_s = secs > 0 ? r.ops / secs / 1e6 : 0;
      double c = 0;
      for (double x : cpu) c += x;
      r.cpu_ns_per_op = r.ops ? c * 1e9 / r.ops : 0;
      r.errors = errors.load();
      // The pool epoch's work in the run (issue 31): its advances, and the value blocks retired
      // and not yet freed when the writers had exited (held in their slots until a live thread's
      // Collect or the close frees them).
      const AllocStats a1 = db->pool().allocator().Stats();
      log(fmt::format("{} threads={} run={} ops={} seconds={:.3f} Mops/s={:.3f} cpu_ns_per_op={:.0f} errors={} "
                      "epoch_advances={} retired_pending_after={}",
                      cfg.puts ? "put" : "get", t, run, r.ops, r.seconds, r.mops_per_s, r.cpu_ns_per_op, r.errors,
                      a1.epoch_advances - a0.epoch_advances, a1.retired_pending));
      out->push_back(r);
    }
  }
  return db->Close();
}

}  // namespace wort::bench
