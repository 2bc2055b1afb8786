// Internal helpers shared by the benchmark's source files (bench.cc, ycsb_bench.cc); not an API.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "wort/index.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort::bench::detail {

// Sets the process-wide flush instruction and write latency for one bench; restores the
// previous ones when destroyed.
class PmSettings {
 public:
  PmSettings() : kind_(pm::GetFlushKind()), latency_(pm::GetWriteLatencyNs()) {}
  ~PmSettings() {
    pm::SetFlushKind(kind_);
    pm::SetWriteLatencyNs(latency_);
  }
  Status Apply(const CommonConfig& c) {
    pm::FlushKind k;
    bool is_auto = false;
    if (!pm::ParseFlushKind(c.flush, &k, &is_auto))
      return Status::InvalidArgument("unknown flush instruction '" + c.flush +
                                     "' (valid: clwb, clflushopt, clflush, none, auto)");
    if (is_auto) k = pm::BestFlushKind();
    if (!pm::FlushKindSupported(k) || !pm::SetFlushKind(k))
      return Status::InvalidArgument(std::string("this CPU does not execute ") + pm::FlushKindName(k) +
                                     " (best available: " + pm::FlushKindName(pm::BestFlushKind()) + ")");
    pm::SetWriteLatencyNs(c.write_latency_ns);
    return Status::OK();
  }

 private:
  pm::FlushKind kind_;
  uint64_t latency_;
};

// The pool file for one index: /dev/shm/wort-bench-<pid>-<suffix>.pool, or --pool (+ "." suffix).
std::string DefaultPoolPath(const CommonConfig& c, const std::string& suffix);
PoolOptions BenchPoolOptions(const CommonConfig& c);
// Creates a fresh pool; AlreadyExists if the file exists.
Status CreateBenchPool(const CommonConfig& c, const std::string& path, std::unique_ptr<Pool>* out);
// A fresh pool at `path` holding one index "bench" of `kind` (u64 or byte-string keys); when
// destroyed, the index is closed, the pool closed and its file removed (unless c.keep_pool).
struct BenchIndex {
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Index> idx;
  std::string path;  // set once the pool exists
  bool keep = false;
  BenchIndex() = default;
  BenchIndex(const BenchIndex&) = delete;
  BenchIndex& operator=(const BenchIndex&) = delete;
  ~BenchIndex();
  // On failure, *why says what failed (it begins with the kind's name).
  // `base` supplies the kind's knobs (IndexBenchConfig::index_options); key_type and span_bits
  // are set from u64 and span_bits.
  Status Create(const CommonConfig& c, const std::string& path, const IndexKind& kind, bool u64, uint32_t span_bits,
                std::string* why, const IndexOptions& base = IndexOptions());
};
// The environment fields every JSON record carries (flush, write_latency_ns, seed, timestamp,
// git_commit, cpu, host).
void AddEnvJson(const Environment& env, uint64_t seed, nlohmann::json* j);
// CPU time of the calling thread (seconds).
double ThreadCpuSeconds();
// A seeded random permutation of 0..n-1.
std::vector<uint32_t> Permutation(size_t n, uint64_t seed);

}  // namespace wort::bench::detail
