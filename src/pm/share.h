// Readers in other processes (LMDB's model: one writing process, any number of reading ones).
// The shared state lives in the pool's header page (doc/pool-format.md, "Reader table"), so that
// every word a reader in another process validates or a writer consults is in the mapping;
// nothing here is persistent in meaning (a crash leaves stale words that the next open clears).
//
//   [2560, 2568)  xepoch   the cross-process reclamation epoch G (writer: fetch_add)
//   [2568, 2576)  nreaders registered reader slots (readers: +1 / -1; writer: -1 for a dead one)
//   [2576, 2584)  writer   pid of the process that holds the pool open for writing (0: none)
//   [2584, 2592)  wstart   that process's start time (/proc/<pid>/stat field 22): pid reuse
//   [2624, 3072)  lanes    7 write lanes of 64 bytes: {begun, ended} counters
//   [3072, 4096)  slots    32 reader slots of 32 bytes: {owner pid, start time, epoch, 0}
//
// Write lanes (a sequence lock in the mapping, striped): a KvStore write increments its lane's
// `begun` before its first change of the index and `ended` after its last (WriteSection). A
// reader in another process notes every lane with begun == ended (waiting while one is not),
// reads, and accepts what it read only if every `begun` and the header's generation are
// unchanged: no write overlapped the read. Readers never write a word the writer reads on its
// write path: a writer never waits for a reader.
//
// Reclamation: a reader enters a read by storing G+1 in its slot's epoch (0 outside). A block
// that the writer's epoch manager hands to be freed while readers are registered is tagged
// with G (fetch_add: later readers store a larger G) and freed only when every active slot's
// epoch is above its tag, or its owner is dead (pid gone, or reused: another start time); a
// dead reader's slot is cleared. The post-crash GC and Close wait for a grace period of the
// table (WaitForReaders) before they free.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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
inline constexpr uint64_t kLanesOff = 2624;
inline constexpr int kLanes = 7;
inline constexpr uint64_t kSlotsOff = 3072;
inline constexpr int kSlots = 32;
inline constexpr uint64_t kSlotSize = 32;
inline constexpr uint64_t kAreaEnd = kSlotsOff + kSlots * kSlotSize;  // 4096: the end of the header page

// A process's start time in clock ticks since boot (0 if it does not exist).
uint64_t ProcessStart(pid_t pid);
// Whether the process `pid` with start time `start` (0: unknown) is alive.
bool ProcessAlive(uint64_t pid, uint64_t start);

// ---- writer side (base: the writable mapping) ---------------------------------------------
// At a writable open: records this process as the writer and clears the lanes a dead writer
// may have left in progress.
void WriterOpen(char* base);
void WriterClose(char* base);
// The pid of the writer recorded in the header, if that process is alive (0 otherwise).
uint64_t LiveWriter(const char* base);

// Brackets one write of a KvStore's index (see above).
class WriteSection {
 public:
  explicit WriteSection(char* base);
  ~WriteSection();
  WriteSection(const WriteSection&) = delete;
  WriteSection& operator=(const WriteSection&) = delete;

 private:
  uint64_t* lane_;
};

// Whether any reader slot is registered (a reader registering later cannot hold a block
// unlinked before).
bool ReadersPresent(const char* base);
// G, then G+1 (the tag of a block unlinked before the call).
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
    // Takes a slot (Busy when the table is full) and enters; waits while a write is in progress
    // (gives up waiting when the writer died: its image is read as a crash left it).
    Status Begin();
    // No write overlapped since Begin. Then ends the read's validation window; call Begin again
    // to retry.
    bool Valid();

   private:
    ReaderTable& t_;
    uint64_t* slot_epoch_ = nullptr;
    bool nested_ = false;  // inside another read of this thread (a Get callback's Get): its epoch stands
    uint64_t begun_[kLanes] = {};
    uint64_t gen_ = 0;
    bool in_ = false;
  };

 private:
  ReaderTable() = default;
  Status SlotFor(uint64_t** epoch);
  const char* rbase_ = nullptr;
  char* page_ = nullptr;  // writable mapping of [0, 4096); null: not registered
  std::mutex mu_;
  std::vector<std::pair<uint64_t, int>> taken_;  // (thread key, slot index)
  uint32_t depth_[kSlots] = {};  // reads in progress per slot (only its thread touches it)
  uint64_t uid_ = 0;
};

}  // namespace wort::share
