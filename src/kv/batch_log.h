// The key-value store's batch log (KvStore::Write, wort/kv.h "Batches"): its persistent layout
// and the visit function the post-crash GC reaches it through (index/registry.cc).
//
// One log per store, a root of its own (type kind_id::kKvBatch, named BatchLogRootName(store))
// pointing at a head block:
//   head    word 0  kHeadMagic
//           word 1  commit word: offset of the committed batch record, 0 = no batch in flight
//           words 2..6  the store's name (40 bytes, NUL-padded): the root name is a hash of it
// A batch record (one pool block, written once, never changed):
//   word 0  kRecordMagic
//   word 1  number of entries
//   word 2  bytes of the entries that follow (a multiple of 8)
//   word 3  Crc64 (util/crc32c.h) of those bytes
//   entries, each: value block offset (u64; 0 = remove), key length (u32), 0 (u32), the key's
//           bytes padded with zeros to a multiple of 8. No key appears twice.
//
// Invariant (what the visit relies on): while the commit word is not 0 it names a whole,
// persisted record whose value blocks are whole and persisted (the record and the blocks are
// persisted before the commit word is stored). The visit reports the head, and when the commit
// word is set, the record and every value block it names: they stay allocated across a crash
// until the batch is applied.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "index/kind_ids.h"
#include "wort/pool.h"

namespace wort::kv {

inline constexpr uint64_t kHeadMagic = 0x4441454842564b57;    // "WKVBHEAD"
inline constexpr uint64_t kRecordMagic = 0x3143455242564b57;  // "WKVBREC1"
inline constexpr size_t kHeadSize = 64;
inline constexpr size_t kRecordHeader = 32;
inline constexpr size_t kEntryHeader = 16;
inline constexpr size_t kNameBytes = 40;

std::string BatchLogRootName(std::string_view store);

// One entry of a record, as read back.
struct RecordEntry {
  uint64_t value_off;  // 0: remove
  std::string_view key;
};

// Calls fn for each entry of the record at `rec` if it is whole (magic, bounds, checksum);
// Corruption otherwise (fn not called).
Status ReadRecord(const Pool& pool, uint64_t rec, const std::function<void(const RecordEntry&)>& fn);

// The GC's visit of a log root (RootVisitFn).
void VisitBatchLog(const Pool& pool, uint64_t head_off, const std::function<void(uint64_t)>& mark);

}  // namespace wort::kv
