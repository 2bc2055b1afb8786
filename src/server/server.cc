// The Asio network loop of `wort serve` (see server.h).
#include "server/server.h"

#include <fmt/core.h>

#include <asio.hpp>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace wort::server {

namespace {
constexpr size_t kInitialBuffer = 16 << 10;
constexpr size_t kShrinkAbove = 64 << 10;
}  // namespace

struct Server::Impl {
  Impl(Store& s, const ServerConfig& c) : store(s), config(c) {}

  Store& store;
  ServerConfig config;
  ServerStats stats;
  std::vector<std::unique_ptr<asio::io_context>> ios;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  std::unique_ptr<asio::ip::tcp::acceptor> acceptor;
  std::unique_ptr<asio::signal_set> signals;
  std::atomic<size_t> next_io{0};
  std::atomic<bool> stopping{false};

  void Accept();
  void StopAll();
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server::Impl* srv, asio::ip::tcp::socket sock)
      : srv_(srv),
        sock_(std::move(sock)),
        parser_(srv->config.limits),
        handler_(srv->store, srv->stats, srv->config) {
    buf_.resize(kInitialBuffer);
    // The largest input a request can need: one line plus one value and its "\r\n".
    cap_ = std::max(srv->config.limits.max_line, srv->config.limits.max_retrieval_line) +
           static_cast<size_t>(srv->config.limits.max_item_size) + 2;
    srv_->stats.curr_connections.fetch_add(1, std::memory_order_relaxed);
    srv_->stats.total_connections.fetch_add(1, std::memory_order_relaxed);
  }
  ~Connection() { srv_->stats.curr_connections.fetch_sub(1, std::memory_order_relaxed); }

  void Start() {
    asio::error_code ec;
    sock_.set_option(asio::ip::tcp::no_delay(true), ec);
    {  // for `stats conns`
      const auto peer = sock_.remote_endpoint(ec);
      const auto local = sock_.local_endpoint(ec);
      handler_.SetPeer(static_cast<int>(sock_.native_handle()),
                       fmt::format("tcp:{}:{}", peer.address().to_string(), peer.port()),
                       fmt::format("tcp:{}:{}", local.address().to_string(), local.port()));
    }
    Read();
  }

 private:
  // Makes room at the end of the buffer and reads whatever arrives.
  void Read() {
    if (rpos_ == rend_) {
      rpos_ = rend_ = 0;
      if (buf_.size() > kShrinkAbove) std::vector<char>(kInitialBuffer).swap(buf_);
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
      if (buf_.size() < want) buf_.resize(std::max(want, std::min(buf_.size() * 2, cap_)));
    }
    auto self = shared_from_this();
    sock_.async_read_some(asio::buffer(buf_.data() + rend_, buf_.size() - rend_),
                          [this, self](const asio::error_code& ec, size_t n) {
                            if (ec) return;  // closed or reset: the connection ends here
                            srv_->stats.bytes_read.fetch_add(n, std::memory_order_relaxed);
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
    if (mode_ == Mode::kBinary) {
      const Handler::BinProgress p = handler_.RunBinary(std::string_view(buf_.data() + rpos_, rend_ - rpos_), &out_);
      rpos_ += p.consumed;
      need_ = p.need;
      if (p.next == Handler::BinProgress::Next::kClose) Write([this] { Close(); });
      else if (p.next == Handler::BinProgress::Next::kFlush) Write([this] { Process(); });
      else if (out_.empty()) Read();
      else Write([this] { Read(); });
      return;
    }
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
          else Write([this] { Read(); });
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
          Write([this] { Close(); });
          return;
        case Outcome::kRequest: {
          // The request's views stay valid while it runs: the buffer is not touched until the
          // next Read(), which only happens once the request is done.
          rpos_ += r.consumed;
          const Handler::Step step = handler_.Execute(req_, &out_);
          if (step == Handler::Step::kClose) {
            Write([this] { Close(); });
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

  void Continue() {
    const Handler::Step step = handler_.Resume(&out_);
    if (step == Handler::Step::kMore) Write([this] { Continue(); });
    else Process();
  }

  template <class Next>
  void Write(Next next) {
    if (out_.empty()) {
      next();
      return;
    }
    auto self = shared_from_this();
    asio::async_write(sock_, asio::buffer(out_), [this, self, next](const asio::error_code& ec, size_t n) {
      if (ec) return;
      srv_->stats.bytes_written.fetch_add(n, std::memory_order_relaxed);
      out_.clear();
      if (out_.capacity() > Handler::kHighWater * 2) std::string().swap(out_);
      next();
    });
  }

  void Close() {
    asio::error_code ec;
    sock_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    sock_.close(ec);
  }

  Server::Impl* srv_;
  asio::ip::tcp::socket sock_;
  Parser parser_;
  Handler handler_;
  Request req_;
  std::vector<char> buf_;
  size_t rpos_ = 0, rend_ = 0;  // unparsed input is buf_[rpos_, rend_)
  size_t need_ = 0;             // input size the pending request needs (0: unknown)
  size_t cap_ = 0;
  std::string out_;
  enum class Mode : uint8_t { kUnknown, kText, kBinary } mode_ = Mode::kUnknown;
};

}  // namespace

void Server::Impl::Accept() {
  const size_t i = next_io.fetch_add(1, std::memory_order_relaxed) % ios.size();
  acceptor->async_accept(*ios[i], [this](const asio::error_code& ec, asio::ip::tcp::socket sock) {
    if (stopping.load()) return;
    if (!ec) {
      if (stats.curr_connections.load(std::memory_order_relaxed) >= config.max_conns) {
        stats.rejected_connections.fetch_add(1, std::memory_order_relaxed);
        auto s = std::make_shared<asio::ip::tcp::socket>(std::move(sock));
        static const std::string kMsg = "SERVER_ERROR Too many open connections\r\n";
        asio::async_write(*s, asio::buffer(kMsg), [s](const asio::error_code&, size_t) {
          asio::error_code e;
          s->shutdown(asio::ip::tcp::socket::shutdown_both, e);
          s->close(e);
        });
      } else {
        std::make_shared<Connection>(this, std::move(sock))->Start();
      }
    } else if (ec == asio::error::no_descriptors) {
      // Out of file descriptors: back off briefly rather than spin.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    Accept();
  });
}

void Server::Impl::StopAll() {
  if (stopping.exchange(true)) return;
  asio::post(*ios[0], [this] {
    asio::error_code ec;
    if (acceptor) acceptor->close(ec);
    if (signals) signals->cancel(ec);
  });
  guards.clear();
  for (auto& io : ios) io->stop();
}

Server::Server(Store& store, const ServerConfig& config) : impl_(std::make_unique<Impl>(store, config)) {
  impl_->stats.start_time = Store::Now();
}
Server::~Server() { Stop(); }

ServerStats& Server::stats() { return impl_->stats; }

Status Server::Start() {
  Impl& m = *impl_;
  const int n = std::max(1, m.config.threads);
  for (int i = 0; i < n; ++i) {
    m.ios.push_back(std::make_unique<asio::io_context>(1));
    m.guards.push_back(asio::make_work_guard(*m.ios.back()));
  }
  try {
    const auto addr = asio::ip::make_address(m.config.listen);
    asio::ip::tcp::endpoint ep(addr, m.config.port);
    m.acceptor = std::make_unique<asio::ip::tcp::acceptor>(*m.ios[0]);
    m.acceptor->open(ep.protocol());
    m.acceptor->set_option(asio::ip::tcp::acceptor::reuse_address(true));
    m.acceptor->bind(ep);
    m.acceptor->listen(1024);
    m.config.port = m.acceptor->local_endpoint().port();
  } catch (const std::exception& e) {
    return Status::IOError(fmt::format("cannot listen on {}:{}: {}", m.config.listen, m.config.port, e.what()));
  }
  m.signals = std::make_unique<asio::signal_set>(*m.ios[0], SIGINT, SIGTERM);
  m.signals->async_wait([this](const asio::error_code& ec, int) {
    if (!ec) impl_->StopAll();
  });
  m.Accept();
  return Status::OK();
}

uint16_t Server::port() const { return impl_->acceptor ? impl_->acceptor->local_endpoint().port() : 0; }

void Server::Run() {
  Impl& m = *impl_;
  std::vector<std::thread> workers;
  for (size_t i = 1; i < m.ios.size(); ++i) workers.emplace_back([io = m.ios[i].get()] { io->run(); });
  m.ios[0]->run();
  for (auto& t : workers) t.join();
}

void Server::Stop() {
  if (impl_ && !impl_->ios.empty()) impl_->StopAll();
}

}  // namespace wort::server
