// index/hash/hash_common.h - what every persistent hash table of wort shares: the hash function,
// the slot-word encoding of keys (with out-of-line key blocks), the root block, the DRAM locks
// and the epoch used for lock-free readers, and a base class that implements the parts of
// wort::Index that do not depend on the table's layout.
//
// Slot words ("the 8-byte key word", thesis 4.4.5)
// -------------------------------------------------
// Every table stores a record as two 8-byte words, the *key word* and the value. A record is
// committed by one pm::store8 of its key word (the value is written first, in the same cache
// line), and removed by storing 0 into the key word. The key word encodes the key so that it can
// be compared without touching other memory in the common case:
//
//   KeyType::kU64 tables: key word = MixU64(key, seed), a seeded *bijection* of the 64-bit key
//       (so two keys never share a word: no collision can lose a key). 0 means "empty slot". The
//       one key whose mixed value is 0 cannot be stored in a slot; it lives in the root block's
//       *zero slot* (zero_present, zero_value) instead. The word is also the key's hash, so the
//       segment/bucket of a record follows from its word alone.
//   KeyType::kBytes tables (hash = HashBytes(key, seed)):
//       0                                 empty slot
//       bit 0 = 1: inline key             keys of at most 7 bytes: bits 1..3 = length (0..7),
//                                         bits 8+8i..15+8i = byte i. Never 0 (bit 0 is set), so
//                                         the empty key is the word 0x1.
//       bit 0 = 0, word != 0: key block   keys of 8 bytes or more: bits 40..63 = the top 24 bits
//                                         of the hash (the *fingerprint*), bits 1..39 = offset of
//                                         the key block >> 6 (pools up to 32 TiB).
//       A key block (KeyBlock below) holds the full hash, the length and the bytes; it is
//       written and persisted before the key word that points to it is stored (R2). Two keys
//       that share their first 8 bytes, their fingerprint or even their full hash are told apart
//       by the length and a byte comparison in the block: nothing is lost to a collision.
//   HashHi(word) gives the record's hash with at least its top kFingerprintBits bits exact (all
//   64 for kU64 and inline words): enough to judge which segment a record belongs to (CCEH's
//   lazy deletion compares the top `local depth` bits) without dereferencing a key block that
//   may already be freed (a stale copy left behind by a split).
//
// Hash function: HashBytes is a seeded, word-at-a-time multiply-rotate hash with a strong final
// avalanche (xxhash/murmur style; written here, no dependency); MixU64 is the splitmix64
// finalizer applied to key + seed, which is invertible. The seed is chosen at create and kept in
// the root block.
//
// Thread safety: the codec is immutable after construction; the locks and the epoch are what
// they say. HashIndexBase leaves locking to the subclass.
#pragma once

#include <emmintrin.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "util/splitmix64.h"
#include "wort/key.h"
#include "wort/status.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pm.h"
#include "wort/pool.h"
#include "wort/status.h"

namespace wort::hash {

// ---- hash functions ------------------------------------------------------------------------
// cceh's directory variant by name (msb, lsb, exth): the CLIs' and WORT_CCEH_VARIANT's
// spelling of IndexOptions::cceh_variant. False for any other name.
inline bool ParseCcehVariant(std::string_view name, CcehVariant* out) {
  if (name == "msb") *out = CcehVariant::kMsb;
  else if (name == "lsb") *out = CcehVariant::kLsb;
  else if (name == "exth") *out = CcehVariant::kExth;
  else return false;
  return true;
}

inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// A bijection of 64-bit integers (splitmix64's finalizer after adding the seed).
inline uint64_t MixU64(uint64_t k, uint64_t seed) { return SplitMix64Mix(k + seed); }
// Its inverse: the key whose mixed word is `word` (the crash explorer's plans choose keys by their
// word: the reserved words 0 and 1 that live in the root's special slots, skewed directory bits).
inline uint64_t UnmixU64(uint64_t word, uint64_t seed) { return SplitMix64Unmix(word) - seed; }

uint64_t HashBytes(const void* data, size_t len, uint64_t seed);

// The top `bits` bits of h (0 when bits == 0): the segment index / lazy-deletion pattern.
inline uint64_t Prefix(uint64_t h, unsigned bits) { return bits == 0 ? 0 : h >> (64 - bits); }

// ---- key blocks ----------------------------------------------------------------------------
// Layout: 16-byte head, then `len` key bytes; allocated with the allocator (64-byte aligned).
// Written whole and persisted before the key word that references it is stored; never modified
// afterwards; freed after the key word that referenced it was cleared and persisted (and, for
// tables with lock-free readers, after a grace period).
struct KeyBlock {
  uint64_t hash;  // HashBytes(bytes, len, seed)
  uint32_t len;   // 8..kMaxKeyLen
  uint32_t pad;   // 0
  const char* bytes() const { return reinterpret_cast<const char*>(this + 1); }
  char* bytes() { return reinterpret_cast<char*>(this + 1); }
};
static_assert(sizeof(KeyBlock) == 16);

inline constexpr unsigned kFingerprintBits = 24;    // hash bits in an out-of-line key word
inline constexpr uint64_t kMaxKeyBlockOffset = 1ull << 45;  // 39 bits of offset >> 6

// Named helpers of the byte-key word encoding (see the header comment).
inline bool WordIsInline(uint64_t w) { return (w & 1) != 0; }
inline bool WordIsBlock(uint64_t w) { return w != 0 && (w & 1) == 0; }
inline uint64_t WordBlockOffset(uint64_t w) { return ((w >> 1) & ((1ull << 39) - 1)) << 6; }
inline uint64_t MakeBlockWord(uint64_t hash, uint64_t off) {
  return (hash & ~((1ull << 40) - 1)) | ((off >> 6) << 1);
}
inline unsigned InlineLen(uint64_t w) { return static_cast<unsigned>((w >> 1) & 7); }
inline uint64_t MakeInlineWord(std::string_view k) {
  uint64_t w = 1 | (uint64_t(k.size()) << 1);
  for (size_t i = 0; i < k.size(); ++i) w |= uint64_t(static_cast<unsigned char>(k[i])) << (8 + 8 * i);
  return w;
}
inline void InlineBytes(uint64_t w, char* out) {
  for (unsigned i = 0; i < InlineLen(w); ++i) out[i] = static_cast<char>(w >> (8 + 8 * i));
}

// A key prepared for one operation.
struct Probe {
  std::string_view key;
  uint64_t hash = 0;  // full hash (kU64: the mixed key)
  uint64_t word = 0;  // its key word if known without allocation (kU64, inline); else 0
  bool zero = false;  // kU64 key whose word is reserved (0, or the table's tombstone): it lives
                      // in a special slot of the root block
  int special = -1;   // which special slot (0: word 0, 1: word == tombstone)
};

class KeyCodec {
 public:
  // `tombstone`: a word the table reserves to mark deleted slots (LINP), 0 if none. kBytes
  // tables use kBytesTombstone, which no key word equals; kU64 tables use 1, and the key whose
  // mixed value is 1 then goes to the root's second special slot.
  KeyCodec(const Pool* pool, KeyType kt, uint64_t seed, bool tombstones = false)
      : pool_(pool), kt_(kt), seed_(seed), tomb_(!tombstones ? 0 : kt == KeyType::kU64 ? 1 : kBytesTombstone) {}
  static constexpr uint64_t kBytesTombstone = 2;  // a block word naming offset 64 (the pool header)
  uint64_t tombstone() const { return tomb_; }
  // True iff w is a record (neither empty nor a tombstone).
  bool IsRecord(uint64_t w) const { return w != 0 && w != tomb_; }
  KeyType key_type() const { return kt_; }
  uint64_t seed() const { return seed_; }

  // InvalidArgument for a key that is too long, or not 8 bytes in a kU64 table.
  // Inline for the 8-byte key of a u64 table (every operation's first step); the rest, and
  // every error, in PrepareSlow.
  Status Prepare(std::string_view key, Probe* p) const {
    if (kt_ == KeyType::kU64 && key.size() == 8) [[likely]] {
      p->key = key;
      p->hash = MixU64(DecodeU64(key), seed_);
      p->word = p->hash;
      p->special = p->hash == 0 ? 0 : (tomb_ != 0 && p->hash == tomb_) ? 1 : -1;
      p->zero = p->special >= 0;
      return Status::OK();
    }
    return PrepareSlow(key, p);
  }
  Status PrepareSlow(std::string_view key, Probe* p) const;
  // True iff the (non-zero, valid) record word w holds p's key. May read w's key block.
  bool Matches(uint64_t w, const Probe& p) const {
    if (w == p.word) return p.word != 0;
    if (kt_ == KeyType::kU64 || p.word != 0 || !WordIsBlock(w)) return false;
    if ((w >> 40) != (p.hash >> 40)) return false;
    const KeyBlock* kb = Block(w);
    return kb != nullptr && kb->hash == p.hash && kb->len == p.key.size() && std::memcmp(kb->bytes(), p.key.data(), p.key.size()) == 0;
  }
  // The record's hash, exact in at least its top kFingerprintBits bits; never reads memory.
  uint64_t HashHi(uint64_t w) const {
    if (kt_ == KeyType::kU64) return w;
    if (WordIsInline(w)) {
      char b[8];
      InlineBytes(w, b);
      return HashBytes(b, InlineLen(w), seed_);
    }
    return w & ~((1ull << 40) - 1);
  }
  // The record's full hash (reads the key block of an out-of-line word: w must be valid).
  uint64_t FullHash(uint64_t w) const {
    if (kt_ == KeyType::kU64 || WordIsInline(w)) return HashHi(w);
    const KeyBlock* kb = Block(w);
    return kb ? kb->hash : HashHi(w);  // (a damaged word: its fingerprint bits)
  }
  // The key block of an out-of-line word, or nullptr when the word does not name one inside the
  // pool (a damaged image: every reader goes through this, so garbage never reads outside the
  // pool; CheckWord reports it).
  const KeyBlock* Block(uint64_t w) const {
    const uint64_t off = WordBlockOffset(w);
    if (!pool_->contains(off, sizeof(KeyBlock))) return nullptr;
    const KeyBlock* kb = pool_->at<const KeyBlock>(off);
    if (kb->len > kMaxKeyLen || !pool_->contains(off + sizeof(KeyBlock), kb->len)) return nullptr;
    return kb;
  }
  // How many top hash bits HashHi gets right for every word of this table.
  unsigned exact_bits() const { return kt_ == KeyType::kU64 ? 64 : kFingerprintBits; }
  // The key block a word references (0 if none).
  static uint64_t BlockOf(KeyType kt, uint64_t w) {
    return kt == KeyType::kBytes && WordIsBlock(w) ? WordBlockOffset(w) : 0;
  }
  uint64_t BlockOf(uint64_t w) const { return BlockOf(kt_, w); }
  // The word for p's key: p.word, or a new persistent key block (PoolFull: nothing allocated).
  Status MakeWord(Allocator& a, const Probe& p, uint64_t* w) const;
  // Frees the key block of a word that was never published or was unlinked (R2).
  void FreeWord(Allocator& a, uint64_t w) const {
    if (const uint64_t b = BlockOf(w)) a.Free(b);
  }
  // Verifies a valid word (bounds of its block, hash, length); appends a finding to *report.
  bool CheckWord(uint64_t w, std::string* report) const;
  // The key of a valid word (for reports and tests).
  std::string KeyOf(uint64_t w) const;

 private:
  const Pool* pool_;
  KeyType kt_;
  uint64_t seed_;
  uint64_t tomb_;
};

// ---- the root block ------------------------------------------------------------------------
// Layout: two cache lines.
//   line 0, written once by create and persisted before the root is published:
//     magic, type id, key type, flags, version, seed, three kind-specific parameters.
//   line 1, the mutable words, each changed only by pm::store8 + persist:
//     table        the directory (CCEH) or table header (baselines): the COMMIT POINT of a
//                  directory doubling or a full-table rehash;
//     zero_present kU64 tables: 1 iff the key whose mixed value is 0 is present (its commit
//                  point: zero_value is stored first, in the same line);
//     zero_value   that key's value.
//     aux_present, aux_value: the same for the key whose mixed value is the table's tombstone
//                  word (LINP kU64 tables only).
// Invariant: table always references a complete, persistent directory / table.
struct HashRoot {
  static constexpr uint64_t kMagic = 0x3130485341485457ull;  // "WTHASH01" little-endian
  static constexpr uint16_t kVersion = 1;
  static constexpr uint8_t kValuesAreBlocks = 1;
  uint64_t magic;
  uint32_t type_id;
  uint8_t key_type;
  uint8_t flags;
  uint16_t version;
  uint64_t seed;
  uint64_t param[3];
  uint64_t reserved0[2];
  uint64_t table;
  uint64_t zero_present;
  uint64_t zero_value;
  uint64_t aux_present;
  uint64_t aux_value;
  uint64_t reserved1[3];
};
static_assert(sizeof(HashRoot) == 128);
static_assert(offsetof(HashRoot, table) == 64);

// Allocates, fills and persists a root block (table = 0: the caller builds the table and
// publishes it with SetRootTable before the root is published).
Status CreateRoot(Pool& pool, uint32_t type_id, const IndexOptions& opts, uint64_t p0, uint64_t p1, uint64_t p2,
                  uint64_t* root_off);
// Checks magic, type and version; returns the root.
Status OpenRoot(const Pool& pool, uint64_t root_off, uint32_t type_id, const char* name, HashRoot** out);

// Environment knobs read at create (documented in each kind's header):
//   WORT_HASH_CAPACITY      initial capacity in records (default 2048, the thesis' setup)
//   WORT_CCEH_SEGMENT_BYTES CCEH segment size in bytes, a power of two >= 256 (default 16384)
uint64_t EnvU64(const char* name, uint64_t def);
uint64_t InitialCapacity(const IndexOptions& opts);  // opts.hash_capacity, else WORT_HASH_CAPACITY

// ---- DRAM synchronization ------------------------------------------------------------------
inline void Backoff(unsigned n) {
  if (n < 64)
    _mm_pause();
  else
    std::this_thread::yield();
}

// A writer-preferring reader/writer spin lock (4 bytes). A waiting writer stops new readers.
class RwSpinLock {
 public:
  bool try_lock_shared() {
    uint32_t s = s_.load(std::memory_order_relaxed);
    return (s & (kWriter | kWaiting)) == 0 && s_.compare_exchange_strong(s, s + 1, std::memory_order_acquire);
  }
  void lock_shared() {
    for (unsigned n = 0; !try_lock_shared(); ++n) Backoff(n);
  }
  void unlock_shared() { s_.fetch_sub(1, std::memory_order_release); }
  bool try_lock() {
    uint32_t s = s_.load(std::memory_order_relaxed);
    return (s & ~kWaiting) == 0 && s_.compare_exchange_strong(s, kWriter, std::memory_order_acquire);
  }
  void lock() {
    for (unsigned n = 0;; ++n) {
      uint32_t s = s_.load(std::memory_order_relaxed);
      if ((s & ~kWaiting) == 0) {
        if (s_.compare_exchange_weak(s, kWriter, std::memory_order_acquire)) return;
      } else if ((s & kWaiting) == 0) {
        s_.fetch_or(kWaiting, std::memory_order_relaxed);
      }
      Backoff(n);
    }
  }
  // A release store, not a locked read-modify-write (issue 31: on x86 a locked instruction waits
  // for the holder's earlier stores and write-backs to drain). While kWriter is set the only
  // other change to the word is a waiter's fetch_or(kWaiting); losing it here costs nothing but
  // that waiter's priority over new readers (it sets the bit again on its next turn).
  void unlock() { s_.store(s_.load(std::memory_order_relaxed) & ~kWriter, std::memory_order_release); }

 private:
  static constexpr uint32_t kWriter = 1u << 31;
  static constexpr uint32_t kWaiting = 1u << 30;
  std::atomic<uint32_t> s_{0};
};

// Grace periods for lock-free readers (a two-counter epoch, as in classic RCU). A reader
// brackets its accesses with Enter/Exit; a writer that has unlinked a block calls Synchronize,
// after which no reader can still hold a reference to it, and only then frees it.
class Epoch {
 public:
  uint64_t Enter() {
    for (;;) {
      const uint64_t e = epoch_.load();
      active_[e & 1].n.fetch_add(1);
      if (epoch_.load() == e) return e;
      active_[e & 1].n.fetch_sub(1);
    }
  }
  void Exit(uint64_t e) { active_[e & 1].n.fetch_sub(1, std::memory_order_release); }
  void Synchronize() {
    std::lock_guard<std::mutex> g(mu_);
    const uint64_t e = epoch_.load();
    epoch_.store(e + 1);
    for (unsigned n = 0; active_[e & 1].n.load() != 0; ++n) Backoff(n);
  }

 private:
  struct alignas(64) Counter {
    std::atomic<int64_t> n{0};
  };
  std::atomic<uint64_t> epoch_{0};
  Counter active_[2];
  std::mutex mu_;
};

// ---- instrumentation (for `wort hashbench`) ------------------------------------------------
// Cheap counters kept by every hash index: rehash = segment splits, directory doublings and
// full-table rehashes; displacement = cuckoo moves. Times are wall-clock ns.
struct HashCounters {
  uint64_t splits = 0;            // CCEH segment splits
  uint64_t doublings = 0;         // CCEH directory doublings
  uint64_t rehashes = 0;          // full-table rehashes (baselines)
  uint64_t rehash_ns = 0;         // time in splits, doublings and rehashes
  uint64_t max_rehash_ns = 0;     // the longest single split / doubling / rehash
  uint64_t displacements = 0;     // records moved by cuckoo displacement
  uint64_t displacement_ns = 0;   // time spent displacing
};

// ---- base class ----------------------------------------------------------------------------
class HashIndexBase : public Index {
 public:
  HashIndexBase(Pool& pool, uint64_t root_off, HashRoot* root, const char* kind, bool tombstones = false);
  std::string_view kind() const override { return kind_; }
  KeyType key_type() const override { return codec_.key_type(); }
  Status Scan(std::string_view, const std::string_view*, size_t, const ScanFn&) const override {
    return Status::NotSupported(std::string(kind_) + " is a hash index: no ordered scan");
  }
  Status Insert(std::string_view key, uint64_t value) override { return Put(key, value, false, nullptr); }
  Status Upsert(std::string_view key, uint64_t value, bool* inserted) override {
    return Put(key, value, true, inserted);
  }
  using Index::Insert;
  using Index::Lookup;
  using Index::Remove;
  using Index::Upsert;

  // Insert (upsert = false) or Upsert.
  virtual Status Put(std::string_view key, uint64_t value, bool upsert, bool* inserted) = 0;
  // Every record (key, value), in no particular order (a hash table has none), until fn returns
  // false: the records are gathered under the table's locks (writers wait meanwhile; the kU64
  // special slots included), then given to fn after the locks are released, so fn may call
  // into this index. Each pair was in the table at the instant of the gathering. For the
  // key-value store's unordered iteration (KvStore::ForEach, wort/kv.h).
  Status ForEachRecord(const ScanFn& fn) const;
  HashCounters Counters() const;
  void ResetCounters();
  // Keeps ClaimSoleHandle's token for this handle's life (registry.h: one handle per index).
  void KeepSoleHandle(std::shared_ptr<void> token) { sole_handle_ = std::move(token); }

 protected:
  // The special slots of kU64 tables (see HashRoot): 0 = zero slot, 1 = aux slot. Callers
  // serialize with zero_mu_.
  Status ZeroPut(uint64_t value, bool upsert, bool* inserted, int which = 0);
  Status ZeroGet(uint64_t* value, int which = 0) const;
  Status ZeroRemove(int which = 0);
  bool ZeroPresent(int which = 0) const { return pm::load8(SpecialPresent(which)) != 0; }
  uint64_t* SpecialPresent(int which) const { return which == 0 ? &root_->zero_present : &root_->aux_present; }
  uint64_t* SpecialValue(int which) const { return which == 0 ? &root_->zero_value : &root_->aux_value; }

  using Records = std::vector<std::pair<std::string, uint64_t>>;
  // Appends every record of the table (slots and special slots), holding what makes the table
  // still (ForEachRecord).
  virtual void CollectRecords(Records* out) const = 0;
  // Appends the record of a valid slot word (its key decoded: the table's lock must be held, a
  // key block may be freed once it is released).
  void AppendRecord(uint64_t w, uint64_t value, Records* out) const;
  // Appends the special slots' records (kU64 tables). REQUIRES: what serializes them held
  // (CCEH: zero_mu_; the static tables: their one mutex).
  void AppendSpecialRecords(Records* out) const;

  void AddRehash(uint64_t ns, bool doubling, bool split, bool full) {
    std::lock_guard<std::mutex> g(counters_mu_);
    counters_.rehash_ns += ns;
    if (ns > counters_.max_rehash_ns) counters_.max_rehash_ns = ns;
    counters_.doublings += doubling;
    counters_.splits += split;
    counters_.rehashes += full;
  }
  void AddDisplacement(uint64_t moves, uint64_t ns) {
    std::lock_guard<std::mutex> g(counters_mu_);
    counters_.displacements += moves;
    counters_.displacement_ns += ns;
  }

  Pool& pool_;
  Allocator& alloc_;
  const uint64_t root_off_;
  HashRoot* const root_;
  const KeyCodec codec_;
  std::shared_ptr<void> sole_handle_;
  const bool values_are_blocks_;
  const char* const kind_;
  mutable std::mutex zero_mu_;

 private:
  mutable std::mutex counters_mu_;
  HashCounters counters_;
};

// Nanoseconds on a monotonic clock.
uint64_t NowNs();

// Counters of a hash index (zeros if `index` is not one of ours).
HashCounters GetHashCounters(const Index& index);
void ResetHashCounters(Index& index);

}  // namespace wort::hash
