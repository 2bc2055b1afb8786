// src/sync: the concurrency layer every concurrent index builds on (lowest layer, beside the
// allocator). Two parts:
//   version_lock.h  VersionLock (one 64-bit word: lock bit, obsolete bit, version counter) and
//                   VersionLockTable (DRAM words keyed by node offset, so no persistent layout
//                   changes), with the verbs of optimistic lock coupling (Leis et al., DaMoN 2016).
//   epoch.h         EpochManager / EpochGuard: epoch-based reclamation of retired blocks.
//
// The protocol (what every index using this layer follows)
// ---------------------------------------------------------
// Reader (lookup, scan, the post-crash GC's visit):
//   R1. Enters an epoch (EpochGuard) for the whole operation, before it reads the index's root.
//       Registration is automatic: the first Enter of a thread enrols it; no heap allocation
//       after that on the read path.
//   R2. Takes no lock. For each node: v = ReadLockOrRestart(node) (fails if a writer holds it or
//       it is obsolete); read what is needed (a child reference, a header); CheckOrRestart(node,
//       v) BEFORE using what was read (before dereferencing a child reference, before acting on a
//       header). Lock coupling: the parent's version is checked after the child's version was
//       read, so a child replaced in between is noticed.
//       Exception (ROWEX, "read-optimized write exclusion"): a point lookup of a kind whose
//       writers change a node in place only by single 8-byte stores between consistent states,
//       and replace it otherwise by publishing a new node, may skip the versions when a wrong
//       turn can only end at a leaf whose full-key comparison fails (ArtTree::LookupAttempt
//       states the argument for WOART and ART+CoW, WortTree::FindLeaf for WORT). Scans never
//       skip them.
//   R3. May assume: a block whose reference it read inside its epoch is not returned to the
//       allocator (its memory is not reused) until it leaves the epoch - even if a writer
//       unlinked it meanwhile. It may NOT assume that what it read is consistent until a check
//       succeeded: values read before a check can be torn or stale, so it bounds-checks every
//       offset and position before using it, and never loops on unchecked data.
//   R4. The restart rule: any failed ReadLockOrRestart / CheckOrRestart restarts the operation
//       from the root (one restart loop per operation, nothing else retried locally). After
//       kMaxOptimisticRestarts restarts an operation may fall back to a pessimistic path
//       (taking write locks) so that it cannot starve.
//   R5. Callbacks (Scan's ScanFn) never run while the reader holds a lock (readers hold none),
//       so a callback may write to the same index. A callback runs inside the scan's epoch: the
//       blocks it retires are reclaimed after the scan ends (no deadlock: Retire never waits).
// Writer (insert, upsert, remove, a repair):
//   W1. Enters an epoch like a reader while it descends optimistically.
//   W2. Locks only the nodes it changes: UpgradeToWriteLock(v) on the node (and on the parent
//       whose child word it replaces, for growth, shrink, split and copy-on-write), with the
//       version it read; a failed upgrade releases what it holds and restarts. A writer never
//       waits for a second lock while it holds one (no deadlock, even when two nodes share a
//       table word: VersionLockTable::SameWord).
//   W3. Keeps the index's persistent write order unchanged: the locks are DRAM only.
//   W4. WriteUnlock() after changing a node in place (readers that read it meanwhile restart);
//       WriteUnlockObsolete() on a node it unlinked (writers that reach it later restart), then
//       EpochManager::Retire(offset) instead of Allocator::Free: the block is freed only after
//       every thread that could hold it has left its epoch.
// Crash: locks and epochs are volatile (DRAM) state. After a crash or restart no node is
// locked, no epoch is held and nothing needs recovery; blocks retired but not yet reclaimed at
// the crash are unreachable from the index and the post-crash GC reclaims them (alloc.h, R3).
#pragma once

#include "sync/attempt.h"       // IWYU pragma: export
#include "sync/counter.h"       // IWYU pragma: export
#include "sync/epoch.h"         // IWYU pragma: export
#include "sync/version_lock.h"  // IWYU pragma: export
