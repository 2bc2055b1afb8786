// src/remote/local.cc - the "local" backend of the transport (src/remote/transport.h).
//
// Memory: a client in the server's own process uses the server's mapping directly; a client in
// another process maps the same bytes of the pool file MAP_SHARED. Read/Write are memcpy,
// FetchAdd64/CompareSwap64 are std::atomic_ref operations (lock-free 64-bit atomics on x86-64,
// so they are atomic across processes sharing the page, and with the server's own CPU atomics).
// Write is visible at the target when it returns (the same mapping), Flush is a fence, Persist
// writes the lines back through the client's own mapping (pm::persist: durable).
//
// Notify: a Unix-domain SOCK_SEQPACKET socket in the abstract namespace (no file to clean up),
// one connection per client. The server's notify thread poll()s the listening socket and every
// client socket, gives each accepted client its id (the first 4 bytes it receives: ServerSide()
// is 0, clients 1, 2, ...) and calls the handler once per message, in the order each client sent
// them. A message sent after a Write is received after the Write is visible (the send/recv
// system calls order them).
//
// RegionInfo.address: "<socket name>|<file offset of the region>|<pool file path>". The path is
// empty when the region is not in a file (anonymous memory): then only clients in the server's
// process can connect (they find the region in this process's table of live servers).
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "remote/backend.h"

namespace wort::remote {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// How long a local client waits for its server's notify thread: for room in the socket's queue
// (Notify) and for its client id (connect). WORT_LOCAL_TIMEOUT_MS, default 10 s (the same as
// WORT_UCX_TIMEOUT_MS); read at each wait, which is rare, so that a test can set it at any time.
std::chrono::milliseconds LocalTimeout() {
  const char* e = std::getenv("WORT_LOCAL_TIMEOUT_MS");
  const long v = e ? std::atol(e) : 0;
  return std::chrono::milliseconds(v > 0 ? v : 10000L);
}

// poll() of one descriptor for `events` until `deadline` (returns early on an event or EINTR).
void WaitFor(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  pollfd p{fd, events, 0};
  (void)::poll(&p, 1, static_cast<int>(std::max<long long>(1, left.count() + 1)));
}

// Live local servers of this process: socket name -> region base (in-process clients).
std::mutex g_mu;
std::map<std::string, char*>& Registry() {
  static std::map<std::string, char*> r;
  return r;
}

sockaddr_un AbstractAddr(const std::string& name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  a.sun_path[0] = '\0';
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

// The file offset of `p` if it lies in a file mapping of `path` (from /proc/self/maps).
bool FileOffsetOf(const void* p, const std::string& path, std::uint64_t* off) {
  char real[PATH_MAX];
  if (realpath(path.c_str(), real) == nullptr) return false;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  auto addr = reinterpret_cast<std::uintptr_t>(p);
  while (std::getline(maps, line)) {
    unsigned long lo = 0, hi = 0, foff = 0;
    char perms[8], dev[16];
    unsigned long inode = 0;
    int n = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx %7s %lx %15s %lu %n", &lo, &hi, perms, &foff, dev, &inode, &n) < 6) continue;
    if (addr < lo || addr >= hi) continue;
    std::string file = line.substr(static_cast<std::size_t>(n));
    if (file != real) return false;
    *off = foff + (addr - lo);
    return true;
  }
  return false;
}

class LocalConnection final : public Connection {
 public:
  LocalConnection(char* base, std::uint64_t size, int fd, std::uint32_t id, void* map, std::size_t map_len)
      : base_(base), size_(size), fd_(fd), id_(id), map_(map), map_len_(map_len) {}
  ~LocalConnection() override {
    if (fd_ >= 0) ::close(fd_);
    if (map_ != nullptr) ::munmap(map_, map_len_);
  }
  Status Read(std::uint64_t off, void* dst, std::size_t len) override {
    WORT_RETURN_IF_ERROR(CheckRange(off, len, size_));
    CopyFromRegion(static_cast<char*>(dst), base_ + off, len);
    std::atomic_thread_fence(std::memory_order_acquire);
    ++c_.reads;
    c_.bytes_read += len;
    return Status::OK();
  }
  Status Write(std::uint64_t off, const void* src, std::size_t len) override {
    WORT_RETURN_IF_ERROR(CheckRange(off, len, size_));
    std::atomic_thread_fence(std::memory_order_release);
    CopyToRegion(base_ + off, static_cast<const char*>(src), len);
    ++c_.writes;
    c_.bytes_written += len;
    return Status::OK();
  }
  Status FetchAdd64(std::uint64_t off, std::uint64_t add, std::uint64_t* old) override {
    WORT_RETURN_IF_ERROR(CheckAtomic(off, size_));
    std::uint64_t v = Word(off).fetch_add(add, std::memory_order_seq_cst);
    if (old != nullptr) *old = v;
    ++c_.atomics;
    return Status::OK();
  }
  Status CompareSwap64(std::uint64_t off, std::uint64_t expected, std::uint64_t desired, std::uint64_t* old) override {
    WORT_RETURN_IF_ERROR(CheckAtomic(off, size_));
    Word(off).compare_exchange_strong(expected, desired, std::memory_order_seq_cst);
    if (old != nullptr) *old = expected;  // the value found (== expected on success)
    ++c_.atomics;
    return Status::OK();
  }
  // Never blocks without end (h66): the socket's queue holds about 278 small messages (the
  // sender's SO_SNDBUF, 208 KiB by default, at ~768 bytes of kernel memory per message); when
  // they are all unread - the server is stopped (SIGSTOP), or its notify thread is stuck - a
  // blocking send() waited for ever (the kill test hung there: a writer waiting for the apply of
  // its node notified a stopped server until the queue was full). Now the send does not block;
  // with the queue full it waits for room with poll() up to LocalTimeout(), then fails (IOError).
  Status Notify(std::string_view msg) override {
    if (msg.size() > kMaxNotifyLen) return Status::InvalidArgument("remote: notify message longer than 4096 bytes");
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::chrono::steady_clock::time_point deadline{};
    for (;;) {
      ssize_t n = ::send(fd_, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n == static_cast<ssize_t>(msg.size())) break;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        const auto now = std::chrono::steady_clock::now();
        if (deadline == std::chrono::steady_clock::time_point{}) deadline = now + LocalTimeout();
        if (now >= deadline) {
          return Status::IOError("remote local: the server took no notification in " +
                                 std::to_string(LocalTimeout().count()) + " ms (its queue is full: stopped?)");
        }
        WaitFor(fd_, POLLOUT, deadline);
        continue;
      }
      return Status::IOError(Errno("remote local: notify send"));
    }
    ++c_.notifies;
    return Status::OK();
  }
  Status Flush() override {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return Status::OK();
  }
  Status Persist(std::uint64_t off, std::size_t len) override {
    WORT_RETURN_IF_ERROR(CheckRange(off, len, size_));
    PersistMapped(base_ + off, len);  // this process maps the region: write the lines back itself
    return Status::OK();
  }
  std::uint32_t client_id() const override { return id_; }
  Counters counters() const override { return c_; }

 private:
  std::atomic_ref<std::uint64_t> Word(std::uint64_t off) {
    return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(base_ + off));
  }
  char* base_;
  std::uint64_t size_;
  int fd_;
  std::uint32_t id_;
  void* map_;  // the client's own mapping (nullptr in the server's process)
  std::size_t map_len_;
  Counters c_;
};

// Connects the notification socket and receives the client id.
Status ConnectSocket(const std::string& name, int* fd_out, std::uint32_t* id) {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IOError(Errno("remote local: socket"));
  socklen_t len;
  sockaddr_un a = AbstractAddr(name, &len);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    Status s = Status::IOError(Errno(("remote local: connect to the server's socket '" + name + "'").c_str()));
    ::close(fd);
    return s;
  }
  // The id comes from the server's notify thread; a stopped server's listening socket still
  // accepts the connection (the kernel queues it), so wait for the id with a deadline (h66).
  std::uint32_t v = 0;
  ssize_t n;
  const auto deadline = std::chrono::steady_clock::now() + LocalTimeout();
  for (;;) {
    n = ::recv(fd, &v, sizeof v, MSG_DONTWAIT);
    if (n >= 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) break;
    if (std::chrono::steady_clock::now() >= deadline) break;
    WaitFor(fd, POLLIN, deadline);
  }
  if (n != sizeof v) {
    ::close(fd);
    return Status::IOError("remote local: the server did not send a client id in " +
                           std::to_string(LocalTimeout().count()) + " ms");
  }
  *fd_out = fd;
  *id = v;
  return Status::OK();
}

class LocalServer final : public Server {
 public:
  ~LocalServer() override { Stop(); }

  Status Start(char* base, std::uint64_t size, std::string_view pool_path, NotifyHandler h) {
    base_ = base;
    size_ = size;
    handler_ = std::move(h);
    std::uint64_t foff = 0;
    std::string path(pool_path);
    if (!path.empty() && !FileOffsetOf(base, path, &foff)) {
      return Status::InvalidArgument("remote local: the region is not a mapping of '" + path + "'");
    }
    std::random_device rd;
    static std::atomic<std::uint64_t> seq{0};
    name_ = "wort-remote-" + std::to_string(::getpid()) + "-" + std::to_string(seq++) + "-" + std::to_string(rd());
    listen_fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) return Status::IOError(Errno("remote local: socket"));
    socklen_t len;
    sockaddr_un a = AbstractAddr(name_, &len);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(listen_fd_, 128) != 0) {
      return Status::IOError(Errno("remote local: bind/listen"));
    }
    stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
    if (stop_fd_ < 0) return Status::IOError(Errno("remote local: eventfd"));
    info_.backend = "local";
    info_.address = name_ + "|" + std::to_string(foff) + "|" + path;
    info_.size = size;
    {
      std::lock_guard<std::mutex> g(g_mu);
      Registry()[name_] = base;
    }
    registered_ = true;
    thread_ = std::thread([this] { Loop(); });
    int fd;
    std::uint32_t id;
    WORT_RETURN_IF_ERROR(ConnectSocket(name_, &fd, &id));
    self_ = std::make_unique<LocalConnection>(base_, size_, fd, id, nullptr, 0);
    return Status::OK();
  }

  RegionInfo info() const override { return info_; }
  Connection& ServerSide() override { return *self_; }

  void Stop() override {
    if (thread_.joinable()) {
      std::uint64_t one = 1;
      ssize_t n = ::write(stop_fd_, &one, sizeof one);
      (void)n;
      thread_.join();
    }
    if (registered_) {
      std::lock_guard<std::mutex> g(g_mu);
      Registry().erase(name_);
      registered_ = false;
    }
    self_.reset();
    for (int fd : clients_fds_) ::close(fd);
    clients_fds_.clear();
    if (listen_fd_ >= 0) ::close(listen_fd_), listen_fd_ = -1;
    if (stop_fd_ >= 0) ::close(stop_fd_), stop_fd_ = -1;
  }

 private:
  void Loop() {
    std::vector<pollfd> fds;
    std::vector<char> buf(kMaxNotifyLen + 1);
    for (;;) {
      fds.clear();
      fds.push_back({stop_fd_, POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (int fd : clients_fds_) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        std::fprintf(stderr, "wort remote local: poll: %s\n", std::strerror(errno));
        return;
      }
      if (fds[0].revents) return;
      if (fds[1].revents & POLLIN) {
        int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          std::uint32_t id = next_id_++;
          if (::send(c, &id, sizeof id, MSG_NOSIGNAL) == sizeof id) {
            clients_fds_.push_back(c);
            ids_.push_back(id);
          } else {
            ::close(c);
          }
        }
      }
      std::vector<std::size_t> dead;
      for (std::size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        std::size_t k = i - 2;
        ssize_t n = ::recv(fds[i].fd, buf.data(), buf.size(), MSG_DONTWAIT);
        if (n > 0) {
          std::atomic_thread_fence(std::memory_order_seq_cst);
          if (handler_) handler_(ids_[k], std::string_view(buf.data(), static_cast<std::size_t>(n)));
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          dead.push_back(k);
        }
      }
      for (auto it = dead.rbegin(); it != dead.rend(); ++it) {
        ::close(clients_fds_[*it]);
        clients_fds_.erase(clients_fds_.begin() + static_cast<std::ptrdiff_t>(*it));
        ids_.erase(ids_.begin() + static_cast<std::ptrdiff_t>(*it));
      }
    }
  }

  char* base_ = nullptr;
  std::uint64_t size_ = 0;
  NotifyHandler handler_;
  std::string name_;
  RegionInfo info_;
  int listen_fd_ = -1, stop_fd_ = -1;
  bool registered_ = false;
  std::thread thread_;
  std::vector<int> clients_fds_;  // owned by the notify thread while it runs
  std::vector<std::uint32_t> ids_;
  std::uint32_t next_id_ = 0;
  std::unique_ptr<LocalConnection> self_;
};

}  // namespace

Status ListenLocal(void* base, std::uint64_t size, std::string_view pool_path, NotifyHandler on_notify,
                   std::unique_ptr<Server>* out) {
  auto s = std::make_unique<LocalServer>();
  WORT_RETURN_IF_ERROR(s->Start(static_cast<char*>(base), size, pool_path, std::move(on_notify)));
  *out = std::move(s);
  return Status::OK();
}

Status ConnectLocal(const RegionInfo& info, std::unique_ptr<Connection>* out) {
  std::size_t a = info.address.find('|');
  std::size_t b = a == std::string::npos ? a : info.address.find('|', a + 1);
  if (b == std::string::npos) return Status::InvalidArgument("remote local: bad address '" + info.address + "'");
  std::string name = info.address.substr(0, a);
  std::uint64_t foff = 0;
  try {
    foff = std::stoull(info.address.substr(a + 1, b - a - 1));
  } catch (...) {
    return Status::InvalidArgument("remote local: bad file offset in address '" + info.address + "'");
  }
  std::string path = info.address.substr(b + 1);
  if (info.size == 0) return Status::InvalidArgument("remote local: region size 0");
  char* base = nullptr;
  {
    std::lock_guard<std::mutex> g(g_mu);
    auto it = Registry().find(name);
    if (it != Registry().end()) base = it->second;
  }
  void* map = nullptr;
  std::size_t map_len = 0;
  if (base == nullptr) {
    if (path.empty()) return Status::InvalidArgument("remote local: the region is not in a file and its server is not in this process");
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return Status::IOError(Errno(("remote local: open " + path).c_str()));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) < foff + info.size) {
      ::close(fd);
      return Status::InvalidArgument("remote local: " + path + " is shorter than the region");
    }
    std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    std::uint64_t start = foff / page * page;
    map_len = static_cast<std::size_t>(foff - start + info.size);
    map = ::mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(start));
    ::close(fd);
    if (map == MAP_FAILED) return Status::IOError(Errno(("remote local: mmap " + path).c_str()));
    base = static_cast<char*>(map) + (foff - start);
  }
  int fd;
  std::uint32_t id;
  Status s = ConnectSocket(name, &fd, &id);
  if (!s.ok()) {
    if (map != nullptr) ::munmap(map, map_len);
    return s;
  }
  *out = std::make_unique<LocalConnection>(base, info.size, fd, id, map, map_len);
  return Status::OK();
}

}  // namespace wort::remote
