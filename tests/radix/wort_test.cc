// Tests of the WORT radix tree (src/index/radix/wort.h): differential tests against std::map for
// the paper's key distributions and for byte-string keys, the interrupted split and collapse
// (stale compression headers, Algorithm 2), PoolFull, and the allocator's view of the tree.
#include "index/radix/wort.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/key.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort {
namespace {

using radix::WortCheckInfo;
using radix::WortInterrupt;

struct KeyLess {
  bool operator()(const std::string& a, const std::string& b) const { return CompareKeys(a, b) < 0; }
};
using Model = std::map<std::string, uint64_t, KeyLess>;

PoolOptions Opts(uint64_t max_size = 1ull << 30, bool background = false) {
  PoolOptions o;
  o.initial_size = 2 << 20;
  o.max_size = max_size;
  o.background_recovery = background;
  return o;
}

void Ignore(const Status&) {}

std::string Hex(std::string_view k) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < k.size() && i < 40; ++i) {
    s += d[static_cast<uint8_t>(k[i]) >> 4];
    s += d[static_cast<uint8_t>(k[i]) & 15];
  }
  if (k.size() > 40) s += "...(" + std::to_string(k.size()) + " bytes)";
  return s.empty() ? "<empty>" : s;
}

// A pool holding one WORT index named "t".
class Env {
 public:
  explicit Env(IndexOptions io = {}, uint64_t max_size = 1ull << 30) : max_size_(max_size) {
    EXPECT_TRUE(Pool::Create(path_, Opts(max_size_), &pool_).ok());
    Status s = CreateIndex(*pool_, "t", "wort", io, &idx_);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  Index& idx() { return *idx_; }
  Pool& pool() { return *pool_; }

  // Clean close and reopen.
  void Reopen() {
    idx_.reset();
    ASSERT_TRUE(pool_->Close().ok());
    pool_.reset();
    ASSERT_TRUE(Pool::Open(path_, Opts(max_size_), &pool_).ok());
    Status s = OpenIndex(*pool_, "t", &idx_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  // Reopen from a copy of the file taken while the pool is open: an unclean stop, so the
  // allocator's post-crash GC runs (through the visit function) before Open returns, or in
  // the background when `background`.
  void CrashReopen(bool background = false) {
    test::TempPath copy("crash");
    test::CopyFile(path_, copy);
    idx_.reset();
    ASSERT_TRUE(pool_->Close().ok());
    pool_.reset();
    test::CopyFile(copy, path_);
    ASSERT_TRUE(Pool::Open(path_, Opts(max_size_, background), &pool_).ok());
    EXPECT_FALSE(pool_->opened_clean());
    Status s = OpenIndex(*pool_, "t", &idx_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void ExpectCheck(uint64_t want_stale = 0) {
    std::string rep;
    WortCheckInfo info;
    Status s = radix::WortCheck(*idx_, &rep, &info);
    EXPECT_TRUE(s.ok()) << s.ToString() << "\n" << rep;
    EXPECT_EQ(info.stale_headers, want_stale);
    std::string rep2;
    Status s2 = idx_->Check(&rep2);
    EXPECT_TRUE(s2.ok()) << rep2;
  }

  std::set<uint64_t> Visited() {
    RootInfo ri;
    EXPECT_TRUE(pool_->FindRoot("t", &ri).ok());
    std::set<uint64_t> v;
    FindIndexKind("wort")->visit(*pool_, ri.off, [&](uint64_t off) {
      EXPECT_TRUE(v.insert(off).second) << "block reported twice: " << off;
    });
    return v;
  }
  std::set<uint64_t> Allocated() {
    std::set<uint64_t> a;
    pool_->allocator().ForEachAllocated([&](uint64_t off, size_t) { a.insert(off); });
    return a;
  }
  // Reachability contract: what the allocator holds is exactly what visit reports (no leak, no
  // reachable block freed).
  void ExpectAllocatedEqualsVisited() {
    const auto v = Visited(), a = Allocated();
    EXPECT_EQ(a, v) << "allocated " << a.size() << " visited " << v.size();
  }
  RootInfo Root() {
    RootInfo ri;
    EXPECT_TRUE(pool_->FindRoot("t", &ri).ok());
    return ri;
  }

 private:
  test::TempPath path_{"wort"};
  uint64_t max_size_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Index> idx_;
};

// Everything in the model is found, nothing else is scanned, Size agrees.
void ExpectMatches(Index& idx, const Model& m) {
  EXPECT_EQ(idx.Size(), m.size());
  for (const auto& [k, v] : m) {
    uint64_t got = ~v;
    Status s = idx.Lookup(k, &got);
    ASSERT_TRUE(s.ok()) << Hex(k) << ": " << s.ToString();
    ASSERT_EQ(got, v) << Hex(k);
  }
  auto it = m.begin();
  size_t n = 0;
  Status s = idx.Scan("", nullptr, SIZE_MAX, [&](std::string_view k, uint64_t v) {
    EXPECT_TRUE(it != m.end()) << "scan returned extra key " << Hex(k);
    if (it == m.end()) return false;
    EXPECT_EQ(Hex(k), Hex(it->first));
    EXPECT_EQ(v, it->second);
    ++it;
    ++n;
    return true;
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(n, m.size());
}

// One scan compared with the model.
void ExpectScan(Index& idx, const Model& m, const std::string& start, const std::string* end, size_t limit) {
  std::vector<std::pair<std::string, uint64_t>> want, got;
  for (auto it = m.lower_bound(start); it != m.end() && want.size() < limit; ++it) {
    if (end && CompareKeys(it->first, *end) > 0) break;
    want.push_back(*it);
  }
  std::string_view ev;
  if (end) ev = *end;
  Status s = idx.Scan(start, end ? &ev : nullptr, limit, [&](std::string_view k, uint64_t v) {
    got.emplace_back(std::string(k), v);
    return true;
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(got.size(), want.size()) << "start " << Hex(start) << " limit " << limit;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(Hex(got[i].first), Hex(want[i].first)) << "start " << Hex(start) << " i " << i;
    ASSERT_EQ(got[i].second, want[i].second);
  }
}

// Random insert/upsert/lookup/remove/scan against the model. `gen` draws a key.
template <class Gen>
void RandomOps(Index& idx, Model& m, std::vector<std::string>& seen, Gen&& gen, int ops, std::mt19937_64& rng) {
  auto pick = [&]() -> std::string {
    if (!seen.empty() && rng() % 2) return seen[rng() % seen.size()];
    std::string k = gen();
    seen.push_back(k);
    return k;
  };
  for (int i = 0; i < ops; ++i) {
    const unsigned op = rng() % 100;
    const std::string k = pick();
    const bool present = m.count(k) != 0;
    const uint64_t v = rng();
    if (op < 40) {
      Status s = idx.Insert(k, v);
      if (present) {
        ASSERT_TRUE(s.IsAlreadyExists()) << Hex(k) << " " << s.ToString();
      } else {
        ASSERT_TRUE(s.ok()) << Hex(k) << " " << s.ToString();
        m[k] = v;
      }
    } else if (op < 55) {
      bool inserted = !present;
      Status s = idx.Upsert(k, v, &inserted);
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_EQ(inserted, !present) << Hex(k);
      m[k] = v;
    } else if (op < 75) {
      uint64_t got = 12345;
      Status s = idx.Lookup(k, &got);
      if (present) {
        ASSERT_TRUE(s.ok()) << Hex(k) << " " << s.ToString();
        ASSERT_EQ(got, m[k]);
      } else {
        ASSERT_TRUE(s.IsNotFound()) << Hex(k) << " " << s.ToString();
        ASSERT_EQ(got, 12345u);
      }
    } else if (op < 95) {
      Status s = idx.Remove(k);
      if (present) {
        ASSERT_TRUE(s.ok()) << Hex(k) << " " << s.ToString();
        m.erase(k);
      } else {
        ASSERT_TRUE(s.IsNotFound()) << Hex(k) << " " << s.ToString();
      }
    } else {
      const std::string end = pick();
      const bool use_end = rng() % 2;
      const size_t limit = rng() % 4 == 0 ? SIZE_MAX : rng() % 40;
      ASSERT_NO_FATAL_FAILURE(ExpectScan(idx, m, k, use_end ? &end : nullptr, limit));
    }
  }
}

// The differential test: phases of random operations with Check, clean reopen, crash reopen,
// and finally emptying the tree, after which the allocator holds only the root block.
template <class Gen>
void Differential(IndexOptions io, Gen&& gen, int ops, uint64_t seed) {
  Env env(io);
  Model m;
  std::vector<std::string> seen;
  std::mt19937_64 rng(seed);

  ASSERT_NO_FATAL_FAILURE(RandomOps(env.idx(), m, seen, gen, ops, rng));
  env.ExpectCheck();
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));
  env.ExpectAllocatedEqualsVisited();

  ASSERT_NO_FATAL_FAILURE(env.Reopen());
  env.ExpectCheck();
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));
  ASSERT_NO_FATAL_FAILURE(RandomOps(env.idx(), m, seen, gen, ops, rng));
  env.ExpectCheck();

  ASSERT_NO_FATAL_FAILURE(env.CrashReopen());
  env.ExpectCheck();
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));
  env.ExpectAllocatedEqualsVisited();
  ASSERT_NO_FATAL_FAILURE(RandomOps(env.idx(), m, seen, gen, ops / 2, rng));
  env.ExpectCheck();
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));

  const IndexStats st = env.idx().Stats();
  EXPECT_EQ(st.keys, m.size());
  EXPECT_EQ(st.leaves, m.size());
  uint64_t bytes = 0;
  env.pool().allocator().ForEachAllocated([&](uint64_t, size_t n) { bytes += n; });
  EXPECT_EQ(st.bytes_allocated, bytes);
  if (m.size() > 1) {
    EXPECT_GT(st.inner_nodes, 0u);
    EXPECT_GE(st.avg_leaf_depth, 1.0);
  }

  // Empty it in random order.
  std::vector<std::string> keys;
  for (auto& [k, v] : m) keys.push_back(k);
  std::shuffle(keys.begin(), keys.end(), rng);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(env.idx().Remove(keys[i]).ok()) << Hex(keys[i]);
    if (i == keys.size() / 2) env.ExpectCheck();
  }
  m.clear();
  env.ExpectCheck();
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));
  const auto visited = env.Visited();
  EXPECT_EQ(visited, std::set<uint64_t>{env.Root().off});
  EXPECT_EQ(env.Allocated(), visited);
  EXPECT_EQ(env.pool().allocator().Stats().blocks_allocated, 1u);
  EXPECT_EQ(env.idx().Stats().inner_nodes, 0u);
}

// ---- key generators ----------------------------------------------------------------------------

// The paper's distributions over 8-byte keys; each draws from a fixed universe so that keys repeat.
std::function<std::string()> DenseGen(std::mt19937_64& rng, uint64_t n) {
  return [&rng, n] { return EncodeU64(1 + rng() % n); };
}
std::function<std::string()> SparseGen(std::mt19937_64& rng) {
  return [&rng] { return EncodeU64(rng()); };
}
std::function<std::string()> ClusteredGen(std::mt19937_64& rng, size_t runs) {
  auto starts = std::make_shared<std::vector<uint64_t>>();
  for (size_t i = 0; i < runs; ++i) starts->push_back(rng());
  return [&rng, starts] { return EncodeU64((*starts)[rng() % starts->size()] + rng() % 64); };
}

// Byte strings over the full byte range with many shared prefixes and prefix keys: new random
// keys, truncations (prefixes) and extensions of earlier keys, and one-byte mutations.
std::function<std::string()> BytesGen(std::mt19937_64& rng, size_t max_len) {
  auto pool = std::make_shared<std::vector<std::string>>();
  return [&rng, pool, max_len] {
    static const unsigned char kInteresting[] = {0x00, 0x01, 0x0f, 0x10, 0x7f, 0x80, 0x81, 0xf0, 0xff, 'a'};
    auto byte = [&]() -> char {
      return static_cast<char>(rng() % 3 ? kInteresting[rng() % sizeof(kInteresting)] : rng() % 256);
    };
    std::string k;
    const unsigned mode = pool->empty() ? 0 : rng() % 5;
    if (mode == 0) {
      const size_t len = rng() % 4 == 0 ? rng() % (max_len + 1) : rng() % 12;
      for (size_t i = 0; i < len; ++i) k += byte();
    } else {
      k = (*pool)[rng() % pool->size()];
      if (mode == 1) {
        k.resize(k.empty() ? 0 : rng() % (k.size() + 1));  // a prefix
      } else if (mode == 2) {
        for (size_t n = 1 + rng() % 3; n && k.size() < max_len; --n) k += byte();  // an extension
      } else if (mode == 3 && !k.empty()) {
        k[rng() % k.size()] = byte();  // a sibling
      } else {
        while (k.size() < max_len && rng() % 8) k += static_cast<char>(rng() % 256);
      }
    }
    if (pool->size() < 4000) pool->push_back(k);
    return k;
  };
}

// ---- differential tests --------------------------------------------------------------------------

class WortSpan : public ::testing::TestWithParam<uint32_t> {
 protected:
  IndexOptions U64() const {
    IndexOptions io;
    io.key_type = KeyType::kU64;
    io.span_bits = GetParam();
    return io;
  }
  IndexOptions Bytes() const {
    IndexOptions io;
    io.key_type = KeyType::kBytes;
    io.span_bits = GetParam();
    return io;
  }
};

TEST_P(WortSpan, DifferentialDense) {
  std::mt19937_64 rng(1);
  Differential(U64(), DenseGen(rng, 6000), 15000, 11);
}
TEST_P(WortSpan, DifferentialSparse) {
  std::mt19937_64 rng(2);
  Differential(U64(), SparseGen(rng), 15000, 12);
}
TEST_P(WortSpan, DifferentialClustered) {
  std::mt19937_64 rng(3);
  Differential(U64(), ClusteredGen(rng, 100), 15000, 13);
}
TEST_P(WortSpan, DifferentialByteStrings) {
  std::mt19937_64 rng(4);
  Differential(Bytes(), BytesGen(rng, 300), 15000, 14);
}
TEST_P(WortSpan, DifferentialShortByteStrings) {
  // Short keys over few byte values: dense prefix sharing, end slots everywhere.
  std::mt19937_64 rng(5);
  auto gen = [&rng] {
    static const char kBytes[] = {'\0', '\x01', '\x7f', '\x80', '\xff'};
    std::string k;
    for (size_t n = rng() % 7; n; --n) k += kBytes[rng() % 5];
    return k;
  };
  Differential(Bytes(), gen, 8000, 15);
}

INSTANTIATE_TEST_SUITE_P(Spans, WortSpan, ::testing::Values(4u, 8u),
                         [](const auto& info) { return "span" + std::to_string(info.param); });

// ---- edge cases ------------------------------------------------------------------------------------

TEST(Wort, OptionsAndKeyValidation) {
  {
    test::TempPath path;
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(path, Opts(), &pool).ok());
    std::unique_ptr<Index> idx;
    IndexOptions io;
    io.span_bits = 5;
    Status s = CreateIndex(*pool, "x", "wort", io, &idx);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    io.span_bits = 16;
    EXPECT_EQ(CreateIndex(*pool, "x", "wort", io, &idx).code(), Code::kInvalidArgument);
    EXPECT_FALSE(pool->FindRoot("x", nullptr).ok());
  }
  {
    IndexOptions io;
    io.key_type = KeyType::kU64;
    Env env(io);
    EXPECT_EQ(env.idx().key_type(), KeyType::kU64);
    EXPECT_EQ(env.idx().kind(), "wort");
    uint64_t v;
    for (size_t len : {0, 1, 7, 9, 16}) {
      const std::string k(len, 'k');
      EXPECT_EQ(env.idx().Insert(k, 1).code(), Code::kInvalidArgument) << len;
      EXPECT_EQ(env.idx().Upsert(k, 1).code(), Code::kInvalidArgument) << len;
      EXPECT_EQ(env.idx().Lookup(k, &v).code(), Code::kInvalidArgument) << len;
      EXPECT_EQ(env.idx().Remove(k).code(), Code::kInvalidArgument) << len;
    }
    EXPECT_TRUE(env.idx().Insert(uint64_t{7}, 70).ok());
    EXPECT_TRUE(env.idx().Lookup(uint64_t{7}, &v).ok());
    EXPECT_EQ(v, 70u);
    env.Reopen();  // the key type is in the root block
    EXPECT_EQ(env.idx().key_type(), KeyType::kU64);
    EXPECT_EQ(env.idx().Insert(std::string(4, 'k'), 1).code(), Code::kInvalidArgument);
    env.ExpectCheck();
  }
  {
    Env env;
    const std::string longest(kMaxKeyLen, '\xab');
    const std::string too_long(kMaxKeyLen + 1, '\xab');
    uint64_t v = 0;
    EXPECT_EQ(env.idx().Insert(too_long, 1).code(), Code::kInvalidArgument);
    EXPECT_EQ(env.idx().Upsert(too_long, 1).code(), Code::kInvalidArgument);
    EXPECT_EQ(env.idx().Lookup(too_long, &v).code(), Code::kInvalidArgument);
    EXPECT_EQ(env.idx().Remove(too_long).code(), Code::kInvalidArgument);
    EXPECT_TRUE(env.idx().Insert(longest, 5).ok());
    EXPECT_TRUE(env.idx().Insert(longest.substr(0, kMaxKeyLen - 1), 6).ok());
    EXPECT_TRUE(env.idx().Lookup(longest, &v).ok());
    EXPECT_EQ(v, 5u);
    EXPECT_EQ(env.idx().Size(), 2u);
    env.ExpectCheck();
  }
}

TEST(Wort, ScanOrderAndBounds) {
  for (uint32_t span : {4u, 8u}) {
    IndexOptions io;
    io.span_bits = span;
    Env env(io);
    Model m;
    const std::string common(100, 'p');  // longer than any inline prefix array
    std::vector<std::string> keys = {"",       std::string(1, '\0'), std::string(2, '\0'), "a", "ab", "abc",
                                     "\x7f",   "\x7f\xff",          "\x80",               std::string("\x80\x00", 2), "\xff",
                                     "\xff\xff", common,            common + "\x01",      common + "\x80",
                                     common + "\x80\x80", common.substr(0, 99) + "q", "b"};
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(env.idx().Insert(keys[i], i).ok()) << Hex(keys[i]);
      m[keys[i]] = i;
    }
    env.ExpectCheck();
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));
    // Every key, every prefix of every key, and a few in-between keys as start and end.
    std::vector<std::string> probes;
    for (const auto& k : keys) {
      for (size_t n = 0; n <= k.size(); n += (k.size() > 10 ? 7 : 1)) probes.push_back(k.substr(0, n));
      probes.push_back(k + '\0');
      probes.push_back(k + '\xff');
    }
    probes.push_back("\x7e");
    probes.push_back(common + "\x00\x01");
    for (const auto& s : probes) {
      for (size_t limit : {size_t{1}, size_t{3}, SIZE_MAX}) {
        ASSERT_NO_FATAL_FAILURE(ExpectScan(env.idx(), m, s, nullptr, limit));
      }
      for (const auto& e : {std::string("\x7f"), std::string("abc"), common}) {
        ASSERT_NO_FATAL_FAILURE(ExpectScan(env.idx(), m, s, &e, SIZE_MAX));
      }
    }
    // limit 0 yields nothing; fn returning false stops.
    size_t calls = 0;
    EXPECT_TRUE(env.idx().Scan("", nullptr, 0, [&](std::string_view, uint64_t) { return ++calls, true; }).ok());
    EXPECT_EQ(calls, 0u);
    EXPECT_TRUE(env.idx().Scan("", nullptr, SIZE_MAX, [&](std::string_view, uint64_t) { return ++calls < 2; }).ok());
    EXPECT_EQ(calls, 2u);
    // 0x80 sorts after 0x7f.
    std::vector<std::string> got;
    EXPECT_TRUE(env.idx().Scan("\x7f", nullptr, 4, [&](std::string_view k, uint64_t) {
      got.emplace_back(k);
      return true;
    }).ok());
    EXPECT_EQ(got, (std::vector<std::string>{"\x7f", "\x7f\xff", "\x80", std::string("\x80\x00", 2)}));
  }
}

TEST(Wort, PrefixChainsAndLongKeys) {
  for (uint32_t span : {4u, 8u}) {
    IndexOptions io;
    io.span_bits = span;
    Env env(io);
    Model m;
    std::mt19937_64 rng(span);
    // A chain of keys each a prefix of the next: every inner node uses its end slot.
    for (size_t n = 0; n <= 300; ++n) m[std::string(n, '\x80')] = n;
    // Long keys sharing prefixes beyond the inline prefix array, differing near the end.
    std::string base(kMaxKeyLen - 2, '\0');
    for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<char>(rng() % 256);
    for (int i = 0; i < 20; ++i) {
      std::string k = base;
      k[base.size() - 1 - rng() % 40] ^= static_cast<char>(1 + rng() % 255);
      if (i % 3 == 0) k += static_cast<char>(rng() % 256);
      m[k] = 1000 + i;
    }
    m[base] = 2000;
    m[base.substr(0, 1000)] = 2001;
    std::vector<std::string> order;
    for (auto& [k, v] : m) order.push_back(k);
    std::shuffle(order.begin(), order.end(), rng);
    for (const auto& k : order) ASSERT_TRUE(env.idx().Insert(k, m[k]).ok()) << Hex(k);
    env.ExpectCheck();
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));
    env.Reopen();
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i = 0; i < order.size(); i += 2) {
      ASSERT_TRUE(env.idx().Remove(order[i]).ok());
      m.erase(order[i]);
    }
    env.ExpectCheck();
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));
    for (auto& [k, v] : m) ASSERT_TRUE(env.idx().Remove(k).ok());
    m.clear();
    env.ExpectCheck();
    EXPECT_EQ(env.Visited(), std::set<uint64_t>{env.Root().off});
    EXPECT_EQ(env.Allocated(), env.Visited());
  }
}

// 8-byte keys take Lookup's path without calls (issue 31, h63: its first steps unrolled, a fast
// bound instead of BlockOk, a fallback to the general lookup). Every way out of the unrolled
// steps: a leaf at each depth, a null slot, a compressed path (keys sharing 1 to 15 partial keys
// after some depth), a node at every depth 0..15 (keys differing only in their last nibble), an
// 8-byte key that is a prefix of longer keys (bytes trees: a node's end slot), bytes >= 0x80;
// absent keys beside each. Then the same lookups with the fast bound at 0, so that every
// reference takes the fallback (the general lookup with BlockOk).
TEST(Wort, EightByteLookupsOnEveryPath) {
  for (bool bytes : {false, true}) {
    for (uint32_t span : {4u, 8u}) {
      IndexOptions io;
      io.key_type = bytes ? KeyType::kBytes : KeyType::kU64;
      io.span_bits = span;
      Env env(io);
      Model m;
      std::vector<std::string> absent;
      std::mt19937_64 rng(span * 2 + bytes);
      uint64_t v = 1;
      for (uint64_t base : {0x0123456789abcdefull, 0xf0e1d2c3b4a59687ull, 0x8080808080808080ull}) {
        // A chain: keys differing from base in partial key d only, for every d - a node at
        // every depth, each with a compressed path below it.
        for (unsigned d = 0; d < 64 / span; ++d) {
          const uint64_t k = base ^ (uint64_t{1} << (64 - span - span * d));
          m[EncodeU64(k)] = v++;
          absent.push_back(EncodeU64(k ^ (uint64_t{1} << (64 - span * (d + 1) + (span - 1)))));
        }
        m[EncodeU64(base)] = v++;
      }
      // Random keys (leaves at depth 3-5) and keys with long shared runs of 0x80 and 0xff.
      for (int i = 0; i < 3000; ++i) {
        const uint64_t r = rng();
        m[EncodeU64(r)] = v++;
        absent.push_back(EncodeU64(r ^ 1));
        absent.push_back(EncodeU64(r ^ (uint64_t{1} << 63)));
        m[EncodeU64(0x8080800000000000ull | (r & 0xff))] = v++;
        m[EncodeU64(0xffffffffffff0000ull | (r & 0xffff))] = v++;
      }
      absent.push_back(EncodeU64(0x8080800000000100ull));
      absent.push_back(EncodeU64(0xfffffffffffeffffull));
      if (bytes) {  // 8-byte keys that end where longer keys go on (end slots), and shorter ones
        for (const char* k8 : {"\x80\x81\x82\x83\x84\x85\x86\x87", "abcdefgh", "\xff\xff\xff\xff\xff\xff\xff\xff"}) {
          const std::string k(k8, 8);
          m[k] = v++;
          m[k + "x"] = v++;
          m[k + std::string(1, '\0')] = v++;
          m[k.substr(0, 7)] = v++;
          absent.push_back(k.substr(0, 7) + std::string(1, '\x01'));
        }
      }
      std::vector<std::string> order;
      for (auto& [k, val] : m) order.push_back(k);
      std::shuffle(order.begin(), order.end(), rng);
      for (const auto& k : order) ASSERT_TRUE(env.idx().Insert(k, m[k]).ok()) << Hex(k);
      env.ExpectCheck();
      std::erase_if(absent, [&](const std::string& k) { return m.count(k) != 0; });
      ASSERT_GT(absent.size(), 6000u);
      for (int pass = 0; pass < 2; ++pass) {
        if (pass == 1) {
          ASSERT_TRUE(radix::SetWortFastBoundForTest(env.idx(), 0));
        }
        for (const auto& [k, want] : m) {
          uint64_t got = 0;
          Status s = env.idx().Lookup(k, &got);
          ASSERT_TRUE(s.ok()) << "pass " << pass << " " << Hex(k) << ": " << s.ToString();
          ASSERT_EQ(got, want) << "pass " << pass << " " << Hex(k);
        }
        for (const auto& k : absent) {
          uint64_t got = 0;
          EXPECT_TRUE(env.idx().Lookup(k, &got).IsNotFound()) << "pass " << pass << " " << Hex(k);
        }
      }
    }
  }
}

// ---- interrupted split and collapse (Algorithm 1 / Algorithm 2) ----------------------------------

class WortStale : public ::testing::TestWithParam<uint32_t> {
 protected:
  IndexOptions U64() const {
    IndexOptions io;
    io.key_type = KeyType::kU64;
    io.span_bits = GetParam();
    return io;
  }
};

// A split stopped after N's header store, before the parent slot points to the new parent:
// readers skip N's stale prefix array, Check accepts it, writers repair it.
TEST_P(WortStale, InterruptedSplitAtTheRoot) {
  Env env(U64());
  Index& idx = env.idx();
  Model m;
  // One node with a long compressed path (beyond the inline prefix array): the root.
  for (uint64_t i = 0; i < 20; ++i) m[EncodeU64(0x1111111111111100ull + i)] = i;
  m[EncodeU64(0x1111111111112000ull)] = 99;
  for (auto& [k, v] : m) ASSERT_TRUE(idx.Insert(k, v).ok());
  env.ExpectCheck(0);

  radix::SetWortInterruptForTest(WortInterrupt::kSplitBeforeParentUpdate);
  Status s = idx.Insert(0x2000000000000000ull, 7);  // mismatches at the first partial key
  EXPECT_EQ(s.code(), Code::kIOError) << s.ToString();
  env.ExpectCheck(1);
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(idx, m));
  uint64_t v;
  EXPECT_TRUE(idx.Lookup(0x2000000000000000ull, &v).IsNotFound());
  // Differs from stored keys only in the partial keys that the stale header no longer holds.
  EXPECT_TRUE(idx.Lookup(0x2111111111111100ull, &v).IsNotFound());
  EXPECT_TRUE(idx.Lookup(0x1211111111111100ull, &v).IsNotFound());
  ASSERT_NO_FATAL_FAILURE(ExpectScan(idx, m, EncodeU64(0x1111111111111105ull), nullptr, 5));
  ASSERT_NO_FATAL_FAILURE(ExpectScan(idx, m, EncodeU64(0x0500000000000000ull), nullptr, 3));

  // The state survives a restart and a crash (post-crash GC visits the tree).
  env.Reopen();
  env.ExpectCheck(1);
  env.CrashReopen();
  env.ExpectCheck(1);
  env.ExpectAllocatedEqualsVisited();
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));

  // A writer passing through repairs the header (RecoverHeader), then splits.
  ASSERT_TRUE(env.idx().Insert(0x2000000000000000ull, 7).ok());
  m[EncodeU64(0x2000000000000000ull)] = 7;
  env.ExpectCheck(0);
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));
  env.ExpectAllocatedEqualsVisited();
}

TEST_P(WortStale, InterruptedSplitBelowTheRootRepairedByOtherWriters) {
  for (int repair = 0; repair < 4; ++repair) {
    Env env(U64());
    Index& idx = env.idx();
    Model m;
    // Root branches on the first byte; the child under 0x55 has a long compressed path (its
    // keys differ only in the last byte). The interrupted insert leaves it at byte 2.
    for (uint64_t i = 0; i < 10; ++i) m[EncodeU64(0x5555555555555500ull + i)] = i;
    m[EncodeU64(0x6000000000000000ull)] = 60;
    for (auto& [k, v] : m) ASSERT_TRUE(idx.Insert(k, v).ok());
    const uint64_t interrupted = 0x5555565555555500ull;
    radix::SetWortInterruptForTest(WortInterrupt::kSplitBeforeParentUpdate);
    EXPECT_EQ(idx.Insert(interrupted, 1).code(), Code::kIOError);
    env.ExpectCheck(1);
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(idx, m));
    uint64_t v;
    EXPECT_TRUE(idx.Lookup(interrupted, &v).IsNotFound());
    EXPECT_TRUE(idx.Lookup(0x5525555555555501ull, &v).IsNotFound());
    EXPECT_TRUE(idx.Lookup(0x5555555555555510ull, &v).IsNotFound());
    switch (repair) {
      case 0:  // an insert that mismatches inside the part the stale header lost (byte 1)
        ASSERT_TRUE(idx.Insert(0x5556555555555500ull, 2).ok());
        m[EncodeU64(0x5556555555555500ull)] = 2;
        break;
      case 1:  // an upsert of a present key below the stale node
        ASSERT_TRUE(idx.Upsert(0x5555555555555503ull, 33).ok());
        m[EncodeU64(0x5555555555555503ull)] = 33;
        break;
      case 2:  // a remove below the stale node
        ASSERT_TRUE(idx.Remove(0x5555555555555504ull).ok());
        m.erase(EncodeU64(0x5555555555555504ull));
        break;
      case 3:  // the interrupted insert, retried
        ASSERT_TRUE(idx.Insert(interrupted, 1).ok());
        m[EncodeU64(interrupted)] = 1;
        break;
    }
    env.ExpectCheck(0);
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(idx, m));
    env.ExpectAllocatedEqualsVisited();
  }
}

// A collapsing remove stopped after its commit (the parent slot points to the sibling node),
// before the sibling's header is rewritten for its new depth.
TEST_P(WortStale, InterruptedCollapse) {
  Env env(U64());
  Index& idx = env.idx();
  Model m;
  // The root branches on byte 0: 0x55 -> N, 0x70 -> a leaf. N branches on byte 1: 0x55 -> S
  // (three keys differing in the last byte), 0x66 -> leaf b. Removing b collapses N.
  const uint64_t b = 0x5566000000000000ull;
  for (uint64_t i = 0; i < 3; ++i) m[EncodeU64(0x5555555555555500ull + i)] = i;
  m[EncodeU64(b)] = 56;
  m[EncodeU64(0x7000000000000000ull)] = 70;
  for (auto& [k, v] : m) ASSERT_TRUE(idx.Insert(k, v).ok());
  const uint64_t inner_before = idx.Stats().inner_nodes;
  radix::SetWortInterruptForTest(WortInterrupt::kCollapseBeforeHeaderFix);
  ASSERT_TRUE(idx.Remove(b).ok());
  m.erase(EncodeU64(b));
  EXPECT_EQ(idx.Stats().inner_nodes, inner_before - 1);
  env.ExpectCheck(1);
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(idx, m));
  uint64_t v;
  EXPECT_TRUE(idx.Lookup(0x5505555555555500ull, &v).IsNotFound());
  EXPECT_TRUE(idx.Lookup(0x5555555555555555ull, &v).IsNotFound());
  EXPECT_TRUE(idx.Lookup(b, &v).IsNotFound());
  env.ExpectAllocatedEqualsVisited();
  env.CrashReopen();
  env.ExpectCheck(1);
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));
  ASSERT_TRUE(env.idx().Insert(0x5555555555555510ull, 5).ok());
  m[EncodeU64(0x5555555555555510ull)] = 5;
  env.ExpectCheck(0);
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));
}

INSTANTIATE_TEST_SUITE_P(Spans, WortStale, ::testing::Values(4u, 8u),
                         [](const auto& info) { return "span" + std::to_string(info.param); });

// ---- Check must fail on damage -------------------------------------------------------------------

TEST(Wort, CheckDetectsDamage) {
  IndexOptions io;
  io.key_type = KeyType::kU64;
  for (int damage = 0; damage < 4; ++damage) {
    Env env(io);
    for (uint64_t i = 0; i < 50; ++i) ASSERT_TRUE(env.idx().Insert(i * 0x0101010101ull, i).ok());
    env.ExpectCheck();
    auto* rb = env.pool().at<radix::WortRootBlock>(env.Root().off);
    auto* root = env.pool().at<radix::WortNode<4>>(radix::RefOffset(rb->root));
    ASSERT_FALSE(radix::RefIsLeaf(rb->root));
    radix::CompressionHeader h;
    std::memcpy(&h, &root->header, 8);
    unsigned a = 0;
    while (root->slot[a] == 0) ++a;
    unsigned b = a + 1;
    while (root->slot[b] == 0) ++b;
    switch (damage) {
      case 0: std::swap(root->slot[a], root->slot[b]); break;  // keys in the wrong subtree
      case 1: h.prefix_len += 1; break;                          // wrong branch position
      case 2: h.prefix[0] ^= 0x10; break;                       // prefix array disagrees with leaves
      case 3: root->slot[0] = root->slot[a]; break;              // a block referenced twice
    }
    std::memcpy(&root->header, &h, 8);
    std::string rep;
    EXPECT_FALSE(env.idx().Check(&rep).ok()) << "damage " << damage;
    EXPECT_FALSE(rep.empty());
  }
}

// ---- PoolFull -----------------------------------------------------------------------------------

TEST(Wort, PoolFullLeavesTheTreeIntact) {
  for (bool bytes : {false, true}) {
    IndexOptions io;
    io.key_type = bytes ? KeyType::kBytes : KeyType::kU64;
    Env env(io, /*max_size=*/8 << 20);
    Index& idx = env.idx();
    Model m;
    std::mt19937_64 rng(bytes ? 8 : 9);
    auto key = [&] {
      if (!bytes) return EncodeU64(rng());
      std::string k(8 + rng() % 300, '\0');
      for (auto& c : k) c = static_cast<char>(rng() % 256);
      return k;
    };
    int failures = 0;
    for (int i = 0; i < 200000 && failures < 200; ++i) {
      const std::string k = key();
      const uint64_t size_before = idx.Size();
      Status s = idx.Insert(k, i);
      if (s.ok()) {
        m[k] = i;
        continue;
      }
      ASSERT_TRUE(s.IsPoolFull()) << s.ToString();
      ++failures;
      EXPECT_EQ(idx.Size(), size_before);
      uint64_t v;
      EXPECT_TRUE(idx.Lookup(k, &v).IsNotFound());
    }
    ASSERT_GT(failures, 0) << "the pool never filled";
    ASSERT_GT(m.size(), 1000u);
    env.ExpectCheck();
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(idx, m));
    env.ExpectAllocatedEqualsVisited();  // nothing leaked by the failed inserts

    // Deletes free space: after removing half the keys, new keys fit again.
    std::vector<std::string> keys;
    for (auto& [k, v] : m) keys.push_back(k);
    std::shuffle(keys.begin(), keys.end(), rng);
    for (size_t i = 0; i < keys.size() / 2; ++i) {
      ASSERT_TRUE(idx.Remove(keys[i]).ok());
      m.erase(keys[i]);
    }
    int ok = 0;
    for (int i = 0; i < 500; ++i) {
      const std::string k = bytes ? keys[i % (keys.size() / 2)] : key();
      if (idx.Insert(k, 1).ok()) {
        m[k] = 1;
        ++ok;
      }
    }
    EXPECT_GT(ok, 400);
    env.ExpectCheck();
    ASSERT_NO_FATAL_FAILURE(ExpectMatches(idx, m));
    env.ExpectAllocatedEqualsVisited();
  }
}

// ---- visit, values as blocks, concurrency -----------------------------------------------------------

TEST(Wort, ValuesAreBlocksAreReportedByVisit) {
  IndexOptions io;
  io.values_are_blocks = true;
  Env env(io);
  Model m;
  for (int i = 0; i < 300; ++i) {
    uint64_t off;
    ASSERT_TRUE(env.pool().allocator().Alloc(40, &off).ok());
    pm::persist(env.pool().at<char>(off), 40);
    const std::string k = "value-" + std::to_string(i);
    ASSERT_TRUE(env.idx().Insert(k, off).ok());
    m[k] = off;
  }
  env.ExpectAllocatedEqualsVisited();
  env.CrashReopen();
  env.ExpectAllocatedEqualsVisited();
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));
  env.ExpectCheck();
}

// Post-crash GC in the background runs the visit function beside writers.
TEST(Wort, BackgroundRecoveryBesideWriters) {
  IndexOptions io;
  io.key_type = KeyType::kU64;
  Env env(io);
  Model m;
  std::mt19937_64 rng(21);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t k = rng() % 100000;
    if (env.idx().Upsert(k, i).ok()) m[EncodeU64(k)] = i;
  }
  env.CrashReopen(/*background=*/true);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t k = rng() % 100000;
    if (rng() % 3 == 0) {
      Status s = env.idx().Remove(k);
      if (s.ok()) m.erase(EncodeU64(k));
    } else {
      ASSERT_TRUE(env.idx().Upsert(k, i).ok());
      m[EncodeU64(k)] = i;
    }
  }
  ASSERT_TRUE(env.pool().WaitForRecovery().ok());
  env.ExpectCheck();
  ASSERT_NO_FATAL_FAILURE(ExpectMatches(env.idx(), m));
  env.ExpectAllocatedEqualsVisited();
}

TEST(Wort, ReadersBesideAWriter) {
  IndexOptions io;
  io.key_type = KeyType::kU64;
  Env env(io);
  Index& idx = env.idx();
  for (uint64_t k = 0; k < 2000; k += 2) ASSERT_TRUE(idx.Insert(k, k).ok());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      while (!stop.load()) {
        const uint64_t k = (rng() % 1000) * 2;  // even keys are never removed
        uint64_t v = 0;
        if (!idx.Lookup(k, &v).ok() || v != k) bad.fetch_add(1);
        uint64_t prev = 0;
        bool first = true;
        Ignore(idx.Scan(U64Key(k).view(), nullptr, 20, [&](std::string_view key, uint64_t) {
          const uint64_t x = DecodeU64(key);
          if (!first && x <= prev) bad.fetch_add(1);
          first = false;
          prev = x;
          return true;
        }));
      }
    });
  }
  std::mt19937_64 rng(3);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t k = (rng() % 1000) * 2 + 1;  // odd keys come and go
    if (rng() % 2)
      Ignore(idx.Upsert(k, k));
    else
      Ignore(idx.Remove(k));
  }
  stop = true;
  for (auto& th : readers) th.join();
  EXPECT_EQ(bad.load(), 0u);
  env.ExpectCheck();
}

}  // namespace
}  // namespace wort
