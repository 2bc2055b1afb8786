// Readers in other processes: the reader table and the write lanes (src/pm/share.h).
#include "pm/share.h"

#include <fcntl.h>
#include <signal.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// A futex on the low half of a shared (not private: the file's page is the key) 8-byte word.
uint32_t* Low(char* base, uint64_t off) { return reinterpret_cast<uint32_t*>(base + off); }
void FutexWait(uint32_t* w, uint32_t expected, long timeout_ms) {
  struct timespec ts {
    timeout_ms / 1000, (timeout_ms % 1000) * 1000000L
  };
  ::syscall(SYS_futex, w, FUTEX_WAIT, expected, &ts, nullptr, 0);
}
void FutexWakeAll(uint32_t* w) { ::syscall(SYS_futex, w, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0); }

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

std::unique_ptr<Writer> WriterOpen(char* base) {
  W(base, kWriterStartOff).store(SelfStart());
  // No hand-off thread yet (this process has written nothing); requests made before are
  // answered (a dead writer's thread can no longer answer them).
  W(base, kHelperOff).store(0);
  W(base, kHAckOff).store(W(base, kHReqOff).load());
  W(base, kQuietOff).store(0);
  W(base, kWriterOff).store(Self());
  // A dead writer's write in progress: its lanes stay begun != ended; readers gave up waiting
  // for it. Close them (readers also compare the generation, bumped before this).
  for (int i = 0; i < kLanes; ++i) {
    const uint64_t b = W(base, kLanesOff + 64u * i).load();
    W(base, kLanesOff + 64u * i + 8).store(b);
  }
  return std::make_unique<Writer>(base);
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

Writer::Writer(char* base) : base_(base) {}

Writer::~Writer() {
  if (started_.load() && owner_ != Self()) {
    // A forked child closing its copy: the thread is its parent's (not in this process).
    (void)helper_.release();  // leaked: neither joinable nor detachable here
    return;
  }
  if (started_.load()) {
    stop_.store(true);
    // The thread sleeps on hreq: a wake makes it look at stop_ (repeated: one may come between
    // its check and its sleep).
    while (!done_.load()) {
      FutexWakeAll(Low(base_, kHReqOff));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    helper_->join();
  }
  // Every write has ended: answer whatever was asked (readers do not wait on a closed writer).
  W(base_, kHAckOff).store(W(base_, kHReqOff).load());
  W(base_, kHelperOff).store(0);
}

void Writer::StartHelper() {
  std::lock_guard<std::mutex> g(start_mu_);
  if (started_.load(std::memory_order_relaxed)) return;
  // Published before any write of this process goes without lanes: a reader that finds helper
  // == 0 after its registration knows that no such write is in progress (a later one loads
  // nreaders after this store, and sees the reader).
  W(base_, kHAckOff).store(W(base_, kHReqOff).load());
  W(base_, kHelperOff).store(1, std::memory_order_seq_cst);
  owner_ = Self();
  helper_ = std::make_unique<std::thread>([this] { HelperLoop(); });
  started_.store(true, std::memory_order_release);
}

void Writer::HelperLoop() {
  while (!stop_.load()) {
    const uint64_t r = W(base_, kHReqOff).load(std::memory_order_seq_cst);
    if (W(base_, kHAckOff).load() < r) {
      // Every write that loaded nreaders before the reader's increment (seen: it came before
      // its hreq increment, which this load saw) has ended after this grace period; the writes
      // entering later load nreaders after it (Synchronize's heavy fence) and use the lanes.
      writes_->Synchronize();
      W(base_, kHAckOff).store(r, std::memory_order_seq_cst);
      handoffs_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    FutexWait(Low(base_, kHReqOff), static_cast<uint32_t>(r), 1000);
  }
  done_.store(true);
}

namespace {
thread_local int t_laned_depth = 0;  // laned WriteSections this thread is inside
}  // namespace

WriteSection::WriteSection(Writer* w) : w_(w) {
  if (!w_) return;
  if (!w_->started_.load(std::memory_order_acquire)) w_->StartHelper();
  w_->writes_->Enter();  // a store to this thread's own slot (asymmetric fence: see the hand-off)
  char* base = w_->base_;
  if (W(base, kNReadersOff).load(std::memory_order_seq_cst) == 0) return;  // no reader: nothing shared
  thread_local const uint64_t lane = std::hash<std::thread::id>{}(std::this_thread::get_id()) % kLanes;
  lane_ = reinterpret_cast<uint64_t*>(base + kLanesOff + 64u * lane);
  if (t_laned_depth++ != 0) {
    // Inside a laned write of this thread (its lane is open): no wait, a reader waits for it.
    std::atomic_ref<uint64_t>(lane_[0]).fetch_add(1, std::memory_order_seq_cst);
    return;
  }
  for (int a = 0;; ++a) {
    // A starving reader's quiet window: wait it out before the write begins (checked before
    // and after begun's increment: a writer that missed the window's store is seen in progress
    // by the reader's snapshot, which waits for its end).
    uint64_t q = W(base, kQuietOff).load(std::memory_order_seq_cst);
    if (q == 0 || NowNs() >= q) {
      std::atomic_ref<uint64_t>(lane_[0]).fetch_add(1, std::memory_order_seq_cst);  // before any change
      q = W(base, kQuietOff).load(std::memory_order_seq_cst);
      if (q == 0 || NowNs() >= q) return;
      std::atomic_ref<uint64_t>(lane_[1]).fetch_add(1, std::memory_order_release);  // stepped out: no change made
    }
    if (a < 50) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

WriteSection::~WriteSection() {
  if (!w_) return;
  if (lane_) {
    std::atomic_ref<uint64_t>(lane_[1]).fetch_add(1, std::memory_order_release);
    --t_laned_depth;
  }
  w_->writes_->Exit();
}

bool ReadersPresent(const char* base) { return W(base, kNReadersOff).load() != 0; }

// The value after the increment: a reader that loaded it (or a later one) loaded it after this
// call, and therefore after every unlink that preceded the call.
uint64_t NextTag(char* base) { return W(base, kXEpochOff).fetch_add(1) + 1; }

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
  HandOff();
  cache = {uid_, reinterpret_cast<uint64_t*>(page_ + SlotOff(idx, kEpoch))};
  *epoch = cache.second;
  return Status::OK();
}

void ReaderTable::HandOff() {
  // nreaders was incremented (seq_cst) before this request: the hand-off thread that sees the
  // request sees the reader, and so does every write that enters after its grace period.
  // No hand-off thread (this process's writer has not written without lanes since its open: a
  // write that will, loads nreaders after the thread's start, and sees this reader), or no live
  // writer (a writer opening later stores its pid after this load, then loads nreaders): no
  // request, so that a reader beside no writer leaves the file as it found it.
  if (W(page_, kHelperOff).load(std::memory_order_seq_cst) == 0 || LiveWriter(page_) == 0) return;
  const uint64_t r = W(page_, kHReqOff).fetch_add(1, std::memory_order_seq_cst) + 1;
  FutexWakeAll(Low(page_, kHReqOff));
  for (int a = 0;; ++a) {
    if (W(page_, kHAckOff).load(std::memory_order_seq_cst) >= r) return;
    // No hand-off thread: this process's writer has not written without lanes since (a write
    // that will load nreaders after the thread's start, and sees this reader), or there is no writer.
    if (W(page_, kHelperOff).load(std::memory_order_seq_cst) == 0) return;
    if (a % 64 == 63 && LiveWriter(page_) == 0) return;  // a dead writer's frozen image
    if (a < 20) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

namespace {
int SlotIndex(const char* page, const uint64_t* epoch) {
  return static_cast<int>((reinterpret_cast<const char*>(epoch) - page - kSlotsOff) / kSlotSize);
}
}  // namespace

ReaderTable::Read::~Read() {
  if (quiet_ != 0 && t_.page_) {
    uint64_t q = quiet_;  // withdrawn unless another reader has asked for a longer one since
    W(t_.page_, kQuietOff).compare_exchange_strong(q, 0);
  }
  if (!in_ || !slot_epoch_) return;
  if (--t_.depth_[SlotIndex(t_.page_, slot_epoch_)] == 0)
    std::atomic_ref<uint64_t>(*slot_epoch_).store(0, std::memory_order_release);
}

Status ReaderTable::Read::Begin(int failed) {
  const char* b = t_.rbase_;
  if (t_.page_ && !slot_epoch_) {
    WORT_RETURN_IF_ERROR(t_.SlotFor(&slot_epoch_));
    nested_ = t_.depth_[SlotIndex(t_.page_, slot_epoch_)]++ != 0;
  }
  in_ = true;
  if (failed >= kQuietAfter && t_.page_ && !nested_) {
    // Starving: ask the writer for a quiet window (1 ms, doubling per failure, at most 128 ms),
    // raising the word only (another reader's longer window stands). Set before the lanes'
    // snapshot below: a write that began before the writer could see it is seen in progress.
    const uint64_t want = NowNs() + (1000000ull << std::min(failed - kQuietAfter, 7));
    uint64_t q = W(t_.page_, kQuietOff).load();
    while (q < want && !W(t_.page_, kQuietOff).compare_exchange_weak(q, want, std::memory_order_seq_cst)) {
    }
    quiet_ = want;
  }
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
