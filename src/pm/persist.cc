// Persistence module: instruction selection, counters, latency emulation, hook.
#include <cpuid.h>
#include <x86intrin.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "wort/pm.h"

namespace wort::pm {
namespace detail {

std::atomic<Hook*> g_hook{nullptr};
std::atomic<uint8_t> g_kind{static_cast<uint8_t>(BestFlushKind())};
std::atomic<uint64_t> g_latency_cycles{0};
std::atomic<uint8_t> g_fast{static_cast<uint8_t>(BestFlushKind())};  // no hook, latency or sync range yet

namespace {
std::atomic<uint64_t> g_latency_ns{0};

// Registry of live threads' counters plus the sum of exited threads'.
struct Registry {
  std::mutex mu;
  std::vector<ThreadCounters*> live;
  Counters exited;
};
Registry& Reg() {
  static Registry* r = new Registry();  // never destroyed: threads may exit during shutdown
  return *r;
}

double TscPerNs() {
  static const double v = [] {
    using clk = std::chrono::steady_clock;
    const auto t0 = clk::now();
    const uint64_t c0 = __rdtsc();
    while (clk::now() - t0 < std::chrono::milliseconds(20)) {
    }
    const uint64_t c1 = __rdtsc();
    const double ns = std::chrono::duration<double, std::nano>(clk::now() - t0).count();
    return double(c1 - c0) / ns;
  }();
  return v;
}
}  // namespace

ThreadCounters::ThreadCounters() {
  auto& r = Reg();
  std::lock_guard<std::mutex> g(r.mu);
  r.live.push_back(this);
}

ThreadCounters::~ThreadCounters() {
  // A flush during the rest of the thread's exit (another thread_local's destructor) finds the
  // object again through LocalSlow, as it found it through the function-local static before.
  if (t_counters == this) t_counters = nullptr;
  auto& r = Reg();
  std::lock_guard<std::mutex> g(r.mu);
  r.exited.lines_flushed += lines.load();
  r.exited.fences += fences.load();
  r.exited.bytes_persisted += bytes.load();
  std::erase(r.live, this);
}

constinit WORT_TLS_INITIAL_EXEC thread_local ThreadCounters* t_counters = nullptr;

ThreadCounters& LocalSlow() {
  thread_local ThreadCounters tc;
  t_counters = &tc;
  return tc;
}

void RecomputeFast() {
  static std::mutex mu;
  std::lock_guard<std::mutex> g(mu);
  const bool slow = g_hook.load(std::memory_order_acquire) != nullptr || g_latency_cycles.load() != 0 ||
                    g_sync_ranges.load(std::memory_order_acquire) != 0;
  g_fast.store(slow ? kSlowPath : g_kind.load(std::memory_order_relaxed), std::memory_order_release);
}

// The general flush and fence (wort/pm.h: the inline ones come here while a hook, a write
// latency or a sync-mode range is set).
void FlushSlow(const void* p, size_t n, const std::source_location& where) {
  if (n == 0) return;
  uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(kCacheLine - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  const auto kind = static_cast<FlushKind>(g_kind.load(std::memory_order_relaxed));
  Hook* hook = g_hook.load(std::memory_order_acquire);
  const uint64_t lat = g_latency_cycles.load(std::memory_order_relaxed);
  uint64_t lines = 0;
  for (; a < end; a += kCacheLine, ++lines) {
    const void* line = reinterpret_cast<const void*>(a);
    if (hook) hook->OnFlushLine(line, where);
    FlushLine(kind, line);
    if (lat) SpinCycles(lat);
  }
  auto& tc = Local();
  Bump(tc.lines, lines);
  Bump(tc.bytes, n);
  if (g_sync_ranges.load(std::memory_order_relaxed) != 0) NoteSyncFlush(reinterpret_cast<uintptr_t>(p), end);
}

void FenceSlow(const std::source_location& where) {
  if (Hook* hook = g_hook.load(std::memory_order_acquire)) hook->OnFence(where);
  if (static_cast<FlushKind>(g_kind.load(std::memory_order_relaxed)) == FlushKind::kClflush) _mm_mfence();
  else _mm_sfence();
  Bump(Local().fences, 1);
  if (g_sync_ranges.load(std::memory_order_relaxed) != 0) SyncNoted();
}

void SpinCycles(uint64_t cycles) {
  const uint64_t start = __rdtsc();
  while (__rdtsc() - start < cycles) _mm_pause();
}

}  // namespace detail

const char* FlushKindName(FlushKind k) {
  switch (k) {
    case FlushKind::kClwb: return "clwb";
    case FlushKind::kClflushopt: return "clflushopt";
    case FlushKind::kClflush: return "clflush";
    case FlushKind::kNone: return "none";
  }
  return "?";
}

bool ParseFlushKind(const std::string& name, FlushKind* out, bool* is_auto) {
  if (is_auto) *is_auto = false;
  if (name == "auto") {
    if (is_auto) *is_auto = true;
    *out = BestFlushKind();
    return true;
  }
  for (auto k : {FlushKind::kClwb, FlushKind::kClflushopt, FlushKind::kClflush, FlushKind::kNone}) {
    if (name == FlushKindName(k)) {
      *out = k;
      return true;
    }
  }
  return false;
}

bool FlushKindSupported(FlushKind k) {
  unsigned eax, ebx, ecx, edx;
  switch (k) {
    case FlushKind::kNone: return true;
    case FlushKind::kClflush:
      if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
      return (edx >> 19) & 1;
    case FlushKind::kClflushopt:
      if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
      return (ebx >> 23) & 1;
    case FlushKind::kClwb:
      if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
      return (ebx >> 24) & 1;
  }
  return false;
}

FlushKind BestFlushKind() {
  if (FlushKindSupported(FlushKind::kClwb)) return FlushKind::kClwb;
  if (FlushKindSupported(FlushKind::kClflushopt)) return FlushKind::kClflushopt;
  return FlushKind::kClflush;
}

bool SetFlushKind(FlushKind k) {
  if (!FlushKindSupported(k)) return false;
  detail::g_kind.store(static_cast<uint8_t>(k), std::memory_order_relaxed);
  detail::RecomputeFast();
  return true;
}

FlushKind GetFlushKind() { return static_cast<FlushKind>(detail::g_kind.load(std::memory_order_relaxed)); }

void SetWriteLatencyNs(uint64_t ns) {
  detail::g_latency_ns.store(ns);
  detail::g_latency_cycles.store(ns == 0 ? 0 : static_cast<uint64_t>(ns * detail::TscPerNs() + 0.5));
  detail::RecomputeFast();
}
uint64_t GetWriteLatencyNs() { return detail::g_latency_ns.load(); }

Counters GetCounters() {
  auto& r = detail::Reg();
  std::lock_guard<std::mutex> g(r.mu);
  Counters c = r.exited;
  for (auto* t : r.live) {
    c.lines_flushed += t->lines.load(std::memory_order_relaxed);
    c.fences += t->fences.load(std::memory_order_relaxed);
    c.bytes_persisted += t->bytes.load(std::memory_order_relaxed);
  }
  return c;
}

Counters ThisThreadCounters() {
  auto& t = detail::Local();
  return {t.lines.load(std::memory_order_relaxed), t.fences.load(std::memory_order_relaxed),
          t.bytes.load(std::memory_order_relaxed)};
}

void ResetCounters() {
  // Resetting other threads' counters races with their increments (a reset may be lost), so
  // this is only exact when no other thread is flushing; benchmarks call it between phases.
  auto& r = detail::Reg();
  std::lock_guard<std::mutex> g(r.mu);
  r.exited = {};
  for (auto* t : r.live) {
    t->lines.store(0, std::memory_order_relaxed);
    t->fences.store(0, std::memory_order_relaxed);
    t->bytes.store(0, std::memory_order_relaxed);
  }
}

Hook* SetHook(Hook* h) {
  Hook* old = detail::g_hook.exchange(h, std::memory_order_acq_rel);
  detail::RecomputeFast();
  return old;
}

}  // namespace wort::pm
