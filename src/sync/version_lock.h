// VersionLock: one 64-bit word for optimistic lock coupling (protocol: src/sync/sync.h).
//   bit 0      obsolete  the node was unlinked; every later lock attempt fails (restart)
//   bit 1      locked    a writer holds the node
//   bits 2..63 version   incremented by every WriteUnlock (carry from the locked bit)
// All verbs that can fail return false meaning "restart the operation"; they never block,
// except WriteLock (spins until the lock is free; use it only when holding no other lock).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>

// Marks a function that reads nodes optimistically: its plain loads may race with a writer's
// in-place stores by design (the result is used only after a version check). ThreadSanitizer
// does not instrument its plain accesses (atomics stay instrumented); elsewhere it is empty.
// Why hiding them is sound (the seqlock argument; scripts/tsan.sh then runs with no
// suppression file):
//   - a value read this way is used only after CheckOrRestart validated the node's version,
//     or it is bounds-checked first (sync.h R3), so a torn or stale value is never acted upon;
//   - the loads are of aligned bytes and words (single loads: a word is never torn; what spans
//     several words is what the version check rejects);
//   - a reference to another block that the reader follows is read with an acquire load
//     (pm::load8: the child references in art_tree.cc ForEachSorted/FindChild callers, roots,
//     leaf_here), so the writer's initialization of that block happens-before the reader's reads
//     of it, and TSan checks those reads in the callees that are not marked;
//   - blocks are never reused under a reader (epochs, R3).
// In the C++ memory model these plain racing loads are still data races, as in any seqlock
// written without atomics; the strict alternative is to read every node word with a relaxed or
// acquire atomic, as fastfair does (pm::load8 for every node word), at no cost on x86.
#if defined(__SANITIZE_THREAD__)
#define WORT_OPTIMISTIC_READ __attribute__((no_sanitize_thread))
#else
#define WORT_OPTIMISTIC_READ
#endif
// On a lookup's optimistic attempt (WORT_OPTIMISTIC_READ): forced inline into its caller, where
// GCC would otherwise call it (a call, a prologue and an epilogue on every lookup). Not under
// ThreadSanitizer: GCC does not inline across different sanitizer attributes.
#if defined(__SANITIZE_THREAD__)
#define WORT_OPTIMISTIC_INLINE
#else
#define WORT_OPTIMISTIC_INLINE [[gnu::always_inline]]
#endif

namespace wort::sync {

// Pause in a spin loop (x86 PAUSE; elsewhere a no-op hint). Inline: a call in a reader's loop,
// even on its cold spin path, makes the compiler keep the loop's values out of the registers a
// call clobbers.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
// Between two attempts of an operation that restarted: spin a little (2^attempt pauses), then
// yield (a writer holding a lock may be descheduled on a loaded machine).
void Backoff(int attempt);

class VersionLock {
 public:
  static constexpr uint64_t kObsolete = 1;
  static constexpr uint64_t kLocked = 2;

  constexpr VersionLock() = default;
  VersionLock(const VersionLock&) = delete;
  VersionLock& operator=(const VersionLock&) = delete;

  static bool IsLocked(uint64_t v) { return (v & kLocked) != 0; }
  static bool IsObsolete(uint64_t v) { return (v & kObsolete) != 0; }

  // Reader: the current version in *v; false if locked (after a short spin) or obsolete.
  [[nodiscard]] bool ReadLockOrRestart(uint64_t* v) const {
    uint64_t w = word_.load(std::memory_order_acquire);
    if ((w & (kLocked | kObsolete)) == 0) [[likely]] {  // the common case: one test
      *v = w;
      return true;
    }
    for (int spin = 0; IsLocked(w) && spin < kReadSpins; ++spin) {
      CpuRelax();
      w = word_.load(std::memory_order_acquire);
    }
    if ((w & (kLocked | kObsolete)) != 0) return false;
    *v = w;
    return true;
  }
  // Reader: true iff nothing changed since ReadLockOrRestart returned v. Orders every load
  // before it (acquire fence) so that what was read is validated by the version.
  [[nodiscard]] bool CheckOrRestart(uint64_t v) const {
    std::atomic_thread_fence(std::memory_order_acquire);
    return word_.load(std::memory_order_relaxed) == v;
  }
  // Reader that cannot restart elsewhere (the post-crash GC's visit, which walks beside
  // writers): runs read() until what it read was one snapshot of the node (no write between
  // the version read before and the check after), yielding while a writer holds the node.
  // read() must only load, and must start from scratch on every call.
  template <class Read>
  void ReadSnapshot(Read&& read) const {
    for (;;) {
      uint64_t v;
      if (!ReadLockOrRestart(&v)) {
        std::this_thread::yield();
        continue;
      }
      read();
      if (CheckOrRestart(v)) return;
    }
  }
  // The reader is done with the node: the same check as CheckOrRestart.
  [[nodiscard]] bool ReadUnlockOrRestart(uint64_t v) const { return CheckOrRestart(v); }

  // Writer: lock the node if it is still at version v (as read by ReadLockOrRestart).
  [[nodiscard]] bool UpgradeToWriteLock(uint64_t v) {
    return word_.compare_exchange_strong(v, v | kLocked, std::memory_order_acquire, std::memory_order_relaxed);
  }
  // Writer: lock the node whatever its version; false only if it is obsolete. Spins while
  // another writer holds it: call it only while holding no other lock.
  [[nodiscard]] bool WriteLockOrRestart() {
    for (;;) {
      uint64_t v = word_.load(std::memory_order_relaxed);
      if (IsObsolete(v)) return false;
      if (!IsLocked(v) && UpgradeToWriteLock(v)) return true;
      CpuRelax();
    }
  }
  // Writer: lock whatever the version and the obsolete bit (for words never made obsolete: a
  // root, a VersionLockTable word shared by several nodes). Spins; hold no other lock.
  void WriteLock() {
    for (;;) {
      uint64_t v = word_.load(std::memory_order_relaxed);
      if (!IsLocked(v) && UpgradeToWriteLock(v)) return;
      CpuRelax();
    }
  }
  // Writer: lock a word whose other writers are already shut out by a lock the caller holds
  // (CCEH's stripe version, under the stripe's writer lock): no locked read-modify-write (issue
  // 31), a store of the locked bit, then a release fence so that none of the holder's later
  // stores can be seen before it (a seqlock writer: a reader that reads any of them and then
  // checks the word - CheckOrRestart's acquire fence - sees it locked or changed, and restarts).
  // REQUIRES: every other writer of this word holds the same lock first.
  void WriteLockExcluded() {
    word_.store(word_.load(std::memory_order_relaxed) | kLocked, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  // Writer: release; the version changes, so readers that read the node meanwhile restart.
  // A plain release store, not a locked read-modify-write (issue 31): while the lock bit is set
  // nobody else changes the word (readers only load it; another writer's compare-exchange
  // expects it unlocked and fails), so load + store is exact. On x86 a locked instruction also
  // waits for the writer's earlier stores and cache-line write-backs to drain; a store does not.
  void WriteUnlock() { word_.store(word_.load(std::memory_order_relaxed) + kLocked, std::memory_order_release); }
  // Writer: release and mark obsolete (the node was unlinked): later lock attempts fail.
  void WriteUnlockObsolete() {
    word_.store(word_.load(std::memory_order_relaxed) + (kLocked | kObsolete), std::memory_order_release);
  }

  uint64_t Load() const { return word_.load(std::memory_order_acquire); }

 private:
  static constexpr int kReadSpins = 64;
  std::atomic<uint64_t> word_{0};
};

// Version words kept in DRAM, keyed by a node's pool offset (so the persistent layout and every
// persist order of an index stay as they are, and a crash leaves no lock to clear). A fixed
// table of 2^bits words: two nodes may share a word (a false conflict costs a restart, never
// correctness), so obsolete marks are not used with it - an unlinked node's readers and
// writers notice the version change of the node and of its parent instead. A writer that
// locks two nodes checks SameWord and locks a shared word once.
class VersionLockTable {
 public:
  explicit VersionLockTable(unsigned bits = 16);
  VersionLock& For(uint64_t off) const { return words_[Slot(off)].lock; }
  bool SameWord(uint64_t a, uint64_t b) const { return Slot(a) == Slot(b); }
  size_t size() const { return mask_ + 1; }
  // The i-th word (i < size()): for a holder that must take every word (server/store.cc's
  // item count takes them all to pause every writer of the table for one step).
  VersionLock& At(size_t i) const { return words_[i].lock; }

 private:
  struct alignas(8) Word {
    VersionLock lock;
  };
  size_t Slot(uint64_t off) const {
    // Blocks are 64-byte aligned; mix the bits so that neighbouring nodes use distinct words.
    uint64_t x = off >> 6;
    x *= 0x9e3779b97f4a7c15ull;
    return static_cast<size_t>(x >> 32) & mask_;
  }
  size_t mask_;
  std::unique_ptr<Word[]> words_;
};

// The process-wide table (2^14 words, 128 KiB) keyed by a node's address, so that an open index
// and a visit function that gets only (pool, root offset) find the same words. A constant-
// initialized array (zero words in .bss): NodeLock is a few inline instructions on every level
// of every descent, with no call and no guard of a function-local static. Same mix as
// VersionLockTable::Slot; two addresses share a word exactly when their slots are equal.
// Size (issue 31, h60): a writer's descent reads one word per level. With 2^18 words (2 MiB,
// four times a core's L2 here) the deep levels' words were L2 misses: 1.73 per wort insert at
// 1M keys (callgrind with a 512 KiB last level), the largest miss count wort's insert had
// beyond WORT's; at 2^14 they are 0.62. What a smaller table costs is false conflicts (two
// nodes sharing a word: a restart, never a wrong result - every user checks for a shared word)
// and false sharing of a line (8 words): with T writers each holding one or two words, about
// T/2048 of the lines a writer locks are another writer's too (16 writers: under 1%).
namespace detail {
#ifndef WORT_NODE_LOCK_BITS
#define WORT_NODE_LOCK_BITS 14  // a build setting only to measure other sizes (-DCMAKE_CXX_FLAGS=-DWORT_NODE_LOCK_BITS=N)
#endif
inline constexpr unsigned kNodeLockBits = WORT_NODE_LOCK_BITS;
static_assert(kNodeLockBits >= 6 && kNodeLockBits <= 24, "WORT_NODE_LOCK_BITS: 6..24");
struct alignas(64) NodeLockArray {
  VersionLock words[size_t{1} << kNodeLockBits];
};
extern NodeLockArray g_node_locks;
inline size_t NodeLockSlot(const void* p) {
  uint64_t x = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)) >> 6;
  x *= 0x9e3779b97f4a7c15ull;
  return static_cast<size_t>(x >> 32) & ((size_t{1} << kNodeLockBits) - 1);
}
}  // namespace detail
inline VersionLock& NodeLock(const void* p) { return detail::g_node_locks.words[detail::NodeLockSlot(p)]; }

}  // namespace wort::sync
