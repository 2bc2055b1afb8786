// The Index::Scan of the kinds whose readers take no lock (wort, woart, artcow, roart, vart;
// src/sync/sync.h R5): batches collected lock-free and validated, emitted with no lock held.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sync/sync.h"
#include "wort/index.h"

namespace wort {

// Scans in batches of up to `batch` keys. For each batch, inside an epoch of `epoch` and with
// reader_guard() held (the index's reader lock in global-lock mode, else nothing), it calls
//   collect(std::string_view cursor, bool exclusive, size_t want, std::vector<std::pair<const
//           Leaf*, uint64_t>>* out, bool* past_end) -> bool
// which fills *out (empty on entry) with up to `want` (leaf, value) pairs whose keys are >= cursor
// (> cursor when exclusive) in ascending order, every node it read validated, and sets *past_end
// when it met a key beyond the scan's end; false asks for the batch again (after a backoff).
// Then it releases the guard and calls fn on the batch - with no lock held, so fn may write to
// the index, and still inside the epoch, so the leaves stay readable - and the next batch starts
// after the last key emitted. Hence keys come in strictly ascending order, and a key present for
// the whole scan is emitted. Leaf::key_view() gives a leaf's key.
template <class Leaf, class Guard, class Collect>
Status ScanInValidatedBatches(sync::EpochManager& epoch, std::string_view start, size_t limit, size_t batch,
                              const ScanFn& fn, Guard&& reader_guard, Collect&& collect) {
  if (limit == 0) return Status::OK();
  std::string cursor(start);
  bool exclusive = false;
  size_t emitted = 0;
  std::vector<std::pair<const Leaf*, uint64_t>> out;
  out.reserve(batch);
  for (;;) {
    sync::EpochGuard eg(epoch);
    bool past_end = false;
    const size_t want = std::min(batch, limit - emitted);
    {
      auto g = reader_guard();
      for (int attempt = 0;; ++attempt) {
        out.clear();
        past_end = false;
        if (collect(std::string_view(cursor), exclusive, want, &out, &past_end)) break;
        sync::Backoff(attempt);
      }
    }
    for (const auto& [l, v] : out)
      if (!fn(l->key_view(), v) || ++emitted >= limit) return Status::OK();
    if (past_end || out.size() < want) return Status::OK();
    cursor.assign(out.back().first->key_view());
    exclusive = true;
  }
}

}  // namespace wort
