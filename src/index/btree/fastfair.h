// index/btree/fastfair.h - FAST&FAIR: a persistent B+-tree whose sorted nodes are updated in
// place by Failure-Atomic ShifT (FAST) and rebalanced by Failure-Atomic In-place Rebalancing
// (FAIR) (Hwang, Kim, Won, Nam; FAST 2018). Kind "fastfair", type id kind_id::kFastFair.
//
// Design
// ------
// Every node, leaves and inner nodes alike, lives in the pool and keeps its entries *sorted* in
// one array. An insert shifts the larger entries one slot to the right, one 8-byte word at a
// time, from the end towards the insert position (FAST); a delete shifts them left. Each step
// leaves the array in a state a reader can interpret: while an entry is being moved, its key is
// present in two adjacent slots, and a reader takes the *right* copy of such a pair (the left
// one is being overwritten). x86 keeps stores to one cache line in program order and a line
// reaches memory whole, so the shift needs a flush + fence only when it crosses into the next
// cache line (from right to left for inserts, left to right for deletes).
//
// A node that overflows is split by FAIR, without a log: the new right node is written and
// persisted, linked behind the old one by one 8-byte store of the old node's sibling pointer (the
// pair is now one logical node: a reader that reaches the left node and finds the key at or past
// the right node's low key moves right, as in a B-link tree), then the old node is truncated by
// one store of its count, then the separator is inserted into the parent (itself a FAST insert).
// Merge and redistribution run the same steps backwards: the right node's entry leaves the parent
// first (both nodes become one logical node reached through the left one's sibling pointer),
// entries move, the chain is fixed, and (for redistribution) the new separator enters the parent.
//
// Deviations from the paper, and why
// ----------------------------------
// D1. End of array. The paper ends a node's array with a NULL pointer and recognises a shifted
//     duplicate by its pointer equal to its left neighbour's. wort values are arbitrary 64-bit
//     words (0 and repeats included), so here the array length is a persistent `count` in the
//     node header and a duplicate is recognised by its *key word* (keys are unique, see
//     btree_common.h). The count must be durable before the shift overwrites slot count-1, and
//     the slot it uncovers must then already hold a copy of slot count-1: every node keeps such a
//     *trailing copy* of its last entry in slot[count], durable, so an insert publishes count+1
//     first (one flush + fence more than the paper's layout) and writes the next trailing copy
//     past the new end on the way. Shifts write the value word before the key word (right shift)
//     and the key before the value (left shift), so that a slot whose key equals its right
//     neighbour's is always the stale one.
// D2. Fences. Every node carries its *low key* (the separator its parent holds for it; "minus
//     infinity" for the first node of a level). The paper compares with the right sibling's first
//     key; the low key makes moving right exact and lets recovery re-insert a separator that a
//     crash kept from reaching the parent.
// D3. Redistribution writes the right node's new contents into a fresh node that replaces the old
//     right node in the sibling chain by one store (the paper shifts in place). One store then
//     commits the move for inner nodes too, whose leftmost pointer would otherwise change apart
//     from their entries.
// D4. Concurrency (src/sync/sync.h states the protocol). Readers (Lookup, Scan) take no lock:
//     they enter the pool's epoch, descend with optimistic lock coupling on per-node version
//     words (a DRAM VersionLockTable of this index keyed by node offset: the persistent layout
//     and every persist order are unchanged), validate each node's version after reading it and
//     restart from the root on a change (after 32 restarts they quiesce the writers, so they
//     cannot starve). The paper's readers instead keep reading through a shift in
//     progress and use a per-node switch counter (its parity gives the direction of the shift)
//     to retry only when the direction changed. wort's readers do tolerate the transient
//     duplicate (a stale left copy is never returned) - it is what a crash leaves - but they
//     validate with the version and restart when a writer overlapped their read of the node:
//     the interleaving argument for a binary search over a shifting array was not worth its risk.
//     Writers (issue 31): inserts, upserts and deletes pass the writer gate of the pool's
//     EpochManager (WriterEnter: stores to the thread's own epoch slot; no lock word that every
//     writer stores to) - it only keeps rebalances, reader fallbacks, Size()'s first count,
//     Check, Stats and the GC's visit out, which quiesce the writers through it
//     (QuiesceWriters, one quiescer at a time) - and descend optimistically like a reader, noting each
//     node's version (WriterDescent). They lock without waiting (VersionLock::UpgradeToWriteLock
//     with the version noted; a failure drops every lock and restarts: sync.h W2, no deadlock
//     whatever order the hashed lock words come in): the leaf, and for an insert into a full
//     leaf each ancestor the split cascade changes - the parent, and further up while the node
//     locked last is full; the root's lock stands for the root block's root word (a new root is
//     published while the old one is locked, and only after every insert of the cascade: the
//     new root makes the split's new nodes reachable at once, and none of them is locked). Splits of leaves under different parents, and
//     every insert into a leaf with room, run in parallel. The new right node of a split is not
//     locked: until its parent is unlocked it is reached only through the locked left node's
//     sibling pointer. A delete that leaves its leaf under-full rebalances afterwards with the
//     writers quiesced (coarser than the paper's; no other writer runs then), locking the
//     parent, both neighbours and every ancestor it changes. Readers need no move-right: a node
//     is unlocked only when its split or merge is complete, and coupling makes a reader restart
//     if a node it left changed. A reader that read the root offset checks it again after
//     reading the root's version (a root split or collapse locks the
//     old root). Nodes and key blocks a writer unlinks (merge, redistribution, root collapse,
//     removed keys) go to Allocator::Retire; readers hold epochs, so they never see reused
//     memory. Inserts do not enter the epoch: nothing they read is freed while they are inside
//     the gate (only rebalances unlink nodes, and they run with writers quiesced).
//     WORT_GLOBAL_LOCK=1 (registry.h) restores the old single reader-writer lock.
// D5. Recovery. After an unclean stop, Open (when the pool is writable) finishes what a crash cut:
//     it removes in-node duplicates by finishing the shift, truncates a left node that still holds
//     entries a redistribution or merge had copied out, and inserts the separator of any node that
//     is in its level's chain but not in its parent (including a new root). The paper leaves these
//     states for readers to tolerate forever; finishing them keeps writers simple (the cost: an
//     open after a crash walks every level, O(n)). That walk (the validation) also decides, read-
//     only, whether any of these states is present - a stale slot or trailing copy, a node its
//     parent level does not name, a root with a sibling or without keys - and the repair's own
//     walks run only then: an image every operation of which returned (kill -9 between
//     operations) is walked once and not written. A clean open walks nothing: Size() is kept in
//     DRAM and counted by one walk of the leaves on its first use (LazyCount, btree_common.h).
//
// Byte-string keys live in key blocks outside the node (btree_common.h). Leaf entries own their
// key blocks. A node's low key is a block of its own for leaves (a copy of the first key at the
// split); for inner levels the low key block is *shared* by the separator entry in the parent and
// by the low key of every node on the leftmost path below that separator (moving up at an inner
// split, down at an inner merge, never copied); it is freed when a leaf merge removes the
// separator.
//
// Persistent layout
// -----------------
// Root block (64 B, allocator block; published by the pool's root table):
//   magic u64 | key_type u32 | flags u32 (bit 0: values_are_blocks) | root u64 | pad
// Node (512 B, 64-byte aligned):
//   line 0: count u64 | sibling u64 | leftmost u64 | low u64 | level u32 | flags u32 | pad[3]
//   lines 1..7: slot[28] of { key u64, val u64 }  (inner: val = child node offset); at most 27
//   in use, slot[count] holds the trailing copy of slot[count-1].
//   flags bit 0: low is minus infinity (first node of its level).
//   An inner node with count c has c+1 children: leftmost (keys < slot[0].key) and slot[i].val
//   (keys in [slot[i].key, slot[i+1].key)). level 0 = leaf.
//
// Invariants (Check() verifies them; after recovery they hold strictly)
//   I1. Each level is a chain of nodes linked by sibling pointers, starting at the node reached
//       from the root by leftmost pointers; the last node's sibling is 0. The root has no
//       sibling. All leaves are at level 0 and the root's level is the tree's height.
//   I2. In a node, slots [0, count) hold strictly increasing keys (no duplicate pair), and
//       slot[count] is a copy of slot[count-1] (the trailing copy; count >= 1).
//   I3. Every key of a node is >= its low key and < its sibling's low key; low keys increase
//       along a chain; only the first node of a level has a minus-infinity low key.
//   I4. The children of level l+1, in chain order (leftmost, then slots), are exactly the nodes
//       of level l in chain order; slot[i].key is the very word child.low (same block), and a
//       leftmost child's low equals its parent's low.
//   I5. Size() equals the number of leaf entries.
// In any crash state, in addition: a node may hold one duplicate pair (a cut shift); a node may
// be in its level's chain but not yet (or no longer) in its parent; its left neighbour may still
// hold entries >= its low key (a cut merge or redistribution); the root may have a sibling (a cut
// root split). Readers interpret all of these; recovery removes them (D5).
//
// Write order and commit points (each "persist" is flush + fence of the lines written)
//   Insert into a node with room, at pos < count: slot[count+1] := slot[count-1] (the next
//     trailing copy, flushed) -> count+1 (store8; slot[count] was already the trailing copy) ->
//     persist -> shift right (value word, then key word; persist on leaving a cache line) ->
//     slot[pos].val := v -> slot[pos].key := k (COMMIT: the pair at pos/pos+1 stops being a
//     duplicate) -> persist. At pos == count: the entry and its trailing copy written -> persist
//     -> count+1 (COMMIT) -> persist.
//   Upsert of a present key: [the last entry: its trailing copy's value := v, flushed] ->
//     slot.val := v (COMMIT, store8) -> persist.
//   Delete at pos: slot[pos].key := slot[pos+1].key (COMMIT: pos becomes the stale copy) ->
//     shift left (key, then value; persist on leaving a line) -> persist -> count-1 (the stale copy
//     left at the end is the trailing copy) -> persist; then the key block is freed. Deleting the
//     last slot: count-1 is the COMMIT -> persist -> trailing copy rewritten -> persist.
//   Split: new node written -> persist -> left.sibling := new (COMMIT of the split) -> persist ->
//     left.count := m -> persist -> separator inserted into the parent; a root split instead
//     finishes every insert of its cascade (into the split halves below) first, then: new root
//     written -> persist -> root block's root := new root (COMMIT) -> persist.
//   Merge of R into its left neighbour L: R's entries (and, for inner nodes, the separator with
//     R.leftmost) written past L.count -> persist -> R's entry deleted from the parent (COMMIT) ->
//     L.count += n (store8) -> persist -> L.sibling := R.sibling -> persist -> free R.
//   Redistribution: R' written -> persist -> [entries for L written past L.count -> persist] ->
//     R's entry deleted from the parent (COMMIT) -> [L.count grows -> persist] ->
//     L.sibling := R' -> persist -> [L.count shrinks -> persist] -> (R'.low, R') inserted into
//     the parent -> free R.
//   Root collapse (inner root left with no entry): root block's root := root.leftmost (COMMIT) ->
//     persist -> free the old root.
//
// Allocation: a split preallocates every node its cascade may need (and the key block copy of a
// leaf's low key) before the first store, so PoolFull leaves the tree untouched. A rebalance that
// cannot allocate is skipped (the node stays under-full; the delete itself has succeeded).
//
// Visit: walks every level's chain (so it reaches nodes not yet in their parent) and reports
// nodes, key blocks (entries and low keys) and, with values_are_blocks, leaf values. It holds the
// index lock (btree_common.h) exclusively (writers hold it shared or exclusively), so it is
// safe against concurrent writers.
//
// Thread safety: all methods are thread safe; lookups and scans are lock-free, writers on
// different leaves run in parallel (D4). Check, Stats and the first Size() after open hold the
// index lock exclusively (no writer runs). Scan collects up to 64 keys, validated leaf by leaf,
// and calls fn holding no lock and outside its epoch, so fn may use the index. Only one Index
// object per root may be open at a time.
#pragma once

#include <cstdint>

namespace wort::btree::ff {

inline constexpr int kSlots = 27;         // entries per node (28 slots: one holds the trailing copy)
inline constexpr int kMinFill = kSlots / 2;  // a non-root node with fewer entries is rebalanced (50%)
inline constexpr uint64_t kRootMagic = 0x524941462654534bull;  // "KST&FAIR"

}  // namespace wort::btree::ff
