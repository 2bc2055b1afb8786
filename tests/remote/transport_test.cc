// The transport (src/remote/transport.h) over every backend configuration: local, ucx over
// shared memory (UCX_TLS=sm) and ucx over TCP (UCX_TLS=tcp). Each test checks results that a
// wrong backend would get wrong: bytes read back, bounds errors, atomics' old values and totals
// under concurrency, a CAS lock's mutual exclusion, notifications (id, order, data visible),
// and clients in other processes.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "remote/remote_test_util.h"
#include "remote/transport.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort::remote {
namespace {

using test::FileRegion;

constexpr std::uint64_t kCounterOff = 0;    // FetchAdd64 total
constexpr std::uint64_t kLockOff = 8;       // CAS lock word
constexpr std::uint64_t kGuardedOff = 16;   // counter changed only under the lock (Read+Write)
constexpr std::uint64_t kSlotsOff = 4096;   // per-client 64-byte slots written before a Notify

// One unit of work of a client (thread or process): `n` FetchAdds of 1, `n` increments of the
// guarded counter under the CAS lock (released by a CAS through the transport), then a 64-byte
// pattern in its slot and a Notify naming the slot. Returns false on any failed call.
bool ClientWork(Connection& c, int n, int slot) {
  for (int i = 0; i < n; ++i) {
    std::uint64_t old;
    if (!c.FetchAdd64(kCounterOff, 1, &old).ok()) return false;
    for (;;) {
      if (!c.CompareSwap64(kLockOff, 0, c.client_id() + 1, &old).ok()) return false;
      if (old == 0) break;
      std::this_thread::yield();
    }
    std::uint64_t v;
    if (!c.Read(kGuardedOff, &v, 8).ok()) return false;
    ++v;
    if (!c.Write(kGuardedOff, &v, 8).ok()) return false;
    if (!c.CompareSwap64(kLockOff, c.client_id() + 1, 0, &old).ok() || old != c.client_id() + 1) return false;
  }
  char pat[64];
  for (int i = 0; i < 64; ++i) pat[i] = static_cast<char>(slot * 31 + i * 7);
  if (!c.Write(kSlotsOff + 64 * static_cast<std::uint64_t>(slot), pat, 64).ok()) return false;
  return c.Notify("slot:" + std::to_string(slot)).ok();
}

// The child process of the cross-process tests (this binary re-executed with WORT_REMOTE_CHILD).
struct RemoteChildMain {
  RemoteChildMain() {
    const char* role = std::getenv("WORT_REMOTE_CHILD");
    if (role == nullptr) return;
    RegionInfo info;
    info.backend = std::getenv("WORT_RC_BACKEND");
    info.address = std::getenv("WORT_RC_ADDR");
    info.size = std::strtoull(std::getenv("WORT_RC_SIZE"), nullptr, 10);
    std::unique_ptr<Connection> c;
    Status s = Connect(info, &c);
    if (!s.ok()) {
      std::fprintf(stderr, "child: %s\n", s.ToString().c_str());
      std::_Exit(3);
    }
    bool ok = ClientWork(*c, std::atoi(std::getenv("WORT_RC_N")), std::atoi(std::getenv("WORT_RC_SLOT")));
    c.reset();
    std::_Exit(ok ? 0 : 4);
  }
};
RemoteChildMain g_child_main;

// Collects notifications: (client id, message) in arrival order.
struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<std::uint32_t, std::string>> got;
  NotifyHandler Handler(char* base) {
    return [this, base](std::uint32_t id, std::string_view msg) {
      std::lock_guard<std::mutex> g(mu);
      got.emplace_back(id, std::string(msg));
      // The data written before the Notify must be visible now: check a slot message's bytes.
      if (msg.substr(0, 5) == "slot:") {
        int slot = std::atoi(std::string(msg.substr(5)).c_str());
        for (int i = 0; i < 64; ++i) {
          if (base[kSlotsOff + 64 * slot + i] != static_cast<char>(slot * 31 + i * 7)) {
            got.emplace_back(id, "DATA NOT VISIBLE for " + std::string(msg));
            break;
          }
        }
      }
      cv.notify_all();
    };
  }
  bool WaitFor(std::size_t n) {
    std::unique_lock<std::mutex> l(mu);
    return cv.wait_for(l, std::chrono::seconds(30), [&] { return got.size() >= n; });
  }
};

class TransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { backend_ = test::UseRemoteConfig(GetParam()); }
  std::string backend_;
};

TEST_P(TransportTest, ReadWriteAndBounds) {
  FileRegion r(1 << 16);
  std::unique_ptr<Server> srv;
  ASSERT_TRUE(Listen(backend_, r.base(), r.size(), r.path(), nullptr, &srv).ok());
  EXPECT_EQ(srv->info().backend, backend_);
  EXPECT_EQ(srv->info().size, r.size());
  std::unique_ptr<Connection> c;
  ASSERT_TRUE(Connect(srv->info(), &c).ok());
  // Every byte value, at an odd offset, crossing a page.
  std::string in(5000, '\0');
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(i * 13 + 0x80);
  ASSERT_TRUE(c->Write(4093, in.data(), in.size()).ok());
  EXPECT_EQ(std::memcmp(r.base() + 4093, in.data(), in.size()), 0);  // visible at the target
  std::string out(in.size(), 'x');
  ASSERT_TRUE(c->Read(4093, out.data(), out.size()).ok());
  EXPECT_EQ(out, in);
  // The server's CPU store is seen by the client's Read.
  std::memcpy(r.base() + 100, "server", 6);
  char six[6];
  ASSERT_TRUE(c->Read(100, six, 6).ok());
  EXPECT_EQ(std::string(six, 6), "server");
  // Out of range and misaligned: InvalidArgument, nothing written.
  char b = 1;
  EXPECT_EQ(c->Write(r.size(), &b, 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(c->Read(r.size() - 4, out.data(), 8).code(), Code::kInvalidArgument);
  EXPECT_EQ(c->Read(~0ull - 2, out.data(), 8).code(), Code::kInvalidArgument);
  std::uint64_t old;
  EXPECT_EQ(c->FetchAdd64(4, 1, &old).code(), Code::kInvalidArgument);
  EXPECT_EQ(c->CompareSwap64(r.size(), 0, 1, &old).code(), Code::kInvalidArgument);
  EXPECT_EQ(c->Notify(std::string(4097, 'n')).code(), Code::kInvalidArgument);
  Connection::Counters k = c->counters();
  EXPECT_EQ(k.writes, 1u);
  EXPECT_EQ(k.reads, 2u);
  EXPECT_EQ(k.bytes_written, in.size());
  EXPECT_EQ(k.bytes_read, in.size() + 6);
  c.reset();
  srv->Stop();
}

// Persist (issue 32): makes a Write's bytes durable without the server's CPU. local: the
// client writes the lines back itself (pm::persist on its mapping: this thread's flush counters
// grow by the lines of the range); ucx: endpoint flush + a read-after-write of the range's last
// word (one more Read). Out of range: InvalidArgument.
TEST_P(TransportTest, PersistWritesBackOrReadsAfterWrite) {
  FileRegion r(1 << 16);
  std::unique_ptr<Server> srv;
  ASSERT_TRUE(Listen(backend_, r.base(), r.size(), r.path(), nullptr, &srv).ok());
  std::unique_ptr<Connection> c;
  ASSERT_TRUE(Connect(srv->info(), &c).ok());
  std::string in(200, '\0');
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(0xff - i);
  ASSERT_TRUE(c->Write(128, in.data(), in.size()).ok());
  const pm::Counters before = pm::ThisThreadCounters();
  const Connection::Counters k0 = c->counters();
  ASSERT_TRUE(c->Persist(128, in.size()).ok());
  const pm::Counters d = pm::ThisThreadCounters() - before;
  const Connection::Counters k1 = c->counters();
  if (backend_ == "local") {
    EXPECT_EQ(d.lines_flushed, 4u);  // [128, 328): lines 2..5
    EXPECT_GE(d.fences, 1u);
    EXPECT_EQ(k1.reads, k0.reads);
  } else {
    EXPECT_EQ(d.lines_flushed, 0u);
    EXPECT_EQ(k1.reads, k0.reads + 1);  // the read-after-write
  }
  EXPECT_EQ(std::memcmp(r.base() + 128, in.data(), in.size()), 0);
  EXPECT_EQ(c->Persist(r.size() - 8, 16).code(), Code::kInvalidArgument);
  EXPECT_EQ(c->Persist(~0ull - 2, 8).code(), Code::kInvalidArgument);
  EXPECT_TRUE(c->Persist(r.size() - 8, 8).ok());
  c.reset();
  srv->Stop();
}

TEST_P(TransportTest, AtomicsReturnOldValues) {
  FileRegion r(1 << 16);
  std::unique_ptr<Server> srv;
  ASSERT_TRUE(Listen(backend_, r.base(), r.size(), r.path(), nullptr, &srv).ok());
  std::unique_ptr<Connection> c;
  ASSERT_TRUE(Connect(srv->info(), &c).ok());
  std::uint64_t old = 7;
  ASSERT_TRUE(c->FetchAdd64(64, 5, &old).ok());
  EXPECT_EQ(old, 0u);
  ASSERT_TRUE(c->FetchAdd64(64, ~0ull, &old).ok());  // wraps: 5 + (2^64-1) = 4
  EXPECT_EQ(old, 5u);
  ASSERT_TRUE(c->CompareSwap64(64, 3, 9, &old).ok());  // fails: 4 != 3
  EXPECT_EQ(old, 4u);
  ASSERT_TRUE(c->CompareSwap64(64, 4, 0x8000000000000001ull, &old).ok());
  EXPECT_EQ(old, 4u);
  std::uint64_t v;
  std::memcpy(&v, r.base() + 64, 8);
  EXPECT_EQ(v, 0x8000000000000001ull);
  // ServerSide's atomics act on the same words.
  ASSERT_TRUE(srv->ServerSide().FetchAdd64(64, 1, &old).ok());
  EXPECT_EQ(old, 0x8000000000000001ull);
  ASSERT_TRUE(c->Read(64, &v, 8).ok());
  EXPECT_EQ(v, 0x8000000000000002ull);
  EXPECT_EQ(c->counters().atomics, 4u);
  c.reset();
  srv->Stop();
}

TEST_P(TransportTest, ConcurrentClientsAtomicsAndLock) {
  FileRegion r(1 << 16);
  Inbox inbox;
  std::unique_ptr<Server> srv;
  ASSERT_TRUE(Listen(backend_, r.base(), r.size(), r.path(), inbox.Handler(r.base()), &srv).ok());
  constexpr int kThreads = 3;
  const int n = backend_ == "local" || GetParam() == "ucx-sm" ? 2000 : 150;
  std::vector<std::unique_ptr<Connection>> conns(kThreads);
  for (auto& c : conns) ASSERT_TRUE(Connect(srv->info(), &c).ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      if (!ClientWork(*conns[t], n, t)) ++failures;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  std::uint64_t total, guarded, lock;
  std::memcpy(&total, r.base() + kCounterOff, 8);
  std::memcpy(&guarded, r.base() + kGuardedOff, 8);
  std::memcpy(&lock, r.base() + kLockOff, 8);
  EXPECT_EQ(total, std::uint64_t(kThreads) * n);
  EXPECT_EQ(guarded, std::uint64_t(kThreads) * n);  // no lost update: the lock excluded
  EXPECT_EQ(lock, 0u);
  ASSERT_TRUE(inbox.WaitFor(kThreads));
  std::map<std::uint32_t, int> per_id;
  for (auto& [id, m] : inbox.got) {
    EXPECT_EQ(m.substr(0, 5), "slot:") << m;
    ++per_id[id];
  }
  EXPECT_EQ(per_id.size(), std::size_t(kThreads));  // distinct client ids
  for (auto& c : conns) EXPECT_NE(c->client_id(), srv->ServerSide().client_id());
  conns.clear();
  srv->Stop();
}

TEST_P(TransportTest, NotifyOrderPerClient) {
  FileRegion r(1 << 16);
  Inbox inbox;
  std::unique_ptr<Server> srv;
  ASSERT_TRUE(Listen(backend_, r.base(), r.size(), r.path(), inbox.Handler(r.base()), &srv).ok());
  std::unique_ptr<Connection> a, b;
  ASSERT_TRUE(Connect(srv->info(), &a).ok());
  ASSERT_TRUE(Connect(srv->info(), &b).ok());
  ASSERT_NE(a->client_id(), b->client_id());
  constexpr int kMsgs = 200;
  for (int i = 0; i < kMsgs; ++i) {
    // Every byte value in the message, 0x00 and >= 0x80 included.
    std::string m = std::to_string(i) + std::string(1, '\0') + std::string(1, static_cast<char>(0x80 + i % 128));
    ASSERT_TRUE(a->Notify(m).ok());
    ASSERT_TRUE(b->Notify("b" + m).ok());
  }
  ASSERT_TRUE(inbox.WaitFor(2 * kMsgs));
  int na = 0, nb = 0;
  for (auto& [id, m] : inbox.got) {
    if (id == a->client_id()) {
      EXPECT_EQ(m, std::to_string(na) + std::string(1, '\0') + std::string(1, static_cast<char>(0x80 + na % 128)));
      ++na;
    } else {
      EXPECT_EQ(id, b->client_id());
      EXPECT_EQ(m, "b" + std::to_string(nb) + std::string(1, '\0') + std::string(1, static_cast<char>(0x80 + nb % 128)));
      ++nb;
    }
  }
  EXPECT_EQ(na, kMsgs);
  EXPECT_EQ(nb, kMsgs);
  EXPECT_EQ(a->counters().notifies, std::uint64_t(kMsgs));
  a.reset();
  b.reset();
  srv->Stop();
}

TEST_P(TransportTest, ClientsInOtherProcesses) {
  FileRegion r(1 << 16);
  Inbox inbox;
  std::unique_ptr<Server> srv;
  ASSERT_TRUE(Listen(backend_, r.base(), r.size(), r.path(), inbox.Handler(r.base()), &srv).ok());
  const RegionInfo info = srv->info();
  constexpr int kChildren = 2;
  const int n = GetParam() == "ucx-tcp" ? 100 : 1000;
  std::vector<pid_t> kids;
  for (int k = 0; k < kChildren; ++k) {
    kids.push_back(test::SpawnSelf({"WORT_REMOTE_CHILD=1", "WORT_RC_BACKEND=" + info.backend, "WORT_RC_ADDR=" + info.address,
                                    "WORT_RC_SIZE=" + std::to_string(info.size), "WORT_RC_N=" + std::to_string(n),
                                    "WORT_RC_SLOT=" + std::to_string(k)}));
  }
  // The server's process is a client too, at the same time.
  std::unique_ptr<Connection> c;
  ASSERT_TRUE(Connect(info, &c).ok());
  EXPECT_TRUE(ClientWork(*c, n, kChildren));
  for (pid_t p : kids) EXPECT_EQ(test::WaitChild(p), 0);
  std::uint64_t total, guarded;
  std::memcpy(&total, r.base() + kCounterOff, 8);
  std::memcpy(&guarded, r.base() + kGuardedOff, 8);
  EXPECT_EQ(total, std::uint64_t(kChildren + 1) * n);
  EXPECT_EQ(guarded, std::uint64_t(kChildren + 1) * n);
  ASSERT_TRUE(inbox.WaitFor(kChildren + 1));
  for (auto& [id, m] : inbox.got) EXPECT_EQ(m.find("DATA NOT VISIBLE"), std::string::npos) << m;
  c.reset();
  srv->Stop();
}

// The region is a part of a wort pool's mapping (not at file offset 0), as CANRT's is: clients in
// other processes reach the same bytes.
TEST_P(TransportTest, RegionInsideAPool) {
  test::TempPath path("pool");
  PoolOptions po;
  po.initial_size = 8 << 20;
  po.max_size = 64 << 20;
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path.str(), po, &pool).ok());
  char* region = pool->base() + pool->heap_offset() + (1 << 20);
  constexpr std::uint64_t kSize = 1 << 20;
  std::memset(region, 0, kSize);
  Inbox inbox;
  std::unique_ptr<Server> srv;
  ASSERT_TRUE(Listen(backend_, region, kSize, path.str(), inbox.Handler(region), &srv).ok());
  const RegionInfo info = srv->info();
  const int n = GetParam() == "ucx-tcp" ? 50 : 300;
  pid_t kid = test::SpawnSelf({"WORT_REMOTE_CHILD=1", "WORT_RC_BACKEND=" + info.backend, "WORT_RC_ADDR=" + info.address,
                               "WORT_RC_SIZE=" + std::to_string(info.size), "WORT_RC_N=" + std::to_string(n),
                               "WORT_RC_SLOT=5"});
  EXPECT_EQ(test::WaitChild(kid), 0);
  std::uint64_t total;
  std::memcpy(&total, region + kCounterOff, 8);
  EXPECT_EQ(total, std::uint64_t(n));
  ASSERT_TRUE(inbox.WaitFor(1));
  EXPECT_EQ(inbox.got[0].second, "slot:5");
  // Not below the region: the pool's header is untouched by the client (offset 0 of the region
  // is the counter, not the pool's first word).
  std::unique_ptr<Connection> c;
  ASSERT_TRUE(Connect(info, &c).ok());
  std::uint64_t v = 0;
  ASSERT_TRUE(c->Read(kCounterOff, &v, 8).ok());
  EXPECT_EQ(v, std::uint64_t(n));
  c.reset();
  srv->Stop();
  EXPECT_TRUE(pool->Close().ok());
}

// The server stops while a client is connected: the client's calls fail (or, on local, still
// reach the file the client mapped) and closing it returns - nothing hangs or crashes.
TEST_P(TransportTest, ServerStopsFirst) {
  ::setenv("WORT_UCX_TIMEOUT_MS", "500", 1);  // ucx: an op with no answer fails after 0.5 s
  FileRegion r(1 << 16);
  std::unique_ptr<Server> srv;
  ASSERT_TRUE(Listen(backend_, r.base(), r.size(), r.path(), nullptr, &srv).ok());
  std::unique_ptr<Connection> c;
  ASSERT_TRUE(Connect(srv->info(), &c).ok());
  std::uint64_t v = 1;
  ASSERT_TRUE(c->Write(0, &v, 8).ok());
  srv->Stop();
  srv.reset();
  if (backend_ == "ucx") {
    // The region is still mapped here, but no worker serves it: the op fails (timeout or a
    // transport error), and so does every later one.
    EXPECT_FALSE(c->Read(0, &v, 8).ok());
    EXPECT_FALSE(c->FetchAdd64(0, 1, &v).ok());
  } else {
    EXPECT_FALSE(c->Notify("anyone?").ok());  // local: the socket is closed
  }
  c.reset();  // returns
  ::unsetenv("WORT_UCX_TIMEOUT_MS");
}

// h66: a local server whose notify thread reads nothing (the process is stopped, or the thread
// is stuck in a handler) must not hang its clients. Its socket's queue fills after a few hundred
// messages; a blocking send() then waited for ever (the CANRT kill test hung so: a writer waiting
// for the apply of its node notified a SIGSTOPped server). Now Notify fails with IOError after
// WORT_LOCAL_TIMEOUT_MS, and so does a Connect, which waits for its client id from that thread.
// Each call runs on a thread of its own and the test waits for it at most 20 s (then fails and
// unblocks the server so that the call returns): on the code before, both parts fail that way.
TEST(TransportLocal, ServerThatReadsNoNotificationFailsCallsAtTheDeadline) {
  ::setenv("WORT_LOCAL_TIMEOUT_MS", "300", 1);
  FileRegion r(1 << 16);
  std::mutex mu;
  std::condition_variable cv;
  bool open_gate = false;
  std::atomic<int> handled{0};
  std::unique_ptr<Server> srv;
  ASSERT_TRUE(Listen("local", r.base(), r.size(), r.path(),
                     [&](std::uint32_t, std::string_view) {
                       std::unique_lock<std::mutex> l(mu);
                       cv.wait(l, [&] { return open_gate; });  // the first message stalls the thread
                       ++handled;
                     },
                     &srv)
                  .ok());
  auto release = [&] {
    std::lock_guard<std::mutex> g(mu);
    open_gate = true;
    cv.notify_all();
  };
  // Runs fn on a thread; false if it has not returned within 20 s (the server is then released,
  // so that fn returns and the thread is joined).
  auto bounded = [&](std::function<void()> fn) {
    std::atomic<bool> done{false};
    std::thread t([&] {
      fn();
      done = true;
    });
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const bool ok = done;
    if (!ok) release();
    t.join();
    return ok;
  };
  std::unique_ptr<Connection> c;
  ASSERT_TRUE(Connect(srv->info(), &c).ok());
  int sent = 0;
  Status failed;
  std::chrono::steady_clock::duration failed_after{};
  const bool notify_returned = bounded([&] {
    for (int i = 0; i < 100000; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      Status s = c->Notify(std::string(1, static_cast<char>(0x80 + i % 128)));
      if (!s.ok()) {
        failed = s;
        failed_after = std::chrono::steady_clock::now() - t0;
        return;
      }
      ++sent;
    }
  });
  EXPECT_TRUE(notify_returned) << "Notify to a server that reads nothing blocked (" << sent << " sent)";
  if (notify_returned) {
    EXPECT_EQ(failed.code(), Code::kIOError) << failed.ToString() << " after " << sent << " notifications";
    EXPECT_GT(sent, 10);  // the queue holds messages: only a full one fails
    EXPECT_GE(failed_after, std::chrono::milliseconds(250));  // it waited for room until the deadline
    EXPECT_EQ(c->counters().notifies, static_cast<std::uint64_t>(sent));
  }
  std::unique_ptr<Connection> late;
  Status late_status;
  const bool connect_returned = bounded([&] { late_status = Connect(srv->info(), &late); });
  EXPECT_TRUE(connect_returned) << "Connect to a server whose notify thread is stuck blocked";
  if (connect_returned) {
    EXPECT_EQ(late_status.code(), Code::kIOError) << late_status.ToString();
  }
  // Released, the server takes every message that was sent (not the failed one), and the
  // connection works again.
  release();
  ASSERT_TRUE(c->Notify("again").ok());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (handled.load() < sent + 1 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(handled.load(), sent + 1);
  c.reset();
  late.reset();
  srv->Stop();
  ::unsetenv("WORT_LOCAL_TIMEOUT_MS");
}

TEST(TransportErrors, BadBackendsAndAddresses) {
  char buf[64];
  std::unique_ptr<Server> srv;
  EXPECT_EQ(Listen("rdma", buf, sizeof buf, "", nullptr, &srv).code(), Code::kInvalidArgument);
  EXPECT_EQ(Listen("local", nullptr, 64, "", nullptr, &srv).code(), Code::kInvalidArgument);
  EXPECT_EQ(Listen("local", buf, sizeof buf, "/dev/shm/no-such-wort-file", nullptr, &srv).code(), Code::kInvalidArgument);
  std::unique_ptr<Connection> c;
  EXPECT_EQ(Connect(RegionInfo{"bogus", "x", 8}, &c).code(), Code::kInvalidArgument);
  EXPECT_EQ(Connect(RegionInfo{"local", "no-separators", 8}, &c).code(), Code::kInvalidArgument);
  EXPECT_FALSE(Connect(RegionInfo{"local", "wort-remote-none|0|", 8}, &c).ok());
  EXPECT_FALSE(Connect(RegionInfo{"ucx", "127.0.0.1:1", 8}, &c).ok());
  EXPECT_FALSE(Connect(RegionInfo{"ucx", "not-an-address", 8}, &c).ok());
  // Anonymous memory: clients in this process only (found without a file).
  ASSERT_TRUE(Listen("local", buf, sizeof buf, "", nullptr, &srv).ok());
  ASSERT_TRUE(Connect(srv->info(), &c).ok());
  ASSERT_TRUE(c->Write(0, "abc", 3).ok());
  EXPECT_EQ(std::string(buf, 3), "abc");
  c.reset();
  srv->Stop();
}

INSTANTIATE_TEST_SUITE_P(Backends, TransportTest, ::testing::ValuesIn(test::RemoteConfigs()), test::RemoteParamName);

}  // namespace
}  // namespace wort::remote
