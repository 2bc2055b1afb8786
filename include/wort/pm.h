// wort/pm.h - the persistence module: the only place in wort that writes cache lines back to
// persistent memory or orders those write-backs.
//
// Vocabulary (as in PMDK's libpmem2):
//   flush(p, n)   starts the write-back of every cache line overlapping [p, p+n). It gives no
//                 ordering and no durability by itself.
//   fence()       orders and completes every earlier flush of this thread: when it returns, the
//                 flushed lines are durable (in the persistence domain).
//   persist(p, n) = flush(p, n) + fence(). Nothing named persist returns before the fence.
//
// The flush instruction is chosen once at start-up (clwb, else clflushopt, else clflush) and can
// be overridden (SetFlushKind) so that the papers' clflush+mfence can be compared with
// clwb+sfence. clflush is ordered by mfence; clwb and clflushopt by sfence.
//
// Instrumentation: per-thread counters of cache lines flushed, fences and bytes persisted,
// summed on demand (Counters()). An optional write latency (ns per flushed line, spinning on the
// TSC) emulates slower persistent memory as in the papers. A single hook (SetHook) sees every
// flush and fence with its source location: the crash explorer uses it to model what reaches
// persistent memory. With no hook, latency or sync range, flush and fence are inline (one load
// decides: detail::g_fast); otherwise they call detail::FlushSlow / FenceSlow.
//
// Thread safety: all functions are thread safe. Counters are per thread; Counters() sums them.
#pragma once

// wort's C++ headers use C++20 (e.g. std::source_location in pm.h): a
// consumer must compile with -std=c++20 (wort.pc's Cflags and the CMake targets' compile
// features say so). A C program, or C++ of any standard, may use the C API (wort.h) instead.
#if defined(__cplusplus) && __cplusplus < 202002L
#error "wort's C++ headers need C++20: compile with -std=c++20 (or use the C API, wort.h)"
#endif

#include <immintrin.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>

#include "wort/export.h"

namespace wort::pm {

inline constexpr size_t kCacheLine = 64;

enum class FlushKind : uint8_t {
  kClwb = 0,
  kClflushopt = 1,
  kClflush = 2,
  kNone = 3,  // no write-back at all (volatile baselines); fences are still counted
};

// Name used on the command line and in reports: "clwb", "clflushopt", "clflush", "none".
WORT_EXPORT const char* FlushKindName(FlushKind k);
// Parses a name as above, or "auto". Returns false on an unknown name.
WORT_EXPORT bool ParseFlushKind(const std::string& name, FlushKind* out, bool* is_auto);
// The best instruction this CPU supports (clwb > clflushopt > clflush).
WORT_EXPORT FlushKind BestFlushKind();
// True iff this CPU executes the instruction.
WORT_EXPORT bool FlushKindSupported(FlushKind k);

// Select the instruction for the whole process. Returns false (and changes nothing) if the CPU
// lacks it. Call before indexes run; switching while other threads flush is allowed but the
// counters then mix the two kinds.
WORT_EXPORT bool SetFlushKind(FlushKind k);
WORT_EXPORT FlushKind GetFlushKind();

// Emulated write latency: ns of busy-waiting after each flushed cache line. 0 disables it.
WORT_EXPORT void SetWriteLatencyNs(uint64_t ns);
WORT_EXPORT uint64_t GetWriteLatencyNs();

struct Counters {
  uint64_t lines_flushed = 0;   // cache lines written back
  uint64_t fences = 0;          // fence() calls
  uint64_t bytes_persisted = 0; // bytes named in flush() calls
  Counters operator-(const Counters& o) const {
    return {lines_flushed - o.lines_flushed, fences - o.fences, bytes_persisted - o.bytes_persisted};
  }
};
// Sum over all threads, live and exited, since start-up (or since the last ResetCounters()).
WORT_EXPORT Counters GetCounters();
// This thread's counters only (cheap).
WORT_EXPORT Counters ThisThreadCounters();
WORT_EXPORT void ResetCounters();

// The hook every flush and fence passes through (crash explorer). Called on the flushing
// thread, before the instruction. `line` is 64-byte aligned.
class WORT_EXPORT Hook {
 public:
  virtual ~Hook() = default;
  virtual void OnFlushLine(const void* line, const std::source_location& where) = 0;
  virtual void OnFence(const std::source_location& where) = 0;
};
// Install (or, with nullptr, remove) the process-wide hook. Returns the previous one.
WORT_EXPORT Hook* SetHook(Hook* h);

// Sync mode (PoolOptions::sync, for a pool on a file without DAX; src/pm/sync.cc). While a range
// is registered, flush() notes the pages it touches inside it, and fence() msyncs (MS_SYNC) the
// pages this thread noted since its previous fence: every persist is then durable on the file
// system (OS crash, power loss) when it returns. Batched per fence: a flush alone promises
// nothing, so one msync per fence of the union of the pages flushed before it is enough.
WORT_EXPORT void RegisterSyncRange(const void* base, size_t len);
WORT_EXPORT void UnregisterSyncRange(const void* base);
struct SyncCounters {
  uint64_t msyncs = 0, pages = 0, errors = 0;  // all threads, since start-up
};
WORT_EXPORT SyncCounters GetSyncCounters();
// Called (in the fencing thread) after each sync-mode msync with the range it synced: whole
// pages, the hull of the pages flushed in one pool since the thread's previous fence. For tests
// that check the synced ranges cover every flushed line; nullptr removes it.
using SyncObserver = void (*)(const void* begin, size_t len, void* ctx);
WORT_EXPORT void SetSyncObserver(SyncObserver fn, void* ctx);

// ---- implementation details of the inline hot path --------------------------------------
namespace detail {
struct alignas(64) WORT_EXPORT ThreadCounters {
  std::atomic<uint64_t> lines{0};
  std::atomic<uint64_t> fences{0};
  std::atomic<uint64_t> bytes{0};
  ThreadCounters();
  ~ThreadCounters();
};
// The calling thread's counters: one thread-local pointer load and a test, inline (flush and fence
// called an out-of-line Local() with a guarded thread_local: ~11 instructions per call, 5-6
// calls per insert; issue 31's callgrind). Constant-initialized and initial-exec, as
// sync/epoch.h's t_epoch_last: no TLS wrapper or __tls_get_addr call. LocalSlow() constructs
// and registers the counters on the thread's first flush or fence.
#define WORT_TLS_INITIAL_EXEC __attribute__((tls_model("initial-exec")))
WORT_EXPORT extern constinit WORT_TLS_INITIAL_EXEC thread_local ThreadCounters* t_counters;
WORT_EXPORT ThreadCounters& LocalSlow();
[[gnu::always_inline]] inline ThreadCounters& Local() {
  if (ThreadCounters* c = t_counters) [[likely]] return *c;
  return LocalSlow();
}
WORT_EXPORT extern std::atomic<Hook*> g_hook;
WORT_EXPORT extern std::atomic<uint8_t> g_kind;
WORT_EXPORT extern std::atomic<uint64_t> g_latency_cycles;  // TSC cycles per flushed line
WORT_EXPORT extern std::atomic<int> g_sync_ranges;           // registered sync-mode ranges
// What the inline flush and fence do (issue 31): the FlushKind's value while no hook, no write
// latency and no sync-mode range is set (then a flush is the instruction per line and the
// counters, a fence the fence instruction and its counter, all inline: no call, one load to
// decide), kSlowPath otherwise (FlushSlow / FenceSlow: the hook, the latency, the msync notes).
// Recomputed (RecomputeFast) by every setter of the four, under one mutex, after its own store:
// the last recompute sees every store before it.
inline constexpr uint8_t kSlowPath = 0xff;
WORT_EXPORT extern std::atomic<uint8_t> g_fast;
WORT_EXPORT void RecomputeFast();
WORT_EXPORT void FlushSlow(const void* p, size_t n, const std::source_location& where);
WORT_EXPORT void FenceSlow(const std::source_location& where);
WORT_EXPORT void NoteSyncFlush(uintptr_t begin, uintptr_t end);
WORT_EXPORT void SyncNoted();
WORT_EXPORT void SpinCycles(uint64_t cycles);

[[gnu::always_inline]] inline void Bump(std::atomic<uint64_t>& c, uint64_t n) {
  // Only the owning thread writes; others read. A relaxed load+store is enough and compiles to
  // a plain add. Always inline (issue 31): GCC left it out of line in large callers (cceh's
  // Put, fastfair's FastInsert), a call per counter of every flush and fence.
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// One line's write-back instruction. Inline assembly (not the target("clwb") intrinsics, which
// cannot be inlined into code compiled without that target): the assembler knows every one of
// them whatever -march says; the kind is only used where the CPU has it (SetFlushKind checks).
// The "memory" clobber keeps the compiler from moving stores to the line past it.
[[gnu::always_inline]] inline void FlushLine(FlushKind kind, const void* line) {
  switch (kind) {
    case FlushKind::kClwb: asm volatile("clwb (%0)" : : "r"(line) : "memory"); break;
    case FlushKind::kClflushopt: asm volatile("clflushopt (%0)" : : "r"(line) : "memory"); break;
    case FlushKind::kClflush: asm volatile("clflush (%0)" : : "r"(line) : "memory"); break;
    case FlushKind::kNone: break;
  }
}
}  // namespace detail

[[gnu::always_inline]] inline void flush(const void* p, size_t n,
                  const std::source_location where = std::source_location::current()) {
  const uint8_t fast = detail::g_fast.load(std::memory_order_relaxed);
  if (fast == detail::kSlowPath) [[unlikely]] {
    detail::FlushSlow(p, n, where);
    return;
  }
  if (n == 0) return;
  uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(kCacheLine - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  uint64_t lines = 0;
  for (; a < end; a += kCacheLine, ++lines) detail::FlushLine(static_cast<FlushKind>(fast), reinterpret_cast<const void*>(a));
  auto& tc = detail::Local();
  detail::Bump(tc.lines, lines);
  detail::Bump(tc.bytes, n);
}

[[gnu::always_inline]] inline void fence(const std::source_location where = std::source_location::current()) {
  const uint8_t fast = detail::g_fast.load(std::memory_order_relaxed);
  if (fast == detail::kSlowPath) [[unlikely]] {
    detail::FenceSlow(where);
    return;
  }
  if (static_cast<FlushKind>(fast) == FlushKind::kClflush) _mm_mfence();
  else _mm_sfence();
  detail::Bump(detail::Local().fences, 1);
}

[[gnu::always_inline]] inline void persist(const void* p, size_t n,
                    const std::source_location where = std::source_location::current()) {
  flush(p, n, where);
  fence(where);
}

// Store an 8-byte word with a single instruction (the unit of failure atomicity) - use this for
// every commit point so that the compiler can neither tear nor reorder it.
// (Checked at compile time: an 8-byte atomic_ref that is not always lock-free would be a lock,
// not one store.)
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free, "store8 must be a single 8-byte store");
static_assert(std::atomic_ref<uint64_t>::required_alignment == 8, "store8 needs 8-byte alignment only");
inline void store8(uint64_t* dst, uint64_t v) {
  std::atomic_ref<uint64_t>(*dst).store(v, std::memory_order_release);
}
inline uint64_t load8(const uint64_t* src) {
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(src)).load(std::memory_order_acquire);
}

}  // namespace wort::pm
