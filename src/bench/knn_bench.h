// The kNN benchmark (`wort knn bench`): the thesis's chapter V figures 28 and 30-33
// (../shared/papers/004, sections 5.2.4 and 5.3) on the CPU, and on the GPU where one is
// available, at a size that fits the machine.
//
// Experiments (each on the chapter's clustered workload, knn_data.h; defaults: 64 dimensions,
// std 160, 100 clusters, k-means build, degree 128, k = 32):
//   fig28  Hilbert vs k-means build, dims `fig28_dims`, branch-and-bound search (as the chapter)
//   fig30  std `fig30_stds` in 64 dimensions
//   fig31  degree `fig31_degrees`
//   fig32  dims `fig32_dims`
//   fig33  k `fig33_ks`
//   faiss  faiss-cpu's IndexFlatL2 (scripts/knn_faiss.py) beside wort's engines on the 64-d,
//          std 160 data; skipped (and recorded so) when no python with faiss is found
// Every configuration is measured for every engine (brute force, branch-and-bound, PSB; fig28
// branch-and-bound and brute force), on the CPU and, if knn::GpuAvailable(), on the GPU, in two
// modes: "single" (one query at a time on one thread: mean, p50 and p99 latency) and "batch"
// (all queries in one Search on `threads` threads: queries/s). Each engine's answers are compared
// with the brute-force engine's of the same run: any difference in ids (or a distance differing
// by more than 1e-5 relative) marks the record "WRONG" and counts in wrong_records; so does a GPU
// run whose counters differ from the CPU run's of the same engine (they must be equal).
// Configurations that several experiments share (e.g. 64-d std 160 degree 128 k 32) are built and
// measured once and recorded under each experiment.
//
// Output, in out_dir: results.jsonl (replaced; one JSON record per experiment x configuration x
// engine x device x mode, with every parameter, wall time per query (single: mean, p50, p99; batch:
// queries/s), CPU time per query (robust to a shared machine), the counters per query, the build's seconds and
// the machine: nproc, CPU model, git commit), config.json (the scale and the run's settings), and
// for the faiss experiment faiss_data.fvecs, faiss_queries.fvecs and faiss_ids.ivecs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "wort/status.h"

namespace wort::bench {

struct KnnScale {
  std::string name;
  uint64_t n = 0;         // points
  uint64_t queries = 0;   // queries per configuration
  uint32_t dim = 64;      // the default dimension
  double std = 160;       // the default standard deviation
  uint32_t clusters = 100;
  uint32_t k = 32;
  uint32_t degree = 128;
  std::vector<uint32_t> fig28_dims, fig31_degrees, fig32_dims, fig33_ks;
  std::vector<double> fig30_stds;
};

// "tiny" (seconds: CI), "quick" (200K points, minutes on 2 cores), "paper" (1M points, 240
// queries, as the chapter). InvalidArgument for another name.
Status KnnScaleByName(const std::string& name, KnnScale* out);
// The experiment names, in the order they run.
const std::vector<std::string>& KnnExperimentNames();

struct KnnBenchConfig {
  KnnScale scale;
  std::vector<std::string> only;  // experiments to run; empty: all
  std::string out_dir;            // created if absent
  unsigned threads = 0;           // batch mode and builds; 0: all hardware threads
  uint64_t seed = 1;              // data seed; queries use seed + 1000
  std::string pool_path;          // empty: /dev/shm/wort-knn-bench-<pid>.pool (removed at the end)
  bool keep_pool = false;
  std::string python;             // interpreter for the faiss experiment; empty: FindFaissPython()
  std::string faiss_script;       // scripts/knn_faiss.py; empty: skip faiss
};

struct KnnBenchSummary {
  uint64_t records = 0;
  uint64_t wrong_records = 0;
  std::vector<std::string> skipped;  // "experiment: reason"
  std::string results_path;
};

using KnnLogFn = std::function<void(const std::string& line)>;

// $WORT_PYTHON, else ~/.cache/wort-venv/bin/python3, else python3 - the first that imports
// faiss and numpy; "" (and *why says what was tried) if none does.
std::string FindFaissPython(std::string* why);

// Runs the experiments. InvalidArgument for a bad configuration (unknown experiment, empty
// scale); IOError if out_dir cannot be written; a build or search error is returned as is. A
// WRONG record does not stop the run: it is counted in summary->wrong_records.
Status RunKnnBench(const KnnBenchConfig& cfg, KnnBenchSummary* summary, const KnnLogFn& log = nullptr);

}  // namespace wort::bench
