// ArtTree: the adaptive radix tree shared by WOART (woart.cc) and ART+CoW (artcow.cc).
//
// The two trees share node layouts (art_node.h), NODE48 and NODE256 update code, leaves, the
// root block, lookup, scan, check, stats and visit. They differ only in the ArtPolicy below:
//   - which NODE4 / NODE16 layouts are built (WOART's slot-array / bitmap nodes, updated in
//     place by one 8-byte commit store; or ART's sorted nodes, updated by copy-on-write), and
//   - how a prefix split or a path merge changes the header of the node that moves down or up
//     (WOART: in place, one 8-byte store of the header, made safe by WORT's depth rule and
//     repaired by Algorithm 2; ART+CoW: the node is copied with its new header, so no header
//     is ever changed in place and no repair is needed).
// Each tree's own .cc opens with its numbered crash invariants and per-mutation write orders.
//
// Thread safety: optimistic lock coupling (src/sync/sync.h states the protocol). Each node (and
// the root block, for the root word) has a DRAM version word (sync::NodeLock, keyed by address:
// the persistent layout and every persist order are as they were). Lookup and Scan take no
// lock. Scan reads each node between ReadLockOrRestart and CheckOrRestart and restarts on a
// change; Lookup reads no version at all (ROWEX: every in-place change is one 8-byte commit
// store between consistent states, every other change publishes a new node by one store, so
// the path a lookup follows existed during the lookup and its leaf check on the whole key
// decides; the argument is beside LookupAttempt in art_tree.cc). A writer descends the same way and locks (UpgradeToWriteLock) only the nodes whose
// words it stores: the node for an in-place add/remove/leaf_here/repair, the parent too when
// the node is replaced (grow, shrink, copy-on-write, prefix split) and the surviving child
// too for a path merge. Unlinked blocks go to Allocator::Retire (epoch-based reclamation);
// every operation runs inside an epoch of the pool's EpochManager. Writers hold the tree's
// shared_mutex in shared mode only so that Check, Stats, Size's first count and the test
// helpers (which take it exclusive) see a quiescent tree. A Scan callback runs with no lock
// held and may write to the same index. With SetGlobalIndexLock(true) (registry.h) the tree
// uses the old single lock instead: readers shared, writers exclusive.
// The visit function (post-crash GC) follows the readers' protocol (ArtTree::Visit) and takes no
// lock; in global-lock mode it holds the tree's lock shared (VisitModeLock, registry.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>

#include "index/radix/art_node.h"
#include "index/lazy_count.h"
#include "index/registry.h"
#include "sync/sync.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pool.h"

namespace wort::art {

struct ArtPolicy {
  const char* kind_name;  // "woart" / "artcow"
  uint32_t kind_id;
  uint64_t magic;         // root block magic
  uint8_t node4;          // kW4 or kS4
  uint8_t node16;         // kW16 or kS16
  // true: NODE4/NODE16 children are added/removed in place (Algorithms 3 and 4) and prefix
  // split/merge change the moved node's header in place (Algorithm 1, depth rule). false:
  // copy-on-write for both.
  bool in_place;
};

// The root block: art_node.h's RootBlock (shared with roart).

// Points where a mutation can be told to stop, as if the machine had crashed there (tests).
// The blocks the cut mutation allocated but never published are freed, as the post-crash GC
// would free them.
enum class TestStop {
  kNone,
  kAfterSplitHeader,  // WOART prefix split: node header stored + persisted, parent not swapped
  kAfterMergeHeader,  // WOART path merge: child header stored + persisted, parent not swapped
};

class ArtTree final : public Index {
 public:
  ArtTree(Pool& pool, uint64_t root_off, const ArtPolicy& policy);

  static Status Create(Pool& pool, const ArtPolicy& policy, const IndexOptions& opts, uint64_t* root_off);
  static Status Open(Pool& pool, uint64_t root_off, const ArtPolicy& policy, std::unique_ptr<Index>* out);
  // The VisitFn of both kinds: reports the root block, every inner node and every leaf.
  static void Visit(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark);

  std::string_view kind() const override { return policy_.kind_name; }
  KeyType key_type() const override { return key_type_; }
  Status Insert(std::string_view key, uint64_t value) override;
  Status Upsert(std::string_view key, uint64_t value, bool* inserted = nullptr) override;
  Status Exchange(std::string_view key, uint64_t value, bool* inserted, uint64_t* old) override;
  Status Lookup(std::string_view key, uint64_t* value) const override;
  Status Remove(std::string_view key) override;
  Status Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const override;
  uint64_t Size() const override;
  Status Check(std::string* report) const override;
  IndexStats Stats() const override;
  using Index::Insert;
  using Index::Lookup;
  using Index::Remove;
  using Index::Upsert;

  // ---- for tests ----------------------------------------------------------------------------
  void SetTestStop(TestStop s) { test_stop_ = s; }
  // Number of nodes of each NodeType (index = type), counted by a traversal.
  void CountNodeTypes(uint64_t counts[8]) const;
  // Type of the inner node reached by following `path_key` down to depth `depth` bytes (the
  // node whose branching position is the first >= depth on that path); 0 if none.
  uint8_t NodeTypeAt(std::string_view path_key, uint32_t depth) const;
  // Header repairs done by writers since open (interrupted splits/merges found).
  uint64_t repairs() const { return repairs_.load(); }
  uint64_t root_off() const { return root_off_; }

 private:
  struct Entry {
    unsigned char c;
    uint64_t ref;
  };
  struct ScanCtx;
  struct CheckCtx;
  class PrefixSource;
  class WriteLocks;
  // Result of one optimistic attempt of an operation.
  using Attempt = sync::Attempt;  // (sync/attempt.h)

  template <class Push>
  static void VisitEntries(const NodeBase* n, uint8_t t, Push&& push);
  Status ValidateKey(std::string_view key) const;
  // old (may be null): the value an Upsert replaced (Exchange).
  Status InsertImpl(std::string_view key, uint64_t value, bool upsert, bool* inserted, uint64_t* old = nullptr);
  Attempt InsertAttempt(std::string_view key, uint64_t value, bool upsert, bool* inserted, uint64_t* old, uint64_t* lr,
                        Status* out);
  Attempt RemoveAttempt(std::string_view key, Status* out);
  // 1 found, 0 not found (reads no version word, never restarts: art_tree.cc).
  WORT_OPTIMISTIC_INLINE int LookupAttempt(std::string_view key, uint64_t* value) const;
  [[gnu::noinline]] Status LookupGlobalLock(std::string_view key, uint64_t* value) const;  // WORT_GLOBAL_LOCK
  sync::EpochManager& epoch() const { return epoch_; }
  // Writers and quiescers use the pool epoch manager's writer gate (registry.h, issue 31).
  IndexModeLock ModeLock(IndexModeLock::Role r) const { return IndexModeLock(mu_, &epoch(), global_lock_, r); }
  static sync::VersionLock& LockOf(const void* p) { return sync::NodeLock(p); }

  // Addressing.
  NodeBase* node(uint64_t ref) const { return pool_.at<NodeBase>(RefOffset(ref)); }
  Leaf* leaf(uint64_t ref) const { return pool_.at<Leaf>(RefOffset(ref)); }

  // Node primitives (switch on the node type).
  uint64_t* FindChild(NodeBase* n, unsigned char c) const;
  uint64_t* FindChildInline(NodeBase* n, unsigned char c) const;  // the same, for the lookup loop
  int ChildCount(const NodeBase* n) const;
  int Collect(const NodeBase* n, Entry* out) const;  // sorted by unsigned partial key
  // The smallest (max=false) or largest key's leaf below ref; nullptr if the walk meets a
  // reference that is not a valid block (only in a corrupted tree).
  const Leaf* ExtremeLeaf(uint64_t ref, bool max) const;
  // True iff ref names a 64-byte-aligned block inside the pool's heap.
  bool RefOk(uint64_t ref) const;
  // RefOk, and the block is a whole leaf (key length within kMaxKeyLen, inside the pool) or a
  // node of a valid type (inside the pool). The readers (lookup, scan, count) follow only such
  // references: a damaged image reads as absent keys, never outside the pool.
  bool BlockOk(uint64_t ref) const;
  Status AllocLeaf(std::string_view key, uint64_t value, uint64_t* ref);
  // Builds (allocates, fills, persists) a node of `type`; entries sorted. *ref on success.
  Status BuildNode(uint8_t type, const Hdr& h, uint64_t leaf_here, const Entry* e, int n, uint64_t* ref);
  // A persisted copy of n with header h (ART+CoW split/merge).
  Status CopyNode(const NodeBase* n, const Hdr& h, uint64_t* ref);
  void StoreChildIndex(N48* x, unsigned char c, uint8_t v);  // commit of a NODE48 entry
  Status UpdateValue(Leaf* l, uint64_t value, bool upsert, bool* inserted, uint64_t* old);
  void Added();
  void Removed();
  uint8_t TypeAfterAdd(uint8_t type, int n_after) const;
  uint8_t TypeAfterRemove(uint8_t type, int n_after) const;
  void Commit(uint64_t* word, uint64_t v);  // store8 + persist: a commit point
  void Free(uint64_t ref);    // a block never published
  void Retire(uint64_t ref);  // a block unlinked (readers may hold it): freed after their epochs

  // Header with the depth rule applied: the real header of node n found at expected depth
  // `depth` (recomputed from two leaves by Algorithm 2 when the stored depth differs).
  Hdr EffectiveHdr(const NodeBase* n, uint32_t depth) const;
  // Writers: EffectiveHdr, and store the recomputed header back (Algorithm 2, store8 + persist).
  Hdr RepairHdr(NodeBase* n, uint32_t depth);

  // Mutations below the descent.
  Status SplitPrefix(uint64_t* slot, NodeBase* n, const Hdr& h, uint32_t i, std::string_view key, uint64_t value);
  // cnt: n's child count if the caller read it at the version it holds locked; -1: count here.
  Status AddChild(uint64_t* slot, NodeBase* n, const Hdr& h, unsigned char c, uint64_t child_ref, int cnt = -1);
  Status RemoveEntry(uint64_t* slot, NodeBase* n, const Hdr& h, bool end_leaf, unsigned char c, uint64_t leaf_ref);

  // Read paths.
  void ScanRef(uint64_t ref, uint32_t depth, bool bounded, ScanCtx& ctx) const;
  void CheckRef(uint64_t ref, uint32_t depth, std::string& path, CheckCtx& ctx) const;
  uint64_t CountKeys(uint64_t ref) const;

  Pool& pool_;
  const uint64_t root_off_;
  RootBlock* const rb_;
  const ArtPolicy policy_;
  KeyType key_type_;
  // The key lengths this index takes, as one unsigned compare: size - key_min_ <= key_span_
  // (kU64: exactly 8; bytes: 0..kMaxKeyLen). Lookup's first test.
  const uint64_t key_min_, key_span_;  // 64-bit: the test is a sub and a cmp with memory operands
  const uint64_t heap_off_;
  // The pool's epoch manager, found once (the lookup's epoch enter would otherwise walk
  // pool -> allocator -> manager, three dependent loads).
  sync::EpochManager& epoch_;
  // The lookup's fast bound: a 64-byte-aligned reference r with r - heap_off_ < fast_lim_ names
  // a block that a NODE256 read from its start cannot overrun (the pool's size minus the
  // largest node, as FastLim computes it). Only grows, as the pool's size does, so any value
  // once stored stays safe: a block beyond it takes BlockOk, which re-reads the size. Writers
  // raise it when they allocate beyond it (NoteBlock; only this handle allocates the index's
  // blocks: one handle per index, registry.h), so a lookup reads one word instead of
  // computing it from the pool's header at every call.
  std::atomic<uint64_t> fast_lim_;
  std::shared_ptr<void> sole_handle_;  // ClaimSoleHandle's token (registry.h: one handle per index)
  uint64_t FastLim() const;
  void NoteBlock(uint64_t off);  // a writer allocated the block at off: raise fast_lim_ past it if need be
  // Global-lock mode: readers shared, writers exclusive. Otherwise writers take it shared and
  // the quiescing helpers (Check, Stats, counts) exclusive; readers never take it.
  std::shared_ptr<std::shared_mutex> mu_ptr_;
  std::shared_mutex& mu_;
  const bool global_lock_;
  // Number of keys: -1 = not known yet. Recounted lazily by the first Size() after open (so a
  // crash can never make it wrong, and opening costs nothing), then maintained by writers.
  LazyKeyCount count_;
  std::atomic<uint64_t> repairs_{0};
  TestStop test_stop_ = TestStop::kNone;
};

}  // namespace wort::art
