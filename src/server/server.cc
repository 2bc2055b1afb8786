// The Asio network loop of `wort serve` (see server.h).
#include "server/server.h"

#include <fmt/core.h>
#include <openssl/ssl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "server/auth.h"

namespace wort::server {

namespace {
constexpr size_t kInitialBuffer = 16 << 10;
constexpr size_t kShrinkAbove = 64 << 10;
using Tcp = asio::ip::tcp;
using Local = asio::local::stream_protocol;
// Sockets bound to the worker's io_context executor type, not asio's default any_io_executor:
// the type-erased executor costs a polymorphic call and its work tracking on every
// asynchronous operation and completion (doc/server.md, "Server CPU per request").
using TcpSocket = asio::basic_stream_socket<Tcp, asio::io_context::executor_type>;
using LocalSocket = asio::basic_stream_socket<Local, asio::io_context::executor_type>;
using TlsStream = asio::ssl::stream<TcpSocket>;
// How long a graceful stop waits for clients to take their last replies.
constexpr auto kDrainTimeout = std::chrono::seconds(10);
constexpr std::string_view kTooManyConns = "ERROR Too many open connections\r\n";

// What a worker's registry sees of a connection (all calls on the worker's thread).
class ConnBase {
 public:
  virtual ~ConnBase() = default;
  // Graceful shutdown: a connection waiting for input closes now; one that is executing or
  // sending replies closes once every complete request it has received is answered.
  virtual void Shutdown() = 0;
  // Called once a second when an idle or partial-request timeout is set: closes the connection
  // once it has waited for input through `idle` consecutive sweeps without receiving a byte
  // (0: never), or through `partial` sweeps with a request half received (0: never).
  virtual void SweepIdle(uint32_t idle, uint32_t partial) = 0;
};

// One event loop and the connections it serves. `conns` is declared before `io` so that it
// outlives the handlers `io` destroys.
struct Worker {
  std::unordered_set<ConnBase*> conns;
  std::unique_ptr<asio::io_context> io = std::make_unique<asio::io_context>(1);
  std::unique_ptr<asio::steady_timer> sweep;
  bool stopping = false;
};

}  // namespace

struct Server::Impl {
  Impl(Store& s, const ServerConfig& c) : store(s), config(c) {}

  Store& store;
  ServerConfig config;
  ServerStats stats;
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  std::vector<std::unique_ptr<Tcp::acceptor>> tcp_acceptors;
  std::unique_ptr<Local::acceptor> unix_acceptor;
  std::unique_ptr<asio::ssl::context> tls;
  std::unique_ptr<asio::signal_set> signals;
  std::atomic<size_t> next_io{0};
  std::atomic<bool> stopping{false};
  // Graceful stop: Run waits for the workers to drain, at most drain_timeout.
  std::mutex mu;
  std::condition_variable cv;
  bool drained = false;
  std::thread watchdog;

  asio::io_context& io(size_t i) { return *workers[i]->io; }
  template <class Acceptor>
  void Accept(Acceptor* acceptor);
  template <class Socket>
  void Admit(size_t w, Socket sock);
  void Sweep(Worker* w);
  void StopAll();
  bool Verbose(uint32_t level) const { return stats.verbosity.load(std::memory_order_relaxed) >= level; }
};

namespace {

template <class Stream>
void CloseStream(Stream& s) {
  asio::error_code ec;
  s.lowest_layer().shutdown(asio::socket_base::shutdown_both, ec);
  s.lowest_layer().close(ec);
}

// "tcp:<addr>:<port>" of the peer and of the local end (stats conns); "unix:<path>" for both ends
// of a unix socket.
std::pair<std::string, std::string> PeerNames(TcpSocket& s) {
  asio::error_code ec;
  const auto peer = s.remote_endpoint(ec);
  const auto local = s.local_endpoint(ec);
  return {fmt::format("tcp:{}:{}", peer.address().to_string(), peer.port()),
          fmt::format("tcp:{}:{}", local.address().to_string(), local.port())};
}
std::pair<std::string, std::string> PeerNames(TlsStream& s) { return PeerNames(s.next_layer()); }
std::pair<std::string, std::string> PeerNames(LocalSocket& s) {
  asio::error_code ec;
  const std::string path = s.local_endpoint(ec).path();
  return {"unix:" + path, "unix:" + path};
}

template <class Stream>
class Connection final : public ConnBase, public std::enable_shared_from_this<Connection<Stream>> {
 public:
  Connection(Server::Impl* srv, Worker* worker, Stream sock)
      : srv_(srv),
        worker_(worker),
        sock_(std::move(sock)),
        parser_(srv->config.limits),
        handler_(srv->store, srv->stats, srv->config) {
    buf_.resize(kInitialBuffer);
    // The largest input a request can need: one line plus one value and its "\r\n".
    cap_ = std::max(srv->config.limits.max_line, srv->config.limits.max_retrieval_line) +
           static_cast<size_t>(srv->config.limits.max_item_size) + 2;
    cap_ = std::max(cap_, kMaxAuthPayload + 2 + srv->config.limits.max_line);
    authenticated_ = srv->config.auth == nullptr;
    srv_->stats.curr_connections.fetch_add(1, std::memory_order_relaxed);
    id_ = srv_->stats.total_connections.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  ~Connection() override {
    Release();
    worker_->conns.erase(this);
    srv_->stats.curr_connections.fetch_sub(1, std::memory_order_relaxed);
    if (srv_->Verbose(2)) fmt::print(stderr, "<{} connection closed.\n", id_);
  }

  // Runs on the worker's thread.
  void Start() {
    worker_->conns.insert(this);
    if (srv_->Verbose(2)) fmt::print(stderr, "<{} new client connection\n", id_);
    if (worker_->stopping) {
      Close();
      return;
    }
    {  // for `stats conns`
      auto [peer, local] = PeerNames(sock_);
      handler_.SetPeer(static_cast<int>(sock_.lowest_layer().native_handle()), peer, local);
    }
    if constexpr (std::is_same_v<Stream, TcpSocket>) {
      asio::error_code ec;
      sock_.set_option(Tcp::no_delay(true), ec);
    }
    if constexpr (!std::is_same_v<Stream, TlsStream>) {
      // WriteThen's direct send must never block the worker.
      asio::error_code ec;
      sock_.non_blocking(true, ec);
      direct_send_ = !ec;
    }
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      asio::error_code ec;
      sock_.next_layer().set_option(Tcp::no_delay(true), ec);
      waiting_ = true;
      auto self = this->shared_from_this();
      sock_.async_handshake(asio::ssl::stream_base::server, [this, self](const asio::error_code& ec) {
        waiting_ = false;
        if (ec) {
          if (srv_->Verbose(1)) fmt::print(stderr, "<{} TLS handshake failed: {}\n", id_, ec.message());
          Close();
          return;
        }
        Read();
      });
      return;
    }
    Read();
  }

  void Shutdown() override {
    draining_ = true;
    if (waiting_) Close();
  }

  void SweepIdle(uint32_t idle, uint32_t partial) override {
    if (active_ || !waiting_) {
      active_ = false;
      idle_sweeps_ = 0;
      return;
    }
    ++idle_sweeps_;
    const bool half = rend_ > rpos_ || parser_.swallowing() > 0;  // a request half received
    if (idle && idle_sweeps_ > idle) {
      srv_->stats.idle_kicks.fetch_add(1, std::memory_order_relaxed);
      if (srv_->Verbose(1)) fmt::print(stderr, "<{} idle timeout\n", id_);
      Close();
    } else if (partial && half && idle_sweeps_ > partial) {
      srv_->stats.partial_kicks.fetch_add(1, std::memory_order_relaxed);
      if (srv_->Verbose(1)) fmt::print(stderr, "<{} timeout with a request half received\n", id_);
      Close();
    }
  }

 private:
  // Makes room at the end of the buffer and reads whatever arrives.
  void Read() {
    if (draining_ || closed_) {  // shutting down: everything received has been answered
      Close();
      return;
    }
    if (rpos_ == rend_) {
      rpos_ = rend_ = 0;
      if (buf_.size() > kShrinkAbove) {
        std::vector<char>(kInitialBuffer).swap(buf_);
        Release();
      }
    }
    const size_t pending = rend_ - rpos_;  // the start of one incomplete request
    const size_t want = std::min(std::max(need_, pending + 4096), cap_);
    if (want <= pending) {  // cannot happen: the parser bounds lines and values
      Close();
      return;
    }
    if (buf_.size() - rpos_ < want) {
      if (rpos_ > 0) {
        std::memmove(buf_.data(), buf_.data() + rpos_, pending);
        rpos_ = 0;
        rend_ = pending;
      }
      if (buf_.size() < want) {
        // Past the first kShrinkAbove bytes the buffer comes out of the server's budget:
        // grown by doubling, or to exactly `want` when the budget is short.
        size_t size = std::max(want, std::min(buf_.size() * 2, cap_));
        if (!Reserve(size)) {
          size = want;
          if (!Reserve(size)) {
            Refuse(pending);
            return;
          }
        }
        buf_.resize(size);
      }
    }
    auto self = this->shared_from_this();
    waiting_ = true;
    sock_.async_read_some(asio::buffer(buf_.data() + rend_, buf_.size() - rend_),
                          [this, self](const asio::error_code& ec, size_t n) {
                            waiting_ = false;
                            if (ec) return;  // closed or reset: the connection ends here
                            active_ = true;
                            srv_->stats.Local().bytes_read.fetch_add(n, std::memory_order_relaxed);
                            rend_ += n;
                            Process();
                          });
  }

  // Parses and executes every complete request in the buffer, then writes the replies.
  void Process() {
    need_ = 0;
    // The first byte of a connection selects its protocol, as in memcached: 0x80 = binary.
    if (mode_ == Mode::kUnknown && rend_ > rpos_)
      mode_ = static_cast<uint8_t>(buf_[rpos_]) == bin::kRequestMagic ? Mode::kBinary : Mode::kText;
    if (mode_ == Mode::kBinary) {  // -Y: the handler asks for SASL PLAIN (handler_bin.cc)
      const Handler::BinProgress p = handler_.RunBinary(std::string_view(buf_.data() + rpos_, rend_ - rpos_), &out_);
      rpos_ += p.consumed;
      need_ = p.need;
      if (p.next == Handler::BinProgress::Next::kClose) WriteThen([this] { Close(); });
      else if (p.next == Handler::BinProgress::Next::kFlush) Write([this] { Process(); });
      else if (out_.empty()) Read();
      else WriteThen([this] { Read(); });
      return;
    }
    if (!authenticated_ && !Authenticate()) return;
    for (;;) {
      if (out_.size() >= Handler::kHighWater) {
        Write([this] { Process(); });
        return;
      }
      const ParseResult r = parser_.Parse(std::string_view(buf_.data() + rpos_, rend_ - rpos_), &req_);
      switch (r.outcome) {
        case Outcome::kSkipped:
          rpos_ += r.consumed;
          continue;
        case Outcome::kNeedMore:
          need_ = r.need;
          if (out_.empty()) Read();
          else WriteThen([this] { Read(); });
          return;
        case Outcome::kError:
          rpos_ += r.consumed;
          if (!r.noreply) {
            out_.append(r.error);
            out_.append("\r\n");
          }
          continue;
        case Outcome::kClose:
          if (!r.error.empty()) {
            out_.append(r.error);
            out_.append("\r\n");
          }
          WriteThen([this] { Close(); });
          return;
        case Outcome::kRequest: {
          // The request's views stay valid while it runs: the buffer is not touched until the
          // next Read(), which only happens once the request is done.
          rpos_ += r.consumed;
          const Handler::Step step = handler_.Execute(req_, &out_);
          if (step == Handler::Step::kClose) {
            WriteThen([this] { Close(); });
            return;
          }
          if (step == Handler::Step::kMore) {
            Write([this] { Continue(); });
            return;
          }
          continue;
        }
      }
    }
  }

  // The text protocol's authentication (server/auth.h) on the buffered input. Returns true once
  // the connection is authenticated (the rest of the input is then parsed as commands); false
  // when it has arranged the next read, write or close itself.
  bool Authenticate() {
    for (;;) {
      const TextAuthStep st =
          TextAuth(*srv_->config.auth, std::string_view(buf_.data() + rpos_, rend_ - rpos_), &auth_pending_);
      rpos_ += st.consumed;
      switch (st.outcome) {
        case TextAuthStep::Outcome::kNeedMore:
          need_ = auth_pending_;
          if (out_.empty()) Read();
          else WriteThen([this] { Read(); });
          return false;
        case TextAuthStep::Outcome::kClose:
          WriteThen([this] { Close(); });
          return false;
        case TextAuthStep::Outcome::kReply:
          out_.append(st.reply);
          out_.append("\r\n");
          if (st.reply != "CLIENT_ERROR unauthenticated") srv_->stats.Local().auth_cmds.fetch_add(1, std::memory_order_relaxed);
          if (st.authenticated) {
            authenticated_ = true;
            return true;
          }
          if (st.reply == "CLIENT_ERROR authentication failure") {
            srv_->stats.Local().auth_errors.fetch_add(1, std::memory_order_relaxed);
            if (srv_->Verbose(1)) fmt::print(stderr, "<{} authentication failure\n", id_);
          }
          continue;
      }
    }
  }

  void Continue() {
    const Handler::Step step = handler_.Resume(&out_);
    if (step == Handler::Step::kMore) Write([this] { Continue(); });
    else Process();
  }

  // Sends out_, then runs next(). Asynchronously: next() runs from the completion handler.
  template <class Next>
  void Write(Next next, size_t sent = 0) {
    if (out_.empty()) {
      next();
      return;
    }
    auto self = this->shared_from_this();
    asio::async_write(sock_, asio::buffer(out_.data() + sent, out_.size() - sent),
                      [this, self, next, sent](const asio::error_code& ec, size_t n) {
                        if (ec) return;
                        Sent(sent + n);
                        next();
                      });
  }

  // Write(), for a next() that only starts an asynchronous read or closes (so calling it from
  // here cannot recurse): on a plain socket (TCP, unix) the reply is first sent by one
  // non-blocking send, as memcached does; only what the socket does not take at once goes
  // through asio's asynchronous write. That saves the asynchronous write's queueing and
  // completion dispatch (a scheduler post, a handler allocation, a shared_ptr copy) on almost
  // every request (doc/server.md, "Speed beside memcached").
  template <class Next>
  void WriteThen(Next next) {
    size_t sent = 0;
    if constexpr (!std::is_same_v<Stream, TlsStream>) {
      if (direct_send_ && !out_.empty()) {
        asio::error_code ec;
        sent = sock_.write_some(asio::buffer(out_), ec);
        if (ec == asio::error::would_block || ec == asio::error::try_again) {
          sent = 0;
        } else if (ec) {
          return;  // closed or reset: the connection ends here, as on an asynchronous write's error
        } else if (sent == out_.size()) {
          Sent(sent);
          next();
          return;
        }
      }
    }
    Write(next, sent);
  }

  void Sent(size_t n) {
    srv_->stats.Local().bytes_written.fetch_add(n, std::memory_order_relaxed);
    out_.clear();
    if (out_.capacity() > Handler::kHighWater * 2) std::string().swap(out_);
  }

  void Close() {
    closed_ = true;
    CloseStream(sock_);
  }

  // The input buffer budget (ServerConfig::max_buffered): a buffer of `size` bytes holds
  // size - kShrinkAbove of it. True when granted (or nothing more is needed).
  bool Reserve(size_t size) {
    const uint64_t need = size > kShrinkAbove ? size - kShrinkAbove : 0;
    if (need <= granted_) return true;
    const uint64_t more = need - granted_;
    std::atomic<uint64_t>& b = srv_->stats.buffered_bytes;
    uint64_t cur = b.load(std::memory_order_relaxed);
    do {
      if (cur + more > srv_->config.max_buffered) return false;
    } while (!b.compare_exchange_weak(cur, cur + more, std::memory_order_relaxed));
    granted_ = need;
    return true;
  }
  void Release() {
    if (granted_) srv_->stats.buffered_bytes.fetch_sub(granted_, std::memory_order_relaxed);
    granted_ = 0;
  }

  // The budget cannot hold the request at buf_[rpos_, rpos_ + pending) (`need_` bytes whole).
  // A text storage request whose command line is complete is refused as memcached refuses a
  // value it has no memory for: the reply (unless noreply), its data discarded as it arrives,
  // and the connection goes on. Anything else (a command line longer than the budget allows, a
  // binary request) closes the connection after "SERVER_ERROR out of memory reading request".
  void Refuse(size_t pending) {
    srv_->stats.buffer_refusals.fetch_add(1, std::memory_order_relaxed);
    const std::string_view in(buf_.data() + rpos_, pending);
    const size_t nl = in.find('\n');
    if (mode_ == Mode::kText && nl != std::string_view::npos && need_ > pending) {
      std::string_view line = in.substr(0, nl);
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
      const bool noreply = line.size() >= 8 && line.substr(line.size() - 8) == " noreply";
      parser_.Swallow(need_ - pending);
      rpos_ = rend_ = 0;
      need_ = 0;
      srv_->stats.Local().store_no_memory.fetch_add(1, std::memory_order_relaxed);
      if (srv_->Verbose(1)) fmt::print(stderr, "<{} input buffer budget full: value refused\n", id_);
      if (!noreply) out_.append("SERVER_ERROR out of memory storing object\r\n");
      WriteThen([this] { Read(); });
      return;
    }
    if (srv_->Verbose(1)) fmt::print(stderr, "<{} input buffer budget full: connection closed\n", id_);
    if (mode_ == Mode::kText) out_.append("SERVER_ERROR out of memory reading request\r\n");
    WriteThen([this] { Close(); });
  }

  Server::Impl* srv_;
  Worker* worker_;
  Stream sock_;
  Parser parser_;
  Handler handler_;
  Request req_;
  std::vector<char> buf_;
  size_t rpos_ = 0, rend_ = 0;  // unparsed input is buf_[rpos_, rend_)
  size_t need_ = 0;             // input size the pending request needs (0: unknown)
  size_t cap_ = 0;
  uint64_t granted_ = 0;        // bytes of the server's buffer budget this connection holds
  std::string out_;
  bool authenticated_ = true;
  size_t auth_pending_ = 0;
  bool waiting_ = false;   // waiting for input (or for a TLS handshake): nothing in flight
  bool draining_ = false;  // graceful shutdown: close at the next read
  bool closed_ = false;
  bool direct_send_ = false;  // a plain socket in non-blocking mode: WriteThen sends directly
  uint64_t id_ = 0;
  bool active_ = false;       // received input since the last idle sweep
  uint32_t idle_sweeps_ = 0;  // sweeps since then
  enum class Mode : uint8_t { kUnknown, kText, kBinary } mode_ = Mode::kUnknown;
};

}  // namespace

template <class Socket>
void Server::Impl::Admit(size_t w, Socket sock) {
  if (stats.curr_connections.load(std::memory_order_relaxed) >= config.max_conns) {
    // memcached's refusal, in plain text before any TLS handshake, as memcached sends it.
    stats.rejected_connections.fetch_add(1, std::memory_order_relaxed);
    if (Verbose(1)) fmt::print(stderr, "Too many open connections\n");
    auto s = std::make_shared<Socket>(std::move(sock));
    asio::async_write(*s, asio::buffer(kTooManyConns), [s](const asio::error_code&, size_t) { CloseStream(*s); });
    return;
  }
  Worker* worker = workers[w].get();
  if constexpr (std::is_same_v<Socket, TcpSocket>) {
    if (tls) {
      auto c = std::make_shared<Connection<TlsStream>>(this, worker, TlsStream(std::move(sock), *tls));
      asio::post(*worker->io, [c] { c->Start(); });
      return;
    }
  }
  auto c = std::make_shared<Connection<Socket>>(this, worker, std::move(sock));
  asio::post(*worker->io, [c] { c->Start(); });
}

template <class Acceptor>
void Server::Impl::Accept(Acceptor* acceptor) {
  const size_t w = next_io.fetch_add(1, std::memory_order_relaxed) % workers.size();
  acceptor->async_accept(io(w), [this, acceptor, w](const asio::error_code& ec,
                                              typename Acceptor::protocol_type::socket::template rebind_executor<
                                                  asio::io_context::executor_type>::other sock) {
    if (stopping.load()) return;
    if (!ec) {
      Admit(w, std::move(sock));
    } else if (ec == asio::error::no_descriptors) {
      // Out of file descriptors: back off briefly rather than spin.
      if (Verbose(1)) fmt::print(stderr, "Too many open connections (out of file descriptors)\n");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } else if (ec == asio::error::operation_aborted) {
      return;
    }
    Accept(acceptor);
  });
}

// The idle-connection sweep (memcached's idle_timeout): once a second per worker.
void Server::Impl::Sweep(Worker* w) {
  w->sweep->expires_after(std::chrono::seconds(1));
  w->sweep->async_wait([this, w](const asio::error_code& ec) {
    if (ec || w->stopping) return;
    std::vector<ConnBase*> all(w->conns.begin(), w->conns.end());
    for (ConnBase* c : all) c->SweepIdle(config.idle_timeout, config.partial_timeout);
    Sweep(w);
  });
}

void Server::Impl::StopAll() {
  if (stopping.exchange(true)) return;
  asio::post(io(0), [this] {
    asio::error_code ec;
    for (auto& a : tcp_acceptors) a->close(ec);
    if (unix_acceptor) {
      unix_acceptor->close(ec);
      ::unlink(config.unix_socket.c_str());
    }
    if (signals) signals->cancel(ec);
  });
  for (auto& w : workers) {
    asio::post(*w->io, [w = w.get()] {
      w->stopping = true;
      if (w->sweep) w->sweep->cancel();
      std::vector<ConnBase*> all(w->conns.begin(), w->conns.end());
      for (ConnBase* c : all) c->Shutdown();
    });
  }
  // Without work guards each loop returns once its connections are gone.
  guards.clear();
  // A client that never reads its replies must not hold the shutdown forever. Started under mu:
  // Stop may run on another thread than Run, which takes the thread object under mu too.
  std::lock_guard<std::mutex> g(mu);
  watchdog = std::thread([this] {
    std::unique_lock<std::mutex> lk(mu);
    if (!cv.wait_for(lk, kDrainTimeout, [this] { return drained; })) {
      for (auto& w : workers) w->io->stop();
    }
  });
}

Server::Server(Store& store, const ServerConfig& config) : impl_(std::make_unique<Impl>(store, config)) {
  impl_->stats.start_time = Store::Now();
}

Server::~Server() {
  Stop();
  if (impl_->watchdog.joinable()) {
    {
      std::lock_guard<std::mutex> lk(impl_->mu);
      impl_->drained = true;
    }
    impl_->cv.notify_all();
    impl_->watchdog.join();
  }
}

ServerStats& Server::stats() { return impl_->stats; }

namespace {

Status MakeTlsContext(const TlsConfig& t, std::unique_ptr<asio::ssl::context>* out) {
  if (t.chain_cert.empty())
    return Status::InvalidArgument("TLS (-Z) needs a certificate: -o ssl_chain_cert=FILE[,ssl_key=FILE]");
  try {
    auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::single_dh_use);
    static constexpr int kVersions[] = {TLS1_VERSION, TLS1_1_VERSION, TLS1_2_VERSION, TLS1_3_VERSION};
    if (t.min_version < 0 || t.min_version > 3)
      return Status::InvalidArgument("ssl_min_version must be 0 (TLS 1.0), 1, 2 or 3 (TLS 1.3)");
    SSL_CTX_set_min_proto_version(ctx->native_handle(), kVersions[t.min_version]);
    ctx->use_certificate_chain_file(t.chain_cert);
    ctx->use_private_key_file(t.key.empty() ? t.chain_cert : t.key, asio::ssl::context::pem);
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
      return Status::InvalidArgument(fmt::format("TLS: the key {} does not match the certificate {}", t.key, t.chain_cert));
    if (!t.ca_cert.empty()) ctx->load_verify_file(t.ca_cert);
    if (!t.ciphers.empty() && SSL_CTX_set_cipher_list(ctx->native_handle(), t.ciphers.c_str()) != 1)
      return Status::InvalidArgument(fmt::format("TLS: no usable cipher in '{}'", t.ciphers));
    switch (t.verify_mode) {
      case 0: ctx->set_verify_mode(asio::ssl::verify_none); break;
      case 1: ctx->set_verify_mode(asio::ssl::verify_peer); break;
      case 2: ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert); break;
      case 3: ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_client_once); break;
      default: return Status::InvalidArgument("ssl_verify_mode must be 0 (none), 1 (request), 2 (require) or 3 (once)");
    }
    if (t.verify_mode >= 2 && t.ca_cert.empty())
      return Status::InvalidArgument("ssl_verify_mode 2/3 requires client certificates: give ssl_ca_cert=FILE");
    *out = std::move(ctx);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(fmt::format("TLS setup (certificate {}, key {}): {}", t.chain_cert,
                                               t.key.empty() ? t.chain_cert : t.key, e.what()));
  }
  return Status::OK();
}

}  // namespace

Status CheckTls(const TlsConfig& tls) {
  std::unique_ptr<asio::ssl::context> ctx;
  return MakeTlsContext(tls, &ctx);
}

Status Server::Start() {
  Impl& m = *impl_;
  const int n = std::max(1, m.config.threads);
  for (int i = 0; i < n; ++i) {
    m.workers.push_back(std::make_unique<Worker>());
    m.guards.push_back(asio::make_work_guard(*m.workers.back()->io));
  }
  if (m.config.tls.enabled) WORT_RETURN_IF_ERROR(MakeTlsContext(m.config.tls, &m.tls));
  if (!m.config.unix_socket.empty()) {
    // As memcached: a stale socket file is replaced; the mask applies from the moment of bind.
    const std::string& path = m.config.unix_socket;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) return Status::InvalidArgument(fmt::format("{} exists and is not a socket", path));
      ::unlink(path.c_str());
    }
    const mode_t old = ::umask(~m.config.unix_mask & 0777);
    try {
      m.unix_acceptor = std::make_unique<Local::acceptor>(m.io(0));
      Local::endpoint ep(path);
      m.unix_acceptor->open(ep.protocol());
      m.unix_acceptor->bind(ep);
      m.unix_acceptor->listen(m.config.backlog);
    } catch (const std::exception& e) {
      ::umask(old);
      return Status::IOError(fmt::format("cannot listen on unix socket {}: {}", path, e.what()));
    }
    ::umask(old);
  } else {
    // One listener per address of the comma-separated list.
    std::string_view rest = m.config.listen;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string addr_s(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      try {
        const auto addr = asio::ip::make_address(addr_s);
        Tcp::endpoint ep(addr, m.config.port);
        auto a = std::make_unique<Tcp::acceptor>(m.io(0));
        a->open(ep.protocol());
        a->set_option(Tcp::acceptor::reuse_address(true));
        if (addr.is_v6()) a->set_option(asio::ip::v6_only(true));
        a->bind(ep);
        a->listen(m.config.backlog);
        // Port 0 picks a free port; the other addresses of the list then use the same one.
        if (m.config.port == 0) m.config.port = a->local_endpoint().port();
        m.tcp_acceptors.push_back(std::move(a));
      } catch (const std::exception& e) {
        return Status::IOError(fmt::format("cannot listen on {}:{}: {}", addr_s, m.config.port, e.what()));
      }
    }
    if (m.tcp_acceptors.empty()) return Status::InvalidArgument("no address to listen on");
  }
  m.signals = std::make_unique<asio::signal_set>(m.io(0), SIGINT, SIGTERM);
  m.signals->async_wait([this](const asio::error_code& ec, int sig) {
    if (ec) return;
    if (impl_->Verbose(1)) fmt::print(stderr, "Signal handled: {}.\n", strsignal(sig));
    impl_->StopAll();
  });
  if (m.config.idle_timeout > 0 || m.config.partial_timeout > 0) {
    for (auto& w : m.workers) {
      w->sweep = std::make_unique<asio::steady_timer>(*w->io);
      m.Sweep(w.get());
    }
  }
  for (auto& a : m.tcp_acceptors) m.Accept(a.get());
  if (m.unix_acceptor) m.Accept(m.unix_acceptor.get());
  return Status::OK();
}

uint16_t Server::port() const { return impl_->unix_acceptor ? 0 : impl_->config.port; }

void Server::Run() {
  Impl& m = *impl_;
  std::vector<std::thread> threads;
  for (size_t i = 1; i < m.workers.size(); ++i) threads.emplace_back([io = m.workers[i]->io.get()] { io->run(); });
  m.workers[0]->io->run();
  for (auto& t : threads) t.join();
  std::thread watchdog;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    m.drained = true;
    watchdog = std::move(m.watchdog);  // under mu: Stop (another thread) may be starting it
  }
  m.cv.notify_all();
  if (watchdog.joinable()) watchdog.join();
}

void Server::Stop() {
  if (impl_ && !impl_->workers.empty()) impl_->StopAll();
}

}  // namespace wort::server
