// The mc-benchmark-style load client (see loadgen.h).
#include "server/loadgen.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <random>
#include <thread>
#include <vector>

namespace wort::server {

namespace {

using Clock = std::chrono::steady_clock;

int Connect(const LoadOptions& o, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, o.host.c_str(), &a.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads one complete reply: a line for SET; for GET, VALUE blocks (each "VALUE key flags bytes
// [cas]\r\n" + bytes + "\r\n") up to "END\r\n". Returns the number of values (SET: 1 =
// stored), -1 on an error reply or a malformed one.
class Reader {
 public:
  explicit Reader(int fd) : fd_(fd) { buf_.resize(1 << 16); }
  int ReadReply(bool get) {
    int values = 0;
    for (;;) {
      const std::string_view have(buf_.data() + pos_, end_ - pos_);
      const size_t nl = have.find("\r\n");
      if (nl != std::string_view::npos) {
        const std::string_view line = have.substr(0, nl);
        if (!get) {
          pos_ += nl + 2;
          return line == "STORED" ? 1 : -1;
        }
        if (line == "END") {
          pos_ += nl + 2;
          return values;
        }
        if (line.substr(0, 6) != "VALUE ") return -1;
        // bytes is the 4th token (a 5th, the cas, only after gets).
        size_t tok = 0, i = 6, b = 0, e = 0;
        while (i < line.size() && tok < 3) {
          const size_t sp = line.find(' ', i);
          const size_t end = sp == std::string_view::npos ? line.size() : sp;
          if (++tok == 3) b = i, e = end;
          i = end + 1;
        }
        if (tok < 3 || b == e) return -1;
        uint64_t bytes = 0;
        for (size_t k = b; k < e; ++k) {
          if (line[k] < '0' || line[k] > '9') return -1;
          bytes = bytes * 10 + static_cast<uint64_t>(line[k] - '0');
        }
        if (have.size() >= nl + 2 + bytes + 2) {
          pos_ += nl + 2 + bytes + 2;
          ++values;
          continue;
        }
      }
      if (pos_ > 0) {
        std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
        end_ -= pos_;
        pos_ = 0;
      }
      if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
      const ssize_t n = ::recv(fd_, buf_.data() + end_, buf_.size() - end_, 0);
      if (n <= 0) return -1;
      end_ += static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
};

double Percentile(std::vector<uint32_t>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return v[i] / 1000.0;
}

}  // namespace

Status RunPhase(const LoadOptions& o, Phase phase, PhaseResult* out) {
  if (o.keys_per_get < 1) return Status::InvalidArgument("keys per get must be at least 1");
  if (o.keys_per_get > 1 && !o.more_ports.empty())
    return Status::InvalidArgument("keys per get > 1 is for one server (no --more-ports)");
  if (o.pipeline < 1) return Status::InvalidArgument("pipeline depth must be at least 1");
  if (o.pipeline > 1 && !o.more_ports.empty())
    return Status::InvalidArgument("a pipeline depth > 1 is for one server (no --more-ports)");
  const int pipeline = o.pipeline;
  const int c = std::max(1, o.connections);
  std::vector<uint16_t> ports{o.port};
  ports.insert(ports.end(), o.more_ports.begin(), o.more_ports.end());
  const size_t ns = ports.size();
  std::vector<int> fds;  // connection t, server j: fds[t * ns + j]
  for (int i = 0; i < c; ++i) {
    for (uint16_t port : ports) {
      const int fd = Connect(o, port);
      if (fd < 0) {
        for (int f : fds) ::close(f);
        return Status::IOError("cannot connect to " + o.host + ":" + std::to_string(port));
      }
      fds.push_back(fd);
    }
  }
  const bool fill = phase == Phase::kFill;
  const uint64_t total = fill ? o.keyspace : o.requests;
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> errors{0}, misses{0}, keys_done{0};
  std::vector<std::vector<uint32_t>> lat(c);  // ns per request, per connection
  const std::string value(o.value_size, 'x');
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.max_seconds));
  std::vector<std::thread> threads;
  for (int t = 0; t < c; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(t) + static_cast<uint64_t>(phase) * 7777);
      std::vector<Reader> rds;
      for (size_t j = 0; j < ns; ++j) rds.emplace_back(fds[t * ns + j]);
      std::string req;
      lat[t].reserve(total / c + 16);
      // Requests sent and not yet answered on this connection, oldest first (a server answers
      // one connection's requests in order). At most o.pipeline of them.
      struct Pending {
        Clock::time_point sent;
        int nkeys;
        bool set;
        size_t server;
      };
      std::deque<Pending> inflight;
      // Reads the reply to the oldest pending request; false ends the thread (an error counted).
      auto reap = [&]() -> bool {
        const Pending p = inflight.front();
        inflight.pop_front();
        const int r = rds[p.server].ReadReply(!p.set);
        const auto e = Clock::now();
        if (r < 0 || r > p.nkeys) {
          errors.fetch_add(1);
          return false;
        }
        if (r < p.nkeys) misses.fetch_add(static_cast<uint64_t>(p.nkeys - r), std::memory_order_relaxed);
        keys_done.fetch_add(static_cast<uint64_t>(p.nkeys), std::memory_order_relaxed);
        lat[t].push_back(static_cast<uint32_t>(
            std::min<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(e - p.sent).count(), UINT32_MAX)));
        return true;
      };
      for (uint64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < total;) {
        const uint64_t k = fill ? i : rng() % o.keyspace;
        const bool set = phase == Phase::kSet || fill ||
                         (phase == Phase::kMixed && static_cast<int>(rng() % 100) >= o.get_percent);
        const std::string key = "key:" + std::to_string(k);
        const size_t j = ns == 1 ? 0 : std::hash<std::string>()(key) % ns;
        const int fd = fds[t * ns + j];
        const int nkeys = set ? 1 : o.keys_per_get;
        req.clear();
        if (set) {
          req += "set " + key + " 0 0 " + std::to_string(value.size()) + "\r\n";
          req += value;
          req += "\r\n";
        } else {
          req += "get " + key;
          for (int m = 1; m < nkeys; ++m) req += " key:" + std::to_string(rng() % o.keyspace);
          req += "\r\n";
        }
        const auto s = Clock::now();
        if (!SendAll(fd, req)) {
          errors.fetch_add(1);
          return;
        }
        inflight.push_back({s, nkeys, set, j});
        if (static_cast<int>(inflight.size()) >= pipeline && !reap()) return;
        if ((lat[t].size() & 255) == 0 && !lat[t].empty() && Clock::now() > deadline) break;
      }
      while (!inflight.empty())
        if (!reap()) return;
    });
  }
  for (auto& th : threads) th.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int f : fds) ::close(f);
  std::vector<uint32_t> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  PhaseResult r;
  switch (phase) {
    case Phase::kSet: r.name = "SET"; break;
    case Phase::kGet: r.name = "GET"; break;
    case Phase::kFill: r.name = "FILL"; break;
    case Phase::kMixed: r.name = "MIX" + std::to_string(o.get_percent); break;
  }
  r.requests = keys_done.load();
  r.errors = errors.load();
  r.misses = misses.load();
  r.seconds = secs;
  r.ops_per_sec = secs > 0 ? static_cast<double>(r.requests) / secs : 0;
  r.p50_us = Percentile(all, 0.50);
  r.p99_us = Percentile(all, 0.99);
  r.max_us = all.empty() ? 0 : *std::max_element(all.begin(), all.end()) / 1000.0;
  *out = r;
  return Status::OK();
}

}  // namespace wort::server
