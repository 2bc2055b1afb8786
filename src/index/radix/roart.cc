// ROART (Ma et al., "ROART: Range-query Optimized Persistent ART", FAST 2021) on wort's pool,
// allocator, persistence module and concurrency layer (src/sync). Layouts: roart.h. Format 3
// (issue 34): keys of at most 8 bytes and their values in the leaf arrays themselves.
//
// Structure. An ART with 8-bit partial keys and path compression (the compression header of
// art_node.h: depth, prefix length, 5 inline prefix bytes in one 8-byte word). A subtree of at
// most m = 64 keys is one *leaf array* instead of inner nodes (leaf compaction); a leaf array
// has 8, 24 or 64 slots (format 4: also 2, in an array with a SlotKV area) (roart.h: it starts at the smallest class that holds its keys and is
// replaced by one of the next class when full). A child of an
// inner node is an inner node, a leaf array, or a single leaf; the key that ends exactly at a
// node's branch position b = depth + prefix_len is its leaf_here. The root word holds any of
// the three (0 = empty tree).
//
// Selective metadata persistence. count, cursor, the leaf array bitmap and the NODE48 child
// index live in the node but are never flushed on purpose; the node's `gen` says in which pool
// generation (Pool::generation(), +1 at every open for writing) they were computed. A writer
// that locks a node with a stale gen rebuilds them from the persistent words first (Refresh);
// readers never use count/cursor/bitmap and use the NODE48 index only when gen is current
// (otherwise they scan the 48 entries). Open touches nothing; there is no recovery pass.
// The version words are the DRAM table of src/sync (sync::NodeLock, keyed by address), so no
// lock word is in the node at all.
//
// Post-crash invariants (Check() verifies each):
//   1. Every reference reachable from the root block names an allocated block whose contents
//      were persisted before the reference was (new blocks are flushed and fenced before the
//      one 8-byte store that publishes them).
//   2. Every leaf below an inner node at real depth d with branch b holds the node's path
//      bytes [0, b); its byte at b is the entry's key byte (NODE4/16/48: the byte in the entry
//      word; NODE256: the index), or it has length b and is the node's leaf_here.
//   3. A node's stored depth is its real depth (the depth its parent implies), or smaller with
//      the same branch position: a prefix split published the new parent and was cut before it
//      shortened the node's header. Such a header is recomputed from a leaf below on read
//      (scan) and stored back by the first writer that reaches the node (WORT's rule).
//   4. A leaf array slot word's fingerprint is Fingerprint(the leaf's key); the keys of one
//      leaf array are distinct and share the path bytes of its position; its slot count is a
//      size class (8, 24, 64; 0 = 64 in a pool from before the classes). In format 2 and 3 (root
//      magic kRootMagic2/3) every leaf array reference carries the class code of that count,
//      written with the reference (one 8-byte store); in format 1 none does. In format 3 every
//      key of at most 8 bytes in a leaf array is inline: its slot word is InlineSlot(fp, len)
//      and the slot's SlotKV holds the key (zero-padded) and its value, both persisted before
//      the slot word; in format 1 and 2 no slot word is inline and arrays have no SlotKVs.
//      In format 4 (kRootMagic4) an array has a SlotKV area or not, said by kKvBit in its
//      reference and kSlotsKv in its head (equal; both written before the publication, never
//      changed): with the area, as in format 3 (every key of at most 8 bytes inline) and the
//      class may be 2; without it, no slot is inline (every key, short ones too, in a leaf) and
//      the class is 8, 24 or 64. Whether a new array has the area: it holds a key of at most 8
//      bytes (so a short key taken by an array without the area while it has a free slot gets
//      a leaf, until a growth, compaction or split triggered by a short key rebuilds it).
//   5. Every inner node reachable from the root has at least one entry (a child or leaf_here):
//      removing the last entry of a node unlinks the node from its parent instead.
//   6. Volatile metadata is trusted only when gen equals this session's pool generation.
//
// Persist order of each write path (Flush = write back, no fence; Fence; Commit = store8 +
// write back + fence, the commit point). Blocks are allocated without flushes (the allocator's
// DCMM design): an operation cut by a crash leaves only unreachable blocks, which the
// post-crash GC reclaims (wort/alloc.h, R3).
//   Leaf array insert     Flush(leaf); Fence; Commit(free slot := fp<<48 | leaf) (the first free
//                         slot from the key's home line on: roart.h PlaceSlot; a slot emptied
//                         in this session is not free until the pool is reopened). Format 3, a
//                         key of at most 8 bytes: SlotKV := (key, value), FlushSlot(it); Fence;
//                         Commit(free slot := InlineSlot(fp, len)). A crash before the commit
//                         leaves the slot word 0: the SlotKV is not read.
//   Leaf array growth     (a full array, fewer than 64 live keys: growth or, with dead slots,
//                         compaction) Flush(new leaf, unless inline); copy the live slot words
//                         (and SlotKVs) and the new one into a new array of the class they need,
//                         FlushGrown(it whole); Fence; Commit(parent entry := new array);
//                         retire the old array. Format 4: a new array with a SlotKV area
//                         replacing one without gets the key and value of each short key's
//                         leaf copied into an inline slot (in the same FlushGrown; the leaves
//                         are retired after the commit, as the split's are); no new site. A crash before the commit leaves the old array
//                         reachable and whole (the new one unreachable: GC); after it, the new
//                         one was persisted before the word that names it. Readers that hold
//                         the old one fail their version check (both locks were held).
//   Leaf array split      Flush(new leaf, unless inline); build the new leaf arrays, a new leaf
//                         for each inline key left alone in its byte group, and the new inner
//                         node, Flush each whole; Fence; Commit(parent entry := new node); retire
//                         the old leaf array (leaves are shared, never copied; format 4: a short
//                         key's leaf from an array without a SlotKV area whose group's new array
//                         has one is copied inline, and retired after the commit).
//   Leaf collision        (a single-leaf child meets a second key) Flush(leaf, unless inline),
//                         Flush(new leaf array of both; format 3: a key of at most 8 bytes
//                         inline, the old leaf's key and value copied); Fence; Commit(parent
//                         entry := leaf array); retire the old leaf if it was copied.
//   Child append          Flush(leaf); Fence; Commit(entry[cursor] := byte<<48 | leaf).
//   NODE256 add           Flush(leaf); Fence; Commit(child[c] := leaf).
//   leaf_here add         Flush(leaf); Fence; Commit(leaf_here := leaf).
//   Node growth/compaction  (no free entry at the cursor) Flush(leaf), Flush(new node with the
//                         live entries + the new one); Fence; Commit(parent entry := new
//                         node); retire the old node.
//   Prefix split at i     Flush(leaf), Flush(new NODE4 at the old depth, prefix [d, i)); Fence;
//                         Commit(parent entry := new node); Commit(old node header := depth
//                         i+1, prefix (i, b)) - a crash between the two commits is invariant 3.
//   Upsert of a present key  Commit(leaf value, or the inline key's SlotKV value).
//   Remove                Commit(the word that holds the key := 0): a leaf array slot, an
//                         entry or leaf_here - or, when that would empty the container, the
//                         entry of the highest ancestor that would become empty (invariant 5);
//                         then retire the unlinked leaf and nodes.
//   Header repair         Commit(header).
// PoolFull: every block is allocated before the first store that matters; on failure the blocks
// already allocated are freed and the tree is unchanged.
//
// Concurrency (src/sync/sync.h): optimistic lock coupling. Readers (Lookup, Scan, Visit) take
// no lock. Scan and Visit read each node between ReadLockOrRestart and CheckOrRestart, the
// parent's version checked after the child's was read; any failure restarts the operation (Scan
// restarts its current batch, from the last key it emitted). Lookup reads no version word
// (ROWEX, sync.h R2's exception; the argument is beside LookupAttempt). Writers descend the same way and upgrade only
// the locks of the nodes whose words they store: the leaf array for a slot insert (the
// duplicate check runs under that lock), the node for an append / leaf_here / repair, the
// parent too when the node is replaced (split, growth of a node or a leaf array, collision), the whole emptied chain for
// a remove. A writer never waits for a lock while it holds one (upgrades are single CAS).
// Unlinked blocks go to Allocator::Retire (epoch-based reclamation). Global-lock mode
// (registry.h) is supported as by the other radix trees.
//
// Size: a DRAM counter, recounted by a walk on the first Size() after open.
#include "index/radix/roart.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "index/batched_scan.h"
#include "index/kind_ids.h"
#include "index/root_block.h"
#include "wort/pm.h"

namespace wort::roart {

namespace {

constexpr int kMaxSteps = 10000;  // bound on any descent (a key has at most 4097 levels)
using art::kInlinePrefix;
using Entry = std::pair<unsigned char, uint64_t>;

inline bool KeyEq(const Leaf* l, std::string_view key) {
  const uint32_t n = l->key_len;
  return n == key.size() && (n == 0 || std::memcmp(l->key(), key.data(), n) == 0);
}
inline uint8_t TypeOf(const NodeHead* n) { return static_cast<uint8_t>(pm::load8(&n->type)); }
inline bool ValidInner(uint8_t t) { return t >= kN4 && t <= kN256; }
inline uint64_t Load(const uint64_t* w) { return pm::load8(w); }
// A leaf array's shape from its persistent head in a pool of format fmt: its slot count (SlotsOf
// the head's slots word; 0 if that is damaged, a small class outside an array of format 4 with
// a SlotKV area, or the block does not fit in the pool: such an array reads as empty and Check
// reports it) and whether it has a SlotKV area (format 3: all; format 4: kSlotsKv).
struct Shape {
  int slots;
  bool kv;
};
WORT_OPTIMISTIC_INLINE inline Shape ArrayShape(const Pool& pool, const NodeHead* n, int fmt) {
  uint64_t w = pm::load8(&n->slots);
  bool kv = fmt == 3;
  if (fmt >= 4) {
    kv = (w & kSlotsKv) != 0;
    w &= ~kSlotsKv;
  }
  int s = SlotsOf(w);
  if (s && s < 8 && !(fmt >= 4 && kv)) s = 0;
  return {s && pool.contains(pool.offset_of(n), LeafArrayBytes(s, kv)) ? s : 0, kv};
}
inline int FormatOf(uint64_t magic) {
  return magic == kRootMagic4 ? 4 : magic == kRootMagic3 ? 3 : magic == kRootMagic2 ? 2 : 1;
}
// An inline key's SlotKV key word (zero-padded key bytes; 0 for a key too long to be inline).
inline uint64_t KeyWord(std::string_view key) {
  uint64_t w = 0;
  if (!key.empty() && key.size() <= kMaxInlineKey) std::memcpy(&w, key.data(), key.size());
  return w;
}
int g_new_pool_format = 4;  // RoartTree::SetFormatForNewPoolsForTest
inline uint64_t Gen(const NodeHead* n) { return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(n->gen)).load(std::memory_order_acquire); }

// The (byte, reference) entries of inner node n of type t, in stored order.
int ReadEntries(const NodeHead* n, uint8_t t, Entry* out) {
  const uint64_t* ch = Children(n, t);
  int k = 0;
  for (int i = 0; i < Capacity(t); ++i) {
    const uint64_t w = Load(&ch[i]);
    if (!w) continue;
    if (t == kN256) out[k++] = {static_cast<unsigned char>(i), w & kRefMask};
    else out[k++] = {static_cast<unsigned char>(w >> 48), w & kRefMask};
  }
  return k;
}

}  // namespace

// The write locks one mutation holds, each upgraded from the version its descent read, released
// (version bumped) on destruction. Two nodes may share a table word (VersionLockTable::SameWord):
// a word already held counts as upgraded only if it was read at the same version.
// The first kInline in the object (an insert holds at most 3: no allocation per insert, h62),
// more - a remove's emptied chain - in `more`.
struct RoartTree::Locks {
  static constexpr size_t kInline = 4;
  std::pair<sync::VersionLock*, uint64_t> held[kInline];
  size_t n = 0;
  std::vector<std::pair<sync::VersionLock*, uint64_t>> more;
  ~Locks() {
    for (size_t i = 0; i < n; ++i) held[i].first->WriteUnlock();
    for (auto& [l, v] : more) l->WriteUnlock();
  }
  [[nodiscard]] bool Upgrade(sync::VersionLock& l, uint64_t v) {
    for (size_t i = 0; i < n; ++i)
      if (held[i].first == &l) return held[i].second == v;
    for (auto& [h, hv] : more)
      if (h == &l) return hv == v;
    if (!l.UpgradeToWriteLock(v)) return false;
    if (n < kInline) held[n++] = {&l, v};
    else more.push_back({&l, v});
    return true;
  }
};

struct RoartTree::PathElem {
  NodeHead* n;  // nullptr: the root block
  sync::VersionLock* l;
  uint64_t v;
  uint64_t* slot;  // the word in the parent that references n
  uint8_t t;
};

// A new slot: its word and (inline, format 3) its SlotKV.
struct RoartTree::NewSlot {
  uint64_t word;
  SlotKV kv;
};

namespace {
// What a scan emits: a key (in a leaf or in a leaf array's SlotKV; both stay readable in the
// scan's epoch and an inline key never changes while its slot is live, nor is a slot reused in
// the session that emptied it), as batched_scan.h's Leaf.
struct ScanKey {
  std::string_view k;
  std::string_view key_view() const { return k; }
};
}  // namespace

struct RoartTree::ScanCtx {
  std::string_view cursor;
  bool exclusive;
  const std::string_view* end;
  size_t want;
  ScanBatch<ScanKey>* out;
  ScanKey* keys;  // out's records (batch-sized)
  std::vector<std::pair<const sync::VersionLock*, uint64_t>>* seen;
  bool stop = false;
  bool past_end = false;
  bool restart = false;
};

// ---- construction -----------------------------------------------------------------------------
RoartTree::RoartTree(Pool& pool, uint64_t root_off)
    : pool_(pool),
      root_off_(root_off),
      rb_(pool.at<RootBlock>(root_off)),
      key_type_(static_cast<KeyType>(rb_->key_type)),
      format_(FormatOf(rb_->magic)),
      format2_(format_ >= 2),
      kv_(format_ >= 3),
      heap_off_(pool.heap_offset()),
      gen_(pool.generation()),
      trust_meta_(!pool.read_only()),
      mu_ptr_(IndexLock(&pool, root_off)),
      mu_(*mu_ptr_),
      global_lock_(GlobalIndexLock()),
      epoch_(&pool.allocator().epoch()) {}

Status RoartTree::Create(Pool& pool, const IndexOptions& opts, uint64_t* root_off) {
  if (opts.key_type != KeyType::kU64 && opts.key_type != KeyType::kBytes)
    return Status::InvalidArgument("roart: unknown key type");
  uint64_t off = 0;
  WORT_RETURN_IF_ERROR(pool.allocator().AllocZeroed(sizeof(RootBlock), &off));
  auto* rb = pool.at<RootBlock>(off);
  rb->magic = g_new_pool_format == 1   ? kRootMagic
              : g_new_pool_format == 2 ? kRootMagic2
              : g_new_pool_format == 3 ? kRootMagic3
                                       : kRootMagic4;
  rb->key_type = static_cast<uint64_t>(opts.key_type);
  rb->root = 0;
  rb->flags = opts.values_are_blocks ? kValuesAreBlocks : 0;
  Flush(rb, sizeof(RootBlock));  // before the caller publishes the root entry
  Fence();
  *root_off = off;
  return Status::OK();
}

Status RoartTree::Open(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) {
  WORT_RETURN_IF_ERROR(CheckRootBlockPlace(pool, root_off, sizeof(RootBlock), "roart"));
  const auto* rb = pool.at<RootBlock>(root_off);
  // Any format (roart.h: a pool created before format 3 stays in its format).
  const bool known = rb->magic == kRootMagic || rb->magic == kRootMagic2 || rb->magic == kRootMagic3 || rb->magic == kRootMagic4;
  WORT_RETURN_IF_ERROR(CheckRootHeader("roart", rb->magic, known ? rb->magic : kRootMagic4, rb->key_type));
  std::shared_ptr<void> token;  // one handle per index (registry.h)
  WORT_RETURN_IF_ERROR(ClaimSoleHandle(&pool, root_off, "roart", &token));
  auto* t = new RoartTree(pool, root_off);
  t->sole_handle_ = std::move(token);
  out->reset(t);
  return Status::OK();
}

void RoartTree::SetFormatForNewPoolsForTest(int format) { g_new_pool_format = format >= 1 && format <= 4 ? format : 4; }

Status RoartTree::ValidateKey(std::string_view key) const {
  if (key.size() > kMaxKeyLen) return Status::InvalidArgument("key longer than kMaxKeyLen");
  if (key_type_ == KeyType::kU64 && key.size() != 8) return Status::InvalidArgument("this index takes 8-byte (kU64) keys only");
  return Status::OK();
}

// ---- persistence: the kind's only persist sites ---------------------------------------------
void RoartTree::Flush(const void* p, size_t n) { pm::flush(p, n); }
void RoartTree::Fence() { pm::fence(); }
void RoartTree::FlushGrown(const void* p, size_t n) { pm::flush(p, n); }
void RoartTree::FlushSlot(const void* p, size_t n) { pm::flush(p, n); }
void RoartTree::Commit(uint64_t* word, uint64_t v) {
  pm::store8(word, v);
  pm::persist(word, sizeof(uint64_t));
}

// ---- helpers ------------------------------------------------------------------------------------
inline int RoartTree::Slots(const NodeHead* la) const { return ArrayShape(pool_, la, format_).slots; }
inline bool RoartTree::ArrayKv(const NodeHead* la) const {
  return format_ >= 4 ? (pm::load8(&la->slots) & kSlotsKv) != 0 : format_ == 3;
}

WORT_OPTIMISTIC_READ inline bool RoartTree::SlotEntry(const NodeHead* la, int slots, int i, uint64_t s, std::string_view* key,
                                                      uint64_t** value) const {
  if (IsInline(s)) {
    if (!kv_ || !InlineSlotOk(s) || !ArrayKv(la)) return false;
    SlotKV* kv = &KVs(la, slots)[i];
    *key = std::string_view(reinterpret_cast<const char*>(&kv->key), InlineLen(s));
    *value = &kv->value;
    return true;
  }
  const uint64_t lref = (s & kRefMask) | kLeafTag;
  if (!RefOk(lref)) return false;
  Leaf* l = at<Leaf>(lref);
  if (l->key_len > kMaxKeyLen || !pool_.contains(lref & ~kTagMask, Leaf::SizeFor(l->key_len))) return false;
  *key = l->key_view();
  *value = &l->value;
  return true;
}
// The slot count of the leaf array `ref` names, for a scan: its class code when it has one, the
// array has no SlotKV area and the block fits in the pool (no read of the head), else the
// head's (0 if not a leaf array, damaged, past the pool, or its SlotKV area differs from the
// reference's: the array reads as empty). *kv: the array has a SlotKV area.
WORT_OPTIMISTIC_READ inline int RoartTree::ScanSlots(uint64_t ref, bool* kv) const {
  const int code = SlotsOfCode(ref);
  const NodeHead* n = at(ref);
  *kv = RefKv(ref);
  // An array with a SlotKV area (format 3, format 4 with kKvBit) has its head read too (a scan
  // reads every SlotKV: a damaged class code would make it read another block's words as keys);
  // the parent requested its line with the slot lines.
  if (code && !*kv && pool_.contains(ref & ~kTagMask, LeafArrayBytes(code, false))) return code;
  if (TypeOf(n) != kLeafArray) return 0;
  const Shape sh = ArrayShape(pool_, n, format_);
  return (code && sh.slots != code) || sh.kv != *kv ? 0 : sh.slots;
}
bool RoartTree::Fresh(const NodeHead* n) const { return trust_meta_ && Gen(n) == gen_; }

void RoartTree::Refresh(NodeHead* n, uint8_t t) {
  if (!trust_meta_ || Gen(n) == gen_) return;
  if (t == kLeafArray) {
    auto* la = reinterpret_cast<LeafArray*>(n);
    uint64_t bm = 0;
    const int slots = Slots(n);
    for (int i = 0; i < slots; ++i)
      if (la->slot[i]) bm |= uint64_t(1) << i;
    n->bitmap = bm;
    n->count = static_cast<uint32_t>(__builtin_popcountll(bm));
    n->cursor = 0;
  } else {
    uint64_t* ch = Children(n, t);
    uint32_t count = 0, cursor = 0;
    if (t == kN48) std::memset(Index48(n), 0, 256);
    for (int i = 0; i < Capacity(t); ++i) {
      const uint64_t w = ch[i];
      if (!w) continue;
      ++count;
      if (t != kN256) cursor = static_cast<uint32_t>(i + 1);
      if (t == kN48) Index48(n)[(w >> 48) & 0xff] = static_cast<unsigned char>(i + 1);
    }
    n->count = count;
    n->cursor = cursor;
  }
  std::atomic_ref<uint64_t>(n->gen).store(gen_, std::memory_order_release);
}

WORT_OPTIMISTIC_READ inline uint64_t* RoartTree::FindChild(NodeHead* n, uint8_t t, unsigned char c) const {
  uint64_t* ch = Children(n, t);
  if (t == kN256) return Load(&ch[c]) ? &ch[c] : nullptr;
  if (t == kN48 && Fresh(n)) {
    const unsigned k = Index48(n)[c];
    if (k == 0 || k > 48) return nullptr;
    const uint64_t w = Load(&ch[k - 1]);
    return (w && ((w >> 48) & 0xff) == c) ? &ch[k - 1] : nullptr;
  }
  for (int i = 0; i < Capacity(t); ++i) {
    const uint64_t w = Load(&ch[i]);
    if (w && ((w >> 48) & 0xff) == c) return &ch[i];
  }
  return nullptr;
}

// The key of any leaf or inline slot below ref (every key below a node holds the node's whole
// path); false if there is none.
WORT_OPTIMISTIC_READ bool RoartTree::AnyKey(uint64_t ref, std::string_view* key) const {
  for (int steps = 0; steps < kMaxSteps && ref; ++steps) {
    if (!RefOk(ref)) return false;
    if (ref & kLeafTag) {
      const Leaf* l = at<Leaf>(ref);
      if (l->key_len > kMaxKeyLen || !pool_.contains(ref & ~kTagMask, Leaf::SizeFor(l->key_len))) return false;
      *key = l->key_view();
      return true;
    }
    const NodeHead* n = at(ref);
    const uint8_t t = TypeOf(n);
    if (t == kLeafArray) {
      const auto* la = reinterpret_cast<const LeafArray*>(n);
      const int slots = Slots(n);
      for (int i = 0; i < slots; ++i) {
        const uint64_t s = Load(&la->slot[i]);
        uint64_t* v;
        if (s) return SlotEntry(n, slots, i, s, key, &v);
      }
      return false;
    }
    if (!ValidInner(t)) return false;
    const uint64_t lh = Load(&n->leaf_here);
    if (lh) {
      ref = lh & kRefMask;
      continue;
    }
    uint64_t next = 0;
    const uint64_t* ch = Children(n, t);
    for (int i = 0; i < Capacity(t) && !next; ++i) next = Load(&ch[i]) & kRefMask;
    ref = next;
  }
  return false;
}

void RoartTree::Added() {
  count_.Added();
}
void RoartTree::Removed() {
  count_.Removed();
}

void RoartTree::FreeAll(const std::vector<uint64_t>& refs) {
  for (uint64_t r : refs) pool_.allocator().Free(r & kRefMask & ~kTagMask);
}

// ---- builders (allocate, fill, Flush; the caller fences before publishing) --------------------
Status RoartTree::NewLeaf(std::string_view key, uint64_t value, uint64_t* ref) {
  uint64_t off = 0;
  WORT_RETURN_IF_ERROR(pool_.allocator().Alloc(Leaf::SizeFor(key.size()), &off));
  Leaf* l = pool_.at<Leaf>(off);
  l->value = value;
  l->key_len = static_cast<uint32_t>(key.size());
  l->reserved = 0;
  if (!key.empty()) std::memcpy(l->key(), key.data(), key.size());
  Flush(l, Leaf::SizeFor(key.size()));
  *ref = off | kLeafTag;
  return Status::OK();
}

// A new leaf array of the smallest class that holds e[0..n): slot words (and, with a SlotKV area,
// the SlotKVs of inline ones) placed from their home lines. has_kv: the array has a SlotKV area
// (the caller made every key of at most 8 bytes inline then, and no slot inline otherwise).
Status RoartTree::NewLeafArray(const NewSlot* e, int n, bool has_kv, uint64_t* ref) {
  uint64_t off = 0;
  const int slots = LeafArrayClassFor(n, format_ >= 4 && has_kv);
  const size_t bytes = LeafArrayBytes(slots, has_kv);
  WORT_RETURN_IF_ERROR(pool_.allocator().AllocZeroed(bytes, &off));
  auto* la = pool_.at<LeafArray>(off);
  la->h.type = kLeafArray;
  la->h.slots = static_cast<uint64_t>(slots) | (format_ >= 4 && has_kv ? kSlotsKv : 0);
  SlotKV* kv = has_kv ? KVs(&la->h, slots) : nullptr;
  uint64_t bm = 0;
  for (int i = 0; i < n; ++i) {
    const int k = PlaceSlot(bm, slots, e[i].word >> 48);  // n <= slots: always a free slot
    la->slot[k] = e[i].word;
    if (kv && IsInline(e[i].word)) kv[k] = e[i].kv;
    bm |= uint64_t(1) << k;
  }
  la->h.bitmap = bm;
  la->h.count = static_cast<uint32_t>(n);
  la->h.gen = gen_;
  Flush(la, bytes);
  *ref = ArrayRef(off, slots, has_kv);
  return Status::OK();
}

// A full leaf array plus one new slot becomes an array of the class its live keys + 1 need: a
// larger one (growth), or the same or a smaller one when removes left dead slots (compaction;
// a slot emptied in a session is not taken again in it: LookupAttempt). The live slot words
// (and SlotKVs) are copied as they are (fingerprints included; leaves are shared, never read),
// each placed from its home line in the new class, the new one last. Flushed whole at its own
// site (FlushGrown).
// Format 4: the new array has a SlotKV area iff one of its keys has at most 8 bytes (the new one
// is inline then, as the caller built it, or a live inline slot). An array without the area
// whose short keys had leaves gets their keys and values copied into inline slots (under the
// array's lock, which their upserts take too); their leaves go to *converted, for the caller
// to retire after the publish. An area whose inline keys were all removed is dropped.
Status RoartTree::RebuildLeafArray(const LeafArray* la, int slots, const NewSlot& add, uint64_t* ref,
                                   std::vector<uint64_t>* converted) {
  const bool old_kv = ArrayKv(&la->h);
  int live = 0;
  bool any_inline = IsInline(add.word);
  for (int i = 0; i < slots; ++i) {
    live += la->slot[i] != 0;
    any_inline |= IsInline(la->slot[i]);
  }
  const bool has_kv = format_ >= 4 ? any_inline : format_ == 3;
  const int grown = LeafArrayClassFor(live + 1, format_ >= 4 && has_kv);
  const size_t bytes = LeafArrayBytes(grown, has_kv);
  uint64_t off = 0;
  WORT_RETURN_IF_ERROR(pool_.allocator().AllocZeroed(bytes, &off));
  auto* g = pool_.at<LeafArray>(off);
  g->h.type = kLeafArray;
  g->h.slots = static_cast<uint64_t>(grown) | (format_ >= 4 && has_kv ? kSlotsKv : 0);
  const SlotKV* okv = old_kv ? KVs(&la->h, slots) : nullptr;
  SlotKV* gkv = has_kv ? KVs(&g->h, grown) : nullptr;
  int n = 0;
  uint64_t bm = 0;
  auto place = [&](uint64_t s, const SlotKV* kv) {
    const int k = PlaceSlot(bm, grown, s >> 48);  // at most live + 1 <= grown words: always one
    g->slot[k] = s;
    if (gkv && IsInline(s)) gkv[k] = *kv;
    bm |= uint64_t(1) << k;
    ++n;
  };
  for (int i = 0; i < slots; ++i) {
    const uint64_t s = la->slot[i];
    if (!s) continue;
    if (has_kv && !old_kv) {  // format 4: a short key's leaf becomes an inline slot
      const uint64_t lref = (s & kRefMask) | kLeafTag;
      const Leaf* l = at<Leaf>(lref);
      if (RefOk(lref) && l->key_len <= kMaxInlineKey) {
        const std::string_view k = l->key_view();
        const SlotKV kv{KeyWord(k), Load(&l->value)};
        place(InlineSlot(s >> 48, k.size()), &kv);
        converted->push_back(lref);
        continue;
      }
    }
    place(s, okv ? &okv[i] : nullptr);
  }
  place(add.word, &add.kv);
  g->h.bitmap = bm;
  g->h.count = static_cast<uint32_t>(n);
  g->h.gen = gen_;
  FlushGrown(g, bytes);
  *ref = ArrayRef(off, grown, has_kv);
  return Status::OK();
}

Status RoartTree::NewNode(uint8_t type, const Hdr& h, uint64_t leaf_here, const Entry* e, int n, uint64_t* ref) {
  uint64_t off = 0;
  WORT_RETURN_IF_ERROR(pool_.allocator().AllocZeroed(NodeBytes(type), &off));
  auto* x = pool_.at<NodeHead>(off);
  x->hdr = art::PackHdr(h);
  x->type = type;
  x->leaf_here = leaf_here;
  uint64_t* ch = Children(x, type);
  for (int i = 0; i < n; ++i) {
    if (type == kN256) {
      ch[e[i].first] = e[i].second;
    } else {
      ch[i] = uint64_t(e[i].first) << 48 | e[i].second;
      if (type == kN48) Index48(x)[e[i].first] = static_cast<unsigned char>(i + 1);
    }
  }
  x->count = static_cast<uint32_t>(n);
  x->cursor = type == kN256 ? 0 : static_cast<uint32_t>(n);
  x->gen = gen_;
  Flush(x, NodeBytes(type));
  *ref = off;
  return Status::OK();
}

// A full leaf array at `depth` (64 live keys) plus the new slot `add` (key add_key) becomes an
// inner node that branches at the first position where the keys differ; each byte group of
// more than one key becomes a new leaf array (inline slots stay inline), a group of one key is
// referenced directly: its leaf, or a new leaf for an inline key. Every block is flushed whole.
// Format 4: a group's array has a SlotKV area iff the group has a key of at most 8 bytes; such
// a key that had a leaf (an array without the area) becomes inline, its leaf going to
// *converted (retired by the caller after the publish).
Status RoartTree::SplitLeafArray(const LeafArray* la, uint32_t depth, const NewSlot& add, std::string_view add_key,
                                 std::vector<uint64_t>* built, uint64_t* ref, std::vector<uint64_t>* converted) {
  struct K {
    std::string_view key;
    NewSlot e;
  };
  std::vector<K> ks;
  ks.reserve(kLeafArraySlots + 1);
  const int slots = Slots(&la->h);
  for (int i = 0; i < slots; ++i) {
    const uint64_t s = la->slot[i];
    if (!s) continue;
    std::string_view k;
    uint64_t* v;
    if (!SlotEntry(&la->h, slots, i, s, &k, &v)) return Status::Corruption("roart: damaged leaf array slot");
    ks.push_back({k, {s, IsInline(s) ? KVs(&la->h, slots)[i] : SlotKV{0, 0}}});
  }
  ks.push_back({add_key, add});
  const std::string_view k0 = ks[0].key;
  size_t b = k0.size();
  for (const auto& x : ks) {
    size_t j = depth;
    const size_t lim = std::min(b, x.key.size());
    while (j < lim && x.key[j] == k0[j]) ++j;
    b = j;
  }
  if (b > art::kMaxDepthField || b < depth) return Status::Corruption("roart: leaf array keys do not split");
  std::sort(ks.begin(), ks.end(), [&](const K& x, const K& y) { return CompareKeys(x.key, y.key) < 0; });
  // A group of one key: its leaf's reference (a new leaf for an inline key).
  auto single = [&](const K& x, uint64_t* r) -> Status {
    if (!IsInline(x.e.word)) {
      *r = (x.e.word & kRefMask) | kLeafTag;
      return Status::OK();
    }
    WORT_RETURN_IF_ERROR(NewLeaf(x.key, Load(&x.e.kv.value), r));
    built->push_back(*r);
    return Status::OK();
  };
  uint64_t leaf_here = 0;
  std::vector<Entry> entries;
  size_t i = 0;
  if (ks[0].key.size() == b) WORT_RETURN_IF_ERROR(single(ks[i++], &leaf_here));
  while (i < ks.size()) {
    const unsigned char c = static_cast<unsigned char>(ks[i].key[b]);
    size_t j = i;
    NewSlot group[kLeafArraySlots + 1];
    int g = 0;
    bool any_short = false;
    for (; j < ks.size() && static_cast<unsigned char>(ks[j].key[b]) == c; ++j) {
      group[g++] = ks[j].e;
      any_short |= ks[j].key.size() <= kMaxInlineKey;
    }
    uint64_t r = 0;
    if (g == 1) {
      WORT_RETURN_IF_ERROR(single(ks[i], &r));
    } else {
      const bool has_kv = KvFor(any_short);
      for (int x = 0; x < g; ++x) {
        const K& kx = ks[i + static_cast<size_t>(x)];
        if (has_kv && !IsInline(kx.e.word) && kx.key.size() <= kMaxInlineKey) {
          const uint64_t lref = (kx.e.word & kRefMask) | kLeafTag;
          group[x] = {InlineSlot(kx.e.word >> 48, kx.key.size()), {KeyWord(kx.key), Load(&at<Leaf>(lref)->value)}};
          converted->push_back(lref);
        }
      }
      WORT_RETURN_IF_ERROR(NewLeafArray(group, g, has_kv, &r));
      built->push_back(r);
    }
    entries.push_back({c, r});
    i = j;
  }
  const Hdr h = art::MakeHdr(depth, static_cast<uint32_t>(b - depth), reinterpret_cast<const unsigned char*>(k0.data()) + depth);
  WORT_RETURN_IF_ERROR(NewNode(TypeFor(static_cast<int>(entries.size())), h, leaf_here, entries.data(),
                               static_cast<int>(entries.size()), ref));
  built->push_back(*ref);
  return Status::OK();
}

// ---- insert / upsert ----------------------------------------------------------------------------
Status RoartTree::Insert(std::string_view key, uint64_t value) {
  if (pool_.read_only()) return Status::InvalidArgument("roart: the pool is open read-only");
  WORT_RETURN_IF_ERROR(ValidateKey(key));
  auto g = ModeLock(IndexModeLock::kWriter);
  sync::EpochGuard eg(epoch());
  Status s;
  for (int attempt = 0; InsertAttempt(key, value, false, nullptr, &s) == Attempt::kRestart; ++attempt) sync::Backoff(attempt);
  return s;
}

Status RoartTree::Upsert(std::string_view key, uint64_t value, bool* inserted) {
  if (pool_.read_only()) return Status::InvalidArgument("roart: the pool is open read-only");
  WORT_RETURN_IF_ERROR(ValidateKey(key));
  auto g = ModeLock(IndexModeLock::kWriter);
  sync::EpochGuard eg(epoch());
  Status s;
  for (int attempt = 0; InsertAttempt(key, value, true, inserted, &s) == Attempt::kRestart; ++attempt) sync::Backoff(attempt);
  return s;
}

WORT_OPTIMISTIC_READ RoartTree::Attempt RoartTree::InsertAttempt(std::string_view key, uint64_t value, bool upsert,
                                                                 bool* inserted, Status* out) {
  Locks L;
  sync::VersionLock* pl = &sync::NodeLock(rb_);
  uint64_t pv;
  if (!pl->ReadLockOrRestart(&pv)) return Attempt::kRestart;
  uint64_t* slot = &rb_->root;
  bool slot_is_leaf_here = false;
  uint64_t ref = Load(slot) & kRefMask;
  uint32_t depth = 0;
  const auto* kb = reinterpret_cast<const unsigned char*>(key.data());
  auto done = [&](Status s, bool ins) {
    if (s.ok() && inserted) *inserted = ins;
    if (s.ok() && ins) Added();
    *out = std::move(s);
    return Attempt::kDone;
  };
  auto corrupt = [&](const sync::VersionLock& l, uint64_t v, const char* what) {
    if (!l.CheckOrRestart(v)) return Attempt::kRestart;
    *out = Status::Corruption(std::string("roart: ") + what);
    return Attempt::kDone;
  };
  // Replaces the reference in the parent's word `slot` (keeps an entry's key byte).
  auto publish = [&](uint64_t r) { Commit(slot, (Load(slot) & ~kRefMask) | r); };

  for (int step = 0; step < kMaxSteps; ++step) {
    if (ref == 0) {
      if (slot != &rb_->root) return Attempt::kRestart;  // an entry removed meanwhile
      if (!L.Upgrade(*pl, pv)) return Attempt::kRestart;
      uint64_t lref;
      Status s = NewLeaf(key, value, &lref);
      if (!s.ok()) return done(s, false);
      Fence();
      Commit(slot, lref);
      return done(Status::OK(), true);
    }
    if (!RefOk(ref)) return corrupt(*pl, pv, "reference outside the heap");
    if (ref & kLeafTag) {
      // A single leaf: its container is the parent (root block or node), whose lock we take.
      Leaf* l = at<Leaf>(ref);
      const bool same = KeyEq(l, key);
      if (!L.Upgrade(*pl, pv)) return Attempt::kRestart;
      if (same) {
        if (!upsert) return done(Status::AlreadyExists("key exists"), false);
        Commit(&l->value, value);
        return done(Status::OK(), false);
      }
      if (slot_is_leaf_here) return done(Status::Corruption("roart: leaf_here holds a key of another length"), false);
      // A leaf array of both keys; in format 3 each key of at most 8 bytes inline (the old
      // leaf's key and value copied under the parent's lock, which its upserts take too; the
      // old leaf is retired after the publish). Format 4: so too, and the array has a SlotKV
      // area only if one of the two keys has at most 8 bytes.
      const std::string_view lk = l->key_view();
      const bool has_kv = KvFor(lk.size() <= kMaxInlineKey || key.size() <= kMaxInlineKey);
      const bool old_inline = has_kv && lk.size() <= kMaxInlineKey;
      NewSlot two[2];
      two[0] = old_inline ? NewSlot{InlineSlot(Fingerprint(lk), lk.size()), {KeyWord(lk), Load(&l->value)}}
                          : NewSlot{uint64_t(Fingerprint(lk)) << 48 | (ref & ~kTagMask), {0, 0}};
      uint64_t lref = 0, aref;
      if (has_kv && key.size() <= kMaxInlineKey) {
        two[1] = {InlineSlot(Fingerprint(key), key.size()), {KeyWord(key), value}};
      } else {
        Status s = NewLeaf(key, value, &lref);
        if (!s.ok()) return done(s, false);
        two[1] = {uint64_t(Fingerprint(key)) << 48 | (lref & ~kTagMask), {0, 0}};
      }
      Status s = NewLeafArray(two, 2, has_kv, &aref);
      if (!s.ok()) {
        if (lref) FreeAll({lref});
        return done(s, false);
      }
      Fence();
      publish(aref);
      if (old_inline) Retire(ref);
      return done(Status::OK(), true);
    }
    NodeHead* n = at(ref);
    sync::VersionLock& nl = sync::NodeLock(n);
    uint64_t nv;
    if (!nl.ReadLockOrRestart(&nv)) return Attempt::kRestart;
    if (!pl->CheckOrRestart(pv)) return Attempt::kRestart;
    const uint8_t t = TypeOf(n);
    if (ref & kArrayTag) {
      const int slots = t == kLeafArray ? Slots(n) : 0;
      if (slots == 0 || (SlotsOfCode(ref) && SlotsOfCode(ref) != slots) || RefKv(ref) != ArrayKv(n))
        return corrupt(nl, nv, "bad leaf array");
      auto* la = reinterpret_cast<LeafArray*>(n);
      if (!L.Upgrade(nl, nv)) return Attempt::kRestart;
      Refresh(n, t);
      // The duplicate check, under the leaf array's lock.
      const uint16_t fp = Fingerprint(key);
      for (int i = 0; i < slots; ++i) {
        const uint64_t s = la->slot[i];
        if (!s || (s >> 48) != fp) continue;
        std::string_view k;
        uint64_t* v;
        if (!SlotEntry(n, slots, i, s, &k, &v) || k != key) continue;
        if (!upsert) return done(Status::AlreadyExists("key exists"), false);
        Commit(v, value);
        return done(Status::OK(), false);
      }
      // The new slot: inline (a key of at most 8 bytes and an array with a SlotKV area: no
      // leaf), or a new leaf's. Format 4: an array without the area takes a short key's leaf
      // while it has a free slot; the array that replaces it (growth, compaction, split) has
      // the area and the key inline.
      bool inl = ArrayKv(n) && key.size() <= kMaxInlineKey;
      uint64_t lref = 0;
      NewSlot add{inl ? InlineSlot(fp, key.size()) : 0, {KeyWord(key), value}};
      auto leaf = [&]() -> Status {
        if (inl) return Status::OK();
        WORT_RETURN_IF_ERROR(NewLeaf(key, value, &lref));
        add = {uint64_t(fp) << 48 | (lref & ~kTagMask), {0, 0}};
        return Status::OK();
      };
      // A free slot: one never taken in this session (a slot emptied by a remove is not reused
      // before the array is rebuilt or the pool reopened: LookupAttempt reads inline keys
      // without versions).
      if (const int i = PlaceSlot(n->bitmap, slots, fp); i >= 0) {
        Status s = leaf();
        if (!s.ok()) return done(s, false);
        if (inl) {
          SlotKV* kv = &KVs(n, slots)[i];
          *kv = add.kv;
          FlushSlot(kv, sizeof(SlotKV));
        }
        Fence();
        Commit(&la->slot[i], add.word);
        n->bitmap |= uint64_t(1) << i;
        ++n->count;
        return done(Status::OK(), true);
      }
      if (!L.Upgrade(*pl, pv)) return Attempt::kRestart;
      if (kv_ && key.size() <= kMaxInlineKey && !inl) {  // format 4: the new array has the area
        inl = true;
        add = {InlineSlot(fp, key.size()), {KeyWord(key), value}};
      }
      Status s = leaf();
      if (!s.ok()) return done(s, false);
      std::vector<uint64_t> converted;  // leaves whose keys became inline (format 4)
      if (n->count < uint32_t(kLeafArraySlots)) {
        // No free slot, fewer than 64 live keys: an array of the class they need replaces it
        // in the parent (growth, or compaction of dead slots).
        uint64_t gref = 0;
        s = RebuildLeafArray(la, slots, add, &gref, &converted);
        if (!s.ok()) {
          if (lref) FreeAll({lref});
          return done(s, false);
        }
        Fence();
        publish(gref);
        Retire(ref);
        for (const uint64_t c : converted) Retire(c);
        return done(Status::OK(), true);
      }
      // 64 live keys: split into an inner node, published in the parent.
      std::vector<uint64_t> built;
      if (lref) built.push_back(lref);
      uint64_t nref = 0;
      s = SplitLeafArray(la, depth, add, key, &built, &nref, &converted);
      if (!s.ok()) {
        FreeAll(built);
        return done(s, false);
      }
      Fence();
      publish(nref);
      Retire(ref);
      for (const uint64_t c : converted) Retire(c);
      return done(Status::OK(), true);
    }
    if (!ValidInner(t) || !pool_.contains(ref, NodeBytes(t))) return corrupt(nl, nv, "bad node type");
    const Hdr h = art::UnpackHdr(Load(&n->hdr));
    const uint32_t b = h.branch();
    if (h.depth > depth || b < depth) return corrupt(nl, nv, "node header inconsistent with its position");
    if (h.depth != depth) {
      // Invariant 3: a prefix split was cut after publishing the new parent. Store the header
      // for the real depth (prefix bytes from a leaf below), then restart.
      if (!L.Upgrade(nl, nv)) return Attempt::kRestart;
      std::string_view any;
      if (!AnyKey(ref, &any) || any.size() < b) return done(Status::Corruption("roart: node without a leaf below"), false);
      Commit(&n->hdr, art::PackHdr(art::MakeHdr(depth, b - depth, reinterpret_cast<const unsigned char*>(any.data()) + depth)));
      repairs_.fetch_add(1, std::memory_order_relaxed);
      return Attempt::kRestart;
    }
    // The first position in [depth, b) where the key leaves the node's prefix.
    std::string_view any;
    bool have_any = false, any_bad = false;
    auto prefix_byte = [&](uint32_t j) -> unsigned char {
      if (j - depth < kInlinePrefix) return h.prefix[j - depth];
      if (!have_any) {
        if (!AnyKey(ref, &any)) any = {};
        have_any = true;
      }
      if (any.size() <= j) {
        any_bad = true;
        return 0;
      }
      return static_cast<unsigned char>(any[j]);
    };
    uint32_t i = depth;
    while (i < b && i < key.size() && kb[i] == prefix_byte(i)) ++i;
    if (any_bad) return corrupt(nl, nv, "node without a leaf below");
    if (i < b) {
      // Prefix split at i: a new NODE4 at this depth with prefix [depth, i) above the node.
      const unsigned char pb = prefix_byte(i);
      if (any_bad) return corrupt(nl, nv, "node without a leaf below");
      if (!L.Upgrade(*pl, pv) || !L.Upgrade(nl, nv)) return Attempt::kRestart;
      uint64_t lref, nref;
      Status s = NewLeaf(key, value, &lref);
      if (!s.ok()) return done(s, false);
      Entry e[2];
      int ne = 0;
      uint64_t lh = 0;
      if (key.size() == i) {
        lh = lref;
        e[ne++] = {pb, ref};
      } else if (kb[i] < pb) {
        e[ne++] = {kb[i], lref};
        e[ne++] = {pb, ref};
      } else {
        e[ne++] = {pb, ref};
        e[ne++] = {kb[i], lref};
      }
      s = NewNode(kN4, art::MakeHdr(depth, i - depth, kb + depth), lh, e, ne, &nref);
      if (!s.ok()) {
        FreeAll({lref});
        return done(s, false);
      }
      Fence();
      publish(nref);
      if (test_stop_ != TestStop::kAfterSplitPublish) {
        Hdr oh;
        oh.depth = i + 1;
        oh.plen = b - (i + 1);
        for (uint32_t j = 0; j < kInlinePrefix && j < oh.plen; ++j) oh.prefix[j] = prefix_byte(i + 1 + j);
        Commit(&n->hdr, art::PackHdr(oh));
      }
      return done(Status::OK(), true);
    }
    if (key.size() == b) {
      const uint64_t lh = Load(&n->leaf_here) & kRefMask;
      if (lh) {
        pl = &nl;
        pv = nv;
        slot = &n->leaf_here;
        slot_is_leaf_here = true;
        ref = lh;
        continue;
      }
      if (!L.Upgrade(nl, nv)) return Attempt::kRestart;
      uint64_t lref;
      Status s = NewLeaf(key, value, &lref);
      if (!s.ok()) return done(s, false);
      Fence();
      Commit(&n->leaf_here, lref);
      return done(Status::OK(), true);
    }
    const unsigned char c = kb[b];
    if (uint64_t* w = FindChild(n, t, c)) {
      pl = &nl;
      pv = nv;
      slot = w;
      slot_is_leaf_here = false;
      ref = Load(w) & kRefMask;
      depth = b + 1;
      continue;
    }
    // Add the new leaf as a child of n.
    if (!L.Upgrade(nl, nv)) return Attempt::kRestart;
    Refresh(n, t);
    uint64_t* ch = Children(n, t);
    uint64_t lref;
    if (t == kN256 || static_cast<int>(n->cursor) < Capacity(t)) {
      Status s = NewLeaf(key, value, &lref);
      if (!s.ok()) return done(s, false);
      Fence();
      if (t == kN256) {
        Commit(&ch[c], lref);
      } else {
        const uint32_t k = n->cursor;
        // The NODE48 index byte before the entry (lookups read no version: LookupAttempt).
        if (t == kN48) std::atomic_ref<unsigned char>(Index48(n)[c]).store(static_cast<unsigned char>(k + 1), std::memory_order_release);
        Commit(&ch[k], uint64_t(c) << 48 | lref);
        n->cursor = k + 1;
      }
      ++n->count;
      return done(Status::OK(), true);
    }
    // No free entry at the cursor: a new node (grown, or the same type compacted) replaces n.
    if (!L.Upgrade(*pl, pv)) return Attempt::kRestart;
    Entry e[49];
    int ne = ReadEntries(n, t, e);
    Status s = NewLeaf(key, value, &lref);
    if (!s.ok()) return done(s, false);
    e[ne++] = {c, lref};
    std::sort(e, e + ne, [](const Entry& x, const Entry& y) { return x.first < y.first; });
    uint64_t nref;
    s = NewNode(TypeFor(ne), h, Load(&n->leaf_here), e, ne, &nref);
    if (!s.ok()) {
      FreeAll({lref});
      return done(s, false);
    }
    Fence();
    publish(nref);
    Retire(ref);
    return done(Status::OK(), true);
  }
  *out = Status::Corruption("roart: descent too deep");
  return Attempt::kDone;
}

// ---- lookup -------------------------------------------------------------------------------------
// A lookup reads no version word (sync.h R2's exception, ROWEX: read-optimized write exclusion,
// as P-ART does for ART and ArtTree::LookupAttempt for woart; issue 34: the version words live in
// the DRAM lock table, one more cache line per level). Every in-place change a roart writer
// makes is one 8-byte store that takes a node from one consistent state to another (a leaf array
// slot, an entry at the cursor, a NODE256 child, leaf_here, a header repair or shortening, a
// removal's 0, a leaf's value), and every other change builds new blocks and publishes them by
// one 8-byte store of the parent's word, the old block staying intact until epochs reclaim it
// (growth and split of a leaf array, node growth/compaction, leaf collision, prefix split). So
// whatever mix of old and new words a lookup reads, the path it follows existed during the
// lookup:
//   - a block replaced under the reader: the old copy still names every key it named (it is
//     retired, never modified), so a key present for the whole lookup is still found below it;
//   - a leaf array's slot count (the class code in its reference, format 2) and type are
//     written before its reference is published and never change; the lookup reads every slot
//     line of the array (its home line first), so where a writer placed a key does not matter;
//   - a prefix split's header shortened in place: the header's depth no longer matches the
//     depth the reader arrived with, so the depth rule skips the inline prefix comparison (as
//     after a crash); the branch position is the same in both headers;
//   - an entry or slot cleared by a remove and reused by an insert: entries are appended at the
//     cursor, never reused in place; a leaf array slot emptied by a remove is not taken again in
//     the same session (the taken-slot bitmap keeps it until the array is rebuilt, a new block,
//     or the pool is reopened, when no reader of before is left), so a slot word read non-zero
//     names the key it named when it was published; the comparison is always on the whole key;
//   - an inline key (format 3): its SlotKV is written (and flushed) before its slot word is
//     published with a release store, and the lookup reads the slot word (acquire) before the
//     SlotKV, so it reads the key and value of that slot word; the key never changes while the
//     slot is live nor before the slot's reuse (above), the value changes by one 8-byte store
//     (upsert);
//   - the volatile NODE48 index (used only when the node's gen is this session's, set at the
//     end of Refresh with a release store): an append stores the index byte before it commits
//     the entry, a remove clears the entry before the byte, and the reader checks the entry's
//     byte, so the index never names a child the entry words did not hold during the lookup.
// A key present for the whole lookup is therefore found, a key absent for the whole lookup is
// not; nothing read is used unchecked (references by RefOk, a leaf's key within the pool before
// it is compared, at most len + 1 inner nodes: the loop), and the blocks read stay allocated
// until the lookup leaves its epoch (R3). Scans, writers' descents and the visit still use
// versions.
// The common path is lean (issue 34, h62): LookupAttempt inlined into it, the global-lock mode
// and the NotFound status (which builds a string) out of line.
Status RoartTree::Lookup(std::string_view key, uint64_t* value) const {
  if (key.size() > kMaxKeyLen || (key_type_ == KeyType::kU64 && key.size() != 8)) [[unlikely]]
    return ValidateKey(key);
  if (global_lock_) [[unlikely]] return LookupGlobalLock(key, value);
  sync::EpochGuard eg(epoch());
  if (LookupAttempt(key, value)) [[likely]] return Status::OK();
  return KeyNotFound();
}

Status RoartTree::LookupGlobalLock(std::string_view key, uint64_t* value) const {
  auto g = ModeLock(IndexModeLock::kReader);  // shared in global-lock mode
  sync::EpochGuard eg(epoch());
  if (LookupAttempt(key, value)) return Status::OK();
  return KeyNotFound();
}

Status RoartTree::KeyNotFound() { return Status::NotFound("key not found"); }


WORT_OPTIMISTIC_READ inline bool RoartTree::LookupAttempt(std::string_view key, uint64_t* value) const {
  const auto* kb = reinterpret_cast<const unsigned char*>(key.data());
  const auto len = static_cast<uint32_t>(key.size());
  // The mapping's base and the pool's size, read once (the acquire loads below would otherwise
  // make the compiler reload them at every level; a mapping never moves while the pool is open
  // and its size only grows). Fast check: a block at off in [heap, fast_end) has room for the
  // largest block a reference can name (a NODE256), so every reference of an undamaged tree but
  // those in the pool's last 2 KiB passes it; the rest take RefOk, which re-reads the size.
  const char* const base = pool_.base();
  const uint64_t heap = heap_off_;
  const uint64_t size = pool_.size();
  constexpr uint64_t kLargest = sizeof(NodeHead) + 8 * 256;
  const uint64_t fast_end = size > kLargest ? size - kLargest : 0;
  static_assert(LeafArrayBytes(kLeafArraySlots, true) <= kLargest);
  const int fmt = format_;
  // [lo, fast_end) in one unsigned compare (lo >= 1: a reference to offset 0 takes RefOk).
  const uint64_t lo = heap ? heap : 1;
  const uint64_t span = fast_end > lo ? fast_end - lo : 0;
  auto ok = [&](uint64_t r) {
    const uint64_t off = r & ~kTagMask;
    return (off - lo < span && TagOk(r & kTagMask)) || RefOk(r);
  };
  // A leaf whose key would run past the pool's end (a damaged image) reads as another key.
  auto leaf_is = [&](uint64_t off) {
    const auto* l = reinterpret_cast<const Leaf*>(base + off);
    if ((off >= fast_end || len > kLargest - sizeof(Leaf)) && !pool_.contains(off, Leaf::SizeFor(len))) [[unlikely]]
      return false;
    if (l->key_len != len) return false;
    if (len == 8) {  // the common key: two word loads, no memcmp call
      uint64_t a, b;
      std::memcpy(&a, l->key(), 8);
      std::memcpy(&b, kb, 8);
      return a == b;
    }
    return len == 0 || std::memcmp(l->key(), kb, len) == 0;
  };
  // The fingerprint first: its chain of 8 multiplies then overlaps the upper levels' reads
  // instead of standing between the leaf array's reference and the array's first line.
  const uint64_t fp = Fingerprint(key);
  uint64_t ref = Load(&rb_->root) & kRefMask;
  uint32_t depth = 0;
  bool below256 = false;  // the node read last was a NODE256 (the prefetch below)
  // Bounded without a step counter (as ArtTree::LookupAttempt): an inner node's branch position
  // b is never before the depth the lookup arrived with (b < depth: a damaged image, read as
  // absent), b <= len, and the next depth is b + 1; a leaf or a leaf array ends the walk. So
  // depth grows at every inner node and the walk ends within len + 1 of them.
  while (ref) {
    if (!ok(ref)) [[unlikely]]
      return false;
    const uint64_t off = ref & ~kTagMask;
    if (ref & kLeafTag) {
      if (!leaf_is(off)) return false;
      *value = Load(&reinterpret_cast<const Leaf*>(base + off)->value);
      return true;
    }
    const auto* n = reinterpret_cast<const NodeHead*>(base + off);
    // An inner node (no tag) below a NODE256: request the line of child[kb[depth]] of a
    // NODE256 without a prefix with the head line, so the two reads overlap instead of the
    // child's waiting for the head's type and header (the upper levels of a tree of integer
    // keys are NODE256s below NODE256s; below smaller nodes, as with string keys, the guess
    // would mostly fetch a line the lookup does not read). Only a prefetch: of another node
    // type, or with a prefix, it names a line the lookup may not read, never one it uses
    // unchecked (off < fast_end: inside the pool).
    if (below256 && !(ref & kTagMask) && depth < len && off < fast_end)
      __builtin_prefetch(base + off + sizeof(NodeHead) + 8 * size_t(kb[depth]));
    if (ref & kArrayTag) {
      // Format 2: the slot count is the reference's class code and the key's slot is in its
      // home line (roart.h), so a lookup reads that one line of the array (then the leaf): not
      // the head, whose type and slot count were written before the reference was published
      // and never change. Format 1 (code 0), or a block in the pool's last 2 KiB: the head.
      const auto* la = reinterpret_cast<const LeafArray*>(n);
      int slots = SlotsOfCode(ref);
      if (slots == 0 || off >= fast_end) [[unlikely]] {
        if (TypeOf(n) != kLeafArray) return false;
        const int hs = Slots(n);  // 0: damaged or past the pool's end
        if ((slots && hs != slots) || (fmt >= 4 && ArrayKv(n) != ((ref & kKvBit) != 0))) return false;
        slots = hs;
      }
      const int lines = SlotLines(slots);
      const int home = HomeLine(fp, slots);
      auto next = [lines](int line) { return line + 1 == lines ? 0 : line + 1; };
      // The slot lines from the home line on, `per` slot words per line: 8, or 2 for the small
      // class of format 4 - a constant in each copy, so the common loop stays unrolled.
      auto probe = [&](auto per_c, auto&& match) -> bool {
        constexpr int per = decltype(per_c)::value;
        for (int k = 0, line = home; k < lines; ++k, line = next(line))
          for (int i = 0; i < per; ++i)
            if (match(line, i)) return true;
        return false;
      };
      auto probe_all = [&](auto&& match) -> bool {
        if (slots < 8) [[unlikely]]
          return probe(std::integral_constant<int, LineSlots(kSmallArrayClasses[0])>{}, match);
        return probe(std::integral_constant<int, 8>{}, match);
      };
      // The array has a SlotKV area: format 3, or format 4 with kKvBit in its reference (set
      // with the reference's class before its publication, never changed).
      const bool kv = fmt >= 4 ? (ref & kKvBit) != 0 : fmt == 3;
      if (kv && len <= kMaxInlineKey) {
        // Format 3, a key of at most 8 bytes: it is inline wherever it sits in an array
        // (invariant 4), so its slot word is exactly InlineSlot(fp, len) - one compare per
        // slot - and its SlotKV's key word decides. The key's SlotKVs (the two lines of its
        // home line's 8 slots) are requested with the home slot line, so the reads overlap.
        const SlotKV* kvs = KVs(n, slots);
        __builtin_prefetch(&la->slot[8 * home]);  // the line the probe reads first, requested first
        __builtin_prefetch(&kvs[8 * home]);
        if (slots >= 8) __builtin_prefetch(&kvs[8 * home + 4]);  // not in the 2-slot class
        uint64_t kw = 0;
        if (len == 8) std::memcpy(&kw, kb, 8);
        else if (len) std::memcpy(&kw, kb, len);
        const uint64_t want = InlineSlot(fp, len);
        return probe_all([&](int line, int i) {
          if (Load(&la->slot[8 * line + i]) != want) return false;
          const SlotKV* e = &kvs[8 * line + i];
          if (e->key != kw) return false;
          *value = Load(&e->value);
          return true;
        });
      }
      // A key that has a leaf: the home line, then the others (a key whose home line was full,
      // or an array written in format 1): a present key is found wherever it sits.
      return probe_all([&](int line, int i) {
        const uint64_t s = Load(&la->slot[8 * line + i]);
        if ((s >> 48) != fp || s == 0 || IsInline(s)) return false;  // inline: a key of at most 8 bytes
        const uint64_t lref = (s & kRefMask) | kLeafTag;
        if (!ok(lref) || !leaf_is(lref & ~kTagMask)) return false;
        *value = Load(&reinterpret_cast<const Leaf*>(base + (lref & ~kTagMask))->value);
        return true;
      });
    }
    const uint8_t t = TypeOf(n);
    if (!ValidInner(t)) return false;
    if (off >= fast_end && !pool_.contains(off, NodeBytes(t))) [[unlikely]]
      return false;
    below256 = t == kN256;
    const uint64_t hw = Load(&n->hdr);
    uint32_t b = depth;
    // The common node - depth as expected, no prefix: the header's low 24 bits (PackHdr: depth,
    // then plen) equal `depth`, in one compare.
    if ((hw & 0xffffff) != depth) [[unlikely]] {
      const Hdr h = art::UnpackHdr(hw);
      b = h.branch();
      if (len < b || b < depth) return false;  // b < depth: a damaged image
      if (h.depth == depth) {  // pessimistic check of the inline prefix bytes (header current)
        for (uint32_t j = 0; j < h.plen && j < kInlinePrefix; ++j)
          if (kb[depth + j] != h.prefix[j]) return false;
      }
    }
    if (len <= b) [[unlikely]] {
      if (len < b) return false;
      ref = Load(&n->leaf_here) & kRefMask;
    } else if (t == kN256) {  // the slot itself: an empty one is 0, which ends the loop
      ref = Load(&Children(n, kN256)[kb[b]]) & kRefMask;
    } else {
      const uint64_t* w = FindChild(const_cast<NodeHead*>(n), t, kb[b]);
      if (!w) return false;
      ref = Load(w) & kRefMask;
    }
    depth = b + 1;
  }
  return false;
}

// ---- remove -------------------------------------------------------------------------------------
Status RoartTree::Remove(std::string_view key) {
  if (pool_.read_only()) return Status::InvalidArgument("roart: the pool is open read-only");
  WORT_RETURN_IF_ERROR(ValidateKey(key));
  auto g = ModeLock(IndexModeLock::kWriter);
  sync::EpochGuard eg(epoch());
  Status s;
  for (int attempt = 0; RemoveAttempt(key, &s) == Attempt::kRestart; ++attempt) sync::Backoff(attempt);
  return s;
}

WORT_OPTIMISTIC_READ RoartTree::Attempt RoartTree::RemoveAttempt(std::string_view key, Status* out) {
  std::vector<PathElem> path;
  path.reserve(16);
  sync::VersionLock* rl = &sync::NodeLock(rb_);
  uint64_t rv;
  if (!rl->ReadLockOrRestart(&rv)) return Attempt::kRestart;
  path.push_back({nullptr, rl, rv, nullptr, 0});
  uint64_t* slot = &rb_->root;
  uint64_t ref = Load(slot) & kRefMask;
  uint32_t depth = 0;
  const auto* kb = reinterpret_cast<const unsigned char*>(key.data());
  uint64_t* entry = nullptr;  // the word that holds the key
  uint64_t leaf_off = 0;
  const sync::AttemptEnd end(out);
  for (int step = 0;; ++step) {
    const PathElem& top = path.back();
    if (step >= kMaxSteps || !ref || !RefOk(ref)) return end.NotFound(*top.l, top.v);
    if (ref & kLeafTag) {
      const Leaf* l = at<Leaf>(ref);
      if (!KeyEq(l, key)) return end.NotFound(*top.l, top.v);
      entry = slot;
      leaf_off = ref & ~kTagMask;
      break;
    }
    NodeHead* n = at(ref);
    sync::VersionLock& nl = sync::NodeLock(n);
    uint64_t nv;
    if (!nl.ReadLockOrRestart(&nv)) return Attempt::kRestart;
    if (!top.l->CheckOrRestart(top.v)) return Attempt::kRestart;
    const uint8_t t = TypeOf(n);
    if (ref & kArrayTag) {
      if (t != kLeafArray) return end.NotFound(nl, nv);
      path.push_back({n, &nl, nv, slot, t});
      auto* la = reinterpret_cast<LeafArray*>(n);
      const uint16_t fp = Fingerprint(key);
      const int slots = Slots(n);
      for (int i = 0; i < slots && !entry; ++i) {
        const uint64_t s = Load(&la->slot[i]);
        std::string_view k;
        uint64_t* v;
        if (s && (s >> 48) == fp && SlotEntry(n, slots, i, s, &k, &v) && k == key) {
          entry = &la->slot[i];
          leaf_off = IsInline(s) ? 0 : s & kRefMask;  // an inline key has no leaf
        }
      }
      if (!entry) return end.NotFound(nl, nv);
      break;
    }
    if (!ValidInner(t)) return end.NotFound(nl, nv);
    const Hdr h = art::UnpackHdr(Load(&n->hdr));
    const uint32_t b = h.branch();
    if (key.size() < b) return end.NotFound(nl, nv);
    path.push_back({n, &nl, nv, slot, t});
    if (key.size() == b) {
      slot = &n->leaf_here;
    } else {
      slot = FindChild(n, t, kb[b]);
      if (!slot) return end.NotFound(nl, nv);
    }
    ref = Load(slot) & kRefMask;
    depth = b + 1;
  }
  (void)depth;
  // Lock the container; while removing the entry would leave it empty, remove the container
  // from its parent instead (invariant 5), locking each level up.
  Locks L;
  size_t k = path.size() - 1;
  if (!L.Upgrade(*path[k].l, path[k].v)) return Attempt::kRestart;
  uint64_t* clear = entry;
  while (path[k].n) {
    NodeHead* c = path[k].n;
    Refresh(c, path[k].t);
    const uint32_t entries = c->count + (path[k].t != kLeafArray && Load(&c->leaf_here) ? 1 : 0);
    if (entries > 1) break;
    clear = path[k].slot;
    --k;
    if (!L.Upgrade(*path[k].l, path[k].v)) return Attempt::kRestart;
  }
  const uint64_t old = Load(clear);
  Commit(clear, 0);
  if (NodeHead* c = path[k].n) {
    const uint8_t t = path[k].t;
    if (t == kLeafArray) {
      --c->count;  // the slot stays taken in this session (its bit in bitmap: LookupAttempt)
    } else if (clear != &c->leaf_here) {
      --c->count;
      if (t == kN48)  // after the entry's 0 (LookupAttempt)
        std::atomic_ref<unsigned char>(Index48(c)[(old >> 48) & 0xff]).store(0, std::memory_order_release);
    }
  }
  for (size_t j = k + 1; j < path.size(); ++j) Retire(pool_.offset_of(path[j].n));
  if (leaf_off) Retire(leaf_off);
  Removed();
  *out = Status::OK();
  return Attempt::kDone;
}

// ---- scan ----------------------------------------------------------------------------------------
// Batches of up to 128 keys, each collected as one snapshot (every node read is validated at the
// end of the batch) and emitted in the scan's epoch; the next batch restarts from the root after
// the last key emitted (the continuation key). Leaves of a leaf array are sorted by key.
namespace {
constexpr size_t kScanBatch = 128;  // a 100-key range query is one batch
constexpr int kLeavesAhead = 4;     // a scan requests the leaves of leaf arrays this many children ahead
}

Status RoartTree::Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const {
  // The versions read by the batch being collected: one buffer per thread, reused (no
  // allocation per scan; a scan started from inside fn is after its batch's collection).
  thread_local std::vector<std::pair<const sync::VersionLock*, uint64_t>> seen;
  union Keys {  // the batch's records (a scan's own: fn may start another scan); uninitialized
    ScanKey a[kScanBatch];
    Keys() {}
  } keys;
  return ScanInValidatedBatches<kScanBatch, ScanKey>(
      epoch(), start, limit, fn, [&] { return ModeLock(IndexModeLock::kReader); },
      [&](std::string_view cursor, bool exclusive, size_t want, ScanBatch<ScanKey>* out,
          bool* past_end) {
        seen.clear();
        ScanCtx ctx{cursor, exclusive, end, want, out, keys.a, &seen};
        const sync::VersionLock& rl = sync::NodeLock(rb_);
        uint64_t rv;
        if (!rl.ReadLockOrRestart(&rv)) return false;
        seen.push_back({&rl, rv});
        ScanRef(Load(&rb_->root) & kRefMask, &rl, rv, 0, true, ctx);
        if (ctx.restart) return false;
        for (const auto& [l, v] : seen)
          if (!l->CheckOrRestart(v)) return false;
        *past_end = ctx.past_end;
        return true;
      });
}

// Collects the keys below ref (real depth `depth`) in ascending order into ctx.out. `bounded`:
// the path so far equals the cursor's first `depth` bytes (keys below may be <= cursor);
// otherwise every key below is > cursor. Returns false to stop.
WORT_OPTIMISTIC_READ bool RoartTree::ScanRef(uint64_t ref, const sync::VersionLock* pl, uint64_t pv, uint32_t depth,
                                             bool bounded, ScanCtx& ctx) const {
  (void)pl;
  (void)pv;  // the parent's version is in ctx.seen, checked after this node's version was read
  if (ctx.stop || ref == 0) return !ctx.stop;
  if (!RefOk(ref)) return true;  // only in a corrupted tree (or a stale read the batch check catches)
  auto emit = [&](std::string_view k, const uint64_t* value) {
    if (bounded) {
      const int c = CompareKeys(k, ctx.cursor);
      if (c < 0 || (c == 0 && ctx.exclusive)) return true;
    }
    if (ctx.end && CompareKeys(k, *ctx.end) > 0) {
      ctx.past_end = ctx.stop = true;
      return false;
    }
    ScanKey* rec = &ctx.keys[ctx.out->size()];
    rec->k = k;
    ctx.out->push_back({rec, Load(value)});
    if (ctx.out->size() >= ctx.want) ctx.stop = true;
    return !ctx.stop;
  };
  if (ref & kLeafTag) {
    const Leaf* l = at<Leaf>(ref);
    if (l->key_len > kMaxKeyLen) return true;
    return emit(l->key_view(), &l->value);
  }
  const NodeHead* n = at(ref);
  const sync::VersionLock& nl = sync::NodeLock(n);
  uint64_t nv;
  if (!nl.ReadLockOrRestart(&nv)) {
    ctx.restart = ctx.stop = true;
    return false;
  }
  ctx.seen->push_back({&nl, nv});
  if (ref & kArrayTag) {
    // Format 2: the slot count from the reference (the head is not read); format 1: the head.
    bool has_kv;
    const int slots = ScanSlots(ref, &has_kv);
    const auto* la = reinterpret_cast<const LeafArray*>(n);
    const SlotKV* kvs = has_kv ? KVs(n, slots) : nullptr;
    // Sorted by an 8-byte big-endian word of each key from the array's depth on (zero-padded),
    // then by the whole key where those are equal: every key of the array holds the same path
    // bytes [0, depth) (invariant 2), so a smaller word means a smaller key, and a 100-key scan
    // compares integers instead of calling memcmp (issue 34). Uninitialized on purpose.
    struct SortKey {
      uint64_t w;
      std::string_view k;
      const uint64_t* v;
    };
    union Ls {
      SortKey a[kLeafArraySlots];
      Ls() {}
    } lsu;
    SortKey* ls = lsu.a;
    int nls = 0;
    // One pass over the slot words: an inline key (format 3) is taken from its SlotKV, whose
    // lines the parent requested with the slot lines (its sort word is its key word, byte-swapped
    // and shifted past the depth: no copy, no call); a leaf's line is requested here and its key
    // read in a second pass, after every leaf of the array was requested (their reads overlap).
    int leaf_slot[kLeafArraySlots];
    int nleaf = 0;
    for (int i = 0; i < slots; ++i) {
      const uint64_t s = Load(&la->slot[i]);
      if (!s) continue;
      if (!IsInline(s)) {
        if (RefOk((s & kRefMask) | kLeafTag)) __builtin_prefetch(at<Leaf>(s & kRefMask));
        leaf_slot[nleaf++] = i;
        continue;
      }
      if (!kvs || !InlineSlotOk(s)) continue;  // a damaged slot (Check reports it)
      const uint32_t len = InlineLen(s);
      const SlotKV* e = &kvs[i];
      const std::string_view k(reinterpret_cast<const char*>(&e->key), len);
      if (bounded) {  // drop the keys before the cursor before sorting
        const int c = CompareKeys(k, ctx.cursor);
        if (c < 0 || (c == 0 && ctx.exclusive)) continue;
      }
      // The key's bytes in key order (the SlotKV holds them zero-padded, little-endian in memory),
      // only its own `len` bytes, from the depth on.
      const uint64_t be = len ? __builtin_bswap64(e->key) & (~uint64_t(0) << (64 - 8 * len)) : 0;
      ls[nls++] = {depth < 8 ? be << (8 * depth) : 0, k, &e->value};
    }
    for (int x = 0; x < nleaf; ++x) {
      const int i = leaf_slot[x];
      std::string_view k;
      uint64_t* v;
      if (!SlotEntry(n, slots, i, Load(&la->slot[i]), &k, &v)) continue;
      if (bounded) {
        const int c = CompareKeys(k, ctx.cursor);
        if (c < 0 || (c == 0 && ctx.exclusive)) continue;
      }
      uint64_t w = 0;
      if (k.size() >= size_t(depth) + 8) {
        std::memcpy(&w, k.data() + depth, 8);
      } else if (k.size() > depth) {
        std::memcpy(&w, k.data() + depth, k.size() - depth);
      }
      ls[nls++] = {__builtin_bswap64(w), k, v};
    }
    // Only as many of the smallest as the batch still wants are needed, in order.
    const size_t room = ctx.want - ctx.out->size();
    auto less = [](const SortKey& a, const SortKey& b) {
      return a.w != b.w ? a.w < b.w : CompareKeys(a.k, b.k) < 0;
    };
    const int take = static_cast<int>(std::min<size_t>(room, static_cast<size_t>(nls)));
    // A whole array (the common case in a 100-key scan) by insertion sort (at most 64 keys),
    // not partial_sort's heap sort.
    if (take == nls) {
      for (int i = 1; i < nls; ++i) {
        const SortKey x = ls[i];
        int j = i;
        for (; j > 0 && less(x, ls[j - 1]); --j) ls[j] = ls[j - 1];
        ls[j] = x;
      }
    } else {
      std::partial_sort(ls, ls + take, ls + nls, less);
    }
    // Emitted without the cursor comparison (the keys before it were dropped above).
    for (int i = 0; i < take; ++i) {
      if (ctx.end && CompareKeys(ls[i].k, *ctx.end) > 0) {
        ctx.past_end = ctx.stop = true;
        return false;
      }
      ScanKey* rec = &ctx.keys[ctx.out->size()];
      rec->k = ls[i].k;
      ctx.out->push_back({rec, Load(ls[i].v)});
    }
    if (ctx.out->size() >= ctx.want) ctx.stop = true;
    return !ctx.stop;
  }
  const uint8_t t = TypeOf(n);
  if (!ValidInner(t)) return true;
  const Hdr h = art::UnpackHdr(Load(&n->hdr));
  const uint32_t b = h.branch();
  if (b < depth || h.depth > depth || b > art::kMaxDepthField) return true;
  bool bnd = bounded;
  if (bnd) {
    // Compare the node's prefix [depth, b) with the cursor (bytes past the inline ones, or all
    // of them when the header awaits its repair, come from a leaf below).
    std::string_view any;
    bool have_any = false;
    for (uint32_t j = depth; j < b && bnd; ++j) {
      if (j >= ctx.cursor.size()) {
        bnd = false;  // the cursor is a proper prefix of every key below
        break;
      }
      unsigned char pb;
      if (h.depth == depth && j - depth < kInlinePrefix) {
        pb = h.prefix[j - depth];
      } else {
        if (!have_any) {
          if (!AnyKey(ref, &any)) any = {};
          have_any = true;
        }
        if (any.size() <= j) {
          ctx.restart = ctx.stop = !nl.CheckOrRestart(nv);
          return !ctx.stop;
        }
        pb = static_cast<unsigned char>(any[j]);
      }
      const unsigned char cb = static_cast<unsigned char>(ctx.cursor[j]);
      if (pb < cb) return true;  // every key below < cursor
      if (pb > cb) bnd = false;
    }
  }
  const uint64_t lh = Load(&n->leaf_here) & kRefMask;
  if (lh && (!bnd || ctx.cursor.size() <= b)) {
    if (!ScanRef(lh, &nl, nv, b, bnd, ctx)) return false;
  }
  const bool deeper = bnd && ctx.cursor.size() > b;
  const unsigned char cb = deeper ? static_cast<unsigned char>(ctx.cursor[b]) : 0;
  // Memory-level parallelism (issue 34: the scan waits on memory, not on instructions): the
  // lines of the children the batch is expected to need are requested together (a single leaf's
  // line; a leaf array's head, slot lines and, format 3, its SlotKV lines; each child's version
  // word in the lock table), and as the walk reaches a child, the next one not requested yet is.
  // How many children: until their expected keys (a leaf 1, a leaf array by its class - an array
  // of 8 / 24 / 64 slots holds about 4 / 12 / 32 keys, arrays grow when full - an inner node
  // the whole batch) cover what the batch still wants: a 100-key scan of 1M sparse keys needs
  // about 7 leaf arrays, where requesting every child up to 100 asked for ~400 lines and the
  // line-fill buffers, full, made the scan wait on its own prefetches (measured: roart.md).
  // Before a child is walked, the leaves of the leaf-array children kLeavesAhead children on
  // are requested from their slots, unless every key is inline (format 3, 8-byte keys: no leaf
  // to request). Nothing read ahead here is used: the child is read again, under its version,
  // when walked.
  auto expect = [](uint64_t w) -> size_t {
    if (w & kLeafTag) return 1;
    if (!(w & kArrayTag)) return kScanBatch;
    const int code = SlotsOfCode(w);
    return code == 2 ? 2 : code == 8 ? 4 : code == 24 ? 12 : code == kLeafArraySlots ? 32 : 8;
  };
  auto request = [&](uint64_t w) {
    if (!RefOk(w)) return;
    const char* p = reinterpret_cast<const char*>(at<char>(w));
    if (!(w & kArrayTag)) {
      __builtin_prefetch(p);  // a single leaf's first line, or an inner node's head
      if (!(w & kLeafTag)) __builtin_prefetch(&sync::NodeLock(p));
      return;
    }
    __builtin_prefetch(&sync::NodeLock(p));
    const int code = SlotsOfCode(w);  // format 2: the slot lines only (the head is not read)
    const bool has_kv = RefKv(w);
    if (!code || has_kv) __builtin_prefetch(p);  // format 1 and arrays with a SlotKV area: the head (ScanSlots)
    if (!code) {  // format 1: the head and the first slot lines
      for (int o = 64; o < 256; o += 64) __builtin_prefetch(p + o);
      return;
    }
    const size_t bytes = LeafArrayBytes(code, has_kv);
    if (!pool_.contains(w & kRefMask & ~kTagMask, bytes)) return;
    for (size_t o = 64; o < bytes; o += 64) __builtin_prefetch(p + o);
  };
  const bool all_inline = kv_ && key_type_ == KeyType::kU64;  // every key is 8 bytes: no leaves
  auto request_leaves = [&](uint64_t w) {
    if (all_inline || !(w & kArrayTag) || !RefOk(w)) return;
    const auto* a = at<LeafArray>(w);
    bool has_kv;
    const int slots = ScanSlots(w, &has_kv);
    for (int i = 0; i < slots; ++i)
      if (const uint64_t s = Load(&a->slot[i]); s && !IsInline(s) && RefOk((s & kRefMask) | kLeafTag))
        __builtin_prefetch(at<Leaf>(s & kRefMask));
  };
  const size_t room = ctx.want - ctx.out->size();
  if (t == kN256) {
    // Indexed by the byte: walk the children from the cursor's byte on, in place (no copy of
    // the 256 words, which a 100-key scan would read whole at every NODE256 it passes).
    const uint64_t* ch = Children(n, t);
    int rq = cb;  // the children before byte rq were requested
    for (size_t expected = 0; rq < 256 && expected < room; ++rq)
      if (const uint64_t w = Load(&ch[rq]) & kRefMask) {
        request(w);
        expected += expect(w);
      }
    int lv = cb + 1, ahead = 0;  // leaves requested for the children in (c, lv), `ahead` of them
    for (int c = cb; c < 256; ++c) {
      const uint64_t w = Load(&ch[c]) & kRefMask;
      if (!w) continue;
      const bool more = ctx.out->size() + 1 < ctx.want;
      if (more && rq <= c + 1)  // the next child, requested one step ahead at least
        for (rq = std::max(rq, c + 1); rq < 256; ++rq)
          if (const uint64_t x = Load(&ch[rq]) & kRefMask) {
            request(x);
            ++rq;
            break;
          }
      // The leaves of the leaf arrays kLeavesAhead children ahead (their slot lines were
      // requested before; one child ahead left little time when that child was a single leaf).
      if (lv <= c) lv = c + 1, ahead = 0;
      for (; more && !all_inline && lv < 256 && ahead < kLeavesAhead; ++lv)
        if (const uint64_t x = Load(&ch[lv]) & kRefMask) {
          request_leaves(x);
          ++ahead;
        }
      if (!ScanRef(w, &nl, nv, b + 1, deeper && c == cb, ctx)) return false;
      if (ahead > 0) --ahead;  // the next child is the first of the window
    }
    return true;
  }
  Entry e[48];
  const int ne = ReadEntries(n, t, e);
  std::sort(e, e + ne, [](const Entry& x, const Entry& y) { return x.first < y.first; });
  int first = 0;
  while (deeper && first < ne && e[first].first < cb) ++first;
  int rq = first;
  for (size_t expected = 0; rq < ne && expected < room; ++rq) {
    request(e[rq].second);
    expected += expect(e[rq].second);
  }
  int lv = first + 1;  // the children before lv had their leaves requested
  for (int i = first; i < ne; ++i) {
    const bool more = ctx.out->size() + 1 < ctx.want;
    if (more && rq <= i + 1 && std::max(rq, i + 1) < ne) {
      rq = std::max(rq, i + 1);
      request(e[rq++].second);
    }
    for (; more && !all_inline && lv < ne && lv <= i + kLeavesAhead; ++lv) request_leaves(e[lv].second);
    if (!ScanRef(e[i].second, &nl, nv, b + 1, deeper && e[i].first == cb, ctx)) return false;
  }
  return true;
}

// ---- size, stats, check ---------------------------------------------------------------------------
namespace {
// Calls f(ref, level) for every reference reachable from `root` (quiescent tree), and
// f(kInlineKeyRef, level) for every inline key (format 3).
constexpr uint64_t kInlineKeyRef = ~uint64_t(0);
template <class F>
void Walk(const RoartTree* t, const Pool& pool, uint64_t root, int fmt, F&& f) {
  std::vector<std::pair<uint64_t, uint32_t>> stack{{root, 0}};
  // A damaged image whose nodes name themselves would make the walk grow exponentially with the
  // depth: it stops after as many references as the pool has blocks (a tree has no more).
  uint64_t budget = pool.size() / 64 + 1;
  while (!stack.empty() && budget-- > 0) {
    const auto [ref, lvl] = stack.back();
    stack.pop_back();
    if (!ref || !f(ref, lvl) || (ref & kLeafTag)) continue;
    const auto* n = pool.at<NodeHead>(ref & ~kTagMask);
    const uint8_t ty = TypeOf(n);
    if (ty == kLeafArray) {
      const auto* la = reinterpret_cast<const LeafArray*>(n);
      const int slots = ArrayShape(pool, n, fmt).slots;
      for (int i = 0; i < slots; ++i) {
        const uint64_t s = la->slot[i];
        if (!s) continue;
        if (IsInline(s)) f(kInlineKeyRef, lvl + 1);
        else stack.push_back({(s & kRefMask) | kLeafTag, lvl + 1});
      }
      continue;
    }
    if (!ValidInner(ty)) continue;
    if (n->leaf_here) stack.push_back({n->leaf_here & kRefMask, lvl + 1});
    Entry e[256];
    const int ne = ReadEntries(n, ty, e);
    for (int i = 0; i < ne; ++i) stack.push_back({e[i].second, lvl + 1});
  }
  (void)t;
}
}  // namespace

uint64_t RoartTree::CountKeys() const {
  uint64_t c = 0;
  Walk(this, pool_, Load(&rb_->root) & kRefMask, format_, [&](uint64_t ref, uint32_t) {
    if (ref == kInlineKeyRef) return ++c, false;
    if (!RefOk(ref)) return false;
    if (ref & kLeafTag) ++c;
    return true;
  });
  return c;
}

uint64_t RoartTree::Size() const {
  // the walk excludes writers
  return count_.Get([&] { return ModeLock(IndexModeLock::kQuiesce); }, [&] { return CountKeys(); });
}

IndexStats RoartTree::Stats() const {
  auto q = ModeLock(IndexModeLock::kQuiesce);
  IndexStats st;
  const Allocator& a = pool_.allocator();
  st.bytes_allocated = a.UsableSize(root_off_);
  uint64_t depth_sum = 0;
  Walk(this, pool_, Load(&rb_->root) & kRefMask, format_, [&](uint64_t ref, uint32_t lvl) {
    if (ref == kInlineKeyRef) {  // a key in its leaf array (format 3): counted as a leaf at its depth
      ++st.leaves;
      depth_sum += lvl;
      return false;
    }
    if (!RefOk(ref)) return false;
    st.bytes_allocated += a.UsableSize(ref & ~kTagMask);
    if (ref & kLeafTag) {
      ++st.leaves;
      depth_sum += lvl;
    } else {
      ++st.inner_nodes;
    }
    return true;
  });
  st.keys = st.leaves;
  st.avg_leaf_depth = st.leaves ? double(depth_sum) / double(st.leaves) : 0.0;
  return st;
}

void RoartTree::CountNodeTypes(uint64_t counts[8]) const {
  auto q = ModeLock(IndexModeLock::kQuiesce);
  for (int i = 0; i < 8; ++i) counts[i] = 0;
  Walk(this, pool_, Load(&rb_->root) & kRefMask, format_, [&](uint64_t ref, uint32_t) {
    if (ref == kInlineKeyRef || !RefOk(ref)) return false;
    if (!(ref & kLeafTag)) {
      const uint8_t t = TypeOf(at(ref));
      if (t < 8) ++counts[t];
    }
    return true;
  });
}

std::vector<int> RoartTree::LeafArraySlotCounts() const {
  auto q = ModeLock(IndexModeLock::kQuiesce);
  std::vector<int> out;
  Walk(this, pool_, Load(&rb_->root) & kRefMask, format_, [&](uint64_t ref, uint32_t) {
    if (ref == kInlineKeyRef || !RefOk(ref)) return false;
    if (ref & kArrayTag) out.push_back(Slots(at(ref)));
    return true;
  });
  return out;
}

std::string RoartTree::SpaceReport() const {
  auto q = ModeLock(IndexModeLock::kQuiesce);
  const Allocator& a = pool_.allocator();
  struct Row {
    uint64_t n = 0, bytes = 0, keys = 0, slots = 0, dead = 0, kv_bytes = 0;
  };
  Row inner[5], leaves_short, leaves_long;
  std::map<std::pair<int, bool>, Row> arrays;  // (class, SlotKV area)
  uint64_t inline_keys = 0, total = a.UsableSize(root_off_);
  Walk(this, pool_, Load(&rb_->root) & kRefMask, format_, [&](uint64_t ref, uint32_t) {
    if (ref == kInlineKeyRef) return ++inline_keys, false;
    if (!RefOk(ref)) return false;
    const uint64_t bytes = a.UsableSize(ref & ~kTagMask);
    total += bytes;
    if (ref & kLeafTag) {
      Row& r = at<Leaf>(ref)->key_len <= kMaxInlineKey ? leaves_short : leaves_long;
      ++r.n, r.bytes += bytes, ++r.keys;
      return true;
    }
    const NodeHead* n = at(ref);
    const uint8_t t = TypeOf(n);
    if (t == kLeafArray) {
      const int slots = Slots(n);
      const bool kv = ArrayKv(n);
      Row& r = arrays[{slots, kv}];
      ++r.n, r.bytes += bytes, r.slots += uint64_t(slots);
      const auto* la = reinterpret_cast<const LeafArray*>(n);
      uint64_t live = 0;
      for (int i = 0; i < slots; ++i) live |= uint64_t(la->slot[i] != 0) << i;
      r.keys += uint64_t(__builtin_popcountll(live));
      if (Fresh(n)) r.dead += uint64_t(__builtin_popcountll(n->bitmap & ~live));
      if (kv) r.kv_bytes += sizeof(SlotKV) * uint64_t(slots);
    } else if (t >= kN4 && t <= kN256) {
      Row& r = inner[t];
      ++r.n, r.bytes += bytes;
    }
    return true;
  });
  std::string out;
  char buf[256];
  auto line = [&](const char* what, const Row& r, bool fill) {
    if (!r.n) return;
    std::snprintf(buf, sizeof buf, "  %-26.40s %10llu blocks %14llu bytes (%5.1f%%)", what, (unsigned long long)r.n,
                  (unsigned long long)r.bytes, total ? 100.0 * double(r.bytes) / double(total) : 0.0);
    out += buf;
    if (fill) {
      std::snprintf(buf, sizeof buf, ", %llu keys, fill %.2f, %llu dead slots, SlotKV area %llu bytes",
                    (unsigned long long)r.keys, r.slots ? double(r.keys) / double(r.slots) : 0.0,
                    (unsigned long long)r.dead, (unsigned long long)r.kv_bytes);
      out += buf;
    }
    out += "\n";
  };
  const uint64_t keys = CountKeys();
  std::snprintf(buf, sizeof buf, "roart format %d: %llu keys (%llu inline), %llu bytes reachable, %.1f bytes/key\n",
                format_, (unsigned long long)keys, (unsigned long long)inline_keys, (unsigned long long)total,
                keys ? double(total) / double(keys) : 0.0);
  out += buf;
  const char* names[5] = {"", "NODE4", "NODE16", "NODE48", "NODE256"};
  for (int t = kN4; t <= kN256; ++t) line(names[t], inner[t], false);
  for (const auto& [k, r] : arrays) {
    char name[48];
    std::snprintf(name, sizeof name, "leaf array %d slots%s", k.first, k.second ? " +SlotKV" : "");
    line(name, r, true);
  }
  line("leaf, key <= 8 bytes", leaves_short, false);
  line("leaf, key > 8 bytes", leaves_long, false);
  const AllocStats as = a.Stats();
  std::snprintf(buf, sizeof buf,
                "allocator: %llu bytes in live blocks (%llu retired, not yet freed), %llu in thread caches, "
                "chunks %llu small / %llu large / %llu free of %llu (%llu MiB each)\n",
                (unsigned long long)as.bytes_allocated, (unsigned long long)as.retired_pending,
                (unsigned long long)as.bytes_in_thread_caches, (unsigned long long)as.chunks_small,
                (unsigned long long)as.chunks_large, (unsigned long long)as.chunks_free,
                (unsigned long long)as.chunks_total, (unsigned long long)(Pool::kChunkSize >> 20));
  out += buf;
  return out;
}

Status RoartTree::Check(std::string* report) const {
  auto q = ModeLock(IndexModeLock::kQuiesce);
  uint64_t errors = 0, leaves = 0;
  auto err = [&](const std::string& s) {
    if (report && errors < 20) *report += "roart: " + s + "\n";
    ++errors;
  };
  // (ref, real depth, the key bytes [0, depth) every key below must start with)
  struct Item {
    uint64_t ref;
    uint32_t depth;
    std::string pfx;
    bool here;  // a leaf_here: its key must be exactly pfx
  };
  std::vector<Item> stack;
  stack.push_back({Load(&rb_->root) & kRefMask, 0, "", false});
  auto leaf_ok = [&](uint64_t lref, const Item& it) {
    if (!RefOk(lref)) return err("leaf reference outside the heap"), false;
    const Leaf* l = at<Leaf>(lref);
    if (l->key_len > kMaxKeyLen || !pool_.contains(lref & ~kTagMask, Leaf::SizeFor(l->key_len)))
      return err("leaf with a bad key length"), false;
    const std::string_view k = l->key_view();
    if (k.size() < it.pfx.size() || k.substr(0, it.pfx.size()) != it.pfx) err("leaf key off its path");
    if (it.here && k.size() != it.pfx.size()) err("leaf_here key of the wrong length");
    ++leaves;
    return true;
  };
  while (!stack.empty()) {
    Item it = std::move(stack.back());
    stack.pop_back();
    const uint64_t ref = it.ref;
    if (!ref) continue;
    if (ref & kLeafTag) {
      leaf_ok(ref, it);
      continue;
    }
    if (!RefOk(ref)) {
      err("reference outside the heap");
      continue;
    }
    const NodeHead* n = at(ref);
    const uint8_t t = TypeOf(n);
    if (ref & kArrayTag) {
      if (t != kLeafArray) {
        err("leaf array reference to a block of type " + std::to_string(t));
        continue;
      }
      const auto* la = reinterpret_cast<const LeafArray*>(n);
      const int slots = Slots(n);
      if (slots == 0) {
        err("leaf array with slot count " + std::to_string(n->slots) + " (not a size class, or past the pool)");
        continue;
      }
      if (!format2_ && (ref & kClassBits)) err("a class code in a leaf array reference of a format-1 pool");
      if (format2_ && !(ref & kClassBits)) err("a leaf array reference without its class in a format-2 pool");
      if (format_ < 4 && (ref & kKvBit)) err("a SlotKV bit in a leaf array reference of a pool before format 4");
      if (format_ >= 4 && RefKv(ref) != ArrayKv(n))
        err(std::string("leaf array reference ") + (RefKv(ref) ? "with" : "without") + " a SlotKV area its head " +
            (ArrayKv(n) ? "has" : "has not"));
      if (SlotsOfCode(ref) && SlotsOfCode(ref) != slots)
        err("leaf array reference's class (" + std::to_string(SlotsOfCode(ref)) + " slots) differs from its head (" +
            std::to_string(slots) + ")");
      std::vector<std::string_view> keys;
      uint64_t bm = 0;
      for (int i = 0; i < slots; ++i) {
        const uint64_t s = la->slot[i];
        if (!s) continue;
        bm |= uint64_t(1) << i;
        std::string_view k;
        if (IsInline(s)) {
          uint64_t* v;
          if (!SlotEntry(n, slots, i, s, &k, &v)) {
            err(!kv_ ? "inline slot in a pool of format 1 or 2"
                : ArrayKv(n) ? "inline slot word with a bad length"
                             : "inline slot in a leaf array without a SlotKV area");
            continue;
          }
          if (k.size() < it.pfx.size() || k.substr(0, it.pfx.size()) != it.pfx) err("inline key off its path");
          if (KeyWord(k) != KVs(n, slots)[i].key) err("inline key word not zero-padded");
          ++leaves;
        } else {
          const uint64_t lref = (s & kRefMask) | kLeafTag;
          if (!leaf_ok(lref, it)) continue;
          k = at<Leaf>(lref)->key_view();
          if (ArrayKv(n) && k.size() <= kMaxInlineKey)
            err("a key of at most 8 bytes in a leaf of a leaf array with a SlotKV area (it goes inline)");
        }
        if ((s >> 48) != Fingerprint(k)) err("fingerprint mismatch in a leaf array");
        keys.push_back(k);
      }
      if (keys.empty()) err("empty leaf array linked");
      std::sort(keys.begin(), keys.end());
      if (std::adjacent_find(keys.begin(), keys.end()) != keys.end()) err("duplicate key in a leaf array");
      // The taken-slot bitmap holds every live slot (and the slots emptied in this session).
      if (Fresh(n) && ((n->bitmap & bm) != bm || n->count != uint32_t(__builtin_popcountll(bm))))
        err("leaf array volatile metadata out of date in the current generation");
      continue;
    }
    if (!ValidInner(t) || !pool_.contains(ref, NodeBytes(t))) {
      err("bad node type " + std::to_string(t));
      continue;
    }
    const Hdr h = art::UnpackHdr(n->hdr);
    const uint32_t b = h.branch();
    if (h.depth > it.depth || b < it.depth || b > art::kMaxDepthField) {
      err("node header inconsistent with its depth " + std::to_string(it.depth));
      continue;
    }
    std::string_view any;
    if (!AnyKey(ref, &any)) {
      err("inner node with no leaf below");
      continue;
    }
    if (any.size() < b) {
      err("leaf below a node shorter than its branch position");
      continue;
    }
    const std::string path(any.data(), b);
    if (h.depth == it.depth)
      for (uint32_t j = 0; j < h.plen && j < kInlinePrefix; ++j)
        if (h.prefix[j] != static_cast<unsigned char>(path[it.depth + j])) err("inline prefix byte differs from the keys");
    Entry e[256];
    const int ne = ReadEntries(n, t, e);
    if (ne == 0 && !n->leaf_here) err("inner node with no entry");
    bool seen[256] = {};
    for (int i = 0; i < ne; ++i) {
      if (seen[e[i].first]) err("two entries with one key byte");
      seen[e[i].first] = true;
      stack.push_back({e[i].second, b + 1, path + static_cast<char>(e[i].first), false});
    }
    if (Fresh(n)) {
      if (n->count != uint32_t(ne)) err("node count out of date in the current generation");
      if (t == kN48) {
        const auto* idx = Index48(const_cast<NodeHead*>(n));
        const uint64_t* ch = Children(n, t);
        for (int c = 0; c < 256; ++c) {
          const unsigned k = idx[c];
          const bool has = k && k <= 48 && ch[k - 1] && ((ch[k - 1] >> 48) & 0xff) == unsigned(c);
          if (has != seen[c]) err("NODE48 index out of date in the current generation");
        }
      }
    }
    if (n->leaf_here) stack.push_back({n->leaf_here & kRefMask, b, path, true});
  }
  const int64_t c = count_.Known();
  if (errors == 0 && c >= 0 && static_cast<uint64_t>(c) != leaves)
    err("Size() says " + std::to_string(c) + " but the tree holds " + std::to_string(leaves) + " keys");
  if (errors) return Status::Corruption("roart: " + std::to_string(errors) + " invariant violation(s)");
  return Status::OK();
}

// ---- visit (post-crash GC) ------------------------------------------------------------------------
// Follows the readers' protocol: inside an epoch of the pool, every node's words read between
// ReadLockOrRestart and CheckOrRestart of its version (retried until they are one snapshot);
// it needs no volatile metadata (it reads every entry word and slot), so it runs beside
// writers and before any node's metadata was rebuilt.
void RoartTree::Visit(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark) {
  auto block_ok = [&](uint64_t off, uint64_t len) { return HeapBlockOk(pool, off, len); };
  if (!block_ok(root_off, sizeof(RootBlock))) return;
  sync::EpochGuard eg(const_cast<Pool&>(pool).allocator().epoch());
  VisitModeLock visit_guard(&pool, root_off);
  mark(root_off);
  const auto* rb = pool.at<RootBlock>(root_off);
  const bool values_are_blocks = (rb->flags & kValuesAreBlocks) != 0;
  const int fmt = FormatOf(rb->magic);
  std::vector<uint64_t> values;  // inline keys' values (value blocks)
  std::vector<uint64_t> stack{Load(&rb->root) & kRefMask};
  std::vector<uint64_t> refs;
  refs.reserve(257);
  uint64_t budget = pool.size() / 16 + 1024;  // bound on a corrupted (cyclic) structure
  while (!stack.empty() && budget--) {
    const uint64_t ref = stack.back();
    stack.pop_back();
    if (!ref || !TagOk(ref & kTagMask)) continue;
    const uint64_t off = ref & ~kTagMask;
    if (ref & kLeafTag) {
      if (!block_ok(off, sizeof(Leaf))) continue;
      mark(off);
      if (values_are_blocks) {
        const uint64_t v = Load(&pool.at<Leaf>(off)->value);
        if (block_ok(v, 64)) mark(v);
      }
      continue;
    }
    if (!block_ok(off, sizeof(NodeHead))) continue;
    const auto* n = pool.at<NodeHead>(off);
    const uint8_t t = TypeOf(n);
    if ((ref & kArrayTag) ? t != kLeafArray : !ValidInner(t)) continue;
    const Shape sh = t == kLeafArray ? ArrayShape(pool, n, fmt) : Shape{0, false};
    const int slots = sh.slots;
    const bool kv = sh.kv;
    if (!block_ok(off, t == kLeafArray ? LeafArrayBytes(slots, kv) : NodeBytes(t)) || (t == kLeafArray && !slots)) continue;
    if (SlotsOfCode(ref) && SlotsOfCode(ref) != slots) continue;  // a damaged reference
    mark(off);
    sync::NodeLock(n).ReadSnapshot([&] {
      refs.clear();
      values.clear();
      if (t == kLeafArray) {
        const auto* la = reinterpret_cast<const LeafArray*>(n);
        for (int i = 0; i < slots; ++i) {
          const uint64_t s = Load(&la->slot[i]);
          if (!s) continue;
          if (!IsInline(s)) refs.push_back((s & kRefMask) | kLeafTag);
          else if (kv && values_are_blocks) values.push_back(Load(&KVs(n, slots)[i].value));
        }
      } else {
        if (const uint64_t lh = Load(&n->leaf_here)) refs.push_back(lh & kRefMask);
        Entry e[256];
        const int ne = ReadEntries(n, t, e);
        for (int i = 0; i < ne; ++i) refs.push_back(e[i].second);
      }
    });
    stack.insert(stack.end(), refs.begin(), refs.end());
    for (const uint64_t v : values)
      if (block_ok(v, 64)) mark(v);
  }
}

namespace {
Status CreateRoart(Pool& pool, const IndexOptions& opts, uint64_t* root_off) { return RoartTree::Create(pool, opts, root_off); }
Status OpenRoart(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) { return RoartTree::Open(pool, root_off, out); }

const IndexKind kRoartKind{
    "roart",
    kind_id::kRoart,
    "ROART: persistent ART with leaf arrays, entry compression, lazily rebuilt metadata, OLC (FAST 2021)",
    /*ordered=*/true,
    &CreateRoart,
    &OpenRoart,
    &RoartTree::Visit,
};
}  // namespace

}  // namespace wort::roart

// Listed in the table of built-in kinds (BuiltinIndexKinds, src/index/registry.cc).
const wort::IndexKind* wort::builtin_kinds::Roart() { return &wort::roart::kRoartKind; }
