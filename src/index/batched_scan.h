// The Index::Scan of the kinds whose readers take no lock (wort, woart, artcow, roart, vart;
// src/sync/sync.h R5): batches collected lock-free and validated, emitted with no lock held.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

#include "sync/sync.h"
#include "wort/index.h"
#include "wort/key.h"

namespace wort {

// A batch of (leaf, value) pairs in storage the scan owns (on its stack: no allocation per
// scan). The collectors fill it with push_back/emplace_back up to its capacity, the batch size.
template <class Leaf>
class ScanBatch {
 public:
  using value_type = std::pair<const Leaf*, uint64_t>;
  ScanBatch(value_type* data, size_t capacity) : data_(data), cap_(capacity) {}
  ScanBatch(const ScanBatch&) = delete;
  ScanBatch& operator=(const ScanBatch&) = delete;
  void clear() { n_ = 0; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  size_t capacity() const { return cap_; }
  // A collector stops at `want` <= capacity; a pair past the capacity is dropped, never written
  // past the storage.
  void push_back(const value_type& x) {
    if (n_ < cap_) [[likely]]
      data_[n_++] = x;
  }
  void emplace_back(const Leaf* l, uint64_t v) { push_back(value_type(l, v)); }
  const value_type& operator[](size_t i) const { return data_[i]; }
  const value_type& back() const { return data_[n_ - 1]; }
  const value_type* begin() const { return data_; }
  const value_type* end() const { return data_ + n_; }

 private:
  value_type* const data_;
  const size_t cap_;
  size_t n_ = 0;
};

// Scans in batches of up to kBatch keys. For each batch, inside an epoch of `epoch` and with
// reader_guard() held (the index's reader lock in global-lock mode, else nothing), it calls
//   collect(std::string_view cursor, bool exclusive, size_t want, ScanBatch<Leaf>* out,
//           bool* past_end) -> bool
// which fills *out (empty on entry) with up to `want` (leaf, value) pairs whose keys are >= cursor
// (> cursor when exclusive) in ascending order, every node it read validated, and sets *past_end
// when it met a key beyond the scan's end; false asks for the batch again (after a backoff).
// Then it releases the guard and calls fn on the batch - with no lock held, so fn may write to
// the index, and still inside the epoch, so the leaves stay readable - and the next batch starts
// after the last key emitted. Hence keys come in strictly ascending order, and a key present for
// the whole scan is emitted. Leaf::key_view() gives a leaf's key.
// Nothing is allocated: the batch and the continuation key live in this frame (a scan started
// from fn has its own), about 16 * kBatch + kMaxKeyLen bytes of stack.
template <size_t kBatch, class Leaf, class Guard, class Collect>
Status ScanInValidatedBatches(sync::EpochManager& epoch, std::string_view start, size_t limit, const ScanFn& fn,
                              Guard&& reader_guard, Collect&& collect) {
  static_assert(kBatch > 0);
  if (limit == 0) return Status::OK();
  union Store {  // uninitialized: only the first size() pairs are ever read
    typename ScanBatch<Leaf>::value_type a[kBatch];
    Store() {}
  } store;
  ScanBatch<Leaf> out(store.a, kBatch);
  char cursor_buf[kMaxKeyLen];  // the continuation key (the leaf may be freed after its epoch)
  std::string_view cursor = start;
  bool exclusive = false;
  size_t emitted = 0;
  for (;;) {
    sync::EpochGuard eg(epoch);
    bool past_end = false;
    const size_t want = std::min(kBatch, limit - emitted);
    {
      auto g = reader_guard();
      for (int attempt = 0;; ++attempt) {
        out.clear();
        past_end = false;
        if (collect(cursor, exclusive, want, &out, &past_end)) break;
        sync::Backoff(attempt);
      }
    }
    for (const auto& [l, v] : out)
      if (!fn(l->key_view(), v) || ++emitted >= limit) return Status::OK();
    if (past_end || out.size() < want) return Status::OK();
    const std::string_view last = out.back().first->key_view();
    const size_t n = std::min(last.size(), sizeof cursor_buf);  // keys are at most kMaxKeyLen bytes
    std::memcpy(cursor_buf, last.data(), n);
    cursor = std::string_view(cursor_buf, n);
    exclusive = true;
  }
}

}  // namespace wort
