// index/btree/btree_common.h - what the persistent B-trees (FAST&FAIR, wB+Tree, B3-tree, FPTree,
// NVTree) share: the key word, key blocks, the per-index lock (index/registry.h's IndexLock,
// which the visit functions take too), the root block header with the Create/Open/visit
// scaffolding (TreeBase, CreateTree, OpenTree, VisitShared), the Scan start round-up and batched
// scan loop, and small helpers.
//
// The key word
// ------------
// Every B-tree stores a key in a node as one 8-byte *key word*, so that a key can be published,
// moved and compared for identity with single 8-byte stores:
//   KeyType::kU64    the key word is the integer itself (the decoded big-endian key), compared
//                    as an unsigned integer (which equals the byte order of wort/key.h);
//   KeyType::kBytes  the key word is the pool offset of a *key block* (below) holding the
//                    bytes, compared by content with CompareKeys (unsigned bytes, shorter prefix
//                    first). As for wB+Tree and FPTree with variable-size keys in the papers,
//                    the bytes live outside the node behind this pointer.
// Two key words of one index are equal iff they denote the same key *and* the same block: each
// key block belongs to exactly one place (an entry, or a node's low fence), except where an
// index's header says a block is shared, so word equality is identity.
//
// Key block layout (64-byte aligned allocator block, at least 8 + len bytes):
//   [0, 4)  uint32 len    (0 .. kMaxKeyLen)
//   [4, 8)  uint32 magic  kKeyBlockMagic (a cheap check for Check())
//   [8, 8+len) the key bytes
// Write order: the block is written and persisted before any key word naming it is stored
// (reachability contract R2). A key block is immutable while linked and freed only after the
// store that removed its last reference is persistent.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "index/registry.h"
#include "index/root_block.h"
#include "sync/counter.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/key.h"
#include "wort/pm.h"
#include "wort/pool.h"
#include "wort/status.h"

namespace wort::btree {

inline constexpr uint32_t kKeyBlockMagic = 0x4b455942;  // "KEYB"

struct KeyBlock {
  uint32_t len;
  uint32_t magic;
  char bytes[];  // len bytes
};
static_assert(sizeof(KeyBlock) == 8);

// A search key in both forms: the integer (kU64) and the bytes (kBytes).
struct Probe {
  uint64_t u = 0;
  std::string_view s;
};

// How an index compares and copies key words. Cheap to copy; holds the pool's base.
class KeyOps {
 public:
  KeyOps(const Pool* pool, KeyType kt) : pool_(pool), kt_(kt) {}
  KeyType type() const { return kt_; }
  bool bytes() const { return kt_ == KeyType::kBytes; }
  const Pool& pool() const { return *pool_; }

  // Builds a probe from a key of this index. REQUIRES: ValidKey(key).
  Probe MakeProbe(std::string_view key) const {
    Probe p;
    if (kt_ == KeyType::kU64) p.u = DecodeU64(key);
    else p.s = key;
    return p;
  }
  Status ValidKey(std::string_view key) const {
    if (kt_ == KeyType::kU64) {
      if (key.size() != 8) return Status::InvalidArgument("this index takes 8-byte keys (KeyType::kU64)");
    } else if (key.size() > kMaxKeyLen) {
      return Status::InvalidArgument("key longer than kMaxKeyLen");
    }
    return Status::OK();
  }

  // The bytes a key word stands for (kBytes) - a view into the pool. A word that does not name
  // a key block inside the pool (a corrupt image) reads as the empty key, never outside the
  // pool nor through a misaligned block (key blocks are 64-byte aligned); Check() reports it
  // (PlausibleBlock), and the open walks refuse it (Corruption).
  std::string_view View(uint64_t word) const {
    if ((word & 63) != 0 || !pool_->contains(word, sizeof(KeyBlock))) return {};
    const auto* kb = pool_->at<KeyBlock>(word);
    const uint32_t len = kb->len;
    if (len > kMaxKeyLen || !pool_->contains(word + sizeof(KeyBlock), len)) return {};
    return {kb->bytes, len};
  }
  // Three-way comparison of a stored key word with a probe.
  int Compare(uint64_t word, const Probe& p) const {
    if (kt_ == KeyType::kU64) return word < p.u ? -1 : (word > p.u ? 1 : 0);
    return CompareKeys(View(word), p.s);
  }
  // Three-way comparison of two stored key words.
  int CompareWords(uint64_t a, uint64_t b) const {
    if (kt_ == KeyType::kU64) return a < b ? -1 : (a > b ? 1 : 0);
    if (a == b) return 0;
    return CompareKeys(View(a), View(b));
  }
  // The key in wort's byte form (big-endian for kU64).
  std::string ToString(uint64_t word) const {
    if (kt_ == KeyType::kU64) return EncodeU64(word);
    return std::string(View(word));
  }
  // Appends the key to *out (no allocation for kU64 beyond the string's growth).
  void AppendKey(uint64_t word, std::string* out) const {
    if (kt_ == KeyType::kU64) {
      U64Key k(word);
      out->append(k.buf, 8);
    } else {
      out->append(View(word));
    }
  }
  // Probe for a stored word (to search with a stored key).
  Probe ProbeOf(uint64_t word) const {
    Probe p;
    if (kt_ == KeyType::kU64) p.u = word;
    else p.s = View(word);
    return p;
  }

  // kBytes: allocates and persists a key block for `key`; *word is its offset. kU64: *word is the
  // integer, nothing is allocated.
  Status MakeWord(Pool& pool, const Probe& p, uint64_t* word) const;
  // As MakeWord, for a copy of a stored key word (a fresh block for kBytes).
  Status CopyWord(Pool& pool, uint64_t word, uint64_t* copy) const;
  // Frees the key block behind `word` (kBytes; no-op for kU64). REQUIRES contract R2.
  void FreeWord(Pool& pool, uint64_t word) const {
    if (kt_ == KeyType::kBytes && word != 0) pool.allocator().Free(word);
  }
  // As FreeWord, once no lock-free reader can still hold the word (Allocator::Retire).
  void RetireWord(Pool& pool, uint64_t word) const {
    if (kt_ == KeyType::kBytes && word != 0) pool.allocator().Retire(word);
  }
  // Check helper: true iff `word` names a plausible key block.
  bool PlausibleBlock(uint64_t word) const;

 private:
  const Pool* pool_;
  KeyType kt_;
};

// ---- the per-index lock ----------------------------------------------------------------------
// The B-trees move entries between nodes, so a visit concurrent with a writer could miss an
// entry in flight; visit takes the index's reader-writer lock in shared mode (IndexLock,
// src/index/registry.h).
using wort::ClaimSoleHandle;
using wort::IndexLock;

// ---- Scan ------------------------------------------------------------------------------------
// Index::Scan takes any byte string as its start. A kU64 index holds only 8-byte keys, so the
// start is mapped onto the smallest 8-byte key >= start in byte order: a shorter start is
// zero-padded; a longer start is greater than its 8-byte prefix, so the scan begins at prefix + 1.
// Returns true iff such a key exists (false only for a longer start whose prefix is all 0xff,
// where + 1 would overflow); then *out holds exactly 8 bytes (start itself if it has 8).
bool RoundUpU64Start(std::string_view start, std::string* out);

// The first resume key of a scan from `start`: start itself, or for kU64 its round-up
// (RoundUpU64Start). False iff no key of the index can be >= start.
inline bool ScanResumeKey(const KeyOps& ko, std::string_view start, std::string* resume) {
  if (ko.type() == KeyType::kU64) return RoundUpU64Start(start, resume);
  *resume = std::string(start);
  return true;
}

// How many keys ScanInBatches collects under the lock before it calls fn (it checks at leaf
// boundaries, so a batch may hold up to one leaf more).
inline constexpr size_t kScanBatch = 64;

// The Index::Scan of the B-trees whose leaves form a sorted chain: collects a batch of keys with
// `mu` held in shared mode, releases it, calls fn on the batch, and resumes after the last key
// with a fresh descent, so fn runs without the lock (it may use the index) and writers can
// change the tree between batches. Keys are compared with `ko`; `end` bounds the scan in byte
// order (wort/key.h); a kU64 start is rounded up by RoundUpU64Start. The tree supplies, each
// called with `mu` held:
//   find_leaf(const Probe& p) -> uint64_t      the leaf where the keys >= p begin;
//   each_entry(uint64_t leaf, take)            calls take(key word, value) -> bool for the leaf's
//                                              entries in ascending key order, and stops at the
//                                              first false;
//   next_leaf(uint64_t leaf) -> uint64_t       the next leaf of the chain (0 after the last).
// Keys at or before the resume point are skipped, so a key a concurrent move left in two leaves
// (or a tolerant reader's duplicate) is reported once.
template <class FindLeaf, class EachEntry, class NextLeaf>
Status ScanInBatches(const KeyOps& ko, std::shared_mutex& mu, std::string_view start, const std::string_view* end,
                     size_t limit, const ScanFn& fn, FindLeaf&& find_leaf, EachEntry&& each_entry,
                     NextLeaf&& next_leaf) {
  if (limit == 0) return Status::OK();
  std::string resume;
  if (!ScanResumeKey(ko, start, &resume)) return Status::OK();
  bool inclusive = true;  // the resume key itself is wanted (only before the first batch)
  size_t emitted = 0;
  std::string endkey;  // keys > *end stop the scan (compared in byte order)
  if (end) endkey = std::string(*end);
  std::vector<std::pair<std::string, uint64_t>> batch;
  // A leaf chain longer than the pool has blocks is a cycle (a damaged image): Corruption.
  const uint64_t max_leaves = ko.pool().size() / 64 + 1;
  uint64_t leaves_seen = 0;
  for (;;) {
    batch.clear();
    bool more = false;
    {
      std::shared_lock<std::shared_mutex> g(mu);
      uint64_t leaf = find_leaf(ko.MakeProbe(resume));
      std::string lastkey = resume;
      bool last_inclusive = inclusive;
      bool done = false;
      // Collect whole leaves until the batch holds kScanBatch keys.
      while (leaf != 0 && !done) {
        if (++leaves_seen > max_leaves) return Status::Corruption("leaf chain does not end (a cycle)");
        each_entry(leaf, [&](uint64_t k, uint64_t v) -> bool {
          const int c = ko.Compare(k, ko.MakeProbe(lastkey));
          if (last_inclusive ? c < 0 : c <= 0) return true;  // before the start, or a duplicate
          std::string ks;
          ko.AppendKey(k, &ks);
          if (end && CompareKeys(ks, endkey) > 0) {
            done = true;
            return false;
          }
          batch.emplace_back(ks, v);
          lastkey = std::move(ks);
          last_inclusive = false;
          if (emitted + batch.size() >= limit) {
            done = true;
            return false;
          }
          return true;
        });
        if (done) break;
        leaf = next_leaf(leaf);
        if (batch.size() >= kScanBatch && leaf != 0) {
          more = true;
          break;
        }
      }
      if (more) {
        resume = lastkey;
        inclusive = last_inclusive;
      }
    }
    for (auto& [k, v] : batch) {
      if (!fn(k, v)) return Status::OK();
      ++emitted;
    }
    if (!more || emitted >= limit) return Status::OK();
  }
}

// The Index::Scan of the hybrid trees (fptree, nvtree), whose persistent leaves are unsorted and
// whose DRAM inner nodes are not protected against concurrent change: holds `mu` in shared mode
// for the whole scan (so fn must not write to the index), rounds a kU64 start up
// (RoundUpU64Start) and walks the leaf chain from first_leaf(start). Of each leaf's entries,
// collect(leaf, &entries) fills (key word, value) pairs (cleared first, any order); those >= start
// are sorted and reported until `limit`, a key > *end, or fn returning false.
template <class FirstLeaf, class Collect, class NextLeaf>
Status ScanUnsortedLeaves(const KeyOps& ko, std::shared_mutex& mu, std::string_view start, const std::string_view* end,
                          size_t limit, const ScanFn& fn, FirstLeaf&& first_leaf, Collect&& collect,
                          NextLeaf&& next_leaf) {
  if (limit == 0) return Status::OK();
  std::shared_lock<std::shared_mutex> g(mu);
  std::string rounded;
  if (ko.type() == KeyType::kU64) {
    if (!RoundUpU64Start(start, &rounded)) return Status::OK();
    start = rounded;
  }
  const Probe from = ko.MakeProbe(start);
  std::vector<std::pair<uint64_t, uint64_t>> entries;
  std::string k;
  size_t emitted = 0;
  const uint64_t max_leaves = ko.pool().size() / 64 + 1;
  uint64_t leaves_seen = 0;
  for (uint64_t leaf = first_leaf(start); leaf != 0; leaf = next_leaf(leaf)) {
    if (++leaves_seen > max_leaves) return Status::Corruption("leaf chain does not end (a cycle)");
    collect(leaf, &entries);
    std::erase_if(entries, [&](const auto& e) { return ko.Compare(e.first, from) < 0; });
    std::sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) { return ko.CompareWords(a.first, b.first) < 0; });
    for (const auto& [w, v] : entries) {
      k.clear();
      ko.AppendKey(w, &k);
      if (end && CompareKeys(k, *end) > 0) return Status::OK();
      if (!fn(k, v)) return Status::OK();
      if (++emitted >= limit) return Status::OK();
    }
  }
  return Status::OK();
}

// ---- root block and index scaffolding ---------------------------------------------------------
// Every B-tree's root block (one allocator block, published by the pool's root table) begins with
// the same 24 bytes:
//   [0, 8)   magic u64      the kind's kRootMagic
//   [8, 12)  key_type u32   KeyType
//   [12, 16) flags u32      bit 0 kRootValuesAreBlocks; higher bits the kind's own
//   [16, 24) first u64      the root node/page or the first leaf (named `root` or `head` in the
//                           kind's RootBlock; the kind's header says when it changes)
// The rest of the block is the kind's own. Each kind's RootBlock static_asserts this prefix
// (BTREE_ROOT_HEADER_LAYOUT); the helpers below use only these four fields.
inline constexpr uint32_t kRootValuesAreBlocks = 1;
#define BTREE_ROOT_HEADER_LAYOUT(RB, first)                                                         \
  static_assert(offsetof(RB, magic) == 0 && offsetof(RB, key_type) == 8 && offsetof(RB, flags) == 12 && \
                    offsetof(RB, first) == 16 && sizeof(RB) % 64 == 0,                              \
                "B-tree root block header: magic | key_type | flags | " #first)

// A root block's magic and key type are verified by CheckRootHeader (index/root_block.h, shared
// with the other families), the first step of every Init.

// The fields and constructor every B-tree index shares: its pool, root block, key operations,
// values_are_blocks flag and the per-index lock (IndexLock, shared with its visit function).
template <class RootBlock>
class TreeBase : public Index {
 public:
  KeyType key_type() const override { return ko_.type(); }
  // Keeps ClaimSoleHandle's token for this handle's life (OpenTree).
  void KeepSoleHandle(std::shared_ptr<void> token) { sole_handle_ = std::move(token); }

 protected:
  TreeBase(Pool& pool, uint64_t root_off)
      : pool_(pool),
        root_off_(root_off),
        rb_(pool.at<RootBlock>(root_off)),
        ko_(&pool, static_cast<KeyType>(rb_->key_type)),
        vab_((rb_->flags & kRootValuesAreBlocks) != 0),
        lock_(IndexLock(&pool, root_off)) {}
  // The first step of every write: a valid key for this index, and a writable pool.
  Status CheckWrite(std::string_view key) const {
    WORT_RETURN_IF_ERROR(ko_.ValidKey(key));
    if (pool_.read_only()) return Status::InvalidArgument("pool is read-only");
    return Status::OK();
  }
  // CheckRootHeader for this index's root block.
  Status CheckRoot(const char* kind, uint64_t want_magic) const {
    return CheckRootHeader(kind, rb_->magic, want_magic, rb_->key_type);
  }

  Pool& pool_;
  const uint64_t root_off_;
  RootBlock* const rb_;
  const KeyOps ko_;
  const bool vab_;  // values_are_blocks (root block flags bit 0)
  const std::shared_ptr<std::shared_mutex> lock_;
  std::shared_ptr<void> sole_handle_;  // ClaimSoleHandle's token (registry.h)
};

// The key count of a tree that keeps no persistent count: counted by a walk of the leaf level
// on first use after open, not at open, so that opening a pool costs no walk (instant restart).
// Until counted, writers' deltas are dropped (the walk will see their keys). The walk runs with
// the index lock held so that no writer runs (writers that call Add hold it shared, and the walk
// takes it exclusively; or writers hold it exclusively and the walk shared), so a delta and the
// walk never overlap. Afterwards the count is the walk's result plus a ShardedCounter of deltas
// (sync/counter.h): a writer adds to a line of its own thread's, not to one word every writer
// stores to (issue 31).
class LazyCount {
 public:
  // Size(): takes `mu` shared if the keys still have to be counted.
  template <class CountFn>
  uint64_t Get(std::shared_mutex& mu, CountFn&& count) const {
    if (known()) return peek();
    std::shared_lock<std::shared_mutex> g(mu);
    return GetLocked(count);
  }
  // The same, for a caller that holds `mu` (shared or exclusive).
  template <class CountFn>
  uint64_t GetLocked(CountFn&& count) const {
    int64_t v = base_.load(std::memory_order_acquire);
    if (v >= 0) return peek();
    const int64_t c = static_cast<int64_t>(count());
    // Two readers may both count; they find the same number (no delta was added meanwhile: none
    // is added before base_ is set).
    base_.compare_exchange_strong(v, c, std::memory_order_acq_rel);
    return peek();
  }
  bool known() const { return base_.load(std::memory_order_acquire) >= 0; }
  // The count if known(), else 0 (for Check, which compares only a known count).
  uint64_t peek() const {
    const int64_t b = base_.load(std::memory_order_acquire);
    return b < 0 ? 0 : static_cast<uint64_t>(std::max<int64_t>(0, b + deltas_.Sum()));
  }
  void Add(int64_t d) {
    if (base_.load(std::memory_order_relaxed) >= 0) deltas_.Add(d);  // base_: read-shared, never written per insert
  }

 private:
  mutable std::atomic<int64_t> base_{-1};  // the walk's count; -1: not counted since open
  sync::ShardedCounter deltas_;            // writers' deltas since the walk
};

// IndexKind::create of every B-tree: allocates a zeroed root block and a zeroed first node of
// node_size bytes (nothing is left allocated on failure), calls init_node(node offset), which
// writes and persists whatever the empty node needs, then fills the root block header (magic,
// key type, flags = values_are_blocks | kind_flags, first = the node; then init_root(root block)
// for the kind's own fields) and persists the whole root block. Write order: node -> persist ->
// root block -> persist; the pool's root table publishes the root block afterwards.
template <class RootBlock, class InitNode, class InitRoot = void (*)(RootBlock*)>
Status CreateTree(Pool& pool, const IndexOptions& opts, uint64_t magic, uint32_t kind_flags,
                  uint64_t RootBlock::*first, size_t node_size, InitNode&& init_node, uint64_t* root_off,
                  InitRoot&& init_root = [](RootBlock*) {}) {
  uint64_t rb_off = 0, node_off = 0;
  WORT_RETURN_IF_ERROR(pool.allocator().AllocZeroed(sizeof(RootBlock), &rb_off));
  Status s = pool.allocator().AllocZeroed(node_size, &node_off);
  if (!s.ok()) {
    pool.allocator().Free(rb_off);
    return s;
  }
  init_node(node_off);
  auto* rb = pool.at<RootBlock>(rb_off);
  rb->magic = magic;
  rb->key_type = static_cast<uint32_t>(opts.key_type);
  rb->flags = (opts.values_are_blocks ? kRootValuesAreBlocks : 0) | kind_flags;
  rb->*first = node_off;
  init_root(rb);
  pm::persist(rb, sizeof(RootBlock));
  *root_off = rb_off;
  return Status::OK();
}

// IndexKind::open of every B-tree: checks that the root block lies in the pool, constructs
// Tree(pool, root_off) and runs its Init() (header checks, recovery, DRAM state).
template <class Tree, class RootBlock>
Status OpenTree(Pool& pool, uint64_t root_off, const char* kind, std::unique_ptr<Index>* out) {
  WORT_RETURN_IF_ERROR(CheckRootBlockPlace(pool, root_off, sizeof(RootBlock), kind));
  std::shared_ptr<void> token;
  WORT_RETURN_IF_ERROR(ClaimSoleHandle(&pool, root_off, kind, &token));  // one handle per index (registry.h)
  auto idx = std::make_unique<Tree>(pool, root_off);
  idx->KeepSoleHandle(std::move(token));
  WORT_RETURN_IF_ERROR(idx->Init());
  *out = std::move(idx);
  return Status::OK();
}

// IndexKind::visit of every B-tree: VisitLocked(pool, root_off, mark) with the index lock held
// in shared mode (so it is safe against the index's writers).
using MarkFn = std::function<void(uint64_t)>;
template <void (*VisitLocked)(const Pool&, uint64_t, const MarkFn&)>
void VisitShared(const Pool& pool, uint64_t root_off, const MarkFn& mark) {
  auto lock = IndexLock(&pool, root_off);
  std::shared_lock<std::shared_mutex> g(*lock);
  VisitLocked(pool, root_off, mark);
}

// What a visit function needs from a root block: key blocks to report (kBytes) and values that
// are blocks (values_are_blocks).
struct RootFlags {
  bool bytes;
  bool vab;
};
template <class RootBlock>
RootFlags ReadRootFlags(const RootBlock* rb) {
  return {rb->key_type == static_cast<uint32_t>(KeyType::kBytes), (rb->flags & kRootValuesAreBlocks) != 0};
}

// ---- Check -----------------------------------------------------------------------------------
// Collects the findings of an index's Check(): one line "<kind>: <finding>" each, up to about
// 4000 bytes (a badly broken tree would otherwise produce one line per node).
class Findings {
 public:
  explicit Findings(std::string_view kind) : kind_(kind) {}
  void operator()(const std::string& finding) {
    if (text_.size() < 4000) text_.append(kind_).append(": ").append(finding).append("\n");
  }
  bool empty() const { return text_.empty(); }
  // Appends every finding to *report (when non-null); returns OK iff there is none, else
  // Corruption with the first finding as its message.
  Status Finish(std::string* report) const {
    if (report) *report += text_;
    return text_.empty() ? Status::OK() : Status::Corruption(text_.substr(0, text_.find('\n')));
  }

 private:
  std::string kind_;
  std::string text_;
};

// ---- small helpers ---------------------------------------------------------------------------
inline uint64_t Load(const uint64_t& w) { return pm::load8(&w); }
inline void Store(uint64_t& w, uint64_t v) { pm::store8(&w, v); }

// Sum of the usable sizes of a set of blocks.
uint64_t UsableBytes(const Pool& pool, const std::function<void(const std::function<void(uint64_t)>&)>& each);

}  // namespace wort::btree
