// The persistent item store of `wort serve` (design, record layout and write order: store.h).
#include "server/store.h"

#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "index/kind_ids.h"
#include "index/registry.h"
#include "server/protocol.h"
#include "wort/alloc.h"
#include "wort/pm.h"
#include "sync/epoch.h"

namespace wort::server {

namespace {
std::atomic<int64_t> g_clock_offset{0};

bool IsMetaKey(std::string_view k) { return k == kMetaKey; }

ItemView View(std::string_view key, const Record* r) {
  ItemView v{key, r->flags, r->cas, {r->data(), r->length}};
  v.exptime = RecordExptime(r);
  const uint64_t t = RecordTimeWord(r);
  v.time = static_cast<int64_t>(t & kRecordTimeMask);
  v.stale = (t & kStateStale) != 0;
  v.token_sent = (t & kStateTokenSent) != 0;
  return v;
}

// xorshift64 state of this thread (eviction sampling).
uint64_t* ThreadRng() {
  thread_local uint64_t s = (std::hash<std::thread::id>{}(std::this_thread::get_id()) | 1) * 0x9e3779b97f4a7c15ull;
  return &s;
}
uint64_t NextRandom(uint64_t* s) {
  uint64_t x = *s;
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  return *s = x;
}

// A word of a VersionLockTable used as a plain lock (no optimistic readers use these words).
bool TryLock(sync::VersionLock& l) {
  const uint64_t v = l.Load();
  return !sync::VersionLock::IsLocked(v) && l.UpgradeToWriteLock(v);
}
}  // namespace

// The lock of a key's writers (store.h, Thread safety): held for the whole command, so that a
// read-modify-write and the Lookup -> Upsert/Remove -> Retire(old) sequence are atomic per key.
// Waits by backing off (spin, then yield: the holder may be descheduled on a loaded machine).
class KeyGuard {
 public:
  KeyGuard(const Store& st, std::string_view key) : st_(st), lock_(st.KeyLock(key)) {
    if (st_.global_lock_) st_.global_mu_.lock();
    for (int a = 0; !TryLock(lock_); a = std::min(a + 1, 16)) sync::Backoff(a);
  }
  ~KeyGuard() {
    lock_.WriteUnlock();
    if (st_.global_lock_) st_.global_mu_.unlock();
  }
  KeyGuard(const KeyGuard&) = delete;
  KeyGuard& operator=(const KeyGuard&) = delete;
  const sync::VersionLock* held() const { return &lock_; }

 private:
  const Store& st_;
  sync::VersionLock& lock_;
};

// A reader's section: inside the pool's epoch, so no record it finds is freed before it ends.
// With WORT_GLOBAL_LOCK the shared store lock is taken BEFORE entering the epoch: a writer that
// holds the lock exclusively may wait for a grace period (eviction), which a reader blocked on
// the lock inside an epoch would never end.
class ReadGuard {
 public:
  explicit ReadGuard(const Store& st) : lock_(st.global_mu_, std::defer_lock) {
    if (st.global_lock_) lock_.lock();
    epoch_.emplace(st.pool_->allocator().epoch());
  }
  ReadGuard(const ReadGuard&) = delete;
  ReadGuard& operator=(const ReadGuard&) = delete;

 private:
  std::shared_lock<std::shared_mutex> lock_;
  std::optional<sync::EpochGuard> epoch_;  // left before the lock is released
};

sync::VersionLock& Store::KeyLock(std::string_view key) const {
  // VersionLockTable mixes (word >> 6): shift the hash so that all of its low bits count.
  return key_locks_.For(static_cast<uint64_t>(std::hash<std::string_view>{}(key)) << 6);
}

// ---- recency (eviction) ----------------------------------------------------------------------

Recency::Recency(uint64_t heap_offset, uint64_t max_size)
    : heap_off_(heap_offset), shards_(std::make_unique<Shard[]>(kShards)) {
  const uint64_t granules = (max_size > heap_offset ? max_size - heap_offset : 0) / 64 + 1;
  // calloc: zero pages are mapped lazily; only granules that hold records are ever touched.
  auto* p = static_cast<std::atomic<uint32_t>*>(std::calloc(granules, sizeof(std::atomic<uint32_t>)));
  if (!p) throw std::bad_alloc();
  stamps_.reset(p);
}

void Recency::Add(std::string_view key, uint64_t off, uint64_t tick) {
  Shard& sh = ShardOf(off);
  {
    std::lock_guard<std::mutex> g(sh.mu);
    if (sh.by_off.count(off)) return;
    const uint32_t slot = static_cast<uint32_t>(sh.entries.size());
    sh.entries.push_back(Entry{std::string(key), off, 0});
    auto& cv = sh.by_chunk[ChunkOf(off)];
    sh.entries.back().chunk_pos = static_cast<uint32_t>(cv.size());
    cv.push_back(slot);
    sh.by_off.emplace(off, slot);
    uint32_t w = static_cast<uint32_t>(tick << 1);
    if (w == 0) w = 2;  // 0 means untracked
    stamps_[(off - heap_off_) >> 6].store(w, std::memory_order_relaxed);
  }
  size_.fetch_add(1, std::memory_order_relaxed);
}

void Recency::Forget(uint64_t off) {
  Shard& sh = ShardOf(off);
  {
    std::lock_guard<std::mutex> g(sh.mu);
    auto it = sh.by_off.find(off);
    if (it == sh.by_off.end()) return;
    RemoveSlot(sh, it->second);
    stamps_[(off - heap_off_) >> 6].store(0, std::memory_order_relaxed);
  }
  size_.fetch_sub(1, std::memory_order_relaxed);
}

void Recency::RemoveSlot(Shard& sh, uint32_t slot) {
  Entry& e = sh.entries[slot];
  // Out of its chunk's list (swap with the list's last element).
  auto ci = sh.by_chunk.find(ChunkOf(e.off));
  auto& cv = ci->second;
  const uint32_t moved = cv.back();
  cv[e.chunk_pos] = moved;
  sh.entries[moved].chunk_pos = e.chunk_pos;
  cv.pop_back();
  if (cv.empty()) sh.by_chunk.erase(ci);
  sh.by_off.erase(e.off);
  // Out of the vector (the last entry takes its slot).
  const uint32_t last = static_cast<uint32_t>(sh.entries.size() - 1);
  if (slot != last) {
    sh.entries[slot] = std::move(sh.entries[last]);
    sh.by_off[sh.entries[slot].off] = slot;
    sh.by_chunk[ChunkOf(sh.entries[slot].off)][sh.entries[slot].chunk_pos] = slot;
  }
  sh.entries.pop_back();
}

bool Recency::Sample(uint64_t* rng, Entry* out) const {
  if (size() == 0) return false;
  const unsigned start = static_cast<unsigned>(NextRandom(rng) % kShards);
  for (unsigned i = 0; i < kShards; ++i) {
    const Shard& sh = shards_[(start + i) % kShards];
    std::lock_guard<std::mutex> g(sh.mu);
    if (sh.entries.empty()) continue;
    *out = sh.entries[NextRandom(rng) % sh.entries.size()];
    return true;
  }
  return false;
}

bool Recency::Tracked(uint64_t off) const {
  const Shard& sh = ShardOf(off);
  std::lock_guard<std::mutex> g(sh.mu);
  return sh.by_off.count(off) != 0;
}

std::vector<Recency::Entry> Recency::InChunk(uint64_t c) const {
  std::vector<Entry> out;
  for (unsigned i = 0; i < kShards; ++i) {
    const Shard& sh = shards_[i];
    std::lock_guard<std::mutex> g(sh.mu);
    auto it = sh.by_chunk.find(c);
    if (it != sh.by_chunk.end())
      for (uint32_t slot : it->second) out.push_back(sh.entries[slot]);
  }
  return out;
}

std::vector<Recency::Entry> Recency::All() const {
  std::vector<Entry> out;
  for (unsigned i = 0; i < kShards; ++i) {
    std::lock_guard<std::mutex> g(shards_[i].mu);
    out.insert(out.end(), shards_[i].entries.begin(), shards_[i].entries.end());
  }
  return out;
}

bool Recency::Check(std::string* report) const {
  bool ok = true;
  size_t total = 0;
  for (unsigned si = 0; si < kShards; ++si) {
    const Shard& sh = shards_[si];
    std::lock_guard<std::mutex> g(sh.mu);
    total += sh.entries.size();
    if (sh.by_off.size() != sh.entries.size()) ok = false;
    size_t in_chunks = 0;
    for (const auto& [c, cv] : sh.by_chunk) {
      in_chunks += cv.size();
      for (uint32_t i = 0; i < cv.size(); ++i)
        if (cv[i] >= sh.entries.size() || sh.entries[cv[i]].chunk_pos != i || ChunkOf(sh.entries[cv[i]].off) != c)
          ok = false;
    }
    if (in_chunks != sh.entries.size()) ok = false;
    for (uint32_t i = 0; i < sh.entries.size(); ++i) {
      auto it = sh.by_off.find(sh.entries[i].off);
      if (it == sh.by_off.end() || it->second != i) ok = false;
      if (&ShardOf(sh.entries[i].off) != &sh) ok = false;
      if (stamps_[(sh.entries[i].off - heap_off_) >> 6].load(std::memory_order_relaxed) == 0) ok = false;
    }
  }
  if (total != size()) ok = false;
  if (!ok && report) *report += "recency: maps disagree with the entry vectors\n";
  return ok;
}

int64_t Store::Now() {
  const auto t = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::seconds>(t).count() + g_clock_offset.load(std::memory_order_relaxed);
}
void Store::SetClockOffsetForTest(int64_t s) { g_clock_offset.store(s); }

std::string DefaultIndexKind() {
  for (const char* k : {"woart", "wort", "artcow"})
    if (FindIndexKind(k)) return k;
  for (const IndexKind* k : IndexKinds())
    if (k->create && k->open) return k->name;
  return "";
}

Status CheckServableKind(std::string_view kind) {
  const IndexKind* k = FindIndexKind(kind);
  if (!k) {
    std::string known;
    for (const IndexKind* i : IndexKinds())
      if (!kind_id::IsVolatile(i->type_id) && i->type_id < kind_id::kTestFirst) known += (known.empty() ? "" : ", ") + std::string(i->name);
    return Status::InvalidArgument(fmt::format("unknown index kind '{}' (known: {})", kind, known));
  }
  if (kind_id::IsVolatile(k->type_id))
    return Status::InvalidArgument(fmt::format(
        "index kind '{}' is a volatile reference: it keeps nothing in the pool, so a server could not keep its items",
        kind));
  return Status::OK();
}

Status Store::Open(const StoreOptions& opts, std::unique_ptr<Store>* out) { return OpenImpl(opts, nullptr, out); }

Status Store::OpenOnPool(const StoreOptions& opts, std::unique_ptr<Pool> pool, std::unique_ptr<Store>* out) {
  if (!pool) return Status::InvalidArgument("OpenOnPool: no pool");
  return OpenImpl(opts, std::move(pool), out);
}

Status Store::ScanIndexForTest(const std::function<void(std::string_view key, uint64_t off)>& fn) const {
  if (!ordered_) return Status::NotSupported("the index is not ordered");
  return index_->Scan({}, nullptr, ~size_t{0}, [&](std::string_view key, uint64_t off) {
    fn(key, off);
    return true;
  });
}

Status Store::OpenImpl(const StoreOptions& opts, std::unique_ptr<Pool> pool, std::unique_ptr<Store>* out) {
  const auto t0 = std::chrono::steady_clock::now();
  // Before the pool file is created: a bad kind must leave nothing behind.
  if (!opts.index_kind.empty()) WORT_RETURN_IF_ERROR(CheckServableKind(opts.index_kind));
  std::unique_ptr<Store> st(new Store());
  st->opts_ = opts;
  st->global_lock_ = GlobalIndexLock();
  PoolOptions po;
  po.max_size = opts.pool_size;
  po.initial_size = std::min<uint64_t>(opts.pool_size, 64ull << 20);
  po.background_recovery = true;  // instant restart: serve while the post-crash GC runs
  po.sync = opts.sync;
  if (pool) {
    st->pool_ = std::move(pool);
  } else {
    WORT_RETURN_IF_ERROR(Pool::OpenOrCreate(opts.pool_path, po, &st->pool_));
  }

  IndexOptions io;
  io.key_type = KeyType::kBytes;
  io.values_are_blocks = true;
  st->created_ = !st->pool_->FindRoot(opts.root_name, nullptr).ok();
  if (!st->created_) {
    WORT_RETURN_IF_ERROR(OpenIndex(*st->pool_, opts.root_name, &st->index_));
    if (!opts.index_kind.empty() && st->index_->kind() != opts.index_kind)
      return Status::InvalidArgument(fmt::format("pool {} holds a {} index under root '{}', not {}", opts.pool_path,
                                                 st->index_->kind(), opts.root_name, opts.index_kind));
  } else {
    const std::string kind = opts.index_kind.empty() ? DefaultIndexKind() : opts.index_kind;
    if (kind.empty()) return Status::NotSupported("this build has no index kind");
    WORT_RETURN_IF_ERROR(CreateIndex(*st->pool_, opts.root_name, kind, io, &st->index_));
  }
  if (st->index_->key_type() != KeyType::kBytes)
    return Status::InvalidArgument("root '" + opts.root_name + "' holds an index of 8-byte integer keys");
  const IndexKind* k = FindIndexKind(st->index_->kind());
  st->ordered_ = k && k->ordered;

  // The metadata block: found under kMetaKey, or created (block persisted, then the Insert is
  // the commit point; a crash before it leaves an unreachable block that recovery reclaims).
  uint64_t meta_off = 0;
  if (st->index_->Lookup(kMetaKey, &meta_off).ok()) {
    st->meta_ = st->pool_->at<Meta>(meta_off);
    if (!st->pool_->contains(meta_off, sizeof(Meta)) || st->meta_->magic != kMetaMagic)
      return Status::Corruption("server metadata block has a bad magic number");
  } else {
    WORT_RETURN_IF_ERROR(st->pool_->allocator().AllocZeroed(sizeof(Meta), &meta_off));
    Meta* m = st->pool_->at<Meta>(meta_off);
    m->magic = kMetaMagic;
    pm::persist(m, sizeof(Meta));
    Status s = st->index_->Insert(kMetaKey, meta_off);  // COMMIT POINT
    if (!s.ok()) {
      st->pool_->allocator().Free(meta_off);
      return s;
    }
    st->meta_ = m;
  }
  // cas = generation << 40 | n: unique and increasing across restarts without a persistent
  // counter (the generation is persisted by every open for writing).
  st->cas_next_.store((st->pool_->generation() << 40) + 1);
  if (opts.evict == EvictPolicy::kLru) {
    // After a restart recency is unknown: every surviving item gets tick 0 (equally old).
    st->recency_ = std::make_unique<Recency>(st->pool_->heap_offset(), std::max(st->pool_->max_size(), st->pool_->size()));
    // Ordered kinds: the background count tracks the surviving items (CountLoop). Hash kinds
    // cannot be walked in order: an existing store adopts its survivors when they are read.
    if (!st->ordered_) st->adopt_on_read_ = !st->created_;
  }
  st->open_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The item count runs after Open returns (store.h, Item count): a new store has none to count.
  if (st->created_) {
    st->counting_.store(false, std::memory_order_release);
  } else {
    st->counter_ = std::thread([s = st.get()] { s->CountLoop(); });
  }
  if (st->ordered_ && opts.crawler) st->crawler_ = std::thread([s = st.get()] { s->CrawlerLoop(); });
  *out = std::move(st);
  return Status::OK();
}

Store::~Store() {
  if (pool_) {
    Status s = Close();
    if (!s.ok()) fmt::print(stderr, "wort serve: close: {}\n", s.ToString());
  }
}

Status Store::Close() {
  {
    std::lock_guard<std::mutex> g(crawler_mu_);
    stop_ = true;
  }
  crawler_cv_.notify_all();
  if (crawler_.joinable()) crawler_.join();
  count_stop_.store(true);
  if (counter_.joinable()) counter_.join();
  index_.reset();
  meta_ = nullptr;
  if (!pool_) return Status::OK();
  Status s = pool_->Close();
  pool_.reset();
  return s;
}

bool Store::Live(const Record* r, int64_t now) const {
  const int64_t exptime = RecordExptime(r);
  if (exptime != 0 && exptime <= now) return false;
  const FlushState f = Flushes();
  if (r->cas < f.cas) return false;
  if (f.time != 0 && now >= f.time && RecordTime(r) < f.time) return false;
  return true;
}

Store::FlushState Store::Flushes() const {
  for (;;) {
    const uint64_t sel = pm::load8(&meta_->flush_sel);
    const uint64_t* w = sel == 0 ? &meta_->flush_cas : meta_->slot[sel & 1];
    FlushState f{pm::load8(w), static_cast<int64_t>(pm::load8(w + 1))};
    if (pm::load8(&meta_->flush_sel) == sel) return f;  // else a writer reused the slot: again
  }
}

uint64_t Store::curr_items() const {
  const int64_t n = items_.Sum();
  return n > 0 ? static_cast<uint64_t>(n) : 0;
}

uint64_t Store::IndexItemsForTest() const {
  const uint64_t n = index_->Size();
  return n ? n - 1 : 0;  // the metadata entry
}

namespace {
std::atomic<bool> g_count_paused{false};
}
void Store::PauseCountForTest(bool paused) { g_count_paused.store(paused); }

void Store::WaitForCount() const {
  while (counting_.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

// Takes every key lock in table order. No deadlock: a writer holds at most one key lock while it
// waits (store.h, Thread safety), and this thread holds no other lock of the store.
void Store::LockAllKeys() const {
  for (size_t i = 0; i < key_locks_.size(); ++i)
    for (int a = 0; !TryLock(key_locks_.At(i)); a = std::min(a + 1, 16)) sync::Backoff(a);
}
void Store::UnlockAllKeys() const {
  for (size_t i = 0; i < key_locks_.size(); ++i) key_locks_.At(i).WriteUnlock();
}

// The background item count (store.h, Item count).
void Store::CountLoop() {
  // Below the serving threads: on a busy machine the count must not delay requests (nice 19:
  // it still progresses; SCHED_IDLE could starve it). Per thread on Linux (setpriority on a tid).
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);
  auto stopping = [this] {
    while (g_count_paused.load() && !count_stop_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return count_stop_.load();
  };
  if (!ordered_) {
    if (stopping()) return;
    LockAllKeys();
    const uint64_t n = index_->Size();  // the index's own count (its walk, or a kept count)
    count_walked_.store(n, std::memory_order_relaxed);
    items_.Add(static_cast<int64_t>(n ? n - 1 : 0));  // less the metadata entry
    counting_.store(false, std::memory_order_release);
    UnlockAllKeys();
    return;
  }
  std::string cur;
  for (;;) {
    if (stopping()) return;
    LockAllKeys();
    size_t seen = 0;
    int64_t items = 0;
    std::string last;
    Status s;
    {
      // No ReadGuard: with WORT_GLOBAL_LOCK a writer takes the store lock before its key lock,
      // so this thread (holding every key lock) must not wait for the store lock. The epoch
      // keeps the records it reads (none: it reads offsets only) and the index nodes alive.
      sync::EpochGuard eg(pool_->allocator().epoch());
      s = index_->Scan(cur, nullptr, kCountBatch, [&](std::string_view key, uint64_t value) {
        ++seen;
        last.assign(key);
        if (!IsMetaKey(key)) {
          ++items;
          if (recency_) recency_->Add(key, value, 1);  // a survivor: equally old (tick 1)
        }
        return true;
      });
    }
    items_.Add(static_cast<int64_t>(items));
    count_walked_.fetch_add(seen, std::memory_order_relaxed);
    const bool done = !s.ok() || seen < kCountBatch;
    if (!s.ok()) fmt::print(stderr, "wort serve: item count: {}\n", s.ToString());
    if (done) {
      counting_.store(false, std::memory_order_release);
    } else {
      count_cursor_ = last;  // every key <= last is counted by the walk; writers count the rest
      cur = last + '\0';     // the smallest key after `last`
    }
    UnlockAllKeys();
    if (done) return;
  }
}

uint64_t Store::bytes_allocated() const { return pool_->allocator().Stats().bytes_allocated; }

// ---- reads ---------------------------------------------------------------------------------

bool Store::Get(std::string_view key, const ItemFn& fn, bool* expired) {
  uint64_t off = 0;
  {
    ReadGuard rg(*this);
    if (!index_->Lookup(key, &off).ok()) {
      if (expired) *expired = false;
      return false;
    }
    const Record* r = pool_->at<Record>(off);
    if (Live(r, Now())) {
      if (recency_) Used(key, off, true);
      fn(View(key, r));
      return true;
    }
  }
  if (expired) *expired = true;
  // A dead item: remove it now (if nobody replaced it meanwhile).
  KeyGuard kg(*this, key);
  uint64_t now_off = 0;
  if (index_->Lookup(key, &now_off).ok() && now_off == off && !Live(pool_->at<Record>(off), Now())) {
    RemoveLocked(key, off);
    counters_.reclaimed.fetch_add(1, std::memory_order_relaxed);
  }
  return false;
}

Status Store::Range(std::string_view start, std::string_view end, uint64_t limit,
                    const std::function<bool(const ItemView&)>& fn, std::string* next_start, uint64_t* emitted) {
  if (next_start) next_start->clear();
  uint64_t got = 0;
  if (emitted) *emitted = 0;
  if (!ordered_) return Status::NotSupported(fmt::format("index kind {} is not ordered", index_->kind()));
  if (CompareKeys(start, end) > 0) return Status::OK();
  std::string cur(start);
  const int64_t now = Now();
  while (got < limit) {
    const size_t batch = static_cast<size_t>(std::min<uint64_t>(limit - got + 16, 4096));
    size_t seen = 0;
    bool stopped = false;
    std::string last;
    ReadGuard rg(*this);  // per batch: a long range does not hold back reclamation for long
    Status s = index_->Scan(cur, &end, batch, [&](std::string_view key, uint64_t value) {
      ++seen;
      last.assign(key);
      if (IsMetaKey(key)) return true;
      const Record* r = pool_->at<Record>(value);
      if (!Live(r, now)) return true;
      ++got;
      const bool more = fn(View(key, r));
      if (!more) {
        stopped = true;
        return false;
      }
      return got < limit;
    });
    if (!s.ok()) return s;
    if (stopped && got < limit) {
      if (next_start) *next_start = last + '\0';
      break;
    }
    if (seen < batch || got >= limit) break;
    cur = last + '\0';  // the smallest key after `last`
  }
  if (emitted) *emitted = got;
  return Status::OK();
}

// ---- writes --------------------------------------------------------------------------------

// Steps 1-4 of store.h: new record (a then b as data) -> persist -> Upsert (commit) -> retire
// old. REQUIRES the key's lock (KeyGuard).
Result Store::WriteRecord(std::string_view key, uint32_t flags, int64_t exptime, std::string_view a,
                          std::string_view b, bool have_old, uint64_t old_off, uint64_t* cas_out, uint64_t state) {
  const size_t len = a.size() + b.size();
  uint64_t off = 0;
  // Learn the old record from the Upsert itself (a set that did not look the key up).
  const bool learn_old = old_off == kOldUnknown;
  if (learn_old) have_old = false, old_off = 0;
  const uint64_t keep = have_old ? old_off : 0;  // its data may be `a` or `b`: never evicted
  const sync::VersionLock* held = &KeyLock(key);
  bool trimmed = false, reclaimed = false;
  Status s;
  // Out of space: first wait for the post-crash GC once (it frees what the crash left
  // unreachable; no index lock is held here, so waiting is safe) and reclaim the records this
  // thread retired (a grace period), then evict if need be.
  auto free_up = [this, &reclaimed] {
    if (!pool_->recovery_done()) {
      (void)pool_->WaitForRecovery();
      return true;
    }
    if (reclaimed) return false;
    reclaimed = true;
    return pool_->allocator().ReclaimRetired();
  };
  for (int attempt = 0;; ++attempt) {
    s = pool_->allocator().Alloc(sizeof(Record) + len, &off);
    if (s.IsPoolFull() && free_up()) continue;
    if (s.ok() || !s.IsPoolFull() || !recency_ || !EvictSome(sizeof(Record) + len, keep, attempt, held, &trimmed))
      break;
  }
  if (!s.ok()) {
    if (recency_ && s.IsPoolFull()) counters_.evict_failures.fetch_add(1, std::memory_order_relaxed);
    return s.IsPoolFull() ? Result::kNoMemory : Result::kError;
  }
  Record* r = pool_->at<Record>(off);
  r->cas = NextCas();
  r->exptime = exptime;
  r->time = static_cast<int64_t>((static_cast<uint64_t>(Now()) & kRecordTimeMask) | state);
  r->flags = flags;
  r->length = static_cast<uint32_t>(len);
  if (!a.empty()) std::memcpy(r->data(), a.data(), a.size());
  if (!b.empty()) std::memcpy(r->data() + a.size(), b.data(), b.size());
  pm::persist(r, sizeof(Record) + len);  // the record is durable before anything refers to it
  reclaimed = false;
  const uint64_t cas = r->cas;
  for (int attempt = 0;; ++attempt) {
    {
      // The writer rule (wort/alloc.h, Retire): inside an epoch from before the unlink until
      // after the Retire, so that a post-crash GC sweep cannot free the old record in between.
      sync::EpochGuard eg(pool_->allocator().epoch());
      bool inserted = false;
      uint64_t prev = 0;
      s = learn_old ? index_->Exchange(key, off, &inserted, &prev)  // COMMIT POINT (as Upsert's), and the old record
                    : index_->Upsert(key, off, &inserted);  // COMMIT POINT (the index's 8-byte publish, persisted)
      if (s.ok()) {
        if (learn_old) {
          have_old = !inserted && prev != 0;
          old_off = prev;
        }
        if (inserted) Counted(key, +1);
        if (recency_) {
          if (have_old) recency_->Forget(old_off);
          recency_->Add(key, off, recency_->NextTick());
        }
        if (have_old) pool_->allocator().RetireAndCollect(old_off);  // unreachable since the commit; readers may hold it
      }
    }
    if (s.IsPoolFull() && free_up()) continue;
    if (s.ok() || !s.IsPoolFull() || !recency_ || !EvictSome(0, keep, attempt, held, &trimmed)) break;
  }
  if (!s.ok()) {
    if (recency_ && s.IsPoolFull()) counters_.evict_failures.fetch_add(1, std::memory_order_relaxed);
    pool_->allocator().Free(off);  // never published: no reference to it exists
    if (!s.IsPoolFull()) fmt::print(stderr, "wort serve: upsert: {}\n", s.ToString());
    return s.IsPoolFull() ? Result::kNoMemory : Result::kError;
  }
  counters_.total_items.Add(1);
  if (cas_out) *cas_out = cas;
  return Result::kStored;
}

void Store::RemoveLocked(std::string_view key, uint64_t off) {
  sync::EpochGuard eg(pool_->allocator().epoch());  // from the unlink to the Retire (alloc.h)
  Status s = index_->Remove(key);  // COMMIT POINT (inside the index)
  if (s.ok()) {
    Counted(key, -1);
    if (recency_) recency_->Forget(off);
    pool_->allocator().RetireAndCollect(off);
  } else if (!s.IsNotFound()) {
    fmt::print(stderr, "wort serve: remove: {}\n", s.ToString());
  }
}

Result Store::StoreItem(StoreMode mode, std::string_view key, uint32_t flags, int64_t exptime,
                        std::string_view data, uint64_t cas_unique, uint64_t* cas_out) {
  KeyGuard kg(*this, key);
  // A set needs nothing of the old record: no lookup, the Upsert reports it (Exchange).
  if (mode == StoreMode::kSet) return WriteRecord(key, flags, exptime, data, {}, false, kOldUnknown, cas_out);
  uint64_t old = 0;
  const bool have = index_->Lookup(key, &old).ok();
  const Record* o = have ? pool_->at<Record>(old) : nullptr;
  const bool live = have && Live(o, Now());
  switch (mode) {
    case StoreMode::kSet:
      break;
    case StoreMode::kAdd:
      if (live) return Result::kNotStored;
      break;
    case StoreMode::kReplace:
      if (!live) return Result::kNotStored;
      break;
    case StoreMode::kAppend:
    case StoreMode::kPrepend: {
      if (!live) return Result::kNotStored;
      if (uint64_t(o->length) + data.size() > opts_.max_item_size) return Result::kTooLarge;
      const std::string_view old_data(o->data(), o->length);
      // append/prepend keep the item's flags and exptime (the request's are ignored).
      if (mode == StoreMode::kAppend) return WriteRecord(key, o->flags, o->exptime, old_data, data, true, old, cas_out);
      return WriteRecord(key, o->flags, o->exptime, data, old_data, true, old, cas_out);
    }
    case StoreMode::kCas:
      if (!live) return Result::kNotFound;
      if (o->cas != cas_unique) return Result::kExists;
      break;
  }
  return WriteRecord(key, flags, exptime, data, {}, have, old, cas_out);
}

Result Store::Delete(std::string_view key) {
  KeyGuard kg(*this, key);
  uint64_t off = 0;
  if (!index_->Lookup(key, &off).ok()) return Result::kNotFound;
  const bool live = Live(pool_->at<Record>(off), Now());
  RemoveLocked(key, off);
  return live ? Result::kDeleted : Result::kNotFound;
}

bool Store::Unlink(std::string_view key) {
  KeyGuard kg(*this, key);
  uint64_t off = 0;
  if (!index_->Lookup(key, &off).ok()) return false;
  RemoveLocked(key, off);
  return true;
}

Result Store::IncrDecr(std::string_view key, bool incr, uint64_t delta, uint64_t* value) {
  KeyGuard kg(*this, key);
  uint64_t off = 0;
  if (!index_->Lookup(key, &off).ok()) return Result::kNotFound;
  const Record* o = pool_->at<Record>(off);
  if (!Live(o, Now())) return Result::kNotFound;
  // memcached accepts a decimal number followed by spaces (its own decr pads with spaces).
  std::string_view text(o->data(), o->length);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  uint64_t v = 0;
  if (!ParseU64(text, &v)) return Result::kNonNumeric;
  if (incr) v += delta;  // wraps at 2^64, as memcached does
  else v = delta > v ? 0 : v - delta;
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  const Result r = WriteRecord(key, o->flags, o->exptime, std::string_view(buf, res.ptr - buf), {}, true, off, nullptr);
  if (r == Result::kStored) *value = v;
  return r;
}

Result Store::Touch(std::string_view key, int64_t exptime) {
  KeyGuard kg(*this, key);
  uint64_t off = 0;
  if (!index_->Lookup(key, &off).ok()) return Result::kNotFound;
  Record* r = pool_->at<Record>(off);
  if (!Live(r, Now())) return Result::kNotFound;
  // In place: one 8-byte store is the commit point, then persist.
  pm::store8(reinterpret_cast<uint64_t*>(&r->exptime), static_cast<uint64_t>(exptime));
  pm::persist(&r->exptime, sizeof(r->exptime));
  if (recency_) Used(key, off, false);
  return Result::kTouched;
}

bool Store::GetAndTouch(std::string_view key, int64_t exptime, const ItemFn& fn) {
  KeyGuard kg(*this, key);
  uint64_t off = 0;
  if (!index_->Lookup(key, &off).ok()) return false;
  Record* r = pool_->at<Record>(off);
  if (!Live(r, Now())) return false;
  pm::store8(reinterpret_cast<uint64_t*>(&r->exptime), static_cast<uint64_t>(exptime));  // COMMIT POINT
  pm::persist(&r->exptime, sizeof(r->exptime));
  // The new exptime may be in the past (gat -1): memcached still returns the item this once.
  if (recency_) Used(key, off, true);
  fn(View(key, r));
  return true;
}

void Store::FlushAll(int64_t when) {
  {
    std::lock_guard<std::mutex> g(flush_mu_);  // not a store lock: orders flush_all commands only
    FlushState next = Flushes();
    if (when <= Now()) {
      // Every item stored so far has a smaller cas than the next one: that cas is the bar; a
      // pending delayed flush_all is cancelled (as memcached's flush_all replaces it).
      next.cas = NextCas();
      next.time = 0;
    } else {
      next.time = when;
    }
    // The slot flush_sel does not select (Meta): filled and persisted, then selected.
    const uint64_t sel = pm::load8(&meta_->flush_sel) + 1;
    uint64_t* w = meta_->slot[sel & 1];
    pm::store8(w, next.cas);
    pm::store8(w + 1, static_cast<uint64_t>(next.time));
    pm::persist(w, 16);
    pm::store8(&meta_->flush_sel, sel);  // COMMIT POINT of flush_all
    pm::persist(&meta_->flush_sel, 8);
  }
  {
    std::lock_guard<std::mutex> g(crawler_mu_);
    crawl_now_ = true;
  }
  crawler_cv_.notify_all();
}

// ---- meta commands -------------------------------------------------------------------------

bool Store::MetaGet(std::string_view key, const MetaGetArgs& a, const ItemFn& fn) {
  bool retry = false;
  // A plain mg only reads: no lock, inside the epoch. It needs the key's lock only to touch,
  // vivify, or hand out a recache token (then it starts over).
  if (!a.touch && !a.vivify && !a.recache) {
    ReadGuard rg(*this);
    const bool hit = MetaGetLocked(key, a, fn, false, &retry);
    if (!retry) return hit;
  }
  KeyGuard kg(*this, key);
  return MetaGetLocked(key, a, fn, true, &retry);
}

bool Store::MetaGetLocked(std::string_view key, const MetaGetArgs& a, const ItemFn& fn, bool exclusive,
                          bool* retry) {
  const int64_t now = Now();
  uint64_t off = 0;
  const bool have = index_->Lookup(key, &off).ok();
  Record* r = have ? pool_->at<Record>(off) : nullptr;
  if (!have || !Live(r, now)) {
    if (!a.vivify) return false;
    // N: an empty stub item whose creator wins the recache (kStateTokenSent from the start).
    uint64_t cas = 0;
    if (WriteRecord(key, 0, a.vivify_exptime, {}, {}, have, off, &cas, kStateTokenSent) != Result::kStored)
      return false;
    ItemView v{key, 0, cas, {}};
    v.exptime = a.vivify_exptime;
    v.won = true;
    fn(v);
    return true;
  }
  const uint64_t state = RecordState(r);
  bool won = (state & kStateStale) && !(state & kStateTokenSent);
  const int64_t exptime = RecordExptime(r);
  if (a.recache && !(state & kStateTokenSent) && exptime != 0 && exptime < a.recache_before) won = true;
  if (!exclusive && won) {
    *retry = true;
    return false;
  }
  if (a.touch) {
    pm::store8(reinterpret_cast<uint64_t*>(&r->exptime), static_cast<uint64_t>(a.exptime));  // COMMIT POINT (T)
    pm::persist(&r->exptime, sizeof(r->exptime));
  }
  if (recency_) Used(key, off, true);
  ItemView v = View(key, r);
  if (won) {
    // COMMIT POINT of the win: one 8-byte store of `time` with kStateTokenSent set.
    pm::store8(reinterpret_cast<uint64_t*>(&r->time), RecordTimeWord(r) | kStateTokenSent);
    pm::persist(&r->time, sizeof(r->time));
    v.won = true;
  }
  fn(v);
  return true;
}

Result Store::MetaSet(StoreMode mode, std::string_view key, uint32_t flags, int64_t exptime, std::string_view data,
                      bool compare, uint64_t cas, bool invalidate, uint64_t* cas_out) {
  KeyGuard kg(*this, key);
  if (mode == StoreMode::kSet && !compare) return WriteRecord(key, flags, exptime, data, {}, false, kOldUnknown, cas_out);
  uint64_t old = 0;
  const bool have = index_->Lookup(key, &old).ok();
  const Record* o = have ? pool_->at<Record>(old) : nullptr;
  const bool live = have && Live(o, Now());
  uint64_t state = 0;
  switch (mode) {
    case StoreMode::kAdd:  // memcached's add ignores a compare cas
      if (live) return Result::kNotStored;
      break;
    case StoreMode::kAppend:
    case StoreMode::kPrepend: {
      if (!live) return Result::kNotStored;
      if (compare && o->cas != cas) return Result::kExists;
      if (uint64_t(o->length) + data.size() > opts_.max_item_size) return Result::kTooLarge;
      const std::string_view old_data(o->data(), o->length);
      if (mode == StoreMode::kAppend) return WriteRecord(key, o->flags, o->exptime, old_data, data, true, old, cas_out);
      return WriteRecord(key, o->flags, o->exptime, data, old_data, true, old, cas_out);
    }
    case StoreMode::kReplace:
    case StoreMode::kSet:
    case StoreMode::kCas:
      if (mode == StoreMode::kReplace && !live) return Result::kNotStored;
      if (compare) {
        if (!live) return Result::kNotFound;
        if (o->cas != cas) {
          // I: an older cas may still store, as a stale item that keeps the old exptime.
          if (!invalidate || cas > o->cas) return Result::kExists;
          state = RecordState(o) | kStateStale;
          exptime = o->exptime;
        }
      }
      break;
  }
  return WriteRecord(key, flags, exptime, data, {}, have, old, cas_out, state);
}

Result Store::MetaDelete(std::string_view key, bool compare, uint64_t cas, bool invalidate, bool set_exptime,
                         int64_t exptime) {
  KeyGuard kg(*this, key);
  uint64_t off = 0;
  if (!index_->Lookup(key, &off).ok()) return Result::kNotFound;
  const Record* r = pool_->at<Record>(off);
  if (!Live(r, Now())) {
    RemoveLocked(key, off);
    counters_.reclaimed.fetch_add(1, std::memory_order_relaxed);
    return Result::kNotFound;
  }
  if (compare && r->cas != cas) return Result::kExists;
  if (!invalidate) {
    RemoveLocked(key, off);
    return Result::kDeleted;
  }
  // I: the same data under a new cas, marked stale (no recache token handed out yet). A new
  // record rather than two in-place stores, so that the cas and the state change together at
  // the index's commit point.
  const Result w = WriteRecord(key, r->flags, set_exptime ? exptime : r->exptime, {r->data(), r->length}, {}, true,
                               off, nullptr, kStateStale);
  return w == Result::kStored ? Result::kDeleted : w;
}

Result Store::MetaArith(std::string_view key, const ArithArgs& a, ArithOut* out) {
  KeyGuard kg(*this, key);
  uint64_t off = 0;
  const bool have = index_->Lookup(key, &off).ok();
  const Record* o = have ? pool_->at<Record>(off) : nullptr;
  char buf[24];
  if (!have || !Live(o, Now())) {
    if (!a.vivify) return Result::kNotFound;
    const auto res = std::to_chars(buf, buf + sizeof(buf), a.initial);
    const Result w = WriteRecord(key, 0, a.vivify_exptime, std::string_view(buf, res.ptr - buf), {}, have, off, &out->cas);
    if (w != Result::kStored) return w == Result::kNoMemory ? Result::kNotStored : w;
    out->value = a.initial;
    out->exptime = a.vivify_exptime;
    return Result::kStored;
  }
  if (a.compare && o->cas != a.cas) return Result::kExists;
  std::string_view text(o->data(), o->length);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  uint64_t v = 0;
  if (!ParseU64(text, &v)) return Result::kNonNumeric;
  if (a.incr) v += a.delta;  // wraps at 2^64, as memcached does
  else v = a.delta > v ? 0 : v - a.delta;
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  const int64_t exptime = a.touch ? a.exptime : o->exptime;
  const Result w =
      WriteRecord(key, o->flags, exptime, std::string_view(buf, res.ptr - buf), {}, true, off, &out->cas, RecordState(o));
  if (w == Result::kStored) {
    out->value = v;
    out->exptime = exptime;
  }
  return w;
}

// ---- eviction ------------------------------------------------------------------------------

void Store::Used(std::string_view key, uint64_t off, bool fetched) const {
  if (recency_->Stamp(off, fetched) || !adopt_on_read_) return;
  // An item that survived a restart of a hash index: adopt it at the next eviction.
  std::lock_guard<std::mutex> g(adopt_mu_);
  if (adopt_.size() < kMaxAdoptPending) adopt_.emplace_back(std::string(key), off);
}

void Store::AdoptPending(const sync::VersionLock* held) {
  std::vector<std::pair<std::string, uint64_t>> v;
  {
    std::lock_guard<std::mutex> g(adopt_mu_);
    v.swap(adopt_);
  }
  for (const auto& [key, off] : v) {
    // Under the key's lock (tried: this thread holds its own key's), so that a concurrent
    // overwrite cannot retire `off` between the check and the Add. A busy key waits for a read.
    sync::VersionLock& l = KeyLock(key);
    const bool mine = &l == held;
    if (!mine && !TryLock(l)) continue;
    uint64_t cur = 0;
    if (index_->Lookup(key, &cur).ok() && cur == off) recency_->Add(key, off, recency_->NextTick());
    if (!mine) l.WriteUnlock();
  }
}

bool Store::PickVictim(uint64_t keep, Recency::Entry* out) {
  const int64_t now = Now();
  uint64_t* rng = ThreadRng();
  bool have = false;
  uint32_t best_age = 0;
  Recency::Entry e;
  // The sampled records may be retired meanwhile: read them in an epoch (not a ReadGuard: with
  // WORT_GLOBAL_LOCK the evicting writer already holds the store lock exclusively).
  sync::EpochGuard eg(pool_->allocator().epoch());
  for (int i = 0; i < kEvictSamples * 2 && (i < kEvictSamples || !have); ++i) {
    if (!recency_->Sample(rng, &e)) break;
    if (e.off == keep) continue;
    if (!Live(pool_->at<Record>(e.off), now)) {  // dead items go first
      *out = std::move(e);
      return true;
    }
    const uint32_t age = recency_->Age(e.off);
    if (!have || age > best_age) {
      *out = e;
      have = true;
      best_age = age;
    }
  }
  return have;
}

// Evicts the record `off` of `key` (a delete: index->Remove is the commit point, then Retire).
// False if its key lock is busy, the index no longer maps key -> off (the entry changed since
// it was sampled), or the index refused (e.g. a copy-on-write index that needs space to
// remove): then the item stays.
bool Store::EvictTracked(const std::string& key, uint64_t off, const sync::VersionLock* held, bool* busy) {
  sync::VersionLock& l = KeyLock(key);
  const bool mine = &l == held;
  if (!mine && !TryLock(l)) {
    if (busy) *busy = true;
    return false;
  }
  bool done = false;
  uint64_t cur = 0;
  const bool same = index_->Lookup(key, &cur).ok() && cur == off;
  if (!same && busy) *busy = true;  // another writer replaced or evicted it since it was sampled
  if (same && recency_->Tracked(off)) {
    const Record* r = pool_->at<Record>(off);
    const bool live = Live(r, Now());
    const bool fetched = recency_->Fetched(off);
    sync::EpochGuard eg(pool_->allocator().epoch());  // from the unlink to the Retire (alloc.h)
    Status s = index_->Remove(key);  // COMMIT POINT (inside the index)
    if (s.ok()) {
      Counted(key, -1);
      recency_->Forget(off);
      pool_->allocator().Retire(off);  // unreachable since the commit; TrimAfterEviction reclaims
      done = true;
      if (live) {
        counters_.evictions.fetch_add(1, std::memory_order_relaxed);
        if (!fetched) counters_.evicted_unfetched.fetch_add(1, std::memory_order_relaxed);
      } else {
        counters_.reclaimed.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  if (!mine) l.WriteUnlock();
  return done;
}

// Gives back what eviction freed: first the blocks this thread retired (the evicted records and
// the index nodes the removals unlinked go through the pool's epochs, src/sync/sync.h: they reach
// the allocator only after grace periods; the thread is in no epoch here, so it can wait for
// them), then the thread caches and wholly free chunks (Allocator::Trim).
static void TrimAfterEviction(Pool& pool) {
  sync::EpochManager& e = pool.allocator().epoch();
  if (!e.InEpoch())
    for (int i = 0; i < 3; ++i) {
      e.Synchronize();
      e.Collect();
    }
  pool.allocator().Trim();
}

bool Store::EvictSome(size_t size, uint64_t keep, int attempt, const sync::VersionLock* held, bool* trimmed) {
  if (attempt >= kEvictAttempts) return false;
  if (adopt_on_read_) AdoptPending(held);
  // Nothing (else) to evict: return cached blocks and reserve chunks once, then give up.
  Recency::Entry one;
  if (recency_->size() == 0 || (recency_->size() == 1 && recency_->Sample(ThreadRng(), &one) && one.off == keep)) {
    if (*trimmed) return false;
    TrimAfterEviction(*pool_);
    return *trimmed = true;
  }
  const bool large = size > Allocator::kMaxSmall;
  if (!large && attempt < kSampledEvictions) {
    // One sampled victim (a few tries in case its key is busy or the index refuses one).
    bool busy = false;
    for (int t = 0; t < 4; ++t) {
      Recency::Entry v;
      if (!PickVictim(keep, &v)) return false;
      if (EvictTracked(v.key, v.off, held, &busy)) {
        // The freed block serves its own class once reclaimed (this thread's cache); other
        // classes need whole chunks back: return the cache now and then.
        if (attempt % 8 == 7) {
          TrimAfterEviction(*pool_);
        } else {
          (void)pool_->allocator().ReclaimRetired();  // the victim's block back now, or the retry evicts again
        }
        return true;
      }
    }
    // Other writers hold or just changed the sampled keys (they make room too): retry.
    if (busy) {
      std::this_thread::yield();
      return true;
    }
    return false;
  }
  // Whole chunks. A small item: the chunk of a sampled victim. An item of n chunks: n + 1
  // consecutive chunks around a sampled victim's (a run needs n consecutive FREE chunks, and the
  // allocator keeps one wholly free chunk per size class as its reserve), after it on even
  // attempts and before it on odd ones (the victim may sit at either end of the heap).
  Recency::Entry v;
  if (!PickVictim(keep, &v)) return false;
  const uint64_t victim = recency_->ChunkOf(v.off);
  uint64_t first = victim, count = 1;
  if (large) {
    const uint64_t n = (size + Pool::kChunkSize - 1) / Pool::kChunkSize;
    count = n + 1;
    if (attempt % 2 == 1) first = victim >= n ? victim - n : 0;
  }
  counters_.evict_chunk_rounds.fetch_add(1, std::memory_order_relaxed);
  bool any = false, raced = false;
  for (uint64_t c = first; c < first + count; ++c)
    for (const Recency::Entry& e : recency_->InChunk(c))
      if (e.off != keep) any |= EvictTracked(e.key, e.off, held, &raced);
  TrimAfterEviction(*pool_);
  return any || raced;
}

uint64_t Store::tracked_items() const { return recency_ ? recency_->size() : 0; }

bool Store::CheckRecency(std::string* report) const {
  if (!recency_) return true;
  WaitForCount();  // until then the surviving items are being tracked
  if (!recency_->Check(report)) return false;
  bool ok = true;
  const std::vector<Recency::Entry> all = recency_->All();
  for (const Recency::Entry& e : all) {
    uint64_t v = 0;
    if (!index_->Lookup(e.key, &v).ok() || v != e.off) {
      ok = false;
      if (report) *report += "recency: a tracked record is not the index's value of its key\n";
      break;
    }
  }
  // Every item of an ordered index is tracked (hash indexes: once adopted).
  if (ordered_ && all.size() + 1 != index_->Size()) {
    ok = false;
    if (report) *report += fmt::format("recency: {} tracked, {} items\n", all.size(), index_->Size() - 1);
  }
  return ok;
}

// ---- crawler -------------------------------------------------------------------------------

uint64_t Store::CrawlOnce() {
  if (!ordered_) return 0;
  constexpr size_t kBatch = 1024;
  uint64_t removed = 0;
  std::string cur;
  for (;;) {
    std::vector<std::pair<std::string, uint64_t>> dead;
    size_t seen = 0;
    std::string last;
    {
      ReadGuard rg(*this);
      const int64_t now = Now();
      Status s = index_->Scan(cur, nullptr, kBatch, [&](std::string_view key, uint64_t value) {
        ++seen;
        last.assign(key);
        if (!IsMetaKey(key) && !Live(pool_->at<Record>(value), now)) dead.emplace_back(std::string(key), value);
        return true;
      });
      if (!s.ok()) return removed;
      counters_.crawler_items_checked.fetch_add(seen, std::memory_order_relaxed);
    }
    uint64_t batch_removed = 0;
    for (const auto& [key, off] : dead) {
      // Under the key's lock, if nobody replaced it meanwhile (the record is then still `off`).
      KeyGuard kg(*this, key);
      uint64_t cur_off = 0;
      if (index_->Lookup(key, &cur_off).ok() && cur_off == off && !Live(pool_->at<Record>(off), Now())) {
        RemoveLocked(key, off);
        ++batch_removed;
      }
    }
    removed += batch_removed;
    counters_.reclaimed.fetch_add(batch_removed, std::memory_order_relaxed);
    if (seen < kBatch) break;
    {
      std::lock_guard<std::mutex> g(crawler_mu_);
      if (stop_) break;
    }
    cur = last + '\0';
  }
  return removed;
}

void Store::CrawlerLoop() {
  const auto interval = std::chrono::duration<double>(opts_.crawler_interval_s);
  for (;;) {
    {
      std::unique_lock<std::mutex> g(crawler_mu_);
      crawler_cv_.wait_for(g, interval, [&] { return stop_ || crawl_now_; });
      if (stop_) return;
      crawl_now_ = false;
    }
    CrawlOnce();
  }
}

}  // namespace wort::server
