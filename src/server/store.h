// server/store.h - the persistent item store behind `wort serve`: memcached's items (key ->
// flags, exptime, cas, data) kept in a wort pool, one pool block per item, indexed by any
// registered index kind. No protocol text here (handler.cc does that), no network.
//
// Design
// ------
// Every item lives in its own pool block, a Record (layout below). The index (created with
// IndexOptions::values_are_blocks, so that post-crash recovery keeps the records its visit
// function reports) maps key -> offset of the item's Record.
//
// A write is acknowledged only once it is persistent. Every mutation of an item follows
//   1. allocate a new Record block, fill it (header + data)       (private: nothing refers to it)
//   2. pm::persist(record)                                         (its contents are durable)
//   3. index->Upsert(key, record offset)   <- COMMIT POINT: the index's own 8-byte publish store,
//                                             persisted before Upsert returns. A plain set (and
//                                             ms without a cas compare) does no lookup before:
//                                             index->Exchange is the Upsert that also returns
//                                             the old record's offset (one traversal)
//   4. allocator.Retire(old record)                                (unlink before free, R2; freed
//                                                                     once no reader holds it)
// A crash before 3 leaves an unreferenced block, and a crash between 3 and the deferred free an
// unreachable old record: the allocator's post-crash mark phase reclaims both (wort/alloc.h,
// R3). Deletion is index->Remove (commit) then Retire. touch/gat rewrite only the record's exptime word in place:
// one pm::store8 + persist, failure-atomic by itself.
//
// Server metadata (the flush_all state) lives in a Meta block stored in the same index under a
// reserved key (kMetaKey, which starts with 0x00: no memcached key can, so clients can neither
// read nor overwrite it, and range scans skip it); the index's visit reports it like any value.
//
// Validity: an item is returned only if it is live at the moment of the request:
//   not expired   exptime == 0 || exptime > now                    (unix seconds)
//   not flushed   cas >= flush_cas                                 (flush_all, no delay)
//                 and !(flush_time != 0 && now >= flush_time && time < flush_time)
//                                                 (the flush state pair: Meta, Store::Flushes)
//                                                                  (flush_all <delay>)
// Dead items are removed lazily (by the request that finds one) and by a background crawler
// that walks ordered indexes in key order (hash indexes: lazy removal only).
//
// CAS values are unique and increase across restarts: cas = (pool generation << 40) + n, where
// the generation is incremented and persisted at every open of the pool for writing
// (Pool::generation) and n counts this session's writes (2^40 of them per session).
//
// Item count (curr_items; instant restart). Open never walks the index: counting 10M items
// would delay the first answered request by seconds. The count lives in DRAM only and is made
// again after every open, so no crash between an index update and a count update can make it
// wrong (there is no persistent count to disagree with the index). Open starts a background
// thread (CountLoop) that walks the index while the server already serves; `stats` reports
// curr_items together with wort_curr_items_counting (1 while the walk runs; curr_items then
// counts only the part walked so far). The rule that makes walk + concurrent writers exact:
//   - Every index change of a key's membership (insert by Upsert, Remove) happens under that
//     key's lock, and the writer then calls Counted(key, +-1).
//   - Ordered kinds: the walk goes in key order in batches of kCountBatch keys; for each batch
//     it holds EVERY key lock (a pause of all writers for one batch, ~a millisecond), scans the
//     batch, adds what it saw, and advances count_cursor_ to the batch's last key. A writer
//     (holding its key's lock, so the cursor cannot move meanwhile) adds its +-1 only if its
//     key <= count_cursor_ (the walk has passed it); a key beyond the cursor is counted by the
//     walk when it gets there, in whatever state it is then. So each key is counted once.
//   - Hash kinds (no Scan): the walk holds every key lock for the whole count (writers wait;
//     lock-free readers do not) and reads index->Size() once; writers skip Counted until then.
//   - With --evict lru the walk also tracks each item it passes (Recency, tick 1): before, Open
//     scanned the ordered index for that (a walk before listening).
// Eviction (StoreOptions::evict = kLru, `wort serve --evict lru`; off by default: a persistent
// store should not drop acknowledged data silently). A write whose allocation (of the record, or
// inside the index's Upsert) fails with PoolFull evicts items and retries, at most
// kEvictAttempts times, then answers kNoMemory as without eviction. An eviction is a delete
// (index->Remove is the commit point, then Retire): crash-consistent as a delete is.
//   - Recency lives in DRAM only (class Recency below): one stamp per item, set on every
//     write, read hit and touch; a read updates one relaxed atomic word (no flush, no lock).
//     The clock is the count of writes, so reads never contend on it.
//   - Victims are chosen by sampling (Redis's approximated LRU): kEvictSamples random items,
//     a dead one (expired/flushed) first, else the least recently used.
//   - Size classes: freeing a small item only makes room for its own size class (and only in
//     this thread's allocator cache). So the first kSampledEvictions attempts evict single
//     sampled items; the later ones evict every item of the 1 MiB chunk that holds a sampled
//     victim, and every attempt for an item of n chunks (larger than Allocator::kMaxSmall)
//     evicts n + 1 consecutive chunks around a sampled victim's; both then return this
//     thread's cached free blocks to the allocator, so that the chunks can become FREE.
//   - After a restart all surviving items are equally old (tick 1). Ordered indexes are
//     scanned at open to track them; hash indexes cannot be scanned, so a surviving item of a
//     hash index becomes evictable once it is read (adopted) or rewritten.
//
// Thread safety: all public methods are thread safe (Close excepted: no other call may run). No
// store-wide lock: get/set/delete and every other command run in parallel, as far as the index
// kind allows (wort, woart, artcow: optimistic lock coupling, lock-free readers; cceh: striped
// locks, lock-free lookups; every other kind serializes its own writers behind the index's own
// lock, stated in its header - the store adds none). The rules:
//   - Readers (get, gets, mg without T/N/R, range, the crawler's scan) enter the pool's epoch
//     (sync::EpochGuard on Allocator::epoch(), src/sync/sync.h R1/R3) for the lookup and for as
//     long as they read the record: a record is never freed while a reader may hold it, because
//     every writer that unlinks a record (overwrite, delete, eviction, lazy or crawler removal)
//     hands it to Allocator::Retire, not Free. The mutable words of a record (exptime, time)
//     are read and written with pm::load8 / pm::store8 (single 8-byte accesses).
//   - Writers of a key hold that key's lock: a word of a store-owned sync::VersionLockTable
//     keyed by the key's hash (KeyGuard in store.cc; 2^14 words, two keys may share a word).
//     It makes every read-modify-write atomic per key (add/replace/cas/append/prepend/incr/
//     decr/touch/gat, the meta commands) and makes the Lookup -> Upsert/Remove -> Retire(old)
//     sequence race-free: only the holder of a key's lock replaces or removes the key's record,
//     so the old record it retires is exactly the one it unlinked (no double free). A thread
//     holds at most one key lock while it waits; eviction and adoption take a victim's lock only
//     with a try (a busy victim is skipped), so no two threads wait for each other.
//   - The persist order of steps 1-4 is unchanged; step 4 is Allocator::Retire (a deferred
//     Free), so a crash between 3 and the actual free leaves an unreachable block that the
//     post-crash GC reclaims (alloc.h, R3) - the same case as a crash between 3 and 4 before.
//   - Memory held back: each writer collects (Allocator::RetireAndCollect) after every 64
//     records it retires or 256 KiB of them, whichever comes first (again 8 records later when
//     the advance was blocked), so a worker thread holds back about two such batches beyond
//     what readers still read (measured with `wort bench kv` on 2 loaded cores: 75-250 blocks of
//     all writers together at their exit, doc/concurrency.md); what an exited worker leaves is
//     reclaimed by the next Collect of a live one. A write that finds the pool full reclaims its
//     own retired records (a grace period) before it evicts or refuses, so -m still bounds the
//     pool (Allocator::Stats: retired_pending).
//     (Not every record, nor every 8 as until 2026-11-27: an epoch advance costs a membarrier(2)
//     system call when it may succeed - the asymmetric fences of sync/epoch.cc that keep lookups
//     free of a hardware fence - ~0.2 us with no other thread of the process running, ~2 us
//     with one, and an interrupt of every core that runs a worker.)
//   - LRU (Recency): sampled, as before (Redis's approximated LRU), so there is no list to keep
//     in order under concurrency: a read hit stores one relaxed stamp word (no lock); the
//     tracker's maps are split into kShards shards by record offset, each with its own mutex,
//     changed only by the holder of the item's key lock. Sampling locks one shard at a time.
//   - WORT_GLOBAL_LOCK=1 (registry.h's flag, which also restores the indexes' single lock)
//     brings back the old store-wide reader-writer lock around every command, for comparison.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "wort/index.h"
#include "wort/key.h"
#include "wort/pm.h"
#include "wort/pool.h"
#include "wort/status.h"
#include "sync/counter.h"
#include "sync/version_lock.h"

namespace wort::server {

// One stored item: a pool block of sizeof(Record) + length bytes, 64-byte aligned.
//   [0]  cas       uint64  unique version of this item (never rewritten)
//   [8]  exptime   int64   absolute unix seconds; 0 = never; < 0 = already expired
//   [16] time      int64   bits 0..55: unix seconds when the item was stored (for a delayed
//                          flush_all); bits 56..63: meta state (kStateStale, kStateTokenSent)
//   [24] flags     uint32  opaque client flags
//   [28] length    uint32  bytes of data
//   [32] data      `length` bytes
// Invariant: a record referenced by the index is wholly persistent (written in step 1-2 above);
// only `exptime` and `time` are ever rewritten in place, each by a single store8 + persist
// (`time` only to set kStateTokenSent).
// Compatibility: pools written before the state bits existed have them zero (no state), so they
// open unchanged. A build without them would read a flagged item's time as far in the future
// (a delayed flush_all would spare it); nothing else.
struct Record {
  uint64_t cas;
  int64_t exptime;
  int64_t time;
  uint32_t flags;
  uint32_t length;
  char* data() { return reinterpret_cast<char*>(this + 1); }
  const char* data() const { return reinterpret_cast<const char*>(this + 1); }
};
static_assert(sizeof(Record) == 32);
static_assert(offsetof(Record, exptime) % 8 == 0, "exptime is rewritten with one 8-byte store");
static_assert(offsetof(Record, time) % 8 == 0, "time is rewritten with one 8-byte store");

// The meta state bits in Record::time (memcached's ITEM_STALE and ITEM_TOKEN_SENT).
inline constexpr uint64_t kRecordTimeMask = (uint64_t{1} << 56) - 1;
inline constexpr uint64_t kStateStale = uint64_t{1} << 56;      // md I / ms I: data is stale
inline constexpr uint64_t kStateTokenSent = uint64_t{1} << 57;  // a client got the W (recache) flag
// The words rewritten in place are read with one 8-byte load (lock-free readers race with touch).
inline int64_t RecordExptime(const Record* r) { return static_cast<int64_t>(pm::load8(reinterpret_cast<const uint64_t*>(&r->exptime))); }
inline uint64_t RecordTimeWord(const Record* r) { return pm::load8(reinterpret_cast<const uint64_t*>(&r->time)); }
inline int64_t RecordTime(const Record* r) { return static_cast<int64_t>(RecordTimeWord(r) & kRecordTimeMask); }
inline uint64_t RecordState(const Record* r) { return RecordTimeWord(r) & ~kRecordTimeMask; }

// The server's metadata block (under kMetaKey).
//   [0]  magic       kMetaMagic
//   [8]  flush_cas   (while flush_sel == 0) items with cas < flush_cas were flushed by
//                    `flush_all` (0 = none)
//   [16] flush_time  (while flush_sel == 0) unix seconds of a delayed `flush_all` (0 = none)
//   [24] flush_sel   0: the flush state is the two words above (pools of earlier builds);
//                    n > 0: it is slot[n & 1]
//   [32] slot[2]     {flush_cas, flush_time} pairs
// The flush state is a pair (an immediate flush_all sets flush_cas AND cancels a pending delayed
// one), so it changes in one failure-atomic step: the writer (flush_mu_) fills the slot that
// flush_sel does not select, persists it, then stores flush_sel + 1 (COMMIT POINT) and persists
// it. A crash before the commit leaves the old pair, after it the new one (the crash explorer
// found the former two-step update half applied: flush_cas set, the delayed flush still there).
// Readers (Store::Flushes) read flush_sel, the selected pair, then flush_sel again, and retry if
// it changed (a writer may rewrite the unselected slot only after moving flush_sel off it).
// Compatibility: a pool whose flush_sel is 0 (every pool of an earlier build) reads as before;
// an earlier build opening a pool that this one flushed does not see those flushes (it reads
// the inline words only).
struct Meta {
  uint64_t magic;
  uint64_t flush_cas;
  int64_t flush_time;
  uint64_t flush_sel;
  uint64_t slot[2][2];
};
static_assert(sizeof(Meta) == 64);
inline constexpr uint64_t kMetaMagic = 0x31617465'4d726553ull;  // "SerMeta1"
inline const std::string_view kMetaKey{"\0wort-serve-meta", 16};

// What a read sees. The data view is valid only inside the callback that receives it.
struct ItemView {
  std::string_view key;
  uint32_t flags = 0;
  uint64_t cas = 0;
  std::string_view data;
  int64_t exptime = 0;      // absolute, as stored (0 = never)
  int64_t time = 0;         // unix seconds of the write that stored this record
  bool stale = false;       // kStateStale
  bool token_sent = false;  // kStateTokenSent, as it was before this request
  bool won = false;         // MetaGet: this request won the recache (the W flag)
};
using ItemFn = std::function<void(const ItemView&)>;

enum class EvictPolicy : uint8_t {
  kNone,  // a full pool refuses writes (the default)
  kLru,   // a full pool evicts sampled least-recently-used items
};

enum class StoreMode : uint8_t { kSet, kAdd, kReplace, kAppend, kPrepend, kCas };

enum class Result : uint8_t {
  kStored, kNotStored, kExists, kNotFound, kDeleted, kTouched,
  kNoMemory,     // the pool is full ("SERVER_ERROR out of memory storing object")
  kTooLarge,     // append/prepend result exceeds the item size limit
  kNonNumeric,   // incr/decr of a value that is not a decimal number
  kError,        // an unexpected index error (logged)
};

struct StoreOptions {
  std::string pool_path;
  std::string index_kind;              // "" = the default (DefaultIndexKind())
  std::string root_name = "memcached";
  uint64_t pool_size = 1ull << 30;     // max size of a new pool
  uint64_t max_item_size = 1 << 20;    // longest value (append/prepend results included)
  bool crawler = true;                 // background removal of dead items (ordered indexes)
  bool sync = false;                   // PoolOptions::sync: file-sync durability without DAX
  double crawler_interval_s = 10;
  EvictPolicy evict = EvictPolicy::kNone;
};

// Counters kept by the store (stats).
// total_items changes at every store: per thread (sync::ShardedCounter: no line that two
// workers write); the others change only on removals and evictions.
struct StoreCounters {
  sync::ShardedCounter total_items;  // successful stores
  std::atomic<uint64_t> reclaimed{0};    // dead items removed (lazily or by the crawler)
  std::atomic<uint64_t> crawler_items_checked{0};
  std::atomic<uint64_t> expired_unfetched{0};
  std::atomic<uint64_t> evictions{0};          // live items evicted to make room
  std::atomic<uint64_t> evicted_unfetched{0};  // ... of which never read since stored
  std::atomic<uint64_t> evict_failures{0};     // writes refused although eviction was on
  std::atomic<uint64_t> evict_chunk_rounds{0}; // whole-chunk evictions (size classes)
};

// DRAM recency of the stored items (eviction only). Entries live in kShards shards (by a hash of
// the record offset), each a dense vector (uniform random sampling by slot) with maps from record
// offset to slot and from pool chunk to slots, under the shard's mutex. The stamps live apart,
// in a flat array with one 32-bit word per 64-byte granule of the heap (records are 64-byte
// aligned), so that a read reaches its stamp with one index computation, no hash lookup and no
// lock. The array is calloc'ed for the pool's maximum size (1/16 of it, virtual: only pages of
// granules that hold records are ever touched).
//   stamp word: 0 = untracked; else (tick << 1 | fetched) mod 2^32, tick >= 1. Ages are
//   compared modulo 2^31 writes (an item untouched for 2^31 writes may look young again).
// Thread safety: every method is thread safe. The store changes the entry of an item (Add,
// Forget) only while it holds the item's key lock, so the tracker follows the index.
class Recency {
 public:
  static constexpr unsigned kShards = 16;
  Recency(uint64_t heap_offset, uint64_t max_size);
  // Tracks the record at `off` (of `key`) with the given tick (>= 1); fetched = false.
  void Add(std::string_view key, uint64_t off, uint64_t tick);
  // Stops tracking `off` (no-op if untracked).
  void Forget(uint64_t off);
  // Marks `off` as used now; returns false if it is not tracked. Lock-free (one CAS at most; it
  // never marks an untracked granule).
  bool Stamp(uint64_t off, bool fetched) const {
    std::atomic<uint32_t>& w = stamps_[(off - heap_off_) >> 6];
    uint32_t old = w.load(std::memory_order_relaxed);
    if (old == 0) return false;
    const uint32_t want = static_cast<uint32_t>(clock_.load(std::memory_order_relaxed) << 1) | (old & 1) | (fetched ? 1 : 0);
    if (want != old) w.compare_exchange_strong(old, want, std::memory_order_relaxed);  // hot keys: unchanged
    return true;
  }
  uint64_t NextTick() { return clock_.fetch_add(1, std::memory_order_relaxed) + 1; }
  // Writes since the stamp of `off` (larger = older), and whether it was read since stored.
  uint32_t Age(uint64_t off) const {
    const uint32_t st = stamps_[(off - heap_off_) >> 6].load(std::memory_order_relaxed);
    return (static_cast<uint32_t>(clock_.load(std::memory_order_relaxed) << 1) - (st & ~1u)) >> 1;
  }
  bool Fetched(uint64_t off) const { return stamps_[(off - heap_off_) >> 6].load(std::memory_order_relaxed) & 1; }
  size_t size() const { return size_.load(std::memory_order_relaxed); }
  struct Entry {
    std::string key;
    uint64_t off = 0;
    uint32_t chunk_pos = 0;  // position in its shard's by_chunk[ChunkOf(off)]
  };
  // A copy of a uniformly chosen tracked entry (shard by *rng, then slot); false if none.
  bool Sample(uint64_t* rng, Entry* out) const;
  bool Tracked(uint64_t off) const;
  uint64_t ChunkOf(uint64_t off) const { return (off - heap_off_) / Pool::kChunkSize; }
  // Copies of the tracked entries in chunk `c` (empty if none).
  std::vector<Entry> InChunk(uint64_t c) const;
  // Copies of every entry (tests).
  std::vector<Entry> All() const;
  // Checks the maps and stamps against the vectors (tests); appends findings.
  bool Check(std::string* report) const;

 private:
  struct Shard {
    mutable std::mutex mu;
    std::vector<Entry> entries;
    std::unordered_map<uint64_t, uint32_t> by_off;
    std::unordered_map<uint64_t, std::vector<uint32_t>> by_chunk;
  };
  Shard& ShardOf(uint64_t off) const { return shards_[((off >> 6) * 0x9e3779b97f4a7c15ull) >> 60]; }
  void RemoveSlot(Shard& sh, uint32_t slot);
  struct FreeDeleter {
    void operator()(std::atomic<uint32_t>* p) const { std::free(p); }
  };
  uint64_t heap_off_;
  std::atomic<uint64_t> clock_{1};  // tick 1 = "stored before this session"
  std::atomic<uint64_t> size_{0};
  std::unique_ptr<std::atomic<uint32_t>[], FreeDeleter> stamps_;
  std::unique_ptr<Shard[]> shards_;
};
static_assert(Recency::kShards == 16, "ShardOf takes the top 4 bits of the mixed offset");

class Store {
 public:
  // Opens (or creates) the pool and the index root `opts.root_name`. Logs nothing; see
  // open_seconds() / pool().opened_clean() for the restart report.
  static Status Open(const StoreOptions& opts, std::unique_ptr<Store>* out);
  // The same on a pool opened by the caller (opts.pool_path, pool_size and sync are not used):
  // the server's crash explorer (crash/server_explorer.h) shadows the pool before the store
  // creates its index and metadata block in it.
  static Status OpenOnPool(const StoreOptions& opts, std::unique_ptr<Pool> pool, std::unique_ptr<Store>* out);
  // Every index entry in key order, the metadata entry and dead items included (ordered kinds;
  // the crash explorer reads the records and the Meta block through pool()).
  Status ScanIndexForTest(const std::function<void(std::string_view key, uint64_t off)>& fn) const;
  ~Store();
  // Stops the crawler, closes the index and the pool cleanly.
  Status Close();

  // ---- reads (no lock: inside the pool's epoch) --------------------------------------------
  // Calls fn with the live item of `key` and returns true; false on a miss (dead items count as
  // misses; *expired (if non-null) tells whether the miss was an expired or flushed item).
  bool Get(std::string_view key, const ItemFn& fn, bool* expired = nullptr);
  // Ordered indexes only: calls fn for every live item with start <= key <= end in key order,
  // up to `limit` items, or until fn returns false. *next (if non-null) is set to the key after
  // which a continuation should start (empty when the range is exhausted).
  Status Range(std::string_view start, std::string_view end, uint64_t limit,
               const std::function<bool(const ItemView&)>& fn, std::string* next_start, uint64_t* emitted);

  // ---- writes (the key's lock) --------------------------------------------------------------
  // exptime is absolute (ToAbsoluteExptime). *cas_out (if non-null) receives the new cas.
  Result StoreItem(StoreMode mode, std::string_view key, uint32_t flags, int64_t exptime, std::string_view data,
                   uint64_t cas_unique, uint64_t* cas_out = nullptr);
  Result Delete(std::string_view key);
  // *value receives the new value.
  Result IncrDecr(std::string_view key, bool incr, uint64_t delta, uint64_t* value);
  Result Touch(std::string_view key, int64_t exptime);
  // Touch + Get. Returns true and calls fn on a hit.
  bool GetAndTouch(std::string_view key, int64_t exptime, const ItemFn& fn);
  // Removes the old item of `key` (memcached's SET of a too-large or unallocatable value
  // does this so that a stale value does not survive). Returns true if one was removed.
  bool Unlink(std::string_view key);
  // flush_all: `when` is an absolute unix time (0 or <= now: at once).
  void FlushAll(int64_t when);

  // ---- meta commands (memcached's mg/ms/md/ma semantics; exptimes absolute) -----------------
  struct MetaGetArgs {
    bool touch = false;  // T: set exptime on a hit
    int64_t exptime = 0;
    bool vivify = false;  // N: on a miss create an empty item (flags 0) with vivify_exptime
    int64_t vivify_exptime = 0;
    bool recache = false;  // R: win if the item expires before recache_before
    int64_t recache_before = 0;
  };
  // Calls fn with the live item (or the item N just created: won) and returns true; false on a
  // miss. The item is won (W) when N created it, when R applies, or when it is stale; a won
  // item is marked kStateTokenSent (one store8 of `time`), so later requests see token_sent (Z).
  bool MetaGet(std::string_view key, const MetaGetArgs& a, const ItemFn& fn);
  // ms. mode kCas is not used: `compare` (C) gives cas semantics to kSet and kReplace, and is
  // checked by kAppend/kPrepend too (kAdd ignores it). With `invalidate` (I), a compare cas
  // lower than the item's stores the new data as a stale item keeping the old exptime.
  // Returns kStored, kNotStored (NS), kExists (EX), kNotFound (NF), kTooLarge, kNoMemory.
  Result MetaSet(StoreMode mode, std::string_view key, uint32_t flags, int64_t exptime, std::string_view data,
                 bool compare, uint64_t cas, bool invalidate, uint64_t* cas_out);
  // md. With `invalidate` (I) the item is kept, marked stale with a new cas (and exptime if
  // set_exptime). Returns kDeleted, kNotFound, kExists (cas mismatch), kNoMemory.
  Result MetaDelete(std::string_view key, bool compare, uint64_t cas, bool invalidate, bool set_exptime,
                    int64_t exptime);
  struct ArithArgs {
    bool incr = true;
    uint64_t delta = 1;
    bool compare = false;  // C
    uint64_t cas = 0;
    bool vivify = false;  // N: on a miss create the item with `initial` and vivify_exptime
    int64_t vivify_exptime = 0;
    uint64_t initial = 0;
    bool touch = false;  // T: set exptime on success
    int64_t exptime = 0;
  };
  struct ArithOut {
    uint64_t value = 0, cas = 0;
    int64_t exptime = 0;
  };
  // ma. Returns kStored, kNotFound, kNotStored (N could not create), kExists, kNonNumeric,
  // kNoMemory.
  Result MetaArith(std::string_view key, const ArithArgs& a, ArithOut* out);

  // ---- information ---------------------------------------------------------------------------
  bool ordered() const { return ordered_; }
  // True when Open created the index (a new store), false when it opened an existing one.
  bool created() const { return created_; }
  // Whether the background item count is still running (curr_items then is partial).
  bool counting_items() const { return counting_.load(std::memory_order_acquire); }
  // Index entries the item count has walked so far (tests: none before Open returns).
  uint64_t count_walked() const { return count_walked_.load(std::memory_order_relaxed); }
  // Blocks until the background item count has finished (tests, CheckRecency).
  void WaitForCount() const;
  // The index's own key count (a walk that excludes writers; tests only).
  uint64_t IndexItemsForTest() const;
  // Tests: while paused, the background count does not start (or go on to its next batch).
  static void PauseCountForTest(bool paused);
  static constexpr size_t kCountBatch = 4096;
  std::string_view index_kind() const { return index_->kind(); }
  uint64_t curr_items() const;
  uint64_t bytes_allocated() const;
  Pool& pool() { return *pool_; }
  double open_seconds() const { return open_seconds_; }
  StoreCounters& counters() { return counters_; }
  // Runs one full crawler pass now (tests); returns the number of dead items removed.
  uint64_t CrawlOnce();
  bool evicting() const { return recency_ != nullptr; }
  // Items tracked for eviction (tests); CheckRecency verifies the tracker against the index.
  uint64_t tracked_items() const;
  bool CheckRecency(std::string* report) const;

  static constexpr int kEvictSamples = 5;
  static constexpr int kSampledEvictions = 32;
  static constexpr int kEvictAttempts = 64;
  // Hash index survivors read between two evictions and queued for adoption (more wait for a
  // later read).
  static constexpr size_t kMaxAdoptPending = 1 << 16;

  // Seconds since the epoch (the clock of exptimes). Tests may shift it.
  static int64_t Now();
  static void SetClockOffsetForTest(int64_t seconds);

 private:
  Store() = default;
  static Status OpenImpl(const StoreOptions& opts, std::unique_ptr<Pool> pool, std::unique_ptr<Store>* out);
  bool Live(const Record* r, int64_t now) const;
  struct FlushState {
    uint64_t cas = 0;   // items with a smaller cas are flushed
    int64_t time = 0;   // a delayed flush_all's time (0 = none)
  };
  FlushState Flushes() const;
  uint64_t NextCas() { return cas_next_.fetch_add(1, std::memory_order_relaxed); }
  // old_off == kOldUnknown (have_old ignored): the caller did not look the key up; the Upsert
  // is an index->Exchange, which reports the old record (a set: one traversal, not two).
  static constexpr uint64_t kOldUnknown = ~uint64_t{0};
  Result WriteRecord(std::string_view key, uint32_t flags, int64_t exptime, std::string_view a, std::string_view b,
                     bool have_old, uint64_t old_off, uint64_t* cas_out, uint64_t state = 0);
  bool MetaGetLocked(std::string_view key, const MetaGetArgs& a, const ItemFn& fn, bool exclusive, bool* retry);
  // REQUIRES the key's lock: Remove (commit), then Forget and Retire the record at `off`.
  void RemoveLocked(std::string_view key, uint64_t off);
  // Recency bookkeeping of a read hit / touch of the record at `off` (no lock).
  void Used(std::string_view key, uint64_t off, bool fetched) const;
  // Eviction after a PoolFull of an allocation of `size` bytes (0: inside the index), by a
  // writer that holds the lock `held` (its own key's). Never evicts the record at `keep`.
  // *trimmed: Trim already tried in this write. Returns true iff it freed something (retry).
  bool EvictSome(size_t size, uint64_t keep, int attempt, const sync::VersionLock* held, bool* trimmed);
  bool PickVictim(uint64_t keep, Recency::Entry* out);
  // Evicts the tracked record `off` of `key` if its key lock is free (or is `held`) and the
  // index still maps key -> off; *busy (if non-null) is set when another writer held the key
  // or changed it since it was sampled (it is making room too: worth a retry).
  bool EvictTracked(const std::string& key, uint64_t off, const sync::VersionLock* held, bool* busy);
  void AdoptPending(const sync::VersionLock* held);
  void CrawlerLoop();
  void CountLoop();
  // REQUIRES the key's lock: the index gained (+1) or lost (-1) `key` (item count rule above).
  void Counted(std::string_view key, int64_t d) {
    if (counting_.load(std::memory_order_relaxed) && (!ordered_ || CompareKeys(key, count_cursor_) > 0)) return;
    items_.Add(d);
  }
  void LockAllKeys() const;
  void UnlockAllKeys() const;

  friend class KeyGuard;
  friend class ReadGuard;
  sync::VersionLock& KeyLock(std::string_view key) const;

  StoreOptions opts_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Index> index_;
  Meta* meta_ = nullptr;
  bool ordered_ = false;
  double open_seconds_ = 0;
  std::atomic<uint64_t> cas_next_{1};
  // Per-key write locks (store.cc KeyGuard): 2^14 DRAM words, never persistent.
  mutable sync::VersionLockTable key_locks_{14};
  // WORT_GLOBAL_LOCK=1 only: the old store-wide lock (readers shared, writers exclusive).
  bool global_lock_ = false;
  mutable std::shared_mutex global_mu_;
  std::mutex flush_mu_;  // orders two flush_all commands (each writes two Meta words)
  StoreCounters counters_;
  std::unique_ptr<Recency> recency_;  // null unless opts_.evict == kLru
  bool adopt_on_read_ = false;  // hash index reopened with items: adopt them when read
  mutable std::mutex adopt_mu_;
  mutable std::vector<std::pair<std::string, uint64_t>> adopt_;

  bool created_ = false;
  // The item count (see above). count_cursor_ changes only while every key lock is held. Per
  // thread (a writer adds to its own line; curr_items sums them).
  sync::ShardedCounter items_;
  std::atomic<bool> counting_{true};
  std::atomic<bool> count_stop_{false};
  std::atomic<uint64_t> count_walked_{0};
  std::string count_cursor_;
  std::thread counter_;

  std::thread crawler_;
  std::mutex crawler_mu_;
  std::condition_variable crawler_cv_;
  bool stop_ = false;
  bool crawl_now_ = false;
};

// The index kind `wort serve` uses when none is named: the first of woart, wort, artcow that
// this build has, else the first registered kind ("" if none).
std::string DefaultIndexKind();
// OK if `kind` can hold a server's items: a known, persistent kind (not a volatile reference,
// which keeps nothing in the pool). Store::Open checks it before it creates or opens a pool.
Status CheckServableKind(std::string_view kind);

}  // namespace wort::server
