// index/hash/static_hash.h - the persistent hash tables CCEH was measured against (thesis 4.4.7):
// LINP (linear probing), CUCK (cuckoo hashing), BCH (bucketized cuckoo hashing), LEVL (level
// hashing) and PATH (path hashing), each with full-table rehashing where the design has it.
//
// Common design
// -------------
// A table is a *table header* block (TableHeader) and one or two slot arrays; a slot is 16 bytes
// (key word, value; hash_common.h encodes the key word), four slots per cache line. The root
// block's `table` word references the header. Every record is committed by one store8 of its
// key word (value stored first, same line, one flush), removed by one store8 (0, or LINP's
// tombstone). A full-table rehash (or LEVL's resize) builds a new header and new arrays off to
// the side, places every record without flushing, persists the new arrays and header with one
// batch of flushes (the "lazy" synchronization the thesis describes for its CUCK), then COMMIT:
// store8 root.table := new header; persist; then frees the old blocks. A crash before the commit
// leaves the new blocks unreachable (post-crash GC reclaims them, contract R3).
//
// Displacement (CUCK, BCH, LEVL) moves a record r from slot S to slot D by: store8 D.key := 0,
// store D.value, store8 D.key := r's word, persist D's line (within one line the stores reach
// memory in order, so D shows empty, r, or its old content); only then is S overwritten by the
// next move (or the new record, the commit of the insert). A crash between the two leaves r in
// two slots with the same value: Open after an unclean shutdown removes the copy that is not the
// first in the record's candidate order (the *duplicate sweep*), before any operation.
//
//   LINP  one array of 2^k slots; probe from hash mod 2^k until an empty slot. Remove writes a
//         tombstone (kU64: word 1 - the key whose mixed value is 1 lives in the root's aux slot;
//         kBytes: word 2). Inserts reuse the first tombstone of their probe. Rehash (to twice the
//         size, or the same size when mostly tombstones) when slots used by records and
//         tombstones would exceed 95%.
//   CUCK  one array of 2^k slots, two hash functions (positions h1, h2). An insert into two
//         occupied positions walks a cuckoo path of at most 16 displacements (found first, then
//         executed from its end); if none exists, full-table rehash to twice the size.
//   BCH   as CUCK with buckets of 4 slots (one cache line).
//   LEVL  level hashing with cache-line buckets (as the thesis' modified LEVL): a top level of N
//         buckets and a bottom level of N/2; a key may live in top buckets t1 = h1 mod N,
//         t2 = h2 mod N or bottom buckets t1 mod N/2, t2 mod N/2. Insert: the less loaded top
//         bucket with room, else the bottom one, else move one record of t1/t2 to its other top
//         bucket, else one of the bottom buckets to its other bottom bucket, else resize: a new
//         top of 2N buckets receives the bottom level's records, the old top becomes the bottom
//         (committed by a new header; the old top stays in place, since t mod N is its index).
//   PATH  path hashing: an inverted binary tree of cells stored level by level (level 0 has N
//         cells, level l has N >> l), the bottom `levels` = min(8, log2 N + 1) levels kept (the
//         thesis' reserved level 8). A key may live on the two paths from leaves h1 mod N and
//         h2 mod N towards the root; insert takes the first empty cell bottom-up; full-table
//         rehash to twice the size when both paths are full.
//
// Invariants after any crash, once Open has run (Check() verifies them)
//   S1. root.table references a complete header whose arrays lie in the pool.
//   S2. Every record sits at one of its candidate positions (LINP: reachable from its home slot
//       without crossing an empty slot); no key has two records; tombstones only in LINP.
//   S3. Records' key words are well formed (see C4 in cceh.h); Size() = records + special slots.
//
// Thread safety: single-threaded designs behind one mutex per table (the thesis' concurrent runs
// used fine-grained locks; these baselines serialize every operation). Visit holds the table's
// mutex while it runs (a registry of open tables finds it), so it never sees a displacement or
// rehash in the middle.
//
// Size: counted on first need (LINP: the first insert, for its load factor) by a scan; then
// kept in DRAM.
#pragma once

#include <cstdint>

namespace wort::hash {

struct HSlot {
  uint64_t key;
  uint64_t value;
};
static_assert(sizeof(HSlot) == 16);

// Written whole and persisted before root.table references it; never modified afterwards.
struct TableHeader {
  static constexpr uint64_t kMagic = 0x3130424154485357ull;  // "WSHTAB01"
  uint64_t magic;
  uint32_t type_id;
  uint32_t levels;     // PATH: levels stored in array 0; others 1
  uint64_t slots[2];   // slots in array 0 / array 1 (0: absent)
  uint64_t array[2];   // offsets of the slot arrays
  uint64_t n;          // LINP/CUCK/PATH: cells (PATH: leaves); BCH/LEVL: buckets of the top array
  uint64_t pad;
};
static_assert(sizeof(TableHeader) == 64);

}  // namespace wort::hash
