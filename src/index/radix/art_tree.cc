// ArtTree: the adaptive radix tree behind WOART and ART+CoW. See art_tree.h for the split of
// work between the two trees, art_node.h for the layouts, and woart.cc / artcow.cc for each
// tree's crash invariants and the write order and commit point of each mutation.
#include "index/radix/art_tree.h"

#include "index/batched_scan.h"
#include "index/registry.h"
#include "index/root_block.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "wort/alloc.h"
#include "wort/pm.h"

namespace wort::art {

const char* NodeTypeName(uint8_t t) {
  switch (t) {
    case kW4: return "NODE4(woart)";
    case kW16: return "NODE16(woart)";
    case kN48: return "NODE48";
    case kN256: return "NODE256";
    case kS4: return "NODE4(cow)";
    case kS16: return "NODE16(cow)";
  }
  return "NODE(?)";
}

namespace {

// Bound on the number of levels of any walk (a path consumes at least one key byte per inner
// node): protects walks over a corrupted tree from looping.
constexpr uint32_t kMaxLevels = kMaxKeyLen + 2;

const unsigned char* UBytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

// NODE48 child index: read entry c. An atomic load: a lock-free reader may read it while a
// writer stores its 8-byte word (StoreChildIndex: pm::store8), and a plain read would be a data
// race (ThreadSanitizer reported it in the multi-writer kill test: a lookup's FindChild against a
// remove's StoreChildIndex). Acquire: the child word the entry names is read after it and is the
// one written before the entry (a lookup checks no version: LookupAttempt).
inline uint8_t ChildIndexAt(const N48* x, unsigned c) { return __atomic_load_n(&x->child_index[c], __ATOMIC_ACQUIRE); }

// Calls f(partial_key, child_ref) for the children of n with partial key >= from, in ascending
// unsigned order, until f returns false. Only entries marked valid are visited. Child references
// are read with acquire loads (pm::load8): a lock-free reader then sees everything the writer
// wrote into the child before it published the reference (a release store), which is also what
// ThreadSanitizer needs to see the happens-before (a plain read here is not instrumented, but
// the reader's later reads of the child are).
template <class F>
WORT_OPTIMISTIC_READ void ForEachSorted(const NodeBase* n, unsigned from, F&& f) {
  switch (n->type) {
    case kW4: {
      const auto* x = reinterpret_cast<const W4*>(n);
      const Slot4 s = DecodeSlot4(x->slots);
      for (int i = 0; i < s.n; ++i)
        if (s.key[i] >= from && !f(s.key[i], pm::load8(&x->child[s.idx[i]]))) return;
      return;
    }
    case kW16: {
      // Unsorted node: each valid entry's rank is the number of valid keys below it (keys are
      // distinct), computed with the unsigned SIMD compare.
      const auto* x = reinterpret_cast<const W16*>(n);
      const uint32_t mask = uint32_t(x->bitmap) & 0xffffu;
      unsigned char keys[16] = {};
      uint64_t refs[16] = {};  // (a corrupted node with duplicate keys leaves holes: 0 = none)
      int cnt = 0;
      for (uint32_t m = mask; m; m &= m - 1) {
        const int i = __builtin_ctz(m);
        const int r = CountLess16Simd(x->keys, mask, x->keys[i]);
        if (r < 16) {
          keys[r] = x->keys[i];
          refs[r] = pm::load8(&x->child[i]);
        }
        ++cnt;
      }
      for (int r = 0; r < cnt && r < 16; ++r)
        if (refs[r] && keys[r] >= from && !f(keys[r], refs[r])) return;
      return;
    }
    case kN48: {
      const auto* x = reinterpret_cast<const N48*>(n);
      for (unsigned c = from; c < 256; ++c) {
        const int k = DecodeSlot(ChildIndexAt(x, c));
        if (k >= 0 && k < 48 && !f(static_cast<unsigned char>(c), pm::load8(&x->child[k]))) return;
      }
      return;
    }
    case kN256: {
      const auto* x = reinterpret_cast<const N256*>(n);
      for (unsigned c = from; c < 256; ++c)
        if (const uint64_t r = pm::load8(&x->child[c]); r && !f(static_cast<unsigned char>(c), r)) return;
      return;
    }
    case kS4: {
      const auto* x = reinterpret_cast<const S4*>(n);
      const int cnt = std::min<int>(x->count, 4);
      for (int i = 0; i < cnt; ++i)
        if (x->keys[i] >= from && !f(x->keys[i], pm::load8(&x->child[i]))) return;
      return;
    }
    case kS16: {
      const auto* x = reinterpret_cast<const S16*>(n);
      const int cnt = std::min<int>(x->count, 16);
      const uint32_t mask = (1u << cnt) - 1;
      // Sorted node: skip the keys below `from` in one unsigned SIMD compare.
      const int first = from > 255 ? cnt : CountLess16Simd(x->keys, mask, static_cast<unsigned char>(from));
      for (int i = first; i < cnt; ++i)
        if (!f(x->keys[i], pm::load8(&x->child[i]))) return;
      return;
    }
  }
}

}  // namespace

// ---- prefix bytes of a node -------------------------------------------------------------------
// Byte j of the compressed prefix of a node whose header h is valid (its depth is the real one):
// the inline bytes come from the header, later ones from any leaf below (every key below the
// node holds the whole prefix), read at most once.
class ArtTree::PrefixSource {
 public:
  PrefixSource(const ArtTree* t, const NodeBase* n, const Hdr& h) : t_(t), n_(n), h_(h) {}
  WORT_OPTIMISTIC_READ unsigned char at(uint32_t j) {
    if (j < kInlinePrefix) return h_.prefix[j];
    if (!leaf_) {
      leaf_ = t_->ExtremeLeaf(NodeRef(t_->pool_.offset_of(n_)), false);
      if (!leaf_) return 0;  // corrupted subtree; Check() reports it
    }
    const uint32_t pos = h_.depth + j;
    return pos < leaf_->key_len ? leaf_->key()[pos] : 0;
  }

 private:
  const ArtTree* t_;
  const NodeBase* n_;
  const Hdr& h_;
  const Leaf* leaf_ = nullptr;
};

// ---- construction -----------------------------------------------------------------------------
ArtTree::ArtTree(Pool& pool, uint64_t root_off, const ArtPolicy& policy)
    : pool_(pool),
      root_off_(root_off),
      rb_(pool.at<RootBlock>(root_off)),
      policy_(policy),
      key_type_(static_cast<KeyType>(rb_->key_type)),
      key_min_(key_type_ == KeyType::kU64 ? 8 : 0),
      key_span_(key_type_ == KeyType::kU64 ? 0 : kMaxKeyLen),
      heap_off_(pool.heap_offset()),
      epoch_(pool.allocator().epoch()),
      fast_lim_(FastLim()),
      mu_ptr_(IndexLock(&pool, root_off)),
      mu_(*mu_ptr_),
      global_lock_(GlobalIndexLock()) {}

uint64_t ArtTree::FastLim() const {
  const uint64_t size = pool_.size();
  return size > heap_off_ + sizeof(N256) ? size - sizeof(N256) - heap_off_ : 0;  // 0: all to BlockOk
}

void ArtTree::NoteBlock(uint64_t off) {
  uint64_t cur = fast_lim_.load(std::memory_order_relaxed);
  if (off - heap_off_ < cur) [[likely]] return;
  const uint64_t lim = FastLim();
  while (lim > cur && !fast_lim_.compare_exchange_weak(cur, lim, std::memory_order_relaxed)) {
  }
}

Status ArtTree::Create(Pool& pool, const ArtPolicy& policy, const IndexOptions& opts, uint64_t* root_off) {
  if (opts.key_type != KeyType::kU64 && opts.key_type != KeyType::kBytes)
    return Status::InvalidArgument(std::string(policy.kind_name) + ": unknown key type");
  uint64_t off = 0;
  WORT_RETURN_IF_ERROR(pool.allocator().AllocZeroed(sizeof(RootBlock), &off));
  auto* rb = pool.at<RootBlock>(off);
  rb->magic = policy.magic;
  rb->key_type = static_cast<uint64_t>(opts.key_type);
  rb->root = 0;
  rb->flags = opts.values_are_blocks ? kRootValuesAreBlocks : 0;
  // Persisted before the caller publishes the root entry (the index's commit point).
  pm::persist(rb, sizeof(RootBlock));
  *root_off = off;
  return Status::OK();
}

Status ArtTree::Open(Pool& pool, uint64_t root_off, const ArtPolicy& policy, std::unique_ptr<Index>* out) {
  WORT_RETURN_IF_ERROR(CheckRootBlockPlace(pool, root_off, sizeof(RootBlock), policy.kind_name));
  const auto* rb = pool.at<RootBlock>(root_off);
  WORT_RETURN_IF_ERROR(CheckRootHeader(policy.kind_name, rb->magic, policy.magic, rb->key_type));
  std::shared_ptr<void> token;  // one handle per index (registry.h)
  WORT_RETURN_IF_ERROR(ClaimSoleHandle(&pool, root_off, policy.kind_name, &token));
  auto* t = new ArtTree(pool, root_off, policy);
  t->sole_handle_ = std::move(token);
  out->reset(t);
  return Status::OK();
}

Status ArtTree::ValidateKey(std::string_view key) const {
  if (key.size() > kMaxKeyLen) return Status::InvalidArgument("key longer than kMaxKeyLen");
  if (key_type_ == KeyType::kU64 && key.size() != 8)
    return Status::InvalidArgument("this index takes 8-byte (kU64) keys only");
  return Status::OK();
}

// ---- small helpers ------------------------------------------------------------------------------
bool ArtTree::RefOk(uint64_t ref) const {
  const uint64_t off = RefOffset(ref);
  return off != 0 && (off & 63) == 0 && off >= heap_off_ &&
         pool_.contains(off, IsLeafRef(ref) ? sizeof(Leaf) : sizeof(NodeBase));
}

bool ArtTree::BlockOk(uint64_t ref) const {
  if (!RefOk(ref)) return false;
  if (IsLeafRef(ref)) {
    const Leaf* l = leaf(ref);
    return l->key_len <= kMaxKeyLen && pool_.contains(RefOffset(ref), Leaf::SizeFor(l->key_len));
  }
  const NodeBase* n = node(ref);
  return ValidNodeType(n->type) && pool_.contains(RefOffset(ref), NodeSize(n->type));
}

void ArtTree::Commit(uint64_t* word, uint64_t v) {
  pm::store8(word, v);
  pm::persist(word, sizeof(uint64_t));
}

void ArtTree::Free(uint64_t ref) { pool_.allocator().Free(RefOffset(ref)); }
void ArtTree::Retire(uint64_t ref) { pool_.allocator().Retire(RefOffset(ref)); }

// The write locks one mutation holds (at most three: parent, node, surviving child), each
// taken by UpgradeToWriteLock from the version the descent read; released (version bumped) on
// destruction. Two nodes may share a lock word (sync::VersionLockTable): a word already held
// is not locked again, and counts as upgraded only if it was at the same version.
class ArtTree::WriteLocks {
 public:
  WriteLocks() = default;
  WriteLocks(const WriteLocks&) = delete;
  WriteLocks& operator=(const WriteLocks&) = delete;
  ~WriteLocks() {
    for (int i = 0; i < n_; ++i) held_[i]->WriteUnlock();
  }
  [[nodiscard]] bool Upgrade(sync::VersionLock& l, uint64_t v) {
    for (int i = 0; i < n_; ++i)
      if (held_[i] == &l) return from_[i] == v;
    if (!l.UpgradeToWriteLock(v)) return false;
    held_[n_] = &l;
    from_[n_++] = v;
    return true;
  }
  // For a node whose version the descent did not read (a path merge's surviving child).
  [[nodiscard]] bool Lock(sync::VersionLock& l) {
    for (int i = 0; i < n_; ++i)
      if (held_[i] == &l) return true;
    uint64_t v;
    return l.ReadLockOrRestart(&v) && Upgrade(l, v);
  }

 private:
  sync::VersionLock* held_[3] = {};
  uint64_t from_[3] = {};
  int n_ = 0;
};


using sync::Backoff;

void ArtTree::Added() {
  count_.Added();
}
void ArtTree::Removed() {
  count_.Removed();
}

Status ArtTree::AllocLeaf(std::string_view key, uint64_t value, uint64_t* ref) {
  uint64_t off = 0;
  WORT_RETURN_IF_ERROR(pool_.allocator().Alloc(Leaf::SizeFor(key.size()), &off));
  NoteBlock(off);
  Leaf* l = pool_.at<Leaf>(off);
  l->value = value;
  l->key_len = static_cast<uint32_t>(key.size());
  l->reserved = 0;
  if (key.size() == 8) std::memcpy(l->key(), key.data(), 8);  // one word, no memcpy call
  else if (!key.empty()) std::memcpy(l->key(), key.data(), key.size());
  pm::persist(l, Leaf::SizeFor(key.size()));  // before any reference to it is published
  *ref = LeafRef(off);
  return Status::OK();
}

Status ArtTree::BuildNode(uint8_t type, const Hdr& h, uint64_t leaf_here, const Entry* e, int n, uint64_t* ref) {
  uint64_t off = 0;
  WORT_RETURN_IF_ERROR(pool_.allocator().AllocZeroed(NodeSize(type), &off));
  NoteBlock(off);
  auto* nb = pool_.at<NodeBase>(off);
  nb->hdr = PackHdr(h);
  nb->type = type;
  nb->leaf_here = leaf_here;
  switch (type) {
    case kW4: {
      auto* x = reinterpret_cast<W4*>(nb);
      Slot4 s;
      s.n = n;
      for (int i = 0; i < n; ++i) {
        s.key[i] = e[i].c;
        s.idx[i] = static_cast<unsigned char>(i);
        x->child[i] = e[i].ref;
      }
      x->slots = EncodeSlot4(s);
      break;
    }
    case kW16: {
      auto* x = reinterpret_cast<W16*>(nb);
      for (int i = 0; i < n; ++i) {
        x->keys[i] = e[i].c;
        x->child[i] = e[i].ref;
      }
      x->bitmap = n >= 16 ? 0xffffu : ((1u << n) - 1);
      break;
    }
    case kN48: {
      auto* x = reinterpret_cast<N48*>(nb);
      for (int i = 0; i < n; ++i) {
        x->child[i] = e[i].ref;
        x->child_index[e[i].c] = EncodeSlot(i);
      }
      break;
    }
    case kN256: {
      auto* x = reinterpret_cast<N256*>(nb);
      for (int i = 0; i < n; ++i) x->child[e[i].c] = e[i].ref;
      break;
    }
    case kS4:
    case kS16: {
      auto* x4 = reinterpret_cast<S4*>(nb);
      auto* x16 = reinterpret_cast<S16*>(nb);
      for (int i = 0; i < n; ++i) {
        if (type == kS4) {
          x4->keys[i] = e[i].c;
          x4->child[i] = e[i].ref;
        } else {
          x16->keys[i] = e[i].c;
          x16->child[i] = e[i].ref;
        }
      }
      if (type == kS4) x4->count = static_cast<uint8_t>(n);
      else x16->count = static_cast<uint8_t>(n);
      break;
    }
  }
  pm::persist(nb, NodeSize(type));  // the whole new node, before it is published
  *ref = NodeRef(off);
  return Status::OK();
}

Status ArtTree::CopyNode(const NodeBase* n, const Hdr& h, uint64_t* ref) {
  const size_t sz = NodeSize(n->type);
  uint64_t off = 0;
  WORT_RETURN_IF_ERROR(pool_.allocator().Alloc(sz, &off));
  NoteBlock(off);
  auto* nb = pool_.at<NodeBase>(off);
  std::memcpy(nb, n, sz);
  nb->hdr = PackHdr(h);
  pm::persist(nb, sz);
  *ref = NodeRef(off);
  return Status::OK();
}

uint8_t ArtTree::TypeAfterAdd(uint8_t type, int n_after) const {
  if (n_after <= Capacity(type)) return type;
  if (type == policy_.node4) return policy_.node16;
  if (type == policy_.node16) return kN48;
  return kN256;
}

uint8_t ArtTree::TypeAfterRemove(uint8_t type, int n_after) const {
  if (n_after >= MinChildren(type)) return type;
  if (type == kN256) return kN48;
  if (type == kN48) return policy_.node16;
  return policy_.node4;
}

// ---- node primitives ----------------------------------------------------------------------------
WORT_OPTIMISTIC_READ uint64_t* ArtTree::FindChild(NodeBase* n, unsigned char c) const { return FindChildInline(n, c); }

WORT_OPTIMISTIC_READ inline uint64_t* ArtTree::FindChildInline(NodeBase* n, unsigned char c) const {
  switch (n->type) {
    case kW4: {
      // The slot word read once, searched in place (DecodeSlot4's order: entries packed at the
      // front, an empty slot byte ends them).
      auto* x = reinterpret_cast<W4*>(n);
      const uint64_t w = pm::load8(&x->slots);  // acquire: child[ci] below is read after it
      for (int i = 0; i < 4; ++i) {
        const int ci = DecodeSlot(static_cast<uint8_t>(w >> (32 + 8 * i)));
        if (ci < 0) break;
        if (static_cast<unsigned char>(w >> (8 * i)) == c) return &x->child[ci];
      }
      return nullptr;
    }
    case kW16: {
      // The bitmap first, with acquire: a key byte read after it is the one written before the
      // bit was set (a lookup checks no version: LookupAttempt). Read the other way round, a
      // stale byte of a slot being filled could match c under the new bit.
      auto* x = reinterpret_cast<W16*>(n);
      const uint32_t bits = static_cast<uint32_t>(pm::load8(&x->bitmap));
      const int i = Find16Simd(x->keys, bits, c);
      return i < 0 ? nullptr : &x->child[i];
    }
    case kN48: {
      auto* x = reinterpret_cast<N48*>(n);
      const int k = DecodeSlot(ChildIndexAt(x, c));  // acquire: child[k] is read after it
      return (k < 0 || k >= 48) ? nullptr : &x->child[k];
    }
    case kN256: {
      auto* x = reinterpret_cast<N256*>(n);
      return x->child[c] ? &x->child[c] : nullptr;
    }
    case kS4: {
      auto* x = reinterpret_cast<S4*>(n);
      for (int i = 0; i < x->count && i < 4; ++i)
        if (x->keys[i] == c) return &x->child[i];
      return nullptr;
    }
    case kS16: {
      auto* x = reinterpret_cast<S16*>(n);
      const int i = Find16Simd(x->keys, (1u << std::min<int>(x->count, 16)) - 1, c);
      return i < 0 ? nullptr : &x->child[i];
    }
  }
  return nullptr;
}

WORT_OPTIMISTIC_READ int ArtTree::ChildCount(const NodeBase* n) const {
  switch (n->type) {
    case kW4: return DecodeSlot4(reinterpret_cast<const W4*>(n)->slots).n;
    case kW16: return __builtin_popcount(uint32_t(reinterpret_cast<const W16*>(n)->bitmap) & 0xffffu);
    case kN48: {
      const auto* x = reinterpret_cast<const N48*>(n);
      int empty = 0;
      for (int i = 0; i < 256; i += 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x->child_index + i));
        empty += __builtin_popcount(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_setzero_si128()))));
      }
      return 256 - empty;
    }
    case kN256: {
      const auto* x = reinterpret_cast<const N256*>(n);
      int cnt = 0;
      for (int c = 0; c < 256; ++c) cnt += x->child[c] != 0;
      return cnt;
    }
    case kS4: return std::min<int>(reinterpret_cast<const S4*>(n)->count, 4);
    case kS16: return std::min<int>(reinterpret_cast<const S16*>(n)->count, 16);
  }
  return 0;
}

WORT_OPTIMISTIC_READ int ArtTree::Collect(const NodeBase* n, Entry* out) const {
  int cnt = 0;
  ForEachSorted(n, 0, [&](unsigned char c, uint64_t ref) {
    out[cnt++] = {c, ref};
    return cnt < 256;
  });
  return cnt;
}

WORT_OPTIMISTIC_READ const Leaf* ArtTree::ExtremeLeaf(uint64_t ref, bool max) const {
  for (uint32_t lvl = 0; lvl <= kMaxLevels; ++lvl) {
    if (!RefOk(ref)) return nullptr;
    if (IsLeafRef(ref)) {
      const Leaf* l = leaf(ref);
      if (l->key_len > kMaxKeyLen || !pool_.contains(RefOffset(ref), Leaf::SizeFor(l->key_len))) return nullptr;
      return l;
    }
    const NodeBase* n = node(ref);
    if (!ValidNodeType(n->type) || !pool_.contains(RefOffset(ref), NodeSize(n->type))) return nullptr;
    // The key ending at a node is the smallest below it.
    const uint64_t lh = pm::load8(&n->leaf_here);
    if (!max && lh) {
      ref = lh;
      continue;
    }
    uint64_t next = 0;
    ForEachSorted(n, 0, [&](unsigned char, uint64_t r) {
      next = r;
      return max;  // min: stop at the first child; max: run to the last
    });
    ref = next ? next : lh;
  }
  return nullptr;
}

// ---- the depth rule (WORT Algorithm 2) --------------------------------------------------------
WORT_OPTIMISTIC_READ Hdr ArtTree::EffectiveHdr(const NodeBase* n, uint32_t depth) const {
  const Hdr h = UnpackHdr(n->hdr);
  if (h.depth == depth) return h;
  // The stored depth is not the real one: a prefix split (or path merge) stored this node's new
  // header and was cut before the parent's word was swapped. Recompute the header for the real
  // depth from two leaves in different entries (the smallest and the largest key below): their
  // longest common prefix ends exactly at the node's branch position.
  const uint64_t ref = NodeRef(pool_.offset_of(n));
  const Leaf* l1 = ExtremeLeaf(ref, false);
  const Leaf* l2 = ExtremeLeaf(ref, true);
  if (!l1 || !l2 || l1->key_len < depth || l2->key_len < depth) {
    // Corrupted subtree; keep the branch position the stored header implies (Check reports it).
    Hdr r = h;
    r.depth = depth;
    r.plen = h.branch() >= depth ? h.branch() - depth : 0;
    return r;
  }
  uint32_t b = depth;
  const uint32_t m = std::min(l1->key_len, l2->key_len);
  while (b < m && l1->key()[b] == l2->key()[b]) ++b;
  return MakeHdr(depth, b - depth, l1->key() + depth);
}

Hdr ArtTree::RepairHdr(NodeBase* n, uint32_t depth) {
  const Hdr stored = UnpackHdr(n->hdr);
  if (stored.depth == depth) return stored;
  const Hdr h = EffectiveHdr(n, depth);
  // Algorithm 2, lines 9-12: one 8-byte store of the recomputed header, persisted. The tree is
  // consistent before and after it (readers treat either header the same way).
  Commit(&n->hdr, PackHdr(h));
  repairs_.fetch_add(1, std::memory_order_relaxed);
  return h;
}

// ---- Insert / Upsert ------------------------------------------------------------------------
Status ArtTree::Insert(std::string_view key, uint64_t value) { return InsertImpl(key, value, false, nullptr); }

Status ArtTree::Upsert(std::string_view key, uint64_t value, bool* inserted) {
  return InsertImpl(key, value, true, inserted);
}

Status ArtTree::Exchange(std::string_view key, uint64_t value, bool* inserted, uint64_t* old) {
  return InsertImpl(key, value, true, inserted, old);
}

// REQUIRES the write lock that orders the leaf's value word with other writers (the caller's).
Status ArtTree::UpdateValue(Leaf* l, uint64_t value, bool upsert, bool* inserted, uint64_t* old) {
  if (!upsert) return Status::AlreadyExists("key exists");
  if (old) *old = pm::load8(&l->value);  // under the lock: the value this update replaces
  // Commit point of an update: the leaf's value word (store8), persisted.
  Commit(&l->value, value);
  if (inserted) *inserted = false;
  return Status::OK();
}

Status ArtTree::InsertImpl(std::string_view key, uint64_t value, bool upsert, bool* inserted, uint64_t* old) {
  if (key.size() - key_min_ > key_span_) [[unlikely]] return ValidateKey(key);  // (Lookup's one test)
  sync::EpochGuard eg(epoch());
  auto wg = ModeLock(IndexModeLock::kWriter);
  uint64_t lr = 0;  // the new leaf: allocated once, kept across restarts, 0 once published
  Status s;
  for (int attempt = 0; InsertAttempt(key, value, upsert, inserted, old, &lr, &s) == Attempt::kRestart; ++attempt)
    Backoff(attempt);
  if (lr) Free(lr);  // never published
  return s;
}

// One optimistic attempt (protocol: art_tree.h, src/sync/sync.h). `pl`/`pv`: the lock word and
// version of the block holding `slot` (the root block, then the parent node); every word read
// from a node is used only after that node's version was checked.
WORT_OPTIMISTIC_READ ArtTree::Attempt ArtTree::InsertAttempt(std::string_view key, uint64_t value, bool upsert, bool* inserted,
                                        uint64_t* old, uint64_t* lr, Status* out) {
  const unsigned char* k = UBytes(key);
  const auto len = static_cast<uint32_t>(key.size());
  auto new_leaf = [&]() -> Status { return *lr ? Status::OK() : AllocLeaf(key, value, lr); };
  const sync::AttemptEnd end(out);
  auto added = [&] {
    *lr = 0;
    Added();
    if (inserted) *inserted = true;
    return end.Done(Status::OK());
  };
  sync::VersionLock* pl = &LockOf(rb_);
  uint64_t pv;
  if (!pl->ReadLockOrRestart(&pv)) return Attempt::kRestart;
  uint64_t* slot = &rb_->root;  // the word that references the current node
  uint32_t depth = 0;           // real depth of the current node
  for (uint32_t lvl = 0; lvl <= kMaxLevels; ++lvl) {
    const uint64_t ref = pm::load8(slot);
    if (!pl->CheckOrRestart(pv)) return Attempt::kRestart;
    if (ref == 0) {
      // Empty tree (only the root word can be 0).
      if (Status st = new_leaf(); !st.ok()) return end.Done(st);
      WriteLocks wl;
      if (!wl.Upgrade(*pl, pv)) return Attempt::kRestart;
      Commit(slot, *lr);  // commit: the root word names the new leaf
      return added();
    }
    if (IsLeafRef(ref)) {
      Leaf* l = leaf(ref);  // a leaf's key never changes once published
      if (l->key_view() == key) {
        if (!upsert) return end.Done(Status::AlreadyExists("key exists"));
        WriteLocks wl;  // the parent's lock orders the update with a concurrent Remove
        if (!wl.Upgrade(*pl, pv)) return Attempt::kRestart;
        return end.Done(UpdateValue(l, value, upsert, inserted, old));
      }
      // Two keys where there was one: a NODE4 at this depth whose prefix is their common part.
      uint32_t b = depth;
      const uint32_t m = std::min(len, l->key_len);
      while (b < m && k[b] == l->key()[b]) ++b;
      if (Status st = new_leaf(); !st.ok()) return end.Done(st);
      Entry e[2];
      int ne = 0;
      uint64_t here = 0;
      const std::pair<std::string_view, uint64_t> both[2] = {{l->key_view(), ref}, {key, *lr}};
      for (const auto& [kk, r] : both) {
        if (kk.size() == b) here = r;
        else e[ne++] = {UBytes(kk)[b], r};
      }
      if (ne == 2 && e[0].c > e[1].c) std::swap(e[0], e[1]);
      WriteLocks wl;
      if (!wl.Upgrade(*pl, pv)) return Attempt::kRestart;
      uint64_t nr = 0;
      if (Status st = BuildNode(policy_.node4, MakeHdr(depth, b - depth, k + depth), here, e, ne, &nr); !st.ok())
        return end.Done(st);
      Commit(slot, nr);  // commit: the parent's word names the new NODE4 (leaf and node persisted)
      return added();
    }
    NodeBase* n = node(ref);
    sync::VersionLock* nl = &LockOf(n);
    uint64_t nv;
    if (!nl->ReadLockOrRestart(&nv) || !pl->CheckOrRestart(pv)) return Attempt::kRestart;
    const Hdr stored = UnpackHdr(pm::load8(&n->hdr));
    if (stored.depth != depth) {
      // An interrupted split or merge (depth rule): repair the header under the node's lock.
      WriteLocks wl;
      if (!wl.Upgrade(*nl, nv)) return Attempt::kRestart;
      RepairHdr(n, depth);
      return Attempt::kRestart;
    }
    const Hdr& h = stored;
    // Compare the key with the whole prefix (inline bytes, then the optimistic part from a leaf):
    // a writer needs the exact position of the first difference.
    PrefixSource ps(this, n, h);
    uint32_t i = 0;
    while (i < h.plen && depth + i < len && k[depth + i] == ps.at(i)) ++i;
    if (!nl->CheckOrRestart(nv)) return Attempt::kRestart;
    if (i < h.plen) {
      if (Status st = new_leaf(); !st.ok()) return end.Done(st);
      WriteLocks wl;
      if (!wl.Upgrade(*pl, pv) || !wl.Upgrade(*nl, nv)) return Attempt::kRestart;
      if (Status st = SplitPrefix(slot, n, h, i, key, *lr); !st.ok()) return end.Done(st);
      return added();
    }
    const uint32_t b = h.branch();
    if (len == b) {
      const uint64_t lh = pm::load8(&n->leaf_here);
      if (!nl->CheckOrRestart(nv)) return Attempt::kRestart;
      if (lh) {
        Leaf* l = leaf(lh);
        if (l->key_view() != key) return end.Done(Status::Corruption("leaf_here holds a key that does not end here"));
        if (!upsert) return end.Done(Status::AlreadyExists("key exists"));
        WriteLocks wl;
        if (!wl.Upgrade(*nl, nv)) return Attempt::kRestart;
        return end.Done(UpdateValue(l, value, upsert, inserted, old));
      }
      if (Status st = new_leaf(); !st.ok()) return end.Done(st);
      WriteLocks wl;
      if (!wl.Upgrade(*nl, nv)) return Attempt::kRestart;
      Commit(&n->leaf_here, *lr);  // commit: the node's leaf_here word names the new leaf
      return added();
    }
    if (uint64_t* cs = FindChild(n, k[b])) {
      slot = cs;  // read (and checked against nv) at the top of the next level
      depth = b + 1;
      pl = nl;
      pv = nv;
      continue;
    }
    const uint8_t t = n->type;
    // A NODE256 without child k[b] has room (at most 255 children): no count, which would read
    // all 256 words (32 cache lines, issue 31's callgrind: a third of woart's D1 misses per insert).
    const int cnt = t == kN256 ? -1 : ChildCount(n);
    const bool in_place = t == kN256 || (cnt < Capacity(t) && (policy_.in_place || t == kN48));
    if (!nl->CheckOrRestart(nv)) return Attempt::kRestart;
    if (Status st = new_leaf(); !st.ok()) return end.Done(st);
    WriteLocks wl;
    if ((!in_place && !wl.Upgrade(*pl, pv)) || !wl.Upgrade(*nl, nv)) return Attempt::kRestart;
    // cnt was read at version nv, which the upgrade kept: it is the locked node's count.
    if (Status st = AddChild(slot, n, h, k[b], *lr, cnt); !st.ok()) return end.Done(st);
    return added();
  }
  return end.Done(Status::Corruption("tree deeper than any key allows"));
}

// Prefix split (WORT Algorithm 1 / copy-on-write). n (referenced by *slot, real header h) has
// prefix P of length p; the key differs from P at i < p (or ends there). A new NODE4 `np` at
// n's depth takes P[0,i) and two entries: n under P[i], the new leaf under key[depth+i] (or as
// its leaf_here when the key ends there). n moves down to depth+i+1 with prefix P[i+1,p).
Status ArtTree::SplitPrefix(uint64_t* slot, NodeBase* n, const Hdr& h, uint32_t i, std::string_view key,
                            uint64_t lr) {
  const unsigned char* k = UBytes(key);
  const uint32_t depth = h.depth;
  PrefixSource ps(this, n, h);
  Hdr moved;  // n's header after the split
  moved.depth = depth + i + 1;
  moved.plen = h.plen - i - 1;
  for (uint32_t j = 0; j < std::min(moved.plen, kInlinePrefix); ++j) moved.prefix[j] = ps.at(i + 1 + j);
  const unsigned char nc = ps.at(i);
  const Hdr parent_hdr = MakeHdr(depth, i, k + depth);

  uint64_t nref = NodeRef(pool_.offset_of(n));
  if (!policy_.in_place) {
    // ART+CoW: n is copied with its new header; n itself is never changed.
    WORT_RETURN_IF_ERROR(CopyNode(n, moved, &nref));
  }
  Entry e[2];
  int ne = 0;
  uint64_t here = 0;
  if (key.size() == depth + i) here = lr;
  else e[ne++] = {k[depth + i], lr};
  e[ne++] = {nc, nref};
  if (ne == 2 && e[0].c > e[1].c) std::swap(e[0], e[1]);
  uint64_t pr = 0;
  Status s = BuildNode(policy_.node4, parent_hdr, here, e, ne, &pr);
  if (!s.ok()) {
    if (!policy_.in_place) Free(nref);
    return s;
  }
  if (policy_.in_place) {
    // Algorithm 1: (1) new leaf and new parent are persistent (AllocLeaf, BuildNode).
    // (2) n's header := `moved` by one store8, persisted. Until (3) n's stored depth exceeds
    //     its real depth: readers skip its prefix, writers repair it (Algorithm 2).
    Commit(&n->hdr, PackHdr(moved));
    if (test_stop_ == TestStop::kAfterSplitHeader) {
      Free(pr);  // what recovery would reclaim; the caller frees the leaf
      return Status::Corruption("test stop: simulated crash after the split header store");
    }
    // (3) commit: the parent's word names the new parent.
    Commit(slot, pr);
  } else {
    Commit(slot, pr);  // commit: the parent's word names the new parent (holding n's copy)
    Retire(NodeRef(pool_.offset_of(n)));
  }
  return Status::OK();
}

// Adds (c -> child_ref) to n, which has no child c. In place when the node has room (WOART's
// NODE4/NODE16 per Algorithms 3/4; NODE48 per Algorithm 5 and NODE256 in both trees); otherwise
// a new node (the next larger type, or an ART+CoW copy) replaces n in the parent's word.
Status ArtTree::AddChild(uint64_t* slot, NodeBase* n, const Hdr& h, unsigned char c, uint64_t child_ref, int cnt) {
  const uint8_t t = n->type;
  if (cnt < 0 && t != kN256) cnt = ChildCount(n);
  // (A NODE256 without child c always has room.)
  if (t == kN256 || (cnt < Capacity(t) && (policy_.in_place || t == kN48))) {
    switch (t) {
      case kW4: {  // Algorithm 3
        auto* x = reinterpret_cast<W4*>(n);
        Slot4 s = DecodeSlot4(x->slots);
        unsigned used = 0;
        for (int i = 0; i < s.n; ++i) used |= 1u << s.idx[i];
        const int free_idx = __builtin_ctz(~used & 0xfu);
        Commit(&x->child[free_idx], child_ref);  // not yet reachable: no valid slot names it
        int pos = 0;
        while (pos < s.n && s.key[pos] < c) ++pos;
        for (int i = s.n; i > pos; --i) {
          s.key[i] = s.key[i - 1];
          s.idx[i] = s.idx[i - 1];
        }
        s.key[pos] = c;
        s.idx[pos] = static_cast<unsigned char>(free_idx);
        ++s.n;
        Commit(&x->slots, EncodeSlot4(s));  // commit: partial keys + slot array, one 8-byte store
        return Status::OK();
      }
      case kW16: {  // Algorithm 4
        auto* x = reinterpret_cast<W16*>(n);
        const uint64_t bm = x->bitmap;
        const int free_idx = __builtin_ctz(~uint32_t(bm) & 0xffffu);
        x->keys[free_idx] = c;
        pm::store8(&x->child[free_idx], child_ref);
        // keys[] shares cache line 0 with the bitmap (offsets 32 and 24 of a 64-byte-aligned block), so
        // the Commit's persist writes the key byte back with the bitmap; the flush is needed under 8-byte
        // torn write-back, which WOART's plan models (crash/plans.cc TornSafe) and catches.
        pm::flush(&x->keys[free_idx], 1);
        pm::flush(&x->child[free_idx], sizeof(uint64_t));
        pm::fence();
        Commit(&x->bitmap, bm | (uint64_t(1) << free_idx));  // commit: the bitmap word
        return Status::OK();
      }
      case kN48: {  // Algorithm 5: the free child word is found through the child index array
        auto* x = reinterpret_cast<N48*>(n);
        // The child words in use: those the non-empty index bytes name (16 bytes per compare,
        // then only the non-empty ones: at most 48 of the 256).
        uint64_t used = 0;
        for (int i = 0; i < 256; i += 16) {
          const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x->child_index + i));
          for (uint32_t nz = ~static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_setzero_si128()))) & 0xffffu; nz;
               nz &= nz - 1) {
            const int k = DecodeSlot(x->child_index[i + __builtin_ctz(nz)]);
            if (k >= 0 && k < 48) used |= uint64_t(1) << k;
          }
        }
        const int free_idx = __builtin_ctzll(~used);
        Commit(&x->child[free_idx], child_ref);
        StoreChildIndex(x, c, EncodeSlot(free_idx));  // commit: the child index word
        return Status::OK();
      }
      case kN256:
        Commit(&reinterpret_cast<N256*>(n)->child[c], child_ref);  // commit: the child word
        return Status::OK();
    }
  }
  // Grow (copy-and-exchange) or copy-on-write: the new node holds every entry plus the new one.
  Entry e[257];
  int m = Collect(n, e);
  int pos = m;
  while (pos > 0 && e[pos - 1].c > c) {
    e[pos] = e[pos - 1];
    --pos;
  }
  e[pos] = {c, child_ref};
  ++m;
  uint64_t nr = 0;
  WORT_RETURN_IF_ERROR(BuildNode(TypeAfterAdd(t, m), h, n->leaf_here, e, m, &nr));
  Commit(slot, nr);  // commit: the parent's word names the new node
  Retire(NodeRef(pool_.offset_of(n)));
  return Status::OK();
}

void ArtTree::StoreChildIndex(N48* x, unsigned char c, uint8_t v) {
  // One byte of the child index array is changed by a store8 of its aligned 8-byte word.
  auto* word = reinterpret_cast<uint64_t*>(x->child_index + (c & ~7u));
  uint64_t w;
  std::memcpy(&w, x->child_index + (c & ~7u), sizeof(w));
  const unsigned shift = 8 * (c & 7u);
  w = (w & ~(uint64_t(0xff) << shift)) | (uint64_t(v) << shift);
  Commit(word, w);
}

// ---- Lookup ---------------------------------------------------------------------------------
// Same key bytes as a leaf's (8-byte keys, the common case, by two word loads: no memcmp call).
WORT_OPTIMISTIC_READ static inline bool LeafHasKey(const Leaf* l, const unsigned char* k, uint32_t len) {
  if (l->key_len != len) return false;
  if (len == 8) {
    uint64_t a, b;
    std::memcpy(&a, l->key(), 8);
    std::memcpy(&b, k, 8);
    return a == b;
  }
  return len == 0 || std::memcmp(l->key(), k, len) == 0;  // (an empty key's data may be null)
}

// A lookup reads no version word (ROWEX: read-optimized write exclusion, as P-ART does for ART):
// every in-place change a writer makes to a node is one 8-byte store that takes the node from one
// consistent state to another - the failure-atomic commit words of WOART and ART+CoW (art_node.h;
// woart.cc / artcow.cc list them) - and every other change builds a new node and publishes it by
// one 8-byte store of the parent's word, the old node staying intact until epochs reclaim it. So
// whatever mix of old and new words a lookup reads, the path it follows is one that existed
// during the lookup:
//   - a node replaced (grown, shrunk, copied) under the reader: the old copy still names every
//     child it named, unchanged (it is retired, never modified);
//   - a prefix split or path merge that rewrites a node's header in place: the header's depth no
//     longer matches the depth the reader arrived with, so the depth rule skips the prefix
//     comparison (as after a crash); the branch position is the same in both headers;
//   - a child slot (W4 slot word, W16 bitmap, N48 index word) freed by a remove and reused by an
//     insert: the reader may follow the new child - only if the key it looks for was removed
//     during the lookup (a present key's slot is never reused), and then the leaf comparison
//     below, which is always on the whole key, answers "not found", which the remove allows.
// A key present for the whole lookup is therefore found, a key absent for the whole lookup is
// not, and nothing read is used unchecked: the leaf's key is immutable, positions are
// bounds-checked (FindChildInline), the loop is bounded (the argument is at the loop), and the blocks read stay
// allocated until the lookup leaves its epoch (R3). Scans still use versions (sync.h R2): their
// order and completeness need them. The header is decoded in place and FindChild is inlined:
// this loop is the whole cost of a lookup.
// Compiled without jump tables: the node-type switch of FindChildInline becomes compares, whose
// outcome the branch predictor learns per level (cachegrind --branch-sim: the jump table cost
// two mispredicted indirect jumps per lookup at 1M sparse keys).
__attribute__((optimize("no-jump-tables"))) WORT_OPTIMISTIC_READ inline int ArtTree::LookupAttempt(std::string_view key,
                                                                                           uint64_t* value) const {
  const unsigned char* k = UBytes(key);
  const auto len = static_cast<uint32_t>(key.size());
  // A damaged image (corrupt_image_test) reads as absent keys, never outside the pool. The fast
  // check - a 64-byte-aligned block inside the heap with room for the largest node (NODE256)
  // below fast_lim_ (the pool's size as some writer or the open last saw it) - holds for every
  // block of an undamaged tree but those in the pool's last 2 KiB and those allocated beyond
  // the bound a moment ago; BlockOk decides those (it re-reads the size, which only grows). A
  // leaf's key beyond its block's first 64 bytes is checked before it is read; a node of an
  // invalid type finds no child.
  const uint64_t heap = heap_off_;
  const uint64_t lim = fast_lim_.load(std::memory_order_relaxed);
  // The mapping's base, read once: the acquire loads below would otherwise make the compiler
  // reload it (and heap_off_) at every level; a pool's mapping never moves while it is open.
  const char* const base = pool_.base();
  uint64_t ref = pm::load8(&rb_->root);
  uint32_t depth = 0;
  // Bounded without a level counter: the branch position b of a node reached at `depth` is never
  // before it (an interrupted or concurrent split or merge rewrites the header but keeps b; only
  // a damaged image has b < depth, read as an absent key), and the next depth is b + 1, so depth
  // grows at every step and b <= len ends the walk within len + 1 nodes.
  while (ref != 0) {
    // One test for the common step, an inner node the fast check vouches for: its reference is
    // its offset, with all six low bits clear (a leaf's has the tag bit; a damaged one, others).
    if ((ref & radix_ref::kTagBits) != 0 || ref - heap >= lim) [[unlikely]] {
      const uint64_t off = RefOffset(ref);
      if (((off & 63) != 0 || off - heap >= lim) && !BlockOk(ref)) return 0;
      if (IsLeafRef(ref)) {
        const auto* l = reinterpret_cast<const Leaf*>(base + off);  // immutable key; the value word is one atomic store
        if (len > 64 - sizeof(Leaf) && !pool_.contains(off, Leaf::SizeFor(len))) [[unlikely]]
          return 0;
        if (!LeafHasKey(l, k, len)) return 0;
        *value = pm::load8(&l->value);
        return 1;
      }
      // else an inner node near the pool's end, that BlockOk vouched for
    }
    const auto* n = reinterpret_cast<const NodeBase*>(base + ref);  // an inner node's reference is its offset
    const uint64_t hw = pm::load8(&n->hdr);  // PackHdr's layout, read without unpacking
    uint32_t b = depth;
    // The common node - depth as expected, no prefix: the header's low 24 bits (depth, then
    // plen) equal `depth`, in one compare.
    if ((hw & 0xffffff) != depth) [[unlikely]] {
      const uint32_t hdepth = static_cast<uint32_t>(hw & 0xfff);
      const uint32_t plen = static_cast<uint32_t>((hw >> 12) & 0xfff);
      b = hdepth + plen;        // the same in an interrupted split's old and new header
      if (b < depth) return 0;  // damaged (see the loop's bound)
      if (plen != 0 && hdepth == depth && b <= len) {
        // Pessimistic part of the prefix; the rest is checked at the leaf.
        const uint32_t m = std::min(plen, kInlinePrefix);
        uint64_t pw = hw >> 24;
        for (uint32_t j = 0; j < m; ++j, pw >>= 8)
          if (k[depth + j] != static_cast<unsigned char>(pw)) return 0;
      }
      // else: depth rule - the header belongs to a split or merge (interrupted, or happening
      // now); skip the prefix comparison (the leaf comparison decides).
    }
    if (len <= b) [[unlikely]] {
      if (len < b) return 0;  // every key below is longer than this one
      ref = pm::load8(&n->leaf_here);
    } else if (n->type == kN256) {  // the slot itself: an empty one is 0, which ends the loop
      ref = pm::load8(&reinterpret_cast<const N256*>(n)->child[k[b]]);
    } else {
      const uint64_t* cs = FindChildInline(const_cast<NodeBase*>(n), k[b]);
      if (!cs) return 0;
      ref = pm::load8(cs);
    }
    depth = b + 1;
  }
  return 0;
}

// Without jump tables too (LookupAttempt is inlined here, and takes its caller's options).
__attribute__((optimize("no-jump-tables"))) Status ArtTree::Lookup(std::string_view key, uint64_t* value) const {
  if (key.size() - key_min_ > key_span_) [[unlikely]] return ValidateKey(key);  // (ValidateKey's rules, one test)
  if (global_lock_) [[unlikely]] return LookupGlobalLock(key, value);  // out of line: a lean common path
  sync::EpochGuard eg(epoch());
  uint64_t v = 0;
  if (LookupAttempt(key, &v) == 0) return Status::NotFound("key not found");
  *value = v;
  return Status::OK();
}

__attribute__((optimize("no-jump-tables"))) Status ArtTree::LookupGlobalLock(std::string_view key,
                                                                            uint64_t* value) const {
  sync::EpochGuard eg(epoch());
  auto g = ModeLock(IndexModeLock::kReader);  // shared in global-lock mode
  uint64_t v = 0;
  if (LookupAttempt(key, &v) == 0) return Status::NotFound("key not found");
  *value = v;
  return Status::OK();
}

// ---- Remove -----------------------------------------------------------------------------------
Status ArtTree::Remove(std::string_view key) {
  WORT_RETURN_IF_ERROR(ValidateKey(key));
  sync::EpochGuard eg(epoch());
  auto wg = ModeLock(IndexModeLock::kWriter);
  Status s;
  for (int attempt = 0; RemoveAttempt(key, &s) == Attempt::kRestart; ++attempt) Backoff(attempt);
  return s;
}

// One optimistic attempt; locks taken as RemoveEntry needs them (art_tree.h).
WORT_OPTIMISTIC_READ ArtTree::Attempt ArtTree::RemoveAttempt(std::string_view key, Status* out) {
  const unsigned char* k = UBytes(key);
  const auto len = static_cast<uint32_t>(key.size());
  const sync::AttemptEnd end(out);
  sync::VersionLock* pl = &LockOf(rb_);
  uint64_t pv;
  if (!pl->ReadLockOrRestart(&pv)) return Attempt::kRestart;
  uint64_t* slot = &rb_->root;
  uint32_t depth = 0;
  for (uint32_t lvl = 0; lvl <= kMaxLevels; ++lvl) {
    const uint64_t ref = pm::load8(slot);
    if (!pl->CheckOrRestart(pv)) return Attempt::kRestart;
    if (ref == 0) return end.Done(Status::NotFound("key not found"));
    if (IsLeafRef(ref)) {
      // Only the root word can hold a leaf reached this way (a child leaf is removed at its
      // parent below).
      if (leaf(ref)->key_view() != key) return end.Done(Status::NotFound("key not found"));
      WriteLocks wl;
      if (!wl.Upgrade(*pl, pv)) return Attempt::kRestart;
      Commit(slot, 0);  // commit: the root word is cleared
      Retire(ref);
      Removed();
      return end.Done(Status::OK());
    }
    NodeBase* n = node(ref);
    sync::VersionLock* nl = &LockOf(n);
    uint64_t nv;
    if (!nl->ReadLockOrRestart(&nv) || !pl->CheckOrRestart(pv)) return Attempt::kRestart;
    const Hdr h = UnpackHdr(pm::load8(&n->hdr));
    if (h.depth != depth) {
      WriteLocks wl;
      if (!wl.Upgrade(*nl, nv)) return Attempt::kRestart;
      RepairHdr(n, depth);
      return Attempt::kRestart;
    }
    const uint32_t b = h.branch();
    if (len < b) return end.NotFound(*nl, nv);
    for (uint32_t j = 0; j < std::min(h.plen, kInlinePrefix); ++j)
      if (k[depth + j] != h.prefix[j]) return end.NotFound(*nl, nv);
    bool end_leaf = len == b;
    uint64_t lr = 0;
    uint64_t* cs = nullptr;
    if (end_leaf) {
      lr = pm::load8(&n->leaf_here);
    } else {
      cs = FindChild(n, k[b]);
      if (!cs) return end.NotFound(*nl, nv);
      lr = pm::load8(cs);
    }
    if (!nl->CheckOrRestart(nv)) return Attempt::kRestart;
    if (!end_leaf && !IsLeafRef(lr)) {
      slot = cs;
      depth = b + 1;
      pl = nl;
      pv = nv;
      continue;
    }
    if (!lr || leaf(lr)->key_view() != key) return end.Done(Status::NotFound("key not found"));
    // Which nodes RemoveEntry changes: n always; the parent's word when n is merged away or
    // replaced (shrink, copy-on-write); the surviving child's header for a path merge.
    const int cnt = ChildCount(n);
    const uint64_t lh = pm::load8(&n->leaf_here);
    const bool merge = cnt + (lh ? 1 : 0) <= 2;
    const uint8_t t = n->type;
    const bool in_place = end_leaf || (cnt - 1 >= MinChildren(t) && (policy_.in_place || t == kN48 || t == kN256));
    if (!nl->CheckOrRestart(nv)) return Attempt::kRestart;
    WriteLocks wl;
    if (((merge || !in_place) && !wl.Upgrade(*pl, pv)) || !wl.Upgrade(*nl, nv)) return Attempt::kRestart;
    if (merge) {
      // The surviving entry (n is locked: stable now); an inner node's header changes (WOART)
      // or the node is copied (ART+CoW): lock it too.
      uint64_t rest = 0;
      if (!end_leaf && lh) {
        rest = lh;
      } else {
        ForEachSorted(n, 0, [&](unsigned char cc, uint64_t r) {
          if (end_leaf || cc != k[b]) {
            rest = r;
            return false;
          }
          return true;
        });
      }
      if (rest && !IsLeafRef(rest) && !wl.Lock(LockOf(node(rest)))) return Attempt::kRestart;
    }
    if (Status st = RemoveEntry(slot, n, h, end_leaf, end_leaf ? 0 : k[b], lr); !st.ok()) return end.Done(st);
    Removed();
    return end.Done(Status::OK());
  }
  return end.Done(Status::Corruption("tree deeper than any key allows"));
}

// Removes the entry holding leaf `lr` (n's leaf_here if end_leaf, else child c) from n,
// referenced by *slot with real header h. Frees the leaf and whatever became unreachable.
Status ArtTree::RemoveEntry(uint64_t* slot, NodeBase* n, const Hdr& h, bool end_leaf, unsigned char c, uint64_t lr) {
  const uint64_t nref = NodeRef(pool_.offset_of(n));
  const int cnt = ChildCount(n);
  const int total = cnt + (n->leaf_here ? 1 : 0);
  if (total <= 2) {
    // Path merge: one entry remains; it takes n's place in the parent's word.
    uint64_t rest = 0;
    if (!end_leaf && n->leaf_here) {
      rest = n->leaf_here;
    } else {
      ForEachSorted(n, 0, [&](unsigned char cc, uint64_t r) {
        if (end_leaf || cc != c) {
          rest = r;
          return false;
        }
        return true;
      });
    }
    if (rest == 0) return Status::Corruption("inner node with fewer than two entries");
    if (IsLeafRef(rest)) {
      Commit(slot, rest);  // commit: the parent's word names the remaining leaf
      Retire(nref);
      Retire(lr);
      return Status::OK();
    }
    // The remaining inner node moves up to n's depth; its prefix becomes n's prefix + the
    // partial key + its own prefix, read from any leaf below it.
    NodeBase* cn = node(rest);
    const Hdr ch = RepairHdr(cn, h.branch() + 1);
    const Leaf* any = ExtremeLeaf(rest, false);
    if (!any || any->key_len < ch.branch()) return Status::Corruption("inner node without a valid leaf");
    const Hdr merged = MakeHdr(h.depth, ch.branch() - h.depth, any->key() + h.depth);
    if (policy_.in_place) {
      // (1) the child's header := merged by one store8, persisted. Until (2) its stored depth
      //     is less than its real depth: readers skip its prefix, writers repair it
      //     (Algorithm 2, which restores the pre-merge header: the removal has not happened).
      Commit(&cn->hdr, PackHdr(merged));
      if (test_stop_ == TestStop::kAfterMergeHeader)
        return Status::Corruption("test stop: simulated crash after the merge header store");
      // (2) commit: the parent's word names the child.
      Commit(slot, rest);
      Retire(nref);
      Retire(lr);
    } else {
      uint64_t cr = 0;
      WORT_RETURN_IF_ERROR(CopyNode(cn, merged, &cr));
      Commit(slot, cr);  // commit: the parent's word names the child's copy
      Retire(nref);
      Retire(rest);
      Retire(lr);
    }
    return Status::OK();
  }
  if (end_leaf) {
    Commit(&n->leaf_here, 0);  // commit: leaf_here cleared
    Retire(lr);
    return Status::OK();
  }
  const uint8_t t = n->type;
  if (cnt - 1 >= MinChildren(t) && (policy_.in_place || t == kN48 || t == kN256)) {
    switch (t) {
      case kW4: {
        auto* x = reinterpret_cast<W4*>(n);
        Slot4 s = DecodeSlot4(x->slots);
        int pos = 0;
        while (pos < s.n && s.key[pos] != c) ++pos;
        if (pos == s.n) return Status::Corruption("NODE4 lost a child during remove");
        for (int i = pos; i + 1 < s.n; ++i) {
          s.key[i] = s.key[i + 1];
          s.idx[i] = s.idx[i + 1];
        }
        --s.n;
        Commit(&x->slots, EncodeSlot4(s));  // commit: partial keys + slot array
        break;
      }
      case kW16: {
        auto* x = reinterpret_cast<W16*>(n);
        const int i = Find16Simd(x->keys, uint32_t(x->bitmap), c);
        if (i < 0) return Status::Corruption("NODE16 lost a child during remove");
        Commit(&x->bitmap, x->bitmap & ~(uint64_t(1) << i));  // commit: the bitmap word
        break;
      }
      case kN48:
        StoreChildIndex(reinterpret_cast<N48*>(n), c, 0);  // commit: the child index word
        break;
      case kN256:
        Commit(&reinterpret_cast<N256*>(n)->child[c], 0);  // commit: the child word
        break;
    }
    Retire(lr);
    return Status::OK();
  }
  // Shrink (copy-and-exchange) or copy-on-write: a new node without child c replaces n.
  Entry e[256];
  const int m = Collect(n, e);
  int w = 0;
  for (int i = 0; i < m; ++i)
    if (e[i].c != c) e[w++] = e[i];
  uint64_t nr = 0;
  WORT_RETURN_IF_ERROR(BuildNode(TypeAfterRemove(t, w), h, n->leaf_here, e, w, &nr));
  Commit(slot, nr);  // commit: the parent's word names the new node
  Retire(nref);
  Retire(lr);
  return Status::OK();
}

// ---- Scan -------------------------------------------------------------------------------------
struct ArtTree::ScanCtx {
  std::string_view start;
  bool exclusive;  // skip the key equal to start (the last key of the previous batch)
  const std::string_view* end;
  size_t want;     // keys to collect in this batch
  ScanBatch<Leaf>* out;                                              // (leaf, value)
  std::vector<std::pair<const sync::VersionLock*, uint64_t>>* seen;  // every node read, its version
  bool stop = false;      // batch full, past the end, or restart
  bool past_end = false;  // a key beyond `end` was met: nothing more to scan
  bool restart = false;   // a node was locked: collect the batch again
};

// Scan in batches of up to kScanBatch keys. Each batch is collected without a lock (every node
// read is recorded with its version) and then validated: if any version changed, the batch is
// collected again; so each batch is a snapshot of the tree at one moment. The callback runs
// after the batch is validated, holding no lock (inside the batch's epoch: the leaves whose
// keys it is given stay readable), so it may write to this index. The next batch starts after
// the last key emitted. Hence keys come in strictly ascending order, and a key present during
// the whole scan is emitted.
namespace {
constexpr size_t kScanBatch = 64;
}

Status ArtTree::Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const {
  // The versions read by the batch being collected: one buffer per thread, reused (no
  // allocation per scan; a scan started from inside fn is after its batch's collection).
  thread_local std::vector<std::pair<const sync::VersionLock*, uint64_t>> seen;
  return ScanInValidatedBatches<kScanBatch, Leaf>(
      epoch(), start, limit, fn, [&] { return ModeLock(IndexModeLock::kReader); },
      [&](std::string_view cursor, bool exclusive, size_t want, ScanBatch<Leaf>* out,
          bool* past_end) {
        seen.clear();
        ScanCtx ctx{cursor, exclusive, end, want, out, &seen};
        const sync::VersionLock& rl = LockOf(rb_);
        uint64_t rv;
        if (!rl.ReadLockOrRestart(&rv)) return false;
        seen.push_back({&rl, rv});
        ScanRef(pm::load8(&rb_->root), 0, true, ctx);
        if (ctx.restart) return false;
        for (const auto& [l, v] : seen)
          if (!l->CheckOrRestart(v)) return false;
        *past_end = ctx.past_end;
        return true;
      });
}

// Collects the keys below ref (real depth `depth`) in ascending order. `bounded`: some keys
// below may be < start (the path so far equals start's first `depth` bytes); otherwise all are
// > start.
WORT_OPTIMISTIC_READ void ArtTree::ScanRef(uint64_t ref, uint32_t depth, bool bounded, ScanCtx& ctx) const {
  if (ctx.stop || ref == 0) return;
  // A damaged image: a reference that is no block, or a path deeper than any key (a cycle).
  if (depth > kMaxKeyLen + 1 || !BlockOk(ref)) return;
  if (IsLeafRef(ref)) {
    const Leaf* l = leaf(ref);
    const std::string_view kv = l->key_view();
    if (bounded) {
      const int c = CompareKeys(kv, ctx.start);
      if (c < 0 || (c == 0 && ctx.exclusive)) return;
    }
    if (ctx.end && CompareKeys(kv, *ctx.end) > 0) {
      ctx.stop = ctx.past_end = true;
      return;
    }
    ctx.out->push_back({l, pm::load8(&l->value)});
    if (ctx.out->size() >= ctx.want) ctx.stop = true;
    return;
  }
  const NodeBase* n = node(ref);
  const sync::VersionLock& nl = LockOf(n);
  uint64_t nv;
  if (!nl.ReadLockOrRestart(&nv)) {
    ctx.restart = ctx.stop = true;
    return;
  }
  ctx.seen->push_back({&nl, nv});
  const Hdr h = EffectiveHdr(n, depth);
  const uint32_t b = h.branch();
  unsigned from = 0;  // children below `from` are all < start
  int bounded_c = -1; // the child that may hold keys on both sides of start
  bool skip_here = false;
  if (bounded) {
    const unsigned char* s = UBytes(ctx.start);
    PrefixSource ps(this, n, h);
    for (uint32_t j = 0; j < h.plen && bounded; ++j) {
      if (depth + j >= ctx.start.size()) {
        bounded = false;  // start ends inside the prefix: every key below is greater
        break;
      }
      const unsigned char pc = ps.at(j);
      if (pc < s[depth + j]) return;  // every key below is smaller than start
      if (pc > s[depth + j]) bounded = false;
    }
    if (bounded) {
      if (ctx.start.size() == b) {
        bounded = false;  // the key ending here equals start; every other key below is greater
        skip_here = ctx.exclusive;
      } else {
        from = s[b];
        bounded_c = s[b];
      }
    }
  }
  if (const uint64_t lh = pm::load8(&n->leaf_here); !bounded && !skip_here && lh) ScanRef(lh, b, false, ctx);
  // (when bounded, the key ending here is a proper prefix of start: smaller, skipped)
  ForEachSorted(n, from, [&](unsigned char c, uint64_t r) {
    ScanRef(r, b + 1, bounded && c == bounded_c, ctx);
    return !ctx.stop;
  });
}

// ---- Size, Stats --------------------------------------------------------------------------------
uint64_t ArtTree::CountKeys(uint64_t root) const {
  uint64_t cnt = 0;
  std::vector<uint64_t> stack{root};
  // A damaged image: references that are no block are skipped, and the walk is bounded by the
  // pool's block count (a cycle).
  uint64_t budget = pool_.size() / 64 + 1;
  while (!stack.empty() && budget-- > 0) {
    const uint64_t ref = stack.back();
    stack.pop_back();
    if (!ref || !BlockOk(ref)) continue;
    if (IsLeafRef(ref)) {
      ++cnt;
      continue;
    }
    const NodeBase* n = node(ref);
    // Only references to blocks are pushed: the budget counts them, and a tree has no more
    // blocks than the pool (a pushed empty leaf_here per node made a whole tree of 16M keys
    // count as 15.4M: the budget ran out).
    if (const uint64_t lh = n->leaf_here) stack.push_back(lh);
    ForEachSorted(n, 0, [&](unsigned char, uint64_t r) {
      stack.push_back(r);
      return true;
    });
  }
  return cnt;
}

uint64_t ArtTree::Size() const {
  // the walk excludes writers
  return count_.Get([&] { return ModeLock(IndexModeLock::kQuiesce); }, [&] { return CountKeys(rb_->root); });
}

IndexStats ArtTree::Stats() const {
  auto q = ModeLock(IndexModeLock::kQuiesce);
  IndexStats st;
  const Allocator& a = pool_.allocator();
  st.bytes_allocated = a.UsableSize(root_off_);
  uint64_t depth_sum = 0;
  std::vector<std::pair<uint64_t, uint32_t>> stack{{rb_->root, 0}};  // (ref, inner nodes above)
  uint64_t budget = pool_.size() / 64 + 1;  // a damaged image: bounded, no-block refs skipped
  while (!stack.empty() && budget-- > 0) {
    const auto [ref, above] = stack.back();
    stack.pop_back();
    if (!ref || !BlockOk(ref)) continue;
    st.bytes_allocated += a.UsableSize(RefOffset(ref));
    if (IsLeafRef(ref)) {
      ++st.leaves;
      depth_sum += above;
      continue;
    }
    ++st.inner_nodes;
    const NodeBase* n = node(ref);
    if (const uint64_t lh = n->leaf_here) stack.push_back({lh, above + 1});  // blocks only (CountKeys)
    ForEachSorted(n, 0, [&](unsigned char, uint64_t r) {
      stack.push_back({r, above + 1});
      return true;
    });
  }
  st.keys = st.leaves;
  st.avg_leaf_depth = st.leaves ? double(depth_sum) / double(st.leaves) : 0.0;
  return st;
}

void ArtTree::CountNodeTypes(uint64_t counts[8]) const {
  auto q = ModeLock(IndexModeLock::kQuiesce);
  for (int i = 0; i < 8; ++i) counts[i] = 0;
  std::vector<uint64_t> stack{rb_->root};
  uint64_t budget = pool_.size() / 64 + 1;  // a damaged image: bounded, no-block refs skipped
  while (!stack.empty() && budget-- > 0) {
    const uint64_t ref = stack.back();
    stack.pop_back();
    if (!ref || IsLeafRef(ref) || !BlockOk(ref)) continue;
    const NodeBase* n = node(ref);
    ++counts[n->type & 7];
    ForEachSorted(n, 0, [&](unsigned char, uint64_t r) {
      stack.push_back(r);
      return true;
    });
  }
}

uint8_t ArtTree::NodeTypeAt(std::string_view path_key, uint32_t depth) const {
  auto q = ModeLock(IndexModeLock::kQuiesce);
  const unsigned char* k = UBytes(path_key);
  uint64_t ref = rb_->root;
  for (uint32_t lvl = 0; lvl <= kMaxLevels && ref && !IsLeafRef(ref); ++lvl) {
    NodeBase* n = node(ref);
    const uint32_t b = UnpackHdr(n->hdr).branch();
    if (b >= depth) return n->type;
    if (b >= path_key.size()) return 0;
    const uint64_t* cs = FindChild(n, k[b]);
    if (!cs) return 0;
    ref = *cs;
  }
  return 0;
}

// ---- Check ---------------------------------------------------------------------------------------
struct ArtTree::CheckCtx {
  std::string* report;
  uint64_t errors = 0;
  uint64_t notes = 0;
  uint64_t leaves = 0;
  std::string last_key;
  bool have_last = false;
  void Err(const std::string& msg) {
    if (errors++ < 50 && report) *report += "error: " + msg + "\n";
  }
  void Note(const std::string& msg) {
    if (notes++ < 50 && report) *report += "note: " + msg + "\n";
  }
};

namespace {
std::string Hex(std::string_view s, size_t max = 24) {
  static const char* d = "0123456789abcdef";
  std::string o;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    o += d[static_cast<unsigned char>(s[i]) >> 4];
    o += d[static_cast<unsigned char>(s[i]) & 15];
  }
  if (s.size() > max) o += "...";
  return "0x" + o + "(len " + std::to_string(s.size()) + ")";
}
}  // namespace

// Verifies the subtree at ref, whose real depth is `depth`; path = the depth bytes every key
// below must start with.
void ArtTree::CheckRef(uint64_t ref, uint32_t depth, std::string& path, CheckCtx& ctx) const {
  const uint64_t off = RefOffset(ref);
  // Location for messages, built only when one is reported.
  auto where = [&] { return " (at offset " + std::to_string(off) + ", path " + Hex(path) + ")"; };
  if (!RefOk(ref)) {
    ctx.Err("reference " + std::to_string(ref) + " is not a block of the pool" + where());
    return;
  }
  const Allocator& a = pool_.allocator();
  if (IsLeafRef(ref)) {
    const Leaf* l = leaf(ref);
    if (l->key_len > kMaxKeyLen || !pool_.contains(off, Leaf::SizeFor(l->key_len))) {
      ctx.Err("leaf with bad key length " + std::to_string(l->key_len) + where());
      return;
    }
    if (a.UsableSize(off) < Leaf::SizeFor(l->key_len)) ctx.Err("leaf block smaller than the leaf" + where());
    const std::string_view kv = l->key_view();
    if (key_type_ == KeyType::kU64 && kv.size() != 8) ctx.Err("kU64 index holds a key of length " + std::to_string(kv.size()));
    if (kv.size() < path.size() || kv.compare(0, path.size(), path) != 0)
      ctx.Err("leaf key " + Hex(kv) + " does not match its path" + where());
    if (ctx.have_last && CompareKeys(ctx.last_key, kv) >= 0)
      ctx.Err("keys out of order: " + Hex(ctx.last_key) + " then " + Hex(kv));
    ctx.last_key.assign(kv);
    ctx.have_last = true;
    ++ctx.leaves;
    uint64_t v = 0;
    if (LookupAttempt(kv, &v) == 0 || v != l->value) ctx.Err("leaf " + Hex(kv) + " is not found by Lookup");
    return;
  }
  const NodeBase* n = node(ref);
  const uint8_t t = n->type;
  if (!ValidNodeType(t) || !pool_.contains(off, NodeSize(t))) {
    ctx.Err("bad node type " + std::to_string(t) + where());
    return;
  }
  if (t != policy_.node4 && t != policy_.node16 && t != kN48 && t != kN256)
    ctx.Err(std::string(NodeTypeName(t)) + " does not belong to a " + policy_.kind_name + " tree" + where());
  if (a.UsableSize(off) < NodeSize(t)) ctx.Err(std::string(NodeTypeName(t)) + " block too small" + where());
  const std::string tn = NodeTypeName(t);

  // Per-type validity of the entries.
  bool entries_ok = true;
  switch (t) {
    case kW4: {
      const auto* x = reinterpret_cast<const W4*>(n);
      const uint64_t w = x->slots;
      const Slot4 s = DecodeSlot4(w);
      if (EncodeSlot4(s) != w) {
        ctx.Err(tn + " slot word not canonical (entries not packed, slot out of range, or stale bytes)" + where());
        entries_ok = false;
      }
      unsigned used = 0;
      for (int i = 0; i < s.n; ++i) {
        if (s.idx[i] >= 4 || (used >> s.idx[i]) & 1) {
          ctx.Err(tn + " slot array names a child twice or out of range" + where());
          entries_ok = false;
        } else {
          used |= 1u << s.idx[i];
        }
        if (i > 0 && s.key[i - 1] >= s.key[i]) {
          ctx.Err(tn + " partial keys not strictly ascending" + where());
          entries_ok = false;
        }
        if (s.idx[i] < 4 && x->child[s.idx[i]] == 0) {
          ctx.Err(tn + " valid slot names a null child" + where());
          entries_ok = false;
        }
      }
      break;
    }
    case kW16: {
      const auto* x = reinterpret_cast<const W16*>(n);
      if (x->bitmap >> 16) {
        ctx.Err(tn + " bitmap has bits beyond 16" + where());
        entries_ok = false;
      }
      const uint32_t mask = uint32_t(x->bitmap) & 0xffffu;
      for (uint32_t m = mask; m; m &= m - 1) {
        const int i = __builtin_ctz(m);
        if (x->child[i] == 0) {
          ctx.Err(tn + " valid entry with a null child" + where());
          entries_ok = false;
        }
        if (Find16Scalar(x->keys, mask, x->keys[i]) != i) {
          ctx.Err(tn + " duplicate partial key " + std::to_string(x->keys[i]) + where());
          entries_ok = false;
        }
      }
      break;
    }
    case kN48: {
      const auto* x = reinterpret_cast<const N48*>(n);
      uint64_t used = 0;
      for (int c = 0; c < 256; ++c) {
        const int k = DecodeSlot(x->child_index[c]);
        if (k < 0) continue;
        if (k >= 48) {
          ctx.Err(tn + " child index out of range" + where());
          entries_ok = false;
        } else if ((used >> k) & 1) {
          ctx.Err(tn + " two partial keys share child word " + std::to_string(k) + where());
          entries_ok = false;
        } else {
          used |= uint64_t(1) << k;
          if (x->child[k] == 0) {
            ctx.Err(tn + " valid entry with a null child" + where());
            entries_ok = false;
          }
        }
      }
      break;
    }
    case kS4:
    case kS16: {
      const int cap = Capacity(t);
      const auto* x4 = reinterpret_cast<const S4*>(n);
      const auto* x16 = reinterpret_cast<const S16*>(n);
      const int cnt = t == kS4 ? x4->count : x16->count;
      const unsigned char* keys = t == kS4 ? x4->keys : x16->keys;
      const uint64_t* child = t == kS4 ? x4->child : x16->child;
      if (cnt > cap) {
        ctx.Err(tn + " count beyond capacity" + where());
        entries_ok = false;
        break;
      }
      for (int i = 0; i < cnt; ++i) {
        if (i > 0 && keys[i - 1] >= keys[i]) {
          ctx.Err(tn + " partial keys not strictly ascending" + where());
          entries_ok = false;
        }
        if (child[i] == 0) {
          ctx.Err(tn + " null child" + where());
          entries_ok = false;
        }
      }
      break;
    }
  }
  if (!entries_ok) return;
  const int cnt = ChildCount(n);
  const int total = cnt + (n->leaf_here ? 1 : 0);
  if (total < 2) ctx.Err(tn + " with " + std::to_string(total) + " entries (path compression requires 2)" + where());
  if (cnt > Capacity(t) || cnt < MinChildren(t))
    ctx.Err(tn + " holds " + std::to_string(cnt) + " children, outside its range [" + std::to_string(MinChildren(t)) +
            ", " + std::to_string(Capacity(t)) + "]" + where());
  if (n->leaf_here && !IsLeafRef(n->leaf_here)) {
    ctx.Err(tn + " leaf_here names an inner node" + where());
    return;
  }

  // Header: depth and prefix against the leaves below (Algorithm 2 computes the real branch).
  const Leaf* lo = ExtremeLeaf(ref, false);
  const Leaf* hi = ExtremeLeaf(ref, true);
  if (!lo || !hi) {
    ctx.Err(tn + " has no valid leaf below" + where());
    return;
  }
  if (lo->key_len < depth || hi->key_len < depth) {
    ctx.Err(tn + " has a leaf shorter than its depth" + where());
    return;
  }
  uint32_t bt = depth;
  while (bt < lo->key_len && bt < hi->key_len && lo->key()[bt] == hi->key()[bt]) ++bt;
  const Hdr h = UnpackHdr(n->hdr);
  if (h.branch() != bt)
    ctx.Err(tn + " header says depth " + std::to_string(h.depth) + " + prefix " + std::to_string(h.plen) +
            ", but its keys branch at " + std::to_string(bt) + where());
  if (h.depth != depth) {
    if (policy_.in_place)
      ctx.Note(tn + " stored depth " + std::to_string(h.depth) + " != real depth " + std::to_string(depth) +
               ": an interrupted prefix split or merge, repaired by the next writer" + where());
    else
      ctx.Err(tn + " stored depth " + std::to_string(h.depth) + " != real depth " + std::to_string(depth) +
              " (ART+CoW never changes a header in place)" + where());
  }
  const uint32_t inl = std::min(h.plen, kInlinePrefix);
  for (uint32_t j = 0; j < kInlinePrefix; ++j) {
    const uint32_t pos = h.depth + j;
    if (j < inl && (pos >= lo->key_len || lo->key()[pos] != h.prefix[j])) {
      ctx.Err(tn + " inline prefix byte " + std::to_string(j) + " differs from its keys" + where());
      break;
    }
    if (j >= inl && h.prefix[j] != 0) {
      ctx.Err(tn + " unused prefix bytes not zero" + where());
      break;
    }
  }
  if (bt > kMaxDepthField) ctx.Err(tn + " branches beyond position 4095" + where());

  const size_t old = path.size();
  path.append(reinterpret_cast<const char*>(lo->key()) + depth, bt - depth);
  if (n->leaf_here) {
    const uint64_t lr = n->leaf_here;
    if (RefOk(lr) && leaf(lr)->key_len != bt)
      ctx.Err("leaf_here key of length " + std::to_string(leaf(lr)->key_len) + " at branch position " +
              std::to_string(bt) + where());
    CheckRef(lr, bt, path, ctx);
  }
  ForEachSorted(n, 0, [&](unsigned char c, uint64_t r) {
    path.push_back(static_cast<char>(c));
    CheckRef(r, bt + 1, path, ctx);
    path.pop_back();
    return ctx.errors < 1000;
  });
  path.resize(old);
}

Status ArtTree::Check(std::string* report) const {
  auto q = ModeLock(IndexModeLock::kQuiesce);
  CheckCtx ctx;
  ctx.report = report;
  if (rb_->magic != policy_.magic) ctx.Err("root block magic changed");
  if (rb_->key_type != static_cast<uint64_t>(key_type_)) ctx.Err("root block key type changed");
  std::string path;
  if (rb_->root) CheckRef(rb_->root, 0, path, ctx);
  const int64_t c = count_.Known();
  if (ctx.errors == 0 && c >= 0 && static_cast<uint64_t>(c) != ctx.leaves)
    ctx.Err("Size() says " + std::to_string(c) + " but the tree holds " + std::to_string(ctx.leaves) + " keys");
  if (ctx.errors)
    return Status::Corruption(std::string(policy_.kind_name) + ": " + std::to_string(ctx.errors) + " invariant violation(s)");
  return Status::OK();
}

// ---- visit (post-crash GC) -------------------------------------------------------------------
void ArtTree::Visit(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark) {
  auto block_ok = [&](uint64_t off, uint64_t len) { return HeapBlockOk(pool, off, len); };
  if (!block_ok(root_off, sizeof(RootBlock))) return;
  // The readers' protocol (art_tree.h): inside an epoch of the pool (no block it can reach is
  // reused while it runs; during the GC frees are deferred anyway), and every node's entries
  // are read between ReadLockOrRestart and CheckOrRestart of its version word, retried until
  // they are a snapshot. Writers run beside it and take no lock it needs. (doc/allocator.md,
  // "The visit beside writers", says why a snapshot per node suffices and what the old,
  // unvalidated walk got wrong.)
  sync::EpochGuard eg(const_cast<Pool&>(pool).allocator().epoch());
  VisitModeLock visit_guard(&pool, root_off);
  mark(root_off);
  const auto* rb = pool.at<RootBlock>(root_off);
  const bool values_are_blocks = (rb->flags & kRootValuesAreBlocks) != 0;
  std::vector<std::pair<uint64_t, uint32_t>> stack;  // (reference, level)
  stack.push_back({pm::load8(&rb->root), 0});
  // A damaged image whose nodes name themselves would make the walk grow exponentially with the
  // depth: it stops after as many references as the pool has blocks (a tree has no more).
  uint64_t budget = pool.size() / 64 + 1;
  while (!stack.empty() && budget-- > 0) {
    const auto [ref, lvl] = stack.back();
    stack.pop_back();
    const uint64_t off = RefOffset(ref);
    if (ref == 0) continue;
    if (IsLeafRef(ref)) {
      if (block_ok(off, sizeof(Leaf))) {
        mark(off);
        if (values_are_blocks) {
          // The value word is committed by one 8-byte store (Upsert); read it atomically.
          const uint64_t v = pm::load8(&pool.at<Leaf>(off)->value);
          if (block_ok(v, 64)) mark(v);
        }
      }
      continue;
    }
    if (lvl > kMaxLevels || !block_ok(off, sizeof(NodeBase))) continue;
    const auto* n = pool.at<NodeBase>(off);
    const uint8_t t = std::atomic_ref<uint8_t>(const_cast<uint8_t&>(n->type)).load(std::memory_order_acquire);
    if (!ValidNodeType(t) || !block_ok(off, NodeSize(t))) continue;
    mark(off);
    // The node's entries as one snapshot: collected, then kept only if its version held.
    uint64_t refs[257];
    int nrefs = 0;
    auto push = [&](const uint64_t* w) {
      const uint64_t r = pm::load8(w);
      if (r && nrefs < 257) refs[nrefs++] = r;
    };
    sync::NodeLock(n).ReadSnapshot([&] {
      nrefs = 0;
      VisitEntries(n, t, push);
    });
    for (int i = 0; i < nrefs; ++i) stack.push_back({refs[i], lvl + 1});
  }
}

// Calls push(&word) for leaf_here and every valid child word of n (of type t).
template <class Push>
void ArtTree::VisitEntries(const NodeBase* n, uint8_t t, Push&& push) {
    push(&n->leaf_here);
    switch (t) {
      case kW4: {
        const auto* x = reinterpret_cast<const W4*>(n);
        const Slot4 s = DecodeSlot4(pm::load8(&x->slots));
        for (int i = 0; i < s.n; ++i)
          if (s.idx[i] < 4) push(&x->child[s.idx[i]]);
        break;
      }
      case kW16: {
        const auto* x = reinterpret_cast<const W16*>(n);
        for (uint32_t m = uint32_t(pm::load8(&x->bitmap)) & 0xffffu; m; m &= m - 1) push(&x->child[__builtin_ctz(m)]);
        break;
      }
      case kN48: {
        const auto* x = reinterpret_cast<const N48*>(n);
        for (int wi = 0; wi < 32; ++wi) {
          const uint64_t w = pm::load8(reinterpret_cast<const uint64_t*>(x->child_index) + wi);
          for (int j = 0; j < 8; ++j) {
            const int k = DecodeSlot(static_cast<uint8_t>(w >> (8 * j)));
            if (k >= 0 && k < 48) push(&x->child[k]);
          }
        }
        break;
      }
      case kN256: {
        const auto* x = reinterpret_cast<const N256*>(n);
        for (int c = 0; c < 256; ++c) push(&x->child[c]);
        break;
      }
      case kS4: {
        const auto* x = reinterpret_cast<const S4*>(n);
        const int cnt = std::min<int>(std::atomic_ref<uint8_t>(const_cast<uint8_t&>(x->count)).load(), 4);
        for (int i = 0; i < cnt; ++i) push(&x->child[i]);
        break;
      }
      case kS16: {
        const auto* x = reinterpret_cast<const S16*>(n);
        const int cnt = std::min<int>(std::atomic_ref<uint8_t>(const_cast<uint8_t&>(x->count)).load(), 16);
        for (int i = 0; i < cnt; ++i) push(&x->child[i]);
        break;
      }
    }
}

}  // namespace wort::art
