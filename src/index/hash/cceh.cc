// CCEH and CCEH(C): see cceh.h for the design, invariants, write order and recovery.
#include "index/hash/cceh.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "index/hash/hash_common.h"
#include "index/kind_ids.h"
#include "index/registry.h"
#include "sync/sync.h"

namespace wort::hash {
namespace {

constexpr unsigned kStripeBits = 10;  // 1024 segment locks
constexpr unsigned kMaxDepthU64 = 48;

// A stripe: the writers' lock and the version word optimistic readers validate against (the
// same cache line). Only a holder of `lock` exclusively takes `ver` (LockSegment kVersioned, Put
// before it changes a key word or splits), so taking it is a plain store; an update of a
// present key holds `lock` but leaves `ver` alone (h72), so lookups do not restart for it.
// (h72 also tried `ver` on a line of its own, which updates then never write: no gain measured
// at 2 threads, and inserts, which take both, were 5-8% slower at one thread.)
// `delta`: records added minus removed by the holders of this stripe's exclusive lock (only
// they write it, on the line they hold anyway: no cache line shared by every insert); Size()
// sums the stripes.
struct alignas(64) PaddedLock {
  RwSpinLock lock;
  sync::VersionLock ver;
  std::atomic<int64_t> delta{0};
  // REQUIRES: `lock` held exclusively (one writer: a plain load and store, no locked RMW).
  void Add(int64_t d) { delta.store(delta.load(std::memory_order_relaxed) + d, std::memory_order_relaxed); }
};
// Optimistic attempts of a CCEH lookup before it takes the segment lock shared instead.
constexpr int kMaxOptimisticRestarts = 16;

unsigned Log2(uint64_t v) { return 63 - __builtin_clzll(v); }

// Directory variants (root param[1]; cceh.h "Variants").
enum Variant : uint64_t { kMsb = 0, kLsb = 1, kExth = 2 };

// The low `bits` bits of x in reverse order.
uint64_t RevBits(uint64_t x, unsigned bits) {
  if (bits == 0) return 0;
  x = ((x >> 1) & 0x5555555555555555ull) | ((x & 0x5555555555555555ull) << 1);
  x = ((x >> 2) & 0x3333333333333333ull) | ((x & 0x3333333333333333ull) << 2);
  x = ((x >> 4) & 0x0f0f0f0f0f0f0f0full) | ((x & 0x0f0f0f0f0f0f0f0full) << 4);
  x = __builtin_bswap64(x);
  return x >> (64 - bits);
}

// The directory entries of one segment: first + k * step for k in [0, count).
struct DirRun {
  uint64_t first, step, count;
  uint64_t at(uint64_t k) const { return first + k * step; }
};
// The run of the segment with depth L and pattern p (its hash's top L bits) in a directory of
// global depth g. MSB: 2^(g-L) adjacent entries. LSB: every 2^L-th entry from rev(p).
DirRun RunOf(bool lsb, uint64_t p, unsigned L, unsigned g) {
  if (lsb) return {RevBits(p, L), 1ull << L, 1ull << (g - L)};
  return {p << (g - L), 1, 1ull << (g - L)};
}
// The halves a split of that segment writes: the new segment's (bit L of the hash = 1) and the
// old one's. MSB: the right and the left half of the run; LSB: its odd and its even entries.
DirRun RightHalf(bool lsb, const DirRun& r) {
  return lsb ? DirRun{r.first + r.step, 2 * r.step, r.count / 2} : DirRun{r.first + r.count / 2, 1, r.count / 2};
}
DirRun LeftHalf(bool lsb, const DirRun& r) {
  return lsb ? DirRun{r.first, 2 * r.step, r.count / 2} : DirRun{r.first, 1, r.count / 2};
}
// Whether run position k is in the right half.
bool InRightHalf(bool lsb, const DirRun& r, uint64_t k) { return lsb ? (k & 1) != 0 : k >= r.count / 2; }
// The directory index of a hash at global depth g.
uint64_t DirIndex(bool lsb, uint64_t h, unsigned g) { return lsb ? RevBits(Prefix(h, g), g) : Prefix(h, g); }
// Whether entry i (depth L <= g) is the first of its segment's run, and that segment's pattern.
bool IsRunStart(bool lsb, uint64_t i, unsigned L, unsigned g) {
  return lsb ? (i >> L) == 0 : (i & ((1ull << (g - L)) - 1)) == 0;
}
uint64_t PatternOf(bool lsb, uint64_t i, unsigned L, unsigned g) {
  return lsb ? RevBits(i & ((1ull << L) - 1), L) : i >> (g - L);
}

// Where a key's records live, as read from the directory.
struct Loc {
  uint64_t entry = 0;
  uint64_t seg = 0;
  unsigned depth = 0;
  uint64_t pattern = 0;
};

class Cceh final : public HashIndexBase {
 public:
  Cceh(Pool& pool, uint64_t root_off, HashRoot* root, bool cow)
      : HashIndexBase(pool, root_off, root, cow ? "cceh-cow" : "cceh"),
        cow_(cow),
        lsb_(root->param[1] != kMsb),
        exth_(root->param[1] == kExth),
        bbits_(static_cast<unsigned>(root->param[0])),
        nb_(1u << bbits_),
        window_(exth_ ? nb_ : std::min(kProbeBuckets, nb_)),
        max_depth_(codec_.key_type() == KeyType::kU64 ? kMaxDepthU64 : kFingerprintBits),
        locks_(new PaddedLock[1u << kStripeBits]) {}

  Status Put(std::string_view key, uint64_t value, bool upsert, bool* inserted) override;
  Status Lookup(std::string_view key, uint64_t* value) const override;
  Status Remove(std::string_view key) override;
  uint64_t Size() const override;
  Status Check(std::string* report) const override;
  IndexStats Stats() const override;
  using HashIndexBase::Lookup;
  using HashIndexBase::Remove;

  // Algorithm 4: completes (or, CCEH(C) without a left half, rolls back) a split cut by a crash.
  Status RecoverDirectory();

 private:
  uint64_t SegBytes() const { return uint64_t(nb_) * sizeof(CcehBucket); }
  CcehDirectory* Dir() const { return pool_.at<CcehDirectory>(pm::load8(&root_->table)); }
  CcehBucket* Seg(uint64_t off) const { return pool_.at<CcehBucket>(off); }
  // The first bucket of a hash's probe window (EXTH: the whole bucket, from its first line).
  unsigned Home(uint64_t h) const { return exth_ ? 0 : static_cast<unsigned>(h) & (nb_ - 1); }
  PaddedLock& Stripe(uint64_t seg) const { return locks_[((seg >> 6) * 0x9e3779b97f4a7c15ull) >> (64 - kStripeBits)]; }
  RwSpinLock& SegLock(uint64_t seg) const { return Stripe(seg).lock; }
  sync::VersionLock& SegVersion(uint64_t seg) const { return Stripe(seg).ver; }
  // Hands a block no longer reachable to the pool's epoch reclamation (readers inside an epoch
  // may still hold it). REQUIRES: inside the operation's WriteEpoch.
  void RetireNow(uint64_t off) const { alloc_.Retire(off); }
  // A write operation runs inside the pool's epoch from before anything is unlinked until after
  // it is retired (the writer rule of wort/alloc.h: the post-crash GC's grace period waits for
  // it), then collects at once: with no reader inside, what it retired is freed before the
  // operation returns (so single-threaded use keeps allocated == reachable).
  class WriteEpoch {
   public:
    // collect = false: the operation retires nothing unless it calls CollectOnExit (Put: only a
    // split retires; issue 31: two Collect calls per insert that had nothing to collect).
    explicit WriteEpoch(Allocator& a, bool collect = true) : a_(a), collect_(collect) { a_.epoch().Enter(); }
    ~WriteEpoch() {
      a_.epoch().Exit();
      if (!collect_) return;
      a_.epoch().Collect();
      a_.epoch().Collect();
    }
    void CollectOnExit() const { collect_ = true; }
    WriteEpoch(const WriteEpoch&) = delete;
    WriteEpoch& operator=(const WriteEpoch&) = delete;

   private:
    Allocator& a_;
    mutable bool collect_;
  };
  static Loc MakeLoc(uint64_t e, uint64_t h) {
    Loc l;
    l.entry = e;
    l.seg = EntrySegment(e);
    l.depth = EntryDepth(e);
    l.pattern = Prefix(h, l.depth);
    return l;
  }
  // How a segment is locked: kShared (a lookup's fallback), kExclusive (the segment's writers'
  // lock only: Put until it knows it changes more than a value word), kVersioned (kExclusive and
  // the stripe's version word, which lock-free lookups validate: any change but a value's).
  enum LockMode { kShared, kExclusive, kVersioned };
  Loc LockSegment(uint64_t h, LockMode mode) const;
  // Always inline (issue 31): GCC called it out of line from Put, 24 instructions per insert.
  [[gnu::always_inline]] void UnlockSegment(const Loc& l, LockMode mode) const {
    if (mode == kShared) {
      SegLock(l.seg).unlock_shared();
      return;
    }
    if (mode == kVersioned) SegVersion(l.seg).WriteUnlock();
    SegLock(l.seg).unlock();
  }
  // The slot holding p's key in the segment's probe window, or nullptr.
  CcehSlot* FindSlot(const Loc& l, const Probe& p) const {
    CcehBucket* s = Seg(l.seg);
    const unsigned home = Home(p.hash);
    for (unsigned i = 0; i < window_; ++i) {
      CcehBucket& b = s[(home + i) & (nb_ - 1)];
      for (auto& slot : b.slot) {
        const uint64_t w = pm::load8(&slot.key);
        if (w != 0 && codec_.Matches(w, p)) return &slot;
      }
    }
    return nullptr;
  }
  bool IsValid(uint64_t w, unsigned depth, uint64_t pattern) const {
    return w != 0 && Prefix(codec_.HashHi(w), depth) == pattern;
  }
  Status Split(const Loc& l);
  Status LookupLockFree(const Probe& p, uint64_t* value) const;
  // CCEH: one optimistic attempt (versions of the directory and of the segment's stripe);
  // false: restart.
  bool LookupOptimistic(const Probe& p, uint64_t* value, bool* found) const;
  // Locks every segment stripe exclusively (a consistent snapshot: no writer in flight).
  void LockAll() const {
    for (unsigned i = 0; i < (1u << kStripeBits); ++i) locks_[i].lock.lock();
  }
  void UnlockAll() const {
    for (unsigned i = 0; i < (1u << kStripeBits); ++i) locks_[i].lock.unlock();
  }
  // Calls fn(seg, depth, pattern) for every distinct segment (directory in a consistent state).
  template <class Fn>
  void ForEachSegment(const CcehDirectory* d, Fn&& fn) const {
    const unsigned g = static_cast<unsigned>(d->depth);
    const uint64_t n = 1ull << g;
    for (uint64_t i = 0; i < n;) {
      const uint64_t e = d->entries()[i];
      const unsigned depth = EntryDepth(e);
      if (depth > g) {
        fn(EntrySegment(e), depth, 0);
        ++i;
      } else if (lsb_) {
        if (IsRunStart(true, i, depth, g)) fn(EntrySegment(e), depth, PatternOf(true, i, depth, g));
        ++i;
      } else {
        fn(EntrySegment(e), depth, i >> (g - depth));
        i += 1ull << (g - depth);
      }
    }
  }
  uint64_t CountValidLocked() const;
  void CollectRecords(Records* out) const override;
  // Stores the run's entries := e from the last to the first; a line is persisted before the
  // first store into another line. *line is the line being written (0: none yet).
  static void StoreRunBackwards(uint64_t* ent, const DirRun& r, uint64_t e, uintptr_t* line) {
    for (uint64_t k = r.count; k-- > 0;) {
      const uint64_t i = r.at(k);
      const uintptr_t l = reinterpret_cast<uintptr_t>(&ent[i]) & ~uintptr_t(63);
      if (*line != 0 && l != *line) pm::persist(reinterpret_cast<const void*>(*line), 64);
      *line = l;
      pm::store8(&ent[i], e);
    }
  }

  const bool cow_;
  const bool lsb_;   // CCEH(LSB) or EXTH: the directory indexed from the low end (cceh.h)
  const bool exth_;  // EXTH: a segment is one bucket, searched whole; a split clears the moved records
  const unsigned bbits_;
  const unsigned nb_;
  const unsigned window_;
  const unsigned max_depth_;
  // Serializes the directory's writers (a split's directory update, a doubling); held
  // exclusively only, by a split that already holds its segment's lock. Nobody else takes it.
  mutable RwSpinLock dir_lock_;
  // Held (under dir_lock_) only while entries or the directory pointer are stored and
  // persisted: writers and optimistic readers that read an entry meanwhile read it again.
  mutable sync::VersionLock dir_ver_;
  std::unique_ptr<PaddedLock[]> locks_;
  // Size: base_ counted once (under every lock), then writers add to their stripe's delta under
  // its lock, and to zero_delta_ under zero_mu_ (the u64 zero key).
  mutable std::mutex count_mu_;
  mutable bool count_known_ = false;
  mutable uint64_t base_ = 0;
  mutable std::atomic<int64_t> zero_delta_{0};
  int64_t DeltaSum() const {
    int64_t d = zero_delta_.load(std::memory_order_relaxed);
    for (unsigned i = 0; i < (1u << kStripeBits); ++i) d += locks_[i].delta.load(std::memory_order_relaxed);
    return d;
  }
};

// ---- locating ------------------------------------------------------------------------------

Loc Cceh::LockSegment(uint64_t h, LockMode mode) const {
  const bool exclusive = mode != kShared;
  // No directory lock (issue 31): the entry is read under the directory's version word, which
  // a directory writer holds only while it stores entries or the directory pointer and persists
  // them. So an entry read with the version unlocked and unchanged afterwards was persistent
  // when read (a record inserted into the segment it names cannot be lost to a cut directory
  // update), and a doubling that is still building its new directory does not stop anyone.
  // REQUIRES: inside an epoch of the pool (the directory read may be retired meanwhile).
  for (unsigned n = 0;; ++n) {
    uint64_t vd = 0;
    if (!dir_ver_.ReadLockOrRestart(&vd)) {
      Backoff(n);
      continue;
    }
    const CcehDirectory* d = Dir();
    const unsigned g = static_cast<unsigned>(pm::load8(&d->depth));
    if (g > 63) continue;  // torn: a new directory was published meanwhile (the check fails)
    const uint64_t e = pm::load8(&d->entries()[DirIndex(lsb_, h, g)]);
    // Start fetching the probe window (the home bucket and the next window_ - 1, one line each:
    // a writer reads all of them, for the key's duplicate) before the lock's locked instruction,
    // after which no later load of this thread may start until it completes.
    {
      const CcehBucket* seg = Seg(EntrySegment(e));
      const unsigned home = Home(h), lines = std::min(window_, 4u);
      for (unsigned i = 0; i < lines; ++i)
        _mm_prefetch(reinterpret_cast<const char*>(seg + ((home + i) & (nb_ - 1))), _MM_HINT_T0);
    }
    RwSpinLock& l = SegLock(EntrySegment(e));
    if (!(exclusive ? l.try_lock() : l.try_lock_shared())) {
      if (exclusive)
        l.lock();
      else
        l.lock_shared();
    }
    // The entry routes here and cannot change while we hold the segment's lock: only a split of
    // this segment rewrites it (a doubling copies it unchanged). If the directory changed
    // since it was read, read the entry again.
    if (dir_ver_.CheckOrRestart(vd)) {
      // No other writer of `ver`: every one holds `l` first (a store, not a second locked RMW).
      if (mode == kVersioned) SegVersion(EntrySegment(e)).WriteLockExcluded();
      return MakeLoc(e, h);
    }
    if (exclusive)
      l.unlock();
    else
      l.unlock_shared();
  }
}

// ---- operations ----------------------------------------------------------------------------

Status Cceh::Put(std::string_view key, uint64_t value, bool upsert, bool* inserted) {
  Probe p;
  WORT_RETURN_IF_ERROR(codec_.Prepare(key, &p));
  if (p.zero) {
    std::lock_guard<std::mutex> g(zero_mu_);
    bool ins = false;
    WORT_RETURN_IF_ERROR(ZeroPut(value, upsert, &ins));
    if (ins) zero_delta_.store(zero_delta_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (inserted) *inserted = ins;
    return Status::OK();
  }
  uint64_t word = 0;  // the key word, made (key block allocated) on first need
  const WriteEpoch we(alloc_, /*collect=*/false);  // a split retires the old directory / segment
  for (;;) {
    // The segment's lock without its version word (h72): lock-free lookups of this segment go
    // on unless the put changes more than a value word (then the version is taken below).
    const Loc l = LockSegment(p.hash, kExclusive);
    // One pass over the probe window for the key's slot and the first empty slot (issue 31:
    // the duplicate search and the free-slot search read it twice).
    // A record word equal to the probe's matches (Matches' first test; w != 0 here); the rest of
    // Matches is for byte-string keys, so a u64 index tests one register per slot (issue 31:
    // the key type and the probe's word were loaded again for each of the window's 16 slots).
    CcehSlot* found = nullptr;
    CcehSlot* empty = nullptr;
    CcehBucket* seg = Seg(l.seg);
    const unsigned home = Home(p.hash);
    const uint64_t pw = p.word;
    const bool bytes = codec_.key_type() != KeyType::kU64;
    for (unsigned i = 0; i < window_ && !found; ++i)
      for (auto& slot : seg[(home + i) & (nb_ - 1)].slot) {
        const uint64_t w = pm::load8(&slot.key);
        if (w == 0) {
          if (!empty) empty = &slot;
        } else if (w == pw || (bytes && codec_.Matches(w, p))) {
          found = &slot;
          break;
        }
      }
    if (CcehSlot* s = found) {
      if (!upsert) {
        UnlockSegment(l, kExclusive);
        if (word != p.word) codec_.FreeWord(alloc_, word);
        return Status::AlreadyExists("key exists");
      }
      // COMMIT: the value word. A lookup reads the old or the new value (one 8-byte word), so
      // the version word is not taken: lookups of this segment meanwhile do not restart.
      pm::store8(&s->value, value);
      pm::persist(&s->value, 8);
      UnlockSegment(l, kExclusive);
      if (word != p.word) codec_.FreeWord(alloc_, word);
      if (inserted) *inserted = false;
      return Status::OK();
    }
    // A free slot: empty, else (CCEH) one whose record is invalid by the local depth.
    CcehSlot* free_slot = empty;
    if (!free_slot && !cow_) {
      for (unsigned i = 0; i < window_ && !free_slot; ++i)
        for (auto& slot : seg[(home + i) & (nb_ - 1)].slot)
          if (!IsValid(slot.key, l.depth, l.pattern)) {
            free_slot = &slot;
            break;
          }
    }
    if (free_slot) {
      if (word == 0) {
        Status s = codec_.MakeWord(alloc_, p, &word);
        if (!s.ok()) {
          UnlockSegment(l, kExclusive);
          return s;
        }
      }
      SegVersion(l.seg).WriteLockExcluded();  // a slot changes: lookups validate against it
      // Write the value, then COMMIT: store8 the key word; persist the line (one flush).
      pm::store8(&free_slot->value, value);
      pm::store8(&free_slot->key, word);
      pm::persist(free_slot, sizeof(CcehSlot));
      Stripe(l.seg).Add(1);
      UnlockSegment(l, kVersioned);
      if (inserted) *inserted = true;
      return Status::OK();
    }
    we.CollectOnExit();
    SegVersion(l.seg).WriteLockExcluded();
    const Status s = Split(l);
    UnlockSegment(l, kVersioned);
    if (!s.ok()) {
      if (word != p.word) codec_.FreeWord(alloc_, word);
      return s;
    }
  }
}

Status Cceh::Lookup(std::string_view key, uint64_t* value) const {
  Probe p;
  WORT_RETURN_IF_ERROR(codec_.Prepare(key, &p));
  if (p.zero) {
    std::lock_guard<std::mutex> g(zero_mu_);
    return ZeroGet(value);
  }
  if (cow_) return LookupLockFree(p, value);
  sync::EpochGuard g(alloc_.epoch());  // old directories and key blocks are retired, not freed
  for (int attempt = 0; attempt < kMaxOptimisticRestarts; ++attempt) {
    bool found = false;
    if (LookupOptimistic(p, value, &found)) return found ? Status::OK() : Status::NotFound("key not found");
  }
  // Writers kept changing this segment: take its lock shared (cannot starve).
  const Loc l = LockSegment(p.hash, kShared);
  const CcehSlot* s = FindSlot(l, p);
  if (s) *value = pm::load8(&s->value);
  UnlockSegment(l, kShared);
  return s ? Status::OK() : Status::NotFound("key not found");
}

// CCEH: no lock. Validation: the directory version is checked after the segment's stripe version
// was read (the entry still routes to this segment), the stripe version after the slots were
// read (no writer changed the segment meanwhile: an insert overwriting an invalid copy, a split,
// a remove). A version word read as locked (a writer inside) fails at once, so a torn slot is
// never returned.
bool Cceh::LookupOptimistic(const Probe& p, uint64_t* value, bool* found) const {
  uint64_t vd = 0, vs = 0;
  if (!dir_ver_.ReadLockOrRestart(&vd)) return false;
  const CcehDirectory* d = Dir();
  const unsigned g = static_cast<unsigned>(pm::load8(&d->depth));
  if (g > 63) return false;  // torn read of a directory being replaced: the check below fails
  const uint64_t e = pm::load8(&d->entries()[DirIndex(lsb_, p.hash, g)]);
  const uint64_t seg = EntrySegment(e);
  const sync::VersionLock& ver = SegVersion(seg);
  if (!ver.ReadLockOrRestart(&vs) || !dir_ver_.CheckOrRestart(vd)) return false;
  const CcehBucket* s = Seg(seg);
  const unsigned home = Home(p.hash);
  uint64_t v = 0;
  bool hit = false;
  if (codec_.key_type() == KeyType::kU64) {
    // The key word is the mixed key itself, never 0 here (p.zero keys took ZeroGet): one compare
    // per slot is Matches.
    const uint64_t want = p.word;
    for (unsigned i = 0; i < window_ && !hit; ++i) {
      const CcehBucket& b = s[(home + i) & (nb_ - 1)];
      for (const auto& slot : b.slot) {
        if (pm::load8(&slot.key) == want) {
          v = pm::load8(&slot.value);
          hit = true;
          break;
        }
      }
    }
  } else {
    for (unsigned i = 0; i < window_ && !hit; ++i) {
      const CcehBucket& b = s[(home + i) & (nb_ - 1)];
      for (const auto& slot : b.slot) {
        const uint64_t w = pm::load8(&slot.key);
        if (w != 0 && codec_.Matches(w, p)) {
          v = pm::load8(&slot.value);
          hit = true;
          break;
        }
      }
    }
  }
  if (!ver.CheckOrRestart(vs)) return false;
  if (hit) *value = v;
  *found = hit;
  return true;
}

// CCEH(C): no lock. The epoch keeps every block we can reach from being freed; a slot that is
// reused between reading its key word and its value is detected by re-reading the key word.
Status Cceh::LookupLockFree(const Probe& p, uint64_t* value) const {
  sync::EpochGuard guard(alloc_.epoch());
  Status result = Status::NotFound("key not found");
  for (bool again = true; again;) {
    again = false;
    const CcehDirectory* d = Dir();
    const uint64_t e = pm::load8(&d->entries()[DirIndex(lsb_, p.hash, static_cast<unsigned>(d->depth))]);
    const CcehBucket* seg = Seg(EntrySegment(e));
    const unsigned home = Home(p.hash);
    for (unsigned i = 0; i < window_ && !again; ++i) {
      const CcehBucket& b = seg[(home + i) & (nb_ - 1)];
      for (const auto& slot : b.slot) {
        const uint64_t w = pm::load8(&slot.key);
        if (w == 0 || !codec_.Matches(w, p)) continue;
        const uint64_t v = pm::load8(&slot.value);
        if (pm::load8(&slot.key) != w) {
          again = true;
          break;
        }
        *value = v;
        result = Status::OK();
        break;
      }
      if (result.ok()) break;
    }
  }
  return result;
}

Status Cceh::Remove(std::string_view key) {
  Probe p;
  WORT_RETURN_IF_ERROR(codec_.Prepare(key, &p));
  if (p.zero) {
    std::lock_guard<std::mutex> g(zero_mu_);
    WORT_RETURN_IF_ERROR(ZeroRemove());
    zero_delta_.store(zero_delta_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    return Status::OK();
  }
  const WriteEpoch we(alloc_);  // entered before the unlink, left after the key block's Retire
  const Loc l = LockSegment(p.hash, kVersioned);
  CcehSlot* s = FindSlot(l, p);
  if (!s) {
    UnlockSegment(l, kVersioned);
    return Status::NotFound("key not found");
  }
  const uint64_t w = s->key;
  // COMMIT: clear the key word; persist.
  pm::store8(&s->key, 0);
  pm::persist(&s->key, 8);
  Stripe(l.seg).Add(-1);
  UnlockSegment(l, kVersioned);
  // Lock-free readers may still be comparing its bytes: retired, freed after their epochs.
  if (const uint64_t b = codec_.BlockOf(w)) RetireNow(b);
  return Status::OK();
}

// ---- split ---------------------------------------------------------------------------------

// REQUIRES: the segment lock of l.seg held exclusively.
Status Cceh::Split(const Loc& l) {
  const uint64_t t0 = NowNs();
  const unsigned L = l.depth;
  if (L >= max_depth_)
    return Status::PoolFull(std::string(kind_) + ": segment cannot split past local depth " + std::to_string(L));
  const CcehBucket* src = Seg(l.seg);
  // 1. The new segment(s), wholly written and persisted before anything references them.
  uint64_t left = l.seg, right = 0;
  WORT_RETURN_IF_ERROR(alloc_.AllocZeroed(SegBytes(), &right));
  if (cow_) {
    Status s = alloc_.AllocZeroed(SegBytes(), &left);
    if (!s.ok()) {
      alloc_.Free(right);
      return s;
    }
  }
  CcehBucket* rs = Seg(right);
  CcehBucket* ls = Seg(left);
  unsigned packed = 0;  // EXTH: the new bucket's records from its first slot on (no home bucket)
  for (unsigned b = 0; b < nb_; ++b) {
    for (unsigned j = 0; j < kSlotsPerBucket; ++j) {
      const CcehSlot& from = src[b].slot[j];
      const uint64_t w = from.key;
      if (!IsValid(w, L, l.pattern)) continue;
      const bool bit = (codec_.HashHi(w) >> (63 - L)) & 1;
      if (bit && exth_) {
        rs[packed / kSlotsPerBucket].slot[packed % kSlotsPerBucket] = from;
        ++packed;
      } else if (bit) {
        rs[b].slot[j] = from;
      } else if (cow_) {
        ls[b].slot[j] = from;
      }
    }
  }
  pm::flush(rs, SegBytes());
  if (cow_) pm::flush(ls, SegBytes());
  pm::fence();

  // 2. The directory.
  const uint64_t el = MakeEntry(left, L + 1), er = MakeEntry(right, L + 1);
  uint64_t old_dir = 0;
  bool doubled = false;
  // dir_lock_ serializes the directory's writers (splits); inserts and lookups do not take it.
  // dir_ver_ is held only while entries or the directory pointer are stored and persisted
  // (LockSegment: an entry is used only if read outside that window).
  dir_lock_.lock();
  CcehDirectory* d = Dir();
  const unsigned g = static_cast<unsigned>(d->depth);
  if (L < g) {
    // 2a. In place, the new segment's half first, each half from its last entry to its first
    // (MSB: right to left; LSB: the odd entries of the run, then the even ones).
    const DirRun run = RunOf(lsb_, l.pattern, L, g);
    uintptr_t line = 0;
    dir_ver_.WriteLock();  // no other holder: we hold dir_lock_
    StoreRunBackwards(d->entries(), RightHalf(lsb_, run), er, &line);
    StoreRunBackwards(d->entries(), LeftHalf(lsb_, run), el, &line);
    pm::persist(reinterpret_cast<const void*>(line), 64);
    dir_ver_.WriteUnlock();
  } else {
    // 2b. Doubling: copy-on-write of the directory. Built and persisted while inserts into
    // other segments go on under the old directory (its entries do not change: every other
    // directory writer waits for dir_lock_); only the pointer's store and persist hold dir_ver_.
    uint64_t nd_off = 0;
    Status s = alloc_.Alloc(CcehDirectory::Bytes(g + 1), &nd_off);
    if (!s.ok()) {
      dir_lock_.unlock();
      alloc_.Free(right);
      if (cow_) alloc_.Free(left);
      return s;
    }
    auto* nd = pool_.at<CcehDirectory>(nd_off);
    nd->magic = CcehDirectory::kMagic;
    nd->depth = g + 1;
    std::fill(std::begin(nd->pad), std::end(nd->pad), 0);
    const uint64_t* oe = d->entries();
    uint64_t* ne = nd->entries();
    const uint64_t n = 1ull << g;
    if (lsb_) {
      // LSB: the directory twice over (entries k and k + 2^G name what old entry k named).
      for (uint64_t k = 0; k < n; ++k) ne[k] = ne[k + n] = oe[k];
      const uint64_t r = RevBits(l.pattern, g);
      ne[r] = el;
      ne[r + n] = er;
    } else {
      for (uint64_t k = 0; k < n; ++k) {
        if (k == l.pattern) {
          ne[2 * k] = el;
          ne[2 * k + 1] = er;
        } else {
          ne[2 * k] = ne[2 * k + 1] = oe[k];
        }
      }
    }
    pm::persist(nd, CcehDirectory::Bytes(g + 1));
    // COMMIT: the directory pointer.
    dir_ver_.WriteLock();  // no other holder: we hold dir_lock_
    pm::store8(&root_->table, nd_off);
    pm::persist(&root_->table, 8);
    dir_ver_.WriteUnlock();
    old_dir = pool_.offset_of(d);
    doubled = true;
  }
  dir_lock_.unlock();
  // 2c. EXTH (legacy extendible hashing rewrites both buckets): clear the moved records from the
  // old bucket, invalid by its new depth from the directory update on (a crash before or during
  // this leaves them invalid: lazy deletion's state), and persist the lines cleared.
  if (exth_) {
    CcehBucket* os = Seg(l.seg);
    for (unsigned b = 0; b < nb_; ++b) {
      bool touched = false;
      for (auto& slot : os[b].slot) {
        const uint64_t w = slot.key;
        if (IsValid(w, L, l.pattern) && ((codec_.HashHi(w) >> (63 - L)) & 1)) {
          pm::store8(&slot.key, 0);
          touched = true;
        }
      }
      if (touched) pm::flush(&os[b], sizeof(CcehBucket));
    }
    // crash-site: uncaught: the cleared slots held records already invalid by the new depth (any mix of cleared and not is the lazy-deletion state), and on every explored path the record's COMMIT persist in Put (or the next split's fence) completes these flushes before Put returns; only a Split that fails at the depth cap right after one returns without another fence, which the plans cannot reach (24 hash bits)
    pm::fence();
  }
  // 3. Lock-free readers may still be in the old directory or (CCEH(C)) the split segment.
  if (doubled) RetireNow(old_dir);
  if (cow_) RetireNow(l.seg);
  AddRehash(NowNs() - t0, doubled, true, false);
  return Status::OK();
}

// ---- recovery ------------------------------------------------------------------------------

Status Cceh::RecoverDirectory() {
  CcehDirectory* d = Dir();
  const unsigned g = static_cast<unsigned>(d->depth);
  uint64_t* ent = d->entries();
  const uint64_t n = 1ull << g;
  std::vector<uint64_t> frees;
  // Walks the runs from their first entries (MSB: from run to run; LSB: every entry, those that
  // start no run are in the run of an earlier one).
  for (uint64_t i = 0; i < n;) {
    const uint64_t e = ent[i];
    const unsigned L = EntryDepth(e);
    if (L > g) return Status::Corruption("cceh directory entry " + std::to_string(i) + " has depth > G");
    const uint64_t next = lsb_ ? i + 1 : i + (1ull << (g - L));
    if (!IsRunStart(lsb_, i, L, g)) {
      if (lsb_) {
        i = next;
        continue;
      }
      return Status::Corruption("cceh directory entry " + std::to_string(i) + " misaligned for its depth");
    }
    const DirRun run = RunOf(lsb_, PatternOf(lsb_, i, L, g), L, g);
    bool same = true;
    for (uint64_t k = 1; k < run.count && same; ++k) same = ent[run.at(k)] == e;
    if (same) {
      i = next;
      continue;
    }
    // A split of S = seg(e) cut by the crash. The run's last entry (in the right half, written
    // first) names the new segment.
    const uint64_t er = ent[run.at(run.count - 1)];
    if (run.count < 2 || EntryDepth(er) != L + 1 || EntrySegment(er) == EntrySegment(e) ||
        !pool_.contains(EntrySegment(er), SegBytes()))
      return Status::Corruption("cceh directory run at " + std::to_string(i) + " is neither whole nor a cut split");
    uint64_t el = 0;  // the left half's new entry, if any entry of it was written
    for (uint64_t k = run.count; k-- > 1;) {
      const uint64_t x = ent[run.at(k)];
      if (x == e) continue;
      if (InRightHalf(lsb_, run, k)) {
        if (x != er) return Status::Corruption("cceh directory: unexpected entry in a cut split's right half");
      } else {
        if (EntryDepth(x) != L + 1 || (el != 0 && x != el))
          return Status::Corruption("cceh directory: unexpected entry in a cut split's left half");
        el = x;
      }
    }
    uintptr_t line = 0;
    if (!cow_) {
      if (el != 0 && EntrySegment(el) != EntrySegment(e))
        return Status::Corruption("cceh directory: a cut split's left half names another segment");
      StoreRunBackwards(ent, RightHalf(lsb_, run), er, &line);
      StoreRunBackwards(ent, LeftHalf(lsb_, run), MakeEntry(EntrySegment(e), L + 1), &line);
    } else if (el != 0) {
      StoreRunBackwards(ent, RightHalf(lsb_, run), er, &line);
      StoreRunBackwards(ent, LeftHalf(lsb_, run), el, &line);
      frees.push_back(EntrySegment(e));
    } else {
      StoreRunBackwards(ent, run, e, &line);
      frees.push_back(EntrySegment(er));
    }
    pm::persist(reinterpret_cast<const void*>(line), 64);
    i = next;
  }
  // Unlinked by the fixes above (persisted): free them. If the post-crash GC did not reach them
  // it has freed them already, and the allocator ignores the second free.
  for (uint64_t off : frees) alloc_.Free(off);
  return Status::OK();
}

// ---- size, check, stats --------------------------------------------------------------------

uint64_t Cceh::CountValidLocked() const {
  uint64_t n = ZeroPresent() ? 1 : 0;
  ForEachSegment(Dir(), [&](uint64_t seg, unsigned depth, uint64_t pattern) {
    const CcehBucket* s = Seg(seg);
    for (unsigned b = 0; b < nb_; ++b)
      for (const auto& slot : s[b].slot) n += IsValid(slot.key, depth, pattern);
  });
  return n;
}

void Cceh::CollectRecords(Records* out) const {
  LockAll();  // every stripe: no insert, remove or split runs (the directory is still too)
  {
    std::lock_guard<std::mutex> z(zero_mu_);
    AppendSpecialRecords(out);
  }
  ForEachSegment(Dir(), [&](uint64_t seg, unsigned depth, uint64_t pattern) {
    const CcehBucket* s = Seg(seg);
    for (unsigned b = 0; b < nb_; ++b)
      for (const auto& slot : s[b].slot)
        if (IsValid(slot.key, depth, pattern)) AppendRecord(slot.key, slot.value, out);
  });
  UnlockAll();
}

uint64_t Cceh::Size() const {
  std::lock_guard<std::mutex> g(count_mu_);
  if (!count_known_) {
    LockAll();
    std::lock_guard<std::mutex> z(zero_mu_);
    base_ = CountValidLocked();
    zero_delta_.store(0, std::memory_order_relaxed);
    for (unsigned i = 0; i < (1u << kStripeBits); ++i) locks_[i].delta.store(0, std::memory_order_relaxed);
    count_known_ = true;
    UnlockAll();
  }
  return static_cast<uint64_t>(static_cast<int64_t>(base_) + DeltaSum());
}

Status Cceh::Check(std::string* report) const {
  std::string r;
  const size_t limit = 20;
  size_t problems = 0;
  auto bad = [&](const std::string& m) {
    if (problems++ < limit) r += std::string(kind_) + ": " + m + "\n";
  };
  (void)Size();  // makes the count known; base_ is stable from here on
  LockAll();
  std::unique_lock<std::mutex> z(zero_mu_);
  const uint64_t size_before = static_cast<uint64_t>(static_cast<int64_t>(base_) + DeltaSum());
  const uint64_t dir_off = pm::load8(&root_->table);
  if (dir_off == 0 || !pool_.contains(dir_off, sizeof(CcehDirectory))) {
    bad("C1: root.table outside the pool");
  } else {
    const CcehDirectory* d = Dir();
    const unsigned g = static_cast<unsigned>(d->depth);
    if (d->magic != CcehDirectory::kMagic || g > 40 || !pool_.contains(dir_off, CcehDirectory::Bytes(g))) {
      bad("C1: bad directory block");
    } else {
      const uint64_t n = 1ull << g;
      std::unordered_set<uint64_t> segs;
      uint64_t valid = ZeroPresent() ? 1 : 0;
      if (codec_.key_type() == KeyType::kBytes && ZeroPresent()) bad("zero slot used by a byte-key table");
      for (uint64_t i = 0; i < n;) {
        const uint64_t e = d->entries()[i];
        const unsigned L = EntryDepth(e);
        const uint64_t seg = EntrySegment(e);
        if (L > g || L > max_depth_) {
          bad("C1: entry " + std::to_string(i) + " depth " + std::to_string(L) + " > G");
          ++i;
          continue;
        }
        if (seg == 0 || !pool_.contains(seg, SegBytes())) {
          bad("C1: entry " + std::to_string(i) + " segment outside the pool");
          ++i;
          continue;
        }
        const uint64_t next = lsb_ ? i + 1 : i + (1ull << (g - L));
        if (!IsRunStart(lsb_, i, L, g)) {
          if (!lsb_) bad("C2: run at " + std::to_string(i) + " misaligned");
          // LSB: the entry must equal its run's first entry (the run is checked from there).
          else if (d->entries()[i & ((1ull << L) - 1)] != e)
            bad("C2: entry " + std::to_string(i) + " differs from its run's first entry");
          i = next;
          continue;
        }
        const DirRun run = RunOf(lsb_, PatternOf(lsb_, i, L, g), L, g);
        for (uint64_t k = 0; k < run.count; ++k)
          if (d->entries()[run.at(k)] != e)
            bad("C2: run at " + std::to_string(i) + " not uniform at " + std::to_string(run.at(k)));
        if (!segs.insert(seg).second) bad("C2: segment " + std::to_string(seg) + " has two runs");
        const uint64_t pattern = PatternOf(lsb_, i, L, g);
        const CcehBucket* s = Seg(seg);
        std::unordered_set<std::string> keys;
        for (unsigned b = 0; b < nb_; ++b) {
          for (unsigned j = 0; j < kSlotsPerBucket; ++j) {
            const uint64_t w = s[b].slot[j].key;
            if (w == 0) continue;
            if (!IsValid(w, L, pattern)) {
              if (cow_) bad("C3: stale record in a CCEH(C) segment");
              continue;
            }
            ++valid;
            if (!codec_.CheckWord(w, &r)) {
              ++problems;
              continue;
            }
            const unsigned home = Home(codec_.FullHash(w));
            if (((b - home) & (nb_ - 1)) >= window_)
              bad("C3: record in bucket " + std::to_string(b) + " outside its probe window (home " +
                  std::to_string(home) + ")");
            if (!keys.insert(codec_.KeyOf(w)).second) bad("C3: duplicate valid key " + codec_.KeyOf(w));
          }
        }
        i = next;
      }
      if (valid != size_before)
        bad("C5: Size() is " + std::to_string(size_before) + " but " + std::to_string(valid) + " records are valid");
    }
  }
  z.unlock();
  UnlockAll();
  if (problems > limit) r += std::string(kind_) + ": ... " + std::to_string(problems - limit) + " more\n";
  if (report) *report += r;
  return problems == 0 ? Status::OK() : Status::Corruption(std::string(kind_) + " check failed");
}

IndexStats Cceh::Stats() const {
  IndexStats st;
  st.keys = Size();
  LockAll();
  const CcehDirectory* d = Dir();
  st.bytes_allocated = alloc_.UsableSize(root_off_) + alloc_.UsableSize(pool_.offset_of(d));
  ForEachSegment(d, [&](uint64_t seg, unsigned depth, uint64_t pattern) {
    ++st.inner_nodes;
    st.bytes_allocated += alloc_.UsableSize(seg);
    const CcehBucket* s = Seg(seg);
    for (unsigned b = 0; b < nb_; ++b)
      for (const auto& slot : s[b].slot)
        if (IsValid(slot.key, depth, pattern))
          if (const uint64_t kb = codec_.BlockOf(slot.key)) {
            ++st.leaves;
            st.bytes_allocated += alloc_.UsableSize(kb);
          }
  });
  UnlockAll();
  st.avg_leaf_depth = 0;
  st.volatile_bytes = sizeof(PaddedLock) << kStripeBits;
  return st;
}

// ---- kind functions ------------------------------------------------------------------------

Status CreateCcehImpl(Pool& pool, const IndexOptions& opts, uint64_t* root_off, uint32_t type_id) {
  const uint64_t seg_bytes = opts.cceh_segment_bytes != 0 ? opts.cceh_segment_bytes : EnvU64("WORT_CCEH_SEGMENT_BYTES", 16384);
  if (seg_bytes < 256 || seg_bytes > Allocator::kMaxSmall || (seg_bytes & (seg_bytes - 1)) != 0)
    return Status::InvalidArgument("the CCEH segment size (IndexOptions::cceh_segment_bytes or WORT_CCEH_SEGMENT_BYTES) must be a power of two in [256, 262144]");
  const unsigned bbits = Log2(seg_bytes / sizeof(CcehBucket));
  // The directory variant (cceh.h "Variants"): IndexOptions::cceh_variant, else
  // WORT_CCEH_VARIANT, kept in the root.
  CcehVariant cv = opts.cceh_variant;
  if (cv == CcehVariant::kDefault) {
    if (const char* v = std::getenv("WORT_CCEH_VARIANT"); v && *v) {
      if (!ParseCcehVariant(v, &cv))
        return Status::InvalidArgument("WORT_CCEH_VARIANT must be msb, lsb or exth, not '" + std::string(v) + "'");
    } else {
      cv = CcehVariant::kMsb;
    }
  }
  uint64_t variant = kMsb;
  switch (cv) {
    case CcehVariant::kLsb: variant = kLsb; break;
    case CcehVariant::kExth: variant = kExth; break;
    case CcehVariant::kMsb: case CcehVariant::kDefault: variant = kMsb; break;
    default: return Status::InvalidArgument("IndexOptions::cceh_variant: not a CcehVariant");
  }
  if (variant != kMsb && type_id == kind_id::kCcehCow)
    return Status::InvalidArgument("cceh-cow has the msb directory only (the lsb and exth variants are cceh's)");
  const uint64_t per_seg = (seg_bytes / sizeof(CcehBucket)) * kSlotsPerBucket;
  uint64_t segs = (InitialCapacity(opts) + per_seg - 1) / per_seg;
  unsigned g = 0;
  while ((1ull << g) < segs) ++g;
  if (g > 20) return Status::InvalidArgument("WORT_HASH_CAPACITY too large for a CCEH directory");
  if (pool.max_size() > kMaxKeyBlockOffset) return Status::NotSupported("hash tables address pools up to 32 TiB");
  uint64_t root = 0;
  WORT_RETURN_IF_ERROR(CreateRoot(pool, type_id, opts, bbits, variant, 0, &root));
  Allocator& a = pool.allocator();
  std::vector<uint64_t> got;
  auto fail = [&](Status s) {
    for (uint64_t off : got) a.Free(off);
    a.Free(root);
    return s;
  };
  uint64_t dir = 0;
  Status s = a.Alloc(CcehDirectory::Bytes(g), &dir);
  if (!s.ok()) return fail(s);
  got.push_back(dir);
  auto* d = pool.at<CcehDirectory>(dir);
  d->magic = CcehDirectory::kMagic;
  d->depth = g;
  std::fill(std::begin(d->pad), std::end(d->pad), 0);
  for (uint64_t i = 0; i < (1ull << g); ++i) {
    uint64_t seg = 0;
    s = a.AllocZeroed(seg_bytes, &seg);
    if (!s.ok()) return fail(s);
    got.push_back(seg);
    pm::flush(pool.at<void>(seg), seg_bytes);  // needed when a segment's block is reused space (AllocZeroed zeroes the cache only): the plan's first step creates the index over non-zero free space (--dirty-free-space), which catches its removal
    d->entries()[i] = MakeEntry(seg, g);
  }
  pm::persist(d, CcehDirectory::Bytes(g));
  auto* r = pool.at<HashRoot>(root);
  pm::store8(&r->table, dir);
  pm::persist(&r->table, 8);
  *root_off = root;
  return Status::OK();
}

Status OpenCcehImpl(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out, uint32_t type_id, bool cow) {
  HashRoot* r = nullptr;
  WORT_RETURN_IF_ERROR(OpenRoot(pool, root_off, type_id, cow ? "cceh-cow" : "cceh", &r));
  if (r->param[0] < 2 || r->param[0] > 12) return Status::Corruption("cceh root block has a bad segment size");
  if (r->param[1] > kExth || (cow && r->param[1] != kMsb))
    return Status::Corruption("cceh root block has a bad directory variant");
  const uint64_t dir = r->table;
  if (dir == 0 || !pool.contains(dir, sizeof(CcehDirectory)))
    return Status::Corruption("cceh directory outside the pool");
  const auto* d = pool.at<CcehDirectory>(dir);
  if (d->magic != CcehDirectory::kMagic || d->depth > 40 || !pool.contains(dir, CcehDirectory::Bytes(d->depth)))
    return Status::Corruption("cceh directory block is malformed");
  std::shared_ptr<void> token;  // one handle per index (registry.h)
  WORT_RETURN_IF_ERROR(ClaimSoleHandle(&pool, root_off, cow ? "cceh-cow" : "cceh", &token));
  auto idx = std::make_unique<Cceh>(pool, root_off, r, cow);
  idx->KeepSoleHandle(std::move(token));
  if (!pool.read_only()) WORT_RETURN_IF_ERROR(idx->RecoverDirectory());
  *out = std::move(idx);
  return Status::OK();
}

// See "Visit" in cceh.h.
void VisitCceh(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark) {
  if (root_off == 0 || !pool.contains(root_off, sizeof(HashRoot))) return;
  // Inside an epoch, as lock-free readers: a directory or (CCEH(C)) segment retired by a split
  // while the walk reads it is not freed (and reused) before the walk is done.
  sync::EpochGuard eg(const_cast<Pool&>(pool).allocator().epoch());
  mark(root_off);
  const auto* r = pool.at<const HashRoot>(root_off);
  if (r->magic != HashRoot::kMagic || r->param[0] < 2 || r->param[0] > 12 || r->param[1] > kExth) return;
  const bool lsb = r->param[1] != kMsb;
  const KeyType kt = static_cast<KeyType>(r->key_type);
  const KeyCodec codec(&pool, kt, r->seed);
  const bool vab = (r->flags & HashRoot::kValuesAreBlocks) != 0;
  const uint64_t seg_bytes = (1ull << r->param[0]) * sizeof(CcehBucket);
  const unsigned nb = 1u << r->param[0];
  std::unordered_set<uint64_t> done;
  for (;;) {
    const uint64_t dir = pm::load8(&r->table);
    if (dir == 0 || !pool.contains(dir, sizeof(CcehDirectory))) break;
    const auto* d = pool.at<const CcehDirectory>(dir);
    const uint64_t g = d->depth;
    if (g > 40 || !pool.contains(dir, CcehDirectory::Bytes(static_cast<unsigned>(g)))) break;
    mark(dir);
    std::unordered_map<uint64_t, std::pair<unsigned, uint64_t>> fresh;  // segment -> (depth, pattern)
    const uint64_t n = 1ull << g;
    for (uint64_t k = 0; k < n; ++k) {
      const uint64_t e = pm::load8(&d->entries()[k]);
      const uint64_t seg = EntrySegment(e);
      const unsigned L = EntryDepth(e);
      if (L > g || seg == 0 || !pool.contains(seg, seg_bytes) || done.count(seg)) continue;
      auto it = fresh.find(seg);
      if (it == fresh.end() || L < it->second.first) fresh[seg] = {L, PatternOf(lsb, k, L, static_cast<unsigned>(g))};
    }
    if (fresh.empty()) break;
    for (const auto& [seg, dp] : fresh) {
      mark(seg);
      const auto* s = pool.at<const CcehBucket>(seg);
      for (unsigned b = 0; b < nb; ++b) {
        for (const auto& slot : s[b].slot) {
          const uint64_t w = pm::load8(&slot.key);
          if (w == 0 || Prefix(codec.HashHi(w), dp.first) != dp.second) continue;
          const uint64_t kb = codec.BlockOf(w);
          if (kb != 0 && pool.contains(kb, sizeof(KeyBlock))) mark(kb);
          if (vab) {
            const uint64_t v = pm::load8(&slot.value);
            if (v != 0 && pool.contains(v, 1)) mark(v);
          }
        }
      }
      done.insert(seg);
    }
  }
  if (vab && kt == KeyType::kU64 && pm::load8(&r->zero_present)) {
    const uint64_t v = pm::load8(&r->zero_value);
    if (v != 0 && pool.contains(v, 1)) mark(v);
  }
}

Status CreateCceh(Pool& pool, const IndexOptions& o, uint64_t* root) { return CreateCcehImpl(pool, o, root, kind_id::kCceh); }
Status CreateCcehCow(Pool& pool, const IndexOptions& o, uint64_t* root) {
  return CreateCcehImpl(pool, o, root, kind_id::kCcehCow);
}
Status OpenCceh(Pool& pool, uint64_t root, std::unique_ptr<Index>* out) {
  return OpenCcehImpl(pool, root, out, kind_id::kCceh, false);
}
Status OpenCcehCow(Pool& pool, uint64_t root, std::unique_ptr<Index>* out) {
  return OpenCcehImpl(pool, root, out, kind_id::kCcehCow, true);
}

const IndexKind kCcehKind = {
    "cceh", kind_id::kCceh,
    "CCEH: cacheline-conscious extendible hashing with lazy deletion (thesis 4.4)",
    /*ordered=*/false, &CreateCceh, &OpenCceh, &VisitCceh,
};
const IndexKind kCcehCowKind = {
    "cceh-cow", kind_id::kCcehCow,
    "CCEH(C): CCEH with copy-on-write segment splits and lock-free search (thesis 4.4.6)",
    /*ordered=*/false, &CreateCcehCow, &OpenCcehCow, &VisitCceh,
};

}  // namespace
}  // namespace wort::hash

// Listed in the table of built-in kinds (BuiltinIndexKinds, src/index/registry.cc).
const wort::IndexKind* wort::builtin_kinds::Cceh() { return &wort::hash::kCcehKind; }
const wort::IndexKind* wort::builtin_kinds::CcehCow() { return &wort::hash::kCcehCowKind; }
