// The key-value store API (design, value block layout and persist order: wort/kv.h).
#include "wort/kv.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "sync/sync.h"

#include "index/hash/hash_common.h"
#include "index/kind_ids.h"
#include "index/registry.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort {

// The store's concurrency state (wort/kv.h, Thread safety). DRAM only, never persistent.
struct KvStore::Sync {
  // Close's gate: every operation is inside an epoch of `ops` from before it checks `closed`
  // until it has stopped touching the pool; Close sets `closed`, then waits for a grace period
  // of `ops` (Synchronize: every operation that may have missed the flag has ended) before it
  // closes the pool. Enter/Exit are a store each and no hardware fence (the asymmetric fences
  // of sync/epoch.cc), where a shared_mutex would be an atomic read-modify-write on one cache
  // line shared by every thread (doc/concurrency.md, "The key-value store": the figures). Nothing
  // is ever retired into it.
  sync::EpochManager ops{[](void*, uint64_t) {}, nullptr};
  std::atomic<bool> closed{false};
  std::mutex close_mu;  // orders two Close calls
  // The writers' per-key locks (as the server's, src/server/store.cc KeyGuard): a Put or Remove
  // holds its key's word from the Lookup of the old value block to its Retire, so that two
  // writers of one key neither free the same old block twice nor leak one. 2^14 words; two keys
  // that share a word only wait for each other.
  sync::VersionLockTable key_locks{14};
  sync::EpochManager* values = nullptr;  // the pool's epoch (Allocator::epoch()): value blocks
};

namespace {

constexpr size_t kHeader = 8;

// An operation's section of KvStore::Sync::ops; open() is false once Close has begun.
class OpGuard {
 public:
  explicit OpGuard(KvStore::Sync& s) : s_(s) {
    s_.ops.Enter();
    open_ = !s_.closed.load(std::memory_order_seq_cst);
  }
  ~OpGuard() { s_.ops.Exit(); }
  OpGuard(const OpGuard&) = delete;
  OpGuard& operator=(const OpGuard&) = delete;
  bool open() const { return open_; }

 private:
  KvStore::Sync& s_;
  bool open_;
};

Status Closed() { return Status::InvalidArgument("the store is closed"); }

// A key's writer lock (a VersionLockTable word used as a plain lock). Waits by backing off (the
// holder may be descheduled on a loaded machine).
class KeyGuard {
 public:
  KeyGuard(KvStore::Sync& s, std::string_view key)
      // VersionLockTable mixes (word >> 6): shift the hash so that all of its low bits count.
      : l_(s.key_locks.For(static_cast<uint64_t>(std::hash<std::string_view>{}(key)) << 6)) {
    for (int a = 0;; a = std::min(a + 1, 16)) {
      const uint64_t v = l_.Load();
      if (!sync::VersionLock::IsLocked(v) && l_.UpgradeToWriteLock(v)) break;
      sync::Backoff(a);
    }
  }
  ~KeyGuard() { l_.WriteUnlock(); }
  KeyGuard(const KeyGuard&) = delete;
  KeyGuard& operator=(const KeyGuard&) = delete;

 private:
  sync::VersionLock& l_;
};

bool KvKind(const IndexKind* k) {
  return k->create && k->open && k->type_id < kind_id::kTestFirst && !kind_id::IsVolatile(k->type_id);
}

// Whether the kind's writers of different keys run in parallel: the kinds that lock only what
// they change - the radix trees and fastfair on src/sync's protocol (unless WORT_GLOBAL_LOCK=1
// gives them back one index-wide lock, src/index/registry.h), cceh and cceh-cow with their
// striped segment locks (doc/concurrency.md). The others (wbtree, b3tree, fptree, nvtree, the
// static hash tables) take one writer at a time inside the index; the store adds no lock of its
// own around them either way.
bool ParallelWriters(const IndexKind* k) {
  switch (k->type_id) {
    case kind_id::kCceh:
    case kind_id::kCcehCow:
      return true;
    case kind_id::kWort:
    case kind_id::kWoart:
    case kind_id::kArtCow:
    case kind_id::kRoart:
    case kind_id::kFastFair:
      return !GlobalIndexLock();
    default:
      return false;
  }
}

std::string KindList() {
  std::string s;
  for (const std::string& k : KvKinds()) s += (s.empty() ? "" : ", ") + k;
  return s;
}

}  // namespace

std::vector<std::string> KvKinds() {
  std::vector<std::string> v;
  for (const IndexKind* k : IndexKinds())
    if (KvKind(k)) v.emplace_back(k->name);
  std::sort(v.begin(), v.end());
  return v;
}

Status KvStore::Open(const KvConfig& cfg, std::unique_ptr<KvStore>* out) {
  if (cfg.path.empty()) return Status::InvalidArgument("no pool path given");
  if (cfg.key_type != KeyType::kBytes && cfg.key_type != KeyType::kU64)
    return Status::InvalidArgument("unknown key type");
  if (cfg.sync != SyncMode::kPersist && cfg.sync != SyncMode::kMsync)
    return Status::InvalidArgument("unknown sync mode");
  const IndexKind* want = nullptr;
  if (!cfg.kind.empty()) {
    want = FindIndexKind(cfg.kind);
    if (!want || !KvKind(want))
      return Status::InvalidArgument("unknown or volatile index kind '" + cfg.kind + "' (kinds: " + KindList() + ")");
  }
  std::unique_ptr<KvStore> st(new KvStore());
  st->cfg_ = cfg;
  PoolOptions po;
  po.max_size = cfg.size;
  po.initial_size = std::min<uint64_t>(cfg.size, 64ull << 20);
  po.background_recovery = true;
  po.sync = cfg.sync == SyncMode::kMsync;
  struct stat sb;
  const bool exists = ::stat(cfg.path.c_str(), &sb) == 0;
  if (!exists && !cfg.create_if_missing) return Status::NotFound("no pool at " + cfg.path);
  if (!exists && cfg.size < 2 * Pool::kChunkSize)
    return Status::InvalidArgument("pool size " + std::to_string(cfg.size) + " is too small (at least 2 MiB)");
  WORT_RETURN_IF_ERROR(exists ? Pool::Open(cfg.path, po, &st->pool_) : Pool::Create(cfg.path, po, &st->pool_));

  IndexOptions io;
  io.key_type = cfg.key_type;
  io.values_are_blocks = true;
  RootInfo root;
  if (st->pool_->FindRoot(cfg.name, &root).ok()) {
    WORT_RETURN_IF_ERROR(OpenIndex(*st->pool_, cfg.name, &st->index_));
    const IndexKind* k = FindIndexKindById(root.type);
    if (!k || !KvKind(k))
      return Status::InvalidArgument("root '" + cfg.name + "' of " + cfg.path + " is not a key-value store");
    if (want && want != k)
      return Status::InvalidArgument("store '" + cfg.name + "' of " + cfg.path + " is a " + k->name + " store, not " +
                                     cfg.kind);
    if (st->index_->key_type() != cfg.key_type)
      return Status::InvalidArgument("store '" + cfg.name + "' of " + cfg.path + " has " +
                                     (st->index_->key_type() == KeyType::kU64 ? "8-byte integer" : "byte-string") +
                                     " keys");
  } else {
    if (!cfg.create_if_missing) return Status::NotFound("no store '" + cfg.name + "' in " + cfg.path);
    if (!want) return Status::InvalidArgument("no index kind given for the new store '" + cfg.name + "'");
    WORT_RETURN_IF_ERROR(CreateIndex(*st->pool_, cfg.name, cfg.kind, io, &st->index_));
  }
  const IndexKind* k = FindIndexKind(st->index_->kind());
  KvCapabilities& c = st->caps_;
  c.kind = std::string(st->index_->kind());
  c.description = k->description;
  c.ordered = k->ordered;
  c.key_type = st->index_->key_type();
  c.max_key_len = c.key_type == KeyType::kU64 ? 8 : kMaxKeyLen;
  c.sync = cfg.sync;
  c.durability = st->pool_->durability();
  c.parallel_writes = ParallelWriters(k);
  st->sync_->values = &st->pool_->allocator().epoch();
  *out = std::move(st);
  return Status::OK();
}

KvStore::KvStore() : sync_(std::make_unique<Sync>()) {}

KvStore::~KvStore() {
  Status s = Close();
  if (!s.ok() && pool_) std::fprintf(stderr, "wort: closing %s: %s\n", cfg_.path.c_str(), s.ToString().c_str());
}

Status KvStore::Close() {
  std::lock_guard<std::mutex> g(sync_->close_mu);
  sync_->closed.store(true, std::memory_order_seq_cst);
  // Every operation that entered before the flag was visible ends; later ones see it and touch
  // nothing. Their retired value blocks are freed by the pool's close (PrepareClose drains).
  sync_->ops.Synchronize();
  if (!pool_) return Status::OK();
  index_.reset();
  Status s = pool_->Close();
  pool_.reset();
  return s;
}

Status KvStore::CheckKey(std::string_view key) const {
  if (caps_.key_type == KeyType::kU64 && key.size() != 8)
    return Status::InvalidArgument("this store takes 8-byte keys; got " + std::to_string(key.size()) + " bytes");
  if (key.size() > kMaxKeyLen)
    return Status::InvalidArgument("key of " + std::to_string(key.size()) + " bytes is longer than " +
                                   std::to_string(kMaxKeyLen));
  return Status::OK();
}

Status KvStore::ValueAt(uint64_t off, std::string_view* v) const {
  if (off < pool_->heap_offset() || !pool_->contains(off, kHeader))
    return Status::Corruption("value offset " + std::to_string(off) + " lies outside the pool's heap");
  const uint64_t h = pm::load8(pool_->at<uint64_t>(off));
  const uint64_t len = h & 0xffffffffu;
  if ((h >> 32) != kValueMagic || len > kMaxValueLen || !pool_->contains(off + kHeader, len))
    return Status::Corruption("the block at " + std::to_string(off) + " is not a value block");
  *v = std::string_view(pool_->at<char>(off + kHeader), len);
  return Status::OK();
}

bool KvStore::FreeUp(bool* reclaimed) {
  // During the post-crash GC fresh space may run out: wait for it once.
  if (!pool_->recovery_done()) {
    (void)pool_->WaitForRecovery();
    return true;
  }
  // Then the value blocks this thread retired (not from inside an epoch of the pool, e.g. a Get
  // or Scan callback that writes: ReclaimRetired then returns false).
  if (*reclaimed) return false;
  *reclaimed = true;
  return pool_->allocator().ReclaimRetired();
}

Status KvStore::Put(std::string_view key, std::string_view value) {
  WORT_RETURN_IF_ERROR(CheckKey(key));
  if (value.size() > kMaxValueLen)
    return Status::InvalidArgument("value of " + std::to_string(value.size()) + " bytes is longer than " +
                                   std::to_string(kMaxValueLen));
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  Allocator& a = pool_->allocator();
  // 1-2: a new block, wholly persistent before anything refers to it. No lock is held: when
  // space runs out, FreeUp may wait for the GC or for a grace period and retry.
  uint64_t off = 0;
  bool reclaimed = false;
  Status s;
  do {
    s = a.Alloc(kHeader + value.size(), &off);
  } while (s.IsPoolFull() && FreeUp(&reclaimed));
  WORT_RETURN_IF_ERROR(s);
  char* b = pool_->at<char>(off);
  const uint64_t h = kValueMagic << 32 | value.size();
  std::memcpy(b, &h, kHeader);
  if (!value.empty()) std::memcpy(b + kHeader, value.data(), value.size());
  pm::persist(b, kHeader + value.size());
  reclaimed = false;
  for (;;) {
    {
      // The key's lock from the Lookup of the old block to its Retire: a second writer of the
      // key sees this one's block as its old one (no double free, no leak). Inside the pool's
      // epoch from before the unlink until after the Retire (the writer rule, wort/alloc.h).
      KeyGuard kg(*sync_, key);
      sync::EpochGuard eg(*sync_->values);
      uint64_t old = 0;
      const bool had = index_->Lookup(key, &old).ok();
      s = index_->Upsert(key, off);  // 3: COMMIT POINT (the index's publish, persisted)
      if (s.ok()) {
        if (had) pool_->allocator().RetireAndCollect(old);  // 4: unreachable since the commit; readers may still hold it
        return s;
      }
    }
    // Out of space inside the index: free up with no lock held and no epoch entered.
    if (!(s.IsPoolFull() && FreeUp(&reclaimed))) break;
  }
  a.Free(off);  // never published
  return s;
}

Status KvStore::Remove(std::string_view key) {
  WORT_RETURN_IF_ERROR(CheckKey(key));
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  KeyGuard kg(*sync_, key);
  sync::EpochGuard eg(*sync_->values);
  uint64_t old = 0;
  WORT_RETURN_IF_ERROR(index_->Lookup(key, &old));
  WORT_RETURN_IF_ERROR(index_->Remove(key));  // COMMIT POINT
  pool_->allocator().RetireAndCollect(old);  // unreachable since the commit; readers may still hold it
  return Status::OK();
}

Status KvStore::Get(std::string_view key, const std::function<void(std::string_view)>& fn) const {
  WORT_RETURN_IF_ERROR(CheckKey(key));
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  // The value block found is not freed before the epoch ends, even if a writer replaces it.
  sync::EpochGuard eg(*sync_->values);
  uint64_t off = 0;
  WORT_RETURN_IF_ERROR(index_->Lookup(key, &off));
  std::string_view v;
  WORT_RETURN_IF_ERROR(ValueAt(off, &v));
  fn(v);
  return Status::OK();
}

Status KvStore::Get(std::string_view key, std::string* value) const {
  return Get(key, [&](std::string_view v) { value->assign(v); });
}

Status KvStore::Exists(std::string_view key) const {
  WORT_RETURN_IF_ERROR(CheckKey(key));
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  uint64_t off = 0;
  return index_->Lookup(key, &off);
}

Status KvStore::Scan(std::string_view start, std::optional<std::string_view> end, const KvScanFn& fn,
                     size_t limit) const {
  if (!caps_.ordered) return Status::NotSupported(caps_.kind + " is a hash index: it has no key order to scan");
  if (start.size() > kMaxKeyLen || (end && end->size() > kMaxKeyLen))
    return Status::InvalidArgument("scan bound longer than " + std::to_string(kMaxKeyLen) + " bytes");
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  if (limit == 0 || (end && CompareKeys(start, *end) >= 0)) return Status::OK();
  Status bad;
  size_t n = 0;
  // Index::Scan's end is inclusive; the end key itself is skipped here. The whole scan is one
  // epoch of the pool: every value block it passes to fn stays allocated until it ends (and so
  // does every block retired meanwhile: a long scan holds back reclamation).
  sync::EpochGuard eg(*sync_->values);
  const std::string_view e = end ? *end : std::string_view();
  WORT_RETURN_IF_ERROR(index_->Scan(start, end ? &e : nullptr, ~size_t{0}, [&](std::string_view k, uint64_t off) {
    if (end && k == *end) return false;
    std::string_view v;
    bad = ValueAt(off, &v);
    if (!bad.ok()) return false;
    return fn(k, v) && ++n < limit;
  }));
  return bad;
}

// Unordered iteration (the hash kinds): an addition of its own, kept apart from Scan.
Status KvStore::ForEach(const KvScanFn& fn) const {
  if (caps_.ordered) return Scan("", std::nullopt, fn);
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  const auto* h = dynamic_cast<const hash::HashIndexBase*>(index_.get());
  if (h == nullptr) return Status::NotSupported(caps_.kind + ": no iteration");
  Status bad;
  // One epoch from before the gathering: every value block gathered stays allocated until the
  // end, even if its key is overwritten or removed meanwhile.
  sync::EpochGuard eg(*sync_->values);
  WORT_RETURN_IF_ERROR(h->ForEachRecord([&](std::string_view k, uint64_t off) {
    std::string_view v;
    bad = ValueAt(off, &v);
    return bad.ok() && fn(k, v);
  }));
  return bad;
}

Status KvStore::Count(uint64_t* n) const {
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  *n = index_->Size();
  return Status::OK();
}

KvCapabilities KvStore::Capabilities() const { return caps_; }

Status KvStore::Check(std::string* report) const {
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  WORT_RETURN_IF_ERROR(index_->Check(report));
  if (!caps_.ordered) return Status::OK();
  Status bad;
  sync::EpochGuard eg(*sync_->values);
  WORT_RETURN_IF_ERROR(index_->Scan({}, nullptr, ~size_t{0}, [&](std::string_view k, uint64_t off) {
    std::string_view v;
    bad = ValueAt(off, &v);
    if (!bad.ok() && report) *report += bad.message() + "\n";
    return bad.ok();
  }));
  return bad;
}

}  // namespace wort
