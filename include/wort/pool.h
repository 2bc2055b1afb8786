// wort/pool.h - a pool: one file mapped into memory that holds persistent indexes.
//
// Design
// ------
// A pool is a file mapped MAP_SHARED (with MAP_SYNC on a DAX filesystem, so that flushed data is
// durable against power loss). Everything inside refers to everything else by *offset from the
// start of the pool*, never by address: a pool reopens at any address, several pools can be open
// in one process, and another process can map a pool read-only and read it.
//
// Layout (doc/pool-format.md has the byte-level table):
//   [0, 4 KiB)          header: magic, layout version, geometry, header checksum, clean-shutdown
//                       flag, generation, current size, the table of named roots
//   [4 KiB, heap)       chunk table: one 8-byte word per chunk (state / size class)
//   [heap, size)        chunks of kChunkSize bytes, carved into blocks by the allocator
// The pool's capacity (fixed at creation: 1 TiB, or 16 times a size limit given at creation)
// is reserved in the address space at every open; the file grows in whole chunks on demand, up
// to its size limit (PoolOptions::max_size, which a later open may raise or lower) or else its
// capacity, so addresses never move while the pool is open and growth needs no remap. A new
// pool starts small and sparse: the header, one chunk and the chunk-table page describing it are
// allocated (about 1 MiB); the rest of the chunk table is a hole until chunks are added.
//
// Roots: a pool holds up to kMaxRoots named roots. A root names one index instance: its kind
// (type id) and the offset of its root block. A root entry is published by one 8-byte store of
// its checksum word, after its other fields are persistent; an entry whose checksum does not
// match is treated as absent (a crash before the publish) and its block is reclaimed.
//
// Crash behaviour: the header records whether the last close was clean. After an unclean stop
// the allocator runs a post-crash garbage collection (see wort/alloc.h) in the background;
// reads and writes are served at once.
//
// Durability (Durability below; `wort pool info`, the server's startup line and stats, and
// bench JSON print it): what a persisted write survives depends on the mapping the pool got.
//   power-fail     a DAX file mapped MAP_SYNC: flushed lines are in the persistence domain.
//   file-sync      a file without DAX in sync mode (PoolOptions::sync): every fence also msyncs
//                  the pages flushed before it (wort/pm.h), so a persist survives an OS crash
//                  and power loss once it returns - at a system call per fence.
//   process-crash  a file without DAX (ext4, xfs without dax): a plain shared mapping; writes
//                  survive kill -9 (they are in the page cache) but not an OS crash or power
//                  loss before the kernel writes them back.
//   tmpfs          /dev/shm or another tmpfs: survives kill -9; everything is lost at reboot.
//
// Errors: opening a file that is not a pool, of another layout version, truncated, or with a
// bad header checksum fails with Corruption (naming the problem) and writes nothing to the file.
//
// Thread safety: a Pool may be used from many threads. Open/Close are not concurrent with use.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wort/export.h"
#include "wort/status.h"

namespace wort {

class Allocator;
class Pool;
namespace share {
class Writer;  // src/pm/share.h: readers in other processes
}

// How the post-crash GC (wort/alloc.h) reaches the blocks of each root: a root's index kind
// reports every block reachable from its root block through a visit function. The pool and the
// allocator know nothing of index kinds (they are the layer below): the index layer installs
// the lookup from a root's type id to its kind's visit function (src/index/registry.cc does, in
// every program that links it). With no lookup installed, or a null result, the GC is not run
// and reports NotSupported (old chunks stay reserved).
using RootVisitFn = void (*)(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark);
using RootVisitorLookup = RootVisitFn (*)(uint32_t type_id);
WORT_EXPORT void SetRootVisitorLookup(RootVisitorLookup lookup);
WORT_EXPORT RootVisitorLookup GetRootVisitorLookup();

struct PoolOptions {
  // Chunks in the file at creation (rounded up to whole chunks; the metadata comes on top).
  uint64_t initial_size = kDefaultInitialSize;
  static constexpr uint64_t kDefaultInitialSize = 1ull << 20;
  // Size limit: the heap never grows past max_size / 1 MiB chunks (the metadata not counted).
  // 0: none, the pool grows up to its capacity. At creation it also sets the capacity (16 times
  // max_size, at most 1 TiB; 1 TiB when 0). Stored in the header; an open for writing with
  // another non-zero max_size replaces the stored limit (as LMDB's map size; no remap, so
  // concurrent readers are unaffected), which lets a pool grow past the size it was created
  // with. A limit below the current size only stops growth.
  uint64_t max_size = 0;
  // Map read-only. Writes through the pool are then a programming error; the allocator refuses.
  bool read_only = false;
  // After an unclean stop, run the post-crash GC on a background thread (true) or before Open
  // returns (false: used by tests and the crash explorer).
  bool background_recovery = true;
  // Copy-on-write (MAP_PRIVATE): the pool is writable in this process - crash recovery runs -
  // but nothing reaches the file, which is opened read-only and not locked. For a check that
  // must see a crashed pool as recovery would leave it, without changing it.
  bool private_copy = false;
  // Sync mode for a file without DAX (see Durability): persist also msyncs. No effect on DAX
  // (already power-fail durable) or tmpfs (nothing survives a reboot anyway).
  bool sync = false;
};

enum class Durability {
  kPowerFail,     // DAX file, MAP_SYNC
  kFileSync,      // file without DAX, sync mode
  kProcessCrash,  // file without DAX
  kTmpfs,         // tmpfs: process crash only, lost at reboot
};
// "power-fail", "file-sync", "process-crash", "tmpfs" (JSON and stats values).
WORT_EXPORT const char* DurabilityName(Durability d);
// One line for people, e.g. "process-crash only: file without DAX, writes survive kill -9 but not
// an OS crash or power loss (open with sync mode for that)".
WORT_EXPORT const char* DurabilityDescription(Durability d);

struct RootInfo {
  std::string name;
  uint32_t type = 0;  // index kind id (see wort/index.h)
  uint64_t off = 0;   // offset of the root block
};

class WORT_EXPORT Pool {
 public:
  static constexpr uint64_t kChunkSize = 1ull << 20;  // 1 MiB
  static constexpr int kMaxRoots = 32;
  static constexpr size_t kMaxRootName = 39;

  // Creates a new pool file; fails with AlreadyExists if `path` exists.
  static Status Create(const std::string& path, const PoolOptions& opts, std::unique_ptr<Pool>* out);
  // Opens an existing pool. opts.initial_size is ignored; a non-zero opts.max_size replaces the
  // pool's size limit (see PoolOptions::max_size).
  static Status Open(const std::string& path, const PoolOptions& opts, std::unique_ptr<Pool>* out);
  // Opens `path` if it exists, otherwise creates it.
  static Status OpenOrCreate(const std::string& path, const PoolOptions& opts, std::unique_ptr<Pool>* out);

  ~Pool();  // Close() if not closed yet (errors are logged to stderr).
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Clean shutdown: waits for recovery, writes the allocator's state, marks the pool clean,
  // unmaps. A pool closed cleanly reopens without scanning anything.
  Status Close();

  // ---- addressing ------------------------------------------------------------------------
  char* base() const { return base_; }
  template <class T = void>
  T* at(uint64_t off) const { return reinterpret_cast<T*>(base_ + off); }
  uint64_t offset_of(const void* p) const { return static_cast<uint64_t>(static_cast<const char*>(p) - base_); }
  // True iff [off, off+len) lies inside the current file size. Inline: readers check every
  // offset they follow with it.
  bool contains(uint64_t off, uint64_t len) const {
    const uint64_t sz = size();
    return off <= sz && len <= sz - off;
  }
  // Current file size (the header's size word, at kSizeWordOffset; it only grows).
  uint64_t size() const {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base_ + kSizeWordOffset)).load(std::memory_order_acquire);
  }
  static constexpr size_t kSizeWordOffset = 128;  // offsetof(Header, size), checked in pool.cc
  // The size the pool may grow to now: its size limit, or its capacity when it has none.
  uint64_t max_size() const;
  // The size fixed at creation that no limit can pass (address space reserved, chunk table).
  uint64_t capacity() const;
  uint64_t heap_offset() const;  // where chunk 0 starts
  uint64_t chunk_table_offset() const;  // one 8-byte word per chunk (owned by the allocator)
  uint64_t max_chunks() const;  // chunks of the capacity (the chunk table's length)

  Allocator& allocator() { return *alloc_; }
  const Allocator& allocator() const { return *alloc_; }

  // ---- roots -----------------------------------------------------------------------------
  Status FindRoot(std::string_view name, RootInfo* out) const;
  std::vector<RootInfo> Roots() const;
  // Publishes a root. `off` must be a persistent block from this pool's allocator. Fails with
  // AlreadyExists, InvalidArgument (name empty or too long) or PoolFull (table full).
  Status AddRoot(std::string_view name, uint32_t type, uint64_t off);
  // Unpublishes a root (one atomic store). The caller frees the index's blocks afterwards.
  Status RemoveRoot(std::string_view name);

  // ---- state -----------------------------------------------------------------------------
  const std::string& path() const { return path_; }
  bool read_only() const { return read_only_; }
  // Opened with PoolOptions::private_copy: writes stay in this process.
  bool private_copy() const { return private_copy_; }
  // What a persisted write to this pool survives (see above). For a read-only or private open,
  // what a writer opening it the same way would get.
  Durability durability() const { return durability_; }
  // An open for writing of a pool file (not a private copy): the process's side of readers in
  // other processes (src/pm/share.h), which KvStore's writes bracket themselves with; else null.
  share::Writer* share_writer() const { return share_.get(); }
  // Whether the previous session ended with Close() (false after a crash).
  bool opened_clean() const { return opened_clean_; }
  // Incremented (and persisted) at every open for writing.
  uint64_t generation() const;
  // Blocks until the post-crash GC (if any) has finished; returns its status.
  Status WaitForRecovery();
  bool recovery_done() const;
  // Time the post-crash GC took (0 when none ran).
  double recovery_seconds() const;

  // Verifies the header and the allocator's metadata. Appends findings to `report`.
  Status Check(std::string* report) const;

  // A limit below max_size() that Grow respects from now on (DRAM only, not persistent; 0 or
  // >= max_size(): none). The file never shrinks: a limit below size() only stops growth.
  // `wort serve`'s cache_memlimit.
  void SetGrowthLimit(uint64_t bytes) { growth_limit_.store(bytes, std::memory_order_relaxed); }
  uint64_t growth_limit() const { return growth_limit_.load(std::memory_order_relaxed); }

  // Grows the file so that it is at least `new_size` bytes (whole chunks). PoolFull past
  // max_size() (the size limit or the capacity) or past the growth limit.
  // Used by the allocator.
  Status Grow(uint64_t new_size);

 private:
  Pool() = default;
  friend class Allocator;
  friend struct PoolAccess;

 public:
  struct WORT_NO_EXPORT Header;  // on-media header (src/pm/pool.cc)

 private:
  Header* header() const { return reinterpret_cast<Header*>(base_); }
  Status MapFile(const std::string& path, bool create, const PoolOptions& opts);

  std::string path_;
  int fd_ = -1;
  char* base_ = nullptr;
  uint64_t reserved_ = 0;  // bytes of address space reserved
  bool read_only_ = false;
  bool private_copy_ = false;
  bool synced_ = false;  // registered with pm::RegisterSyncRange
  Durability durability_ = Durability::kProcessCrash;
  bool opened_clean_ = true;
  bool closed_ = false;
  std::atomic<uint64_t> growth_limit_{0};
  std::unique_ptr<Allocator> alloc_;
  std::unique_ptr<share::Writer> share_;
};

}  // namespace wort
