// The tagged references of the radix trees (WORT, WOART, ART+CoW): the one place that defines
// the scheme. wort.h and art_node.h name these functions in their own namespaces.
//
// A reference is the pool offset of a 64-byte-aligned block, so its low 6 bits are free. Bit 0
// set means "leaf"; clear means "inner node". 0 is the null reference (offset 0 is the pool
// header, never a block). The other five low bits are never set in a well-formed reference.
#pragma once

#include <cstdint>

namespace wort::radix_ref {

inline constexpr uint64_t kTagBits = 63;  // the low bits that alignment frees
inline constexpr uint64_t kLeafTag = 1;   // bit 0: 1 = leaf block, 0 = inner node
inline constexpr uint64_t MakeLeafRef(uint64_t off) { return off | kLeafTag; }
inline constexpr uint64_t MakeNodeRef(uint64_t off) { return off; }
inline constexpr bool IsLeafRef(uint64_t ref) { return (ref & kLeafTag) != 0; }
// The offset: the leaf tag cleared, and nothing else, so that a reference with a stray low bit
// gives a misaligned offset, which the trees' checks and visits report as corruption.
inline constexpr uint64_t RefOffset(uint64_t ref) { return ref & ~kLeafTag; }
// True iff the low bits that are neither offset nor the leaf tag are clear.
inline constexpr bool RefWellFormed(uint64_t ref) { return (ref & kTagBits & ~kLeafTag) == 0; }

}  // namespace wort::radix_ref
