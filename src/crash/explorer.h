// crash/explorer.h - the crash explorer: checks an index's claim to survive a crash at any
// instant, for any registered index kind (it knows nothing of any particular index).
//
// The model of persistent memory (doc/crash-model.md has the long form)
// -----------------------------------------------------------------------
// The explorer installs itself as the pm::Hook, so it sees every cache line flushed and every
// fence (with their source locations), and keeps a *shadow image* of the pool: what persistent
// memory holds.
//   - Flush: the line's content at the moment of the flush is captured; the line is *in flight*.
//     It reaches persistent memory at some moment up to the next fence.
//   - Fence: every in-flight line reaches the shadow (with its captured content). Fences are
//     treated as global (the workload is single-threaded).
//   - A line that differs from the shadow and is not (or no longer) in flight is *dirty*: the
//     cache may have evicted it at any moment, so its current content may have reached memory.
//     Dirty lines are found by comparing the live pool with the shadow, 64 bytes at a time, over
//     the file's current size.
// A *crash point* is every flush and every fence during an explored operation (a crash just
// before that instruction), plus the moment the operation returned. The lines of one flush()
// call are one crash point (crashing between them is covered by the in-flight subsets at the
// next point). The *crash image* at a point is
//     shadow + any subset of the in-flight lines + any subset of the dirty lines,
// where a dirty line, when chosen, holds its live content (it was written back last), and
// otherwise an in-flight line, when chosen, holds its captured content.
// Failure atomicity: an aligned 8-byte word is never torn. By default a cache line is the unit
// of write-back: it reaches memory whole, with the content it had when flushed or when evicted.
// With `torn_lines`, every 8-byte word of an in-flight or dirty line is chosen independently
// (a line may be half written back: e.g. power failure in the middle of a write-back on a
// device whose atomic unit is 8 bytes). Code that relies only on 8-byte atomic stores and
// persist ordering passes both; code that relies on two stores to one line reaching memory
// together passes only the default.
// Not modelled: intermediate contents of a line between two crash points (a line written twice
// without a flush in between is only ever seen with its content at a crash point); reordering
// of the lines of other threads.
//
// At each crash point the explorer checks the image with nothing in flight and no dirty line,
// the image with every in-flight and every dirty line, and `subsets` random subsets (each with
// its own seed, derived from the run's seed, the operation and the point). Identical points and
// identical images are checked once. When an operation has more than `max_points` crash
// points, a seeded random sample of `max_points` of them (plus the return) is checked.
//
// The check of an image (crash/oracle.h): the image is written to a fresh file under `dir`,
// opened with Pool::Open(background_recovery = false) while the hook is not installed, the
// index is opened and checked, its contents must equal the state before or after the operation
// in progress (after it, at the return point), the allocator's reachability contract must hold,
// and the index must still work. Any failure is a violation, printed with the operation, the
// crash point and the source file:line of its flush or fence, the image (nothing / all / subset
// with its seed) and what was wrong, and a command line that replays exactly that point.
//
// Besides the crash images, after every operation the live pool itself must keep the
// reachability contract (a block orphaned without any crash is a leak that only a post-crash GC
// would reclaim), and the operation must have returned what the oracle expects.
//
// An index that crashes (SIGSEGV...) or hangs while an image is checked is a violation: by
// default the check runs in this process under a signal and alarm guard and the run stops
// there; with `isolate` each check runs in a forked child and the run goes on.
//
// The workload: `keys` keys are loaded (setup, not explored); the shadow is then taken from the
// pool as it is (setup is assumed persistent); then `explore_ops` operations of the kinds in
// `ops` run one by one, each explored as above.
//
// Thread safety: Run installs a process-wide hook: one Run at a time per process, and no other
// thread may flush to persistent memory meanwhile.
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

struct ExplorerConfig {
  std::string index = "wort";           // a registered kind name
  IndexOptions index_options;           // key_type: see key_type_from_dist
  bool key_type_from_dist = true;       // kU64 for integer distributions, kBytes for strings
  bench::Dist dist = bench::Dist::kDense;
  size_t keys = 100;                    // setup keys, loaded before exploring
  size_t explore_ops = 30;              // operations explored
  std::vector<OpType> ops = {OpType::kInsert, OpType::kUpsert, OpType::kDelete};
  uint64_t seed = 1;
  int subsets = 4;                      // random images per crash point, besides nothing/all
  size_t max_points = 64;               // crash points per operation (seeded sample beyond)
  bool torn_lines = false;              // tear in-flight/dirty lines at 8-byte granularity
  bool edge_keys = true;                // add the edge keys to byte-string workloads
  bool exercise = true;                 // run operations on every recovered image
  // Check each image in a forked child (slower; the run goes on after an index crashes or hangs
  // on an image). Otherwise in this process under a signal/timeout guard: a crash or hang is
  // reported as a violation and ends the run.
  bool isolate = false;
  int check_timeout_s = 60;             // a check of one image taking longer is a hang
  uint64_t pool_initial_size = 2ull << 20;
  uint64_t pool_max_size = 64ull << 20;
  std::string dir = "/dev/shm";         // where images are written (and removed)
  size_t max_violations = 10;           // stop after this many
  // Replay: explore only operation `replay_op` (0-based; the others run unchecked), and of it
  // only crash point `replay_point` (-1: all its points).
  int64_t replay_op = -1;
  int64_t replay_point = -1;
  // Mutation testing: behave as if the pm::flush/fence (or persist) calls at this source site
  // ("src/index/radix/wort.cc:123", as printed in crash points) did not exist. Their lines stay
  // dirty (not in flight) and they are no crash points. A site whose removal the explorer does
  // not catch is redundant or not covered by the workload.
  std::string drop_site;
  FILE* log = nullptr;                  // progress and violations as they happen (optional)
};

struct Violation {
  size_t op = 0;             // 0-based index of the explored operation
  std::string op_desc;       // "insert key=... value=..."
  uint64_t point = 0;        // crash point ordinal within the operation
  std::string point_desc;    // "flush at src/index/radix/wort.cc:123", "after return"
  std::string image;         // "nothing", "all", "subset seed=0x..."
  std::string what;          // what was wrong
  std::string replay;        // arguments of `wort crashtest` that replay this point
  std::string ToString() const;
};

struct ExplorerResult {
  std::string index;
  size_t ops_run = 0;          // explored operations run
  size_t points_seen = 0;      // crash points met (every flush call and fence, and each return)
  size_t crash_points = 0;     // distinct crash points checked (sampled, identical ones merged)
  size_t images = 0;           // crash images checked
  size_t violation_count = 0;  // all violations found (the run stops at max_violations)
  std::string stopped_early;   // why the run stopped before its end, if it did
  std::vector<Violation> violations;
  // Source sites of the flushes and fences met during explored operations ("file:line"), with
  // how many times each was met.
  std::vector<std::pair<std::string, uint64_t>> sites;
  double seconds = 0;
};

// Runs the explorer. Returns a non-OK status only when it could not run (unknown kind, pool
// creation failed, setup failed); violations are reported in *out.
Status RunExplorer(const ExplorerConfig& cfg, ExplorerResult* out);

// The arguments of `wort crashtest` that reproduce `cfg` (without --replay-*).
std::string ExplorerArgs(const ExplorerConfig& cfg);

}  // namespace wort::crash
