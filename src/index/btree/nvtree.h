// index/btree/nvtree.h - NVTree (Yang, Wei, Ng, Loh, Wong, He, Kim, Wang; FAST 2015): append-only
// unsorted persistent leaves, internal nodes in DRAM. Kind "nvtree", type id kind_id::kNvTree.
//
// Design
// ------
// Leaves live in the pool, linked left to right (next). A leaf is a log: entries are appended in
// [0, count) with an op flag (INSERT or DELETE); the latest entry of a key decides its state
// (an Upsert appends a new INSERT entry, a Remove appends a DELETE entry). The count is persisted
// after the entry: the count is the commit word. Within a leaf, all entries of one key share one
// key word (for byte-string keys: one key block, D3).
// A full leaf is consolidated copy-on-write: its live entries are written into one new leaf (if at
// most half the slots are live) or two new leaves split at the median; the new leaves are linked
// in place of the old one by one 8-byte store (the predecessor's next, or the root block's head).
// No log is needed: before the link the new leaves are unreachable, after it the old one is.
// Internal nodes are in DRAM in one contiguous block: an array of PLNs (parents of leaves, up to
// kPln separators each) searched through the contiguous array of the PLNs' first separators. A
// PLN that fills up triggers a rebuild of the whole internal block (all PLNs re-laid half full),
// as published. Open rebuilds it from the leaf chain (the separator of a leaf is its smallest live
// key; the first leaf's is the empty key, the minimum); NvTree::LastRebuildSeconds() reports the
// time. Open (writable) also unlinks leaves left with no live entry. Before it Open validates the
// chain (leaves inside the pool, counts <= the slots, key words naming key blocks, the chain
// ending): Corruption otherwise (doc/crash-model.md, "Damaged images").
//
// Deviations
//   D1. Concurrency: one std::shared_mutex per index (btree::IndexLock, shared with visit); the
//       paper's NVTree is single-writer too. Scan holds the lock in shared mode while calling fn:
//       fn must not write to this index. It stays single-writer for now (issue 19): the
//       contiguous DRAM inner array is rebuilt whole on a leaf-parent split, so a concurrent
//       reader would need it published by copy-on-write plus epochs (src/sync), not written yet.
//   D2. Above the PLNs the paper keeps static IN levels; here a binary search over the contiguous
//       array of PLN first keys plays that role (same one-block layout, same rebuild rule).
//   D3. Byte-string keys live in key blocks outside the leaf (btree_common.h); the entry holds
//       the key word. Dead key blocks (deleted keys) are freed when their leaf is consolidated.
//
// Persistent layout
//   Root block (64 B): magic u64 | key_type u32 | flags u32 (bit 0 values_are_blocks) | head u64 |
//     pad[5]
//   Leaf (832 B = 13 lines): line 0: count u64 | next u64 | pad[6];
//     lines 1..12: entry[32] of { key u64, val u64, op u64 (1 INSERT, 2 DELETE) }
// Invariants (Check verifies them)
//   I1. The chain from head visits every leaf once; live keys of a leaf are < live keys of any
//       later leaf; count <= 32; every entry in [0, count) has a valid op.
//   I2. Within a leaf, entries with equal keys have the same key word; key blocks are plausible.
//   I3. (DRAM) The PLN entries in order are exactly the chain; separators strictly increase; every
//       live key of a leaf lies in [its separator, the next separator).
//   I4. Size() equals the number of live keys.
// Write order and commit points
//   Insert / Upsert / Remove: [key block written -> persist (new kBytes key only)] -> entry[count]
//     written -> persist -> count := count + 1 (store8, COMMIT) -> persist.
//   Consolidation of a full leaf O (predecessor link P = prev.next or head): new leaf (or two,
//     the first's next = the second) written with O's live entries, last.next = O.next -> persist
//     -> *P := first new leaf (store8, COMMIT) -> persist -> free O and the key blocks of O's dead
//     keys. A crash before the COMMIT leaves the new leaves unreachable (reclaimed by the
//     allocator's post-crash GC, contract R3); after it, O is unreachable.
// Visit walks the leaf chain under the index lock in shared mode and reports the root block,
// every leaf, every entry's key block and, with values_are_blocks, the value of each live key.
#pragma once

#include "wort/index.h"

namespace wort::btree::nv {
// Seconds the last Open of an nvtree index spent rebuilding its DRAM internal nodes; -1 if `idx`
// is not an nvtree.
double LastRebuildSeconds(const Index& idx);
}  // namespace wort::btree::nv
