// index/volatile/node_arena.h - NodeArena: vart's DRAM node allocator (issue 31).
//
// Why: vart's inserts took every leaf and grown node from glibc's malloc and gave every retired
// node back to it. On a 16-core machine that is where vart's writers met (malloc's arenas, the
// free of a node another thread allocated - that arena's mutex - and heap trimming: with one
// arena, 13.8 us per insert), and the state a previous benchmark run left in malloc's arenas
// slowed the next run's inserts 3x (doc/concurrency.md, "vart's node allocator").
//
// Design: one arena per index. Blocks come in size classes (16-byte steps up to 256 bytes, then
// coarser steps up to kMaxBlock; vart's NODE48 and NODE256 sizes are classes of their own). Each
// writer thread has a Cache (kept in its slot of the index's EpochManager: Slot::state):
//   - a free list per class (an intrusive singly linked list through the blocks' first word);
//   - a bump region carved out of a chunk of its own (64 KiB, doubling per chunk up to 2 MiB).
// Alloc pops the class's list, else carves from the bump region: no atomic, no lock, and it
// stores only to the thread's cache and the block itself. A retired block goes back to the
// cache of the thread that retired it (the epoch manager's SlotReclaimFn, on that thread), never
// to a shared free list on the common path. The shared pool (one std::mutex, taken once per
// chunk or per batch, not per block) holds the chunks and the batches a thread gives up: a
// class's list longer than 2 x Batch(class) blocks gives Batch(class) blocks to the pool
// (Spill); a thread whose list of a class is empty takes such a batch before it carves from its
// bump region (Alloc sees that there is one in a per-class count it loads without the mutex),
// and one of each class whose list is empty when it takes its next chunk (Refill). So a thread
// that only removes does not keep its freed blocks from a thread that only inserts.
//
// Chunks are mapped with mmap (2 MiB chunks 2 MiB-aligned, with MADV_HUGEPAGE) and touched once
// when taken (a page fault per page then, in Refill, which vart calls before it enters its epoch
// and takes any node lock: NodeArena::Reserve), and unmapped when the arena is destroyed: destroying the index
// returns all of its memory to the system at once (no walk of the tree, nothing left in malloc
// for the next index). Under AddressSanitizer or Valgrind the chunks come from operator new (so
// the leak checkers see them) and ASan poisons every block that is not handed out.
//
// Memory held beyond the live blocks: per thread, the unused rest of its current chunk (< 2 MiB)
// and up to 2 x Batch(class) free blocks per class (Batch: 16 KiB worth, at least 8 blocks).
//
// Accounting: each cache counts the blocks (and class bytes) handed out minus given back
// through it (relaxed atomics its owner alone stores; a block allocated by one thread and freed
// by another makes one cache's count go up and the other's down), Usage sums them.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define WORT_ARENA_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define WORT_ARENA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define WORT_ARENA_POISON(p, n) ((void)(p), (void)(n))
#define WORT_ARENA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace wort::vol {

class NodeArena {
 public:
  static constexpr uint32_t kSmallClasses = 16;  // 16, 32, ..., 256 bytes
  // Above 256 bytes. 672 and 2080 are vart's NODE48 and NODE256 (vart.cc asserts it); 4608 holds
  // a leaf with a key of kMaxKeyLen (4096) bytes and its 16-byte header.
  static constexpr std::array<uint32_t, 19> kLargeClasses = {320,  384,  448,  512,  640,  672,  768,
                                                             896,  1024, 1280, 1536, 1792, 2048, 2080,
                                                             2560, 3072, 3584, 4096, 4608};
  static constexpr uint32_t kClasses = kSmallClasses + kLargeClasses.size();
  static constexpr size_t kMaxBlock = 4608;
  static constexpr size_t kMinChunk = size_t{64} << 10;
  static constexpr size_t kMaxChunk = size_t{2} << 20;

  // The class of a block of `bytes` (1..kMaxBlock) bytes.
  static constexpr uint32_t ClassOf(size_t bytes) {
    if (bytes <= 256) return bytes == 0 ? 0 : static_cast<uint32_t>((bytes + 15) / 16 - 1);
    uint32_t i = 0;
    while (kLargeClasses[i] < bytes) ++i;
    return kSmallClasses + i;
  }
  static constexpr size_t ClassBytes(uint32_t cls) {
    return cls < kSmallClasses ? size_t{16} * (cls + 1) : kLargeClasses[cls - kSmallClasses];
  }
  // Blocks moved between a cache and the shared pool at a time.
  static constexpr uint32_t Batch(uint32_t cls) {
    const size_t n = (size_t{16} << 10) / ClassBytes(cls);
    return n < 8 ? 8 : static_cast<uint32_t>(n);
  }

  // One thread's cache (see above). Only its owner touches it, except the two counters (read
  // by Usage) and `next` (the arena's, under its mutex).
  struct alignas(64) Cache {
    struct Bin {
      void* head = nullptr;
      uint32_t n = 0;
    };
    NodeArena* arena = nullptr;
    char* cur = nullptr;  // the bump region [cur, end)
    char* end = nullptr;
    uint32_t chunks = 0;  // chunks this cache took (the next one's size doubles up to kMaxChunk)
    std::atomic<int64_t> blocks{0};  // handed out minus given back through this cache
    std::atomic<int64_t> bytes{0};   // the same in class bytes
    Cache* next = nullptr;
    // The index's key count as changed by this thread (vart's Size(): AddKeys, SumKeys). On the
    // line the allocations write anyway; stored by its owner alone, so no locked instruction.
    std::atomic<int64_t> keys{0};
    Bin bins[kClasses];
  };

  struct Usage {
    int64_t blocks = 0;        // blocks handed out and not given back
    int64_t bytes = 0;         // their class bytes
    uint64_t chunks = 0;       // chunks mapped
    uint64_t chunk_bytes = 0;  // their bytes
    uint64_t caches = 0;       // thread caches
    uint64_t shared_blocks = 0;  // free blocks in the shared pool's batches
  };

  NodeArena();
  // Unmaps every chunk (every block, handed out or not) and frees the caches. REQUIRES: no
  // thread uses the arena any more.
  ~NodeArena();
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;

  // A new cache for the calling thread (it keeps it, e.g. in its epoch slot).
  Cache* NewCache();

  // A block of class cls (uninitialised). Throws std::bad_alloc when the system has no memory.
  static void* Alloc(Cache* c, uint32_t cls) {
    Cache::Bin& b = c->bins[cls];
    const size_t sz = ClassBytes(cls);
    void* p = b.head;
    if (p != nullptr) {
      WORT_ARENA_UNPOISON(p, sz);
      void* next;
      std::memcpy(&next, p, sizeof next);
      b.head = next;
      --b.n;
    } else if (c->arena->spilled_[cls].load(std::memory_order_relaxed) != 0) [[unlikely]] {
      return c->arena->AllocSlow(c, cls);  // a spilled batch first (bounded memory)
    } else if (static_cast<size_t>(c->end - c->cur) >= sz) [[likely]] {
      p = c->cur;
      c->cur += sz;
      WORT_ARENA_UNPOISON(p, sz);
    } else {
      return c->arena->AllocSlow(c, cls);  // a batch or a chunk, then Alloc again (which counts)
    }
    Count(c, 1, sz);
    return p;
  }
  // Gives back block p of class cls (from any cache of this arena) to cache c.
  static void Free(Cache* c, void* p, uint32_t cls) {
    Cache::Bin& b = c->bins[cls];
    const size_t sz = ClassBytes(cls);
    std::memcpy(p, &b.head, sizeof b.head);
    WORT_ARENA_POISON(static_cast<char*>(p) + sizeof(void*), sz - sizeof(void*));
    b.head = p;
    Count(c, -1, sz);
    if (++b.n > 2 * Batch(cls)) [[unlikely]] c->arena->Spill(c, cls);
  }
  // Makes sure c's bump region has `bytes` (<= kMaxBlock * 2) free, taking the next chunk now if
  // not: a writer calls it before it enters its epoch and takes any lock, so that the allocations
  // it makes under a node lock do not map or fault in memory, and no epoch is held across them.
  static void Reserve(Cache* c, size_t bytes) {
    if (static_cast<size_t>(c->end - c->cur) < bytes) [[unlikely]] c->arena->Refill(c, bytes);
  }

  Usage GetUsage() const;

  // Adds d to c's key count: a load and a store (only c's owner stores to it), not a locked
  // read-modify-write. Issue 31: vart counted its keys with sync::ShardedCounter, a `lock xadd`
  // per insert, which waits for the insert's own stores (the new leaf's line, a write miss) to
  // leave the store buffer.
  static void AddKeys(Cache* c, int64_t d) {
    c->keys.store(c->keys.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
  }
  // The sum of every cache's key count (exact when no writer is in flight).
  int64_t SumKeys() const;

  // For tests (issue 31, h59): fn(ctx) is called on the refilling thread each time a cache is
  // about to map a new chunk (before the mmap and its page faults). Process-wide; null: none.
  using MapHook = void (*)(void* ctx);
  static void SetMapHookForTest(MapHook fn, void* ctx);

 private:
  struct SpilledBatch {
    void* head;
    uint32_t n;
  };
  struct Chunk {
    char* base;
    size_t bytes;
    bool heap;  // from operator new (sanitizers, Valgrind), else mmap
  };
  static void Count(Cache* c, int64_t blocks, size_t sz) {
    c->blocks.store(c->blocks.load(std::memory_order_relaxed) + blocks, std::memory_order_relaxed);
    c->bytes.store(c->bytes.load(std::memory_order_relaxed) + blocks * static_cast<int64_t>(sz),
                   std::memory_order_relaxed);
  }
  void* AllocSlow(Cache* c, uint32_t cls);
  void Spill(Cache* c, uint32_t cls);
  bool TakeBatch(Cache* c, uint32_t cls);
  void Refill(Cache* c, size_t bytes);
  Chunk MapChunk(size_t bytes);
  static void UnmapChunk(const Chunk& ch);

  const bool heap_chunks_;  // operator new instead of mmap (ASan, Valgrind)
  const bool huge_pages_;   // MADV_HUGEPAGE on 2 MiB chunks (WORT_ARENA_HUGEPAGE=0: not)
  mutable std::mutex mu_;   // the shared pool: chunks_, shared_, caches_
  std::vector<Chunk> chunks_;
  uint64_t chunk_bytes_ = 0;
  std::vector<SpilledBatch> shared_[kClasses];
  uint64_t shared_blocks_ = 0;
  // shared_[cls].size(), stored under mu_ and loaded without it by Alloc when the class's list
  // is empty (a line written once per spill or take-back, read-shared otherwise).
  std::atomic<uint32_t> spilled_[kClasses] = {};
  Cache* caches_ = nullptr;
  uint64_t ncaches_ = 0;
};

}  // namespace wort::vol
