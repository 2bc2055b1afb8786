// crash/killtest.h - the kill test: process crashes (SIGKILL) at random moments.
//
// Where the explorer (crash/explorer.h) simulates lost cache lines, the kill test kills a real
// process: every store the process made is kept (the page cache holds the MAP_SHARED pool), so
// what it tests is recovery itself - the post-crash garbage collection, an index's repair of an
// operation cut in the middle - with real timing, the allocator's background recovery, and
// pools crashed again and again.
//
// One run, on one pool under `dir`:
//   setup   the parent creates the pool and the index, loads `keys` keys, closes the pool.
//   round r (1..rounds)
//     1. fork: the child opens the pool (with background recovery on even rounds, so that it
//        works while the GC runs; in the foreground on odd ones), opens the index, and runs up
//        to `ops_per_round` operations (crash/oracle.h's workload, seeded by seed and r). It
//        writes "begin op" to a pipe before each operation and "ack" after it returned.
//     2. the parent reads the pipe as the child goes, and SIGKILLs the child at a random moment
//        (up to max_delay_us after it was ready), then reads what is left in the pipe.
//     3. the parent checks a copy of the crashed pool (crash/oracle.h, CheckCrashedPool): every
//        acknowledged operation is present, the one begun and not acknowledged is present or
//        absent as a whole, Check passes, the allocator's reachability contract holds, and the
//        index still works. The oracle then takes whichever state was found.
//   On a violation the crashed pool (before any recovery) is kept under `dir` and its path
//   printed: the kill timing does not replay.
//   The next round's child opens the crashed pool itself (not the checked copy), so recovery
//   runs on every round's pool and crashes accumulate.
//
// Thread safety: uses fork(); call it from a process whose other threads hold no locks the
// child needs (the library keeps none across calls while no pool is open).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "workload/workload.h"
#include "crash/oracle.h"
#include "wort/index.h"
#include "wort/status.h"

namespace wort::crash {

struct KillConfig {
  std::string index = "wort";
  IndexOptions index_options;
  bool key_type_from_dist = true;     // kU64 for integer distributions, kBytes for strings
  bench::Dist dist = bench::Dist::kDense;
  size_t keys = 200;                  // setup keys
  size_t insert_keys = 2000;          // insert candidates besides the setup keys
  std::vector<OpType> ops = {OpType::kInsert, OpType::kUpsert, OpType::kDelete};
  uint64_t seed = 1;
  int rounds = 5;
  size_t ops_per_round = 1000000;     // the child runs at most this many, then waits to be killed
  uint64_t max_delay_us = 20000;      // the child is killed at a random moment in [0, this] after
                                      // it opened the pool and the index
  bool edge_keys = true;
  uint64_t pool_initial_size = 4ull << 20;
  uint64_t pool_max_size = 256ull << 20;
  std::string dir = "/dev/shm";
  bool keep_failed = true;            // on a violation, keep the round's start image and end image under dir
  FILE* log = nullptr;                // per-round lines and violations (optional)
};

struct KillResult {
  std::string index;
  int rounds = 0;                 // rounds run
  uint64_t acked_ops = 0;         // acknowledged operations, over all rounds
  int pending_applied = 0;        // rounds whose cut operation was found applied
  int pending_absent = 0;         // ... found not applied
  std::vector<std::string> violations;
  double seconds = 0;
};

// Runs the kill test. Returns non-OK only when it could not run (unknown kind, setup failed,
// fork failed); violations are in *out.
Status RunKillTest(const KillConfig& cfg, KillResult* out);

}  // namespace wort::crash
