// CANRT (src/remote/canrt.h): differential test against std::map over the full byte range of
// keys, resizes (addWidth and addHeight), ordered scans across data nodes, concurrent clients with
// checked results, reads during resizes, recovery of writes and resizes cut by a crash, and the
// crash explorer over the server-side write path, resize and recovery.
#include "remote/canrt.h"

#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <optional>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "common/test_util.h"
#include "crash/explorer.h"
#include "crash/oracle.h"
#include "remote/remote_test_util.h"
#include "wort/pm.h"

namespace wort::canrt {
namespace {

using test::TempPath;

// A Connection over the service's region in this process: CPU loads, stores and atomics, and
// Notify calls the service's handler on the caller's thread (deterministic: the crash explorer
// sees every persist of an operation on one thread).
class InlineConn final : public remote::Connection {
 public:
  InlineConn(Service* s, uint32_t id) : s_(s), b_(s->region()), n_(s->region_size()), id_(id) {}
  Status Read(uint64_t off, void* dst, size_t len) override {
    if (off + len > n_) return Status::InvalidArgument("out of range");
    std::memcpy(dst, b_ + off, len);
    return Status::OK();
  }
  Status Write(uint64_t off, const void* src, size_t len) override {
    if (off + len > n_) return Status::InvalidArgument("out of range");
    std::memcpy(b_ + off, src, len);
    return Status::OK();
  }
  Status FetchAdd64(uint64_t off, uint64_t add, uint64_t* old) override {
    *old = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(b_ + off)).fetch_add(add);
    return Status::OK();
  }
  Status CompareSwap64(uint64_t off, uint64_t expected, uint64_t desired, uint64_t* old) override {
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(b_ + off)).compare_exchange_strong(expected, desired);
    *old = expected;
    return Status::OK();
  }
  Status Notify(std::string_view msg) override {
    s_->OnNotify(id_, msg);
    return Status::OK();
  }
  Status Flush() override { return Status::OK(); }
  uint32_t client_id() const override { return id_; }
  Counters counters() const override { return {}; }

 private:
  Service* s_;
  char* b_;
  uint64_t n_;
  uint32_t id_;
};

std::unique_ptr<remote::RemoteKV> InlineClient(Service* s, uint32_t id = 1) {
  std::unique_ptr<remote::RemoteKV> kv;
  Status st = ConnectOver(std::make_unique<InlineConn>(s, id), &kv);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return kv;
}

// Small nodes and fan-out: resizes of every kind within a few hundred keys.
Options SmallOptions() {
  Options o;
  o.capacity = 4;
  o.fanout = 4;
  o.max_nodes = 4096;
  o.area_bytes = 256 << 10;
  o.inline_resize = true;
  return o;
}

std::unique_ptr<Pool> NewPool(const std::string& path, uint64_t max = 256ull << 20) {
  PoolOptions po;
  po.initial_size = 4 << 20;
  po.max_size = max;
  po.background_recovery = false;
  std::unique_ptr<Pool> p;
  Status s = Pool::Create(path, po, &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return p;
}
std::unique_ptr<Pool> OpenPool(const std::string& path) {
  PoolOptions po;
  po.background_recovery = false;
  std::unique_ptr<Pool> p;
  Status s = Pool::Open(path, po, &p);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return p;
}

// Keys over the full byte range: empty, 0x00 runs, >= 0x80, prefixes of each other, the longest.
std::vector<std::string> Universe(size_t n, uint64_t seed) {
  std::vector<std::string> k = {"", std::string(1, '\0'), std::string(2, '\0'), std::string(kMaxKey, '\0'),
                                "\x80", "\xff", "\xff\xff", std::string(kMaxKey, '\xff'), "a", "ab", "abc",
                                std::string(kMaxKey, 'a')};
  std::mt19937_64 r(seed);
  while (k.size() < n) {
    std::string s(1 + r() % kMaxKey, '\0');
    const int style = static_cast<int>(r() % 3);
    for (auto& c : s) c = static_cast<char>(style == 0 ? r() : style == 1 ? 'k' + r() % 3 : "\x00\x7f\x80\xff"[r() % 4]);
    k.push_back(s);
  }
  std::sort(k.begin(), k.end());
  k.erase(std::unique(k.begin(), k.end()), k.end());
  return k;
}
std::string Value(uint64_t r) { return std::string(r % (kMaxValue + 1), static_cast<char>(r >> 8)); }

using Model = std::map<std::string, std::string>;

Model ScanAll(remote::RemoteKV& kv) {
  Model m;
  Status s = kv.Scan("", "", 0, [&](std::string_view k, std::string_view v) {
    EXPECT_TRUE(m.emplace(k, v).second) << "key twice in a scan";
    return true;
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return m;
}

TEST(Canrt, DifferentialAgainstMapFullByteRange) {
  TempPath path("canrt");
  auto pool = NewPool(path);
  std::unique_ptr<Service> svc;
  ASSERT_TRUE(Service::Open(*pool, "canrt", SmallOptions(), &svc).ok());
  auto kv = InlineClient(svc.get());
  const auto keys = Universe(600, 7);
  Model model;
  std::mt19937_64 r(11);
  for (int i = 0; i < 6000; ++i) {
    const std::string& k = keys[r() % keys.size()];
    const int op = static_cast<int>(r() % 10);
    if (op < 6) {
      const std::string v = Value(r());
      ASSERT_TRUE(kv->Put(k, v).ok()) << i;
      model[k] = v;
    } else if (op < 8) {
      const Status s = kv->Remove(k);
      ASSERT_EQ(s.ok(), model.erase(k) == 1) << i << " " << s.ToString();
      if (!s.ok()) {
        ASSERT_TRUE(s.IsNotFound());
      }
    } else {
      std::string v;
      const Status s = kv->Get(k, &v);
      auto it = model.find(k);
      ASSERT_EQ(s.ok(), it != model.end()) << i;
      if (s.ok()) {
        ASSERT_EQ(v, it->second);
      } else {
        ASSERT_TRUE(s.IsNotFound());
      }
    }
  }
  EXPECT_EQ(ScanAll(*kv), model);
  // Ranges with limits, across data nodes.
  for (int i = 0; i < 200; ++i) {
    std::string a = keys[r() % keys.size()], b = keys[r() % keys.size()];
    if (b < a) std::swap(a, b);
    const size_t limit = r() % 3 == 0 ? 0 : r() % 20;
    std::vector<std::pair<std::string, std::string>> got, want;
    ASSERT_TRUE(kv->Scan(a, b, limit, [&](std::string_view k, std::string_view v) {
                      got.emplace_back(k, v);
                      return true;
                    }).ok());
    for (auto it = model.lower_bound(a); it != model.end() && (b.empty() || it->first < b); ++it) {
      if (limit && want.size() == limit) break;
      want.push_back(*it);
    }
    ASSERT_EQ(got, want) << i;
  }
  const ServiceStats st = svc->Stats();
  EXPECT_GT(st.resizes, 50u);
  EXPECT_GT(st.add_height, 0u);  // the tree grew in height, not only in width
  std::string rep;
  EXPECT_TRUE(svc->Check(&rep).ok()) << rep;
  // Reopen (clean close): the same contents.
  kv.reset();
  svc.reset();
  ASSERT_TRUE(pool->Close().ok());
  pool = OpenPool(path);
  ASSERT_TRUE(Service::Open(*pool, "canrt", SmallOptions(), &svc).ok());
  kv = InlineClient(svc.get());
  EXPECT_EQ(ScanAll(*kv), model);
}

TEST(Canrt, BadInputIsAnError) {
  TempPath path("canrt");
  auto pool = NewPool(path);
  std::unique_ptr<Service> svc;
  ASSERT_TRUE(Service::Open(*pool, "canrt", SmallOptions(), &svc).ok());
  auto kv = InlineClient(svc.get());
  EXPECT_EQ(kv->Put(std::string(kMaxKey + 1, 'k'), "v").code(), Code::kInvalidArgument);
  EXPECT_EQ(kv->Put("k", std::string(kMaxValue + 1, 'v')).code(), Code::kInvalidArgument);
  std::string v;
  EXPECT_EQ(kv->Get(std::string(kMaxKey + 1, 'k'), &v).code(), Code::kInvalidArgument);
  EXPECT_TRUE(kv->Put(std::string(kMaxKey, 'k'), std::string(kMaxValue, 'v')).ok());
  Options bad = SmallOptions();
  bad.capacity = 32;
  std::unique_ptr<Service> s2;
  EXPECT_EQ(Service::Open(*pool, "other", bad, &s2).code(), Code::kInvalidArgument);
  // Too many data nodes needed: PoolFull, not a crash.
  Options tiny = SmallOptions();
  tiny.max_nodes = 3;
  ASSERT_TRUE(Service::Open(*pool, "tiny", tiny, &s2).ok());
  auto kv2 = InlineClient(s2.get());
  Status s;
  for (int i = 0; i < 100 && s.ok(); ++i) s = kv2->Put("key" + std::to_string(i), "v");
  EXPECT_TRUE(s.IsPoolFull()) << s.ToString();
}

// Concurrent clients over the real transports (local; ucx over sm and tcp): the notify thread
// processes writes, the resize thread splits nodes. Each thread owns its keys; every acknowledged write is checked.
class CanrtTransport : public ::testing::TestWithParam<std::string> {};

TEST_P(CanrtTransport, ConcurrentClients) {
  const std::string backend = test::UseRemoteConfig(GetParam());
  TempPath path("canrt");
  auto pool = NewPool(path);
  Options o = SmallOptions();
  o.inline_resize = false;
  o.capacity = 8;
  std::unique_ptr<Server> server;
  Status st = StartServer(*pool, "canrt", backend, o, &server);
  ASSERT_TRUE(st.ok()) << st.ToString();
  constexpr int kThreads = 4, kOps = 600;
  std::vector<Model> models(kThreads);
  std::atomic<int> errors{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      std::unique_ptr<remote::RemoteKV> kv;
      if (!Connect(server->info(), &kv).ok()) return (void)++errors;
      std::mt19937_64 r(t);
      for (int i = 0; i < kOps; ++i) {
        // Interleaved keys: threads share data nodes and their locks.
        const std::string k = test::Cat(static_cast<char>(r() % 4 * 60), std::to_string(r() % 150), "#", char('0' + t));
        Model& m = models[t];
        if (r() % 4) {
          const std::string v = Value(r());
          if (!kv->Put(k, v).ok()) ++errors;
          m[k] = v;
        } else {
          if (kv->Remove(k).ok() != (m.erase(k) == 1)) ++errors;
        }
        if (i % 7 == 0) {
          std::string v;
          Status s = kv->Get(k, &v);
          auto it = m.find(k);
          if (s.ok() != (it != m.end()) || (s.ok() && v != it->second)) ++errors;
        }
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(errors.load(), 0);
  server->service().Drain();
  Model all;
  for (auto& m : models) all.insert(m.begin(), m.end());
  std::unique_ptr<remote::RemoteKV> kv;
  ASSERT_TRUE(Connect(server->info(), &kv).ok());
  EXPECT_EQ(ScanAll(*kv), all);
  EXPECT_GT(server->service().Stats().resizes, 10u);
  std::string rep;
  EXPECT_TRUE(server->service().Check(&rep).ok()) << rep;
}

INSTANTIATE_TEST_SUITE_P(Backends, CanrtTransport, ::testing::ValuesIn(test::RemoteConfigs()), test::RemoteParamName);

// Readers are never blocked by resizes and always find the keys loaded before: writers insert
// fresh keys into the same key range (splitting the readers' nodes) at the same time.
TEST(Canrt, ReadersDuringResize) {
  TempPath path("canrt");
  auto pool = NewPool(path);
  Options o = SmallOptions();
  o.inline_resize = false;
  std::unique_ptr<Server> server;
  ASSERT_TRUE(StartServer(*pool, "canrt", "local", o, &server).ok());
  Model base;
  {
    std::unique_ptr<remote::RemoteKV> kv;
    ASSERT_TRUE(Connect(server->info(), &kv).ok());
    for (int i = 0; i < 200; ++i) {
      const std::string k = "r" + std::to_string(i * 7919 % 1000);
      base[k] = Value(i);
      ASSERT_TRUE(kv->Put(k, base[k]).ok());
    }
  }
  std::atomic<bool> done{false};
  std::atomic<int> errors{0};
  std::atomic<uint64_t> reads{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 2; ++t)
    ts.emplace_back([&, t] {
      std::unique_ptr<remote::RemoteKV> kv;
      if (!Connect(server->info(), &kv).ok()) return (void)++errors;
      std::mt19937_64 r(t);
      while (!done.load()) {
        auto it = std::next(base.begin(), static_cast<long>(r() % base.size()));
        std::string v;
        if (!kv->Get(it->first, &v).ok() || v != it->second) ++errors;
        ++reads;
        std::this_thread::yield();  // 2 cores: leave time to the writer and the server's threads
      }
    });
  std::thread writer([&] {
    std::unique_ptr<remote::RemoteKV> kv;
    if (!Connect(server->info(), &kv).ok()) return (void)++errors;
    for (int i = 0; i < 800; ++i)
      if (!kv->Put(test::Cat("r", std::to_string(i), "w"), "new").ok()) ++errors;
    done = true;
  });
  writer.join();
  for (auto& t : ts) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_GT(reads.load(), 100u);
  EXPECT_GT(server->service().Stats().resizes, 20u);
}

// A write cut after the client's Write (the item is in the node, valid, the node locked) is
// re-applied by recovery; a torn one (bad crc) is dropped; the lock is released.
TEST(Canrt, RecoveryReappliesItemsOfLockedNodes) {
  TempPath path("canrt");
  auto pool = NewPool(path);
  std::unique_ptr<Service> svc;
  ASSERT_TRUE(Service::Open(*pool, "canrt", SmallOptions(), &svc).ok());
  auto kv = InlineClient(svc.get());
  ASSERT_TRUE(kv->Put("a", "1").ok());
  ASSERT_TRUE(kv->Put("b", "2").ok());
  // By hand: lock node 0 and write an item for "a" into slot 2 without notifying.
  char* node = svc->region() + reinterpret_cast<RootHeader*>(svc->region())->data_off;
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(node)).fetch_add(kLockOne);
  unsigned char item[kItemBytes] = {};
  item[kItemOp] = kOpPut;
  item[kItemKeyLen] = 1;
  item[kItemValLen] = 3;
  item[kItemKey] = 'a';
  std::memcpy(item + kItemValue, "new", 3);
  const uint32_t crc = ItemCrc(item);
  std::memcpy(item + kItemCrc, &crc, 4);
  item[kItemValid] = 1;
  std::memcpy(node + 64 + 2 * kItemBytes, item, kItemBytes);
  item[kItemValue] = 'X';  // torn: crc no longer matches
  std::memcpy(node + 64 + 3 * kItemBytes, item, kItemBytes);
  kv.reset();
  svc.reset();
  pool.reset();  // no Close: a crash
  pool = OpenPool(path);
  ASSERT_TRUE(Service::Open(*pool, "canrt", SmallOptions(), &svc).ok());
  EXPECT_EQ(svc->Stats().recovered_items, 1u);
  kv = InlineClient(svc.get());
  EXPECT_EQ(ScanAll(*kv), (Model{{"a", "new"}, {"b", "2"}}));
  ASSERT_TRUE(kv->Put("c", "3").ok());  // the lock was released
  std::string rep;
  EXPECT_TRUE(svc->Check(&rep).ok()) << rep;
}

// ---- the kill test: SIGKILL the server under client load, restart, every acknowledged write is there

// The child: a CANRT server (local backend) on the pool named by WORT_CANRT_KILL_CHILD; it
// writes its RegionInfo to <pool>.info and serves until killed.
struct KillChildMain {
  KillChildMain() {
    const char* pool_path = std::getenv("WORT_CANRT_KILL_CHILD");
    if (pool_path == nullptr) return;
    PoolOptions po;
    po.initial_size = 4 << 20;
    po.max_size = 256ull << 20;
    po.background_recovery = false;
    std::unique_ptr<Pool> pool;
    Status s = Pool::OpenOrCreate(pool_path, po, &pool);
    std::unique_ptr<Server> server;
    Options o = SmallOptions();
    o.inline_resize = false;
    if (s.ok()) s = StartServer(*pool, "canrt", "local", o, &server);
    if (!s.ok()) {
      std::fprintf(stderr, "kill child: %s\n", s.ToString().c_str());
      std::_Exit(3);
    }
    const remote::RegionInfo info = server->info();
    const std::string tmp = std::string(pool_path) + ".info.tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    std::fprintf(f, "%s\n%s\n%llu\n", info.backend.c_str(), info.address.c_str(), static_cast<unsigned long long>(info.size));
    std::fclose(f);
    std::rename(tmp.c_str(), (std::string(pool_path) + ".info").c_str());
    for (;;) ::pause();
  }
};
KillChildMain g_kill_child;

TEST(CanrtKill, AcknowledgedWritesSurviveSigkill) {
  ::setenv("WORT_CANRT_TIMEOUT_MS", "1000", 1);  // the write cut by the kill fails after 1 s
  TempPath path("canrt-kill");
  const std::string info_path = path.str() + ".info";
  const auto keys = Universe(80, 13);
  Model model;  // acknowledged state
  std::mt19937_64 r(17);
  int pending_either = 0;
  for (int round = 0; round < 3; ++round) {
    std::remove(info_path.c_str());
    const pid_t child = test::SpawnSelf({"WORT_CANRT_KILL_CHILD=" + path.str()});
    remote::RegionInfo info;
    for (int i = 0; i < 2000; ++i) {
      FILE* f = std::fopen(info_path.c_str(), "r");
      if (f) {
        char b[3][512] = {};
        const bool ok = std::fscanf(f, "%511s\n%511[^\n]\n%511s", b[0], b[1], b[2]) == 3;
        std::fclose(f);
        if (ok) {
          info.backend = b[0];
          info.address = b[1];
          info.size = std::strtoull(b[2], nullptr, 10);
          break;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_FALSE(info.address.empty()) << "the server child did not start";
    std::unique_ptr<remote::RemoteKV> kv;
    ASSERT_TRUE(Connect(info, &kv).ok());
    // Kill the server at a random moment while this thread writes.
    std::thread killer([&, delay = 20 + r() % 80] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      ::kill(child, SIGKILL);
    });
    std::string pk;
    std::optional<std::string> pv;  // the operation cut by the kill: put (value) or remove
    for (;;) {
      const std::string k = keys[r() % keys.size()];
      const bool put = r() % 4 != 0;
      const std::string v = Value(r());
      const Status s = put ? kv->Put(k, v) : kv->Remove(k);
      if (s.ok() || s.IsNotFound()) {
        if (put) model[k] = v;
        else model.erase(k);
        continue;
      }
      pk = k;
      if (put) pv = v;
      break;  // the server is gone
    }
    killer.join();
    test::WaitChild(child);
    kv.reset();
    // Restart (recovery) in this process and compare.
    auto pool = OpenPool(path);
    std::unique_ptr<Service> svc;
    ASSERT_TRUE(Service::Open(*pool, "canrt", SmallOptions(), &svc).ok());
    std::string rep;
    ASSERT_TRUE(svc->Check(&rep).ok()) << rep;
    auto c = InlineClient(svc.get());
    Model found = ScanAll(*c);
    Model alt = model;
    if (pv) alt[pk] = *pv;
    else alt.erase(pk);
    ASSERT_TRUE(found == model || found == alt) << "round " << round << ": acknowledged writes lost or a write invented";
    if (found != model) ++pending_either, model = alt;
    c.reset();
    svc.reset();
    ASSERT_TRUE(pool->Close().ok());
  }
  std::remove(info_path.c_str());
  std::printf("canrt kill test: 3 rounds, %zu keys at the end, cut operation applied in %d rounds\n", model.size(),
              pending_either);
}

// ---- the crash explorer over the server-side write path, resize and recovery ----------------

Status ReadImage(const std::string& path, Model* out, bool exercise) {
  PoolOptions po;
  po.background_recovery = false;
  std::unique_ptr<Pool> pool;
  WORT_RETURN_IF_ERROR(Pool::Open(path, po, &pool));
  WORT_RETURN_IF_ERROR(pool->WaitForRecovery());
  std::unique_ptr<Service> svc;
  WORT_RETURN_IF_ERROR(Service::Open(*pool, "canrt", SmallOptions(), &svc));
  std::string rep;
  Status s = svc->Check(&rep);
  if (!s.ok()) return Status(s.code(), s.message() + ": " + rep);
  std::unique_ptr<remote::RemoteKV> kv;
  WORT_RETURN_IF_ERROR(ConnectOver(std::make_unique<InlineConn>(svc.get(), 1), &kv));
  out->clear();
  WORT_RETURN_IF_ERROR(kv->Scan("", "", 0, [&](std::string_view k, std::string_view v) {
    out->emplace(k, v);
    return true;
  }));
  WORT_RETURN_IF_ERROR(crash::CheckReachability(*pool, &rep));
  if (exercise) {
    std::string v;
    WORT_RETURN_IF_ERROR(kv->Put("\xfe" "fresh", "f"));
    WORT_RETURN_IF_ERROR(kv->Get("\xfe" "fresh", &v));
    if (v != "f") return Status::Corruption("the recovered tree does not work");
  }
  kv.reset();
  svc.reset();
  return pool->Close();
}

// Runs `ops` explored operations (puts and removes over 60 keys, about 20 resizes).
crash::ExplorerResult RunCanrtExplorer(const crash::ExplorerConfig& cfg, size_t ops, ServiceStats* stats) {
  TempPath path("canrt-live");
  auto pool = NewPool(path, 64ull << 20);
  std::unique_ptr<Service> svc;
  EXPECT_TRUE(Service::Open(*pool, "canrt", SmallOptions(), &svc).ok());
  auto kv = InlineClient(svc.get());
  const auto keys = Universe(60, 5);
  Model model;
  crash::PathExplorer px(pool.get(), cfg);
  crash::ExplorerResult res;
  std::mt19937_64 r(9);
  for (size_t i = 0; i < ops && res.violation_count < cfg.max_violations; ++i) {
    const std::string k = keys[r() % keys.size()];
    const bool put = model.empty() || r() % 4 != 0;
    const std::string v = Value(r());
    Model post = model;
    if (put) post[k] = v;
    else post.erase(k);
    auto check = [&](const std::string& img, bool returned) -> Status {
      Model found;
      WORT_RETURN_IF_ERROR(ReadImage(img, &found, true));
      if (found == post || (!returned && found == model)) return Status::OK();
      return Status::Corruption("contents match neither the state before nor after the operation");
    };
    Status op_status;
    std::string desc = put ? "put" : "remove";
    for (unsigned char c : k) desc += test::Cat(" ", std::to_string(c));
    Status s = px.Explore(i, desc, [&] { return put ? kv->Put(k, v) : kv->Remove(k); }, &op_status, check, &res);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(op_status.ok() || op_status.IsNotFound()) << op_status.ToString();
    model = std::move(post);
  }
  *stats = svc->Stats();
  return res;
}

TEST(CanrtCrash, ExplorerWritesResizesRecovery) {
  crash::ExplorerConfig cfg;
  cfg.subsets = 2;
  cfg.max_points = 24;
  cfg.seed = 3;
  if (const char* d = std::getenv("WORT_CANRT_DROP_SITE")) cfg.drop_site = d;  // manual mutation runs
  ServiceStats st;
  const crash::ExplorerResult res = RunCanrtExplorer(cfg, 160, &st);
  for (const auto& v : res.violations) ADD_FAILURE() << v.ToString();
  EXPECT_EQ(res.violation_count, 0u);
  EXPECT_GT(st.resizes, 10u);
  EXPECT_GT(st.add_height, 0u);
  EXPECT_GT(res.crash_points, 500u);
  std::printf("canrt explorer: operations %zu, crash points %zu, images %zu, resizes %llu\n", res.ops_run,
              res.crash_points, res.images, static_cast<unsigned long long>(st.resizes));
}

}  // namespace
}  // namespace wort::canrt
