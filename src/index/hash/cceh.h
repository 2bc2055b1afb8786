// index/hash/cceh.h - CCEH, cacheline-conscious extendible hashing (thesis section 4.4), and
// CCEH(C), its copy-on-write split variant with lock-free search (section 4.4.6).
//
// Design
// ------
// Three levels: a *directory* of 2^G entries (G = global depth), indexed by the G most
// significant bits of the key's hash (MSB segment index, 4.4.4); *segments* of 2^B cache-line
// *buckets*, indexed by the B least significant bits (B = 8: 16 KiB segments as in the thesis'
// experiments); buckets of four 16-byte slots (key word, value). A record lives in one of the
// kProbeBuckets = 4 buckets starting at its home bucket (linear probing bounded to four cache
// lines, 4.4.2), so a lookup reads one directory entry and at most four adjacent cache lines.
//
// A directory entry is one 8-byte word: the segment's offset (64-byte aligned) | its local depth
// L (low 6 bits), so a pointer and its depth change together with one store. A segment of local
// depth L is referenced by the 2^(G-L) adjacent entries whose indexes share its L-bit *pattern*.
//
// Lazy deletion (4.4.3, "cceh" only). A segment split copies the records whose next hash bit is
// 1 to a new segment and leaves them in place in the old one. A record in a segment is *valid*
// iff the top L bits of its hash equal the segment's pattern (L = the depth in the directory);
// the copies left behind are invalid from the moment the directory says L+1, and later inserts
// overwrite them. HashHi (hash_common.h) gives the top bits without reading key blocks, so an
// invalid copy's key block (possibly freed) is never dereferenced. Lookups need no validity test:
// a slot whose word matches the probe's key has the probe's hash, hence the pattern of the
// segment the probe was routed to. For byte-string keys the key word holds 24 hash bits, so
// local depths are capped at 24 (16M segments); for kU64 tables at 48.
//
// Invariants after any crash, once Open has run the directory recovery (Check() verifies them)
//   C1. root.table references a directory block of 2^G entries (G = its depth word), complete
//       and persistent; every entry's segment lies in the pool and its depth is <= G.
//   C2. Buddy tree: the entries form aligned runs; the run of a segment with depth L starts at
//       a multiple of 2^(G-L), has exactly 2^(G-L) entries, all equal; no segment has two runs.
//   C3. Every valid record of a segment lies in one of the 4 buckets from its home bucket, and
//       no key has two valid records. CCEH(C): every non-empty slot is valid (no stale copies).
//   C4. A valid record's key word is well formed (kBytes: its key block is in the pool with the
//       right hash and a length of 8..kMaxKeyLen). kU64: no record has the word 0.
//   C5. Size() equals the number of valid records plus the zero slot.
//
// Persistent writes, in order (write -> persist -> publish -> persist)
//   Insert into a free slot: [kBytes, >= 8 bytes: write the key block; persist it]; store the
//       value; COMMIT: store8 the key word; persist the slot's line (value and key word share it,
//       the value stored first: one flush per insert, as published).
//   Upsert of a present key: COMMIT: store8 the value; persist. (Under the segment's lock but not
//       its version word, h72: a lock-free lookup may return the new value while its persist is
//       in flight, as wort's and woart's version-free lookups may; the upsert returns after it.)
//   Remove: COMMIT: store8 the key word := 0; persist; then free the key block (CCEH(C): after a
//       grace period of the lock-free readers).
//   Segment split of S (depth L, pattern p) - failure-atomic without a log (4.4.2):
//     1. CCEH: allocate S'; copy the valid records of S whose bit L (from the top) is 1 into S'
//        at the same slot positions; persist all of S' (empty slots included: a new segment is
//        wholly initialized before it is reachable). CCEH(C): allocate S0 and S1, copy the valid
//        records into the one their bit L selects; persist both. S is not modified.
//     2a. L < G: in the directory, store the 2^(G-L-1) entries of the right half := (S' or S1,
//        L+1) from right to left, then the left half := (S or S0, L+1) from right to left; each
//        cache line of entries is persisted before an entry in the next line to its left is
//        stored. There is no single commit point: recovery completes the update (below).
//     2b. L = G: directory doubling by copy-on-write: a new directory of 2^(G+1) entries, each old
//        entry written twice, the split segment's pair set to the two halves; persist it;
//        COMMIT: store8 root.table := new directory; persist; free the old directory.
//     3. CCEH(C): after a grace period, free S.
//   Allocation failure (PoolFull) happens before any store to reachable memory; what the
//   operation allocated is freed and the table is unchanged.
//
// Directory recovery (Algorithm 4, run by Open on a writable pool; idempotent)
//   The directory is walked as a buddy tree from entry 0: an entry (S, L) at index i (a multiple
//   of 2^(G-L)) roots a run of 2^(G-L) entries. If they are not all equal, a split of S was cut
//   by the crash: its rightmost entry is (S', L+1) - the right half is written first, from the
//   right - and the leftmost entry still says (S, L) because it is the last one written. CCEH
//   completes the split (S' was persisted before the first entry store): right half := (S', L+1),
//   left half := (S, L+1), with the same right-to-left, line-by-line order. CCEH(C) completes it
//   too if the left half already names S0 (then frees S); otherwise it rolls back (every entry
//   := (S, L)) and frees S1. Each fix is itself crash-safe: a crash during it leaves one of the
//   states above. The thesis' Algorithm 4 also shrinks runs left by an interrupted merge; this
//   implementation never merges segments, so that case is reported as corruption.
//   Read-only pools are not repaired: every lookup is still correct in a cut state (an entry that
//   still says (S, L) finds S with all of its records valid).
//
// Concurrency (thesis 4.4.6: one segment is split while the others take inserts)
//   A DRAM reader/writer lock per segment (striped: 1024 locks hashed by segment offset), a
//   version word for the directory (dir_ver) and a directory writers' lock (dir_lock). A writer
//   reads dir_ver (waiting while it is held), the directory entry, takes the segment lock
//   exclusively, then re-checks dir_ver: unchanged, the entry still routes here and cannot
//   change while the segment lock is held (only a split of this segment rewrites it; a doubling
//   copies it); changed, it drops the lock and reads again. A split, holding its segment lock,
//   builds and persists the new segment(s), then takes dir_lock (directory writers one at a
//   time) and holds dir_ver only while it stores and persists the entries (2a) or the new
//   directory pointer (2b): a doubling allocates, fills and persists the new directory without
//   it, so inserts into every other segment go on under the old directory meanwhile. Since no
//   writer uses an entry read while dir_ver was held, every entry a writer acts on was
//   persistent when read: an insert is never made into a segment that a crash could unlink.
//   Nobody waits for a lock while holding dir_lock, and dir_lock is taken only by a holder of
//   a segment lock, so there is no deadlock. An insert stores to: its segment's stripe (lock,
//   version, size delta: one cache line), the slot, its thread's epoch slot and allocator cache
//   (a key block); nothing shared with writers of other segments. CCEH readers are optimistic
//   (src/sync/sync.h): each stripe's version word (same cache line) is held by a writer while it
//   changes the segment other than by a value word: an insert or a remove (a slot's key word), a
//   split. An update of a present key holds the segment lock exclusively (writers of the segment
//   one at a time; a split waits for it and it for a split) but not the version word (h72): it
//   stores one 8-byte word, so a lookup reading that slot reads the old or the new value and
//   need not restart (before, every lookup of the segment restarted while an update persisted,
//   and after 16 restarts waited for the segment lock: for the whole time slice of an updater
//   preempted inside its update). A lookup reads dir_ver, the entry, the stripe version,
//   re-checks dir_ver (the entry still routes here), reads the probe window, and re-checks the
//   stripe version (no writer changed the segment: lazy deletion lets writers overwrite invalid
//   copies in place, so an unvalidated read could miss a migrated record); any failed check
//   restarts it, and after 16 restarts it takes the segment lock shared (no starvation).
//   CCEH(C) readers take no lock and validate nothing but their slot: they re-read the key
//   word after the value to detect a slot reused meanwhile (the weaker consistency the thesis
//   accepts). Both run inside an epoch of the pool's EpochManager (src/sync/epoch.h): old
//   directories, CCEH(C)'s split segments and removed key blocks are retired (Allocator::Retire),
//   freed only after every reader and writer that could hold them has left.
//
// Size. Not persisted (that would cost a flush per insert): the first Size() after Open counts
// the valid records under every segment lock; writers then keep a DRAM delta per stripe (on
// the stripe's line, under its lock), summed by Size().
//
// Visit (reachability contract R1) takes no lock (it runs inside an epoch): it reads the directory, visits every segment
// once (with the smallest depth any entry gives it, so a cut split is covered by the old,
// larger set of valid records) and reports the root, the directory, the segments, the key blocks
// and (values_are_blocks) the values of valid records; then it re-reads the directory and visits
// segments that appeared meanwhile, until none is new. A record that moves during the visit
// moves only by a split into a new segment, which the next pass reaches.
//
// Variants (IndexOptions::cceh_variant, else WORT_CCEH_VARIANT, read at create and kept in root
// param[1]; cceh only, the thesis's
// Figure 24 baselines; options of this kind, not copies):
//   msb  (default) the directory as above.
//   lsb  CCEH(LSB): the directory index is the top G hash bits *reversed* (so directory bit 0
//        is hash bit 63: indexing from the low end as LSB extendible hashing does, over the
//        bits the key word keeps). A segment of depth L, pattern p is named by the entries
//        rev(p) + k*2^L, k < 2^(G-L): spread across the directory, not adjacent. Its split
//        writes the odd k (the new segment) from the last to the first, then the even k, a line
//        persisted before the next line is stored (one flush per entry once 2^L*8 >= 64 bytes:
//        the split cost the thesis compares with MSB's); doubling copies the directory twice
//        over (entries k and k+2^G = old k) and sets the split pair rev(p), rev(p)+2^G.
//        Recovery and Check walk every entry: one with k = 0 starts a run (the same
//        cut-split analysis as MSB's, with the odd entries as the right half), the others must
//        equal their run's first entry.
//   exth EXTH(LSB): legacy extendible hashing over the lsb directory: a segment is one bucket
//        of the segment size (IndexOptions::cceh_segment_bytes: the bucket size), searched
//        whole from its first line (no home bucket, no probe window: window = every line), split
//        on overflow; the split packs the moved records from the new bucket's first slot (the
//        thesis: "sequentially stores rehashed records"; the whole new bucket is still persisted,
//        as every new segment). After the split's directory update (2a/2b) the records moved to the new
//        bucket are cleared from the old one (store8 0 per slot, its lines flushed, one fence):
//        they are invalid by the new depth already, so a crash before or during the clear
//        leaves the lazy-deletion state, which lookups and recovery handle as for CCEH.
//
// Knobs read at create: IndexOptions::hash_capacity, else WORT_HASH_CAPACITY (initial records,
// default 2048: the thesis' setup); IndexOptions::cceh_segment_bytes, else
// WORT_CCEH_SEGMENT_BYTES (default 16384; a power of two from 256 to 262144).
//
// Thread safety: all methods may be called from many threads.
#pragma once

#include <cstdint>

namespace wort::hash {

// Layout constants (shared with the tests).
inline constexpr unsigned kSlotsPerBucket = 4;
inline constexpr unsigned kProbeBuckets = 4;

struct CcehSlot {
  uint64_t key;    // key word (hash_common.h); 0 = empty
  uint64_t value;
};
struct alignas(64) CcehBucket {
  CcehSlot slot[kSlotsPerBucket];
};
static_assert(sizeof(CcehBucket) == 64 && alignof(CcehBucket) == 64);

// Directory block: a 64-byte head, then 2^depth entries. Written whole and persisted before
// root.table references it; afterwards entries change only by store8 (in-place split updates).
struct CcehDirectory {
  static constexpr uint64_t kMagic = 0x3130524948454343ull;  // "CCEHDIR01"
  uint64_t magic;
  uint64_t depth;  // global depth G
  uint64_t pad[6];
  uint64_t* entries() { return reinterpret_cast<uint64_t*>(this + 1); }
  const uint64_t* entries() const { return reinterpret_cast<const uint64_t*>(this + 1); }
  static uint64_t Bytes(unsigned g) { return sizeof(CcehDirectory) + (8ull << g); }
};
static_assert(sizeof(CcehDirectory) == 64);

// Directory entry: segment offset | local depth.
inline uint64_t EntrySegment(uint64_t e) { return e & ~uint64_t(63); }
inline unsigned EntryDepth(uint64_t e) { return static_cast<unsigned>(e & 63); }
inline uint64_t MakeEntry(uint64_t seg, unsigned depth) { return seg | depth; }

}  // namespace wort::hash
