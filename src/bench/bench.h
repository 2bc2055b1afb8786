// The benchmark as a library: `wort bench` (src/cli/bench.cc) and `wort reproduce` call these
// functions and get result structs back; printing and JSON are separate helpers.
//
// Index benchmark (RunIndexBench), per index kind:
//   1. a fresh pool (its own file, removed afterwards unless keep_pool)
//   2. a fresh index; integer distributions use KeyType::kU64, string ones KeyType::kBytes
//   3. insert phase: the N generated keys in their generated (random) order - ascending with
//      sorted_insert - value = position+1
//   4. the requested ops in this fixed order, whatever order they were named in:
//        search  lookups of all keys in another random order (each value is verified)
//        scan    `scans` range queries from sampled start keys, each of scan_len keys
//        upsert  replace every value (random order)
//        restart two results: "restart" closes the pool cleanly and reopens it; "recover" opens
//                a copy of the pool file taken before that close, as a kill -9 would have left
//                it (never closed: the allocator's post-crash GC runs in the background). Each
//                is timed from Pool::Open to the first lookup answered (for FPTree and NVTree
//                this includes rebuilding the inner nodes in DRAM); "recover" also reports the
//                background GC's duration (recovery_seconds). Then 1000 sampled keys and the
//                key count are checked (untimed). The index used afterwards is the reopened one.
//        delete  remove every key (random order) - last, since it empties the index
// Each (index, op) gives ns/op (wall time / ops, so with T threads it is the inverse of the
// throughput), CPU ns/op (the threads' CPU time / ops: unaffected by waiting for a core on a
// shared machine, but it counts time spent spinning on a lock), cache lines flushed and fences per op (pm::GetCounters deltas over the op's
// timed loop, all threads), and the index's avg leaf depth and pool bytes per key measured after
// the insert phase. The insert phase is always run; it is reported when `insert` is requested.
//
// Allocator benchmark (RunAllocBench): per pattern (sizes uniform in 64..1024, fixed 64) and per
// thread count, rounds of "allocate a batch, free it in a shuffled order" against the pool
// allocator and against glibc malloc/free with identical sizes and order (each block's first word
// is written, as its user would); allocations/s, frees/s, and flushes and fences per allocation.
// One untimed warm-up round first; each configuration runs `repeats` times and the run with
// the best allocation rate is kept. It switches glibc's heap trimming off for the process
// (mallopt M_TRIM_THRESHOLD), so that malloc, like the pool, keeps its pages between rounds.
//
// Global state: both benches set the process-wide flush instruction and emulated write latency
// (wort/pm.h) for their run and restore the previous settings before returning.
//
// Thread safety: run one bench at a time per process (the pm settings and counters are global).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/ycsb.h"
#include "workload/workload.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/status.h"

namespace wort::bench {

enum class Op { kInsert, kSearch, kScan, kUpsert, kRestart, kDelete };
inline constexpr Op kAllOps[] = {Op::kInsert, Op::kSearch, Op::kScan, Op::kUpsert, Op::kRestart, Op::kDelete};
const char* OpName(Op op);
bool ParseOp(const std::string& name, Op* out);

// Parses comma lists. InvalidArgument naming the bad entry and listing the valid names.
// "all" in the index list means every registered kind.
Status ParseIndexList(const std::string& list, std::vector<std::string>* out);
Status ParseOpList(const std::string& list, std::vector<Op>* out);
Status ParseDistName(const std::string& name, Dist* out);
// The non-default knobs of `o` in words ("" when all are defaults), for the config header; and
// as JSON fields option_cceh_segment_bytes, option_cceh_variant, option_b3_rebalance (only
// those set).
std::string FormatIndexOptions(const IndexOptions& o);
void AddIndexOptionsJson(const IndexOptions& o, nlohmann::json* j);
const char* CcehVariantName(CcehVariant v);  // msb, lsb, exth ("default" for kDefault)
// Valid names, comma-separated (for messages and --help).
std::string IndexNames();
std::string OpNames();
std::string DistNames();

// Settings shared by both benches.
struct CommonConfig {
  std::string flush = "auto";     // clwb | clflushopt | clflush | none | auto
  uint64_t write_latency_ns = 0;  // emulated PM write latency per flushed line
  std::string pool_path;          // empty: /dev/shm/wort-bench-<pid>[-<index>].pool
  uint64_t pool_size = 0;         // the pool's max size; 0: 16 GiB (the file grows on demand)
  uint64_t pool_initial = 0;      // the file's size at creation; 0: 64 MiB (or the max size, if smaller)
  bool keep_pool = false;
  bool pool_sync = false;         // PoolOptions::sync: persist also msyncs (a file without DAX)
  uint64_t seed = 1;
  int threads = 1;
};

struct IndexBenchConfig {
  CommonConfig common;
  std::vector<std::string> indexes;  // kind names
  Dist dist = Dist::kDense;
  size_t keys = 1000000;
  std::vector<Op> ops = {Op::kInsert, Op::kSearch};
  size_t scan_len = 100;    // keys per range query
  double range_frac = 0;    // if > 0: scan_len = max(1, round(range_frac * keys))
  size_t scans = 0;         // range queries to run; 0: min(keys, 10000)
  uint32_t span_bits = 4;   // IndexOptions::span_bits (WORT)
  bool sorted_insert = false;  // insert phase in ascending key order (the later phases keep their random orders)
  // Count the flushed lines of each phase per call site (a pm::Hook: slower; the counts are
  // exact): IndexResult::flush_sites, printed and in the JSON records ("flush_sites").
  bool flush_sites = false;
  // Options of every index created (the kinds' knobs: cceh_segment_bytes, cceh_variant,
  // b3_no_rebalance, ...; 0/false: the kind's default, which its environment variable may set).
  // key_type and span_bits are the bench's own (the distribution's key type, span_bits above).
  IndexOptions index_options;
};

// Where and how the run happened (printed first and stored with every JSON record).
struct Environment {
  std::string flush;         // the instruction actually used
  uint64_t write_latency_ns = 0;
  std::string cpu;           // /proc/cpuinfo model name
  int cpus = 0;
  std::string timestamp;     // UTC, ISO 8601
  std::string git_commit;    // BuildGitCommit(), or $WORT_GIT_COMMIT when set
  std::string wort_version;  // wort::Version()
  std::string host;
};

// The pool allocator's waits over one timed phase (issue 31, h70: wort/alloc.h AllocStats, the
// difference of two Stats calls): its lock taken and the takings that had to wait; the pool's
// growths, those made ahead of the writers, their time; the times a writer found no free chunk
// and waited for a growth, and that time. Zero for a kind that does not allocate from the pool.
// file_chunks: the pool file's heap in 1 MiB chunks at the end of the phase (h72: what growth
// ahead costs in space).
struct AllocWaits {
  uint64_t lock_acquisitions = 0, lock_waits = 0;
  uint64_t grows = 0, grows_ahead = 0, grow_waits = 0;
  double grow_ms = 0, grow_wait_ms = 0;
  uint64_t file_chunks = 0;
};
AllocWaits AllocWaitsBetween(const AllocStats& a, const AllocStats& b);
void AddAllocWaitsJson(const AllocWaits& w, nlohmann::json* j);
std::string FormatAllocWaits(const AllocWaits& w);

struct IndexResult {
  std::string index;
  std::string dist;
  std::string op;
  std::string key_type;        // "u64" or "bytes"
  size_t keys = 0;             // keys in the index after the insert phase
  uint64_t ops = 0;            // operations timed
  double seconds = 0;
  double ns_per_op = 0;
  double cpu_ns_per_op = 0;    // thread CPU time / ops (all threads): robust to a busy machine
  double mops_per_s = 0;
  double flushes_per_op = 0;   // cache lines flushed
  double fences_per_op = 0;
  double leaf_depth = 0;       // after the insert phase
  double bytes_per_key = 0;    // (bytes_allocated + volatile_bytes) / keys, after the insert phase
  uint64_t bytes_allocated = 0;
  uint64_t volatile_bytes = 0;
  double keys_per_op = 1;      // scan: keys returned per range query
  size_t scan_len = 0;         // scan: the limit
  double recovery_seconds = 0; // recover: the post-crash GC's duration (background)
  uint64_t errors = 0;         // operations whose outcome was wrong (lookups that missed, ...)
  std::string pool_path;
  std::string durability;      // the pool's DurabilityName (wort/pool.h)
  double msyncs_per_op = 0;    // sync mode: msync calls per operation
  // Hash kinds' insert phase (index/hash/hash_common.h HashCounters, wall ns per insert): time in
  // splits, doublings and rehashes, and in cuckoo displacements; the rest of ns_per_op is the
  // write (the thesis's Figure 25 breakdown). has_breakdown: false for other kinds.
  bool has_breakdown = false;
  double rehash_ns_per_op = 0;
  double displacement_ns_per_op = 0;
  AllocWaits alloc;  // the phase's allocator waits (AllocWaits)
  // IndexBenchConfig::flush_sites: lines flushed per operation by each call site
  // ("src/...:line function"), most first.
  std::vector<std::pair<std::string, double>> flush_sites;
};

// Per index kind that could not be measured (e.g. the kind rejects the key type, or PoolFull).
struct Skipped {
  std::string index;
  std::string reason;  // begins with the index name
};

struct IndexBenchReport {
  Environment env;
  std::vector<IndexResult> results;
  std::vector<Skipped> skipped;
};

// Progress goes to `log` if set: first the configuration header (FormatIndexConfig /
// FormatAllocConfig, once the settings are applied), then one line per finished phase.
using LogFn = std::function<void(const std::string& line)>;

// Runs the index benchmark. InvalidArgument for a bad configuration (unknown index or flush
// name, unsupported flush instruction, keys == 0). An index that fails (PoolFull, an error
// status from the index) is listed in report->skipped with the reason, and the others still
// run; the call then returns the first such failure's status (PoolFull keeps its code) after
// filling *report.
Status RunIndexBench(const IndexBenchConfig& cfg, IndexBenchReport* report, const LogFn& log = nullptr);

struct AllocBenchConfig {
  CommonConfig common;
  size_t ops_per_thread = 2000000;  // allocations per thread per run (and as many frees)
  size_t batch = 4096;              // blocks live at once per thread
  std::vector<int> thread_counts = {1, 2};
  int repeats = 3;                  // runs per configuration; the best allocation rate is kept
};

struct AllocResult {
  std::string allocator;  // "wort" or "malloc"
  std::string pattern;    // "mixed-64-1024" or "fixed-64"
  int threads = 1;
  uint64_t allocs = 0;    // over all threads
  double alloc_seconds = 0, free_seconds = 0;  // wall time summed over rounds
  double allocs_per_s = 0, frees_per_s = 0;
  double ns_per_alloc = 0, ns_per_free = 0;    // wall time / ops (inverse throughput)
  double cpu_ns_per_alloc = 0, cpu_ns_per_free = 0;  // thread CPU time (all threads) / ops
  double flushes_per_alloc = 0, fences_per_alloc = 0;  // alloc phases (wort only)
  double flushes_per_free = 0, fences_per_free = 0;
};

struct AllocBenchReport {
  Environment env;
  std::vector<AllocResult> results;
};

Status RunAllocBench(const AllocBenchConfig& cfg, AllocBenchReport* report, const LogFn& log = nullptr);

// Human-readable configuration header and result tables.
std::string FormatIndexConfig(const IndexBenchConfig& cfg, const Environment& env);
std::string FormatIndexResults(const IndexBenchReport& r);
std::string FormatAllocConfig(const AllocBenchConfig& cfg, const Environment& env);
std::string FormatAllocResults(const AllocBenchReport& r);

// One JSON object per result.
nlohmann::json ToJson(const IndexResult& r, const IndexBenchConfig& cfg, const Environment& env);
nlohmann::json ToJson(const AllocResult& r, const AllocBenchConfig& cfg, const Environment& env);
// Appends one line per result to `path` (JSON Lines). IOError if the file cannot be written.
Status AppendJsonLines(const std::string& path, const std::vector<nlohmann::json>& records);

// ---- YCSB (`wort bench ycsb`; generators and mixes: src/bench/ycsb.h) -----------------------
// Per index kind and per thread count T: a fresh pool and index; the load phase inserts the N
// records with T threads (reported as workload "load" = insert-only, when requested); then each
// requested workload runs `ops` operations split over T threads, in the order named, on the same
// index (inserts of d and e add records after the loaded ones). Hash kinds skip e (no scans).
// Per (kind, T, workload): throughput, wall and CPU ns per operation, p50/p99 latency of one
// operation in 8 (sampled; each sample is two clock reads), flushes and fences per operation,
// the operation counts by type, and `errors`: reads of a record that must be present and missed,
// updates that inserted, inserts that found their new key present, scans not starting at their
// (present) start key. They should be 0.
// How the load's records are split over the threads (issue 31: what two writers of one index
// share, told apart by experiment). kSlices: contiguous slices of the key list (the keys are
// shuffled, so every thread inserts all over the tree: the default). kFirstByte: thread t
// inserts the records whose key's first byte is t mod T (an empty key: thread 0): for the radix
// kinds, disjoint subtrees below the root. kIndexPerThread: each thread loads its slice into an
// index (and pool) of its own, in the same process: only the process is shared. The workloads
// after the load are not split (kIndexPerThread runs the load only).
enum class LoadPartition { kSlices, kFirstByte, kIndexPerThread };
const char* LoadPartitionName(LoadPartition p);
bool ParseLoadPartition(const std::string& s, LoadPartition* out);

struct YcsbBenchConfig {
  CommonConfig common;
  LoadPartition partition = LoadPartition::kSlices;
  std::vector<std::string> indexes;
  Dist dist = Dist::kSparse;
  size_t records = 1000000;  // loaded records (N)
  size_t ops = 0;            // operations per workload, all threads together; 0: N
  std::vector<YcsbWorkload> workloads = {YcsbWorkload::kLoad, YcsbWorkload::kA, YcsbWorkload::kB, YcsbWorkload::kC,
                                         YcsbWorkload::kD,    YcsbWorkload::kE, YcsbWorkload::kF};
  RequestDist request = RequestDist::kZipfian;  // for a, b, c, e, f (d is always "latest")
  std::vector<int> thread_counts = {1};
  uint32_t span_bits = 4;
};

struct YcsbResult {
  std::string index, dist, workload, request, key_type;
  int threads = 1;
  size_t records = 0;
  uint64_t ops = 0;
  double seconds = 0, mops_per_s = 0, ns_per_op = 0, cpu_ns_per_op = 0;
  double p50_ns = 0, p99_ns = 0;
  double flushes_per_op = 0, fences_per_op = 0;
  uint64_t reads = 0, updates = 0, inserts = 0, scans = 0, rmws = 0;
  uint64_t errors = 0;
  // Where the workers' CPU time went (getrusage(RUSAGE_THREAD) of each worker, summed): user and
  // system ns per operation, minor page faults per operation, voluntary and involuntary context
  // switches of the run.
  double user_ns_per_op = 0, sys_ns_per_op = 0, faults_per_op = 0;
  uint64_t vol_switches = 0, invol_switches = 0;
  // The epoch manager the kind's writers use (vart: its own; the others: the pool's), over the
  // run: epochs advanced, advances tried, tries that found a thread inside an older epoch.
  // -1: not known.
  int64_t epoch_advances = -1, epoch_tries = -1, epoch_blocked = -1;
  std::string partition = "slices";  // YcsbBenchConfig::partition (the load only)
  AllocWaits alloc;  // the run's allocator waits, every pool of the run (AllocWaits)
};

struct YcsbBenchReport {
  Environment env;
  std::vector<YcsbResult> results;
  std::vector<Skipped> skipped;
};

Status ParseYcsbList(const std::string& list, std::vector<YcsbWorkload>* out);
Status RunYcsbBench(const YcsbBenchConfig& cfg, YcsbBenchReport* report, const LogFn& log = nullptr);
std::string FormatYcsbConfig(const YcsbBenchConfig& cfg, const Environment& env);
std::string FormatYcsbResults(const YcsbBenchReport& r);
nlohmann::json ToJson(const YcsbResult& r, const YcsbBenchConfig& cfg, const Environment& env);

// The keys and orders of the index bench for an integer distribution, for programs outside wort
// (scripts/peers.sh's drivers): little-endian binary, "WORTKEYS" (8 bytes), n (u64), the n keys
// as u64 in insert order, then n u32 indexes into them: the search phase's lookup order.
Status WriteKeyFile(Dist d, size_t n, uint64_t seed, const std::string& path);

// The commit of wort's source tree when this binary was built (12 hex digits), "-dirty"
// appended when tracked files differed from it, or "unknown" when the tree was not a git
// checkout (e.g. a release tarball). Generated at build time by cmake/git_commit.cmake.
const char* BuildGitCommit();
// The environment as seen now, for the given pm settings.
Environment CaptureEnvironment();

}  // namespace wort::bench
