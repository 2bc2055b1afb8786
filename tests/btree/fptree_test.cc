// FPTree (fptree): the shared hybrid B-tree tests (hybrid_test_util.h) plus the split log.
#include "btree/hybrid_test_util.h"
#include "index/btree/fptree.h"

namespace wort::test {
INSTANTIATE_TEST_SUITE_P(FpTree, HybridKinds, ::testing::Values("fptree"));

TEST(FpTreeRebuild, RebuildTimeMeasured) {
  IndexFixture f("fptree", KeyType::kU64);
  for (uint64_t k = 0; k < 20000; ++k) ASSERT_TRUE(f.idx().Insert(k * 3, k).ok());
  f.ReopenIndex();
  EXPECT_GT(btree::fp::LastRebuildSeconds(f.idx()), 0.0);
  EXPECT_EQ(f.idx().Size(), 20000u);
}
}  // namespace wort::test
