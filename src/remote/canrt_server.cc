// CANRT's server side: creation, write processing, tick-tock resizing and crash recovery
// (design, persist order and post-crash invariants: canrt.h and canrt_layout.h).
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>

#include "index/registry.h"
#include "remote/canrt.h"
#include "util/crc32c.h"
#include "wort/alloc.h"
#include "wort/pm.h"

namespace wort::canrt {

uint32_t ItemCrc(const unsigned char* item) {
  const size_t kl = std::min<size_t>(item[kItemKeyLen], kMaxKey), vl = std::min<size_t>(item[kItemValLen], kMaxValue);
  uint64_t c = Crc64(item, 4) & 0xffffffffu;
  c = Crc64(item + kItemKey, kl, c) & 0xffffffffu;
  return static_cast<uint32_t>(Crc64(item + kItemValue, vl, c));
}

namespace {

// The post-crash GC's view of a CANRT root: one block.
void VisitRoot(const Pool&, uint64_t root_off, const std::function<void(uint64_t)>& mark) { mark(root_off); }
[[maybe_unused]] const bool kVisitorRegistered = RegisterRootVisitor(kRootType, &VisitRoot);

bool ItemOk(const unsigned char* it) {
  uint32_t crc;
  std::memcpy(&crc, it + kItemCrc, 4);
  return (it[kItemOp] == kOpPut || it[kItemOp] == kOpDelete) && it[kItemKeyLen] <= kMaxKey &&
         it[kItemValLen] <= kMaxValue && crc == ItemCrc(it);
}
bool SameKey(const unsigned char* a, const unsigned char* b) {
  return a[kItemKeyLen] == b[kItemKeyLen] && std::memcmp(a + kItemKey, b + kItemKey, a[kItemKeyLen]) == 0;
}
std::string_view KeyOf(const unsigned char* it) {
  return {reinterpret_cast<const char*>(it + kItemKey), it[kItemKeyLen]};
}
// A slot leaves the node's live set (its bit cleared, or an applied delete item's valid byte
// cleared): its op byte := 0 (one 8-byte store of the item's first word; lengths, key and value
// stay, so recovery can still match the key). The slot's old bytes then never pass a reader's or
// recovery's check again, not even mixed with a later item's words: a Read (or a crash) that the
// next writer's item Write overtakes yields this word - op 0, and a crc that covers op - beside
// the new valid byte. Not persisted here: the callers persist it before the slot is free to
// writers again (before the bitmap or pending change that frees it).
void ScrubOp(unsigned char* it) {
  uint64_t* w0 = reinterpret_cast<uint64_t*>(it);
  pm::store8(w0, pm::load8(w0) & ~uint64_t{0xff});  // byte 0 (kItemOp), little-endian
}

// Writable prefix area (the shadow while a resize builds it); every store is noted for the
// persist and for the next resize's copy.
struct ShadowArea {
  char* a;
  uint32_t m;
  std::vector<std::pair<uint64_t, uint64_t>>* changes;
  AreaHeader h() const {
    AreaHeader x;
    std::memcpy(&x, a, sizeof x);
    return x;
  }
  void Put(uint64_t off, const void* src, size_t n) {
    // A client's Refresh may be reading this area (a stale generation): atomic word stores
    // (transport.h CopyToRegion); the client's generation check rejects what it read.
    remote::CopyToRegion(a + off, static_cast<const char*>(src), n);
    changes->emplace_back(off, n);
  }
  void SetHeader(const AreaHeader& x) { Put(0, &x, sizeof x); }
  uint64_t NodeOff(uint64_t id) const { return kAreaHeaderBytes + id * PrefixNodeBytes(m); }
  void SetN(uint64_t id, uint16_t n) { Put(NodeOff(id) + 2, &n, 2); }
  void SetChr(uint64_t id, uint32_t p, uint16_t c) { Put(NodeOff(id) + 4 + 2 * p, &c, 2); }
  void SetEntry(uint64_t id, uint32_t p, uint32_t e) { Put(NodeOff(id) + IdsOffset(m) + 4 * p, &e, 4); }
  // A new node: position, one entry.
  void NewNode(uint64_t id, uint32_t pos, uint32_t e) {
    std::vector<char> b(PrefixNodeBytes(m), 0);
    b[0] = static_cast<char>(pos);
    const uint16_t one = 1;
    std::memcpy(b.data() + 2, &one, 2);
    std::memcpy(b.data() + IdsOffset(m), &e, 4);
    Put(NodeOff(id), b.data(), b.size());
  }
};

// Area to area, both readable by clients at the same time (valid: read by every Refresh; shadow:
// a client may still be reading its older generation): atomic words both ways.
void CopyArea(char* dst, const char* src, size_t n) {
  std::vector<char> tmp(n);
  remote::CopyFromRegion(tmp.data(), src, n);
  remote::CopyToRegion(dst, tmp.data(), n);
}

// The resize log entry of generation `gen` (canrt_layout.h, "resize log"): the prefix nodes the
// ranges `r` of an area touch, as runs of ids (the area header, offsets below kAreaHeaderBytes,
// is not listed: a client always re-reads it). More runs than an entry holds, or `full`: the
// entry says "re-read the whole area". Atomic word stores (a client may be reading the log);
// not persisted (volatile: for live clients only).
void WriteLog(char* base, uint32_t fanout, uint64_t gen, const std::vector<std::pair<uint64_t, uint64_t>>& r,
              bool full) {
  LogEntry e{};
  e.gen = gen;
  std::vector<uint64_t> ids;
  const uint64_t nb = PrefixNodeBytes(fanout);
  for (auto& [off, n] : r) {
    if (n == 0 || off + n <= kAreaHeaderBytes) continue;
    const uint64_t lo = std::max(off, kAreaHeaderBytes) - kAreaHeaderBytes, hi = off + n - 1 - kAreaHeaderBytes;
    for (uint64_t id = lo / nb; id <= hi / nb; ++id) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (size_t i = 0; i < ids.size() && !full; ++i) {
    if (e.nruns > 0 && e.first[e.nruns - 1] + e.count[e.nruns - 1] == ids[i]) {
      ++e.count[e.nruns - 1];
      continue;
    }
    if (e.nruns == kLogRuns || ids[i] >= UINT32_MAX) full = true;
    else e.first[e.nruns] = static_cast<uint32_t>(ids[i]), e.count[e.nruns++] = 1;
  }
  if (full) e.nruns = 0, e.full = 1;
  remote::CopyToRegion(base + kLogOff + (gen % kLogEntries) * sizeof(LogEntry), reinterpret_cast<const char*>(&e),
                       sizeof e);
}

// WORT_CANRT_SERVER_SCHED=batch: the server's background threads (the transport's notify thread,
// the write and resize threads) run as SCHED_BATCH. A client's Notify wakes them, and on a host
// whose cores the clients share (the 2-core development VM) a woken SCHED_NORMAL thread preempts
// the waker - the client - whose Put then waits for the server's apply although its write was
// done: put p50 7.5 us with preemption vs 1.2 us without (doc/remote.md, "Wake-ups"). A batch
// thread never preempts on wake-up; but under load it waits its turn for a core, and a writer
// that waits for the apply (the next write to the same node: sequential keys) waits with it -
// sequential puts fell from 41,000 to 600-1,700/s under load 8-14. So not the default: an
// experiment's switch. Best effort: a failure changes nothing else.
void BackgroundPolicy() {
  static const bool kBatch = [] {
    const char* e = std::getenv("WORT_CANRT_SERVER_SCHED");
    return e && std::string_view(e) == "batch";
  }();
  if (!kBatch) return;
  static thread_local bool set = false;
  if (set) return;
  set = true;
  sched_param sp{};
  sp.sched_priority = 0;
  (void)::pthread_setschedparam(::pthread_self(), SCHED_BATCH, &sp);
}

// Each cache line the ranges touch flushed once (h69: a split's edits are many small ranges
// over a few prefix nodes - before, each range was flushed on its own, most lines several times).
void PersistRanges(const char* base, const std::vector<std::pair<uint64_t, uint64_t>>& r) {
  std::vector<uint64_t> lines;
  const uint64_t b = reinterpret_cast<uintptr_t>(base);
  for (auto& [off, n] : r)
    if (n != 0)
      for (uint64_t l = (b + off) & ~uint64_t(63); l < b + off + n; l += 64) lines.push_back(l);
  std::sort(lines.begin(), lines.end());
  lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
  for (uint64_t l : lines) pm::flush(reinterpret_cast<const char*>(l), 64);
  pm::fence();
}

// The ranges sorted, overlapping and adjacent ones merged (h69: the shadow's copy of the last
// split's many small edits - one copy, and one buffer, per merged range).
std::vector<std::pair<uint64_t, uint64_t>> Merged(std::vector<std::pair<uint64_t, uint64_t>> r) {
  std::sort(r.begin(), r.end());
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (auto& [off, n] : r) {
    if (n == 0) continue;
    if (!out.empty() && off <= out.back().first + out.back().second)
      out.back().second = std::max(out.back().second, off + n - out.back().first);
    else
      out.emplace_back(off, n);
  }
  return out;
}

}  // namespace

// The most data-node ids one split may give (SplitInShadow): three for the final division, and
// two for each step that isolates the keys' one symbol (at most one per key position). A split
// that needs more than the free list and max_nodes give is refused (PoolFull).
constexpr size_t kSplitIds = 3 + 2 * (kMaxKey + 1);

struct Service::Changes {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  bool add_height = false;
  std::vector<uint32_t> ids;  // ids the split may give its new data nodes, in this order (kSplitIds)
  size_t used = 0;            // how many of them it gave
};

// The generation of the oldest prefix copy a connected client may use (canrt_layout.h, "client
// table"); UINT64_MAX when no client is connected. Called after the commit it must be ordered
// after: the seq_cst fence pairs with a client's claim (a compare-swap) before its first read
// of `state` - either this scan sees the claim, or that client reads the committed state.
// Slots whose lease expired (ExpireLeases) are freed first: they hold nothing back.
uint64_t Service::OldestClientGeneration() {
  // Sampled at most every lease/4 here (h69: a sample of the 256 slots took about 0.5 us of each
  // resize, on the writer's path); the apply thread samples every lease/4 too. Fewer samples
  // only delay an expiry, never cause one.
  ExpireLeases(/*if_due=*/true);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint64_t slots[kMaxClients];
  remote::CopyFromRegion(reinterpret_cast<char*>(slots), base_ + kClientsOff, sizeof slots);
  uint64_t oldest = UINT64_MAX;
  for (uint64_t v : slots)
    if (v != 0) oldest = std::min(oldest, SlotGen(v));
  return oldest;
}

// Leases (canrt_layout.h, "client table"): a slot whose word kept one value for a whole lease,
// by this server's clock, between two samples at most a lease apart, is freed (compare-swap to
// 0: a renewal that races with it wins, and the slot stays). A longer gap between samples starts
// over (the heartbeat could have wrapped in between - it cannot within a lease: a client renews
// at most once per lease/4). The apply thread samples every lease/4; a resize samples too
// (since h69 only when the last sample is lease/4 old).
void Service::ExpireLeases(bool if_due) {
  if (opts_.lease_ms == 0) return;
  std::lock_guard<std::mutex> g(lease_mu_);
  const auto now = std::chrono::steady_clock::now();
  const auto lease = std::chrono::milliseconds(opts_.lease_ms);
  if (if_due && now - last_sample_ < lease / 4) return;
  last_sample_ = now;
  uint64_t slots[kMaxClients];
  remote::CopyFromRegion(reinterpret_cast<char*>(slots), base_ + kClientsOff, sizeof slots);
  for (uint32_t i = 0; i < kMaxClients; ++i) {
    LeaseSample& l = lease_[i];
    const uint64_t v = slots[i];
    if (v == 0 || v != l.value || now - l.last > lease) {
      l.value = v;
      l.first = l.last = now;
      continue;
    }
    l.last = now;
    if (now - l.first < lease) continue;
    uint64_t* w = reinterpret_cast<uint64_t*>(base_ + kClientsOff) + i;
    if (CasOnce(w, v, 0)) {
      expired_.fetch_add(1, std::memory_order_relaxed);
      l.value = 0;
    }
  }
}

// One compare-swap of a word clients use atomics on (through ServerSide() when set); true when
// it stored `desired`.
bool Service::CasOnce(uint64_t* word, uint64_t expected, uint64_t desired) {
  std::lock_guard<std::mutex> g(atomics_mu_);
  uint64_t found = expected;
  if (atomics_) {
    const Status s = atomics_->CompareSwap64(static_cast<uint64_t>(reinterpret_cast<char*>(word) - base_), expected,
                                             desired, &found);
    if (!s.ok()) {
      std::fprintf(stderr, "wort canrt: server compare-swap failed: %s\n", s.ToString().c_str());
      return false;
    }
    return found == expected;
  }
  return std::atomic_ref<uint64_t>(*word).compare_exchange_strong(found, desired);
}

// An atomic add to a word clients add to (`wake`), through ServerSide() when set.
void Service::AddWord(uint64_t* word, uint64_t add) {
  std::lock_guard<std::mutex> g(atomics_mu_);
  if (atomics_) {
    uint64_t old;
    const Status s = atomics_->FetchAdd64(static_cast<uint64_t>(reinterpret_cast<char*>(word) - base_), add, &old);
    if (s.ok()) return;
    std::fprintf(stderr, "wort canrt: server fetch-add failed: %s\n", s.ToString().c_str());
  }
  std::atomic_ref<uint64_t>(*word).fetch_add(add);
}

// Takes every posted item out of the ring, or out of the post segments (canrt_layout.h, "post
// ring", "post segments"), and applies it. Each durable item is posted once (or notified once,
// when the ring or segment was full); an entry names an item applied already when a resize of its
// node applied it first (h57) - ApplyLocked skips an entry whose slot's pending bit is clear. Segments: those of the client-table slots
// seen claimed since their segment was last found empty (seg_seen_), or all of them with `all`.
size_t Service::DrainRing(bool all) {
  size_t n = 0;
  auto take = [&](uint64_t* w) {
    const uint64_t v = std::atomic_ref<uint64_t>(*w).load(std::memory_order_acquire);
    if (v == 0 || !CasOnce(w, v, 0)) return false;
    const uint64_t node = (v >> 32) - 1;
    const uint32_t slot = static_cast<uint32_t>(v);
    if (node < hdr_->max_nodes && slot == kResizeSlot) {
      // A resize request posted by the node's lock holder while this thread was awake (h69): no
      // notification, so no thread to wake - the split runs here. Resize checks the request as
      // it checks a notified one (a stale or repeated one changes nothing).
      posted_resizes_.fetch_add(1, std::memory_order_relaxed);
      Resize(static_cast<uint32_t>(node));
    } else if (node < hdr_->max_nodes && slot < hdr_->capacity) {
      (void)ProcessWrite(static_cast<uint32_t>(node), slot);
    }
    ++n;
    return true;
  };
  if (!segments_) {
    uint64_t* ring = reinterpret_cast<uint64_t*>(base_ + kRingOff);
    for (uint32_t i = 0; i < kRingEntries; ++i) take(&ring[i]);
  } else {
    uint64_t slots[kMaxClients];
    remote::CopyFromRegion(reinterpret_cast<char*>(slots), base_ + kClientsOff, sizeof slots);
    for (uint32_t c = 0; c < kMaxClients; ++c) {
      uint8_t& seen = seg_seen_[c];
      if (slots[c] != 0) seen = 1;
      if (!seen && !all) continue;
      uint64_t* seg = reinterpret_cast<uint64_t*>(base_ + kPostOff + c * kPostSegBytes);
      bool any = false;
      for (uint32_t i = 0; i < kPostWords; ++i) any |= take(&seg[i]);
      // A freed slot's segment is scanned until it is found empty (its client may have posted
      // before it noticed that its lease expired).
      if (slots[c] == 0 && !any) seen = 0;
    }
  }
  if (n) posted_.fetch_add(n, std::memory_order_relaxed);
  return n;
}

bool Service::RingEmpty() const {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(base_ + (segments_ ? kPostOff : kRingOff));
  const size_t words = segments_ ? kPostBytes / 8 : kRingEntries;
  for (size_t i = 0; i < words; ++i)
    if (std::atomic_ref<const uint64_t>(w[i]).load(std::memory_order_acquire) != 0) return false;
  return true;
}

Status Service::Open(Pool& pool, std::string_view name, const Options& opts, std::unique_ptr<Service>* out) {
  std::unique_ptr<Service> s(new Service());
  s->pool_ = &pool;
  s->opts_ = opts;
  RootInfo ri;
  Status st = pool.FindRoot(name, &ri);
  if (st.ok()) {
    if (ri.type != kRootType)
      return Status::InvalidArgument("root '" + std::string(name) + "' is not a CANRT (type " + std::to_string(ri.type) + ")");
    s->root_off_ = ri.off;
    s->base_ = pool.at<char>(ri.off);
    s->hdr_ = reinterpret_cast<RootHeader*>(s->base_);
    if (s->hdr_->magic != kMagic)
      return Status::Corruption("root '" + std::string(name) + "': not a CANRT region");
    if (s->hdr_->version != kVersion)
      // Refused, nothing changed: version 1 (before h53) kept the node lock in the metadata word,
      // and a client of that version still connected would lock a word this server ignores.
      return Status::NotSupported("root '" + std::string(name) + "': a CANRT region of layout version " +
                                  std::to_string(s->hdr_->version) + "; this build serves version " +
                                  std::to_string(kVersion) +
                                  " only (canrt_layout.h; serve it with the wort that created it, or recreate it)");
    const RootHeader& h = *s->hdr_;
    s->size_ = h.data_off + h.max_nodes * h.node_bytes;
    if (!pool.contains(ri.off, s->size_) || h.capacity < 1 || h.capacity > kMaxCapacity || h.fanout < 4 ||
        h.fanout > 256)
      return Status::Corruption("CANRT root '" + std::string(name) + "': bad geometry");
    s->opts_.capacity = h.capacity;
    s->opts_.fanout = h.fanout;
    s->opts_.max_nodes = h.max_nodes;
    s->opts_.area_bytes = h.area_bytes;
    WORT_RETURN_IF_ERROR(s->Recover());
  } else if (st.IsNotFound()) {
    if (opts.capacity < 1 || opts.capacity > kMaxCapacity)
      return Status::InvalidArgument("CANRT capacity must be 1.." + std::to_string(kMaxCapacity));
    if (opts.fanout < 4 || opts.fanout > 256) return Status::InvalidArgument("CANRT fan-out must be 4..256");
    if (opts.max_nodes < 1 || opts.max_nodes > UINT32_MAX / 2) return Status::InvalidArgument("CANRT max_nodes out of range");
    const uint64_t min_area = kAreaHeaderBytes + PrefixNodeBytes(opts.fanout) * 64;
    if (opts.area_bytes < min_area)
      return Status::InvalidArgument("CANRT area_bytes must hold at least 64 prefix nodes (" + std::to_string(min_area) + " bytes)");
    const uint64_t area = (opts.area_bytes + 63) & ~63ull;
    const uint64_t node_bytes = 64 + uint64_t(opts.capacity) * kItemBytes;
    // Header page, post segments (one per client-table slot, h49), two prefix areas, data nodes.
    const uint64_t size = kHeaderBytes + kPostBytes + 2 * area + opts.max_nodes * node_bytes;
    uint64_t off = 0;
    WORT_RETURN_IF_ERROR(pool.allocator().Alloc(size, &off));
    char* b = pool.at<char>(off);
    RootHeader h{};
    h.magic = kMagic;
    h.version = kVersion;
    h.capacity = opts.capacity;
    h.fanout = opts.fanout;
    h.max_prefix = static_cast<uint32_t>(std::min<uint64_t>((area - kAreaHeaderBytes) / PrefixNodeBytes(opts.fanout), kLeaf - 1));
    h.node_bytes = node_bytes;
    h.max_nodes = opts.max_nodes;
    h.area_bytes = area;
    h.area_off[0] = kHeaderBytes + kPostBytes;
    h.area_off[1] = kHeaderBytes + kPostBytes + area;
    h.data_off = kHeaderBytes + kPostBytes + 2 * area;
    h.state = StateWord(0, true, true);
    h.resize_node = 0;
    std::memset(b, 0, kHeaderBytes + kPostBytes);
    std::memcpy(b, &h, sizeof h);
    // The valid tree of generation 0: one prefix node with one entry naming data node 0.
    char* a0 = b + h.area_off[0];
    std::memset(a0, 0, kAreaHeaderBytes + PrefixNodeBytes(opts.fanout));
    AreaHeader ah{1, opts.fanout, 1, 1};
    std::memcpy(a0, &ah, sizeof ah);
    const uint16_t one = 1;
    const uint32_t leaf0 = kLeaf | 0;
    std::memcpy(a0 + kAreaHeaderBytes + 2, &one, 2);  // pos 0, nchars 1, entry 0: data node 0
    std::memcpy(a0 + kAreaHeaderBytes + IdsOffset(opts.fanout), &leaf0, 4);
    std::memset(b + h.data_off, 0, node_bytes);
    // Persist order: geometry, area 0, node 0; then the root entry publishes the region.
    pm::flush(b, sizeof h);
    pm::flush(a0, kAreaHeaderBytes + PrefixNodeBytes(opts.fanout));
    pm::flush(b + h.data_off, node_bytes);
    pm::fence();
    st = pool.AddRoot(name, kRootType, off);
    if (!st.ok()) {
      pool.allocator().Free(off);
      return st;
    }
    s->root_off_ = off;
    s->base_ = b;
    s->hdr_ = reinterpret_cast<RootHeader*>(b);
    s->size_ = size;
  } else {
    return st;
  }
  s->opts_.lease_ms = opts.lease_ms;
  s->lease_.resize(kMaxClients);
  // The post ring and the wake line are volatile (canrt_layout.h): recovery applied every durable
  // item, so the ring starts empty. Inline (no apply thread): the server says "deeply asleep"
  // for good, so every post comes with a notification, which applies it on the notifying thread.
  {
    const uint64_t ring[kRingEntries] = {};
    remote::CopyToRegion(s->base_ + kRingOff, reinterpret_cast<const char*>(ring), sizeof ring);
    s->segments_ = HasPostSegments(*s->hdr_);
    s->seg_seen_.assign(kMaxClients, 0);
    if (s->segments_) {
      const std::vector<char> zero(kPostBytes, 0);
      remote::CopyToRegion(s->base_ + kPostOff, zero.data(), zero.size());
    }
    const uint64_t wake[2] = {s->opts_.inline_resize ? kAsleep | kDeepAsleep : 0, s->opts_.lease_ms};
    remote::CopyToRegion(s->base_ + kWakeOff, reinterpret_cast<const char*>(wake), sizeof wake);
  }
  if (!s->opts_.inline_resize) {
    Service* p = s.get();
    s->resize_thread_ = std::thread([p] { p->QueueLoop(&p->queue_, &p->q_cv_, &p->busy_); });
    s->write_thread_ = std::thread([p] { p->ApplyLoop(); });
  }
  *out = std::move(s);
  return Status::OK();
}

Service::~Service() {
  {
    std::lock_guard<std::mutex> g(q_mu_);
    stop_ = true;
  }
  q_cv_.notify_all();
  w_cv_.notify_all();
  if (resize_thread_.joinable()) resize_thread_.join();
  if (write_thread_.joinable()) write_thread_.join();
}

// One 8-byte compare-swap loop on a metadata word: new = f(current, arg).
uint64_t Service::Cas(uint64_t* word, uint64_t (*f)(uint64_t, uint64_t), uint64_t arg) {
  uint64_t cur = pm::load8(word);
  for (;;) {
    const uint64_t want = f(cur, arg);
    uint64_t found = cur;
    {
      std::lock_guard<std::mutex> g(atomics_mu_);
      if (atomics_) {
        Status s = atomics_->CompareSwap64(static_cast<uint64_t>(reinterpret_cast<char*>(word) - base_), cur, want, &found);
        if (!s.ok()) {
          std::fprintf(stderr, "wort canrt: server compare-swap failed: %s\n", s.ToString().c_str());
          found = pm::load8(word);
          continue;
        }
      } else {
        std::atomic_ref<uint64_t>(*word).compare_exchange_strong(found, want);
      }
    }
    if (found == cur) return want;
    cur = found;
  }
}

void Service::OnNotify(uint32_t, std::string_view msg) {
  BackgroundPolicy();
  Message m;
  if (msg.size() != sizeof m) return;
  std::memcpy(&m, msg.data(), sizeof m);
  const RootHeader& h = *hdr_;
  if (m.node >= h.max_nodes) return;
  if (m.slot == kResizeSlot) {
    if (opts_.inline_resize || resize_on_notify_.load(std::memory_order_relaxed)) {
      Resize(m.node);
      return;
    }
    std::lock_guard<std::mutex> g(q_mu_);
    queue_.push_back(m);
    q_cv_.notify_one();
    return;
  }
  if (m.slot == kKickSlot || m.slot == kWaitSlot) {
    kicks_.fetch_add(1, std::memory_order_relaxed);
    // A waiting writer's notification names its node, whose pending set is applied whatever the
    // post segments hold (h64): a batch whose post never came (its writer died between its
    // release and its post) would otherwise keep that writer waiting for ever (canrt_layout.h,
    // "Protocol of a write", step 6).
    if (opts_.inline_resize) {
      if (m.slot == kWaitSlot) wait_applies_.fetch_add(ApplyNode(m.node), std::memory_order_relaxed);
      DrainRing(/*all=*/true);
      return;
    }
    std::lock_guard<std::mutex> g(q_mu_);
    kicked_ = true;
    scan_all_ = true;
    if (m.slot == kWaitSlot) writes_q_.push_back(m);
    w_cv_.notify_one();
    return;
  }
  if (m.slot >= h.capacity) return;
  if (opts_.inline_resize) {
    (void)ProcessWrite(m.node, m.slot);
    return;
  }
  // Not on the transport's thread: the server's compare-swaps go through the same transport
  // (ServerSide()), whose progress may be this very thread (ucx).
  std::lock_guard<std::mutex> g(q_mu_);
  writes_q_.push_back(m);
  w_cv_.notify_one();
}

// The write thread and the resize thread: each serves its queue in order.
void Service::QueueLoop(std::deque<Message>* q, std::condition_variable* cv, bool* busy) {
  BackgroundPolicy();
  std::unique_lock<std::mutex> g(q_mu_);
  for (;;) {
    cv->wait(g, [&] { return stop_ || !q->empty(); });
    if (stop_) return;
    const Message m = q->front();
    q->pop_front();
    *busy = true;
    g.unlock();
    if (m.slot == kResizeSlot) Resize(m.node);
    else (void)ProcessWrite(m.node, m.slot);
    g.lock();
    *busy = false;
    q_done_.notify_all();
  }
}

// The apply thread (issue 32, "no wake-up per item"): applies notified items (writes_q_) and
// posted ones (the ring), polls while items arrive (kPollWindow after the last one, yielding),
// then sleeps: lightly (kLightSleep at most; the client whose post ends a batch of kWakeBatch
// wakes it sooner) and, after kDeepAfter without items, deeply (until a notification: the next
// post wakes it; lease/4 at most, for the lease samples). An acknowledged item waits for its
// apply at most about kLightSleep - it is durable and visible before (canrt.h, "Visibility"),
// and a writer that finds its node locked wakes a sleeping server at once.
void Service::ApplyLoop() {
  using Clock = std::chrono::steady_clock;
  // WORT_CANRT_POLL_US: the poll window (default 200 us; for measurements, doc/remote.md).
  static const auto kPollWindow = std::chrono::microseconds([] {
    const char* e = std::getenv("WORT_CANRT_POLL_US");
    return e && *e ? std::atol(e) : 200L;
  }());
  constexpr auto kLightSleep = std::chrono::microseconds(1000);
  constexpr auto kDeepAfter = std::chrono::milliseconds(20);
  const auto lease_tick = std::chrono::milliseconds(opts_.lease_ms ? std::max<uint32_t>(opts_.lease_ms / 4, 1) : 1000);
  BackgroundPolicy();
  uint64_t* wake = reinterpret_cast<uint64_t*>(base_ + kWakeOff);
  auto last_item = Clock::now(), last_lease = last_item;
  std::vector<Message> batch;
  for (;;) {
    bool all;
    {
      std::lock_guard<std::mutex> g(q_mu_);
      if (stop_) return;
      batch.assign(writes_q_.begin(), writes_q_.end());
      writes_q_.clear();
      w_busy_ = true;
      all = scan_all_;
      scan_all_ = false;
    }
    size_t n = batch.size();
    for (const Message& m : batch) {
      const size_t applied = ProcessWrite(m.node, m.slot);
      if (m.slot == kWaitSlot) wait_applies_.fetch_add(applied, std::memory_order_relaxed);
    }
    auto now = Clock::now();
    if (now - last_lease >= lease_tick) {
      ExpireLeases();
      last_lease = now;
      all = true;  // every segment, also of slots freed since (canrt_layout.h, "post segments")
      // Every node's pending set (h64): a batch whose post never came is applied at the latest
      // here, one tick after its items were released, even if no writer of that node waits.
      n += Sweep();
    }
    n += DrainRing(all);
    {
      std::lock_guard<std::mutex> g(q_mu_);
      w_busy_ = false;
    }
    q_done_.notify_all();
    if (n) {
      last_item = now;
      continue;
    }
    const auto idle = now - last_item;
    if (idle < kPollWindow) {
      std::this_thread::yield();
      continue;
    }
    const bool deep = idle >= kDeepAfter;
    const uint64_t bits = kAsleep | (deep ? kDeepAsleep : 0);
    AddWord(wake, bits);  // only this thread sets or clears those bits: an add sets them
    // A client posts its entry (a compare-swap, then a seq_cst fence) before it reads `wake`;
    // here the bits are stored, then a seq_cst fence, then the last scan: either the client saw
    // these bits (and notifies as they say), or this scan finds the entry.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    {
      // Busy while it applies (Drain: an entry taken off the segments is not yet applied).
      std::lock_guard<std::mutex> g(q_mu_);
      w_busy_ = true;
    }
    const size_t late = DrainRing(/*all=*/deep);
    {
      std::lock_guard<std::mutex> g(q_mu_);
      w_busy_ = false;
    }
    if (late) q_done_.notify_all();
    if (late == 0) {
      std::unique_lock<std::mutex> g(q_mu_);
      const auto sleep = deep ? std::chrono::duration_cast<std::chrono::microseconds>(lease_tick)
                              : std::chrono::duration_cast<std::chrono::microseconds>(kLightSleep);
      w_cv_.wait_for(g, sleep, [&] { return stop_ || kicked_ || !writes_q_.empty(); });
      kicked_ = false;
    } else {
      last_item = Clock::now();
    }
    AddWord(wake, ~bits + 1);  // clears them
  }
}

// A post, a notified item or a waiting writer's notification (node, slot): since h64 it stands
// for the node - one post per node (canrt_layout.h, "Protocol of a write", step 6) - and applies
// the node's whole pending set (ApplyNode). On the apply thread at most kApplyRounds rounds, then
// the node goes to the back of the queue (a client that keeps writing one node must not hold
// the other nodes' posts back); inline (tests, the crash explorer) until the set is empty.
size_t Service::ProcessWrite(uint32_t node, uint32_t) {
  if (opts_.inline_resize) return ApplyNode(node);
  bool left = false;
  const size_t n = ApplyNode(node, kApplyRounds, &left);
  if (left) {
    std::lock_guard<std::mutex> g(q_mu_);
    writes_q_.push_back(Message{node, kKickSlot});
  }
  return n;
}

// The apply of one node (h64): every slot of the pending set, then the lock word again, until it
// reads the set empty. Only the writer whose release found the set empty posts; why every
// pending item is still applied is argued in canrt_layout.h ("Protocol of a write", step 6): in
// short, the post of the release that made the set non-empty is taken by a loop that reads the
// word after that release and ends only on reading the set empty - which it cannot while any
// bit released since is still set. Each slot of the set holds a complete, durable item (its
// writer set the bit after its Persist; only an apply clears it, under apply_mu_, held for each
// round), so applying from any trigger - a post, a notified item, a waiting writer's
// notification, the sweep, a resize - is safe, and no item is applied twice (ApplyLocked runs
// on set bits only, and clears them). A bit set by a release on a lock word that a restarted
// server's recovery had zeroed (its item applied already) is cleared by ApplyLocked
// (ClearStalePending).
size_t Service::ApplyNode(uint32_t node, int max_rounds, bool* left) {
  if (left) *left = false;
  if (node >= hdr_->max_nodes) return 0;
  const uint64_t mask = (1ull << hdr_->capacity) - 1;
  const uint64_t* lw = reinterpret_cast<const uint64_t*>(Node(node) + kLockWordOff);
  size_t n = 0;
  for (int round = 0;; ++round) {
    // apply_mu_ per round: a resize of another node (which applies its node's pending items under
    // it) waits for one round at most.
    std::lock_guard<std::mutex> g(apply_mu_);
    const uint64_t p = std::atomic_ref<const uint64_t>(*lw).load(std::memory_order_acquire) & mask;
    if (p == 0) break;
    if (max_rounds > 0 && round == max_rounds) {
      if (left) *left = true;
      break;
    }
    const size_t k = static_cast<size_t>(__builtin_popcountll(p));
    if (round > 0) apply_rerounds_.fetch_add(k, std::memory_order_relaxed);
    for (uint64_t q = p; q; q &= q - 1) ApplyLocked(node, static_cast<uint32_t>(__builtin_ctzll(q)));
    n += k;
  }
  if (n == 0) skipped_posts_.fetch_add(1, std::memory_order_relaxed);
  else node_applies_.fetch_add(1, std::memory_order_relaxed);
  return n;
}

// The lease tick's sweep (h64): the pending set of every data node in use, applied. Bounds the
// wait of an item whose node's post never came (its writer died between its release and its
// post; or a client of the previous run released and posted between this server's recovery and
// its zeroing of the post segments) to one tick when no writer of the node waits for it. Reads
// one word per data node (about 7,000 at 10^5 keys) once per tick.
size_t Service::Sweep() {
  const uint64_t gen = GenOf(pm::load8(&hdr_->state));
  AreaHeader ah;
  // Atomic word loads: a resize may be writing an area (its own words are atomic stores).
  remote::CopyFromRegion(reinterpret_cast<char*>(&ah), Area(gen), sizeof ah);
  const uint64_t nd = std::min<uint64_t>(ah.ndata, hdr_->max_nodes);
  const uint64_t mask = (1ull << hdr_->capacity) - 1;
  size_t n = 0;
  for (uint64_t d = 0; d < nd; ++d) {
    const uint64_t* lw = reinterpret_cast<const uint64_t*>(Node(d) + kLockWordOff);
    if ((std::atomic_ref<const uint64_t>(*lw).load(std::memory_order_acquire) & mask) == 0) continue;
    n += ProcessWrite(static_cast<uint32_t>(d), 0);
  }
  swept_.fetch_add(n, std::memory_order_relaxed);
  return n;
}

void Service::ApplyLocked(uint32_t node, uint32_t slot) {
  const uint32_t cap = hdr_->capacity;
  unsigned char* it = Item(node, slot);
  // Only an item whose pending bit is set is applied (h57). A writer sets its slot's bit after
  // its item is persistent (valid byte 1) and posts it after that; only an apply clears the bit
  // (under apply_mu_, held here), so while it is set the slot holds that whole item and no writer
  // takes the slot. A post whose bit is clear names an item applied already - by a resize, which
  // applies its node's pending items itself (Resize), or a repeated notification - and the slot
  // may by now hold ANOTHER writer's item that is still being written (the node retired and
  // reused, or the slot freed by a later apply and taken again): its crc would fail, and the
  // malformed-item path below would scrub an item whose Put is about to return (the hazard of
  // doc/remote.md, "The sequential put's p99"). Such a post is skipped.
  const uint64_t* lw = reinterpret_cast<const uint64_t*>(Node(node) + kLockWordOff);
  if ((std::atomic_ref<const uint64_t>(*lw).load(std::memory_order_acquire) >> slot & 1) == 0) {
    skipped_posts_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (std::atomic_ref<unsigned char>(it[kItemValid]).load(std::memory_order_acquire) != 1) {
    // The bit is set and the item is not valid: the post of an item that a restarted server's
    // recovery applied while its client was between its Persist and its release: the release
    // (one fetch-add, step 5) then set the slot's pending bit in a lock word that the recovery
    // had zeroed, and no apply would ever clear it (the slot would stay taken and a write of the
    // item's key would wait for ever).
    ClearStalePending(node, slot);
    return;
  }
  uint64_t* meta = Meta(node);
  uint64_t tail;
  std::memcpy(&tail, it + kItemTailWord, 8);
  const uint64_t valid_clear = tail & ~(0xffull << 56);  // byte 63 (valid) := 0
  if (!ItemOk(it)) {
    // A client's write that is not a whole item: dropped (op scrubbed and valid cleared - one
    // cache line, persisted together - lock released).
    ScrubOp(it);
    pm::store8(reinterpret_cast<uint64_t*>(it + kItemTailWord), valid_clear);
    // Persisted before the lock is released: a cut Write of the next writer into this slot must
    // not leave the faulty item's first words (op intact) beside its last word
    // (CanrtCrash.MalformedItemIsScrubbedBeforeItsSlotIsReused catches the removal).
    pm::persist(it + kItemTailWord, 8);
    // The slot is free again. (Since h49 the lock is its writer's, released by it once the
    // item was durable: the server releases no lock here.)
    ClearPending(node, slot);
    return;
  }
  // 1. The item is durable before any metadata refers to it. The client's Persist made it so
  //    already on the local backend; on ucx the client's flush + read-after-write is durable only
  //    where the target's caches are in the persistence domain (transport.h), so the server
  //    writes it back too.
  //    Skipped where the transport says the client's write-back is the server's own (the local
  //    backend: the client maps the pool and persists through the persistence module -
  //    ItemsDurableByClients): on this AMD machine the extra write-back evicted the line that
  //    step 3 stores to again, and it was about a tenth of the server's CPU per write (session
  //    11: YCSB write-only, doc/remote.md "The apply's redundant write-back").
  // crash-site: redundant: the client's Persist (remote::PersistMapped) wrote this line back before its Put returned; kept for ucx targets whose caches are not in the persistence domain
  if (!items_durable_by_clients_.load(std::memory_order_relaxed)) pm::persist(it, kItemBytes);
  // The key's current version (at most one slot holds a key).
  const uint64_t bits = pm::load8(meta) & kBitmapMask;
  uint64_t older = 0;
  for (uint32_t s = 0; s < cap; ++s)
    if (s != slot && (bits >> s & 1) && SameKey(Item(node, s), it)) older |= 1ull << s;
  // The slots this apply frees (the key's older version) are scrubbed BEFORE the bitmap change
  // frees them (ScrubOp): once a reader can see a slot free, its old item can no longer pass for
  // an unapplied one when the next writer's item Write overtakes the reader's Read (which would
  // give the reader that old version, or a delete long superseded, as the newest). Between this
  // store and the compare-swap the slot's bit is still set and its item fails the crc: readers
  // re-read (and the apply counter below changes anyway).
  for (uint32_t s = 0; s < cap; ++s)
    if (older >> s & 1) ScrubOp(Item(node, s));
  // The scrubs are persistent BEFORE the compare-swap below frees their slots: since writers no
  // longer wait for this apply (the client releases the node lock after its own Write), a writer
  // may take a freed slot as soon as it sees the bitmap change; a crash that cuts its item Write
  // must then find op 0 beside the new valid byte, never the older version's whole item (which
  // would pass the crc and bring the superseded value back).
  if (older) {
    for (uint32_t s = 0; s < cap; ++s)
      // A lost scrub matters only if a later client's item Write into the slot is cut by a crash:
      // CanrtCrash.TornClientWriteIntoAFreedSlot tears that Write (and the lines) and catches the
      // removal of this flush.
      if (older >> s & 1) pm::flush(Item(node, s), 8);
    // Orders the scrubs before the bitmap compare-swap against a client's item Write that takes a
    // freed slot while this apply runs and is cut by the crash (its valid byte written back, the
    // old item's first words still there; recovery would apply the superseded version). Noted
    // uncaught until h71: the explorers ran each apply whole between client writes; the
    // interposed explorer's cut writes (CanrtCrash.ClientWritesInsideTheServersStorePersistWindows,
    // "the cut write's last word only") catch its removal.
    pm::fence();
  }
  // Readers' guard (canrt_layout.h, "apply counter"): bumped before the bitmap changes, so that
  // a reader whose node Read overlapped this apply sees the counter change even when later
  // applies bring the bitmap back to the value it read first (ABA). Volatile: not persisted.
  std::atomic_ref<uint64_t>(meta[1]).fetch_add(1);
  // 2. put:    the slot's bit set and the key's older slot cleared in ONE compare-swap (lock kept);
  //    delete: the key's bit cleared (lock kept; the delete item's slot stays free).
  //    Persisted: after it, clearing the valid byte cannot lose the write.
  if (it[kItemOp] == kOpPut) {
    const uint64_t arg = (1ull << slot) | older << 32;  // low: bit to set; high: bits to clear
    Cas(meta, [](uint64_t cur, uint64_t a) -> uint64_t {
      return (cur & ~kBitmapMask) | ((cur & kBitmapMask & ~(a >> 32)) | (a & 0xffffffffull));
    }, arg);
    pm::persist(meta, 8);
  } else if (older) {
    Cas(meta, [](uint64_t cur, uint64_t a) -> uint64_t { return cur & ~a; }, older);
    pm::persist(meta, 8);
  }
  // 3. Processed: the valid byte cleared and persisted BEFORE the pending bit is cleared (step
  //    4), so that the next writer of this key (which waits while it sees the bit) never has its
  //    item (valid = 1, persisted by that client before its Put returns) persistent beside this
  //    one's: at most one item per key of a data node is ever persistent with valid = 1, and
  //    recovery need not know in which order two items of one key were written. A delete item's
  //    slot leaves the node here (it never had a bit): scrubbed like the freed slots above, and
  //    persistent before step 4 makes the slot free to writers (the delete item's first word
  //    shares its cache line with the valid byte: one write-back).
  if (it[kItemOp] == kOpDelete) ScrubOp(it);
  pm::store8(reinterpret_cast<uint64_t*>(it + kItemTailWord), valid_clear);
  pm::persist(it + kItemTailWord, 8);
  // 4. No longer pending (h49; before, the lock was released here): the slot's bit leaves the
  //    pending word. Not persisted (volatile; recovery zeroes it). Last, after the persists of
  //    steps 2 and 3: a writer may take this slot, or write this key into another slot, only
  //    once it no longer sees the bit - so at most one item per key of a node is ever
  //    persistent with valid = 1 and unapplied (canrt_layout.h, "pending word").
  ClearPending(node, slot);
  writes_.fetch_add(1, std::memory_order_relaxed);
}

// Clears slot's bit of the node's pending word (a compare-swap: a stray or faulty client's item
// whose bit was never set leaves the word as it is).
void Service::ClearPending(uint32_t node, uint32_t slot) {
  uint64_t* pend = reinterpret_cast<uint64_t*>(Node(node) + kPendingOff);
  Cas(pend, [](uint64_t cur, uint64_t bit) -> uint64_t { return cur & ~bit; }, 1ull << slot);
}

// A pending bit whose item is not valid is stale (ApplyLocked's second check): a lock holder sets
// its slot's bit only after its item, valid byte = 1, is persistent, and only an apply - under
// apply_mu_, which the caller holds - clears that byte; so the bit read first and the valid byte
// read after it, still not 1, mean no writer's item waits in the slot. While the bit stays set
// every lock holder's pending set holds the slot, so no writer takes it (or sets the bit anew)
// before the clear below.
void Service::ClearStalePending(uint32_t node, uint32_t slot) {
  uint64_t* w = reinterpret_cast<uint64_t*>(Node(node) + kLockWordOff);
  if ((std::atomic_ref<uint64_t>(*w).load(std::memory_order_acquire) >> slot & 1) == 0) return;
  if (std::atomic_ref<unsigned char>(Item(node, slot)[kItemValid]).load(std::memory_order_acquire) == 1) return;
  stale_pending_.fetch_add(1, std::memory_order_relaxed);
  ClearPending(node, slot);
}

void Service::Drain() {
  for (;;) {
    if (opts_.inline_resize) {
      DrainRing(/*all=*/true);
      return;
    }
    std::unique_lock<std::mutex> g(q_mu_);
    if (queue_.empty() && !busy_ && writes_q_.empty() && !w_busy_ && RingEmpty()) return;
    kicked_ = true;
    scan_all_ = true;
    w_cv_.notify_one();
    q_done_.wait_for(g, std::chrono::milliseconds(1));
  }
}

// Splits data node `node`'s key range in the shadow area (section 3.5). addWidth: the run of
// entries naming the node is divided, or boundary symbols are added between its keys' symbols
// (or around their one symbol); addHeight: the entry gets a child prefix node (same position
// when the entry covers several symbols, the next one when it covers one) and the split goes on
// there. Every entry that named the node names a new data node (ch->ids, in order).
// Room (h68): the split ends only with the keys in two new nodes or more - each then has a free
// slot, so one resize serves one full node. The step that would leave every key in one node (a
// new entry around their one symbol) gives the rest of the range its nodes, leaves that symbol's
// entry naming `node` and goes on (addHeight under it) in the same resize. Before h68 it was
// committed as it was, and the writer found the node as full as before and asked again (290 of
// the 5,491 resizes of `bench-remote --keys 100000 --latency-ops 5000`, 7 for one Put in
// Canrt.OneResizeMakesRoomInAFullNode).
// Three ways (h68): when the keys have three distinct symbols or more and the prefix node has
// room for two more boundaries, three parts, the largest as small as the symbols allow: a resize
// makes room for about two nodes' worth of items, not one (the load of 10^5 random keys: 2.84% of
// inserts resize instead of 4.30%; doc/remote.md, "Resizes that make room").
Status Service::SplitInShadow(uint32_t node, char* shadow, Changes* ch) {
  const uint32_t m = hdr_->fanout, cap = hdr_->capacity;
  ShadowArea A{shadow, m, &ch->ranges};
  // Views of the items' keys (h69; copies before): the node's items do not change while its
  // lock is held and its pending items are applied (Resize).
  std::vector<std::string_view> keys;
  const uint64_t bits = pm::load8(Meta(node)) & kBitmapMask;
  for (uint32_t s = 0; s < cap; ++s)
    if (bits >> s & 1) keys.emplace_back(KeyOf(Item(node, s)));
  if (keys.size() < 2) return Status::InvalidArgument("node has fewer than two keys");
  const uint32_t self = node | kLeaf;
  auto no_ids = [&] {
    return Status::PoolFull("CANRT: all " + std::to_string(hdr_->max_nodes) + " data nodes are in use (Options::max_nodes)");
  };
  ch->used = 0;
  for (;;) {
    AreaHeader h = A.h();
    PrefixView v(shadow);
    Located at;
    if (v.Locate(keys[0], &at) != node) return Status::Corruption("CANRT resize: node not named by its key");
    const uint64_t x = at.node;
    const uint32_t n = v.nchars(x), q = at.pos;
    uint32_t p0 = v.Position(x, Symbol(keys[0], q)), p1 = p0;
    while (p0 > 0 && v.entry(x, p0 - 1) == self) --p0;
    while (p1 + 1 < n && v.entry(x, p1 + 1) == self) ++p1;
    std::vector<uint16_t> syms;
    for (auto& k : keys) syms.push_back(Symbol(k, q));
    std::sort(syms.begin(), syms.end());
    auto below = [&](uint32_t c) { return static_cast<size_t>(std::lower_bound(syms.begin(), syms.end(), c) - syms.begin()); };
    std::vector<uint16_t> distinct = syms;
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    // The new data nodes: ch->ids[used..), reused retired nodes first (Resize picks them), then
    // fresh ones from ndata on; ndata counts the fresh ones.
    auto have = [&](size_t k) { return ch->used + k <= ch->ids.size(); };
    auto take = [&] {
      const uint32_t d = ch->ids[ch->used++];
      h.ndata = std::max<uint64_t>(h.ndata, uint64_t(d) + 1);
      return d | kLeaf;
    };
    // The best division of the keys at cut symbols cuts[] (increasing): one cut (two parts, the
    // most even) or, when `three` and there are two cuts or more, two cuts (three parts, the
    // largest the smallest). Parts may be empty only where the cuts allow nothing else.
    auto divide = [&](const std::vector<uint32_t>& cuts, bool three) {
      std::pair<size_t, size_t> best{0, SIZE_MAX};  // cut indices; SIZE_MAX: one cut
      size_t best_d = SIZE_MAX;
      // The keys below each cut, counted once (h69: the three-way search below asked for them
      // for every pair of cuts).
      std::vector<size_t> under(cuts.size());
      for (size_t a = 0; a < cuts.size(); ++a) under[a] = below(cuts[a]);
      for (size_t a = 0; a < cuts.size(); ++a) {
        const size_t ca = under[a];
        const size_t d = std::max(ca, keys.size() - ca) * 2 + (ca == 0 || ca == keys.size());
        if (d < best_d) best_d = d, best = {a, SIZE_MAX};
      }
      if (three && cuts.size() >= 2) {
        size_t best3 = SIZE_MAX;
        std::pair<size_t, size_t> b3{0, 1};
        for (size_t a = 0; a < cuts.size(); ++a)
          for (size_t b = a + 1; b < cuts.size(); ++b) {
            const size_t ca = under[a], cb = under[b];
            if (ca == 0 || cb == ca || cb == keys.size()) continue;  // every part non-empty
            const size_t d = std::max({ca, cb - ca, keys.size() - cb});
            if (d < best3) best3 = d, b3 = {a, b};
          }
        if (best3 != SIZE_MAX) best = b3;
      }
      return best;
    };
    if (p1 > p0) {  // addWidth: divide the run (two ways, as before h68: no split of this code
      // leaves a run - each step gives every entry a node of its own - so none is tested here)
      std::vector<uint32_t> cuts;
      for (uint32_t r = p0 + 1; r <= p1; ++r) cuts.push_back(v.chr(x, r));
      const uint32_t r1 = p0 + 1 + static_cast<uint32_t>(divide(cuts, false).first);
      if (!have(2)) return no_ids();
      const uint32_t e0 = take(), e1 = take();
      for (uint32_t r = p0; r <= p1; ++r) A.SetEntry(x, r, r < r1 ? e0 : e1);
      A.SetHeader(h);
      return Status::OK();
    }
    // The entry's own range (p0 == p1).
    const uint32_t elo = p0 > 0 ? v.chr(x, p0) : at.nlo;
    const uint32_t ehi = p0 + 1 < n ? v.chr(x, p0 + 1) : at.nhi;
    auto insert = [&](uint32_t at_p, uint16_t c, uint32_t left, uint32_t right, uint32_t& nn) {
      // Entry at_p splits at symbol c: [.., c) -> left, [c, ..) -> right.
      for (uint32_t r = nn; r > at_p + 1; --r) {
        A.SetChr(x, r, PrefixView(shadow).chr(x, r - 1));
        A.SetEntry(x, r, PrefixView(shadow).entry(x, r - 1));
      }
      A.SetChr(x, at_p + 1, c);
      A.SetEntry(x, at_p, left);
      A.SetEntry(x, at_p + 1, right);
      A.SetN(x, static_cast<uint16_t>(++nn));
    };
    if (n < m && distinct.size() >= 2) {  // addWidth: boundaries between the keys' symbols
      const std::vector<uint32_t> cuts(distinct.begin() + 1, distinct.end());
      const auto [a, b] = divide(cuts, n + 2 <= m && have(3));
      if (!have(2)) return no_ids();
      uint32_t nn = n;
      const uint32_t e0 = take(), e1 = take();
      insert(p0, static_cast<uint16_t>(cuts[a]), e0, e1, nn);
      if (b != SIZE_MAX) insert(p0 + 1, static_cast<uint16_t>(cuts[b]), e1, take(), nn);
      A.SetHeader(h);
      return Status::OK();
    }
    const uint16_t s = distinct[0];
    if (distinct.size() == 1 && ehi - elo > 1 && n + 2 <= m) {
      // addWidth: the keys share one symbol of a wider range: that symbol gets its own entry,
      // which keeps naming `node` (the rest of the range gets nodes of its own), and the split
      // goes on there (addHeight at the next position).
      if (!have(2)) return no_ids();
      uint32_t nn = n, p = p0;
      if (s > elo) {
        insert(p, s, take(), self, nn);
        ++p;
      }
      if (s + 1u < ehi) insert(p, static_cast<uint16_t>(s + 1), self, take(), nn);
      A.SetHeader(h);
      continue;
    }
    // addHeight: a child prefix node under the entry; the split goes on there.
    if (h.nprefix + 1 > hdr_->max_prefix)
      return Status::PoolFull("CANRT: the prefix area is full (" + std::to_string(hdr_->max_prefix) +
                              " prefix nodes, Options::area_bytes)");
    const uint32_t child_pos = ehi - elo > 1 ? q : q + 1;
    if (child_pos > kMaxKey) return Status::Corruption("CANRT resize: keys identical to their last byte");
    const uint64_t c = h.nprefix;
    A.NewNode(c, child_pos, self);
    A.SetEntry(x, p0, static_cast<uint32_t>(c));
    h.nprefix += 1;
    h.height = std::max(h.height, at.depth + 1);
    A.SetHeader(h);
    ch->add_height = true;
  }
}

// PrefixView::Locate for keys that share most of their path (a node's keys, h69): the last
// key's path is kept - per level the prefix node, its position, the key's symbol there and the
// entry taken - and a level whose symbol equals the last key's takes the same entry without the
// search of the node (a prefix node's entry for a symbol depends on nothing else).
struct PathCache {
  struct Step {
    uint64_t node;
    uint32_t pos;
    uint16_t sym;
    uint32_t entry;
  };
  std::vector<Step> steps;
  uint32_t Locate(const PrefixView& v, std::string_view key) {
    const uint64_t np = v.header().nprefix;
    uint64_t id = 0;
    for (size_t lvl = 0; lvl <= np && id < np; ++lvl) {
      uint32_t e;
      if (lvl < steps.size() && steps[lvl].node == id && Symbol(key, steps[lvl].pos) == steps[lvl].sym) {
        e = steps[lvl].entry;
      } else {
        steps.resize(lvl);
        const uint32_t q = v.pos(id);
        const uint16_t sym = Symbol(key, q);
        e = v.entry(id, v.Position(id, sym));
        steps.push_back(Step{id, q, sym, e});
      }
      if (e & kLeaf) return e & ~kLeaf;
      id = e;
    }
    return UINT32_MAX;
  }
};

// Copies node's live items into the split's new data nodes `targets` (fresh or reused: each is
// zeroed first, its metadata word - bitmap, no lock, not RETIRED - written last), each item to
// the node the shadow tree names for its key; persists them. Idempotent (recovery redoes it).
//
// Only the cache lines it stores to are flushed (h69; before, every target was zeroed and
// flushed whole: 32 lines per node at capacity 31, also on a fresh node,
// whose lines are zero already). A line that reads all zero and gets no item is left alone: its
// persistent content is zero too, because every store into a data node that is not a live
// tree's - a reused node's old items, an earlier Migrate into the same targets - was flushed
// before the store of `state` that made the node unnamed or that this Migrate redoes; and after
// a restart memory is what was persistent. (The lock word and apply counter, volatile and never
// flushed, are in the header line, which always gets the metadata word and is flushed.)
void Service::Migrate(uint32_t node, const char* shadow, const std::vector<uint32_t>& targets) {
  PrefixView v(shadow);
  const uint32_t cap = hdr_->capacity;
  const uint64_t lines = hdr_->node_bytes / 64;
  std::vector<uint64_t> meta(targets.size(), 0);
  // Where each item goes: src[t * lines + l] is the item copied into line l (1 + slot) of target
  // t, or null.
  std::vector<const unsigned char*> src(targets.size() * lines, nullptr);
  const uint64_t bits = pm::load8(Meta(node)) & kBitmapMask;
  PathCache path;
  for (uint32_t s = 0; s < cap; ++s) {
    if (!(bits >> s & 1)) continue;
    const unsigned char* it = Item(node, s);
    const uint32_t t = path.Locate(v, KeyOf(it));
    const auto at = std::find(targets.begin(), targets.end(), t);
    if (at == targets.end()) {
      std::fprintf(stderr, "wort canrt: migration: key of node %u goes to node %u, not a new one\n", node, t);
      continue;
    }
    const size_t ti = static_cast<size_t>(at - targets.begin());
    uint64_t& mt = meta[ti];
    const uint32_t slot = static_cast<uint32_t>(__builtin_popcountll(mt));
    src[ti * lines + 1 + slot] = it;
    mt |= 1ull << slot;
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    char* n = Node(targets[i]);
    // The item lines, then the header line (its metadata word last).
    for (uint64_t k = 1; k <= lines; ++k) {
      const uint64_t l = k % lines;
      bool dirty = l == 0;  // the header line: the metadata word, below
      if (const unsigned char* it = src[i * lines + l]) {
        // A whole line: the item with its valid byte clear (applied).
        unsigned char item[kItemBytes];
        std::memcpy(item, it, kItemBytes);
        item[kItemValid] = 0;
        remote::CopyToRegion(n + l * 64, reinterpret_cast<const char*>(item), kItemBytes);
        dirty = true;
      } else {
        // Zeroed with atomic word stores: the apply thread may read a reused node's lock word
        // meanwhile - a post of an item that a resize applied before the node was retired (h57:
        // ApplyLocked skips it, its pending bit being clear either way). Words that are zero
        // already are not stored to (atomic loads, for the same reason).
        uint64_t* w = reinterpret_cast<uint64_t*>(n + l * 64);
        for (int k = 0; k < 8; ++k) {
          if (std::atomic_ref<uint64_t>(w[k]).load(std::memory_order_relaxed) == 0) continue;
          std::atomic_ref<uint64_t>(w[k]).store(0, std::memory_order_release);
          dirty = true;
        }
      }
      if (l == 0) pm::store8(Meta(targets[i]), meta[i]);
      if (dirty) pm::flush(n + l * 64, 64);
    }
  }
  // The commit's store must not reach memory before the new nodes
  // (CanrtCrash.CommitOnlyAfterTheSplitsNewNodes catches the removal).
  pm::fence();
}

void Service::Resize(uint32_t node) {
  std::lock_guard<std::mutex> g(resize_mu_);
  const uint64_t state = pm::load8(&hdr_->state);
  const uint64_t gen = GenOf(state);
  char* valid = Area(gen);
  char* shadow = Area(gen + 1);
  const AreaHeader vh = PrefixView(valid).header();
  uint64_t* meta = Meta(node);
  const uint64_t full = (1ull << hdr_->capacity) - 1;
  uint64_t* lockw = reinterpret_cast<uint64_t*>(Node(node) + kLockWordOff);
  uint64_t mv = pm::load8(meta);
  uint64_t lv = std::atomic_ref<uint64_t>(*lockw).load(std::memory_order_acquire);
  if (node >= vh.ndata || (mv & kRetired) || (lv & kRetired)) return;  // a stale request
  if (LockOf(lv) == 0) return;                                         // nobody waits on it
  // The node's pending items (durable, acknowledged, waiting for the apply thread) are applied
  // HERE (h57), under apply_mu_, instead of the requester waiting until the apply thread - slower
  // than one client putting sequential keys - has got to them: the requester holds the lock, so
  // no bit is added meanwhile, and apply_mu_ keeps the apply thread off them (each is applied
  // once: ApplyLocked skips a post whose bit this cleared). The same persist order as the apply
  // thread's, item by item (ApplyLocked). Afterwards the node may be full (new keys: the split
  // below) or not (an update or delete item freed its key's older slot: the lock is given back
  // below, and the requester retries).
  if ((lv & kBitmapMask) != 0) {
    std::lock_guard<std::mutex> ga(apply_mu_);
    const uint64_t pend = std::atomic_ref<uint64_t>(*lockw).load(std::memory_order_acquire) & kBitmapMask;
    for (uint32_t s = 0; s < hdr_->capacity; ++s)
      if (pend >> s & 1) ApplyLocked(node, s), resize_applied_.fetch_add(1, std::memory_order_relaxed);
    mv = pm::load8(meta);
    lv = std::atomic_ref<uint64_t>(*lockw).load(std::memory_order_acquire);
  }
  // A node holding an item that waits for its apply is never split, nor its lock released here:
  // a valid item with no pending bit is one whose writer holds the lock and has not released it
  // yet (a stray or repeated request: the requester's own pending items were applied above, and
  // it writes no item while it asks). Such a request must not let another writer take the lock
  // and overwrite the item's slot, nor migrate the node without the item (canrt.h, "Resize and
  // acknowledged writes").
  for (uint32_t s = 0; s < hdr_->capacity; ++s)
    if (std::atomic_ref<unsigned char>(Item(node, s)[kItemValid]).load(std::memory_order_acquire) != 0) return;
  // (A bit still pending after the applies above: added by a lock holder that is not a
  // requester - a stray request again.)
  if ((lv & kBitmapMask) != 0) return;
  // Not full - the pending items applied above freed slots (an update's older version, a delete
  // item), or a stale request: the requester's lock given back; it retries (a requester that
  // saw pending items takes a lock field of 0 as "retry", canrt_client.cc).
  if ((mv & kBitmapMask) != full) {
    Cas(lockw, [](uint64_t cur, uint64_t) -> uint64_t { return cur - kLockOne; }, 0);
    return;
  }
  // Persist order (canrt.h): resize_node; state(gen,0,0); shadow; pxflag; data; RETIRED; commit.
  // (The paper's "pxflag unmarked" state needs no store: a crash before pxflag is set leaves the
  // state word idle, and the resize is dropped - the same recovery as "replay" of a resize that
  // a writer asks for again.)
  pm::store8(&hdr_->resize_node, node);
  // crash-site: redundant: resize_node shares its cache line with state, persisted next (kept for devices that write back 8-byte words independently)
  pm::persist(&hdr_->resize_node, 8);
  // Bring the shadow up to the valid tree: all of it after open, else where the last resize
  // (committed or dropped) made them differ.
  Changes ch;
  if (shadow_full_sync_) {
    const uint64_t used = kAreaHeaderBytes + vh.nprefix * PrefixNodeBytes(vh.fanout);
    CopyArea(shadow, valid, used);
    ch.ranges.emplace_back(0, used);
  } else {
    ch.ranges = Merged(shadow_diff_);
    for (auto& [off, n] : ch.ranges) CopyArea(shadow + off, valid + off, n);
  }
  const size_t copied = ch.ranges.size();
  // The ids the split may use: retired nodes no client's copy can name (their retirement is at
  // or before the oldest generation a connected client announces), then fresh ones.
  const uint64_t oldest = OldestClientGeneration();
  for (auto& [d, since] : free_)
    if (since <= oldest && ch.ids.size() < kSplitIds) ch.ids.push_back(d);
  const size_t reusable = ch.ids.size();
  for (uint64_t d = vh.ndata; ch.ids.size() < kSplitIds && d < hdr_->max_nodes; ++d) ch.ids.push_back(static_cast<uint32_t>(d));
  Status st = SplitInShadow(node, shadow, &ch);
  // The shadow equalled the valid tree before the split: whatever happens now (committed - the
  // shadow becomes valid and the old valid the shadow - or refused), the two areas differ in the
  // ranges the split wrote, and only there. (Until 2026-11-26 the copied ranges were kept too,
  // so the list grew by every resize and each resize copied and flushed all earlier ones: at
  // 10^5 keys about 2 ms of server CPU per resize.)
  shadow_full_sync_ = false;
  shadow_diff_.assign(ch.ranges.begin() + static_cast<std::ptrdiff_t>(copied), ch.ranges.end());
  if (!st.ok()) {
    std::fprintf(stderr, "wort canrt: resize of data node %u refused: %s\n", node, st.ToString().c_str());
    // No store to `state`: it still says idle (nothing was committed); the shadow is left as it is.
    Cas(lockw, [](uint64_t cur, uint64_t) -> uint64_t { return cur - kLockOne; }, 0);  // the writer gets PoolFull
    refused_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  PersistRanges(shadow, ch.ranges);
  pm::store8(&hdr_->state, StateWord(gen, true, false));  // pxflag
  pm::persist(&hdr_->state, 8);
  const std::vector<uint32_t> targets(ch.ids.begin(), ch.ids.begin() + static_cast<std::ptrdiff_t>(ch.used));
  Migrate(node, shadow, targets);
  // The resize log entry of gen+1 (the split's ranges: where valid and shadow differ) before the
  // commit, for the clients' incremental refresh.
  WriteLog(base_, hdr_->fanout, gen + 1, shadow_diff_, false);
  // RETIRED is for live clients only (stale copies of the prefix nodes): it is not persisted -
  // after a crash no client holds a stale copy, and the valid tree no longer names the node.
  // Both words: readers look at the metadata word, writers at the lock word (whose lock field the
  // requester still holds: no writer can take the node from here on).
  // The new nodes stay locked by the server until the commit is durable (session 10): a client
  // sees the store to `state` below before its persist (a cache line is visible before it is
  // written back), and could otherwise write its item into a new node and acknowledge it; a crash
  // before the persist then redoes this migration (recovery: pxflag set, dtflag not), which
  // rewrites the new nodes and would erase that acknowledged item. A writer that meets the lock
  // backs off and retries (canrt_client.cc, Write) - for the length of one persist. Nobody else
  // names these nodes yet (fresh, or retired beyond every client's generation), and no other
  // resize runs (resize_mu_), so nothing else changes their lock field meanwhile.
  for (uint32_t t : targets) AddWord(reinterpret_cast<uint64_t*>(Node(t) + kLockWordOff), kLockOne);
  Cas(meta, [](uint64_t cur, uint64_t) -> uint64_t { return cur | kRetired; }, 0);
  Cas(lockw, [](uint64_t cur, uint64_t) -> uint64_t { return cur | kRetired; }, 0);
  pm::store8(&hdr_->state, StateWord(gen + 1, true, true));  // dtflag: the shadow is the valid tree
  if (opts_.commit_window_for_test) opts_.commit_window_for_test();
  pm::persist(&hdr_->state, 8);
  for (uint32_t t : targets) AddWord(reinterpret_cast<uint64_t*>(Node(t) + kLockWordOff), 0 - kLockOne);
  // The reused nodes leave the free list; the split node joins it: trees from gen+1 on do not
  // name it.
  const size_t nreused = std::min(reusable, ch.used);
  for (size_t i = 0; i < nreused; ++i)
    free_.erase(std::find_if(free_.begin(), free_.end(), [&](auto& f) { return f.first == ch.ids[i]; }));
  free_.emplace_back(node, gen + 1);
  reused_.fetch_add(nreused, std::memory_order_relaxed);
  nfree_.store(free_.size(), std::memory_order_relaxed);
  resizes_.fetch_add(1, std::memory_order_relaxed);
  if (ch.add_height) add_height_.fetch_add(1, std::memory_order_relaxed);
  // The new shadow (the old valid area) brought up to the new valid tree now, after the commit -
  // the writer that asked has seen RETIRED and goes on - instead of at the start of the next
  // resize, on its writer's path (h69). Persisted here: recovery ignores the shadow unless a
  // resize's pxflag is set, and the next resize sets it only after this fence.
  const std::vector<std::pair<uint64_t, uint64_t>> diff = Merged(shadow_diff_);
  for (auto& [off, n] : diff) CopyArea(valid + off, shadow + off, n);
  PersistRanges(valid, diff);
  shadow_diff_.clear();
}

Status Service::Recover() {
  // No client is connected yet: plain stores are safe for words clients use atomics on.
  const uint64_t state = pm::load8(&hdr_->state);
  const uint64_t gen = GenOf(state);
  const AreaHeader vh = PrefixView(Area(gen)).header();
  if (vh.fanout != hdr_->fanout || vh.nprefix < 1 || vh.nprefix > hdr_->max_prefix || vh.ndata > hdr_->max_nodes)
    return Status::Corruption("CANRT: the valid prefix area's header is inconsistent with the geometry");
  const uint32_t cap = hdr_->capacity;
  // 1. Writes cut by the crash (section 3.6), in EVERY data node: a client's item is durable
  //    (its Persist returned, the Put was acknowledged) before the server sees it, while the
  //    lock word the client's fetch-add changed may not have reached persistence - a node need
  //    not look locked to hold an acknowledged, unapplied item.
  for (uint64_t d = 0; d < vh.ndata; ++d) {
    uint64_t* meta = Meta(d);
    uint64_t mv = pm::load8(meta);
    // The lock word is volatile (layout version 2): no lock held, nothing pending (every durable
    // item is applied below), RETIRED kept for a node the metadata word says is retired.
    pm::store8(reinterpret_cast<uint64_t*>(Node(d) + kLockWordOff), mv & kRetired);
    if (mv & kRetired) continue;
    bool dirty = LockOf(mv) != 0;  // (version 2 keeps no lock there: 0 unless damaged)
    {
      for (uint32_t s = 0; s < cap; ++s) {
        unsigned char* it = Item(d, s);
        if (it[kItemValid] != 1 || !ItemOk(it)) continue;
        // A put whose bit is set: applied, its valid byte not cleared yet - OR a newer item
        // written into a slot whose bit an apply had just cleared (the key's older version it
        // freed) while that compare-swap was not yet persisted: writers take a slot as soon as
        // they see it free (they do not wait for applies), so the crash can leave the old bit
        // beside the new item. Either way the item is the newest of its key (at most one item
        // per key is ever persistent with valid = 1, and the key's next writer waits for the
        // pending bit that the apply clears only after its persists): its key's other slots
        // are cleared as for an unapplied item (before 2026-11-28 it was skipped, and a key
        // could come back from the crash twice, its older value readable).
        const bool applied = it[kItemOp] == kOpPut && (mv >> s & 1);
        if (!applied) pm::persist(it, kItemBytes);
        uint64_t older = 0;
        for (uint32_t j = 0; j < cap; ++j)
          if (j != s && (mv >> j & 1) && SameKey(Item(d, j), it)) older |= 1ull << j;
        mv &= ~older;
        if (it[kItemOp] == kOpPut) mv |= 1ull << s;
        if (!applied) recovered_.fetch_add(1, std::memory_order_relaxed);
        if (!applied || older) dirty = true;
      }
      // A bit set over a slot that holds no complete put is stale (h71): the server sets a bit
      // only for a complete put it has made persistent, and a slot whose bit is set is written by
      // no one - until an apply's compare-swap frees it. A writer may take the slot as soon as it
      // sees that (before the compare-swap is persistent); a crash then keeps the old bit beside
      // what the writer left: a delete item (acknowledged: applied above, but its own slot's bit
      // stayed set - the bitmap named a delete item, and readers took it for a put of its key
      // with an empty value), or a Write the crash cut (op scrubbed, the new key's bytes: the
      // apply redone above cannot recognise its key's older version there, and readers re-read
      // the incomplete item for ever). The freed version was superseded by the apply's own item,
      // still valid (its valid byte is cleared only after the compare-swap's persist) and applied
      // above: the bit is cleared.
      for (uint32_t s = 0; s < cap; ++s) {
        const unsigned char* it = Item(d, s);
        if ((mv >> s & 1) && (!ItemOk(it) || it[kItemOp] != kOpPut)) {
          mv &= ~(1ull << s);
          dirty = true;
        }
      }
      // The same window, a cut Write of a key the node holds, every word of it written back but
      // the last (the valid byte; an item's crc does not cover the value bytes past its length,
      // so a short value's item is complete without that word): a complete put of that key
      // under the stale bit, its valid byte 0 - the key under two set bits (a key twice in scans,
      // Check: "holds a key twice"). Never otherwise: the compare-swap that sets a key's bit
      // clears its older one, and a valid item (applied above) clears its key's other bits. The
      // write was not acknowledged (a writer's item is whole and valid when its Put returns), so
      // either version may stay: the lower slot's (h71).
      for (uint32_t s = 0; s < cap; ++s) {
        if (!(mv >> s & 1)) continue;
        for (uint32_t j = s + 1; j < cap; ++j)
          if ((mv >> j & 1) && SameKey(Item(d, j), Item(d, s))) {
            mv &= ~(1ull << j);
            dirty = true;
          }
      }
      mv &= ~kLockMask;
    }
    if (dirty) {
      pm::store8(meta, mv);
      pm::persist(meta, 8);
    }
    for (uint32_t s = 0; s < cap; ++s) {
      unsigned char* it = Item(d, s);
      // Every free slot scrubbed (ScrubOp: the slots this recovery freed, applied delete items,
      // and those a crash left unscrubbed), so that a cut write into it later cannot pass.
      if (!(mv >> s & 1) && it[kItemOp] != 0) {
        ScrubOp(it);
        // Lost, the next recovery would scrub the slot again - unless a client's torn Write into
        // it came first: CanrtCrash.TornClientWriteIntoAFreedSlot (phase 2) catches its removal.
        pm::flush(it, 8);
      }
      if (it[kItemValid] == 0) continue;
      uint64_t tail;
      std::memcpy(&tail, it + kItemTailWord, 8);
      pm::store8(reinterpret_cast<uint64_t*>(it + kItemTailWord), tail & ~(0xffull << 56));
      pm::flush(it + kItemTailWord, 8);
    }
  }
  pm::fence();
  // 2. A resize cut by the crash: pxflag clear -> dropped; pxflag set -> migration redone.
  if ((state & 3) != 3) {
    const uint64_t node = pm::load8(&hdr_->resize_node);
    if ((state & 2) && node < vh.ndata) {
      const char* shadow = Area(gen + 1);
      const AreaHeader sh = PrefixView(shadow).header();
      if (sh.ndata < vh.ndata || sh.ndata > hdr_->max_nodes || sh.nprefix < vh.nprefix || sh.nprefix > hdr_->max_prefix)
        return Status::Corruption("CANRT: pxflag set but the shadow prefix area is inconsistent");
      // The split's new nodes: those the shadow tree names and the valid tree does not.
      std::vector<bool> named(sh.ndata, false);
      PrefixView(Area(gen)).ForEachInOrder([&](uint32_t d) {
        if (d < named.size()) named[d] = true;
      });
      std::vector<uint32_t> targets;
      PrefixView(shadow).ForEachInOrder([&](uint32_t d) {
        if (d < named.size() && !named[d]) targets.push_back(d);
      });
      Migrate(static_cast<uint32_t>(node), shadow, targets);
      uint64_t* meta = Meta(node);
      pm::store8(meta, (pm::load8(meta) & ~kLockMask) | kRetired);
      pm::persist(meta, 8);
      pm::store8(reinterpret_cast<uint64_t*>(Node(node) + kLockWordOff), kRetired);  // volatile
      // A client of the previous run (local backend: it keeps its mapping) re-reads the whole area.
      WriteLog(base_, hdr_->fanout, gen + 1, {}, true);
      pm::store8(&hdr_->state, StateWord(gen + 1, true, true));
    } else {
      pm::store8(&hdr_->state, StateWord(gen, true, true));
    }
    pm::persist(&hdr_->state, 8);
  }
  shadow_full_sync_ = true;
  // The free list: every data node the valid tree does not name, reusable once every client
  // announces the generation recovery ends at (clients of the previous run may still hold
  // older copies: their slots are kept).
  const uint64_t now = GenOf(pm::load8(&hdr_->state));
  const AreaHeader nh = PrefixView(Area(now)).header();
  std::vector<bool> named(nh.ndata, false);
  PrefixView(Area(now)).ForEachInOrder([&](uint32_t d) {
    if (d < named.size()) named[d] = true;
  });
  free_.clear();
  for (uint64_t d = 0; d < nh.ndata; ++d)
    if (!named[d]) free_.emplace_back(static_cast<uint32_t>(d), now);
  nfree_.store(free_.size(), std::memory_order_relaxed);
  return Status::OK();
}

ServiceStats Service::Stats() const {
  ServiceStats s;
  s.writes = writes_.load();
  s.resizes = resizes_.load();
  s.resizes_refused = refused_.load();
  s.add_height = add_height_.load();
  s.recovered_items = recovered_.load();
  s.reused = reused_.load();
  s.free_nodes = nfree_.load();
  s.posted = posted_.load();
  s.kicks = kicks_.load();
  s.leases_expired = expired_.load();
  s.stale_pending = stale_pending_.load();
  s.resize_applied = resize_applied_.load();
  s.skipped_posts = skipped_posts_.load();
  s.node_applies = node_applies_.load();
  s.apply_rerounds = apply_rerounds_.load();
  s.wait_applies = wait_applies_.load();
  s.swept = swept_.load();
  s.posted_resizes = posted_resizes_.load();
  const uint64_t gen = GenOf(pm::load8(&hdr_->state));
  const AreaHeader h = PrefixView(Area(gen)).header();
  s.generation = gen;
  s.height = h.height;
  s.ndata = h.ndata;
  s.nprefix = h.nprefix;
  return s;
}

Status Service::Check(std::string* report) const {
  const uint64_t gen = GenOf(pm::load8(&hdr_->state));
  PrefixView v(Area(gen));
  const uint32_t cap = hdr_->capacity;
  std::vector<uint32_t> order;
  v.ForEachInOrder([&](uint32_t d) { order.push_back(d); });
  std::vector<bool> seen(v.header().ndata, false);
  std::string last_max;
  bool have_last = false;
  for (uint32_t d : order) {
    if (d >= v.header().ndata || seen[d]) {
      *report += "data node " + std::to_string(d) + " named twice or out of range\n";
      return Status::Corruption("CANRT check failed");
    }
    seen[d] = true;
    const uint64_t mv = pm::load8(Meta(d));
    if (mv & kRetired) {
      *report += "retired data node " + std::to_string(d) + " is named by the valid tree\n";
      return Status::Corruption("CANRT check failed");
    }
    std::vector<std::string> keys;
    for (uint32_t s = 0; s < cap; ++s) {
      if (!(mv >> s & 1)) continue;
      const unsigned char* it = Item(d, s);
      if (!ItemOk(it) || it[kItemOp] != kOpPut) {
        *report += "data node " + std::to_string(d) + " slot " + std::to_string(s) + ": bad item\n";
        return Status::Corruption("CANRT check failed");
      }
      keys.emplace_back(KeyOf(it));
      if (v.Locate(keys.back()) != d) {
        *report += "a key of data node " + std::to_string(d) + " belongs to another node\n";
        return Status::Corruption("CANRT check failed");
      }
    }
    std::sort(keys.begin(), keys.end());
    if (std::adjacent_find(keys.begin(), keys.end()) != keys.end()) {
      *report += "data node " + std::to_string(d) + " holds a key twice\n";
      return Status::Corruption("CANRT check failed");
    }
    if (!keys.empty()) {
      if (have_last && keys.front() <= last_max) {
        *report += "data nodes out of key order at node " + std::to_string(d) + "\n";
        return Status::Corruption("CANRT check failed");
      }
      last_max = keys.back();
      have_last = true;
    }
  }
  return Status::OK();
}

void Service::SetAtomics(remote::Connection* c) {
  std::lock_guard<std::mutex> g(atomics_mu_);  // no compare-swap in progress on the old one
  atomics_ = c;
}

void Server::Stop() {
  // The service stops using ServerSide() before the transport goes (later compare-swaps are CPU
  // atomics); then no more notifications; then the queued ones are processed.
  if (service_) service_->SetAtomics(nullptr);
  if (transport_) transport_->Stop();
  transport_.reset();
  if (service_) service_->Drain();
}

Status StartServer(Pool& pool, std::string_view name, std::string_view backend, const Options& opts,
                   std::unique_ptr<Server>* out) {
  std::unique_ptr<Server> s(new Server());
  WORT_RETURN_IF_ERROR(Service::Open(pool, name, opts, &s->service_));
  Service* svc = s->service_.get();
  WORT_RETURN_IF_ERROR(remote::Listen(backend, svc->region(), svc->region_size(), pool.path(),
                                      [svc](uint32_t c, std::string_view m) { svc->OnNotify(c, m); }, &s->transport_));
  svc->SetAtomics(&s->transport_->ServerSide());
  // Local backend: ServerSide() is CPU atomics, so the notify thread may split nodes itself
  // (ucx: its compare-swaps need the progress of the very thread that runs the handler).
  static const bool kResizeThread = [] {
    const char* e = std::getenv("WORT_CANRT_RESIZE_THREAD");  // =1: always the resize thread (measurements)
    return e && *e == '1';
  }();
  svc->ResizeOnNotifyThread(backend == "local" && !kResizeThread);
  // Local backend: a client's Persist of its item is pm::persist through its own mapping of the
  // pool file - the same write-back the server would do (remote::PersistMapped).
  svc->ItemsDurableByClients(backend == "local");
  *out = std::move(s);
  return Status::OK();
}

namespace {
// CANRT as a design of `wort serve-remote` (remote/designs.h): the pool opened or created at
// opts.pool, the root "canrt", data nodes for half of the pool's maximum size.
class CanrtService final : public remote::RemoteService {
 public:
  ~CanrtService() override { (void)Stop(); }
  Status Start(const remote::ServeOptions& o) {
    if (o.pool.empty()) return Status::InvalidArgument("canrt: no pool path given");
    PoolOptions po;
    po.max_size = o.pool_size;
    po.initial_size = std::min<uint64_t>(o.pool_size, 64ull << 20);
    po.background_recovery = false;
    WORT_RETURN_IF_ERROR(Pool::OpenOrCreate(o.pool, po, &pool_));
    Options co;
    co.max_nodes = std::max<uint64_t>(64, (o.pool_size / 2) / (64 + uint64_t(co.capacity) * kItemBytes));
    co.max_nodes = std::min<uint64_t>(co.max_nodes, UINT32_MAX / 4);
    return StartServer(*pool_, "canrt", o.backend, co, &server_);
  }
  remote::RegionInfo info() const override { return server_->info(); }
  std::string design() const override { return "canrt"; }
  uint64_t requests_served() const override {
    const ServiceStats s = server_->service().Stats();
    return s.writes + s.resizes;
  }
  Status Stop() override {
    if (server_) server_->Stop();
    server_.reset();
    Status s;
    if (pool_) s = pool_->Close();
    pool_.reset();
    return s;
  }

 private:
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Server> server_;
};
}  // namespace

Status Serve(const remote::ServeOptions& opts, std::unique_ptr<remote::RemoteService>* out) {
  auto s = std::make_unique<CanrtService>();
  WORT_RETURN_IF_ERROR(s->Start(opts));
  *out = std::move(s);
  return Status::OK();
}

}  // namespace wort::canrt
