// The conformance suite: what every index kind promises through wort/index.h, run for EVERY kind
// the registry lists (IndexKinds(); a kind added to the table in src/index/registry.cc is tested
// here with no edit). Per kind:
//   - differential runs against std::map (insert / upsert / lookup / remove, and for ordered
//     kinds scans with random start, end and limit) on byte-string keys over the full byte range
//     (0x00, 0x7f, 0x80, 0xff, the empty key, keys that are prefixes of others, long keys) and on
//     8-byte keys including the u64 extremes, with Check() and the reachability contract after
//     each phase, a reopen between phases (persistent kinds) and a drain to empty;
//   - reopen: a persistent kind keeps everything over a clean reopen and a simulated crash; a
//     volatile kind (kind_ids.h IsVolatile) reopens empty, as documented;
//   - scan bounds: empty index, empty range, start past end, start past the last key, limit 0
//     and 1, inclusive end, the callback stopping the scan; NotSupported for unordered kinds;
//   - error cases: a key one byte too long (or not 8 bytes for kU64) is InvalidArgument with a
//     message, duplicate insert is AlreadyExists and changes nothing, remove or lookup of a
//     missing key is NotFound and changes nothing;
//   - capability claims: `ordered` kinds scan in order; every kind is thread-safe (wort/index.h)
//     and survives a short two-thread differential run; the stated maximum key size (kMaxKeyLen,
//     8 for kU64) is accepted and one byte more is rejected, through the Index and through the
//     key-value store's Capabilities() (KvStore, persistent kinds).
// Kind-specific behaviour (node types, splits, crash states, PoolFull) stays in the per-kind tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/differential.h"
#include "common/index_test_util.h"
#include "common/test_util.h"
#include "index/kind_ids.h"
#include "wort/index.h"
#include "wort/key.h"
#include "wort/kv.h"

namespace wort {
namespace {

using test::ByteKeys;
using test::EdgeByteKeys;
using test::EdgeU64Keys;
using test::IndexFixture;
using test::Model;
using test::NextU64;
using test::RandomOps;

// Every kind of this build, from the registry (test-only kinds excluded: none are registered in
// this binary, but the filter keeps the list right if one ever is).
std::vector<std::string> AllKinds() {
  std::vector<std::string> v;
  for (const IndexKind* k : IndexKinds())
    if (k->type_id < kind_id::kTestFirst) v.emplace_back(k->name);
  return v;
}

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    kind_ = FindIndexKind(GetParam());
    ASSERT_NE(kind_, nullptr);
  }
  bool ordered() const { return kind_->ordered; }
  bool persistent() const { return !kind_id::IsVolatile(kind_->type_id); }
  // Check() and reachability; after a reopen the contents equal the model (persistent kinds)
  // or the index is empty (volatile kinds: the model is cleared).
  void ReopenAndCompare(IndexFixture& f, Model& m, const std::string& phase) {
    f.ExpectCheckOk(phase);
    f.Reopen();
    if (!persistent()) m.clear();
    ExpectSame(f.idx(), m, phase + ", reopened");
    f.ExpectCheckOk(phase + ", reopened");
  }
  // The shared harness's comparison (no Check: callers run ExpectCheckOk where they want it).
  void ExpectSame(const Index& idx, const Model& m, const std::string& what) {
    test::ExpectSame(idx, m, what, ordered(), /*check=*/false);
  }

  const IndexKind* kind_ = nullptr;
};

// ---- differential runs ----------------------------------------------------------------------

TEST_P(Conformance, DifferentialByteKeys) {
  IndexFixture f(GetParam(), KeyType::kBytes);
  Model m;
  std::mt19937_64 rng(101);
  ByteKeys gen(101);
  for (int phase = 0; phase < 3; ++phase) {
    RandomOps(f.idx(), m, rng, 4000, ordered(), [&] { return gen.Next(m); });
    if (HasFatalFailure()) return;
    ExpectSame(f.idx(), m, "phase " + std::to_string(phase));
    ReopenAndCompare(f, m, "phase " + std::to_string(phase));
  }
  for (const auto& [k, v] : m) ASSERT_TRUE(f.idx().Remove(k).ok());
  m.clear();
  ExpectSame(f.idx(), m, "drained");
  f.ExpectCheckOk("drained");
}

TEST_P(Conformance, DifferentialU64Keys) {
  IndexFixture f(GetParam(), KeyType::kU64);
  EXPECT_EQ(f.idx().key_type(), KeyType::kU64);
  Model m;
  std::mt19937_64 rng(202);
  for (int phase = 0; phase < 3; ++phase) {
    RandomOps(f.idx(), m, rng, 5000, ordered(), [&] { return NextU64(rng); });
    if (HasFatalFailure()) return;
    ExpectSame(f.idx(), m, "phase " + std::to_string(phase));
    ReopenAndCompare(f, m, "phase " + std::to_string(phase));
  }
  EXPECT_EQ(f.idx().key_type(), KeyType::kU64);
  for (const auto& [k, v] : m) ASSERT_TRUE(f.idx().Remove(k).ok());
  m.clear();
  ExpectSame(f.idx(), m, "drained");
  f.ExpectCheckOk("drained");
}

// ---- full byte range, prefixes, the u64 extremes; reopen ------------------------------------

TEST_P(Conformance, FullByteRangeAndReopen) {
  for (KeyType kt : {KeyType::kBytes, KeyType::kU64}) {
    SCOPED_TRACE(kt == KeyType::kBytes ? "byte-string keys" : "8-byte keys");
    IndexFixture f(GetParam(), kt);
    const auto keys = kt == KeyType::kBytes ? EdgeByteKeys() : EdgeU64Keys();
    Model m;
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(f.idx().Insert(keys[i], i + 1).ok()) << "key #" << i << " of " << keys[i].size() << " bytes";
      m[keys[i]] = i + 1;
    }
    ExpectSame(f.idx(), m, "inserted");
    if (ordered()) {
      // Unsigned byte order: 0x80 after 0x7f, a prefix before its extensions.
      const auto from = test::ScanAll(f.idx(), kt == KeyType::kBytes ? "\x7f" : EncodeU64(0x7fffffffffffffffull),
                                  nullptr, 3);
      ASSERT_EQ(from.size(), 3u);
      if (kt == KeyType::kBytes) {
        EXPECT_EQ(from[0].first, "\x7f");
        EXPECT_EQ(from[1].first, "\x7f\xff");
        EXPECT_EQ(from[2].first, "\x80");
      } else {
        EXPECT_EQ(DecodeU64(from[1].first), 0x8000000000000000ull);
      }
    }
    ReopenAndCompare(f, m, "clean reopen");
    if (persistent()) {
      f.CrashAndReopen();
      ExpectSame(f.idx(), m, "after a crash");
      f.ExpectCheckOk("after a crash");
    }
    // Re-insert what a volatile reopen dropped, then remove all, one by one.
    for (size_t i = 0; i < keys.size(); ++i)
      if (!m.count(keys[i])) {
        ASSERT_TRUE(f.idx().Insert(keys[i], i + 1).ok());
        m[keys[i]] = i + 1;
      }
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(f.idx().Remove(keys[i]).ok()) << "key #" << i;
      m.erase(keys[i]);
      uint64_t v;
      EXPECT_TRUE(f.idx().Lookup(keys[i], &v).IsNotFound()) << "key #" << i;
    }
    ExpectSame(f.idx(), m, "drained");
    f.ExpectCheckOk("drained");
  }
}

// ---- scan bounds ----------------------------------------------------------------------------

TEST_P(Conformance, ScanBounds) {
  IndexFixture f(GetParam(), KeyType::kBytes);
  auto scan = [&](std::string_view start, const std::string* end, size_t limit) {
    std::string_view ev = end ? std::string_view(*end) : std::string_view();
    return test::ScanAll(f.idx(), start, end ? &ev : nullptr, limit);
  };
  if (!ordered()) {
    ASSERT_TRUE(f.idx().Insert("a", 1).ok());
    Status s = f.idx().Scan("", nullptr, 10, [](std::string_view, uint64_t) { return true; });
    EXPECT_EQ(s.code(), Code::kNotSupported) << s.ToString();
    EXPECT_FALSE(s.message().empty());
    return;
  }
  EXPECT_TRUE(scan("", nullptr, SIZE_MAX).empty()) << "empty index";
  Model m;
  for (int i = 0; i < 200; ++i) {
    const std::string k = "k" + std::to_string(1000 + i * 2);  // k1000, k1002, ... k1398
    ASSERT_TRUE(f.idx().Insert(k, i).ok());
    m[k] = i;
  }
  using V = std::vector<std::pair<std::string, uint64_t>>;
  const std::string k1100 = "k1100", k1101 = "k1101", k1398 = "k1398";
  EXPECT_TRUE(scan("k1101", &k1101, SIZE_MAX).empty()) << "empty range between two keys";
  EXPECT_TRUE(scan("k1200", &k1100, SIZE_MAX).empty()) << "start past end";
  EXPECT_TRUE(scan("k14", nullptr, SIZE_MAX).empty()) << "start past the last key";
  EXPECT_TRUE(scan("", nullptr, 0).empty()) << "limit 0";
  EXPECT_EQ(scan("", nullptr, 1), (V{{"k1000", 0}})) << "limit 1";
  EXPECT_EQ(scan("k1099", nullptr, 1), (V{{"k1100", 50}})) << "start between keys";
  EXPECT_EQ(scan("k1100", &k1100, SIZE_MAX), (V{{"k1100", 50}})) << "end is inclusive";
  EXPECT_EQ(scan(k1398, &k1398, 5), (V{{"k1398", 199}})) << "the last key alone";
  EXPECT_EQ(scan("k1050", &k1100, SIZE_MAX), test::ModelScan(m, "k1050", nullptr, 26));
  EXPECT_EQ(scan("k1050", &k1100, 3), test::ModelScan(m, "k1050", nullptr, 3));
  EXPECT_EQ(scan("k1", nullptr, SIZE_MAX), test::ModelScan(m, "", nullptr, SIZE_MAX)) << "a prefix of every key";
  // The callback stops the scan.
  int calls = 0;
  ASSERT_TRUE(f.idx().Scan("", nullptr, SIZE_MAX, [&](std::string_view, uint64_t) { return ++calls < 7; }).ok());
  EXPECT_EQ(calls, 7);
}

// ---- error cases ----------------------------------------------------------------------------

TEST_P(Conformance, ErrorCases) {
  {
    IndexFixture f(GetParam(), KeyType::kBytes);
    ASSERT_TRUE(f.idx().Insert("key", 7).ok());
    const std::string too_long(kMaxKeyLen + 1, 'k');
    uint64_t v = 99;
    bool inserted = false;
    for (Status s : {f.idx().Insert(too_long, 1), f.idx().Upsert(too_long, 1, &inserted),
                     f.idx().Lookup(too_long, &v), f.idx().Remove(too_long)}) {
      EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
      EXPECT_NE(s.message().find("key"), std::string::npos) << "unclear message: " << s.ToString();
    }
    EXPECT_EQ(v, 99u);
    // Duplicate insert: AlreadyExists, nothing changed.
    Status s = f.idx().Insert("key", 8);
    EXPECT_TRUE(s.IsAlreadyExists()) << s.ToString();
    ASSERT_TRUE(f.idx().Lookup("key", &v).ok());
    EXPECT_EQ(v, 7u);
    EXPECT_EQ(f.idx().Size(), 1u);
    // Missing keys: NotFound, *value untouched, nothing changed. A prefix and an extension of a
    // present key are other keys.
    for (const std::string& missing : {std::string("ke"), std::string("key\0", 4), std::string("")}) {
      v = 99;
      EXPECT_TRUE(f.idx().Lookup(missing, &v).IsNotFound());
      EXPECT_EQ(v, 99u);
      EXPECT_TRUE(f.idx().Remove(missing).IsNotFound());
    }
    ASSERT_TRUE(f.idx().Remove("key").ok());
    EXPECT_TRUE(f.idx().Remove("key").IsNotFound()) << "second remove";
    EXPECT_EQ(f.idx().Size(), 0u);
    // Upsert reports which it did.
    ASSERT_TRUE(f.idx().Upsert("u", 1, &inserted).ok());
    EXPECT_TRUE(inserted);
    ASSERT_TRUE(f.idx().Upsert("u", 2, &inserted).ok());
    EXPECT_FALSE(inserted);
    ASSERT_TRUE(f.idx().Lookup("u", &v).ok());
    EXPECT_EQ(v, 2u);
    f.ExpectCheckOk("errors, byte keys");
  }
  IndexFixture f(GetParam(), KeyType::kU64);
  ASSERT_TRUE(f.idx().Insert(uint64_t{5}, 5).ok());
  for (const std::string& bad : {std::string(), std::string(7, 'x'), std::string(9, 'x')}) {
    uint64_t v = 99;
    for (Status s : {f.idx().Insert(bad, 1), f.idx().Upsert(bad, 1), f.idx().Lookup(bad, &v), f.idx().Remove(bad)})
      EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad.size() << " bytes: " << s.ToString();
    EXPECT_EQ(v, 99u);
  }
  EXPECT_TRUE(f.idx().Insert(uint64_t{5}, 6).IsAlreadyExists());
  EXPECT_TRUE(f.idx().Remove(uint64_t{6}).IsNotFound());
  EXPECT_EQ(f.idx().Size(), 1u);
  f.ExpectCheckOk("errors, u64 keys");
}

// Exchange (an Upsert that reports the value it replaced; wort serve's set) against the model:
// keys over the full byte range and their prefixes, 8-byte keys, a reopen between rounds.
TEST_P(Conformance, ExchangeReportsTheValueItReplaced) {
  for (KeyType kt : {KeyType::kBytes, KeyType::kU64}) {
    SCOPED_TRACE(kt == KeyType::kBytes ? "byte-string keys" : "8-byte keys");
    IndexFixture f(GetParam(), kt);
    Model m;
    std::mt19937_64 rng(404);
    ByteKeys gen(404);
    std::vector<std::string> keys = kt == KeyType::kBytes ? EdgeByteKeys() : EdgeU64Keys();
    for (int i = 0; i < 600; ++i) {
      std::string k = kt == KeyType::kBytes ? gen.Next(m) : NextU64(rng);
      if (k.size() <= kMaxKeyLen) keys.push_back(std::move(k));
    }
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 3000; ++i) {
        const std::string& k = keys[rng() % keys.size()];
        const uint64_t v = (rng() >> 1) | 1;  // never 0: an old value of 0 would prove nothing
        if (rng() % 8 == 0) {
          Status s = f.idx().Remove(k);
          ASSERT_EQ(s.ok(), m.erase(k) == 1) << s.ToString();
          continue;
        }
        bool inserted = true;
        uint64_t old = 0;
        Status s = f.idx().Exchange(k, v, &inserted, &old);
        ASSERT_TRUE(s.ok()) << s.ToString();
        auto it = m.find(k);
        ASSERT_EQ(inserted, it == m.end()) << "round " << round << ", op " << i;
        if (!inserted) {
          ASSERT_EQ(old, it->second) << "round " << round << ", op " << i;
        }
        m[k] = v;
      }
      ExpectSame(f.idx(), m, "exchange round " + std::to_string(round));
      ReopenAndCompare(f, m, "exchange round " + std::to_string(round));
    }
    // Bad keys: the same errors as Upsert, nothing changed.
    bool inserted = false;
    uint64_t old = 77;
    const std::string bad = kt == KeyType::kBytes ? std::string(kMaxKeyLen + 1, 'k') : std::string(7, 'x');
    EXPECT_EQ(f.idx().Exchange(bad, 1, &inserted, &old).code(), Code::kInvalidArgument);
    EXPECT_EQ(old, 77u);
    f.ExpectCheckOk("exchange");
  }
}

// ---- capability claims ----------------------------------------------------------------------

// The stated maximum key size: kMaxKeyLen bytes (8 for kU64) is accepted, one more byte is not;
// and the store's capability query states the same (persistent kinds: KvStore).
TEST_P(Conformance, MaxKeySizeAsStated) {
  IndexFixture f(GetParam(), KeyType::kBytes);
  for (char c : {'\0', '\x80', '\xff'}) {
    const std::string max(kMaxKeyLen, c);
    ASSERT_TRUE(f.idx().Insert(max, 1).ok());
    uint64_t v = 0;
    ASSERT_TRUE(f.idx().Lookup(max, &v).ok());
    EXPECT_EQ(v, 1u);
    EXPECT_EQ(f.idx().Insert(max + c, 1).code(), Code::kInvalidArgument);
    ASSERT_TRUE(f.idx().Remove(max).ok());
  }
  if (!persistent()) return;  // the key-value store takes persistent kinds only (wort/kv.h)
  for (KeyType kt : {KeyType::kBytes, KeyType::kU64}) {
    test::TempPath path("conf-kv");
    KvConfig cfg;
    cfg.path = path.str();
    cfg.size = 32ull << 20;
    cfg.kind = GetParam();
    cfg.key_type = kt;
    std::unique_ptr<KvStore> st;
    ASSERT_TRUE(KvStore::Open(cfg, &st).ok());
    const KvCapabilities caps = st->Capabilities();
    EXPECT_EQ(caps.kind, GetParam());
    EXPECT_EQ(caps.ordered, ordered());
    EXPECT_EQ(caps.key_type, kt);
    ASSERT_EQ(caps.max_key_len, kt == KeyType::kU64 ? 8u : kMaxKeyLen);
    const std::string max(caps.max_key_len, '\x81');
    ASSERT_TRUE(st->Put(max, "value").ok());
    std::string got;
    ASSERT_TRUE(st->Get(max, &got).ok());
    EXPECT_EQ(got, "value");
    EXPECT_EQ(st->Put(max + 'x', "value").code(), Code::kInvalidArgument);
    Status s = st->Scan("", std::nullopt, [](std::string_view, std::string_view) { return true; });
    EXPECT_EQ(s.ok(), ordered()) << s.ToString();
    if (!ordered()) {
      EXPECT_EQ(s.code(), Code::kNotSupported);
    }
    ASSERT_TRUE(st->Close().ok());
  }
}

// Every kind is thread-safe (wort/index.h): two threads run differential mixes on disjoint key
// sets (each its own model) at once; ordered kinds also scan, and every scan is strictly
// ascending and holds exactly the scanning thread's own keys of that range. Afterwards the index
// holds exactly the union of the two models.
TEST_P(Conformance, TwoThreadDifferential) {
  IndexFixture f(GetParam(), KeyType::kBytes);
  Model models[2];
  std::atomic<int> failures{0};
  std::mutex mu;
  std::string first_failure;
  auto fail = [&](const std::string& what) {
    if (failures++ == 0) {
      std::lock_guard<std::mutex> g(mu);
      first_failure = what;
    }
  };
  auto worker = [&](int t) {
    Model& m = models[t];
    std::mt19937_64 rng(300 + t);
    ByteKeys gen(300 + t, std::string(1, t ? '\x80' : '\x00'));  // thread 0: 0x00..., thread 1: 0x80...
    Index& idx = f.idx();
    for (int i = 0; i < 6000 && failures == 0; ++i) {
      const std::string k = gen.Next(m);
      const uint64_t v = rng();
      const unsigned r = rng() % 100;
      auto it = m.find(k);
      if (r < 40) {
        Status s = idx.Insert(k, v);
        if (it == m.end() ? !s.ok() : !s.IsAlreadyExists()) fail("insert: " + s.ToString());
        if (s.ok()) m[k] = v;
      } else if (r < 48) {
        bool inserted = false;
        Status s = idx.Upsert(k, v, &inserted);
        if (!s.ok() || inserted != (it == m.end())) fail("upsert: " + s.ToString());
        m[k] = v;
      } else if (r < 55) {
        // Exchange beside the other thread's writers (of other keys): the old value exact.
        bool inserted = false;
        uint64_t old = 0;
        Status s = idx.Exchange(k, v, &inserted, &old);
        if (!s.ok() || inserted != (it == m.end()) || (!inserted && old != it->second))
          fail("exchange: " + s.ToString());
        m[k] = v;
      } else if (r < 75) {
        uint64_t got = 0;
        Status s = idx.Lookup(k, &got);
        if (it == m.end() ? !s.IsNotFound() : (!s.ok() || got != it->second)) fail("lookup: " + s.ToString());
      } else if (r < 95 || !ordered()) {
        Status s = idx.Remove(k);
        if (it == m.end() ? !s.IsNotFound() : !s.ok()) fail("remove: " + s.ToString());
        if (s.ok()) m.erase(k);
      } else {
        // This thread's keys in [k, end of its tag range]: the other thread's keys sort outside.
        const std::string end(1, t ? '\xff' : '\x7f');
        const std::string_view ev(end);
        std::vector<std::pair<std::string, uint64_t>> got;
        std::string prev;
        bool first = true;
        Status s = idx.Scan(k, &ev, 20, [&](std::string_view key, uint64_t val) {
          if (!first && CompareKeys(prev, key) >= 0) fail("scan out of order");
          first = false;
          prev.assign(key);
          got.emplace_back(std::string(key), val);
          return true;
        });
        std::vector<std::pair<std::string, uint64_t>> want;
        for (auto jt = m.lower_bound(k); jt != m.end() && want.size() < 20; ++jt) want.emplace_back(*jt);
        if (!s.ok() || got != want) fail("scan: " + s.ToString() + ", " + std::to_string(got.size()) + " pairs, want " +
                                         std::to_string(want.size()));
      }
    }
  };
  std::thread other(worker, 1);
  worker(0);
  other.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  Model all = models[0];
  all.insert(models[1].begin(), models[1].end());
  ExpectSame(f.idx(), all, "after two threads");
  f.ExpectCheckOk("after two threads");
}

// A second handle of an open index (OpenIndex while the first handle lives) is refused with Busy,
// for every kind (registry.h ClaimSoleHandle): each handle keeps part of the index in DRAM - its
// key count at least - that another would not share, and through two handles FPTree's writes
// misplaced keys in its persistent leaves. The first handle stays usable, and once it is gone
// the index opens again (the claim is released with the handle).
TEST_P(Conformance, SecondHandleIsRefused) {
  IndexFixture f(GetParam(), KeyType::kBytes);
  ASSERT_TRUE(f.idx().Insert("k", 1).ok());
  std::unique_ptr<Index> b;
  Status s = OpenIndex(f.pool(), IndexFixture::kRoot, &b);
  EXPECT_EQ(s.code(), Code::kBusy) << s.ToString();
  EXPECT_NE(s.message().find("already open"), std::string::npos) << s.ToString();
  EXPECT_EQ(b, nullptr);
  std::unique_ptr<Index> c;  // OpenOrCreateIndex takes the same path
  EXPECT_EQ(OpenOrCreateIndex(f.pool(), IndexFixture::kRoot, GetParam(), IndexOptions{}, &c).code(), Code::kBusy);
  EXPECT_TRUE(f.idx().Insert("k2", 2).ok());
  f.ReopenIndex();  // the first handle dropped, then opened again: the claim went with it
  uint64_t v = 0;
  Status ls = f.idx().Lookup("k2", &v);
  EXPECT_TRUE(persistent() ? ls.ok() && v == 2 : ls.IsNotFound()) << ls.ToString();  // a volatile kind reopens empty
  // Another root of the same pool is another index: its own handle.
  std::unique_ptr<Index> other;
  EXPECT_TRUE(CreateIndex(f.pool(), "other", GetParam(), IndexOptions{}, &other).ok());
}

INSTANTIATE_TEST_SUITE_P(Kinds, Conformance, ::testing::ValuesIn(AllKinds()), test::KindParamName);

}  // namespace
}  // namespace wort
