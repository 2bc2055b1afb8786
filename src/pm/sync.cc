// Sync mode of the persistence module (wort/pm.h RegisterSyncRange): msync at each fence of the
// pages flushed since the previous one, for pools on files without DAX.
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "wort/pm.h"

namespace wort::pm {
namespace detail {
std::atomic<int> g_sync_ranges{0};
}  // namespace detail

namespace {
constexpr uintptr_t kPage = 4096;
constexpr int kMaxRanges = 64;
struct Range {
  std::atomic<uintptr_t> base{0}, end{0};
};
std::array<Range, kMaxRanges> g_ranges;
std::mutex g_mu;
std::atomic<uint64_t> g_msyncs{0}, g_pages{0}, g_errors{0};
std::atomic<SyncObserver> g_observer{nullptr};
std::atomic<void*> g_observer_ctx{nullptr};

// This thread's pages noted since its last fence: [lo, hi) inside range `range`.
struct Pending {
  int range = -1;
  uintptr_t lo = 0, hi = 0;
};
thread_local Pending t_pending;

void SyncPending(Pending& p) {
  if (p.range < 0) return;
  if (::msync(reinterpret_cast<void*>(p.lo), p.hi - p.lo, MS_SYNC) != 0) {
    if (g_errors.fetch_add(1, std::memory_order_relaxed) == 0)
      std::fprintf(stderr, "wort: msync in sync mode failed: %s (durability on the file is not assured)\n",
                   std::strerror(errno));
  }
  g_msyncs.fetch_add(1, std::memory_order_relaxed);
  g_pages.fetch_add((p.hi - p.lo) / kPage, std::memory_order_relaxed);
  if (SyncObserver fn = g_observer.load(std::memory_order_acquire))
    fn(reinterpret_cast<const void*>(p.lo), p.hi - p.lo, g_observer_ctx.load(std::memory_order_relaxed));
  p = Pending{};
}
}  // namespace

void RegisterSyncRange(const void* base, size_t len) {
  std::lock_guard<std::mutex> g(g_mu);
  for (Range& r : g_ranges) {
    if (r.base.load(std::memory_order_relaxed) != 0) continue;
    r.end.store(reinterpret_cast<uintptr_t>(base) + len, std::memory_order_relaxed);
    r.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    detail::g_sync_ranges.fetch_add(1, std::memory_order_release);
    detail::RecomputeFast();
    return;
  }
  std::fprintf(stderr, "wort: more than %d pools in sync mode; this one is not synced\n", kMaxRanges);
}

void UnregisterSyncRange(const void* base) {
  std::lock_guard<std::mutex> g(g_mu);
  for (Range& r : g_ranges) {
    if (r.base.load(std::memory_order_relaxed) != reinterpret_cast<uintptr_t>(base)) continue;
    r.base.store(0, std::memory_order_release);
    r.end.store(0, std::memory_order_relaxed);
    detail::g_sync_ranges.fetch_sub(1, std::memory_order_release);
    detail::RecomputeFast();
  }
  // Pending notes of the calling thread inside the range would msync an unmapped range.
  if (t_pending.range >= 0) t_pending = Pending{};
}

void SetSyncObserver(SyncObserver fn, void* ctx) {
  g_observer_ctx.store(ctx, std::memory_order_relaxed);
  g_observer.store(fn, std::memory_order_release);
}

SyncCounters GetSyncCounters() {
  return SyncCounters{g_msyncs.load(std::memory_order_relaxed), g_pages.load(std::memory_order_relaxed),
                      g_errors.load(std::memory_order_relaxed)};
}

namespace detail {
void NoteSyncFlush(uintptr_t begin, uintptr_t end) {
  for (int i = 0; i < kMaxRanges; ++i) {
    const uintptr_t b = g_ranges[i].base.load(std::memory_order_acquire);
    if (b == 0 || begin < b || begin >= g_ranges[i].end.load(std::memory_order_relaxed)) continue;
    const uintptr_t lo = begin & ~(kPage - 1), hi = (end + kPage - 1) & ~(kPage - 1);
    Pending& p = t_pending;
    if (p.range != i) {
      SyncPending(p);  // another pool's pages: sync them now (one msync range per pool)
      p = Pending{i, lo, hi};
    } else {
      p.lo = std::min(p.lo, lo);
      p.hi = std::max(p.hi, hi);
    }
    return;
  }
}
void SyncNoted() { SyncPending(t_pending); }
}  // namespace detail

}  // namespace wort::pm
