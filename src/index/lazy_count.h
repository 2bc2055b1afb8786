// The key count of the radix trees (ArtTree, RoartTree, WortTree): kept in DRAM only, unknown
// after open, counted by a walk on the first Size() (so a crash can never make it wrong and Open
// costs nothing), then maintained by the writers.
//
// Striped (issue 31): a writer adds to the stripe of its thread (64 stripes, one cache line
// each, a thread's stripe fixed at its first use), so no cache line is written by every insert;
// reads sum the stripes. Exact whenever no writer is in flight (Check, and Size() between
// operations); beside writers a sum, like any count read while it changes.
#pragma once

#include <atomic>
#include <cstdint>

namespace wort {

class LazyKeyCount {
 public:
  void Added() {
    if (known_.load(std::memory_order_acquire)) stripes_[MyStripe()].n.fetch_add(1, std::memory_order_relaxed);
  }
  void Removed() {
    if (known_.load(std::memory_order_acquire)) stripes_[MyStripe()].n.fetch_sub(1, std::memory_order_relaxed);
  }
  // The count if known, else -1.
  int64_t Known() const { return known_.load(std::memory_order_acquire) ? Sum() : -1; }
  // The count; when not known yet, count() is run while the guard that quiesce() returns is
  // held (it must exclude writers), and kept.
  template <class Quiesce, class Count>
  uint64_t Get(Quiesce&& quiesce, Count&& count) const {
    if (known_.load(std::memory_order_acquire)) return static_cast<uint64_t>(Sum());
    auto guard = quiesce();
    if (known_.load(std::memory_order_acquire)) return static_cast<uint64_t>(Sum());
    for (auto& s : stripes_) s.n.store(0, std::memory_order_relaxed);
    stripes_[0].n.store(static_cast<int64_t>(count()), std::memory_order_relaxed);
    known_.store(true, std::memory_order_release);
    return static_cast<uint64_t>(Sum());
  }

 private:
  static constexpr unsigned kStripes = 64;
  static unsigned MyStripe() {
    static std::atomic<unsigned> next{0};
    thread_local const unsigned id = next.fetch_add(1, std::memory_order_relaxed) % kStripes;
    return id;
  }
  int64_t Sum() const {
    int64_t c = 0;
    for (const auto& s : stripes_) c += s.n.load(std::memory_order_relaxed);
    return c;
  }
  struct alignas(64) Stripe {
    std::atomic<int64_t> n{0};
  };
  mutable Stripe stripes_[kStripes];
  mutable std::atomic<bool> known_{false};
};

}  // namespace wort
