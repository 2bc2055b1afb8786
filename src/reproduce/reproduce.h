// `wort reproduce`: the WORT paper's evaluation (FAST 2017, section 4-5; thesis chapter 5) in one
// command, for every index kind registered in the build, built on the benchmark library
// (src/bench/bench.h). It plans a list of runs, executes them with a progress line and an
// estimate of the time remaining, writes the raw results, and hands them to scripts/report.py,
// which draws the figures and writes report.md beside the paper's published values
// (data/published/wort_fast17.json).
//
// Experiments (names accepted by --only):
//   fig7    insert time per index, grouped by distribution (write latency 0)
//   fig8    insert time vs emulated PM write latency per flushed line (bench write_latency_ns):
//           its own runs at fig8_keys, every point repeated fig8_repeats times (the report takes
//           the median and shows the spread: the volatile kinds, untouched by the latency, vary
//           from run to run on a shared machine)
//   fig9    search time per index per distribution
//   fig10   range query time for the paper's ranges of 0.001% and 0.01% of its N = 128M, i.e. the
//           same number of keys per query as in the paper (1,280 and 12,800; at most N), not a
//           fraction of this run's N (ordered kinds only)
//   table1  flushes per insert and leaf depth (from the fig7 runs), LLC misses per insert and
//           per search (cachegrind-simulated, at a reduced N, see below)
//   space   pool bytes per key after the insert phase (thesis Fig 5.5)
//   cceh-seg    thesis 4.4.7.1 (Figure 24): cceh and cceh-cow on random 8-byte keys (sparse) from a
//               table sized for 2,048 records (the kinds' default), segment size swept
//               (IndexOptions::cceh_segment_bytes of each run's bench config): insert time, flushes per insert; cceh
//               also as CCEH(LSB) and EXTH(LSB) (IndexOptions::cceh_variant lsb, exth: cceh.h "Variants";
//               EXTH's buckets up to 16 KB only, as it reads the whole bucket per operation)
//   cceh-lat    thesis 4.4.7.2 (Figure 25): insert time of every hash kind vs emulated write latency,
//               broken into write, rehash and cuckoo displacement (the bench's insert records of hash
//               kinds carry rehash_ns_per_op and displacement_ns_per_op from the kinds' counters)
//   cceh-search thesis 4.4.7.3 (Figure 26(c)): search time of every hash kind (one thread)
//   b3-page     thesis 4.3.2 (Figures 12, 14): b3tree, wbtree, wbtree-slot, fptree, fastfair on
//               random keys: insert, search and delete time, flushes per insert and per delete;
//               b3tree also at the page sizes of ThesisParams::b3_page_sizes (IndexOptions::
//               b3_page_bytes; records carry page_bytes)
//   b3-order    thesis 4.3.2 (Figure 13): b3tree (wbtree, fastfair beside it) inserting the b3-page
//               keys in random and in ascending order, then searching them; and b3tree without
//               rebalancing (IndexOptions::b3_no_rebalance, b3tree.h kRootNoRebalance) in both orders
//   b3-grow     thesis 4.3.3 (Figure 15): insert and search time as the number of keys grows
//   cceh-cdf    thesis 4.4.7.3 (Figure 26(a)): every hash kind inserts the cceh-seg keys (at
//               ThesisParams::cdf_keys) arriving as a Poisson process at LINP's one-thread batch
//               insert throughput (the thesis's rate), served by cdf_threads workers; latency from
//               the scheduled arrival, so waiting behind a rehash counts (`wort bench arrival`,
//               src/bench/arrival_bench.h): the CDF, maximum and longest stall per kind; also at
//               half that rate (cdf_loads), below saturation, where stalls are not hidden by queues
//   The thesis experiments use their own kinds (intersected with --index when given) and tag
//   their records with their own experiment name; scripts/report.py's "thesis chapter IV"
//   sections compare them with data/published/thesis_ch4.json.
//   roart-peer  only with Config::peers_src: scripts/peers.sh builds P-ART (RECIPE) from
//               peers_src/RECIPE/P-ART outside the repository and runs roart and P-ART on the same
//               N sparse keys (insert, lookup, 100-key scans); its peers.jsonl and peers.md are
//               copied to the output directory, where the ROART section compares with P-ART itself
//               instead of the woart stand-in
//   canrt   the CANRT paper's comparison (data/published/canrt_ica3pp20.json): `wort bench-remote`
//           (src/bench/remote_bench.h) of canrt, reply-wort and reply-woart with the server in
//           this process, per transport of the scale (local at every scale; ucx over UCX_TLS=sm
//           from quick up, tcp from medium up): put/get latency, range scans standing for the
//           paper's 10^4 and 10^5 keys, YCSB mixes with 1 and 2 client threads
//
// Runs (one index kind and one distribution each, one RunIndexBench call each):
//   base      write latency 0; ops insert (+search for fig9, +scan at 0.001% for fig10)
//   range     ops scan at 0.01% (fig10; its insert phase is not reported)
//   latency   ops insert at each latency of the scale (fig8), all kinds in one run, repeated
//   remote    one bench-remote run per transport (experiment canrt)
//   cachegrind  `wort bench` under `valgrind --tool=cachegrind` (separate processes, run
//             `cachegrind_jobs` at a time since simulated counts do not depend on timing).
//             LLC misses of a phase come from differencing three runs of the same keys:
//               G = key generation only (hidden `wort reproduce-keygen`)
//               A = generation + insert     B = generation + insert + search
//             insert = (A - G) / N, search = (B - A) / N. LLC misses = LL read + write misses.
//
// Outputs in the output directory:
//   results.jsonl  one JSON object per result: the bench's record plus "experiment"
//                  (fig7/fig8/fig9/fig10), "table1" records with the cachegrind counts, and
//                  "canrt" records (bench-remote's, with "design" instead of "index")
//   config.json    the configuration and the run's figures (machine, scale, N, flush, date,
//                  git commit, run time, peak memory, registered kinds, notes)
//   bench.log      the bench library's own log lines
//   *.png, report.md  written by scripts/report.py
//
// Thread safety: one Reproduce call per process (the bench sets process-wide pm settings).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "wort/status.h"

namespace wort::reproduce {

inline constexpr const char* kExperiments[] = {"fig7",     "fig8",     "fig9",        "fig10",   "table1", "space",
                                               "canrt",    "cceh-seg", "cceh-lat",    "cceh-search", "b3-page",
                                               "b3-grow",  "b3-order", "cceh-cdf",    "roart-peer"};

// Kinds of the thesis experiments (chapter IV), in the order of its figures.
inline constexpr const char* kCcehSegKinds[] = {"cceh", "cceh-cow"};
inline constexpr const char* kHashKinds[] = {"cceh", "cceh-cow", "levl", "linp", "cuck", "bch", "path"};
inline constexpr const char* kB3PageKinds[] = {"b3tree", "wbtree", "wbtree-slot", "fptree", "fastfair"};
inline constexpr const char* kB3GrowKinds[] = {"b3tree", "fastfair", "wbtree", "fptree"};
inline constexpr const char* kB3OrderKinds[] = {"b3tree", "wbtree", "fastfair"};

// Sizes of the thesis experiments at a scale.
struct ThesisParams {
  size_t cceh_keys = 0;                  // records inserted (thesis: 16M)
  std::vector<uint64_t> segment_bytes;   // cceh-seg sweep (thesis: 256 B to 256 KB)
  std::vector<uint64_t> latencies;       // cceh-lat, ns per flushed line
  size_t b3_keys = 0;                    // b3-page (thesis: 10M)
  std::vector<size_t> b3_grow;           // b3-grow: N of each run
  size_t cdf_keys = 0;                   // cceh-cdf: Poisson arrivals (thesis: 16M)
  int cdf_threads = 2;                   // cceh-cdf: workers serving them
  std::vector<double> cdf_loads;         // cceh-cdf: arrival rates as multiples of LINP's (1: the thesis's)
  std::vector<uint64_t> b3_page_sizes;   // b3-page: b3tree's other page sizes (1 KB: the main run)
};

// The CANRT experiment at one transport: the sizes of its bench-remote run.
struct CanrtParams {
  std::string backend = "local";  // local | ucx
  std::string tls;                // ucx: UCX_TLS
  size_t keys = 0;                // records loaded
  size_t latency_ops = 0;         // put / get latency phases
  std::vector<size_t> ranges;     // keys per scan, standing for the paper's 10^4 and 10^5
  size_t range_ops = 0;
  std::vector<int> threads;       // YCSB client threads
  size_t ycsb_ops = 0;            // per thread per mix
};

// Sizes of a scale. "tiny" is for tests (documented in --help as such).
struct ScaleParams {
  std::string name;
  size_t keys = 0;                       // N for the timed runs
  std::vector<uint64_t> latencies;       // fig8 points, ns per flushed line (0 first)
  double range_pcts[2] = {0.001, 0.01};   // fig10: the paper's ranges, % of its N (128M) ...
  size_t range_keys[2] = {1280, 12800};  // ... i.e. keys per query (capped at N)
  size_t fig8_keys = 0;                  // N of the fig8 runs
  int fig8_repeats = 1;                  // runs per fig8 point (median and spread reported)
  size_t scans = 0;                      // range queries per run (0: the bench default)
  size_t cachegrind_keys = 0;            // N under cachegrind
  std::vector<bench::Dist> cachegrind_dists;
  std::vector<CanrtParams> canrt;        // one bench-remote run each
  ThesisParams thesis;                   // cceh-*, b3-*
};
// InvalidArgument for an unknown name (valid: tiny, quick, medium, paper).
Status GetScale(const std::string& name, ScaleParams* out);

struct Config {
  std::string scale = "quick";
  std::vector<std::string> only;     // experiments; empty: all
  std::vector<std::string> indexes;  // kind names; empty: every registered kind
  std::string out_dir;
  std::string flush = "auto";
  uint64_t seed = 1;
  size_t keys = 0;                   // > 0: overrides the scale's N
  size_t cachegrind_keys = 0;        // > 0: overrides the scale's cachegrind N
  bool cachegrind = true;            // false: skip the LLC-miss runs
  int cachegrind_jobs = 2;
  // cachegrind --LL: the paper's 15 MB LLC; 15-way instead of 20 because valgrind needs a
  // power-of-two set count (15 MB / (20 x 64 B) = 12288 sets; 15-way gives 16384).
  std::string ll = "15728640,15,64";
  std::string wort_binary;           // the `wort` executable run under cachegrind (probed first)
  std::string report_script;         // scripts/report.py; empty: do not run it
  std::string python;                // interpreter for the script
  std::string published;             // data/published/wort_fast17.json
  std::string peers_src;             // roart-peer: SRC_ROOT of scripts/peers.sh (empty: not run)
  std::string peers_script;          // scripts/peers.sh
  std::string peers_wort;            // the wort binary peers.sh runs (this one)
};

// One planned run.
struct Run {
  enum class Type { kBase, kRange, kLatency, kCgGen, kCgInsert, kCgSearch, kRemote, kThesis, kArrival };
  Type type = Type::kBase;
  std::string label;  // experiments it serves, for the progress line
  bench::Dist dist = bench::Dist::kDense;
  std::string index;  // empty for kCgGen and kLatency
  std::vector<std::string> indexes;  // kLatency: every kind, in one bench run
  int repeat = 0;                    // kLatency: 0..fig8_repeats-1
  std::vector<bench::Op> ops;
  uint64_t latency_ns = 0;
  size_t scan_len = 0;   // fig10: keys per range query
  double range_pct = 0;  // fig10: the paper's range it stands for (% of 128M)
  size_t keys = 0;
  int canrt = -1;          // kRemote: index into ScaleParams::canrt
  std::string exp;         // kThesis: the records' experiment (cceh-seg, ...; cceh-lat's search: cceh-search)
  uint64_t segment_bytes = 0;  // kThesis: IndexOptions::cceh_segment_bytes for the run (0: the default)
  std::string cceh_variant;    // kThesis (cceh-seg): IndexOptions::cceh_variant (lsb, exth; empty: default)
  bool sorted_insert = false;  // kThesis (b3-order): insert in ascending key order
  bool no_rebalance = false;   // kThesis (b3-order): b3tree created with IndexOptions::b3_no_rebalance
  double load = 0;             // kArrival: the arrival rate as a multiple of LINP's batch throughput
  uint64_t b3_page_bytes = 0;  // kThesis (b3-page): IndexOptions::b3_page_bytes (0: the default, 1 KB)
  double est_seconds = 0;  // the planner's cost estimate
};

// The runs for `cfg` over the given kinds (name, ordered). Notes (kinds without scan, ...)
// are appended to *notes. Fails on an unknown experiment name.
Status Plan(const Config& cfg, const ScaleParams& sp, const std::vector<std::pair<std::string, bool>>& kinds,
            std::vector<Run>* runs, std::vector<std::string>* notes);

// Estimated time remaining: the planner's estimates of the runs not yet done, scaled by the
// ratio measured/estimated of the runs done so far of the same type (or of all, if none).
class Eta {
 public:
  explicit Eta(const std::vector<Run>& runs) : runs_(runs), measured_(runs.size(), -1) {}
  void Done(size_t i, double seconds) { measured_[i] = seconds; }
  double Remaining() const;

 private:
  const std::vector<Run>& runs_;
  std::vector<double> measured_;
};

using LogFn = std::function<void(const std::string& line)>;

// Runs everything; `progress` gets one line per run. A failed index run is recorded in the
// notes and the others go on; IOError if the output cannot be written.
Status Reproduce(const Config& cfg, const LogFn& progress);

}  // namespace wort::reproduce
