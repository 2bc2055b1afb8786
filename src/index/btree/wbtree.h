// index/btree/wbtree.h - wB+-Tree, the write-atomic B+-tree of Chen and Jin ("Persistent B+-Trees
// in Non-Volatile Main Memory", VLDB 2015). Kinds "wbtree" (bitmap + slot array, type id
// kind_id::kWbTree) and "wbtree-slot" (slot array only, kind_id::kWbTreeSlot).
//
// Design
// ------
// Nodes live in the pool, leaves and inner nodes alike. A node's entries are *unsorted*: a new
// entry goes to any free entry slot. Order is kept by indirection, in a *slot array* of 1-byte
// entry indices in key order (slot[0] = number of entries). Two variants, as in the paper:
//   bitmap + slot array ("wbtree"): a 64-bit bitmap says which entries are valid (bits 1..56) and
//     whether the slot array is valid (bit 0). An insert writes the entry -> persist -> clears
//     bit 0 -> persist -> rewrites the slot array -> persist -> sets the entry's bit and bit 0 in
//     one 8-byte store (COMMIT) -> persist: four flushes. A delete clears bit 0 -> persist ->
//     rewrites the slot array -> persist -> clears the entry's bit and sets bit 0 (COMMIT) ->
//     persist. A reader uses the slot array (binary search) when bit 0 is set, else it scans the
//     valid entries of the bitmap. After a crash, a node with bit 0 clear gets its slot array
//     rebuilt from the bitmap.
//   slot array only ("wbtree-slot"): the whole slot array is one 8-byte word (count + 7 indices),
//     so an insert writes the entry -> persist -> stores the new slot word (COMMIT) -> persist:
//     two flushes; a delete is one store of the slot word.
// An upsert of a present key replaces the 8-byte value in place (one store: COMMIT).
//
// Splits and merges change several nodes; as in the paper they are made atomic with a small
// persistent *redo log* (one cache line in the root block). A split builds the new node and (for a
// root split) the new root -> persist -> writes the log record -> persist -> sets its state word
// (COMMIT) -> persist -> applies it -> clears the state word -> persist. Applying a split: the left
// leaf's next pointer names the new node; the separator is inserted into the parent (or the new
// root is published); the left node drops the moved entries (one store of its bitmap or slot
// word). A merge copies the right node's entries (and, for inner nodes, the separator with the
// right node's first child) into free entries of the left node -> persist -> log -> COMMIT ->
// applies: the left node's bitmap/slot word takes them, the leaf chain skips the right node, the
// separator leaves the parent; the log is cleared; then the right node is freed. Applying is
// idempotent (the parent insert and delete check first), so recovery simply applies a valid log
// again. Every intermediate state of an apply is also readable (the separator enters the parent
// before the left node drops the moved entries; scans skip keys they have returned).
//
// Choices
// C1. Node sizes: 1 KB with 56 entries (bitmap variant; the paper's 1 KB nodes hold 63 with a
//     smaller header) and 192 B with 7 entries (slot-only variant).
// C2. A parent full at split time is split first (top-down over the full nodes of the path), so a
//     log record never covers a cascade.
// C3. Deletion merges an under-full node (< 50%) with a neighbour under the same parent when both
//     fit in one node; otherwise the node stays under-full (no redistribution). An inner root left
//     with no entry is replaced by its only child (one store).
// C4. Concurrency: one std::shared_mutex per index (readers shared, writers exclusive); visit
//     takes it shared. It stays single-writer for now (issue 19): an insert rewrites the slot
//     array / bitmap of a node as one unit and a split rewrites the parent's, and no reader today
//     validates what it read; per-node locks with optimistic readers (src/sync) need a version
//     word per node checked around every slot-array read, not written yet.
// C5. Recovery after an unclean stop (pool writable): slot arrays with bit 0 clear are rebuilt
//     and a valid log is applied, then cleared. Size() is counted on its first use after open
//     (popcount per leaf; LazyCount, btree_common.h), so a clean open walks nothing.
//
// Byte-string keys: key blocks (btree_common.h). Leaf entries own their blocks; an inner separator
// is a copy made at the leaf split (owned by the inner entry; it moves up at an inner split and
// down at an inner merge, and is freed when a leaf merge removes it).
//
// Persistent layout
// -----------------
// Root block (128 B): line 0: magic | key_type u32 | flags u32 (bit 0 values_are_blocks, bit 1
//   slot-only) | root u64 | pad; line 1: the log: state u64 (0 empty, 1 valid: the COMMIT word)
//   | op u64 (1 split, 2 merge) | a | b | c | d | e | f (see Log in wbtree.cc).
// Node, bitmap variant (1024 B): line 0: bitmap u64 | next u64 (leaf sibling) | ch0 u64 (inner:
//   child for keys < the first key) | level u32 | flags u32 | pad[4]; line 1: slot array (u8
//   count, u8 index[56]); lines 2..15: entry[56] of { key u64, val u64 }.
// Node, slot-only variant (192 B): line 0: slot word (byte 0 count, bytes 1..7 indices) | next |
//   ch0 | level | flags | pad; lines 1..2: entry[7].
//
// Invariants (Check() verifies them; strictly after recovery)
//   I1. All leaves are at level 0; the root's level is the height; the leaves, in key order, are
//       chained by next pointers ending in 0.
//   I2. In a node, the slot array is valid (bit 0) and lists exactly the valid entries (bitmap),
//       in strictly increasing key order; count <= capacity.
//   I3. An inner node with c entries has c+1 children (ch0 and the entries' values), one level
//       below; every key of child i lies in [key i, key i+1) of its parent's range.
//   I4. The log is empty. I5. Size() equals the number of leaf entries.
//
// Visit: reports the root block, every node (from the root), key blocks of valid entries, leaf
// values with values_are_blocks, and the blocks a valid log names. It holds the index lock.
//
// Thread safety: as fastfair.h.
#pragma once

#include <cstdint>

namespace wort::btree::wb {

inline constexpr int kBitmapEntries = 56;   // bitmap variant: entries per 1 KB node
inline constexpr int kSlotOnlyEntries = 7;  // slot-only variant: entries per node
inline constexpr uint64_t kRootMagic = 0x45455254422b4277ull;  // "wB+TREE"

}  // namespace wort::btree::wb
