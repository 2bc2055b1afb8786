// Tests every hash kind (cceh, cceh-cow, linp, cuck, bch, levl, path - whichever are built)
// against std::unordered_map: 8-byte keys dense and sparse, byte-string keys over the full byte
// range, reopen (clean and after a simulated crash) in the middle, Check() and the allocator's
// reachability contract after every phase, PoolFull with a tiny pool. (NotSupported scans and
// bad keys: the conformance suite, tests/conformance.)
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "hash/hash_test_util.h"
#include "index/kind_ids.h"

namespace wort::hash::test {
namespace {

std::vector<std::string> HashKinds() {
  std::vector<std::string> v;
  for (const IndexKind* k : IndexKinds())
    if (k->type_id >= kind_id::kCceh && k->type_id <= kind_id::kCceh + 9) v.push_back(k->name);
  return v;
}

class HashKindTest : public ::testing::TestWithParam<std::string> {};

// Runs `ops` random operations on idx and model; keys drawn from `keys`.
void RandomOps(Index& idx, std::unordered_map<std::string, uint64_t>& model, const std::vector<std::string>& keys,
               size_t ops, std::mt19937_64& rng, const std::string& what) {
  for (size_t i = 0; i < ops; ++i) {
    const std::string& k = keys[rng() % keys.size()];
    const uint64_t v = rng();
    const unsigned op = rng() % 10;
    auto it = model.find(k);
    if (op < 4) {
      Status s = idx.Insert(k, v);
      if (it == model.end()) {
        ASSERT_TRUE(s.ok()) << what << " insert #" << i << ": " << s.ToString();
        model[k] = v;
      } else {
        ASSERT_TRUE(s.IsAlreadyExists()) << what << " insert of present key #" << i << ": " << s.ToString();
      }
    } else if (op < 6) {
      bool inserted = false;
      Status s = idx.Upsert(k, v, &inserted);
      ASSERT_TRUE(s.ok()) << what << " upsert #" << i << ": " << s.ToString();
      ASSERT_EQ(inserted, it == model.end()) << what << " upsert #" << i;
      model[k] = v;
    } else if (op < 8) {
      uint64_t got = 0;
      Status s = idx.Lookup(k, &got);
      if (it == model.end()) {
        ASSERT_TRUE(s.IsNotFound()) << what << " lookup of absent key #" << i << ": " << s.ToString();
      } else {
        ASSERT_TRUE(s.ok()) << what << " lookup #" << i << ": " << s.ToString();
        ASSERT_EQ(got, it->second) << what << " lookup #" << i;
      }
    } else {
      Status s = idx.Remove(k);
      if (it == model.end()) {
        ASSERT_TRUE(s.IsNotFound()) << what << " remove of absent key #" << i << ": " << s.ToString();
      } else {
        ASSERT_TRUE(s.ok()) << what << " remove #" << i << ": " << s.ToString();
        model.erase(it);
      }
    }
  }
}

void ExpectContents(const Index& idx, const std::unordered_map<std::string, uint64_t>& model,
                    const std::vector<std::string>& keys, const std::string& what) {
  EXPECT_EQ(idx.Size(), model.size()) << what;
  size_t bad = 0;
  for (const auto& k : keys) {
    uint64_t v = 0;
    Status s = idx.Lookup(k, &v);
    auto it = model.find(k);
    if (it == model.end()) {
      if (!s.IsNotFound() && bad++ < 5) ADD_FAILURE() << what << ": absent key found: " << s.ToString();
    } else if (!s.ok() || v != it->second) {
      if (bad++ < 5) ADD_FAILURE() << what << ": key lost or wrong value: " << s.ToString();
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

void Differential(const std::string& kind, KeyType kt, const std::vector<std::string>& keys, size_t ops,
                  uint64_t seed) {
  HashFixture f(kind, kt);
  std::unordered_map<std::string, uint64_t> model;
  std::mt19937_64 rng(seed);
  // Phase 1: mostly inserts (grows the table through splits / rehashes).
  for (const auto& k : keys)
    if (rng() % 4 != 0) {
      ASSERT_TRUE(f.idx().Insert(k, rng() | 1).ok());
      model[k] = 0;
    }
  for (const auto& k : keys) {
    auto it = model.find(k);
    if (it != model.end()) {
      it->second = rng();
      ASSERT_TRUE(f.idx().Upsert(k, it->second).ok());
    }
  }
  ExpectContents(f.idx(), model, keys, kind + " phase 1");
  const HashCounters c = GetHashCounters(f.idx());
  EXPECT_GT(c.splits + c.rehashes, 0u) << kind << ": the table never grew";
  f.ExpectCheckOk("phase 1");
  RandomOps(f.idx(), model, keys, ops, rng, kind + " phase 2");
  ExpectContents(f.idx(), model, keys, kind + " phase 2");
  f.ExpectCheckOk("phase 2");
  f.Reopen();
  ExpectContents(f.idx(), model, keys, kind + " after reopen");
  f.ExpectCheckOk("after reopen");
  RandomOps(f.idx(), model, keys, ops, rng, kind + " phase 3");
  f.ExpectCheckOk("phase 3");
  f.CrashAndReopen();
  ExpectContents(f.idx(), model, keys, kind + " after crash");
  f.ExpectCheckOk("after crash");
  RandomOps(f.idx(), model, keys, ops, rng, kind + " phase 4");
  // Remove everything: the table must end empty and leak nothing.
  for (auto it = model.begin(); it != model.end();) {
    ASSERT_TRUE(f.idx().Remove(it->first).ok());
    it = model.erase(it);
  }
  ExpectContents(f.idx(), model, keys, kind + " emptied");
  f.ExpectCheckOk("emptied");
}

TEST_P(HashKindTest, DenseU64) {
  std::vector<std::string> keys;
  for (uint64_t i = 0; i < 6000; ++i) keys.push_back(U64(i));
  Differential(GetParam(), KeyType::kU64, keys, 12000, 1);
}

TEST_P(HashKindTest, SparseU64) {
  std::mt19937_64 rng(7);
  std::set<uint64_t> s = {0, 1, ~0ull, 1ull << 63, (1ull << 63) - 1};
  while (s.size() < 6000) s.insert(rng());
  std::vector<std::string> keys;
  for (uint64_t k : s) keys.push_back(U64(k));
  Differential(GetParam(), KeyType::kU64, keys, 12000, 2);
}

// MixU64 is a bijection and UnmixU64 its inverse (the crash plans choose keys by their word).
TEST(HashCodec, UnmixInvertsMix) {
  SplitMix64 r(99);
  for (int i = 0; i < 10000; ++i) {
    const uint64_t w = i < 4 ? uint64_t(i) : r.Next(), seed = r.Next();
    EXPECT_EQ(MixU64(UnmixU64(w, seed), seed), w);
    EXPECT_EQ(UnmixU64(MixU64(w, seed), seed), w);
  }
  EXPECT_EQ(UnmixU64(0, 12345), 0ull - 12345);
}

// The one key whose mixed value is 0 lives in the root's zero slot.
TEST_P(HashKindTest, ZeroSlotKey) {
  ScopedEnv seed("WORT_HASH_SEED", "12345");
  std::vector<std::string> keys = {U64(0ull - 12345), U64(0), U64(12345)};
  for (uint64_t i = 0; i < 3000; ++i) keys.push_back(U64(i * 7919 + 1));
  HashFixture f(GetParam(), KeyType::kU64);
  EXPECT_EQ(MixU64(0ull - 12345, 12345), 0u);
  ASSERT_TRUE(f.idx().Insert(U64(0ull - 12345), 5).ok());
  EXPECT_TRUE(f.idx().Insert(U64(0ull - 12345), 6).IsAlreadyExists());
  uint64_t v = 0;
  ASSERT_TRUE(f.idx().Lookup(U64(0ull - 12345), &v).ok());
  EXPECT_EQ(v, 5u);
  EXPECT_EQ(f.idx().Size(), 1u);
  std::unordered_map<std::string, uint64_t> model = {{U64(0ull - 12345), 5}};
  std::mt19937_64 rng(3);
  RandomOps(f.idx(), model, keys, 8000, rng, "zero slot");
  f.ExpectCheckOk("zero slot");
  f.Reopen();
  ExpectContents(f.idx(), model, keys, "zero slot reopen");
}

TEST_P(HashKindTest, ByteKeys) {
  Differential(GetParam(), KeyType::kBytes, EdgeKeys(11, 5000), 8000, 3);
}

// values_are_blocks: visit reports every value; after a crash the value blocks survive GC.
TEST_P(HashKindTest, ValuesAreBlocks) {
  HashFixture f(GetParam(), KeyType::kBytes, TestPoolOpts(), /*values_are_blocks=*/true);
  std::unordered_map<std::string, uint64_t> model;
  auto keys = EdgeKeys(5, 1500);
  for (size_t i = 0; i < keys.size(); ++i) {
    uint64_t b = 0;
    ASSERT_TRUE(f.pool().allocator().Alloc(64, &b).ok());
    *f.pool().at<uint64_t>(b) = i;
    pm::persist(f.pool().at<uint64_t>(b), 8);
    ASSERT_TRUE(f.idx().Insert(keys[i], b).ok());
    model[keys[i]] = b;
  }
  // Replace some values and remove some keys; the caller frees the old blocks.
  for (size_t i = 0; i < keys.size(); i += 3) {
    uint64_t b = 0;
    ASSERT_TRUE(f.pool().allocator().Alloc(64, &b).ok());
    ASSERT_TRUE(f.idx().Upsert(keys[i], b).ok());
    f.pool().allocator().Free(model[keys[i]]);
    model[keys[i]] = b;
  }
  for (size_t i = 1; i < keys.size(); i += 5) {
    ASSERT_TRUE(f.idx().Remove(keys[i]).ok());
    f.pool().allocator().Free(model[keys[i]]);
    model.erase(keys[i]);
  }
  f.ExpectCheckOk("values are blocks");
  f.CrashAndReopen();
  f.ExpectCheckOk("values are blocks after crash");
  ExpectContents(f.idx(), model, keys, "values are blocks after crash");
}

// A pool too small for the table: PoolFull propagates; the table keeps every acknowledged key
// and leaks nothing.
TEST_P(HashKindTest, PoolFull) {
  HashFixture f(GetParam(), KeyType::kBytes, TestPoolOpts(8ull << 20, 4ull << 20));
  std::unordered_map<std::string, uint64_t> model;
  std::vector<std::string> keys;
  Status s;
  for (uint64_t i = 0; i < 2000000 && s.ok(); ++i) {
    std::string k = "key-" + std::to_string(i) + std::string(i % 3 == 0 ? 40 : 0, 'x');
    s = f.idx().Insert(k, i);
    if (s.ok()) model[k] = i;
    keys.push_back(std::move(k));
  }
  ASSERT_TRUE(s.IsPoolFull()) << s.ToString();
  f.ExpectCheckOk("pool full");
  ExpectContents(f.idx(), model, keys, "pool full");
  // Removes still work in a full pool, and the table stays consistent.
  size_t n = 0;
  for (auto it = model.begin(); it != model.end() && n < 1000; ++n) {
    ASSERT_TRUE(f.idx().Remove(it->first).ok());
    it = model.erase(it);
  }
  f.ExpectCheckOk("pool full, after removes");
  ExpectContents(f.idx(), model, keys, "pool full, after removes");
}

INSTANTIATE_TEST_SUITE_P(Kinds, HashKindTest, ::testing::ValuesIn(HashKinds()),
                         ::wort::test::KindParamName);

}  // namespace
}  // namespace wort::hash::test
