// ROART: the range-optimized, concurrent persistent ART (Ma et al., FAST 2021). Layouts and
// the tree class; the post-crash invariants and the persist order of every write path are at
// the top of roart.cc.
//
// Blocks (all 64-byte aligned pool blocks, referenced by pool offsets < 2^48):
//   Leaf        art::Leaf (value, key_len, key bytes); the key never changes after publication,
//               the value is one 8-byte commit word (upsert).
//   LeafArray   64-byte head + `slots` slot words, slots a size class (8, 24 or 64: 128, 256 or
//               576 bytes), + in format 3 one 16-byte SlotKV per slot (256, 640 or 1600 bytes);
//               format 4: the SlotKV area only in arrays that hold a key of at most 8 bytes
//               (kKvBit in the reference, kSlotsKv in the head), which also have a 2-slot class
//               (112 bytes);
//               a full array is replaced by one of the class its live keys + 1 need (growth, or
//               compaction when removes left dead slots), a full 64-slot array of 64 live keys
//               is split. Slot word = fingerprint(16) << 48 | leaf offset, or (format 3, a key of
//               at most 8 bytes) fingerprint(16) << 48 | key length << 1 | 1 with the key and
//               its value in the slot's SlotKV (no leaf); 0 = empty. A key's slot is the first
//               free one from its home line on (HomeLine). The taken-slot bitmap and the live
//               count are volatile (in the head).
//   Inner node  64-byte head + entries. NODE4/16/48 entries are "key byte << 48 | reference",
//               appended at a volatile cursor, never shifted, 0 = empty (entry compression);
//               NODE48 also has a volatile 256-byte child index. NODE256: child[c] = reference.
// A reference in an entry (or the root word) is an offset with a tag in its low bits:
// kLeafTag = a leaf (a subtree of one key), kArrayTag = a leaf array (with its size class in
// bits 2-3 in format 2, kRootMagic2; bits 2-4 and kKvBit in format 4), neither = an inner node.
// Persistent objects are plain structs (no vtable pointers: static_asserts below).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "index/radix/art_node.h"
#include "index/lazy_count.h"
#include "index/registry.h"
#include "sync/sync.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pool.h"

namespace wort::roart {

using art::Hdr;
using art::Leaf;

// The radix trees' tagged references (tagged_ref.h: bit 0 = leaf, the 6 low bits free) plus
// roart's own: bit 1 = leaf array, and the key byte or fingerprint above bit 48 of an entry.
inline constexpr uint64_t kRefMask = (uint64_t(1) << 48) - 1;
inline constexpr uint64_t kLeafTag = radix_ref::kLeafTag;
inline constexpr uint64_t kArrayTag = 2;
inline constexpr uint64_t kTagMask = radix_ref::kTagBits;
// Issue 34, format 2: bits 2-3 of a leaf array reference hold its size class (ClassCode), so
// a lookup needs neither the array's head nor its type word: it reads the one slot line the key
// hashes to (HomeLine) and the leaf. Code 0 = "read the head" (every array reference of a pool
// created before format 2, whose root block has kRootMagic; such a pool is read and written in
// its own format: its references never get a code).
// Format 4 widens the code to bits 2-4 (code 4: the small class of 2 slots, in arrays with a
// SlotKV area only) and adds bit 5, kKvBit: the array has a SlotKV area. In
// formats 2 and 3 bits 4 and 5 are always clear (format 3's arrays all have the area).
inline constexpr int kClassShift = 2;
inline constexpr uint64_t kClassBits = uint64_t(7) << kClassShift;
inline constexpr uint64_t kKvBit = 32;
// A reference's low bits are one of: 0 (inner node), kLeafTag, kArrayTag with a class code (and
// in format 4 kKvBit).
inline constexpr bool TagOk(uint64_t tag) { return tag <= kLeafTag || (tag & ~(kClassBits | kKvBit)) == kArrayTag; }
// Format 3 (issue 34): a key of at most kMaxInlineKey bytes sits in the leaf array itself: its
// slot word is fingerprint << 48 | length << 1 | kInlineBit (bit 0: a leaf offset is 64-byte
// aligned, so a slot word that names a leaf has it clear) and its SlotKV (key bytes, zero-padded,
// in key order in memory; the value) follows the slot words. A lookup of such a key reads the
// array's home slot line and one SlotKV line, no leaf; a scan reads the array only.
inline constexpr uint64_t kInlineBit = 1;
inline constexpr size_t kMaxInlineKey = 8;
inline constexpr uint64_t InlineSlot(uint64_t fp, size_t len) { return fp << 48 | uint64_t(len) << 1 | kInlineBit; }
inline constexpr bool IsInline(uint64_t slot) { return (slot & kInlineBit) != 0; }
inline constexpr uint32_t InlineLen(uint64_t slot) { return static_cast<uint32_t>((slot >> 1) & 15); }
// An inline slot word as writers store it: a length of at most 8 and nothing else below bit 48.
inline constexpr bool InlineSlotOk(uint64_t slot) { return (slot & kRefMask & ~uint64_t(31)) == 0 && InlineLen(slot) <= kMaxInlineKey; }
struct SlotKV {
  uint64_t key;    // the key's bytes, zero-padded (never changes while the slot is live)
  uint64_t value;  // the commit word of an upsert
};
static_assert(sizeof(SlotKV) == 16);
inline constexpr int kLeafArraySlots = 64;  // m, as in the authors' code: the largest class
// Leaf arrays start small and grow by size class (issue 34): a subtree of 2..8 keys takes 128
// bytes instead of 576. Format 4 adds a smaller class for arrays with a SlotKV area: 2 slots,
// 112 bytes (a 128-byte block) where the smallest class took 256 - a subtree of two 8-byte keys,
// the commonest array of a large tree of sparse keys (one more class, 4 slots in a 192-byte
// block, was tried: 5 bytes per key less at 16M sparse keys, one more growth step and one more
// allocator size class in use; not kept). An array without the area gains nothing below 8
// slots: its 64-byte head and 8 slot words are one 128-byte block already.
inline constexpr int kLeafArrayClasses[] = {8, 24, kLeafArraySlots};
inline constexpr int kSmallArrayClasses[] = {2};  // format 4, SlotKV area only
// small: the classes of format 4 for an array with a SlotKV area (2, 8, 24, 64).
inline constexpr int LeafArrayClassFor(int keys, bool small = false) {
  return small && keys <= 2 ? 2 : keys <= 8 ? 8 : keys <= 24 ? 24 : kLeafArraySlots;
}
// kv: the array has a SlotKV area (a SlotKV per slot after the slot words: every array of format
// 3, the arrays of format 4 whose reference has kKvBit).
inline constexpr size_t LeafArrayBytes(int slots, bool kv = false) { return 64 + (kv ? 24 : 8) * size_t(slots); }
// The class code of a slot count (1, 2, 3; format 4 also 4), and the slot count of a code (0:
// read the head).
inline constexpr uint64_t ClassCode(int slots) { return slots == 8 ? 1 : slots == 24 ? 2 : slots == 2 ? 4 : 3; }
inline constexpr int SlotsOfCode(uint64_t ref) {
  const uint64_t c = (ref & kClassBits) >> kClassShift;
  return c == 1 ? 8 : c == 2 ? 24 : c == 3 ? kLeafArraySlots : c == 4 ? 2 : 0;
}
// Slot lines of a class and the slot words per line (the small class: one line of 2).
inline constexpr int SlotLines(int slots) { return slots < 8 ? 1 : slots / 8; }
inline constexpr int LineSlots(int slots) { return slots < 8 ? slots : 8; }
// Slot placement (format 2, any format reads it): a key's home is the slot line (8 slot words,
// one cache line: a head is 64 bytes and blocks are 64-byte aligned) fingerprint % lines; an
// insert takes the first free slot from the home line on, wrapping. Readers probe the home line
// first and then the others, so a present key is found wherever it sits (an array from before
// format 2, or one whose home line was full): the placement is a search order, not a rule.
inline constexpr int HomeLine(uint64_t fp, int slots) { return slots <= 8 ? 0 : slots == 24 ? static_cast<int>(fp % 3) : static_cast<int>(fp & 7); }
// The first free slot of `used` (a bitmap of `slots` slots) from fp's home line on, or -1.
inline int PlaceSlot(uint64_t used, int slots, uint64_t fp) {
  const int start = 8 * HomeLine(fp, slots);
  const uint64_t all = slots == 64 ? ~uint64_t(0) : (uint64_t(1) << slots) - 1;
  const uint64_t free = ~used & all;
  if (!free) return -1;
  const uint64_t from = free & (~uint64_t(0) << start);  // start < 64
  return from ? __builtin_ctzll(from) : __builtin_ctzll(free);
}

enum NodeType : uint8_t { kN4 = 1, kN16 = 2, kN48 = 3, kN256 = 4, kLeafArray = 5 };

// First 64 bytes of every inner node and leaf array.
//   hdr        art::PackHdr (depth, prefix length, 5 inline prefix bytes); inner nodes only.
//              Written before publication; changed in place only by a prefix split (one store8)
//              or its repair.
//   type       NodeType, written once before publication.
//   leaf_here  inner nodes: leaf reference of the key that ends at the node's branch position.
//   gen        VOLATILE: the pool generation in which count/cursor/bitmap/index were computed.
//   count, cursor, bitmap: VOLATILE (never flushed on purpose; rebuilt when gen is stale).
//   slots      leaf arrays: the number of slot words (a kLeafArrayClasses value, or in format 4
//              a kSmallArrayClasses one), | kSlotsKv in format 4 when the array has a SlotKV
//              area, written once before publication; 0 in a pool written before size classes
//              = 64.
struct NodeHead {
  uint64_t hdr;
  uint64_t type;
  uint64_t leaf_here;
  uint64_t gen;
  uint32_t count;   // inner: children (leaf_here not counted); leaf array: used slots
  uint32_t cursor;  // NODE4/16/48: next entry to append
  uint64_t bitmap;  // leaf array: used slots
  uint64_t slots;   // leaf array: slot words (see above)
  uint64_t reserved;
};
static_assert(sizeof(NodeHead) == 64);

// The largest class; a smaller array is the same head and the first `slots` words only (the
// block is LeafArrayBytes(slots) long: never touch slot[i] for i >= Slots()).
struct LeafArray {
  NodeHead h;
  uint64_t slot[kLeafArraySlots];
};
static_assert(sizeof(LeafArray) == 64 + 512);
static_assert(LeafArrayBytes(kLeafArraySlots) == sizeof(LeafArray));
// Format 4: the head's slots word of an array with a SlotKV area has this bit (the reference's
// kKvBit says the same: Check compares them).
inline constexpr uint64_t kSlotsKv = uint64_t(1) << 16;
// A leaf array's slot count from its persistent head's slots word (kSlotsKv cleared): a class,
// 64 for a head from before the classes (0), or 0 for a value no writer stores (a damaged image:
// the array reads as empty). The small classes are classes of format 4 only (ArrayShape).
inline int SlotsOf(uint64_t slots_word) {
  if (slots_word == 0) return kLeafArraySlots;
  for (int c : kLeafArrayClasses)
    if (slots_word == uint64_t(c)) return c;
  for (int c : kSmallArrayClasses)
    if (slots_word == uint64_t(c)) return c;
  return 0;
}
// Format 3: slot i's SlotKV (after the `slots` slot words).
inline SlotKV* KVs(const NodeHead* la, int slots) {
  return reinterpret_cast<SlotKV*>(reinterpret_cast<char*>(const_cast<NodeHead*>(la)) + sizeof(NodeHead) + 8 * size_t(slots));
}
static_assert(std::is_trivially_copyable_v<LeafArray> && !std::is_polymorphic_v<LeafArray>);
static_assert(std::is_trivially_copyable_v<NodeHead> && !std::is_polymorphic_v<NodeHead>);

inline int Capacity(uint8_t t) { return t == kN4 ? 4 : t == kN16 ? 16 : t == kN48 ? 48 : t == kN256 ? 256 : 0; }
inline size_t NodeBytes(uint8_t t) {  // a leaf array: its head only (LeafArrayBytes for the rest)
  if (t == kLeafArray) return sizeof(NodeHead);
  return sizeof(NodeHead) + (t == kN48 ? 256 : 0) + 8 * size_t(Capacity(t));
}
inline uint64_t* Children(NodeHead* n, uint8_t t) {
  return reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(n) + sizeof(NodeHead) + (t == kN48 ? 256 : 0));
}
inline const uint64_t* Children(const NodeHead* n, uint8_t t) { return Children(const_cast<NodeHead*>(n), t); }
inline unsigned char* Index48(NodeHead* n) { return reinterpret_cast<unsigned char*>(n) + sizeof(NodeHead); }
inline uint8_t TypeFor(int children) { return children <= 4 ? kN4 : children <= 16 ? kN16 : children <= 48 ? kN48 : kN256; }

// The 16-bit fingerprint of a whole key, over its UNSIGNED bytes (the one function used for
// both the stored slot and the probe: the authors' code hashed signed chars on one side).
// 16-bit FNV-1a over the unsigned key bytes, folded (inline: every lookup computes it).
[[gnu::always_inline]] inline uint16_t Fingerprint(std::string_view key) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = reinterpret_cast<const unsigned char*>(key.data());
  if (key.size() == 8) {  // the common key, the same function unrolled (no loop per byte)
    for (int i = 0; i < 8; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  } else {
    for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ull;  // unsigned bytes
  }
  h ^= h >> 32;
  h ^= h >> 16;
  return static_cast<uint16_t>(h);
}

inline constexpr uint64_t kRootMagic = 0x3142'5254'5241'4f52ull;  // "ROARTRB1" little-endian
// Format 2 (issue 34): leaf array references carry their class code. Builds from before refuse
// such a pool ("bad root block magic"); this build reads and writes both formats.
inline constexpr uint64_t kRootMagic2 = 0x3242'5254'5241'4f52ull;  // "ROARTRB2"
// Format 3 (issue 34): keys of at most 8 bytes and their values in the leaf arrays (SlotKV).
// A format-1 or format-2 pool is still read and written in its own format (its arrays never get
// a SlotKV area or an inline slot); builds from before refuse a format-3 pool ("bad root block
// magic").
inline constexpr uint64_t kRootMagic3 = 0x3342'5254'5241'4f52ull;  // "ROARTRB3"
// Format 4 (issue 34): the SlotKV area is a per-array choice (kKvBit, kSlotsKv): an array has it
// iff it held a key of at most 8 bytes when it was built, and arrays with it have the small
// class of 2 slots too. A pool of formats 1-3 is still read and written in its own
// format; builds from before refuse a format-4 pool ("bad root block magic").
inline constexpr uint64_t kRootMagic4 = 0x3442'5254'5241'4f52ull;  // "ROARTRB4"
// The root block is woart's layout (art_node.h): magic kRootMagic, key_type, root (tagged
// reference, 0 = empty tree: the commit word of root replacement), flags (kValuesAreBlocks).
// Create writes kRootMagic4 (FormatForNewPoolsForTest); Open takes any of the four.
using art::RootBlock;
inline constexpr uint64_t kValuesAreBlocks = art::kRootValuesAreBlocks;

// Test hook: a prefix split stops after the new node is published (the old node's header is
// not shortened), as if the machine had crashed there: the next access repairs it.
enum class TestStop { kNone, kAfterSplitPublish };

class RoartTree final : public Index {
 public:
  RoartTree(Pool& pool, uint64_t root_off);
  static Status Create(Pool& pool, const IndexOptions& opts, uint64_t* root_off);
  static Status Open(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out);
  static void Visit(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark);

  std::string_view kind() const override { return "roart"; }
  KeyType key_type() const override { return key_type_; }
  Status Insert(std::string_view key, uint64_t value) override;
  Status Upsert(std::string_view key, uint64_t value, bool* inserted = nullptr) override;
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

  // ---- for tests ----
  // The format Create writes (4 unless a test asks for 1-3 to make an older pool); 0 = 4.
  static void SetFormatForNewPoolsForTest(int format);
  void SetTestStop(TestStop s) { test_stop_ = s; }
  uint64_t repairs() const { return repairs_.load(); }
  // Number of inner nodes of each type and of leaf arrays (index = NodeType).
  void CountNodeTypes(uint64_t counts[8]) const;
  // The slot count of every leaf array, in walk order.
  std::vector<int> LeafArraySlotCounts() const;
  // Where the pool's bytes go (issue 34): the reachable blocks by what holds them (inner nodes
  // by type, leaf arrays by class and SlotKV area with their fill, leaves), their usable sizes
  // (Stats().bytes_allocated), and the allocator's live, cached and chunk-level space. Printed
  // by `wort pool info` for a roart root; quiescent (takes the quiesce lock).
  std::string SpaceReport() const;

 private:
  struct Locks;
  struct ScanCtx;
  struct NewSlot;
  struct PathElem;
  using Attempt = sync::Attempt;  // (sync/attempt.h)

  Status ValidateKey(std::string_view key) const;
  Attempt InsertAttempt(std::string_view key, uint64_t value, bool upsert, bool* inserted, Status* out);
  Attempt RemoveAttempt(std::string_view key, Status* out);
  WORT_OPTIMISTIC_INLINE bool LookupAttempt(std::string_view key, uint64_t* value) const;  // no versions (ROWEX: roart.cc)
  [[gnu::noinline]] Status LookupGlobalLock(std::string_view key, uint64_t* value) const;
  [[gnu::noinline, gnu::cold]] static Status KeyNotFound();

  template <class T = NodeHead>
  T* at(uint64_t ref) const { return pool_.at<T>(ref & kRefMask & ~kTagMask); }
  // A reference a reader may follow: a known tag, inside the heap and the file (inline: every
  // step of every lookup checks one).
  WORT_OPTIMISTIC_INLINE bool RefOk(uint64_t ref) const {
    const uint64_t tag = ref & kTagMask;
    const uint64_t off = ref & kRefMask & ~kTagMask;
    if (!TagOk(tag) || off == 0 || off < heap_off_) return false;
    return pool_.contains(off, tag == kLeafTag ? sizeof(Leaf) : sizeof(NodeHead));
  }
  bool Fresh(const NodeHead* n) const;
  void Refresh(NodeHead* n, uint8_t t);  // under the node's write lock
  WORT_OPTIMISTIC_INLINE uint64_t* FindChild(NodeHead* n, uint8_t t, unsigned char c) const;  // inline: every level
  bool AnyKey(uint64_t ref, std::string_view* key) const;  // the key of any leaf/slot below ref
  // Slot i (word s, non-zero) of leaf array la of `slots` slots: its key and value word; false if
  // the slot is damaged (a leaf outside the pool, an inline slot in an array without a SlotKV
  // area).
  WORT_OPTIMISTIC_INLINE bool SlotEntry(const NodeHead* la, int slots, int i, uint64_t s, std::string_view* key,
                                        uint64_t** value) const;

  // Persistence (the only four persist sites of the kind).
  static void Flush(const void* p, size_t n);
  static void FlushGrown(const void* p, size_t n);  // a grown leaf array (its own site: issue 34)
  static void FlushSlot(const void* p, size_t n);   // an inline slot's SlotKV (format 3: its own site)
  static void Fence();
  static void Commit(uint64_t* word, uint64_t v);

  // Builders: allocate, fill, flush (no fence). Freed by the caller on a later failure.
  Status NewLeaf(std::string_view key, uint64_t value, uint64_t* ref);
  // kv: the new array has a SlotKV area (always in format 3, never in 1 and 2).
  Status NewLeafArray(const NewSlot* e, int n, bool kv, uint64_t* ref);
  // converted: leaves whose keys became inline (format 4), to retire after the publish.
  Status RebuildLeafArray(const LeafArray* la, int slots, const NewSlot& add, uint64_t* ref,
                          std::vector<uint64_t>* converted);
  // Format 4: whether an array built of keys with these lengths has a SlotKV area; 3: always.
  bool KvFor(bool any_short) const { return format_ == 3 || (format_ >= 4 && any_short); }
  WORT_OPTIMISTIC_INLINE int Slots(const NodeHead* la) const;  // the leaf array's slot count, 0 if its block is damaged
  // Whether the leaf array has a SlotKV area: from its head (format 4) or the pool's format.
  WORT_OPTIMISTIC_INLINE bool ArrayKv(const NodeHead* la) const;
  // The same from its reference (format 4: kKvBit).
  bool RefKv(uint64_t ref) const { return format_ >= 4 ? (ref & kKvBit) != 0 : format_ == 3; }
  // The slot count from a reference (its class code first; 0: damaged) and the SlotKV area.
  WORT_OPTIMISTIC_INLINE int ScanSlots(uint64_t ref, bool* kv) const;
  Status NewNode(uint8_t type, const Hdr& h, uint64_t leaf_here, const std::pair<unsigned char, uint64_t>* e, int n,
                 uint64_t* ref);
  Status SplitLeafArray(const LeafArray* la, uint32_t depth, const NewSlot& add, std::string_view add_key,
                        std::vector<uint64_t>* built, uint64_t* ref, std::vector<uint64_t>* converted);
  void FreeAll(const std::vector<uint64_t>& refs);
  void Retire(uint64_t ref) { pool_.allocator().Retire(ref & kRefMask & ~kTagMask); }
  // A leaf array's reference: with its class code in format 2+, without in format 1; kKvBit in
  // format 4 when it has a SlotKV area.
  uint64_t ArrayRef(uint64_t off, int slots, bool kv) const {
    return off | kArrayTag | (format2_ ? ClassCode(slots) << kClassShift : 0) | (format_ >= 4 && kv ? kKvBit : 0);
  }
  void Added();
  void Removed();

  bool ScanRef(uint64_t ref, const sync::VersionLock* pl, uint64_t pv, uint32_t depth, bool bounded,
               ScanCtx& ctx) const;
  uint64_t CountKeys() const;
  // Writers and quiescers use the pool epoch manager's writer gate (registry.h, issue 31).
  IndexModeLock ModeLock(IndexModeLock::Role r) const { return IndexModeLock(mu_, &epoch(), global_lock_, r); }
  sync::EpochManager& epoch() const { return *epoch_; }

  std::shared_ptr<void> sole_handle_;  // ClaimSoleHandle's token (registry.h: one handle per index)
  Pool& pool_;
  const uint64_t root_off_;
  RootBlock* const rb_;
  KeyType key_type_;
  const int format_;         // 1-4 (kRootMagic .. kRootMagic4)
  const bool format2_;       // format 2+ (kRootMagic2/3/4): array references carry their class
  const bool kv_;            // format 3+: keys of at most 8 bytes inline (SlotKV) in arrays with the area
  const uint64_t heap_off_;
  const uint64_t gen_;       // the pool generation of this session
  const bool trust_meta_;    // false on a read-only pool: volatile metadata is never used
  std::shared_ptr<std::shared_mutex> mu_ptr_;
  std::shared_mutex& mu_;
  const bool global_lock_;
  sync::EpochManager* const epoch_;  // the pool allocator's (it lives as long as the open pool)
  LazyKeyCount count_;
  std::atomic<uint64_t> repairs_{0};
  TestStop test_stop_ = TestStop::kNone;
};

}  // namespace wort::roart
