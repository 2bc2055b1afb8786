// The persistent item store of `wort serve` (design, record layout and write order: store.h).
#include "server/store.h"

#include <fmt/core.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <vector>

#include "index/kind_ids.h"
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
  v.exptime = r->exptime;
  v.time = RecordTime(r);
  v.stale = (RecordState(r) & kStateStale) != 0;
  v.token_sent = (RecordState(r) & kStateTokenSent) != 0;
  return v;
}
}  // namespace

// ---- recency (eviction) ----------------------------------------------------------------------

Recency::Recency(uint64_t heap_offset, uint64_t max_size) : heap_off_(heap_offset) {
  const uint64_t granules = (max_size > heap_offset ? max_size - heap_offset : 0) / 64 + 1;
  // calloc: zero pages are mapped lazily; only granules that hold records are ever touched.
  auto* p = static_cast<std::atomic<uint32_t>*>(std::calloc(granules, sizeof(std::atomic<uint32_t>)));
  if (!p) throw std::bad_alloc();
  stamps_.reset(p);
}

void Recency::Add(std::string_view key, uint64_t off, uint64_t tick) {
  if (by_off_.count(off)) return;
  const uint32_t slot = static_cast<uint32_t>(entries_.size());
  entries_.push_back(Entry{std::string(key), off, 0});
  auto& cv = by_chunk_[ChunkOf(off)];
  entries_.back().chunk_pos = static_cast<uint32_t>(cv.size());
  cv.push_back(slot);
  by_off_.emplace(off, slot);
  uint32_t w = static_cast<uint32_t>(tick << 1);
  if (w == 0) w = 2;  // 0 means untracked
  stamps_[(off - heap_off_) >> 6].store(w, std::memory_order_relaxed);
}

void Recency::Forget(uint64_t off) {
  auto it = by_off_.find(off);
  if (it == by_off_.end()) return;
  RemoveSlot(it->second);
  stamps_[(off - heap_off_) >> 6].store(0, std::memory_order_relaxed);
}

void Recency::RemoveSlot(uint32_t slot) {
  Entry& e = entries_[slot];
  // Out of its chunk's list (swap with the list's last element).
  auto ci = by_chunk_.find(ChunkOf(e.off));
  auto& cv = ci->second;
  const uint32_t moved = cv.back();
  cv[e.chunk_pos] = moved;
  entries_[moved].chunk_pos = e.chunk_pos;
  cv.pop_back();
  if (cv.empty()) by_chunk_.erase(ci);
  by_off_.erase(e.off);
  // Out of the vector (the last entry takes its slot).
  const uint32_t last = static_cast<uint32_t>(entries_.size() - 1);
  if (slot != last) {
    entries_[slot] = std::move(entries_[last]);
    by_off_[entries_[slot].off] = slot;
    by_chunk_[ChunkOf(entries_[slot].off)][entries_[slot].chunk_pos] = slot;
  }
  entries_.pop_back();
}

int Recency::SlotOf(uint64_t off) const {
  auto it = by_off_.find(off);
  return it == by_off_.end() ? -1 : static_cast<int>(it->second);
}

std::vector<uint64_t> Recency::InChunk(uint64_t c) const {
  std::vector<uint64_t> out;
  auto it = by_chunk_.find(c);
  if (it != by_chunk_.end())
    for (uint32_t slot : it->second) out.push_back(entries_[slot].off);
  return out;
}

bool Recency::Check(std::string* report) const {
  bool ok = by_off_.size() == entries_.size();
  size_t in_chunks = 0;
  for (const auto& [c, cv] : by_chunk_) {
    in_chunks += cv.size();
    for (uint32_t i = 0; i < cv.size(); ++i)
      if (cv[i] >= entries_.size() || entries_[cv[i]].chunk_pos != i || ChunkOf(entries_[cv[i]].off) != c) ok = false;
  }
  if (in_chunks != entries_.size()) ok = false;
  for (uint32_t i = 0; i < entries_.size(); ++i) {
    auto it = by_off_.find(entries_[i].off);
    if (it == by_off_.end() || it->second != i) ok = false;
    if (stamps_[(entries_[i].off - heap_off_) >> 6].load(std::memory_order_relaxed) == 0) ok = false;
  }
  if (!ok && report) *report += "recency: maps disagree with the entry vector\n";
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

Status Store::Open(const StoreOptions& opts, std::unique_ptr<Store>* out) {
  const auto t0 = std::chrono::steady_clock::now();
  // Before the pool file is created: a bad kind must leave nothing behind.
  if (!opts.index_kind.empty()) WORT_RETURN_IF_ERROR(CheckServableKind(opts.index_kind));
  std::unique_ptr<Store> st(new Store());
  st->opts_ = opts;
  PoolOptions po;
  po.max_size = opts.pool_size;
  po.initial_size = std::min<uint64_t>(opts.pool_size, 64ull << 20);
  po.background_recovery = true;  // instant restart: serve while the post-crash GC runs
  po.sync = opts.sync;
  WORT_RETURN_IF_ERROR(Pool::OpenOrCreate(opts.pool_path, po, &st->pool_));

  IndexOptions io;
  io.key_type = KeyType::kBytes;
  io.values_are_blocks = true;
  if (st->pool_->FindRoot(opts.root_name, nullptr).ok()) {
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
    if (st->ordered_) {
      Status s = st->index_->Scan({}, nullptr, ~size_t{0}, [&](std::string_view key, uint64_t value) {
        if (!IsMetaKey(key)) st->recency_->Add(key, value, 1);
        return true;
      });
      if (!s.ok()) return s;
    } else {
      st->adopt_on_read_ = st->index_->Size() > 1;
    }
  }
  st->open_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
  std::unique_lock<std::shared_mutex> lk(mu_);
  index_.reset();
  meta_ = nullptr;
  if (!pool_) return Status::OK();
  Status s = pool_->Close();
  pool_.reset();
  return s;
}

bool Store::Live(const Record* r, int64_t now) const {
  if (r->exptime != 0 && r->exptime <= now) return false;
  if (r->cas < pm::load8(&meta_->flush_cas)) return false;
  const int64_t ft = static_cast<int64_t>(pm::load8(reinterpret_cast<const uint64_t*>(&meta_->flush_time)));
  if (ft != 0 && now >= ft && RecordTime(r) < ft) return false;
  return true;
}

uint64_t Store::curr_items() const {
  std::shared_lock lk(mu_);
  const uint64_t n = index_->Size();
  return n ? n - 1 : 0;  // the metadata entry
}

uint64_t Store::bytes_allocated() const { return pool_->allocator().Stats().bytes_allocated; }

// ---- reads ---------------------------------------------------------------------------------

bool Store::Get(std::string_view key, const ItemFn& fn, bool* expired) {
  uint64_t off = 0;
  {
    std::shared_lock lk(mu_);
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
  std::unique_lock lk(mu_);
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
  std::shared_lock lk(mu_);
  std::string cur(start);
  const int64_t now = Now();
  while (got < limit) {
    const size_t batch = static_cast<size_t>(std::min<uint64_t>(limit - got + 16, 4096));
    size_t seen = 0;
    bool stopped = false;
    std::string last;
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

// Steps 1-4 of store.h: new record (a then b as data) -> persist -> Upsert (commit) -> free old.
Result Store::WriteRecord(std::string_view key, uint32_t flags, int64_t exptime, std::string_view a,
                          std::string_view b, bool have_old, uint64_t old_off, uint64_t* cas_out, uint64_t state) {
  const size_t len = a.size() + b.size();
  uint64_t off = 0;
  const uint64_t keep = have_old ? old_off : 0;  // its data may be `a` or `b`: never evicted
  Status s;
  // Out of space while the post-crash GC runs: wait for it once (it frees what the crash left
  // unreachable; no index lock is held here, so waiting is safe), then evict if need be.
  auto wait_for_gc = [this] {
    if (pool_->recovery_done()) return false;
    (void)pool_->WaitForRecovery();
    return true;
  };
  for (int attempt = 0;; ++attempt) {
    s = pool_->allocator().Alloc(sizeof(Record) + len, &off);
    if (s.IsPoolFull() && wait_for_gc()) continue;
    if (s.ok() || !s.IsPoolFull() || !recency_ || !EvictSome(sizeof(Record) + len, keep, attempt)) break;
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
  for (int attempt = 0;; ++attempt) {
    s = index_->Upsert(key, off);  // COMMIT POINT (the index's 8-byte publish, persisted)
    if (s.IsPoolFull() && wait_for_gc()) continue;
    if (s.ok() || !s.IsPoolFull() || !recency_ || !EvictSome(0, keep, attempt)) break;
  }
  if (!s.ok()) {
    if (recency_ && s.IsPoolFull()) counters_.evict_failures.fetch_add(1, std::memory_order_relaxed);
    pool_->allocator().Free(off);  // never published: no reference to it exists
    if (!s.IsPoolFull()) fmt::print(stderr, "wort serve: upsert: {}\n", s.ToString());
    return s.IsPoolFull() ? Result::kNoMemory : Result::kError;
  }
  if (have_old) pool_->allocator().Free(old_off);  // unreachable since the commit
  if (recency_) {
    if (have_old) recency_->Forget(old_off);
    recency_->Add(key, off, recency_->NextTick());
  }
  counters_.total_items.fetch_add(1, std::memory_order_relaxed);
  if (cas_out) *cas_out = r->cas;
  return Result::kStored;
}

void Store::RemoveLocked(std::string_view key, uint64_t off) {
  Status s = index_->Remove(key);  // COMMIT POINT (inside the index)
  if (s.ok()) {
    pool_->allocator().Free(off);
    if (recency_) recency_->Forget(off);
  } else if (!s.IsNotFound()) {
    fmt::print(stderr, "wort serve: remove: {}\n", s.ToString());
  }
}

Result Store::StoreItem(StoreMode mode, std::string_view key, uint32_t flags, int64_t exptime,
                        std::string_view data, uint64_t cas_unique, uint64_t* cas_out) {
  std::unique_lock lk(mu_);
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
  std::unique_lock lk(mu_);
  uint64_t off = 0;
  if (!index_->Lookup(key, &off).ok()) return Result::kNotFound;
  const bool live = Live(pool_->at<Record>(off), Now());
  RemoveLocked(key, off);
  return live ? Result::kDeleted : Result::kNotFound;
}

bool Store::Unlink(std::string_view key) {
  std::unique_lock lk(mu_);
  uint64_t off = 0;
  if (!index_->Lookup(key, &off).ok()) return false;
  RemoveLocked(key, off);
  return true;
}

Result Store::IncrDecr(std::string_view key, bool incr, uint64_t delta, uint64_t* value) {
  std::unique_lock lk(mu_);
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
  std::unique_lock lk(mu_);
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
  std::unique_lock lk(mu_);
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
    std::unique_lock lk(mu_);
    if (when <= Now()) {
      // Every item stored so far has a smaller cas than the next one: that cas is the bar.
      pm::store8(&meta_->flush_cas, NextCas());  // COMMIT POINT of an immediate flush_all
      pm::persist(&meta_->flush_cas, 8);
      pm::store8(reinterpret_cast<uint64_t*>(&meta_->flush_time), 0);  // cancels a delayed one
      pm::persist(&meta_->flush_time, 8);
    } else {
      pm::store8(reinterpret_cast<uint64_t*>(&meta_->flush_time), static_cast<uint64_t>(when));  // COMMIT POINT
      pm::persist(&meta_->flush_time, 8);
    }
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
  // A plain mg only reads: shared lock. It needs the exclusive lock only to touch, vivify, or
  // hand out a recache token (then it starts over).
  if (!a.touch && !a.vivify && !a.recache) {
    std::shared_lock lk(mu_);
    const bool hit = MetaGetLocked(key, a, fn, false, &retry);
    if (!retry) return hit;
  }
  std::unique_lock lk(mu_);
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
  if (a.recache && !(state & kStateTokenSent) && r->exptime != 0 && r->exptime < a.recache_before) won = true;
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
    pm::store8(reinterpret_cast<uint64_t*>(&r->time), static_cast<uint64_t>(r->time) | kStateTokenSent);
    pm::persist(&r->time, sizeof(r->time));
    v.won = true;
  }
  fn(v);
  return true;
}

Result Store::MetaSet(StoreMode mode, std::string_view key, uint32_t flags, int64_t exptime, std::string_view data,
                      bool compare, uint64_t cas, bool invalidate, uint64_t* cas_out) {
  std::unique_lock lk(mu_);
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
  std::unique_lock lk(mu_);
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
  std::unique_lock lk(mu_);
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

void Store::AdoptPending() {
  std::vector<std::pair<std::string, uint64_t>> v;
  {
    std::lock_guard<std::mutex> g(adopt_mu_);
    v.swap(adopt_);
  }
  for (const auto& [key, off] : v) {
    uint64_t cur = 0;
    if (index_->Lookup(key, &cur).ok() && cur == off) recency_->Add(key, off, recency_->NextTick());
  }
}

int Store::PickVictim(uint64_t keep) {
  const size_t n = recency_->size();
  if (n == 0 || (n == 1 && recency_->at(0).off == keep)) return -1;
  const int64_t now = Now();
  int best = -1;
  uint32_t best_age = 0;
  for (int i = 0; i < kEvictSamples * 2 && (i < kEvictSamples || best < 0); ++i) {
    rng_ ^= rng_ << 13, rng_ ^= rng_ >> 7, rng_ ^= rng_ << 17;  // xorshift64
    const auto slot = static_cast<int>(rng_ % n);
    const Recency::Entry& e = recency_->at(slot);
    if (e.off == keep) continue;
    if (!Live(pool_->at<Record>(e.off), now)) return slot;  // dead items go first
    const uint32_t age = recency_->Age(e.off);
    if (best < 0 || age > best_age) best = slot, best_age = age;
  }
  return best;
}

// Evicts the tracked record at `off` (a delete: index->Remove is the commit point, then Free).
// False if it is not tracked or the index refused (e.g. a copy-on-write index that needs space
// to remove): then the item stays.
bool Store::EvictTracked(uint64_t off) {
  const int slot = recency_->SlotOf(off);
  if (slot < 0) return false;
  const Recency::Entry& e = recency_->at(slot);
  const bool live = Live(pool_->at<Record>(off), Now());
  const bool fetched = recency_->Fetched(off);
  Status s = index_->Remove(e.key);  // COMMIT POINT (inside the index)
  if (!s.ok()) {
    if (s.IsNotFound()) recency_->Forget(off);  // cannot happen: the tracker follows the index
    return false;
  }
  pool_->allocator().Free(off);  // unreachable since the commit
  recency_->Forget(off);
  if (live) {
    counters_.evictions.fetch_add(1, std::memory_order_relaxed);
    if (!fetched) counters_.evicted_unfetched.fetch_add(1, std::memory_order_relaxed);
  } else {
    counters_.reclaimed.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

// Gives back what eviction freed: first the index blocks the evictions retired (the radix trees
// unlink nodes through the pool's epochs, src/sync/sync.h: they reach the allocator only after a
// grace period; two Collects advance the epoch past them when no reader is inside one - this
// thread never is here), then the thread caches and wholly free chunks (Allocator::Trim).
static void TrimAfterEviction(Pool& pool) {
  sync::EpochManager& e = pool.allocator().epoch();
  if (!e.InEpoch())
    for (int i = 0; i < 3; ++i) e.Collect();
  pool.allocator().Trim();
}

bool Store::EvictSome(size_t size, uint64_t keep, int attempt) {
  if (attempt >= kEvictAttempts) return false;
  if (attempt == 0) trimmed_ = false;
  if (adopt_on_read_) AdoptPending();
  // Nothing (else) to evict: return cached blocks and reserve chunks once, then give up.
  if (recency_->size() == 0 || (recency_->size() == 1 && recency_->at(0).off == keep)) {
    if (trimmed_) return false;
    TrimAfterEviction(*pool_);
    return trimmed_ = true;
  }
  const bool large = size > Allocator::kMaxSmall;
  if (!large && attempt < kSampledEvictions) {
    // One sampled victim (a few tries in case the index refuses one).
    for (int t = 0; t < 4; ++t) {
      const int slot = PickVictim(keep);
      if (slot < 0) return false;
      if (EvictTracked(recency_->at(slot).off)) {
        // The freed block serves its own class at once (this thread's cache); other classes
        // need whole chunks back: return the cache now and then.
        if (attempt % 8 == 7) TrimAfterEviction(*pool_);
        return true;
      }
    }
    return false;
  }
  // Whole chunks. A small item: the chunk of a sampled victim. An item of n chunks: n + 1
  // consecutive chunks around a sampled victim's (a run needs n consecutive FREE chunks, and the
  // allocator keeps one wholly free chunk per size class as its reserve), after it on even
  // attempts and before it on odd ones (the victim may sit at either end of the heap).
  const int slot = PickVictim(keep);
  if (slot < 0) return false;
  const uint64_t victim = recency_->ChunkOf(recency_->at(slot).off);
  uint64_t first = victim, count = 1;
  if (large) {
    const uint64_t n = (size + Pool::kChunkSize - 1) / Pool::kChunkSize;
    count = n + 1;
    if (attempt % 2 == 1) first = victim >= n ? victim - n : 0;
  }
  counters_.evict_chunk_rounds.fetch_add(1, std::memory_order_relaxed);
  bool any = false;
  for (uint64_t c = first; c < first + count; ++c)
    for (uint64_t off : recency_->InChunk(c))
      if (off != keep) any |= EvictTracked(off);
  TrimAfterEviction(*pool_);
  return any;
}

uint64_t Store::tracked_items() const {
  std::shared_lock lk(mu_);
  return recency_ ? recency_->size() : 0;
}

bool Store::CheckRecency(std::string* report) const {
  std::shared_lock lk(mu_);
  if (!recency_) return true;
  if (!recency_->Check(report)) return false;
  bool ok = true;
  for (size_t i = 0; i < recency_->size(); ++i) {
    uint64_t v = 0;
    const auto& e = recency_->at(i);
    if (!index_->Lookup(e.key, &v).ok() || v != e.off) {
      ok = false;
      if (report) *report += "recency: a tracked record is not the index's value of its key\n";
      break;
    }
  }
  // Every item of an ordered index is tracked (hash indexes: once adopted).
  if (ordered_ && recency_->size() + 1 != index_->Size()) {
    ok = false;
    if (report) *report += fmt::format("recency: {} tracked, {} items\n", recency_->size(), index_->Size() - 1);
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
      std::shared_lock lk(mu_);
      if (!index_) return removed;
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
    if (!dead.empty()) {
      std::unique_lock lk(mu_);
      const int64_t now = Now();
      for (const auto& [key, off] : dead) {
        uint64_t cur_off = 0;
        if (index_->Lookup(key, &cur_off).ok() && cur_off == off && !Live(pool_->at<Record>(off), now)) {
          RemoveLocked(key, off);
          ++removed;
        }
      }
      counters_.reclaimed.fetch_add(removed, std::memory_order_relaxed);
    }
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
