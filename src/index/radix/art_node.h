// Persistent node layouts shared by WOART and ART+CoW (src/index/radix/woart.cc, artcow.cc).
//
// Every block below lives in a pool and is referenced by a *tagged reference*: the block's pool
// offset (64-byte aligned, so its low 6 bits are 0) with bit 0 set for a leaf and clear for an
// inner node; 0 is the null reference. The scheme is defined once for the three radix trees, in
// tagged_ref.h; LeafRef / NodeRef / IsLeafRef / RefOffset below are its names here.
//
// Keys are byte strings compared as unsigned bytes. An inner node at (expected) depth d with a
// compressed prefix of length p *branches* at key position b = d + p: its children are indexed
// by the byte key[b], and a key of length exactly b (one that ends at this node) sits in the
// node's `leaf_here` word. Positions are byte positions (8-bit partial keys, as in ART).
//
// Node types (NodeBase::type, written once when the node is built, never changed):
//   kW4    WOART NODE4:  sorted partial keys + slot array packed in ONE 8-byte word (Algorithm 3)
//   kW16   WOART NODE16: unsorted partial keys, 16-bit validity bitmap in one 8-byte word
//                        (Algorithm 4)
//   kN48   NODE48 (both trees): 256-entry child index array + 48 child words (Algorithm 5)
//   kN256  NODE256 (both trees): 256 child words, as a WORT node
//   kS4    ART+CoW NODE4:  sorted keys and children with a count, as original ART; never
//                          modified in place except a child word or leaf_here (copy-on-write)
//   kS16   ART+CoW NODE16: the same with 16 entries
// Distinct type ids for the two trees' small nodes let Check() catch a node of the wrong tree.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "sync/version_lock.h"
#include "index/radix/tagged_ref.h"
#include "wort/pm.h"

namespace wort::art {

// ---- tagged references ---------------------------------------------------------------------
// (tagged_ref.h: bit 0 set = leaf block, clear = inner node; 0 = null.)
inline constexpr uint64_t kLeafTag = radix_ref::kLeafTag;
inline constexpr uint64_t LeafRef(uint64_t off) { return radix_ref::MakeLeafRef(off); }
inline constexpr uint64_t NodeRef(uint64_t off) { return radix_ref::MakeNodeRef(off); }
inline constexpr bool IsLeafRef(uint64_t ref) { return radix_ref::IsLeafRef(ref); }
inline constexpr uint64_t RefOffset(uint64_t ref) { return radix_ref::RefOffset(ref); }

// ---- leaf ------------------------------------------------------------------------------------
// Layout: [0,8) value, [8,12) key_len, [12,16) reserved (0), [16, 16+key_len) key bytes.
// Invariant: key_len <= kMaxKeyLen; key and key_len never change after the leaf is published.
// Write order: all fields written and persisted before the reference to the leaf is published.
// Upsert's commit point is the 8-byte store of `value` (then persisted).
struct Leaf {
  uint64_t value;
  uint32_t key_len;
  uint32_t reserved;
  const unsigned char* key() const { return reinterpret_cast<const unsigned char*>(this + 1); }
  unsigned char* key() { return reinterpret_cast<unsigned char*>(this + 1); }
  std::string_view key_view() const { return {reinterpret_cast<const char*>(key()), key_len}; }
  static size_t SizeFor(size_t key_len) { return sizeof(Leaf) + key_len; }
};
static_assert(sizeof(Leaf) == 16);
static_assert(offsetof(Leaf, value) == 0);

// ---- compression header ----------------------------------------------------------------------
// One 8-byte word, always written by a single pm::store8 (the unit of failure atomicity), as in
// WORT's Figure 2, widened for keys of up to 4096 bytes:
//   bits [0,12)   depth       position of the node's first prefix byte (= number of key bytes
//                             consumed above it when the tree is consistent)
//   bits [12,24)  prefix_len  p, the number of compressed (collapsed) key bytes
//   bits [24,64)  prefix[5]   the first min(p, 5) prefix bytes (pessimistic part); bytes past
//                             5 are not stored (optimistic part: checked at the leaf, or read
//                             from any leaf below when needed); unused bytes are 0.
// Every inner node branches at b = depth + prefix_len <= 4095 (a key that branches or ends at b
// and one longer key below need b < kMaxKeyLen), so 12 bits hold both fields.
// WORT's depth rule: a node whose stored depth differs from its real depth (the depth its parent
// implies) carries a header written by an interrupted prefix split or merge; depth + prefix_len
// is the same in both headers, and the real header is recomputed from two leaves (Algorithm 2).
inline constexpr uint32_t kInlinePrefix = 5;
inline constexpr uint32_t kMaxDepthField = 4095;

struct Hdr {
  uint32_t depth = 0;
  uint32_t plen = 0;
  unsigned char prefix[kInlinePrefix] = {0, 0, 0, 0, 0};
  uint32_t branch() const { return depth + plen; }
};

inline uint64_t PackHdr(const Hdr& h) {
  uint64_t w = uint64_t(h.depth & 0xfff) | (uint64_t(h.plen & 0xfff) << 12);
  const uint32_t n = h.plen < kInlinePrefix ? h.plen : kInlinePrefix;
  for (uint32_t j = 0; j < n; ++j) w |= uint64_t(h.prefix[j]) << (24 + 8 * j);
  return w;
}
inline Hdr UnpackHdr(uint64_t w) {
  Hdr h;
  h.depth = uint32_t(w & 0xfff);
  h.plen = uint32_t((w >> 12) & 0xfff);
  for (uint32_t j = 0; j < kInlinePrefix; ++j) h.prefix[j] = static_cast<unsigned char>(w >> (24 + 8 * j));
  return h;
}
// A header at `depth` whose prefix is key[depth, depth + plen) (only the inline part is kept).
inline Hdr MakeHdr(uint32_t depth, uint32_t plen, const unsigned char* key_at_depth) {
  Hdr h;
  h.depth = depth;
  h.plen = plen;
  const uint32_t n = plen < kInlinePrefix ? plen : kInlinePrefix;
  for (uint32_t j = 0; j < n; ++j) h.prefix[j] = key_at_depth[j];
  return h;
}

// ---- inner nodes -------------------------------------------------------------------------------
enum NodeType : uint8_t { kW4 = 1, kW16 = 2, kN48 = 3, kN256 = 4, kS4 = 5, kS16 = 6 };
inline bool ValidNodeType(uint8_t t) { return t >= kW4 && t <= kS16; }
const char* NodeTypeName(uint8_t t);

// Common first 24 bytes of every inner node.
//   hdr        compression header (above). WOART: the commit word of the node's part of a
//              prefix split or merge. ART+CoW: written once before publication.
//   type       NodeType, written once before publication.
//   leaf_here  tagged leaf reference of the key of length exactly depth + prefix_len, or 0.
//              Commit word for inserting / removing that key (one store8 + persist).
struct NodeBase {
  uint64_t hdr;
  uint8_t type;
  uint8_t reserved[7];
  uint64_t leaf_here;
};
static_assert(sizeof(NodeBase) == 24);

// WOART NODE4 (64 bytes, one cache line).
//   slots     the 8-byte slot word: bytes [0,4) partial keys, bytes [4,8) slot array. Entries
//             are packed at the front and sorted by unsigned partial key; slot byte i is
//             EncodeSlot(index into child[]) for a valid entry, 0 for an empty one (name: see
//             Slot4 below). The commit word for every insert/remove of a child (Algorithm 3).
//   child[4]  child references; child[k] is meaningful only if some valid entry names k.
// Write order (insert): child[free] := ref, persist; slots := new word (store8), persist.
struct W4 {
  NodeBase b;
  uint64_t slots;
  uint64_t child[4];
};
static_assert(sizeof(W4) == 64);
static_assert(offsetof(W4, slots) == 24 && offsetof(W4, child) == 32);

// Decoded slot word of a W4. Encoding (one helper pair): slot byte = child index + 1, 0 = empty.
struct Slot4 {
  int n = 0;               // valid entries
  unsigned char key[4]{};  // sorted ascending (unsigned) in [0, n)
  unsigned char idx[4]{};  // child[] index of entry i, in [0, 4)
};
inline uint8_t EncodeSlot(int child_index) { return static_cast<uint8_t>(child_index + 1); }
inline int DecodeSlot(uint8_t b) { return int(b) - 1; }  // -1 = empty
inline Slot4 DecodeSlot4(uint64_t w) {
  Slot4 s;
  for (int i = 0; i < 4; ++i) {
    const int ci = DecodeSlot(static_cast<uint8_t>(w >> (32 + 8 * i)));
    if (ci < 0) break;
    s.key[s.n] = static_cast<unsigned char>(w >> (8 * i));
    s.idx[s.n] = static_cast<unsigned char>(ci);
    ++s.n;
  }
  return s;
}
inline uint64_t EncodeSlot4(const Slot4& s) {
  uint64_t w = 0;
  for (int i = 0; i < s.n; ++i) {
    w |= uint64_t(s.key[i]) << (8 * i);
    w |= uint64_t(EncodeSlot(s.idx[i])) << (32 + 8 * i);
  }
  return w;
}

// WOART NODE16 (176 bytes -> 192-byte block, three cache lines).
//   bitmap    bits [0,16): entry i valid; bits [16,64) are 0. The commit word of every
//             insert/remove of a child (Algorithm 4), written by one store8.
//   keys[16]  unsorted partial keys; keys[i] meaningful only if bit i is set. Valid keys are
//             distinct.
//   child[16] child references, parallel to keys.
// Write order (insert): keys[i], child[i] written and persisted; bitmap |= 1<<i (store8), persist.
struct W16 {
  NodeBase b;
  uint64_t bitmap;
  unsigned char keys[16];
  uint64_t child[16];
};
static_assert(sizeof(W16) == 176);
static_assert(offsetof(W16, bitmap) == 24 && offsetof(W16, keys) == 32 && offsetof(W16, child) == 48);

// NODE48 (664 bytes -> 704-byte block).
//   child_index[256]  child_index[c] = EncodeSlot(k) when partial key c lives in child[k];
//                     0 = no child for c (same "index + 1, 0 = empty" encoding as Slot4).
//                     Valid entries name distinct k < 48. An entry is changed by one store8 of
//                     the aligned 8-byte word that contains it (the commit word).
//   child[48]         child references; child[k] is meaningful only if some entry names k.
// A free child[k] is found through child_index (Algorithm 5), never by looking for a null
// pointer, so a crash can never leave a child word that looks used but is unreachable.
// Write order (insert): child[k] := ref, persist; word of child_index[c] (store8), persist.
struct N48 {
  NodeBase b;
  unsigned char child_index[256];
  uint64_t child[48];
};
static_assert(sizeof(N48) == 664);
static_assert(offsetof(N48, child_index) % 8 == 0 && offsetof(N48, child) % 8 == 0);

// NODE256 (2072 bytes -> 2112-byte block): child[c] is the child for partial key c, 0 = none.
// Each child word is its own commit word (store8 + persist), as in WORT.
struct N256 {
  NodeBase b;
  uint64_t child[256];
};
static_assert(sizeof(N256) == 2072);

// ART+CoW NODE4 / NODE16: original ART layout (sorted keys, parallel children, a count).
// Everything but child[] words and leaf_here is written once before the node is published; an
// insert or remove of a child builds a new node (copy-on-write) and swaps the parent's word.
template <int N>
struct SNode {
  NodeBase b;
  uint8_t count;
  unsigned char keys[N];  // sorted ascending (unsigned) in [0, count), distinct
  alignas(8) uint64_t child[N];
};
using S4 = SNode<4>;
using S16 = SNode<16>;
static_assert(sizeof(S4) == 64 && offsetof(S4, child) == 32);
static_assert(sizeof(S16) == 176 && offsetof(S16, child) == 48);

inline size_t NodeSize(uint8_t type) {
  switch (type) {
    case kW4: return sizeof(W4);
    case kW16: return sizeof(W16);
    case kN48: return sizeof(N48);
    case kN256: return sizeof(N256);
    case kS4: return sizeof(S4);
    case kS16: return sizeof(S16);
  }
  return 0;
}
// Largest number of children a node type holds.
inline int Capacity(uint8_t type) {
  switch (type) {
    case kW4: case kS4: return 4;
    case kW16: case kS16: return 16;
    case kN48: return 48;
    case kN256: return 256;
  }
  return 0;
}
// Fewest children a node type holds (shrinking happens when a removal would go below this;
// the gap to the next smaller capacity is hysteresis, so insert/remove at a boundary does not
// copy a node back and forth).
inline int MinChildren(uint8_t type) {
  switch (type) {
    case kW16: case kS16: return 4;   // 16 -> 4 when 3 remain
    case kN48: return 13;             // 48 -> 16 when 12 remain
    case kN256: return 37;            // 256 -> 48 when 36 remain
  }
  return 0;  // NODE4: merged away when only one entry (child or leaf_here) remains
}

// ---- 16-way partial-key search -----------------------------------------------------------------
// Index of the first i with bit i of `mask` set and keys[i] == c, or -1. The SIMD version
// compares for *equality* only, where signed and unsigned bytes agree; the scalar one is the
// reference the tests compare it with over the full byte range.
inline int Find16Scalar(const unsigned char* keys, uint32_t mask, unsigned char c) {
  for (int i = 0; i < 16; ++i)
    if (((mask >> i) & 1) && keys[i] == c) return i;
  return -1;
}
WORT_OPTIMISTIC_READ inline int Find16Simd(const unsigned char* keys, uint32_t mask, unsigned char c) {
  const __m128i k = _mm_loadu_si128(reinterpret_cast<const __m128i*>(keys));
  const __m128i eq = _mm_cmpeq_epi8(k, _mm_set1_epi8(static_cast<char>(c)));
  const uint32_t hit = static_cast<uint32_t>(_mm_movemask_epi8(eq)) & mask & 0xffffu;
  return hit ? __builtin_ctz(hit) : -1;
}
// Number of valid keys[i] (bit i of mask) that are < c as *unsigned* bytes. The SIMD version
// flips the sign bit of both sides so that the signed compare instruction orders them as
// unsigned (the trap libart fell into); tests compare it with the scalar one.
inline int CountLess16Scalar(const unsigned char* keys, uint32_t mask, unsigned char c) {
  int n = 0;
  for (int i = 0; i < 16; ++i)
    if (((mask >> i) & 1) && keys[i] < c) ++n;
  return n;
}
WORT_OPTIMISTIC_READ inline int CountLess16Simd(const unsigned char* keys, uint32_t mask, unsigned char c) {
  const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80));
  const __m128i k = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(keys)), bias);
  const __m128i x = _mm_xor_si128(_mm_set1_epi8(static_cast<char>(c)), bias);
  const __m128i lt = _mm_cmplt_epi8(k, x);
  return __builtin_popcount(static_cast<uint32_t>(_mm_movemask_epi8(lt)) & mask & 0xffffu);
}

// Root block of woart/artcow (ArtTree) and roart (64 bytes; each kind its own magic). Layout: magic, key_type, root, flags, 4 reserved words (0).
//   magic, key_type, flags  written once at creation.
//   root             tagged reference of the tree's root (0 = empty tree): the commit word of
//                    every mutation that replaces the root.
//   flags            kRootValuesAreBlocks: IndexOptions::values_are_blocks - every leaf's value
//                    is the offset of a pool block that visit reports as reachable.
inline constexpr uint64_t kRootValuesAreBlocks = 1;
struct RootBlock {
  uint64_t magic;
  uint64_t key_type;
  uint64_t root;
  uint64_t flags;
  uint64_t reserved[4];
};
static_assert(sizeof(RootBlock) == 64);

}  // namespace wort::art
