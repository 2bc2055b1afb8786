// `wort bench kv`: lookups through the key-value store API (wort/kv.h) on 1, 2, ... threads,
// so that what the store adds around the index (the Close gate, the value block's epoch, the
// copy of the value) is measured on its own and its scaling can be compared across versions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "wort/status.h"

namespace wort::bench {

struct KvBenchConfig {
  std::string kind = "woart";
  std::string pool_path;            // must not exist; "" = /dev/shm/wort-kvbench-PID.pool
  uint64_t pool_size = 4ull << 30;
  uint64_t keys = 1000000;          // loaded once, in random order
  uint64_t value_size = 64;         // bytes (at least 8)
  uint64_t ops_per_thread = 1000000;  // Gets (or Puts) of uniformly random keys, per thread and run
  bool puts = false;                // the runs' operation: Put (an overwrite of a loaded key) instead of Get
  std::vector<int> thread_counts = {1, 2};
  int repeats = 1;                  // runs per thread count (all are reported)
  uint64_t seed = 1;
  bool keep_pool = false;
};

struct KvBenchResult {
  int threads = 0;
  int run = 0;
  uint64_t ops = 0;
  double seconds = 0, mops_per_s = 0, cpu_ns_per_op = 0;
  uint64_t errors = 0;  // Gets that failed or returned a value not of their key
};

// Loads the keys, then runs the Gets (or, with `puts`, overwrites: each thread Puts a new value
// of its key's form, so that a later Get of the key still checks). Results are appended to *out as they finish (and logged
// by `log`); an error in the setup is returned. Errors in the Gets are counted, not returned.
Status RunKvBench(const KvBenchConfig& cfg, std::vector<KvBenchResult>* out,
                  const std::function<void(const std::string&)>& log);

}  // namespace wort::bench
