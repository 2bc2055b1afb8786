// CANRT's client (RemoteKV "canrt"): Algorithm 1 (write), Algorithm 2 (read), remove and ordered
// scans over the transport (design: canrt.h; layout: canrt_layout.h).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "remote/canrt.h"

namespace wort::canrt {
namespace {

class Client final : public remote::RemoteKV {
 public:
  explicit Client(std::unique_ptr<remote::Connection> c) : c_(std::move(c)), rng_(std::random_device{}()) {}

  Status Init() {
    WORT_RETURN_IF_ERROR(c_->Read(0, &h_, sizeof h_));
    if (h_.magic != kMagic) return Status::Corruption("canrt: the region does not hold a CANRT");
    if (h_.version != kVersion)
      return Status::NotSupported("canrt: the region holds a CANRT of layout version " + std::to_string(h_.version) +
                                  "; this client speaks version " + std::to_string(kVersion) +
                                  " (canrt_layout.h: the node lock moved in version 2)");
    if (h_.capacity < 1 || h_.capacity > kMaxCapacity || h_.fanout < 2 || h_.fanout > 256)
      return Status::Corruption("canrt: bad geometry in the region's header");
    node_.resize(h_.node_bytes);
    segments_ = HasPostSegments(h_);
    uint64_t lease = 0;
    WORT_RETURN_IF_ERROR(c_->Read(kLeaseOff, &lease, 8));
    lease_ = std::chrono::milliseconds(lease);
    return Join();
  }
  ~Client() override {
    if (slot_ < 0) return;
    uint64_t old;  // best effort: a dead link keeps the slot until its lease expires
    (void)c_->CompareSwap64(SlotOff(), slot_word_, 0, &old);
  }

  std::string name() const override { return "canrt"; }
  remote::Connection::Counters transport_counters() const override { return c_->counters(); }
  uint64_t resize_requests() const override { return stats_.resize_requests; }
  uint64_t post_fallbacks() const override { return stats_.ring_full; }
  uint64_t apply_waits() const override { return stats_.apply_waits; }

  Status Put(std::string_view key, std::string_view value) override {
    WORT_RETURN_IF_ERROR(CheckKey(key));
    if (value.size() > kMaxValue)
      return Status::InvalidArgument("canrt: value of " + std::to_string(value.size()) + " bytes (at most " +
                                     std::to_string(kMaxValue) + ")");
    bool found;
    return Write(kOpPut, key, value, &found);
  }

  Status Remove(std::string_view key) override {
    WORT_RETURN_IF_ERROR(CheckKey(key));
    bool found = false;
    WORT_RETURN_IF_ERROR(Write(kOpDelete, key, {}, &found));
    return found ? Status::OK() : Status::NotFound("key not found");
  }

  Status Get(std::string_view key, std::string* value) override {
    WORT_RETURN_IF_ERROR(CheckKey(key));
    for (;;) {
      WORT_RETURN_IF_ERROR(LeaseCheck());
      const uint32_t d = View().Locate(key);
      bool retired;
      WORT_RETURN_IF_ERROR(ReadNode(d, &retired));
      if (retired) {
        bool changed;
        WORT_RETURN_IF_ERROR(RefreshIfNew(&changed));
        if (changed) continue;  // the split is committed: the key lives in a new node
      }
      const int s = FindInNode(key);
      if (s < 0) return Status::NotFound("key not found");
      const unsigned char* it = ItemAt(s);
      value->assign(reinterpret_cast<const char*>(it + kItemValue), it[kItemValLen]);
      return Status::OK();
    }
  }

  Status Scan(std::string_view start, std::string_view end, size_t limit,
              const std::function<bool(std::string_view, std::string_view)>& fn) override {
    std::string from(start);
    bool first = true;  // `from` is inclusive only on the first pass
    size_t emitted = 0;
    for (;;) {
      WORT_RETURN_IF_ERROR(LeaseCheck());
      BuildOrder();
      const uint32_t d0 = View().Locate(from);
      const uint32_t d1 = end.empty() ? UINT32_MAX : View().Locate(end);
      if (d0 >= rank_.size() || (d1 != UINT32_MAX && d1 >= rank_.size()))
        return Status::Corruption("canrt: the prefix nodes name a data node out of range");
      size_t i = rank_[d0];
      const size_t last = d1 == UINT32_MAX ? order_.size() - 1 : rank_[d1];
      bool restart = false;
      for (; i <= last && !restart; ++i) {
        bool rejoined;
        WORT_RETURN_IF_ERROR(LeaseCheck(&rejoined));
        if (rejoined) {
          restart = true;  // the copy was re-read: order_ and rank_ are rebuilt
          break;
        }
        bool retired;
        WORT_RETURN_IF_ERROR(ReadNode(order_[i], &retired));
        if (retired) {
          bool changed;
          WORT_RETURN_IF_ERROR(RefreshIfNew(&changed));
          if (changed) {
            restart = true;
            break;
          }
        }
        std::vector<std::pair<std::string_view, std::string_view>> items;
        const uint64_t bits = live_;
        for (uint32_t s = 0; s < h_.capacity; ++s) {
          if (!(bits >> s & 1)) continue;
          const unsigned char* it = ItemAt(s);
          std::string_view k(reinterpret_cast<const char*>(it + kItemKey), it[kItemKeyLen]);
          if ((first ? k < from : k <= from) || (!end.empty() && k >= end)) continue;
          items.emplace_back(k, std::string_view(reinterpret_cast<const char*>(it + kItemValue), it[kItemValLen]));
        }
        std::sort(items.begin(), items.end());
        for (auto& [k, v] : items) {
          if (limit && emitted == limit) return Status::OK();
          ++emitted;
          from.assign(k);
          first = false;
          if (!fn(k, v)) return Status::OK();
        }
      }
      if (!restart) return Status::OK();
    }
  }

  ClientStats stats() const { return stats_; }
  uint64_t generation() const { return gen_; }
  const std::vector<char>& area() const { return area_; }

 private:
  static Status CheckKey(std::string_view key) {
    if (key.size() > kMaxKey)
      return Status::InvalidArgument("canrt: key of " + std::to_string(key.size()) + " bytes (at most " +
                                     std::to_string(kMaxKey) + ")");
    return Status::OK();
  }

  PrefixView View() const { return PrefixView(area_.data()); }
  uint64_t NodeOff(uint32_t d) const { return h_.data_off + uint64_t(d) * h_.node_bytes; }
  const unsigned char* ItemAt(uint32_t s) const {
    return reinterpret_cast<const unsigned char*>(node_.data()) + 64 + uint64_t(s) * kItemBytes;
  }

  uint64_t SlotOff() const { return kClientsOff + 8ull * static_cast<uint64_t>(slot_); }
  // A slot in the client table (canrt_layout.h), claimed with "generation 0" - the oldest
  // there is - before the first read of `state`: from now on the server reuses no data node
  // this client's copies can name; then the whole prefix area, and its generation announced.
  // At connect, and again when the client finds its lease expired (its slot freed).
  Status Join() {
    slot_ = -1;
    for (uint32_t i = 0; i < kMaxClients && slot_ < 0; ++i) {
      uint64_t old = 1;
      WORT_RETURN_IF_ERROR(c_->CompareSwap64(kClientsOff + 8ull * i, 0, 1, &old));
      if (old == 0) slot_ = static_cast<int>(i);
    }
    if (slot_ < 0)
      return Status::Busy("canrt: all " + std::to_string(kMaxClients) + " client slots of the region are in use");
    slot_word_ = 1;
    // Shared ring: clients start posting at different words. Segments: this slot's own.
    ring_next_ = segments_ ? 0 : static_cast<uint32_t>(slot_) * 5;
    WORT_RETURN_IF_ERROR(Refresh());
    bool lost;
    WORT_RETURN_IF_ERROR(Announce(&lost));
    if (lost) return Status::Busy("canrt: the client's slot was freed while it joined (lease shorter than a refresh)");
    return Status::OK();
  }
  // The client's slot says the generation of its copy: older nodes may be reused from now on.
  // (Until this compare-swap the slot says an older generation: more protection, never less.)
  // A new heartbeat renews the lease. *lost: the slot no longer holds this client's word - the
  // server freed it (lease expired); the caller joins again before it uses its copy.
  Status Announce(bool* lost) {
    const uint64_t v = SlotWord(gen_, ++beat_);
    uint64_t old;
    const auto now = std::chrono::steady_clock::now();
    WORT_RETURN_IF_ERROR(c_->CompareSwap64(SlotOff(), slot_word_, v, &old));
    *lost = old != slot_word_;
    if (*lost) return Status::OK();
    slot_word_ = v;
    renewed_ = now;
    return Status::OK();
  }
  // At the start of every operation (and of every attempt of a write and every node of a scan):
  // a renewal when lease/4 has passed since the last one (this client's clock), and a new join
  // when the lease had expired. *rejoined: the copy of the prefix nodes was re-read.
  Status LeaseCheck(bool* rejoined = nullptr) {
    if (rejoined) *rejoined = false;
    if (lease_.count() == 0 || std::chrono::steady_clock::now() - renewed_ < lease_ / 4) return Status::OK();
    bool lost;
    WORT_RETURN_IF_ERROR(Announce(&lost));
    ++stats_.lease_renewals;
    if (!lost) return Status::OK();
    ++stats_.lease_lost;
    if (rejoined) *rejoined = true;
    return Join();
  }
  // Tells the server of a durable item without a wake-up of its own (canrt_layout.h, "post
  // segments", "post ring"): a free word of this client's segment (or of the shared ring, in a
  // pool without segments) takes it; then `wake` is read (no store: the line stays shared) and
  // the server is woken when it sleeps deeply, or sleeps and this post ends a batch of this
  // client's. No free word (the server is behind), or WORT_CANRT_NOTIFY=item: a notification of
  // the item itself. The write is durable already: a transport failure here is counted, not
  // returned (the server applies the item on restart).
  void Post(uint32_t d, uint32_t slot) {
    static const bool kPerItem = [] {
      const char* e = std::getenv("WORT_CANRT_NOTIFY");
      return e && std::string_view(e) == "item";
    }();
    if (!kPerItem) {
      const uint64_t v = RingEntry(d, slot);
      const uint32_t words = segments_ ? kPostWords : kRingEntries;
      const uint64_t base = segments_ ? kPostOff + uint64_t(slot_) * kPostSegBytes : kRingOff;
      bool posted = false, failed = false;
      for (int probe = 0; probe < 4 && !posted && !failed; ++probe) {
        const uint32_t i = ring_next_++ % words;
        uint64_t old = 1;
        if (!c_->CompareSwap64(base + 8ull * i, 0, v, &old).ok()) failed = true;
        else posted = old == 0;
      }
      // Four words taken: one Read of the whole segment finds a free one, if any.
      auto scan = [&] {
        uint64_t seg[kPostWords];
        if (!c_->Read(base, seg, sizeof seg).ok()) return (void)(failed = true);
        for (uint32_t i = 0; i < kPostWords && !posted; ++i) {
          uint64_t old = 1;
          if (seg[i] != 0) continue;
          if (!c_->CompareSwap64(base + 8ull * i, 0, v, &old).ok()) return (void)(failed = true);
          if (old == 0) posted = true, ring_next_ = i + 1;
        }
      };
      if (!posted && !failed && segments_) scan();
      if (!posted && !failed && segments_) {
        // The segment is full: the apply thread is kPostWords items behind this client. Wait
        // for it to free a word (h57; up to kPostWaitUs) rather than notify the item: a
        // notification costs this client a system call and the server two thread wake-ups (the
        // sequential put's p50 went from 0.6 to 3.4 us when half the puts notified), and a
        // client that outruns the apply thread only lengthens the queue. Not when the server
        // sleeps deeply (it drains nothing until notified) - nor when it does not drain at all.
        uint64_t w = 0;
        if (c_->Read(kWakeOff, &w, 8).ok() && !(w & kDeepAsleep)) {
          const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(kPostWaitUs);
          while (!posted && !failed && std::chrono::steady_clock::now() < until) {
            std::this_thread::yield();
            scan();
          }
          if (posted) ++stats_.post_waits;
        }
      }
      if (posted) {
        ++stats_.posted;
        // Dekker order with the apply thread's sleep (canrt_layout.h): the post, a seq_cst
        // fence, then the read of `wake`.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        uint64_t w = 0;
        if (!c_->Read(kWakeOff, &w, 8).ok()) {
          ++stats_.notify_failures;
          return;
        }
        if ((w & kDeepAsleep) || ((w & kAsleep) && stats_.posted % kWakeBatch == 0)) Kick(d);
        return;
      }
      ++stats_.ring_full;
    }
    Message m{d, slot};
    if (!c_->Notify(std::string_view(reinterpret_cast<const char*>(&m), sizeof m)).ok()) {
      // The write is durable and will be applied when the server recovers; the server cannot
      // be told now (stopped or gone): the slot stays pending until it restarts.
      ++stats_.notify_failures;
    }
  }
  // Asks the server to split node d, whose lock this client holds (h69). When the apply thread
  // is awake (polling the post segments: `wake` has no sleep bit) the request is posted into this
  // client's segment like an item - (d + 1) << 32 | kResizeSlot - and the apply thread splits the
  // node when its scan takes the entry: no notification, hence no wake-up of the notify thread
  // (6.5 us of the 20-25 us a put that waited for a split took, h68). Dekker order with the
  // apply thread's sleep, as for a post: the entry, a seq_cst fence, then `wake` again; if the
  // thread went to sleep meanwhile, the entry is taken back (a compare-swap: if the thread's last
  // scan took it first, that scan splits the node) and the request notified as before - never
  // both, so the server sees the request once. *posted_at: the entry's offset when posted (the
  // waiting writer takes it back and notifies it if the thread has not taken it in
  // kResizeTakeBackUs: a polling thread that lost its core). A sleeping apply thread (and an
  // inline service, whose `wake` says deeply asleep), a region without post segments, a segment
  // with no free word in four probes, or WORT_CANRT_RESIZE_POST=0: notified, as before h69 (the
  // local backend's notify thread splits the node; ucx's resize thread).
  Status RequestResize(uint32_t d, uint64_t* posted_at) {
    static const bool kPostResizes = [] {
      const char* e = std::getenv("WORT_CANRT_RESIZE_POST");
      return !(e && std::string_view(e) == "0");
    }();
    if (segments_ && kPostResizes) {
      uint64_t w = 0;
      WORT_RETURN_IF_ERROR(c_->Read(kWakeOff, &w, 8));
      if (!(w & kAsleep)) {
        const uint64_t base = kPostOff + uint64_t(slot_) * kPostSegBytes;
        const uint64_t v = RingEntry(d, kResizeSlot);
        for (int probe = 0; probe < 4; ++probe) {
          const uint64_t off = base + 8ull * (ring_next_++ % kPostWords);
          uint64_t old = 1;
          WORT_RETURN_IF_ERROR(c_->CompareSwap64(off, 0, v, &old));
          if (old != 0) continue;
          std::atomic_thread_fence(std::memory_order_seq_cst);
          WORT_RETURN_IF_ERROR(c_->Read(kWakeOff, &w, 8));
          if (!(w & kAsleep)) return ++stats_.resize_posts, *posted_at = off, Status::OK();
          WORT_RETURN_IF_ERROR(c_->CompareSwap64(off, v, 0, &old));
          if (old != v) return ++stats_.resize_posts, Status::OK();  // taken by the thread's last scan
          break;
        }
      }
    }
    Message m{d, kResizeSlot};
    return c_->Notify(std::string_view(reinterpret_cast<const char*>(&m), sizeof m));
  }
  void Kick(uint32_t d, uint32_t what = kKickSlot) {
    ++stats_.kicks;
    Message m{d, what};
    if (!c_->Notify(std::string_view(reinterpret_cast<const char*>(&m), sizeof m)).ok()) ++stats_.notify_failures;
  }
  // Reads the whole prefix area of the current generation (re-sent on reorganisation: section
  // 3.1): at connect, and when the resize log cannot bring the copy up to date (RefreshIfNew).
  Status Refresh() {
    for (;;) {
      uint64_t st0, st1;
      WORT_RETURN_IF_ERROR(c_->Read(offsetof(RootHeader, state), &st0, 8));
      const uint64_t off = h_.area_off[GenOf(st0) & 1];
      AreaHeader ah;
      WORT_RETURN_IF_ERROR(c_->Read(off, &ah, sizeof ah));
      const uint64_t bytes = kAreaHeaderBytes + ah.nprefix * PrefixNodeBytes(h_.fanout);
      if (ah.fanout != h_.fanout || ah.height < 1 || bytes > h_.area_bytes) {
        WORT_RETURN_IF_ERROR(c_->Read(offsetof(RootHeader, state), &st1, 8));
        if (GenOf(st1) != GenOf(st0)) continue;  // the area was being rewritten
        return Status::Corruption("canrt: bad prefix area header");
      }
      area_.resize(bytes);
      WORT_RETURN_IF_ERROR(c_->Read(off, area_.data(), bytes));
      WORT_RETURN_IF_ERROR(c_->Read(offsetof(RootHeader, state), &st1, 8));
      if (GenOf(st1) != GenOf(st0)) continue;
      gen_ = GenOf(st0);
      break;
    }
    ++stats_.refreshes;
    ++stats_.full_refreshes;
    stats_.refresh_bytes += area_.size();
    order_built_ = false;  // the data nodes' key order: built when a scan needs it (BuildOrder)
    return Status::OK();
  }
  // Brings the copy from gen_ to generation g (read from `state` just before) with the resize
  // log (canrt_layout.h): one Read of the log entries gen_+1..g, one of the area header, one per
  // run of changed prefix nodes, then `state` again - still g: the valid area g and those
  // entries did not change while they were read (the next resize writes the other area, and its
  // entry's slot is not one of them). *done false: the log does not cover the gap (too old, an
  // entry missing or "full") - the caller re-reads the whole area. The copy is modified in place:
  // a failed validation leaves it unusable, and the caller's full refresh replaces it.
  Status RefreshFromLog(uint64_t g, bool* done) {
    *done = false;
    // WORT_CANRT_FULL_REFRESH=1: never from the log (the behaviour before the log, for
    // before/after measurements in one binary: doc/remote.md).
    static const bool kNoLog = [] {
      const char* e = std::getenv("WORT_CANRT_FULL_REFRESH");
      return e && *e == '1';
    }();
    if (kNoLog || g <= gen_ || g - gen_ >= kLogEntries) return Status::OK();
    const uint32_t n = static_cast<uint32_t>(g - gen_), first = static_cast<uint32_t>((gen_ + 1) % kLogEntries);
    LogEntry log[kLogEntries];
    const uint32_t head = std::min(n, kLogEntries - first);
    WORT_RETURN_IF_ERROR(c_->Read(kLogOff + first * sizeof(LogEntry), log, head * sizeof(LogEntry)));
    if (head < n) WORT_RETURN_IF_ERROR(c_->Read(kLogOff, log + head, (n - head) * sizeof(LogEntry)));
    for (uint32_t i = 0; i < n; ++i)
      if (log[i].gen != gen_ + 1 + i || log[i].full || log[i].nruns > kLogRuns) return Status::OK();
    const uint64_t off = h_.area_off[g & 1];
    const uint64_t nb = PrefixNodeBytes(h_.fanout);
    AreaHeader ah;
    WORT_RETURN_IF_ERROR(c_->Read(off, &ah, sizeof ah));
    const uint64_t bytes = kAreaHeaderBytes + ah.nprefix * nb;
    if (ah.fanout != h_.fanout || ah.height < 1 || bytes > h_.area_bytes || bytes < area_.size())
      return Status::OK();  // a torn or moving header: the full refresh sorts it out
    area_.resize(bytes);
    uint64_t read = sizeof ah;
    std::memcpy(area_.data(), &ah, sizeof ah);
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t r = 0; r < log[i].nruns; ++r) {
        const uint64_t lo = kAreaHeaderBytes + uint64_t(log[i].first[r]) * nb, len = uint64_t(log[i].count[r]) * nb;
        if (lo + len > bytes) return Status::OK();
        WORT_RETURN_IF_ERROR(c_->Read(off + lo, area_.data() + lo, len));
        read += len;
      }
    uint64_t st;
    WORT_RETURN_IF_ERROR(c_->Read(offsetof(RootHeader, state), &st, 8));
    if (GenOf(st) != g) return Status::OK();
    gen_ = g;
    ++stats_.refreshes;
    stats_.refresh_bytes += read;
    order_built_ = false;
    *done = true;
    return Status::OK();
  }
  // The data nodes in key order (order_) and each one's rank in it, from the current copy of the
  // prefix nodes. Only scans use them: built lazily, so that a writer's refresh after each split
  // does not walk the whole tree (the walk was 2.9% of a write-only run's profile, doc/remote.md).
  void BuildOrder() {
    if (order_built_) return;
    order_.clear();
    rank_.assign(View().header().ndata, 0);
    View().ForEachInOrder([&](uint32_t d) {
      if (d < rank_.size()) rank_[d] = order_.size();
      order_.push_back(d);
    });
    order_built_ = true;
  }
  Status RefreshIfNew(bool* changed) {
    uint64_t st;
    WORT_RETURN_IF_ERROR(c_->Read(offsetof(RootHeader, state), &st, 8));
    *changed = GenOf(st) != gen_;
    if (!*changed) return Status::OK();
    bool done;
    WORT_RETURN_IF_ERROR(RefreshFromLog(GenOf(st), &done));
    if (!done) WORT_RETURN_IF_ERROR(Refresh());
    bool lost;
    WORT_RETURN_IF_ERROR(Announce(&lost));
    if (!lost) return Status::OK();
    ++stats_.lease_lost;
    return Join();
  }

  // One Read of the whole data node (Algorithm 2); re-read while a live item fails its crc (a
  // slot freed and reused during the read). Then the node's state as readers must see it
  // (live_): the bitmap, plus the one item a client may have made durable without the server
  // having applied it yet - valid byte 1, complete (crc), its bit clear: an acknowledged write
  // (recovery would apply it), so a put's key takes that slot and a delete's key is absent.
  // Then the header (metadata word and apply counter) is read again: a Read is not atomic, and
  // an apply between the two reads - even one whose bitmap change a later apply undid (ABA) -
  // could otherwise give a view of the node that never existed (a key absent that was present
  // throughout, or an older version of a key after its Put returned). A changed bitmap or
  // counter means: read the node again. (Every ReadNode, not only those that met a lock or an
  // unapplied item: a writer can lock, write and be applied wholly between the two reads.)
  Status ReadNode(uint32_t d, bool* retired) {
    for (int attempt = 0;; ++attempt) {
      WORT_RETURN_IF_ERROR(c_->Read(NodeOff(d), node_.data(), node_.size()));
      std::memcpy(&meta_, node_.data(), 8);
      uint64_t applies;
      std::memcpy(&applies, node_.data() + 8, 8);
      *retired = meta_ & kRetired;
      bool ok = true;
      const uint64_t bits = meta_ & kBitmapMask;
      for (uint32_t s = 0; s < h_.capacity && ok; ++s) {
        if (!(bits >> s & 1)) continue;
        ok = Complete(ItemAt(s));
      }
      if (ok) {
        live_ = bits;
        for (uint32_t s = 0; s < h_.capacity; ++s) {
          const unsigned char* it = ItemAt(s);
          if ((bits >> s & 1) || it[kItemValid] != 1 || !Complete(it) ||
              (it[kItemOp] != kOpPut && it[kItemOp] != kOpDelete))
            continue;
          for (uint32_t j = 0; j < h_.capacity; ++j)
            if ((live_ >> j & 1) && SameKey(ItemAt(j), it)) live_ &= ~(1ull << j);
          if (it[kItemOp] == kOpPut) live_ |= 1ull << s;
        }
        uint64_t again[2];
        WORT_RETURN_IF_ERROR(c_->Read(NodeOff(d), again, 16));
        // The lock field alone may change (waiting writers count in it): that changes no item.
        if ((again[0] & ~kLockMask) == (meta_ & ~kLockMask) && again[1] == applies) return Status::OK();
      }
      ++stats_.reread;
      if (attempt > 100000) return Status::Corruption("canrt: data node " + std::to_string(d) + " never read consistently");
      Backoff(std::min(attempt, 4));
    }
  }
  bool Complete(const unsigned char* it) const {
    uint32_t crc;
    std::memcpy(&crc, it + kItemCrc, 4);
    return it[kItemKeyLen] <= kMaxKey && it[kItemValLen] <= kMaxValue && crc == ItemCrc(it);
  }
  static bool SameKey(const unsigned char* a, const unsigned char* b) {
    return a[kItemKeyLen] == b[kItemKeyLen] && std::memcmp(a + kItemKey, b + kItemKey, a[kItemKeyLen]) == 0;
  }
  int FindInNode(std::string_view key) const {
    const uint64_t bits = live_;
    for (uint32_t s = 0; s < h_.capacity; ++s) {
      if (!(bits >> s & 1)) continue;
      const unsigned char* it = ItemAt(s);
      if (it[kItemKeyLen] == key.size() && std::memcmp(it + kItemKey, key.data(), key.size()) == 0)
        return static_cast<int>(s);
    }
    return -1;
  }

  // A server that stops answering (killed, stopped) must not hang its clients: 10 s, or
  // WORT_CANRT_TIMEOUT_MS (tests that kill servers).
  static std::chrono::milliseconds ServerTimeout() {
    static const long ms = [] {
      const char* e = std::getenv("WORT_CANRT_TIMEOUT_MS");
      const long v = e ? std::atol(e) : 0;
      return v > 0 ? v : 10000L;
    }();
    return std::chrono::milliseconds(ms);
  }
  static Status Timeout(const char* what) {
    return Status::IOError("canrt: no progress from the server in " + std::to_string(ServerTimeout().count()) +
                           " ms (" + what + ")");
  }

  // Waits up to 2^min(attempt, 10) us (random). Waits under 64 us yield in a loop rather than
  // sleep: a sleep lasts at least the timer slack (about 50 us), and the usual wait - for the
  // server's apply of the previous write to the same node, which holds its lock - is a few us.
  void Backoff(int attempt) {
    const int e = std::min(attempt, 10);
    const uint64_t us = std::uniform_int_distribution<uint64_t>(0, (1ull << e))(rng_);
    if (us < 64) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
      do std::this_thread::yield();
      while (std::chrono::steady_clock::now() < until);
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    }
  }

  // Algorithm 1. For a delete, *found says whether the key was present (read under the lock).
  Status Write(uint8_t op, std::string_view key, std::string_view value, bool* found) {
    const auto deadline = std::chrono::steady_clock::now() + ServerTimeout();
    for (int attempt = 0;; ++attempt) {
      if (attempt % 64 == 63 && std::chrono::steady_clock::now() > deadline) return Timeout("locked data node");
      WORT_RETURN_IF_ERROR(LeaseCheck());
      const uint32_t d = View().Locate(key);
      const uint64_t meta_off = NodeOff(d);
      const uint64_t lock_off = meta_off + kLockWordOff;
      uint64_t old = 0;
      // Locking phase (canrt_layout.h, "Protocol of a write", step 1): the lock word holds the
      // lock field, the pending set and RETIRED; one fetch-add takes the lock and returns the
      // pending set of the instant it was taken.
      WORT_RETURN_IF_ERROR(c_->FetchAdd64(lock_off, kLockOne, &old));
      if (old & kRetired) {
        bool changed;
        WORT_RETURN_IF_ERROR(RefreshIfNew(&changed));
        if (!changed) Backoff(attempt);  // split in progress: the commit is a few persists away
        continue;
      }
      if (LockOf(old) != 0) {
        // Another writer is choosing a slot or writing its item (a few operations; no lock is
        // held for the server's apply), or waits for a split of this node. Undo this attempt:
        // the lock field counts outstanding attempts, and is 0 only when none is left.
        ++stats_.lock_retries;
        WORT_RETURN_IF_ERROR(Unlock(lock_off));
        Backoff(attempt);
        continue;
      }
      // Checking phase (step 2): the slots taken - applied (bitmap, read now: after the lock)
      // or durable and waiting for their apply (the pending set P from the fetch-add) - and
      // whether one of the pending items holds this key. P is a superset of the pending set
      // while this client holds the lock (only lock holders add bits); a slot of P applied
      // since is in the bitmap read after (the apply sets its bit before it clears the pending
      // one): a slot in neither is free.
      const uint64_t full = (1ull << h_.capacity) - 1;
      const uint64_t pend = old & full;
      uint64_t bits = 0;
      bool same_key_pending = false;
      if (op == kOpDelete) {
        // The node's items cannot change while we hold its lock (applies only move items from
        // pending to applied): one read says whether the key is there.
        bool retired;
        WORT_RETURN_IF_ERROR(ReadNode(d, &retired));
        *found = FindInNode(key) >= 0;
        bits = meta_ & kBitmapMask;
        for (uint32_t s = 0; s < h_.capacity && !same_key_pending; ++s)
          same_key_pending = (pend >> s & 1) && KeyIs(ItemAt(s), key);
      } else if (pend == 0) {
        uint64_t now = 0;
        WORT_RETURN_IF_ERROR(c_->Read(meta_off, &now, 8));
        bits = now & kBitmapMask;
      } else {
        // One Read: the header (bitmap) and the slots up to the last pending one.
        WORT_RETURN_IF_ERROR(PendingHolds(meta_off, pend, key, &bits, &same_key_pending));
      }
      const uint64_t taken = bits | pend;
      // Full with items pending (h57): if applying them frees a slot - a pending delete, or a
      // put of a key the node holds already (its older slot is freed) - wait for the apply
      // thread as for a key's earlier item (it usually keeps up: a few us); if not - new keys, as
      // sequential puts write - the node must be split anyway, and the resize applies them
      // itself (below), so ask at once. After 64 waits in a row, ask anyway (the resize applies
      // them and gives the lock back when the node is no longer full).
      bool frees = false;
      if (taken == full && pend != 0 && !same_key_pending && apply_waits_in_a_row_ < 64)
        WORT_RETURN_IF_ERROR(PendingFreesASlot(meta_off, bits, pend, &frees));
      if (same_key_pending || frees) {
        // This key's earlier item waits for its apply (at most one item per key waits:
        // canrt_layout.h, "pending set"), or the node's pending items free a slot once applied.
        // Unlock, wake the server, retry.
        ++stats_.apply_waits;
        WORT_RETURN_IF_ERROR(Unlock(lock_off));
        // A sleeping server is woken at once; at the 9th wait in a row the server is told
        // whatever `wake` says (h64): it names this node, whose pending set the server then
        // applies - also a batch whose post never came (its writer died between its release and
        // its post, canrt_layout.h step 6), which the apply thread's polling of the post segments
        // would never find. Both are repeated at waits 16, 32, 64, ... later (h66: before, every
        // 16th wait; a writer waiting for a stopped server sent hundreds, filled the local
        // socket's queue, and its blocking send never returned - the kill-test hang): a few
        // dozen notifications in the longest wait (up to the client's deadline). No write waits
        // for ever: the deadline above ends the loop.
        const uint32_t n = apply_waits_in_a_row_++;
        if (KickDue(n, 8)) {
          Kick(d, kWaitSlot);
        } else if (KickDue(n, 0)) {
          uint64_t w = 0;
          if (c_->Read(kWakeOff, &w, 8).ok() && (w & kAsleep)) Kick(d, kWaitSlot);
        }
        Backoff(attempt);
        continue;
      }
      apply_waits_in_a_row_ = 0;
      if (taken == full) {
        // Full: ask for the split while holding the lock - also when some of the slots are
        // pending (h57): the resize applies the node's pending items itself before it splits,
        // instead of this writer waiting for the apply thread (which one client putting
        // sequential keys outruns). If those applies freed slots (an update's or a delete's
        // older version), the server gives the lock back instead of splitting: retry.
        // (A delete of an absent key: nothing to write, and no free slot to write a no-op
        // into - the split is asked for anyway, then NotFound.)
        ++stats_.resize_requests;
        uint64_t posted_at = 0;  // the segment word of a posted request, until taken or notified
        WORT_RETURN_IF_ERROR(RequestResize(d, &posted_at));
        // The split takes 7-10 us of server time (doc/remote.md, "Resizes off the put's path
        // (h69)"): for the first kResizePollUs the lock word is read again after one yield (h69;
        // before, Backoff's random waits of up to 64 us - alone, this change did not move the
        // measured wait), then with Backoff (a server that has no core for a while).
        const auto asked = std::chrono::steady_clock::now();
        for (int w = 0;; ++w) {
          uint64_t cur;
          WORT_RETURN_IF_ERROR(c_->Read(lock_off, &cur, 8));
          if (cur & kRetired) break;
          if (LockOf(cur) == 0 && pend != 0) break;  // applied, not split (not full): retry
          if (LockOf(cur) == 0)
            return Status::PoolFull("canrt: data node " + std::to_string(d) +
                                    " is full and the server could not split it (see the server's log)");
          if (w % 64 == 63 && std::chrono::steady_clock::now() > deadline) {
            // A request still posted is taken back: a server that takes it later must not split
            // (or unlock) a node this writer no longer holds.
            uint64_t old = 0;
            if (posted_at != 0) (void)c_->CompareSwap64(posted_at, RingEntry(d, kResizeSlot), 0, &old);
            return Timeout("resize");
          }
          if (posted_at != 0 && std::chrono::steady_clock::now() - asked >= std::chrono::microseconds(kResizeTakeBackUs)) {
            // The apply thread has not taken the posted request yet: it lost its core (a
            // polling thread that has run a while waits longer for one than a woken thread).
            // Taken back, if still there (a compare-swap: else the thread took it), and notified.
            uint64_t old = 0;
            const uint64_t v = RingEntry(d, kResizeSlot);
            WORT_RETURN_IF_ERROR(c_->CompareSwap64(posted_at, v, 0, &old));
            posted_at = 0;
            if (old == v) {
              --stats_.resize_posts;
              ++stats_.resize_takebacks;
              Message m{d, kResizeSlot};
              WORT_RETURN_IF_ERROR(c_->Notify(std::string_view(reinterpret_cast<const char*>(&m), sizeof m)));
            }
          }
          if (std::chrono::steady_clock::now() - asked < std::chrono::microseconds(kResizePollUs))
            std::this_thread::yield();
          else
            Backoff(std::min(w, 6));
        }
        if (op == kOpDelete && !*found) return Status::OK();
        bool changed;
        WORT_RETURN_IF_ERROR(RefreshIfNew(&changed));
        continue;
      }
      // Writing phase: the first free slot.
      const uint32_t slot = static_cast<uint32_t>(__builtin_ctzll(~taken));
      unsigned char item[kItemBytes] = {};
      item[kItemOp] = op;
      item[kItemKeyLen] = static_cast<uint8_t>(key.size());
      item[kItemValLen] = static_cast<uint8_t>(value.size());
      // (A delete's value, and an empty key, may be a view with no data: memcpy of a null
      // pointer is undefined even for 0 bytes - the ASan+UBSan build stopped here.)
      if (!key.empty()) std::memcpy(item + kItemKey, key.data(), key.size());
      if (!value.empty()) std::memcpy(item + kItemValue, value.data(), value.size());
      const uint32_t crc = ItemCrc(item);
      std::memcpy(item + kItemCrc, &crc, 4);
      item[kItemValid] = 1;
      const uint64_t item_off = meta_off + 64 + uint64_t(slot) * kItemBytes;
      WORT_RETURN_IF_ERROR(c_->Write(item_off, item, kItemBytes));
      // Durable through the transport (local: this client writes the line back itself; ucx:
      // remote-completion flush + read-after-write - transport.h says what each guarantees).
      // From here the write survives a crash of the server: recovery applies every complete
      // item whose valid byte is set. Every reader already sees the item (ReadNode).
      WORT_RETURN_IF_ERROR(c_->Persist(item_off, kItemBytes));
      ++stats_.client_active;
      // Step 5: pending (the next lock holder leaves the slot alone, and waits before it writes
      // this key again) and unlocked in ONE fetch-add - bit `slot` is 0 in the word (outside P,
      // and only lock holders set bits), so adding it sets it. The server applies the item in
      // the background; the next write to this node does not wait for that apply.
      uint64_t was = 0;
      WORT_RETURN_IF_ERROR(c_->FetchAdd64(lock_off, (1ull << slot) - kLockOne, &was));
      if (LockOf(was) == 0) {
        // The lock field was reset under us (a restarted server's recovery zeroes the lock word):
        // our -1 wrapped it; give it back. The item is durable and posted below either way.
        uint64_t again = 0;  // (not `was`: the pending set the release found decides the post)
        WORT_RETURN_IF_ERROR(c_->FetchAdd64(lock_off, kLockOne, &again));
      }
      // Step 6, one post per node (h64): only the release that found the node's pending set empty
      // posts; one that found items pending joins their batch - the apply of the batch's post
      // re-reads the lock word until it finds the set empty, so it applies this item too
      // (canrt_layout.h). A put then costs no post (a compare-swap into a line the apply thread
      // polls and clears, and a Read of `wake`) while its node's batch is open: sequential keys.
      if ((was & full) != 0) {
        ++stats_.posts_skipped;
        return Status::OK();
      }
      Post(d, slot);
      return Status::OK();
    }
  }

  // Whether wait n of a run of waits (0, 1, ...) repeats the notification first sent at wait
  // `first`: at first, then 16, 32, 64, ... waits after it (h66).
  static bool KickDue(uint32_t n, uint32_t first) {
    if (n < first) return false;
    const uint32_t d = n - first;
    return d == 0 || (d >= 16 && (d & (d - 1)) == 0);
  }
  static bool KeyIs(const unsigned char* it, std::string_view key) {
    return it[kItemKeyLen] == key.size() && std::memcmp(it + kItemKey, key.data(), key.size()) == 0;
  }
  // The bitmap of the node at meta_off (*bits) and whether one of the pending slots `pend` holds
  // `key`: one Read of the header line and the slots up to the last pending one. (A pending item
  // is complete - its bit is set after its Persist - and its key bytes stay until the slot is
  // free again.)
  Status PendingHolds(uint64_t meta_off, uint64_t pend, std::string_view key, uint64_t* bits, bool* holds) {
    const uint32_t hi = 63 - static_cast<uint32_t>(__builtin_clzll(pend));
    unsigned char* buf = reinterpret_cast<unsigned char*>(node_.data());
    WORT_RETURN_IF_ERROR(c_->Read(meta_off, buf, 64 + uint64_t(hi + 1) * kItemBytes));
    uint64_t w0;
    std::memcpy(&w0, buf, 8);
    *bits = w0 & kBitmapMask;
    *holds = false;
    for (uint32_t s = 0; s <= hi && !*holds; ++s) *holds = (pend >> s & 1) && KeyIs(buf + 64 + uint64_t(s) * kItemBytes, key);
    return Status::OK();
  }
  // Whether applying the pending items `pend` of the full node at meta_off (applied slots `bits`)
  // frees a slot: a pending delete item, or a pending put of a key an applied slot holds. One
  // Read of the whole node (only when a writer finds its node full with items pending).
  Status PendingFreesASlot(uint64_t meta_off, uint64_t bits, uint64_t pend, bool* frees) {
    WORT_RETURN_IF_ERROR(c_->Read(meta_off, node_.data(), node_.size()));
    *frees = false;
    for (uint32_t s = 0; s < h_.capacity && !*frees; ++s) {
      if (!(pend >> s & 1)) continue;
      const unsigned char* it = ItemAt(s);
      if (it[kItemOp] == kOpDelete) *frees = true;
      for (uint32_t j = 0; j < h_.capacity && !*frees; ++j) *frees = (bits >> j & 1) && SameKey(ItemAt(j), it);
    }
    return Status::OK();
  }
  // Gives back this client's +1 in the lock field of the lock word at lock_off (its failed
  // attempt, or the lock it holds and does not use).
  Status Unlock(uint64_t lock_off) {
    uint64_t was = 0;
    WORT_RETURN_IF_ERROR(c_->FetchAdd64(lock_off, 0 - kLockOne, &was));
    // Lock field 0 before our -1: a restarted server's recovery zeroed the lock word meanwhile,
    // and the -1 wrapped it (the node would look locked for ever): give it back.
    if (LockOf(was) == 0) return c_->FetchAdd64(lock_off, kLockOne, &was);
    return Status::OK();
  }

  static constexpr int kPostWaitUs = 20;
  // How long a writer that asked for a split re-reads its node's lock word after one yield each time
  // before it backs off (h69; the split takes about 10 us of server time).
  static constexpr int kResizePollUs = 200;
  // How long a posted resize request waits for the apply thread's scan before the writer takes it
  // back and notifies it (h69).
  static constexpr int kResizeTakeBackUs = 30;
  std::unique_ptr<remote::Connection> c_;
  int slot_ = -1;            // this client's slot in the region's client table
  uint64_t slot_word_ = 0;   // what this client last stored there (SlotWord)
  uint64_t beat_ = 0;        // heartbeat: bumped by every announcement (a renewal)
  std::chrono::milliseconds lease_{0};  // the server's lease (0: never expires)
  std::chrono::steady_clock::time_point renewed_;
  uint32_t ring_next_ = 0;   // the ring (or segment) word this client tries first
  bool segments_ = false;    // the pool has per-client post segments (HasPostSegments)
  uint32_t apply_waits_in_a_row_ = 0;
  std::mt19937_64 rng_;
  RootHeader h_{};
  uint64_t gen_ = 0;
  std::vector<char> area_;
  std::vector<uint32_t> order_;
  std::vector<size_t> rank_;
  bool order_built_ = false;
  std::vector<char> node_;
  uint64_t meta_ = 0;
  uint64_t live_ = 0;  // the slots readers see (ReadNode)
  ClientStats stats_;
};

}  // namespace

Status ConnectOver(std::unique_ptr<remote::Connection> conn, std::unique_ptr<remote::RemoteKV>* out) {
  auto c = std::make_unique<Client>(std::move(conn));
  WORT_RETURN_IF_ERROR(c->Init());
  *out = std::move(c);
  return Status::OK();
}

Status Connect(const remote::RegionInfo& info, std::unique_ptr<remote::RemoteKV>* out) {
  std::unique_ptr<remote::Connection> conn;
  WORT_RETURN_IF_ERROR(remote::Connect(info, &conn));
  return ConnectOver(std::move(conn), out);
}

ClientStats GetClientStats(const remote::RemoteKV& kv) {
  const Client* c = dynamic_cast<const Client*>(&kv);
  return c ? c->stats() : ClientStats{};
}

bool GetClientPrefixCopy(const remote::RemoteKV& kv, uint64_t* generation, std::string* area) {
  const Client* c = dynamic_cast<const Client*>(&kv);
  if (!c) return false;
  *generation = c->generation();
  area->assign(c->area().data(), c->area().size());
  return true;
}

}  // namespace wort::canrt
