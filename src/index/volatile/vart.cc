// "vart": a volatile Adaptive Radix Tree (Leis et al., ICDE 2013) in DRAM, the ART reference of
// the WORT paper's figures, made concurrent with optimistic lock coupling (Leis et al., "The ART
// of Practical Synchronization", DaMoN 2016) on the shared layer (src/sync: VersionLock in every
// node, EpochManager for the nodes and leaves it unlinks). Data is lost on close (see
// volatile_common.h: the pool holds a marker only; reopen is empty).
//
// Nodes: NODE4 and NODE16 (sorted key bytes beside their children, compared as unsigned bytes;
// NODE16 searched with one SSE2 compare), NODE48 (child_index[256] holding position + 1, 0 =
// empty: see FindChildSlot), NODE256 (a child per byte). The root is a NODE256 that is never
// replaced (so every other node has a parent whose slot a writer can lock). Path compression is
// hybrid, as in libart and the DaMoN paper: a node stores its prefix length and the first
// kPrefixInline bytes; a lookup compares those and skips the rest (the full key is compared at
// the leaf); an insert or a bounded scan that needs the whole prefix reads it from any leaf below
// the node (every leaf below a node has the node's path as its key prefix: FullPrefix). Leaves
// hold the whole key (immutable) and the value (one atomic word); a child reference is tagged
// (low bit 1 = leaf). A key that ends at an inner node (a prefix of other keys) is that node's
// `term` leaf.
//
// Inserts grow a full node to the next type (a new node replaces the old one in its parent's
// slot); a delete unlinks an emptied leaf, and a node left with one child and no term leaf is
// merged with that child (its prefix becomes node prefix + byte + child prefix), a node left with
// no child is replaced by its term leaf. Nodes do not shrink to a smaller type.
//
// Invariants (DoCheck verifies them when no writer runs):
//   V1. Children of NODE4/16 are in strictly increasing unsigned key-byte order; count matches.
//   V2. Every leaf below a node at depth d has the node's path (d bytes + prefix) as its key prefix
//       and the child's key byte at the next position; a term leaf's key is the path itself; a
//       node's stored prefix bytes are the first min(prefix_len, kPrefixInline) of its prefix.
//   V3. Every inner node but the root has a term leaf and a child, or at least two children.
//   V4. A node's path (the bytes from the root to the end of its prefix) never changes while it is
//       linked: a prefix split puts a new node above it and shortens its prefix by what moved up;
//       a merge lengthens a child's prefix by what its removed parent held.
//
// Concurrency (src/sync/sync.h: R1-R5, W1-W4):
//   - Readers (Lookup, Scan) take no lock: every node is read between ReadLockOrRestart and
//     CheckOrRestart of its version, and nothing read is used before that check (a child is
//     followed only after the node that held it was validated). A lookup that sees a node change
//     restarts from the root. A node's plain fields are read racily (WORT_OPTIMISTIC_READ) and
//     bounds-checked before use; child references and term leaves are atomic words. An 8-byte
//     key's lookup takes LookupAttempt8 (issue 31, h67): the same reads and checks with one copy
//     of the step per depth, the general walk for every state it leaves alone.
//   - Writers lock only what they change: the node for an in-place change (add a child to a
//     non-full node, a term leaf, a leaf split below it); the parent and the node for a growth, a
//     prefix split or a merge (and the surviving child of a merge, whose prefix changes). Every
//     lock is taken by UpgradeToWriteLock with the version read on the way down (never waiting
//     for a second lock); a failure releases what is held and restarts. A node that is unlinked
//     is marked obsolete while still locked, so a reader that reaches it afterwards restarts.
//   - Unlinked nodes and leaves are retired to the index's EpochManager and given back when no
//     reader can hold them.
//   - Memory (issue 31): nodes and leaves come from the index's NodeArena (node_arena.h), from
//     the writing thread's cache (kept in its epoch slot: Slot::state): no malloc, no lock, no
//     store to another thread's line. A block is given back to the cache of the thread that
//     retired it (the epoch manager's SlotReclaimFn). Before it enters the epoch, a writer makes
//     sure its cache can serve the insert's allocations without mapping memory
//     (NodeArena::Reserve), so no allocation under a node lock - nor inside the writer's epoch -
//     maps or faults in a page (issue 31, h59: a 2 MiB chunk's first touch took 0.1-10 ms on the
//     development VM, and a writer that long inside its epoch blocked every other writer's
//     epoch advances for as long). Destroying the index unmaps the
//     arena's chunks: every node at once (the root alone is from operator new).
//   - The key count (Size) is kept per writer thread in its node cache (NodeArena::AddKeys: a
//     load and a store of a word only that thread stores to; Size sums the caches), so an insert
//     has one locked instruction, its node's UpgradeToWriteLock (issue 31: the count was a
//     sync::ShardedCounter, whose `lock xadd` after the insert's stores waited for them, the new
//     leaf's write miss among them, to leave the store buffer).
//   - A value update of a present key is one atomic store into its leaf (no lock): it is
//     linearized at that store, or, when the leaf was unlinked by a concurrent remove since it
//     was found, before that remove.
//   - Writers pass the writer gate of the index's EpochManager (EpochManager::WriterEnter: stores
//     to the thread's own slot only), not a lock word shared by every writer; Check and Stats run
//     with writers excluded (IndexModeLock::kQuiesce: QuiesceWriters). WORT_GLOBAL_LOCK=1
//     (registry.h) takes the old per-index reader-writer lock around every operation instead, for
//     before/after comparisons.
//   - Scan collects up to kScanBatch keys with every node validated, then calls fn with no lock
//     held (a callback may write to the same index); it continues after the last key it
//     emitted.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <memory>
#include <new>
#include <shared_mutex>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "index/batched_scan.h"
#include "index/kind_ids.h"
#include "index/registry.h"
#include "index/volatile/node_arena.h"
#include "index/volatile/vart.h"
#include "index/volatile/volatile_common.h"
#include "sync/sync.h"

namespace wort::vol {
namespace {

using sync::Attempt;
using sync::VersionLock;
using Cache = NodeArena::Cache;

enum NodeType : uint8_t { NODE4 = 0, NODE16 = 1, NODE48 = 2, NODE256 = 3 };
constexpr uint32_t kPrefixInline = 8;

constexpr size_t kScanBatch = 64;

// The whole key (immutable once linked) follows the header.
struct Leaf {
  std::atomic<uint64_t> value;
  uint64_t len;
  const char* key() const { return reinterpret_cast<const char*>(this + 1); }
  std::string_view key_view() const { return {key(), len}; }
};

static_assert(std::is_trivially_destructible_v<Leaf>);
static_assert(sizeof(Leaf) + kMaxKeyLen <= NodeArena::kMaxBlock);
inline uint32_t LeafClass(size_t key_len) { return NodeArena::ClassOf(sizeof(Leaf) + key_len); }

// A new leaf from the thread's node cache (c: the writer's, see VArt::CacheOf).
Leaf* NewLeaf(Cache* c, std::string_view key, uint64_t value) {
  auto* l = new (NodeArena::Alloc(c, LeafClass(key.size()))) Leaf{};
  l->value.store(value, std::memory_order_relaxed);
  l->len = key.size();
  if (key.size() == 8) std::memcpy(reinterpret_cast<char*>(l + 1), key.data(), 8);  // one word, not a memcpy call
  else if (!key.empty()) std::memcpy(reinterpret_cast<char*>(l + 1), key.data(), key.size());
  return l;
}
void FreeLeaf(Cache* c, Leaf* l) { NodeArena::Free(c, l, LeafClass(l->len)); }

// Full-key comparison; 8-byte keys as one word.
WORT_OPTIMISTIC_READ inline bool SameKey(const Leaf* l, std::string_view key) {
  if (l->len != key.size()) return false;
  if (key.size() == 8) {
    uint64_t a, b;
    std::memcpy(&a, l->key(), 8);
    std::memcpy(&b, key.data(), 8);
    return a == b;
  }
  return key.empty() || std::memcmp(l->key(), key.data(), key.size()) == 0;  // (an empty key's data may be null)
}

struct Inner;
// A child reference: an Inner* or a Leaf* with the low bit set. Stored in atomic words: a
// reference that publishes a new node or leaf is stored with release and loaded with acquire.
using Ref = uintptr_t;
inline bool IsLeaf(Ref r) { return (r & 1) != 0; }
inline Leaf* AsLeaf(Ref r) { return reinterpret_cast<Leaf*>(r & ~uintptr_t(1)); }
inline Ref LeafRef(Leaf* l) { return reinterpret_cast<uintptr_t>(l) | 1; }
inline Inner* AsInner(Ref r) { return reinterpret_cast<Inner*>(r); }
inline Ref InnerRef(Inner* n) { return reinterpret_cast<uintptr_t>(n); }
inline Ref LoadRef(const Ref* p) { return std::atomic_ref<Ref>(*const_cast<Ref*>(p)).load(std::memory_order_acquire); }
inline void StoreRef(Ref* p, Ref r) { std::atomic_ref<Ref>(*p).store(r, std::memory_order_release); }

struct Inner {
  VersionLock lock;
  const NodeType type;
  uint8_t pad = 0;
  uint16_t count = 0;       // children
  uint32_t prefix_len = 0;  // bytes of the compressed prefix (all of them, stored or not)
  // Its first min(prefix_len, kPrefixInline) bytes as one word (PrefixWord: byte i of the prefix
  // is byte i of the word in memory), so that a reader reads it with one load.
  std::atomic<uint64_t> prefix{0};
  std::atomic<Leaf*> term{nullptr};
  explicit Inner(NodeType t) : type(t) {}
};
static_assert(sizeof(Inner) == 32);
struct Node4 : Inner {
  uint8_t keys[4] = {};
  Ref child[4] = {};
  Node4() : Inner(NODE4) {}
};
struct Node16 : Inner {
  uint8_t keys[16] = {};
  Ref child[16] = {};
  Node16() : Inner(NODE16) {}
};
// NODE48 encoding: child_index[b] == 0 means no child for byte b; otherwise the child is
// child[child_index[b] - 1].
struct Node48 : Inner {
  uint8_t child_index[256] = {};
  Ref child[48] = {};
  Node48() : Inner(NODE48) {}
};
struct Node256 : Inner {
  Ref child[256] = {};
  Node256() : Inner(NODE256) {}
};
// Nodes live in the index's NodeArena: never destroyed one by one (the arena unmaps its chunks),
// and NODE48 and NODE256 have size classes of their own (no rounding).
static_assert(std::is_trivially_destructible_v<Node4> && std::is_trivially_destructible_v<Node16> &&
              std::is_trivially_destructible_v<Node48> && std::is_trivially_destructible_v<Node256>);
static_assert(NodeArena::ClassBytes(NodeArena::ClassOf(sizeof(Node48))) == sizeof(Node48));
static_assert(NodeArena::ClassBytes(NodeArena::ClassOf(sizeof(Node256))) == sizeof(Node256));

template <class N>
N* NewNode(Cache* c) {
  constexpr uint32_t kClass = NodeArena::ClassOf(sizeof(N));
  return new (NodeArena::Alloc(c, kClass)) N;
}

// The word holding bytes p[0..n) (n <= kPrefixInline) in memory order, zero beyond.
inline uint64_t PrefixWord(const uint8_t* p, size_t n) {
  uint64_t w = 0;
  std::memcpy(&w, p, n);
  return w;
}
// The bits of such a word that hold its first n bytes.
inline uint64_t PrefixMask(uint32_t n) {
  static_assert(kPrefixInline == 8);
  if (n >= 8) return ~uint64_t{0};
  if constexpr (std::endian::native == std::endian::little) return (uint64_t{1} << (8 * n)) - 1;
  else return ~(~uint64_t{0} >> (8 * n));
}
// Whether the stored prefix bytes of n (prefix length plen, plen > 0) equal key[depth..] (the
// caller checked that key has depth + plen bytes).
inline bool StoredPrefixMatches(const Inner* n, uint32_t plen, const uint8_t* k) {
  const uint32_t m = std::min(plen, kPrefixInline);
  return ((n->prefix.load(std::memory_order_relaxed) ^ PrefixWord(k, m)) & PrefixMask(m)) == 0;
}

constexpr int Capacity(NodeType t) { return t == NODE4 ? 4 : t == NODE16 ? 16 : t == NODE48 ? 48 : 256; }

size_t NodeBytes(const Inner* n) {
  switch (n->type) {
    case NODE4: return sizeof(Node4);
    case NODE16: return sizeof(Node16);
    case NODE48: return sizeof(Node48);
    default: return sizeof(Node256);
  }
}

void FreeInner(Cache* c, Inner* n) { NodeArena::Free(c, n, NodeArena::ClassOf(NodeBytes(n))); }

// Gives one unlinked node or leaf (not what it refers to) back to the cache of the thread that
// retired it (slot_state: that thread's epoch slot's state, a Cache, made here on first use):
// the epoch manager's reclaim function (a SlotReclaimFn), on the retiring thread, or on the
// thread that destroys the index (the manager's Drain; the arena is destroyed after it).
void FreeOne(void* arena, void*& slot_state, uint64_t item) {
  if (slot_state == nullptr) slot_state = static_cast<NodeArena*>(arena)->NewCache();
  Cache* c = static_cast<Cache*>(slot_state);
  if (IsLeaf(item)) FreeLeaf(c, AsLeaf(item));
  else FreeInner(c, AsInner(item));
}

// The slot holding the child for byte b, or nullptr (NODE256: always the slot; it may hold 0).
// Optimistic: the result is used only after the node's version was checked.
WORT_OPTIMISTIC_READ inline Ref* FindChildSlot(Inner* n, uint8_t b) {
  switch (n->type) {
    case NODE4: {
      auto* x = static_cast<Node4*>(n);
      const int c = std::min<int>(x->count, 4);
      for (int i = 0; i < c; ++i)
        if (x->keys[i] == b) return &x->child[i];
      return nullptr;
    }
    case NODE16: {
      auto* x = static_cast<Node16*>(n);
      const int c = std::min<int>(x->count, 16);
#if defined(__SSE2__)
      const __m128i eq = _mm_cmpeq_epi8(_mm_set1_epi8(static_cast<char>(b)),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(x->keys)));
      const unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(eq)) & ((1u << c) - 1);
      return mask ? &x->child[__builtin_ctz(mask)] : nullptr;
#else
      for (int i = 0; i < c; ++i)
        if (x->keys[i] == b) return &x->child[i];
      return nullptr;
#endif
    }
    case NODE48: {
      auto* x = static_cast<Node48*>(n);
      const unsigned s = x->child_index[b];
      return (s != 0 && s <= 48) ? &x->child[s - 1] : nullptr;
    }
    default: return &static_cast<Node256*>(n)->child[b];
  }
}

// Calls fn(byte, ref) for each non-empty child with byte >= from, in increasing byte order, until
// fn returns false (then returns false). Optimistic when the caller holds no lock: fn validates
// the node before it uses what it gets.
template <class F>
WORT_OPTIMISTIC_READ bool ForEachChild(const Inner* n, int from, F&& fn) {
  switch (n->type) {
    case NODE4:
    case NODE16: {
      const bool n4 = n->type == NODE4;
      const uint8_t* keys = n4 ? static_cast<const Node4*>(n)->keys : static_cast<const Node16*>(n)->keys;
      const Ref* child = n4 ? static_cast<const Node4*>(n)->child : static_cast<const Node16*>(n)->child;
      const int c = std::min<int>(n->count, Capacity(n->type));
      for (int i = 0; i < c; ++i) {
        const Ref r = LoadRef(&child[i]);
        if (keys[i] >= from && r != 0 && !fn(keys[i], r)) return false;
      }
      return true;
    }
    case NODE48: {
      const auto* x = static_cast<const Node48*>(n);
      for (int b = from; b < 256; ++b) {
        const unsigned s = x->child_index[b];
        if (s == 0 || s > 48) continue;
        const Ref r = LoadRef(&x->child[s - 1]);
        if (r != 0 && !fn(static_cast<uint8_t>(b), r)) return false;
      }
      return true;
    }
    default: {
      const auto* x = static_cast<const Node256*>(n);
      for (int b = from; b < 256; ++b) {
        const Ref r = LoadRef(&x->child[b]);
        if (r != 0 && !fn(static_cast<uint8_t>(b), r)) return false;
      }
      return true;
    }
  }
}

// Some leaf below n (its term leaf, else the first child's, ...), or nullptr when a racing
// change hides every one (the caller restarts). Whatever a racing read reaches is a leaf that was
// below n at some time, and so (V2, V4) has n's path as its key prefix.
WORT_OPTIMISTIC_READ const Leaf* AnyLeaf(const Inner* n) {
  for (size_t level = 0; level <= kMaxKeyLen + 1; ++level) {
    if (const Leaf* t = n->term.load(std::memory_order_acquire)) return t;
    Ref first = 0;
    ForEachChild(n, 0, [&](uint8_t, Ref r) {
      first = r;
      return false;
    });
    if (first == 0) return nullptr;
    if (IsLeaf(first)) return AsLeaf(first);
    n = AsInner(first);
  }
  return nullptr;
}

// n's whole prefix (plen bytes; n's path before it has `depth` bytes) in *out: the stored bytes,
// copied to buf, when they are all of it; else bytes of a leaf below n (immutable). False when no
// leaf was found or the one found is too short (a racing change: restart). Validate n after.
WORT_OPTIMISTIC_READ bool FullPrefix(const Inner* n, size_t depth, uint32_t plen, uint8_t (&buf)[kPrefixInline],
                                     const uint8_t** out) {
  if (plen <= kPrefixInline) {
    const uint64_t w = n->prefix.load(std::memory_order_relaxed);
    std::memcpy(buf, &w, plen);
    *out = buf;
    return true;
  }
  const Leaf* l = AnyLeaf(n);
  if (l == nullptr || l->len < depth + plen) return false;
  *out = reinterpret_cast<const uint8_t*>(l->key()) + depth;
  return true;
}

// ---- changes of a locked node (or of a new one no other thread can see yet) ------------------

// Adds child (b -> r). REQUIRES: n locked or private, not full, no child for b.
void InsertChild(Inner* n, uint8_t b, Ref r) {
  switch (n->type) {
    case NODE4:
    case NODE16: {
      const bool n4 = n->type == NODE4;
      uint8_t* keys = n4 ? static_cast<Node4*>(n)->keys : static_cast<Node16*>(n)->keys;
      Ref* child = n4 ? static_cast<Node4*>(n)->child : static_cast<Node16*>(n)->child;
      int i = n->count;
      while (i > 0 && keys[i - 1] > b) {
        keys[i] = keys[i - 1];
        StoreRef(&child[i], child[i - 1]);
        --i;
      }
      keys[i] = b;
      StoreRef(&child[i], r);
      break;
    }
    case NODE48: {
      auto* x = static_cast<Node48*>(n);
      int pos = 0;
      while (x->child[pos] != 0) ++pos;
      StoreRef(&x->child[pos], r);
      x->child_index[b] = static_cast<uint8_t>(pos + 1);
      break;
    }
    default: StoreRef(&static_cast<Node256*>(n)->child[b], r); break;
  }
  ++n->count;
}

// Removes the child for byte b (present). REQUIRES: n locked.
void RemoveChild(Inner* n, uint8_t b) {
  switch (n->type) {
    case NODE4:
    case NODE16: {
      const bool n4 = n->type == NODE4;
      uint8_t* keys = n4 ? static_cast<Node4*>(n)->keys : static_cast<Node16*>(n)->keys;
      Ref* child = n4 ? static_cast<Node4*>(n)->child : static_cast<Node16*>(n)->child;
      int i = 0;
      while (keys[i] != b) ++i;
      for (; i + 1 < n->count; ++i) {
        keys[i] = keys[i + 1];
        StoreRef(&child[i], child[i + 1]);
      }
      StoreRef(&child[n->count - 1], 0);
      break;
    }
    case NODE48: {
      auto* x = static_cast<Node48*>(n);
      StoreRef(&x->child[x->child_index[b] - 1], 0);
      x->child_index[b] = 0;
      break;
    }
    default: StoreRef(&static_cast<Node256*>(n)->child[b], 0); break;
  }
  --n->count;
}

// A copy of the full node n (locked) as the next larger type, not yet linked.
Inner* Grow(Cache* c, const Inner* n) {
  Inner* g = n->type == NODE4    ? static_cast<Inner*>(NewNode<Node16>(c))
             : n->type == NODE16 ? static_cast<Inner*>(NewNode<Node48>(c))
                                 : static_cast<Inner*>(NewNode<Node256>(c));
  g->prefix_len = n->prefix_len;
  g->prefix.store(n->prefix.load(std::memory_order_relaxed), std::memory_order_relaxed);
  g->term.store(n->term.load(std::memory_order_relaxed), std::memory_order_relaxed);
  ForEachChild(n, 0, [&](uint8_t b, Ref r) {
    InsertChild(g, b, r);
    return true;
  });
  return g;
}

// Puts leaf l into the new node m whose path ends at key position `end`.
void Place(Inner* m, Leaf* l, size_t end) {
  if (l->len == end) m->term.store(l, std::memory_order_relaxed);
  else InsertChild(m, static_cast<uint8_t>(l->key()[end]), LeafRef(l));
}

// A writer's descent: node n read at version v, reached through slot pslot of parent (read at
// version pv; none for the root); depth = the bytes of n's path before its prefix.
struct Descent {
  Inner* parent = nullptr;
  uint64_t pv = 0;
  Ref* pslot = nullptr;
  Inner* n = nullptr;
  uint64_t v = 0;
  size_t depth = 0;
  // At the root. False: restart.
  bool Start(Inner* root) {
    n = root;
    return n->lock.ReadLockOrRestart(&v);
  }
  // One level down, to the inner child c that slot s of n holds (read before n was checked at v),
  // with lock coupling: n is checked again after c's version was read. False: restart.
  WORT_OPTIMISTIC_READ bool Down(Ref* s, Ref c) {
    Inner* ch = AsInner(c);
    uint64_t cv;
    if (!ch->lock.ReadLockOrRestart(&cv) || !n->lock.CheckOrRestart(v)) return false;
    parent = n;
    pv = v;
    pslot = s;
    n = ch;
    v = cv;
    ++depth;
    return true;
  }
  // Write-locks parent and n at the versions read (the caller holds no lock). False: restart,
  // nothing held.
  bool LockParentAndNode() {
    if (!parent->lock.UpgradeToWriteLock(pv)) return false;
    if (n->lock.UpgradeToWriteLock(v)) return true;
    parent->lock.WriteUnlock();
    return false;
  }
};

class VArt final : public Index {
 public:
  // Keeps ClaimSoleHandle's token for this handle's life (Open).
  void KeepSoleHandle(std::shared_ptr<void> token) { sole_handle_ = std::move(token); }
  VArt(Pool* pool, uint64_t root_off, KeyType kt)
      : pool_(pool),
        root_off_(root_off),
        kt_(kt),
        key_min_(kt == KeyType::kU64 ? 8 : 0),
        key_span_(kt == KeyType::kU64 ? 0 : kMaxKeyLen),
        mu_ptr_(IndexLock(pool, root_off)),
        global_lock_(GlobalIndexLock()),
        root_(new Node256) {}
  // Every node and leaf but the root lives in arena_'s chunks: epoch_ (destroyed first) gives what
  // is still retired back to the caches, then arena_ unmaps its chunks (no walk of the tree).
  ~VArt() override { delete static_cast<Node256*>(root_); }  // Inner has no virtual destructor
  std::string_view kind() const override { return "vart"; }
  KeyType key_type() const override { return kt_; }

  // The write path builds a Status only at its end (an attempt returns a PutResult: before, a
  // Status was built, moved into the caller's and tested at each of three levels per insert).
  Status Insert(std::string_view key, uint64_t value) override {
    if (!ValidKey(key)) [[unlikely]] return KeyError(key);
    return Put(key, value, /*replace=*/false) ? Status::OK() : Status::AlreadyExists("key present");
  }
  Status Upsert(std::string_view key, uint64_t value, bool* inserted) override {
    if (!ValidKey(key)) [[unlikely]] return KeyError(key);
    const bool ins = Put(key, value, /*replace=*/true);
    if (inserted) *inserted = ins;
    return Status::OK();
  }
  // An 8-byte key (valid for both key types) takes a walk with its levels unrolled (issue 31,
  // h67: LookupAttempt8) that makes no call: the epoch entered only if the thread's slot is cached
  // (EpochCachedGuard). Anything else - another key length, the global-lock mode, an uncached
  // slot, a restart, a state the unrolled walk leaves alone (a compressed path, an inner node at
  // depth 8) - takes LookupGeneral, which starts over in its own epoch (a lookup only reads; the
  // answer is then the general walk's).
  Status Lookup(std::string_view key, uint64_t* value) const override {
    if (key.size() != 8 || global_lock_) [[unlikely]] return LookupGeneral(key, value);
    int r = -1;
    {
      sync::EpochCachedGuard eg(epoch_);
      if (eg.entered()) [[likely]] r = LookupAttempt8(key.data(), value);
    }
    if (r > 0) [[likely]] return Status::OK();
    if (r == 0) return Status::NotFound("key absent");
    return LookupGeneral(key, value);
  }
  Status Remove(std::string_view key) override {
    if (!ValidKey(key)) return KeyError(key);
    if (global_lock_) [[unlikely]] return RemoveGlobalLock(key);
    const sync::EpochWriterGuard wg(epoch_);  // the epoch and the writer gate, one slot lookup
    return RemoveLoop(CacheOf(wg.slot()), key);
  }
  Status Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const override;
  uint64_t Size() const override { return static_cast<uint64_t>(std::max<int64_t>(0, arena_.SumKeys())); }
  Status Check(std::string* report) const override;
  IndexStats Stats() const override;

 private:
  struct ScanCtx {
    std::string_view start;
    bool exclusive;  // start itself is not wanted (it was emitted by the previous batch)
    const std::string_view* end;
    size_t want;
    ScanBatch<Leaf>* out;
    bool stop = false;
    bool past_end = false;
  };

  // Writers pass the writer gate of the index's EpochManager (issue 31: no lock word every writer
  // stores to); Check and Stats quiesce them through it. Global-lock mode: the index lock.
  IndexModeLock ModeLock(IndexModeLock::Role r) const { return IndexModeLock(*mu_ptr_, &epoch_, global_lock_, r); }
  // kU64: exactly 8 bytes; bytes: 0..kMaxKeyLen - as one subtraction and one compare (issue 31,
  // h63: the two tests on kt_ were 9 instructions on every lookup).
  bool ValidKey(std::string_view key) const { return key.size() - key_min_ <= key_span_; }
  Status KeyError(std::string_view key) const {
    if (kt_ == KeyType::kU64)
      return Status::InvalidArgument("this index takes 8-byte keys (KeyType::kU64); got " + std::to_string(key.size()));
    return Status::InvalidArgument("key of " + std::to_string(key.size()) + " bytes is longer than kMaxKeyLen");
  }

  // One optimistic attempt of an insert or upsert (sync.h R4).
  enum class PutResult : uint8_t { kInserted, kPresent, kRestart };

  // True: inserted; false: the key was present (its value replaced if `replace`). REQUIRES a
  // valid key.
  bool Put(std::string_view key, uint64_t value, bool replace) {
    if (global_lock_) [[unlikely]] return PutGlobalLock(key, value, replace);
    sync::EpochManager::Slot* const s = epoch_.ThreadSlot();
    Cache* const c = CacheOf(s);
    Reserve(c, key);  // before the epoch: a new chunk's page faults hold back no epoch advance
    const sync::EpochWriterGuard wg(epoch_, s);  // the epoch and the writer gate, the slot found above
    return PutLoop(c, key, value, replace);
  }
  // An insert allocates at most a leaf and one node (a grown node or a new NODE4): with that much
  // room in the thread's bump region, no allocation of the insert maps memory.
  static void Reserve(Cache* c, std::string_view key) {
    NodeArena::Reserve(c, sizeof(Leaf) + key.size() + 16 + sizeof(Node256));
  }
  // The calling thread's node cache: its epoch slot's state (made on the thread's first write).
  Cache* CacheOf(sync::EpochManager::Slot* s) {
    if (s->state == nullptr) [[unlikely]] s->state = arena_.NewCache();
    return static_cast<Cache*>(s->state);
  }
  // REQUIRES: Reserve(c, key) done.
  bool PutLoop(Cache* c, std::string_view key, uint64_t value, bool replace) {
    for (int attempt = 0;; ++attempt) {
      const PutResult r = PutAttempt(c, key, value, replace);
      if (r != PutResult::kRestart) [[likely]] return r == PutResult::kInserted;
      sync::Backoff(attempt);
    }
  }
  [[gnu::noinline]] bool PutGlobalLock(std::string_view key, uint64_t value, bool replace) {
    Cache* const c = CacheOf(epoch_.ThreadSlot());
    Reserve(c, key);
    sync::EpochGuard eg(epoch_);
    auto g = ModeLock(IndexModeLock::kWriter);  // exclusive in global-lock mode
    return PutLoop(c, key, value, replace);
  }
  Status RemoveLoop(Cache* c, std::string_view key) {
    Status s;
    for (int attempt = 0; RemoveAttempt(c, key, &s) == Attempt::kRestart; ++attempt) sync::Backoff(attempt);
    return s;
  }
  [[gnu::noinline]] Status RemoveGlobalLock(std::string_view key) {
    sync::EpochGuard eg(epoch_);
    auto g = ModeLock(IndexModeLock::kWriter);
    return RemoveLoop(CacheOf(eg.slot()), key);
  }

  // The first attempt inline; a restart goes out of line (issue 31, h63: Backoff's call in the
  // loop kept the lookup's values in callee-saved registers and on the stack, spilled and
  // reloaded on every lookup).
  WORT_OPTIMISTIC_INLINE Status LookupInEpoch(std::string_view key, uint64_t* value) const {
    const int r = LookupAttempt(key, value);
    if (r >= 0) [[likely]] return r ? Status::OK() : Status::NotFound("key absent");
    return LookupRetry(key, value);
  }
  [[gnu::noinline]] Status LookupRetry(std::string_view key, uint64_t* value) const {
    for (int attempt = 0;; ++attempt) {
      sync::Backoff(attempt);
      const int r = LookupAttempt(key, value);
      if (r >= 0) return r ? Status::OK() : Status::NotFound("key absent");
    }
  }
  [[gnu::noinline]] Status LookupGeneral(std::string_view key, uint64_t* value) const {
    if (!ValidKey(key)) [[unlikely]] return KeyError(key);
    if (global_lock_) [[unlikely]] return LookupGlobalLock(key, value);
    sync::EpochGuard eg(epoch_);
    return LookupInEpoch(key, value);
  }
  [[gnu::noinline]] Status LookupGlobalLock(std::string_view key, uint64_t* value) const {
    sync::EpochGuard eg(epoch_);
    auto g = ModeLock(IndexModeLock::kReader);  // shared in global-lock mode
    return LookupInEpoch(key, value);
  }
  WORT_OPTIMISTIC_INLINE int LookupAttempt(std::string_view key, uint64_t* value) const;
  WORT_OPTIMISTIC_INLINE int LookupAttempt8(const char* key, uint64_t* value) const;
  PutResult PutAttempt(Cache* c, std::string_view key, uint64_t value, bool replace);
  Attempt RemoveAttempt(Cache* cache, std::string_view key, Status* out);
  Attempt Unlink(Cache* cache, Descent& d, Ref keep, int keep_byte, Leaf* gone, Status* out);
  bool ScanNode(const Inner* n, const VersionLock* pl, uint64_t pv, size_t depth, bool bounded, ScanCtx& ctx) const;
  bool Emit(const Leaf* l, bool bounded, ScanCtx& ctx) const;
  void CheckNode(const Inner* n, std::string* path, std::string* report, uint64_t* keys) const;
  void CountRef(Ref r, int depth, IndexStats* st, uint64_t* bytes, uint64_t* sum) const;

  void Retire(Ref r) { epoch_.Retire(r); }

  Pool* pool_;
  std::shared_ptr<void> sole_handle_;  // ClaimSoleHandle's token: the whole index is this handle's DRAM
  uint64_t root_off_;
  KeyType kt_;
  uint64_t key_min_, key_span_;  // ValidKey's bounds
  std::shared_ptr<std::shared_mutex> mu_ptr_;  // IndexLock: used in global-lock mode only
  bool global_lock_;
  Inner* const root_;  // a NODE256, never replaced (prefix_len 0)
  // Before epoch_: alive while epoch_'s destructor gives the retired blocks back (FreeOne).
  NodeArena arena_;
  mutable sync::EpochManager epoch_{static_cast<sync::EpochManager::SlotReclaimFn>(&FreeOne), &arena_};

  friend bool wort::vol::VartMemoryOf(const Index& idx, VartMemory* out);
  friend bool wort::vol::VartEpochStatsOf(const Index& idx, sync::EpochStats* out);
  friend bool wort::vol::VartThreadInEpoch(const Index& idx);
};

// ---- Lookup ----------------------------------------------------------------------------------
// 1 found, 0 absent, -1 restart.
WORT_OPTIMISTIC_READ inline int VArt::LookupAttempt(std::string_view key, uint64_t* value) const {
  const auto* k = reinterpret_cast<const uint8_t*>(key.data());
  Inner* n = root_;
  uint64_t v;
  if (!n->lock.ReadLockOrRestart(&v)) return -1;
  size_t depth = 0;
  for (;;) {
    if (const uint32_t plen = n->prefix_len; plen != 0) {
      // The stored bytes only: a difference in the rest shows at the leaf.
      if (depth + plen > key.size() || !StoredPrefixMatches(n, plen, k + depth))
        return n->lock.CheckOrRestart(v) ? 0 : -1;
      depth += plen;
    }
    if (depth == key.size()) {
      const Leaf* t = n->term.load(std::memory_order_acquire);
      if (!n->lock.CheckOrRestart(v)) return -1;
      if (t == nullptr || !SameKey(t, key)) return 0;
      *value = t->value.load(std::memory_order_acquire);
      return 1;
    }
    // NODE256 first: the upper levels of a large tree are NODE256s (one compare, not three).
    const Ref* s = n->type == NODE256 ? &static_cast<Node256*>(n)->child[k[depth]] : FindChildSlot(n, k[depth]);
    const Ref c = s ? LoadRef(s) : 0;
    if (c == 0) return n->lock.CheckOrRestart(v) ? 0 : -1;
    if (IsLeaf(c)) {
      if (!n->lock.CheckOrRestart(v)) return -1;
      const Leaf* l = AsLeaf(c);
      if (!SameKey(l, key)) return 0;
      *value = l->value.load(std::memory_order_acquire);
      return 1;
    }
    // Lock coupling: the child's version is read before n is checked (as in the OLC paper's
    // lookup): c may be a stale read, but every word a child slot ever held names an inner node
    // or leaf that epochs keep allocated (R3), and its version is only a load; n's check after
    // it then rejects a stale c, and a child that was unlinked (it is then locked or obsolete)
    // or moved below a new node by a prefix split (its prefix then starts deeper).
    const Inner* ch = AsInner(c);
    uint64_t cv;
    if (!ch->lock.ReadLockOrRestart(&cv) || !n->lock.CheckOrRestart(v)) return -1;
    n = const_cast<Inner*>(ch);
    v = cv;
    ++depth;
  }
}

// An 8-byte key's walk, one copy of the step per depth (issue 31, h67): the depth is a constant in
// each, so there is no depth counter and no end-of-key test (the key's bytes are loads at
// constant offsets), and the root's step has no type test. The same reads and checks as
// LookupAttempt, in the same order (each node's version read before its fields, a child's version
// read before its parent is checked again, a leaf used only after its node was checked), for the
// states it handles: nodes without a compressed path at depths 1..7 (the root is a NODE256 without
// one). 1 found, 0 absent, -1 anything else: a restart, a compressed path, an inner node at depth 8
// (its term leaf is the key's) - the caller then starts over on the general path.
WORT_OPTIMISTIC_READ inline int VArt::LookupAttempt8(const char* key, uint64_t* value) const {
  const auto* k = reinterpret_cast<const uint8_t*>(key);
  const Inner* n = root_;
  uint64_t v;
  if (!n->lock.ReadLockOrRestart(&v)) return -1;
  const Ref* s = &static_cast<const Node256*>(n)->child[k[0]];
#pragma GCC unroll 8
  for (int d = 1; d <= 8; ++d) {
    const Ref c = LoadRef(s);
    if (c == 0) return n->lock.CheckOrRestart(v) ? 0 : -1;
    if (IsLeaf(c)) {
      if (!n->lock.CheckOrRestart(v)) return -1;
      const Leaf* l = AsLeaf(c);
      if (!SameKey(l, {key, 8})) return 0;  // the length first: a shorter leaf's block may end before 8 key bytes
      *value = l->value.load(std::memory_order_acquire);
      return 1;
    }
    const Inner* ch = AsInner(c);  // lock coupling: as in LookupAttempt
    uint64_t cv;
    if (!ch->lock.ReadLockOrRestart(&cv) || !n->lock.CheckOrRestart(v)) return -1;
    n = ch;
    v = cv;
    if (d == 8 || n->prefix_len != 0) return -1;
    s = n->type == NODE256 ? &static_cast<const Node256*>(n)->child[k[d]] : FindChildSlot(const_cast<Inner*>(n), k[d]);
    if (s == nullptr) return n->lock.CheckOrRestart(v) ? 0 : -1;
  }
  return -1;  // not reached: the step at d == 8 returns
}

// ---- Insert / Upsert -------------------------------------------------------------------------
WORT_OPTIMISTIC_READ VArt::PutResult VArt::PutAttempt(Cache* cache, std::string_view key, uint64_t value, bool replace) {
  const auto* k = reinterpret_cast<const uint8_t*>(key.data());
  Descent d;
  if (!d.Start(root_)) return PutResult::kRestart;
  Inner*& n = d.n;
  Inner*& parent = d.parent;
  uint64_t& v = d.v;
  size_t& depth = d.depth;
  for (;;) {
    if (const uint32_t plen = n->prefix_len; plen != 0) {
      uint8_t buf[kPrefixInline];
      const uint8_t* full;
      if (!FullPrefix(n, depth, plen, buf, &full) || !n->lock.CheckOrRestart(v)) return PutResult::kRestart;
      uint32_t p = 0;
      while (p < plen && depth + p < key.size() && full[p] == k[depth + p]) ++p;
      if (p < plen) {
        // Prefix split: a new NODE4 m takes n's place with the common part; n keeps the rest.
        if (!d.LockParentAndNode()) return PutResult::kRestart;
        auto* m = NewNode<Node4>(cache);
        m->prefix_len = p;
        m->prefix.store(PrefixWord(full, std::min(p, kPrefixInline)), std::memory_order_relaxed);
        const uint32_t rest = plen - p - 1;
        InsertChild(m, full[p], InnerRef(n));
        Place(m, NewLeaf(cache, key, value), depth + p);
        n->prefix_len = rest;
        n->prefix.store(PrefixWord(full + p + 1, std::min(rest, kPrefixInline)), std::memory_order_relaxed);
        StoreRef(d.pslot, InnerRef(m));
        n->lock.WriteUnlock();
        parent->lock.WriteUnlock();
        NodeArena::AddKeys(cache, 1);
        return PutResult::kInserted;
      }
      depth += plen;
    }
    if (depth == key.size()) {
      Leaf* t = n->term.load(std::memory_order_acquire);
      if (!n->lock.CheckOrRestart(v)) return PutResult::kRestart;
      if (t != nullptr) {
        if (replace) t->value.store(value, std::memory_order_release);
        return PutResult::kPresent;
      }
      if (!n->lock.UpgradeToWriteLock(v)) return PutResult::kRestart;
      n->term.store(NewLeaf(cache, key, value), std::memory_order_release);
      n->lock.WriteUnlock();
      NodeArena::AddKeys(cache, 1);
      return PutResult::kInserted;
    }
    const uint8_t b = k[depth];
    Ref* s = FindChildSlot(n, b);
    const Ref c = s ? LoadRef(s) : 0;
    if (!n->lock.CheckOrRestart(v)) return PutResult::kRestart;
    if (c == 0) {
      if (n->count < Capacity(n->type)) {
        if (!n->lock.UpgradeToWriteLock(v)) return PutResult::kRestart;
        InsertChild(n, b, LeafRef(NewLeaf(cache, key, value)));
        n->lock.WriteUnlock();
      } else {
        // Growth: a larger copy replaces n in its parent's slot (n is not the root: a NODE256).
        if (!d.LockParentAndNode()) return PutResult::kRestart;
        Inner* g = Grow(cache, n);
        InsertChild(g, b, LeafRef(NewLeaf(cache, key, value)));
        StoreRef(d.pslot, InnerRef(g));
        n->lock.WriteUnlockObsolete();
        parent->lock.WriteUnlock();
        Retire(InnerRef(n));
      }
      NodeArena::AddKeys(cache, 1);
      return PutResult::kInserted;
    }
    if (IsLeaf(c)) {
      Leaf* l = AsLeaf(c);
      if (SameKey(l, key)) {
        if (replace) l->value.store(value, std::memory_order_release);
        return PutResult::kPresent;
      }
      // Leaf split: a new NODE4 below n holds both leaves under their common part.
      if (!n->lock.UpgradeToWriteLock(v)) return PutResult::kRestart;
      size_t p = depth + 1;
      const size_t lim = std::min<size_t>(l->len, key.size());
      while (p < lim && l->key()[p] == key[p]) ++p;
      auto* m = NewNode<Node4>(cache);
      m->prefix_len = static_cast<uint32_t>(p - depth - 1);
      m->prefix.store(PrefixWord(k + depth + 1, std::min(m->prefix_len, kPrefixInline)), std::memory_order_relaxed);
      Place(m, l, p);
      Place(m, NewLeaf(cache, key, value), p);
      StoreRef(s, InnerRef(m));
      n->lock.WriteUnlock();
      NodeArena::AddKeys(cache, 1);
      return PutResult::kInserted;
    }
    if (!d.Down(s, c)) return PutResult::kRestart;
  }
}

// ---- Remove ----------------------------------------------------------------------------------
WORT_OPTIMISTIC_READ Attempt VArt::RemoveAttempt(Cache* cache, std::string_view key, Status* out) {
  const sync::AttemptEnd end(out);
  const auto* k = reinterpret_cast<const uint8_t*>(key.data());
  Descent d;
  if (!d.Start(root_)) return Attempt::kRestart;
  Inner*& n = d.n;
  uint64_t& v = d.v;
  size_t& depth = d.depth;
  for (;;) {
    if (const uint32_t plen = n->prefix_len; plen != 0) {
      if (depth + plen > key.size() || !StoredPrefixMatches(n, plen, k + depth)) return end.NotFound(n->lock, v);
      depth += plen;
    }
    Leaf* gone;
    int gone_byte = -1;  // the byte of the removed child; -1: the term leaf is removed
    if (depth == key.size()) {
      gone = n->term.load(std::memory_order_acquire);
      if (!n->lock.CheckOrRestart(v)) return Attempt::kRestart;
      if (gone == nullptr || !SameKey(gone, key)) return end.Done(Status::NotFound("key absent"));
    } else {
      Ref* s = FindChildSlot(n, k[depth]);
      const Ref c = s ? LoadRef(s) : 0;
      if (!n->lock.CheckOrRestart(v)) return Attempt::kRestart;
      if (c == 0) return end.Done(Status::NotFound("key absent"));
      if (!IsLeaf(c)) {
        if (!d.Down(s, c)) return Attempt::kRestart;
        continue;
      }
      gone = AsLeaf(c);
      if (!SameKey(gone, key)) return end.Done(Status::NotFound("key absent"));
      gone_byte = k[depth];
    }
    // What n keeps after the removal (read before the lock; UpgradeToWriteLock(v) validates it).
    const int children = n->count - (gone_byte >= 0 ? 1 : 0);
    Leaf* term = gone_byte >= 0 ? n->term.load(std::memory_order_acquire) : nullptr;
    if (n == root_ || children >= 2 || (children == 1 && term != nullptr)) {
      // In place: n still satisfies V3.
      if (!n->lock.UpgradeToWriteLock(v)) return Attempt::kRestart;
      if (gone_byte >= 0) RemoveChild(n, static_cast<uint8_t>(gone_byte));
      else n->term.store(nullptr, std::memory_order_release);
      n->lock.WriteUnlock();
      Retire(LeafRef(gone));
      NodeArena::AddKeys(cache, -1);
      return end.Done(Status::OK());
    }
    if (children == 0) {
      // n keeps only its term leaf (the removed leaf was its one child): the leaf replaces n.
      if (term == nullptr) return n->lock.CheckOrRestart(v) ? end.Done(Status::Corruption("vart: V3 broken")) : Attempt::kRestart;
      return Unlink(cache, d, LeafRef(term), -1, gone, out);
    }
    // One child left and no term leaf: that child replaces n.
    Ref keep = 0;
    int keep_byte = -1;
    ForEachChild(n, 0, [&](uint8_t b, Ref r) {
      if (b == gone_byte) return true;
      keep = r;
      keep_byte = b;
      return false;
    });
    if (keep == 0) return Attempt::kRestart;  // a racing read (the upgrade would fail too)
    return Unlink(cache, d, keep, keep_byte, gone, out);
  }
}

// Replaces d.n (not the root; read at version d.v, its slot d.pslot in d.parent read at d.pv) by
// `keep`: n's one remaining child (at keep_byte) or, when keep_byte < 0, n's term leaf; `gone` is
// the leaf being removed. An inner `keep` takes n's prefix and the byte in front of its own (V4).
Attempt VArt::Unlink(Cache* cache, Descent& d, Ref keep, int keep_byte, Leaf* gone, Status* out) {
  Inner* const parent = d.parent;
  Inner* const n = d.n;
  if (!d.LockParentAndNode()) return Attempt::kRestart;
  Inner* kc = keep_byte >= 0 && !IsLeaf(keep) ? AsInner(keep) : nullptr;
  if (kc != nullptr) {
    uint64_t kv;
    if (!kc->lock.ReadLockOrRestart(&kv) || !kc->lock.UpgradeToWriteLock(kv)) {
      n->lock.WriteUnlock();
      parent->lock.WriteUnlock();
      return Attempt::kRestart;
    }
    uint8_t buf[kPrefixInline], kbuf[kPrefixInline];
    const uint64_t nw = n->prefix.load(std::memory_order_relaxed), kw = kc->prefix.load(std::memory_order_relaxed);
    uint32_t fill = std::min(n->prefix_len, kPrefixInline);
    std::memcpy(buf, &nw, fill);
    std::memcpy(kbuf, &kw, sizeof kbuf);
    if (fill < kPrefixInline) buf[fill++] = static_cast<uint8_t>(keep_byte);
    for (uint32_t i = 0; fill < kPrefixInline && i < std::min(kc->prefix_len, kPrefixInline); ++i) buf[fill++] = kbuf[i];
    kc->prefix_len = n->prefix_len + 1 + kc->prefix_len;
    kc->prefix.store(PrefixWord(buf, fill), std::memory_order_relaxed);
  }
  StoreRef(d.pslot, keep);
  if (kc != nullptr) kc->lock.WriteUnlock();
  n->lock.WriteUnlockObsolete();
  parent->lock.WriteUnlock();
  Retire(InnerRef(n));
  Retire(LeafRef(gone));
  NodeArena::AddKeys(cache, -1);
  *out = Status::OK();
  return Attempt::kDone;
}

// ---- Scan ------------------------------------------------------------------------------------
Status VArt::Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const {
  return ScanInValidatedBatches<kScanBatch, Leaf>(
      epoch_, start, limit, fn, [&] { return ModeLock(IndexModeLock::kReader); },
      [&](std::string_view cursor, bool exclusive, size_t want, ScanBatch<Leaf>* out,
          bool* past_end) {
        ScanCtx ctx{cursor, exclusive, end, want, out};
        const bool ok = ScanNode(root_, nullptr, 0, 0, true, ctx);
        *past_end = ctx.past_end;
        return ok;
      });
}

// Adds l to the batch unless it is below the start (bounded: it may be) or past the end.
// False when the batch is complete.
bool VArt::Emit(const Leaf* l, bool bounded, ScanCtx& ctx) const {
  const std::string_view key = l->key_view();
  if (bounded) {
    const int c = CompareKeys(key, ctx.start);
    if (c < 0 || (c == 0 && ctx.exclusive)) return true;
  }
  if (ctx.end != nullptr && CompareKeys(key, *ctx.end) > 0) {
    ctx.past_end = ctx.stop = true;
    return false;
  }
  ctx.out->emplace_back(l, l->value.load(std::memory_order_acquire));
  if (ctx.out->size() >= ctx.want) ctx.stop = true;
  return !ctx.stop;
}

// Collects the keys below n (whose path before its prefix has `depth` bytes) in ascending order;
// n was read from a node locked by pl at version pv (checked again once n's version is read).
// `bounded`: n's path so far equals start's first `depth` bytes, so some keys may be < start.
// False: a node changed under the scan (restart the batch).
WORT_OPTIMISTIC_READ bool VArt::ScanNode(const Inner* n, const VersionLock* pl, uint64_t pv, size_t depth, bool bounded,
                                          ScanCtx& ctx) const {
  uint64_t v;
  if (!n->lock.ReadLockOrRestart(&v) || (pl != nullptr && !pl->CheckOrRestart(pv))) return false;  // coupling
  const uint32_t plen = n->prefix_len;
  int from = 0;
  bool below = bounded;  // the children may still hold keys < start
  const size_t d = depth + plen;
  if (bounded) {
    uint8_t buf[kPrefixInline];
    const uint8_t* full = buf;
    if (plen != 0 && !FullPrefix(n, depth, plen, buf, &full)) return false;
    const size_t avail = ctx.start.size() > depth ? ctx.start.size() - depth : 0;
    const size_t cmp = std::min<size_t>(plen, avail);
    const int c = cmp == 0 ? 0 : std::memcmp(full, ctx.start.data() + depth, cmp);
    if (!n->lock.CheckOrRestart(v)) return false;
    if (c < 0) return true;                 // every key below is < start
    if (c > 0 || plen >= avail) below = false;  // every key below is >= start (the term may be = start)
    else from = static_cast<uint8_t>(ctx.start[d]);
  }
  if (const Leaf* t = n->term.load(std::memory_order_acquire); t != nullptr && !below) {
    if (!n->lock.CheckOrRestart(v)) return false;
    if (!Emit(t, bounded, ctx)) return true;
  }
  bool ok = true;
  ForEachChild(n, from, [&](uint8_t b, Ref r) {
    if (!n->lock.CheckOrRestart(v)) return ok = false;  // r was n's child at this check
    const bool cb = below && b == from;
    if (IsLeaf(r)) return Emit(AsLeaf(r), cb, ctx);
    if (!ScanNode(AsInner(r), &n->lock, v, d + 1, cb, ctx)) return ok = false;
    return !ctx.stop;
  });
  return ok;
}

// ---- Check, Stats (writers excluded) ---------------------------------------------------------
Status VArt::Check(std::string* report) const {
  auto q = ModeLock(IndexModeLock::kQuiesce);
  std::string r, path;
  uint64_t keys = 0;
  CheckNode(root_, &path, &r, &keys);
  if (keys != Size()) r += "key count " + std::to_string(keys) + " != Size() " + std::to_string(Size()) + "\n";
  if (r.empty()) return Status::OK();
  if (report) *report += r;
  return Status::Corruption("vart: " + r);
}

void VArt::CheckNode(const Inner* n, std::string* path, std::string* report, uint64_t* keys) const {
  const size_t base = path->size();
  if (n->prefix_len != 0) {
    const Leaf* any = AnyLeaf(n);
    if (any == nullptr || any->len < base + n->prefix_len) {
      *report += "inner node with a prefix and no leaf long enough below it\n";
      return;
    }
    path->append(any->key() + base, n->prefix_len);
    if (!StoredPrefixMatches(n, n->prefix_len, reinterpret_cast<const uint8_t*>(path->data()) + base))
      *report += "stored prefix bytes differ from the keys below the node\n";
  }
  const Leaf* t = n->term.load(std::memory_order_relaxed);
  if (t != nullptr) {
    if (t->key_view() != *path) *report += "term leaf key != node path\n";
    ++*keys;
  }
  int count = 0, last = -1;
  ForEachChild(n, 0, [&](uint8_t b, Ref c) {
    if (static_cast<int>(b) <= last) *report += "children not in increasing byte order\n";
    last = b;
    ++count;
    path->push_back(static_cast<char>(b));
    if (IsLeaf(c)) {
      const Leaf* l = AsLeaf(c);
      if (l->len < path->size() || std::memcmp(l->key(), path->data(), path->size()) != 0)
        *report += "leaf key does not extend its path\n";
      ++*keys;
    } else {
      CheckNode(AsInner(c), path, report, keys);
    }
    path->pop_back();
    return true;
  });
  if (count != n->count) *report += "child count mismatch\n";
  if (n != root_ && count < 2 && !(count == 1 && t != nullptr))
    *report += "inner node without a term leaf and a child or two children\n";
  path->resize(base);
}

IndexStats VArt::Stats() const {
  auto q = ModeLock(IndexModeLock::kQuiesce);
  IndexStats st;
  uint64_t bytes = 0, sum = 0;
  CountRef(InnerRef(root_), 0, &st, &bytes, &sum);
  st.avg_leaf_depth = st.leaves ? static_cast<double>(sum) / st.leaves : 0;
  st.volatile_bytes = bytes;
  st.keys = Size();
  st.bytes_allocated = pool_->allocator().UsableSize(root_off_);
  return st;
}

void VArt::CountRef(Ref r, int depth, IndexStats* st, uint64_t* bytes, uint64_t* sum) const {
  if (IsLeaf(r)) {
    ++st->leaves;
    *sum += depth;
    *bytes += sizeof(Leaf) + AsLeaf(r)->len;
    return;
  }
  const Inner* n = AsInner(r);
  ++st->inner_nodes;
  *bytes += NodeBytes(n);
  if (Leaf* t = n->term.load(std::memory_order_relaxed)) CountRef(LeafRef(t), depth + 1, st, bytes, sum);
  ForEachChild(n, 0, [&](uint8_t, Ref c) {
    CountRef(c, depth + 1, st, bytes, sum);
    return true;
  });
}

Status Create(Pool& pool, const IndexOptions& opts, uint64_t* root_off) {
  return CreateMarker(pool, opts, kind_id::kVart, root_off);
}
Status Open(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) {
  KeyType kt;
  WORT_RETURN_IF_ERROR(ReadMarker(pool, root_off, kind_id::kVart, &kt));
  std::shared_ptr<void> token;
  WORT_RETURN_IF_ERROR(ClaimSoleHandle(&pool, root_off, "vart", &token));
  auto idx = std::make_unique<VArt>(&pool, root_off, kt);
  idx->KeepSoleHandle(std::move(token));
  *out = std::move(idx);
  return Status::OK();
}

const IndexKind kKind = {"vart", kind_id::kVart,
                         "volatile reference: ART in DRAM (NODE4/16/48/256, path compression, optimistic lock "
                         "coupling); data lost on close",
                         true, &Create, &Open, &VisitMarker};

}  // namespace

bool VartMemoryOf(const Index& idx, VartMemory* out) {
  const auto* v = dynamic_cast<const VArt*>(&idx);
  if (v == nullptr) return false;
  auto q = v->ModeLock(IndexModeLock::kQuiesce);
  IndexStats st;
  uint64_t bytes = 0, sum = 0;
  v->CountRef(InnerRef(v->root_), 0, &st, &bytes, &sum);
  const NodeArena::Usage u = v->arena_.GetUsage();
  VartMemory m;
  m.tree_blocks = st.inner_nodes - 1 + st.leaves;  // the root is not the arena's
  m.retired_pending = v->epoch_.Stats().pending;
  m.blocks_live = u.blocks;
  m.bytes_live = u.bytes;
  m.chunks = u.chunks;
  m.chunk_bytes = u.chunk_bytes;
  m.caches = u.caches;
  m.shared_blocks = u.shared_blocks;
  *out = m;
  return true;
}

bool VartThreadInEpoch(const Index& idx) {
  const auto* v = dynamic_cast<const VArt*>(&idx);
  return v != nullptr && v->epoch_.InEpoch();
}

bool VartEpochStatsOf(const Index& idx, sync::EpochStats* out) {
  const auto* v = dynamic_cast<const VArt*>(&idx);
  if (v == nullptr) return false;
  *out = v->epoch_.Stats();
  return true;
}

}  // namespace wort::vol

// Listed in the table of built-in kinds (BuiltinIndexKinds, src/index/registry.cc).
const wort::IndexKind* wort::builtin_kinds::Vart() { return &wort::vol::kKind; }
