// The key-value store API (design, value block layout and persist order: wort/kv.h).
#include "wort/kv.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <optional>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include <unordered_map>
#include <vector>

#include "sync/sync.h"

#include "index/hash/hash_common.h"
#include "index/kind_ids.h"
#include "index/registry.h"
#include "kv/batch_log.h"
#include "pm/share.h"
#include "util/crc32c.h"
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
  // Batches (wort/kv.h, "Batches"): one at a time (the store has one batch log). `batch_ver` is
  // write-locked from before a batch's first index change until after its last: Get and Exists
  // validate against it (optimistic readers, src/sync), so they see all of a batch or none.
  std::mutex batch_mu;
  sync::VersionLock batch_ver;
  // Set when a committed batch could not be applied (out of space after its commit point): the
  // log still holds it and the next open finishes it; until then every write is refused, so
  // that no later write is overwritten by that re-application.
  std::atomic<bool> failed{false};
  // A read-only open (KvConfig::read_only): the reader table of the pool (src/pm/share.h);
  // an unregistered reader's shared flock (-1: none).
  std::unique_ptr<share::ReaderTable> readers;
  int lock_fd = -1;
  // A writable store registered in the process-wide table of open stores (kv.cc, SharedPool):
  // its pool file's (device, inode).
  bool named = false;
  std::pair<dev_t, ino_t> file{};
  ~Sync() {
    if (lock_fd >= 0) ::close(lock_fd);
  }
};

namespace {

constexpr size_t kHeader = kValueHeaderLen;

// The checksum word of a value block: CRC32C of the header word and the value's bytes.
uint64_t ValueCrc(uint64_t header, const char* v, size_t n) {
  const uint64_t c = Crc64(&header, 8);
  return Crc64(v, n, c & 0xffffffffu) & 0xffffffffu;
}

Status Failed() {
  return Status::IOError(
      "a committed batch could not be applied (the pool ran out of space): writes are refused until the store is "
      "reopened, which finishes the batch");
}

// A VersionLock used as a plain lock (the key lock table's words); waits by backing off.
void LockWord(sync::VersionLock& l) {
  for (int a = 0;; a = std::min(a + 1, 16)) {
    const uint64_t v = l.Load();
    if (!sync::VersionLock::IsLocked(v) && l.UpgradeToWriteLock(v)) return;
    sync::Backoff(a);
  }
}

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
sync::VersionLock& KeyWord(KvStore::Sync& s, std::string_view key) {
  // VersionLockTable mixes (word >> 6): shift the hash so that all of its low bits count.
  return s.key_locks.For(static_cast<uint64_t>(std::hash<std::string_view>{}(key)) << 6);
}

class KeyGuard {
 public:
  KeyGuard(KvStore::Sync& s, std::string_view key) : l_(KeyWord(s, key)) { LockWord(l_); }
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

// Kinds a reader in another process can read beside a live writer: the whole index is in the
// pool (wort/kv.h, "Read-only opens and readers in other processes").
const char* SharedReadRefusal(uint32_t type) {
  switch (type) {
    case kind_id::kWort:
    case kind_id::kWoart:
    case kind_id::kArtCow:
    case kind_id::kRoart:
    case kind_id::kFastFair:
    case kind_id::kWbTree:
    case kind_id::kWbTreeSlot:
    case kind_id::kB3Tree:
    case kind_id::kCceh:
    case kind_id::kCcehCow:
      return nullptr;
    case kind_id::kFpTree:
    case kind_id::kNvTree:
      return "its inner nodes live in the writing process's DRAM (rebuilt at each open), so another process "
             "cannot follow the writer's changes";
    default:
      return "its table is not validated for readers in other processes (a writer moves entries in place)";
  }
}

// Runs `f` as one read of a reader in another process: retried until no write overlapped it.
template <class F>
Status SharedRead(share::ReaderTable& t, F&& f) {
  for (int failed = 0;; ++failed) {
    share::ReaderTable::Read r(t);
    WORT_RETURN_IF_ERROR(r.Begin(failed));
    Status s = f();
    if (r.Valid()) return s;
  }
}

std::string KindList() {
  std::string s;
  for (const std::string& k : KvKinds()) s += (s.empty() ? "" : ", ") + k;
  return s;
}

}  // namespace

namespace {

Status Mismatch(const KvConfig& cfg, const IndexKind* want, uint32_t type, KeyType key_type, bool have_key_type) {
  const IndexKind* k = FindIndexKindById(type);
  if (!k || !KvKind(k))
    return Status::InvalidArgument("root '" + cfg.name + "' of " + cfg.path + " is not a key-value store");
  if (want && want != k)
    return Status::InvalidArgument("store '" + cfg.name + "' of " + cfg.path + " is a " + k->name + " store, not " +
                                   cfg.kind);
  if (have_key_type && key_type != cfg.key_type)
    return Status::InvalidArgument("store '" + cfg.name + "' of " + cfg.path + " has " +
                                   (key_type == KeyType::kU64 ? "8-byte integer" : "byte-string") + " keys");
  return Status::OK();
}

// The read-only check of Open (see there). Writes nothing to the file.
Status Probe(const KvConfig& cfg, const IndexKind* want) {
  PoolOptions ro;
  ro.read_only = true;
  ro.background_recovery = false;
  std::unique_ptr<Pool> p;
  // A file the read-only open refuses (not a pool, a bad header, a directory) is left to the
  // writable open: it refuses the same files, with the same or a more precise error (a
  // directory is an IOError there), before it writes anything.
  if (!Pool::Open(cfg.path, ro, &p).ok()) return Status::OK();
  RootInfo root;
  if (!p->FindRoot(cfg.name, &root).ok()) {
    if (!cfg.create_if_missing) return Status::NotFound("no store '" + cfg.name + "' in " + cfg.path);
    if (!want) return Status::InvalidArgument("no index kind given for the new store '" + cfg.name + "'");
    return Status::OK();
  }
  WORT_RETURN_IF_ERROR(Mismatch(cfg, want, root.type, cfg.key_type, false));
  std::unique_ptr<Index> idx;
  if (OpenIndex(*p, cfg.name, &idx).ok()) WORT_RETURN_IF_ERROR(Mismatch(cfg, want, root.type, idx->key_type(), true));
  return Status::OK();
}

}  // namespace

namespace {
// The pools this process has open for writing through stores, by (device, inode): a second
// store of one pool shares it (a second Pool::Open would be refused Busy: one writer per pool).
std::mutex g_pools_mu;
std::map<std::pair<dev_t, ino_t>, std::weak_ptr<Pool>>& OpenPools() {
  static auto* m = new std::map<std::pair<dev_t, ino_t>, std::weak_ptr<Pool>>();
  return *m;
}
// The stores open for writing in this process: (device, inode, store name). A second open of
// one is refused before anything is written (one handle per index, src/index/registry.h).
std::set<std::tuple<dev_t, ino_t, std::string>>& OpenStores() {
  static auto* m = new std::set<std::tuple<dev_t, ino_t, std::string>>();
  return *m;
}

Status SharedPool(const KvConfig& cfg, const PoolOptions& po, bool exists, std::shared_ptr<Pool>* out,
                  KvStore::Sync* sync) {
  std::lock_guard<std::mutex> g(g_pools_mu);
  struct stat sb;
  if (exists && ::stat(cfg.path.c_str(), &sb) == 0) {
    if (OpenStores().count({sb.st_dev, sb.st_ino, cfg.name}))
      return Status::Busy("store '" + cfg.name + "' of " + cfg.path +
                          " is already open in this process: use that handle from every thread (or close it first)");
    auto it = OpenPools().find({sb.st_dev, sb.st_ino});
    if (it != OpenPools().end()) {
      if (std::shared_ptr<Pool> p = it->second.lock()) {
        if (p->durability() == Durability::kFileSync && cfg.sync != SyncMode::kMsync)
          return Status::InvalidArgument("pool " + cfg.path + " is open in this process with sync mode msync; open its other stores with it too");
        if (cfg.sync == SyncMode::kMsync && p->durability() == Durability::kProcessCrash)
          return Status::InvalidArgument("pool " + cfg.path + " is open in this process without sync mode msync; open its other stores the same way");
        *out = std::move(p);
        OpenStores().insert({sb.st_dev, sb.st_ino, cfg.name});
        sync->named = true;
        sync->file = {sb.st_dev, sb.st_ino};
        return Status::OK();
      }
    }
  }
  std::unique_ptr<Pool> p;
  WORT_RETURN_IF_ERROR(exists ? Pool::Open(cfg.path, po, &p) : Pool::Create(cfg.path, po, &p));
  if (::stat(cfg.path.c_str(), &sb) == 0) {
    std::erase_if(OpenPools(), [](const auto& e) { return e.second.expired(); });
    std::shared_ptr<Pool> sp(std::move(p));
    OpenPools()[{sb.st_dev, sb.st_ino}] = sp;
    OpenStores().insert({sb.st_dev, sb.st_ino, cfg.name});
    sync->named = true;
    sync->file = {sb.st_dev, sb.st_ino};
    *out = std::move(sp);
  } else {
    *out = std::move(p);
  }
  return Status::OK();
}

// Drops a store's reference to its pool; the last one closes it (and returns its status).
Status ReleasePool(std::shared_ptr<Pool>& pool, KvStore::Sync& sync, const std::string& name) {
  std::lock_guard<std::mutex> g(g_pools_mu);
  if (sync.named) OpenStores().erase({sync.file.first, sync.file.second, name});
  sync.named = false;
  Status s;
  if (pool.use_count() == 1) s = pool->Close();
  pool.reset();
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
  if (cfg.read_only) {
    WORT_RETURN_IF_ERROR(st->OpenReadOnly(want));
    *out = std::move(st);
    return Status::OK();
  }
  PoolOptions po;
  po.max_size = cfg.size;  // the size limit (0: none); see PoolOptions::max_size
  po.background_recovery = true;
  po.sync = cfg.sync == SyncMode::kMsync;
  struct stat sb;
  const bool exists = ::stat(cfg.path.c_str(), &sb) == 0;
  if (!exists && !cfg.create_if_missing) return Status::NotFound("no pool at " + cfg.path);
  if (!exists && cfg.size != 0 && cfg.size < 2 * Pool::kChunkSize)
    return Status::InvalidArgument("pool size " + std::to_string(cfg.size) + " is too small (at least 2 MiB)");
  // A refused open writes nothing: an open for writing stores the header's clean flag and
  // generation, and may run recovery, so every refusal that depends on the pool's contents is
  // decided first on a read-only open (no lock, PROT_READ, no recovery). A file that is not a
  // pool, of another layout version or with a bad header is refused by it too; a pool that a
  // writer holds (Busy) is refused by the writable open before it writes. Only definite
  // mismatches are refused here; anything the probe cannot decide is left to the open below.
  if (exists) WORT_RETURN_IF_ERROR(Probe(cfg, want));
  WORT_RETURN_IF_ERROR(SharedPool(cfg, po, exists, &st->pool_, st->sync_.get()));

  IndexOptions io;
  io.key_type = cfg.key_type;
  io.values_are_blocks = true;
  RootInfo root;
  // Readers in other processes: the index's open (its recovery) and the batch log's are writes.
  share::WriteSection ws(st->pool_->share_writer());
  if (st->pool_->FindRoot(cfg.name, &root).ok()) {
    WORT_RETURN_IF_ERROR(OpenIndex(*st->pool_, cfg.name, &st->index_));
    WORT_RETURN_IF_ERROR(Mismatch(cfg, want, root.type, st->index_->key_type(), true));
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
  WORT_RETURN_IF_ERROR(st->OpenBatchLog(/*create=*/false));
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
  Status s = ReleasePool(pool_, *sync_, cfg_.name);
  sync_->readers.reset();
  return s;
}

Status KvStore::OpenReadOnly(const IndexKind* want) {
  const KvConfig& cfg = cfg_;
  PoolOptions po;
  po.read_only = true;
  po.background_recovery = false;
  struct stat sb;
  if (::stat(cfg.path.c_str(), &sb) != 0) return Status::NotFound("no pool at " + cfg.path);
  {
    std::unique_ptr<Pool> p;
    WORT_RETURN_IF_ERROR(Pool::Open(cfg.path, po, &p));
    pool_ = std::move(p);
  }
  WORT_RETURN_IF_ERROR(share::ReaderTable::Attach(cfg.path, pool_->base(), &sync_->readers));
  const uint64_t writer = share::LiveWriter(pool_->base());
  if (!sync_->readers->registered()) {
    // No slot can be written: keep writers out for as long as this reader reads (a shared flock
    // beside their exclusive one), and refuse while one has the pool open.
    sync_->lock_fd = ::open(cfg.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (sync_->lock_fd < 0 || ::flock(sync_->lock_fd, LOCK_SH | LOCK_NB) != 0)
      return Status::Busy("cannot read " + cfg.path + " beside its writer" +
                          (writer ? " (pid " + std::to_string(writer) + ")" : std::string()) +
                          ": this process cannot write the file, so it cannot take a slot in the pool's reader table "
                          "(the writer could free what it reads)");
  }
  if (!pool_->opened_clean() && writer == 0)
    return Status::Busy("pool needs recovery: " + cfg.path +
                        " was not closed cleanly and no process has it open for writing; a read-only open does not "
                        "recover: open it for writing once (any write-capable open recovers it)");
  RootInfo root;
  if (!pool_->FindRoot(cfg.name, &root).ok()) return Status::NotFound("no store '" + cfg.name + "' in " + cfg.path);
  WORT_RETURN_IF_ERROR(Mismatch(cfg, want, root.type, cfg.key_type, false));
  if (const char* why = writer ? SharedReadRefusal(root.type) : nullptr) {
    const IndexKind* k = FindIndexKindById(root.type);
    return Status::NotSupported("store '" + cfg.name + "' is a " + (k ? k->name : "?") +
                                " store: it cannot be read by another process while pid " + std::to_string(writer) +
                                " writes it: " + why);
  }
  // The index's open reads its root: one validated read (retried if a write overlapped it).
  WORT_RETURN_IF_ERROR(SharedRead(*sync_->readers, [&] {
    index_.reset();
    return OpenIndex(*pool_, cfg.name, &index_);
  }));
  WORT_RETURN_IF_ERROR(Mismatch(cfg, want, root.type, index_->key_type(), true));
  const IndexKind* k = FindIndexKind(index_->kind());
  KvCapabilities& c = caps_;
  c.kind = std::string(index_->kind());
  c.description = k->description;
  c.ordered = k->ordered;
  c.key_type = index_->key_type();
  c.max_key_len = c.key_type == KeyType::kU64 ? 8 : kMaxKeyLen;
  c.sync = cfg.sync;
  c.durability = pool_->durability();
  c.parallel_writes = false;
  c.read_only = true;
  sync_->values = &pool_->allocator().epoch();
  return Status::OK();
}

namespace {
Status ReadOnlyStore() { return Status::InvalidArgument("the store is open read-only: no writes"); }
}  // namespace

Status KvStore::CheckKey(std::string_view key) const {
  if (caps_.key_type == KeyType::kU64 && key.size() != 8)
    return Status::InvalidArgument("this store takes 8-byte keys; got " + std::to_string(key.size()) + " bytes");
  if (key.size() > kMaxKeyLen)
    return Status::InvalidArgument("key of " + std::to_string(key.size()) + " bytes is longer than " +
                                   std::to_string(kMaxKeyLen));
  return Status::OK();
}

namespace {
// The value of the block at `off`, its checksum verified; Corruption otherwise.
Status ValueBlockAt(const Pool& pool, uint64_t off, std::string_view* v) {
  if (off < pool.heap_offset() || !pool.contains(off, kHeader))
    return Status::Corruption("value offset " + std::to_string(off) + " lies outside the pool's heap");
  const uint64_t h = pm::load8(pool.at<uint64_t>(off));
  const uint64_t len = h & 0xffffffffu;
  if ((h >> 32) != kValueMagic || len > kMaxValueLen || !pool.contains(off + kHeader, len))
    return Status::Corruption("the block at " + std::to_string(off) + " is not a value block");
  const char* b = pool.at<char>(off + kHeader);
  if (pm::load8(pool.at<uint64_t>(off + 8)) != ValueCrc(h, b, len))
    return Status::Corruption("the value block at " + std::to_string(off) + " (" + std::to_string(len) +
                              " bytes) fails its checksum: its bytes were changed on the media");
  *v = std::string_view(b, len);
  return Status::OK();
}
}  // namespace

Status KvStore::ValueAt(uint64_t off, std::string_view* v) const {
  return ValueBlockAt(*pool_, off, v);
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

Status KvStore::NewValueBlock(std::string_view value, uint64_t* out, size_t block_size) {
  // No lock is held: when space runs out, FreeUp may wait for the GC or for a grace period.
  Allocator& a = pool_->allocator();
  uint64_t off = 0;
  bool reclaimed = false;
  Status s;
  do {
    s = a.Alloc(std::max(block_size, kHeader + value.size()), &off);
  } while (s.IsPoolFull() && FreeUp(&reclaimed));
  WORT_RETURN_IF_ERROR(s);
  char* b = pool_->at<char>(off);
  const uint64_t h = kValueMagic << 32 | value.size();
  const uint64_t crc = ValueCrc(h, value.data(), value.size());
  std::memcpy(b, &h, 8);
  std::memcpy(b + 8, &crc, 8);
  if (!value.empty()) std::memcpy(b + kHeader, value.data(), value.size());
  pm::persist(b, kHeader + value.size());
  *out = off;
  return Status::OK();
}

Status KvStore::Put(std::string_view key, std::string_view value) {
  WORT_RETURN_IF_ERROR(CheckKey(key));
  if (value.size() > kMaxValueLen)
    return Status::InvalidArgument("value of " + std::to_string(value.size()) + " bytes is longer than " +
                                   std::to_string(kMaxValueLen));
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  if (cfg_.read_only) return ReadOnlyStore();
  if (sync_->failed.load()) return Failed();
  Allocator& a = pool_->allocator();
  // 1-2: a new block, wholly persistent before anything refers to it.
  uint64_t off = 0;
  Status nb = NewValueBlock(value, &off);
  // A full pool still takes an overwrite that needs no new space (issue 33): when the key's
  // value block is at least as large, the new block is taken in the old one's size, from the
  // reserve (Allocator::ReserveScope) if need be; the old block comes back after the commit.
  std::optional<Allocator::ReserveScope> reserve;
  if (nb.IsPoolFull()) {
    size_t old_usable = 0;
    {
      sync::EpochGuard eg(*sync_->values);
      uint64_t old = 0;
      if (index_->Lookup(key, &old).ok()) old_usable = a.UsableSize(old);
    }
    if (old_usable >= kHeader + value.size()) {
      reserve.emplace();
      nb = NewValueBlock(value, &off, old_usable);
    }
    if (nb.IsPoolFull())
      return Status::PoolFull(nb.message() + (old_usable == 0 ? " (a new key needs space)"
                                                               : " (the new value is larger than the old one)"));
  }
  WORT_RETURN_IF_ERROR(nb);
  bool reclaimed = false;
  Status s;
  for (;;) {
    {
      // The key's lock from the Lookup of the old block to its Retire: a second writer of the
      // key sees this one's block as its old one (no double free, no leak), and a batch holding
      // the key's word (Write) has no Put of its keys between its commit and its clear. Inside the
      // pool's epoch from before the unlink until after the Retire (the writer rule, wort/alloc.h).
      // Lookup then Upsert, not Index::Exchange (one traversal): measured, Exchange cost ~400 CPU
      // ns more per Put at 500K keys on the 2-core AMD VM (doc/concurrency.md, "Index::Exchange
      // in Put"; not understood: probably the lock-free Lookup's misses overlap the value block's
      // write-back, which the Upsert's first locked instruction waits for).
      KeyGuard kg(*sync_, key);
      sync::EpochGuard eg(*sync_->values);
      uint64_t old = 0;
      const bool had = index_->Lookup(key, &old).ok();
      bool inserted = false;
      {
        share::WriteSection ws(pool_->share_writer());  // readers in other processes retry around it
        s = index_->Upsert(key, off, &inserted);  // 3: COMMIT POINT (the index's publish, persisted)
      }
      if (s.ok()) {
        // 4: unreachable since the commit; readers may still hold it.
        if (had && !inserted) pool_->allocator().RetireAndCollect(old);
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
  if (cfg_.read_only) return ReadOnlyStore();
  if (sync_->failed.load()) return Failed();
  KeyGuard kg(*sync_, key);
  sync::EpochGuard eg(*sync_->values);
  Allocator::ReserveScope reserve;  // a delete frees more than its index may take (a smaller node)
  uint64_t old = 0;
  WORT_RETURN_IF_ERROR(index_->Lookup(key, &old));
  {
    share::WriteSection ws(pool_->share_writer());
    WORT_RETURN_IF_ERROR(index_->Remove(key));  // COMMIT POINT
  }
  pool_->allocator().RetireAndCollect(old);  // unreachable since the commit; readers may still hold it
  return Status::OK();
}

Status KvStore::Get(std::string_view key, const std::function<void(std::string_view)>& fn) const {
  WORT_RETURN_IF_ERROR(CheckKey(key));
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  if (sync_->readers) {
    // A reader beside a writer in another process: the lookup and the value's checksum, then
    // the validation; fn sees the value after it, while the read still holds the block.
    for (int failed = 0;; ++failed) {
      share::ReaderTable::Read r(*sync_->readers);
      WORT_RETURN_IF_ERROR(r.Begin(failed));
      uint64_t off = 0;
      std::string_view v;
      Status s = index_->Lookup(key, &off);
      if (s.ok()) s = ValueAt(off, &v);
      if (!r.Valid()) continue;
      WORT_RETURN_IF_ERROR(s);
      fn(v);
      return Status::OK();
    }
  }
  for (int a = 0;; a = std::min(a + 1, 16)) {
    // A batch being applied: wait outside the epoch (its writer may wait for a grace period).
    uint64_t ver;
    if (!sync_->batch_ver.ReadLockOrRestart(&ver)) {
      sync::Backoff(a);
      continue;
    }
    // The value block found is not freed before the epoch ends, even if a writer replaces it.
    sync::EpochGuard eg(*sync_->values);
    uint64_t off = 0;
    Status s = index_->Lookup(key, &off);
    if (!sync_->batch_ver.CheckOrRestart(ver)) continue;  // a batch began meanwhile: all or none of it
    WORT_RETURN_IF_ERROR(s);
    std::string_view v;
    WORT_RETURN_IF_ERROR(ValueAt(off, &v));
    fn(v);
    return Status::OK();
  }
}

Status KvStore::Get(std::string_view key, std::string* value) const {
  return Get(key, [&](std::string_view v) { value->assign(v); });
}

Status KvStore::Exists(std::string_view key) const {
  WORT_RETURN_IF_ERROR(CheckKey(key));
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  if (sync_->readers) {
    uint64_t off = 0;
    return SharedRead(*sync_->readers, [&] { return index_->Lookup(key, &off); });
  }
  for (int a = 0;; a = std::min(a + 1, 16)) {
    uint64_t ver;
    if (!sync_->batch_ver.ReadLockOrRestart(&ver)) {
      sync::Backoff(a);
      continue;
    }
    uint64_t off = 0;
    Status s = index_->Lookup(key, &off);
    if (sync_->batch_ver.CheckOrRestart(ver)) return s;
  }
}

Status KvStore::Scan(std::string_view start, std::optional<std::string_view> end, const KvScanFn& fn,
                     size_t limit) const {
  if (!caps_.ordered) return Status::NotSupported(caps_.kind + " is a hash index: it has no key order to scan");
  if (start.size() > kMaxKeyLen || (end && end->size() > kMaxKeyLen))
    return Status::InvalidArgument("scan bound longer than " + std::to_string(kMaxKeyLen) + " bytes");
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  if (limit == 0 || (end && CompareKeys(start, *end) >= 0)) return Status::OK();
  if (sync_->readers) return SharedScan(start, end, fn, limit);
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

// Scan for a reader in another process: chunks of up to 64 pairs, each one validated read
// (copies), given to fn after its validation; the next chunk starts at the last key given
// (skipped). Each pair is one the store held at some instant during the scan.
Status KvStore::SharedScan(std::string_view start, std::optional<std::string_view> end, const KvScanFn& fn,
                           size_t limit) const {
  constexpr size_t kChunk = 64;
  std::string from(start);
  bool skip_first = false;
  size_t n = 0;
  const std::string_view e = end ? *end : std::string_view();
  std::vector<std::pair<std::string, std::string>> chunk;
  for (;;) {
    bool more = false;
    WORT_RETURN_IF_ERROR(SharedRead(*sync_->readers, [&] {
      chunk.clear();
      more = false;
      Status bad;
      Status s = index_->Scan(from, end ? &e : nullptr, ~size_t{0}, [&](std::string_view k, uint64_t off) {
        if (end && k == *end) return false;
        if (skip_first && k == from) return true;
        if (chunk.size() == kChunk) {
          more = true;
          return false;
        }
        std::string_view v;
        bad = ValueAt(off, &v);
        if (!bad.ok()) return false;
        chunk.emplace_back(std::string(k), std::string(v));
        return true;
      });
      return s.ok() ? bad : s;
    }));
    for (const auto& [k, v] : chunk)
      if (!fn(k, v) || ++n >= limit) return Status::OK();
    if (!more || chunk.empty()) return Status::OK();
    from = chunk.back().first;
    skip_first = true;
  }
}

// Unordered iteration (the hash kinds): an addition of its own, kept apart from Scan.
Status KvStore::ForEach(const KvScanFn& fn) const {
  if (caps_.ordered) return Scan("", std::nullopt, fn);
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  const auto* h = dynamic_cast<const hash::HashIndexBase*>(index_.get());
  if (h == nullptr) return Status::NotSupported(caps_.kind + ": no iteration");
  if (sync_->readers) {
    // One validated read of the whole table (copies), then the pairs.
    std::vector<std::pair<std::string, std::string>> pairs;
    WORT_RETURN_IF_ERROR(SharedRead(*sync_->readers, [&] {
      pairs.clear();
      Status bad;
      Status s = h->ForEachRecord([&](std::string_view k, uint64_t off) {
        std::string_view v;
        bad = ValueAt(off, &v);
        if (!bad.ok()) return false;
        pairs.emplace_back(std::string(k), std::string(v));
        return true;
      });
      return s.ok() ? bad : s;
    }));
    for (const auto& [k, v] : pairs)
      if (!fn(k, v)) break;
    return Status::OK();
  }
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
  if (sync_->readers) {
    // The index's count is the writer's (DRAM): count the pairs instead.
    uint64_t c = 0;
    WORT_RETURN_IF_ERROR(ForEach([&](std::string_view, std::string_view) {
      ++c;
      return true;
    }));
    *n = c;
    return Status::OK();
  }
  *n = index_->Size();
  return Status::OK();
}

KvCapabilities KvStore::Capabilities() const { return caps_; }

Status KvStore::Check(std::string* report) const {
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  if (sync_->readers) {
    const size_t len = report ? report->size() : 0;
    return SharedRead(*sync_->readers, [&]() -> Status {
      if (report) report->resize(len);
      WORT_RETURN_IF_ERROR(index_->Check(report));
      RootInfo root;
      WORT_RETURN_IF_ERROR(pool_->FindRoot(cfg_.name, &root));
      uint64_t n = 0;
      return CheckValues(*pool_, cfg_.name, *index_, root.type, root.off, report, &n, nullptr);
    });
  }
  WORT_RETURN_IF_ERROR(index_->Check(report));
  RootInfo root;
  WORT_RETURN_IF_ERROR(pool_->FindRoot(cfg_.name, &root));
  sync::EpochGuard eg(*sync_->values);
  uint64_t n = 0;
  return CheckValues(*pool_, cfg_.name, *index_, root.type, root.off, report, &n, nullptr);
}

// ---- batches (wort/kv.h, "Batches"; the log's layout: kv/batch_log.h) ----------------------

void KvBatch::Put(std::string_view key, std::string_view value) {
  ops_.push_back(Op{true, std::string(key), std::string(value)});
  bytes_ += key.size() + value.size();
}

void KvBatch::Remove(std::string_view key) {
  ops_.push_back(Op{false, std::string(key), std::string()});
  bytes_ += key.size();
}

void KvBatch::Clear() {
  ops_.clear();
  bytes_ = 0;
}

Status KvStore::OpenBatchLog(bool create) {
  const std::string root = kv::BatchLogRootName(cfg_.name);
  RootInfo ri;
  if (pool_->FindRoot(root, &ri).ok()) {
    const uint64_t* h = pool_->at<uint64_t>(ri.off);
    if (ri.type != kind_id::kKvBatch || ri.off < pool_->heap_offset() || !pool_->contains(ri.off, kv::kHeadSize) ||
        pm::load8(&h[0]) != kv::kHeadMagic ||
        std::string_view(reinterpret_cast<const char*>(&h[2]), strnlen(reinterpret_cast<const char*>(&h[2]), kv::kNameBytes)) !=
            cfg_.name)
      return Status::Corruption("root '" + root + "' of " + cfg_.path + " is not the batch log of store '" + cfg_.name + "'");
    batch_head_ = ri.off;
    if (pm::load8(&h[1]) != 0) return RecoverBatch();
    return Status::OK();
  }
  if (!create) return Status::OK();
  // The head block: written and persisted, then published by the root entry (AddRoot's commit
  // word). A crash before the publish leaves an unreachable block that the GC reclaims.
  uint64_t off = 0;
  WORT_RETURN_IF_ERROR(pool_->allocator().AllocZeroed(kv::kHeadSize, &off));
  uint64_t* h = pool_->at<uint64_t>(off);
  h[0] = kv::kHeadMagic;
  h[1] = 0;
  std::memcpy(&h[2], cfg_.name.data(), std::min(cfg_.name.size(), kv::kNameBytes));
  pm::persist(h, kv::kHeadSize);
  Status s = pool_->AddRoot(root, kind_id::kKvBatch, off);
  if (!s.ok()) {
    pool_->allocator().Free(off);
    return Status(s.code(), "cannot create the batch log of store '" + cfg_.name + "': " + s.message());
  }
  batch_head_ = off;
  return Status::OK();
}

Status KvStore::ApplyRecord(uint64_t rec, bool live) {
  std::vector<kv::RecordEntry> entries;
  WORT_RETURN_IF_ERROR(kv::ReadRecord(*pool_, rec, [&](const kv::RecordEntry& e) { entries.push_back(e); }));
  Allocator& a = pool_->allocator();
  for (const kv::RecordEntry& e : entries) {
    bool reclaimed = false;
    for (;;) {
      Status s;
      {
        // Inside the pool's epoch from before the unlink until after the Retire (the writer
        // rule, wort/alloc.h). Idempotent: no key appears twice in a record, and no other write
        // of these keys runs until the commit word is cleared (their locks are held; at open
        // nothing else runs), so an entry whose key already holds its block was applied.
        sync::EpochGuard eg(*sync_->values);
        uint64_t old = 0;
        const bool had = index_->Lookup(e.key, &old).ok();
        if (e.value_off != 0) {
          if (had && old == e.value_off) break;
          s = index_->Upsert(e.key, e.value_off);
        } else {
          if (!had) break;
          s = index_->Remove(e.key);
        }
        if (s.ok()) {
          if (had) live ? a.RetireAndCollect(old) : a.Retire(old);
          break;
        }
      }
      if (!(s.IsPoolFull() && FreeUp(&reclaimed))) return s;
    }
  }
  return Status::OK();
}

Status KvStore::RecoverBatch() {
  // A batch committed before a crash (or a failed apply): finish it before the store serves.
  // The GC ends first: the record and its value blocks were allocated before it started, and
  // its visit must not race with their move from the log into the index.
  WORT_RETURN_IF_ERROR(pool_->WaitForRecovery());
  uint64_t* h = pool_->at<uint64_t>(batch_head_);
  const uint64_t rec = pm::load8(&h[1]);
  Status s = ApplyRecord(rec, /*live=*/false);
  if (!s.ok()) return Status(s.code(), "finishing the committed batch of store '" + cfg_.name + "': " + s.message());
  sync::EpochGuard eg(*sync_->values);
  pm::store8(&h[1], 0);
  pm::persist(&h[1], 8);
  pool_->allocator().Retire(rec);
  return Status::OK();
}

Status KvStore::Write(const KvBatch& batch) {
  if (batch.ops_.size() > kMaxBatchOps)
    return Status::InvalidArgument("batch of " + std::to_string(batch.ops_.size()) + " operations is larger than " +
                                   std::to_string(kMaxBatchOps));
  if (batch.bytes_ > kMaxBatchBytes)
    return Status::InvalidArgument("batch of " + std::to_string(batch.bytes_) + " bytes is larger than " +
                                   std::to_string(kMaxBatchBytes));
  for (const KvBatch::Op& o : batch.ops_) {
    WORT_RETURN_IF_ERROR(CheckKey(o.key));
    if (o.value.size() > kMaxValueLen)
      return Status::InvalidArgument("value of " + std::to_string(o.value.size()) + " bytes is longer than " +
                                     std::to_string(kMaxValueLen));
  }
  OpGuard op(*sync_);
  if (!op.open()) return Closed();
  if (cfg_.read_only) return ReadOnlyStore();
  if (sync_->failed.load()) return Failed();
  if (batch.ops_.empty()) return Status::OK();
  // The last operation of each key counts; the record names each key once.
  std::unordered_map<std::string_view, size_t> last;
  for (size_t i = 0; i < batch.ops_.size(); ++i) last[batch.ops_[i].key] = i;
  std::vector<const KvBatch::Op*> ops;
  for (size_t i = 0; i < batch.ops_.size(); ++i)
    if (last[batch.ops_[i].key] == i) ops.push_back(&batch.ops_[i]);
  Allocator& a = pool_->allocator();
  // 1. The value blocks, each persisted (private: nothing refers to them).
  std::vector<uint64_t> offs(ops.size(), 0);
  uint64_t rec = 0;
  auto free_all = [&] {
    for (uint64_t o : offs)
      if (o) a.Free(o);
    if (rec) a.Free(rec);
  };
  uint64_t bytes = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    bytes += kv::kEntryHeader + (ops[i]->key.size() + 7) / 8 * 8;
    if (!ops[i]->put) continue;
    Status s = NewValueBlock(ops[i]->value, &offs[i]);
    if (!s.ok()) {
      free_all();
      return s;
    }
  }
  // 2. The record, persisted (private too).
  {
    bool reclaimed = false;
    Status s;
    do {
      s = a.Alloc(kv::kRecordHeader + bytes, &rec);
    } while (s.IsPoolFull() && FreeUp(&reclaimed));
    if (!s.ok()) {
      rec = 0;
      free_all();
      return s;
    }
    char* r = pool_->at<char>(rec);
    char* e = r + kv::kRecordHeader;
    uint64_t pos = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      const uint64_t klen = ops[i]->key.size(), len = kv::kEntryHeader + (klen + 7) / 8 * 8;
      std::memset(e + pos, 0, len);
      std::memcpy(e + pos, &offs[i], 8);
      const uint32_t k32 = static_cast<uint32_t>(klen);
      std::memcpy(e + pos + 8, &k32, 4);
      std::memcpy(e + pos + kv::kEntryHeader, ops[i]->key.data(), klen);
      pos += len;
    }
    const uint64_t hdr[4] = {kv::kRecordMagic, ops.size(), bytes, Crc64(e, bytes)};
    std::memcpy(r, hdr, sizeof hdr);
    pm::persist(r, kv::kRecordHeader + bytes);
  }
  // One batch at a time (one log). Then the keys' writer locks, each word once, in address
  // order (a Put holds one word and waits for none while holding it: no deadlock), held until
  // the commit word is cleared: no other write of these keys runs between the commit and the
  // clear, so re-applying the record after a crash overwrites nothing newer.
  std::lock_guard<std::mutex> bg(sync_->batch_mu);
  if (batch_head_ == 0) {
    Status s = OpenBatchLog(/*create=*/true);
    if (!s.ok()) {
      free_all();
      return s;
    }
  }
  std::vector<sync::VersionLock*> words;
  for (const KvBatch::Op* o : ops) words.push_back(&KeyWord(*sync_, o->key));
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  for (sync::VersionLock* w : words) LockWord(*w);
  uint64_t* head = pool_->at<uint64_t>(batch_head_);
  // Readers (Get, Exists) wait from here to the end of the apply: they see all or nothing.
  sync_->batch_ver.WriteLock();
  // Readers in other processes too: all of the batch or none of it.
  std::optional<share::WriteSection> ws(std::in_place, pool_->share_writer());
  // 3. COMMIT POINT: one 8-byte store of the record's offset, persisted.
  pm::store8(&head[1], rec);
  pm::persist(&head[1], 8);
  // 4. Apply: each entry as a Put or Remove would (old blocks retired).
  Status s = ApplyRecord(rec, /*live=*/true);
  if (s.ok()) {
    // 5. Clear the commit word (persisted), then retire the record: inside the pool's epoch
    // from before the unlink until after the Retire.
    sync::EpochGuard eg(*sync_->values);
    pm::store8(&head[1], 0);
    pm::persist(&head[1], 8);
    a.RetireAndCollect(rec);
  } else {
    // Committed but not applied (out of space): the log keeps it; the next open finishes it.
    sync_->failed.store(true);
  }
  ws.reset();
  sync_->batch_ver.WriteUnlock();
  for (sync::VersionLock* w : words) w->WriteUnlock();
  if (!s.ok()) return Status(s.code(), "batch committed but not applied (" + s.message() + "): reopen the store to finish it");
  return Status::OK();
}

// ---- value checks ----------------------------------------------------------------------------

Status KvStore::CheckValues(const Pool& pool, std::string_view name, const Index& index, uint32_t type,
                            uint64_t root_off, std::string* report, uint64_t* values, bool* is_store) {
  // Every value is checked as a value block when the index is known to be a store's (is_store
  // null: KvStore::Check); otherwise (`wort pool check`, which sees only an index of block
  // values) the root is a store's if it has a batch log or any value block carries kValueMagic,
  // and then every value that is not a whole value block is reported.
  *values = 0;
  uint64_t other = 0;
  std::vector<std::string> others;
  Status bad;
  auto one = [&](uint64_t off, bool known) {
    std::string_view v;
    const bool magic = off >= pool.heap_offset() && pool.contains(off, kHeader) &&
                       (pm::load8(pool.at<uint64_t>(off)) >> 32) == kValueMagic;
    if (!known && !magic) {
      ++other;
      if (others.size() < 16) others.push_back("value " + std::to_string(off) + " is not a value block\n");
      return;
    }
    Status s = ValueBlockAt(pool, off, &v);
    ++*values;
    if (!s.ok()) {
      if (report) *report += s.message() + "\n";
      if (bad.ok()) bad = s;
    }
  };
  const bool known = is_store == nullptr;
  if (index.Scan({}, nullptr, ~size_t{0}, [&](std::string_view, uint64_t off) {
        one(off, known);
        return true;
      }).code() == Code::kNotSupported) {
    // A hash kind has no scan: every block its visit reports that has a value block's header
    // word is a value block (the kinds' own blocks never start with kValueMagic's word; a value
    // block whose magic was overwritten is not found this way).
    const IndexKind* k = FindIndexKindById(type);
    if (!k || !k->visit) return Status::NotSupported("cannot visit the blocks of index kind id " + std::to_string(type));
    *values = 0;
    k->visit(pool, root_off, [&](uint64_t off) {
      if (off < pool.heap_offset() || !pool.contains(off, kHeader)) return;
      if ((pm::load8(pool.at<uint64_t>(off)) >> 32) == kValueMagic) one(off, true);
    });
    other = 0;
  }
  if (!known) {
    *is_store = *values > 0 || pool.FindRoot(kv::BatchLogRootName(name), nullptr).ok();
    if (!*is_store) return Status::OK();
    if (other > 0) {
      if (report)
        for (const std::string& o : others) *report += o;
      if (bad.ok()) bad = Status::Corruption(std::to_string(other) + " values of store '" + std::string(name) +
                                             "' are not value blocks");
    }
  }
  return bad;
}

}  // namespace wort
