// index/btree/btree_common.h - what the persistent B-trees (FAST&FAIR, wB+Tree, B3-tree) share:
// the key word, key blocks, the per-index lock registry used by visit functions, and small
// helpers.
//
// The key word
// ------------
// Every B-tree stores a key in a node as one 8-byte *key word*, so that a key can be published,
// moved and compared for identity with single 8-byte stores:
//   KeyType::kU64    the key word is the integer itself (the decoded big-endian key), compared
//                    as an unsigned integer (which equals the byte order of wort/key.h);
//   KeyType::kBytes  the key word is the pool offset of a *key block* (below) holding the
//                    bytes, compared by content with CompareKeys (unsigned bytes, shorter prefix
//                    first). As for wB+Tree and FPTree with variable-size keys in the papers,
//                    the bytes live outside the node behind this pointer.
// Two key words of one index are equal iff they denote the same key *and* the same block: each
// key block belongs to exactly one place (an entry, or a node's low fence), except where an
// index's header says a block is shared, so word equality is identity.
//
// Key block layout (64-byte aligned allocator block, at least 8 + len bytes):
//   [0, 4)  uint32 len    (0 .. kMaxKeyLen)
//   [4, 8)  uint32 magic  kKeyBlockMagic (a cheap check for Check())
//   [8, 8+len) the key bytes
// Write order: the block is written and persisted before any key word naming it is stored
// (reachability contract R2). A key block is immutable while linked and freed only after the
// store that removed its last reference is persistent.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>

#include "wort/alloc.h"
#include "wort/key.h"
#include "wort/pm.h"
#include "wort/pool.h"
#include "wort/status.h"

namespace wort::btree {

inline constexpr uint32_t kKeyBlockMagic = 0x4b455942;  // "KEYB"

struct KeyBlock {
  uint32_t len;
  uint32_t magic;
  char bytes[];  // len bytes
};
static_assert(sizeof(KeyBlock) == 8);

// A search key in both forms: the integer (kU64) and the bytes (kBytes).
struct Probe {
  uint64_t u = 0;
  std::string_view s;
};

// How an index compares and copies key words. Cheap to copy; holds the pool's base.
class KeyOps {
 public:
  KeyOps(const Pool* pool, KeyType kt) : pool_(pool), kt_(kt) {}
  KeyType type() const { return kt_; }
  bool bytes() const { return kt_ == KeyType::kBytes; }

  // Builds a probe from a key of this index. REQUIRES: ValidKey(key).
  Probe MakeProbe(std::string_view key) const {
    Probe p;
    if (kt_ == KeyType::kU64) p.u = DecodeU64(key);
    else p.s = key;
    return p;
  }
  Status ValidKey(std::string_view key) const {
    if (kt_ == KeyType::kU64) {
      if (key.size() != 8) return Status::InvalidArgument("this index takes 8-byte keys (KeyType::kU64)");
    } else if (key.size() > kMaxKeyLen) {
      return Status::InvalidArgument("key longer than kMaxKeyLen");
    }
    return Status::OK();
  }

  // The bytes a key word stands for (kBytes) - a view into the pool.
  std::string_view View(uint64_t word) const {
    const auto* kb = pool_->at<KeyBlock>(word);
    return {kb->bytes, kb->len};
  }
  // Three-way comparison of a stored key word with a probe.
  int Compare(uint64_t word, const Probe& p) const {
    if (kt_ == KeyType::kU64) return word < p.u ? -1 : (word > p.u ? 1 : 0);
    return CompareKeys(View(word), p.s);
  }
  // Three-way comparison of two stored key words.
  int CompareWords(uint64_t a, uint64_t b) const {
    if (kt_ == KeyType::kU64) return a < b ? -1 : (a > b ? 1 : 0);
    if (a == b) return 0;
    return CompareKeys(View(a), View(b));
  }
  // The key in wort's byte form (big-endian for kU64).
  std::string ToString(uint64_t word) const {
    if (kt_ == KeyType::kU64) return EncodeU64(word);
    return std::string(View(word));
  }
  // Appends the key to *out (no allocation for kU64 beyond the string's growth).
  void AppendKey(uint64_t word, std::string* out) const {
    if (kt_ == KeyType::kU64) {
      U64Key k(word);
      out->append(k.buf, 8);
    } else {
      out->append(View(word));
    }
  }
  // Probe for a stored word (to search with a stored key).
  Probe ProbeOf(uint64_t word) const {
    Probe p;
    if (kt_ == KeyType::kU64) p.u = word;
    else p.s = View(word);
    return p;
  }

  // kBytes: allocates and persists a key block for `key`; *word is its offset. kU64: *word is the
  // integer, nothing is allocated.
  Status MakeWord(Pool& pool, const Probe& p, uint64_t* word) const;
  // As MakeWord, for a copy of a stored key word (a fresh block for kBytes).
  Status CopyWord(Pool& pool, uint64_t word, uint64_t* copy) const;
  // Frees the key block behind `word` (kBytes; no-op for kU64). REQUIRES contract R2.
  void FreeWord(Pool& pool, uint64_t word) const {
    if (kt_ == KeyType::kBytes && word != 0) pool.allocator().Free(word);
  }
  // Check helper: true iff `word` names a plausible key block.
  bool PlausibleBlock(uint64_t word) const;

 private:
  const Pool* pool_;
  KeyType kt_;
};

// ---- the per-index lock ----------------------------------------------------------------------
// Visit functions get only (pool, root offset). The B-trees move entries between nodes, so a
// visit concurrent with a writer could miss an entry in flight; instead, visit takes the
// index's reader-writer lock in shared mode. Open indexes and visits find that lock here, keyed
// by (pool, root offset); it is created on first use and dropped when no one holds it.
std::shared_ptr<std::shared_mutex> IndexLock(const Pool* pool, uint64_t root_off);

// ---- small helpers ---------------------------------------------------------------------------
inline uint64_t Load(const uint64_t& w) { return pm::load8(&w); }
inline void Store(uint64_t& w, uint64_t v) { pm::store8(&w, v); }

// Sum of the usable sizes of a set of blocks.
uint64_t UsableBytes(const Pool& pool, const std::function<void(const std::function<void(uint64_t)>&)>& each);

}  // namespace wort::btree
