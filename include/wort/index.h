// wort/index.h - the interface every wort index implements, and the registry of index kinds.
//
// Keys are byte strings (wort/key.h) of at most kMaxKeyLen bytes; an index created with
// KeyType::kU64 takes exactly 8-byte keys (use U64Key). Values are 8 bytes. Every operation that
// returns OK for a write has made it durable (persistent) before returning: after a crash at
// any instant, the index reopens with every acknowledged write, and the write in progress is
// either wholly present or wholly absent.
//
// Thread safety: every method may be called from many threads at once unless the index's own
// header says otherwise (the radix trees use a reader-writer lock).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wort/export.h"
#include "wort/key.h"
#include "wort/pool.h"
#include "wort/status.h"

namespace wort {

class Pool;

// cceh's directory variant (index/hash/cceh.h "Variants"): the thesis's Figure 24 baselines.
enum class CcehVariant : uint8_t {
  kDefault = 0,  // WORT_CCEH_VARIANT (msb, lsb or exth) if set, else kMsb
  kMsb,          // CCEH as published: the directory indexed by the hash's most significant bits
  kLsb,          // CCEH(LSB): indexed from the least significant end
  kExth,         // EXTH(LSB): legacy extendible hashing (one bucket per segment, no probing)
};

struct IndexOptions {
  KeyType key_type = KeyType::kBytes;
  // WORT only: bits of key per tree level (4 as in the paper's experiments; 8 also works).
  uint32_t span_bits = 4;
  // When true, every value is the offset of a pool block that belongs to its entry (e.g. the
  // server's value records). The index stores the flag in its root block, and its visit
  // function then reports each value as a reachable block too (reachability contract R1), so
  // post-crash recovery keeps them. The caller allocates and persists the value block before
  // Insert/Upsert, and frees the old block after an Upsert or Remove has returned OK.
  bool values_are_blocks = false;

  // ---- test configuration (0 = the kind's default) ------------------------------------------
  // Small sizes make the structural changes (segment splits, directory doubling, resizes)
  // happen within a few operations; the crash explorer's per-kind plans (src/crash/plans.cc)
  // use them. Each overrides the environment variable named beside it.
  // Hash kinds: the hash seed kept in the root block (0: random at create, or WORT_HASH_SEED).
  // The crash explorer always sets it from its own seed, so that runs replay exactly.
  uint64_t hash_seed = 0;
  // Hash kinds: initial capacity in entries (0: WORT_HASH_CAPACITY, default 2048; at least 16).
  uint64_t hash_capacity = 0;
  // cceh, cceh-cow: segment size in bytes, a power of two in [256, 262144] (0:
  // WORT_CCEH_SEGMENT_BYTES, default 16384).
  uint64_t cceh_segment_bytes = 0;
  // b3tree: turn the rebalancing optimisation off (the thesis's Figure 13 baseline; stored in the
  // root block). false: WORT_B3_REBALANCE=0 turns it off too.
  bool b3_no_rebalance = false;
  // b3tree: page size in bytes, a power of two in [256, 4096] (0: 1024), kept in the root block
  // (the thesis's Figures 12 and 14 vary it). Create refuses any other value (InvalidArgument).
  uint64_t b3_page_bytes = 0;
  // cceh only (cceh-cow refuses anything but msb): the directory variant, kept in the root block.
  CcehVariant cceh_variant = CcehVariant::kDefault;
};

// Called for each key in ascending order; return false to stop the scan.
using ScanFn = std::function<bool(std::string_view key, uint64_t value)>;

struct IndexStats {
  uint64_t keys = 0;
  double avg_leaf_depth = 0;      // average number of inner nodes above a leaf
  uint64_t inner_nodes = 0;
  uint64_t leaves = 0;
  uint64_t bytes_allocated = 0;   // sum of the usable sizes of the index's blocks in the pool
  uint64_t volatile_bytes = 0;    // DRAM the index keeps beside the pool (0 for the radix trees)
};

class WORT_EXPORT Index {
 public:
  virtual ~Index() = default;

  // Kind name, e.g. "wort".
  virtual std::string_view kind() const = 0;
  virtual KeyType key_type() const = 0;

  // Adds key -> value. AlreadyExists (and no change) if the key is present.
  virtual Status Insert(std::string_view key, uint64_t value) = 0;
  // Adds key -> value or replaces the value failure-atomically. *inserted (if non-null) tells
  // which happened.
  virtual Status Upsert(std::string_view key, uint64_t value, bool* inserted = nullptr) = 0;
  // Upsert that also reports the value it replaced, in one traversal where the kind overrides
  // it: on OK, *inserted says whether the key was new, and when it was not, *old is the value
  // the key held until this call (read under the lock of the update's commit: exact beside
  // concurrent writers). The default (kinds that do not override it) is Lookup then Upsert:
  // exact only when the caller serializes the writers of the key (wort serve's key locks do);
  // a concurrent insert between the two reports *old = 0. Neither pointer may be null.
  virtual Status Exchange(std::string_view key, uint64_t value, bool* inserted, uint64_t* old) {
    uint64_t prev = 0;
    const bool had = Lookup(key, &prev).ok();
    Status s = Upsert(key, value, inserted);
    if (s.ok()) *old = (!*inserted && had) ? prev : 0;
    return s;
  }
  // Stores the value in *value. NotFound (and *value untouched) if absent.
  virtual Status Lookup(std::string_view key, uint64_t* value) const = 0;
  // Removes the key. NotFound if absent.
  virtual Status Remove(std::string_view key) = 0;
  // Calls fn for keys >= start in ascending order, stopping after `limit` keys, at the first
  // key > *end (when end is non-null), or when fn returns false. NotSupported for hash indexes.
  virtual Status Scan(std::string_view start, const std::string_view* end, size_t limit,
                      const ScanFn& fn) const = 0;
  virtual uint64_t Size() const = 0;
  // Verifies the structural invariants stated in the index's header. OK iff all hold; findings
  // are appended to *report.
  virtual Status Check(std::string* report) const = 0;
  virtual IndexStats Stats() const = 0;

  // Convenience wrappers for integer keys.
  Status Insert(uint64_t k, uint64_t v) { return Insert(U64Key(k).view(), v); }
  Status Upsert(uint64_t k, uint64_t v) { return Upsert(U64Key(k).view(), v); }
  Status Lookup(uint64_t k, uint64_t* v) const { return Lookup(U64Key(k).view(), v); }
  Status Remove(uint64_t k) { return Remove(U64Key(k).view()); }
};

// ---- registry of index kinds ----------------------------------------------------------------
// Reports every block reachable from a root block (the allocator's reachability contract R1,
// wort/alloc.h). May run concurrently with writers of that index.
using VisitFn = RootVisitFn;  // (wort/pool.h)

struct IndexKind {
  const char* name;        // "wort", "woart", "artcow", ...
  uint32_t type_id;        // stored in the pool's root table; never reused for another kind
  const char* description;
  bool ordered;            // supports Scan
  // Creates an empty index: allocates and persists its root block, stores its offset.
  Status (*create)(Pool& pool, const IndexOptions& opts, uint64_t* root_off);
  // Opens the index whose root block is at root_off (no rebuild of persistent parts).
  Status (*open)(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out);
  VisitFn visit;
};

// All kinds built into this library.
WORT_EXPORT const std::vector<const IndexKind*>& IndexKinds();
WORT_EXPORT const IndexKind* FindIndexKind(std::string_view name);
WORT_EXPORT const IndexKind* FindIndexKindById(uint32_t type_id);

// Creates an index of `kind` and publishes it as root `name` of the pool.
WORT_EXPORT Status CreateIndex(Pool& pool, std::string_view name, std::string_view kind,
                               const IndexOptions& opts, std::unique_ptr<Index>* out);
// Opens the index published as root `name`. One handle per index per process: while a handle
// of the index is alive, another OpenIndex (or OpenOrCreateIndex) of it fails with Busy - a
// handle keeps part of the index in DRAM (its key count, some kinds' inner nodes) that a second
// one would not share. Share the handle instead: an Index is safe to use from many threads.
WORT_EXPORT Status OpenIndex(Pool& pool, std::string_view name, std::unique_ptr<Index>* out);
// Opens root `name` if present, else creates it.
WORT_EXPORT Status OpenOrCreateIndex(Pool& pool, std::string_view name, std::string_view kind,
                                     const IndexOptions& opts, std::unique_ptr<Index>* out);

}  // namespace wort
