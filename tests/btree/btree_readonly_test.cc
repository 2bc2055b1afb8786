// Crash states read without recovery. The crash explorer opens every image writable, so
// recovery repairs it before anything reads it; this test opens images read-only instead (no
// recovery, no repair), so that the B-trees' readers must interpret the transient states
// themselves: FAST&FAIR's shifted duplicates and half-done splits and merges, B3-tree's logical
// pages, wB+Tree's invalid slot arrays and unapplied logs. An image is the whole pool memory at
// a fence inside an operation (every store so far, as after a process kill at that point).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/index_test_util.h"
#include "common/test_util.h"
#include "wort/index.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort {
namespace {

using test::FenceImages;
using test::TempPath;
using Model = std::map<std::string, uint64_t>;

Status ReadAll(const Index& idx, Model* out) {
  out->clear();
  return idx.Scan("", nullptr, SIZE_MAX, [&](std::string_view k, uint64_t v) {
    (*out)[std::string(k)] = v;
    return true;
  });
}

void CheckImage(const std::string& image, const Model& before, const Model& after, const std::string& what) {
  TempPath f("btree-ro");
  {
    std::ofstream o(f.str(), std::ios::binary);
    o.write(image.data(), static_cast<std::streamsize>(image.size()));
  }
  PoolOptions po;
  po.read_only = true;
  std::unique_ptr<Pool> pool;
  Status s = Pool::Open(f, po, &pool);
  ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
  std::unique_ptr<Index> idx;
  s = OpenIndex(*pool, "t", &idx);
  ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
  std::string rep;
  s = idx->Check(&rep);
  ASSERT_TRUE(s.ok()) << what << ": " << s.ToString() << "\n" << rep;
  Model got;
  ASSERT_TRUE(ReadAll(*idx, &got).ok());
  const bool is_before = got == before, is_after = got == after;
  ASSERT_TRUE(is_before || is_after) << what << ": scan matches neither state (" << got.size() << " keys; before "
                                     << before.size() << ", after " << after.size() << ")";
  const Model& want = is_before ? before : after;
  ASSERT_EQ(idx->Size(), want.size()) << what;
  // Every key of either state answers as the matched state says.
  for (const Model* m : {&before, &after})
    for (const auto& [k, v] : *m) {
      uint64_t x = 0;
      Status ls = idx->Lookup(k, &x);
      auto it = want.find(k);
      if (it == want.end()) {
        ASSERT_TRUE(ls.IsNotFound()) << what;
      } else {
        ASSERT_TRUE(ls.ok()) << what << ": " << ls.ToString();
        ASSERT_EQ(x, it->second) << what;
      }
    }
  idx.reset();
  EXPECT_TRUE(pool->Close().ok());
}

class ReadOnlyCrashTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_NE(FindIndexKind(GetParam()), nullptr) << GetParam() << " is a built-in kind";
  }
};

void RunReadOnly(const std::string& kind, KeyType kt, int setup, int ops, int per_op, uint64_t seed) {
  TempPath path("btree-ro-src");
  PoolOptions po;
  po.initial_size = 4ull << 20;
  po.max_size = 64ull << 20;
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, po, &pool).ok());
  IndexOptions io;
  io.key_type = kt;
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(CreateIndex(*pool, "t", kind, io, &idx).ok());
  std::mt19937_64 rng(seed);
  auto key = [&](uint64_t r) {
    if (kt == KeyType::kU64) return EncodeU64(r);
    char buf[16];
    std::snprintf(buf, sizeof buf, "k%07llu", static_cast<unsigned long long>(r % 10000000));
    std::string k(buf);
    if (r & 1) k.push_back(static_cast<char>(0x80 + (r >> 8) % 128));
    return k;
  };
  Model m;
  for (int i = 0; i < setup; ++i) {
    std::string k = key(rng());
    if (idx->Insert(k, i).ok()) m[k] = i;
  }
  FenceImages snaps(pool.get());
  int structural_ops = 0;
  const uint64_t region = kt == KeyType::kU64 ? rng() : 50000 + 2 * (rng() % 1000);
  uint64_t next_in_region = 0;
  std::string pivot = std::next(m.begin(), m.size() / 3)->first;
  pm::Hook* prev = pm::SetHook(&snaps);
  for (int op = 0; op < ops; ++op) {
    // Long runs of inserts, then of deletes: splits, then merges and redistributions.
    const bool del = (op / 12) % 2 == 1 && !m.empty();
    const Model before = m;
    const IndexStats st0 = idx->Stats();
    snaps.images.clear();
    snaps.on = true;
    // Concentrated: consecutive deletes from a pivot empty neighbouring nodes (merges,
    // redistributions); ascending inserts into one region fill one node after another (splits).
    if (del) {
      auto it = m.lower_bound(pivot);
      if (it == m.end()) it = m.begin();
      ASSERT_TRUE(idx->Remove(it->first).ok());
      m.erase(it);
    } else {
      std::string k = key(region + 2 * next_in_region++);
      bool ins = false;
      ASSERT_TRUE(idx->Upsert(k, op + 1000, &ins).ok());
      m[k] = op + 1000;
    }
    snaps.on = false;
    // A seeded sample of the images of this operation.
    std::vector<std::string> imgs;
    imgs.swap(snaps.images);
    pm::SetHook(prev);
    // Structural operations (splits, merges, redistributions) change the node counts or take
    // many fences: they get more images.
    const IndexStats st1 = idx->Stats();
    const bool structural = st1.leaves != st0.leaves || st1.inner_nodes != st0.inner_nodes || imgs.size() > 9;
    structural_ops += structural;
    for (int s = 0; s < (structural ? 2 * per_op : 1) && !imgs.empty(); ++s) {
      const size_t at = s == 0 ? imgs.size() / 2 : rng() % imgs.size();
      CheckImage(imgs[at], before, m, kind + " op " + std::to_string(op) + " image " + std::to_string(at) + "/" + std::to_string(imgs.size()));
      if (::testing::Test::HasFatalFailure()) return;
    }
    pm::SetHook(&snaps);
  }
  pm::SetHook(prev);
  EXPECT_GE(structural_ops, 3) << "too few splits/merges sampled";
}

// wbtree's 56-entry nodes split and merge less often: a longer run.
int Ops(const std::string& kind, int n) { return kind == "wbtree" ? 3 * n : n; }
TEST_P(ReadOnlyCrashTest, U64) { RunReadOnly(GetParam(), KeyType::kU64, 400, Ops(GetParam(), 96), 3, 1); }
TEST_P(ReadOnlyCrashTest, Bytes) { RunReadOnly(GetParam(), KeyType::kBytes, 300, Ops(GetParam(), 72), 3, 2); }

INSTANTIATE_TEST_SUITE_P(Kinds, ReadOnlyCrashTest, ::testing::Values("fastfair", "b3tree", "wbtree", "wbtree-slot"),
                         test::KindParamName);

}  // namespace
}  // namespace wort
