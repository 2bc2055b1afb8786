// NVTree (nvtree): the shared hybrid B-tree tests (hybrid_test_util.h) plus the rebuild time.
#include "btree/hybrid_test_util.h"
#include "index/btree/nvtree.h"

namespace wort::test {
INSTANTIATE_TEST_SUITE_P(NvTree, HybridKinds, ::testing::Values("nvtree"));

TEST(NvTreeRebuild, RebuildTimeMeasuredAndEmptyLeavesUnlinked) {
  TempPath path("nvrb");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, HybridPool(), &pool).ok());
  IndexOptions o;
  o.key_type = KeyType::kU64;
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(CreateIndex(*pool, "t", "nvtree", o, &idx).ok());
  for (uint64_t k = 0; k < 20000; ++k) ASSERT_TRUE(idx->Insert(k * 3, k).ok());
  for (uint64_t k = 5000; k < 10000; ++k) ASSERT_TRUE(idx->Remove(k * 3).ok());  // empties leaves
  const uint64_t leaves_before = idx->Stats().leaves;
  idx.reset();
  ASSERT_TRUE(OpenIndex(*pool, "t", &idx).ok());
  EXPECT_GT(btree::nv::LastRebuildSeconds(*idx), 0.0);
  EXPECT_EQ(idx->Size(), 15000u);
  EXPECT_LT(idx->Stats().leaves, leaves_before);
  std::string rep;
  EXPECT_TRUE(idx->Check(&rep).ok()) << rep;
  ExpectReachability(*pool, "nvtree");
}
TEST(NvtreeRebuild, Measure) { MeasureRebuild("nvtree", &btree::nv::LastRebuildSeconds); }
}  // namespace wort::test
