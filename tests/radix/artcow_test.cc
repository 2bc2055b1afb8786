// ART+CoW tests: the shared ART tests (art_test_common.h) plus ART+CoW specifics.
#include <thread>

#include "radix/art_test_common.h"

namespace wort::art::test {

INSTANTIATE_TEST_SUITE_P(ArtCow, ArtKindTest, ::testing::Values("artcow"));
INSTANTIATE_TEST_SUITE_P(ArtCow, ArtTreeTest, ::testing::Values("artcow"));

// Only copy-on-write small nodes: no WOART node type appears, and no header is ever repaired.
TEST(ArtCow, UsesSortedNodesAndNeverRepairs) {
  PoolFixture f("artcow");
  Model m;
  ByteKeyGen gen(17);
  std::mt19937_64 rng(17);
  RandomOps(f.idx(), m, rng, 5000, [&]() { return gen.Next(m); });
  uint64_t counts[8];
  f.tree().CountNodeTypes(counts);
  EXPECT_EQ(counts[kW4], 0u);
  EXPECT_EQ(counts[kW16], 0u);
  EXPECT_GT(counts[kS4], 0u);
  EXPECT_EQ(f.tree().repairs(), 0u);
  f.ExpectCheckOk("random");
}

// A node whose stored depth is not its real depth is corruption in ART+CoW (no in-place header
// changes ever happen), while WOART would accept it as an interrupted split.
TEST(ArtCow, CheckRejectsDepthMismatch) {
  PoolFixture f("artcow");
  for (const char* k : {"\x01zzzz-a", "\x01zzzz-b", "\x02", "\x03"}) ASSERT_TRUE(f.idx().Insert(k, 1).ok());
  f.ExpectCheckOk("built");
  RootInfo ri;
  ASSERT_TRUE(f.pool().FindRoot("idx", &ri).ok());
  auto* rb = f.pool().at<RootBlock>(ri.off);
  auto* root = f.pool().at<S4>(RefOffset(rb->root));
  ASSERT_EQ(root->b.type, kS4);
  auto* child = f.pool().at<NodeBase>(RefOffset(root->child[0]));  // the "\x01zzzz-" node
  const uint64_t saved = child->hdr;
  Hdr h = UnpackHdr(saved);
  ASSERT_EQ(h.depth, 1u);
  // The header an in-place split at prefix byte 1 would have written.
  Hdr moved = h;
  moved.depth = h.depth + 2;
  moved.plen = h.plen - 2;
  for (uint32_t j = 0; j < kInlinePrefix; ++j) moved.prefix[j] = j + 2 < h.plen && j + 2 < kInlinePrefix ? h.prefix[j + 2] : 0;
  moved = MakeHdr(moved.depth, moved.plen, reinterpret_cast<const unsigned char*>("\x01zzzz-") + moved.depth);
  child->hdr = PackHdr(moved);
  std::string report;
  EXPECT_FALSE(f.idx().Check(&report).ok()) << report;
  child->hdr = saved;
  f.ExpectCheckOk("restored");
}

}  // namespace wort::art::test
