// The request/reply baselines (src/remote/reply_kv.h) over every transport configuration:
// differential against std::map with keys over the full byte range (0x00, >= 0x80, prefixes of
// one another, the empty key), values up to 20 KiB (multi-Read replies, scans split over several
// replies), concurrent clients, errors, and restart of the server on the same pool.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/test_util.h"
#include "remote/designs.h"
#include "remote/remote_test_util.h"

namespace wort::remote {
namespace {

using Param = std::tuple<std::string, std::string>;  // (transport config, design)

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param);
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

std::string RandomKey(std::mt19937_64& rng) {
  static const char kAlphabet[] = {'\0', '\x01', 'a', 'b', '\x7f', '\x80', '\xfe', '\xff'};
  std::size_t len = rng() % 6;  // 0..5: many keys are prefixes of others; "" included
  std::string k;
  for (std::size_t i = 0; i < len; ++i) k.push_back(kAlphabet[rng() % sizeof kAlphabet]);
  return k;
}

std::string RandomValue(std::mt19937_64& rng) {
  std::size_t len = rng() % 20 == 0 ? 15000 + rng() % 6000 : rng() % 300;
  std::string v(len, '\0');
  for (auto& c : v) c = static_cast<char>(rng());
  return v;
}

class ReplyKvTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    opts_.backend = test::UseRemoteConfig(std::get<0>(GetParam()));
    opts_.pool = pool_.str();
    opts_.pool_size = 256ull << 20;
    design_ = FindRemoteDesign(std::get<1>(GetParam()));
    ASSERT_NE(design_, nullptr);
    ASSERT_TRUE(design_->serve(opts_, &svc_).ok());
    EXPECT_EQ(svc_->design(), design_->name);
  }
  void TearDown() override {
    if (svc_) { EXPECT_TRUE(svc_->Stop().ok()); }
    std::remove((pool_.str() + ".rings").c_str());
  }
  int Ops(int local) const {
    const std::string& c = std::get<0>(GetParam());
    return c == "local" ? local : c == "ucx-sm" ? local / 4 : local / 8;
  }
  test::TempPath pool_{"replykv"};
  ServeOptions opts_;
  const RemoteDesign* design_ = nullptr;
  std::unique_ptr<RemoteService> svc_;
};

// Every pair of [start, end) (end "" = unbounded) from the model, at most `limit`.
std::vector<std::pair<std::string, std::string>> ModelScan(const std::map<std::string, std::string>& m,
                                                           const std::string& start, const std::string& end,
                                                           std::size_t limit) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = m.lower_bound(start); it != m.end(); ++it) {
    if (!end.empty() && it->first >= end) break;
    if (limit != 0 && out.size() >= limit) break;
    out.emplace_back(*it);
  }
  return out;
}

// Every pair the store holds, by one unbounded Scan (an error fails the test and returns what
// came before it).
std::vector<std::pair<std::string, std::string>> ScanAll(RemoteKV& kv) {
  std::vector<std::pair<std::string, std::string>> all;
  Status s = kv.Scan("", "", 0, [&](std::string_view k, std::string_view v) {
    all.emplace_back(k, v);
    return true;
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return all;
}

TEST_P(ReplyKvTest, DifferentialAgainstStdMap) {
  std::unique_ptr<RemoteKV> kv;
  ASSERT_TRUE(design_->connect(svc_->info(), &kv).ok());
  EXPECT_EQ(kv->name(), design_->name);
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(18);
  const int n = Ops(2000);
  for (int i = 0; i < n; ++i) {
    const int op = static_cast<int>(rng() % 100);
    std::string k = RandomKey(rng);
    if (op < 40) {
      std::string v = RandomValue(rng);
      ASSERT_TRUE(kv->Put(k, v).ok()) << i;
      model[k] = v;
    } else if (op < 65) {
      std::string v;
      Status s = kv->Get(k, &v);
      auto it = model.find(k);
      if (it == model.end()) {
        ASSERT_TRUE(s.IsNotFound()) << i << " " << s.ToString();
      } else {
        ASSERT_TRUE(s.ok()) << i << " " << s.ToString();
        ASSERT_EQ(v, it->second) << i;
      }
    } else if (op < 80) {
      Status s = kv->Remove(k);
      ASSERT_EQ(s.ok(), model.erase(k) == 1) << i << " " << s.ToString();
      if (!s.ok()) { ASSERT_TRUE(s.IsNotFound()); }
    } else {
      std::string end = rng() % 3 == 0 ? std::string() : RandomKey(rng);
      std::size_t limit = rng() % 2 ? 0 : rng() % 10;
      std::vector<std::pair<std::string, std::string>> got;
      const Status st = kv->Scan(k, end, limit, [&](std::string_view gk, std::string_view gv) {
        got.emplace_back(gk, gv);
        return true;
      });
      ASSERT_TRUE(st.ok()) << i << " " << st.ToString();
      ASSERT_EQ(got, ModelScan(model, k, end, limit)) << i;
    }
  }
  // The whole content, through one scan (several replies: the big values do not fit one).
  EXPECT_EQ(ScanAll(*kv), ModelScan(model, "", "", 0));
  // Early stop by the callback.
  int calls = 0;
  ASSERT_TRUE(kv->Scan("", "", 0, [&](std::string_view, std::string_view) { return ++calls < 2; }).ok());
  EXPECT_EQ(calls, std::min<int>(2, static_cast<int>(model.size())));
  EXPECT_GE(svc_->requests_served(), static_cast<std::uint64_t>(n));
}

TEST_P(ReplyKvTest, ConcurrentClients) {
  constexpr int kThreads = 3;
  const int n = Ops(400);
  std::vector<std::map<std::string, std::string>> models(kThreads);
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      std::unique_ptr<RemoteKV> kv;
      if (!design_->connect(svc_->info(), &kv).ok()) {
        ++failures;
        return;
      }
      std::mt19937_64 rng(t);
      for (int i = 0; i < n; ++i) {
        // Disjoint key sets: a first byte per thread (0x00, 0x80, 0xff).
        std::string k = test::Cat(static_cast<char>(t == 0 ? 0x00 : t == 1 ? 0x80 : 0xff), RandomKey(rng));
        if (rng() % 4 == 0) {
          Status s = kv->Remove(k);
          if (s.ok() != (models[t].erase(k) == 1)) ++failures;
        } else {
          std::string v = std::to_string(i) + std::string(rng() % 50, static_cast<char>(0x80 + t));
          if (!kv->Put(k, v).ok()) ++failures;
          models[t][k] = v;
          std::string got;
          if (!kv->Get(k, &got).ok() || got != v) ++failures;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_EQ(failures.load(), 0);
  std::map<std::string, std::string> all;
  for (auto& m : models) all.insert(m.begin(), m.end());
  std::unique_ptr<RemoteKV> kv;
  ASSERT_TRUE(design_->connect(svc_->info(), &kv).ok());
  EXPECT_EQ(ScanAll(*kv), ModelScan(all, "", "", 0));
}

TEST_P(ReplyKvTest, ErrorsAndRestart) {
  {
    std::unique_ptr<RemoteKV> kv;
    ASSERT_TRUE(design_->connect(svc_->info(), &kv).ok());
    EXPECT_EQ(kv->Put("k", std::string(kReplyRequestBytes, 'v')).code(), Code::kInvalidArgument);
    const Status long_key = kv->Get(std::string(5000, 'k'), nullptr);
    EXPECT_EQ(long_key.code(), Code::kInvalidArgument) << long_key.ToString();  // longer than kMaxKeyLen
    std::string v;
    EXPECT_TRUE(kv->Get("absent", &v).IsNotFound());
    EXPECT_TRUE(kv->Remove("absent").IsNotFound());
    ASSERT_TRUE(kv->Put(std::string("\0\xff", 2), "durable").ok());
  }
  // Restart on the same pool: an acknowledged write is there; a client of the old server cannot
  // reach the new one by its old address.
  const RegionInfo old = svc_->info();
  ASSERT_TRUE(svc_->Stop().ok());
  svc_.reset();
  ASSERT_TRUE(design_->serve(opts_, &svc_).ok());
  std::unique_ptr<RemoteKV> kv;
  ASSERT_TRUE(design_->connect(svc_->info(), &kv).ok());
  std::string v;
  ASSERT_TRUE(kv->Get(std::string("\0\xff", 2), &v).ok());
  EXPECT_EQ(v, "durable");
  if (old.address != svc_->info().address) {
    std::unique_ptr<RemoteKV> stale;
    EXPECT_FALSE(design_->connect(old, &stale).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Designs, ReplyKvTest,
                         ::testing::Combine(::testing::ValuesIn(test::RemoteConfigs()),
                                            ::testing::Values("reply-wort", "reply-woart")),
                         ParamName);

TEST(ReplyKvLimits, SlotsRunOutAndComeBack) {
  test::TempPath pool("replylimits");
  ServeOptions o;
  o.pool = pool.str();
  o.pool_size = 64ull << 20;
  std::unique_ptr<RemoteService> svc;
  ASSERT_TRUE(ServeReply(o, "woart", &svc).ok());
  std::vector<std::unique_ptr<RemoteKV>> clients(kReplyMaxClients);
  for (auto& c : clients) ASSERT_TRUE(ConnectReply(svc->info(), "woart", &c).ok());
  std::unique_ptr<RemoteKV> extra;
  EXPECT_EQ(ConnectReply(svc->info(), "woart", &extra).code(), Code::kBusy);
  clients[17].reset();  // frees its slot
  ASSERT_TRUE(ConnectReply(svc->info(), "woart", &extra).ok());
  ASSERT_TRUE(extra->Put("x", "y").ok());
  clients.clear();
  extra.reset();
  EXPECT_TRUE(svc->Stop().ok());
  std::unique_ptr<RemoteService> bad;
  EXPECT_EQ(ServeReply(o, "btree", &bad).code(), Code::kInvalidArgument);
  EXPECT_EQ(FindRemoteDesign("nope"), nullptr);
}

TEST(RemoteInfoFile, RoundTripAndErrors) {
  test::TempPath p("info");
  RegionInfo in{"ucx", "127.0.0.1:4711", 12345};
  ASSERT_TRUE(WriteInfoFile(p.str(), "reply-wort", in).ok());
  std::string d;
  RegionInfo out;
  ASSERT_TRUE(ReadInfoFile(p.str(), &d, &out).ok());
  EXPECT_EQ(d, "reply-wort");
  EXPECT_EQ(out.backend, in.backend);
  EXPECT_EQ(out.address, in.address);
  EXPECT_EQ(out.size, in.size);
  EXPECT_TRUE(ReadInfoFile("/dev/shm/no-such-wort-info", &d, &out).IsNotFound());
  {
    std::ofstream f(p.str());
    f << "wort-remote 1\ndesign x\n";
  }
  EXPECT_EQ(ReadInfoFile(p.str(), &d, &out).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace wort::remote
