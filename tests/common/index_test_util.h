// Helpers for tests that drive indexes through the public API (tests/btree, tests/hash, ...):
// pool options for small test pools, a gtest parameter name for a kind, the reachability check,
// and IndexFixture, a pool under /dev/shm holding one index that can be reopened cleanly or after
// a simulated crash.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "crash/oracle.h"
#include "sync/epoch.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort::test {

// A pool that starts small and grows up to `max`; recovery in the foreground (tests that want
// the instant-restart path set background_recovery themselves).
inline PoolOptions SmallPoolOptions(uint64_t max = 256ull << 20, uint64_t initial = 4ull << 20) {
  PoolOptions o;
  o.initial_size = initial;
  o.max_size = max;
  o.background_recovery = false;
  return o;
}

// The gtest name of a test parameterised by an index kind: "wbtree-slot" -> "wbtree_slot".
inline std::string KindParamName(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

// The reachability contract (wort/alloc.h): the allocated blocks are exactly the blocks the
// roots' visit functions report (no leak, nothing reachable is free).
inline void ExpectReachable(const Pool& pool, const std::string& phase) {
  // Blocks retired by writers while lock-free readers were inside an epoch are freed later;
  // callers run no operation now, so hand them back first (src/sync/epoch.h, Drain).
  pool.allocator().epoch().Drain();
  std::string report;
  Status s = crash::CheckReachability(pool, &report);
  EXPECT_TRUE(s.ok()) << phase << ": reachability: " << s.ToString() << "\n" << report;
}

// The pairs a scan reports, in order (the scan must succeed).
inline std::vector<std::pair<std::string, uint64_t>> ScanAll(const Index& idx, std::string_view start,
                                                            const std::string_view* end, size_t limit) {
  std::vector<std::pair<std::string, uint64_t>> out;
  Status s = idx.Scan(start, end, limit, [&](std::string_view k, uint64_t v) {
    out.emplace_back(std::string(k), v);
    return true;
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// What that scan must report, from a std::map model (std::map orders std::string as unsigned
// bytes, the order of CompareKeys).
template <class Map>
std::vector<std::pair<std::string, uint64_t>> ModelScan(const Map& m, std::string_view start,
                                                       const std::string_view* end, size_t limit) {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (auto it = m.lower_bound(std::string(start)); it != m.end() && out.size() < limit; ++it) {
    if (end && CompareKeys(it->first, *end) > 0) break;
    out.emplace_back(it->first, it->second);
  }
  return out;
}

// A pool under /dev/shm holding one index (root kRoot) of `kind`.
class IndexFixture {
 public:
  static constexpr const char* kRoot = "idx";

  IndexFixture(std::string kind, KeyType kt, PoolOptions po = SmallPoolOptions(), bool values_are_blocks = false)
      : kind_(std::move(kind)), path_("idx-" + kind_), po_(po) {
    Status s = Pool::Create(path_.str(), po_, &pool_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return;
    IndexOptions io;
    io.key_type = kt;
    io.values_are_blocks = values_are_blocks;
    s = CreateIndex(*pool_, kRoot, kind_, io, &idx_);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  ~IndexFixture() {
    idx_.reset();
    if (pool_) (void)pool_->Close();
  }
  IndexFixture(const IndexFixture&) = delete;
  IndexFixture& operator=(const IndexFixture&) = delete;

  Index& idx() { return *idx_; }
  Pool& pool() { return *pool_; }
  const std::string& kind() const { return kind_; }
  const std::string& path() const { return path_.str(); }
  const PoolOptions& pool_options() const { return po_; }

  // Closes the pool cleanly and opens it again.
  void Reopen() {
    idx_.reset();
    ASSERT_TRUE(pool_->Close().ok());
    pool_.reset();
    Status s = Pool::Open(path_.str(), po_, &pool_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = OpenIndex(*pool_, kRoot, &idx_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(idx_->kind(), kind_);
  }
  // Drops the Index object and opens the index again on the same (open) pool: the index's own
  // open path (DRAM rebuilds, recovery) without the pool's.
  void ReopenIndex() {
    idx_.reset();
    Status s = OpenIndex(*pool_, kRoot, &idx_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  // Simulates a crash: copies the pool file while open (everything written is in the file,
  // /dev/shm), drops the live pool, then opens the copy (not closed cleanly). With
  // `background`, the post-crash GC runs on its own thread while the caller goes on.
  void CrashAndReopen(bool background = false) {
    idx_.reset();
    const std::string copy = path_.str() + ".crash";
    CopyFile(path_.str(), copy);
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
    s = OpenIndex(*pool_, kRoot, &idx_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // The index's Check() and the pool's reachability contract.
  void ExpectCheckOk(const std::string& phase) {
    std::string report;
    Status s = idx_->Check(&report);
    EXPECT_TRUE(s.ok()) << kind_ << " " << phase << ": " << s.ToString() << "\n" << report;
    ExpectReachable(*pool_, kind_ + " " + phase);
  }

 private:
  std::string kind_;
  TempPath path_;
  PoolOptions po_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Index> idx_;
};

// The whole pool's memory at each fence while `on` (install with pm::SetHook): the crash images
// a test opens one by one (tests/btree/btree_readonly_test.cc, btree_open_test.cc).
class FenceImages : public pm::Hook {
 public:
  explicit FenceImages(const Pool* p) : pool_(p) {}
  void OnFlushLine(const void*, const std::source_location&) override {}
  void OnFence(const std::source_location&) override {
    if (on) images.emplace_back(pool_->base(), pool_->size());
  }
  bool on = false;
  std::vector<std::string> images;

 private:
  const Pool* pool_;
};

}  // namespace wort::test
