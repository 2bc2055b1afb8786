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
// Determinism: every random choice derives from `seed` - the workload, the sampling, the images
// and the hash tables' hash seed (IndexOptions::hash_seed, set from `seed` unless given) - so
// the same configuration meets the same crash points, and a printed replay line reproduces its
// violation (tests/crash/coverage_test.cc checks both).
//
// The workload: `keys` keys are loaded (setup, not explored); the shadow is then taken from the
// pool as it is (setup is assumed persistent); then `explore_ops` operations of the kinds in
// `ops` run one by one, each explored as above.
//
// Thread safety: Run installs a process-wide hook: one Run at a time per process, and no other
// thread may flush to persistent memory meanwhile.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
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
  // cceh: the directory variant (msb, lsb, exth; index/hash/cceh.h), set as WORT_CCEH_VARIANT
  // for the run (the kind reads it at create). Empty: the environment's.
  std::string cceh_variant;
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
  // Before recovering each image, open it read-only and check what the kind's readers see of
  // the crash state as it is (CheckTarget::read_only_first): for kinds whose readers promise to
  // interpret crash states (b3tree's logical pages) without the repair at a writable open.
  bool read_only_first = false;
  // Before the index is created, blocks of the small sizes a creation and the first nodes use
  // (every class up to 1 KiB, 2 and 4 KiB) are allocated, filled with 0xa5, persisted and
  // freed: the index's first allocations reuse space whose persistent content is not zero (as
  // in a pool where another index lived), so a creation or growth that relies on fresh pool
  // space being zero (an AllocZeroed block is zeroed in the cache only) is caught.
  bool dirty_free_space = false;
  // With explore_recovery: a recovery that returns with a line it wrote still dirty or in flight
  // (not persistent) is a violation - the operations after it build on that write, and a crash
  // after them can lose it (e.g. an unlink whose block a later allocation reused).
  bool recovery_persists = false;
  // An operation that returns with a line still dirty or in flight (not persistent) is a
  // violation, whether or not the operation is explored: an acknowledged write is durable at
  // its return, and so is every word the index rewrote on the way. The "nothing" image at the
  // return point only checks that the state left in memory *reads* as the operation's result;
  // a word left dirty that still names a valid old block reads correctly until that block is
  // freed and reused, possibly many operations later, while the line is still dirty (B3-tree's
  // merge word in Replace). For kinds that keep no volatile state in pool lines (version locks,
  // hints) between operations.
  bool op_persists = false;
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
  // Check the crash points of an operation only when it meets a flush/fence site (file:line)
  // that no earlier operation of this run met (every operation still runs under the hook and
  // its result is still checked). The coverage and mutation plans (crash/plans.h) use it: each
  // site is explored where it is first met, at a fraction of the cost of exploring every
  // operation. A replayed operation (replay_op) is explored whatever it meets.
  bool novel_only = false;
  // Crash during recovery: after an image passes its check, its recovery (Pool::Open with the
  // post-crash GC, and OpenIndex with the kind's repair at open) is run again under the hook,
  // and every crash point of that recovery is checked like the others: crash again, recover
  // again, same invariants. (With novel_only, only recoveries that meet a new site.)
  bool explore_recovery = false;
  // Explore the index's creation (CreateIndex: its root block, the pool's root entry) as
  // operation #explore_ops, before the setup, and the pool's close as operation #explore_ops+1.
  bool explore_lifecycle = false;
  // Operations before this one run unexplored (the mutation gate starts where the dropped site
  // is first met). The creation (explore_lifecycle) is explored only when this is 0 or #explore_ops.
  size_t explore_from = 0;
  // Keys chosen by their hash word (kU64 key type; the hash kinds' MixU64 under the run's hash
  // seed), for paths a random workload does not reach. `hash_special_keys`: the keys whose
  // mixed words are the slot codec's reserved words 0 and 1 are insert candidates (they live in
  // the root block's special slots). `hash_skew_keys`: that many keys whose mixed words have
  // their top 5 bits 0 are loaded at setup: one region of a CCEH directory grows deep while the
  // rest stays shallow, so a later split of a shallow segment rewrites a run of directory
  // entries spanning several cache lines (and a crash can cut it).
  bool hash_special_keys = false;
  // Focus (the mutation gate's second pass): explore an operation (or an explored recovery) from
  // its first meeting of this site, or of a new site, on (novel_only's choice plus every meeting
  // of this one); stop the run after `focus_ops` operations that met it (0: no limit). A dropped persist often shows only in a later
  // operation that meets its site than the first (another layout of the lines involved).
  std::string focus_site;
  size_t focus_ops = 0;
  // Besides nothing / all / random subsets, check at each crash point, for each of its first 32
  // open lines, the image where only that line reached memory and the image where every open
  // line but that one did (a missing fence or flush shows in an image that holds the publishing
  // line and not a published one, which random subsets rarely draw). The mutation gate's second
  // pass uses it.
  bool single_line_images = false;
  size_t hash_skew_keys = 0;
  size_t insert_keys = 0;               // insert candidates besides the setup (0: explore_ops + 8)
  FILE* log = nullptr;                  // progress and violations as they happen (optional)
  // Called before each explored operation (done = operations explored so far, of `total`) and
  // once at the end (done == total): `wort crashtest` draws a progress line on a terminal.
  std::function<void(size_t done, size_t total, size_t images, size_t violations)> progress;
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
  std::map<std::string, size_t> first_op;  // site -> the operation that first met it
  size_t recovery_points_seen = 0;   // crash points met during explored recoveries
  size_t recovery_crash_points = 0;  // of which checked (distinct)
  size_t ops_explored = 0;     // operations whose crash points were checked (novel_only: fewer)
  double seconds = 0;
  // PathExplorer with an interposer (SetInterposer): crash points at which it ran, the writes it
  // reported as acknowledged there, and the images checked with them.
  size_t interposed_points = 0;
  size_t interposed_writes = 0;
  size_t interposed_images = 0;
};

// Runs the explorer. Returns a non-OK status only when it could not run (unknown kind, pool
// creation failed, setup failed); violations are reported in *out.
Status RunExplorer(const ExplorerConfig& cfg, ExplorerResult* out);

// The arguments of `wort crashtest` that reproduce `cfg` (without --replay-*).
std::string ExplorerArgs(const ExplorerConfig& cfg);

}  // namespace wort::crash

namespace wort::crash {

// ---- the same model for other write paths (crash/kv_explorer.h) ------------------------------
// A driver that runs its own operations on a pool (not an Index workload) explores them here:
// each operation runs under the hook; then every crash image of it (the points and images
// chosen as above, from cfg.max_points, subsets, torn_lines, seed, drop_site) is written to a
// file under cfg.dir and passed to the driver's check, which opens it and judges it.
class PathExplorer {
 public:
  // `check(path, returned)`: returned is true for the image of the moment the operation
  // returned (only its outcome is allowed then), false for a crash inside it. A non-OK status
  // is a violation.
  using CheckFn = std::function<Status(const std::string& path, bool returned)>;

  // Interposition (h71): another actor's operation run INSIDE the explored one, at a crash
  // point, against memory as it is at that instant (the explored operation's stores visible,
  // persistent or not - as another CPU or a remote client sees them), before the crash image is
  // taken. The interposer is called at each recorded crash point of an explored operation (every
  // flush and fence; not at the return), with the point's site ("src/remote/canrt_server.cc:123").
  // The flushes and fences it causes are no crash points of the operation: the lines it flushes
  // are collected (their content at the flush) and handed out by TakeInterposedLines(), which
  // the interposer calls after each write it runs. It must leave memory exactly as it found it
  // (the explored operation goes on from there; the interposed write happened in the crash image
  // only) and returns, for each write the other actor completed (acknowledged), a tag for the
  // check and the lines it made persistent. Each such write gets its own crash images: the
  // point's images (nothing, all, `subsets` random ones) with the write's lines on top - what was
  // persistent when the power failed: the explored operation's undetermined lines, and the
  // acknowledged write's persisted lines - each checked by `check(path, tag)`.
  // `unpersisted`: lines the actor wrote and had not persisted when the crash came (a write the
  // crash cut): in its images each 8-byte word of such a line is the image's or the actor's,
  // independently (nothing, all, `subsets` random mixes, the last word only, all but the first).
  struct Interposed {
    std::string tag;
    std::vector<std::pair<uint64_t, std::array<char, 64>>> lines;
    std::vector<std::pair<uint64_t, std::array<char, 64>>> unpersisted;
  };
  using InterposeFn = std::function<std::vector<Interposed>(const std::string& site)>;
  using InterposedCheckFn = std::function<Status(const std::string& path, const std::string& tag)>;
  void SetInterposer(InterposeFn interpose, InterposedCheckFn check);
  // The lines flushed by the interposer since the last call (in offset order).
  std::vector<std::pair<uint64_t, std::array<char, 64>>> TakeInterposedLines();

  // Shadows `pool` from now on: its current content is taken as persistent.
  PathExplorer(Pool* pool, const ExplorerConfig& cfg);
  ~PathExplorer();

  // Runs op() under the hook (its status goes to *op_status), then checks its crash images.
  // Violations are added to *res (as RunExplorer's, numbered op_index, described op_desc);
  // res->ops_run, points_seen, crash_points and images are counted. Non-OK only when an image
  // could not be written.
  Status Explore(size_t op_index, const std::string& op_desc, const std::function<Status()>& op, Status* op_status,
                 const CheckFn& check, ExplorerResult* res);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace wort::crash
