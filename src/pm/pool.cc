// Pool: the mapped file, its header and its root table. See wort/pool.h and doc/pool-format.md.
#include "wort/pool.h"

#include <fcntl.h>
#include <nmmintrin.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <utility>

#include "pm/share.h"
#include "util/crc32c.h"
#include "wort/alloc.h"
#include "wort/pm.h"

#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif

namespace wort {

namespace {
constexpr uint64_t kMagic = 0x4C4F4F50'54524F57ull;  // "WORTPOOL" little-endian
// 2: value blocks of the key-value store carry a checksum (wort/kv.h). A version-1 pool is
// refused (its values have none): dump it with the wort that wrote it and load it anew.
constexpr uint32_t kLayoutVersion = 2;
constexpr uint64_t kHeaderSize = 4096;
constexpr uint64_t kPage = 4096;

// The capacity of a new pool (the header's max_size: the address space reserved at every open
// and the length of the chunk table, 8 bytes per 1 MiB chunk): 1 TiB with no size limit (an
// 8 MiB chunk table, sparse: only the pages of the chunks in the file are allocated), else 16
// times the limit (between the limit and 1 TiB), so that a pool may grow past the size it was
// created with without moving its chunk table or its mapping.
constexpr uint64_t kDefaultCapacity = 1ull << 40;
uint64_t CapacityFor(uint64_t max_size) {
  if (max_size == 0) return kDefaultCapacity;
  return std::max(max_size, std::min(max_size, kDefaultCapacity / 16) * 16);
}

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

constexpr uint64_t kHugePage = 2ull << 20;
// Huge pages for pools (issue 34); WORT_POOL_HUGEPAGE=0 turns them off, to measure them.
bool PoolHugePages() {
  static const bool on = [] {
    const char* e = std::getenv("WORT_POOL_HUGEPAGE");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
// On tmpfs, a pool's heap of huge pages: posix_fallocate allocates small pages whatever the
// advice (with shmem_enabled or the mount's huge= at advise, a fault would take a huge page, but
// the chunks are allocated before any fault: shmem_enabled is "never" on this machine), so
// HugeFill makes each 2 MiB-aligned range of a new heap range huge BEFORE posix_fallocate
// reserves the rest: one page of the range populated (MADV_POPULATE_WRITE, Linux 5.14: a write
// fault without a write), then MADV_COLLAPSE (Linux 6.1), which allocates one zeroed huge page
// for the range, takes the pages the range already has into it (a range the old end of the
// heap cuts in two) and fills its holes, contents unchanged and concurrent accesses waiting in
// the kernel for the swap. posix_fallocate then finds those ranges allocated and allocates the
// rest (and reports a full file system as before).
// Cost, this 2-core machine, 128 MiB (4 alternations): 16 ms of CPU, 31-50 ms wall; h54's
// first version collapsed after posix_fallocate - a copy of every small page into the huge one -
// and took 16-68 ms for posix_fallocate plus 43-47 ms of CPU (85-138 ms wall) for the collapse,
// in the thread that grew the pool (a writer that needed a chunk, a `set` of `wort serve`).
// The first refusal (an older kernel: EINVAL; shmem_enabled=deny; no huge page to be had) ends
// the attempt for the rest of the range: posix_fallocate gives small pages, as without huge pages.
// Only a pool of at least kCollapseFrom bytes (its file) is made huge: below, its pages fit the
// reach of the TLB's 4 KiB entries (1,536 entries here: 6 MiB) well enough, and the many small
// pools of tests and of the crash explorer's images keep small pages.
constexpr uint64_t kCollapseFrom = 32ull << 20;
void HugeFill(char* base, uint64_t floor, uint64_t from, uint64_t to) {
  if (reinterpret_cast<uintptr_t>(base) % kHugePage != 0) return;
  // [from, to): the caller's range of new chunks; the 2 MiB range holding `from` is taken whole
  // when it starts at or above `floor` (the heap's start), else the first range wholly above.
  const uint64_t b = std::max(from / kHugePage * kHugePage, RoundUp(floor, kHugePage)), e = to / kHugePage * kHugePage;
  for (uint64_t off = b; off < e; off += kHugePage) {
    if (::madvise(base + off + (off < from ? from - off : 0) / kPage * kPage, kPage, MADV_POPULATE_WRITE) != 0) return;
    if (::madvise(base + off, kHugePage, MADV_COLLAPSE) != 0) return;
  }
}

// A 2 MiB-aligned address where n bytes of address space were free a moment ago (the pool maps
// there with MAP_FIXED_NOREPLACE, which fails rather than replace a mapping made meanwhile), or
// nullptr where n + 2 MiB cannot be reserved.
void* AlignedAddress(uint64_t n) {
  void* r = ::mmap(nullptr, n + kHugePage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return nullptr;
  ::munmap(r, n + kHugePage);
  return reinterpret_cast<void*>(RoundUp(reinterpret_cast<uintptr_t>(r), kHugePage));
}

// Chunks a size limit of `max_size` bytes allows (at least 1, at most the capacity): as many
// whole chunks as fit in max_size, the metadata not counted (as pools always counted it).
uint64_t LimitChunks(uint64_t max_size, uint64_t max_chunks) {
  if (max_size == 0) return max_chunks;
  return std::min(max_chunks, std::max<uint64_t>(1, max_size / (1ull << 20)));
}

// Allocates file space for chunks [from, to): their chunk-table words (whole pages, the header
// page with the first) and their bytes. The file may end before: it is extended. 0 or an errno.
int AllocateChunks(int fd, uint64_t table_off, uint64_t heap_off, uint64_t from, uint64_t to, bool heap = true) {
  const uint64_t t0 = from == 0 ? 0 : (table_off + from * 8) / kPage * kPage;
  const uint64_t t1 = std::min(heap_off, RoundUp(table_off + to * 8, kPage));
  if (t1 > t0)
    if (int e = ::posix_fallocate(fd, static_cast<off_t>(t0), static_cast<off_t>(t1 - t0)); e != 0) return e;
  if (!heap) return 0;
  const uint64_t chunk = 1ull << 20;
  return ::posix_fallocate(fd, static_cast<off_t>(heap_off + from * chunk), static_cast<off_t>((to - from) * chunk));
}

std::string Errno(const char* what, const std::string& path) {
  return std::string(what) + " " + path + ": " + std::strerror(errno);
}

bool OnTmpfs(int fd) {
  struct statfs fs;
  return ::fstatfs(fd, &fs) == 0 && static_cast<unsigned long>(fs.f_type) == TMPFS_MAGIC;
}

// The file is on a DAX mapping (statx STATX_ATTR_DAX, Linux 5.8+; false where unknown).
bool FileIsDax(int fd) {
#ifdef STATX_ATTR_DAX
  struct statx stx;
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) == 0) return (stx.stx_attributes & STATX_ATTR_DAX) != 0;
#endif
  (void)fd;
  return false;
}
}  // namespace

const char* DurabilityName(Durability d) {
  switch (d) {
    case Durability::kPowerFail: return "power-fail";
    case Durability::kFileSync: return "file-sync";
    case Durability::kProcessCrash: return "process-crash";
    case Durability::kTmpfs: return "tmpfs";
  }
  return "unknown";
}

const char* DurabilityDescription(Durability d) {
  switch (d) {
    case Durability::kPowerFail: return "power-fail durable: DAX file mapped MAP_SYNC";
    case Durability::kFileSync:
      return "power-fail durable: file without DAX in sync mode (every fence msyncs the pages flushed before it)";
    case Durability::kProcessCrash:
      return "process-crash only: file without DAX; writes survive kill -9 but not an OS crash or power loss "
             "(sync mode makes them durable)";
    case Durability::kTmpfs: return "process-crash only: tmpfs; writes survive kill -9, everything is lost at reboot";
  }
  return "unknown";
}

// On-media header. Layout version 1. Every field below `checksum` is written once at creation
// and covered by `checksum`; every field after it is an independently, atomically written
// 8-byte word (or a root entry with its own check word).
struct RootEntry {
  char name[40];     // NUL-padded
  uint32_t type;     // index kind id
  uint32_t reserved;
  uint64_t off;      // root block
  uint64_t check;    // commit word: == RootCheck(name, type, off) iff the entry is published
};
static_assert(sizeof(RootEntry) == 64);

struct Pool::Header {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t header_size;
  uint64_t chunk_size;
  uint64_t max_size;
  uint64_t max_chunks;
  uint64_t chunk_table_off;
  uint64_t heap_off;
  uint64_t uuid[2];
  uint64_t create_time_ns;
  uint64_t checksum;  // Crc64 of the bytes before this field
  alignas(64) uint64_t size;   // current file size; only grows; persisted after the file grew
  uint64_t clean;              // 1 after a clean Close(); 0 while open or after a crash
  uint64_t generation;         // +1 at every open for writing
  // Soft size limit in bytes (0: none, the capacity max_size is the limit). Set at creation
  // from PoolOptions::max_size and by an open for writing that names another max_size; it
  // shares the cache line of size/clean/generation and is persisted with them at open.
  uint64_t limit;
  alignas(64) RootEntry roots[Pool::kMaxRoots];
};
static_assert(sizeof(Pool::Header) <= kHeaderSize);
static_assert(offsetof(Pool::Header, size) % 64 == 0);

namespace {
uint64_t HeaderChecksum(const Pool::Header* h) { return Crc64(h, offsetof(Pool::Header, checksum)); }

uint64_t RootCheck(const RootEntry& e) {
  uint64_t c = Crc64(&e, offsetof(RootEntry, check), 0x5EED);
  return c | 1;  // never 0, so a zeroed entry is never published
}
}  // namespace

struct PoolAccess {
  static std::mutex& GrowMu(const Pool* p) {
    static std::mutex mu;  // growth is rare; one lock for all pools is enough
    (void)p;
    return mu;
  }
};

namespace {
// The pool files this process holds open for writing (device, inode): a second writable open
// is refused Busy either way (the flock is per open file), and the message says which holder
// it found - this process or another.
std::mutex g_held_mu;
std::set<std::pair<dev_t, ino_t>>& Held() {
  static auto* s = new std::set<std::pair<dev_t, ino_t>>;
  return *s;
}
bool FileId(int fd, std::pair<dev_t, ino_t>* id) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return false;
  *id = {st.st_dev, st.st_ino};
  return true;
}
}  // namespace

Status Pool::Create(const std::string& path, const PoolOptions& opts, std::unique_ptr<Pool>* out) {
  if (opts.read_only) return Status::InvalidArgument("cannot create a pool read-only");
  std::unique_ptr<Pool> p(new Pool());
  WORT_RETURN_IF_ERROR(p->MapFile(path, /*create=*/true, opts));
  p->alloc_ = std::make_unique<Allocator>(p.get(), /*opened_clean=*/true);
  *out = std::move(p);
  return Status::OK();
}

Status Pool::Open(const std::string& path, const PoolOptions& opts, std::unique_ptr<Pool>* out) {
  std::unique_ptr<Pool> p(new Pool());
  WORT_RETURN_IF_ERROR(p->MapFile(path, /*create=*/false, opts));
  p->alloc_ = std::make_unique<Allocator>(p.get(), p->opened_clean_);
  if (!p->opened_clean_ && !p->read_only_) p->alloc_->StartRecovery(opts.background_recovery);
  *out = std::move(p);
  return Status::OK();
}

Status Pool::OpenOrCreate(const std::string& path, const PoolOptions& opts, std::unique_ptr<Pool>* out) {
  if (::access(path.c_str(), F_OK) == 0) return Open(path, opts, out);
  return Create(path, opts, out);
}

Status Pool::MapFile(const std::string& path, bool create, const PoolOptions& opts) {
  path_ = path;
  read_only_ = opts.read_only;
  private_copy_ = opts.private_copy && !read_only_;
  if (create && private_copy_) return Status::InvalidArgument("cannot create a pool as a private copy");
  const int flags = create ? (O_RDWR | O_CREAT | O_EXCL) : ((read_only_ || private_copy_) ? O_RDONLY : O_RDWR);
  fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    if (errno == EEXIST) return Status::AlreadyExists("pool file already exists: " + path);
    if (errno == ENOENT && create) {
      const size_t slash = path.find_last_of('/');
      const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
      return Status::NotFound("cannot create pool " + path + ": directory " + dir + " does not exist");
    }
    if (errno == ENOENT) return Status::NotFound("no such pool file: " + path);
    return Status::IOError(Errno("cannot open", path));
  }
  // One writer per pool: an exclusive advisory lock. Read-only openers take no lock, so a
  // reader process can look at a pool that a writer has open.
  if (!read_only_ && !private_copy_ && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    std::pair<dev_t, ino_t> id;
    bool mine = false;
    if (e == EWOULDBLOCK && FileId(fd_, &id)) {
      std::lock_guard<std::mutex> g(g_held_mu);
      mine = Held().count(id) > 0;
    }
    uint64_t holder = 0;  // the writer's pid, as it recorded it (src/pm/share.h)
    if (e == EWOULDBLOCK && !mine &&
        ::pread(fd_, &holder, 8, static_cast<off_t>(share::kWriterOff)) != 8)
      holder = 0;
    ::close(fd_);
    fd_ = -1;
    if (e == EWOULDBLOCK)
      return Status::Busy(mine ? "pool is already open for writing in this process (close it first, or share that handle): " + path
                               : "pool is open for writing by another process" +
                                     (holder != 0 && holder < 0x80000000ull ? " (pid " + std::to_string(holder) + ")" : std::string()) +
                                     ": " + path + " (one writer at a time; open it read-only to read beside it)");
    errno = e;
    return Status::IOError(Errno("cannot lock", path));
  }
  if (!read_only_ && !private_copy_) {
    std::pair<dev_t, ino_t> id;
    if (FileId(fd_, &id)) {
      std::lock_guard<std::mutex> g(g_held_mu);
      Held().insert(id);
    }
  }
  auto fail = [&](Status s) {
    if (!read_only_ && !private_copy_) {
      std::pair<dev_t, ino_t> id;
      if (FileId(fd_, &id)) {
        std::lock_guard<std::mutex> g(g_held_mu);
        Held().erase(id);
      }
    }
    if (create) ::unlink(path.c_str());
    ::close(fd_);
    fd_ = -1;
    return s;
  };

  uint64_t max_size = 0, file_size = 0;
  bool huge_heap = false;
  Header h{};
  if (create) {
    uint64_t capacity = CapacityFor(opts.max_size);
    // The whole capacity is mapped at every open: where this process cannot reserve that much
    // address space (a ulimit -v, valgrind's address-space manager), a smaller capacity, halved
    // down to the limit itself, still gives a pool that reopens here.
    for (;;) {
      void* probe = ::mmap(nullptr, capacity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (probe != MAP_FAILED) {
        ::munmap(probe, capacity);
        break;
      }
      const uint64_t floor = std::max<uint64_t>(opts.max_size, kChunkSize);
      if (capacity / 2 < floor) break;  // the map below reports the failure
      capacity /= 2;
    }
    const uint64_t max_chunks = std::max<uint64_t>(1, capacity / kChunkSize);
    const uint64_t table_off = kHeaderSize;
    const uint64_t heap_off = RoundUp(table_off + max_chunks * 8, 64 * 1024);
    max_size = heap_off + max_chunks * kChunkSize;
    const uint64_t limit_chunks = LimitChunks(opts.max_size, max_chunks);
    const uint64_t want_chunks =
        std::min(limit_chunks, std::max<uint64_t>(1, RoundUp(opts.initial_size, kChunkSize) / kChunkSize));
    file_size = heap_off + want_chunks * kChunkSize;
    // Sparse: the file is heap_off + the initial chunks long, but only the header, the pages of
    // the chunk table that describe those chunks and the chunks themselves are allocated.
    if (::ftruncate(fd_, static_cast<off_t>(file_size)) != 0)
      return fail(Status::IOError(Errno("cannot size", path)));
    // tmpfs and big enough for huge pages: the heap's chunks are allocated once the file is
    // mapped (HugeFill, then posix_fallocate), the chunk table's pages now.
    huge_heap = PoolHugePages() && file_size >= kCollapseFrom && OnTmpfs(fd_);
    if (int e = AllocateChunks(fd_, table_off, heap_off, 0, want_chunks, /*heap=*/!huge_heap); e != 0) {
      errno = e;
      return fail(Status::IOError(Errno("cannot allocate space for", path)));
    }
    h.magic = kMagic;
    h.layout_version = kLayoutVersion;
    h.header_size = kHeaderSize;
    h.chunk_size = kChunkSize;
    h.max_size = max_size;
    h.max_chunks = max_chunks;
    h.chunk_table_off = table_off;
    h.heap_off = heap_off;
    std::random_device rd;
    h.uuid[0] = (uint64_t(rd()) << 32) | rd();
    h.uuid[1] = (uint64_t(rd()) << 32) | rd();
    h.create_time_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    h.checksum = HeaderChecksum(&h);
    h.size = file_size;
    h.clean = 0;
    h.generation = 0;
    h.limit = opts.max_size == 0 ? 0 : heap_off + limit_chunks * kChunkSize;
  } else {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return fail(Status::IOError(Errno("cannot stat", path)));
    file_size = static_cast<uint64_t>(st.st_size);
    if (file_size < kHeaderSize)
      return fail(Status::Corruption("not a wort pool: file is " + std::to_string(file_size) +
                                     " bytes, smaller than a pool header: " + path));
    if (::pread(fd_, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h)))
      return fail(Status::IOError(Errno("cannot read header of", path)));
    // A writer in another process may grow the pool meanwhile (a reader opens beside it): it
    // grows the file before it publishes the new size, so the file's size read after the header
    // is at least the size the header gives. Stat again.
    if (::fstat(fd_, &st) != 0) return fail(Status::IOError(Errno("cannot stat", path)));
    file_size = static_cast<uint64_t>(st.st_size);
    if (h.magic != kMagic) return fail(Status::Corruption("not a wort pool (bad magic number): " + path));
    if (h.layout_version != kLayoutVersion)
      return fail(Status::Corruption(
          "pool layout version " + std::to_string(h.layout_version) + " is not supported (this build reads version " +
          std::to_string(kLayoutVersion) + ")" +
          (h.layout_version == 1 ? "; version 1 predates value checksums: copy its data out with the wort that wrote it"
                                 : "") +
          ": " + path));
    if (h.checksum != HeaderChecksum(&h)) return fail(Status::Corruption("pool header checksum mismatch: " + path));
    if (h.chunk_size != kChunkSize || h.header_size != kHeaderSize || h.chunk_table_off != kHeaderSize ||
        h.heap_off < h.chunk_table_off + h.max_chunks * 8 || h.max_size != h.heap_off + h.max_chunks * kChunkSize)
      return fail(Status::Corruption("pool header geometry is inconsistent: " + path));
    if (h.size < h.heap_off || (h.size - h.heap_off) % kChunkSize != 0 || h.size > h.max_size)
      return fail(Status::Corruption("pool header size field is invalid: " + path));
    if (file_size < h.size)
      return fail(Status::Corruption("pool file is truncated: " + std::to_string(file_size) +
                                     " bytes, header says " + std::to_string(h.size) + ": " + path));
    max_size = h.max_size;
  }

  const int prot = read_only_ ? PROT_READ : (PROT_READ | PROT_WRITE);
  // Huge pages (issue 34): the mapping starts at a 2 MiB-aligned address, so that file offsets
  // and addresses agree modulo 2 MiB, and is advised MADV_HUGEPAGE. Where the kernel backs the
  // file with huge pages (tmpfs with shmem_enabled advise/within_size/always, a DAX file system
  // with 2 MiB extents) a pool's page walks then end one level up and a TLB entry covers 2 MiB;
  // elsewhere both are harmless. An address that cannot be had aligned gives the plain mapping.
  void* const hint = PoolHugePages() ? AlignedAddress(max_size) : nullptr;
  auto map = [&](int flags) {
    void* r = MAP_FAILED;
    if (hint) r = ::mmap(hint, max_size, prot, flags | MAP_FIXED_NOREPLACE, fd_, 0);
    if (r == MAP_FAILED) r = ::mmap(nullptr, max_size, prot, flags, fd_, 0);
    return r;
  };
  void* m = MAP_FAILED;
  bool map_sync = false;
  if (private_copy_) {
    m = map(MAP_PRIVATE | MAP_NORESERVE);
  } else {
    if (!read_only_) m = map(MAP_SHARED_VALIDATE | MAP_SYNC | MAP_NORESERVE);
    map_sync = m != MAP_FAILED;
    if (m == MAP_FAILED) m = map(MAP_SHARED | MAP_NORESERVE);
  }
  if (m == MAP_FAILED) return fail(Status::IOError(Errno("cannot map", path)));
  if (PoolHugePages()) (void)::madvise(m, max_size, MADV_HUGEPAGE);  // EINVAL without THP: no matter
  base_ = static_cast<char*>(m);
  reserved_ = max_size;
  if (map_sync || FileIsDax(fd_)) durability_ = Durability::kPowerFail;
  else if (OnTmpfs(fd_)) durability_ = Durability::kTmpfs;
  else durability_ = opts.sync ? Durability::kFileSync : Durability::kProcessCrash;
  if (durability_ == Durability::kFileSync && !read_only_ && !private_copy_) {
    pm::RegisterSyncRange(base_, reserved_);
    synced_ = true;
  }

  // tmpfs: a new pool's heap made of huge pages (HugeFill; growth does the same for its chunks),
  // then allocated. Not at the open of an existing pool: the huge pages a writer made stay in
  // the file's page cache and this aligned mapping maps them at the first touch of each 2 MiB,
  // while collapsing a file of small pages (a copy, a pool written with WORT_POOL_HUGEPAGE=0)
  // would copy the whole heap before the open returns (measured: 0.4 s CPU for a 176 MB pool, a
  // restart that took 0.3 ms).
  if (huge_heap) {
    if (durability_ == Durability::kTmpfs) HugeFill(base_, h.heap_off, h.heap_off, h.size);
    if (int e = AllocateChunks(fd_, h.chunk_table_off, h.heap_off, 0, (h.size - h.heap_off) / kChunkSize); e != 0) {
      ::munmap(base_, reserved_);
      base_ = nullptr;
      errno = e;
      return fail(Status::IOError(Errno("cannot allocate space for", path)));
    }
  }
  if (create) {
    // The file is fresh (all zero). Write the header, persist it, then it is a pool.
    std::memcpy(base_, &h, sizeof(h));
    // crash-site: outside: Pool::Create, before any index exists (a crash leaves a file that is not yet a pool: Open reports it).
    pm::persist(base_, sizeof(h));
    opened_clean_ = true;
  } else {
    opened_clean_ = h.clean == 1;
  }
  if (!read_only_) {
    Header* hd = header();
    // An open that names a size limit sets it (LMDB's map size, without the remap: the whole
    // capacity is mapped already). Below the current size it only stops growth.
    if (!create && opts.max_size != 0) {
      const uint64_t lim = hd->heap_off + LimitChunks(opts.max_size, hd->max_chunks) * kChunkSize;
      if (lim != hd->limit) pm::store8(&hd->limit, lim);
    }
    pm::store8(&hd->clean, 0);
    pm::store8(&hd->generation, hd->generation + 1);
    // Its removal is caught by the plans' recovery_persists check (an open after a crash returns
    // with the generation bump not persistent); the clean flag's part matters only when a cleanly
    // closed pool is reopened and then crashes, and the explorer reopens only crashed images.
    // The line holds the limit word too.
    pm::persist(&hd->size, 64);
    // Readers in other processes (src/pm/share.h): the writer's pid, and a dead writer's lanes
    // closed. Not persisted (a crash leaves a pid that is dead or reused: checked by start time).
    if (!private_copy_) share_ = share::WriterOpen(base_);
  }
  return Status::OK();
}

Pool::~Pool() {
  if (!closed_) {
    Status s = Close();
    if (!s.ok()) std::fprintf(stderr, "wort: closing pool %s: %s\n", path_.c_str(), s.ToString().c_str());
  }
}

Status Pool::Close() {
  if (closed_) return Status::OK();
  Status s;
  if (!read_only_ && base_ != nullptr) {
    // Recovery must finish first: until then the allocator's state is not complete.
    s = alloc_->WaitForRecovery();
    if (s.ok()) s = alloc_->PrepareClose();
    if (s.ok()) {
      pm::store8(&header()->clean, 1);
      // crash-site: redundant: a clean flag that never reaches memory only makes the next open run the post-crash recovery (same contents, slower open).
      pm::persist(&header()->clean, 8);
    }
    // Not clean (recovery failed): leave the flag at 0 so the next open recovers again.
    share_.reset();  // its hand-off thread stops (every store of this pool has closed)
    if (!private_copy_) share::WriterClose(base_);
  }
  alloc_.reset();
  if (synced_) pm::UnregisterSyncRange(base_);
  synced_ = false;
  if (base_) ::munmap(base_, reserved_);
  base_ = nullptr;
  if (fd_ >= 0 && !read_only_ && !private_copy_) {
    std::pair<dev_t, ino_t> id;
    if (FileId(fd_, &id)) {
      std::lock_guard<std::mutex> g(g_held_mu);
      Held().erase(id);
    }
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  closed_ = true;
  return s;
}

static_assert(offsetof(Pool::Header, size) == Pool::kSizeWordOffset, "Pool::size() reads the size word inline");
static_assert(offsetof(Pool::Header, generation) == 144, "src/pm/share.cc reads the generation word");
static_assert(sizeof(Pool::Header) <= share::kAreaOff, "the reader table (src/pm/share.h) follows the header");
static_assert(share::kAreaEnd == kHeaderSize, "the shared area ends with the header page");
uint64_t Pool::max_size() const {
  const Header* h = header();
  // A word that is no limit (0, or not heap_off + whole chunks: the padding of a pool written
  // before the word existed) leaves the capacity as the limit.
  const uint64_t lim = pm::load8(&h->limit);
  const bool valid = lim >= h->heap_off + kChunkSize && (lim - h->heap_off) % kChunkSize == 0;
  return valid && lim < h->max_size ? lim : h->max_size;
}
uint64_t Pool::capacity() const { return header()->max_size; }
uint64_t Pool::heap_offset() const { return header()->heap_off; }
uint64_t Pool::chunk_table_offset() const { return header()->chunk_table_off; }
uint64_t Pool::max_chunks() const { return header()->max_chunks; }
uint64_t Pool::generation() const { return pm::load8(&header()->generation); }

Status Pool::Grow(uint64_t new_size) {
  if (read_only_) return Status::InvalidArgument("pool is read-only");
  if (private_copy_) return Status::PoolFull("pool is a private copy (a read-only check): it cannot grow");
  std::lock_guard<std::mutex> g(PoolAccess::GrowMu(this));
  Header* h = header();
  const uint64_t cur = h->size;
  if (new_size <= cur) return Status::OK();
  new_size = h->heap_off + RoundUp(new_size - h->heap_off, kChunkSize);
  if (const uint64_t lim = growth_limit(); lim != 0 && lim < max_size() && new_size > lim && new_size > cur)
    return Status::PoolFull("pool full: " + std::to_string(cur) + " bytes in use, growth limited to " +
                            std::to_string(lim) + " (" + path_ + ")");
  if (new_size > max_size()) {
    if (max_size() < h->max_size)
      return Status::PoolFull("pool full: " + std::to_string(cur) + " bytes in use of its size limit of " +
                              std::to_string(max_size()) + " (open it with a larger max_size to raise the limit, up to " +
                              std::to_string(h->max_size) + "): " + path_);
    return Status::PoolFull("pool full: " + std::to_string(cur) + " bytes in use of its capacity of " +
                            std::to_string(h->max_size) + " (fixed when it was created): " + path_);
  }
  // Grow the file first (the new chunks and their chunk-table pages), make the new size
  // durable, then publish it in the header: a crash in between leaves a file longer than the
  // header says, which is harmless. The mapping covers the whole capacity already: nothing
  // moves, readers' pointers stay valid. tmpfs: the new chunks' 2 MiB ranges made huge first
  // (HugeFill: with the range the old end cuts in two; the whole heap when the pool reaches
  // kCollapseFrom), then the rest allocated.
  const uint64_t from_chunk = (cur - h->heap_off) / kChunkSize, to_chunk = (new_size - h->heap_off) / kChunkSize;
  if (durability_ == Durability::kTmpfs && PoolHugePages() && new_size >= kCollapseFrom) {
    // The file is made long enough first (a page of the mapping past its end cannot be
    // populated); its new chunks are holes until HugeFill or posix_fallocate allocates them.
    struct stat st;
    if (::fstat(fd_, &st) == 0 && (static_cast<uint64_t>(st.st_size) >= new_size || ::ftruncate(fd_, static_cast<off_t>(new_size)) == 0) &&
        AllocateChunks(fd_, h->chunk_table_off, h->heap_off, from_chunk, to_chunk, /*heap=*/false) == 0)
      HugeFill(base_, h->heap_off, cur < kCollapseFrom ? h->heap_off : cur, new_size);
  }
  if (int e = AllocateChunks(fd_, h->chunk_table_off, h->heap_off, from_chunk, to_chunk); e != 0) {
    return Status::PoolFull(std::string("pool full: cannot grow the file to ") + std::to_string(new_size) +
                            " bytes: " + std::strerror(e));
  }
  ::fdatasync(fd_);
  pm::store8(&h->size, new_size);
  pm::persist(&h->size, 8);
  return Status::OK();
}

Status Pool::FindRoot(std::string_view name, RootInfo* out) const {
  for (const RootEntry& e : header()->roots) {
    if (pm::load8(&e.check) != RootCheck(e)) continue;
    if (name == std::string_view(e.name, strnlen(e.name, sizeof(e.name)))) {
      if (out) *out = RootInfo{std::string(name), e.type, e.off};
      return Status::OK();
    }
  }
  return Status::NotFound("no root named '" + std::string(name) + "' in pool " + path_);
}

std::vector<RootInfo> Pool::Roots() const {
  std::vector<RootInfo> v;
  for (const RootEntry& e : header()->roots) {
    if (pm::load8(&e.check) != RootCheck(e)) continue;
    v.push_back(RootInfo{std::string(e.name, strnlen(e.name, sizeof(e.name))), e.type, e.off});
  }
  return v;
}

Status Pool::AddRoot(std::string_view name, uint32_t type, uint64_t off) {
  if (read_only_) return Status::InvalidArgument("pool is read-only");
  if (name.empty() || name.size() > kMaxRootName)
    return Status::InvalidArgument("root name must be 1.." + std::to_string(kMaxRootName) + " bytes");
  static std::mutex mu;
  std::lock_guard<std::mutex> g(mu);
  if (FindRoot(name, nullptr).ok()) return Status::AlreadyExists("root '" + std::string(name) + "' exists");
  for (RootEntry& e : header()->roots) {
    if (pm::load8(&e.check) == RootCheck(e)) continue;
    // Write the fields, persist them, then publish with the check word (the commit point).
    pm::store8(&e.check, 0);
    std::memset(e.name, 0, sizeof(e.name));
    std::memcpy(e.name, name.data(), name.size());
    e.type = type;
    e.reserved = 0;
    e.off = off;
    // crash-site: redundant: the entry is one aligned cache line (static_assert above), so the check word's persist below writes the fields back with it; only --torn (8-byte write-back) needs this persist.
    pm::persist(&e, sizeof(e));
    pm::store8(&e.check, RootCheck(e));
    pm::persist(&e.check, 8);
    return Status::OK();
  }
  return Status::PoolFull("root table full (" + std::to_string(kMaxRoots) + " roots)");
}

Status Pool::RemoveRoot(std::string_view name) {
  if (read_only_) return Status::InvalidArgument("pool is read-only");
  for (RootEntry& e : header()->roots) {
    if (pm::load8(&e.check) != RootCheck(e)) continue;
    if (name == std::string_view(e.name, strnlen(e.name, sizeof(e.name)))) {
      pm::store8(&e.check, 0);  // the commit point
      // crash-site: outside: Pool::RemoveRoot, which no index operation calls (nothing in src/ does; tests/foundation/pool_test.cc).
      pm::persist(&e.check, 8);
      return Status::OK();
    }
  }
  return Status::NotFound("no root named '" + std::string(name) + "'");
}

namespace {
std::atomic<RootVisitorLookup> g_root_visitors{nullptr};
}  // namespace
void SetRootVisitorLookup(RootVisitorLookup lookup) { g_root_visitors.store(lookup, std::memory_order_release); }
RootVisitorLookup GetRootVisitorLookup() { return g_root_visitors.load(std::memory_order_acquire); }

Status Pool::WaitForRecovery() { return alloc_->WaitForRecovery(); }
bool Pool::recovery_done() const { return alloc_->RecoveryDone(); }
double Pool::recovery_seconds() const { return alloc_->RecoverySeconds(); }

Status Pool::Check(std::string* report) const {
  const Header* h = header();
  bool ok = true;
  auto bad = [&](const std::string& m) {
    ok = false;
    if (report) *report += m + "\n";
  };
  if (h->magic != kMagic) bad("header: bad magic");
  if (h->checksum != HeaderChecksum(h)) bad("header: checksum mismatch");
  if (h->size > h->max_size || (h->size - h->heap_off) % kChunkSize) bad("header: bad size");
  for (const RootEntry& e : h->roots) {
    if (pm::load8(&e.check) != RootCheck(e)) continue;
    if (e.off < h->heap_off || e.off >= h->size) bad("root '" + std::string(e.name) + "': offset out of range");
  }
  Status s = alloc_->Check(report);
  if (!s.ok()) ok = false;
  return ok ? Status::OK() : Status::Corruption("pool check failed (see report)");
}

}  // namespace wort
