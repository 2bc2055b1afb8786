// crash/oracle.h - what the crash explorer (crash/explorer.h) and the kill test
// (crash/killtest.h) share: the workload of key-value operations, the expected-state oracle, and
// the checks run on a pool after a crash.
//
// The oracle (after RocksDB's crash stress test): a DRAM map key -> value holds what the index
// must contain. An operation that returned is in it; the one operation cut by the crash may be
// applied entirely or not at all, so a recovered index must equal exactly one of a short list of
// allowed states (before / after that operation). Nothing else may differ.
//
// The checks on a crashed pool (CheckCrashedPool), in order, each one named in the report:
//   0. optionally (CheckTarget::read_only_first), the pool opened read-only, before recovery:
//      its contents (read and looked up key by key) equal one allowed state;
//   1. Pool::Open with background_recovery = false (the post-crash GC ends before Open returns),
//      then Pool::WaitForRecovery;
//   2. OpenIndex of the root, and Index::Check;
//   3. the contents (a full Scan for ordered kinds, a Lookup of every key the workload ever
//      uses for the others) equal one allowed state, and Index::Size() agrees;
//   4. the allocator's reachability contract (wort/alloc.h): the set of allocated blocks
//      (Allocator::ForEachAllocated) equals the union of the blocks the kinds' visit functions
//      report over all roots - nothing reachable is free, nothing allocated is leaked - and
//      Pool::Check passes;
//   5. optionally, the index still works: inserts, lookups, an upsert, deletes and a read of the
//      full contents against the oracle, then 2-4 again, then a clean Close.
//
// Thread safety: none; one explorer or kill test per thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "util/splitmix64.h"
#include "workload/workload.h"
#include "wort/index.h"
#include "wort/status.h"

namespace wort {
class Pool;
}

namespace wort::crash {

// The seeded generator replays depend on (src/util/splitmix64.h).
using Rng = SplitMix64;

// A seed derived from a seed and up to three coordinates (op, point, image...).
uint64_t MixSeed(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0);

enum class OpType : uint8_t { kInsert = 0, kUpsert = 1, kDelete = 2 };
const char* OpTypeName(OpType t);
// Parses a comma-separated non-empty list of "insert", "upsert", "delete".
bool ParseOpTypes(const std::string& list, std::vector<OpType>* out);
std::string OpTypesName(const std::vector<OpType>& types);

// The expected contents of an index: key -> value. std::string's ordering is unsigned-byte
// lexicographic (char_traits<char>::compare behaves as memcmp), the index order of wort/key.h.
using Contents = std::map<std::string, uint64_t>;

// Printable form of a key: as an integer for 8-byte keys of a kU64 index, quoted when every byte
// is printable ASCII, else in hex; keys longer than 48 bytes are shortened, with their length.
std::string KeyToString(std::string_view key, KeyType kt);

// One operation of a workload. Its key is an index into Workload::keys().
struct Op {
  OpType type = OpType::kInsert;
  uint32_t key = 0;
  uint64_t value = 0;
};

// The keys of a workload and the choice of operations.
//   keys()[0, setup_count())  loaded before anything is explored or killed;
//   keys()[setup_count(), ..) candidates for inserts (deleted keys become candidates again);
//   fresh()                   never used by the workload: the check after recovery inserts them.
// With edge keys (byte-string indexes only) the universe also holds the empty key, keys of
// bytes 0x00 and >= 0x80, chains of keys that are prefixes of each other, and long keys (up to
// kMaxKeyLen), spread over both the setup and the insert candidates.
class Workload {
 public:
  // `extra_setup` keys are loaded at setup besides the generated ones, `extra_inserts` are
  // candidates for inserts besides them (keys chosen by the caller: the crash plans' keys chosen
  // by their hash word).
  Workload(bench::Dist dist, KeyType kt, size_t setup_keys, size_t insert_keys, bool edge_keys, uint64_t seed,
           const std::vector<std::string>& extra_setup = {}, const std::vector<std::string>& extra_inserts = {});

  const std::vector<std::string>& keys() const { return keys_; }
  size_t setup_count() const { return setup_; }
  const std::vector<std::string>& fresh() const { return fresh_; }
  KeyType key_type() const { return kt_; }

  // Chooses the next operation on an index that holds `m`, among `types`, seeded by `rng`.
  // Mostly: inserts of absent keys, upserts and deletes of present keys; about one in ten is a
  // "miss" (an insert of a present key or a delete of an absent one) that must change nothing.
  Op Next(const Contents& m, const std::vector<OpType>& types, Rng& rng) const;
  // Applies `op` to `m`; returns the code the index must return for it.
  Code Apply(const Op& op, Contents* m) const;
  // Runs `op` on `index`.
  Status Run(Index& index, const Op& op) const;
  // "insert key=... value=...".
  std::string Describe(const Op& op) const;

 private:
  KeyType kt_;
  size_t setup_ = 0;
  std::vector<std::string> keys_;
  std::vector<std::string> fresh_;
};

// What CheckCrashedPool checks.
struct CheckTarget {
  const IndexKind* kind = nullptr;
  std::string root;  // the root name of the index under test
  const Workload* workload = nullptr;
  bool exercise = true;  // step 5 above
  // Step 0, before recovery: the pool opened read-only (no post-crash GC, no repair: what the
  // kind's readers make of the crash state as it is) must show one allowed state, both by a
  // full read (ReadContents) and by a Lookup of every workload key (a Scan of an ordered kind
  // walks the leaves and misses what only the inner nodes' routing gets wrong).
  bool read_only_first = false;
  // A crash during the index's creation: the root may be absent (OpenIndex: NotFound); the pool
  // must then hold no block (reachability) and pass Pool::Check.
  bool may_be_absent = false;
};

// Reads the contents of `index`: a full Scan for ordered kinds, else a Lookup of every key of
// the workload (keys() and fresh()).
Status ReadContents(const Index& index, const IndexKind& kind, const Workload& wl, Contents* out);

// Returns the position in `allowed` of the state that `found` equals, or -1 with a description
// of the differences in *diff (at most a few keys, against the first and last allowed state).
int MatchContents(const Contents& found, const std::vector<const Contents*>& allowed, KeyType kt, std::string* diff);

// The reachability contract: OK iff the allocated blocks are exactly the blocks reachable from
// the pool's roots. Findings (leaks, reachable free blocks, roots of unknown kinds) go to *report.
Status CheckReachability(const Pool& pool, std::string* report);

// Runs checks 1-5 above on the pool file at `path` (which it modifies: recovery runs). On
// success returns OK and sets *matched to the position of the allowed state found; otherwise
// returns the first failure, named by its step.
Status CheckCrashedPool(const std::string& path, const CheckTarget& target,
                        const std::vector<const Contents*>& allowed, int* matched);

// As CheckCrashedPool, in a forked child process, so that an index that crashes (SIGSEGV...)
// or hangs on a broken image is reported as a violation instead of ending the run. A child
// that does not finish within timeout_s seconds is killed.
Status CheckCrashedPoolIsolated(const std::string& path, const CheckTarget& target,
                                const std::vector<const Contents*>& allowed, int* matched, int timeout_s = 60);

// As CheckCrashedPool, in this process, with a guard: a fatal signal (SIGSEGV, SIGBUS, SIGFPE,
// SIGILL) in the check, or a check that runs longer than timeout_s seconds (SIGALRM), is
// turned into a Corruption status and *fatal is set. After that the process state is suspect
// (the check was abandoned halfway): the caller should report and stop.
Status CheckCrashedPoolGuarded(const std::string& path, const CheckTarget& target,
                               const std::vector<const Contents*>& allowed, int* matched, bool* fatal,
                               int timeout_s = 60);

// A unique file name under `dir` for a pool image: <dir>/wort-<tag>-<pid>-<n>.pool.
std::string UniquePoolPath(const std::string& dir, const std::string& tag);

// What the explorer and the kill test check of their configuration first: `index` is a known
// kind, `ops` is not empty, and the key type (the distribution's when key_type_from_dist, else
// opts.key_type) fits the distribution. *iopts: opts with that key type.
Status ResolveRunIndex(const std::string& index, const std::vector<OpType>& ops, const IndexOptions& opts,
                       bool key_type_from_dist, bench::Dist dist, IndexOptions* iopts);

// Creates a pipe (close-on-exec) and forks, stdio flushed first; an IOError if either fails.
// On success both processes hold both ends: *pid is the child's pid in the parent, 0 in the child.
Status ForkWithPipe(int fds[2], int* pid);

// "src/index/radix/wort.cc" for "/any/where/src/index/radix/wort.cc".
std::string ShortSourcePath(const char* file);

}  // namespace wort::crash
