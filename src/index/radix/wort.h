// index/radix/wort.h - WORT, the Write Optimal Radix Tree (Lee et al., FAST 2017, section 3.4).
//
// Design
// ------
// A radix tree that consumes `span_bits` bits of the key per level (a *partial key*; 4 bits as in
// the paper's experiments, so 16 children per node, or 8 bits, 256 children). Unique paths are
// collapsed by path compression with the paper's 8-byte *compression header* in every inner
// node: the node's depth, the prefix length and the prefix array, rewritten only as one 8-byte
// atomic store. Compression is hybrid: the prefix array holds the first kInlineCap partial keys
// of the collapsed path (8 at span 4, 4 at span 8); the rest is compared optimistically, at the
// leaf, which holds the whole key. Every mutation is failure-atomic through 8-byte stores and
// the depth in the header; there is no log and no copy-on-write.
//
// Positions. A key of n bytes has n*8/span partial keys, numbered 0, 1, ... A node's header
// says: depth = the position of the first partial key of its collapsed path, prefix length =
// how many partial keys were collapsed; the node branches on the partial key at position
// *branch* = depth + prefix length. A node's *expected depth* is 0 for the root and
// parent.branch + 1 for a child.
//
// Keys that are prefixes of other keys. Every inner node has an *end slot* (slot 0) beside its
// 2^span child slots (slot 1 + partial key): it holds the leaf of the key that ends exactly at
// the node's branch position (key partial-key count == branch). "a" and "ab" can both be
// present; so can the empty key (it ends at position 0). Ordering the slots as end slot first,
// then children by unsigned partial key, makes an in-order walk produce keys in memcmp order.
//
// Invariants a reader may rely on after any crash (Check() verifies each one)
//   I1. The root block is intact (magic, version, span, key type) and its `root` word is 0 (empty
//       tree), a tagged leaf reference or a tagged node reference inside the pool.
//   I2. Every inner node has at least two non-null slots, and its end slot holds only a leaf.
//   I3. A node's branch position (depth + prefix length) is always correct: every leaf below it
//       agrees with every other on the partial keys [expected depth, branch), the leaf in its end
//       slot ends exactly at branch, and a leaf in child slot 1+c has partial key c at branch.
//   I4. A node's header depth is either its expected depth - then the prefix array holds the
//       partial keys [depth, depth + min(prefix length, kInlineCap)) of its leaves - or *larger*
//       than its expected depth: a stale header left by an interrupted split or collapse (I3
//       still holds). Never smaller.
//   I5. Leaves hold a key of at most kMaxKeyLen bytes (exactly 8 for a kU64 index); an in-order
//       walk yields strictly ascending keys, and Lookup of every leaf's key finds that leaf.
//   I6. Every reference is an offset into the pool; no block is referenced twice.
//
// Stale headers (the paper's Algorithm 2). A reader that finds header.depth != expected depth
// does not compare the prefix array at that node (it may describe a shorter path); it branches
// at depth + prefix length, which I3 keeps correct, and the full key comparison at the leaf
// decides. A writer (Insert, Upsert, Remove) that meets a stale header on its path repairs it
// first with RecoverHeader: pick leaves under two different slots, take their longest common
// prefix from the expected depth, and write the rebuilt header with one 8-byte store + persist.
//
// Persistent writes of each mutation, in order (write -> persist -> publish -> persist)
//   Insert into an empty slot: write the leaf; persist it; COMMIT: store8 the slot (the root
//       word or a node slot); persist the slot.
//   Insert where a leaf occupies the slot (the two keys differ at position m): write the new
//       leaf and a new node (depth = expected, branch = m) holding both leaves; persist both;
//       COMMIT: store8 the slot := new node; persist.
//   Insert that mismatches a node N's compressed path at position m (Algorithm 1, split): write
//       the new leaf and a new parent P (depth = expected, branch = m, children: N and the leaf);
//       store8 N's header := (depth m+1, shortened prefix) - from here N's header is stale until
//       the commit, which I4 tolerates; flush the leaf, P and N's header; fence; COMMIT: store8
//       the parent slot := P; persist. (As in the paper's Algorithm 1: 2 fences.)
//   Upsert of a present key: COMMIT: store8 the leaf's value; persist.
//   Remove from a node with 3 or more entries: COMMIT: store8 the slot := 0; persist; free the
//       leaf.
//   Remove from a node N with exactly 2 entries (collapse): COMMIT: store8 N's parent slot := the
//       sibling S (this unlinks N and the leaf at once, so no node ever has fewer than 2
//       entries, I2); persist. If S is an inner node its header is now stale (depth too large,
//       branch still right: I4); repair it at once with RecoverHeader (store8 + persist). Then
//       free N and the leaf. N's slots are never cleared, so a concurrent visit that already
//       read the old parent slot still reaches S through N.
//   We chose this collapse because it is failure-atomic with a single 8-byte store and leaves
//   behind only the stale-header state that the split already needs to tolerate; a crash
//   between the commit and the repair leaves N unreachable, which the allocator's post-crash GC
//   reclaims (contract R3).
//   RecoverHeader: store8 the rebuilt header; persist. Idempotent; never changes the branch.
//   Allocation failure (PoolFull) happens before any write to the tree: the blocks allocated by
//   the call are freed and the tree is unchanged.
//
// Size. Not persisted: the count lives in DRAM and is computed by counting leaves on the first
// Size() after Open (Open itself reads only the root block), then kept up to date by writers.
// A crash therefore cannot make it wrong, and inserts pay no extra flush for it.
//
// Stats. bytes_allocated sums Allocator::UsableSize over the root block, the inner nodes and the
// leaves; with values_are_blocks the value blocks belong to the caller and are not counted.
// avg_leaf_depth counts the inner nodes above each leaf.
//
// RecoverHeader's persist is not needed for correctness: a repair that is lost in a crash
// brings back the stale header, which I4 tolerates and the next writer repairs again. (The
// crash explorer's mutation mode therefore reports that site as "not caught".)
//
// Layout (all blocks 64-byte aligned by the allocator; references are offsets, tagged below)
//   Root block (64 B):  magic, key type, span bits, version, flags, root reference.
//   Inner node:         8-byte compression header, then 2^span + 1 slots of 8 bytes
//                       (144 B at span 4, 2064 B at span 8).
//   Leaf:               8-byte value, 4-byte key length, 4 reserved bytes, the key bytes.
//
// Thread safety: optimistic lock coupling (src/sync/sync.h; the same scheme as art_tree.h).
// Lookup and Scan take no lock. Lookup reads no version word either (ROWEX: every in-place
// change is one 8-byte store between consistent states; the argument is beside FindLeafIn in
// wort.cc; an 8-byte key's walk unrolls its common steps and leaves anything else to the general
// walk, reading the same words in the same order). Scan reads each node between its DRAM version word's ReadLockOrRestart and
// CheckOrRestart and restarts on a change (in validated batches of 64 keys; its callback runs
// with no lock held and may write). Writers
// lock only what they change: the block holding the slot they store (root block or node); for a
// split also the node whose header moves down; for a collapse the parent's block, the node and
// a node sibling (whose header the repair rewrites); a stale header is repaired under the
// node's lock. Unlinked blocks are retired (Allocator::Retire: freed after the readers' epochs).
// Persist orders are unchanged (the locks are DRAM only). Check, Stats and Size's first count
// quiesce writers. SetGlobalIndexLock(true) (registry.h) restores one lock per index. The visit
// function follows the readers' protocol (epoch, validated node snapshots) beside writers,
// taking no lock (in global-lock mode it holds the index's lock shared: VisitModeLock); it
// reads slots with 8-byte atomic loads, checks every offset against the pool, and reads nothing
// else from inner nodes or leaves (except, with values_are_blocks, each leaf's value word).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "index/radix/tagged_ref.h"
#include "wort/index.h"
#include "wort/status.h"

namespace wort::radix {

// ---- pointer tagging (defined once for the radix trees: tagged_ref.h) -------------------------
// A reference is a pool offset; blocks are 64-byte aligned, so the low 6 bits are free. Bit 0 set
// means "leaf"; clear means "inner node". 0 is the null reference (offset 0 is the pool header,
// never a block). These are tagged_ref.h's functions under WORT's names.
inline constexpr uint64_t kRefTagMask = radix_ref::kTagBits;
inline constexpr uint64_t kLeafTag = radix_ref::kLeafTag;
constexpr bool RefIsLeaf(uint64_t ref) { return radix_ref::IsLeafRef(ref); }
// Callers check RefWellFormed first (Check, visit); for a well-formed reference this is the offset.
constexpr uint64_t RefOffset(uint64_t ref) { return radix_ref::RefOffset(ref); }
constexpr uint64_t MakeLeafRef(uint64_t off) { return radix_ref::MakeLeafRef(off); }
constexpr uint64_t MakeNodeRef(uint64_t off) { return radix_ref::MakeNodeRef(off); }
// True iff the bits that are neither offset nor a known tag are clear.
constexpr bool RefWellFormed(uint64_t ref) { return radix_ref::RefWellFormed(ref); }

// ---- the compression header (Figure 2 of the paper, with a wider depth) -----------------------
// One 8-byte word, always written whole with pm::store8. depth and prefix_len count partial keys
// (16 bits each: a 4096-byte key has 8192 partial keys at span 4, more than a byte holds).
// prefix holds the first kInlineCap partial keys of the collapsed path, packed like key bytes
// (at span 4: partial key j is the high nibble of prefix[j/2] when j is even, the low nibble
// when odd).
struct CompressionHeader {
  uint16_t depth;
  uint16_t prefix_len;
  uint8_t prefix[4];
};
static_assert(sizeof(CompressionHeader) == 8);

// ---- an inner node -----------------------------------------------------------------------------
// Invariants I2-I4 above. Written whole and persisted before it is published; afterwards only
// its header (store8, the split and RecoverHeader) and single slots (store8) change.
template <unsigned kSpan>
struct WortNode {
  static constexpr unsigned kFanout = 1u << kSpan;
  static constexpr unsigned kSlots = kFanout + 1;  // end slot + one per partial key
  uint64_t header;         // a CompressionHeader
  uint64_t slot[kSlots];   // slot[0]: end slot (a leaf); slot[1 + c]: child for partial key c
};
static_assert(sizeof(WortNode<4>) == 144 && alignof(WortNode<4>) == 8);
static_assert(sizeof(WortNode<8>) == 2064 && alignof(WortNode<8>) == 8);

// ---- a leaf -------------------------------------------------------------------------------------
// Written whole (value, length, key) and persisted before it is published; afterwards only the
// value changes, by one store8 (Upsert's commit point). The key bytes follow the 16-byte head.
struct WortLeaf {
  uint64_t value;
  uint32_t key_len;
  uint32_t reserved;  // 0
  const char* key() const { return reinterpret_cast<const char*>(this) + sizeof(WortLeaf); }
  char* key() { return reinterpret_cast<char*>(this) + sizeof(WortLeaf); }
  std::string_view key_view() const { return {key(), key_len}; }
};
static_assert(sizeof(WortLeaf) == 16);

// ---- the root block ----------------------------------------------------------------------------
// Written whole and persisted by create; afterwards only `root` changes, by store8 (the commit
// point of every insert into or removal from the root slot).
struct WortRootBlock {
  static constexpr uint64_t kMagic = 0x31305452524f5257ull;  // "WORTRT01" little-endian
  static constexpr uint16_t kVersion = 1;
  // IndexOptions::values_are_blocks: every leaf's value is the offset of a pool block that visit
  // reports too.
  static constexpr uint8_t kValuesAreBlocks = 1;
  uint64_t magic;
  uint8_t key_type;    // KeyType
  uint8_t span_bits;   // 4 or 8
  uint16_t version;
  uint8_t flags;       // kValuesAreBlocks
  uint8_t reserved[3];
  uint64_t root;       // reference to the root node or leaf; 0 = empty tree
  uint64_t pad[5];
};
static_assert(sizeof(WortRootBlock) == 64);

// ---- test support -------------------------------------------------------------------------------
// Makes the next mutation of the given kind stop where a crash could stop it (one-shot; any
// thread). kSplitBeforeParentUpdate: the next split returns IOError after N's header store and
// the persist of the new blocks, before the parent slot store (the new leaf and parent are freed,
// as post-crash GC would). kCollapseBeforeHeaderFix: the next collapsing Remove returns OK after
// its commit without repairing the sibling's header.
enum class WortInterrupt : int { kNone = 0, kSplitBeforeParentUpdate = 1, kCollapseBeforeHeaderFix = 2 };
void SetWortInterruptForTest(WortInterrupt what);

// Sets the lookup's fast bound (FindLeafIn in wort.cc): 0 makes every lookup take its general
// way, where each reference is checked against the pool (BlockOk). A writer raises the bound
// again when it allocates beyond it. False if `index` is not a WORT index. No writer may run.
bool SetWortFastBoundForTest(Index& index, uint64_t fast_last);

struct WortCheckInfo {
  uint64_t stale_headers = 0;  // nodes whose header depth exceeds the expected depth (I4)
  uint64_t inner_nodes = 0;
  uint64_t leaves = 0;
};
// Check() with details. InvalidArgument if `index` is not a WORT index.
Status WortCheck(const Index& index, std::string* report, WortCheckInfo* info);

}  // namespace wort::radix
