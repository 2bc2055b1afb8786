// The key count of the radix trees (ArtTree, RoartTree): kept in DRAM only, unknown after open,
// counted by a walk on the first Size() (so a crash can never make it wrong and Open costs
// nothing), then maintained by the writers.
#pragma once

#include <atomic>
#include <cstdint>

namespace wort {

class LazyKeyCount {
 public:
  void Added() {
    if (c_.load(std::memory_order_relaxed) >= 0) c_.fetch_add(1, std::memory_order_relaxed);
  }
  void Removed() {
    if (c_.load(std::memory_order_relaxed) >= 0) c_.fetch_sub(1, std::memory_order_relaxed);
  }
  // The count if known, else -1.
  int64_t Known() const { return c_.load(); }
  // The count; when not known yet, count() is run while the guard that quiesce() returns is
  // held (it must exclude writers), and kept.
  template <class Quiesce, class Count>
  uint64_t Get(Quiesce&& quiesce, Count&& count) const {
    int64_t c = c_.load();
    if (c >= 0) return static_cast<uint64_t>(c);
    auto guard = quiesce();
    c = c_.load();
    if (c >= 0) return static_cast<uint64_t>(c);
    c = static_cast<int64_t>(count());
    c_.store(c);
    return static_cast<uint64_t>(c);
  }

 private:
  mutable std::atomic<int64_t> c_{-1};
};

}  // namespace wort
