// index/btree/fptree.h - FPTree (Oukid, Lasperas, Nica, Willhalm, Lehner; SIGMOD 2016): a hybrid
// B+-tree with persistent leaves and DRAM inner nodes. Kind "fptree", type id kind_id::kFpTree.
//
// Design
// ------
// Leaves live in the pool, linked left to right (next), with *unsorted* slots, a validity bitmap
// and one 1-byte fingerprint (hash of the key) per slot: a lookup compares the key only where the
// fingerprint matches. Inner nodes are a plain B+-tree in DRAM (separators are std::string copies
// of keys), never persisted: Open rebuilds them from the leaf chain (the cost the papers point
// to: FPTree::LastRebuildSeconds(), measured on every open and reported by the bench notes).
// Before it (and before the split-log recovery writes anything) Open validates the chain: a
// leaf outside the pool or misaligned, a chain longer than the pool's leaf count (a cycle), or a
// valid slot whose key word names no key block is Corruption (doc/crash-model.md, "Damaged
// images").
// A leaf split is made failure-atomic by a micro-log (the split log in the root block).
//
// Deviations
//   D1. Concurrency: the paper uses HTM for inner nodes and leaf locks; here one std::shared_mutex
//       per index (btree::IndexLock, shared with visit): readers shared, writers exclusive. Scan
//       holds the lock in shared mode while it calls fn: fn must not write to this index.
//       It stays single-writer for now (issue 19): the DRAM inner nodes are a plain B+-tree
//       rebuilt on open with no per-node version, and the paper's HTM has no portable
//       equivalent here; per-leaf locks with optimistic inner-node readers (src/sync) are the
//       planned route, not written yet.
//   D2. Empty leaves are not unlinked while the index is open (that would need a second
//       micro-log); an empty leaf stays in the chain and is reused by later inserts in its range.
//       Open (writable pool) unlinks every empty leaf but the head with one store of its
//       predecessor's next (COMMIT) -> persist -> free. A read-only open keeps them linked,
//       without a separator (their range joins the left neighbour's).
//   D3. Upsert of a present key stores the new value in place with one 8-byte store (failure-
//       atomic by itself) instead of the paper's out-of-place write + bitmap flip.
//   D4. Byte-string keys live outside the leaf in key blocks (btree_common.h), as the paper did for
//       variable-size keys; the slot holds the key word (offset of the block).
//
// Persistent layout
//   Root block (64 B): magic u64 | key_type u32 | flags u32 (bit 0 values_are_blocks) | head u64
//     (first leaf, never changes) | log_leaf u64 | log_new u64 | pad[3]
//   Leaf (576 B = 9 lines, 64-byte aligned):
//     line 0: bitmap u64 (bit i: slot i valid) | next u64 | fp[32] u8 | pad[16]
//     lines 1..8: slot[32] of { key u64, val u64 }
// Invariants (Check verifies them; after Open's recovery they hold strictly)
//   I1. The chain from head visits every leaf once; all valid keys of a leaf are < all valid keys
//       of any later leaf; no key is valid twice.
//   I2. fp[i] == Fingerprint(key of slot i) for every valid slot; key blocks are plausible.
//   I3. (DRAM) The inner tree's leaves, in order, are a subsequence of the chain starting at head;
//       every key of a leaf L lies in L's separator range [sep(L), sep(next reachable leaf)).
//   I4. The split log is empty (log_leaf == 0) outside a split.
// Write order and commit points
//   Insert into a leaf with a free slot i: key block written -> persist (kBytes) -> slot[i] and
//     fp[i] written -> persist -> bitmap |= bit i (store8, COMMIT) -> persist.
//   Upsert of a present key: slot.val := v (store8, COMMIT) -> persist.
//   Remove: bitmap &= ~bit i (store8, COMMIT) -> persist -> free the key block.
//   Split of a full leaf L: new leaf N allocated -> log_new := N -> persist -> log_leaf := L
//     (store8: the log is live) -> persist -> N := copy of L with bitmap = slots >= median, next =
//     L.next -> persist -> L.next := N (store8, COMMIT of the split) -> persist -> L.bitmap &=
//     ~N.bitmap (store8) -> persist -> log_leaf := 0 -> persist. Then the key is inserted.
//   Recovery (Open): log_leaf != 0 and L.next == N: roll forward (L.bitmap &= ~N.bitmap; clear the
//     log). Otherwise roll back: clear the log; N was never linked and the allocator's post-crash
//     GC reclaims it (visit does not report it; contract R3). Both steps are idempotent.
// Visit walks the leaf chain (not the DRAM tree) under the index lock in shared mode and reports
// the root block, every leaf, the key block of every valid slot and, with values_are_blocks, the
// value of every valid slot.
#pragma once

#include "wort/index.h"

namespace wort::btree::fp {
// Seconds the last Open of an fptree index spent rebuilding its DRAM inner nodes from the leaf
// chain (walk + inserts); -1 if `idx` is not an fptree.
double LastRebuildSeconds(const Index& idx);
}  // namespace wort::btree::fp
