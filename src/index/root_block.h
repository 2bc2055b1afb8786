// The root block checks that every persistent index kind's open makes first (issue 14's "one
// root-block header helper"). The root block layouts stay each family's own - they are file
// formats (btree_common.h's header for the five B-trees, art_tree.h's for woart/artcow and
// roart, wort.h's, hash_common.h's HashRoot) - but each holds a magic and a key type, and each
// open checks them the same way, with the same messages:
//   CheckRootBlockPlace   [off, off + bytes) is a 64-byte-aligned block in the pool's heap
//                         (HeapBlockOk, which the radix trees' visits also ask of every block)
//   CheckRootHeader       the magic is the kind's; the key type is kU64 or kBytes
// Both return Corruption("<kind>: ...") otherwise; a kind then checks what is its own
// (version, type id, span).
#pragma once

#include <cstdint>
#include <string>

#include "wort/key.h"
#include "wort/pool.h"
#include "wort/status.h"

namespace wort {

// True iff [off, off + len) can be an allocator block: nonzero, 64-byte aligned, in the heap and
// inside the pool's current size.
inline bool HeapBlockOk(const Pool& pool, uint64_t off, uint64_t len) {
  return off != 0 && off % 64 == 0 && off >= pool.heap_offset() && pool.contains(off, len);
}

inline Status CheckRootBlockPlace(const Pool& pool, uint64_t off, uint64_t bytes, const char* kind) {
  if (!HeapBlockOk(pool, off, bytes))
    return Status::Corruption(std::string(kind) + ": root block offset " + std::to_string(off) + " outside the pool");
  return Status::OK();
}

inline Status CheckRootHeader(const char* kind, uint64_t magic, uint64_t want_magic, uint64_t key_type) {
  if (magic != want_magic) return Status::Corruption(std::string(kind) + ": bad root block magic");
  if (key_type != static_cast<uint64_t>(KeyType::kU64) && key_type != static_cast<uint64_t>(KeyType::kBytes))
    return Status::Corruption(std::string(kind) + ": bad key type in root block");
  return Status::OK();
}

}  // namespace wort
