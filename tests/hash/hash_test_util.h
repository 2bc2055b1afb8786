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
  PoolOptions o;
  o.initial_size = initial;
  o.max_size = max;
  o.background_recovery = false;
  return o;
}

// A pool under /dev/shm holding one index "idx" of `kind`.
class HashFixture {
 public:
  HashFixture(std::string kind, KeyType kt, PoolOptions po = TestPoolOpts(), bool values_are_blocks = false)
      : kind_(std::move(kind)), path_("hash-" + kind_), po_(po) {
    Status s = Pool::Create(path_.str(), po_, &pool_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    IndexOptions io;
    io.key_type = kt;
    io.values_are_blocks = values_are_blocks;
    s = CreateIndex(*pool_, "idx", kind_, io, &idx_);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  ~HashFixture() {
    idx_.reset();
    if (pool_) (void)pool_->Close();
  }
  Index& idx() { return *idx_; }
  Pool& pool() { return *pool_; }
  const std::string& path() const { return path_.str(); }

  void Reopen() {
    idx_.reset();
    ASSERT_TRUE(pool_->Close().ok());
    pool_.reset();
    Status s = Pool::Open(path_.str(), po_, &pool_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = OpenIndex(*pool_, "idx", &idx_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  // Simulates a crash: copies the pool file while open (everything written is in the file,
  // /dev/shm), drops the live pool without closing it cleanly, then opens the copy.
  // With `background`, the post-crash GC runs on its own thread while the caller goes on.
  void CrashAndReopen(bool background = false) {
    idx_.reset();
    const std::string copy = path_.str() + ".crash";
    ::wort::test::CopyFile(path_.str(), copy);
    ASSERT_TRUE(pool_->Close().ok());
    pool_.reset();
    std::filesystem::rename(copy, path_.str());
    PoolOptions po = po_;
    po.background_recovery = background;
    Status s = Pool::Open(path_.str(), po, &pool_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_FALSE(pool_->opened_clean());
    if (!background) {
      ASSERT_TRUE(pool_->WaitForRecovery().ok());
    }
    s = OpenIndex(*pool_, "idx", &idx_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void ExpectCheckOk(const std::string& phase) {
    std::string report;
    Status s = idx_->Check(&report);
    EXPECT_TRUE(s.ok()) << kind_ << " " << phase << ": " << s.ToString() << "\n" << report;
    std::string rr;
    s = crash::CheckReachability(*pool_, &rr);
    EXPECT_TRUE(s.ok()) << kind_ << " " << phase << ": reachability: " << s.ToString() << "\n" << rr;
  }

 private:
  std::string kind_;
  ::wort::test::TempPath path_;
  PoolOptions po_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Index> idx_;
};

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
