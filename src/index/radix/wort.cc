// WORT: Write Optimal Radix Tree. Design, invariants and write orders: index/radix/wort.h.
#include "index/radix/wort.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <type_traits>
#include <vector>

#include "index/batched_scan.h"
#include "index/kind_ids.h"
#include "index/lazy_count.h"
#include "index/registry.h"
#include "index/root_block.h"
#include "sync/sync.h"
#include "wort/alloc.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort::radix {

namespace {

std::atomic<int> g_interrupt{0};

// Consumes the one-shot test interrupt `what` if it is armed.
bool TakeInterrupt(WortInterrupt what) {
  int expected = static_cast<int>(what);
  return g_interrupt.compare_exchange_strong(expected, 0);
}

inline uint64_t PackHeader(const CompressionHeader& h) {
  uint64_t w;
  std::memcpy(&w, &h, 8);
  return w;
}
inline CompressionHeader UnpackHeader(uint64_t w) {
  CompressionHeader h;
  std::memcpy(&h, &w, 8);
  return h;
}
inline size_t Branch(const CompressionHeader& h) { return size_t{h.depth} + h.prefix_len; }
// FindLeaf reads depth and prefix_len as the packed word's low 32 bits.
static_assert(offsetof(CompressionHeader, depth) == 0 && offsetof(CompressionHeader, prefix_len) == 2 &&
              std::endian::native == std::endian::little);

// Partial keys of a byte string at span kSpan (4: two per byte, high nibble first; 8: bytes).
template <unsigned kSpan>
struct Partial {
  static_assert(kSpan == 4 || kSpan == 8);
  static constexpr unsigned kPerByte = 8 / kSpan;
  static constexpr size_t kInlineCap = 32 / kSpan;  // partial keys in the prefix array
  static unsigned Get(const uint8_t* p, size_t i) {
    if constexpr (kSpan == 8) {
      return p[i];
    } else {
      return (p[i >> 1] >> ((~i & 1u) << 2)) & 0xFu;
    }
  }
  static void Set(uint8_t* p, size_t i, unsigned v) {
    if constexpr (kSpan == 8) {
      p[i] = static_cast<uint8_t>(v);
    } else {
      const unsigned shift = (~i & 1u) << 2;
      p[i >> 1] = static_cast<uint8_t>((p[i >> 1] & ~(0xFu << shift)) | ((v & 0xFu) << shift));
    }
  }
  static constexpr size_t Count(size_t bytes) { return bytes * kPerByte; }
};

// A key seen as partial keys.
template <unsigned kSpan>
struct KeyRef {
  const uint8_t* p;
  size_t len;   // bytes
  size_t n;     // partial keys
  explicit KeyRef(std::string_view k)
      : p(reinterpret_cast<const uint8_t*>(k.data())), len(k.size()), n(Partial<kSpan>::Count(k.size())) {}
  explicit KeyRef(const WortLeaf* l) : KeyRef(std::string_view(l->key(), l->key_len)) {}
  unsigned at(size_t i) const { return Partial<kSpan>::Get(p, i); }
  std::string_view view() const { return {reinterpret_cast<const char*>(p), len}; }
  bool operator==(const KeyRef& o) const { return len == o.len && (len == 0 || std::memcmp(p, o.p, len) == 0); }
};

// An 8-byte key held in one big-endian word: partial key i is one shift and a mask (the lookup's
// fixed-width path; FindLeaf takes either key type).
template <unsigned kSpan>
struct WordKey {
  const uint8_t* p;
  static constexpr size_t len = 8;
  static constexpr size_t n = Partial<kSpan>::Count(8);
  uint64_t w;  // the key's bytes, first byte most significant
  explicit WordKey(std::string_view k) : p(reinterpret_cast<const uint8_t*>(k.data())) {
    std::memcpy(&w, p, 8);
    if constexpr (std::endian::native == std::endian::little) w = __builtin_bswap64(w);
  }
  // REQUIRES: i < n. (Shifted up, then down: two shifts and no mask.)
  unsigned at(size_t i) const { return static_cast<unsigned>((w << (kSpan * i)) >> (64 - kSpan)); }
  // The same for a constant position (the unrolled steps of FindLeafIn): a rotate and a mask.
  unsigned at_const(size_t i) const {
    return static_cast<unsigned>(std::rotl(w, static_cast<int>(kSpan * (i + 1))) & ((1u << kSpan) - 1));
  }
};

// Node depth bound: a path visits at most one node per partial-key position plus one.
template <unsigned kSpan>
constexpr size_t kMaxLevels = kMaxKeyLen * (8 / kSpan) + 2;

size_t LeafBytes(size_t key_len) { return sizeof(WortLeaf) + key_len; }

// ---------------------------------------------------------------------------------------------
template <unsigned kSpan>
class WortTree final : public Index {
 public:
  using Node = WortNode<kSpan>;
  using P = Partial<kSpan>;
  using Key = KeyRef<kSpan>;
  static constexpr unsigned kFanout = Node::kFanout;
  static constexpr unsigned kSlots = Node::kSlots;
  static constexpr size_t kInlineCap = P::kInlineCap;

  WortTree(Pool& pool, uint64_t root_off)
      : pool_(pool),
        rb_(pool.at<WortRootBlock>(root_off)),
        key_type_(static_cast<KeyType>(rb_->key_type)),
        key_min_(key_type_ == KeyType::kU64 ? 8 : 0),
        key_span_(key_type_ == KeyType::kU64 ? 0 : kMaxKeyLen),
        epoch_(pool.allocator().epoch()),
        fast_last_(FastLast()),
        mu_ptr_(IndexLock(&pool, root_off)),
        mu_(*mu_ptr_) {}

  std::string_view kind() const override { return "wort"; }
  // Keeps ClaimSoleHandle's token for this handle's life (registry.h: one handle per index).
  void KeepSoleHandle(std::shared_ptr<void> token) { sole_handle_ = std::move(token); }
  KeyType key_type() const override { return key_type_; }

  Status Insert(std::string_view key, uint64_t value) override { return Write(key, value, false, nullptr); }
  Status Upsert(std::string_view key, uint64_t value, bool* inserted) override {
    return Write(key, value, true, inserted);
  }
  Status Exchange(std::string_view key, uint64_t value, bool* inserted, uint64_t* old) override {
    return Write(key, value, true, inserted, old);
  }
  // An 8-byte key (valid for both key types) takes a path that makes no call (issue 31, h63: a
  // function with a call saves and restores six registers on every lookup): the epoch entered
  // only if the thread's slot is cached (EpochCachedGuard), the walk of FindLeafIn<true>, which
  // gives kSlowRef where it would call BlockOk. Anything else - another key length, the
  // global-lock mode, an uncached slot, kSlowRef - takes LookupGeneral, which starts over (a
  // lookup reads only; the one that answers is LookupGeneral's, in its own epoch).
  Status Lookup(std::string_view key, uint64_t* value) const override {
    if (key.size() != 8 || global_lock_) [[unlikely]] return LookupGeneral(key, value);
    uint64_t ref = kSlowRef;
    {
      sync::EpochCachedGuard eg(epoch_);
      if (eg.entered()) [[likely]] {
        const char* const base = pool_.base();  // (read once: see LookupInEpoch)
        ref = FindLeafIn<true>(base, WordKey<kSpan>(key));
        if (ref != kSlowRef && ref != 0) [[likely]] {
          // ref - kLeafTag: RefOffset of a leaf's reference, as an addressing mode's displacement
          *value = pm::load8(&reinterpret_cast<const WortLeaf*>(base + (ref - kLeafTag))->value);
          return Status::OK();
        }
      }
    }  // out of the epoch before any call: nothing but the result's address lives across one
    if (ref == kSlowRef) [[unlikely]] return LookupGeneral(key, value);
    return Status::NotFound("key not found");
  }
  Status Remove(std::string_view key) override {
    WORT_RETURN_IF_ERROR(ValidateKey(key));
    WORT_RETURN_IF_ERROR(WritableCheck());
    sync::EpochGuard eg(epoch_);
    auto wg = ModeLock(IndexModeLock::kWriter);
    Status s;
    for (int attempt = 0; DeleteAttempt(Key(key), &s) == Attempt::kRestart; ++attempt) sync::Backoff(attempt);
    return s;
  }
  Status Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const override;
  uint64_t Size() const override {
    return count_.Get([&] { return ModeLock(IndexModeLock::kQuiesce); }, [&] { return CountLeaves(); });
  }
  Status Check(std::string* report) const override {
    WortCheckInfo info;
    return CheckDetailed(report, &info);
  }
  Status CheckDetailed(std::string* report, WortCheckInfo* info) const;
  IndexStats Stats() const override;
  // SetWortFastBoundForTest: 0 sends every reference to BlockOk (the lookup's fallback).
  void SetFastBoundForTest(uint64_t fast_last) { fast_last_.store(fast_last, std::memory_order_relaxed); }

 private:
  // ---- addressing ----
  Node* NodeAt(uint64_t ref) const { return pool_.at<Node>(RefOffset(ref)); }
  // Whether ref names a whole block: a well-formed, 64-byte-aligned reference inside the pool to
  // a leaf whose key fits (kMaxKeyLen) or to a node. The readers (lookup, scan, count, stats)
  // follow only such references: a damaged image reads as absent keys, never outside the pool.
  [[gnu::noinline, gnu::cold]] bool BlockOk(uint64_t ref) const {
    const uint64_t off = RefOffset(ref);
    if (ref == 0 || !RefWellFormed(ref) || (off & 63) != 0) return false;
    if (!RefIsLeaf(ref)) return pool_.contains(off, sizeof(Node));
    if (!pool_.contains(off, sizeof(WortLeaf))) return false;
    const uint64_t len = pool_.at<WortLeaf>(off)->key_len;
    return len <= kMaxKeyLen && pool_.contains(off, LeafBytes(len));
  }
  WortLeaf* LeafAt(uint64_t ref) const { return pool_.at<WortLeaf>(RefOffset(ref)); }
  static CompressionHeader HeaderOf(const Node* n) { return UnpackHeader(pm::load8(&n->header)); }
  static unsigned PrefixAt(const CompressionHeader& h, size_t j) { return P::Get(h.prefix, j); }
  // Header with depth `depth`, branch `branch`, prefix array from key k's partial keys.
  static CompressionHeader MakeHeader(size_t depth, size_t branch, const Key& k) {
    CompressionHeader h{};
    h.depth = static_cast<uint16_t>(depth);
    h.prefix_len = static_cast<uint16_t>(branch - depth);
    const size_t inl = std::min(branch - depth, kInlineCap);
    for (size_t j = 0; j < inl; ++j) P::Set(h.prefix, j, k.at(depth + j));
    return h;
  }
  // Slot of a key in a node branching at position b (end slot if the key ends there).
  static unsigned SlotFor(const Key& k, size_t b) { return k.n == b ? 0u : 1u + k.at(b); }

  Status ValidateKey(std::string_view key) const {
    if (key.size() > kMaxKeyLen)
      return Status::InvalidArgument("key of " + std::to_string(key.size()) + " bytes exceeds the maximum of " +
                                     std::to_string(kMaxKeyLen));
    if (key_type_ == KeyType::kU64 && key.size() != 8)
      return Status::InvalidArgument("this index takes 8-byte keys, got " + std::to_string(key.size()) + " bytes");
    return Status::OK();
  }
  Status WritableCheck() const {
    if (pool_.read_only()) return Status::InvalidArgument("pool is open read-only");
    return Status::OK();
  }

  // A leaf below `ref` (itself if it is a leaf), taking the first non-null slot at each node;
  // 0 if the walk meets an empty node or runs too deep (corruption).
  uint64_t AnyLeaf(uint64_t ref) const {
    for (size_t level = 0; ref != 0 && level < kMaxLevels<kSpan>; ++level) {
      if (!BlockOk(ref)) return 0;
      if (RefIsLeaf(ref)) return ref;
      const Node* n = NodeAt(ref);
      uint64_t next = 0;
      for (unsigned s = 0; s < kSlots && next == 0; ++s) next = pm::load8(&n->slot[s]);
      ref = next;
    }
    return 0;
  }

  using Attempt = sync::Attempt;  // (sync/attempt.h)
  static sync::VersionLock& LockOf(const void* p) { return sync::NodeLock(p); }
  // Writers and quiescers use the pool epoch manager's writer gate (registry.h, issue 31).
  IndexModeLock ModeLock(IndexModeLock::Role r) const { return IndexModeLock(mu_, &epoch_, global_lock_, r); }
  [[gnu::noinline]] Status LookupGeneral(std::string_view key, uint64_t* value) const {
    if (key.size() - key_min_ > key_span_) [[unlikely]] return ValidateKey(key);  // (ValidateKey's rules, one test)
    if (global_lock_) [[unlikely]] return LookupGlobalLock(key, value);
    sync::EpochGuard eg(epoch_);
    return LookupInEpoch(key, value);
  }
  WORT_OPTIMISTIC_INLINE Status LookupInEpoch(std::string_view key, uint64_t* value) const {
    // The mapping's base, read once here: FindLeafIn's acquire loads would otherwise make the
    // compiler read it again for the value (a pool's mapping never moves while it is open).
    const char* const base = pool_.base();
    const uint64_t ref = key.size() == 8 ? FindLeafIn(base, WordKey<kSpan>(key)) : FindLeafIn(base, Key(key));
    if (ref == 0) return Status::NotFound("key not found");
    *value = pm::load8(&reinterpret_cast<const WortLeaf*>(base + RefOffset(ref))->value);
    return Status::OK();
  }
  [[gnu::noinline]] Status LookupGlobalLock(std::string_view key, uint64_t* value) const {
    sync::EpochGuard eg(epoch_);
    auto g = ModeLock(IndexModeLock::kReader);  // shared in global-lock mode
    return LookupInEpoch(key, value);
  }
  // old (may be null): the value an Upsert replaced (Exchange).
  Status Write(std::string_view key, uint64_t value, bool upsert, bool* inserted, uint64_t* old = nullptr) {
    // ValidateKey's rules as one test (Lookup's); a Status is built only for a bad key.
    if (key.size() - key_min_ > key_span_) [[unlikely]] return ValidateKey(key);
    if (pool_.read_only()) [[unlikely]] return WritableCheck();
    return WriteChecked(key, value, upsert, inserted, old);
  }
  // Write's body: one named result returned on every path (issue 31: with Write's early returns
  // beside it, the compiler could not construct it in place and moved it, a memcpy call).
  Status WriteChecked(std::string_view key, uint64_t value, bool upsert, bool* inserted, uint64_t* old) {
    Status s;
    sync::EpochGuard eg(epoch_);
    auto wg = ModeLock(IndexModeLock::kWriter);
    uint64_t loff = 0;  // the new leaf, written and persisted once, kept across restarts
    for (int attempt = 0; PutAttempt(Key(key), value, upsert, inserted, old, &loff, &s) == Attempt::kRestart; ++attempt)
      sync::Backoff(attempt);
    if (loff) pool_.allocator().Free(loff);  // never published
    return s;
  }
  // The leaf holding k (0: none); reads no lock and no version word, never restarts (ROWEX:
  // the argument is above its definition).
  // K: Key, or WordKey for an 8-byte key.
  template <class K>
  uint64_t FindLeaf(const K& k) const { return FindLeafIn(pool_.base(), k); }
  // The same with the pool's base given (pool_.base()). kNoCall: kSlowRef instead of a call (to
  // BlockOk, for a reference the fast check does not vouch for).
  static constexpr uint64_t kSlowRef = ~uint64_t{0};  // never a reference (its low bits)
  template <bool kNoCall = false, class K>
  WORT_OPTIMISTIC_INLINE uint64_t FindLeafIn(const char* base, const K& k) const;  // inline: it is the whole lookup
  Attempt PutAttempt(const Key& k, uint64_t value, bool upsert, bool* inserted, uint64_t* old, uint64_t* loff,
                     Status* out);
  Attempt DeleteAttempt(const Key& k, Status* out);
  bool CollectBatch(std::string_view start, bool exclusive, const std::string_view* end, size_t want,
                    ScanBatch<WortLeaf>* out, bool* past_end) const;
  Status RecoverHeader(Node* n, size_t depth);
  // A writer's step onto inner node n, whose compressed path should start at `expected`: reads
  // n's version (*nv) and validates the parent's (pl, pv), then n's header (*h). A stale header
  // (an interrupted split or collapse) is repaired first, under n's lock (Algorithm 2), and the
  // attempt starts again. nullopt: go on; otherwise the attempt's result (kRestart, or Done with
  // the repair's error).
  std::optional<Attempt> EnterNode(Node* n, sync::VersionLock& nl, const sync::VersionLock& pl, uint64_t pv,
                                   size_t expected, const sync::AttemptEnd& end, uint64_t* nv, CompressionHeader* h);
  Status NewLeaf(const Key& k, uint64_t value, uint64_t* off);
  uint64_t CountLeaves() const;
  void CountUp() {
    count_.Added();
  }
  void CountDown() {
    count_.Removed();
  }

  // FindLeaf's fast bound (see there): a 64-byte-aligned reference r with r - 1 < fast_last_
  // names a block with a whole node's room below the pool's size. 0 sends every reference to
  // BlockOk. Only grows, as the pool's size does, so any value once stored stays safe (a block
  // beyond it takes BlockOk, which re-reads the size); writers raise it when they allocate
  // beyond it (NoteBlock; only this handle allocates the index's blocks: one handle per index,
  // registry.h), so a lookup reads one word instead of the pool's header.
  uint64_t FastLast() const {
    const uint64_t size = pool_.size();
    return size > sizeof(Node) + 1 ? size - sizeof(Node) - 1 : 0;
  }
  void NoteBlock(uint64_t off) {
    uint64_t cur = fast_last_.load(std::memory_order_relaxed);
    if (off - 1 < cur) [[likely]] return;
    const uint64_t last = FastLast();
    while (last > cur && !fast_last_.compare_exchange_weak(cur, last, std::memory_order_relaxed)) {
    }
  }

  Pool& pool_;
  WortRootBlock* rb_;
  const KeyType key_type_;
  // The key lengths this index takes, as one unsigned compare: size - key_min_ <= key_span_
  // (kU64: exactly 8; bytes: 0..kMaxKeyLen). Lookup's first test.
  const uint64_t key_min_, key_span_;  // 64-bit: the test is a sub and a cmp with memory operands
  // The pool's epoch manager, found once (not pool -> allocator -> manager at every operation).
  sync::EpochManager& epoch_;
  std::atomic<uint64_t> fast_last_;
  std::shared_ptr<void> sole_handle_;
  // Concurrency (art_tree.h describes the same scheme): lock-free readers and per-node write
  // locks (optimistic lock coupling, src/sync/sync.h) with DRAM version words keyed by node
  // address; this lock only lets Check/Stats/Size's count quiesce writers, or, in global-lock
  // mode (SetGlobalIndexLock), is the old single lock (readers shared, writers exclusive).
  std::shared_ptr<std::shared_mutex> mu_ptr_;
  std::shared_mutex& mu_;
  const bool global_lock_ = GlobalIndexLock();
  LazyKeyCount count_;  // not counted yet this session until the first Size() (lazy_count.h: striped)
};

// ---- Lookup ----------------------------------------------------------------------------------
// A lookup reads no version word (ROWEX, sync.h R2's exception; ArtTree::LookupAttempt makes the
// same argument for WOART and ART+CoW). Every in-place change a WORT writer makes is one 8-byte
// store between consistent states - a slot (leaf or node published after it was persisted, 0 on a
// remove, the sibling on a collapse), a leaf's value, a node's header (the split's and
// RecoverHeader's) - and nothing else in a published node or leaf ever changes. What each
// change can show a reader that reads no version:
//   - a split (Algorithm 1) stores N's new header before the parent slot commits P: a reader that
//     came to N through the old slot sees either the old header (depth = the depth it expects,
//     prefix array of the old path: compared as usual) or the new one (depth larger than it
//     expects: the stale-header rule skips the prefix array, as after a crash). The branch
//     position is the same in both (I3), so a key present under N is reached either way.
//   - a collapse stores the parent slot := sibling S and never clears N's slots: a reader already
//     in N still reaches S. If RecoverHeader then rewrites S's header (depth smaller than N's path
//     expects), that header's depth differs from the expected one and the same rule skips its
//     prefix; its branch did not move.
//   - a slot emptied by a remove and refilled by an insert: the reader may follow the new child,
//     only if the key it looks for was removed during the lookup (a present key's slot is never
//     reused), and the full-key comparison at the leaf then answers "not found", which the
//     remove allows.
// So a key present for the whole lookup is found and a key absent for the whole lookup is not.
// Every word is read once with an acquire load (pm::load8) before what it names, so a node or
// leaf reached is seen as it was persisted before its publication; the blocks read stay
// allocated until the lookup leaves its epoch (sync.h R3); positions come from the key and the
// header (Branch <= kMaxKeyLen partial keys), and the loop is bounded by kMaxLevels. Every read
// here is either an acquire load or of memory written before the release store that published
// it, so the function is not hidden from ThreadSanitizer (no WORT_OPTIMISTIC_READ).
template <unsigned kSpan>
template <bool kNoCall, class K>
inline uint64_t WortTree<kSpan>::FindLeafIn(const char* const base, const K& k) const {
  // A damaged image (corrupt_image_test) reads as absent keys, never outside the pool. The fast
  // check - a 64-byte-aligned block with a whole node's room below the pool's size as the open
  // or a writer last saw it (fast_last_, which only grows) - holds for every
  // block of an undamaged tree but the last few of a pool and those allocated beyond the bound
  // a moment ago; BlockOk decides those (it re-reads the size, which only grows). A leaf's key
  // beyond its block's first 64 bytes is checked below.
  //
  // The fast check in one compare (issue 31, h63): rotated right by 6, a reference with its six
  // low bits clear is its block number (offset / 64), and any other has one of its top six bits
  // set, so rotr(ref, 6) - 1 < fast_last / 64 holds exactly when ref is an inner node's
  // reference (low bits clear), not 0 (the null reference: 0 - 1 wraps around) and not past
  // fast_last - the old (ref & 63) == 0 && ref - 1 < fast_last. The same on ref - 1 vouches for a
  // leaf's reference (ref - 1 is its offset when the leaf tag is its only low bit).
  const uint64_t fast_blocks = fast_last_.load(std::memory_order_relaxed) >> 6;
  auto inner_fast = [fast_blocks](uint64_t r) { return std::rotr(r, 6) - 1 < fast_blocks; };
  // The leaf's: rotr(r, 6) of a leaf's reference is its block number plus 2^58 (the tag,
  // rotated), which the exclusive or takes away; any other reference keeps or gains a top bit
  // (an inner node's gains bit 58; a malformed one keeps one of bits 59-63; 1, the leaf at offset
  // 0, gives 2^59 - 1). The same as rotr(r - 1, 6) - 1 < fast_blocks, from inner_fast's rotate.
  auto leaf_fast = [fast_blocks](uint64_t r) {
    return ((std::rotr(r, 6) - 1) ^ (uint64_t{kLeafTag} << 58)) < fast_blocks;
  };
  // The whole-key comparison at a leaf (its first 64 bytes are in the pool); the leaf's reference
  // when it holds k, else 0. l is base + ref - 1 (the leaf tag, its reference's only low bit:
  // RefOffset), so that the offset is an addressing mode's displacement.
  auto leaf_result = [&](uint64_t r, const WortLeaf* l) -> uint64_t {
    if (l->key_len != k.len) return 0;
    if (k.len > 64 - sizeof(WortLeaf) && !pool_.contains(RefOffset(r), LeafBytes(k.len))) [[unlikely]]
      return 0;
    if (k.len == 8) {  // the common fixed-width case as one word compare, no memcmp call
      uint64_t a, c;
      std::memcpy(&a, l->key(), 8);
      std::memcpy(&c, k.p, 8);
      return a == c ? r : 0;
    }
    return k.len == 0 || std::memcmp(l->key(), k.p, k.len) == 0 ? r : 0;
  };
  uint64_t ref = pm::load8(&rb_->root);
  uint32_t expected = 0;  // 32 bits: the header's (depth, prefix_len) word compares in one instruction
  if constexpr (std::is_same_v<K, WordKey<kSpan>>) {
    // An 8-byte key (issue 31, h63): the common steps unrolled, one per partial-key position -
    // an inner node the fast check vouches for whose header says depth i and no compressed path
    // (its low 32 bits equal i), entered through slot[1 + partial key i]. Position i is a
    // constant in each copy: no counter, a constant shift for the partial key, an immediate
    // compare for the header, and no end-of-key test (i < k.n). Any other step (a leaf, a
    // compressed path, a stale header, a block near the pool's end, the null reference) leaves
    // for the general loop below at the same (ref, expected = i), which does what it did before.
    uint32_t i = 0;
#pragma GCC unroll 16
    for (; i < K::n; ++i) {
      if (!inner_fast(ref)) [[unlikely]] break;
      const auto* n = reinterpret_cast<const Node*>(base + ref);
      if (static_cast<uint32_t>(pm::load8(&n->header)) != i) [[unlikely]] break;
      const uint64_t* const children = &n->slot[1];  // slot[1 + partial]: one addressing mode
      ref = pm::load8(&children[k.at_const(i)]);
    }
    // Where most walks end: a leaf the fast check vouches for (here, so that the general loop's
    // first test is not made again).
    if (leaf_fast(ref)) [[likely]]
      return leaf_result(ref, reinterpret_cast<const WortLeaf*>(base + (ref - kLeafTag)));
    expected = i;
  }
  // Bounded without a counter on the common step: every step through slot[1 + partial] moves
  // `expected` forward (b >= expected below, then expected = b + 1 <= k.n), so there are at most
  // k.n of them. Only a slot[0] step leaves it where it is (b == k.n), so only those are counted:
  // a damaged image could chain them forever.
  size_t terminal_steps = 0;
  for (;;) {
    // One test for the common step, an inner node the fast check vouches for.
    if (!inner_fast(ref)) [[unlikely]] {
      if (!leaf_fast(ref)) {  // not a leaf the fast check vouches for: the full check
        if (ref == 0) return 0;  // an empty slot: no such key
        if constexpr (kNoCall) return kSlowRef;
        if (!BlockOk(ref)) return 0;
      }
      // the optimistic part of the path, compared here with the whole key
      if (RefIsLeaf(ref)) return leaf_result(ref, reinterpret_cast<const WortLeaf*>(base + RefOffset(ref)));
      // else an inner node near the pool's end, that BlockOk vouched for
    }
    const auto* n = reinterpret_cast<const Node*>(base + ref);  // an inner node's reference is its offset
    const uint64_t hw = pm::load8(&n->header);
    size_t b = expected;
    // The common node: depth as expected and no compressed path - the header's low 32 bits
    // (depth, then prefix_len: PackHeader's layout) equal `expected`, in one compare.
    if (static_cast<uint32_t>(hw) != expected) [[unlikely]] {
      const CompressionHeader h = UnpackHeader(hw);
      b = Branch(h);
      if (h.depth == expected) {  // a compressed path (prefix_len > 0)
        if (b > k.n) return 0;    // every key below is longer than this one
        // Pessimistic part: the inline prefix array.
        const size_t e = std::min(b, expected + kInlineCap);
        for (size_t i = expected; i < e; ++i)
          if (k.at(i) != PrefixAt(h, i - expected)) return 0;
      } else if (b < expected) {
        return 0;  // impossible (I3: a branch never moves); Check reports it
      }
      // else: a header whose depth is not the expected one (I4, or a split/collapse under way):
      // skip the prefix array; the branch position is still right (I3).
    }
    if (b >= k.n) [[unlikely]] {
      if (b > k.n || ++terminal_steps > kMaxLevels<kSpan>) return 0;  // b > k.n: every key below is longer
      ref = pm::load8(&n->slot[0]);
      expected = static_cast<uint32_t>(b);
      continue;
    }
    const uint64_t* const children = &n->slot[1];  // slot[1 + partial]: one addressing mode
    ref = pm::load8(&children[k.at(b)]);
    expected = static_cast<uint32_t>(b + 1);
  }
}

// ---- Insert / Upsert ---------------------------------------------------------------------------
template <unsigned kSpan>
Status WortTree<kSpan>::NewLeaf(const Key& k, uint64_t value, uint64_t* off) {
  WORT_RETURN_IF_ERROR(pool_.allocator().Alloc(LeafBytes(k.len), off));
  NoteBlock(*off);
  WortLeaf* l = pool_.at<WortLeaf>(*off);
  l->value = value;
  l->key_len = static_cast<uint32_t>(k.len);
  l->reserved = 0;
  if (k.len == 8) std::memcpy(l->key(), k.p, 8);  // one word, no memcpy call
  else if (k.len) std::memcpy(l->key(), k.p, k.len);
  return Status::OK();
}

// One optimistic attempt; a write locks the block holding the slot it replaces (pl) and, for
// a split, the node whose header it changes. *loff: the new leaf (written and persisted once,
// then kept across restarts); 0 once published.
template <unsigned kSpan>
WORT_OPTIMISTIC_READ typename WortTree<kSpan>::Attempt WortTree<kSpan>::PutAttempt(const Key& k, uint64_t value, bool upsert,
                                                             bool* inserted, uint64_t* prev, uint64_t* loff,
                                                             Status* out) {
  Allocator& alloc = pool_.allocator();
  const sync::AttemptEnd end(out);
  auto new_leaf = [&]() -> Status {
    if (*loff) return Status::OK();
    uint64_t off;
    WORT_RETURN_IF_ERROR(NewLeaf(k, value, &off));  // persisted by the commit path below
    *loff = off;
    return Status::OK();
  };
  auto added = [&] {
    *loff = 0;
    CountUp();
    if (inserted) *inserted = true;
    return end.Done(Status::OK());
  };
  sync::VersionLock* pl = &LockOf(rb_);
  uint64_t pv;
  if (!pl->ReadLockOrRestart(&pv)) return Attempt::kRestart;
  uint64_t* slot = &rb_->root;  // the slot that holds `ref`
  size_t expected = 0;          // expected depth of a node in *slot
  for (size_t level = 0; level < kMaxLevels<kSpan>; ++level) {
    const uint64_t ref = pm::load8(slot);
    if (!pl->CheckOrRestart(pv)) return Attempt::kRestart;
    if (ref == 0) {
      // Insert into an empty slot: write leaf -> persist -> COMMIT store8(slot) -> persist.
      if (Status st = new_leaf(); !st.ok()) return end.Done(st);
      if (!pl->UpgradeToWriteLock(pv)) return Attempt::kRestart;
      pm::persist(pool_.at<WortLeaf>(*loff), LeafBytes(k.len));
      pm::store8(slot, MakeLeafRef(*loff));
      pm::persist(slot, 8);
      pl->WriteUnlock();
      return added();
    }

    if (RefIsLeaf(ref)) {
      WortLeaf* old = LeafAt(ref);
      const Key ok(old);
      if (ok == k) {
        if (!upsert) return end.Done(Status::AlreadyExists("key exists"));
        // Upsert: COMMIT store8(value) -> persist (under the slot's lock: ordered with Remove).
        if (!pl->UpgradeToWriteLock(pv)) return Attempt::kRestart;
        if (prev) *prev = pm::load8(&old->value);  // under the lock: the value this update replaces
        pm::store8(&old->value, value);
        pm::persist(&old->value, 8);
        pl->WriteUnlock();
        if (inserted) *inserted = false;
        return end.Done(Status::OK());
      }
      // The keys agree on [0, expected) (checked on the way down); find where they part.
      size_t m = expected;
      while (m < k.n && m < ok.n && k.at(m) == ok.at(m)) ++m;
      if (m == k.n && m == ok.n) return end.Done(Status::Corruption("leaf in the wrong slot"));
      if (Status st = new_leaf(); !st.ok()) return end.Done(st);
      if (!pl->UpgradeToWriteLock(pv)) return Attempt::kRestart;
      uint64_t noff;
      if (Status st = alloc.AllocZeroed(sizeof(Node), &noff); !st.ok()) {
        pl->WriteUnlock();
        return end.Done(st);
      }
      NoteBlock(noff);
      Node* nn = pool_.at<Node>(noff);
      nn->header = PackHeader(MakeHeader(expected, m, k));
      nn->slot[SlotFor(ok, m)] = ref;
      nn->slot[SlotFor(k, m)] = MakeLeafRef(*loff);
      // write leaf + node -> persist -> COMMIT store8(slot) -> persist.
      pm::flush(pool_.at<WortLeaf>(*loff), LeafBytes(k.len));
      pm::flush(nn, sizeof(Node));
      pm::fence();
      pm::store8(slot, MakeNodeRef(noff));
      pm::persist(slot, 8);
      pl->WriteUnlock();
      return added();
    }

    Node* n = NodeAt(ref);
    sync::VersionLock* nl = &LockOf(n);
    uint64_t nv = 0;
    CompressionHeader h{};
    if (const auto a = EnterNode(n, *nl, *pl, pv, expected, end, &nv, &h)) return *a;
    const size_t b = Branch(h);
    // Find the first position in [expected, b) where the key leaves the compressed path: the
    // inline prefix array first, then (hybrid compression) a leaf for the rest.
    size_t m = b;
    const size_t inl_end = std::min(b, expected + kInlineCap);
    for (size_t i = expected; i < inl_end; ++i) {
      if (i >= k.n || k.at(i) != PrefixAt(h, i - expected)) {
        m = i;
        break;
      }
    }
    const WortLeaf* any = nullptr;  // a leaf below n, fetched when the inline array is not enough
    if (m == b && b > inl_end) {
      const uint64_t lr = AnyLeaf(ref);
      if (!nl->CheckOrRestart(nv)) return Attempt::kRestart;
      if (lr == 0) return end.Done(Status::Corruption("inner node without leaves"));
      any = LeafAt(lr);
      const Key ak(any);
      if (ak.n < b) return end.Done(Status::Corruption("leaf shorter than its node's branch position"));
      for (size_t i = inl_end; i < b; ++i) {
        if (i >= k.n || k.at(i) != ak.at(i)) {
          m = i;
          break;
        }
      }
    }

    if (m < b) {
      // Algorithm 1 (split): new parent P at [expected, m) holding the new leaf and n; n's header
      // shrinks to start at m + 1. Locks: the slot's block and n.
      if (!any) {
        const uint64_t lr = AnyLeaf(ref);
        if (!nl->CheckOrRestart(nv)) return Attempt::kRestart;
        if (lr == 0) return end.Done(Status::Corruption("inner node without leaves"));
        any = LeafAt(lr);
      }
      const Key ak(any);
      if (ak.n < b) return end.Done(Status::Corruption("leaf shorter than its node's branch position"));
      if (Status st = new_leaf(); !st.ok()) return end.Done(st);
      if (!pl->UpgradeToWriteLock(pv)) return Attempt::kRestart;
      if (nl != pl && !nl->UpgradeToWriteLock(nv)) {
        pl->WriteUnlock();
        return Attempt::kRestart;
      }
      if (nl == pl && nv != pv) {
        pl->WriteUnlock();
        return Attempt::kRestart;
      }
      auto unlock = [&] {
        if (nl != pl) nl->WriteUnlock();
        pl->WriteUnlock();
      };
      uint64_t poff;
      if (Status st = alloc.AllocZeroed(sizeof(Node), &poff); !st.ok()) {
        unlock();
        return end.Done(st);
      }
      NoteBlock(poff);
      Node* parent = pool_.at<Node>(poff);
      parent->header = PackHeader(MakeHeader(expected, m, k));  // k agrees with n on [expected, m)
      parent->slot[SlotFor(k, m)] = MakeLeafRef(*loff);
      parent->slot[1 + ak.at(m)] = ref;  // n, unchanged
      const CompressionHeader nh = MakeHeader(m + 1, b, ak);
      // Algorithm 1 lines 7-12: N.Hdr := tmpHdr; flush newLeaf, newParent, N.Hdr; fence.
      // From this store until the commit, n's header is stale (I4), which readers tolerate.
      pm::store8(&n->header, PackHeader(nh));
      pm::flush(pool_.at<WortLeaf>(*loff), LeafBytes(k.len));
      pm::flush(parent, sizeof(Node));
      pm::flush(&n->header, 8);
      pm::fence();
      if (TakeInterrupt(WortInterrupt::kSplitBeforeParentUpdate)) {
        // What a crash here leaves: n's header updated, the parent slot unchanged. The new blocks
        // are unreachable; free them as post-crash GC would (the leaf is freed by the caller).
        unlock();
        alloc.Free(poff);
        return end.Done(Status::IOError("test interrupt: split stopped before the parent slot update"));
      }
      // Lines 13-17: COMMIT store8(oldParent.children[]) := newParent -> persist.
      pm::store8(slot, MakeNodeRef(poff));
      pm::persist(slot, 8);
      unlock();
      return added();
    }
    if (!nl->CheckOrRestart(nv)) return Attempt::kRestart;

    // The key follows the whole compressed path: descend.
    if (b == k.n) {
      slot = &n->slot[0];
      expected = b;  // only a leaf lives here; see the leaf case above
    } else {
      slot = &n->slot[1 + k.at(b)];
      expected = b + 1;
    }
    pl = nl;
    pv = nv;
  }
  return end.Done(Status::Corruption("tree deeper than any key allows"));
}

template <unsigned kSpan>
inline std::optional<typename WortTree<kSpan>::Attempt> WortTree<kSpan>::EnterNode(
    Node* n, sync::VersionLock& nl, const sync::VersionLock& pl, uint64_t pv, size_t expected,
    const sync::AttemptEnd& end, uint64_t* nv, CompressionHeader* h) {
  if (!nl.ReadLockOrRestart(nv) || !pl.CheckOrRestart(pv)) return Attempt::kRestart;
  *h = HeaderOf(n);
  if (h->depth == expected) return std::nullopt;
  if (!nl.UpgradeToWriteLock(*nv)) return Attempt::kRestart;
  Status st = RecoverHeader(n, expected);
  nl.WriteUnlock();
  if (!st.ok()) return end.Done(st);
  return Attempt::kRestart;
}

// ---- Algorithm 2: RecoverHeader ----------------------------------------------------------------
template <unsigned kSpan>
Status WortTree<kSpan>::RecoverHeader(Node* n, size_t depth) {
  // Select two leaves from two different slots.
  uint64_t first = 0, second = 0;
  for (unsigned s = 0; s < kSlots && second == 0; ++s) {
    const uint64_t r = pm::load8(&n->slot[s]);
    if (r == 0) continue;
    (first == 0 ? first : second) = r;
  }
  if (second == 0) return Status::Corruption("inner node with fewer than two entries");
  const uint64_t l1 = AnyLeaf(first), l2 = AnyLeaf(second);
  if (l1 == 0 || l2 == 0) return Status::Corruption("inner node without leaves");
  const Key k1(LeafAt(l1)), k2(LeafAt(l2));
  // Their longest common prefix from `depth` is the branch position.
  size_t lcp = depth;
  while (lcp < k1.n && lcp < k2.n && k1.at(lcp) == k2.at(lcp)) ++lcp;
  const CompressionHeader old = HeaderOf(n);
  if (lcp != Branch(old) || lcp - depth > 0xFFFF)
    return Status::Corruption("stale header's branch position disagrees with its leaves");
  // safeHdr -> COMMIT store8(N.Hdr) -> persist.
  pm::store8(&n->header, PackHeader(MakeHeader(depth, lcp, k1)));
  // crash-site: redundant: the repair is idempotent - a repaired header that never reaches memory leaves the stale header (one 8-byte word: old or new), which the next reader repairs again.
  pm::persist(&n->header, 8);
  return Status::OK();
}

// ---- Remove ------------------------------------------------------------------------------------
// One optimistic attempt. Locks: the slot's block for a leaf removal from the root; n for an
// in-place slot clear; for a collapse the parent's block, n and (a node) sibling, whose header
// the repair rewrites. Unlinked blocks are retired (freed after the readers' epochs).
template <unsigned kSpan>
WORT_OPTIMISTIC_READ typename WortTree<kSpan>::Attempt WortTree<kSpan>::DeleteAttempt(const Key& k, Status* out) {
  Allocator& alloc = pool_.allocator();
  const sync::AttemptEnd end(out);
  sync::VersionLock* pl = &LockOf(rb_);
  uint64_t pv;
  if (!pl->ReadLockOrRestart(&pv)) return Attempt::kRestart;
  uint64_t* pslot = &rb_->root;  // the slot holding the current node
  const uint64_t root = pm::load8(pslot);
  if (!pl->CheckOrRestart(pv)) return Attempt::kRestart;
  uint64_t ref = root;
  if (ref == 0) return end.Done(Status::NotFound("key not found"));
  if (RefIsLeaf(ref)) {
    if (!(Key(LeafAt(ref)) == k)) return end.Done(Status::NotFound("key not found"));
    // COMMIT store8(root) := 0 -> persist; then retire.
    if (!pl->UpgradeToWriteLock(pv)) return Attempt::kRestart;
    pm::store8(pslot, 0);
    pm::persist(pslot, 8);
    pl->WriteUnlock();
    alloc.Retire(RefOffset(ref));
    CountDown();
    return end.Done(Status::OK());
  }
  size_t expected = 0;
  for (size_t level = 0; level < kMaxLevels<kSpan>; ++level) {
    Node* n = NodeAt(ref);
    sync::VersionLock* nl = &LockOf(n);
    uint64_t nv = 0;
    CompressionHeader h{};
    if (const auto a = EnterNode(n, *nl, *pl, pv, expected, end, &nv, &h)) return *a;
    const size_t b = Branch(h);
    const size_t inl_end = std::min(b, expected + kInlineCap);
    for (size_t i = expected; i < inl_end; ++i)
      if (i >= k.n || k.at(i) != PrefixAt(h, i - expected)) return end.NotFound(*nl, nv);
    if (b > k.n) return end.NotFound(*nl, nv);
    uint64_t* cslot = &n->slot[SlotFor(k, b)];
    const uint64_t c = pm::load8(cslot);
    if (!nl->CheckOrRestart(nv)) return Attempt::kRestart;
    if (c == 0) return end.Done(Status::NotFound("key not found"));
    if (!RefIsLeaf(c)) {
      pslot = cslot;
      pl = nl;
      pv = nv;
      ref = c;
      expected = b + 1;
      continue;
    }
    if (!(Key(LeafAt(c)) == k)) return end.Done(Status::NotFound("key not found"));

    unsigned entries = 0;
    uint64_t sibling = 0;
    for (unsigned s = 0; s < kSlots && entries < 3; ++s) {
      const uint64_t r = pm::load8(&n->slot[s]);
      if (r == 0) continue;
      ++entries;
      if (&n->slot[s] != cslot) sibling = r;
    }
    if (entries >= 3) {
      // COMMIT store8(slot) := 0 -> persist; then retire the leaf.
      if (!nl->UpgradeToWriteLock(nv)) return Attempt::kRestart;
      pm::store8(cslot, 0);
      pm::persist(cslot, 8);
      nl->WriteUnlock();
      alloc.Retire(RefOffset(c));
      CountDown();
      return end.Done(Status::OK());
    }
    if (!nl->CheckOrRestart(nv)) return Attempt::kRestart;
    if (entries < 2 || sibling == 0) return end.Done(Status::Corruption("inner node with fewer than two entries"));
    // Collapse: lock the parent's block, n and a node sibling (each word once).
    sync::VersionLock* held[3] = {};
    int nheld = 0;
    auto unlock = [&] {
      for (int i = 0; i < nheld; ++i) held[i]->WriteUnlock();
    };
    auto take = [&](sync::VersionLock* l, uint64_t v, bool known) {
      for (int i = 0; i < nheld; ++i)
        if (held[i] == l) return !known || v == pv;  // a shared word: locked once
      if (!known && !l->ReadLockOrRestart(&v)) return false;
      if (!l->UpgradeToWriteLock(v)) return false;
      held[nheld++] = l;
      return true;
    };
    if (!take(pl, pv, true) || !take(nl, nv, true) ||
        (!RefIsLeaf(sibling) && !take(&LockOf(NodeAt(sibling)), 0, false))) {
      unlock();
      return Attempt::kRestart;
    }
    // COMMIT store8(parent slot) := sibling -> persist. This unlinks n and the leaf.
    // n's slots are left as they are (a concurrent reader or visit may still be walking n).
    pm::store8(pslot, sibling);
    pm::persist(pslot, 8);
    Status st = Status::OK();
    if (!RefIsLeaf(sibling)) {
      // The sibling now sits at n's position: its header depth is too large (stale, I4) until
      // this repair.
      if (!TakeInterrupt(WortInterrupt::kCollapseBeforeHeaderFix)) st = RecoverHeader(NodeAt(sibling), expected);
    }
    unlock();
    alloc.Retire(RefOffset(ref));
    alloc.Retire(RefOffset(c));
    CountDown();
    return end.Done(st);
  }
  return end.Done(Status::Corruption("tree deeper than any key allows"));
}

// ---- Scan ----------------------------------------------------------------------------------------
template <unsigned kSpan>
Status WortTree<kSpan>::Scan(std::string_view start, const std::string_view* end, size_t limit,
                             const ScanFn& fn) const {
  // Batches of up to 64 keys, each collected lock-free and validated (a snapshot), emitted with
  // no lock held; the next batch starts after the last key emitted (index/batched_scan.h).
  return ScanInValidatedBatches<64, WortLeaf>(
      pool_.allocator().epoch(), start, limit, fn, [&] { return ModeLock(IndexModeLock::kReader); },
      [&](std::string_view cursor, bool exclusive, size_t want, ScanBatch<WortLeaf>* out,
          bool* past_end) { return CollectBatch(cursor, exclusive, end, want, out, past_end); });
}

// Collects up to `want` keys >= start (> start if exclusive) in order into *out; false: a
// node changed meanwhile (collect again). Every node read is recorded with its version and
// all are checked at the end.
template <unsigned kSpan>
WORT_OPTIMISTIC_READ bool WortTree<kSpan>::CollectBatch(std::string_view start, bool exclusive, const std::string_view* end, size_t want,
                                   ScanBatch<WortLeaf>* out, bool* past_end) const {
  out->clear();
  *past_end = false;
  thread_local std::vector<std::pair<const sync::VersionLock*, uint64_t>> seen;
  seen.clear();
  bool locked = false;
  auto read_version = [&](const void* block) {
    const sync::VersionLock& l = LockOf(block);
    uint64_t v;
    if (!l.ReadLockOrRestart(&v)) {
      locked = true;
      return;
    }
    seen.push_back({&l, v});
  };
  auto validate = [&] {
    if (locked) return false;
    for (const auto& [l, v] : seen)
      if (!l->CheckOrRestart(v)) return false;
    return true;
  };
  const Key s(start);
  struct Frame {
    const Node* n;
    unsigned next;  // next slot to visit
  };
  Frame stack[kMaxLevels<kSpan> + 1];
  size_t depth = 0;
  // Returns false when the batch is complete.
  auto emit = [&](uint64_t lref) -> bool {
    const WortLeaf* l = LeafAt(lref);
    const std::string_view key(l->key(), l->key_len);
    if (exclusive && key == start) return true;
    if (end && CompareKeys(key, *end) > 0) {
      *past_end = true;
      return false;
    }
    out->push_back({l, pm::load8(&l->value)});
    return out->size() < want;
  };

  // Descend along `start`, leaving on the stack the nodes whose remaining slots hold keys
  // greater than start. Compressed paths are compared against a leaf below the node, so stale
  // headers (I4) do not matter: only the branch position (I3) is used.
  read_version(rb_);
  uint64_t ref = pm::load8(&rb_->root);
  size_t expected = 0;
  for (size_t level = 0; ref != 0 && !locked; ++level) {
    if (level >= kMaxLevels<kSpan> || !BlockOk(ref)) return validate() ? (void(out->clear()), true) : false;
    if (RefIsLeaf(ref)) {
      const WortLeaf* l = LeafAt(ref);
      if (CompareKeys(std::string_view(l->key(), l->key_len), start) >= 0 && !emit(ref)) return validate();
      break;
    }
    const Node* n = NodeAt(ref);
    read_version(n);
    const size_t b = Branch(HeaderOf(n));
    const uint64_t lr = AnyLeaf(ref);
    if (b < expected || lr == 0) return validate() ? (void(out->clear()), true) : false;  // corruption: Check
    const Key r(LeafAt(lr));
    if (r.n < b) return validate() ? (void(out->clear()), true) : false;
    int cmp = 0;  // start vs the node's compressed path; -1 also when start ends inside it
    for (size_t i = expected; i < b; ++i) {
      if (i >= s.n) {
        cmp = -1;
        break;
      }
      const unsigned a = s.at(i), c = r.at(i);
      if (a != c) {
        cmp = a < c ? -1 : 1;
        break;
      }
    }
    if (cmp > 0) break;  // every key below is smaller than start
    if (cmp < 0 || s.n == b) {
      // Every key below is >= start (with s.n == b the end slot may hold start itself).
      stack[depth++] = {n, 0};
      break;
    }
    const unsigned c = s.at(b);
    stack[depth++] = {n, 2 + c};  // after child c's subtree, the greater children
    ref = pm::load8(&n->slot[1 + c]);
    expected = b + 1;
  }

  // In-order walk of what the stack holds: end slot first, then children by partial key.
  while (depth > 0 && !locked) {
    Frame& f = stack[depth - 1];
    if (f.next >= kSlots) {
      --depth;
      continue;
    }
    const uint64_t r = pm::load8(&f.n->slot[f.next++]);
    if (r == 0 || !BlockOk(r)) continue;  // (a damaged image: Check reports it)
    if (RefIsLeaf(r)) {
      if (!emit(r)) break;
    } else {
      if (depth > kMaxLevels<kSpan>) break;  // corruption (Check reports it)
      const Node* cn = NodeAt(r);
      read_version(cn);
      stack[depth++] = {cn, 0};
    }
  }
  return validate();
}

// ---- counting and statistics -----------------------------------------------------------------
template <unsigned kSpan>
uint64_t WortTree<kSpan>::CountLeaves() const {
  uint64_t leaves = 0;
  std::vector<uint64_t> todo;
  if (const uint64_t r = pm::load8(&rb_->root)) todo.push_back(r);
  uint64_t budget = pool_.size() / 64 + 1;  // a damaged image: bounded, no-block refs skipped
  while (!todo.empty() && budget-- > 0) {
    const uint64_t r = todo.back();
    todo.pop_back();
    if (!BlockOk(r)) continue;
    if (RefIsLeaf(r)) {
      ++leaves;
      continue;
    }
    const Node* n = NodeAt(r);
    for (unsigned s = 0; s < kSlots; ++s)
      if (const uint64_t c = pm::load8(&n->slot[s])) todo.push_back(c);
  }
  return leaves;
}

template <unsigned kSpan>
IndexStats WortTree<kSpan>::Stats() const {
  auto q = ModeLock(IndexModeLock::kQuiesce);
  IndexStats st;
  const Allocator& alloc = pool_.allocator();
  st.bytes_allocated = alloc.UsableSize(pool_.offset_of(rb_));
  uint64_t depth_sum = 0;
  std::vector<std::pair<uint64_t, uint32_t>> todo;  // (ref, inner nodes above it)
  if (const uint64_t r = pm::load8(&rb_->root)) todo.push_back({r, 0});
  uint64_t budget = pool_.size() / 64 + 1;  // a damaged image: bounded, no-block refs skipped
  while (!todo.empty() && budget-- > 0) {
    const auto [r, d] = todo.back();
    todo.pop_back();
    if (!BlockOk(r)) continue;
    st.bytes_allocated += alloc.UsableSize(RefOffset(r));
    if (RefIsLeaf(r)) {
      ++st.leaves;
      depth_sum += d;
      continue;
    }
    ++st.inner_nodes;
    const Node* n = NodeAt(r);
    for (unsigned s = 0; s < kSlots; ++s)
      if (const uint64_t c = pm::load8(&n->slot[s])) todo.push_back({c, d + 1});
  }
  st.keys = st.leaves;
  st.avg_leaf_depth = st.leaves ? static_cast<double>(depth_sum) / static_cast<double>(st.leaves) : 0.0;
  st.volatile_bytes = 0;
  return st;
}

// ---- Check ----------------------------------------------------------------------------------------
template <unsigned kSpan>
Status WortTree<kSpan>::CheckDetailed(std::string* report, WortCheckInfo* info) const {
  auto q = ModeLock(IndexModeLock::kQuiesce);
  *info = WortCheckInfo{};
  size_t errors = 0;
  auto fail = [&](const std::string& what) {
    if (errors++ < 20 && report) *report += "wort: " + what + "\n";
  };
  // I1: the root block.
  if (rb_->magic != WortRootBlock::kMagic || rb_->version != WortRootBlock::kVersion || rb_->span_bits != kSpan ||
      (rb_->key_type != static_cast<uint8_t>(KeyType::kU64) && rb_->key_type != static_cast<uint8_t>(KeyType::kBytes)))
    fail("root block damaged");

  const size_t max_n = P::Count(kMaxKeyLen);
  std::vector<uint8_t> path;  // the partial keys that the path to the current position fixes
  std::string prev;
  bool have_prev = false;
  uint64_t leaves = 0;

  // A leaf found in a slot; `end_at` is the branch position when it is in an end slot, or
  // SIZE_MAX for a child slot / the root (its key must then be longer than path).
  auto check_leaf = [&](uint64_t ref, size_t end_at) {
    const uint64_t off = RefOffset(ref);
    if (!pool_.contains(off, sizeof(WortLeaf))) return fail("leaf offset " + std::to_string(off) + " outside the pool");
    const WortLeaf* l = LeafAt(ref);
    if (l->key_len > kMaxKeyLen || !pool_.contains(off, LeafBytes(l->key_len)))
      return fail("leaf at " + std::to_string(off) + " has a bad key length " + std::to_string(l->key_len));
    if (key_type_ == KeyType::kU64 && l->key_len != 8)
      return fail("leaf at " + std::to_string(off) + " holds a " + std::to_string(l->key_len) + "-byte key in a u64 index");
    ++leaves;
    const Key k(l);
    const std::string_view kv = k.view();
    // I3: the key agrees with its path and sits in the right slot.
    if (end_at != SIZE_MAX ? k.n != end_at : k.n < path.size())
      return fail("leaf at " + std::to_string(off) + " has the wrong length for its slot");
    for (size_t i = 0; i < path.size(); ++i)
      if (k.at(i) != path[i])
        return fail("leaf at " + std::to_string(off) + " disagrees with its path at partial key " + std::to_string(i));
    // I5: ascending order; reachable by Lookup.
    if (have_prev && CompareKeys(prev, kv) >= 0) fail("keys out of order at leaf " + std::to_string(off));
    prev.assign(kv);
    have_prev = true;
    if (FindLeaf(k) != ref) fail("leaf at " + std::to_string(off) + " is not found by Lookup");
  };

  struct Frame {
    const Node* n;
    size_t branch;
    unsigned next;
  };
  std::vector<Frame> stack;
  // Enters a node reached with the path fixing [0, expected); pushes a frame when it can be walked.
  auto enter = [&](uint64_t ref) {
    const size_t expected = path.size();
    const uint64_t off = RefOffset(ref);
    if (!RefWellFormed(ref) || !pool_.contains(off, sizeof(Node)))
      return fail("node reference " + std::to_string(ref) + " malformed or outside the pool");
    if (stack.size() >= kMaxLevels<kSpan>) return fail("tree deeper than any key allows");
    ++info->inner_nodes;
    const Node* n = NodeAt(ref);
    const CompressionHeader h = HeaderOf(n);
    const size_t b = Branch(h);
    const std::string where = "node at " + std::to_string(off);
    if (h.depth < expected) return fail(where + ": depth " + std::to_string(h.depth) + " < expected " + std::to_string(expected));
    if (b > max_n) return fail(where + ": branch position beyond the longest key");
    const bool stale = h.depth != expected;
    if (stale) ++info->stale_headers;
    // I2.
    unsigned entries = 0;
    for (unsigned s = 0; s < kSlots; ++s) entries += pm::load8(&n->slot[s]) != 0;
    if (entries < 2) fail(where + ": " + std::to_string(entries) + " entries");
    const uint64_t e = pm::load8(&n->slot[0]);
    if (e != 0 && !RefIsLeaf(e)) fail(where + ": end slot holds an inner node");
    // The compressed path [expected, b), taken from a leaf below; I3 is verified at every leaf.
    const uint64_t lr = AnyLeaf(ref);
    if (lr == 0 || !pool_.contains(RefOffset(lr), sizeof(WortLeaf))) return fail(where + ": no leaf below");
    const WortLeaf* rl = LeafAt(lr);
    if (rl->key_len > kMaxKeyLen) return fail(where + ": leaf below has a bad key length");
    const Key r(rl);
    if (r.n < b) return fail(where + ": leaf below is shorter than the branch position");
    for (size_t i = expected; i < b; ++i) path.push_back(static_cast<uint8_t>(r.at(i)));
    // I4: a current header's prefix array matches the path.
    if (!stale) {
      const size_t inl = std::min<size_t>(h.prefix_len, kInlineCap);
      for (size_t j = 0; j < inl; ++j)
        if (PrefixAt(h, j) != path[expected + j]) {
          fail(where + ": prefix array disagrees with its leaves at " + std::to_string(j));
          break;
        }
    }
    stack.push_back({n, b, 0});
  };

  const uint64_t root = pm::load8(&rb_->root);
  if (root != 0) {
    if (RefIsLeaf(root))
      check_leaf(root, SIZE_MAX);
    else
      enter(root);
  }
  while (!stack.empty() && errors < 1000) {
    Frame& f = stack.back();
    if (f.next >= kSlots) {
      stack.pop_back();
      continue;
    }
    const unsigned s = f.next++;
    const size_t b = f.branch;
    const uint64_t r = pm::load8(&f.n->slot[s]);
    if (r == 0) continue;
    path.resize(b);
    if (!RefWellFormed(r)) {
      fail("malformed reference " + std::to_string(r));
      continue;
    }
    if (s == 0) {
      if (RefIsLeaf(r)) check_leaf(r, b);
      continue;
    }
    path.push_back(static_cast<uint8_t>(s - 1));
    if (RefIsLeaf(r))
      check_leaf(r, SIZE_MAX);
    else
      enter(r);  // may invalidate f
  }
  info->leaves = leaves;
  const int64_t c = count_.Known();
  if (c >= 0 && static_cast<uint64_t>(c) != leaves)
    fail("count " + std::to_string(c) + " != leaves " + std::to_string(leaves));
  if (errors) return Status::Corruption("wort: " + std::to_string(errors) + " invariant violation(s)");
  return Status::OK();
}

// ---- the index kind --------------------------------------------------------------------------------
Status CreateWort(Pool& pool, const IndexOptions& opts, uint64_t* root_off) {
  if (opts.span_bits != 4 && opts.span_bits != 8)
    return Status::InvalidArgument("wort supports span_bits 4 or 8, not " + std::to_string(opts.span_bits));
  if (opts.key_type != KeyType::kU64 && opts.key_type != KeyType::kBytes)
    return Status::InvalidArgument("unknown key type");
  uint64_t off;
  WORT_RETURN_IF_ERROR(pool.allocator().AllocZeroed(sizeof(WortRootBlock), &off));
  WortRootBlock* rb = pool.at<WortRootBlock>(off);
  rb->magic = WortRootBlock::kMagic;
  rb->key_type = static_cast<uint8_t>(opts.key_type);
  rb->span_bits = static_cast<uint8_t>(opts.span_bits);
  rb->version = WortRootBlock::kVersion;
  rb->flags = opts.values_are_blocks ? WortRootBlock::kValuesAreBlocks : 0;
  std::memset(rb->reserved, 0, sizeof(rb->reserved));
  rb->root = 0;
  // write -> persist; the caller publishes the root block (Pool::AddRoot is the commit point).
  pm::persist(rb, sizeof(WortRootBlock));
  *root_off = off;
  return Status::OK();
}

Status OpenWort(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) {
  WORT_RETURN_IF_ERROR(CheckRootBlockPlace(pool, root_off, sizeof(WortRootBlock), "wort"));
  const WortRootBlock* rb = pool.at<WortRootBlock>(root_off);
  WORT_RETURN_IF_ERROR(CheckRootHeader("wort", rb->magic, WortRootBlock::kMagic, rb->key_type));
  if (rb->version != WortRootBlock::kVersion)
    return Status::Corruption("wort: root block version " + std::to_string(rb->version) + " unknown");
  if (rb->span_bits != 4 && rb->span_bits != 8)
    return Status::Corruption("wort root block has span_bits " + std::to_string(rb->span_bits));
  std::shared_ptr<void> token;  // one handle per index (registry.h)
  WORT_RETURN_IF_ERROR(ClaimSoleHandle(&pool, root_off, "wort", &token));
  if (rb->span_bits == 4) {
    auto t = std::make_unique<WortTree<4>>(pool, root_off);
    t->KeepSoleHandle(std::move(token));
    *out = std::move(t);
  } else {
    auto t = std::make_unique<WortTree<8>>(pool, root_off);
    t->KeepSoleHandle(std::move(token));
    *out = std::move(t);
  }
  return Status::OK();
}

// Reports the root block, every inner node and every leaf (reachability contract R1). Reads
// only the root word and node slots, with atomic 8-byte loads, after checking each offset
// against the pool. Follows the readers' protocol (as ArtTree::Visit): inside an epoch, each
// node's slots read as a validated snapshot; no index lock (except in global-lock mode).
void VisitWort(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark) {
  if (root_off == 0 || !pool.contains(root_off, sizeof(WortRootBlock))) return;
  sync::EpochGuard eg(const_cast<Pool&>(pool).allocator().epoch());
  VisitModeLock visit_guard(&pool, root_off);
  mark(root_off);
  const WortRootBlock* rb = pool.at<WortRootBlock>(root_off);
  if (rb->magic != WortRootBlock::kMagic) return;
  const unsigned span = rb->span_bits;
  if (span != 4 && span != 8) return;
  const unsigned slots = (1u << span) + 1;
  const size_t node_bytes = span == 4 ? sizeof(WortNode<4>) : sizeof(WortNode<8>);
  const size_t max_levels = span == 4 ? kMaxLevels<4> : kMaxLevels<8>;
  const bool values_are_blocks = (rb->flags & WortRootBlock::kValuesAreBlocks) != 0;
  std::vector<std::pair<uint64_t, size_t>> todo;  // (reference, level)
  if (const uint64_t r = pm::load8(&rb->root)) todo.push_back({r, 0});
  // A tree holds at most one reference to each block: more references than the pool has blocks
  // is a damaged image (e.g. slots naming their own node), whose walk would otherwise grow
  // exponentially with the depth. The walk stops there.
  uint64_t budget = pool.size() / 64 + 1;
  while (!todo.empty() && budget-- > 0) {
    const auto [ref, level] = todo.back();
    todo.pop_back();
    if (!RefWellFormed(ref)) continue;
    const uint64_t off = RefOffset(ref);
    if (RefIsLeaf(ref)) {
      if (!pool.contains(off, sizeof(WortLeaf))) continue;
      mark(off);
      if (values_are_blocks) {
        const uint64_t v = pm::load8(&pool.at<const WortLeaf>(off)->value);
        if (v != 0 && pool.contains(v, 1)) mark(v);
      }
      continue;
    }
    if (!pool.contains(off, node_bytes)) continue;
    mark(off);
    if (level >= max_levels) continue;
    // Slots sit right after the 8-byte header in both layouts.
    const uint64_t* slot = pool.at<const uint64_t>(off) + 1;
    uint64_t snap[257];
    sync::NodeLock(pool.at<const void>(off)).ReadSnapshot([&] {
      for (unsigned s = 0; s < slots; ++s) snap[s] = pm::load8(&slot[s]);
    });
    for (unsigned s = 0; s < slots; ++s)
      if (snap[s]) todo.push_back({snap[s], level + 1});
  }
}

const IndexKind kWortKind = {
    "wort",
    kind_id::kWort,
    "WORT: write-optimal radix tree with 8-byte compression headers (FAST'17)",
    /*ordered=*/true,
    &CreateWort,
    &OpenWort,
    &VisitWort,
};


}  // namespace

void SetWortInterruptForTest(WortInterrupt what) { g_interrupt.store(static_cast<int>(what)); }

bool SetWortFastBoundForTest(Index& index, uint64_t fast_last) {
  if (auto* t4 = dynamic_cast<WortTree<4>*>(&index)) t4->SetFastBoundForTest(fast_last);
  else if (auto* t8 = dynamic_cast<WortTree<8>*>(&index)) t8->SetFastBoundForTest(fast_last);
  else return false;
  return true;
}

Status WortCheck(const Index& index, std::string* report, WortCheckInfo* info) {
  if (const auto* t4 = dynamic_cast<const WortTree<4>*>(&index)) return t4->CheckDetailed(report, info);
  if (const auto* t8 = dynamic_cast<const WortTree<8>*>(&index)) return t8->CheckDetailed(report, info);
  return Status::InvalidArgument("not a wort index");
}

}  // namespace wort::radix

// Listed in the table of built-in kinds (BuiltinIndexKinds, src/index/registry.cc).
const wort::IndexKind* wort::builtin_kinds::Wort() { return &wort::radix::kWortKind; }
