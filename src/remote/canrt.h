// src/remote/canrt.h - CANRT, a client-active persistent radix tree for remote access by
// one-sided reads, writes and atomics (Ying et al.; paper 003 in /work/shared/papers, sections
// 3.1-3.6 and 4.4). The persistent layout, its invariants and the meaning of every word are in
// canrt_layout.h; this file is the server (Service) and client (Connect) API.
//
// Write (Algorithm 1, client side; the server's CPU is not on its critical path): locate the
// data node in the client's copy of the prefix nodes; FetchAdd64(1 << 32) on its LOCK word (word
// 2 of the node header since layout version 2, h53: lock field, pending set, RETIRED) takes the
// lock (lock field was 0) and returns the pending set of that instant - or counts a failed
// attempt, which the client undoes (FetchAdd64(-(1 << 32))) before it backs off and retries;
// then ONE Read gives the bitmap (and, when items are pending, the pending items: slots taken =
// applied | pending) - if one pending item holds the key, or the node is full and applying its
// pending items would free a slot (a delete, an update of a key the node holds: one Read of the
// node tells), the client gives the lock back, wakes a sleeping server (kWaitSlot) and retries
// (64 times at most for the latter, then it asks for a resize as below); a free slot is
// picked; the DataItem (key, value, op, valid = 1, crc) is written there with one Write and made
// durable by the transport (Connection::Persist: local - the client writes the line back through
// its own mapping; ucx - remote-completion flush + read-after-write, see transport.h for what
// that guarantees); ONE fetch-add adds the slot's pending bit and releases the lock (h49: the next
// write to this node, e.g. the next sequential key, does not wait
// for this item's apply); then - only if that fetch-add found the node's pending set empty
// (h64: one post per node; a write into an open batch posts nothing, and the apply of the
// batch's post re-reads the lock word until the set is empty) - it posts (node, slot) into its
// post segment (canrt_layout.h: a compare-swap into a free word of its own, then a read of
// `wake`; a notification only when that says the server sleeps and this post ends a batch, or
// sleeps deeply - no server wake-up per item) and returns: OK means acknowledged and durable (remote_kv.h), recovery applies
// every complete item whose valid byte is set. The server applies the item in the background.
// A full node (h57: also one whose pending items are new keys - sequential puts): Notify(node,
// RESIZE) while holding the lock, then retry once the node is retired (split) - or, when items
// were pending and their apply left the node not full, once the server gave the lock back - or
// PoolFull when the server cannot grow the tree. A post segment that is full waits up to 20 us
// for the apply thread to free a word, then notifies the item (h57: flow control). Remove
// first reads the node under the lock to return NotFound exactly.
// Visibility: a write is seen by every client (the writer included) from the moment its item is
// in the node (before Persist returns, so a reader may see a write whose Put has not returned,
// and which a crash before that Persist would lose); readers count a complete item with valid
// byte 1 and its bit clear as the node's newest version of its key (ReadNode), and re-read the
// metadata word and the node's apply counter after every node Read (a server's apply between the
// two would otherwise hide the write, also when a later apply restored the bitmap). Once a Put has returned, every Get and Scan that starts
// later sees it or a later write.
// Read (Algorithm 2): one Read of the whole data node, search of the slots whose bit is set
// (crc-checked: a slot reused during the read is re-read). Never blocks: a retired node is read
// as it is until the client sees the new generation.
//
// Server side (the service's apply thread, fed by the post segments and Service::OnNotify): a
// post names a node (h64), whose pending set is applied item by item (ApplyNode), the lock word
// re-read until the set is empty; a waiting writer's notification (kWaitSlot) and the lease
// tick's sweep apply a node's set too (a batch whose post never came: canrt_layout.h, step 6).
// For each item (node, slot):
//   1. persist the item (the client did already on local; kept for ucx targets)
//   2. put:    ONE 8-byte compare-swap of the metadata: bit(slot) set, bit of the key's older
//              version cleared, lock kept; persist.
//      delete: one compare-swap clearing the key's bit (lock kept); persist.
//      Before that compare-swap, the key's older slot is scrubbed (op byte := 0, its first word):
//      a freed slot's old item must never pass for an unapplied one when the next writer's item
//      Write overtakes a reader's Read of it (old first words + new valid byte: a stale read) or
//      a crash cuts that Write (recovery would apply the old item).
//   3. clear the item's valid byte (one 8-byte store of its last word; a delete item's op byte is
//      scrubbed too); persist, together with the scrubs of step 2.
//   4. compare-swap the slot's bit out of the lock word's pending set (not persisted: recovery
//      zeroes the lock word).
//      Last, so that no writer writes this key again, nor reuses a delete item's slot, before
//      this item's valid byte is persistently clear: at most one item PER KEY of a data node is
//      persistent with valid = 1 and unapplied. (Until h49 the node's lock was held until here:
//      at most one such item per node, and the next writer to the node waited for the apply.)
// Resize and acknowledged writes: a node is split only on its lock holder's request - sent when
// the node's bitmap and pending set fill it - and only once no item in it waits for its apply:
// since h57 Service::Resize first applies the node's pending items itself (under apply_mu_, which
// the apply thread holds for each of its applies, so each item is applied once; the apply thread
// then skips a post whose pending bit is clear), and ignores a request beside a valid item with
// no pending bit (a writer still writing it: a stray request). So an
// acknowledged item is always applied - and migrated - before its node is retired, and no client
// writes into a retired node (its fetch-add of the lock word returns RETIRED - set there and in the
// metadata word while the requester still holds the lock: it retries on the new generation).
// Post-crash invariants: a slot whose bit is set holds a complete, persistent item - except a
// slot freed by an apply's compare-swap that did not reach persistence: writers take a freed slot
// as soon as they see it, so the crash can leave its old bit over a newer put, a delete item, or
// a cut Write - complete but for its valid byte, or not (h71; recovery below sorts them out); at most one
// item per key of a data node is unprocessed (valid = 1, bit clear for a put) - several keys'
// items may be (h49) - locked or not (the lock word of the client's fetch-add and the pending
// word need not be persistent), so recovery applies them in any order; the valid tree's prefix
// area and data nodes are persistent; a resize is either not visible (state's generation
// unchanged) or complete.
//
// Resize (section 3.5, tick-tock): on a RESIZE request for a full node d (locked by the
// requester, so no write to d proceeds; reads of d go on; since h69 the request is posted into
// the requester's post segment when the apply thread is awake, which then splits d itself, and
// notified otherwise), the server copies the valid prefix area into the shadow (the whole area
// at the first resize after open; since h69 the ranges the previous resize changed are copied and
// persisted right after that resize's commit, off the next requester's path), splits
// d's key range there (addWidth: one or two more boundary symbols in d's last-level node - three
// new nodes where d's keys have three symbols or more there, h68 - or a split of a run of entries
// naming d; addHeight: one more level when d's node is full or d's keys share the symbol, the split
// going on until d's keys are in two new nodes or more: one resize per full node, h68), migrates
// d's items into the new data nodes (reused retired ones first),
// writes the resize log entry of gen+1, retires d (RETIRED bit, before the commit: a reader of d that sees it and still finds the old generation
// knows d's contents are current) and commits with one store of `state`. Persist order:
// resize_node; shadow prefix nodes; state(gen,1,0) = pxflag marked, dtflag not; new data nodes;
// state(gen+1,1,1) = dtflag marked and the switch of valid and shadow (RETIRED is not persisted:
// it matters to live clients only). The new data nodes are locked by the server from before the
// commit's store until after its persist (session 10): a client may see the store before it is
// durable, and an item it wrote into a new node then would be erased by the redone migration
// after a crash (Canrt.NoWriteIntoANewNodeIsAcknowledgedBeforeTheCommitIsDurable).
// Recovery (section 3.6): pxflag clear -> the resize is dropped
// (it is redone when a writer finds the node full again); pxflag set, dtflag clear -> the
// migration is redone from d (new nodes located in the shadow tree) and committed.
// Recovery also re-applies, in every data node of the valid tree (locked or not), the items whose
// valid byte is 1 and whose crc is right (a put whose bit is set, too: applied, or newer than the
// freed version under a stale bit - its key's other slots are cleared, session 10), clears every
// bit over a slot that holds no complete put (a stale bit under a delete item or a cut Write,
// h71) and every set bit but the first of a key under two (a cut Write of that key, all of it
// but the valid byte, under a stale bit: h71), clears every valid byte, scrubs every free slot
// (op byte 0) and resets every lock and pending word.
//
// Client refresh: a client whose copy of the prefix nodes is older than `state` brings it up to
// date from the resize log (canrt_layout.h: the prefix nodes each resize wrote, for the last 16
// generations) - the log entries, the area header and the changed nodes, then `state` again - or
// re-reads the whole area when the log does not cover the gap.
// Reuse of retired data nodes: a split takes its new node ids first from retired nodes that no
// connected client with an unexpired lease (canrt_layout.h, "client table") can name - retired at or before the oldest generation in the client
// table (canrt_layout.h), which a client claims before its first read of `state` and updates
// after each refresh - then fresh ones. Migrate zeroes a reused node before writing its items
// (since h69 only the words that are not zero, and it flushes only the lines it stored to);
// the free list is volatile (recovery: the nodes the valid tree does not name); a redone split's
// targets are the nodes the shadow tree names and the valid tree does not.
// Thread safety: the transport's notify thread only queues; written items (posted or notified)
// are processed on the service's apply thread (ApplyLoop: polls the ring while items arrive, then
// sleeps; canrt_server.cc) and resizes on its resize thread (so a resize delays only the writers of
// its node) - on the local backend (h57) on the notify thread itself, which saves the resize
// thread's wake-up - or both inline (Options::inline_resize). A client (RemoteKV from Connect) is used by
// one thread at a time; each client thread connects its own.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "index/kind_ids.h"
#include "remote/canrt_layout.h"
#include "remote/remote_kv.h"
#include "remote/reply_kv.h"
#include "remote/transport.h"
#include "wort/pool.h"
#include "wort/status.h"

namespace wort::canrt {

// Type id of a CANRT root in a pool's root table (kind_ids.h keeps the numbers).
inline constexpr uint32_t kRootType = kind_id::kCanrt;

struct Options {
  uint32_t capacity = 31;         // DataItems per data node (1..31); a read fetches 64 + 64*capacity bytes
  uint32_t fanout = 8;            // m: boundary symbols per prefix node (2..256)
  uint64_t max_nodes = 8192;      // data nodes the data area holds (split nodes included)
  uint64_t area_bytes = 4 << 20;  // bytes per prefix area (two areas); bounds the height k
  // Process writes and resizes on the notifying thread (tests, crash explorer: one thread sees
  // every persist) instead of the service's write and resize threads.
  bool inline_resize = false;
  // A client's lease on its client-table slot (canrt_layout.h, "client table"): a slot not
  // renewed for this long no longer holds the reuse of retired data nodes back. 0: never expires.
  uint32_t lease_ms = 4000;
  // Tests only: runs inside a resize between the commit's store to `state` and its persist.
  std::function<void()> commit_window_for_test;
};

struct ServiceStats {
  uint64_t writes = 0, resizes = 0, resizes_refused = 0, add_height = 0, recovered_items = 0;
  uint64_t generation = 0, height = 0, ndata = 0, nprefix = 0;
  uint64_t reused = 0;      // new data nodes of splits that were retired nodes, reused
  uint64_t free_nodes = 0;  // retired data nodes waiting for reuse
  uint64_t posted = 0;          // items the apply thread took from the post ring
  uint64_t kicks = 0;           // wake-up notifications received (batches, waiting writers)
  uint64_t leases_expired = 0;  // client slots freed because their lease expired
  uint64_t stale_pending = 0;   // pending bits of items applied already, cleared (a release after a restart)
  uint64_t resize_applied = 0;  // pending items a resize applied itself (h57: it does not wait for the apply thread)
  uint64_t skipped_posts = 0;   // posts (or notifications) that found their node's pending set empty (applied already,
                                // e.g. by a resize, an earlier round or a sweep): nothing to do (h64: one post per node)
  uint64_t node_applies = 0;    // applies of a node's pending set (one per post, wait notification or swept node, h64)
  uint64_t apply_rerounds = 0;  // items a node's apply found released during it (its re-read of the lock word, h64)
  uint64_t wait_applies = 0;    // items applied on a waiting writer's notification naming its node (h64)
  uint64_t swept = 0;           // items applied by the lease tick's sweep of every node's pending set (h64)
  uint64_t posted_resizes = 0;  // resize requests the apply thread took from a post segment (h69: no notification)
};

class Service {
 public:
  // Opens the CANRT root `name` of `pool`, creating it with `opts` when absent, and runs crash
  // recovery (section 3.6). The geometry of an existing root is its own (opts.inline_resize only).
  static Status Open(Pool& pool, std::string_view name, const Options& opts, std::unique_ptr<Service>* out);
  ~Service();

  // The region to expose (the CANRT block of the pool) and its offset in the pool file.
  char* region() const { return base_; }
  uint64_t region_size() const { return size_; }
  uint64_t region_pool_offset() const { return root_off_; }

  // The connection server-side compare-swaps go through (the transport server's ServerSide()).
  // Null: CPU atomics (only valid when every client uses CPU atomics too: in-process tests).
  void SetAtomics(remote::Connection* c);
  // The transport's notify handler.
  void OnNotify(uint32_t client, std::string_view msg);
  // Split nodes on the transport's notify thread (h57; StartServer sets it for the local
  // backend, whose server-side atomics need no progress of that thread): no wake-up of the
  // resize thread between a writer's request and the split.
  void ResizeOnNotifyThread(bool on) { resize_on_notify_ = on; }
  // True: every client's item is durable in this server's persistence domain when it is
  // released (the local backend: the client persists through its mapping with pm::persist), so
  // an apply does not write the item back again. False (default; ucx, tests' inline services):
  // the apply persists the item first (ApplyLocked step 1).
  void ItemsDurableByClients(bool on) { items_durable_by_clients_ = on; }
  // Waits until queued resizes are done (tests).
  void Drain();

  ServiceStats Stats() const;
  // Verifies the structure: every data node reachable, no key in two nodes, each key in the node
  // the prefix nodes name, crc of every live item. Appends findings to *report.
  Status Check(std::string* report) const;

 private:
  Service() = default;
  struct Changes;
  Status Recover();
  // Applies node's whole pending set, re-reading its lock word until it is empty (h64, one post
  // per node); at most max_rounds rounds (0: no limit). Returns the items applied; *left: the
  // set was still not empty when the rounds ran out (the caller queues the node again).
  size_t ApplyNode(uint32_t node, int max_rounds = 0, bool* left = nullptr);
  size_t ProcessWrite(uint32_t node, uint32_t slot);  // items applied
  static constexpr int kApplyRounds = 64;
  void ApplyLocked(uint32_t node, uint32_t slot);  // apply_mu_ held
  size_t Sweep();
  void Resize(uint32_t node);
  Status SplitInShadow(uint32_t node, char* shadow, Changes* ch);
  void Migrate(uint32_t node, const char* shadow, const std::vector<uint32_t>& targets);
  uint64_t OldestClientGeneration();
  // `if_due`: only when the last sample is lease/4 old or more (a resize's sample, h69).
  void ExpireLeases(bool if_due = false);
  uint64_t Cas(uint64_t* word, uint64_t (*f)(uint64_t, uint64_t), uint64_t arg);
  bool CasOnce(uint64_t* word, uint64_t expected, uint64_t desired);
  void AddWord(uint64_t* word, uint64_t add);
  size_t DrainRing(bool all = false);
  void ClearPending(uint32_t node, uint32_t slot);
  void ClearStalePending(uint32_t node, uint32_t slot);
  bool RingEmpty() const;
  void QueueLoop(std::deque<Message>* q, std::condition_variable* cv, bool* busy);
  void ApplyLoop();

  char* Node(uint64_t id) const { return base_ + hdr_->data_off + id * hdr_->node_bytes; }
  uint64_t* Meta(uint64_t id) const { return reinterpret_cast<uint64_t*>(Node(id)); }
  unsigned char* Item(uint64_t id, uint32_t s) const {
    return reinterpret_cast<unsigned char*>(Node(id) + 64 + uint64_t(s) * kItemBytes);
  }
  char* Area(uint64_t gen) const { return base_ + hdr_->area_off[gen & 1]; }

  Pool* pool_ = nullptr;
  uint64_t root_off_ = 0;
  char* base_ = nullptr;
  uint64_t size_ = 0;
  RootHeader* hdr_ = nullptr;
  Options opts_;
  remote::Connection* atomics_ = nullptr;
  std::mutex atomics_mu_;
  // One apply at a time (h57): the apply thread's (ProcessWrite) and a resize's of its node's
  // pending items - so each item is applied exactly once. Order: resize_mu_, then apply_mu_, then
  // atomics_mu_.
  std::mutex apply_mu_;

  // Resizes: one at a time, on resize_thread_ (or inline).
  std::mutex resize_mu_;
  bool shadow_full_sync_ = true;                            // after open: copy the whole area
  std::vector<std::pair<uint64_t, uint64_t>> shadow_diff_;  // ranges where shadow != valid
  // Retired data nodes: (id, the first generation whose tree does not name it). Volatile:
  // rebuilt at open from the nodes the valid tree does not name.
  std::vector<std::pair<uint32_t, uint64_t>> free_;
  std::mutex q_mu_;
  std::condition_variable q_cv_, q_done_;
  std::deque<Message> queue_;        // resize requests
  std::deque<Message> writes_q_;     // written items to process
  std::condition_variable w_cv_;
  bool busy_ = false, w_busy_ = false, stop_ = false, kicked_ = false, scan_all_ = false;
  // Post segments (h49; canrt_layout.h): whether the pool has them, and which client slots' segments
  // the apply thread scans (claimed, or freed with posts left; apply thread only).
  std::atomic<bool> resize_on_notify_{false};
  std::atomic<bool> items_durable_by_clients_{false};
  bool segments_ = false;
  std::vector<uint8_t> seg_seen_;
  // Lease samples of the client table (ExpireLeases): the value each slot had and the server
  // times it was first and last seen with it.
  struct LeaseSample {
    uint64_t value = 0;
    std::chrono::steady_clock::time_point first, last;
  };
  std::mutex lease_mu_;
  std::vector<LeaseSample> lease_;
  std::chrono::steady_clock::time_point last_sample_{};  // of ExpireLeases, under lease_mu_
  std::thread resize_thread_, write_thread_;

  std::atomic<uint64_t> writes_{0}, resizes_{0}, refused_{0}, add_height_{0}, recovered_{0}, reused_{0}, nfree_{0},
      posted_{0}, kicks_{0}, expired_{0}, stale_pending_{0}, resize_applied_{0}, skipped_posts_{0}, node_applies_{0},
      apply_rerounds_{0}, wait_applies_{0}, swept_{0}, posted_resizes_{0};
};

// A CANRT server: the Service and the transport that exposes it.
class Server {
 public:
  Service& service() { return *service_; }
  remote::RegionInfo info() const { return transport_->info(); }
  void Stop();
  ~Server() { Stop(); }

 private:
  friend Status StartServer(Pool&, std::string_view, std::string_view, const Options&, std::unique_ptr<Server>*);
  std::unique_ptr<Service> service_;
  std::unique_ptr<remote::Server> transport_;
};

// Opens (or creates) root `name` in `pool` and exposes it with transport `backend` ("local", "ucx").
Status StartServer(Pool& pool, std::string_view name, std::string_view backend, const Options& opts,
                   std::unique_ptr<Server>* out);

// `wort serve-remote --design canrt` (remote/designs.h): opens or creates the pool at opts.pool,
// root "canrt", and serves it over opts.backend.
Status Serve(const remote::ServeOptions& opts, std::unique_ptr<remote::RemoteService>* out);

// A client of a published CANRT region (RemoteKV "canrt"); one per client thread.
Status Connect(const remote::RegionInfo& info, std::unique_ptr<remote::RemoteKV>* out);
// The same over a connection the caller made (tests: another transport, a fake).
Status ConnectOver(std::unique_ptr<remote::Connection> conn, std::unique_ptr<remote::RemoteKV>* out);

// Client-side counters (operations per kind, retries) for the benchmark.
struct ClientStats {
  uint64_t lock_retries = 0, refreshes = 0, resize_requests = 0, reread = 0;
  uint64_t full_refreshes = 0;  // refreshes that read the whole prefix area (connect included)
  uint64_t refresh_bytes = 0;   // prefix-area bytes read by refreshes (full and from the log)
  uint64_t client_active = 0;    // writes acknowledged after the client's Persist (every write)
  uint64_t notify_failures = 0;  // durable writes the server could not be told of (it stopped)
  uint64_t posted = 0;           // writes posted into the region's ring (no notification of their own)
  uint64_t ring_full = 0;        // writes notified one by one because the ring had no free word
  uint64_t post_waits = 0;       // posts that waited for the apply thread to free a word of a full segment (h57)
  uint64_t kicks = 0;            // wake-up notifications sent (a batch's end, a deep sleep, a wait)
  uint64_t apply_waits = 0;      // writes that found their key's earlier item (or a node full of
                                 // items) waiting for its apply: unlocked, waited, retried (h49)
  uint64_t posts_skipped = 0;    // writes whose release found other items of the node pending: no post (h64,
                                 // the node's post is out already: one post per node)
  uint64_t lease_renewals = 0, lease_lost = 0;  // renewals; slots lost to an expired lease (rejoined)
  uint64_t resize_posts = 0;     // resize requests posted to the awake apply thread instead of notified (h69)
  uint64_t resize_takebacks = 0; // posted requests the thread had not taken after 30 us: taken back, notified (h69)
};
ClientStats GetClientStats(const remote::RemoteKV& kv);
// The client's copy of the prefix area (header and prefix nodes in use) and its generation
// (tests: compare with the server's valid area). False when kv is not a CANRT client.
bool GetClientPrefixCopy(const remote::RemoteKV& kv, uint64_t* generation, std::string* area);

}  // namespace wort::canrt
