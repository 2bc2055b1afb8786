// src/remote/canrt_layout.h - CANRT's persistent layout (Ying et al., "CANRT: a client-active
// NVM-based radix tree for fast remote access", sections 3.1-3.6), shared by the server
// (canrt_server.cc) and the client (canrt_client.cc), which reads it through the transport.
//
// The region
// ----------
// CANRT lives in ONE block of a wort pool; the block is the region the transport exposes, so
// every reference below is an offset from the block's start (region offset 0 = the header).
//   [0, 4096)            RootHeader: geometry (written once, at creation) and two mutable words
//   [area_off[0], +area_bytes)  prefix area 0  } tick-tock: one holds the valid tree, the other
//   [area_off[1], +area_bytes)  prefix area 1  } is the shadow a resize builds (section 3.5)
//   [data_off, +max_nodes*node_bytes)  data nodes, located arithmetically by id
//
// Prefix nodes (section 3.1/3.2): pointer-less, complete m-ary levels. Level i (1-based) holds
// m^(i-1) nodes; node ids are global and level i starts at b_i = (m^(i-1)-1)/(m-1) (equation 2);
// the child of entry p of node I at level i is b_{i+1} + (I - b_i)*m + p (equation 3). A node
// holds nChars sorted *symbols* (chars) and, at the last level k, the data-node id of each.
// Symbols: the key's byte j is symbol byte+1; a key shorter than j+1 bytes has symbol 0 there
// (so "a" < "a\0" < "a\x01" as byte strings are). Where the paper stores exact characters and
// sends every unknown character to the last data node, wort's chars are lower bounds of ranges:
// entry p covers symbols [chars[p], chars[p+1]) and chars[0] is 0, so every key maps to a data
// node and the map is monotone: data nodes in the order of a depth-first walk hold increasing
// key ranges, which gives ordered range scans over consecutive data nodes (section 4.4). Each data
// node is named by one run of consecutive entries of one last-level node.
//
// Data nodes (section 3.1): a 64-byte header line whose first word is the metadata, then
// `capacity` unsorted 64-byte DataItems.
//   metadata word: bits 0..30 valid-slot bitmap (capacity <= 31), bit 31 RETIRED (the node was
//   split by a resize; its items live on in two new nodes), bits 32..63 the lock field. Writers
//   take the lock with FetchAdd64(1 << 32): a carry out of the lock field leaves bit 63 and is
//   lost - it can never reach the bitmap. The lock counts attempts while it is held (each waiter
//   adds one); only the server resets it to 0. (2^32 failed attempts during one hold would wrap
//   it to 0; writers back off exponentially, so a hold would have to last for hours.)
//   DataItem: [0] op (1 put, 2 delete), [1] key length, [2] value length, [3] 0,
//   [4..8) crc32c of bytes [0,4) and key and value, [8..32) key (<= 24 bytes), [32..63) value
//   (<= 31 bytes), [63] valid (1: written by a client, not yet processed by the server).
//   A delete item's processed result goes in byte 62 (0: removed, 1: not found, 2: rejected).
//
// Header mutable words (their own cache line of the header):
//   state        generation << 2 | pxflag << 1 | dtflag. The valid tree is area (generation & 1).
//                Both flags set: no resize in progress. A resize stores (gen, 0, 0) when it starts,
//                (gen, px=1, 0) when the shadow prefix nodes are persistent, and commits with one
//                store of (gen+1, 1, 1): "marking the dtflag transforms the shadow tree into the
//                new valid tree" (section 3.6).
//   resize_node  the data node being split (persisted before state says a resize started).
// Area header (first 64 bytes of an area): height k, fan-out m, data nodes in use (ndata),
// prefix nodes in use; then the prefix nodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace wort::canrt {

inline constexpr uint64_t kMagic = 0x31764e52544e4143ull;  // "CANRTNv1"
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kItemBytes = 64;
inline constexpr size_t kMaxKey = 24;    // bytes; a longer key is InvalidArgument
inline constexpr size_t kMaxValue = 31;  // bytes; a longer value is InvalidArgument
inline constexpr uint32_t kMaxCapacity = 31;
inline constexpr uint32_t kMaxHeight = kMaxKey + 1;  // symbol positions 0..24
inline constexpr uint64_t kHeaderBytes = 4096;
inline constexpr uint64_t kAreaHeaderBytes = 64;

inline constexpr uint64_t kBitmapMask = 0x7fffffffull;
inline constexpr uint64_t kRetired = 1ull << 31;
inline constexpr uint64_t kLockOne = 1ull << 32;
inline constexpr uint64_t kLockMask = ~0ull << 32;
inline uint32_t LockOf(uint64_t meta) { return static_cast<uint32_t>(meta >> 32); }

enum Op : uint8_t { kOpPut = 1, kOpDelete = 2 };
enum Result : uint8_t { kResOk = 0, kResNotFound = 1, kResRejected = 2 };
inline constexpr size_t kItemOp = 0, kItemKeyLen = 1, kItemValLen = 2, kItemCrc = 4, kItemKey = 8,
                        kItemValue = 32, kItemResult = 62, kItemValid = 63, kItemTailWord = 56;

// Notify message: node id and slot (kResizeSlot: "node full, please resize").
struct Message {
  uint32_t node;
  uint32_t slot;
};
inline constexpr uint32_t kResizeSlot = 0xffffffffu;

struct RootHeader {
  // line 0: geometry, written once before the root is published
  uint64_t magic;
  uint32_t version;
  uint32_t capacity;    // items per data node (N)
  uint32_t fanout;      // m: symbols per prefix node
  uint32_t max_height;  // k may grow up to this
  uint64_t node_bytes;  // 64 + N * 64
  uint64_t max_nodes;   // data nodes the data area holds
  uint64_t area_bytes;  // bytes of each prefix area
  uint64_t area_off[2];
  uint64_t data_off;
  // the next line: mutable
  alignas(64) uint64_t state;
  uint64_t resize_node;
};
static_assert(sizeof(RootHeader) <= kHeaderBytes);
static_assert(offsetof(RootHeader, state) % 64 == 0);  // its own cache line

struct AreaHeader {
  uint32_t height;  // k
  uint32_t fanout;  // m
  uint64_t ndata;   // data nodes in use (ids 0..ndata-1; retired ones included)
  uint64_t nprefix; // prefix nodes in use (levels 1..k)
};
static_assert(sizeof(AreaHeader) <= kAreaHeaderBytes);

inline uint64_t StateWord(uint64_t gen, bool px, bool dt) { return gen << 2 | uint64_t(px) << 1 | uint64_t(dt); }
inline uint64_t GenOf(uint64_t state) { return state >> 2; }

// Prefix node layout for fan-out m: u32 nchars, u16 chars[m], u32 ids[m].
inline size_t IdsOffset(uint32_t m) { return (4 + 2 * size_t(m) + 3) & ~size_t(3); }
inline size_t PrefixNodeBytes(uint32_t m) { return (IdsOffset(m) + 4 * size_t(m) + 7) & ~size_t(7); }
// Prefix nodes in levels 1..k (sum of m^(i-1)), or UINT64_MAX on overflow.
inline uint64_t PrefixNodesFor(uint32_t m, uint32_t k) {
  uint64_t total = 0, level = 1;
  for (uint32_t i = 0; i < k; ++i) {
    total += level;
    if (level > (1ull << 40) / m) return UINT64_MAX;
    level *= m;
  }
  return total;
}
// First node id of level i (1-based).
inline uint64_t LevelBase(uint32_t m, uint32_t i) { return PrefixNodesFor(m, i - 1); }

inline uint16_t Symbol(std::string_view key, uint32_t pos) {
  return pos < key.size() ? static_cast<uint16_t>(static_cast<uint8_t>(key[pos]) + 1) : 0;
}

// A read-only view of a prefix area (the server's mapping or a client's copy).
class PrefixView {
 public:
  PrefixView(const char* area) : a_(area) { std::memcpy(&h_, area, sizeof h_); }
  const AreaHeader& header() const { return h_; }
  const char* node(uint64_t id) const { return a_ + kAreaHeaderBytes + id * PrefixNodeBytes(h_.fanout); }
  uint32_t nchars(uint64_t id) const {
    uint32_t n;
    std::memcpy(&n, node(id), 4);
    return n;
  }
  uint16_t chr(uint64_t id, uint32_t p) const {
    uint16_t c;
    std::memcpy(&c, node(id) + 4 + 2 * p, 2);
    return c;
  }
  uint32_t nid(uint64_t id, uint32_t p) const {
    uint32_t v;
    std::memcpy(&v, node(id) + IdsOffset(h_.fanout) + 4 * p, 4);
    return v;
  }
  // Position of `sym` in node `id`: the last entry whose lower bound is <= sym.
  uint32_t Position(uint64_t id, uint16_t sym) const {
    const uint32_t n = nchars(id);
    uint32_t p = 0;
    while (p + 1 < n && chr(id, p + 1) <= sym) ++p;
    return p;
  }
  uint64_t Child(uint32_t level, uint64_t id, uint32_t p) const {
    const uint32_t m = h_.fanout;
    return LevelBase(m, level + 1) + (id - LevelBase(m, level)) * m + p;
  }
  // The data node of `key` (section 3.2), and optionally its last-level node and position.
  uint32_t Locate(std::string_view key, uint64_t* leaf = nullptr, uint32_t* pos = nullptr) const {
    uint64_t id = 0;
    for (uint32_t level = 1;; ++level) {
      const uint32_t p = Position(id, Symbol(key, level - 1));
      if (level == h_.height) {
        if (leaf) *leaf = id;
        if (pos) *pos = p;
        return nid(id, p);
      }
      id = Child(level, id, p);
    }
  }
  // Calls fn(data node id) for every data node in key order (each once).
  template <class Fn>
  void ForEachInOrder(Fn&& fn) const {
    uint32_t last = UINT32_MAX;
    auto dedup = [&](uint32_t d) {
      if (d != last) fn(d);
      last = d;
    };
    Walk(1, 0, dedup);
  }

 private:
  template <class Fn>
  void Walk(uint32_t level, uint64_t id, Fn& fn) const {
    const uint32_t n = nchars(id);
    for (uint32_t p = 0; p < n; ++p) {
      if (level == h_.height) fn(nid(id, p));
      else Walk(level + 1, Child(level, id, p), fn);
    }
  }
  const char* a_;
  AreaHeader h_;
};

uint32_t ItemCrc(const unsigned char* item);  // crc32c of bytes [0,4) and the key and value

}  // namespace wort::canrt
