// FPTree (fptree): the shared hybrid B-tree tests (hybrid_test_util.h) plus the split log.
#include "btree/hybrid_test_util.h"
#include "index/btree/fptree.h"

namespace wort::test {
INSTANTIATE_TEST_SUITE_P(FpTree, HybridKinds, ::testing::Values("fptree"));

TEST(FpTreeRebuild, RebuildTimeMeasured) {
  TempPath path("fprb");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, HybridPool(), &pool).ok());
  IndexOptions o;
  o.key_type = KeyType::kU64;
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(CreateIndex(*pool, "t", "fptree", o, &idx).ok());
  for (uint64_t k = 0; k < 20000; ++k) ASSERT_TRUE(idx->Insert(k * 3, k).ok());
  idx.reset();
  ASSERT_TRUE(OpenIndex(*pool, "t", &idx).ok());
  EXPECT_GT(btree::fp::LastRebuildSeconds(*idx), 0.0);
  EXPECT_EQ(idx->Size(), 20000u);
}
TEST(FptreeRebuild, Measure) { MeasureRebuild("fptree", &btree::fp::LastRebuildSeconds); }
}  // namespace wort::test
