// Readers in other processes (LMDB's model: one writing process, any number of reading ones).
// The shared state lives in the pool's header page (doc/pool-format.md, "Reader table"), so that
// every word a reader in another process validates or a writer consults is in the mapping;
// nothing here is persistent in meaning (a crash leaves stale words that the next open clears).
//
//   [2560, 2568)  xepoch   the cross-process reclamation epoch G (writer: fetch_add)
//   [2568, 2576)  nreaders registered reader slots (readers: +1 / -1; writer: -1 for a dead one)
//   [2576, 2584)  writer   pid of the process that holds the pool open for writing (0: none)
//   [2584, 2592)  wstart   that process's start time (/proc/<pid>/stat field 22): pid reuse
//   [2592, 2600)  hreq     hand-off requests: a reader registering a slot takes one (fetch_add)
//   [2600, 2608)  hack     the last request the writing process has answered (its hand-off thread)
//   [2608, 2616)  helper   1 while the writing process's hand-off thread runs (it may write without lanes)
//   [2616, 2624)  quiet    a starving reader's quiet window: writers start no write before this
//                          CLOCK_MONOTONIC time in ns (0: none)
//   [2624, 3072)  lanes    7 write lanes of 64 bytes: {begun, ended} counters
//   [3072, 4096)  slots    32 reader slots of 32 bytes: {owner pid, start time, epoch, 0}
//
// Write lanes (a sequence lock in the mapping, striped), used only while a reader is
// registered: a KvStore write (WriteSection) that finds `nreaders` == 0 writes nothing shared
// at all - it enters the writing process's own write epoch (Writer::writes: a store to the
// thread's own slot, no hardware fence) and loads `nreaders`, a line writers only read. Else it
// increments its lane's `begun` before its first change of the index and `ended` after its last.
// A reader in another process notes every lane with begun == ended (waiting while one is not),
// reads, and accepts what it read only if every `begun` and the header's generation are
// unchanged: no write overlapped the read.
//
// The hand-off (a reader registering while writes without lanes may be in progress): the
// reader increments `nreaders`, takes a request number r = ++hreq and waits until `hack` >= r
// (or `helper` is 0, or the writer is dead). The writing process's hand-off thread (started with
// its first write) sleeps on `hreq` (a futex in the shared mapping); woken, it reads hreq, waits
// for a grace period of the write epoch (Synchronize: every write that may have loaded
// nreaders == 0 has ended; later ones see the reader) and publishes hack = that number. So a
// registered reader's first read begins after every write without lanes has ended.
//
// Starvation: a reader whose read failed validation kQuietAfter times in a row asks for a quiet
// window (`quiet` := now + 1 ms, doubling per further failure up to 128 ms): a writer with lanes
// checks `quiet` before it begins and waits until the window has passed or was withdrawn. A
// window bounds what a reader can cost the writer even when the reader hangs or dies.
//
// Reclamation: a reader enters a read by storing G+1 in its slot's epoch (0 outside). Blocks
// that the writer's epoch manager hands to be freed while readers are registered are kept per
// writer thread and tagged in batches with the value of G after one increment (NextTag: a
// reader that loads G after it stores a larger value than the tag) and freed only when every
// active slot's epoch is above their tag, or its owner is dead (pid gone, or reused: another
// start time); a dead reader's slot is cleared. The post-crash GC and Close wait for a grace period of the
// table (WaitForReaders) before they free.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sync/epoch.h"
#include "wort/status.h"

namespace wort {
class Pool;
}

namespace wort::share {

inline constexpr uint64_t kAreaOff = 2560;
inline constexpr uint64_t kXEpochOff = 2560;
inline constexpr uint64_t kNReadersOff = 2568;
inline constexpr uint64_t kWriterOff = 2576;
inline constexpr uint64_t kWriterStartOff = 2584;
inline constexpr uint64_t kHReqOff = 2592;
inline constexpr uint64_t kHAckOff = 2600;
inline constexpr uint64_t kHelperOff = 2608;
inline constexpr uint64_t kQuietOff = 2616;
inline constexpr int kQuietAfter = 4;  // failed validations in a row before a reader asks for a quiet window
inline constexpr uint64_t kLanesOff = 2624;
inline constexpr int kLanes = 7;
inline constexpr uint64_t kSlotsOff = 3072;
inline constexpr int kSlots = 32;
inline constexpr uint64_t kSlotSize = 32;
inline constexpr uint64_t kAreaEnd = kSlotsOff + kSlots * kSlotSize;  // 4096: the end of the header page
// A writer thread tags the blocks it holds for readers in batches of this many (one increment of
// xepoch per batch: Allocator::ReclaimShared).
inline constexpr size_t kTagBatch = 64;

// A process's start time in clock ticks since boot (0 if it does not exist).
uint64_t ProcessStart(pid_t pid);
// Whether the process `pid` with start time `start` (0: unknown) is alive.
bool ProcessAlive(uint64_t pid, uint64_t start);

// ---- writer side (base: the writable mapping) ---------------------------------------------
class Writer;
// At a writable open: records this process as the writer and clears the lanes and hand-off
// words a dead writer may have left. The Writer is the process's write epoch and hand-off
// thread (started by the first WriteSection); destroy it before WriterClose.
std::unique_ptr<Writer> WriterOpen(char* base);
void WriterClose(char* base);
// The pid of the writer recorded in the header, if that process is alive (0 otherwise).
uint64_t LiveWriter(const char* base);

class Writer {
 public:
  explicit Writer(char* base);
  ~Writer();  // stops the hand-off thread (REQUIRES: no write in progress)
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  char* base() const { return base_; }
  // Hand-offs answered so far (tests).
  uint64_t handoffs() const { return handoffs_.load(std::memory_order_relaxed); }

 private:
  friend class WriteSection;
  void StartHelper();
  void HelperLoop();
  char* base_;
  // The write epoch: a manager of its own (nothing is retired into it). Not the pool's
  // (Allocator::epoch()): the store's open waits for the post-crash GC inside a write (a
  // committed batch's re-application), and the GC waits for a grace period of the pool's epoch.
  sync::EpochManager own_{[](void*, uint64_t) {}, nullptr};
  sync::EpochManager* writes_ = &own_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> handoffs_{0};
  std::mutex start_mu_;
  std::unique_ptr<std::thread> helper_;
  uint64_t owner_ = 0;  // the pid that started the thread
};

// Brackets one write of a KvStore's index (see above). `w` null: a private copy (no readers).
class WriteSection {
 public:
  explicit WriteSection(Writer* w);
  ~WriteSection();
  WriteSection(const WriteSection&) = delete;
  WriteSection& operator=(const WriteSection&) = delete;
  // Whether this write brackets itself in a lane (a reader was registered when it began).
  bool laned() const { return lane_ != nullptr; }

 private:
  Writer* w_;
  uint64_t* lane_ = nullptr;
};

// Whether any reader slot is registered (a reader registering later cannot hold a block
// unlinked before).
bool ReadersPresent(const char* base);
// Increments G and returns the new value: the tag of the blocks unlinked before the call (a
// reader slot above it, X+1 > tag, loaded X >= tag after the increment). One call per batch of
// blocks (Allocator::ReclaimShared: per thread, every kTagBatch blocks).
uint64_t NextTag(char* base);
// The smallest epoch of an active reader slot (~0 when none); clears dead readers' slots.
uint64_t OldestReader(char* base);
// Waits until every reader active now has left its read (or died).
void WaitForReaders(char* base);

// ---- reader side ---------------------------------------------------------------------------
// A read-only open's registration: a writable mapping of the header page (when the file can be
// opened for writing) and the slots this process's threads took.
class ReaderTable {
 public:
  // rbase: the read-only mapping. Tries to map the header page writable; *registered tells.
  static Status Attach(const std::string& path, const char* rbase, std::unique_ptr<ReaderTable>* out);
  ~ReaderTable();  // frees every slot this handle took
  bool registered() const { return page_ != nullptr; }

  // One read: Enter (slot epoch := G+1, snapshot of the lanes) ... Valid() ... Exit.
  class Read {
   public:
    explicit Read(ReaderTable& t) : t_(t) {}
    ~Read();
    Read(const Read&) = delete;
    Read& operator=(const Read&) = delete;
    // Takes a slot (Busy when the table is full; a new slot waits for the hand-off) and enters;
    // waits while a write is in progress (gives up waiting when the writer died: its image is
    // read as a crash left it). `failed`: this read's earlier attempts that Valid() refused (from
    // kQuietAfter on, the read asks the writer for a quiet window).
    Status Begin(int failed = 0);
    // No write overlapped since Begin. Then ends the read's validation window; call Begin again
    // to retry.
    bool Valid();

   private:
    ReaderTable& t_;
    uint64_t* slot_epoch_ = nullptr;
    bool nested_ = false;  // inside another read of this thread (a Get callback's Get): its epoch stands
    uint64_t begun_[kLanes] = {};
    uint64_t gen_ = 0;
    uint64_t quiet_ = 0;  // the quiet window this read asked for (0: none)
    bool in_ = false;
  };

 private:
  ReaderTable() = default;
  Status SlotFor(uint64_t** epoch);
  void HandOff();  // after a new slot's registration: waits for the writer's hand-off
  const char* rbase_ = nullptr;
  char* page_ = nullptr;  // writable mapping of [0, 4096); null: not registered
  std::mutex mu_;
  std::vector<std::pair<uint64_t, int>> taken_;  // (thread key, slot index)
  uint32_t depth_[kSlots] = {};  // reads in progress per slot (only its thread touches it)
  uint64_t uid_ = 0;
};

}  // namespace wort::share
