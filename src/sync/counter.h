// sync/counter.h - ShardedCounter: a count that many writer threads change without storing to a
// cache line another writer stores to (issue 31: nothing process-wide written per insert).
//
// kShards counters, one 64-byte line each. A thread is given a shard the first time it adds to
// any ShardedCounter (round robin over the process's threads: the only shared store, once per
// thread) and always adds to that shard, so up to kShards threads never share a line; more
// threads share shards, still correctly (the adds are atomic read-modify-writes, uncontended in
// the common case). A read sums every shard: exact when no add runs, otherwise a value the count
// had at some moment of the read only if at most one add ran meanwhile (like any sum of relaxed
// counters) - Size() of a concurrent index is approximate while writers run anyway.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace wort::sync {

namespace detail {
extern std::atomic<unsigned> g_counter_shard_next;
extern constinit __attribute__((tls_model("initial-exec"))) thread_local unsigned t_counter_shard;  // shard + 1; 0: none yet
}  // namespace detail

class ShardedCounter {
 public:
  static constexpr unsigned kShards = 64;

  void Add(int64_t d) { shards_[Shard()].v.fetch_add(d, std::memory_order_relaxed); }
  int64_t Sum() const {
    int64_t s = 0;
    for (const Line& l : shards_) s += l.v.load(std::memory_order_relaxed);
    return s;
  }
  // Sets every shard to zero. REQUIRES: no Add runs meanwhile.
  void Clear() {
    for (Line& l : shards_) l.v.store(0, std::memory_order_relaxed);
  }

 private:
  static unsigned Shard() {
    unsigned s = detail::t_counter_shard;
    if (s == 0) [[unlikely]] {
      s = detail::g_counter_shard_next.fetch_add(1, std::memory_order_relaxed) % kShards + 1;
      detail::t_counter_shard = s;
    }
    return s - 1;
  }
  struct alignas(64) Line {
    std::atomic<int64_t> v{0};
  };
  Line shards_[kShards];
};

}  // namespace wort::sync
