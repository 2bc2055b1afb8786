// Regression: with IndexOptions::values_are_blocks, every kind's visit function must report the
// value blocks, or post-crash recovery frees them under the index (found by the server's kill
// test on woart/artcow). Checked for every registered persistent kind on a crash image.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "workload/workload.h"
#include "common/test_util.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort {
namespace {

bool IsPersistentKind(const IndexKind* k) {
  return k->type_id < 30 || (k->type_id >= 40 && k->type_id < 1000);  // 30..39: volatile references
}

TEST(Regress, ValuesAreBlocksSurviveCrashRecoveryInEveryKind) {
  int kinds = 0;
  for (const IndexKind* kind : IndexKinds()) {
    if (!IsPersistentKind(kind)) continue;
    ++kinds;
    SCOPED_TRACE(kind->name);
    test::TempPath path("vab"), image("vab-img");
    PoolOptions po;
    po.initial_size = 8 << 20;
    po.max_size = 256 << 20;
    po.background_recovery = false;
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(path, po, &pool).ok());
    IndexOptions io;
    io.key_type = KeyType::kBytes;
    io.values_are_blocks = true;
    std::unique_ptr<Index> idx;
    ASSERT_TRUE(CreateIndex(*pool, "kv", kind->name, io, &idx).ok());
    const auto keys = bench::GenerateKeys(bench::Dist::kStrings, 2000, 9);
    std::map<std::string, std::string> model;
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::string val = "value-" + std::to_string(i) + std::string(i % 300, 'x');
      uint64_t off;
      ASSERT_TRUE(pool->allocator().Alloc(val.size() + 8, &off).ok());
      const uint64_t n = val.size();
      std::memcpy(pool->at<char>(off), &n, 8);
      std::memcpy(pool->at<char>(off + 8), val.data(), val.size());
      pm::persist(pool->at<char>(off), val.size() + 8);
      ASSERT_TRUE(idx->Insert(keys[i], off).ok());
      model[keys[i]] = val;
    }
    // A crash image: the file as it is while the index is open (clean flag 0).
    test::CopyFile(path, image);
    std::unique_ptr<Pool> q;
    ASSERT_TRUE(Pool::Open(image, po, &q).ok());
    ASSERT_FALSE(q->opened_clean());
    ASSERT_TRUE(q->WaitForRecovery().ok());
    std::unique_ptr<Index> r;
    ASSERT_TRUE(OpenIndex(*q, "kv", &r).ok());
    // Every value block is still allocated: allocating more never returns one of them.
    std::set<uint64_t> value_blocks;
    for (const auto& [k, val] : model) {
      uint64_t off;
      ASSERT_TRUE(r->Lookup(k, &off).ok());
      value_blocks.insert(off);
    }
    for (int i = 0; i < 3000; ++i) {
      uint64_t off;
      ASSERT_TRUE(q->allocator().Alloc(8 + (i % 300) + 7, &off).ok());
      ASSERT_FALSE(value_blocks.count(off)) << "a live value block was handed out again";
      std::memset(q->at<char>(off), 0xEE, 8 + (i % 300) + 7);
    }
    for (const auto& [k, val] : model) {
      uint64_t off;
      ASSERT_TRUE(r->Lookup(k, &off).ok());
      uint64_t n;
      std::memcpy(&n, q->at<char>(off), 8);
      ASSERT_EQ(n, val.size());
      ASSERT_EQ(std::string(q->at<char>(off + 8), n), val);
    }
    std::string rep;
    EXPECT_TRUE(r->Check(&rep).ok()) << rep;
  }
  EXPECT_GE(kinds, 3) << "the radix trees at least must be registered";
}

}  // namespace
}  // namespace wort
