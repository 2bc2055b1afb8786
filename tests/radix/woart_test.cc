// WOART tests: the shared ART tests (art_test_common.h) plus WOART's in-place node updates, the
// interrupted prefix split / path merge (WORT's depth rule, Algorithm 2) and the SIMD paths.
#include <thread>

#include "radix/art_test_common.h"

namespace wort::art::test {

INSTANTIATE_TEST_SUITE_P(Woart, ArtKindTest, ::testing::Values("woart"));
INSTANTIATE_TEST_SUITE_P(Woart, ArtTreeTest, ::testing::Values("woart"));

TEST(WoartSimd, Find16AndCountLessMatchScalar) {
  std::mt19937_64 rng(99);
  unsigned char keys[16];
  for (int round = 0; round < 2000; ++round) {
    for (auto& k : keys) k = static_cast<unsigned char>(rng() % 4 == 0 ? (0x7e + rng() % 4) : rng());
    const uint32_t mask = static_cast<uint32_t>(rng()) & 0xffffu;
    for (int c = 0; c < 256; ++c) {
      const auto uc = static_cast<unsigned char>(c);
      ASSERT_EQ(Find16Simd(keys, mask, uc), Find16Scalar(keys, mask, uc)) << c;
      ASSERT_EQ(CountLess16Simd(keys, mask, uc), CountLess16Scalar(keys, mask, uc)) << c;
    }
  }
}

TEST(WoartLayout, HeaderAndSlotEncodings) {
  Hdr h;
  h.depth = 4095;
  h.plen = 4095;
  for (uint32_t j = 0; j < kInlinePrefix; ++j) h.prefix[j] = static_cast<unsigned char>(0xf0 + j);
  const Hdr u = UnpackHdr(PackHdr(h));
  EXPECT_EQ(u.depth, 4095u);
  EXPECT_EQ(u.plen, 4095u);
  for (uint32_t j = 0; j < kInlinePrefix; ++j) EXPECT_EQ(u.prefix[j], h.prefix[j]);
  Slot4 s;
  s.n = 3;
  s.key[0] = 0x00, s.key[1] = 0x7f, s.key[2] = 0xff;
  s.idx[0] = 2, s.idx[1] = 0, s.idx[2] = 3;
  const Slot4 d = DecodeSlot4(EncodeSlot4(s));
  EXPECT_EQ(d.n, 3);
  EXPECT_EQ(d.key[2], 0xff);
  EXPECT_EQ(d.idx[0], 2);
  EXPECT_EQ(DecodeSlot4(0).n, 0);
  EXPECT_TRUE(IsLeafRef(LeafRef(64)));
  EXPECT_FALSE(IsLeafRef(NodeRef(64)));
  EXPECT_EQ(RefOffset(LeafRef(128)), 128u);
}

// The interrupted prefix split: n's header already moved down, the parent's word not swapped.
// Readers must still find every key, Check must accept (and note) it, the next writer repairs it.
TEST(WoartCrashStates, InterruptedPrefixSplit) {
  for (const bool long_prefix : {false, true}) {
    PoolFixture f("woart");
    Model m;
    const std::string stem = long_prefix ? std::string("0123456789abcdefghij") : std::string("abc");
    // A node below the root whose prefix is `stem` (the root branches on the first byte).
    for (const std::string& s : {std::string("\x01"), std::string("\x80")})
      for (int c = 0; c < 3; ++c) {
        const std::string k = s + stem + std::string(1, static_cast<char>('x' + c));
        ASSERT_TRUE(f.idx().Insert(k, m.size()).ok());
        m[k] = m.size();
      }
    f.ExpectCheckOk("built");
    // This insert differs from the stem at its third byte: a split of the "\x80" node.
    const std::string splitter = std::string("\x80") + stem.substr(0, 2) + "\xff";
    f.tree().SetTestStop(TestStop::kAfterSplitHeader);
    EXPECT_FALSE(f.idx().Insert(splitter, 99).ok());
    f.tree().SetTestStop(TestStop::kNone);
    // The window is open: a node's stored depth differs from its real depth.
    std::string report;
    ASSERT_TRUE(f.idx().Check(&report).ok()) << report;
    EXPECT_NE(report.find("interrupted"), std::string::npos) << report;
    ExpectMatchesModel(f.idx(), m);  // lookups and scans (Scan recomputes the header)
    uint64_t v;
    EXPECT_TRUE(f.idx().Lookup(splitter, &v).IsNotFound());
    // A scan starting inside the damaged node's prefix.
    const std::string start = std::string("\x80") + stem.substr(0, 2);
    EXPECT_EQ(ScanAll(f.idx(), start, nullptr, 100), ModelScan(m, start, nullptr, 100));
    // Survives a clean reopen as is (no recovery pass), then a writer repairs it.
    f.Reopen();
    ExpectMatchesModel(f.idx(), m);
    const uint64_t repairs = f.tree().repairs();
    ASSERT_TRUE(f.idx().Insert(splitter, 99).ok());
    m[splitter] = 99;
    EXPECT_EQ(f.tree().repairs(), repairs + 1);
    report.clear();
    ASSERT_TRUE(f.idx().Check(&report).ok()) << report;
    EXPECT_EQ(report.find("interrupted"), std::string::npos) << report;
    ExpectMatchesModel(f.idx(), m);
    EXPECT_EQ(f.Allocated(), f.Reachable());
  }
}

// Lookup-only and remove paths through the interrupted split.
TEST(WoartCrashStates, InterruptedSplitThenRemove) {
  PoolFixture f("woart");
  Model m;
  for (int c = 0; c < 4; ++c) {
    const std::string k = std::string("\xfe") + "prefix-of-node" + std::string(1, static_cast<char>(c));
    ASSERT_TRUE(f.idx().Insert(k, c).ok());
    m[k] = c;
  }
  ASSERT_TRUE(f.idx().Insert("\x01", 9).ok());
  m["\x01"] = 9;
  f.tree().SetTestStop(TestStop::kAfterSplitHeader);
  EXPECT_FALSE(f.idx().Insert("\xfeprefix-zz", 1).ok());
  f.tree().SetTestStop(TestStop::kNone);
  for (auto it = m.begin(); it != m.end();) {
    ASSERT_TRUE(f.idx().Remove(it->first).ok());
    it = m.erase(it);
    f.ExpectCheckOk("remove through window");
    ExpectMatchesModel(f.idx(), m);
  }
  EXPECT_EQ(f.Reachable().size(), 1u);
  EXPECT_EQ(f.Allocated(), f.Reachable());
}

// The interrupted path merge: the surviving child's header already moved up, the parent's word
// not swapped. The removal must be wholly absent, and a repair restores the child's header.
TEST(WoartCrashStates, InterruptedPathMerge) {
  PoolFixture f("woart");
  Model m;
  const std::vector<std::string> keys = {"Zabcdefgh1xyz-0", "Zabcdefgh1xyz-1", "Zabcdefgh1xyz-2", "Zabcdefgh2", "A"};
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(f.idx().Insert(keys[i], i).ok());
    m[keys[i]] = i;
  }
  f.tree().SetTestStop(TestStop::kAfterMergeHeader);
  EXPECT_FALSE(f.idx().Remove("Zabcdefgh2").ok());
  f.tree().SetTestStop(TestStop::kNone);
  std::string report;
  ASSERT_TRUE(f.idx().Check(&report).ok()) << report;
  EXPECT_NE(report.find("interrupted"), std::string::npos) << report;
  ExpectMatchesModel(f.idx(), m);  // the key is still there
  EXPECT_EQ(ScanAll(f.idx(), "Zabcdefgh1xyz-1", nullptr, 10), ModelScan(m, "Zabcdefgh1xyz-1", nullptr, 10));
  // A writer passing through repairs it; then the removal succeeds.
  ASSERT_TRUE(f.idx().Insert("Zabcdefgh1xyz-3", 3).ok());
  m["Zabcdefgh1xyz-3"] = 3;
  EXPECT_GE(f.tree().repairs(), 1u);
  report.clear();
  ASSERT_TRUE(f.idx().Check(&report).ok()) << report;
  EXPECT_EQ(report.find("interrupted"), std::string::npos) << report;
  ASSERT_TRUE(f.idx().Remove("Zabcdefgh2").ok());
  m.erase("Zabcdefgh2");
  f.ExpectCheckOk("merged");
  ExpectMatchesModel(f.idx(), m);
  EXPECT_EQ(f.Allocated(), f.Reachable());
}

// A crash image taken inside the split window reopens (with the post-crash GC reclaiming the
// unpublished parent and leaf) and is repaired by the next writer.
TEST(WoartCrashStates, SplitWindowCrashImage) {
  wort::test::TempPath image("woart-window");
  Model m;
  {
    PoolFixture f("woart");
    for (int c = 0; c < 20; ++c) {
      const std::string k = "common-prefix-" + std::string(1, static_cast<char>(c * 13));
      ASSERT_TRUE(f.idx().Insert(k, c).ok());
      m[k] = c;
    }
    ASSERT_TRUE(f.idx().Insert("x", 1).ok());
    m["x"] = 1;
    f.tree().SetTestStop(TestStop::kAfterSplitHeader);
    EXPECT_FALSE(f.idx().Insert("commo", 5).ok());
    wort::test::CopyFile(f.path(), image.str());
  }
  std::unique_ptr<Pool> p;
  ASSERT_TRUE(Pool::Open(image.str(), SmallPoolOpts(), &p).ok());
  ASSERT_TRUE(p->WaitForRecovery().ok());
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(OpenIndex(*p, "idx", &idx).ok());
  std::string report;
  ASSERT_TRUE(idx->Check(&report).ok()) << report;
  ExpectMatchesModel(*idx, m);
  ASSERT_TRUE(idx->Insert("commo", 5).ok());
  m["commo"] = 5;
  report.clear();
  ASSERT_TRUE(idx->Check(&report).ok()) << report;
  EXPECT_EQ(report.find("interrupted"), std::string::npos);
  ExpectMatchesModel(*idx, m);
  idx.reset();
  ASSERT_TRUE(p->Close().ok());
}

// Check() catches broken invariants (it must be able to fail: the crash explorer relies on it).
TEST(WoartCheck, DetectsCorruption) {
  PoolFixture f("woart");
  for (int c = 0; c < 10; ++c) ASSERT_TRUE(f.idx().Insert(wort::test::Cat("k", static_cast<char>(c)), c).ok());
  f.ExpectCheckOk("built");
  // Find the NODE16 (the root: prefix "k", 10 children) and corrupt it three ways.
  RootInfo ri;
  ASSERT_TRUE(f.pool().FindRoot("idx", &ri).ok());
  auto* rb = f.pool().at<RootBlock>(ri.off);
  auto* n = f.pool().at<W16>(RefOffset(rb->root));
  ASSERT_EQ(n->b.type, kW16);
  std::string report;
  const unsigned char saved = n->keys[1];
  n->keys[1] = n->keys[0];  // duplicate partial key
  EXPECT_FALSE(f.idx().Check(&report).ok());
  n->keys[1] = saved;
  const uint64_t hdr = n->b.hdr;
  Hdr h = UnpackHdr(hdr);
  h.plen += 1;  // branch position inconsistent with the leaves
  n->b.hdr = PackHdr(h);
  report.clear();
  EXPECT_FALSE(f.idx().Check(&report).ok());
  n->b.hdr = hdr;
  const uint64_t bm = n->bitmap;
  n->bitmap = 0x7;  // three children: below NODE16's range
  report.clear();
  EXPECT_FALSE(f.idx().Check(&report).ok()) << report;
  n->bitmap = bm;
  f.ExpectCheckOk("restored");
}

}  // namespace wort::art::test
