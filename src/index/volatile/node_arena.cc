// NodeArena (see node_arena.h): the shared pool's side - chunks, spilled batches, caches.
#include "index/volatile/node_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string_view>

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif

namespace wort::vol {
namespace {

bool HeapChunks() {
#if defined(__SANITIZE_ADDRESS__)
  return true;  // so that LeakSanitizer sees chunks that were not given back
#else
#if defined(RUNNING_ON_VALGRIND)
  if (RUNNING_ON_VALGRIND) return true;  // memcheck's leak check does not follow mmap
#endif
  return false;
#endif
}

// WORT_ARENA_HUGEPAGE=0: no MADV_HUGEPAGE on the 2 MiB chunks (to measure what it changes; with
// the kernel's THP defrag setting `madvise`, advised regions may compact memory at their fault).
bool HugePageAdvice() {
  const char* e = std::getenv("WORT_ARENA_HUGEPAGE");
  return e == nullptr || std::string_view(e) != "0";
}

std::atomic<NodeArena::MapHook> g_map_hook{nullptr};
std::atomic<void*> g_map_hook_ctx{nullptr};

}  // namespace

void NodeArena::SetMapHookForTest(MapHook fn, void* ctx) {
  g_map_hook_ctx.store(ctx, std::memory_order_relaxed);
  g_map_hook.store(fn, std::memory_order_release);
}

NodeArena::NodeArena() : heap_chunks_(HeapChunks()), huge_pages_(HugePageAdvice()) {}

NodeArena::~NodeArena() {
  for (const Chunk& ch : chunks_) UnmapChunk(ch);
  for (Cache* c = caches_; c != nullptr;) {
    Cache* next = c->next;
    delete c;
    c = next;
  }
}

NodeArena::Cache* NodeArena::NewCache() {
  auto* c = new Cache;
  c->arena = this;
  std::lock_guard<std::mutex> g(mu_);
  c->next = caches_;
  caches_ = c;
  ++ncaches_;
  return c;
}

// c's list of cls is empty: a spilled batch of cls if there is one, else the next chunk.
void* NodeArena::AllocSlow(Cache* c, uint32_t cls) {
  bool got = false;
  {
    std::lock_guard<std::mutex> g(mu_);
    got = TakeBatch(c, cls);
  }
  if (!got) Refill(c, ClassBytes(cls));
  return Alloc(c, cls);  // from the list or the bump region now
}

// REQUIRES: mu_ held, c's list of cls empty.
bool NodeArena::TakeBatch(Cache* c, uint32_t cls) {
  if (shared_[cls].empty()) return false;
  const SpilledBatch bt = shared_[cls].back();
  shared_[cls].pop_back();
  spilled_[cls].store(static_cast<uint32_t>(shared_[cls].size()), std::memory_order_relaxed);
  c->bins[cls].head = bt.head;
  c->bins[cls].n = bt.n;
  shared_blocks_ -= bt.n;
  return true;
}

// A list longer than 2 x Batch: its first Batch blocks go to the shared pool.
void NodeArena::Spill(Cache* c, uint32_t cls) {
  Cache::Bin& b = c->bins[cls];
  const uint32_t n = Batch(cls);
  void* head = b.head;
  void* last = head;
  for (uint32_t i = 1; i < n; ++i) std::memcpy(&last, last, sizeof last);  // the n-th block
  void* rest;
  std::memcpy(&rest, last, sizeof rest);
  void* const null = nullptr;
  std::memcpy(last, &null, sizeof null);
  b.head = rest;
  b.n -= n;
  std::lock_guard<std::mutex> g(mu_);
  shared_[cls].push_back({head, n});
  spilled_[cls].store(static_cast<uint32_t>(shared_[cls].size()), std::memory_order_relaxed);
  shared_blocks_ += n;
}

// Takes back one spilled batch for each class whose list is empty, then, if the bump region has
// less than `bytes`, the cache's next chunk (the unused rest of the current one is left unused).
void NodeArena::Refill(Cache* c, size_t bytes) {
  size_t size = 0;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (shared_blocks_ != 0) {
      for (uint32_t cls = 0; cls < kClasses; ++cls)
        if (c->bins[cls].head == nullptr) TakeBatch(c, cls);
    }
    if (static_cast<size_t>(c->end - c->cur) >= bytes) return;
    size = std::min(kMinChunk << std::min<uint32_t>(c->chunks, 8), kMaxChunk);
    while (size < bytes) size *= 2;
  }
  if (const MapHook h = g_map_hook.load(std::memory_order_acquire)) [[unlikely]]
    h(g_map_hook_ctx.load(std::memory_order_relaxed));
  // Mapped and touched outside the mutex (other threads' refills go on meanwhile).
  const Chunk ch = MapChunk(size);
  {
    std::lock_guard<std::mutex> g(mu_);
    chunks_.push_back(ch);
    chunk_bytes_ += ch.bytes;
  }
  ++c->chunks;
  c->cur = ch.base;
  c->end = ch.base + ch.bytes;
}

NodeArena::Chunk NodeArena::MapChunk(size_t bytes) {
  char* base = nullptr;
  if (heap_chunks_) {
    base = static_cast<char*>(::operator new(bytes, std::align_val_t{64}));
    WORT_ARENA_POISON(base, bytes);
    return {base, bytes, true};
  }
  if (bytes >= kMaxChunk) {
    // 2 MiB-aligned, so that the kernel can back it with one huge page (MADV_HUGEPAGE: 1 fault
    // per 2 MiB where transparent huge pages are enabled or on madvise).
    const size_t span = bytes + kMaxChunk;
    void* m = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    char* raw = static_cast<char*>(m);
    const auto addr = reinterpret_cast<uintptr_t>(raw);
    base = reinterpret_cast<char*>((addr + kMaxChunk - 1) & ~(uintptr_t{kMaxChunk} - 1));
    if (base > raw) ::munmap(raw, static_cast<size_t>(base - raw));
    if (raw + span > base + bytes) ::munmap(base + bytes, static_cast<size_t>(raw + span - (base + bytes)));
#if defined(MADV_HUGEPAGE)
    if (huge_pages_) ::madvise(base, bytes, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  } else {
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    base = static_cast<char*>(m);
  }
  // Fault the pages in now (the caller holds no node lock), not at the first block of each page.
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (size_t off = 0; off < bytes; off += page) reinterpret_cast<volatile char*>(base)[off] = 0;
  return {base, bytes, false};
}

void NodeArena::UnmapChunk(const Chunk& ch) {
  if (ch.heap) {
    WORT_ARENA_UNPOISON(ch.base, ch.bytes);
    ::operator delete(ch.base, std::align_val_t{64});
  } else {
    ::munmap(ch.base, ch.bytes);
  }
}

int64_t NodeArena::SumKeys() const {
  int64_t n = 0;
  std::lock_guard<std::mutex> g(mu_);
  for (const Cache* c = caches_; c != nullptr; c = c->next) n += c->keys.load(std::memory_order_relaxed);
  return n;
}

NodeArena::Usage NodeArena::GetUsage() const {
  Usage u;
  std::lock_guard<std::mutex> g(mu_);
  for (const Cache* c = caches_; c != nullptr; c = c->next) {
    u.blocks += c->blocks.load(std::memory_order_relaxed);
    u.bytes += c->bytes.load(std::memory_order_relaxed);
  }
  u.chunks = chunks_.size();
  u.chunk_bytes = chunk_bytes_;
  u.caches = ncaches_;
  u.shared_blocks = shared_blocks_;
  return u;
}

}  // namespace wort::vol
