// index/btree/b3tree.h - B3-tree, the Byte-addressable Binary B-tree (PhD thesis, UNIST 2019,
// chapter IV, sections 4.1-4.2, Algorithms 1-3). Kind "b3tree", type id kind_id::kB3Tree.
//
// Design
// ------
// A B3-tree is a balanced B-tree of *pages*; inside a page, entries are not an array but a binary
// search tree (BST) of 32-byte BST nodes stored in the page's node array. A BST node is only ever
// added as a new leaf of the page's BST, so an insert is failure-atomic with one 8-byte store:
// the child pointer of its BST parent (Algorithm 1: write the node -> persist -> count+1 ->
// persist -> link (COMMIT) -> persist). Nodes written but never linked (a crash between) are
// *dead*: unreachable from the page's BST root. A full page first looks for a dead node to reuse
// (lazy defragmentation, Algorithm 1 line 2) and only then splits.
//
// Leaf pages hold key-value BST nodes. A delete cannot unlink an inner BST node failure-atomically
// (that needs a rotation), so, as the thesis proposes, it sets a *deleted flag* in the node with
// one store (a tombstone): the node still routes searches. A later insert of the same key revives
// the tombstone (value written -> persist -> flag cleared (COMMIT)). Tombstones and dead nodes are
// dropped whenever a page is rebuilt.
//
// Inner pages hold BST nodes whose two children are each either another BST node of the page or
// a child page (every inner BST node has two children, as in the thesis: an inner page with k BST
// nodes has k+1 child pages). The page header's root word is itself such a reference, so an inner
// page with a single child (k = 0) is just a root word naming that page.
//
// Rebalancing (sections 4.2.2-4.2.4): every page has a sibling pointer; the pages of a level form
// a chain. Pages are never modified beyond Algorithm 1's single-word updates: a split, a merge, a
// redistribution and a defragmentation build one or two *new* pages holding complete BSTs (the
// rebalancing optimisation of 4.2.4.1) and swap them in by the thesis's ordered pointer updates,
// using the left neighbour l in the chain as a *logical page*:
//   1. every parent word naming an old page is set to l (persist each) - readers reaching l move
//      right along the chain, so l and the old pages are one logical page;
//   2. l.sibling := first new page (persist) - the new pages replace the old ones in the chain in
//      one store;
//   3. the parent BST is restructured with single-word stores: a split adds a BST node s(m, n1,
//      n2) to the parent page (written -> persist -> count -> persist -> the word naming l is set
//      to s: COMMIT, Algorithm 3); a merge points one word at the merged page and removes the
//      separator BST node by pointing its parent word at its other child (Algorithm 2); a
//      redistribution changes the separator key and then points the two words at the two new pages
//      (Figure 11); a defragmentation points the word at the new page.
// When the old page is the first of its level (no l), the steps that need l are replaced by
// making the first old page the head of the logical page (Algorithm 2's cases then need a single
// store, or the word naming the right page is first pointed at the left one).
//
// Deviations and choices
// D1. Low keys. Each page stores its low key (the separator its parent routes by; minus infinity
//     for the first page of a level). The thesis moves right "if the search key is greater than
//     the largest key in the page"; the low key makes moving right exact and lets recovery find
//     where each page belongs.
// D2. Recovery. The thesis's recovery "scans the entire tree" for BST nodes with identical
//     pointers and fixes them. Here Open (after an unclean stop, pool writable) walks each level's
//     chain top-down, and any parent page whose child words differ from the chain pages in its
//     key range (a cut split, merge, redistribution or defragmentation) is rebuilt into a fresh
//     page by the same failure-atomic replacement; then blocks that were reachable before and are
//     no longer (old pages, removed separators) are freed. The open reads each chain once (the
//     validation walk, which keeps every chain page's offset and low key for the repair's
//     comparison); the two reachability walks run only when some parent page is rebuilt, so an
//     image that needs nothing (every operation returned: kill -9 between operations) is read
//     once and not written. A leaf of 8-byte keys has no key block to check: its BST is not read.
// D3. Merge partner. The thesis notes that one of two merged pages is a direct child of their
//     separator BST node; after a complete-BST rebuild that is not true of every adjacent pair, so
//     a page is merged with the neighbour on the other side of its own parent BST node (for which
//     it always holds).
// D4. Concurrency: the thesis's readers run without locks; here readers take the index's
//     reader-writer lock in shared mode and writers in exclusive mode (as for fastfair.h). It
//     stays single-writer for now (issue 19): an insert rebalances the in-page BST (several
//     pointer words of one page) and no reader validates a page it walked; lock-free readers
//     need per-page version words (src/sync) checked after each page walk, not written yet.
// D5. Algorithm 1 persists the count before linking; we keep that (3 flushes per insert without a
//     split: node, count, link).
//
// Byte-string keys are stored in key blocks (btree_common.h). Each BST node key word owns its
// block (leaf entries; inner separators, copies made at splits) and each page's low key is its
// own block. Blocks move with their nodes when pages are rebuilt; a tombstone's block is freed
// when its page is rebuilt without it.
//
// Persistent layout
// -----------------
// Root block (64 B): magic | key_type u32 | flags u32 (bit 0 values_are_blocks, bit 1 no
//   rebalancing: kRootNoRebalance) | root page | page_bytes u64 | pad.
//   magic kRootMagic: 1 KB pages, page_bytes 0 (the format before the page-size option, unchanged);
//   kRootMagicSized: page_bytes holds the size (a power of two in [256, 4096]). Written at create,
//   persisted with the root block before the pool's root table publishes it; never changed.
// Page (page_bytes B, default 1024, 64-byte aligned; the layout below at 1 KB):
//   header (64 B): root u64 (a reference: BST node, child page, or 0 for an empty leaf page)
//                  | count u64 (node slots ever used, dead ones included) | sibling u64
//                  | low u64 (key word) | level u32 | flags u32 (bit 0: low is -infinity) | pad[3]
//   node[(page_bytes - 64) / 32] (30 at 1 KB), 32 B each: key u64 | val u64 (leaf: the value)
//                  | left u64 | right u64
//   References: 0 = none; odd = BST node (index << 1 | 1); even non-zero = page offset.
//   Leaf nodes: bit 63 of `right` is the deleted flag (tombstone).
//
// Invariants (Check() verifies them; strictly after recovery)
//   I1. Each level is a chain from the page reached by following first children from the root;
//       the root has no sibling; all leaf pages are at level 0; the root's level is the height.
//   I2. In a page, the BST reachable from `root` uses each node at most once, only nodes < count;
//       its in-order keys are strictly increasing and lie in [low, sibling's low).
//   I3. Leaf BST nodes have node or null children; inner BST nodes have exactly two children.
//   I4. The child pages of level l+1's pages, in order, are level l's chain; each separator BST
//       key equals (by content) the low key of the child page to its right; a page's first child
//       has the page's low key.
//   I5. Size() equals the number of leaf BST nodes without the deleted flag.
// Crash states add: dead nodes; parent words naming the left neighbour of the pages they should
// name (logical pages), or an old page that left the chain; chain pages no parent names yet.
// Readers interpret them by moving right; recovery (D2) removes them.
//
// Visit: reports the root block, every page reachable through parent references or sibling
// pointers, low key blocks, the key block of every BST node reachable in its page, and (with
// values_are_blocks) the values of live leaf nodes. It holds the index lock in shared mode.
//
// Thread safety: as fastfair.h (one std::shared_mutex per index; Scan calls fn unlocked).
#pragma once

#include <cstdint>

namespace wort::btree::b3 {

// Page size: a power of two in [kMinPageBytes, kMaxPageBytes] chosen at create
// (IndexOptions::b3_page_bytes; default 1 KB) and kept in the root block. A page of P bytes holds
// NodesPerPage(P) = (P - 64) / 32 BST nodes: 6 at 256 B, 30 at 1 KB, 126 at 4 KB (the thesis's
// "maximum 127 8-byte keys" at 4 KB).
inline constexpr uint64_t kMinPageBytes = 256;
inline constexpr uint64_t kMaxPageBytes = 4096;
inline constexpr uint64_t kDefaultPageBytes = 1024;
inline constexpr int kMaxNodes = static_cast<int>((kMaxPageBytes - 64) / 32);
constexpr int NodesPerPage(uint64_t page_bytes) { return static_cast<int>((page_bytes - 64) / 32); }
constexpr bool ValidPageBytes(uint64_t b) { return b >= kMinPageBytes && b <= kMaxPageBytes && (b & (b - 1)) == 0; }
inline constexpr uint64_t kRootMagic = 0x45455254334232ull;  // "2B3TREE": 1 KB pages, no size field
// A root block whose page size is not 1 KB: the size in its page_bytes word. Builds before the
// page-size option know only kRootMagic and refuse it (CheckRootHeader: wrong magic) instead of
// reading its pages as 1 KB ones.
inline constexpr uint64_t kRootMagicSized = 0x53455254334232ull;  // "2B3TRES"
// Root block flags bit 1: rebalancing off (IndexOptions::b3_no_rebalance, or WORT_B3_REBALANCE=0
// at create). Every page rebuilt by a split, merge, redistribution or defragmentation then gets its
// BST as a chain in ascending key order - the shape ascending inserts build, and what a rebuild
// that re-inserts entries in key order gives - instead of a complete BST (4.2.4.1). The persist
// order, invariants and recovery are the same; only the BST's shape (and so the lines a lookup
// reads) differs. For the thesis's Figure 13 (wort reproduce's b3-order experiment) only.
inline constexpr uint32_t kRootNoRebalance = 2;

}  // namespace wort::btree::b3
