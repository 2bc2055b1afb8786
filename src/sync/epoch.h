// Epoch-based reclamation (protocol: src/sync/sync.h, R1/R3/W4).
//
// A block unlinked by a writer may still be read by readers that found it before the unlink.
// The writer Retire()s it instead of freeing it; the manager hands it to its reclaim function
// (for a pool: Allocator::Free) only when every thread that was inside an epoch at the time of
// the Retire has left it.
//
// Scheme: a global epoch E. A thread inside an operation publishes the E it saw when it
// entered (its slot's word = E*2+1; 0 when outside). A block retired while the global epoch is
// e is reclaimed once the global epoch reaches e + 2. The global epoch advances from E to E+1
// only when every thread inside an operation has published E. So when E reaches e + 2, every
// thread inside has entered after the global epoch became e + 1 > e, i.e. after the Retire's
// unlink: none can hold the block.
//
// Threads: a thread is enrolled on its first Enter/Retire with this manager (a slot from a
// list that only grows; a slot is reused after its thread exits). Enter/Exit then do one
// store and one load each (no lock, no heap allocation, no hardware fence where membarrier(2)
// is available: the asymmetric fences of epoch.cc); the thread finds its slot in a
// two-entry thread-local cache keyed by the manager's id (ids are never reused), so a thread
// that alternates between more than two managers takes the slower lookup at each switch. Enter nests: an inner Enter (a lookup
// from a scan callback) keeps the outer epoch.
//
// Bounded memory: each thread reclaims its own retired blocks; every kRetireBatch retires (or
// at a Collect) it reclaims what is old enough, and tries to advance the epoch unless another
// thread advanced it since this thread's last look (then that advance serves it: the advances
// of the process come at about the rate of one thread's Collects, not N times that). An attempt
// that finds a thread inside an older epoch (preempted in its operation, on a loaded machine)
// is tried again kRetryAfter retires later, not a whole batch later (issue 31 (a)). A thread that
// stays inside one operation holds back everything retired meanwhile (by every thread): keep
// operations short. A thread's retired items are in the order of their epochs, so a reclaim pass
// stops at the first that is not old enough: a blocked retry costs the same whatever the length
// of the list (issue 31, h59: each retry scanned the whole list).
// Retire stores no epoch and passes no fence: the items retired since the thread's last Collect
// are tagged at its next Collect (one seq_cst fence, then the load of the global epoch: every
// unlink of those items precedes the fence), so they wait at most one batch longer and a retire
// is a push to the thread's own list (issue 31 (d): an mfence per KvStore Put less).
// Blocks retired and not yet reclaimed are counted (Stats: pending, peak_pending), per slot
// (the owner's line: Retire writes nothing that another thread writes) and summed by Stats.
// A thread that exits tags its items and reclaims those old enough; the rest stay in its slot
// and are reclaimed, as they become old enough, by the next Collect of any thread that has
// retired items of its own (it takes the manager's mutex with a try: never waits), or by the
// next thread to take the slot, or by Drain (before, only the last two: an exited writer's
// records were held until close when no thread took its slot - issue 31 (a)).
// Per-thread reclaim (a SlotReclaimFn): the reclaim function gets the slot's `state` with each
// item, so a retired block can go back to the retiring thread's own cache (vart's node
// allocator: no free list shared by every thread). The state stays with the slot, so a thread
// taking an exited thread's slot also takes its cache.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace wort::sync {

struct EpochStats {
  uint64_t epoch = 0;          // the global epoch
  uint64_t threads = 0;        // slots (threads enrolled, current or past)
  uint64_t retired = 0;        // Retire calls
  uint64_t reclaimed = 0;      // blocks handed to the reclaim function
  uint64_t pending = 0;        // retired, not yet reclaimed
  uint64_t peak_pending = 0;   // the sum over slots of each slot's maximum of pending so far
                               // (an upper bound of the process-wide maximum; exact with one
                               // retiring thread)
  uint64_t advance_tries = 0;  // advances tried (a Collect that found the epoch where it left it)
  uint64_t advances_blocked = 0;  // of those, found a thread inside an older epoch (not advanced)
  uint64_t reclaim_scanned = 0;   // retired items the reclaim passes looked at (each reclaimed one, and at
                                  // most one more per pass: the first not yet old enough)
};

class EpochGuard;

class EpochManager {
 public:
  // reclaim(ctx, item) frees one retired item; called by the thread that retired it (or by
  // Drain, or at a thread's exit). It must not Enter this manager, nor make the calling thread
  // enrol with any manager (Drain and a thread's exit call it holding the manager's mutex).
  using ReclaimFn = void (*)(void* ctx, uint64_t item);
  // The same with the retiring thread's slot state (Slot::state, below): an item goes back to
  // per-thread state of the thread that retired it (vart's node cache, issue 31) instead of to
  // one structure every thread frees into. It may set a null state (state created on first use).
  using SlotReclaimFn = void (*)(void* ctx, void*& slot_state, uint64_t item);
  static constexpr size_t kRetireBatch = 64;
  static constexpr size_t kRetryAfter = 8;  // retires until an advance that was blocked is tried again

  EpochManager(ReclaimFn reclaim, void* ctx);
  EpochManager(SlotReclaimFn reclaim, void* ctx);
  // Reclaims every retired block (Drain). REQUIRES: no thread inside an epoch.
  ~EpochManager();
  EpochManager(const EpochManager&) = delete;
  EpochManager& operator=(const EpochManager&) = delete;

  void Enter();
  void Exit();
  // The block `item` is unlinked: reclaim it when no thread can hold it any more.
  void Retire(uint64_t item);
  // If the calling thread has retired blocks pending: tags those retired since its last Collect,
  // tries to advance the epoch (unless another thread advanced since this thread's last look),
  // and reclaims those that are old enough, with those of exited threads' slots (no-op otherwise).
  void Collect();
  // Reclaims every retired block now. REQUIRES: no thread inside an epoch (a clean close).
  // Threads that exit meanwhile are no concern: a slot's release at a thread's exit and Drain
  // exclude each other (the manager's mutex), so each retired item is reclaimed once.
  void Drain();
  // Waits until every thread that is inside an epoch now has left it (a grace period). The
  // calling thread must not be inside one.
  void Synchronize();
  // True iff the calling thread is inside an epoch of this manager.
  bool InEpoch();
  // The calling thread's slot (enrolling the thread on first use), without entering: for a writer
  // that prepares its per-thread state (Slot::state) before it enters (vart maps its next node
  // chunk outside the epoch) and then enters with EpochWriterGuard(m, slot).
  struct Slot;
  Slot* ThreadSlot() { return MySlot(); }

  // The writer gate (issue 31): what a writer of a concurrent index does instead of taking a
  // shared lock word that every writer stores to (a process-wide cache line, and two atomic
  // read-modify-writes per write). WriterEnter stores to the thread's own slot only (a count
  // and an entry number), then, after Enter's fence (asymmetric where membarrier exists),
  // loads the manager's quiescing flag, which only QuiesceWriters writes. QuiesceWriters (rare:
  // the first Size() after open, Check, Stats) sets the flag, passes the heavy fence, and waits
  // until every writer that was inside has left (the Synchronize argument, for writers): on
  // return no other thread is between WriterEnter and WriterExit until EndQuiesce, and
  // everything they wrote is visible. Writers that meet the flag step out and wait for
  // EndQuiesce. Nests (an inner WriterEnter of a writer already inside returns at once).
  // Quiescers are serialized (one mutex); the calling thread's own slot is not waited for (a
  // quiescer is not writing). A quiesce covers the writers of every index of this manager (one
  // per pool): it is rare and short.
  void WriterEnter();
  void WriterExit();
  void QuiesceWriters();
  void EndQuiesce();
  EpochStats Stats() const;

  // One per (thread, manager). `local` is written by its owner and read by advancing threads;
  // everything else is the owner's (or the enroller's, under the manager's mutex, while unowned).
  struct alignas(64) Slot {
    std::atomic<uint64_t> local{0};  // 2E+1 while inside an epoch entered at global epoch E; 0 outside
    std::atomic<bool> owned{false};
    Slot* next = nullptr;
    std::atomic<uint64_t> entries{0};  // outermost Enters so far (Synchronize tells re-entry apart)
    uint32_t depth = 0;                // Enter nesting
    uint32_t since_collect = 0;        // retires since the last Collect (counts towards kRetireBatch)
    // The global epoch as this thread last left it (after its own Collect or advance attempt;
    // 0: never). A Collect that finds the global epoch moved since has seen another thread's
    // advance: it reclaims what that made old enough and does not try an advance of its own
    // (issue 31: an advance is a membarrier - an IPI to every core running a thread of the
    // process - and a read of every slot's line; with each of N writer threads advancing every
    // few writes, each core took N times as many of them as with one writer).
    uint64_t seen_global = 0;
    std::vector<std::pair<uint64_t, uint64_t>> retired;  // (epoch at retire, item)
    // Written by the owner only (relaxed load + store, no locked RMW), read by Stats.
    std::atomic<uint64_t> nretired{0}, nreclaimed{0}, peak{0};
    std::atomic<uint64_t> ntries{0}, nblocked{0};  // TryAdvance calls, and those blocked
    std::atomic<uint64_t> nscanned{0};             // items ReclaimOld looked at
    // The writer gate: owner-written; read by QuiesceWriters.
    std::atomic<uint32_t> writing{0};   // WriterEnter nesting
    std::atomic<uint64_t> wentries{0};  // outermost WriterEnters so far
    // The manager's user's per-thread state (vart: its node cache), the owner's like `retired`:
    // set and used by the thread that owns the slot (through EpochGuard::slot()), handed to a
    // SlotReclaimFn with each item the slot's thread retired. It stays with the slot: a thread
    // that takes the slot after its owner exited inherits it. The manager never frees it (its
    // user does, after the manager is gone or drained).
    void* state = nullptr;
  };

 private:
  Slot* MySlot();       // the calling thread's slot (a thread-local cache of the last one)
  Slot* MySlotCached();  // the same if it is in that cache (no call), else nullptr
  Slot* MySlotSlow();   // fills that cache
  Slot* FindOrEnrol();  // enrols the thread on first use
  Slot* Acquire();
  void Release(Slot* s);
  bool TryAdvance();
  void ReclaimOld(Slot* s, uint64_t global);
  void Tag(Slot* s);  // gives the slot's untagged items the global epoch (after a seq_cst fence)
  void ReclaimOrphans(uint64_t global);  // unowned slots' old enough items (try-lock of mu_)
  void CollectSlot(Slot* s);  // Collect with the slot found (Retire's batch, Collect)
  void EnterSlot(Slot* s);  // Enter / Exit with the slot already found (EpochGuard keeps it)
  void WaitQuiesceEnd();
  void ExitSlot(Slot* s);
  void WriterEnterSlot(Slot* s);  // WriterEnter / WriterExit with the slot already found
  static void WriterExitSlot(Slot* s);
  void ReclaimItem(Slot* s, uint64_t item) {
    if (slot_reclaim_ != nullptr) slot_reclaim_(ctx_, s->state, item);
    else reclaim_(ctx_, item);
  }
  friend struct EpochTls;
  friend class EpochGuard;
  friend class EpochCachedGuard;
  friend class EpochWriterGuard;
  friend class WriterGateGuard;

  const ReclaimFn reclaim_;
  const SlotReclaimFn slot_reclaim_;  // one of the two is set
  void* const ctx_;
  const uint64_t id_;  // unique for the process lifetime (thread caches key on it)
  // detail::g_epoch_asymmetric, copied at construction (decided once, before): a field of the
  // manager Enter already holds, where the global would be a load through the GOT.
  const bool asymmetric_;
  // On a line of its own: every Enter loads it, an advance (compare-exchange) writes it; the
  // read-mostly words above (id_, read by every Enter's slot lookup) and below (slots_,
  // quiescing_, read by every WriterEnter) do not share that line (issue 31).
  alignas(64) std::atomic<uint64_t> global_{2};
  alignas(64) std::atomic<Slot*> slots_{nullptr};  // singly linked, only grows
  std::mutex mu_;                      // enrolment
  std::atomic<uint64_t> nslots_{0};
  std::atomic<bool> quiescing_{false};  // written by QuiesceWriters / EndQuiesce only
  // Some unowned slot (its thread exited) may hold retired items: written under mu_ by Release
  // and ReclaimOrphans only (rare), loaded by every Collect.
  std::atomic<bool> orphans_{false};
  std::mutex quiesce_mu_;
  std::atomic<uint64_t> drained_{0};  // reclaimed by Drain (no thread inside: a clean close)
};

namespace detail {
// The last kEpochLastSlots (manager, slot) pairs the thread used, the most recent first:
// Enter/Exit's fast path is a few compares, inline. Four, because an operation may nest epochs of
// three managers: a KvStore write enters its Close gate, the pool's epoch and the write epoch of
// share::Writer (src/kv/kv.cc, src/pm/share.h); with two entries every KvStore::Put took the
// slow path (MySlotSlow + FindOrEnrol) four times, ~150 instructions per Put (callgrind, issue
// 31 (d)), and with one entry each switch of a Get did. Keyed by the manager's id, which is never
// reused, so an entry of a destroyed manager can never match again (a new manager at the same
// address has another id). Plain data and initial-exec: no TLS wrapper call or __tls_get_addr
// on the fast path (64 bytes of the static TLS block).
struct EpochLastSlot {
  uint64_t id;
  EpochManager::Slot* s;
};
// constinit: callers know it needs no dynamic initialisation, so no TLS wrapper call per access.
inline constexpr int kEpochLastSlots = 4;
extern constinit __attribute__((tls_model("initial-exec"))) thread_local EpochLastSlot t_epoch_last[kEpochLastSlots];
extern bool g_epoch_asymmetric;  // set once, by the first EpochManager constructed (epoch.cc)
}  // namespace detail

// The array is indexed by name, not through a pointer to it: GCC 12's UndefinedBehaviorSanitizer
// (-fsanitize=null, the WORT_SANITIZE build) null-checks a pointer to an initial-exec TLS object
// with the flags of an earlier instruction and reported "member access within null pointer" on
// every call (a miscompile: the address is the thread's, never null); an access by name is not
// checked. Same code otherwise.
inline EpochManager::Slot* EpochManager::MySlotCached() {
  using detail::t_epoch_last;
  if (t_epoch_last[0].id == id_) [[likely]] return t_epoch_last[0].s;
  if (t_epoch_last[1].id == id_) return t_epoch_last[1].s;
  if (t_epoch_last[2].id == id_) return t_epoch_last[2].s;
  if (t_epoch_last[3].id == id_) return t_epoch_last[3].s;
  static_assert(detail::kEpochLastSlots == 4);
  return nullptr;
}

inline EpochManager::Slot* EpochManager::MySlot() {
  if (Slot* s = MySlotCached()) [[likely]] return s;
  return MySlotSlow();
}

// Memory order: epoch.cc (above Synchronize) and its asymmetric fences.
inline void EpochManager::Enter() { EnterSlot(MySlot()); }

inline void EpochManager::EnterSlot(Slot* s) {
  if (s->depth++ != 0) [[unlikely]] return;  // nested (a lookup from a scan callback): the common case falls through
  // release: a Synchronize that sees the new count (a re-entry) also sees everything this thread
  // did inside its previous epoch (what a grace period promises; a plain mov on x86).
  s->entries.store(s->entries.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  const uint64_t e = global_.load(std::memory_order_seq_cst);
  s->local.store(2 * e + 1, std::memory_order_release);  // release: orders this thread's past reads for TryAdvance
  if (asymmetric_) std::atomic_signal_fence(std::memory_order_seq_cst);  // the advancer's membarrier
  else std::atomic_thread_fence(std::memory_order_seq_cst);
}

inline void EpochManager::Exit() { ExitSlot(MySlot()); }

inline void EpochManager::ExitSlot(Slot* s) {
  if (--s->depth != 0) [[unlikely]] return;
  s->local.store(0, std::memory_order_release);
}

inline void EpochManager::WriterEnter() { WriterEnterSlot(MySlot()); }

inline void EpochManager::WriterEnterSlot(Slot* s) {
  const uint32_t w = s->writing.load(std::memory_order_relaxed);
  if (w != 0) [[unlikely]] {  // nested: the quiescer already waits for the outer writer
    s->writing.store(w + 1, std::memory_order_relaxed);
    return;
  }
  for (;;) {
    s->wentries.store(s->wentries.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    s->writing.store(1, std::memory_order_release);
    if (asymmetric_) std::atomic_signal_fence(std::memory_order_seq_cst);  // QuiesceWriters' membarrier
    else std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!quiescing_.load(std::memory_order_acquire)) [[likely]] return;
    s->writing.store(0, std::memory_order_release);  // step out while a quiescer runs
    WaitQuiesceEnd();
  }
}

inline void EpochManager::WriterExit() { WriterExitSlot(MySlot()); }

inline void EpochManager::WriterExitSlot(Slot* s) {
  s->writing.store(s->writing.load(std::memory_order_relaxed) - 1, std::memory_order_release);
}

// Whether Enter runs without a hardware fence (membarrier(2) on the advancing side: epoch.cc).
bool EpochAsymmetricFences();

// RAII: Enter on construction, Exit on destruction. It keeps the thread's slot found on entry,
// so that the exit does not look it up again (a guard lives and dies on one thread).
class EpochGuard {
 public:
  explicit EpochGuard(EpochManager& m) : m_(m), s_(m.MySlot()) { m_.EnterSlot(s_); }
  ~EpochGuard() { m_.ExitSlot(s_); }
  // The calling thread's slot (its `state` is the thread's to use).
  EpochManager::Slot* slot() const { return s_; }
  EpochGuard(const EpochGuard&) = delete;
  EpochGuard& operator=(const EpochGuard&) = delete;

 private:
  EpochManager& m_;
  EpochManager::Slot* const s_;
};

// RAII: Enter on construction and Exit on destruction as EpochGuard, but only if the calling
// thread's slot is among its cached ones (MySlotCached: no call); else nothing, and entered()
// is false. For a lookup's fast path that makes no call (issue 31, h63: a function with a call
// saves and restores callee-saved registers on every lookup), which goes the general way when
// this guard did not enter.
class EpochCachedGuard {
 public:
  explicit EpochCachedGuard(EpochManager& m) : m_(m), s_(m.MySlotCached()) {
    if (s_ != nullptr) [[likely]] m_.EnterSlot(s_);
  }
  ~EpochCachedGuard() {
    if (s_ != nullptr) [[likely]] m_.ExitSlot(s_);
  }
  bool entered() const { return s_ != nullptr; }
  EpochCachedGuard(const EpochCachedGuard&) = delete;
  EpochCachedGuard& operator=(const EpochCachedGuard&) = delete;

 private:
  EpochManager& m_;
  EpochManager::Slot* const s_;
};

// RAII: WriterEnter on construction, WriterExit on destruction, the slot looked up once (inline:
// a writer that does not enter the epoch, fastfair's insert, pays about a dozen instructions).
class WriterGateGuard {
 public:
  explicit WriterGateGuard(EpochManager& m) : s_(m.MySlot()) { m.WriterEnterSlot(s_); }
  ~WriterGateGuard() { EpochManager::WriterExitSlot(s_); }
  WriterGateGuard(const WriterGateGuard&) = delete;
  WriterGateGuard& operator=(const WriterGateGuard&) = delete;

 private:
  EpochManager::Slot* const s_;
};

// RAII for a writer of an index whose writers both enter the epoch and pass the writer gate of
// the same manager (vart): Enter then WriterEnter on construction, WriterExit then Exit on
// destruction, with the thread's slot looked up once (EpochGuard + IndexModeLock(kWriter) looked
// it up twice).
class EpochWriterGuard {
 public:
  explicit EpochWriterGuard(EpochManager& m) : EpochWriterGuard(m, m.MySlot()) {}
  // With the calling thread's slot already found (EpochManager::ThreadSlot()).
  EpochWriterGuard(EpochManager& m, EpochManager::Slot* s) : m_(m), s_(s) {
    m_.EnterSlot(s_);
    m_.WriterEnterSlot(s_);
  }
  ~EpochWriterGuard() {
    m_.WriterExitSlot(s_);
    m_.ExitSlot(s_);
  }
  // The calling thread's slot (its `state` is the thread's to use).
  EpochManager::Slot* slot() const { return s_; }
  EpochWriterGuard(const EpochWriterGuard&) = delete;
  EpochWriterGuard& operator=(const EpochWriterGuard&) = delete;

 private:
  EpochManager& m_;
  EpochManager::Slot* const s_;
};

}  // namespace wort::sync
