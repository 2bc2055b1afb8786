// Internal: how an index kind makes itself known. Registration is explicit: each index's .cc
// file defines an accessor wort::builtin_kinds::<Name>() (declared below), and
// BuiltinIndexKinds() (src/index/registry.cc) lists them all in one table. No kind registers
// itself by static initialisation, so a static link (libwort.a) carries every kind: the table
// references each one. A new kind: declare its accessor here, define it in its .cc, add it to
// the table.
#pragma once
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <vector>

#include "wort/index.h"

namespace wort {
class Pool;

// The per-index reader-writer lock. Visit functions get only (pool, root offset); a visit that
// runs beside the index's writers (the post-crash GC in the background) takes the index's lock
// in shared mode, so it never sees a write half done. An open index and a visit find the same
// lock here, keyed by (pool mapping, root offset); it is created on first use and dropped when
// no one holds it. Used by the B-trees and the ART-based radix trees.
std::shared_ptr<std::shared_mutex> IndexLock(const Pool* pool, uint64_t root_off);

// The accessors of the built-in kinds, one per kind (defined next to each kind's code).
namespace builtin_kinds {
const IndexKind* B3Tree();
const IndexKind* FastFair();
const IndexKind* FpTree();
const IndexKind* NvTree();
const IndexKind* WbTree();
const IndexKind* WbTreeSlot();
const IndexKind* Cceh();
const IndexKind* CcehCow();
const IndexKind* Linp();
const IndexKind* Cuck();
const IndexKind* Bch();
const IndexKind* Levl();
const IndexKind* Path();
const IndexKind* ArtCow();
const IndexKind* Woart();
const IndexKind* Wort();
const IndexKind* Vart();
const IndexKind* VbpTree();
const IndexKind* Vradix();
}  // namespace builtin_kinds

// Every built-in kind, in one table (no registration side effects).
const std::vector<const IndexKind*>& BuiltinIndexKinds();

// Adds a kind that is not built in (tests add deliberately broken variants). Aborts on a
// duplicate name or type id (a programming error). Always returns true.
bool RegisterIndexKind(const IndexKind* k);
}  // namespace wort
