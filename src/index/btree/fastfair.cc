// FAST&FAIR (see fastfair.h for the design, invariants, write order and commit points).
#include "index/btree/fastfair.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <span>
#include <shared_mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "index/btree/btree_common.h"
#include "index/kind_ids.h"
#include "index/registry.h"
#include "sync/sync.h"
#include "wort/index.h"

namespace wort::btree::ff {
namespace {

constexpr uint32_t kFlagNegInf = 1;        // Node::flags: low key is minus infinity
// Optimistic attempts of a reader before it takes the index lock exclusively (sync.h, R4).
constexpr int kMaxOptimisticRestarts = 32;

struct Entry {
  uint64_t key;
  uint64_t val;
};

// See fastfair.h, "Persistent layout".
struct Node {
  uint64_t count;
  uint64_t sibling;
  uint64_t leftmost;
  uint64_t low;
  uint32_t level;
  uint32_t flags;
  uint64_t pad[3];
  Entry slot[kSlots + 1];  // the last one holds the trailing copy when the node is full
};
static_assert(sizeof(Entry) == 16);
static_assert(sizeof(Node) == 512);
static_assert(offsetof(Node, slot) == 64, "slots start on the second cache line");
static_assert(offsetof(Node, count) == 0 && offsetof(Node, sibling) == 8 && offsetof(Node, low) == 24);

struct RootBlock {
  uint64_t magic;
  uint32_t key_type;
  uint32_t flags;
  uint64_t root;  // offset of the root node (store8: commit of a root split or collapse)
  uint64_t pad[5];
};
static_assert(sizeof(RootBlock) == 64);
BTREE_ROOT_HEADER_LAYOUT(RootBlock, root);

inline const void* LineOf(const void* p) {
  return reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t(pm::kCacheLine - 1));
}

// Number of slots in use, clamped (a corrupt count must not send readers out of the node).
inline int Count(const Node* n) {
  const uint64_t c = Load(n->count);
  return c > static_cast<uint64_t>(kSlots) ? kSlots : static_cast<int>(c);
}
inline bool IsLeaf(const Node* n) { return n->level == 0; }
inline bool NegInf(const Node* n) { return (n->flags & kFlagNegInf) != 0; }
// Slot j is the stale copy of a pair being shifted iff its key word equals its right neighbour's.
inline bool Stale(const Node* n, int j, int cnt) {
  return j + 1 < cnt && Load(n->slot[j].key) == Load(n->slot[j + 1].key);
}

// The node locks a writer holds (fastfair.h, D4), released together when the set ends, after
// the operation's last store. Each word of the index's VersionLockTable is write-locked once (two
// nodes may share a word). Two ways to take a word:
//   TryLock(off, v): UpgradeToWriteLock with the version v read on the optimistic way down; no
//     waiting. False when another writer holds the word or the node changed since v: the caller
//     drops the set and restarts (sync.h W2). Inserts, upserts and deletes (index lock shared)
//     lock only this way, so a writer never waits for a word while it holds one: no deadlock,
//     whatever order the hashed words come in.
//   Lock(off): waits for the word. Only a writer alone in the index (the index lock exclusive: a
//     rebalance) uses it.
class LockSet {
 public:
  explicit LockSet(sync::VersionLockTable& t) : t_(t) {}
  ~LockSet() {
    for (int i = 0; i < n_; ++i) held_[i]->WriteUnlock();
  }
  LockSet(const LockSet&) = delete;
  LockSet& operator=(const LockSet&) = delete;
  void Lock(uint64_t off) {
    sync::VersionLock* l = &t_.For(off);
    if (Find(l) >= 0) return;
    l->WriteLock();
    Push(l, 0);
  }
  [[nodiscard]] bool TryLock(uint64_t off, uint64_t v) {
    sync::VersionLock* l = &t_.For(off);
    // A word this set already holds (a node sharing it): unchanged since v iff v is the version
    // the set locked it at.
    if (const int i = Find(l); i >= 0) return from_[i] == v;
    if (!l->UpgradeToWriteLock(v)) return false;
    Push(l, v);
    return true;
  }

 private:
  int Find(const sync::VersionLock* l) const {
    for (int i = 0; i < n_; ++i)
      if (held_[i] == l) return i;
    return -1;
  }
  void Push(sync::VersionLock* l, uint64_t v) {
    if (n_ == kCap) std::abort();  // more than a cascade can change: unreachable (kMaxLevel)
    held_[n_] = l;
    from_[n_++] = v;
  }
  static constexpr int kCap = 80;  // > kMaxLevel + 3 (a cascade over every level, a rebalance)
  sync::VersionLockTable& t_;
  int n_ = 0;
  sync::VersionLock* held_[kCap];
  uint64_t from_[kCap];
};

// A node's version for an optimistic read: the common case (neither locked nor obsolete) inline,
// one acquire load and one test; VersionLock::ReadLockOrRestart, which GCC keeps out of line for
// its spin, only otherwise (issue 31: a call per level of every descent, 18 instructions per
// insert). The same result as ReadLockOrRestart.
[[gnu::always_inline]] inline bool ReadVersionOf(const sync::VersionLock& l, uint64_t* v) {
  const uint64_t w = l.Load();
  if (!sync::VersionLock::IsLocked(w) && !sync::VersionLock::IsObsolete(w)) [[likely]] {
    *v = w;
    return true;
  }
  return l.ReadLockOrRestart(v);
}

class FastFair final : public TreeBase<RootBlock> {
 public:
  FastFair(Pool& pool, uint64_t root_off) : TreeBase(pool, root_off) {}

  Status Init();

  std::string_view kind() const override { return "fastfair"; }
  Status Insert(std::string_view key, uint64_t value) override { return Put(key, value, false, nullptr); }
  Status Upsert(std::string_view key, uint64_t value, bool* inserted) override { return Put(key, value, true, inserted); }
  Status Lookup(std::string_view key, uint64_t* value) const override;
  Status Remove(std::string_view key) override;
  Status Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const override;
  uint64_t Size() const override {
    if (size_.known()) return size_.peek();
    // The walk must not overlap an in-place writer (they pass the writer gate: quiesce them).
    IndexModeLock g = Quiesce();
    return size_.GetLocked([this] { return CountKeys(); });
  }
  Status Check(std::string* report) const override;
  IndexStats Stats() const override;

  // Visit without taking the lock (the caller holds it exclusively; kKind.visit is Visit).
  static void VisitLocked(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark);

 private:
  // Nodes preallocated for one split cascade (so PoolFull changes nothing).
  struct Prealloc {
    std::vector<uint64_t> nodes;
    uint64_t leaf_low = 0;  // kBytes: key block copy of the splitting leaf's median key
    bool has_leaf_low = false;
    // A root split of the cascade, published (NewRoot) only after every insert of the cascade
    // (InsertAt): the old root and its new sibling, or 0.
    uint64_t root_left = 0, root_right = 0;
    uint64_t TakeNode() {
      const uint64_t o = nodes.back();
      nodes.pop_back();
      return o;
    }
  };

  Node* N(uint64_t off) const { return pool_.at<Node>(off); }
  uint64_t Root() const { return Load(rb_->root); }
  // Whether `off` can be a node: not 0, 64-byte aligned, inside the pool. The walks check every
  // offset they follow with it, so that a damaged image reads as Corruption (or ends a walk),
  // never outside the pool; levels are bounded by kMaxLevel and chains by the pool's node count.
  static constexpr uint32_t kMaxLevel = 64;
  [[gnu::always_inline]] bool NodeOk(uint64_t off) const { return off != 0 && (off & 63) == 0 && pool_.contains(off, sizeof(Node)); }
  // The open walk of an image that needs Repair: every node reachable from the root (children,
  // leftmost and sibling links, level by level) is a node of the expected level, chains end, and
  // key words name key blocks. Corruption naming the first problem otherwise. On OK,
  // *needs_repair says whether Repair would change anything (a stale slot, a trailing copy to
  // rewrite, a node its parent level does not name, a root with a sibling or without keys): an
  // image every operation of which returned needs none, and its open then walks it once.
  Status Validate(bool* needs_repair) const;

  // Position of the last slot whose key is <= p (-1 if none). Because a stale copy is the left
  // one of an equal pair, this is always the authoritative copy.
  [[gnu::always_inline]] int LastLE(const Node* n, int cnt, const Probe& p) const {
    if (!ko_.bytes()) {
      // kU64: a branch-free binary search (conditional moves, nothing to mispredict; the node's
      // lines were prefetched together by LeafFor). The keys are sorted (a stale copy equals its
      // right neighbour), so the last slot <= p is the authoritative copy. On a pointer (issue
      // 31: 7 instructions a step where an int index took 13), inline in every descent.
      if (cnt <= 0) return -1;
      const uint64_t key = p.u;
      const Entry* b = n->slot;
      for (int len = cnt; len > 1;) {
        const int half = len / 2;
        b = Load(b[half].key) <= key ? b + half : b;
        len -= half;
      }
      const int i = static_cast<int>(b - n->slot);
      return Load(b->key) <= key ? i : i - 1;
    }
    int lo = 0, hi = cnt;  // first slot with key > p
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (ko_.Compare(Load(n->slot[mid].key), p) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return lo - 1;
  }
  int FindInLeaf(const Node* n, const Probe& p) const {
    const int j = LastLE(n, Count(n), p);
    return (j >= 0 && ko_.Compare(Load(n->slot[j].key), p) == 0) ? j : -1;
  }
  [[gnu::always_inline]] uint64_t ChildFor(const Node* n, const Probe& p) const {
    const int j = LastLE(n, Count(n), p);
    return j < 0 ? Load(n->leftmost) : Load(n->slot[j].val);
  }
  // B-link move right: while the key is at or past the sibling's low key, the sibling holds it.
  uint64_t MoveRight(uint64_t off, const Probe& p) const {
    const uint64_t limit = pool_.size() / sizeof(Node) + 1;
    for (uint64_t seen = 0; seen < limit; ++seen) {
      const uint64_t sib = Load(N(off)->sibling);
      if (!NodeOk(sib) || ko_.Compare(Load(N(sib)->low), p) > 0) return off;
      off = sib;
    }
    return off;
  }
  // The leaf for probe p (readers: move right only when tolerant_), or 0 when the descent meets
  // an offset that is not a node or does not reach a leaf (a damaged image).
  uint64_t LeafFor(const Probe& p) const {
    uint64_t off = Root();
    for (uint32_t depth = 0; NodeOk(off) && depth <= kMaxLevel; ++depth) {
      if (tolerant_) off = MoveRight(off, p);
      const Node* n = N(off);
      Prefetch(n);
      if (IsLeaf(n)) return off;
      off = ChildFor(n, p);
    }
    return 0;
  }
  // ---- the readers' protocol (src/sync/sync.h R1-R4; fastfair.h D4) -------------------------
  // True iff node `off` is unchanged since its version v was read (always, in tolerant mode:
  // a read-only pool has no writer).
  bool Valid(uint64_t off, uint64_t v) const { return tolerant_ || locks_.For(off).CheckOrRestart(v); }
  bool ReadVersion(uint64_t off, uint64_t* v) const {
    if (tolerant_) return true;
    return ReadVersionOf(locks_.For(off), v);
  }
  // Optimistic descent to the leaf for p with lock coupling: *lv is the leaf's version, to be
  // validated (Valid) after the leaf was read. False: restart.
  bool LeafOpt(const Probe& p, uint64_t* leaf, uint64_t* lv) const {
    if (tolerant_) {
      *leaf = LeafFor(p);
      return true;
    }
    uint64_t off = Root();
    uint64_t v = 0;
    if (!ReadVersion(off, &v) || Root() != off) return false;  // a root split/collapse: restart
    for (uint32_t depth = 0;; ++depth) {
      if (!NodeOk(off) || depth > kMaxLevel) {
        *leaf = 0;  // a damaged image: the caller reports Corruption
        return true;
      }
      const Node* n = N(off);
      Prefetch(n);
      if (IsLeaf(n)) {
        *leaf = off;
        *lv = v;
        return true;
      }
      const uint64_t child = ChildFor(n, p);
      if (!Valid(off, v)) return false;  // child is a child of n (not a torn read)
      uint64_t cv = 0;
      if (!ReadVersion(child, &cv) || !Valid(off, v)) return false;  // coupling: child not replaced meanwhile
      off = child;
      v = cv;
    }
  }
  // A writer's optimistic descent (fastfair.h D4): the nodes from the leaf (off[0]) to the root
  // (off[n-1]) with the versions read on the way down (each validated by lock coupling), for
  // TryLock. Level l of the tree is off[l]. Writers never run in tolerant mode (a read-only pool).
  struct WPath {
    int n = 0;
    uint64_t off[kMaxLevel + 2];
    uint64_t ver[kMaxLevel + 2];
    std::span<const uint64_t> nodes() const { return {off, static_cast<size_t>(n)}; }
  };
  // 1: *w filled; 0: a node changed or was locked on the way (restart); -1: the descent meets an
  // offset that is not a node of the expected level (a damaged image).
  // Coupling as in OLC (issue 31: one validation of each inner node, each lock word hashed
  // once): the child offset is read from the node, the child's version read, then the node's
  // version checked - unchanged means the child offset was the node's when the child's version
  // was read. Reading the version word of a torn (wrong) child offset touches only the table,
  // never the pool, and the check then fails.
  // The pool's base and a bound on node offsets are read once per descent (issue 31, h60: the
  // acquire loads of the version words made the compiler reload pool -> base -> size word at
  // every level, for NodeOk and N: ~8 instructions a level). The mapping never moves while the
  // pool is open; the size only grows, so an offset within the bound read here is inside the
  // pool, and one beyond it (a node allocated since) takes NodeOk, which reads the size again.
  int WriterDescent(const Probe& p, WPath* w) const {
    const char* const base = pool_.base();
    const uint64_t size = pool_.size();
    const uint64_t last = size > sizeof(Node) ? size - sizeof(Node) : 0;  // a node at off <= last fits below the size
    const auto node_ok = [&](uint64_t o) { return (o != 0 && (o & 63) == 0 && o <= last) || NodeOk(o); };
    const auto node = [&](uint64_t o) { return reinterpret_cast<const Node*>(base + o); };
    uint64_t off = Root();
    const sync::VersionLock* lk = &locks_.For(off);
    uint64_t v = 0;
    if (!ReadVersionOf(*lk, &v) || Root() != off) return 0;  // a root split/collapse: restart
    if (!node_ok(off)) return -1;
    const Node* n = node(off);
    Prefetch(n);
    const uint32_t height = n->level;  // immutable while the node is linked
    if (height > kMaxLevel) return lk->CheckOrRestart(v) ? -1 : 0;
    for (uint32_t level = height;;) {
      w->off[level] = off;
      w->ver[level] = v;
      if (level == 0) break;
      const uint64_t child = ChildFor(n, p);
      const sync::VersionLock* cl = &locks_.For(child);
      uint64_t cv = 0;
      if (!ReadVersionOf(*cl, &cv) || !lk->CheckOrRestart(v)) return 0;  // coupling
      if (!node_ok(child)) return -1;
      off = child;
      lk = cl;
      v = cv;
      n = node(off);
      Prefetch(n);
      --level;
      if (n->level != level) return lk->CheckOrRestart(v) ? -1 : 0;
    }
    w->n = static_cast<int>(height) + 1;
    return 1;
  }
  // Asks for all 8 lines of a node at once (the search reads most of them).
  static void Prefetch(const Node* n) {
    const char* c = reinterpret_cast<const char*>(n);
    for (int i = 0; i < 8; ++i) __builtin_prefetch(c + 64 * i);
  }
  // Descends from the root to `level`; path[l] is the node visited at level l (root at back).
  // False (path cleared) when the descent meets an offset that is not a node of the expected
  // level (a damaged image).
  bool Descend(const Probe& p, int level, std::vector<uint64_t>* path) const {
    uint64_t off = Root();
    path->clear();
    if (!NodeOk(off) || N(off)->level > kMaxLevel) return false;
    int l = static_cast<int>(N(off)->level);
    if (l < level) return false;
    path->assign(l + 1, 0);
    for (;;) {
      if (tolerant_) off = MoveRight(off, p);
      (*path)[l] = off;
      if (l == level) return true;
      off = ChildFor(N(off), p);
      --l;
      if (!NodeOk(off) || static_cast<int>(N(off)->level) != l) {
        path->clear();
        return false;
      }
    }
  }
  // The first node of `level`, or 0 when the leftmost links do not lead there.
  uint64_t FirstOfLevel(int level) const {
    uint64_t off = Root();
    for (uint32_t depth = 0; NodeOk(off) && depth <= kMaxLevel; ++depth) {
      const int l = static_cast<int>(N(off)->level);
      if (l == level) return off;
      if (l < level) return 0;
      off = Load(N(off)->leftmost);
    }
    return 0;
  }
  // The next node of a level's chain, or 0 at its end or when the link is not a node.
  uint64_t Sibling(uint64_t off) const {
    const uint64_t sib = Load(N(off)->sibling);
    return NodeOk(sib) ? sib : 0;
  }

  // ---- FAST: in-node shifts --------------------------------------------------------------
  void FastInsert(Node* n, int pos, uint64_t key, uint64_t val);
  void FastDelete(Node* n, int pos);
  void SetTrailing(Node* n);

  // ---- writers ------------------------------------------------------------------------------
  Status Put(std::string_view key, uint64_t value, bool upsert, bool* inserted);
  Status PutLocked(const Probe& p, uint64_t value, bool upsert, bool* inserted);
  Status PrepareSplits(std::span<const uint64_t> path, int level, Prealloc* pa);
  void ReleasePrealloc(Prealloc* pa);
  void InsertAt(int level, uint64_t key, uint64_t val, std::span<const uint64_t> path, Prealloc* pa);
  void InsertRec(int level, uint64_t key, uint64_t val, std::span<const uint64_t> path, Prealloc* pa);
  void InsertNew(uint64_t kw, uint64_t value, std::span<const uint64_t> path, Prealloc* pa);
  Status UpsertFound(Node* leaf, int j, uint64_t value, bool* inserted);
  uint64_t Split(uint64_t off, Prealloc* pa);
  void NewRoot(uint64_t left, uint64_t right, Prealloc* pa);
  void Rebalance(int level, const std::vector<uint64_t>& path, LockSet* ls);
  int ChildIndex(const Node* p, uint64_t child) const;
  void Merge(uint64_t loff, uint64_t roff, Node* parent, int ridx);
  bool Redistribute(uint64_t loff, uint64_t roff, Node* parent, int ridx);
  void CollapseRoot();
  Status Repair();
  uint64_t CountKeys() const;

  LazyCount size_;  // counted on first Size() after open
  // Per-node version words (DRAM, keyed by node offset; fastfair.h D4). Its own table, not the
  // process-wide sync::NodeLock words: a structural writer holds several words at once, and no thread of
  // another index may hold one of them meanwhile. 2^13 words (64 KiB; issue 31, h60): at 2^16
  // (512 KiB, a whole L2 here) the descent's word per level was an L2 miss 1.23 times per
  // insert at 1M keys (callgrind, 512 KiB last level), the largest miss count beyond FAST&FAIR's
  // descent; at 2^13, 0.38. Nodes sharing a word cost restarts only (LockSet takes a shared word
  // once); at 1M keys ~5 leaves share a word.
  mutable sync::VersionLockTable locks_{13};
  // WORT_GLOBAL_LOCK mode (registry.h): the index lock as before, readers shared, writers
  // exclusive (for before/after comparisons).
  const bool global_lock_ = GlobalIndexLock();
  // Outside global-lock mode, writers (insert, upsert, delete) pass the writer gate of the pool's
  // EpochManager (issue 31: they store to their thread's epoch slot, not to a lock word every
  // writer stores to); what the index lock taken exclusively used to keep them out of - a
  // rebalance, a reader's fallback after kMaxOptimisticRestarts, Size()'s first count, Check,
  // Stats, the GC's visit - quiesces them through the gate (QuiesceWriters: it waits for every
  // writer inside, and quiescers run one at a time). In global-lock mode the index lock as before.
  sync::EpochManager& Gate() const { return pool_.allocator().epoch(); }
  IndexModeLock Quiesce() const { return IndexModeLock(*lock_, &Gate(), global_lock_, IndexModeLock::kQuiesce); }
  // Readers interpret crash states (move right, dedupe across nodes) only when the tree may hold
  // them: a read-only pool that was not closed cleanly (it cannot be repaired).
  bool tolerant_ = false;
};

// ---- FAST ------------------------------------------------------------------------------------

// Inserts (key, val) at pos, shifting [pos, count) right. REQUIRES count < kSlots, no stale pair.
void FastFair::FastInsert(Node* n, int pos, uint64_t key, uint64_t val) {
  const int cnt = Count(n);
  if (pos == cnt) {
    // The entry and its trailing copy, past the end, durable before count covers the entry.
    Store(n->slot[cnt].val, val);
    Store(n->slot[cnt].key, key);
    Store(n->slot[cnt + 1].val, val);
    Store(n->slot[cnt + 1].key, key);
    pm::persist(&n->slot[cnt], 2 * sizeof(Entry));
    Store(n->count, cnt + 1);  // COMMIT (append)
    pm::persist(&n->count, 8);
    return;
  }
  // slot[cnt] already holds a durable copy of slot[cnt-1] (the trailing copy, fastfair.h D1).
  // Write the trailing copy for after this insert (past the new end: invisible); its line is
  // flushed now and fenced by the count's persist.
  Store(n->slot[cnt + 1].val, Load(n->slot[cnt - 1].val));
  Store(n->slot[cnt + 1].key, Load(n->slot[cnt - 1].key));
  if (LineOf(&n->slot[cnt + 1]) != LineOf(&n->slot[cnt - 1])) pm::flush(&n->slot[cnt + 1], sizeof(Entry));
  Store(n->count, cnt + 1);  // slot cnt-1 is now the stale copy of a pair: contents unchanged
  pm::persist(&n->count, 8);
  for (int i = cnt - 1; i > pos; --i) {
    // Value first: while slot i is half written its key still equals slot i+1's (stale copy).
    Store(n->slot[i].val, Load(n->slot[i - 1].val));
    Store(n->slot[i].key, Load(n->slot[i - 1].key));
    if (LineOf(&n->slot[i]) != LineOf(&n->slot[i - 1])) pm::persist(&n->slot[i], sizeof(Entry));
  }
  Store(n->slot[pos].val, val);
  Store(n->slot[pos].key, key);  // COMMIT: slot pos stops being the stale copy of pos+1
  pm::persist(&n->slot[pos], sizeof(Entry));
}

// Re-establishes the trailing copy (slot[count] == slot[count-1]) after count shrank by a store
// that did not leave it (deleting the last entry, a truncation).
void FastFair::SetTrailing(Node* n) {
  const int cnt = Count(n);
  if (cnt < 1) return;
  if (Load(n->slot[cnt].key) == Load(n->slot[cnt - 1].key) && Load(n->slot[cnt].val) == Load(n->slot[cnt - 1].val)) return;
  Store(n->slot[cnt].val, Load(n->slot[cnt - 1].val));
  Store(n->slot[cnt].key, Load(n->slot[cnt - 1].key));
  pm::persist(&n->slot[cnt], sizeof(Entry));
}

// Removes slot pos, shifting (pos, count) left. REQUIRES pos < count.
void FastFair::FastDelete(Node* n, int pos) {
  const int cnt = Count(n);
  if (pos == cnt - 1) {
    Store(n->count, cnt - 1);  // COMMIT: the last entry is past the end
    pm::persist(&n->count, 8);
    SetTrailing(n);
    return;
  }
  for (int i = pos; i + 1 < cnt; ++i) {
    // Key first: slot i becomes the stale copy of i+1 (for i == pos this is the COMMIT), then
    // takes i+1's value; slot i is authoritative again once slot i+1's key changes.
    Store(n->slot[i].key, Load(n->slot[i + 1].key));
    Store(n->slot[i].val, Load(n->slot[i + 1].val));
    if (LineOf(&n->slot[i]) != LineOf(&n->slot[i + 1]) || i + 2 == cnt) pm::persist(&n->slot[i], sizeof(Entry));
  }
  Store(n->count, cnt - 1);  // the stale copy left at cnt-1 becomes the trailing copy
  // crash-site: redundant: the delete committed at the shift's first key store; a count still at cnt is the crash state 'shifted, count not yet lowered' (a duplicate pair at the end, read as stale), and the next persist of this node's line 0 writes the count back. (In recovery, which finishes cut shifts with it, the plan's recovery_persists check catches its removal: a recovery returns with its writes persistent.)
  pm::persist(&n->count, 8);
}

// ---- open / create ---------------------------------------------------------------------------

Status FastFair::Init() {
  WORT_RETURN_IF_ERROR(CheckRoot("fastfair", kRootMagic));
  const uint64_t r = Root();
  if (!NodeOk(r) || N(r)->level > kMaxLevel) return Status::Corruption("fastfair: bad root node offset " + std::to_string(r));
  std::unique_lock<std::shared_mutex> g(*lock_);
  sync::EpochGuard eg(pool_.allocator().epoch());  // Repair may retire a collapsed root
  if (!pool_.opened_clean()) {
    bool needs_repair = true;
    WORT_RETURN_IF_ERROR(Validate(&needs_repair));  // Repair follows (and writes) only what it checked
    if (pool_.read_only()) tolerant_ = true;
    else if (needs_repair) WORT_RETURN_IF_ERROR(Repair());
  }
  return Status::OK();
}

uint64_t FastFair::CountKeys() const {
  uint64_t total = 0;
  const uint64_t limit = pool_.size() / sizeof(Node) + 1;
  uint64_t seen = 0;
  uint64_t last = 0;
  bool have_last = false;
  for (uint64_t off = FirstOfLevel(0); off != 0 && seen++ < limit; off = Sibling(off)) {
    const Node* n = N(off);
    const int cnt = Count(n);
    for (int j = 0; j < cnt; ++j) {
      if (Stale(n, j, cnt)) continue;
      const uint64_t k = Load(n->slot[j].key);
      // Tolerant (unrepaired) trees: entries a cut merge left in two nodes count once.
      if (tolerant_ && have_last && ko_.CompareWords(k, last) <= 0) continue;
      last = k;
      have_last = true;
      ++total;
    }
  }
  return total;
}

// ---- readers ---------------------------------------------------------------------------------

Status FastFair::Lookup(std::string_view key, uint64_t* value) const {
  WORT_RETURN_IF_ERROR(ko_.ValidKey(key));
  const Probe p = ko_.MakeProbe(key);
  IndexModeLock g(*lock_, global_lock_, IndexModeLock::kReader);
  sync::EpochGuard eg(pool_.allocator().epoch());
  std::optional<IndexModeLock> x;
  for (int attempt = 0;; ++attempt) {
    if (attempt == kMaxOptimisticRestarts && !global_lock_) x.emplace(Quiesce());  // no writer runs now
    uint64_t off = 0, v = 0;
    if (!LeafOpt(p, &off, &v)) {
      sync::Backoff(attempt);
      continue;
    }
    if (off == 0) return Status::Corruption("fastfair: the descent meets an offset that is not a node");
    const Node* leaf = N(off);
    const int j = FindInLeaf(leaf, p);
    const uint64_t val = j >= 0 ? Load(leaf->slot[j].val) : 0;
    if (!Valid(off, v)) {
      sync::Backoff(attempt);
      continue;
    }
    if (j < 0) return Status::NotFound("key not found");
    *value = val;
    return Status::OK();
  }
}

// Readers' protocol (fastfair.h D4): each batch starts with an optimistic descent to the resume
// key; each leaf's entries are copied, then the leaf's version is validated; the next leaf is
// entered by lock coupling (its version read, then the current leaf validated again, so it is
// still the sibling: not merged away). Any failure restarts the batch from a fresh descent.
// The callbacks run after the batch, outside the epoch and holding nothing.
Status FastFair::Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const {
  if (limit == 0) return Status::OK();
  std::string resume;
  if (!ScanResumeKey(ko_, start, &resume)) return Status::OK();
  bool inclusive = true;  // the resume key itself is wanted (only before the first batch)
  size_t emitted = 0;
  std::string endkey;
  if (end) endkey = std::string(*end);
  std::vector<std::pair<std::string, uint64_t>> batch;
  Entry ents[kSlots];
  for (;;) {
    bool more = false;
    {
      IndexModeLock g(*lock_, global_lock_, IndexModeLock::kReader);
      sync::EpochGuard eg(pool_.allocator().epoch());
      std::optional<IndexModeLock> x;
      for (int attempt = 0;; ++attempt) {
        if (attempt == kMaxOptimisticRestarts && !global_lock_) x.emplace(Quiesce());  // no writer runs now
        batch.clear();
        more = false;
        std::string lastkey = resume;
        bool last_inclusive = inclusive;
        bool done = false, restart = false;
        uint64_t off = 0, v = 0;
        if (!LeafOpt(ko_.MakeProbe(resume), &off, &v)) restart = true;
        else if (off == 0) return Status::Corruption("fastfair: the descent meets an offset that is not a node");
        uint64_t leaves = 0;
        const uint64_t max_leaves = pool_.size() / sizeof(Node) + 1;
        while (!restart && !done) {
          if (++leaves > max_leaves) return Status::Corruption("fastfair: the leaf chain does not end (a cycle)");
          const Node* n = N(off);
          const int cnt = Count(n);
          int m = 0;
          for (int j = 0; j < cnt; ++j) {
            if (Stale(n, j, cnt)) continue;  // the left copy of a pair being shifted (crash state)
            ents[m++] = {Load(n->slot[j].key), Load(n->slot[j].val)};
          }
          uint64_t sib = Load(n->sibling);
          if (!Valid(off, v)) {
            restart = true;
            break;
          }
          if (!NodeOk(sib)) sib = 0;  // a damaged image: the chain ends here
          for (int i = 0; i < m && !done; ++i) {
            const int c = ko_.Compare(ents[i].key, ko_.MakeProbe(lastkey));
            if (last_inclusive ? c < 0 : c <= 0) continue;  // before the start, or a duplicate
            std::string ks;
            ko_.AppendKey(ents[i].key, &ks);
            if (end && CompareKeys(ks, endkey) > 0) {
              done = true;
              break;
            }
            batch.emplace_back(ks, ents[i].val);
            lastkey = std::move(ks);
            last_inclusive = false;
            if (emitted + batch.size() >= limit) done = true;
          }
          if (done || sib == 0) break;
          if (batch.size() >= kScanBatch) {
            more = true;
            break;
          }
          uint64_t sv = 0;
          if (!ReadVersion(sib, &sv) || !Valid(off, v)) {
            restart = true;
            break;
          }
          off = sib;
          v = sv;
        }
        if (restart) {
          sync::Backoff(attempt);
          continue;
        }
        if (more) {
          resume = lastkey;
          inclusive = last_inclusive;
        }
        break;
      }
    }
    for (auto& [k, v] : batch) {
      if (!fn(k, v)) return Status::OK();
      ++emitted;
    }
    if (!more || emitted >= limit) return Status::OK();
  }
}

// ---- insert ----------------------------------------------------------------------------------

Status FastFair::PrepareSplits(std::span<const uint64_t> path, int level, Prealloc* pa) {
  const int top = static_cast<int>(path.size()) - 1;
  int full = 0;
  while (level + full <= top && Count(N(path[level + full])) == kSlots) ++full;
  const int need = full + (level + full > top ? 1 : 0);
  for (int i = 0; i < need; ++i) {
    uint64_t off = 0;
    Status s = pool_.allocator().AllocZeroed(sizeof(Node), &off);
    if (!s.ok()) {
      ReleasePrealloc(pa);
      return s;
    }
    pa->nodes.push_back(off);
  }
  if (need > 0 && level == 0 && ko_.bytes()) {
    Status s = ko_.CopyWord(pool_, Load(N(path[0])->slot[kSlots / 2].key), &pa->leaf_low);
    if (!s.ok()) {
      ReleasePrealloc(pa);
      return s;
    }
    pa->has_leaf_low = true;
  }
  return Status::OK();
}

void FastFair::ReleasePrealloc(Prealloc* pa) {
  for (uint64_t o : pa->nodes) pool_.allocator().Free(o);  // never linked
  pa->nodes.clear();
  if (pa->has_leaf_low) ko_.FreeWord(pool_, pa->leaf_low);
  pa->has_leaf_low = false;
}

// FAIR split of a full node: returns the new right node, linked and with the left truncated,
// not yet in the parent.
uint64_t FastFair::Split(uint64_t off, Prealloc* pa) {
  Node* x = N(off);
  const int cnt = Count(x);
  const int m = cnt / 2;
  const uint64_t soff = pa->TakeNode();
  Node* s = N(soff);
  s->sibling = Load(x->sibling);
  s->level = x->level;
  s->flags = 0;
  int sc = 0;
  if (IsLeaf(x)) {
    if (ko_.bytes()) {
      s->low = pa->leaf_low;  // a copy of slot[m]'s key, owned by the new leaf
      pa->has_leaf_low = false;
    } else {
      s->low = Load(x->slot[m].key);
    }
    s->leftmost = 0;
    for (int i = m; i < cnt; ++i) s->slot[sc++] = x->slot[i];
  } else {
    s->low = Load(x->slot[m].key);  // the separator moves up (shared block, see fastfair.h)
    s->leftmost = Load(x->slot[m].val);
    for (int i = m + 1; i < cnt; ++i) s->slot[sc++] = x->slot[i];
  }
  s->count = sc;
  if (sc > 0) s->slot[sc] = s->slot[sc - 1];  // trailing copy
  pm::persist(s, 64 + (sc + 1) * sizeof(Entry));  // header, entries, trailing copy: all it reads
  Store(x->sibling, soff);  // COMMIT of the split: s joins the chain (x and s: one logical node)
  // crash-site: redundant: sibling and count share the node's line 0: the count persist just below writes the sibling back with it; only --torn (8-byte write-back) needs this persist
  pm::persist(&x->sibling, 8);
  Store(x->count, m);  // x forgets the moved half
  pm::persist(&x->count, 8);
  SetTrailing(x);
  return soff;
}

void FastFair::NewRoot(uint64_t left, uint64_t right, Prealloc* pa) {
  const uint64_t roff = pa->TakeNode();
  Node* r = N(roff);
  r->count = 1;
  r->sibling = 0;
  r->leftmost = left;
  r->low = 0;
  r->level = N(left)->level + 1;
  r->flags = kFlagNegInf;
  r->slot[0].key = Load(N(right)->low);
  r->slot[0].val = right;
  r->slot[1] = r->slot[0];  // trailing copy
  pm::persist(r, 64 + 2 * sizeof(Entry));
  Store(rb_->root, roff);  // COMMIT: the tree grows by one level
  pm::persist(&rb_->root, 8);
}

// Inserts (key, val) into the node path[level] (splitting it, and recursively its ancestors,
// when full). For inner levels val is a child whose low key is `key`. REQUIRES: the caller
// excludes every other writer of the nodes it changes - path[level] up to the first one that is
// not full (or the root) - and the readers of them: write-locked (Put), or no other thread.
// The new nodes need no lock: until the parent that names one is unlocked, the only way to it is
// the sibling pointer of its locked left node. That is why a root split publishes its new root
// last, after every insert of the cascade (the new root, its new right child and whatever new
// node sits below it are reached from the root word at once, none of them locked: published
// earlier, a writer descending from the new root could lock the unlocked right node of the split
// while this one still inserts into it, and a reader would find a node mid-shift with no version
// change to tell it - found by FastFairConcurrentTest.InsertsBesideDeletesThatRebalance). A crash
// before the publication leaves a root with a sibling: a cut root split, which readers move right
// through and recovery completes (D5), as before.
void FastFair::InsertAt(int level, uint64_t key, uint64_t val, std::span<const uint64_t> path, Prealloc* pa) {
  InsertRec(level, key, val, path, pa);
  if (pa->root_right != 0) {
    NewRoot(pa->root_left, pa->root_right, pa);
    pa->root_left = pa->root_right = 0;
  }
}

void FastFair::InsertRec(int level, uint64_t key, uint64_t val, std::span<const uint64_t> path, Prealloc* pa) {
  uint64_t off = path[level];
  if (Count(N(off)) == kSlots) {
    const uint64_t sib = Split(off, pa);
    const uint64_t sep = Load(N(sib)->low);
    if (level + 1 == static_cast<int>(path.size())) {
      pa->root_left = off;  // published by InsertAt when the cascade is done
      pa->root_right = sib;
    } else {
      InsertRec(level + 1, sep, sib, path, pa);
    }
    if (ko_.CompareWords(key, sep) >= 0) off = sib;
  }
  Node* n = N(off);
  const int pos = LastLE(n, Count(n), ko_.ProbeOf(key)) + 1;
  FastInsert(n, pos, key, val);
}

// A new key (its key word kw made) into the leaf path[0], preallocated for (fastfair.h D4).
void FastFair::InsertNew(uint64_t kw, uint64_t value, std::span<const uint64_t> path, Prealloc* pa) {
  InsertAt(0, kw, value, path, pa);
  ReleasePrealloc(pa);  // nothing should remain
  size_.Add(1);
}

// The value of the present key in slot j of the leaf (locked): a failure-atomic replace.
Status FastFair::UpsertFound(Node* leaf, int j, uint64_t value, bool* inserted) {
  if (j == Count(leaf) - 1) {
    // The trailing copy (past the end, invisible) follows, or the next insert would reveal the
    // old value.
    Store(leaf->slot[j + 1].val, value);
    pm::flush(&leaf->slot[j + 1].val, 8);
  }
  Store(leaf->slot[j].val, value);  // COMMIT (failure-atomic replace)
  pm::persist(&leaf->slot[j].val, 8);
  if (inserted) *inserted = false;
  return Status::OK();
}

// Concurrency (fastfair.h D4): the writer gate (it keeps rebalances, which quiesce writers,
// out), an optimistic descent (WriterDescent), then TryLock of the leaf and, when it
// is full, of each ancestor the split cascade changes - the parent, and further up while the
// node locked last is full (the root's lock stands for the root word: a new root is published
// under it) - with the versions read on the way down. Any failure drops every lock and starts
// over. Writers under different parents, and splits of different leaves under one parent one
// after the other, run in parallel; readers are optimistic throughout.
Status FastFair::Put(std::string_view key, uint64_t value, bool upsert, bool* inserted) {
  WORT_RETURN_IF_ERROR(CheckWrite(key));
  const Probe p = ko_.MakeProbe(key);
  if (global_lock_) return PutLocked(p, value, upsert, inserted);
  const sync::WriterGateGuard gate(Gate());  // not global-lock mode (returned above)
  WPath w;
  for (int attempt = 0;; ++attempt) {
    if (attempt > 0) sync::Backoff(attempt - 1);
    const int d = WriterDescent(p, &w);
    if (d < 0) return Status::Corruption("fastfair: the descent meets an offset that is not a node");
    if (d == 0) continue;
    LockSet ls(locks_);
    if (!ls.TryLock(w.off[0], w.ver[0])) continue;
    Node* leaf = N(w.off[0]);
    const int cnt = Count(leaf);
    const int j = LastLE(leaf, cnt, p);  // one search: the key's slot, or the insert position - 1
    if (j >= 0 && ko_.Compare(Load(leaf->slot[j].key), p) == 0) {
      if (!upsert) return Status::AlreadyExists("key exists");
      return UpsertFound(leaf, j, value, inserted);
    }
    if (cnt < kSlots) {
      // The common case: room in the leaf, no split, nothing to preallocate.
      uint64_t kw = 0;
      WORT_RETURN_IF_ERROR(ko_.MakeWord(pool_, p, &kw));
      FastInsert(leaf, j + 1, kw, value);
      size_.Add(1);
      if (inserted) *inserted = true;
      return Status::OK();
    }
    bool locked = true;
    for (int l = 0; locked && l + 1 < w.n && Count(N(w.off[l])) == kSlots; ++l)
      locked = ls.TryLock(w.off[l + 1], w.ver[l + 1]);
    if (!locked) continue;
    Prealloc pa;
    WORT_RETURN_IF_ERROR(PrepareSplits(w.nodes(), 0, &pa));
    uint64_t kw = 0;
    Status s = ko_.MakeWord(pool_, p, &kw);
    if (!s.ok()) {
      ReleasePrealloc(&pa);
      return s;
    }
    InsertNew(kw, value, w.nodes(), &pa);
    if (inserted) *inserted = true;
    return Status::OK();
  }
}

// WORT_GLOBAL_LOCK=1: the index lock exclusively, no node lock (readers hold it shared).
Status FastFair::PutLocked(const Probe& p, uint64_t value, bool upsert, bool* inserted) {
  std::unique_lock<std::shared_mutex> x(*lock_);
  std::vector<uint64_t> path;
  if (!Descend(p, 0, &path)) return Status::Corruption("fastfair: the descent meets an offset that is not a node");
  Node* leaf = N(path[0]);
  const int j = FindInLeaf(leaf, p);
  if (j >= 0) {
    if (!upsert) return Status::AlreadyExists("key exists");
    return UpsertFound(leaf, j, value, inserted);
  }
  Prealloc pa;
  WORT_RETURN_IF_ERROR(PrepareSplits(path, 0, &pa));
  uint64_t kw = 0;
  Status s = ko_.MakeWord(pool_, p, &kw);
  if (!s.ok()) {
    ReleasePrealloc(&pa);
    return s;
  }
  InsertNew(kw, value, path, &pa);
  if (inserted) *inserted = true;
  return Status::OK();
}

// ---- delete ----------------------------------------------------------------------------------

Status FastFair::Remove(std::string_view key) {
  WORT_RETURN_IF_ERROR(CheckWrite(key));
  const Probe p = ko_.MakeProbe(key);
  // Writer rule (wort/alloc.h, Retire): inside the pool's epoch from the unlinks (the entry, a
  // merged node) until their Retire calls.
  sync::EpochGuard eg(pool_.allocator().epoch());
  std::vector<uint64_t> path;
  if (global_lock_) {
    // WORT_GLOBAL_LOCK=1: the index lock exclusively, then no other thread is in the index.
    std::unique_lock<std::shared_mutex> x(*lock_);
    if (!Descend(p, 0, &path)) return Status::Corruption("fastfair: the descent meets an offset that is not a node");
    Node* leaf = N(path[0]);
    const int j = FindInLeaf(leaf, p);
    if (j < 0) return Status::NotFound("key not found");
    const uint64_t kw = Load(leaf->slot[j].key);
    FastDelete(leaf, j);
    ko_.RetireWord(pool_, kw);
    size_.Add(-1);
    if (path.size() > 1 && Count(leaf) < kMinFill) {
      LockSet ls(locks_);
      Rebalance(0, path, &ls);
    }
    return Status::OK();
  }
  {
    // The delete: the writer gate, an optimistic descent, the leaf's lock (TryLock, as Put).
    const sync::WriterGateGuard gate(Gate());  // not global-lock mode (returned above)
    WPath w;
    for (int attempt = 0;; ++attempt) {
      if (attempt > 0) sync::Backoff(attempt - 1);
      const int d = WriterDescent(p, &w);
      if (d < 0) return Status::Corruption("fastfair: the descent meets an offset that is not a node");
      if (d == 0) continue;
      LockSet ls(locks_);
      if (!ls.TryLock(w.off[0], w.ver[0])) continue;
      Node* leaf = N(w.off[0]);
      const int j = FindInLeaf(leaf, p);
      if (j < 0) return Status::NotFound("key not found");
      const uint64_t kw = Load(leaf->slot[j].key);
      FastDelete(leaf, j);
      // The delete is persistent: no reference remains (R2); readers may still hold the word.
      ko_.RetireWord(pool_, kw);
      size_.Add(-1);
      if (w.n == 1 || Count(leaf) >= kMinFill) return Status::OK();
      break;
    }
  }
  // The leaf became under-full: rebalance with every writer quiesced, if it still is.
  const IndexModeLock x = Quiesce();
  if (!Descend(p, 0, &path)) return Status::Corruption("fastfair: the descent meets an offset that is not a node");
  LockSet ls(locks_);
  if (path.size() > 1 && Count(N(path[0])) < kMinFill) Rebalance(0, path, &ls);
  return Status::OK();
}

int FastFair::ChildIndex(const Node* p, uint64_t child) const {
  if (Load(p->leftmost) == child) return -1;
  const int cnt = Count(p);
  for (int i = 0; i < cnt; ++i)
    if (Load(p->slot[i].val) == child) return i;
  return -2;
}

// Rebalances the under-full node path[level] (not the root) with a neighbour under the same
// parent: merge when both fit in one node, else redistribute.
void FastFair::Rebalance(int level, const std::vector<uint64_t>& path, LockSet* ls) {
  const uint64_t xoff = path[level];
  Node* parent = N(path[level + 1]);
  const int pc = Count(parent);
  if (pc == 0) return;  // no neighbour under this parent
  const int idx = ChildIndex(parent, xoff);
  if (idx == -2) return;  // not reachable in a repaired tree
  uint64_t loff, roff;
  int ridx;
  if (idx == -1) {
    loff = xoff;
    roff = Load(parent->slot[0].val);
    ridx = 0;
  } else {
    roff = xoff;
    ridx = idx;
    loff = idx == 0 ? Load(parent->leftmost) : Load(parent->slot[idx - 1].val);
  }
  // Every node the merge or redistribution changes, or unlinks (readers of R must restart).
  ls->Lock(path[level + 1]);
  ls->Lock(loff);
  ls->Lock(roff);
  const int total = Count(N(loff)) + Count(N(roff)) + (level > 0 ? 1 : 0);
  if (total <= kSlots) {
    Merge(loff, roff, parent, ridx);
    const bool parent_is_root = level + 2 == static_cast<int>(path.size());
    if (parent_is_root) {
      if (Count(parent) == 0) CollapseRoot();
    } else if (Count(parent) < kMinFill) {
      Rebalance(level + 1, path, ls);
    }
  } else {
    Redistribute(loff, roff, parent, ridx);
  }
}

void FastFair::Merge(uint64_t loff, uint64_t roff, Node* parent, int ridx) {
  Node* l = N(loff);
  Node* r = N(roff);
  const int lc = Count(l);
  const int rc = Count(r);
  int n = lc;
  // Written past L's count: invisible until the count store below.
  if (!IsLeaf(l)) {
    Store(l->slot[n].key, Load(r->low));  // the separator moves down (shared block)
    Store(l->slot[n].val, Load(r->leftmost));
    ++n;
  }
  for (int i = 0; i < rc; ++i, ++n) {
    Store(l->slot[n].key, Load(r->slot[i].key));
    Store(l->slot[n].val, Load(r->slot[i].val));
  }
  if (n > lc) {
    Store(l->slot[n].key, Load(l->slot[n - 1].key));  // trailing copy (n <= kSlots)
    Store(l->slot[n].val, Load(l->slot[n - 1].val));
    pm::persist(&l->slot[lc], (n + 1 - lc) * sizeof(Entry));
  }
  FastDelete(parent, ridx);  // COMMIT: R is reached only through L's sibling pointer
  Store(l->count, n);        // L takes R's entries (R still holds them: readers see them once)
  // crash-site: redundant: count and sibling share the node's line 0: the sibling persist just below writes the count back with it; only --torn (8-byte write-back) needs this persist
  pm::persist(&l->count, 8);
  Store(l->sibling, Load(r->sibling));  // R leaves the chain
  pm::persist(&l->sibling, 8);
  const bool leaf = IsLeaf(r);
  const uint64_t rlow = Load(r->low);
  pool_.allocator().Retire(roff);  // readers may still be in R (sync.h W4)
  if (leaf) ko_.RetireWord(pool_, rlow);  // the separator is gone from the parent and the chain
}

bool FastFair::Redistribute(uint64_t loff, uint64_t roff, Node* parent, int ridx) {
  Node* l = N(loff);
  Node* r = N(roff);
  const bool leaf = IsLeaf(l);
  const int lc = Count(l);
  std::vector<Entry> e;  // L's entries, [separator with R.leftmost], R's entries
  e.reserve(2 * kSlots + 1);
  for (int i = 0; i < lc; ++i) e.push_back({Load(l->slot[i].key), Load(l->slot[i].val)});
  if (!leaf) e.push_back({Load(r->low), Load(r->leftmost)});
  for (int i = 0, rc = Count(r); i < rc; ++i) e.push_back({Load(r->slot[i].key), Load(r->slot[i].val)});
  const int total = static_cast<int>(e.size());
  const int j = total / 2;  // L keeps e[0, j)
  uint64_t noff = 0;
  if (!pool_.allocator().AllocZeroed(sizeof(Node), &noff).ok()) return false;
  Node* nr = N(noff);
  int nc = 0;
  if (leaf) {
    uint64_t low = 0;
    if (!ko_.CopyWord(pool_, e[j].key, &low).ok()) {
      pool_.allocator().Free(noff);
      return false;
    }
    nr->low = low;
    nr->leftmost = 0;
    for (int i = j; i < total; ++i) nr->slot[nc++] = e[i];
  } else {
    nr->low = e[j].key;  // moves up from an entry (shared block)
    nr->leftmost = e[j].val;
    for (int i = j + 1; i < total; ++i) nr->slot[nc++] = e[i];
  }
  nr->count = nc;
  if (nc > 0) nr->slot[nc] = nr->slot[nc - 1];  // trailing copy
  nr->sibling = Load(r->sibling);
  nr->level = r->level;
  nr->flags = 0;
  pm::persist(nr, 64 + (nc + 1) * sizeof(Entry));
  if (j > lc) {
    for (int i = lc; i < j; ++i) {
      Store(l->slot[i].key, e[i].key);
      Store(l->slot[i].val, e[i].val);
    }
    Store(l->slot[j].key, e[j - 1].key);  // trailing copy
    Store(l->slot[j].val, e[j - 1].val);
    pm::persist(&l->slot[lc], (j + 1 - lc) * sizeof(Entry));
  }
  FastDelete(parent, ridx);  // COMMIT: R is reached only through L's sibling pointer
  if (j > lc) {
    Store(l->count, j);
    // crash-site: redundant: count and sibling share the node's line 0: the sibling persist just below writes the count back with it; only --torn (8-byte write-back) needs this persist
    pm::persist(&l->count, 8);
  }
  Store(l->sibling, noff);  // R' replaces R in the chain
  // Needed when j >= lc: no later persist of this operation writes l's line 0 back, and R is
  // retired below (a crash leaves L naming R, unparented, beside R'). The plan's step 0 (a small
  // tree deleted to empty) meets that case among its first redistributions and catches it.
  pm::persist(&l->sibling, 8);
  if (j < lc) {
    Store(l->count, j);
    pm::persist(&l->count, 8);
    SetTrailing(l);
  }
  const int pos = LastLE(parent, Count(parent), ko_.ProbeOf(nr->low)) + 1;
  FastInsert(parent, pos, nr->low, noff);  // has room: an entry left it above
  const uint64_t rlow = Load(r->low);
  pool_.allocator().Retire(roff);
  if (leaf) ko_.RetireWord(pool_, rlow);
  return true;
}

void FastFair::CollapseRoot() {
  const uint64_t old = Root();
  const Node* r = N(old);
  if (IsLeaf(r) || Count(r) != 0 || Load(r->sibling) != 0) return;
  Store(rb_->root, Load(r->leftmost));  // COMMIT: the tree shrinks by one level
  pm::persist(&rb_->root, 8);
  pool_.allocator().Retire(old);  // (locked by the caller: readers inside it restart)
}

// ---- recovery (fastfair.h, D5) -----------------------------------------------------------------

Status FastFair::Validate(bool* needs_repair) const {
  const uint64_t limit = pool_.size() / sizeof(Node) + 1;
  auto bad = [](const std::string& what) { return Status::Corruption("fastfair: " + what); };
  const int height = static_cast<int>(N(Root())->level);  // <= kMaxLevel (Init)
  uint64_t first = Root();
  // Whether Repair has anything to do; decided on the way, read-only. Repair's step 2 (the root
  // has a sibling) and its final CollapseRoot (an inner root without keys or sibling):
  const Node* root = N(first);
  bool needs = Load(root->sibling) != 0 || (!IsLeaf(root) && Count(root) == 0);
  // Step 3 finds a node its parent level does not name: here, the children of the level above in
  // chain order (leftmost, then the slots) must be exactly this level's chain (I4).
  std::vector<uint64_t> above, children;
  for (int level = height; level >= 0; --level) {
    uint64_t next_first = 0;
    uint64_t seen = 0;
    size_t ci = 0;  // the next of `above` that the chain must meet
    for (uint64_t off = first; off != 0; off = Load(N(off)->sibling)) {
      if (!NodeOk(off)) return bad("level " + std::to_string(level) + " links to " + std::to_string(off) + ", not a node");
      if (seen++ >= limit) return bad("the chain of level " + std::to_string(level) + " does not end (a cycle)");
      const Node* n = N(off);
      if (static_cast<int>(n->level) != level)
        return bad("node @" + std::to_string(off) + " has level " + std::to_string(n->level) + ", expected " + std::to_string(level));
      if (!NegInf(n) && !ko_.PlausibleBlock(Load(n->low))) return bad("node @" + std::to_string(off) + ": low key names no key block");
      const int cnt = Count(n);
      // (slot[cnt], the trailing copy, may be unwritten in a crash image: Repair rewrites it and
      // compares it only as a word)
      for (int j = 0; j < cnt; ++j) {
        if (!ko_.PlausibleBlock(Load(n->slot[j].key)))
          return bad("node @" + std::to_string(off) + ": slot " + std::to_string(j) + " names no key block");
        if (level > 0 && !NodeOk(Load(n->slot[j].val)))
          return bad("node @" + std::to_string(off) + ": child " + std::to_string(j) + " is not a node");
      }
      if (level > 0) {
        if (!NodeOk(Load(n->leftmost))) return bad("node @" + std::to_string(off) + ": leftmost child is not a node");
        if (off == first) next_first = Load(n->leftmost);
      }
      if (needs) continue;
      // Step 1: a stale slot (a cut shift) or a trailing copy that is not slot[cnt-1]'s.
      for (int j = 0; j + 1 < cnt && !needs; ++j) needs = Stale(n, j, cnt);
      if (cnt >= 1 && (Load(n->slot[cnt].key) != Load(n->slot[cnt - 1].key) ||
                       Load(n->slot[cnt].val) != Load(n->slot[cnt - 1].val)))
        needs = true;
      // Step 3: this node is the next child the level above names.
      if (level < height && (ci >= above.size() || above[ci++] != off)) needs = true;
      if (level > 0 && !needs) {
        children.push_back(Load(n->leftmost));
        for (int j = 0; j < cnt; ++j) children.push_back(Load(n->slot[j].val));
      }
    }
    above.swap(children);
    children.clear();
    first = next_first;
  }
  *needs_repair = needs;
  return Status::OK();
}

Status FastFair::Repair() {
  const uint64_t limit = pool_.size() / sizeof(Node) + 1;
  // 1. Finish cut shifts: remove every stale slot.
  for (int level = static_cast<int>(N(Root())->level); level >= 0; --level) {
    uint64_t seen = 0;
    for (uint64_t off = FirstOfLevel(level); off != 0 && seen++ < limit; off = Sibling(off)) {
      Node* n = N(off);
      for (int j = 0; j < Count(n);) {
        if (Stale(n, j, Count(n))) FastDelete(n, j);
        else ++j;
      }
      SetTrailing(n);  // a crash may have cut the write of the trailing copy
    }
  }
  // 2. A cut root split: the root has a sibling. Give the level a new root; step 3 inserts the
  //    separators.
  if (Load(N(Root())->sibling) != 0) {
    uint64_t roff = 0;
    WORT_RETURN_IF_ERROR(pool_.allocator().AllocZeroed(sizeof(Node), &roff));
    Node* r = N(roff);
    r->count = 0;
    r->leftmost = Root();
    r->level = N(Root())->level + 1;
    r->flags = kFlagNegInf;
    pm::persist(r, 64);
    Store(rb_->root, roff);
    // The plan's recovery_persists check (a recovery returns with what it wrote persistent)
    // catches its removal. A root word lost after the operations that follow would leave the old
    // root with its sibling, which the next open's step 2 repairs again (the old root is the first
    // of its level, never merged away; CollapseRoot and a root split persist the word).
    pm::persist(&rb_->root, 8);
  }
  // 3. Top-down: every node of level l must be a child in level l+1.
  for (int level = static_cast<int>(N(Root())->level) - 1; level >= 0; --level) {
    std::unordered_set<uint64_t> parented;
    uint64_t seen = 0;
    for (uint64_t off = FirstOfLevel(level + 1); off != 0 && seen++ < limit; off = Sibling(off)) {
      const Node* p = N(off);
      parented.insert(Load(p->leftmost));
      for (int i = 0, c = Count(p); i < c; ++i) parented.insert(Load(p->slot[i].val));
    }
    uint64_t prev = 0;
    seen = 0;
    for (uint64_t off = FirstOfLevel(level); off != 0 && seen++ < limit;) {
      Node* n = N(off);
      if (parented.count(off) || prev == 0) {
        prev = off;
        off = Load(n->sibling);
        continue;
      }
      // Unparented: a cut split, merge or redistribution. Entries the left neighbour still holds
      // at or past n's low key are copies of n's: drop them.
      Node* l = N(prev);
      const int keep = LastLE(l, Count(l), ko_.ProbeOf(Load(n->low))) + 1;
      const int lc = Count(l);
      int cut = keep;
      if (cut > 0 && cut <= lc && ko_.CompareWords(Load(l->slot[cut - 1].key), Load(n->low)) == 0) --cut;
      if (cut < lc) {
        Store(l->count, cut);
        pm::persist(&l->count, 8);
        SetTrailing(l);
      }
      // An empty unparented leaf: defensive. A non-root leaf of a tree this code writes is never
      // empty: Remove rebalances a leaf that falls below kMinFill at once (merge into the left
      // neighbour, or redistribute), and the one exception - a parent with no other child - is
      // only ever the root, which the same operation collapses. A cut merge leaves the right
      // node unparented with its entries (its count is never zeroed), and a cut split's new node
      // holds at least one entry. So no crash image reaches this (the coverage gate checks it).
      if (IsLeaf(n) && Count(n) == 0) {
        const uint64_t next = Load(n->sibling);
        Store(l->sibling, next);
        // crash-site: unreachable: an empty non-root leaf (a tree this code writes has none)
        pm::persist(&l->sibling, 8);
        const uint64_t low = Load(n->low);
        pool_.allocator().Free(off);
        ko_.FreeWord(pool_, low);
        off = next;
        continue;
      }
      // Insert (n.low, n) into the parent level.
      std::vector<uint64_t> path;
      const uint64_t sep = Load(n->low);
      if (!Descend(ko_.ProbeOf(sep), level + 1, &path)) return Status::Corruption("fastfair: the descent meets an offset that is not a node");
      Prealloc pa;
      WORT_RETURN_IF_ERROR(PrepareSplits(path, level + 1, &pa));
      InsertAt(level + 1, sep, off, path, &pa);  // (no other thread: Init runs before the index is returned)
      ReleasePrealloc(&pa);
      prev = off;
      off = Load(n->sibling);
    }
  }
  // A new root from step 2 may have stayed without entries only if the sibling vanished in step
  // 3 (an empty leaf); collapse it then.
  CollapseRoot();
  return Status::OK();
}

// ---- check / stats / visit -------------------------------------------------------------------

Status FastFair::Check(std::string* report) const {
  const IndexModeLock g = Quiesce();
  Findings fail("fastfair");
  const uint64_t limit = pool_.size() / sizeof(Node) + 1;
  const uint64_t root = Root();
  if (!pool_.contains(root, sizeof(Node))) {
    if (report) *report += "fastfair: root node outside the pool\n";
    return Status::Corruption("fastfair: root node outside the pool");
  }
  const int height = static_cast<int>(N(root)->level);
  if (Load(N(root)->sibling) != 0 && !tolerant_) fail("root has a sibling (unfinished root split)");
  if (!NegInf(N(root))) fail("root's low key is not minus infinity");
  uint64_t leaf_keys = 0;
  std::vector<uint64_t> upper;  // children of level+1 in order
  for (int level = height; level >= 0; --level) {
    std::vector<uint64_t> chain;
    uint64_t seen = 0;
    for (uint64_t off = FirstOfLevel(level); off != 0; off = Load(N(off)->sibling)) {
      if (seen++ > limit || !pool_.contains(off, sizeof(Node)) || (off & 63)) {
        fail("level " + std::to_string(level) + ": chain leaves the pool or loops");
        break;
      }
      chain.push_back(off);
    }
    if (level < height && chain != upper && !tolerant_)
      fail("level " + std::to_string(level) + ": chain (" + std::to_string(chain.size()) +
           " nodes) differs from the parents' children (" + std::to_string(upper.size()) + ")");
    std::vector<uint64_t> next_upper;
    for (size_t ci = 0; ci < chain.size(); ++ci) {
      const Node* n = N(chain[ci]);
      const std::string where = "node @" + std::to_string(chain[ci]) + " (level " + std::to_string(level) + ")";
      if (static_cast<int>(n->level) != level) fail(where + ": level field " + std::to_string(n->level));
      if (Load(n->count) > static_cast<uint64_t>(kSlots)) fail(where + ": count " + std::to_string(Load(n->count)));
      if ((ci == 0) != NegInf(n)) fail(where + ": minus-infinity flag wrong");
      if (!NegInf(n) && !ko_.PlausibleBlock(Load(n->low))) fail(where + ": low key block invalid");
      const int cnt = Count(n);
      if (cnt > 0 && !tolerant_ &&
          (Load(n->slot[cnt].key) != Load(n->slot[cnt - 1].key) || Load(n->slot[cnt].val) != Load(n->slot[cnt - 1].val)))
        fail(where + ": trailing copy of the last entry missing");
      for (int j = 0; j < cnt; ++j) {
        const uint64_t k = Load(n->slot[j].key);
        if (!ko_.PlausibleBlock(k)) {
          fail(where + ": slot " + std::to_string(j) + " key block invalid");
          continue;
        }
        if (j > 0 && ko_.PlausibleBlock(Load(n->slot[j - 1].key))) {
          const int c = ko_.CompareWords(Load(n->slot[j - 1].key), k);
          if (c > 0 || (c == 0 && !tolerant_)) fail(where + ": slots " + std::to_string(j - 1) + "," + std::to_string(j) + " not increasing");
        }
        if (!NegInf(n) && ko_.PlausibleBlock(Load(n->low)) && ko_.CompareWords(k, Load(n->low)) < 0)
          fail(where + ": key below the node's low key");
        const uint64_t sib = Load(n->sibling);
        if (sib != 0 && pool_.contains(sib, sizeof(Node)) && ko_.PlausibleBlock(Load(N(sib)->low)) &&
            ko_.CompareWords(k, Load(N(sib)->low)) >= 0 && !tolerant_)
          fail(where + ": key at or past the sibling's low key");
      }
      if (ci > 0 && !NegInf(n) && !NegInf(N(chain[ci - 1])) &&
          ko_.CompareWords(Load(N(chain[ci - 1])->low), Load(n->low)) >= 0)
        fail(where + ": low keys not increasing along the chain");
      if (level == 0) {
        for (int j = 0; j < cnt; ++j)
          if (!Stale(n, j, cnt)) ++leaf_keys;
      } else {
        const uint64_t lm = Load(n->leftmost);
        next_upper.push_back(lm);
        if (pool_.contains(lm, sizeof(Node))) {
          const Node* c = N(lm);
          if (NegInf(c) != NegInf(n) || (!NegInf(n) && Load(c->low) != Load(n->low)))
            fail(where + ": leftmost child's low key differs from the node's");
        } else {
          fail(where + ": leftmost child outside the pool");
        }
        for (int j = 0; j < cnt; ++j) {
          const uint64_t ch = Load(n->slot[j].val);
          next_upper.push_back(ch);
          if (!pool_.contains(ch, sizeof(Node))) {
            fail(where + ": child outside the pool");
            continue;
          }
          if (Load(N(ch)->low) != Load(n->slot[j].key) || NegInf(N(ch)))
            fail(where + ": slot " + std::to_string(j) + " key is not its child's low key");
        }
      }
    }
    upper = std::move(next_upper);
  }
  if (!tolerant_ && size_.known() && leaf_keys != size_.peek())
    fail("Size() " + std::to_string(size_.peek()) + " but leaves hold " + std::to_string(leaf_keys));
  return fail.Finish(report);
}

IndexStats FastFair::Stats() const {
  const IndexModeLock g = Quiesce();
  IndexStats st;
  st.keys = size_.GetLocked([this] { return CountKeys(); });
  const int height = static_cast<int>(N(Root())->level);
  st.avg_leaf_depth = height;
  const uint64_t limit = pool_.size() / sizeof(Node) + 1;
  st.bytes_allocated = UsableBytes(pool_, [&](const std::function<void(uint64_t)>& add) {
    add(root_off_);
    for (int level = height; level >= 0; --level) {
      uint64_t seen = 0;
      for (uint64_t off = FirstOfLevel(level); off != 0 && seen++ < limit; off = Sibling(off)) {
        const Node* n = N(off);
        add(off);
        if (level == 0) ++st.leaves;
        else ++st.inner_nodes;
        if (!ko_.bytes()) continue;
        if (!NegInf(n)) add(Load(n->low));
        if (level == 0)
          for (int j = 0, c = Count(n); j < c; ++j) add(Load(n->slot[j].key));
      }
    }
  });
  return st;
}

void FastFair::VisitLocked(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark) {
  mark(root_off);
  const auto* rb = pool.at<RootBlock>(root_off);
  const auto [bytes, vab] = ReadRootFlags(rb);
  uint64_t first = Load(rb->root);
  const uint64_t limit = pool.size() / sizeof(Node) + 1;
  uint64_t seen = 0;
  // Bounded by the pool's node count over all levels (and 64 levels): a damaged image whose
  // leftmost or sibling words form a cycle ends the walk instead of looping.
  for (int levels = 0; first != 0 && (first & 63) == 0 && pool.contains(first, sizeof(Node)) && levels < 64 && seen < limit;
       ++levels) {
    const Node* lvl = pool.at<Node>(first);
    for (uint64_t off = first; off != 0 && (off & 63) == 0 && pool.contains(off, sizeof(Node)) && seen++ < limit;
         off = Load(pool.at<Node>(off)->sibling)) {
      const Node* n = pool.at<Node>(off);
      mark(off);
      if (bytes && !NegInf(n) && n->low != 0) mark(Load(n->low));
      const int cnt = Count(n);
      for (int j = 0; j < cnt; ++j) {
        if (bytes) mark(Load(n->slot[j].key));
        if (IsLeaf(n) && vab) mark(Load(n->slot[j].val));
      }
    }
    if (IsLeaf(lvl)) break;
    first = Load(lvl->leftmost);
  }
}

// ---- registration ----------------------------------------------------------------------------

Status Create(Pool& pool, const IndexOptions& opts, uint64_t* root_off) {
  return CreateTree(pool, opts, kRootMagic, 0, &RootBlock::root, sizeof(Node), [&](uint64_t off) {
    Node* n = pool.at<Node>(off);
    n->flags = kFlagNegInf;  // an empty leaf: the whole tree
    pm::persist(n, 64);
  }, root_off);
}

// The visit runs with no writer in the index: in-place writers would otherwise allocate key
// blocks the walk has already passed. Writers in global-lock mode hold the index lock
// exclusively, the others pass the pool's writer gate: the visit takes the lock and quiesces the
// gate (every writer of the pool, for the walk's time: the GC, `wort pool check`: rare). Both,
// because the mode is read when an index is opened and may have changed since.
void Visit(const Pool& pool, uint64_t root_off, const MarkFn& mark) {
  auto lock = IndexLock(&pool, root_off);
  std::unique_lock<std::shared_mutex> g(*lock);
  const IndexModeLock q(*lock, &const_cast<Pool&>(pool).allocator().epoch(), /*global_lock=*/false,
                        IndexModeLock::kQuiesce);
  FastFair::VisitLocked(pool, root_off, mark);
}

Status Open(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) {
  return OpenTree<FastFair, RootBlock>(pool, root_off, "fastfair", out);
}

const IndexKind kKind = {
    "fastfair", kind_id::kFastFair,
    "FAST&FAIR persistent B+-tree: sorted nodes, failure-atomic shift and in-place rebalance (FAST 2018)",
    true, &Create, &Open, &Visit};

}  // namespace
}  // namespace wort::btree::ff

// Listed in the table of built-in kinds (BuiltinIndexKinds, src/index/registry.cc).
const wort::IndexKind* wort::builtin_kinds::FastFair() { return &wort::btree::ff::kKind; }
