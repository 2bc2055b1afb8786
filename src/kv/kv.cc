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

#include "index/kind_ids.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort {

namespace {

constexpr size_t kHeader = 8;

bool KvKind(const IndexKind* k) {
  return k->create && k->open && k->type_id < kind_id::kTestFirst && !kind_id::IsVolatile(k->type_id);
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
  *out = std::move(st);
  return Status::OK();
}

KvStore::~KvStore() {
  Status s = Close();
  if (!s.ok() && pool_) std::fprintf(stderr, "wort: closing %s: %s\n", cfg_.path.c_str(), s.ToString().c_str());
}

Status KvStore::Close() {
  std::unique_lock<std::shared_mutex> g(mu_);
  if (!pool_) return Status::OK();
  index_.reset();
  Status s = pool_->Close();
  pool_.reset();
  return s;
}

Status KvStore::Usable() const {
  return index_ ? Status::OK() : Status::InvalidArgument("the store is closed");
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

Status KvStore::Put(std::string_view key, std::string_view value) {
  WORT_RETURN_IF_ERROR(CheckKey(key));
  if (value.size() > kMaxValueLen)
    return Status::InvalidArgument("value of " + std::to_string(value.size()) + " bytes is longer than " +
                                   std::to_string(kMaxValueLen));
  std::unique_lock<std::shared_mutex> g(mu_);
  WORT_RETURN_IF_ERROR(Usable());  // closed meanwhile
  Allocator& a = pool_->allocator();
  // 1-2: a new block, wholly persistent before anything refers to it. During the post-crash GC
  // fresh space may run out: wait for the GC once (no index lock is held here) and retry.
  uint64_t off = 0;
  Status s = a.Alloc(kHeader + value.size(), &off);
  if (s.IsPoolFull() && !pool_->recovery_done()) {
    (void)pool_->WaitForRecovery();
    s = a.Alloc(kHeader + value.size(), &off);
  }
  WORT_RETURN_IF_ERROR(s);
  char* b = pool_->at<char>(off);
  const uint64_t h = kValueMagic << 32 | value.size();
  std::memcpy(b, &h, kHeader);
  if (!value.empty()) std::memcpy(b + kHeader, value.data(), value.size());
  pm::persist(b, kHeader + value.size());
  uint64_t old = 0;
  const bool had = index_->Lookup(key, &old).ok();
  s = index_->Upsert(key, off);  // 3: COMMIT POINT (the index's publish, persisted)
  if (s.IsPoolFull() && !pool_->recovery_done()) {
    (void)pool_->WaitForRecovery();
    s = index_->Upsert(key, off);
  }
  if (!s.ok()) {
    a.Free(off);  // never published
    return s;
  }
  if (had) a.Free(old);  // 4: unreachable since the commit
  return s;
}

Status KvStore::Remove(std::string_view key) {
  WORT_RETURN_IF_ERROR(CheckKey(key));
  std::unique_lock<std::shared_mutex> g(mu_);
  WORT_RETURN_IF_ERROR(Usable());
  uint64_t old = 0;
  WORT_RETURN_IF_ERROR(index_->Lookup(key, &old));
  WORT_RETURN_IF_ERROR(index_->Remove(key));  // COMMIT POINT
  pool_->allocator().Free(old);  // unreachable since the commit
  return Status::OK();
}

Status KvStore::Get(std::string_view key, const std::function<void(std::string_view)>& fn) const {
  WORT_RETURN_IF_ERROR(CheckKey(key));
  std::shared_lock<std::shared_mutex> g(mu_);
  WORT_RETURN_IF_ERROR(Usable());
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
  std::shared_lock<std::shared_mutex> g(mu_);
  WORT_RETURN_IF_ERROR(Usable());
  uint64_t off = 0;
  return index_->Lookup(key, &off);
}

Status KvStore::Scan(std::string_view start, std::optional<std::string_view> end, const KvScanFn& fn,
                     size_t limit) const {
  if (!caps_.ordered) return Status::NotSupported(caps_.kind + " is a hash index: it has no key order to scan");
  if (start.size() > kMaxKeyLen || (end && end->size() > kMaxKeyLen))
    return Status::InvalidArgument("scan bound longer than " + std::to_string(kMaxKeyLen) + " bytes");
  std::shared_lock<std::shared_mutex> g(mu_);
  WORT_RETURN_IF_ERROR(Usable());
  if (limit == 0 || (end && CompareKeys(start, *end) >= 0)) return Status::OK();
  Status bad;
  size_t n = 0;
  // Index::Scan's end is inclusive; the end key itself is skipped here.
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

Status KvStore::Count(uint64_t* n) const {
  std::shared_lock<std::shared_mutex> g(mu_);
  WORT_RETURN_IF_ERROR(Usable());
  *n = index_->Size();
  return Status::OK();
}

KvCapabilities KvStore::Capabilities() const { return caps_; }

Status KvStore::Check(std::string* report) const {
  std::shared_lock<std::shared_mutex> g(mu_);
  WORT_RETURN_IF_ERROR(Usable());
  WORT_RETURN_IF_ERROR(index_->Check(report));
  if (!caps_.ordered) return Status::OK();
  Status bad;
  WORT_RETURN_IF_ERROR(index_->Scan({}, nullptr, ~size_t{0}, [&](std::string_view k, uint64_t off) {
    std::string_view v;
    bad = ValueAt(off, &v);
    if (!bad.ok() && report) *report += bad.message() + "\n";
    return bad.ok();
  }));
  return bad;
}

}  // namespace wort
