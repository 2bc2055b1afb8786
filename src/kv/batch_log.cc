// The key-value store's batch log: layout and visit (kv/batch_log.h).
#include "kv/batch_log.h"

#include <cstdio>
#include <cstring>

#include "util/crc32c.h"
#include "wort/kv.h"
#include "wort/pm.h"

namespace wort::kv {

std::string BatchLogRootName(std::string_view store) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "kvbatch.%016llx", static_cast<unsigned long long>(Crc64(store.data(), store.size())));
  return buf;
}

Status ReadRecord(const Pool& pool, uint64_t rec, const std::function<void(const RecordEntry&)>& fn) {
  if (rec < pool.heap_offset() || !pool.contains(rec, kRecordHeader))
    return Status::Corruption("batch record offset " + std::to_string(rec) + " lies outside the pool's heap");
  const uint64_t* h = pool.at<uint64_t>(rec);
  const uint64_t n = pm::load8(&h[1]), bytes = pm::load8(&h[2]), crc = pm::load8(&h[3]);
  if (pm::load8(&h[0]) != kRecordMagic || bytes % 8 != 0 || !pool.contains(rec + kRecordHeader, bytes) ||
      n > kMaxBatchOps || n * kEntryHeader > bytes)
    return Status::Corruption("the block at " + std::to_string(rec) + " is not a batch record");
  const char* e = pool.at<char>(rec + kRecordHeader);
  if (Crc64(e, bytes) != crc) return Status::Corruption("batch record at " + std::to_string(rec) + ": checksum mismatch");
  // Walk twice: first check every entry's bounds, then call fn (never a partial walk).
  for (int pass = 0; pass < 2; ++pass) {
    uint64_t pos = 0;
    for (uint64_t i = 0; i < n; ++i) {
      if (bytes - pos < kEntryHeader) return Status::Corruption("batch record: entries overrun");
      uint64_t off;
      uint32_t klen;
      std::memcpy(&off, e + pos, 8);
      std::memcpy(&klen, e + pos + 8, 4);
      const uint64_t len = kEntryHeader + (klen + 7) / 8 * 8;
      if (klen > kMaxKeyLen || bytes - pos < len) return Status::Corruption("batch record: entries overrun");
      if (pass == 1) fn(RecordEntry{off, std::string_view(e + pos + kEntryHeader, klen)});
      pos += len;
    }
  }
  return Status::OK();
}

void VisitBatchLog(const Pool& pool, uint64_t head_off, const std::function<void(uint64_t)>& mark) {
  mark(head_off);
  if (head_off < pool.heap_offset() || !pool.contains(head_off, kHeadSize)) return;
  const uint64_t* h = pool.at<uint64_t>(head_off);
  if (pm::load8(&h[0]) != kHeadMagic) return;
  const uint64_t rec = pm::load8(&h[1]);
  if (rec == 0) return;
  // A record that is not whole is not marked (nor are its blocks): it cannot be a committed
  // one (the invariant above), and the store's open reports it.
  if (ReadRecord(pool, rec, [&](const RecordEntry& e) {
        if (e.value_off != 0) mark(e.value_off);
      }).ok())
    mark(rec);
}

}  // namespace wort::kv
