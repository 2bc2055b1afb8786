// The key count of the radix trees (ArtTree, RoartTree, WortTree): kept in DRAM only, unknown
// after open, counted by a walk on the first Size() (so a crash can never make it wrong and Open
// costs nothing), then maintained by the writers.
//
// Sharded (issue 31): writers add to a sync::ShardedCounter (a line of their own thread's), so no
// cache line is written by every insert; reads sum the shards. Exact whenever no writer is in
// flight (Check, and Size() between operations); beside writers a sum, like any count read while
// it changes.
#pragma once

#include <atomic>
#include <cstdint>

#include "sync/counter.h"

namespace wort {

class LazyKeyCount {
 public:
  void Added() {
    if (known_.load(std::memory_order_acquire)) deltas_.Add(1);
  }
  void Removed() {
    if (known_.load(std::memory_order_acquire)) deltas_.Add(-1);
  }
  // The count if known, else -1.
  int64_t Known() const { return known_.load(std::memory_order_acquire) ? base_ + deltas_.Sum() : -1; }
  // The count; when not known yet, count() is run while the guard that quiesce() returns is
  // held (it must exclude writers), and kept.
  template <class Quiesce, class Count>
  uint64_t Get(Quiesce&& quiesce, Count&& count) const {
    if (known_.load(std::memory_order_acquire)) return static_cast<uint64_t>(base_ + deltas_.Sum());
    auto guard = quiesce();
    if (known_.load(std::memory_order_acquire)) return static_cast<uint64_t>(base_ + deltas_.Sum());
    deltas_.Clear();
    base_ = static_cast<int64_t>(count());
    known_.store(true, std::memory_order_release);  // publishes base_
    return static_cast<uint64_t>(base_ + deltas_.Sum());
  }

 private:
  mutable sync::ShardedCounter deltas_;  // writers' changes since the walk
  mutable int64_t base_ = 0;             // the walk's count; written once, before known_
  mutable std::atomic<bool> known_{false};
};

}  // namespace wort
