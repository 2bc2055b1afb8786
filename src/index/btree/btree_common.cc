// Shared pieces of the persistent B-trees (see btree_common.h).
#include "index/btree/btree_common.h"

#include <map>
#include <mutex>
#include <unordered_set>
#include <utility>

namespace wort::btree {

Status KeyOps::MakeWord(Pool& pool, const Probe& p, uint64_t* word) const {
  if (kt_ == KeyType::kU64) {
    *word = p.u;
    return Status::OK();
  }
  uint64_t off = 0;
  WORT_RETURN_IF_ERROR(pool.allocator().Alloc(sizeof(KeyBlock) + p.s.size(), &off));
  auto* kb = pool.at<KeyBlock>(off);
  kb->len = static_cast<uint32_t>(p.s.size());
  kb->magic = kKeyBlockMagic;
  if (!p.s.empty()) std::memcpy(kb->bytes, p.s.data(), p.s.size());
  // The block is persistent before any key word names it (R2).
  pm::persist(kb, sizeof(KeyBlock) + p.s.size());
  *word = off;
  return Status::OK();
}

Status KeyOps::CopyWord(Pool& pool, uint64_t word, uint64_t* copy) const {
  if (kt_ == KeyType::kU64) {
    *copy = word;
    return Status::OK();
  }
  Probe p;
  p.s = View(word);
  return MakeWord(pool, p, copy);
}

bool KeyOps::PlausibleBlock(uint64_t word) const {
  if (kt_ == KeyType::kU64) return true;
  if (word == 0 || (word & 63) != 0 || !pool_->contains(word, sizeof(KeyBlock))) return false;
  const auto* kb = pool_->at<KeyBlock>(word);
  return kb->magic == kKeyBlockMagic && kb->len <= kMaxKeyLen && pool_->contains(word, sizeof(KeyBlock) + kb->len);
}

bool RoundUpU64Start(std::string_view start, std::string* out) {
  out->assign(start.substr(0, 8));
  if (start.size() < 8) {
    out->resize(8, '\0');  // shorter: its zero-padded form is the first 8-byte key >= start
  } else if (start.size() > 8) {
    const uint64_t v = DecodeU64(*out);  // longer: start > its prefix, so begin after the prefix
    if (v == UINT64_MAX) return false;
    *out = EncodeU64(v + 1);
  }
  return true;
}

uint64_t UsableBytes(const Pool& pool, const std::function<void(const std::function<void(uint64_t)>&)>& each) {
  std::unordered_set<uint64_t> seen;
  uint64_t total = 0;
  each([&](uint64_t off) {
    if (seen.insert(off).second) total += pool.allocator().UsableSize(off);
  });
  return total;
}

}  // namespace wort::btree
