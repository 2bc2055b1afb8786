// The store without a global lock (src/server/store.h, Thread safety): several threads, each
// standing for a client connection, run set/get/delete/incr/cas/append on overlapping keys
// against every concurrent index kind (and one kind that serializes its own writers), with the
// results checked:
//   - every get returns a value that some set stored for that key, whole (never torn, never
//     another key's): values carry their key, writer and sequence number and a pattern derived
//     from them, checked byte for byte;
//   - incr totals are exact and no two incr replies of a key are equal (each is atomic);
//   - of the threads that cas one key with the same unique, exactly one wins;
//   - concurrent appends to one key keep every token exactly once, in each writer's order;
//   - the same over sockets: 4 connections to the server (src/server/server.h) with 2 worker
//     threads, text protocol;
//   - afterwards the eviction tracker follows the index and every allocated block is reachable
//     (no record freed twice, none leaked), also with LRU eviction in a small pool.
// Keys span the byte range (0x00 inside a key, bytes >= 0x80).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <barrier>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/index_test_util.h"
#include "common/test_util.h"
#include "server/server.h"
#include "index/registry.h"
#include "server/store.h"
#include "wort/index.h"

namespace wort::server {
namespace {

constexpr int kThreads = 4;

std::vector<std::string> Kinds() {
  std::vector<std::string> out;
  for (const char* k : {"wort", "woart", "artcow", "cceh", "fptree"})
    if (FindIndexKind(k)) out.push_back(k);
  return out;
}

// Shared keys: a prefix family, a 0x00 inside, bytes >= 0x80.
std::string SharedKey(int i) {
  std::string k = "k";
  if (i % 3 == 1) k += std::string("\x00", 1);
  if (i % 3 == 2) k += "\xff\x80";
  return k + std::to_string(i);
}

// The value of a set: "<key>|<thread>|<seq>|" then a pattern of (key, thread, seq), length
// varying from 0 to ~5000 bytes of pattern (records of many size classes), or with two_sizes
// 200 or 2000 bytes (a small pool cannot keep chunks of many classes in several threads' caches).
std::string MakeValue(const std::string& key, int t, uint64_t seq, bool two_sizes = false) {
  std::string v = key + "|" + std::to_string(t) + "|" + std::to_string(seq) + "|";
  const size_t n = two_sizes ? ((seq + t) % 2 ? 2000 : 200) : (seq * 131 + t * 17) % 5000;
  uint64_t x = std::hash<std::string>{}(v);
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v.push_back(static_cast<char>(x >> 56));
  }
  return v;
}
// True iff `v` is exactly MakeValue(key, t, seq) for some t, seq.
bool ValidValue(const std::string& key, std::string_view v) {
  if (v.size() < key.size() + 1 || v.substr(0, key.size()) != key || v[key.size()] != '|') return false;
  std::string_view rest = v.substr(key.size() + 1);
  const size_t a = rest.find('|');
  if (a == std::string_view::npos) return false;
  const size_t b = rest.find('|', a + 1);
  if (b == std::string_view::npos) return false;
  int t = 0;
  uint64_t seq = 0;
  try {
    t = std::stoi(std::string(rest.substr(0, a)));
    seq = std::stoull(std::string(rest.substr(a + 1, b - a - 1)));
  } catch (...) {
    return false;
  }
  return MakeValue(key, t, seq) == v || MakeValue(key, t, seq, true) == v;
}

struct StoreStress : ::testing::TestWithParam<std::string> {
  test::TempPath path{"store-stress"};
  std::unique_ptr<Store> st;
  void Open(EvictPolicy evict = EvictPolicy::kNone, uint64_t pool_size = 256ull << 20) {
    StoreOptions o;
    o.pool_path = path.str();
    o.index_kind = GetParam();
    o.pool_size = pool_size;
    o.evict = evict;
    o.crawler = false;
    Status s = Store::Open(o, &st);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void TearDown() override {
    Store::SetClockOffsetForTest(0);
    if (st) { EXPECT_TRUE(st->Close().ok()); }
    SetGlobalIndexLock(false);
  }
  // After the threads joined: the tracker follows the index, and the allocated blocks are
  // exactly the reachable ones (a record retired twice or never would break this).
  void ExpectConsistent(const std::string& phase) {
    std::string report;
    EXPECT_TRUE(st->CheckRecency(&report)) << phase << ": " << report;
    test::ExpectReachable(st->pool(), phase);
  }
};

TEST_P(StoreStress, SetGetDeleteNeverTornOrForeign) {
  Open();
  constexpr int kKeys = 24;
  const int ops = 3000;
  std::atomic<uint64_t> bad{0}, hits{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      uint64_t x = 0x9e3779b97f4a7c15ull * (t + 1);
      for (int i = 0; i < ops; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const std::string key = SharedKey(static_cast<int>(x % kKeys));
        const int op = static_cast<int>((x >> 20) % 10);
        if (op < 4) {
          const std::string v = MakeValue(key, t, i);
          if (st->StoreItem(StoreMode::kSet, key, static_cast<uint32_t>(t), 0, v, 0) != Result::kStored) ++bad;
        } else if (op < 9) {
          st->Get(key, [&](const ItemView& it) {
            ++hits;
            if (it.key != key || !ValidValue(key, it.data) || it.data.substr(key.size() + 1, 1) != std::to_string(it.flags))
              ++bad;
          });
        } else {
          const Result r = st->Delete(key);
          if (r != Result::kDeleted && r != Result::kNotFound) ++bad;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(hits.load(), 0u);
  // Every key left holds a whole value of its own.
  for (int i = 0; i < kKeys; ++i)
    st->Get(SharedKey(i), [&](const ItemView& it) { EXPECT_TRUE(ValidValue(SharedKey(i), it.data)) << i; });
  ExpectConsistent("set/get/delete");
}

TEST_P(StoreStress, IncrIsAtomicAndTotalsExact) {
  Open();
  constexpr int kCounters = 3;
  for (int c = 0; c < kCounters; ++c)
    ASSERT_EQ(st->StoreItem(StoreMode::kSet, "ctr" + std::to_string(c), 0, 0, "0", 0), Result::kStored);
  const int ops = 2000;
  std::vector<std::vector<std::vector<uint64_t>>> replies(kThreads, std::vector<std::vector<uint64_t>>(kCounters));
  std::vector<std::vector<uint64_t>> sums(kThreads, std::vector<uint64_t>(kCounters));
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < ops; ++i) {
        const int c = (i * 7 + t) % kCounters;
        const uint64_t delta = 1 + (i % 5);
        uint64_t v = 0;
        // Beside the incrs, other writers of the same key: a get and a touch (both keep the value).
        if (i % 10 == 3) st->Touch("ctr" + std::to_string(c), 0);
        if (st->IncrDecr("ctr" + std::to_string(c), true, delta, &v) != Result::kStored) {
          ++bad;
          continue;
        }
        replies[t][c].push_back(v);
        sums[t][c] += delta;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0u);
  for (int c = 0; c < kCounters; ++c) {
    uint64_t total = 0;
    std::set<uint64_t> seen;
    size_t n = 0;
    for (int t = 0; t < kThreads; ++t) {
      total += sums[t][c];
      n += replies[t][c].size();
      seen.insert(replies[t][c].begin(), replies[t][c].end());
    }
    EXPECT_EQ(seen.size(), n) << "two incr of ctr" << c << " returned the same value";
    std::string got;
    st->Get("ctr" + std::to_string(c), [&](const ItemView& it) { got.assign(it.data); });
    EXPECT_EQ(got, std::to_string(total)) << "ctr" << c;
    EXPECT_EQ(*seen.rbegin(), total);
  }
  ExpectConsistent("incr");
}

TEST_P(StoreStress, CasExactlyOneWins) {
  Open();
  constexpr int kRounds = 150;
  std::barrier sync(kThreads);
  std::vector<std::atomic<int>> wins(kRounds);
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const std::string key = "cas" + std::to_string(r % 7);  // keys reused across rounds
        if (t == 0) st->StoreItem(StoreMode::kSet, key, 0, 0, "round" + std::to_string(r), 0);
        sync.arrive_and_wait();  // the round's item is stored
        uint64_t cas = 0;
        if (!st->Get(key, [&](const ItemView& it) { cas = it.cas; })) ++bad;
        sync.arrive_and_wait();  // everybody holds the same cas
        const Result res = st->StoreItem(StoreMode::kCas, key, 0, 0, "won by " + std::to_string(t), cas);
        if (res == Result::kStored) {
          wins[r].fetch_add(1);
        } else if (res != Result::kExists) {
          ++bad;
        }
        sync.arrive_and_wait();  // the round is over
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0u);
  for (int r = 0; r < kRounds; ++r) EXPECT_EQ(wins[r].load(), 1) << "round " << r;
  ExpectConsistent("cas");
}

TEST_P(StoreStress, AppendsKeepEveryTokenOnce) {
  Open();
  ASSERT_EQ(st->StoreItem(StoreMode::kSet, "log", 0, 0, "", 0), Result::kStored);
  const int per_thread = 400;
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const std::string tok = std::to_string(t) + ":" + std::to_string(i) + ";";
        const StoreMode m = (i % 4 == 0) ? StoreMode::kPrepend : StoreMode::kAppend;
        if (st->StoreItem(m, "log", 0, 0, tok, 0) != Result::kStored) ++bad;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0u);
  std::string log;
  st->Get("log", [&](const ItemView& it) { log.assign(it.data); });
  // Appended tokens of one thread appear in its order after the prepended ones (which appear
  // in reverse order); every token exactly once.
  std::map<std::string, int> count;
  size_t pos = 0, tokens = 0;
  while (pos < log.size()) {
    const size_t e = log.find(';', pos);
    ASSERT_NE(e, std::string::npos) << "torn tail: " << log.substr(pos);
    ++count[log.substr(pos, e - pos)];
    ++tokens;
    pos = e + 1;
  }
  EXPECT_EQ(tokens, static_cast<size_t>(kThreads * per_thread));
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < per_thread; ++i) EXPECT_EQ(count[std::to_string(t) + ":" + std::to_string(i)], 1) << t << ":" << i;
  ExpectConsistent("append");
}

// LRU eviction racing with overwrites, deletes and reads of the same keys in a small pool: a
// get returns a whole value of its key or misses; the tracker and the allocator stay exact.
void EvictionLoad(Store* st) {
  constexpr int kKeys = 16000;  // ~12000 sets of 1.1 KB on average > the pool: eviction runs
  std::atomic<uint64_t> bad{0}, refused{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      uint64_t x = 0x2545f4914f6cdd1dull * (t + 1);
      for (int i = 0; i < 5000; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const std::string key = SharedKey(static_cast<int>(x % kKeys));
        const int op = static_cast<int>((x >> 24) % 8);
        if (op < 5) {
          const Result r = st->StoreItem(StoreMode::kSet, key, 0, 0, MakeValue(key, t, i, true), 0);
          if (r == Result::kNoMemory) ++refused;
          else if (r != Result::kStored) ++bad;
        } else if (op < 7) {
          st->Get(key, [&](const ItemView& it) {
            if (!ValidValue(key, it.data)) ++bad;
          });
        } else {
          st->Delete(key);
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(refused.load(), 0u);
  EXPECT_GT(st->counters().evictions.load(), 0u);
}

TEST_P(StoreStress, EvictionUnderConcurrentWrites) {
  Open(EvictPolicy::kLru, 8ull << 20);
  EvictionLoad(st.get());
  ExpectConsistent("eviction");
}

// WORT_GLOBAL_LOCK=1 (the old store-wide lock, kept for comparisons) under the same load:
// evictions inside a write that holds the lock exclusively must not wait for it again.
TEST_P(StoreStress, GlobalLockModeEvicts) {
  SetGlobalIndexLock(true);
  Open(EvictPolicy::kLru, 8ull << 20);
  EvictionLoad(st.get());
  ExpectConsistent("global lock");
  ASSERT_TRUE(st->Close().ok());
  st.reset();
  SetGlobalIndexLock(false);
}

// The background item count of a reopened store (store.h, Item count) beside writers that add
// and remove keys on both sides of the walk's cursor: when the count is done, curr_items is
// exactly the index's own count, and stays exact under more writes; with LRU eviction every
// survivor is tracked. The walk starts paused (nothing walked when Open returns) and is let go
// while the writers run, so they meet it mid-way (several batches of kCountBatch keys).
TEST_P(StoreStress, ItemCountBesideWriters) {
  for (EvictPolicy ev : {EvictPolicy::kNone, EvictPolicy::kLru}) {
    SCOPED_TRACE(ev == EvictPolicy::kLru ? "lru" : "no eviction");
    const int keys = static_cast<int>(Store::kCountBatch * 3 + 123);
    auto key = [](int i) {
      return test::Cat("c", std::to_string(i % 97), '\xf0', std::to_string(i));  // keys spread over the key space (many batches)
    };
    Open(ev);
    for (int i = 0; i < keys; i += 2) ASSERT_EQ(st->StoreItem(StoreMode::kSet, key(i), 0, 0, "v", 0), Result::kStored);
    ASSERT_TRUE(st->Close().ok());
    st.reset();
    Store::PauseCountForTest(true);
    Open(ev);
    EXPECT_TRUE(st->counting_items());
    EXPECT_EQ(st->count_walked(), 0u);  // Open walked nothing
    std::atomic<bool> go{false};
    std::atomic<uint64_t> bad{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t) {
      ts.emplace_back([&, t] {
        uint64_t x = 0x9e3779b97f4a7c15ull * (t + 7);
        for (int i = 0; i < 4000; ++i) {
          if (i == 200) go.store(true);
          x ^= x << 13, x ^= x >> 7, x ^= x << 17;
          const std::string k = key(static_cast<int>(x % keys));
          if ((x >> 33) % 2) {
            if (st->StoreItem(StoreMode::kSet, k, 0, 0, "w", 0) != Result::kStored) ++bad;
          } else {
            const Result r = st->Delete(k);
            if (r != Result::kDeleted && r != Result::kNotFound) ++bad;
          }
        }
      });
    }
    while (!go.load()) std::this_thread::yield();
    Store::PauseCountForTest(false);
    for (auto& t : ts) t.join();
    st->WaitForCount();
    EXPECT_EQ(bad.load(), 0u);
    EXPECT_GE(st->count_walked(), 1u);
    EXPECT_EQ(st->curr_items(), st->IndexItemsForTest());
    for (int i = 0; i < 500; ++i) (void)st->Delete(key(i));
    for (int i = keys; i < keys + 300; ++i) ASSERT_EQ(st->StoreItem(StoreMode::kSet, key(i), 0, 0, "n", 0), Result::kStored);
    EXPECT_EQ(st->curr_items(), st->IndexItemsForTest());
    ExpectConsistent("item count");
    ASSERT_TRUE(st->Close().ok());
    st.reset();
    std::filesystem::remove(path.str());
  }
}

// ---- the same over the network: `wort serve`'s server with 2 worker threads ----------------

// A blocking text-protocol client (one connection).
class Conn {
 public:
  explicit Conn(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~Conn() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }
  bool Send(std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent_ += static_cast<uint64_t>(n);
      s.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // One reply line without \r\n ("" on a closed connection).
  std::string Line() {
    for (;;) {
      const size_t e = buf_.find("\r\n");
      if (e != std::string::npos) {
        std::string l = buf_.substr(0, e);
        buf_.erase(0, e + 2);
        return l;
      }
      if (!Fill()) return "";
    }
  }
  std::string Bytes(size_t n) {
    while (buf_.size() < n)
      if (!Fill()) return "";
    std::string b = buf_.substr(0, n);
    buf_.erase(0, n);
    return b;
  }
  // get/gets of one key: true on a hit (value, cas), false on a miss; *bad on a malformed reply.
  bool Get(const std::string& key, std::string* value, uint64_t* cas, bool* bad) {
    Send("gets " + key + "\r\n");
    std::string l = Line();
    if (l == "END") return false;
    char k[256];
    unsigned flags = 0;
    unsigned long long n = 0, c = 0;
    if (std::sscanf(l.c_str(), "VALUE %255s %u %llu %llu", k, &flags, &n, &c) != 4 || k != key) {
      *bad = true;
      return false;
    }
    *value = Bytes(n);
    if (Bytes(2) != "\r\n" || Line() != "END") *bad = true;
    *cas = c;
    return true;
  }
  // Bytes this client has sent and received so far.
  uint64_t sent() const { return sent_; }
  uint64_t received() const { return received_; }
  // `stats`: name -> value (empty on a malformed reply).
  std::map<std::string, uint64_t> Stats() {
    Send("stats\r\n");
    std::map<std::string, uint64_t> m;
    for (;;) {
      const std::string l = Line();
      if (l == "END") return m;
      char name[128];
      unsigned long long v = 0;
      if (std::sscanf(l.c_str(), "STAT %127s %llu", name, &v) == 2) m[name] = v;
      else if (l.rfind("STAT ", 0) != 0) return {};
    }
  }
  std::string Command(const std::string& cmd, std::string_view data = {}, bool has_data = false) {
    std::string req = cmd + "\r\n";
    if (has_data) req += std::string(data) + "\r\n";
    Send(req);
    return Line();
  }

 private:
  bool Fill() {
    char tmp[65536];
    const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    received_ += static_cast<uint64_t>(n);
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  bool ok_ = false;
  uint64_t sent_ = 0, received_ = 0;
  std::string buf_;
};

// 4 connections to a server with 2 worker threads (connections are spread over both), on
// overlapping keys: set/get/delete with every get checked whole, incr totals exact, cas rounds
// with exactly one winner. Then the store's tracker and the allocator are checked.
TEST_P(StoreStress, ServerConnectionsOnOverlappingKeys) {
  Open();
  ServerConfig cfg;
  cfg.port = 0;
  cfg.threads = 2;
  Server srv(*st, cfg);
  ASSERT_TRUE(srv.Start().ok());
  std::thread loop([&] { srv.Run(); });
  const uint16_t port = srv.port();
  constexpr int kConns = 4, kKeys = 16, kRounds = 60, kOps = 1500;
  std::atomic<uint64_t> bad{0}, hits{0};
  std::vector<uint64_t> incr_sum(kConns);
  std::vector<std::atomic<int>> wins(kRounds);
  std::barrier sync(kConns);
  std::vector<std::thread> ts;
  for (int t = 0; t < kConns; ++t) {
    ts.emplace_back([&, t] {
      Conn c(port);
      if (!c.ok()) {
        ++bad;
        for (int r = 0; r < kRounds * 3; ++r) sync.arrive_and_wait();
        return;
      }
      uint64_t x = 0x9e3779b97f4a7c15ull * (t + 1);
      for (int i = 0; i < kOps; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const std::string key = "key" + std::to_string(x % kKeys);  // text keys: no space, no control
        const int op = static_cast<int>((x >> 20) % 10);
        if (op < 3) {
          const std::string v = MakeValue(key, t, i);
          if (c.Command("set " + key + " 0 0 " + std::to_string(v.size()), v, true) != "STORED") ++bad;
        } else if (op < 8) {
          std::string v;
          uint64_t cas = 0;
          bool b = false;
          if (c.Get(key, &v, &cas, &b)) {
            ++hits;
            if (!ValidValue(key, v)) b = true;
          }
          if (b) ++bad;
        } else if (op < 9) {
          const std::string r = c.Command("delete " + key);
          if (r != "DELETED" && r != "NOT_FOUND") ++bad;
        } else {
          const uint64_t d = 1 + i % 3;
          const std::string r = c.Command("incr ctr " + std::to_string(d));
          if (r == "NOT_FOUND") {
            const std::string a = c.Command("add ctr 0 0 1", "0", true);  // or another connection did
            if (a != "STORED" && a != "NOT_STORED") ++bad;
            const std::string r2 = c.Command("incr ctr " + std::to_string(d));
            if (r2.empty() || r2[0] < '0' || r2[0] > '9') ++bad;
            else incr_sum[t] += d;
          } else if (r.empty() || r[0] < '0' || r[0] > '9') {
            ++bad;
          } else {
            incr_sum[t] += d;
          }
        }
      }
      // cas rounds: every connection reads the same cas, exactly one cas command wins.
      for (int r = 0; r < kRounds; ++r) {
        const std::string key = "cas" + std::to_string(r % 5);
        if (t == 0 && c.Command("set " + key + " 0 0 1", "x", true) != "STORED") ++bad;
        sync.arrive_and_wait();
        std::string v;
        uint64_t cas = 0;
        bool b = false;
        if (!c.Get(key, &v, &cas, &b) || b) ++bad;
        sync.arrive_and_wait();
        const std::string res = c.Command("cas " + key + " 0 0 1 " + std::to_string(cas), std::to_string(t), true);
        if (res == "STORED") wins[r].fetch_add(1);
        else if (res != "EXISTS") ++bad;
        sync.arrive_and_wait();
      }
    });
  }
  for (auto& t : ts) t.join();
  {
    Conn c(port);
    ASSERT_TRUE(c.ok());
    std::string v;
    uint64_t cas = 0, total = 0;
    bool b = false;
    for (uint64_t s : incr_sum) total += s;
    if (total > 0) {
      ASSERT_TRUE(c.Get("ctr", &v, &cas, &b));
      EXPECT_EQ(v, std::to_string(total));
    }
  }
  srv.Stop();
  loop.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(hits.load(), 0u);
  for (int r = 0; r < kRounds; ++r) EXPECT_EQ(wins[r].load(), 1) << "round " << r;
  ExpectConsistent("server");
}

// issue 35: the counters of `stats` are kept per thread and summed; with 4 worker threads, 8
// connections and a 9th reading `stats` throughout, every sum is exact at the end (cmd_get,
// get_hits, get_misses, cmd_set, total_items, curr_items, delete_hits, incr_hits, bytes_read and
// bytes_written against what the clients sent and received), and no counter read meanwhile
// ever goes down.
TEST_P(StoreStress, StatsSumOverWorkerThreads) {
  Open();
  ServerConfig cfg;
  cfg.port = 0;
  cfg.threads = 4;
  Server srv(*st, cfg);
  ASSERT_TRUE(srv.Start().ok());
  std::thread loop([&] { srv.Run(); });
  const uint16_t port = srv.port();
  constexpr int kConns = 8, kOps = 300;
  std::atomic<uint64_t> bad{0}, sent{0}, received{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < kConns; ++t) {
    ts.emplace_back([&, t] {
      Conn c(port);
      if (!c.ok()) {
        ++bad;
        return;
      }
      for (int i = 0; i < kOps; ++i) {
        // Keys of every byte value from 0x21 to 0xff (no space or control byte in a text key).
        const std::string key = test::Cat("k", std::to_string(t), ':', std::to_string(i),
                                          static_cast<char>(0x21 + (t * kOps + i) % (0x100 - 0x21)));
        const std::string v(1 + i % 200, static_cast<char>('a' + t));
        if (c.Command(test::Cat("set ", key, " 0 0 ", std::to_string(v.size())), v, true) != "STORED") ++bad;
        std::string got;
        uint64_t cas = 0;
        bool b = false;
        if (!c.Get(key, &got, &cas, &b) || got != v || b) ++bad;           // a hit
        if (c.Get(test::Cat(key, "-miss"), &got, &cas, &b) || b) ++bad;     // a miss
        if (i % 3 == 0 && c.Command(test::Cat("delete ", key)) != "DELETED") ++bad;   // a delete hit
        if (i % 5 == 0 && c.Command(test::Cat("incr ctr", std::to_string(t), " 1")) != "NOT_FOUND") ++bad;  // a miss
      }
      sent += c.sent();
      received += c.received();
    });
  }
  // Reads `stats` while the workers count: each counter only grows.
  std::thread monitor([&] {
    Conn c(port);
    if (!c.ok()) {
      ++bad;
      return;
    }
    std::map<std::string, uint64_t> last;
    while (!done.load()) {
      const auto m = c.Stats();
      if (m.empty()) ++bad;
      for (const char* f : {"cmd_get", "get_hits", "get_misses", "cmd_set", "total_items", "bytes_read", "bytes_written"}) {
        if (m.count(f) && last.count(f) && m.at(f) < last.at(f)) ++bad;
      }
      last = m;
    }
    sent += c.sent();
    received += c.received();
  });
  for (auto& t : ts) t.join();
  done = true;
  monitor.join();
  EXPECT_EQ(bad.load(), 0u);
  {
    // A reply's bytes are counted just after its send returns: the client may hold them a moment
    // before the server has counted them, so bytes_written is polled (it only grows toward it).
    Conn c(port);
    ASSERT_TRUE(c.ok());
    std::map<std::string, uint64_t> m;
    uint64_t want_written = 0;
    for (int a = 0; a < 200; ++a) {
      want_written = received.load() + c.received();  // before this reply
      m = c.Stats();
      if (m["bytes_written"] >= want_written) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    constexpr uint64_t kN = uint64_t{kConns} * kOps;
    constexpr uint64_t kDeletes = uint64_t{kConns} * ((kOps + 2) / 3);
    EXPECT_EQ(m["cmd_get"], 2 * kN);
    EXPECT_EQ(m["get_hits"], kN);
    EXPECT_EQ(m["get_misses"], kN);
    EXPECT_EQ(m["cmd_set"], kN);
    EXPECT_EQ(m["total_items"], kN);
    EXPECT_EQ(m["delete_hits"], kDeletes);
    EXPECT_EQ(m["incr_misses"], uint64_t{kConns} * ((kOps + 4) / 5));
    st->WaitForCount();
    EXPECT_EQ(st->curr_items(), kN - kDeletes);
    // Everything the clients sent, this connection's requests included; everything they
    // received before this last reply.
    EXPECT_EQ(m["bytes_read"], sent.load() + c.sent());
    EXPECT_EQ(m["bytes_written"], want_written);
  }
  srv.Stop();
  loop.join();
  ExpectConsistent("server");
}

INSTANTIATE_TEST_SUITE_P(Kinds, StoreStress, ::testing::ValuesIn(Kinds()), test::KindParamName);

}  // namespace
}  // namespace wort::server
