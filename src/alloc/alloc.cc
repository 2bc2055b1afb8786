// The persistent allocator. Design and contract: include/wort/alloc.h.
//
// Persistent state
//   chunk table word (8 bytes per chunk, at Pool::chunk_table_offset()):
//     0                      FREE
//     kSmall << 56 | class   SMALL chunk serving one size class; blocks start 4 KiB in
//     kLargeHead << 56 | n   first chunk of a large block spanning n chunks; block at chunk start
//     kLargeTail << 56 | d   d chunks after its head
//   SMALL chunk header (first 4 KiB of the chunk), written only by a clean close:
//     magic, class, generation of the close, allocation bitmap (1 = allocated)
// Write order
//   - a chunk becomes SMALL/LARGE: its table word(s) are persisted before any block is returned.
//   - a chunk becomes FREE: only when no block of it is allocated (contract R2 makes sure no
//     persistent reference remains); its table word is then persisted. A large run's tail words
//     are cleared before its head word on free, and set before its head word on allocation.
//   - clean close: all chunk headers persisted, then (by Pool) the clean flag.
// Volatile state (DRAM, under mu_ unless noted)
//   per chunk: kind, class, allocation bitmap (blocks in thread caches count as allocated),
//   free count, membership in its class's partial list; per thread: a cache of free blocks per
//   class (owner thread only, no lock).
#include "wort/alloc.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "pm/share.h"
#include "sync/epoch.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort {

namespace {

constexpr uint64_t kChunk = Pool::kChunkSize;
constexpr uint64_t kChunkHeader = 4096;
constexpr uint64_t kChunkMagic = 0x4B4E5548'43545257ull;  // "WRTCHUNK"

enum : uint64_t { kFree = 0, kSmall = 1, kLargeHead = 2, kLargeTail = 3 };
inline uint64_t WordKind(uint64_t w) { return w >> 56; }
inline uint64_t WordArg(uint64_t w) { return w & ((1ull << 56) - 1); }
inline uint64_t MakeWord(uint64_t kind, uint64_t arg) { return (kind << 56) | arg; }

// Size classes: multiples of 64 up to 1 KiB, then four steps per doubling up to kMaxSmall.
struct SizeClasses {
  std::vector<uint32_t> size;
  uint8_t lookup[1024 / 64 + 1];  // for sizes <= 1 KiB: (size+63)/64 -> class
  [[gnu::noinline, gnu::cold]] SizeClasses() {
    for (uint32_t s = 64; s <= 1024; s += 64) size.push_back(s);
    for (uint32_t p = 1024; p < Allocator::kMaxSmall; p *= 2)
      for (uint32_t q = 1; q <= 4; ++q) size.push_back(p + p * q / 4);
    for (uint32_t i = 0; i <= 1024 / 64; ++i) lookup[i] = i == 0 ? 0 : static_cast<uint8_t>(i - 1);
  }
  int ClassOf(size_t n) const {
    if (n <= 1024) return lookup[(n + 63) / 64];
    size_t lo = 16, hi = size.size() - 1;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (size[mid] >= n) hi = mid; else lo = mid + 1;
    }
    return static_cast<int>(lo);
  }
};
// Inline: the guard test of the static is three instructions; out of line GCC made the call a
// 20-instruction prologue and epilogue (the constructor inlined into it), on every Alloc.
[[gnu::always_inline]] inline const SizeClasses& Classes() {
  static const SizeClasses c;
  return c;
}
inline uint32_t BlocksPerChunk(uint32_t cls_size) { return static_cast<uint32_t>((kChunk - kChunkHeader) / cls_size); }
constexpr uint32_t kMaxBlocksPerChunk = (kChunk - kChunkHeader) / 64;
constexpr uint32_t kBitmapWords = (kMaxBlocksPerChunk + 63) / 64;

struct ChunkHeader {
  uint64_t magic;
  uint64_t cls;
  uint64_t generation;
  uint64_t nblocks;
  uint64_t bits[kBitmapWords];
};
static_assert(sizeof(ChunkHeader) <= kChunkHeader);

// Blocks a refill takes (and a free batch returns) under the allocator's lock: 64 KiB of blocks,
// at most 256 (h70: 64 before; the 64..256-byte classes of the radix trees' nodes and leaves
// now take the lock 4x less often: a 4M-key load at 2 threads took it 21K times, not 84K).
inline uint32_t BatchFor(uint32_t cls_size) {
  uint32_t b = static_cast<uint32_t>((64 * 1024) / cls_size);
  return std::clamp<uint32_t>(b, 2, 256);
}

std::atomic<uint64_t> g_next_uid{1};

}  // namespace

struct alignas(64) ThreadCache {  // a line of its own: its owner writes it on every Alloc and Free
  struct Bin {
    std::vector<uint64_t> blocks;  // the owner thread's (or, under the allocator's mutex, a drainer's)
    // blocks.size() as of the owner's last change, for Stats (which runs on other threads and
    // must not read the vector while its owner changes it): a relaxed store by the owner.
    std::atomic<uint32_t> count{0};
    void Counted() { count.store(static_cast<uint32_t>(blocks.size()), std::memory_order_relaxed); }
  };
  std::vector<Bin> bins;
  uint64_t uid = 0;
  // Readers in other processes (Allocator::ReclaimShared): the blocks this thread's epoch slot
  // handed on to be freed while readers were registered. The owner's only, no lock (a thread's
  // exit moves them to Impl::xorphans; PrepareClose, with no operation running, drains them).
  // Blocks wait untagged until kTagBatch of them are there; then one increment of the header's
  // xepoch tags them all (issue 31: one store to that shared line per batch, not per block).
  std::vector<uint64_t> xuntagged;
  std::vector<std::pair<uint64_t, uint64_t>> xheld;  // (tag, off): freed once every reader entered past the tag
  bool holds() const { return !xuntagged.empty() || !xheld.empty(); }
  ThreadCache() : bins(Classes().size.size()) {}
};

// Per-thread map from allocator uid to that allocator's cache for this thread. On thread exit,
// blocks in caches of live allocators go back to them.
static thread_local uint32_t t_reserve_depth = 0;  // Allocator::ReserveScope
// How many allocators' caches of this thread hold blocks for readers in other processes
// (ThreadCache::holds; may count high after PrepareClose emptied them, never low): at 0 the
// common path of ReclaimShared (no reader registered) skips the thread-cache lookup.
static thread_local uint32_t t_xholding = 0;

struct Allocator::Impl {
  Pool* pool;
  Allocator* self;
  uint64_t uid;
  uint64_t* table;      // persistent chunk table
  uint64_t max_chunks;
  char* heap;           // base + heap offset
  uint64_t heap_off;

  struct ChunkMeta {
    uint8_t kind = kFree;
    uint8_t cls = 0;
    bool in_partial = false;
    bool frozen = false;     // "old" during post-crash recovery
    bool lazy = false;       // SMALL after a clean open, header (bitmap) not read yet: see Load
    uint32_t nfree = 0;
    uint32_t nblocks = 0;    // SMALL: blocks in chunk; LARGE_HEAD: chunks in run
    uint32_t scan = 0;       // SMALL: the bitmap word Refill starts at (where the last one stopped)
    std::unique_ptr<uint64_t[]> bits;  // SMALL: 1 = allocated or cached
    std::unique_ptr<uint64_t[]> marks; // during recovery: reached by visit
    bool marked = false;               // LARGE_HEAD during recovery
  };

  // Per-chunk DRAM metadata, index = chunk id, in segments of kSeg chunks allocated as the file
  // grows (a pool's capacity may be 1 TiB: a million chunks, most never in the file). A segment
  // is allocated under mu before nchunks_file's release store covers it and is never moved or
  // freed while the allocator lives, so a thread that read an id below nchunks_file may index it
  // without mu.
  struct ChunkMetas {
    static constexpr uint64_t kSeg = 1024;
    std::unique_ptr<std::atomic<ChunkMeta*>[]> segs;
    uint64_t nsegs = 0;
    void Init(uint64_t max_chunks) {
      nsegs = (max_chunks + kSeg - 1) / kSeg;
      segs = std::make_unique<std::atomic<ChunkMeta*>[]>(nsegs);
      for (uint64_t i = 0; i < nsegs; ++i) segs[i].store(nullptr, std::memory_order_relaxed);
    }
    void Cover(uint64_t n) {  // under mu (or before the allocator is shared)
      for (uint64_t i = 0; i < (n + kSeg - 1) / kSeg && i < nsegs; ++i)
        if (segs[i].load(std::memory_order_relaxed) == nullptr) segs[i].store(new ChunkMeta[kSeg], std::memory_order_release);
    }
    void ResetAll() {  // under mu
      for (uint64_t i = 0; i < nsegs; ++i)
        if (ChunkMeta* sg = segs[i].load(std::memory_order_relaxed))
          for (uint64_t j = 0; j < kSeg; ++j) sg[j] = ChunkMeta();
    }
    ChunkMeta& operator[](uint64_t id) const { return segs[id / kSeg].load(std::memory_order_acquire)[id % kSeg]; }
    ~ChunkMetas() {
      for (uint64_t i = 0; i < nsegs; ++i) delete[] segs[i].load(std::memory_order_relaxed);
    }
  };

  mutable std::mutex mu;
  ChunkMetas chunks;                             // index = chunk id
  std::vector<std::vector<uint32_t>> partial;    // per class: chunk ids with nfree > 0
  // Lazy open (issue 35: an open that does not grow with the pool). A clean open reads only the
  // chunk table (8 bytes a chunk); a SMALL chunk's 4 KiB header, its allocation bitmap, is read
  // when the chunk is first needed (Load): a free of one of its blocks, a refill of its class
  // that finds no partial chunk (it loads that class's chunks before taking fresh space, so
  // freed space is reused), Stats/Check/ForEach*. Until then the chunk counts as full and is in
  // no partial list. Per class: the chunks not loaded yet (under mu).
  std::vector<std::vector<uint32_t>> lazy_by_class;
  std::atomic<uint64_t> headers_read{0};  // chunk headers read since open (Load)
  uint64_t bad_headers = 0;               // under mu
  // Chunks currently in the file. Written under mu when the pool grows (and at attach); read
  // without mu by ChunkOf (from Free's thread caches and from the post-crash GC's marking), so
  // it is atomic: the store after Pool::Grow is a release and ChunkOf's load an acquire, so a
  // thread that sees the new count also sees the grown, zeroed file behind it. Reads under mu
  // (the writer's own lock) may be relaxed; the plain conversions below are seq_cst loads.
  std::atomic<uint64_t> nchunks_file{0};
  std::vector<std::unique_ptr<ThreadCache>> caches;

  // Recovery.
  std::atomic<bool> recovering{false};
  std::vector<uint64_t> deferred;  // frees during recovery (under mu)
  std::atomic<uint64_t> retired_outside_epoch{0};  // AllocStats::retired_outside_epoch
  // Readers in other processes (src/pm/share.h): the blocks held for them are in the thread
  // caches (ThreadCache::xuntagged, xheld: per thread, no lock). Those of threads that exited
  // come here, freed by the next ReclaimShared that finds no reader registered, ReclaimRetired
  // or PrepareClose. Under xmu (taken before mu).
  std::mutex xmu;
  std::vector<uint64_t> xorphans;
  std::atomic<bool> xpending{false};  // xorphans is not empty (read without xmu)
  std::thread gc_thread;
  std::mutex rec_mu;
  std::condition_variable rec_cv;
  bool rec_done = true;
  Status rec_status;
  double rec_seconds = 0;
  uint64_t bad_marks = 0;

  uint64_t ChunkOff(uint64_t id) const { return heap_off + id * kChunk; }
  bool ChunkOf(uint64_t off, uint64_t* id) const {
    if (off < heap_off) return false;
    const uint64_t c = (off - heap_off) / kChunk;
    if (c >= nchunks_file.load(std::memory_order_acquire)) return false;
    *id = c;
    return true;
  }
  void PersistWord(uint64_t id, uint64_t w) {
    pm::store8(&table[id], w);
    pm::persist(&table[id], 8);
  }
  void SetupSmall(uint64_t id, uint8_t cls, bool all_free) {
    ChunkMeta& m = chunks[id];
    m.kind = kSmall;
    m.cls = cls;
    m.nblocks = BlocksPerChunk(Classes().size[cls]);
    m.bits = std::make_unique<uint64_t[]>(kBitmapWords);
    std::memset(m.bits.get(), 0, kBitmapWords * 8);
    m.nfree = all_free ? m.nblocks : 0;
    m.lazy = false;
    m.scan = 0;
  }
  // Reads a lazy chunk's header (written by the last clean close). Under mu. A header that does
  // not match its table word (corruption: a clean close writes every header it changed) makes
  // the chunk count as full: its blocks are never handed out again, and its space comes back
  // at the next post-crash recovery (a bad table word at open still recovers at once).
  void Load(uint64_t id) {
    ChunkMeta& m = chunks[id];
    if (!m.lazy) return;
    const uint8_t cls = m.cls;
    headers_read.fetch_add(1, std::memory_order_relaxed);
    const auto* h = pool->at<ChunkHeader>(ChunkOff(id));
    // kind, cls and nblocks were set at open and stay: Free and UsableSize read them unlocked.
    m.bits = std::make_unique<uint64_t[]>(kBitmapWords);
    std::memset(m.bits.get(), 0, kBitmapWords * 8);
    m.nfree = 0;
    m.lazy = false;
    if (h->magic != kChunkMagic || h->cls != cls || h->nblocks != m.nblocks) {
      if (bad_headers++ == 0)
        std::fprintf(stderr, "wort: allocator: header of chunk %llu of %s is inconsistent; its blocks stay allocated\n",
                     (unsigned long long)id, pool->path().c_str());
      for (uint32_t i = 0; i < m.nblocks; ++i) m.bits[i / 64] |= 1ull << (i % 64);
      return;
    }
    std::memcpy(m.bits.get(), h->bits, kBitmapWords * 8);
    uint32_t used = 0;
    for (uint32_t i = 0; i < kBitmapWords; ++i) used += std::popcount(m.bits[i]);
    m.nfree = used <= m.nblocks ? m.nblocks - used : 0;
    AddPartial(id);
  }
  void LoadAll() {  // under mu
    for (auto& v : lazy_by_class) {
      for (uint32_t id : v) Load(id);
      v.clear();
    }
  }
  void AddPartial(uint64_t id) {
    ChunkMeta& m = chunks[id];
    if (!m.in_partial && m.nfree > 0 && !m.frozen) {
      m.in_partial = true;
      partial[m.cls].push_back(static_cast<uint32_t>(id));
    }
  }

  // The allocator's lock, taken by the paths that leave the thread cache (a refill, a batch of
  // frees, a large block, growth). Counts the acquisitions (under the lock) and the ones that
  // had to wait (AllocStats::lock_waits: only then is the counter's line written from outside).
  std::atomic<uint64_t> lock_waits{0};
  uint64_t lock_acquisitions = 0;  // under mu
  void LockMu(std::unique_lock<std::mutex>& lk) {
    if (!lk.try_lock()) {
      lock_waits.fetch_add(1, std::memory_order_relaxed);
      lk.lock();
    }
    ++lock_acquisitions;
  }
  // Pool growth (posix_fallocate + fdatasync: milliseconds) runs under grow_mu, not mu: the
  // other threads refill from partial chunks and free meanwhile; one that needs a fresh chunk
  // too waits for grow_mu and then finds the grown file.
  mutable std::mutex grow_mu;
  uint64_t grows = 0;  // under grow_mu
  // Growth ahead of the writers (h70; doc/allocator.md "Growth ahead of the writers"): when a
  // thread takes a fresh chunk and fewer than AheadWatermark(nfile) FREE chunks are left in a
  // pool that can grow, it is elected (ahead_busy, under mu) and grows the file after it has
  // left mu (GrowAhead), while the other threads go on with the chunks still free. Only a
  // thread that finds no free chunk at all waits for growth (counted in grow_waits).
  static constexpr uint64_t kAheadMinChunks = 16;  // smaller files grow on demand only
  // One growth ahead adds a quarter of the file, at most kAheadStepChunks (64 MiB: tens of ms
  // of HugeFill) or an eighth of the file, whichever is more (h72: in steps proportional to the
  // heap once it passes 512 MiB): while the free chunks stay under the watermark the next fresh
  // chunk elects the next grower, so a big pool's growth is spread over the writers in steps
  // instead of resting on one writer for a whole quarter (h70: 0.3-2 s for a 4M-key load on
  // the 2-core VM).
  static constexpr uint64_t kAheadStepChunks = 64;
  static uint64_t AheadStep(uint64_t nfile) {
    return std::clamp<uint64_t>(nfile / 4, 1, std::max<uint64_t>(kAheadStepChunks, nfile / 8));
  }
  // A growth ahead starts while at least one step's worth of chunks is still free, and at an
  // eighth of the file free at the latest (h72; h70 started at an eighth only: below 512 MiB that
  // is less than the step, and 16 writers on the 16-core machine used up the free chunks while
  // a 64 MiB step was still being made). So the writers wait for growth only if they take
  // fresh chunks faster than one thread makes them, not because a step outlasts the headroom.
  static uint64_t AheadWatermark(uint64_t nfile) { return std::max<uint64_t>({2, nfile / 8, AheadStep(nfile)}); }
  bool ahead_busy = false;        // under mu: an elected thread has not finished its growth
  uint64_t ahead_failed_at = 0;   // under mu: the file size (chunks) at which a growth ahead failed
  uint64_t grows_ahead = 0;       // under grow_mu: growths made ahead (counted in grows too)
  uint64_t grow_ns = 0;           // under grow_mu: time in Pool::Grow, ahead or not
  // Under mu: waits of a thread that found no free chunk for growth (its own or another's),
  // and their time (from leaving mu to holding it again).
  uint64_t grow_waits = 0;
  uint64_t grow_wait_ns = 0;
  static uint64_t NowNs() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch()).count());
  }
  // The chunks the file may grow to: the size limit, the capacity, the growth limit.
  uint64_t GrowableChunks() const {
    const uint64_t lim = pool->max_size() > heap_off ? (pool->max_size() - heap_off) / kChunk : 0;
    uint64_t c = std::min(lim, max_chunks);
    if (const uint64_t glim = pool->growth_limit(); glim != 0)
      c = std::min(c, glim > heap_off ? (glim - heap_off) / kChunk : 0);
    return c;
  }

  // ---- chunk-level allocation (under mu) ------------------------------------------------
  // Finds `n` consecutive FREE, non-frozen chunks, growing the file if needed. `lk` holds mu;
  // it is released while the file grows (the chunk state may change meanwhile: the scan is
  // repeated after growth).
  // *ahead is set when the calling thread is elected to grow ahead: it calls GrowAhead once it
  // has left mu.
  Status FindFreeRun(uint64_t n, uint64_t* first, std::unique_lock<std::mutex>& lk, bool* ahead) {
    for (;;) {
      const uint64_t nfile = nchunks_file.load(std::memory_order_relaxed);
      uint64_t run = 0, free_total = 0;
      bool found = false;
      for (uint64_t id = 0; id < nfile; ++id) {
        const ChunkMeta& m = chunks[id];
        if (m.kind == kFree && !m.frozen) {
          ++free_total;
          if (!found && ++run == n) {
            *first = id + 1 - n;
            found = true;
          }
        } else if (!found) {
          run = 0;
        }
      }
      // The size limit may be below the file (lowered at an open): then no growth at all.
      const uint64_t lim = pool->max_size() > heap_off ? (pool->max_size() - heap_off) / kChunk : 0;
      if (found) {
        // The reserve (Allocator::ReserveScope): the last free chunk of a pool that cannot grow.
        const uint64_t glim = pool->growth_limit();
        const bool can_grow = nfile < std::min(lim, max_chunks) && (glim == 0 || heap_off + (nfile + 1) * kChunk <= glim);
        if (can_grow && !ahead_busy && nfile >= kAheadMinChunks && free_total - n < AheadWatermark(nfile) &&
            ahead_failed_at != nfile) {
          ahead_busy = true;
          *ahead = true;
        }
        if (can_grow || free_total >= n + Allocator::kReserveChunks || t_reserve_depth > 0 ||
            std::max(nfile, std::min(lim, max_chunks)) < Allocator::kReserveMinChunks)
          return Status::OK();
        return Status::PoolFull("pool full: its last free chunks are held back for overwrites and deletes (" +
                                std::to_string(pool->max_size()) + " bytes, " +
                                (pool->max_size() < pool->capacity() ? "its size limit: open it with a larger max_size to raise it"
                                                                    : "its capacity") +
                                "): " + pool->path());
      }
      // Grow: at least what is missing, and at least a quarter of the current heap (fewer
      // growth steps for big loads), within max_size.
      const uint64_t start = nfile - run;
      uint64_t want = start + n;
      want = std::max(want, nfile + std::max<uint64_t>(1, nfile / 4));
      want = std::min(want, std::min(lim, max_chunks));
      if (want < start + n)
        return Status::PoolFull("pool full: no " + std::to_string(n) + " free chunk(s) of 1 MiB and the pool is at its maximum size (" +
                                std::to_string(pool->max_size()) + " bytes" +
                                (pool->max_size() < pool->capacity() ? ", its size limit: open it with a larger max_size to raise it"
                                                                    : ", its capacity") +
                                "): " + pool->path());
      const uint64_t t0 = NowNs();
      lk.unlock();
      Status s;
      {
        std::lock_guard<std::mutex> g(grow_mu);
        // Another thread may have grown the file while this one waited: then scan again.
        if ((pool->size() - heap_off) / kChunk == nfile) {
          ++grows;
          const uint64_t g0 = NowNs();
          s = pool->Grow(heap_off + want * kChunk);
          // Try the minimum growth before giving up.
          if (!s.ok() && want > start + n) s = pool->Grow(heap_off + (start + n) * kChunk);
          grow_ns += NowNs() - g0;
        }
      }
      LockMu(lk);
      ++grow_waits;
      grow_wait_ns += NowNs() - t0;
      if (!s.ok()) return s;
      const uint64_t grown = (pool->size() - heap_off) / kChunk;
      if (grown > nchunks_file.load(std::memory_order_relaxed)) {
        chunks.Cover(grown);
        nchunks_file.store(grown, std::memory_order_release);
      }
    }
  }

  // The elected thread's growth (FindFreeRun set *ahead), called without mu: the file grows by
  // AheadStep (a quarter, as on demand, but at most the larger of kAheadStepChunks and an
  // eighth), within its limits (Pool::Grow's persist order: the file grown and durable before
  // the header's size), then the new chunks are published under mu. A failure is not reported here (the allocation that needs the space
  // grows on demand and reports it); no growth ahead is tried again at the same file size.
  void GrowAhead() {
    const uint64_t nfile = nchunks_file.load(std::memory_order_acquire);
    const uint64_t want = std::min(nfile + AheadStep(nfile), GrowableChunks());
    Status s;
    {
      std::lock_guard<std::mutex> g(grow_mu);
      if (want > (pool->size() - heap_off) / kChunk) {  // else another thread grew it meanwhile
        ++grows;
        ++grows_ahead;
        const uint64_t g0 = NowNs();
        s = pool->Grow(heap_off + want * kChunk);
        grow_ns += NowNs() - g0;
      }
    }
    std::unique_lock<std::mutex> lk(mu, std::defer_lock);
    LockMu(lk);
    const uint64_t grown = (pool->size() - heap_off) / kChunk;
    if (grown > nchunks_file.load(std::memory_order_relaxed)) {
      chunks.Cover(grown);
      nchunks_file.store(grown, std::memory_order_release);
    }
    if (!s.ok()) ahead_failed_at = nchunks_file.load(std::memory_order_relaxed);
    ahead_busy = false;
  }

  // Moves up to `want` free blocks of class `cls` into `out`. Under mu (`lk`; FindFreeRun may
  // release it while the file grows). *ahead: as FindFreeRun's.
  Status Refill(uint8_t cls, uint32_t want, std::vector<uint64_t>& out, std::unique_lock<std::mutex>& lk, bool* ahead) {
    const uint32_t csize = Classes().size[cls];
    auto& pl = partial[cls];
    while (want > 0) {
      // Chunks of this class not loaded since a clean open come before fresh space.
      for (auto& lz = lazy_by_class[cls]; pl.empty() && !lz.empty();) {
        const uint32_t id = lz.back();
        lz.pop_back();
        Load(id);
      }
      if (pl.empty()) {
        uint64_t id;
        Status s = FindFreeRun(1, &id, lk, ahead);
        if (!s.ok()) return out.empty() ? s : Status::OK();
        SetupSmall(id, cls, /*all_free=*/true);
        PersistWord(id, MakeWord(kSmall, cls));  // before any block of it is handed out
        AddPartial(id);
      }
      const uint32_t id = pl.back();
      ChunkMeta& m = chunks[id];
      const uint64_t base = ChunkOff(id) + kChunkHeader;
      // From the word where the last refill of this chunk stopped, round the bitmap once (words
      // before it may have free bits again after frees): a chunk filled front to back is not
      // rescanned from its first word at every refill (issue 31's callgrind: ~90 instructions
      // per allocation of a 64-byte block, 255 bitmap words a chunk).
      const uint32_t nwords = (m.nblocks + 63) / 64;
      uint32_t w = m.scan < nwords ? m.scan : 0;
      for (uint32_t i = 0; i < nwords && want > 0 && m.nfree > 0; ++i, w = w + 1 == nwords ? 0 : w + 1) {
        m.scan = w;
        uint64_t free_bits = ~m.bits[w];
        const uint32_t valid = std::min<uint32_t>(64, m.nblocks - w * 64);
        if (valid < 64) free_bits &= (1ull << valid) - 1;
        while (free_bits && want > 0) {
          const int b = std::countr_zero(free_bits);
          free_bits &= free_bits - 1;
          m.bits[w] |= 1ull << b;
          --m.nfree;
          --want;
          out.push_back(base + (uint64_t(w) * 64 + b) * csize);
        }
      }
      if (m.nfree == 0) {
        m.in_partial = false;
        pl.pop_back();
      }
    }
    return Status::OK();
  }

  // Returns a small block to its chunk. Under mu. Returns false if it was not allocated.
  // True iff off is a live block (allocated or in a thread cache) per the DRAM state. Under mu.
  bool AllocatedLocked(uint64_t off) const {
    uint64_t id;
    if (!ChunkOf(off, &id)) return false;
    const ChunkMeta& m = chunks[id];  // never lazy: used by the post-crash GC only
    if (m.kind == kLargeHead) return off == ChunkOff(id);
    if (m.kind != kSmall) return false;
    const uint32_t csize = Classes().size[m.cls];
    if (off < ChunkOff(id) + kChunkHeader) return false;
    const uint64_t rel = off - ChunkOff(id) - kChunkHeader;
    if (rel % csize != 0 || rel / csize >= m.nblocks) return false;
    const uint64_t idx = rel / csize;
    return (m.bits[idx / 64] >> (idx % 64)) & 1;
  }

  bool ReleaseSmall(uint64_t off, uint64_t id) {
    ChunkMeta& m = chunks[id];
    Load(id);  // (its id stays in lazy_by_class: Load skips a loaded chunk)
    const uint32_t csize = Classes().size[m.cls];
    const uint64_t rel = off - ChunkOff(id) - kChunkHeader;
    if (off < ChunkOff(id) + kChunkHeader || rel % csize != 0 || rel / csize >= m.nblocks) return false;
    const uint64_t idx = rel / csize;
    uint64_t& w = m.bits[idx / 64];
    const uint64_t bit = 1ull << (idx % 64);
    if (!(w & bit)) return false;
    w &= ~bit;
    ++m.nfree;
    if (m.nfree == m.nblocks) {
      // Whole chunk free. Keep it if it is its class's only partial chunk (avoids flapping);
      // otherwise give it back to the pool.
      auto& pl = partial[m.cls];
      const bool others = pl.size() > (m.in_partial ? 1u : 0u);
      if (others) {
        if (m.in_partial) std::erase(pl, static_cast<uint32_t>(id));
        m = ChunkMeta();
        PersistWord(id, kFree);
        return true;
      }
    }
    AddPartial(id);
    return true;
  }

  void FreeLocked(uint64_t off, bool quiet) {
    uint64_t id;
    if (!ChunkOf(off, &id)) {
      if (!quiet) std::fprintf(stderr, "wort: allocator: Free(%llu) outside the heap ignored\n", (unsigned long long)off);
      return;
    }
    ChunkMeta& m = chunks[id];
    if (m.kind == kSmall) {
      if (!ReleaseSmall(off, id) && !quiet)
        std::fprintf(stderr, "wort: allocator: Free(%llu) of a block that is not allocated ignored\n", (unsigned long long)off);
      return;
    }
    if (m.kind == kLargeHead && off == ChunkOff(id)) {
      const uint64_t n = m.nblocks;
      for (uint64_t i = n; i-- > 1;) {
        chunks[id + i] = ChunkMeta();
        PersistWord(id + i, kFree);
      }
      m = ChunkMeta();
      PersistWord(id, kFree);
      return;
    }
    if (!quiet) std::fprintf(stderr, "wort: allocator: Free(%llu) of a block that is not allocated ignored\n", (unsigned long long)off);
  }

  ThreadCache* Cache();      // the calling thread's cache (allocation and free fast paths)
  ThreadCache* CacheSlow();  // Cache() when the thread's last one was another allocator's
  void DrainCache(ThreadCache* tc) {
    for (auto& bin : tc->bins) {
      for (uint64_t off : bin.blocks) FreeLocked(off, /*quiet=*/false);
      bin.blocks.clear();
      bin.Counted();
    }
  }

  // ---- recovery ----------------------------------------------------------------------
  void RunGc();
};

namespace {
// Thread-local registry of caches: (allocator uid, cache, impl). Impl pointers are only
// dereferenced while the allocator is registered as alive.
std::mutex g_live_mu;
std::unordered_set<Allocator::Impl*>& LiveAllocators() {
  static auto* s = new std::unordered_set<Allocator::Impl*>();
  return *s;
}
// The thread's last (allocator uid, cache), checked first by Cache(): one compare on the
// allocation fast path instead of the TlsCaches walk behind its TLS wrapper (issue 31's
// callgrind: ~40 instructions per Alloc). Uids are never reused, so an entry of a destroyed
// allocator never matches; ~TlsCaches clears it (the caches are drained then).
struct AllocLastCache {
  uint64_t uid;
  ThreadCache* tc;
};
constinit __attribute__((tls_model("initial-exec"))) thread_local AllocLastCache t_alloc_last{0, nullptr};
// Set by ~TlsCaches: the thread's caches are drained and must not take blocks again. A thread's
// exit runs thread-local destructors in reverse order of first use, so the epoch's (EpochTls,
// which reclaims the thread's old enough retired blocks: Free) may run after this one - a thread
// that entered the pool's epoch before its first allocation, as every KvStore and server writer
// does. Those frees then go under the allocator's lock straight to their chunks (Cache() returns
// null); before, they went into the drained cache, out of every live thread's reach until close
// (issue 31 (c); test EpochTest.BlocksReclaimedAtAThreadsExitGoBackToTheirChunks).
constinit __attribute__((tls_model("initial-exec"))) thread_local bool t_caches_gone = false;
struct TlsCaches {
  struct Entry {
    uint64_t uid;
    ThreadCache* tc;
    Allocator::Impl* impl;
  };
  Entry e[4] = {};
  std::vector<Entry> more;
  ~TlsCaches() {
    t_alloc_last = {0, nullptr};
    t_caches_gone = true;
    std::lock_guard<std::mutex> g(g_live_mu);
    auto give_back = [](Entry& x) {
      if (!x.tc) return;
      if (LiveAllocators().count(x.impl) && x.impl->uid == x.uid) {
        if (!x.tc->xuntagged.empty() || !x.tc->xheld.empty()) {
          // Held for readers in other processes: to the allocator's orphans (xmu before mu).
          std::lock_guard<std::mutex> g3(x.impl->xmu);
          for (uint64_t o : x.tc->xuntagged) x.impl->xorphans.push_back(o);
          for (const auto& [tag, o] : x.tc->xheld) x.impl->xorphans.push_back(o);
          x.tc->xuntagged.clear();
          x.tc->xheld.clear();
          x.impl->xpending.store(true, std::memory_order_release);
        }
        std::lock_guard<std::mutex> g2(x.impl->mu);
        x.impl->DrainCache(x.tc);
      }
    };
    for (auto& x : e) give_back(x);
    for (auto& x : more) give_back(x);
  }
};
thread_local TlsCaches tls_caches;
}  // namespace

ThreadCache* Allocator::Impl::Cache() {
  if (t_alloc_last.uid == uid) [[likely]] return t_alloc_last.tc;
  if (t_caches_gone) [[unlikely]] return nullptr;  // the thread is exiting (above)
  ThreadCache* tc = CacheSlow();
  t_alloc_last = {uid, tc};
  return tc;
}

ThreadCache* Allocator::Impl::CacheSlow() {
  TlsCaches& t = tls_caches;
  for (auto& x : t.e)
    if (x.uid == uid) return x.tc;
  for (auto& x : t.more)
    if (x.uid == uid) return x.tc;
  auto tc = std::make_unique<ThreadCache>();
  tc->uid = uid;
  ThreadCache* raw = tc.get();
  {
    std::lock_guard<std::mutex> g(mu);
    caches.push_back(std::move(tc));
  }
  TlsCaches::Entry ent{uid, raw, this};
  for (auto& x : t.e) {
    // Reuse a slot whose allocator is gone.
    bool dead;
    {
      std::lock_guard<std::mutex> g(g_live_mu);
      dead = x.tc == nullptr || !LiveAllocators().count(x.impl) || x.impl->uid != x.uid;
    }
    if (dead) {
      x = ent;
      return raw;
    }
  }
  t.more.push_back(ent);
  return raw;
}

Allocator::Allocator(Pool* pool, bool opened_clean)
    : impl_(std::make_unique<Impl>()),
      epoch_(std::make_unique<sync::EpochManager>(
          [](void* a, uint64_t off) { static_cast<Allocator*>(a)->ReclaimShared(off); }, this)) {
  Impl& I = *impl_;
  I.pool = pool;
  I.self = this;
  I.uid = g_next_uid.fetch_add(1);
  I.table = pool->at<uint64_t>(pool->chunk_table_offset());
  I.max_chunks = pool->max_chunks();
  I.heap_off = pool->heap_offset();
  I.heap = pool->base() + I.heap_off;
  I.chunks.Init(I.max_chunks);
  I.partial.resize(Classes().size.size());
  I.lazy_by_class.resize(Classes().size.size());
  I.chunks.Cover((pool->size() - I.heap_off) / kChunk);
  I.nchunks_file.store((pool->size() - I.heap_off) / kChunk, std::memory_order_release);
  {
    std::lock_guard<std::mutex> g(g_live_mu);
    LiveAllocators().insert(impl_.get());
  }
  if (!opened_clean) return;  // StartRecovery (or read-only use) follows
  // Clean open: the chunk table and the bitmaps written by the last close are the truth.
  bool bad = false;
  for (uint64_t id = 0; id < I.nchunks_file; ++id) {
    const uint64_t w = pm::load8(&I.table[id]);
    Impl::ChunkMeta& m = I.chunks[id];
    switch (WordKind(w)) {
      case kFree: break;
      case kSmall: {
        const uint64_t cls = WordArg(w);
        if (cls >= Classes().size.size()) {
          bad = true;
          break;
        }
        // The header is read when the chunk is first needed (Impl::Load).
        m.kind = kSmall;
        m.cls = static_cast<uint8_t>(cls);
        m.nblocks = BlocksPerChunk(Classes().size[cls]);
        m.nfree = 0;
        m.lazy = true;
        I.lazy_by_class[cls].push_back(static_cast<uint32_t>(id));
        break;
      }
      case kLargeHead:
        m.kind = kLargeHead;
        m.nblocks = static_cast<uint32_t>(WordArg(w));
        break;
      case kLargeTail:
        m.kind = kLargeTail;
        m.nblocks = static_cast<uint32_t>(WordArg(w));
        break;
      default: bad = true;
    }
  }
  if (bad) {
    std::fprintf(stderr, "wort: allocator metadata of %s is inconsistent; recovering by reachability\n",
                 pool->path().c_str());
    I.chunks.ResetAll();
    for (auto& p : I.partial) p.clear();
    for (auto& v : I.lazy_by_class) v.clear();
    if (!pool->read_only()) StartRecovery(/*background=*/false);
  }
}

Allocator::~Allocator() {
  epoch_.reset();  // frees what is still retired, while the allocator is whole
  Impl& I = *impl_;
  if (I.gc_thread.joinable()) I.gc_thread.join();
  std::lock_guard<std::mutex> g(g_live_mu);
  LiveAllocators().erase(impl_.get());
}

namespace {
// Out of fresh space while the post-crash GC still holds the old chunks frozen. Waiting for it
// here could deadlock: the caller may hold its index's lock, which the GC's visit of that index
// takes (shared). So the allocation fails; it can be retried once Pool::WaitForRecovery returns.
Status RecoveryPoolFull(const Status& s) {
  if (!s.IsPoolFull()) return s;
  return Status::PoolFull("pool full until the post-crash GC finishes (it frees what the crash left "
                          "unreachable; Pool::WaitForRecovery waits for it): " + s.message());
}
}  // namespace

Status Allocator::Alloc(size_t size, uint64_t* off) {
  Impl& I = *impl_;
  if (I.pool->read_only()) return Status::InvalidArgument("pool is read-only");
  if (size == 0) size = 1;
  if (size > kMaxSmall) {
    const uint64_t n = (size + kChunk - 1) / kChunk;
    Status s;
    bool ahead = false;
    {
      std::unique_lock<std::mutex> g(I.mu, std::defer_lock);
      I.LockMu(g);
      uint64_t first;
      s = I.FindFreeRun(n, &first, g, &ahead);
      if (s.ok()) {
        for (uint64_t i = 1; i < n; ++i) {
          I.chunks[first + i].kind = kLargeTail;
          I.chunks[first + i].nblocks = static_cast<uint32_t>(i);
          pm::store8(&I.table[first + i], MakeWord(kLargeTail, i));
        }
        pm::flush(&I.table[first], n * 8);
        pm::store8(&I.table[first], MakeWord(kLargeHead, n));
        pm::persist(&I.table[first], 8);
        I.chunks[first].kind = kLargeHead;
        I.chunks[first].nblocks = static_cast<uint32_t>(n);
        *off = I.ChunkOff(first);
      }
    }
    if (ahead) I.GrowAhead();
    if (s.ok()) return s;
    return I.recovering.load() ? RecoveryPoolFull(s) : s;
  }
  const int cls = Classes().ClassOf(size);
  ThreadCache* tc = I.Cache();
  if (tc == nullptr) [[unlikely]] {  // an exiting thread whose caches are gone: one block, no cache
    std::vector<uint64_t> one;
    Status s;
    bool ahead = false;
    {
      std::unique_lock<std::mutex> g(I.mu, std::defer_lock);
      I.LockMu(g);
      s = I.Refill(static_cast<uint8_t>(cls), 1, one, g, &ahead);
    }
    if (ahead) I.GrowAhead();
    if (!one.empty()) {
      *off = one.back();
      return Status::OK();
    }
    if (s.ok()) s = Status::PoolFull("pool full");
    return I.recovering.load() ? RecoveryPoolFull(s) : s;
  }
  ThreadCache::Bin& tb = tc->bins[cls];
  auto& bin = tb.blocks;
  if (!bin.empty()) [[likely]] {
    *off = bin.back();
    bin.pop_back();
    tb.Counted();
    return Status::OK();
  }
  Status s;
  bool ahead = false;
  {
    std::unique_lock<std::mutex> g(I.mu, std::defer_lock);
    I.LockMu(g);
    s = I.Refill(static_cast<uint8_t>(cls), BatchFor(Classes().size[cls]), bin, g, &ahead);
  }
  if (ahead) [[unlikely]] I.GrowAhead();
  if (!bin.empty()) {
    *off = bin.back();
    bin.pop_back();
    tb.Counted();
    return Status::OK();
  }
  if (s.ok()) s = Status::PoolFull("pool full");
  return I.recovering.load() ? RecoveryPoolFull(s) : s;
}

Status Allocator::AllocZeroed(size_t size, uint64_t* off) {
  WORT_RETURN_IF_ERROR(Alloc(size, off));
  std::memset(impl_->pool->at(*off), 0, size);
  return Status::OK();
}

void Allocator::Free(uint64_t off) {
  Impl& I = *impl_;
  if (I.pool->read_only()) return;
  if (I.recovering.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> g(I.mu);
    if (I.recovering.load()) {
      I.deferred.push_back(off);
      return;
    }
  }
  uint64_t id;
  if (!I.ChunkOf(off, &id)) {
    std::fprintf(stderr, "wort: allocator: Free(%llu) outside the heap ignored\n", (unsigned long long)off);
    return;
  }
  // Reading the chunk's kind without the lock is safe: a chunk with a live block cannot change
  // kind (it only becomes FREE when all its blocks are free).
  const auto& m = I.chunks[id];
  if (m.kind == kSmall) {
    const uint8_t cls = m.cls;
    const uint32_t csize = Classes().size[cls];
    const uint64_t rel = off - I.ChunkOff(id);
    if (rel < kChunkHeader || (rel - kChunkHeader) % csize != 0) {
      std::fprintf(stderr, "wort: allocator: Free(%llu) of a misaligned offset ignored\n", (unsigned long long)off);
      return;
    }
    ThreadCache* tc = I.Cache();
    if (tc == nullptr) [[unlikely]] {  // an exiting thread whose caches are gone: to the chunk
      std::unique_lock<std::mutex> g(I.mu, std::defer_lock);
      I.LockMu(g);
      I.FreeLocked(off, false);
      return;
    }
    ThreadCache::Bin& tb = tc->bins[cls];
    auto& bin = tb.blocks;
    bin.push_back(off);
    const uint32_t batch = BatchFor(csize);
    if (bin.size() >= 2 * batch) {
      std::unique_lock<std::mutex> g(I.mu, std::defer_lock);
      I.LockMu(g);
      for (uint32_t i = 0; i < batch; ++i) {
        I.FreeLocked(bin.back(), false);
        bin.pop_back();
      }
    }
    tb.Counted();
    return;
  }
  std::lock_guard<std::mutex> g(I.mu);
  I.FreeLocked(off, false);
}

void Allocator::Trim() {
  Impl& I = *impl_;
  if (I.pool->read_only()) return;
  ThreadCache* tc = I.Cache();  // may take I.mu itself: before the lock
  std::lock_guard<std::mutex> g(I.mu);
  if (tc) I.DrainCache(tc);
  for (auto& pl : I.partial) {
    std::erase_if(pl, [&](uint32_t id) {
      Impl::ChunkMeta& m = I.chunks[id];
      if (m.kind != kSmall || m.frozen || m.nfree != m.nblocks) return false;
      m = Impl::ChunkMeta();  // no block of it is allocated or cached
      I.PersistWord(id, kFree);
      return true;
    });
  }
}

Allocator::ReserveScope::ReserveScope() { ++t_reserve_depth; }
Allocator::ReserveScope::~ReserveScope() { --t_reserve_depth; }

uint64_t Allocator::ChunkHeadersRead() const { return impl_->headers_read.load(std::memory_order_relaxed); }

size_t Allocator::UsableSize(uint64_t off) const {
  const Impl& I = *impl_;
  uint64_t id;
  if (!I.ChunkOf(off, &id)) return 0;
  const auto& m = I.chunks[id];
  if (m.kind == kSmall) return Classes().size[m.cls];
  if (m.kind == kLargeHead) return m.nblocks * kChunk;
  // During recovery a frozen chunk's volatile kind is known from the table.
  const uint64_t w = pm::load8(&I.table[id]);
  if (WordKind(w) == kSmall && WordArg(w) < Classes().size.size()) return Classes().size[WordArg(w)];
  if (WordKind(w) == kLargeHead) return WordArg(w) * kChunk;
  return 0;
}

AllocStats Allocator::Stats() const {
  Impl& I = *impl_;
  std::lock_guard<std::mutex> g(I.mu);
  AllocStats s;
  s.chunk_headers_read = I.headers_read.load(std::memory_order_relaxed);
  I.LoadAll();  // exact counts need every bitmap
  s.chunks_total = I.nchunks_file;
  // The thread caches' counts (Bin::count: their owners change the blocks without the mutex;
  // while allocators run, the figures below are a sum of counts of slightly different moments).
  uint64_t cached_blocks_bytes = 0, cached_blocks = 0;
  for (const auto& tc : I.caches)
    for (size_t c = 0; c < tc->bins.size(); ++c) {
      const uint64_t n = tc->bins[c].count.load(std::memory_order_relaxed);
      cached_blocks += n;
      cached_blocks_bytes += n * Classes().size[c];
    }
  s.bytes_in_thread_caches = cached_blocks_bytes;
  const sync::EpochStats es = epoch_->Stats();
  s.retired_pending = es.pending;
  s.retired_peak = es.peak_pending;
  s.epoch_advances = es.epoch - 2;  // the global epoch starts at 2
  s.retired_outside_epoch = I.retired_outside_epoch.load(std::memory_order_relaxed);
  for (uint64_t id = 0; id < I.nchunks_file; ++id) {
    const auto& m = I.chunks[id];
    switch (m.kind) {
      case kFree: ++s.chunks_free; break;
      case kSmall:
        ++s.chunks_small;
        s.blocks_allocated += m.nblocks - m.nfree;
        s.bytes_allocated += uint64_t(m.nblocks - m.nfree) * Classes().size[m.cls];
        break;
      case kLargeHead:
        ++s.chunks_large;
        ++s.blocks_allocated;
        s.bytes_allocated += m.nblocks * kChunk;
        break;
      case kLargeTail: ++s.chunks_large; break;
    }
  }
  s.blocks_allocated -= cached_blocks;
  s.bytes_allocated -= cached_blocks_bytes;
  s.deferred_frees = I.deferred.size();
  s.lock_acquisitions = I.lock_acquisitions;
  s.lock_waits = I.lock_waits.load(std::memory_order_relaxed);
  s.grow_waits = I.grow_waits;
  s.grow_wait_ns = I.grow_wait_ns;
  {
    std::lock_guard<std::mutex> gg(I.grow_mu);  // order: mu, then grow_mu (growth holds grow_mu alone)
    s.grows = I.grows;
    s.grows_ahead = I.grows_ahead;
    s.grow_ns = I.grow_ns;
  }
  return s;
}

void Allocator::ForEachAllocated(const std::function<void(uint64_t, size_t)>& fn) const {
  epoch_->Drain();  // retired blocks are free (no operation runs: see alloc.h)
  ForEachInUse(fn);
}

void Allocator::ForEachInUse(const std::function<void(uint64_t, size_t)>& fn) const {
  Impl& I = *impl_;
  std::lock_guard<std::mutex> g(I.mu);
  I.LoadAll();
  std::unordered_set<uint64_t> cached;
  for (const auto& tc : I.caches)
    for (const auto& b : tc->bins) cached.insert(b.blocks.begin(), b.blocks.end());
  for (uint64_t id = 0; id < I.nchunks_file; ++id) {
    const auto& m = I.chunks[id];
    if (m.kind == kSmall) {
      const uint32_t csize = Classes().size[m.cls];
      for (uint32_t i = 0; i < m.nblocks; ++i) {
        if (!(m.bits[i / 64] >> (i % 64) & 1)) continue;
        const uint64_t off = I.ChunkOff(id) + kChunkHeader + uint64_t(i) * csize;
        if (!cached.count(off)) fn(off, csize);
      }
    } else if (m.kind == kLargeHead) {
      fn(I.ChunkOff(id), m.nblocks * kChunk);
    }
  }
}

Status Allocator::Check(std::string* report) const {
  Impl& I = *impl_;
  std::lock_guard<std::mutex> g(I.mu);
  I.LoadAll();
  bool ok = true;
  auto bad = [&](const std::string& m) {
    ok = false;
    if (report) *report += "allocator: " + m + "\n";
  };
  if (I.recovering.load()) return Status::OK();  // volatile state incomplete until the GC ends
  for (uint64_t id = 0; id < I.nchunks_file; ++id) {
    const auto& m = I.chunks[id];
    const uint64_t w = pm::load8(&I.table[id]);
    const std::string where = "chunk " + std::to_string(id) + ": ";
    switch (m.kind) {
      case kFree:
        if (w != 0) bad(where + "FREE in DRAM but table word is " + std::to_string(w));
        break;
      case kSmall: {
        if (w != MakeWord(kSmall, m.cls)) bad(where + "SMALL class mismatch with the table");
        uint32_t used = 0;
        for (uint32_t i = 0; i < kBitmapWords; ++i) used += std::popcount(m.bits[i]);
        if (used + m.nfree != m.nblocks) bad(where + "free count disagrees with the bitmap");
        if (m.nblocks < kMaxBlocksPerChunk) {
          for (uint32_t i = m.nblocks; i < kBitmapWords * 64; ++i)
            if (m.bits[i / 64] >> (i % 64) & 1) { bad(where + "bit set past the last block"); break; }
        }
        break;
      }
      case kLargeHead:
        if (w != MakeWord(kLargeHead, m.nblocks) || id + m.nblocks > I.nchunks_file) bad(where + "bad large head");
        for (uint64_t i = 1; i < m.nblocks && id + i < I.nchunks_file; ++i)
          if (I.chunks[id + i].kind != kLargeTail || pm::load8(&I.table[id + i]) != MakeWord(kLargeTail, i))
            bad(where + "large run tail " + std::to_string(i) + " broken");
        break;
      case kLargeTail:
        if (m.nblocks > id || I.chunks[id - m.nblocks].kind != kLargeHead) bad(where + "orphan large tail");
        break;
    }
  }
  // The words beyond the file's chunks on the chunk-table pages that hold the file's chunks (the
  // later pages are holes until the pool grows: reading them would allocate them on tmpfs).
  const uint64_t words_per_page = 4096 / 8;
  const uint64_t table_end = std::min<uint64_t>(
      I.max_chunks, (I.nchunks_file + words_per_page - 1) / words_per_page * words_per_page);
  for (uint64_t id = I.nchunks_file; id < table_end; ++id)
    if (pm::load8(&I.table[id]) != 0) { bad("chunk table word set beyond the end of the file"); break; }
  return ok ? Status::OK() : Status::Corruption("allocator check failed");
}

// ---- recovery ---------------------------------------------------------------------------

void Allocator::Mark(uint64_t off) {
  Impl& I = *impl_;
  uint64_t id;
  if (!I.ChunkOf(off, &id)) { ++I.bad_marks; return; }
  auto& m = I.chunks[id];
  if (!m.frozen) return;  // fresh chunk: allocated during recovery, already tracked
  if (m.kind == kSmall) {
    const uint32_t csize = Classes().size[m.cls];
    const uint64_t base = I.ChunkOff(id) + kChunkHeader;
    if (off < base || (off - base) % csize || (off - base) / csize >= m.nblocks) { ++I.bad_marks; return; }
    const uint64_t idx = (off - base) / csize;
    m.marks[idx / 64] |= 1ull << (idx % 64);
  } else if (m.kind == kLargeHead && off == I.ChunkOff(id)) {
    m.marked = true;
  } else {
    ++I.bad_marks;
  }
}

void Allocator::StartRecovery(bool background) {
  Impl& I = *impl_;
  {
    std::lock_guard<std::mutex> g(I.mu);
    I.chunks.ResetAll();
    for (auto& p : I.partial) p.clear();
    for (auto& v : I.lazy_by_class) v.clear();
    // Every chunk the table says is in use is old and frozen; everything else is fresh.
    for (uint64_t id = 0; id < I.nchunks_file; ++id) {
      const uint64_t w = pm::load8(&I.table[id]);
      auto& m = I.chunks[id];
      if (w == 0) continue;
      m.frozen = true;
      const uint64_t k = WordKind(w), a = WordArg(w);
      if (k == kSmall && a < Classes().size.size()) {
        // Kind, class and block count now (Free and UsableSize read them unlocked). Its two
        // bitmaps (allocation bits, marks) are made by the GC thread (RunGc), the only reader
        // of a frozen chunk's bitmaps: nothing allocates from it, every free is deferred until
        // the sweep, Check and PrepareClose skip it. So the open (the server's restart after a
        // crash) does no work per chunk beyond reading its table word (issue 35: two 2 KiB
        // bitmaps per chunk were a page fault per MiB of pool before the server listened).
        m.kind = kSmall;
        m.cls = static_cast<uint8_t>(a);
        m.nblocks = BlocksPerChunk(Classes().size[a]);
        m.nfree = 0;
        m.lazy = false;
      } else if (k == kLargeHead && a >= 1) {
        m.kind = kLargeHead;
        m.nblocks = static_cast<uint32_t>(a);
      } else {
        m.kind = kLargeTail;  // tails and unknown words: resolved at the end of the GC
        m.nblocks = static_cast<uint32_t>(a);
      }
    }
    I.recovering.store(true, std::memory_order_release);
  }
  {
    std::lock_guard<std::mutex> g(I.rec_mu);
    I.rec_done = false;
  }
  if (background) {
    I.gc_thread = std::thread([&I] { I.RunGc(); });
  } else {
    I.RunGc();
  }
}

void Allocator::Impl::RunGc() {
  const auto t0 = std::chrono::steady_clock::now();
  {
    // The old SMALL chunks' bitmaps (StartRecovery leaves them to this thread): marks clear,
    // allocation bits clear until the sweep copies the marks in.
    std::lock_guard<std::mutex> g(mu);
    for (uint64_t id = 0; id < nchunks_file; ++id) {
      ChunkMeta& m = chunks[id];
      if (!m.frozen || m.kind != kSmall) continue;
      m.bits = std::make_unique<uint64_t[]>(kBitmapWords);   // value-initialized: all 0
      m.marks = std::make_unique<uint64_t[]>(kBitmapWords);
    }
  }
  Status st;
  std::vector<uint64_t> d;  // deferred frees still to apply after the sweep
  // Mark: every root's visit function reports what its index reaches.
  std::vector<RootInfo> roots = pool->Roots();
  std::vector<RootVisitFn> kinds;
  const RootVisitorLookup lookup = GetRootVisitorLookup();
  for (const RootInfo& r : roots) {
    const RootVisitFn k = lookup ? lookup(r.type) : nullptr;
    if (!k) {
      st = Status::NotSupported("post-crash GC not run: root '" + r.name + "' has index kind id " +
                                std::to_string(r.type) + " which this build cannot visit; old chunks stay reserved");
      break;
    }
    kinds.push_back(k);
  }
  if (st.ok()) {
    for (size_t i = 0; i < roots.size(); ++i)
      kinds[i](*pool, roots[i].off, [this](uint64_t off) { self->Mark(off); });
    // Grace period: every operation in progress has issued the frees (Free or Retire: both are
    // deferred while recovering) of what it unlinked, so none of them arrives after the sweep
    // for a block the visit did not mark (it would be freed twice).
    self->epoch().Synchronize();
    // Readers in other processes may still hold a block the sweep frees (one a dead writer had
    // unlinked): a grace period of the reader table (src/pm/share.h) first.
    if (!pool->private_copy()) share::WaitForReaders(pool->base());
    // Sweep: old chunks take their marks as their allocation state.
    std::lock_guard<std::mutex> g(mu);
    for (uint64_t id = 0; id < nchunks_file; ++id) {
      auto& m = chunks[id];
      if (!m.frozen) continue;
      if (m.kind == kSmall) {
        std::memcpy(m.bits.get(), m.marks.get(), kBitmapWords * 8);
        m.marks.reset();
        uint32_t used = 0;
        for (uint32_t i = 0; i < kBitmapWords; ++i) used += std::popcount(m.bits[i]);
        m.nfree = m.nblocks - used;
        m.frozen = false;
        if (used == 0) {
          m = ChunkMeta();
          PersistWord(id, kFree);
        } else {
          AddPartial(id);
        }
      } else if (m.kind == kLargeHead) {
        const uint64_t n = m.nblocks;
        bool intact = id + n <= nchunks_file;
        for (uint64_t i = 1; intact && i < n; ++i)
          intact = pm::load8(&table[id + i]) == MakeWord(kLargeTail, i) && chunks[id + i].frozen;
        if (m.marked && intact) {
          for (uint64_t i = 0; i < n; ++i) chunks[id + i].frozen = false;
          m.marked = false;
        } else {
          m = ChunkMeta();
          PersistWord(id, kFree);
        }
      }
    }
    // Whatever is still frozen (tails of freed or broken runs, unknown words) is free.
    for (uint64_t id = 0; id < nchunks_file; ++id) {
      auto& m = chunks[id];
      if (!m.frozen) continue;
      m = ChunkMeta();
      PersistWord(id, kFree);
    }
    recovering.store(false, std::memory_order_release);
    // Frees that arrived during the mark phase. A block unlinked before the visit reached it
    // was never marked and is free now: its deferred free is dropped here, under the lock that
    // made it free, before any Alloc can hand it out again. The others are applied after a
    // grace period (lock-free readers may still hold them). doc/allocator.md, "The visit
    // beside writers".
    d.swap(deferred);
    std::erase_if(d, [&](uint64_t off) { return !AllocatedLocked(off); });
  } else {
    // Leave old chunks frozen. Frees of their blocks are dropped (space lost, never data).
    std::lock_guard<std::mutex> g(mu);
    recovering.store(false, std::memory_order_release);
    d.swap(deferred);
    std::erase_if(d, [&](uint64_t off) {
      uint64_t id;
      return !ChunkOf(off, &id) || chunks[id].frozen;
    });
  }
  if (!d.empty()) {
    self->epoch().Synchronize();  // no reader still holds what was unlinked during the GC
    if (!pool->private_copy()) share::WaitForReaders(pool->base());
    std::lock_guard<std::mutex> g(mu);
    for (uint64_t off : d) FreeLocked(off, /*quiet=*/true);
  }
  std::lock_guard<std::mutex> g(rec_mu);
  rec_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rec_status = st;
  rec_done = true;
  rec_cv.notify_all();
}

Status Allocator::WaitForRecovery() {
  Impl& I = *impl_;
  std::unique_lock<std::mutex> g(I.rec_mu);
  I.rec_cv.wait(g, [&] { return I.rec_done; });
  return I.rec_status;
}

bool Allocator::RecoveryDone() const {
  std::lock_guard<std::mutex> g(impl_->rec_mu);
  return impl_->rec_done;
}

double Allocator::RecoverySeconds() const {
  std::lock_guard<std::mutex> g(impl_->rec_mu);
  return impl_->rec_seconds;
}

// The epoch manager's reclaim: no thread of this process holds `off` any more; a reader in
// another process may (src/pm/share.h). Runs on the thread that retired `off` (its epoch slot's
// ReclaimOld), or on a closing or exiting thread (Drain, a slot's release).
//
// With readers registered, what is handed here is kept in the calling thread's cache
// (ThreadCache::xuntagged), with no lock and no shared store. Every kTagBatch blocks one
// increment of the header's xepoch tags them all: the tag is the value after the increment,
// taken after every one of their unlinks. A reader slot stores X+1 where X is the xepoch it
// loaded before its read; a slot above the tag (X >= tag) loaded X after the increment, so
// after the unlinks: it cannot reach those blocks. A block is freed once every active slot is
// above its tag (OldestReader, which also clears dead readers' slots). (Before 2026-11-27 the
// tag was the value before the increment: a reader that had loaded that same value before the
// unlink counted as having entered after it, and its block could be freed under it - test
// KvShared.RetiredBlockIsNotReusedWhileAReaderHoldsIt.) With no reader registered a block is
// freed at once (a reader registering later reads after the unlink), and so is everything held.
void Allocator::ReclaimShared(uint64_t off) {
  Impl& I = *impl_;
  char* base = I.pool->base();
  if (I.pool->read_only() || I.pool->private_copy()) return Free(off);
  // The common case: no reader registered and nothing held (a thread-local, the header word, a
  // flag: loads only).
  const bool readers = share::ReadersPresent(base);
  if (!readers && t_xholding == 0 && !I.xpending.load(std::memory_order_acquire)) return Free(off);
  ThreadCache* tc = I.Cache();
  if (tc == nullptr) [[unlikely]] {  // an exiting thread whose caches are gone
    if (!readers) return Free(off);
    {
      std::lock_guard<std::mutex> g(I.xmu);  // held for the readers: with the exited threads'
      I.xorphans.push_back(off);
      I.xpending.store(true, std::memory_order_release);
    }
    return;
  }
  const bool was = tc->holds();
  std::vector<uint64_t> ready;
  if (!readers) {
    // A reader registering later reads after the unlink: everything held is free.
    ready.swap(tc->xuntagged);
    for (const auto& [tag, o] : tc->xheld) ready.push_back(o);
    tc->xheld.clear();
    if (I.xpending.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> g(I.xmu);
      ready.insert(ready.end(), I.xorphans.begin(), I.xorphans.end());
      I.xorphans.clear();
      I.xpending.store(false, std::memory_order_release);
    }
    ready.push_back(off);
  } else {
    tc->xuntagged.push_back(off);
    if (tc->xuntagged.size() >= share::kTagBatch) {
      const uint64_t tag = share::NextTag(base);  // after every unlink of the batch
      for (uint64_t o : tc->xuntagged) tc->xheld.emplace_back(tag, o);
      tc->xuntagged.clear();
      const uint64_t oldest = share::OldestReader(base);  // an active reader stored X+1 > tag only if X >= tag
      std::erase_if(tc->xheld, [&](const std::pair<uint64_t, uint64_t>& d) {
        if (d.first >= oldest) return false;
        ready.push_back(d.second);
        return true;
      });
    }
  }
  if (was && !tc->holds()) --t_xholding;
  if (!was && tc->holds()) ++t_xholding;
  for (uint64_t o : ready) Free(o);
}

// Frees the blocks held for readers in other processes - the calling thread's and the exited
// threads' (PrepareClose first makes every thread's the orphans') - after a grace period of the
// reader table.
void Allocator::DrainShared() {
  Impl& I = *impl_;
  if (I.pool->read_only() || I.pool->private_copy()) return;
  std::vector<uint64_t> d;
  auto take = [&d](ThreadCache* tc) {
    if (tc->holds()) --t_xholding;  // the calling thread's own cache
    d.insert(d.end(), tc->xuntagged.begin(), tc->xuntagged.end());
    for (const auto& [tag, o] : tc->xheld) d.push_back(o);
    tc->xuntagged.clear();
    tc->xheld.clear();
  };
  {
    std::lock_guard<std::mutex> g(I.xmu);
    d.swap(I.xorphans);
    I.xpending.store(false, std::memory_order_release);
  }
  if (ThreadCache* tc = I.Cache()) take(tc);
  if (d.empty()) return;
  share::WaitForReaders(I.pool->base());
  for (uint64_t o : d) Free(o);
}

void Allocator::Retire(uint64_t off) {
  if (!epoch_->InEpoch()) [[unlikely]] {
    if (impl_->retired_outside_epoch.fetch_add(1, std::memory_order_relaxed) == 0)
      std::fprintf(stderr, "wort: allocator: Retire(%llu) outside an epoch: the caller breaks the writer rule "
                           "(wort/alloc.h); a post-crash GC running beside it may free the block twice\n",
                   (unsigned long long)off);
  }
  // While the post-crash GC runs, a retired block is a deferred free (resolved by the sweep:
  // the visit may not have marked it), applied after a grace period.
  if (impl_->recovering.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> g(impl_->mu);
    if (impl_->recovering.load()) {
      impl_->deferred.push_back(off);
      return;
    }
  }
  epoch_->Retire(off);
}

// Not a Collect every 8 retires (until 2026-11-27): each Collect that may advance costs a
// membarrier(2), whose interrupts reach every core running a thread of the process, and writes
// `global_`, which every Enter of every thread loads. The epoch's own batch (a Collect every
// kRetireBatch retires of the thread, again after kRetryAfter when an advance was blocked) bounds
// the count of held blocks; kCollectBytes bounds their bytes (a 1 MiB value: collected at once).
// (h47's RetireRecord for the server, brought back for every caller: issue 31 (b).)
void Allocator::RetireAndCollect(uint64_t off) {
  thread_local uint64_t t_retired_bytes = 0;  // since this thread's last early Collect
  t_retired_bytes += UsableSize(off);
  Retire(off);
  if (t_retired_bytes >= kCollectBytes) [[unlikely]] {
    t_retired_bytes = 0;
    epoch_->Collect();
  }
}

bool Allocator::ReclaimRetired() {
  if (epoch_->InEpoch()) return false;
  bool shared = impl_->xpending.load(std::memory_order_acquire);
  if (!impl_->pool->read_only()) {
    const ThreadCache* tc = impl_->Cache();
    shared = shared || (tc && (!tc->xuntagged.empty() || !tc->xheld.empty()));
  }
  if (epoch_->Stats().pending == 0) {
    if (!shared) return false;
    DrainShared();
    return true;
  }
  for (int i = 0; i < 3; ++i) {
    epoch_->Synchronize();
    epoch_->Collect();
  }
  DrainShared();  // what readers in other processes held back (a grace period of theirs)
  return true;
}

Status Allocator::PrepareClose() {
  Impl& I = *impl_;
  epoch_->Drain();  // retired blocks are free in the bitmaps written below (no reader is left)
  {
    // Every thread's blocks held for readers in other processes (no operation runs) to the
    // orphans (xmu before mu: gathered under mu, then moved), then drained with them.
    std::vector<uint64_t> held;
    {
      std::lock_guard<std::mutex> g(I.mu);
      for (auto& tc : I.caches) {
        held.insert(held.end(), tc->xuntagged.begin(), tc->xuntagged.end());
        for (const auto& [tag, o] : tc->xheld) held.push_back(o);
        tc->xuntagged.clear();
        tc->xheld.clear();
      }
    }
    if (!held.empty()) {
      std::lock_guard<std::mutex> g(I.xmu);
      I.xorphans.insert(I.xorphans.end(), held.begin(), held.end());
      I.xpending.store(true, std::memory_order_release);
    }
  }
  DrainShared();  // and those that readers in other processes held back
  std::lock_guard<std::mutex> g(I.mu);
  for (auto& tc : I.caches) I.DrainCache(tc.get());
  const uint64_t gen = I.pool->generation();
  for (uint64_t id = 0; id < I.nchunks_file; ++id) {
    auto& m = I.chunks[id];
    // A chunk never loaded keeps the header it was opened with (its bitmap did not change).
    if (m.kind != kSmall || m.frozen || m.lazy) continue;
    auto* h = I.pool->at<ChunkHeader>(I.ChunkOff(id));
    h->magic = kChunkMagic;
    h->cls = m.cls;
    h->generation = gen;
    h->nblocks = m.nblocks;
    std::memcpy(h->bits, m.bits.get(), kBitmapWords * 8);
    pm::flush(h, sizeof(ChunkHeader));
  }
  pm::fence();
  for (uint64_t id = 0; id < I.nchunks_file; ++id)
    if (I.chunks[id].frozen) return Status::Corruption("old chunks still frozen (recovery did not complete)");
  return Status::OK();
}

}  // namespace wort
