// src/remote/ucx.cc - the "ucx" backend of the transport (src/remote/transport.h), on UCX's UCP
// API (Debian libucx-dev).
//
// Server: one UCP context and worker. The region - memory the caller owns, e.g. a pool's
// mapping - is registered with ucp_mem_map (address + length: the existing memory, not a copy)
// and its rkey packed once. A bootstrap TCP socket on 127.0.0.1 (ephemeral port; the address is
// "127.0.0.1:<port>") hands each client: its client id, the region's base address and size, the
// server worker's address and the packed rkey; it receives the client's worker address (only to
// complete the exchange: UCP's wire-up creates the server's side of the endpoint by itself).
// A progress thread drives the worker: it runs the Notify handler (an active message, id
// kAmId, header = the client id) and, with UCX_TLS=tcp, the software emulation of the one-sided
// operations (the target must progress). It sleeps in poll() on the worker's event fd
// (UCP_FEATURE_WAKEUP, ucp_worker_arm) rather than spinning, with a 100 ms safety timeout.
// ServerSide() is a client Connection of the server's own process through the same transport.
//
// Client (Connection): its own UCP context and worker (UCS_THREAD_MODE_SINGLE: one thread at a
// time per Connection, as the interface says) and one endpoint to the server's worker. Every
// call waits for its request (progressing its worker; after ~20 us it sleeps on the worker's
// event fd between rounds, see Wait). Write is ucp_put_nbx followed by
// ucp_ep_flush_nbx, so it is complete at the target when it returns (the interface's rule).
// FetchAdd64/CompareSwap64 are ucp_atomic_op_nbx (ADD, CSWAP) with a reply buffer. Notify is
// ucp_am_send_nbx with UCP_AM_SEND_FLAG_EAGER (messages up to kMaxNotifyLen; never rendezvous).
//
// UCX_TLS is read from the environment when each context is created, so a process can run one
// Server/Connection over sm and the next over tcp (the tests do).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "remote/backend.h"

namespace wort::remote {
namespace {

constexpr unsigned kAmId = 7;

Status UcsError(const std::string& what, ucs_status_t st) {
  return Status::IOError("remote ucx: " + what + ": " + ucs_status_string(st));
}
std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// ---- bootstrap socket helpers -----------------------------------------------------------------
bool SendAll(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}
bool RecvAll(int fd, void* p, std::size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t k = ::recv(fd, c, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}
bool SendBlob(int fd, const void* p, std::uint32_t n) { return SendAll(fd, &n, 4) && SendAll(fd, p, n); }
bool RecvBlob(int fd, std::string* out) {
  std::uint32_t n = 0;
  if (!RecvAll(fd, &n, 4) || n > (1u << 20)) return false;
  out->resize(n);
  return RecvAll(fd, out->data(), n);
}

// A UCP context with the features both sides use (WAKEUP: both sleep on the worker's event fd
// when idle); UCX_TLS etc. from the environment.
Status MakeContext(ucp_context_h* ctx) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return UcsError("ucp_config_read", st);
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  st = ucp_init(&p, config, ctx);
  ucp_config_release(config);
  if (st != UCS_OK) return UcsError("ucp_init", st);
  return Status::OK();
}

Status MakeWorker(ucp_context_h ctx, ucs_thread_mode_t mode, ucp_worker_h* w) {
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = mode;
  ucs_status_t st = ucp_worker_create(ctx, &wp, w);
  if (st != UCS_OK) return UcsError("ucp_worker_create", st);
  return Status::OK();
}

// Waits for a request returned by a *_nbx call and frees it: progresses the worker back-to-back
// for the first ~20 us (a one-sided op on a real RDMA or shared-memory path is done by then),
// then sleeps in poll() on the worker's event fd between progress rounds (when `efd` >= 0): on
// an emulated path (the target's progress thread executes the op) a spinning client would take
// the CPU the target needs, which on a 2-core machine doubles the latency.
ucs_status_t Wait(ucp_worker_h w, ucs_status_ptr_t req, int efd = -1,
                  std::chrono::milliseconds timeout = std::chrono::milliseconds::max()) {
  if (req == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(req)) return UCS_PTR_STATUS(req);
  ucs_status_t st;
  // The clock starts at the first round after the busy phase. (It used to start only at exactly
  // round 64: when the worker made progress in that round, `start` stayed at the clock's epoch,
  // the wait seemed to have lasted the machine's uptime, and the op failed at once with "Operation
  // timed out" - the flaky ucx tests and CANRT over ucx failing from ~30,000 records.)
  std::optional<std::chrono::steady_clock::time_point> start;
  for (std::uint64_t spins = 0; (st = ucp_request_check_status(req)) == UCS_INPROGRESS; ++spins) {
    if (ucp_worker_progress(w) != 0 || spins < 64) continue;
    if (!start) start = std::chrono::steady_clock::now();
    if (spins % 16 != 0) continue;
    auto waited = std::chrono::steady_clock::now() - *start;
    // A request that never completes (the server's worker is gone, and UCX over sm cannot tell):
    // left to UCX (the endpoint's close purges it); the caller fails the connection.
    if (waited > timeout) return UCS_ERR_TIMED_OUT;
    if (efd < 0 || waited < std::chrono::microseconds(20)) continue;
    if (ucp_worker_arm(w) == UCS_OK) {
      pollfd p{efd, POLLIN, 0};
      ::poll(&p, 1, 1);
    }
  }
  ucp_request_free(req);
  return st;
}

// How long a client waits for one operation before it declares the server gone (IOError, and
// every later call of that Connection fails at once): WORT_UCX_TIMEOUT_MS, default 10 s.
std::chrono::milliseconds OpTimeout() {
  const char* e = std::getenv("WORT_UCX_TIMEOUT_MS");
  long v = e != nullptr ? std::atol(e) : 0;
  return std::chrono::milliseconds(v > 0 ? v : 10000);
}

// ---- client -----------------------------------------------------------------------------------
class UcxConnection final : public Connection {
 public:
  ~UcxConnection() override {
    if (rkey_ != nullptr) ucp_rkey_destroy(rkey_);
    if (ep_ != nullptr) {
      // A graceful close (flush, then tell the server's worker the endpoint is gone): a forced
      // close leaves the server's side of the endpoint sending wire-up messages to nobody. With
      // the server gone (broken_), a forced close, not waited for long.
      ucp_request_param_t p{};
      if (broken_) {
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      }
      Wait(worker_, ucp_ep_close_nbx(ep_, &p), efd_, broken_ ? std::chrono::milliseconds(100) : timeout_);
    }
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    if (ctx_ != nullptr) ucp_cleanup(ctx_);
  }

  Status Open(const RegionInfo& info) {
    std::size_t colon = info.address.rfind(':');
    if (colon == std::string::npos) return Status::InvalidArgument("remote ucx: address '" + info.address + "' is not host:port");
    std::string host = info.address.substr(0, colon);
    int port = 0;
    try {
      port = std::stoi(info.address.substr(colon + 1));
    } catch (...) {
      port = -1;
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    if (port <= 0 || port > 65535 || ::inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
      return Status::InvalidArgument("remote ucx: address '" + info.address + "' is not IPv4 host:port");
    }
    sa.sin_port = htons(static_cast<std::uint16_t>(port));
    WORT_RETURN_IF_ERROR(MakeContext(&ctx_));
    WORT_RETURN_IF_ERROR(MakeWorker(ctx_, UCS_THREAD_MODE_SINGLE, &worker_));
    if (ucp_worker_get_efd(worker_, &efd_) != UCS_OK) efd_ = -1;  // then Wait only spins
    ucp_address_t* addr = nullptr;
    std::size_t addr_len = 0;
    ucs_status_t st = ucp_worker_get_address(worker_, &addr, &addr_len);
    if (st != UCS_OK) return UcsError("ucp_worker_get_address", st);
    std::string my_addr(reinterpret_cast<const char*>(addr), addr_len);
    ucp_worker_release_address(worker_, addr);

    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::IOError(Errno("remote ucx: socket"));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      Status s = Status::IOError(Errno("remote ucx: connect to the bootstrap " + info.address));
      ::close(fd);
      return s;
    }
    std::string server_addr, rkey_buf;
    std::uint64_t hdr[2] = {0, 0};  // region base address, region size
    bool ok = SendBlob(fd, my_addr.data(), static_cast<std::uint32_t>(my_addr.size())) && RecvAll(fd, &id_, 4) &&
              RecvAll(fd, hdr, sizeof hdr) && RecvBlob(fd, &server_addr) && RecvBlob(fd, &rkey_buf);
    ::close(fd);
    if (!ok) return Status::IOError("remote ucx: bootstrap exchange with " + info.address + " failed");
    remote_base_ = hdr[0];
    size_ = hdr[1];
    if (info.size != 0 && info.size != size_) {
      return Status::InvalidArgument("remote ucx: the server's region has " + std::to_string(size_) + " bytes, not " +
                                     std::to_string(info.size));
    }
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = reinterpret_cast<const ucp_address_t*>(server_addr.data());
    st = ucp_ep_create(worker_, &ep, &ep_);
    if (st != UCS_OK) return UcsError("ucp_ep_create", st);
    st = ucp_ep_rkey_unpack(ep_, rkey_buf.data(), &rkey_);
    if (st != UCS_OK) return UcsError("ucp_ep_rkey_unpack", st);
    return Status::OK();
  }

  Status Read(std::uint64_t off, void* dst, std::size_t len) override {
    WORT_RETURN_IF_ERROR(CheckRange(off, len, size_));
    WORT_RETURN_IF_ERROR(Usable());
    if (len > 0) {
      ucp_request_param_t p{};
      ucs_status_t st = Done(Wait(worker_, ucp_get_nbx(ep_, dst, len, remote_base_ + off, rkey_, &p), efd_, timeout_));
      if (st != UCS_OK) return UcsError("get", st);
    }
    ++c_.reads;
    c_.bytes_read += len;
    return Status::OK();
  }
  Status Write(std::uint64_t off, const void* src, std::size_t len) override {
    WORT_RETURN_IF_ERROR(CheckRange(off, len, size_));
    WORT_RETURN_IF_ERROR(Usable());
    if (len > 0) {
      ucp_request_param_t p{};
      ucs_status_t st = Done(Wait(worker_, ucp_put_nbx(ep_, src, len, remote_base_ + off, rkey_, &p), efd_, timeout_));
      if (st != UCS_OK) return UcsError("put", st);
      WORT_RETURN_IF_ERROR(Flush());
    }
    ++c_.writes;
    c_.bytes_written += len;
    return Status::OK();
  }
  Status FetchAdd64(std::uint64_t off, std::uint64_t add, std::uint64_t* old) override {
    WORT_RETURN_IF_ERROR(CheckAtomic(off, size_));
    std::uint64_t reply = 0;
    WORT_RETURN_IF_ERROR(Atomic(UCP_ATOMIC_OP_ADD, off, add, &reply));
    if (old != nullptr) *old = reply;
    return Status::OK();
  }
  Status CompareSwap64(std::uint64_t off, std::uint64_t expected, std::uint64_t desired, std::uint64_t* old) override {
    WORT_RETURN_IF_ERROR(CheckAtomic(off, size_));
    std::uint64_t reply = desired;  // CSWAP: buffer = compare value, reply buffer = new value in, old value out
    WORT_RETURN_IF_ERROR(Atomic(UCP_ATOMIC_OP_CSWAP, off, expected, &reply));
    if (old != nullptr) *old = reply;
    return Status::OK();
  }
  Status Notify(std::string_view msg) override {
    if (msg.size() > kMaxNotifyLen) return Status::InvalidArgument("remote: notify message longer than 4096 bytes");
    WORT_RETURN_IF_ERROR(Usable());
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_EAGER;
    ucs_status_t st = Done(Wait(worker_, ucp_am_send_nbx(ep_, kAmId, &id_, sizeof id_, msg.data(), msg.size(), &p), efd_, timeout_));
    if (st != UCS_OK) return UcsError("am_send", st);
    ++c_.notifies;
    return Status::OK();
  }
  Status Flush() override {
    WORT_RETURN_IF_ERROR(Usable());
    ucp_request_param_t p{};
    ucs_status_t st = Done(Wait(worker_, ucp_ep_flush_nbx(ep_, &p), efd_, timeout_));
    if (st != UCS_OK) return UcsError("flush", st);
    return Status::OK();
  }
  // Remote completion, then a read of the range's last word (read-after-write: on RDMA it pushes
  // the earlier WRITE into the target's memory system). Durable only as transport.h says.
  Status Persist(std::uint64_t off, std::size_t len) override {
    WORT_RETURN_IF_ERROR(CheckRange(off, len, size_));
    WORT_RETURN_IF_ERROR(Flush());
    if (len == 0) return Status::OK();
    const std::uint64_t last = (off + len - 1) & ~std::uint64_t(7);
    std::uint64_t word;
    return Read(last, &word, std::min<std::uint64_t>(8, size_ - last));
  }
  std::uint32_t client_id() const override { return id_; }
  Counters counters() const override { return c_; }

 private:
  // Marks the connection broken when an operation timed out.
  ucs_status_t Done(ucs_status_t st) {
    if (st == UCS_ERR_TIMED_OUT) broken_ = true;
    return st;
  }
  Status Usable() const {
    if (broken_) return Status::IOError("remote ucx: an earlier operation timed out; the server is gone");
    return Status::OK();
  }

  Status Atomic(ucp_atomic_op_t op, std::uint64_t off, std::uint64_t value, std::uint64_t* reply) {
    WORT_RETURN_IF_ERROR(Usable());
    std::uint64_t buf = value;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    p.datatype = ucp_dt_make_contig(8);
    p.reply_buffer = reply;
    ucs_status_t st = Done(Wait(worker_, ucp_atomic_op_nbx(ep_, op, &buf, 1, remote_base_ + off, rkey_, &p), efd_, timeout_));
    if (st != UCS_OK) return UcsError("atomic", st);
    ++c_.atomics;
    return Status::OK();
  }

  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  ucp_rkey_h rkey_ = nullptr;
  std::uint64_t remote_base_ = 0;
  std::uint64_t size_ = 0;
  std::uint32_t id_ = 0;
  int efd_ = -1;
  std::chrono::milliseconds timeout_ = OpTimeout();
  bool broken_ = false;  // an operation timed out: the server is taken to be gone
  Counters c_;
};

// ---- server -----------------------------------------------------------------------------------
class UcxServer final : public Server {
 public:
  ~UcxServer() override { Stop(); }

  Status Start(char* base, std::uint64_t size, NotifyHandler h) {
    base_ = base;
    size_ = size;
    handler_ = std::move(h);
    WORT_RETURN_IF_ERROR(MakeContext(&ctx_));
    WORT_RETURN_IF_ERROR(MakeWorker(ctx_, UCS_THREAD_MODE_SINGLE, &worker_));
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = base;
    mp.length = size;
    ucs_status_t st = ucp_mem_map(ctx_, &mp, &memh_);
    if (st != UCS_OK) return UcsError("ucp_mem_map of the region", st);
    void* rkey = nullptr;
    std::size_t rkey_len = 0;
    st = ucp_rkey_pack(ctx_, memh_, &rkey, &rkey_len);
    if (st != UCS_OK) return UcsError("ucp_rkey_pack", st);
    rkey_.assign(static_cast<const char*>(rkey), rkey_len);
    ucp_rkey_buffer_release(rkey);
    ucp_address_t* addr = nullptr;
    std::size_t addr_len = 0;
    st = ucp_worker_get_address(worker_, &addr, &addr_len);
    if (st != UCS_OK) return UcsError("ucp_worker_get_address", st);
    addr_.assign(reinterpret_cast<const char*>(addr), addr_len);
    ucp_worker_release_address(worker_, addr);
    ucp_am_handler_param_t ap{};
    ap.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                    UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    ap.id = kAmId;
    ap.cb = &UcxServer::OnAm;
    ap.arg = this;
    ap.flags = UCP_AM_FLAG_WHOLE_MSG;
    st = ucp_worker_set_am_recv_handler(worker_, &ap);
    if (st != UCS_OK) return UcsError("ucp_worker_set_am_recv_handler", st);
    st = ucp_worker_get_efd(worker_, &efd_);
    if (st != UCS_OK) return UcsError("ucp_worker_get_efd", st);

    stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
    if (stop_fd_ < 0) return Status::IOError(Errno("remote ucx: eventfd"));
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) return Status::IOError(Errno("remote ucx: socket"));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    socklen_t sl = sizeof sa;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(listen_fd_, 128) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &sl) != 0) {
      return Status::IOError(Errno("remote ucx: bootstrap bind/listen on 127.0.0.1"));
    }
    info_.backend = "ucx";
    info_.address = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
    info_.size = size;
    progress_ = std::thread([this] { Progress(); });
    bootstrap_ = std::thread([this] { Bootstrap(); });
    auto self = std::make_unique<UcxConnection>();
    WORT_RETURN_IF_ERROR(self->Open(info_));
    self_ = std::move(self);
    return Status::OK();
  }

  RegionInfo info() const override { return info_; }
  Connection& ServerSide() override { return *self_; }

  void Stop() override {
    self_.reset();  // closes its endpoint while the progress thread still runs
    if (stop_fd_ >= 0) {
      std::uint64_t one = 1;
      ssize_t n = ::write(stop_fd_, &one, sizeof one);
      (void)n;
    }
    if (bootstrap_.joinable()) bootstrap_.join();
    if (progress_.joinable()) progress_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_), listen_fd_ = -1;
    if (stop_fd_ >= 0) ::close(stop_fd_), stop_fd_ = -1;
    if (memh_ != nullptr) ucp_mem_unmap(ctx_, memh_), memh_ = nullptr;
    if (worker_ != nullptr) ucp_worker_destroy(worker_), worker_ = nullptr;
    if (ctx_ != nullptr) ucp_cleanup(ctx_), ctx_ = nullptr;
  }

 private:
  static ucs_status_t OnAm(void* arg, const void* header, std::size_t header_len, void* data, std::size_t len,
                           const ucp_am_recv_param_t* param) {
    auto* self = static_cast<UcxServer*>(arg);
    std::uint32_t id = 0;
    if (header_len == sizeof id) std::memcpy(&id, header, sizeof id);
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
      // Never sent (clients force eager): drop, loudly.
      std::fprintf(stderr, "wort remote ucx: dropped a rendezvous notification from client %u\n", id);
      return UCS_OK;
    }
    if (self->handler_) self->handler_(id, std::string_view(static_cast<const char*>(data), len));
    return UCS_OK;
  }

  void Progress() {
    for (;;) {
      while (ucp_worker_progress(worker_) != 0) {
      }
      if (stopping_.load(std::memory_order_acquire)) return;
      ucs_status_t st = ucp_worker_arm(worker_);
      if (st == UCS_ERR_BUSY) continue;
      pollfd fds[2] = {{efd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      ::poll(fds, 2, 100);
      if (fds[1].revents) {
        // Drain what is in flight, then leave.
        for (int i = 0; i < 1000 && ucp_worker_progress(worker_) != 0; ++i) {
        }
        stopping_.store(true, std::memory_order_release);
        return;
      }
    }
  }

  void Bootstrap() {
    for (;;) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents) return;
      int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      timeval tv{5, 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      std::string client_addr;
      std::uint32_t id = next_id_++;
      std::uint64_t hdr[2] = {reinterpret_cast<std::uint64_t>(base_), size_};
      bool ok = RecvBlob(c, &client_addr) && SendAll(c, &id, 4) && SendAll(c, hdr, sizeof hdr) &&
                SendBlob(c, addr_.data(), static_cast<std::uint32_t>(addr_.size())) &&
                SendBlob(c, rkey_.data(), static_cast<std::uint32_t>(rkey_.size()));
      if (!ok) std::fprintf(stderr, "wort remote ucx: a client's bootstrap exchange failed\n");
      ::close(c);
    }
  }

  char* base_ = nullptr;
  std::uint64_t size_ = 0;
  NotifyHandler handler_;
  RegionInfo info_;
  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_mem_h memh_ = nullptr;
  std::string rkey_, addr_;
  int efd_ = -1, stop_fd_ = -1, listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint32_t> next_id_{0};
  std::thread progress_, bootstrap_;
  std::unique_ptr<UcxConnection> self_;
};

}  // namespace

Status ListenUcx(void* base, std::uint64_t size, std::string_view /*pool_path*/, NotifyHandler on_notify,
                 std::unique_ptr<Server>* out) {
  auto s = std::make_unique<UcxServer>();
  WORT_RETURN_IF_ERROR(s->Start(static_cast<char*>(base), size, std::move(on_notify)));
  *out = std::move(s);
  return Status::OK();
}

Status ConnectUcx(const RegionInfo& info, std::unique_ptr<Connection>* out) {
  auto c = std::make_unique<UcxConnection>();
  WORT_RETURN_IF_ERROR(c->Open(info));
  *out = std::move(c);
  return Status::OK();
}

}  // namespace wort::remote
