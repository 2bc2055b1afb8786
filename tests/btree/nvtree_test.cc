// NVTree (nvtree): the shared hybrid B-tree tests (hybrid_test_util.h) plus the rebuild time.
#include "btree/hybrid_test_util.h"
#include "index/btree/nvtree.h"

namespace wort::test {
INSTANTIATE_TEST_SUITE_P(NvTree, HybridKinds, ::testing::Values("nvtree"));

TEST(NvTreeRebuild, RebuildTimeMeasuredAndEmptyLeavesUnlinked) {
  IndexFixture f("nvtree", KeyType::kU64);
  for (uint64_t k = 0; k < 20000; ++k) ASSERT_TRUE(f.idx().Insert(k * 3, k).ok());
  for (uint64_t k = 5000; k < 10000; ++k) ASSERT_TRUE(f.idx().Remove(k * 3).ok());  // empties leaves
  const uint64_t leaves_before = f.idx().Stats().leaves;
  f.ReopenIndex();
  EXPECT_GT(btree::nv::LastRebuildSeconds(f.idx()), 0.0);
  EXPECT_EQ(f.idx().Size(), 15000u);
  EXPECT_LT(f.idx().Stats().leaves, leaves_before);
  f.ExpectCheckOk("reopened");
}
}  // namespace wort::test
