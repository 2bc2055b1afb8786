// src/remote/canrt_layout.h - CANRT's persistent layout (Ying et al., "CANRT: a client-active
// NVM-based radix tree for fast remote access", sections 3.1-3.6), shared by the server
// (canrt_server.cc) and the client (canrt_client.cc), which reads it through the transport.
//
// The region
// ----------
// CANRT lives in ONE block of a wort pool; the block is the region the transport exposes, so
// every reference below is an offset from the block's start (region offset 0 = the header).
//   [0, 4096)            RootHeader: geometry (written once, at creation) and two mutable words
//   [4096, 4096 + kPostBytes)  post segments, one per client-table slot (issue 32, h49; pools
//                        created before have none: area_off[0] == 4096, and use the shared post
//                        ring in the header - HasPostSegments)
//   [area_off[0], +area_bytes)  prefix area 0  } tick-tock: one holds the valid tree, the other
//   [area_off[1], +area_bytes)  prefix area 1  } is the shadow a resize builds (section 3.5)
//   [data_off, +max_nodes*node_bytes)  data nodes, located arithmetically by id
//
// Prefix nodes (section 3.1/3.2): an array of fixed-size nodes addressed by id (node = area +
// 64 + id * PrefixNodeBytes(m)); no pointers, only ids. A node examines one symbol position
// `pos` of the key and holds nChars sorted boundary symbols (chars) and one entry per symbol:
// the id of a data node (kLeaf bit set) or of a child prefix node. Symbols: key byte j is symbol
// byte+1; a key shorter than j+1 bytes has symbol 0 there (so "a" < "a\0" < "a\x01", as byte
// strings compare). Entry p covers the symbols [chars[p], chars[p+1]) (entry 0 from the node's
// lower bound: chars[0] is ignored), so every key reaches exactly one data node, and a child
// examines the same position again when its parent's entry covers several symbols (it refines
// the range) or the next position when the entry is one symbol: the map from keys to data nodes
// is monotone - data nodes in the order of a depth-first walk hold increasing key ranges, which
// gives ordered scans over consecutive data nodes (section 4.4), and each data node is named by
// one run of consecutive entries of one prefix node.
// Deviation from the paper: its prefix levels are complete (level i holds m^(i-1) nodes, located
// by equations 1-3 without stored child ids). That costs m^k nodes for height k, and keys with a
// long shared prefix (the benchmark's "key%013d": 11 shared bytes) need k >= 12; here a chain of
// one-entry nodes costs one node per shared byte. The client still locates a data node by
// arithmetic on ids in its copy of the array; the array is still re-sent on reorganisation.
//
// Data nodes (section 3.1): a 64-byte header line whose first word is the metadata, then
// `capacity` unsorted 64-byte DataItems.
//   metadata word (word 0): bits 0..30 valid-slot bitmap (capacity <= 31), bit 31 RETIRED (the
//   node was split by a resize; its items live on in two new nodes), bits 32..63 zero (layout
//   version 1 kept the lock there, see below). Persistent; changed by the server only.
//   Lock word (word 2, layout version 2 - issue 32, h53): bits 0..30 the PENDING slots (items
//   durable and waiting for their apply), bit 31 RETIRED again (for writers), bits 32..63 the lock
//   field. Volatile: recovery zeroes it (Migrate zeroes a new or reused node's).
//   Protocol of a write (client, canrt_client.cc Write):
//     1. FetchAdd64(word 2, +kLockOne) -> old. RETIRED: refresh the prefix copy. Lock field of
//        old != 0: held by another writer - undo (FetchAdd64(word 2, -kLockOne)), back off,
//        retry. Else this client holds the lock, and P = old & bitmap mask is the pending set
//        AT THE INSTANT it got the lock (one atomic: no window between lock and pending read).
//     2. One Read from word 0: the bitmap B (8 bytes), or - when P != 0 - the header line and
//        the slots up to P's highest one, to learn whether a pending item holds this key.
//     3. A free slot s: in neither B nor P. Key pending, or no free slot while applying P would
//        free one (a pending delete, or a pending put of a key B holds; one Read of the node):
//        undo the lock (step 1's FetchAdd64 back), wake a sleeping server, retry (the latter 64
//        times at most). Else no free slot: the resize request (h57: also with P != 0 - the
//        server applies P itself first; then it releases the lock - FetchAdd64(-kLockOne) - when
//        the node is no longer full or cannot be split, or retires the node with the lock held).
//     4. Write item, Persist item (durable: the Put may be acknowledged from here).
//     5. FetchAdd64(word 2, (1 << s) - kLockOne): the slot becomes pending and the lock is
//        released in ONE atomic (bit s is 0 in the word: only a lock holder sets pending bits, and
//        step 3 chose s outside P; adding it is an OR).
//     6. One post per node (h64): only if the release's fetch-add found the pending set EMPTY
//        (old & mask == 0: this item opens the node's batch), post (node, s) into this client's
//        post segment and Read `wake` (below). A release that found items pending posts nothing:
//        the batch's post is out, and its apply takes this item too. The server's apply of a
//        post (ApplyNode) applies every slot of the node's pending set and reads the lock word
//        again, until it reads the set empty.
//        Why each pending item b gets applied: the pending set changes only by atomic
//        read-modify-writes of this one word (releases add bits, applies' compare-swaps clear
//        them; recovery's zeroing happens with no server running) and is read by the applies'
//        loads. Let R be b's release and R0 the last change at or before R that took the set
//        from empty to non-empty - a release (only releases add bits) that found it empty, whose
//        writer posts after it. From R0 to R the set is never empty, and after R it stays
//        non-empty until b is cleared, i.e. applied. The apply that takes R0's post loads the
//        word after R0 and stops only on a load that finds the set empty - so not before b is
//        applied, by it or by another apply (a resize, another post, a sweep): b is applied.
//        (Stale bits - a release on a word that recovery zeroed, for an item recovery applied -
//        are batched the same way; ApplyLocked clears them: ClearStalePending.)
//        The hole, and the rule that closes it: R0's post may never come - its writer died (or
//        lost its connection) between R0 and its post, or a client of the previous run posted
//        between the restarted server's recovery and its zeroing of the post segments. Then the
//        batch has no post, and every later release into it skips its post too. Such items are
//        durable and visible (readers count pending items); what must not happen is a writer
//        waiting for their apply for ever. So: (a) a writer that waits for an apply in its node
//        (its key pending, or the node full of items whose apply frees a slot: step 3) notifies
//        the server at its 9th wait in a row (and 16, 32, 64, ... waits after: h66) whatever `wake` says,
//        naming the node (kWaitSlot), and the server applies that node's pending set - the writer
//        waits for a server round trip, not for ever; (b) the apply thread's lease tick (every
//        lease/4, or 1 s without leases) sweeps the lock words of every data node in use and
//        applies each non-empty pending set (Service::Sweep): an orphaned batch is applied within
//        one tick even if no one writes its node again; (c) recovery applies every durable item
//        and zeroes every lock word and post segment: no batch outlives a restart.
//   A put is thus FetchAdd, Read, Write, Persist, FetchAdd, and - only when it opens its node's
//   batch - CompareSwap (post), Read (wake): 2 (3 with pending items) fewer one-sided operations
//   than version 1's (separate pending and bitmap Reads and a Read of the pending items, a
//   pending fetch-add and an unlock compare-swap on another word, retried whenever an apply had
//   changed that word), and 2 fewer again for a put into an open batch (h64).
//   The lock field counts holders plus writers between a failed attempt and its undo: it is 0
//   exactly when no one holds the lock and no failed attempt is outstanding, and a holder's +1
//   stays until its own step 5 (or the server's release of a refused resize), so two writers
//   never hold it at once. (Version 1: waiters' attempts accumulated and the holder reset the
//   field with a compare-swap. Here a client killed between a failed attempt and its undo leaves
//   the node locked until the server restarts - as a client killed while it holds the lock did
//   and does; doc/remote.md.)
//   Why no slot is taken twice: pending bits are set only by lock holders (step 5), so P, read
//   at lock time, is a superset of the pending set for as long as the lock is held; the server's
//   apply of a pending slot sets its bitmap bit BEFORE it clears its pending bit, so a slot in
//   P that is applied before step 2's Read is in B; a slot in neither P (at lock time) nor B (read
//   after) is free: not pending, not applied. (Version 1 read the pending word with a separate
//   Read after the lock: an apply between the two left a slot in neither - the h49 race.) The
//   bitmap loses bits only to applies of pending items (the key's older slot freed) - free for
//   real. Why at most one unapplied valid item per KEY: as before (step 3 waits while a pending
//   item holds the key; the apply clears the pending bit last, after its valid-byte clear is
//   persistent).
//   Since h49 the lock covers only the choice of a slot and the item's Write and Persist, not
//   the server's apply: several items of one node may wait for their apply at once.
//   The pending set (bits 0..30 of word 2): the slots whose items are durable and wait for
//   their apply. The lock holder adds its slot's bit with the release (step 5); the server
//   clears it (compare-swap) as the LAST step of the apply, after the item's valid byte clear is
//   persistent. A lock holder takes a slot that is in neither the bitmap nor the pending set,
//   and never writes key K while a pending slot holds K (it releases the lock and waits for that
//   apply): so at most one item PER KEY of a node is ever persistent with valid = 1 and
//   unapplied, and recovery, which applies all of them, never has to order two items of one key.
//   Header word 1: the apply counter, volatile (never persisted; any value after a restart): the
//   server adds one before each apply changes the bitmap. A reader compares the metadata word's
//   bitmap and this counter read before and after its node Read (ReadNode in canrt_client.cc):
//   equal bitmaps alone could be an ABA (an apply that frees slot a, and the next that uses a
//   again, between the reader's reads of the header and of slot a).
//   DataItem: [0] op (1 put, 2 delete), [1] key length, [2] value length, [3] 0,
//   [4..8) crc32c of bytes [0,4) and key and value, [8..32) key (<= 24 bytes), [32..63) value
//   (<= 31 bytes), [63] valid (1: written by a client, not yet processed by the server).
//   (No result byte: a client learns a delete's outcome by reading the node under its lock
//   before writing, and byte 62 is the value's last byte when the value has 31 bytes. Until
//   issue 32's follow-up a kItemResult = 62 was declared and never used.)
//   A slot that leaves the live set (bit cleared, or an applied delete item) has op byte 0
//   ("scrubbed", canrt.h): never an item, alone or mixed with a later item's words.
//
// Header mutable words (their own cache line of the header):
//   state        generation << 2 | pxflag << 1 | dtflag. The valid tree is area (generation & 1).
//                Both flags set: no resize in progress. A resize stores (gen, px=1, dt=0) when the
//                shadow prefix nodes are persistent, and commits with one store of (gen+1, 1, 1):
//                "marking the dtflag transforms the shadow tree into the new valid tree" (section
//                3.6). (gen, 0, 0) - a resize started, prefix nodes not complete - is written by
//                no one: recovery would drop that resize, as it drops one that left no trace.
//   resize_node  the data node being split (persisted before state says a resize started).
//   resize log   kLogEntries LogEntry lines from header offset kLogOff (issue 32, "incremental
//                client refresh"): the entry of generation g (slot g % kLogEntries) names the prefix
//                nodes the resize that committed g wrote (runs of ids; the area header always
//                changes too), or says "full" (too many runs, or written by recovery). Written
//                before the commit's store of `state` (release stores), never persisted: only live
//                clients read it, and a client that finds a gap of kLogEntries or more, an entry
//                whose tag is not the generation it expects, or a "full" entry re-reads the whole
//                area. Valid only together with a re-read of `state` that still says the same
//                generation (the entry of g + kLogEntries reuses the slot; the entries a client
//                uses are at most kLogEntries - 1 behind, so the next resize's entry, written before
//                its commit, is never one of them).
//   client table kMaxClients words from kClientsOff: a connected client's slot holds 1 + the
//                generation of the oldest copy of the prefix nodes it may still use (0: free).
//                A client claims a slot with a compare-swap 0 -> 1 before it first reads `state`,
//                compare-swaps in 1 + its copy's generation after every refresh, and frees the slot when it
//                disconnects. The server reuses a retired data node only when every claimed slot
//                says a generation at or after the one whose tree stopped naming the node (no
//                client's copy can name it then: "Reuse of retired data nodes", canrt.h). Not
//                persisted; kept across restarts (a client of the previous run that still maps the
//                region keeps its protection; a client that died without disconnecting holds
//                reuse back until its lease expires - see below and doc/remote.md).
//                Slot word (issue 32, leases): bits 0..39 hold 1 + the generation, bits 40..63 a
//                heartbeat the client bumps to renew its lease (SlotWord). A client renews (one
//                compare-swap of its own word, a new heartbeat) when an operation starts more than
//                lease/4 after its last renewal, and owns the slot only while its compare-swaps
//                of it succeed. The server samples the table at least every lease/4 while its
//                apply thread runs (and at every resize); a word that kept one value for a whole
//                lease (server clock: no renewal since before the first of those samples) has
//                expired: the server frees it with a compare-swap to 0, and its generation no
//                longer holds reuse back. A client whose renewal finds its word changed lost
//                the slot: it claims one again (generation 0), re-reads the whole prefix area and
//                announces - before it uses its copy again. Assumption (stated in doc/remote.md):
//                no client operation is paused for longer than 3/4 of the lease between its
//                lease check and its last access to the region. The lease (ms; 0: never expires)
//                is in the wake line's word `lease_ms`, written by the server at open.
//   wake line    (kWakeOff, issue 32, "no wake-up per item") the word `wake`: bit 63 the
//                server's apply thread is asleep, bit 62 deeply (it waits for a notification),
//                bits 0..61 a count of items posted. Then `lease_ms`. Volatile, never persisted.
//   post ring    kRingEntries words from kRingOff (pools without post segments only): a client
//                that made its item durable posts (node + 1) << 32 | slot into a free word
//                (compare-swap 0 -> it), then READS `wake` (since h49 no client stores to it): if
//                it says "deeply asleep", or "asleep" and this client's post count ends a batch
//                of kWakeBatch, it notifies the server (one wake-up per batch, not per item); the
//                apply thread takes entries with a compare-swap back to 0. No free word after a
//                few probes: the client notifies the item itself (the old path). Volatile:
//                recovery applies every durable item anyway, and clears the ring.
//   post segments (h49; pools that have them, HasPostSegments): the same protocol, but client
//                table slot i posts only into segment i (kPostWords words at kPostOff +
//                i * kPostSegBytes, lines of its own): no line is stored to by two clients' puts.
//                The apply thread scans the segments of the slots it has seen claimed (and all
//                of them on every notification and every lease tick: a client whose slot was
//                freed meanwhile may still post into its old segment).
//                Dekker order: a client's post (compare-swap) precedes its read of `wake`, the
//                server's store of the sleep bits (an add) precedes its last scan, each followed
//                by a seq_cst fence: either the client sees the bits, or the scan sees the post.
// Area header (first 64 bytes of an area): height (deepest prefix node), fan-out m, data nodes
// in use (ndata), prefix nodes in use; then the prefix nodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace wort::canrt {

inline constexpr uint64_t kMagic = 0x31764e52544e4143ull;  // "CANRTNv1"
// Layout version 2 (h53): the lock field moved from the metadata word to the pending word (word
// 2). A pool of version 1 is refused with a clear error (Service::Open, the client's Init): its
// clients lock word 0.
inline constexpr uint32_t kVersion = 2;
inline constexpr size_t kItemBytes = 64;
inline constexpr size_t kMaxKey = 24;    // bytes; a longer key is InvalidArgument
inline constexpr size_t kMaxValue = 31;  // bytes; a longer value is InvalidArgument
inline constexpr uint32_t kMaxCapacity = 31;
inline constexpr uint32_t kLeaf = 1u << 31;  // prefix entry names a data node
inline constexpr uint64_t kHeaderBytes = 4096;
inline constexpr uint64_t kAreaHeaderBytes = 64;

inline constexpr uint64_t kBitmapMask = 0x7fffffffull;
inline constexpr uint64_t kRetired = 1ull << 31;
inline constexpr uint64_t kLockOne = 1ull << 32;
inline constexpr uint64_t kLockMask = ~0ull << 32;
inline uint32_t LockOf(uint64_t meta) { return static_cast<uint32_t>(meta >> 32); }

enum Op : uint8_t { kOpPut = 1, kOpDelete = 2 };
inline constexpr size_t kItemOp = 0, kItemKeyLen = 1, kItemValLen = 2, kItemCrc = 4, kItemKey = 8,
                        kItemValue = 32, kItemValid = 63, kItemTailWord = 56;

// Notify message: node id and slot (kResizeSlot: "node full, please resize").
struct Message {
  uint32_t node;
  uint32_t slot;
};
inline constexpr uint32_t kResizeSlot = 0xffffffffu;
inline constexpr uint32_t kKickSlot = 0xfffffffeu;  // "items are posted: wake up" (node: a hint)
inline constexpr uint32_t kWaitSlot = 0xfffffffdu;  // "a writer waits for an apply in this node"

struct RootHeader {
  // line 0: geometry, written once before the root is published
  uint64_t magic;
  uint32_t version;
  uint32_t capacity;    // items per data node (N)
  uint32_t fanout;      // m: symbols per prefix node
  uint32_t max_prefix;  // prefix nodes an area holds
  uint64_t node_bytes;  // 64 + N * 64
  uint64_t max_nodes;   // data nodes the data area holds
  uint64_t area_bytes;  // bytes of each prefix area
  uint64_t area_off[2];
  uint64_t data_off;
  // the next line: mutable
  alignas(64) uint64_t state;
  uint64_t resize_node;
};
static_assert(sizeof(RootHeader) <= kHeaderBytes);
static_assert(offsetof(RootHeader, state) % 64 == 0);  // its own cache line

inline constexpr uint64_t kLogOff = 192;  // the line after `state` and `resize_node`
inline constexpr uint32_t kLogEntries = 16;
inline constexpr uint32_t kLogRuns = 6;
struct LogEntry {
  uint64_t gen;   // the generation this resize committed (0: empty slot)
  uint32_t nruns; // runs of changed prefix nodes below
  uint32_t full;  // 1: the change is not described: re-read the whole area
  uint32_t first[kLogRuns];
  uint32_t count[kLogRuns];
};
static_assert(sizeof(LogEntry) == 64);
static_assert(kLogOff >= offsetof(RootHeader, resize_node) + 8 && kLogOff % 64 == 0);
static_assert(kLogOff + kLogEntries * sizeof(LogEntry) <= kHeaderBytes);

inline constexpr uint64_t kClientsOff = 1280;
inline constexpr uint32_t kMaxClients = 256;
static_assert(kClientsOff >= kLogOff + kLogEntries * sizeof(LogEntry) && kClientsOff % 64 == 0);
static_assert(kClientsOff + kMaxClients * 8 <= kHeaderBytes);

inline constexpr uint64_t kSlotGenMask = (1ull << 40) - 1;
inline constexpr uint64_t kSlotBeatOne = 1ull << 40;
inline uint64_t SlotWord(uint64_t gen, uint64_t beat) { return ((gen + 1) & kSlotGenMask) | beat * kSlotBeatOne; }
inline uint64_t SlotGen(uint64_t v) { return (v & kSlotGenMask) - 1; }  // v != 0

inline constexpr uint64_t kWakeOff = 3328;  // `wake`, then `lease_ms`
inline constexpr uint64_t kLeaseOff = kWakeOff + 8;
inline constexpr uint64_t kAsleep = 1ull << 63, kDeepAsleep = 1ull << 62, kPostCountMask = kDeepAsleep - 1;
inline constexpr uint64_t kRingOff = 3392;
inline constexpr uint32_t kRingEntries = 64;
inline constexpr uint32_t kWakeBatch = 8;
static_assert(kWakeOff >= kClientsOff + kMaxClients * 8 && kWakeOff % 64 == 0);
static_assert(kRingOff >= kLeaseOff + 8 && kRingOff % 64 == 0 && kRingOff + kRingEntries * 8 <= kHeaderBytes);
inline uint64_t RingEntry(uint32_t node, uint32_t slot) { return (uint64_t(node) + 1) << 32 | slot; }

// Per-client post segments (h49), after the header page: kPostWords words (kPostSegBytes) for
// each client-table slot. A pool has them when its first prefix area starts after them.
inline constexpr uint64_t kPostOff = kHeaderBytes;
inline constexpr uint32_t kPostWords = 64;
inline constexpr uint64_t kPostSegBytes = kPostWords * 8;
inline constexpr uint64_t kPostBytes = kMaxClients * kPostSegBytes;
static_assert(kPostSegBytes % 64 == 0);
inline bool HasPostSegments(const RootHeader& h) { return h.area_off[0] >= kHeaderBytes + kPostBytes; }

// The node header's lock word (h49: the pending word; h53: pending set, RETIRED and the lock
// field): byte offset in the data node.
inline constexpr uint64_t kPendingOff = 16;
inline constexpr uint64_t kLockWordOff = kPendingOff;

struct AreaHeader {
  uint32_t height;  // k
  uint32_t fanout;  // m
  uint64_t ndata;   // data nodes in use (ids 0..ndata-1; retired ones included)
  uint64_t nprefix; // prefix nodes in use (levels 1..k)
};
static_assert(sizeof(AreaHeader) <= kAreaHeaderBytes);

inline uint64_t StateWord(uint64_t gen, bool px, bool dt) { return gen << 2 | uint64_t(px) << 1 | uint64_t(dt); }
inline uint64_t GenOf(uint64_t state) { return state >> 2; }

// Prefix node layout for fan-out m: u8 pos, u8 0, u16 nchars, u16 chars[m], u32 entries[m].
inline size_t IdsOffset(uint32_t m) { return (4 + 2 * size_t(m) + 3) & ~size_t(3); }
inline size_t PrefixNodeBytes(uint32_t m) { return (IdsOffset(m) + 4 * size_t(m) + 7) & ~size_t(7); }

inline uint16_t Symbol(std::string_view key, uint32_t pos) {
  return pos < key.size() ? static_cast<uint16_t>(static_cast<uint8_t>(key[pos]) + 1) : 0;
}
inline constexpr uint32_t kSymbolEnd = 257;  // one past the largest symbol

// Where a key's search ended: the prefix node, the entry, the entry's symbol range at the
// node's position, the node's depth (root 1).
struct Located {
  uint64_t node = 0;
  uint32_t pos = 0;
  uint32_t lo = 0, hi = kSymbolEnd;    // the entry's range
  uint32_t nlo = 0, nhi = kSymbolEnd;  // the node's range (at its position)
  uint32_t depth = 1;
  uint32_t data = 0;
};

// A read-only view of a prefix area (the server's mapping or a client's copy).
class PrefixView {
 public:
  PrefixView(const char* area) : a_(area) { std::memcpy(&h_, area, sizeof h_); }
  const AreaHeader& header() const { return h_; }
  const char* node(uint64_t id) const { return a_ + kAreaHeaderBytes + id * PrefixNodeBytes(h_.fanout); }
  uint32_t pos(uint64_t id) const { return static_cast<uint8_t>(node(id)[0]); }
  uint32_t nchars(uint64_t id) const {
    uint16_t n;
    std::memcpy(&n, node(id) + 2, 2);
    return n < h_.fanout ? n : h_.fanout;  // bounded: a damaged copy cannot read past the node
  }
  uint16_t chr(uint64_t id, uint32_t p) const {
    uint16_t c;
    std::memcpy(&c, node(id) + 4 + 2 * p, 2);
    return c;
  }
  uint32_t entry(uint64_t id, uint32_t p) const {
    uint32_t v;
    std::memcpy(&v, node(id) + IdsOffset(h_.fanout) + 4 * p, 4);
    return v;
  }
  // Position of `sym` in node `id`: the last entry whose lower bound is <= sym.
  uint32_t Position(uint64_t id, uint16_t sym) const {
    const uint32_t n = nchars(id);
    uint32_t p = 0;
    while (p + 1 < n && chr(id, p + 1) <= sym) ++p;
    return p;
  }
  // The data node of `key` (section 3.2). Bounded by the number of prefix nodes (a corrupt
  // copy cannot loop): returns UINT32_MAX then.
  uint32_t Locate(std::string_view key, Located* where = nullptr) const {
    Located l;
    for (uint64_t steps = 0; steps <= h_.nprefix && l.node < h_.nprefix; ++steps) {
      const uint32_t q = pos(l.node);
      if (q != l.pos) l.lo = 0, l.hi = kSymbolEnd, l.pos = q;
      l.nlo = l.lo;
      l.nhi = l.hi;
      const uint32_t p = Position(l.node, Symbol(key, q));
      const uint32_t n = nchars(l.node);
      if (p > 0) l.lo = chr(l.node, p);
      if (p + 1 < n) l.hi = chr(l.node, p + 1);
      const uint32_t e = entry(l.node, p);
      if (e & kLeaf) {
        l.data = e & ~kLeaf;
        if (where) *where = l;
        return l.data;
      }
      l.node = e;
      ++l.depth;
    }
    return UINT32_MAX;
  }
  // Calls fn(data node id) for every data node in key order (each once).
  template <class Fn>
  void ForEachInOrder(Fn&& fn) const {
    uint32_t last = UINT32_MAX;
    auto dedup = [&](uint32_t d) {
      if (d != last) fn(d);
      last = d;
    };
    Walk(0, 0, dedup);
  }

 private:
  template <class Fn>
  void Walk(uint64_t id, uint32_t depth, Fn& fn) const {
    if (id >= h_.nprefix || depth > h_.nprefix) return;
    const uint32_t n = nchars(id);
    for (uint32_t p = 0; p < n && p < h_.fanout; ++p) {
      const uint32_t e = entry(id, p);
      if (e & kLeaf) fn(e & ~kLeaf);
      else Walk(e, depth + 1, fn);
    }
  }
  const char* a_;
  AreaHeader h_;
};

uint32_t ItemCrc(const unsigned char* item);  // crc32c of bytes [0,4) and the key and value

}  // namespace wort::canrt
