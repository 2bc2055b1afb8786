// Helpers shared by the hash-table tests (tests/hash/*_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/index_test_util.h"
#include "common/test_util.h"
#include "crash/oracle.h"
#include "index/hash/hash_common.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pool.h"

namespace wort::hash::test {

// Sets environment knobs for the lifetime of the object (read by the kinds' create).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    if (old) old_ = old, had_ = true;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

inline PoolOptions TestPoolOpts(uint64_t max = 1ull << 30, uint64_t initial = 4ull << 20) {
  return ::wort::test::SmallPoolOptions(max, initial);
}

// A pool under /dev/shm holding one index "idx" of `kind` (test::IndexFixture, with a 1 GiB pool
// limit by default).
class HashFixture : public ::wort::test::IndexFixture {
 public:
  HashFixture(std::string kind, KeyType kt, PoolOptions po = TestPoolOpts(), bool values_are_blocks = false)
      : IndexFixture(std::move(kind), kt, po, values_are_blocks) {}
};

// Instant restart: `preload` byte-string keys, then `rounds` times a crash, reopened with the
// post-crash GC in the background while `per_round` new keys are inserted and old ones removed;
// after each round Check, reachability, Size and every lookup agree with a model.
inline void RunWritesBesideGc(const std::string& kind, int preload, int per_round, int rounds) {
  HashFixture f(kind, KeyType::kBytes);
  auto old_key = [](int i) { return "gc-key-" + std::to_string(i) + (i % 2 ? "-long-tail" : ""); };
  std::unordered_map<std::string, uint64_t> model;
  for (int i = 0; i < preload; ++i) {
    ASSERT_TRUE(f.idx().Insert(old_key(i), i).ok());
    model[old_key(i)] = i;
  }
  for (int round = 0; round < rounds; ++round) {
    f.CrashAndReopen(/*background=*/true);
    for (int i = 0; i < per_round; ++i) {
      std::string k = "gc-new-" + std::to_string(round) + "-" + std::to_string(i) + (i % 3 ? "-tail-tail" : "");
      ASSERT_TRUE(f.idx().Insert(k, i).ok());
      model[k] = i;
      const std::string old = old_key(i * rounds + round);
      if (model.erase(old)) { ASSERT_TRUE(f.idx().Remove(old).ok()); }
    }
    ASSERT_TRUE(f.pool().WaitForRecovery().ok());
    f.ExpectCheckOk("round " + std::to_string(round));
    EXPECT_EQ(f.idx().Size(), model.size());
    size_t bad = 0;
    for (auto& [k, v] : model) {
      uint64_t got = 0;
      if (!f.idx().Lookup(k, &got).ok() || got != v) ++bad;
    }
    EXPECT_EQ(bad, 0u);
  }
}

// Byte-string keys that exercise the encoding: the empty key, 0x00 and >= 0x80 bytes, keys of
// 1..7 bytes (inline), keys sharing their first 8 bytes, keys that are prefixes of each other,
// long keys up to kMaxKeyLen.
inline std::vector<std::string> EdgeKeys(uint64_t seed, size_t random_count) {
  std::set<std::string> s;
  s.insert("");
  s.insert(std::string(1, '\0'));
  s.insert(std::string(2, '\0'));
  s.insert(std::string(7, '\0'));
  s.insert(std::string(8, '\0'));
  s.insert(std::string(9, '\0'));
  s.insert(std::string(1, '\xff'));
  s.insert(std::string(7, '\xff'));
  s.insert(std::string(8, '\xff'));
  s.insert(std::string(kMaxKeyLen, '\x80'));
  s.insert(std::string(kMaxKeyLen - 1, '\x80'));
  const std::string base = "prefix\x00\x81key-with-a-long-tail";
  for (size_t n = 0; n <= base.size(); ++n) s.insert(base.substr(0, n));
  for (int i = 0; i < 64; ++i) s.insert(std::string("\x00\x01\x02\x03\x04\x05\x06\x07", 8) + std::to_string(i));
  std::mt19937_64 rng(seed);
  while (s.size() < random_count) {
    const size_t len = rng() % 4 == 0 ? rng() % 600 : rng() % 24;
    std::string k(len, '\0');
    for (auto& c : k) c = static_cast<char>(rng());
    s.insert(k);
  }
  std::vector<std::string> v(s.begin(), s.end());
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

inline std::string U64(uint64_t k) { return EncodeU64(k); }

}  // namespace wort::hash::test
