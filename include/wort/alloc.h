// wort/alloc.h - the crash-safe persistent allocator of a pool.
//
// Design (after ROART's DCMM: allocation without flushes, post-crash garbage collection, and
// instant restart by allocating from fresh space while the collection runs)
// -----------------------------------------------------------------------------------------
// The heap is a sequence of 1 MiB chunks. The *chunk table* (one persistent 8-byte word per
// chunk) says what each chunk is: FREE, SMALL(size class) or LARGE(head of a run of n chunks /
// tail). A chunk-table word is persisted before any block of that chunk is handed out, and a
// chunk returns to FREE (persisted) only when none of its blocks is allocated and no persistent
// reference to them can remain. That is the only persistent write on the allocation path, once
// per chunk: the common path (a per-thread cache of free blocks per size class) takes no flush,
// no fence and no lock.
//
// Which blocks of a SMALL chunk are allocated is kept in DRAM while the pool is open, and
// written to the chunk's 4 KiB header (a bitmap) by a clean Close(). Reopening after a clean
// close reads only the chunk table; each chunk's bitmap is read when that chunk is first
// needed (ChunkHeadersRead below), so an open does not grow with the pool.
//
// After a crash the bitmaps are stale. Recovery is a mark phase over what the indexes can reach:
//   1. Every chunk that is not FREE is "old" and frozen: nothing is allocated from it yet.
//      New allocations come from FREE chunks (fresh space) at once: the pool serves reads and
//      writes immediately ("instant restart"). If fresh space runs out before the GC ends, an
//      allocation fails with PoolFull (it does not wait: its caller may hold an index lock that
//      the GC's visit needs); retry after Pool::WaitForRecovery.
//   2. A background thread calls the visit function of every root's index kind (see
//      wort/index.h), which reports every block reachable from that root. Reported blocks are
//      marked. While the mark phase runs, every Free() is deferred (the block's memory stays
//      untouched), so a concurrent visit never reads reused memory.
//   3. When all roots are visited, each old chunk's allocated set := its marked blocks; the
//      deferred frees are applied; old chunks with nothing marked return to FREE; old chunks
//      become usable. Unreachable blocks (the allocations of an operation cut by the crash)
//      are thereby freed: no leak.
// If a root's kind has no registered visit function, the collection is not run (old chunks stay
// frozen: space is lost for this session, never data) and Pool::WaitForRecovery says why.
//
// The contract for indexes ("the reachability contract")
//   R1. A block is reachable iff the index's visit function reports it. Visit must report every
//       block that was reachable when it started, even if writers run concurrently (the
//       allocator guarantees no block's memory is reused while a visit runs).
//   R2. Link before use, unlink before free: an index persists a new block's contents before
//       publishing a reference to it, and calls Free() only after the store that removed the
//       last persistent reference is persistent.
//   R3. A block handed out by Alloc and not yet linked when a crash happens is reclaimed by
//       recovery; the index need not log it.
//
// Size classes: multiples of 64 bytes up to kMaxSmall; larger requests take a run of whole
// chunks (Alloc of 1 MiB + 1 byte takes 2 chunks).
//
// Thread safety: Alloc and Free are thread safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "wort/export.h"
#include "wort/status.h"

namespace wort {

class Pool;
namespace sync {
class EpochManager;  // src/sync/epoch.h
}

struct AllocStats {
  uint64_t chunks_total = 0;        // chunks in the current file
  uint64_t chunks_free = 0;         // FREE chunks
  uint64_t chunks_small = 0;        // chunks serving a size class
  uint64_t chunks_large = 0;        // chunks in large runs
  uint64_t blocks_allocated = 0;    // live small blocks + large runs
  uint64_t bytes_allocated = 0;     // sum of the usable sizes of live blocks
  uint64_t bytes_in_thread_caches = 0;
  uint64_t deferred_frees = 0;      // frees waiting for the post-crash GC to finish
  uint64_t retired_pending = 0;     // blocks retired (Retire), not yet freed: held back by epochs
  uint64_t retired_peak = 0;        // the maximum of retired_pending since open
  uint64_t epoch_advances = 0;      // advances of the pool's epoch since open (issue 31: how often)
  // Retire calls made outside an epoch of epoch(): each one breaks the writer rule below (a bug
  // in the calling index, reported on stderr once); the tests require 0.
  uint64_t retired_outside_epoch = 0;
  // The allocator's one lock is taken only off the per-thread fast path (a refill of a size
  // class's cache, a batch of frees, a large block). Acquisitions and the ones that had to
  // wait for another thread (issue 31: how often allocating threads meet), and pool growths.
  uint64_t lock_acquisitions = 0;
  uint64_t lock_waits = 0;
  uint64_t grows = 0;
  // Growth ahead of the writers (h70, doc/allocator.md): growths made by a thread elected when
  // the free chunks fell under a watermark, while the others went on (counted in grows too);
  // the time in Pool::Grow (every growth); and the times an allocating thread found no free
  // chunk and waited for a growth, its own or another's, with their time (the writers' stall).
  uint64_t grows_ahead = 0;
  uint64_t grow_ns = 0;
  uint64_t grow_waits = 0;
  uint64_t grow_wait_ns = 0;
  // SMALL chunk headers (4 KiB bitmaps) read since open, before this call (Stats itself reads
  // the rest): a clean open reads none, only the chunk table (see ChunkHeadersRead).
  uint64_t chunk_headers_read = 0;
};

class WORT_EXPORT Allocator {
 public:
  static constexpr size_t kMaxSmall = 256 * 1024;  // largest size-class block

  // Internal; created by Pool.
  Allocator(Pool* pool, bool opened_clean);
  ~Allocator();

  // Allocates a block of at least `size` bytes (size > 0), 64-byte aligned, and stores its
  // offset (never 0) in *off. The contents are unspecified. PoolFull when neither the free space
  // nor growth up to max_size can serve it; then nothing changed.
  Status Alloc(size_t size, uint64_t* off);
  // As Alloc, with the block zeroed (not flushed: the caller persists what it initializes).
  Status AllocZeroed(size_t size, uint64_t* off);
  // Returns a block. REQUIRES: `off` came from Alloc of this pool and was not freed since, and
  // no persistent reference to it remains (contract R2). Freeing an offset that is not a live
  // block is detected where cheaply possible and reported on stderr, never acted upon.
  void Free(uint64_t off);
  // Frees `off` once no thread can still read it: the block was unlinked by a writer while
  // lock-free readers (inside an epoch of epoch()) may hold it (src/sync/sync.h, W4). Frees are
  // applied by the retiring thread in batches, and all at once by PrepareClose and destruction.
  // Writer rule: the calling operation is inside an epoch of epoch() (sync::EpochGuard) from
  // before it unlinks `off` until after this call. The post-crash GC's grace period waits for
  // the operations inside an epoch; an unlink it did not wait for could be swept free and then
  // freed again here (doc/allocator.md, "The visit beside writers"). Counted in
  // AllocStats::retired_outside_epoch when broken.
  void Retire(uint64_t off);
  // Retire for a writer that retires a block on most writes (the server's records, the
  // key-value store's values): besides the epoch's own collection (every kRetireBatch = 64
  // retires of the thread), it reclaims what no reader can hold any more once kCollectBytes have
  // been retired by the calling thread since its last such Collect (an epoch advance costs a
  // membarrier system call that interrupts every core running a thread of the process, so not
  // every few calls: issue 31 (b)). A thread then holds back at most what it retired since the
  // last two advances plus a batch (64 blocks or kCollectBytes). Same writer rule as Retire.
  static constexpr uint64_t kCollectBytes = 256 * 1024;
  void RetireAndCollect(uint64_t off);
  // After a PoolFull: waits for grace periods (three: each lets the global epoch advance once)
  // and reclaims the calling thread's retired blocks. False, without waiting, when the thread
  // has nothing pending or is inside an epoch of epoch() (it would wait for itself).
  bool ReclaimRetired();
  // The pool's epoch manager: readers of a concurrent index enter it (sync::EpochGuard) for the
  // length of each operation, and the post-crash GC's visit does too.
  sync::EpochManager& epoch() const { return *epoch_; }
  // The last kReserveChunks free chunks of a pool that cannot grow (at its size limit, its
  // capacity or the growth limit) are held back for writes that free as much as they take: an
  // overwrite with a value no larger than the old one (its index may need a node of another
  // size class before it frees the old one: an append-only leaf's compaction), a delete (a
  // smaller node, a copied path). Outside a ReserveScope on the calling thread, an allocation
  // that needs those chunks fails with PoolFull; inside one it gets them. Pools of fewer than
  // kReserveMinChunks chunks hold nothing back. (Issue 33: a full pool still takes an overwrite
  // that needs no new space.) Scopes nest; they are per thread.
  static constexpr uint64_t kReserveChunks = 2;
  static constexpr uint64_t kReserveMinChunks = 16;  // the reserve is at most 1/8 of the pool
  class WORT_EXPORT ReserveScope {
   public:
    ReserveScope();
    ~ReserveScope();
    ReserveScope(const ReserveScope&) = delete;
    ReserveScope& operator=(const ReserveScope&) = delete;
  };
  // Usable size of the live block at `off` (its size class or run length).
  size_t UsableSize(uint64_t off) const;
  // Returns the calling thread's cached free blocks to their chunks, then every wholly free
  // chunk (including the one each size class otherwise keeps in reserve) to FREE, so that the
  // space can serve another size class or a large block (the server's eviction uses it). The
  // only persistent writes are the chunk-table words of chunks that become FREE.
  void Trim();

  AllocStats Stats() const;
  // The open-time work (issue 35): SMALL chunk headers read since open. A clean open reads the
  // chunk table (8 bytes a chunk) and no chunk header; a chunk's header is read when the chunk is
  // first needed (a free of one of its blocks, a refill of its size class that finds no partial
  // chunk, Stats, Check, ForEach*). Counted, so that tests can assert it as work, not time.
  uint64_t ChunkHeadersRead() const;

  // Calls fn(offset, usable_size) for every allocated block (thread caches excluded), after
  // freeing what is retired. Not concurrent with Alloc/Free nor with any index operation. Used by tests to compare the allocated set with what visit
  // functions reach.
  void ForEachAllocated(const std::function<void(uint64_t, size_t)>& fn) const;
  // The same without freeing what is retired first: a retired block, not yet reclaimed, counts
  // as allocated. It changes nothing (the crash explorer calls it between operations).
  void ForEachInUse(const std::function<void(uint64_t, size_t)>& fn) const;

  // Verifies the chunk table and the in-DRAM metadata; appends findings to `report`.
  Status Check(std::string* report) const;

  // ---- used by Pool ----------------------------------------------------------------------
  // Start recovery after an unclean stop (background or not); see the design above.
  void StartRecovery(bool background);
  Status WaitForRecovery();
  bool RecoveryDone() const;
  double RecoverySeconds() const;
  // Clean shutdown: flush thread caches, write bitmaps, persist. Pool then sets the clean flag.
  Status PrepareClose();

  // Marks a block as reachable during the mark phase (called through visit functions).
  void Mark(uint64_t off);

  struct WORT_NO_EXPORT Impl;  // internal (src/alloc/alloc.cc)

 private:
  // The epoch manager's reclaim function, and the drain of what it held back for readers in
  // other processes (src/pm/share.h, src/alloc/alloc.cc).
  void ReclaimShared(uint64_t off);
  void DrainShared();
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<sync::EpochManager> epoch_;  // reclaim = Free; drained before close
};

}  // namespace wort
