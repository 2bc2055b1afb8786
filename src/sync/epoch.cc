// Epoch-based reclamation; the scheme and its memory-order argument are in epoch.h / below.
#include "sync/epoch.h"
#include "sync/version_lock.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace wort::sync {

namespace {
// The epoch of an item retired since its thread's last Collect (Tag sets the real one): never
// old enough for ReclaimOld (it adds 2 without overflowing past the global epoch).
constexpr uint64_t kUntaggedEpoch = ~uint64_t{0} - 2;
// Managers alive (by id), so that a thread exiting after its manager was destroyed does not
// touch it.
std::mutex& LiveMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_set<uint64_t>& Live() {
  static auto* s = new std::unordered_set<uint64_t>;
  return *s;
}
std::atomic<uint64_t> g_next_id{1};

// ---- asymmetric fences ------------------------------------------------------------------------
// Enter must order its publication (the slot's store) before the reader's first load of the
// index: a StoreLoad order, which on x86 costs a full fence (mfence or a locked instruction).
// That fence on every lookup also stops the processor from overlapping the cache misses of one
// lookup with the next (measured: libart's lookups at 4M keys go from ~220 to ~600 ns when an
// mfence is added between them). So the fence is made asymmetric, the technique of liburcu's
// "memb" flavour and folly's asymmetric fences: the reader side is a compiler barrier only, and
// the side that reads the slots (TryAdvance, Synchronize: rare, once per kRetireBatch retires)
// runs membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which makes every running thread of the
// process execute a full barrier before it returns (a thread that is not running passes one when
// it is scheduled). For any reader, its barrier then falls between the slot reader's
// membarrier call and its return: either the reader's publication came before it (the scan sees
// it), or the reader's loads come after it, and therefore after the unlink that preceded the
// global epoch the advancer loaded (they see the unlink). Decided once, by the first manager
// constructed, before any thread can Enter; where membarrier is missing (old kernels, some
// sandboxes) or under ThreadSanitizer (which does not model it), both sides keep the seq_cst
// fence. WORT_EPOCH_FENCE=symmetric forces the fallback (to measure what the fence costs).
using detail::g_epoch_asymmetric;
std::once_flag g_fences_once;

#if defined(__linux__) && !defined(__SANITIZE_THREAD__)
long Membarrier(int cmd) { return syscall(__NR_membarrier, cmd, 0u, 0); }
#endif

void DecideFences() {
#if defined(__linux__) && !defined(__SANITIZE_THREAD__)
  const char* e = std::getenv("WORT_EPOCH_FENCE");
  if (e && std::string_view(e) == "symmetric") return;
  const long q = Membarrier(MEMBARRIER_CMD_QUERY);
  if (q < 0 || (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
  if (Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0) return;
  g_epoch_asymmetric = true;
#endif
}

// The slot reader's side. False only if membarrier stopped working (then the caller must not
// conclude anything from the slots).
bool HeavyFence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!g_epoch_asymmetric) return true;
#if defined(__linux__) && !defined(__SANITIZE_THREAD__)
  if (Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return true;
  // A child of fork() may have to register again (the registration belongs to the address space).
  if (errno == EPERM && Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
      Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
    return true;
#endif
  return false;
}
}  // namespace

bool EpochAsymmetricFences() { return g_epoch_asymmetric; }

// The calling thread's slots, one per manager it has used.
struct EpochTls {
  struct Ent {
    uint64_t id;
    EpochManager* m;
    EpochManager::Slot* s;
  };
  std::vector<Ent> ents;
  ~EpochTls();
};
namespace {
thread_local EpochTls t_epoch;
}  // namespace
namespace detail {
constinit __attribute__((tls_model("initial-exec"))) thread_local EpochLastSlot t_epoch_last[kEpochLastSlots]{};
bool g_epoch_asymmetric = false;
}  // namespace detail
using detail::t_epoch_last;

EpochTls::~EpochTls() {
  for (auto& c : t_epoch_last) c = {0, nullptr};  // the slots go back to their managers: no cached one stays usable
  std::lock_guard<std::mutex> g(LiveMu());
  for (const Ent& e : ents)
    if (Live().count(e.id)) e.m->Release(e.s);
}

namespace {
bool DecideFencesOnce() {
  std::call_once(g_fences_once, DecideFences);
  return g_epoch_asymmetric;
}
}  // namespace

EpochManager::EpochManager(ReclaimFn reclaim, void* ctx)
    : reclaim_(reclaim), slot_reclaim_(nullptr), ctx_(ctx), id_(g_next_id.fetch_add(1)),
      asymmetric_(DecideFencesOnce()) {
  std::lock_guard<std::mutex> g(LiveMu());
  Live().insert(id_);
}

EpochManager::EpochManager(SlotReclaimFn reclaim, void* ctx)
    : reclaim_(nullptr), slot_reclaim_(reclaim), ctx_(ctx), id_(g_next_id.fetch_add(1)),
      asymmetric_(DecideFencesOnce()) {
  std::lock_guard<std::mutex> g(LiveMu());
  Live().insert(id_);
}

EpochManager::~EpochManager() {
  {
    std::lock_guard<std::mutex> g(LiveMu());
    Live().erase(id_);
  }
  Drain();
  for (Slot* s = slots_.load(); s;) {
    Slot* n = s->next;
    delete s;
    s = n;
  }
}

EpochManager::Slot* EpochManager::MySlotSlow() {
  Slot* s = FindOrEnrol();
  for (int i = detail::kEpochLastSlots - 1; i > 0; --i) t_epoch_last[i] = t_epoch_last[i - 1];
  t_epoch_last[0] = {id_, s};
  return s;
}

EpochManager::Slot* EpochManager::FindOrEnrol() {
  for (const EpochTls::Ent& e : t_epoch.ents)
    if (e.m == this && e.id == id_) return e.s;
  // First use by this thread: drop entries of managers that are gone, then enrol.
  {
    std::lock_guard<std::mutex> g(LiveMu());
    std::erase_if(t_epoch.ents, [](const EpochTls::Ent& e) { return !Live().count(e.id); });
  }
  Slot* s = Acquire();
  t_epoch.ents.push_back({id_, this, s});
  return s;
}

EpochManager::Slot* EpochManager::Acquire() {
  std::lock_guard<std::mutex> g(mu_);
  for (Slot* s = slots_.load(std::memory_order_acquire); s; s = s->next) {
    bool f = false;
    if (s->owned.compare_exchange_strong(f, true)) return s;
  }
  Slot* s = new Slot;
  s->owned.store(true);
  s->next = slots_.load(std::memory_order_relaxed);
  slots_.store(s, std::memory_order_release);
  nslots_.fetch_add(1);
  return s;
}

// A thread's exit hands its slot back (EpochTls, holding LiveMu: lock order LiveMu -> mu_).
// Under mu_, as Drain and Acquire: a thread exits whenever it ends, not when the manager's user
// says, so a Drain on another thread (a clean close, a test's reachability check) may run
// meanwhile, and both would reclaim the slot's items - each item twice, the first reclaim's
// block possibly reused in between (found: StoreStress.ItemCountBesideWriters, the server's
// item-count thread exiting with an exited writer's slot while the test drained: reachable
// records free in the bitmaps). Test: EpochTest.DrainBesideAnExitingThreadReclaimsEachItemOnce.
void EpochManager::Release(Slot* s) {
  std::lock_guard<std::mutex> g(mu_);
  s->depth = 0;
  s->local.store(0, std::memory_order_release);
  Tag(s);  // on the exiting thread itself: after every unlink of its items
  ReclaimOld(s, global_.load());
  // What is left is reclaimed by the next Collect of a live thread (ReclaimOrphans) once old
  // enough, not only by the slot's next owner or Drain.
  if (!s->retired.empty()) orphans_.store(true, std::memory_order_relaxed);
  s->owned.store(false, std::memory_order_release);
}

void EpochManager::Tag(Slot* s) {
  // The untagged items are the list's suffix that still carries kUntaggedEpoch (Retire appends;
  // tags never exceed the global epoch, far below it): derived from the list, not counted beside
  // it - a count kept beside it went stale when Drain cleared the list (the bug below, Drain).
  auto& v = s->retired;
  if (v.empty() || v.back().first != kUntaggedEpoch) return;
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the items' unlinks before the load below
  const uint64_t e = global_.load(std::memory_order_seq_cst);
  for (size_t i = v.size(); i > 0 && v[i - 1].first == kUntaggedEpoch; --i) v[i - 1].first = e;
}

// Under mu_ (taken with a try: a Collect never waits for it), so no thread acquires one of these
// slots meanwhile and no Release or Drain reclaims them beside this (each item once).
void EpochManager::ReclaimOrphans(uint64_t global) {
  std::unique_lock<std::mutex> g(mu_, std::try_to_lock);
  if (!g.owns_lock()) return;
  bool left = false;
  for (Slot* s = slots_.load(std::memory_order_acquire); s; s = s->next) {
    if (s->owned.load(std::memory_order_acquire) || s->retired.empty()) continue;
    ReclaimOld(s, global);
    left = left || !s->retired.empty();
  }
  orphans_.store(left, std::memory_order_relaxed);
}

// Memory order (the argument of epoch.h made precise): Enter loads the global epoch (seq_cst),
// publishes it, then a seq_cst fence orders the publication before every read of the index
// (Enter's compiler barrier + the advancer's HeavyFence: the asymmetric pair above, or a seq_cst fence on both
// sides).
// Tag's seq_cst fence (at the retiring thread's Collect or exit, after Retire) orders the
// writer's unlinks before its load of the global epoch, the item's tag.
// TryAdvance loads the global epoch, fences, then reads every slot: an advance from E+1 to
// E+2 therefore sees the publication of every reader whose fence preceded the retiring
// writer's fence (those readers published an epoch <= E and block the advance), and every
// reader whose fence came later sees the unlink.
void EpochManager::Synchronize() {
  while (!HeavyFence()) std::this_thread::yield();  // (never seen: membarrier failing once it worked)
  struct Inside {
    Slot* s;
    uint64_t local, entries;
  };
  std::vector<Inside> inside;
  for (Slot* s = slots_.load(std::memory_order_acquire); s; s = s->next) {
    // local first, with acquire, then entries: Enter stores entries before local (release), so
    // the count read here belongs to the entry whose local was read or to a later one. Read the
    // other way round (as before), a stale count beside a new entry's local made the wait below
    // take that entry for a re-entry and end while the thread was still inside (found by
    // test_kv_stress under TSan: KvStore::Close returned while a Get was still running).
    const uint64_t l = s->local.load(std::memory_order_acquire);
    const uint64_t e = s->entries.load(std::memory_order_relaxed);
    if (l & 1) inside.push_back({s, l, e});
  }
  // The wait ends when the thread left (local changes: its Exit's release store) or re-entered
  // (entries changes: Enter's release store, after that Exit): either acquire load then orders
  // everything the thread did inside the old epoch before the caller's next step.
  for (const Inside& x : inside) {
    for (int spin = 0; x.s->local.load(std::memory_order_acquire) == x.local &&
                       x.s->entries.load(std::memory_order_acquire) == x.entries;
         ++spin) {
      if (spin < 64) CpuRelax();
      else std::this_thread::yield();
    }
  }
}

bool EpochManager::InEpoch() { return MySlot()->depth != 0; }

void EpochManager::WaitQuiesceEnd() {
  for (int spin = 0; quiescing_.load(std::memory_order_acquire); ++spin) {
    if (spin < 64) CpuRelax();
    else std::this_thread::yield();
  }
}

// The argument of Synchronize, for the writer gate: the flag is stored before the heavy fence;
// a writer whose fence came after it sees the flag and steps out; one whose fence came before
// it has published `writing` (and its entry number), which the scan below sees and waits for.
void EpochManager::QuiesceWriters() {
  Slot* const me = MySlot();
  quiesce_mu_.lock();
  quiescing_.store(true, std::memory_order_seq_cst);
  while (!HeavyFence()) std::this_thread::yield();
  struct Inside {
    Slot* s;
    uint64_t entries;
  };
  std::vector<Inside> inside;
  for (Slot* s = slots_.load(std::memory_order_acquire); s; s = s->next) {
    if (s == me) continue;
    // entries first (acquire), then writing: WriterEnter stores entries before writing, so a
    // writing count seen here belongs to the entry read or a later one.
    const uint64_t e = s->wentries.load(std::memory_order_acquire);
    if (s->writing.load(std::memory_order_acquire) != 0) inside.push_back({s, e});
  }
  for (const Inside& x : inside) {
    for (int spin = 0; x.s->writing.load(std::memory_order_acquire) != 0 &&
                       x.s->wentries.load(std::memory_order_acquire) == x.entries;
         ++spin) {
      if (spin < 64) CpuRelax();
      else std::this_thread::yield();
    }
  }
}

void EpochManager::EndQuiesce() {
  quiescing_.store(false, std::memory_order_release);
  quiesce_mu_.unlock();
}

// No fence and no load of the global epoch here: the item is tagged at the thread's next Collect
// (Tag: a seq_cst fence, then the load - the argument above, with the fence after this unlink and
// possibly later ones; a later tag only makes the item wait longer).
void EpochManager::Retire(uint64_t item) {
  Slot* s = MySlot();
  s->retired.emplace_back(kUntaggedEpoch, item);
  // The counters are the slot's own (one writer): nothing shared is written per retire.
  s->nretired.store(s->nretired.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (s->retired.size() > s->peak.load(std::memory_order_relaxed))
    s->peak.store(s->retired.size(), std::memory_order_relaxed);
  if (++s->since_collect >= kRetireBatch) CollectSlot(s);
}

void EpochManager::Collect() { CollectSlot(MySlot()); }

void EpochManager::CollectSlot(Slot* s) {
  s->since_collect = 0;
  // Nothing of this thread's to reclaim: no advance either (each thread advances for what it
  // retired; with asymmetric fences an advance costs a membarrier system call, ~0.2 us alone and
  // ~2 us when another thread of the process is running, and CCEH collects after every write).
  if (s->retired.empty()) return;
  Tag(s);
  const uint64_t g = global_.load(std::memory_order_seq_cst);
  if (s->seen_global != 0 && g != s->seen_global) {
    // Another thread advanced since this thread's last look: take what that made old enough,
    // and leave the next advance to the next Collect that finds the epoch where it left it (of
    // this thread or another). With one thread this never happens (it advances itself every
    // time: single-threaded reclamation is as before); with N writer threads the advance rate
    // stays about one thread's Collect rate instead of N times it.
    s->seen_global = g;
    ReclaimOld(s, g);
    if (orphans_.load(std::memory_order_relaxed)) [[unlikely]] ReclaimOrphans(g);
    return;
  }
  // Blocked (a thread inside an older epoch: on a loaded machine, usually one preempted in its
  // operation): try again kRetryAfter retires from now, not kRetireBatch - the blocker is
  // typically out again within a time slice, and a whole batch later the advances fell far
  // behind the retires (4 writers on 2 loaded cores: 30-75 advances in 16,000 operations).
  s->ntries.store(s->ntries.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (!TryAdvance()) {
    s->since_collect = static_cast<uint32_t>(kRetireBatch - kRetryAfter);
    s->nblocked.store(s->nblocked.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  s->seen_global = global_.load(std::memory_order_seq_cst);
  ReclaimOld(s, s->seen_global);
  if (orphans_.load(std::memory_order_relaxed)) [[unlikely]] ReclaimOrphans(s->seen_global);
}

bool EpochManager::TryAdvance() {
  uint64_t e = global_.load(std::memory_order_seq_cst);
  auto blocked = [&] {
    for (Slot* s = slots_.load(std::memory_order_acquire); s; s = s->next) {
      const uint64_t l = s->local.load(std::memory_order_acquire);
      if ((l & 1) != 0 && l != 2 * e + 1) return true;
    }
    return false;
  };
  // A first look without the heavy fence: a thread seen inside an older epoch blocks the advance
  // whatever the fence would show (failing to advance is always safe), so the system call is
  // spent only when the advance may succeed; the look after the fence decides.
  if (g_epoch_asymmetric && blocked()) return false;
  if (!HeavyFence()) return false;  // no advance: what is retired stays retired (safe)
  if (blocked()) return false;
  return global_.compare_exchange_strong(e, e + 1, std::memory_order_seq_cst);
}

// The tags along s->retired never decrease (Tag gives the untagged suffix the global epoch, which
// only grows; the untagged items, last, carry kUntaggedEpoch, the largest), so the items old
// enough are a prefix: the scan stops at the first that is not. Issue 31 (h59): it scanned the
// whole list at every Collect. While another thread sits inside an older epoch (preempted in its
// operation: on a loaded machine most of the time with two writers of one index), no advance
// succeeds, the list grows by every retire, and a blocked advance is retried every kRetryAfter
// retires - each retry scanned the list again (quadratic: 5% of vart's 2-thread load time in
// ReclaimOld, `perf record`). Now a pass that reclaims nothing looks at one item.
void EpochManager::ReclaimOld(Slot* s, uint64_t global) {
  auto& v = s->retired;
  size_t n = 0;
  while (n < v.size() && v[n].first + 2 <= global) {
    ReclaimItem(s, v[n].second);
    ++n;
  }
  s->nscanned.store(s->nscanned.load(std::memory_order_relaxed) + n + (n < v.size() ? 1 : 0),
                    std::memory_order_relaxed);
  if (n == 0) return;
  v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
  s->nreclaimed.store(s->nreclaimed.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

void EpochManager::Drain() {
  std::lock_guard<std::mutex> g(mu_);
  uint64_t n = 0;
  for (Slot* s = slots_.load(); s; s = s->next) {
    for (const auto& [e, item] : s->retired) ReclaimItem(s, item), ++n;
    s->retired.clear();
    // (Until 2026-11-27 the slot counted its untagged items beside the list, and this clear left
    // the count behind: the next Tag found more untagged items than items, tagged none, and the
    // items retired after this Drain kept kUntaggedEpoch - never old enough, held until the next
    // Drain, and behind reclaim passes that stop at the first item not old enough, every item
    // after them (Woart/ArtKindTest.PoolFull: deleted space never came back). Tag now derives
    // the untagged suffix from the list; test EpochTest.ItemsRetiredAfterADrainAreReclaimed.)
  }
  drained_.fetch_add(n);
}

EpochStats EpochManager::Stats() const {
  EpochStats st;
  st.epoch = global_.load();
  st.threads = nslots_.load();
  st.reclaimed = drained_.load();
  for (Slot* s = slots_.load(std::memory_order_acquire); s; s = s->next) {
    st.retired += s->nretired.load(std::memory_order_relaxed);
    st.reclaimed += s->nreclaimed.load(std::memory_order_relaxed);
    st.peak_pending += s->peak.load(std::memory_order_relaxed);
    st.advance_tries += s->ntries.load(std::memory_order_relaxed);
    st.advances_blocked += s->nblocked.load(std::memory_order_relaxed);
    st.reclaim_scanned += s->nscanned.load(std::memory_order_relaxed);
  }
  st.pending = st.retired >= st.reclaimed ? st.retired - st.reclaimed : 0;
  return st;
}

}  // namespace wort::sync
