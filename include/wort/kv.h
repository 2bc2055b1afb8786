// wort/kv.h - the key-value store API: byte-string keys -> byte-string values in a pool, over
// any persistent index kind. This is the API to start with; wort/index.h (8-byte values) is the
// fast path the benchmarks use.
//
//   wort::KvConfig cfg;
//   cfg.path = "/dev/shm/data.pool";
//   cfg.kind = "woart";
//   std::unique_ptr<wort::KvStore> db;
//   wort::Status s = wort::KvStore::Open(cfg, &db);
//   if (s.ok()) s = db->Put("key", "value");
//   std::string v;
//   if (s.ok()) s = db->Get("key", &v);
//
// Design
// ------
// A store is one named root of a pool: an index of the chosen kind created with
// IndexOptions::values_are_blocks, mapping key -> offset of a *value block*. A value block is a
// pool block holding a 16-byte header (kValueMagic << 32 | length, then the CRC32C of that
// word and the value) and then the value's bytes. Every value has its own block; the index's visit function reports it, so post-crash
// recovery keeps it (the allocator's reachability contract, wort/alloc.h).
//
// Persist order (the same as the server's records, src/server/store.h):
//   Put      1. Alloc a block, write header + value          (private: nothing refers to it)
//            2. pm::persist(block)                            (wholly durable)
//            3. index->Upsert(key, block)   <- COMMIT POINT   (the index's own publish, persisted)
//            4. Retire(old block), if the key had one         (unlink before free: contract R2;
//                                                              freed once no reader can hold it)
//   Remove   1. index->Remove(key)          <- COMMIT POINT
//            2. Retire(old block)
// A crash before the commit point leaves an unreferenced new block, a crash after it an
// unreferenced old block (retired or not yet freed): the post-crash GC reclaims both (R3). So
// after a crash at any instant every key points at a whole, allocated value block; an
// acknowledged write is present; the write in progress is wholly present or wholly absent
// (checked by the crash explorer, crash/kv_explorer.h, and the kill test).
//
// Batches (Write(KvBatch)): all-or-nothing under a crash at any instant, through a redo log
// per store (src/kv/batch_log.h: a root of its own, created at the first batch, whose head
// block holds one 8-byte commit word). Persist order:
//   1. Each put's value block: Alloc, write, pm::persist      (private, as Put's 1-2)
//   2. The batch record (each key once, with its block's offset or 0 for a remove): Alloc,
//      write with its checksum, pm::persist                    (private)
//   3. head.commit := record offset, persisted   <- COMMIT POINT (one 8-byte store)
//   4. Apply each entry as Put's 3-4 / Remove would (Upsert or Remove, then Retire the old block)
//   5. head.commit := 0, persisted; Retire(record)
// Invariants: while the commit word is set it names a whole record whose blocks are whole; the
// log's visit reports them, so recovery keeps them. A crash before 3 leaves unreferenced blocks
// (the GC reclaims them: nothing of the batch is visible); a crash after 3 is finished by the
// next Open, before it returns, by re-applying the record: an entry whose key already holds its
// block is skipped, so re-applying is idempotent (each key appears once, and the batch holds
// its keys' writer locks from before 3 to after 5, so no newer write of them can be overwritten).
// Concurrency: one batch at a time per store. Get and Exists see all of a batch or none of it
// (they validate against a store-wide version word that a batch write-locks from 3 to 5, and
// wait while it is held - for as long as the batch takes to apply). Scan and Count may see a
// batch partly applied (each pair whole); after Write returns, all of it is visible. A Put or
// Remove of a key in the batch waits for the batch. If applying fails after the commit point
// (the pool ran out of space for the index), Write returns the error, the batch stays in the
// log, and the store refuses writes until it is reopened (the open finishes the batch).
// Limits: kMaxBatchOps operations and kMaxBatchBytes bytes of keys and values.
//
// Integrity: every value block carries a CRC32C of its header word and bytes; Get, Scan and
// Check verify it on every read and return Corruption (never the wrong bytes) when it does not
// match. `wort pool check` verifies every value of every store.
//
// A refused open writes nothing: Open decides every refusal that depends on the pool (wrong
// kind, key type, absent store, not a pool, bad header, old layout version) on a read-only open
// before it opens the pool for writing, and a pool held by another writer is refused (Busy)
// before anything is written; the file is left byte-identical.

// Read-only opens and readers in other processes (LMDB's model; doc/concurrency.md, "Readers in
// other processes"): one process opens a pool for writing (a second writer gets Busy naming the
// holder's pid); any number of processes open its stores with KvConfig::read_only beside it.
//   - A reader opens the file O_RDONLY and maps it PROT_READ; it writes nothing but its slot in
//     the pool's reader table (header page, src/pm/share.h), through a one-page writable mapping
//     - and not even that when it cannot open the file for writing (a read-only file or
//     directory): such an unregistered reader holds a shared flock instead, so no writer can
//     open the pool while it reads (and it is refused while a writer has the pool open).
//   - What it sees: every Get/Exists returns a value acknowledged at some instant during the
//     call (or NotFound if the key was absent at some such instant), with its checksum verified;
//     a Scan gives pairs in order, each one the store held at some instant during the scan
//     (chunks of 64 pairs, each validated as a Get). A batch (Write) is seen all or nothing by
//     Get/Exists/Scan chunks. Reads never block the writer: a read that overlapped a write is
//     retried; it waits only while a write of the index is in progress.
//   - Reclamation: a block the writer unlinks is not freed while a reader that may have found it
//     is inside its read (the reader table's epochs); a reader killed (kill -9) is detected by its
//     pid being gone or reused (start time) and its slot cleared.
//   - Kinds: every ordered kind whose whole index is in the pool (wort, woart, artcow, roart,
//     fastfair, wbtree, wbtree-slot, b3tree) and cceh, cceh-cow. fptree and nvtree (inner nodes
//     in the writer's DRAM) and the static hash tables are refused (NotSupported) while a writer
//     has the pool open; with no writer they open read-only too.
//   - Recovery: a read-only open never recovers. A pool that was not closed cleanly and has no
//     live writer is refused (Busy, "pool needs recovery"): open it for writing once. A reader
//     that was open when the writer died keeps reading the image the writer left (as a crash
//     left it: every acknowledged write present; a batch being applied may be seen in part);
//     the next writer's open recovers while readers read on.
//   - Only KvStore writes are bracketed for readers in other processes: a process writing the
//     pool through wort::Index directly, or `wort serve`, must not have other-process readers.

// Durability (KvCapabilities::durability): every write that returned OK has been flushed and
// fenced (wort/pm.h), so it survives a crash of the process. It survives a power failure or an
// OS crash too when the pool is mapped with MAP_SYNC (a DAX filesystem on persistent memory),
// or, on a file system without DAX, with SyncMode::kMsync (the pool's sync mode: each fence
// msyncs what it flushed; a system call per fence). Capabilities().durability names the level.
//
// Thread safety: every method may be called from many threads (doc/concurrency.md, "The
// key-value store"). No store-wide lock:
//   - Get, Exists, Scan and Count take no lock of the store. A value block is read inside an
//     epoch of the pool (src/sync/epoch.h); a block replaced or removed meanwhile is retired
//     (Allocator::Retire) and freed only after every reader that could hold it has left its
//     epoch, so a reader never sees a freed or torn value. A Get or Scan returns, for each key,
//     a value that was current at some instant during the call (a Scan is not a snapshot:
//     writes during it may or may not be seen, but each pair is whole).
//   - Put and Remove hold one word of a per-key lock table (2^14 words, as `wort serve`'s item
//     writers) from the Lookup of the old value block to its Retire: two writers of one key are
//     ordered (the later one retires the earlier one's block; no block is freed twice or
//     leaked); writers of different keys run in parallel as far as the index lets them
//     (KvCapabilities::parallel_writes: the radix trees, fastfair, cceh, cceh-cow; the other
//     kinds take one writer at a time inside the index).
//   - Close may run beside other calls: it marks the store closed, waits until every call
//     that began before has ended (a grace period of a store-owned epoch that every call
//     enters), then closes the pool; calls that begin later return InvalidArgument. Close
//     (and the destructor) must not be called from inside a Get or Scan callback.
//   - A Scan holds one epoch for its whole run: blocks retired during a long scan are freed
//     after it ends. A Get or Scan callback may call Get, Exists or Scan; it should not write to
//     the same store (a write is safe, but a writer that runs out of space cannot wait for the
//     grace period from inside a callback and returns PoolFull sooner).
// Errors: every call returns a Status (wort/status.h); nothing throws, bad input never aborts.
// Output parameters are untouched unless the call returns OK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wort/export.h"
#include "wort/key.h"
#include "wort/pool.h"
#include "wort/status.h"

namespace wort {

class Pool;
class Index;
struct IndexKind;

// Longest value a store accepts (InvalidArgument beyond). Values larger than
// Allocator::kMaxSmall take whole 1 MiB chunks.
inline constexpr size_t kMaxValueLen = 64u << 20;  // 64 MiB

// A value block (pool layout version 2) starts with two 8-byte words: kValueMagic << 32 |
// length, then the CRC32C of that first word and the value's bytes (low 32 bits; the high 32
// are zero). Layout version 1 had one word and magic "WKV1" and no checksum: such pools are
// refused at open (wort/pool.h).
inline constexpr uint64_t kValueMagic = 0x574b5632;  // "WKV2"
inline constexpr size_t kValueHeaderLen = 16;

// Largest batch (KvBatch) KvStore::Write accepts: operations, and bytes of keys and values
// together. InvalidArgument beyond (nothing is written).
inline constexpr size_t kMaxBatchOps = 1u << 20;
inline constexpr uint64_t kMaxBatchBytes = 1ull << 30;  // 1 GiB

enum class SyncMode : uint8_t {
  kPersist = 0,  // flush + fence before a write returns (the default)
  kMsync = 1,    // the pool's sync mode (PoolOptions::sync): every fence also msyncs the pages
                 // flushed since the previous one; power-fail durable on a file system without DAX
};

// Durability (wort/pool.h): the level of the store's pool, as Pool::durability() reports it.

struct KvConfig {
  std::string path;                 // the pool file
  // The pool's size limit (PoolOptions::max_size): 0, none (it grows to its 1 TiB capacity as
  // the disk allows). A new store's file starts at about 1 MiB allocated. Opening with another
  // non-zero size replaces the limit (a pool grows past the size it was created with).
  uint64_t size = 0;
  std::string kind = "woart";       // index kind of a new store; "" = any when opening
  std::string name = "kv";          // root name of the store in the pool (several per pool; several
                                    // stores of one pool may be open at once in one process: they
                                    // share the pool, which the last one's Close closes)
  KeyType key_type = KeyType::kBytes;  // kU64: keys are exactly 8 bytes (EncodeU64)
  SyncMode sync = SyncMode::kPersist;
  bool create_if_missing = true;    // else NotFound when the pool or the store is absent
  // Open read-only (see "Read-only opens and readers in other processes" above): nothing is
  // written to the pool's data; Put, Remove and Write return InvalidArgument. Works beside one
  // writing process, and on a file or directory this process cannot write.
  bool read_only = false;
};

struct KvCapabilities {
  std::string kind;
  std::string description;
  bool ordered = false;        // Scan and ordered iteration are supported
  bool thread_safe = true;     // methods may be called from many threads
  bool parallel_writes = false;  // writers of different keys run in parallel (no: the index
                                 // takes one writer at a time; readers never wait either way)
  KeyType key_type = KeyType::kBytes;
  size_t max_key_len = kMaxKeyLen;
  size_t max_value_len = kMaxValueLen;
  Durability durability = Durability::kProcessCrash;
  SyncMode sync = SyncMode::kPersist;
  bool read_only = false;  // opened with KvConfig::read_only
};

// The index kinds a store can use (persistent kinds; the volatile references are excluded).
WORT_EXPORT std::vector<std::string> KvKinds();

// Called for each pair in ascending key order; return false to stop. The views are valid only
// during the call.
using KvScanFn = std::function<bool(std::string_view key, std::string_view value)>;

// A batch of puts and removes that KvStore::Write applies all-or-nothing (as LMDB's write
// transaction or RocksDB's WriteBatch). Operations on one key: the last one counts. A remove
// of an absent key is no error. A batch is a plain DRAM object: build it in one thread.
class WORT_EXPORT KvBatch {
 public:
  void Put(std::string_view key, std::string_view value);
  void Remove(std::string_view key);
  void Clear();
  size_t size() const { return ops_.size(); }  // operations recorded
  uint64_t bytes() const { return bytes_; }    // key and value bytes recorded

 private:
  friend class KvStore;
  struct Op {
    bool put;
    std::string key, value;
  };
  std::vector<Op> ops_;
  uint64_t bytes_ = 0;
};

class WORT_EXPORT KvStore {
 public:
  // Opens the store `cfg.name` of the pool at `cfg.path`, creating the pool and/or the store
  // when absent (unless !create_if_missing). Opening an existing store of another kind than a
  // non-empty cfg.kind, or of another key type, is InvalidArgument. After a crash the pool's
  // GC runs in the background; the store serves at once.
  static Status Open(const KvConfig& cfg, std::unique_ptr<KvStore>* out);
  ~KvStore();  // Close(); errors go to stderr
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  // Clean shutdown of the pool. Every other call after it returns InvalidArgument.
  Status Close();

  // Sets key -> value (insert or overwrite; failure-atomic). PoolFull when out of space (then
  // nothing changed).
  Status Put(std::string_view key, std::string_view value);
  // Copies the value into *value. NotFound if absent.
  Status Get(std::string_view key, std::string* value) const;
  // Calls fn with a view of the value (no copy; valid only during the call). NotFound if absent.
  Status Get(std::string_view key, const std::function<void(std::string_view)>& fn) const;
  // OK if present, NotFound if absent.
  Status Exists(std::string_view key) const;
  // Removes the key. NotFound if absent.
  Status Remove(std::string_view key);
  // Applies the batch all-or-nothing, failure-atomically (see "Batches" above). OK: all of it is
  // durable and visible. InvalidArgument (a bad key or value, more than kMaxBatchOps operations
  // or kMaxBatchBytes bytes) or PoolFull: nothing changed. An empty batch is OK and writes
  // nothing.
  Status Write(const KvBatch& batch);
  // Pairs with start <= key < end (end: none = to the last key), ascending, until fn returns
  // false or `limit` pairs were given. NotSupported for unordered (hash) kinds.
  Status Scan(std::string_view start, std::optional<std::string_view> end, const KvScanFn& fn,
              size_t limit = ~size_t{0}) const;
  // Every pair until fn returns false: in ascending key order for an ordered kind (as Scan), in
  // no particular order for a hash kind, whose keys are gathered under the table's locks first
  // (writers wait meanwhile; memory for every key) and then given with their values. Each pair
  // given is one the store held at some instant during the call.
  Status ForEach(const KvScanFn& fn) const;
  // Number of keys.
  Status Count(uint64_t* n) const;

  KvCapabilities Capabilities() const;
  // Verifies the index (Index::Check) and that every key points at a valid value block whose
  // checksum matches (hash kinds: every value block the index reaches).
  Status Check(std::string* report) const;
  // The same value check over the index of root `name` opened directly (`wort pool check`),
  // whose root is at `root_off`, of kind `type`: every value block (checksum included); *values
  // counts them. With is_store non-null the index need not be a store's: *is_store tells whether
  // it was taken for one (a batch log, or values with a value block's header), and the values
  // were checked only then.
  static Status CheckValues(const Pool& pool, std::string_view name, const Index& index, uint32_t type,
                            uint64_t root_off, std::string* report, uint64_t* values, bool* is_store);

  Pool& pool() { return *pool_; }

 private:
  KvStore();
  Status CheckKey(std::string_view key) const;
  // KvConfig::read_only's open; Scan for a reader in another process.
  Status OpenReadOnly(const IndexKind* want);
  Status SharedScan(std::string_view start, std::optional<std::string_view> end, const KvScanFn& fn,
                    size_t limit) const;
  // The value of the block at `off`, or Corruption. REQUIRES: inside an epoch of the pool.
  Status ValueAt(uint64_t off, std::string_view* v) const;
  // After a PoolFull: waits for the post-crash GC, or reclaims this thread's retired blocks.
  // True if retrying may succeed. REQUIRES: no key lock held.
  bool FreeUp(bool* reclaimed);
  // The batch log (src/kv/batch_log.h): finds or creates its root; re-applies a committed
  // batch found at open.
  Status OpenBatchLog(bool create);
  // Allocates and persists a value block holding `value` (with its checksum).
  // A persistent value block of at least block_size bytes (0: what the value needs).
  Status NewValueBlock(std::string_view value, uint64_t* off, size_t block_size = 0);
  Status RecoverBatch();
  // Applies the committed record at `rec` (idempotent: an entry already applied is skipped).
  // REQUIRES: the keys' locks held (or no concurrency: open).
  Status ApplyRecord(uint64_t rec, bool live);
  uint64_t batch_head_ = 0;  // offset of the batch log's head block (0: none yet)

  KvConfig cfg_;
  // Shared by the stores of one pool open for writing in this process (kv.cc: a process-wide
  // table keyed by the file's device and inode); the last store's Close closes the pool.
  std::shared_ptr<Pool> pool_;
  std::unique_ptr<Index> index_;
  KvCapabilities caps_;

 public:
  struct Sync;  // the concurrency state (kv.cc): Close's gate, the per-key writer locks

 private:
  std::unique_ptr<Sync> sync_;
};

}  // namespace wort
