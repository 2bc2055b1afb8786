// src/remote/reply_kv.cc - WORT/WOART served by request/reply (see reply_kv.h for the protocol).
#include "remote/reply_kv.h"

#include <emmintrin.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "util/crc32c.h"
#include "wort/kv.h"

namespace wort::remote {
namespace {

constexpr std::uint64_t kMagic = 0x31474e49'52525457ull;  // "WTRRING1"
constexpr std::uint64_t kBitmapOff = 64;
constexpr std::uint64_t kSlotsOff = 4096;
constexpr std::uint64_t kSlotBytes = kReplyRequestBytes + kReplyReplyBytes;
constexpr std::uint64_t kRegionBytes = kSlotsOff + kReplyMaxClients * kSlotBytes;
static_assert(kReplyMaxClients <= 64, "one bitmap word");

enum Op : std::uint32_t { kPut = 1, kGet = 2, kRemove = 3, kScan = 4 };

struct RingHeader {
  std::uint64_t magic, version, max_clients, slot_bytes, request_bytes, reply_bytes;
};

struct MsgHeader {
  std::uint64_t seq;
  std::uint32_t len;  // payload bytes
  std::uint32_t op;   // request: Op; reply: the Status code
  std::uint64_t crc;
};
static_assert(sizeof(MsgHeader) == 24);
constexpr std::size_t kMaxRequestPayload = kReplyRequestBytes - sizeof(MsgHeader);
constexpr std::size_t kMaxReplyPayload = kReplyReplyBytes - sizeof(MsgHeader);

std::uint64_t MsgCrc(const MsgHeader& h, const char* payload) {
  return Crc64(payload, h.len, Crc64(&h, offsetof(MsgHeader, crc)));
}

void PutU32(std::string* s, std::uint32_t v) { s->append(reinterpret_cast<const char*>(&v), 4); }
void PutU64(std::string* s, std::uint64_t v) { s->append(reinterpret_cast<const char*>(&v), 8); }
// Reads a u32 / u64 / byte string from `in`, advancing it; false if it runs out.
bool GetU32(std::string_view* in, std::uint32_t* v) {
  if (in->size() < 4) return false;
  std::memcpy(v, in->data(), 4);
  in->remove_prefix(4);
  return true;
}
bool GetU64(std::string_view* in, std::uint64_t* v) {
  if (in->size() < 8) return false;
  std::memcpy(v, in->data(), 8);
  in->remove_prefix(8);
  return true;
}
bool GetBytes(std::string_view* in, std::string_view* out) {
  std::uint32_t n;
  if (!GetU32(in, &n) || in->size() < n) return false;
  *out = in->substr(0, n);
  in->remove_prefix(n);
  return true;
}
void PutBytes(std::string* s, std::string_view b) {
  PutU32(s, static_cast<std::uint32_t>(b.size()));
  s->append(b);
}

// ---- server -----------------------------------------------------------------------------------
class ReplyService final : public RemoteService {
 public:
  ~ReplyService() override { (void)Stop(); }

  Status Start(const ServeOptions& opts, const std::string& kind) {
    kind_ = kind;
    if (opts.pool.empty()) return Status::InvalidArgument("reply-" + kind + ": no pool path given");
    KvConfig cfg;
    cfg.path = opts.pool;
    cfg.size = opts.pool_size;
    cfg.kind = kind;
    WORT_RETURN_IF_ERROR(KvStore::Open(cfg, &store_));
    ring_path_ = opts.pool + ".rings";
    int fd = ::open(ring_path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Status::IOError("reply-" + kind + ": create " + ring_path_ + ": " + std::strerror(errno));
    if (::ftruncate(fd, static_cast<off_t>(kRegionBytes)) != 0) {
      ::close(fd);
      return Status::IOError("reply-" + kind + ": size " + ring_path_ + ": " + std::strerror(errno));
    }
    void* m = ::mmap(nullptr, kRegionBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) return Status::IOError("reply-" + kind + ": mmap " + ring_path_ + ": " + std::strerror(errno));
    base_ = static_cast<char*>(m);
    RingHeader h{kMagic, 1, kReplyMaxClients, kSlotBytes, kReplyRequestBytes, kReplyReplyBytes};
    std::memcpy(base_, &h, sizeof h);
    WORT_RETURN_IF_ERROR(Listen(opts.backend, base_, kRegionBytes, ring_path_, nullptr, &server_));
    last_seq_.assign(kReplyMaxClients, 0);
    thread_ = std::thread([this] { Poll(); });
    return Status::OK();
  }

  RegionInfo info() const override { return server_->info(); }
  std::string design() const override { return "reply-" + kind_; }
  std::uint64_t requests_served() const override { return served_.load(std::memory_order_relaxed); }

  Status Stop() override {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    if (server_) server_->Stop();
    server_.reset();
    if (base_ != nullptr) {
      ::munmap(base_, kRegionBytes);
      ::unlink(ring_path_.c_str());
      base_ = nullptr;
    }
    Status s;
    if (store_) s = store_->Close();
    store_.reset();
    return s;
  }

 private:
  char* Slot(std::uint64_t i) const { return base_ + kSlotsOff + i * kSlotBytes; }

  void Poll() {
    std::vector<char> req(kReplyRequestBytes);
    std::string reply;
    auto idle_since = std::chrono::steady_clock::now();
    std::uint64_t idle_rounds = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
      std::uint64_t owned = std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(base_ + kBitmapOff))
                                .load(std::memory_order_acquire);
      bool served = false;
      for (std::uint64_t i = 0; i < kReplyMaxClients; ++i) {
        if ((owned >> i & 1) == 0) continue;
        char* slot = Slot(i);
        std::uint64_t seq = std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(slot)).load(std::memory_order_acquire);
        if (seq == last_seq_[i] || seq == 0) continue;
        // Snapshot the request, then check it is whole (the client's Write may still be landing).
        MsgHeader h;
        CopyFromRegion(reinterpret_cast<char*>(&h), slot, sizeof h);  // the client may be writing it
        if (h.seq != seq || h.len > kMaxRequestPayload) continue;
        CopyFromRegion(req.data(), slot + sizeof h, h.len);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (MsgCrc(h, req.data()) != h.crc) continue;
        reply.clear();
        Code code = Execute(static_cast<Op>(h.op), std::string_view(req.data(), h.len), &reply);
        last_seq_[i] = seq;
        WriteReply(slot + kReplyRequestBytes, seq, code, reply);
        served_.fetch_add(1, std::memory_order_relaxed);
        served = true;
      }
      if (served) {
        idle_rounds = 0;
        idle_since = std::chrono::steady_clock::now();
        continue;
      }
      if (++idle_rounds < 2048) {
        _mm_pause();
        continue;
      }
      auto idle = std::chrono::steady_clock::now() - idle_since;
      if (idle < std::chrono::microseconds(50)) {
        _mm_pause();
      } else if (idle < std::chrono::milliseconds(100)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  }

  static void WriteReply(char* at, std::uint64_t seq, Code code, const std::string& payload) {
    MsgHeader h{seq, static_cast<std::uint32_t>(payload.size()), static_cast<std::uint32_t>(code), 0};
    h.crc = MsgCrc(h, payload.data());
    CopyToRegion(at + sizeof h, payload.data(), payload.size());  // the client may be polling it
    CopyToRegion(at + 8, reinterpret_cast<const char*>(&h) + 8, sizeof h - 8);
    std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(at)).store(seq, std::memory_order_release);
  }

  // Runs one request; the reply payload goes to *out (an error's message, a value, scan pairs).
  Code Execute(Op op, std::string_view in, std::string* out) {
    Status s;
    switch (op) {
      case kPut: {
        std::string_view key;
        if (!GetBytes(&in, &key)) return Malformed(out);
        s = store_->Put(key, in);
        break;
      }
      case kGet: {
        std::string v;
        s = store_->Get(in, &v);
        if (s.ok() && v.size() > kMaxReplyPayload) s = Status::InvalidArgument("value larger than the reply area");
        if (s.ok()) *out = std::move(v);
        break;
      }
      case kRemove:
        s = store_->Remove(in);
        break;
      case kScan: {
        std::uint32_t flags;
        std::string_view start, end;
        std::uint64_t limit;
        if (!GetU32(&in, &flags) || !GetBytes(&in, &start) || !GetBytes(&in, &end) || !GetU64(&in, &limit)) {
          return Malformed(out);
        }
        out->assign(4, '\0');  // "more" flag, set below
        std::uint32_t more = 0;
        std::optional<std::string_view> e;
        if (flags & 1) e = end;
        s = store_->Scan(
            start, e,
            [&](std::string_view k, std::string_view v) {
              if (out->size() + 8 + k.size() + v.size() > kMaxReplyPayload) {
                more = 1;
                return false;
              }
              PutBytes(out, k);
              PutBytes(out, v);
              return true;
            },
            limit == 0 ? ~std::size_t{0} : limit);
        std::memcpy(out->data(), &more, 4);
        if (s.ok() && more == 1 && out->size() == 4) s = Status::InvalidArgument("a pair larger than the reply area");
        break;
      }
      default:
        return Malformed(out);
    }
    if (!s.ok()) out->assign(s.message());
    return s.code();
  }
  static Code Malformed(std::string* out) {
    out->assign("malformed request");
    return Code::kInvalidArgument;
  }

  std::string kind_;
  std::unique_ptr<KvStore> store_;
  std::string ring_path_;
  char* base_ = nullptr;
  std::unique_ptr<Server> server_;
  std::vector<std::uint64_t> last_seq_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> served_{0};
  std::thread thread_;
};

// ---- client -----------------------------------------------------------------------------------
class ReplyKV final : public RemoteKV {
 public:
  explicit ReplyKV(std::string kind) : kind_(std::move(kind)) {}
  ~ReplyKV() override {
    if (conn_ && slot_ >= 0) {
      // Release the slot: clear our bit (CAS loop; other clients change other bits).
      std::uint64_t cur = 0, old = 0;
      if (conn_->Read(kBitmapOff, &cur, 8).ok()) {
        for (int tries = 0; tries < 1000; ++tries) {
          if (!conn_->CompareSwap64(kBitmapOff, cur, cur & ~(1ull << slot_), &old).ok() || old == cur) break;
          cur = old;
        }
      }
    }
  }

  Status Open(const RegionInfo& info) {
    WORT_RETURN_IF_ERROR(Connect(info, &conn_));
    RingHeader h{};
    WORT_RETURN_IF_ERROR(conn_->Read(0, &h, sizeof h));
    if (h.magic != kMagic || h.max_clients != kReplyMaxClients || h.slot_bytes != kSlotBytes ||
        h.request_bytes != kReplyRequestBytes || h.reply_bytes != kReplyReplyBytes) {
      return Status::Corruption("reply-" + kind_ + ": the region is not a request/reply ring of this version");
    }
    std::uint64_t cur = 0, old = 0;
    WORT_RETURN_IF_ERROR(conn_->Read(kBitmapOff, &cur, 8));
    for (;;) {
      if (cur == ~0ull) return Status::Busy("reply-" + kind_ + ": all 64 client slots are taken");
      int bit = __builtin_ctzll(~cur);
      WORT_RETURN_IF_ERROR(conn_->CompareSwap64(kBitmapOff, cur, cur | (1ull << bit), &old));
      if (old == cur) {
        slot_ = bit;
        break;
      }
      cur = old;
    }
    req_off_ = kSlotsOff + static_cast<std::uint64_t>(slot_) * kSlotBytes;
    reply_off_ = req_off_ + kReplyRequestBytes;
    WORT_RETURN_IF_ERROR(conn_->Read(req_off_, &seq_, 8));
    return Status::OK();
  }

  Status Put(std::string_view key, std::string_view value) override {
    if (key.size() + value.size() + 4 > kMaxRequestPayload) {
      return Status::InvalidArgument("reply-" + kind_ + ": key + value of " + std::to_string(key.size() + value.size()) +
                                     " bytes do not fit the request area (" + std::to_string(kMaxRequestPayload - 4) + ")");
    }
    std::string p;
    PutBytes(&p, key);
    p.append(value);
    std::string r;
    return Call(kPut, p, &r);
  }
  Status Get(std::string_view key, std::string* value) override {
    WORT_RETURN_IF_ERROR(CheckKey(key));
    std::string r;
    WORT_RETURN_IF_ERROR(Call(kGet, key, &r));
    *value = std::move(r);
    return Status::OK();
  }
  Status Remove(std::string_view key) override {
    WORT_RETURN_IF_ERROR(CheckKey(key));
    std::string r;
    return Call(kRemove, key, &r);
  }
  Status Scan(std::string_view start, std::string_view end, std::size_t limit,
              const std::function<bool(std::string_view, std::string_view)>& fn) override {
    std::string from(start);
    if (from.size() + end.size() + 20 > kMaxRequestPayload) return Status::InvalidArgument("reply-" + kind_ + ": scan bounds too long");
    std::size_t given = 0;
    for (;;) {
      std::string p;
      PutU32(&p, end.empty() ? 0 : 1);  // end "" = no upper bound
      PutBytes(&p, from);
      PutBytes(&p, end);
      PutU64(&p, limit == 0 ? 0 : limit - given);
      std::string r;
      WORT_RETURN_IF_ERROR(Call(kScan, p, &r));
      std::string_view in(r);
      std::uint32_t more = 0;
      if (!GetU32(&in, &more)) return Status::Corruption("reply-" + kind_ + ": short scan reply");
      std::string_view k, v, last;
      while (!in.empty()) {
        if (!GetBytes(&in, &k) || !GetBytes(&in, &v)) return Status::Corruption("reply-" + kind_ + ": malformed scan reply");
        ++given;
        last = k;
        if (!fn(k, v)) return Status::OK();
        if (limit != 0 && given >= limit) return Status::OK();
      }
      if (more == 0) return Status::OK();
      from.assign(last);
      from.push_back('\0');  // the smallest key after `last`
    }
  }
  std::string name() const override { return "reply-" + kind_; }
  Connection::Counters transport_counters() const override { return conn_->counters(); }

 private:
  Status CheckKey(std::string_view key) const {
    if (key.size() > kMaxRequestPayload) return Status::InvalidArgument("reply-" + kind_ + ": key too long");
    return Status::OK();
  }

  // One request/reply round: ONE Write of the request, Reads of the reply until it is whole.
  Status Call(Op op, std::string_view payload, std::string* reply) {
    std::string buf(sizeof(MsgHeader) + payload.size(), '\0');
    MsgHeader h{++seq_, static_cast<std::uint32_t>(payload.size()), op, 0};
    if (!payload.empty()) std::memcpy(buf.data() + sizeof h, payload.data(), payload.size());  // no null source
    h.crc = MsgCrc(h, buf.data() + sizeof h);
    std::memcpy(buf.data(), &h, sizeof h);
    WORT_RETURN_IF_ERROR(conn_->Write(req_off_, buf.data(), buf.size()));
    constexpr std::size_t kFirstRead = 512;
    rbuf_.resize(kReplyReplyBytes);
    const auto sent = std::chrono::steady_clock::now();
    const auto deadline = sent + std::chrono::seconds(30);
    for (std::uint64_t polls = 0;; ++polls) {
      const auto before = std::chrono::steady_clock::now();
      WORT_RETURN_IF_ERROR(conn_->Read(reply_off_, rbuf_.data(), kFirstRead));
      const auto now = std::chrono::steady_clock::now();
      MsgHeader r;
      std::memcpy(&r, rbuf_.data(), sizeof r);
      if (r.seq == h.seq && r.len <= kMaxReplyPayload) {
        if (sizeof r + r.len > kFirstRead) {
          WORT_RETURN_IF_ERROR(conn_->Read(reply_off_ + kFirstRead, rbuf_.data() + kFirstRead, sizeof r + r.len - kFirstRead));
        }
        if (MsgCrc(r, rbuf_.data() + sizeof r) == r.crc) {
          std::string body(rbuf_.data() + sizeof r, r.len);
          if (r.op == static_cast<std::uint32_t>(Code::kOk)) {
            *reply = std::move(body);
            return Status::OK();
          }
          return Status(static_cast<Code>(r.op), std::move(body));
        }
      }
      // Polling: a cheap Read (the local backend: a memcpy) is repeated back-to-back, yielding
      // every 64 polls. An expensive one (> 2 us: ucx over sm/tcp with a registered pool mapping
      // emulates it on the server's progress thread, costing server CPU) is repeated at once for
      // the first 100 us, then after sleeps of 5-50 us: a client spinning on such Reads would
      // take the CPU the server needs to answer it.
      if (now > deadline) return Status::IOError("reply-" + kind_ + ": no reply from the server within 30 s");
      if (now - before > std::chrono::microseconds(2)) {
        if (now - sent > std::chrono::microseconds(100)) {
          std::this_thread::sleep_for(std::chrono::microseconds(polls < 64 ? 5 : 50));
        }
      } else if (polls % 64 == 63) {
        std::this_thread::yield();
      } else {
        _mm_pause();
      }
    }
  }

  std::string kind_;
  std::unique_ptr<Connection> conn_;
  int slot_ = -1;
  std::uint64_t req_off_ = 0, reply_off_ = 0, seq_ = 0;
  std::vector<char> rbuf_;
};

Status CheckKind(const std::string& kind) {
  if (kind != "wort" && kind != "woart") {
    return Status::InvalidArgument("reply: index kind '" + kind + "' is not a baseline of the paper (wort, woart)");
  }
  return Status::OK();
}

}  // namespace

Status ServeReply(const ServeOptions& opts, const std::string& kind, std::unique_ptr<RemoteService>* out) {
  WORT_RETURN_IF_ERROR(CheckKind(kind));
  auto s = std::make_unique<ReplyService>();
  WORT_RETURN_IF_ERROR(s->Start(opts, kind));
  *out = std::move(s);
  return Status::OK();
}

Status ConnectReply(const RegionInfo& info, const std::string& kind, std::unique_ptr<RemoteKV>* out) {
  WORT_RETURN_IF_ERROR(CheckKind(kind));
  auto c = std::make_unique<ReplyKV>(kind);
  WORT_RETURN_IF_ERROR(c->Open(info));
  *out = std::move(c);
  return Status::OK();
}

}  // namespace wort::remote
