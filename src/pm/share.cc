// Readers in other processes: the reader table and the write lanes (src/pm/share.h).
#include "pm/share.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace wort::share {

namespace {
constexpr uint64_t kGenerationOff = 144;  // offsetof(Pool::Header, generation): checked in pool.cc

std::atomic_ref<uint64_t> W(const char* base, uint64_t off) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<char*>(base) + off));
}
uint64_t SlotOff(int i, int field) { return kSlotsOff + static_cast<uint64_t>(i) * kSlotSize + 8u * field; }
enum { kOwner = 0, kStart = 1, kEpoch = 2 };

uint64_t Self() { return static_cast<uint64_t>(::getpid()); }
uint64_t SelfStart() {
  // Cached per pid: a forked child has a start time of its own.
  static std::atomic<uint64_t> cached_pid{0}, cached{0};
  const uint64_t pid = Self();
  if (cached_pid.load() == pid) return cached.load();
  const uint64_t s = ProcessStart(static_cast<pid_t>(pid));
  cached.store(s);
  cached_pid.store(pid);
  return s;
}

std::atomic<uint64_t> g_uid{1};

// Clears slot i if its owner (owner, start) is dead; true if it did.
bool ClearIfDead(char* base, int i) {
  const uint64_t owner = W(base, SlotOff(i, kOwner)).load();
  if (owner == 0) return false;
  const uint64_t start = W(base, SlotOff(i, kStart)).load();
  if (ProcessAlive(owner, start)) return false;
  uint64_t o = owner;
  if (!W(base, SlotOff(i, kOwner)).compare_exchange_strong(o, ~0ull)) return false;  // claimed for clearing
  W(base, SlotOff(i, kEpoch)).store(0);
  W(base, SlotOff(i, kStart)).store(0);
  W(base, SlotOff(i, kOwner)).store(0);
  W(base, kNReadersOff).fetch_sub(1);
  return true;
}
}  // namespace

uint64_t ProcessStart(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "re");
  if (!f) return 0;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = 0;
  // Field 2 (comm) may hold spaces and parentheses: count fields after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (!p) return 0;
  if (p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X')) return 0;  // a zombie (killed, not yet reaped) is dead
  int field = 2;
  for (++p; *p; ++p) {
    if (*p == ' ') {
      ++field;
      if (field == 22) return std::strtoull(p + 1, nullptr, 10) + 1;  // +1: never 0 when known
    }
  }
  return 0;
}

bool ProcessAlive(uint64_t pid, uint64_t start) {
  if (pid == 0 || pid > 0x7fffffff) return pid == ~0ull;  // ~0: a slot being cleared counts as taken
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  if (start == 0) return true;
  const uint64_t now = ProcessStart(static_cast<pid_t>(pid));
  return now == 0 ? false : now == start;  // 0: gone since (or a zombie's stat is still there)
}

// ---- writer side ------------------------------------------------------------------------

void WriterOpen(char* base) {
  W(base, kWriterStartOff).store(SelfStart());
  W(base, kWriterOff).store(Self());
  // A dead writer's write in progress: its lanes stay begun != ended; readers gave up waiting
  // for it. Close them (readers also compare the generation, bumped before this).
  for (int i = 0; i < kLanes; ++i) {
    const uint64_t b = W(base, kLanesOff + 64u * i).load();
    W(base, kLanesOff + 64u * i + 8).store(b);
  }
}

void WriterClose(char* base) {
  W(base, kWriterOff).store(0);
  W(base, kWriterStartOff).store(0);
}

uint64_t LiveWriter(const char* base) {
  const uint64_t pid = W(base, kWriterOff).load();
  if (pid == 0) return 0;
  return ProcessAlive(pid, W(base, kWriterStartOff).load()) ? pid : 0;
}

WriteSection::WriteSection(char* base) {
  thread_local const uint64_t lane = std::hash<std::thread::id>{}(std::this_thread::get_id()) % kLanes;
  lane_ = reinterpret_cast<uint64_t*>(base + kLanesOff + 64u * lane);
  std::atomic_ref<uint64_t>(lane_[0]).fetch_add(1, std::memory_order_seq_cst);  // before any change
}

WriteSection::~WriteSection() { std::atomic_ref<uint64_t>(lane_[1]).fetch_add(1, std::memory_order_release); }

bool ReadersPresent(const char* base) { return W(base, kNReadersOff).load() != 0; }

uint64_t NextTag(char* base) { return W(base, kXEpochOff).fetch_add(1); }

uint64_t OldestReader(char* base) {
  uint64_t m = ~0ull;
  for (int i = 0; i < kSlots; ++i) {
    if (W(base, SlotOff(i, kOwner)).load() == 0) continue;
    const uint64_t e = W(base, SlotOff(i, kEpoch)).load();
    if (e == 0) continue;
    if (ClearIfDead(base, i)) continue;
    m = std::min(m, e);
  }
  return m;
}

void WaitForReaders(char* base) {
  if (!ReadersPresent(base)) return;
  uint64_t seen[kSlots];
  for (int i = 0; i < kSlots; ++i) seen[i] = W(base, SlotOff(i, kEpoch)).load();
  for (int i = 0; i < kSlots; ++i) {
    for (int a = 0; seen[i] != 0; ++a) {
      // Left (0), or re-entered (a new epoch: entered after this call began), or dead.
      if (W(base, SlotOff(i, kEpoch)).load() != seen[i] || ClearIfDead(base, i)) break;
      std::this_thread::sleep_for(std::chrono::microseconds(a < 100 ? 10 : 1000));
    }
  }
}

// ---- reader side ------------------------------------------------------------------------

Status ReaderTable::Attach(const std::string& path, const char* rbase, std::unique_ptr<ReaderTable>* out) {
  std::unique_ptr<ReaderTable> t(new ReaderTable());
  t->rbase_ = rbase;
  t->uid_ = g_uid.fetch_add(1);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd >= 0) {
    void* m = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (m != MAP_FAILED) t->page_ = static_cast<char*>(m);
  }
  *out = std::move(t);
  return Status::OK();
}

ReaderTable::~ReaderTable() {
  if (!page_) return;
  for (auto& [key, i] : taken_) {
    W(page_, SlotOff(i, kEpoch)).store(0);
    W(page_, SlotOff(i, kStart)).store(0);
    W(page_, SlotOff(i, kOwner)).store(0);
    W(page_, kNReadersOff).fetch_sub(1);
  }
  ::munmap(page_, 4096);
}

Status ReaderTable::SlotFor(uint64_t** epoch) {
  // One slot per thread of this process and handle (a thread's reads do not nest across
  // handles of one pool). Thread key: the address of a thread-local.
  thread_local char tkey;
  thread_local std::pair<uint64_t, uint64_t*> cache{0, nullptr};
  if (cache.first == uid_) {
    *epoch = cache.second;
    return Status::OK();
  }
  const uint64_t key = reinterpret_cast<uint64_t>(&tkey);
  std::lock_guard<std::mutex> g(mu_);
  int idx = -1;
  for (auto& [k, i] : taken_)
    if (k == key) idx = i;
  for (int pass = 0; idx < 0 && pass < 2; ++pass) {
    for (int i = 0; i < kSlots && idx < 0; ++i) {
      uint64_t z = 0;
      if (pass == 1) ClearIfDead(page_, i);
      if (!W(page_, SlotOff(i, kOwner)).compare_exchange_strong(z, Self())) continue;
      W(page_, SlotOff(i, kEpoch)).store(0);
      W(page_, SlotOff(i, kStart)).store(SelfStart());
      W(page_, kNReadersOff).fetch_add(1);
      taken_.emplace_back(key, i);
      idx = i;
    }
  }
  if (idx < 0)
    return Status::Busy("the pool's reader table is full (" + std::to_string(kSlots) +
                        " reading threads in all processes): close a reader first");
  cache = {uid_, reinterpret_cast<uint64_t*>(page_ + SlotOff(idx, kEpoch))};
  *epoch = cache.second;
  return Status::OK();
}

namespace {
int SlotIndex(const char* page, const uint64_t* epoch) {
  return static_cast<int>((reinterpret_cast<const char*>(epoch) - page - kSlotsOff) / kSlotSize);
}
}  // namespace

ReaderTable::Read::~Read() {
  if (!in_ || !slot_epoch_) return;
  if (--t_.depth_[SlotIndex(t_.page_, slot_epoch_)] == 0)
    std::atomic_ref<uint64_t>(*slot_epoch_).store(0, std::memory_order_release);
}

Status ReaderTable::Read::Begin() {
  const char* b = t_.rbase_;
  if (t_.page_ && !slot_epoch_) {
    WORT_RETURN_IF_ERROR(t_.SlotFor(&slot_epoch_));
    nested_ = t_.depth_[SlotIndex(t_.page_, slot_epoch_)]++ != 0;
  }
  in_ = true;
  for (int a = 0;; ++a) {
    // Enter: G+1 in the slot, then (seq_cst: a full fence) every read follows. A block unlinked
    // before G reached this value is never found by them; later unlinks are tagged >= it.
    if (slot_epoch_ && !nested_)
      std::atomic_ref<uint64_t>(*slot_epoch_).store(W(b, kXEpochOff).load() + 1, std::memory_order_seq_cst);
    gen_ = W(b, kGenerationOff).load(std::memory_order_acquire);
    bool busy = false;
    for (int i = 0; i < kLanes; ++i) {
      const uint64_t e = W(b, kLanesOff + 64u * i + 8).load(std::memory_order_acquire);
      begun_[i] = W(b, kLanesOff + 64u * i).load(std::memory_order_acquire);
      busy |= e != begun_[i];
    }
    if (!busy) return Status::OK();
    if (a >= 200 && (a % 200) == 0 && LiveWriter(b) == 0) return Status::OK();  // a dead writer's frozen image
    // Wait outside the read: the writer may be waiting for a grace period of the readers.
    if (slot_epoch_ && !nested_) std::atomic_ref<uint64_t>(*slot_epoch_).store(0, std::memory_order_release);
    if (a < 50) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

bool ReaderTable::Read::Valid() {
  std::atomic_thread_fence(std::memory_order_acquire);  // the data reads before the checks
  const char* b = t_.rbase_;
  bool ok = W(b, kGenerationOff).load(std::memory_order_acquire) == gen_;
  for (int i = 0; i < kLanes && ok; ++i) ok = W(b, kLanesOff + 64u * i).load(std::memory_order_acquire) == begun_[i];
  return ok;
}

}  // namespace wort::share
