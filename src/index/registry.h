// Internal: how an index kind makes itself known. Each index's .cc file does
//   static const bool kRegistered = wort::RegisterIndexKind(&kMyKind);
// The library is built as an object library, so these registrations are always linked in.
#pragma once
#include <cstdint>
#include <memory>
#include <shared_mutex>

#include "wort/index.h"

namespace wort {
class Pool;

// The per-index reader-writer lock. Visit functions get only (pool, root offset); a visit that
// runs beside the index's writers (the post-crash GC in the background) takes the index's lock
// in shared mode, so it never sees a write half done. An open index and a visit find the same
// lock here, keyed by (pool mapping, root offset); it is created on first use and dropped when
// no one holds it. Used by the B-trees and the ART-based radix trees.
std::shared_ptr<std::shared_mutex> IndexLock(const Pool* pool, uint64_t root_off);

// Concurrency mode of the radix trees (and of any kind that follows src/sync's protocol):
// false (default): lock-free readers, per-node write locks (optimistic lock coupling);
// true: the old single reader-writer lock per index (IndexLock: readers shared, writers
// exclusive), kept for before/after comparisons (`wort bench --global-lock`). Read when an
// index is opened; the environment variable WORT_GLOBAL_LOCK=1 sets the initial value.
bool GlobalIndexLock();
void SetGlobalIndexLock(bool on);

// Aborts on a duplicate name or type id (a programming error). Always returns true.
bool RegisterIndexKind(const IndexKind* k);
}  // namespace wort
