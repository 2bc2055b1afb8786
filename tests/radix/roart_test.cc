// ROART tests: the shared ART tests (art_test_common.h), ROART's own structure (leaf arrays and
// their split, entry-compressed node growth and compaction, lazily rebuilt volatile metadata,
// the interrupted prefix split and its repair), and one regression test per defect found in the
// authors' code (issue 16): signed fingerprints and key order, the unlocked duplicate check,
// the update leak, the split's inner node never persisted, unsorted leaf-array scans and the
// lost continuation key, and the post-crash GC that never reclaimed.
#include <barrier>
#include <functional>
#include <chrono>
#include <thread>
#include <type_traits>

#include "crash/explorer.h"
#include "index/radix/roart.h"
#include "radix/art_test_common.h"
#include "wort/pm.h"

namespace wort::art::test {

INSTANTIATE_TEST_SUITE_P(Roart, ArtKindTest, ::testing::Values("roart"));
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ArtTreeTest);  // ArtTree's own node types

namespace {
roart::RoartTree& Tree(PoolFixture& f) { return *dynamic_cast<roart::RoartTree*>(&f.idx()); }

// 8-byte keys from a seed, spread over the whole byte range.
std::string RandKey(std::mt19937_64& rng) {
  std::string k(8, '\0');
  for (auto& c : k) c = static_cast<char>(rng());
  return k;
}
}  // namespace

TEST(RoartLayout, PlainPersistentStructsAndSizes) {
  // No vtable pointer in a persistent object (the authors' nodes had them).
  EXPECT_TRUE(std::is_trivially_copyable_v<roart::LeafArray>);
  EXPECT_FALSE(std::is_polymorphic_v<roart::LeafArray>);
  EXPECT_TRUE(std::is_trivially_copyable_v<roart::NodeHead>);
  EXPECT_EQ(roart::NodeBytes(roart::kN4), 96u);
  EXPECT_EQ(roart::NodeBytes(roart::kN16), 192u);
  EXPECT_EQ(roart::NodeBytes(roart::kN48), 64u + 256 + 384);
  EXPECT_EQ(roart::NodeBytes(roart::kN256), 64u + 2048);
  // Leaf arrays by size class (issue 34): 8, 24, 64 slots.
  EXPECT_EQ(roart::LeafArrayBytes(8), 128u);
  EXPECT_EQ(roart::LeafArrayBytes(24), 256u);
  EXPECT_EQ(roart::LeafArrayBytes(64), 576u);
  EXPECT_EQ(roart::LeafArrayClassFor(2), 8);
  EXPECT_EQ(roart::LeafArrayClassFor(9), 24);
  EXPECT_EQ(roart::LeafArrayClassFor(25), 64);
  EXPECT_EQ(roart::SlotsOf(0), 64) << "a head written before the classes";
  EXPECT_EQ(roart::SlotsOf(24), 24);
  EXPECT_EQ(roart::SlotsOf(7), 0) << "not a class: damaged";
  EXPECT_EQ(roart::SlotsOf(65), 0);
  // Format 2 (issue 34): the class code in bits 2-3 of a leaf array reference.
  for (int c : roart::kLeafArrayClasses) {
    const uint64_t ref = 4096 | roart::kArrayTag | roart::ClassCode(c) << roart::kClassShift;
    EXPECT_EQ(roart::SlotsOfCode(ref), c);
    EXPECT_TRUE(roart::TagOk(ref & roart::kTagMask));
  }
  EXPECT_EQ(roart::SlotsOfCode(4096 | roart::kArrayTag), 0) << "format 1: read the head";
  EXPECT_TRUE(roart::TagOk(0));
  EXPECT_TRUE(roart::TagOk(roart::kLeafTag));
  EXPECT_TRUE(roart::TagOk(roart::kArrayTag));
  EXPECT_FALSE(roart::TagOk(roart::kLeafTag | roart::kArrayTag));
  EXPECT_FALSE(roart::TagOk(roart::kLeafTag | 4)) << "a class code on a leaf";
  EXPECT_FALSE(roart::TagOk(4)) << "a class code on an inner node";
  // Format 4: code 4 (bit 4) is the 2-slot class, bit 5 the SlotKV area.
  EXPECT_TRUE(roart::TagOk(roart::kArrayTag | 16));
  EXPECT_TRUE(roart::TagOk(roart::kArrayTag | roart::kKvBit));
  EXPECT_FALSE(roart::TagOk(roart::kKvBit)) << "a SlotKV bit on an inner node";
  EXPECT_FALSE(roart::TagOk(roart::kLeafTag | roart::kKvBit)) << "a SlotKV bit on a leaf";
  EXPECT_EQ(roart::SlotsOfCode(4096 | roart::kArrayTag | roart::ClassCode(2) << roart::kClassShift | roart::kKvBit), 2);
  EXPECT_EQ(roart::SlotsOfCode(4096 | roart::kArrayTag | uint64_t(5) << roart::kClassShift), 0) << "no class 5";
  EXPECT_EQ(roart::LeafArrayClassFor(2, true), 2);
  EXPECT_EQ(roart::LeafArrayClassFor(3, true), 8);
  EXPECT_EQ(roart::LeafArrayClassFor(2), 8) << "no small class without a SlotKV area";
  EXPECT_EQ(roart::LeafArrayBytes(2, true), 112u);
  EXPECT_EQ(roart::SlotsOf(2), 2);
  EXPECT_EQ(roart::SlotsOf(4), 0);
  EXPECT_EQ(roart::SlotLines(2), 1);
  EXPECT_EQ(roart::LineSlots(2), 2);
  EXPECT_EQ(roart::HomeLine(0xffff, 2), 0);
  EXPECT_EQ(roart::PlaceSlot(1, 2, 0xffff), 1);
  EXPECT_EQ(roart::PlaceSlot(3, 2, 0xffff), -1);
  // Placement: the first free slot from the home line on, wrapping; -1 when full.
  EXPECT_EQ(roart::HomeLine(0xabcd, 8), 0);
  EXPECT_EQ(roart::HomeLine(5, 24), 2);
  EXPECT_EQ(roart::HomeLine(0xffff, 64), 7);
  EXPECT_EQ(roart::PlaceSlot(0, 24, 5), 16);
  EXPECT_EQ(roart::PlaceSlot(uint64_t(0xff) << 16, 24, 5), 0) << "home line full: wraps to line 0";
  EXPECT_EQ(roart::PlaceSlot(uint64_t(0xff) << 16 | 1, 24, 5), 1);
  EXPECT_EQ(roart::PlaceSlot(uint64_t(0x7f) << 16, 24, 5), 23);
  EXPECT_EQ(roart::PlaceSlot(0xffffff, 24, 5), -1);
  EXPECT_EQ(roart::PlaceSlot(~uint64_t(0) >> 1, 64, 7), 63);
  EXPECT_EQ(roart::PlaceSlot(~uint64_t(0), 64, 7), -1);
  EXPECT_EQ(roart::PlaceSlot(0xfe, 8, 0xffff), 0);
  // Format 3 (issue 34): a SlotKV per slot after the slot words; inline slot words.
  EXPECT_EQ(roart::LeafArrayBytes(8, true), 256u);
  EXPECT_EQ(roart::LeafArrayBytes(24, true), 640u);
  EXPECT_EQ(roart::LeafArrayBytes(64, true), 1600u);
  for (size_t len = 0; len <= roart::kMaxInlineKey; ++len) {
    const uint64_t w = roart::InlineSlot(0xfedc, len);
    EXPECT_TRUE(roart::IsInline(w));
    EXPECT_TRUE(roart::InlineSlotOk(w));
    EXPECT_EQ(roart::InlineLen(w), len);
    EXPECT_EQ(w >> 48, 0xfedcu);
  }
  EXPECT_FALSE(roart::IsInline(uint64_t(0xfedc) << 48 | 4096)) << "a leaf offset is 64-byte aligned";
  EXPECT_FALSE(roart::InlineSlotOk(roart::InlineSlot(1, 9)));
  EXPECT_FALSE(roart::InlineSlotOk(roart::InlineSlot(1, 8) | 64));
}

namespace {
// Every word that holds a leaf array reference (the root word or an inner node's entry), in a
// quiescent tree.
std::vector<uint64_t*> ArrayRefWords(PoolFixture& f) {
  RootInfo ri;
  EXPECT_TRUE(f.pool().FindRoot("idx", &ri).ok());
  std::vector<uint64_t*> out, stack{&f.pool().at<roart::RootBlock>(ri.off)->root};
  while (!stack.empty()) {
    uint64_t* w = stack.back();
    stack.pop_back();
    const uint64_t ref = *w & roart::kRefMask;
    if (!ref || (ref & roart::kLeafTag)) continue;
    if (ref & roart::kArrayTag) {
      out.push_back(w);
      continue;
    }
    auto* n = f.pool().at<roart::NodeHead>(ref & ~roart::kTagMask);
    const auto t = static_cast<uint8_t>(n->type);
    uint64_t* ch = roart::Children(n, t);
    for (int i = 0; i < roart::Capacity(t); ++i)
      if (ch[i]) stack.push_back(&ch[i]);
  }
  return out;
}
roart::LeafArray* ArrayOf(PoolFixture& f, const uint64_t* w) {
  return f.pool().at<roart::LeafArray>(*w & roart::kRefMask & ~roart::kTagMask);
}
// Creates pools in an older format while alive (RoartTree::SetFormatForNewPoolsForTest).
struct OldFormat {
  explicit OldFormat(int f) { roart::RoartTree::SetFormatForNewPoolsForTest(f); }
  ~OldFormat() { roart::RoartTree::SetFormatForNewPoolsForTest(0); }
};
// The block of the array `ref` names holds its slots and, exactly when kv, a SlotKV area.
void ExpectArrayBlock(PoolFixture& f, uint64_t ref, int slots, bool kv) {
  const size_t usable = f.pool().allocator().UsableSize(ref & roart::kRefMask & ~roart::kTagMask);
  EXPECT_GE(usable, roart::LeafArrayBytes(slots, kv));
  if (!kv) {
    EXPECT_LT(usable, roart::LeafArrayBytes(slots, true)) << "an array without a SlotKV area is smaller";
  }
}
uint64_t RootMagic(PoolFixture& f) {
  RootInfo ri;
  EXPECT_TRUE(f.pool().FindRoot("idx", &ri).ok());
  return f.pool().at<roart::RootBlock>(ri.off)->magic;
}
// A pool created by this build in an older `format` (the format applies to its creation only).
std::unique_ptr<PoolFixture> PoolInFormat(int format) {
  OldFormat old(format);
  return std::make_unique<PoolFixture>("roart");
}
// Inserts k -> v unless the model holds k already (then nothing); the model follows.
::testing::AssertionResult InsertNew(PoolFixture& f, Model& m, const std::string& k, uint64_t v) {
  if (m.count(k)) return ::testing::AssertionSuccess();
  const Status s = f.idx().Insert(k, v);
  if (!s.ok()) return ::testing::AssertionFailure() << "Insert of a " << k.size() << "-byte key: " << s.ToString();
  m[k] = v;
  return ::testing::AssertionSuccess();
}
// Step i of the old-format workloads: a key the model holds is removed when i % 3 == 0 (kept
// otherwise), a new key is inserted with value i; the model follows.
::testing::AssertionResult InsertOrRemoveEveryThird(PoolFixture& f, Model& m, const std::string& k, int i) {
  if (!m.count(k)) return InsertNew(f, m, k, static_cast<uint64_t>(i));
  if (i % 3 != 0) return ::testing::AssertionSuccess();
  const Status s = f.idx().Remove(k);
  if (!s.ok()) return ::testing::AssertionFailure() << "Remove of a " << k.size() << "-byte key: " << s.ToString();
  m.erase(k);
  return ::testing::AssertionSuccess();
}
// A whole scan in pages of 8 keys, each page from the last key of the one before (that key, met
// again, dropped).
std::vector<std::pair<std::string, uint64_t>> PagedScan(PoolFixture& f) {
  std::vector<std::pair<std::string, uint64_t>> paged;
  std::string from;
  for (;;) {
    auto page = ScanAll(f.idx(), from, nullptr, 8);
    if (!paged.empty() && !page.empty() && page.front().first == from) page.erase(page.begin());
    if (page.empty()) break;
    paged.insert(paged.end(), page.begin(), page.end());
    from = paged.back().first;
  }
  return paged;
}
}  // namespace

// Format 2 (issue 34): a new pool's root says so, every leaf array reference carries its
// array's class, and every key sits in its home line unless that line is full (no removes
// here), so a lookup of a present key usually reads one line of the array.
namespace {
// Format 3 and 4: every array reference carries its class (and in format 4 its SlotKV area, as
// its head says), every inline slot's SlotKV holds its key and value, keys sit in their home
// line unless it is full.
void ExpectClassesAndHomeLines(int format) {
  const std::unique_ptr<PoolFixture> fp = PoolInFormat(format);
  PoolFixture& f = *fp;
  Model m;
  std::mt19937_64 rng(34);
  for (int i = 0; i < 30000; ++i) {
    const std::string k = i % 3 ? RandKey(rng) : wort::test::Cat("ðstring", std::to_string(rng() % 100000));  // 9+ bytes
    ASSERT_TRUE(InsertNew(f, m, k, i));
  }
  EXPECT_EQ(RootMagic(f), format == 3 ? roart::kRootMagic3 : roart::kRootMagic4);
  const std::vector<uint64_t*> words = ArrayRefWords(f);
  ASSERT_GT(words.size(), 100u);
  size_t keys = 0, home = 0, inline_keys = 0, classes[4] = {}, without_kv = 0;
  for (const uint64_t* w : words) {
    const roart::LeafArray* la = ArrayOf(f, w);
    const bool kv = format == 3 || (la->h.slots & roart::kSlotsKv);
    const int slots = roart::SlotsOf(la->h.slots & ~roart::kSlotsKv);
    ASSERT_EQ(roart::SlotsOfCode(*w), slots);
    if (format == 3) {
      ASSERT_EQ(*w & roart::kKvBit, 0u);
      ASSERT_EQ(la->h.slots & roart::kSlotsKv, 0u);
    } else {
      ASSERT_EQ((*w & roart::kKvBit) != 0, kv) << "the reference and the head agree";
    }
    ExpectArrayBlock(f, *w, slots, kv);
    classes[slots == 8 ? 0 : slots == 24 ? 1 : slots == 2 ? 3 : 2]++;
    bool any_short = false;
    for (int i = 0; i < slots; ++i) {
      const uint64_t s = la->slot[i];
      if (!s) continue;
      ++keys;
      if (roart::IsInline(s)) {  // format 3: the key and its value in the array, nothing else
        ASSERT_TRUE(kv);
        const roart::SlotKV& e = roart::KVs(&la->h, slots)[i];
        const std::string k(reinterpret_cast<const char*>(&e.key), roart::InlineLen(s));
        ASSERT_TRUE(m.count(k));
        EXPECT_EQ(e.value, m[k]);
        EXPECT_EQ(s >> 48, roart::Fingerprint(k));
        ++inline_keys;
        any_short = true;
      } else {
        const auto* l = f.pool().at<Leaf>(s & roart::kRefMask);
        EXPECT_FALSE(kv && l->key_len <= roart::kMaxInlineKey) << "a short key in a leaf of an array with a SlotKV area";
        any_short |= l->key_len <= roart::kMaxInlineKey;
      }
      const int hl = roart::HomeLine(s >> 48, slots);
      if (i / 8 == hl) {
        ++home;
        continue;
      }
      for (int j = 8 * hl; j < 8 * hl + 8; ++j) EXPECT_NE(la->slot[j], 0u) << "a key off its home line while that has room";
    }
    if (format == 4) {
      EXPECT_EQ(kv, any_short) << "format 4: a SlotKV area iff the array holds a key of at most 8 bytes";
    }
    without_kv += !kv;
  }
  EXPECT_GT(classes[0], 0u);
  EXPECT_GT(classes[1], 0u);
  if (format == 4) {
    EXPECT_GT(classes[3], 0u) << "2-slot arrays";
    EXPECT_GT(without_kv, 0u) << "arrays of long keys only, without a SlotKV area";
  }
  EXPECT_GT(home, keys * 9 / 10) << home << " of " << keys;
  EXPECT_GT(inline_keys, keys / 4) << "the 8-byte keys in arrays are inline (Check: all of them)";
  EXPECT_LT(inline_keys, keys) << "the long keys are not";
  f.ExpectCheckOk("format 3/4");
  ExpectMatchesModel(f.idx(), m);
  f.Reopen();
  ExpectMatchesModel(f.idx(), m);
}
}  // namespace

TEST(RoartFormat, ArrayReferencesCarryTheClassAndKeysSitInTheirHomeLine) { ExpectClassesAndHomeLines(4); }
TEST(RoartFormat, ArrayReferencesCarryTheClassAndKeysSitInTheirHomeLineFormat3) { ExpectClassesAndHomeLines(3); }

// A pool written before format 2 (root magic kRootMagic, no class code in any reference, keys
// in any slot) is read, and written in its own format: made here from a format-2 tree by
// rewriting its root magic, clearing every class code and reversing every array's slots.
TEST(RoartFormat, PoolFromBeforeFormat2IsReadAndWrittenInItsFormat) {
  OldFormat old(2);  // a format-2 pool (no inline keys), turned into format 1 below
  PoolFixture f("roart");
  Model m;
  std::mt19937_64 rng(35);
  auto key = [&](int i) { return i % 2 ? RandKey(rng) : wort::test::Cat("k", static_cast<char>(rng() % 40), static_cast<char>(0xc0 + rng() % 64)); };
  for (int i = 0; i < 6000; ++i) ASSERT_TRUE(InsertNew(f, m, key(i), i));
  {
    RootInfo ri;
    ASSERT_TRUE(f.pool().FindRoot("idx", &ri).ok());
    f.pool().at<roart::RootBlock>(ri.off)->magic = roart::kRootMagic;
    int moved = 0;
    for (uint64_t* w : ArrayRefWords(f)) {
      *w &= ~roart::kClassBits;
      roart::LeafArray* la = ArrayOf(f, w);
      const int slots = roart::SlotsOf(la->h.slots);
      std::reverse(la->slot, la->slot + slots);
      moved += slots > 8;
    }
    ASSERT_GT(moved, 0) << "keys moved off their home lines";
  }
  f.Reopen();
  EXPECT_EQ(RootMagic(f), roart::kRootMagic);
  f.ExpectCheckOk("format 1");
  ExpectMatchesModel(f.idx(), m);  // lookups and scans
  // Writes (slot inserts, growth, splits, removes) keep the pool in format 1.
  for (int i = 0; i < 6000; ++i) ASSERT_TRUE(InsertOrRemoveEveryThird(f, m, key(i), i));
  f.ExpectCheckOk("format 1, written");
  ExpectMatchesModel(f.idx(), m);
  for (const uint64_t* w : ArrayRefWords(f)) ASSERT_EQ(*w & roart::kClassBits, 0u) << "a format-1 pool stays format 1";
  f.Reopen();
  EXPECT_EQ(RootMagic(f), roart::kRootMagic);
  f.ExpectCheckOk("format 1, reopened");
  ExpectMatchesModel(f.idx(), m);
}

// The body of the RoartFormat.PoolOfFormat{2,3}IsReadAndWrittenInItsFormat tests: a pool created
// in an older `format` by this build, 3 rounds of 4,000 inserts and removes (random 8-byte keys,
// 2-byte keys, every 5th key with 20-49 more bytes >= 0x80), then `extra(round)`; after each round
// the root magic must still be the old one, `check` holds, Check passes, the tree equals the
// model, and the pool is reopened; at the end no block is leaked.
static void OldFormatRounds(int format, uint64_t magic, uint64_t seed,
                            const std::function<void(PoolFixture&, Model&, int)>& extra,
                            const std::function<void(PoolFixture&)>& check) {
  const std::unique_ptr<PoolFixture> fp = PoolInFormat(format);
  PoolFixture& f = *fp;  // created in the old format; everything below runs with the default
  Model m;
  std::mt19937_64 rng(seed);
  auto key = [&](int i) {
    std::string k = i % 2 ? RandKey(rng) : wort::test::Cat("\xf3", static_cast<char>(rng() % 30));
    if (i % 5 == 0) k += std::string(20 + rng() % 30, static_cast<char>(0x80 + rng() % 128));
    return k;
  };
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 4000; ++i) ASSERT_TRUE(InsertOrRemoveEveryThird(f, m, key(i), i));
    extra(f, m, round);
    EXPECT_EQ(RootMagic(f), magic);
    check(f);
    f.ExpectCheckOk(("format " + std::to_string(format)).c_str());
    ExpectMatchesModel(f.idx(), m);
    f.Reopen();
  }
  EXPECT_EQ(f.Allocated(), f.Reachable());
}

// A pool of format 2 (before keys moved into the arrays) is read, and written in its own format
// by this build: no inline slot, no SlotKV area, keys of every length in leaves; it survives
// reopens and stays format 2. Keys over the full byte range, short and long.
TEST(RoartFormat, PoolOfFormat2IsReadAndWrittenInItsFormat) {
  OldFormatRounds(2, roart::kRootMagic2, 37, [](PoolFixture&, Model&, int) {}, [](PoolFixture& f) {
    for (const uint64_t* w : ArrayRefWords(f)) {
      const roart::LeafArray* la = ArrayOf(f, w);
      const int slots = roart::SlotsOf(la->h.slots);
      EXPECT_EQ(f.pool().allocator().UsableSize(*w & roart::kRefMask & ~roart::kTagMask), roart::LeafArrayBytes(slots))
          << "no SlotKV area in format 2";
      for (int i = 0; i < slots; ++i) ASSERT_FALSE(roart::IsInline(la->slot[i])) << "an inline slot in a format-2 pool";
    }
  });
}

// A pool of format 3 (a SlotKV area in every array, no 2-slot class) is read, and written in its
// own format by this build (format 4 the default): every array keeps its area and 8 slots at
// least, no reference gets kKvBit, short keys stay inline; through inserts, removes and reopens.
// Keys over the full byte range, short and long.
TEST(RoartFormat, PoolOfFormat3IsReadAndWrittenInItsFormat) {
  auto long_only_arrays = [](PoolFixture& f, Model& m, int round) {
    // A few arrays of long keys only (format 4 would build them without the area).
    for (int i = 0; i < 40; ++i) {
      const std::string k = wort::test::Cat("\xf4", static_cast<char>(0x80 + round), std::string(10 + i, static_cast<char>(0xa0 + i)));
      ASSERT_TRUE(InsertNew(f, m, k, i));
    }
  };
  OldFormatRounds(3, roart::kRootMagic3, 38, long_only_arrays, [](PoolFixture& f) {
    size_t arrays = 0, long_only = 0;
    for (const uint64_t* w : ArrayRefWords(f)) {
      const roart::LeafArray* la = ArrayOf(f, w);
      ASSERT_EQ(la->h.slots & roart::kSlotsKv, 0u);
      ASSERT_EQ(*w & roart::kKvBit, 0u) << "no SlotKV bit in a format-3 reference";
      const int slots = roart::SlotsOf(la->h.slots);
      ASSERT_GE(slots, 8) << "no 2-slot class in format 3";
      ExpectArrayBlock(f, *w, slots, true);  // every format-3 array has its SlotKV area
      bool any_short = false;
      for (int i = 0; i < slots; ++i) {
        const uint64_t s = la->slot[i];
        if (!s) continue;
        if (roart::IsInline(s)) {
          any_short = true;
          continue;
        }
        ASSERT_GT(f.pool().at<Leaf>(s & roart::kRefMask)->key_len, roart::kMaxInlineKey) << "short keys are inline";
      }
      ++arrays;
      long_only += !any_short;
    }
    EXPECT_GT(arrays, 50u);
    EXPECT_GT(long_only, 0u) << "arrays of long keys only keep their area in format 3";
  });
}

// Format 4 (issue 34): the SlotKV area is a choice of each array. Arrays of long keys only have
// none (128 bytes for 8 slots, not 256); a short key taken by such an array while it has a free
// slot gets a leaf; the array that replaces it when the new key is short has the area and every
// short key inline (the leaves' keys and values copied, the leaves retired), written back whole
// before its publish; a growth by a long key keeps an array without the area as it is; an area
// whose short keys were all removed is dropped at the next compaction. Collisions: two long
// keys make an array without the area, a long and a short one an array with it. Bytes >= 0x80.
TEST(RoartFormat, SlotKvAreaIsChosenPerArray) {
  PoolFixture f("roart");
  Model m;
  auto ins = [&](const std::string& k, uint64_t v) {
    ASSERT_TRUE(f.idx().Insert(k, v).ok()) << k.size();
    m[k] = v;
  };
  auto rem = [&](const std::string& k) {
    ASSERT_TRUE(f.idx().Remove(k).ok());
    m.erase(k);
  };
  auto lng = [](int i) { return wort::test::Cat("\xe9", static_cast<char>(0x80 + i), std::string(18, static_cast<char>(0xc0 ^ i))); };
  auto the_array = [&](bool* kv, int* slots) {
    const std::vector<uint64_t*> words = ArrayRefWords(f);
    ASSERT_EQ(words.size(), 1u);
    const roart::LeafArray* la = ArrayOf(f, words[0]);
    *kv = (*words[0] & roart::kKvBit) != 0;
    ASSERT_EQ(*kv, (la->h.slots & roart::kSlotsKv) != 0);
    *slots = roart::SlotsOfCode(*words[0]);
    ExpectArrayBlock(f, *words[0], *slots, *kv);
  };
  auto leaves_short = [&] {  // short keys in leaves
    size_t n = 0;
    for (const uint64_t* w : ArrayRefWords(f)) {
      const roart::LeafArray* la = ArrayOf(f, w);
      for (int i = 0; i < roart::SlotsOfCode(*w); ++i)
        if (la->slot[i] && !roart::IsInline(la->slot[i]))
          n += f.pool().at<Leaf>(la->slot[i] & roart::kRefMask)->key_len <= roart::kMaxInlineKey;
    }
    return n;
  };
  bool kv;
  int slots;
  for (int i = 0; i < 3; ++i) ins(lng(i), i);
  the_array(&kv, &slots);
  EXPECT_FALSE(kv) << "long keys only: no SlotKV area";
  EXPECT_EQ(slots, 8);
  const std::string s1("\xe9\x01", 2), s2("\xe9\xff\x00", 3), s3("\xe9", 1);
  ins(s1, 1001);  // a free slot in an array without the area: a leaf
  the_array(&kv, &slots);
  EXPECT_FALSE(kv);
  EXPECT_EQ(leaves_short(), 1u);
  ExpectMatchesModel(f.idx(), m);
  f.ExpectCheckOk("short key in a leaf");
  for (int i = 3; i < 8; ++i) ins(lng(i), i);  // 9 keys: grown by a long key
  the_array(&kv, &slots);
  EXPECT_FALSE(kv) << "grown by a long key: still no area";
  EXPECT_EQ(slots, 24);
  EXPECT_EQ(leaves_short(), 1u);
  for (int i = 8; i < 23; ++i) ins(lng(i), i);  // 24 keys: full
  the_array(&kv, &slots);
  ASSERT_EQ(slots, 24);
  // The 25th key is short: the new array has the area, s1 and s2 inline, written back whole
  // before the fence that precedes its publish.
  struct Rec : pm::Hook {
    std::vector<uintptr_t> lines;
    std::vector<size_t> lines_at_fence;
    void OnFlushLine(const void* l, const std::source_location&) override { lines.push_back(reinterpret_cast<uintptr_t>(l)); }
    void OnFence(const std::source_location&) override { lines_at_fence.push_back(lines.size()); }
  } rec;
  pm::Hook* old = pm::SetHook(&rec);
  ASSERT_TRUE(f.idx().Insert(s2, 1002).ok());
  pm::SetHook(old);
  m[s2] = 1002;
  the_array(&kv, &slots);
  EXPECT_TRUE(kv) << "grown by a short key: the area";
  EXPECT_EQ(slots, 64);
  EXPECT_EQ(leaves_short(), 0u) << "s1's leaf became an inline slot";
  {
    const roart::NodeHead* la = f.pool().at<roart::NodeHead>(*ArrayRefWords(f)[0] & roart::kRefMask & ~roart::kTagMask);
    ASSERT_GE(rec.lines_at_fence.size(), 2u);
    const std::set<uintptr_t> flushed(rec.lines.begin(), rec.lines.begin() + static_cast<long>(rec.lines_at_fence[rec.lines_at_fence.size() - 2]));
    for (size_t o = 0; o < roart::LeafArrayBytes(64, true); o += 64)
      EXPECT_TRUE(flushed.count(reinterpret_cast<uintptr_t>(la) + o)) << "line " << o / 64 << " of the new array";
  }
  ExpectMatchesModel(f.idx(), m);
  f.ExpectCheckOk("converted");
  ASSERT_TRUE(f.idx().Upsert(s1, 2001).ok());  // the converted key's value word is the SlotKV's
  m[s1] = 2001;
  ExpectMatchesModel(f.idx(), m);
  // Remove the short keys; fill the 64 slots with long keys; the next insert compacts the array
  // and drops the area.
  rem(s1);
  rem(s2);
  for (int i = 23; i < 85 && m.size() < 62; ++i) ins(lng(i), i);
  ASSERT_EQ(m.size(), 62u) << "64 slots taken, 2 of them dead: the next insert compacts";
  ins(lng(90), 90);
  the_array(&kv, &slots);
  EXPECT_FALSE(kv) << "no short key left: the area dropped";
  EXPECT_EQ(slots, 64);
  ExpectMatchesModel(f.idx(), m);
  f.ExpectCheckOk("area dropped");
  f.Reopen();
  ExpectMatchesModel(f.idx(), m);
  EXPECT_EQ(f.Allocated(), f.Reachable()) << "the converted leaves and replaced arrays were reclaimed";

  // Collisions: a single leaf meets a second key.
  PoolFixture g("roart");
  // 65 keys of distinct first bytes: the root array splits into a NODE256 of single leaves.
  for (int i = 0; i < 65; ++i) ASSERT_TRUE(g.idx().Insert(wort::test::Cat(static_cast<char>(0xa0 + i), std::string(12, 'x')), 7).ok());
  ASSERT_TRUE(ArrayRefWords(g).empty());
  ASSERT_TRUE(g.idx().Insert(wort::test::Cat("\x81", std::string(12, '\xaa')), 1).ok());
  ASSERT_TRUE(g.idx().Insert(wort::test::Cat("\x81", std::string(12, '\xbb')), 2).ok());
  ASSERT_TRUE(g.idx().Insert(wort::test::Cat("\x82", std::string(12, '\xaa')), 3).ok());
  ASSERT_TRUE(g.idx().Insert(std::string("\x82\xcc", 2), 4).ok());
  ASSERT_TRUE(g.idx().Insert(std::string("\x83\xcc", 2), 5).ok());
  ASSERT_TRUE(g.idx().Insert(std::string("\x83\xdd", 2), 6).ok());
  std::map<unsigned char, uint64_t> refs;
  for (const uint64_t* w : ArrayRefWords(g)) {
    const roart::LeafArray* la = ArrayOf(g, w);
    const uint64_t s = la->slot[0] ? la->slot[0] : la->slot[1];
    std::string_view k;
    if (roart::IsInline(s)) {
      k = std::string_view(reinterpret_cast<const char*>(&roart::KVs(&la->h, roart::SlotsOfCode(*w))[la->slot[0] ? 0 : 1].key), 1);
    } else {
      k = g.pool().at<Leaf>(s & roart::kRefMask)->key_view();
    }
    refs[static_cast<unsigned char>(k[0])] = *w;
  }
  ASSERT_EQ(refs.size(), 3u);
  EXPECT_EQ(refs[0x81] & roart::kKvBit, 0u) << "two long keys: no area";
  EXPECT_EQ(roart::SlotsOfCode(refs[0x81]), 8);
  EXPECT_NE(refs[0x82] & roart::kKvBit, 0u) << "a long and a short key: the area";
  EXPECT_EQ(roart::SlotsOfCode(refs[0x82]), 2);
  EXPECT_NE(refs[0x83] & roart::kKvBit, 0u);
  EXPECT_EQ(roart::SlotsOfCode(refs[0x83]), 2);
  g.ExpectCheckOk("collisions");
}

// `wort pool info`'s breakdown of a roart pool (RoartTree::SpaceReport): its total is the
// index's reachable bytes (Stats), each class of leaf array with and without a SlotKV area has
// its line, and the leaves are split by key length.
TEST(RoartFormat, SpaceReportAddsUpToTheReachableBytes) {
  PoolFixture f("roart");
  std::mt19937_64 rng(39);
  for (int i = 0; i < 20000; ++i) {
    // 8-byte keys, and 1,000 long ones spread over 256 second bytes (arrays of ~4 long keys)
    const std::string k = i % 20 ? RandKey(rng)
                                 : wort::test::Cat("\xfa", static_cast<char>(rng()), std::string(12 + i % 20, static_cast<char>(0x80 + rng() % 100)));
    (void)f.idx().Insert(k, i);  // a repeated random key: AlreadyExists
  }
  const std::string r = Tree(f).SpaceReport();
  const IndexStats st = f.idx().Stats();
  EXPECT_NE(r.find("roart format 4: " + std::to_string(st.keys) + " keys"), std::string::npos) << r;
  EXPECT_NE(r.find(std::to_string(st.bytes_allocated) + " bytes reachable"), std::string::npos) << r;
  EXPECT_NE(r.find("leaf array 2 slots +SlotKV"), std::string::npos) << r;
  EXPECT_NE(r.find("leaf array 8 slots  "), std::string::npos) << "arrays of long keys only\n" << r;
  EXPECT_NE(r.find("leaf, key > 8 bytes"), std::string::npos) << r;
  EXPECT_NE(r.find("NODE256"), std::string::npos) << r;
  // The bytes of the lines add up to the total.
  uint64_t lines = 0;
  for (size_t at = r.find(" bytes ("); at != std::string::npos; at = r.find(" bytes (", at + 1)) {
    size_t b = at;
    while (b > 0 && r[b - 1] >= '0' && r[b - 1] <= '9') --b;
    lines += std::stoull(r.substr(b, at - b));
  }
  RootInfo ri;
  ASSERT_TRUE(f.pool().FindRoot("idx", &ri).ok());
  EXPECT_EQ(lines + f.pool().allocator().UsableSize(ri.off), st.bytes_allocated) << r;
}

// Format 3 (issue 34): keys of 0..8 bytes live in the leaf array (no leaf is allocated for
// them: an insert into an array with a free slot allocates nothing), longer keys in leaves, in
// the same arrays; upserts store the array's value word; a slot emptied by a remove is not
// taken again in the same session (lookups read inline slots without versions) but is after a
// reopen; a full array with dead slots is compacted into the class its live keys need, not grown.
TEST(RoartFormat, InlineKeysInTheLeafArray) {
  OldFormat old(3);  // format 3's arrays: 8 slots at least, a SlotKV area in every one
  PoolFixture f("roart");
  Model m;
  auto ins = [&](const std::string& k, uint64_t v) {
    ASSERT_TRUE(f.idx().Insert(k, v).ok()) << k.size();
    m[k] = v;
  };
  // One array below "\xe7": keys of every length 1..8 and long ones (bytes >= 0x80 throughout).
  ins(std::string("\xe7", 1), 1);
  ins(std::string("\xe7\x00", 2), 2);
  ASSERT_EQ(Tree(f).LeafArraySlotCounts(), std::vector<int>{8});
  const auto before = f.Allocated();
  ins(std::string("\xe7\xff\x80", 3), 3);
  ins(std::string("\xe7\x80\x81\x82\x83\x84\x85\x86", 8), 4);
  auto new_blocks = [&] {  // blocks allocated since `before` (the retired leaf may be freed meanwhile)
    size_t n = 0;
    for (uint64_t off : f.Allocated()) n += !before.count(off);
    return n;
  };
  EXPECT_EQ(new_blocks(), 0u) << "inline inserts allocate nothing";
  ins(wort::test::Cat("\xe7", std::string(40, '\xc3')), 5);  // a long key: a leaf
  EXPECT_EQ(new_blocks(), 1u);
  ins(std::string("\xe7\x00\x00", 3), 6);  // shares its first two bytes with a shorter key
  ins(std::string(8, '\xe7'), 7);
  ins(std::string("\xe7\x01\x02\x03\x04\x05\x06", 7), 8);
  ASSERT_EQ(Tree(f).LeafArraySlotCounts(), std::vector<int>{8});
  ExpectMatchesModel(f.idx(), m);
  f.ExpectCheckOk("inline");
  // Upserts: in the array's value word.
  bool inserted = true;
  ASSERT_TRUE(f.idx().Upsert(std::string("\xe7\xff\x80", 3), 33, &inserted).ok());
  EXPECT_FALSE(inserted);
  m[std::string("\xe7\xff\x80", 3)] = 33;
  ASSERT_TRUE(f.idx().Upsert(wort::test::Cat("\xe7", std::string(40, '\xc3')), 55, &inserted).ok());
  m[wort::test::Cat("\xe7", std::string(40, '\xc3'))] = 55;
  ExpectMatchesModel(f.idx(), m);
  // The 8 slots are taken; remove 6 keys: their slots stay taken in this session, so the next
  // insert compacts the array (2 live + 1: still 8 slots) instead of reusing a slot in place.
  const std::vector<std::string> gone = {std::string("\xe7", 1), std::string("\xe7\x00", 2), std::string("\xe7\xff\x80", 3),
                                         std::string(8, '\xe7'), std::string("\xe7\x00\x00", 3),
                                         std::string("\xe7\x01\x02\x03\x04\x05\x06", 7)};
  for (const auto& k : gone) {
    ASSERT_TRUE(f.idx().Remove(k).ok());
    m.erase(k);
  }
  const std::vector<uint64_t*> words = ArrayRefWords(f);
  ASSERT_EQ(words.size(), 1u);
  const uint64_t old_ref = *words[0];
  ins(std::string("\xe7\x42", 2), 9);
  const std::vector<uint64_t*> words2 = ArrayRefWords(f);
  ASSERT_EQ(words2.size(), 1u);
  EXPECT_NE(*words2[0], old_ref) << "compacted into a new array, no slot reused in place";
  ASSERT_EQ(Tree(f).LeafArraySlotCounts(), std::vector<int>{8}) << "compacted, not grown";
  ExpectMatchesModel(f.idx(), m);
  f.ExpectCheckOk("compacted");
  // After a reopen a slot emptied in the previous session is taken again (same array).
  ASSERT_TRUE(f.idx().Remove(std::string("\xe7\x42", 2)).ok());
  m.erase(std::string("\xe7\x42", 2));
  f.Reopen();
  const uint64_t ref3 = *ArrayRefWords(f)[0];
  ins(std::string("\xe7\x43", 2), 10);
  EXPECT_EQ(*ArrayRefWords(f)[0], ref3) << "a free slot of the reopened pool is taken in place";
  ExpectMatchesModel(f.idx(), m);
  f.ExpectCheckOk("reopened");
  // Split of a 64-slot array of inline and long keys: groups of one inline key become leaves.
  for (int i = 0; i < 70; ++i)
    ins(i % 3 ? wort::test::Cat("\xe7", static_cast<char>(0x90 + i), static_cast<char>(0xf0 ^ i))
              : wort::test::Cat("\xe7", static_cast<char>(0x90 + i), std::string(12, static_cast<char>(0x80 + i))),
        100 + i);
  ExpectMatchesModel(f.idx(), m);
  f.ExpectCheckOk("split");
  f.Reopen();
  ExpectMatchesModel(f.idx(), m);
  EXPECT_EQ(f.Allocated(), f.Reachable());
}

// An inline insert writes its SlotKV back before the fence that precedes its slot word.
TEST(RoartFormat, InlineSlotIsPersistedBeforeItsSlotWord) {
  for (const int format : {4, 3}) {
    const std::unique_ptr<PoolFixture> fp = PoolInFormat(format);
    PoolFixture& f = *fp;
    ASSERT_TRUE(f.idx().Insert(std::string("\xd0\x01", 2), 1).ok());
    ASSERT_TRUE(f.idx().Insert(std::string("\xd0\x02", 2), 2).ok());
    ASSERT_TRUE(f.idx().Insert(std::string("\xd0\x03", 2), 4).ok());  // format 4: grown from 2 to 8 slots
    struct Rec : pm::Hook {
      std::vector<uintptr_t> lines;
      std::vector<size_t> lines_at_fence;
      void OnFlushLine(const void* l, const std::source_location&) override { lines.push_back(reinterpret_cast<uintptr_t>(l)); }
      void OnFence(const std::source_location&) override { lines_at_fence.push_back(lines.size()); }
    } rec;
    pm::Hook* old = pm::SetHook(&rec);
    Status s = f.idx().Insert(std::string("\xd0\x83\xff", 3), 3);
    pm::SetHook(old);
    ASSERT_TRUE(s.ok());
    const std::vector<uint64_t*> words = ArrayRefWords(f);
    ASSERT_EQ(words.size(), 1u);
    const roart::LeafArray* la = ArrayOf(f, words[0]);
    ASSERT_EQ(roart::SlotsOfCode(*words[0]), 8);
    int at = -1;
    for (int i = 0; i < 8; ++i)
      if (roart::IsInline(la->slot[i]) && roart::KVs(&la->h, 8)[i].value == 3) at = i;
    ASSERT_GE(at, 0);
    ASSERT_EQ(rec.lines_at_fence.size(), 2u) << "one fence before the slot word, one after it";
    const std::set<uintptr_t> before(rec.lines.begin(), rec.lines.begin() + static_cast<long>(rec.lines_at_fence[0]));
    EXPECT_TRUE(before.count(reinterpret_cast<uintptr_t>(&roart::KVs(&la->h, 8)[at]) & ~uintptr_t(63)));
    EXPECT_FALSE(before.count(reinterpret_cast<uintptr_t>(&la->slot[at]) & ~uintptr_t(63))) << "the slot word after the fence";
  }
}

// A class code that disagrees with the array's head (a damaged image) is reported by Check;
// lookups and scans of the damaged tree neither crash nor return a key that is not there.
TEST(RoartFormat, ClassCodeThatDisagreesWithTheHeadIsReported) {
  PoolFixture f("roart");
  Model m;
  std::mt19937_64 rng(36);
  for (int i = 0; i < 3000; ++i) ASSERT_TRUE(InsertNew(f, m, RandKey(rng), i));
  std::vector<uint64_t*> words = ArrayRefWords(f);
  ASSERT_FALSE(words.empty());
  uint64_t* w = words[0];
  const int slots = roart::SlotsOfCode(*w);
  const int wrong = slots == 64 ? 8 : 64;
  *w = (*w & ~roart::kClassBits) | roart::ClassCode(wrong) << roart::kClassShift;
  std::string report;
  EXPECT_FALSE(f.idx().Check(&report).ok());
  EXPECT_NE(report.find("differs from its head"), std::string::npos) << report;
  uint64_t v;
  for (const auto& [k, val] : m) {
    const Status s = f.idx().Lookup(k, &v);
    if (s.ok()) {
      EXPECT_EQ(v, val);
    }
  }
  std::mt19937_64 other(99);
  for (int i = 0; i < 2000; ++i) {
    const std::string k = RandKey(other);
    if (!m.count(k)) {
      EXPECT_TRUE(f.idx().Lookup(k, &v).IsNotFound());
    }
  }
  const auto all = ScanAll(f.idx(), "", nullptr, SIZE_MAX);
  for (const auto& [k, val] : all) EXPECT_TRUE(m.count(k));
}

// Leaf arrays start small and grow (issue 34): two keys make an 8-slot array, the 9th key grows
// it to 24 slots, the 25th to 64, the 65th splits it. Keys over the full byte range; every
// stage checked against a model, through a reopen, and the replaced arrays are reclaimed.
TEST(RoartStructure, LeafArraysStartSmallAndGrow) {
  PoolFixture f("roart");
  Model m;
  std::vector<int> expect_slots;
  for (int i = 0; i < 65; ++i) {
    const std::string k = wort::test::Cat("g", static_cast<char>(0xff - i * 3), "\x80");
    ASSERT_TRUE(f.idx().Insert(k, i).ok());
    m[k] = i;
    const std::vector<int> slots = Tree(f).LeafArraySlotCounts();
    if (i == 0) {
      EXPECT_TRUE(slots.empty()) << "one key: a single leaf";
    } else if (i < 64) {
      ASSERT_EQ(slots.size(), 1u) << "keys: " << i + 1;
      // Format 4, 3-byte keys (an array with a SlotKV area): 2, 8, 24, 64 slots.
      EXPECT_EQ(slots[0], i + 1 <= 2 ? 2 : i + 1 <= 8 ? 8 : i + 1 <= 24 ? 24 : 64) << "keys: " << i + 1;
    } else {
      EXPECT_TRUE(slots.empty()) << "65 distinct second bytes: split into single leaves";
    }
    if (i == 2 || i == 8 || i == 24 || i == 40) {
      f.ExpectCheckOk("growth");
      ExpectMatchesModel(f.idx(), m);
      f.Reopen();
      f.ExpectCheckOk("growth, reopened");
      ExpectMatchesModel(f.idx(), m);
    }
  }
  // Upserts and removes through grown arrays.
  ASSERT_TRUE(f.idx().Upsert(wort::test::Cat("g", static_cast<char>(0xff), "\x80"), 1000).ok());
  m[wort::test::Cat("g", static_cast<char>(0xff), "\x80")] = 1000;
  ExpectMatchesModel(f.idx(), m);
  f.ExpectCheckOk("split");
  f.Reopen();  // retired blocks are freed once no epoch holds them
  EXPECT_EQ(f.Allocated(), f.Reachable()) << "the replaced arrays were reclaimed";
}

// A grown leaf array is persisted whole before the fence that precedes the parent's word.
TEST(RoartStructure, GrownLeafArrayIsPersistedWholeBeforePublish) {
  PoolFixture f("roart");
  for (int i = 0; i < 24; ++i) ASSERT_TRUE(f.idx().Insert(wort::test::Cat("p", static_cast<char>(0x80 + i)), i).ok());
  ASSERT_EQ(Tree(f).LeafArraySlotCounts(), std::vector<int>{24});
  struct Rec : pm::Hook {
    std::vector<uintptr_t> lines;
    std::vector<size_t> lines_at_fence;
    void OnFlushLine(const void* l, const std::source_location&) override { lines.push_back(reinterpret_cast<uintptr_t>(l)); }
    void OnFence(const std::source_location&) override { lines_at_fence.push_back(lines.size()); }
  } rec;
  pm::Hook* old = pm::SetHook(&rec);
  Status s = f.idx().Insert("p\x01", 99);
  pm::SetHook(old);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(Tree(f).LeafArraySlotCounts(), std::vector<int>{64});
  RootInfo ri;
  ASSERT_TRUE(f.pool().FindRoot("idx", &ri).ok());
  const uint64_t root = f.pool().at<roart::RootBlock>(ri.off)->root;
  ASSERT_EQ(root & roart::kTagMask & ~roart::kClassBits & ~roart::kKvBit, roart::kArrayTag) << "the root is the grown array";
  EXPECT_EQ(roart::SlotsOfCode(root), 64) << "format 2: the class in the reference";
  EXPECT_TRUE(root & roart::kKvBit) << "format 4: 2-byte keys, an array with a SlotKV area";
  const auto* la = f.pool().at<roart::NodeHead>(root & ~roart::kTagMask);
  EXPECT_EQ(la->slots, 64u | roart::kSlotsKv);
  ASSERT_GE(rec.lines_at_fence.size(), 2u);
  const size_t before_publish = rec.lines_at_fence[rec.lines_at_fence.size() - 2];
  std::set<uintptr_t> flushed(rec.lines.begin(), rec.lines.begin() + static_cast<long>(before_publish));
  for (size_t o = 0; o < roart::LeafArrayBytes(64, true); o += 64)
    EXPECT_TRUE(flushed.count(reinterpret_cast<uintptr_t>(la) + o)) << "line " << o / 64 << " of the grown array";
  f.ExpectCheckOk("grown");
}

// A small leaf array costs less: a 66-key array splits into 33 subtrees of 2 keys, each a
// 2-slot array of 112 bytes in a 128-byte block (format 4; format 3: an 8-slot one of 256
// bytes; a 64-slot one would be 576 bytes).
TEST(RoartStructure, SmallLeafArraysTakeFewerBytes) {
  PoolFixture f("roart");
  for (int i = 0; i < 33; ++i)
    for (int j = 0; j < 2; ++j)
      ASSERT_TRUE(f.idx().Insert(wort::test::Cat("b", static_cast<char>(0x20 + i * 7), static_cast<char>(0xf0 + j)), 1).ok());
  const std::vector<int> slots = Tree(f).LeafArraySlotCounts();
  ASSERT_EQ(slots.size(), 33u);
  for (int c : slots) EXPECT_EQ(c, 2);
  EXPECT_LT(f.idx().Stats().bytes_allocated, 33u * 576) << "the 33 arrays alone would take that at 64 slots";
  EXPECT_LT(f.idx().Stats().bytes_allocated, 33u * 256) << "the 33 arrays alone would take that at 8 slots with SlotKVs";
  f.ExpectCheckOk("small");
}

// Leaf arrays fill and split; nodes grow NODE4 -> 16 -> 48 -> 256; an append-only NODE4 whose
// cursor is used up by removed entries is compacted into a new NODE4.
TEST(RoartStructure, LeafArraySplitGrowthAndCompaction) {
  PoolFixture f("roart");
  Model m;
  uint64_t counts[8];
  // 64 keys fit in the root leaf array; the 65th splits it.
  for (int i = 0; i < 64; ++i) {
    const std::string k = wort::test::Cat("k", static_cast<char>(i * 4), "x");
    ASSERT_TRUE(f.idx().Insert(k, i).ok());
    m[k] = i;
  }
  Tree(f).CountNodeTypes(counts);
  EXPECT_EQ(counts[roart::kLeafArray], 1u);
  EXPECT_EQ(counts[roart::kN4] + counts[roart::kN16] + counts[roart::kN48] + counts[roart::kN256], 0u);
  ASSERT_TRUE(f.idx().Insert("k\x01y", 99).ok());
  m["k\x01y"] = 99;
  Tree(f).CountNodeTypes(counts);
  EXPECT_EQ(counts[roart::kN256], 1u) << "65 distinct second bytes: one NODE256";
  EXPECT_EQ(counts[roart::kLeafArray], 0u);
  f.ExpectCheckOk("split");
  ExpectMatchesModel(f.idx(), m);

  // Growth of one node: 64 keys "growA.." and "growB" split the root leaf array into a NODE4
  // with two children; then one child per new byte (full byte range, mixed order), each a
  // leaf array of two keys.
  PoolFixture g("roart");
  Model gm;
  auto gins = [&](const std::string& k) {
    ASSERT_TRUE(g.idx().Insert(k, gm.size()).ok());
    gm[k] = gm.size();
  };
  for (int i = 0; i < 64; ++i) gins("growA" + std::to_string(i));
  gins("growB");
  int n = 2;
  for (int c = 0; c < 256; ++c) {
    const int b = (c * 167 + 3) % 256;
    if (b == 'A' || b == 'B') continue;
    for (int j = 0; j < 2; ++j) gins(std::string("grow") + std::string(1, static_cast<char>(b)) + char('a' + j));
    ++n;
    if (n == 4 || n == 5 || n == 16 || n == 17 || n == 48 || n == 49 || n == 256) {
      g.ExpectCheckOk("grow");
      ExpectMatchesModel(g.idx(), gm);
      Tree(g).CountNodeTypes(counts);
      const uint8_t want = n <= 4 ? roart::kN4 : n <= 16 ? roart::kN16 : n <= 48 ? roart::kN48 : roart::kN256;
      EXPECT_EQ(counts[want], 1u) << n << " children";
      EXPECT_EQ(counts[roart::kN4] + counts[roart::kN16] + counts[roart::kN48] + counts[roart::kN256], 1u);
    }
  }
  EXPECT_EQ(g.Allocated(), g.Reachable()) << "a replaced node was not freed";
  // Compaction: a NODE4 whose 4 entries were appended and 3 removed takes 3 more children.
  PoolFixture h("roart");
  Model hm;
  auto ins = [&](const std::string& k) {
    ASSERT_TRUE(h.idx().Insert(k, hm.size()).ok());
    hm[k] = hm.size();
  };
  auto rem = [&](const std::string& k) {
    ASSERT_TRUE(h.idx().Remove(k).ok());
    hm.erase(k);
  };
  // Make a node: 65 keys split the root leaf array into a NODE4 with 4 leaf-array children.
  for (int i = 0; i < 65; ++i) ins(std::string(1, static_cast<char>(0x80 + i % 4)) + std::to_string(i));
  Tree(h).CountNodeTypes(counts);
  ASSERT_EQ(counts[roart::kN4], 1u);
  for (int i = 0; i < 65; ++i)
    if (i % 4 != 0) rem(std::string(1, static_cast<char>(0x80 + i % 4)) + std::to_string(i));
  h.ExpectCheckOk("holes");
  for (int c = 0; c < 3; ++c) ins(std::string(1, static_cast<char>(c)) + "new");
  Tree(h).CountNodeTypes(counts);
  EXPECT_EQ(counts[roart::kN4], 1u) << "compacted, not grown";
  h.ExpectCheckOk("compacted");
  ExpectMatchesModel(h.idx(), hm);
  EXPECT_EQ(h.Allocated(), h.Reachable());
}

// A prefix split cut after publishing the new node (the old node's header still has its old
// depth): readers and scans still see every key, Check accepts it, reopen needs nothing, and
// the next writer that reaches the node repairs its header.
TEST(RoartCrashStates, InterruptedPrefixSplit) {
  for (const bool long_prefix : {false, true}) {
    PoolFixture f("roart");
    Model m;
    const std::string stem = long_prefix ? std::string("0123456789abcdefghij") : std::string("abc");
    // 65 keys "\x80" + stem + 2 bytes: the root leaf array splits into a node with prefix.
    for (int i = 0; i < 65; ++i) {
      const std::string k = std::string("\x80") + stem + std::string(1, static_cast<char>(i * 3)) + "z";
      ASSERT_TRUE(f.idx().Insert(k, i).ok());
      m[k] = i;
    }
    f.ExpectCheckOk("built");
    const std::string splitter = std::string("\x80") + stem.substr(0, 2) + "\xff";
    Tree(f).SetTestStop(roart::TestStop::kAfterSplitPublish);
    ASSERT_TRUE(f.idx().Insert(splitter, 1000).ok());
    Tree(f).SetTestStop(roart::TestStop::kNone);
    m[splitter] = 1000;
    f.ExpectCheckOk("window open");
    ExpectMatchesModel(f.idx(), m);
    const std::string start = std::string("\x80") + stem.substr(0, 2) + "\x01";
    EXPECT_EQ(ScanAll(f.idx(), start, nullptr, 100), ModelScan(m, start, nullptr, 100));
    f.Reopen();
    ExpectMatchesModel(f.idx(), m);
    const uint64_t before = Tree(f).repairs();
    const std::string k2 = std::string("\x80") + stem + "\x01q";
    ASSERT_TRUE(f.idx().Insert(k2, 7).ok());
    m[k2] = 7;
    EXPECT_EQ(Tree(f).repairs(), before + 1);
    f.ExpectCheckOk("repaired");
    ExpectMatchesModel(f.idx(), m);
  }
}

// Opening the index writes nothing (no recovery pass, no metadata rebuild up front).
TEST(RoartRestart, OpenTouchesNothing) {
  PoolFixture f("roart", KeyType::kU64);
  for (uint64_t i = 0; i < 5000; ++i) ASSERT_TRUE(f.idx().Insert(i * 7919, i).ok());
  f.Reopen();
  f.DropIndex();  // one handle per index: the fixture's goes first
  std::unique_ptr<Index> again;
  const pm::Counters c0 = pm::ThisThreadCounters();
  ASSERT_TRUE(OpenIndex(f.pool(), "idx", &again).ok());
  uint64_t v;
  ASSERT_TRUE(again->Lookup(uint64_t{7919 * 42}, &v).ok());
  EXPECT_EQ(v, 42u);
  const pm::Counters d = pm::ThisThreadCounters() - c0;
  EXPECT_EQ(d.lines_flushed, 0u);
  EXPECT_EQ(d.fences, 0u);
}

// A read-only pool: lookups and scans work without trusting (or writing) any volatile
// metadata; writes are refused with a clear error.
TEST(RoartRestart, ReadOnlyPool) {
  Model m;
  wort::test::TempPath path("roart-ro");
  PoolOptions po = SmallPoolOpts();
  {
    std::unique_ptr<Pool> p;
    ASSERT_TRUE(Pool::Create(path.str(), po, &p).ok());
    std::unique_ptr<Index> idx;
    ASSERT_TRUE(CreateIndex(*p, "idx", "roart", {}, &idx).ok());
    ByteKeyGen gen(8);
    std::mt19937_64 rng(8);
    RandomOps(*idx, m, rng, 3000, [&]() { return gen.Next(m); });
    idx.reset();
    ASSERT_TRUE(p->Close().ok());
  }
  po.read_only = true;
  std::unique_ptr<Pool> p;
  ASSERT_TRUE(Pool::Open(path.str(), po, &p).ok());
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(OpenIndex(*p, "idx", &idx).ok());
  ExpectMatchesModel(*idx, m);
  EXPECT_EQ(idx->Insert("new", 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(idx->Remove(m.begin()->first).code(), Code::kInvalidArgument);
  std::string report;
  EXPECT_TRUE(idx->Check(&report).ok()) << report;
}

// ---- regressions of the authors' code -----------------------------------------------------------

// Defect: the leaf's fingerprint hashed signed chars, the probe's unsigned bytes (98% of random
// 8-byte keys were then missed), and range filters compared signed bytes.
TEST(RoartRegress, FingerprintAndOrderOverUnsignedBytes) {
  PoolFixture f("roart");
  Model m;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20000; ++i) ASSERT_TRUE(InsertNew(f, m, RandKey(rng), i));
  f.ExpectCheckOk("fingerprints");  // Check recomputes every slot's fingerprint from its key
  ExpectMatchesModel(f.idx(), m);
  for (const auto& [k, v] : m) ASSERT_TRUE(f.idx().Insert(k, 0).IsAlreadyExists());
  // One leaf array holding 0x00, 0x7f, 0x80, 0xff keys: scanned in unsigned order.
  PoolFixture g("roart");
  const std::vector<std::string> ks = {"\xff", std::string("\x00", 1), "\x80", "\x7f", std::string("\x80\x00", 2), "\x01"};
  for (size_t i = 0; i < ks.size(); ++i) ASSERT_TRUE(g.idx().Insert(ks[i], i).ok());
  const auto all = ScanAll(g.idx(), "", nullptr, SIZE_MAX);
  ASSERT_EQ(all.size(), ks.size());
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(CompareKeys(all[i - 1].first, all[i].first), 0) << i;
  EXPECT_EQ(all.front().first, std::string("\x00", 1));
  EXPECT_EQ(all.back().first, "\xff");
  const std::string_view end("\x80");
  const auto upto = ScanAll(g.idx(), "\x01", &end, SIZE_MAX);
  ASSERT_EQ(upto.size(), 3u);  // \x01 \x7f \x80
  // The fingerprint is over unsigned bytes: equal to a hash of the byte values 0..255.
  std::string hi(1, '\xff');
  EXPECT_NE(roart::Fingerprint(hi), roart::Fingerprint(std::string(1, '\x7f')));
}

// Defect: the duplicate check ran before the leaf array was locked, so two concurrent inserts
// of one key could both succeed. Here every round, several threads insert the same new key at
// once (into leaf arrays, some of them full so that the insert splits): exactly one succeeds.
TEST(RoartRegress, ConcurrentInsertsOfOneKeyExactlyOneWins) {
  PoolFixture f("roart");
  constexpr int kThreads = 4, kRounds = 3000;
  std::vector<std::string> keys;
  std::mt19937_64 rng(9);
  std::set<std::string> seen;
  while (keys.size() < kRounds) {
    const char second = static_cast<char>(rng() % 3);
    std::string k = wort::test::Cat("c", second, RandKey(rng).substr(0, 1 + rng() % 3));
    if (seen.insert(k).second) keys.push_back(k);
  }
  std::atomic<int> wins[kRounds] = {};
  std::barrier sync(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        if (r % 64 == 0) sync.arrive_and_wait();
        Status s = f.idx().Insert(keys[r], uint64_t(t));
        if (s.ok()) wins[r]++;
        else if (!s.IsAlreadyExists()) ADD_FAILURE() << s.ToString();
      }
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < kRounds; ++r) ASSERT_EQ(wins[r].load(), 1) << "round " << r;
  EXPECT_EQ(f.idx().Size(), size_t(kRounds));
  f.ExpectCheckOk("after races");
  EXPECT_EQ(f.Allocated(), f.Reachable()) << "a losing insert leaked its leaf";
}

// Defect: an update allocated a new leaf and never freed the old one.
TEST(RoartRegress, UpsertDoesNotLeak) {
  PoolFixture f("roart");
  std::mt19937_64 rng(3);
  std::vector<std::string> ks;
  for (int i = 0; i < 2000; ++i) ks.push_back(RandKey(rng) + std::string(i % 50, 'v'));
  for (size_t i = 0; i < ks.size(); ++i) ASSERT_TRUE(f.idx().Insert(ks[i], i).ok());
  const auto blocks = f.Allocated();  // (frees what split retired first)
  const uint64_t bytes = f.pool().allocator().Stats().bytes_allocated;
  for (int round = 0; round < 10; ++round)
    for (size_t i = 0; i < ks.size(); ++i) {
      bool inserted = true;
      ASSERT_TRUE(f.idx().Upsert(ks[i], i * 100 + round, &inserted).ok());
      ASSERT_FALSE(inserted);
    }
  EXPECT_EQ(f.Allocated(), blocks);
  EXPECT_EQ(f.pool().allocator().Stats().bytes_allocated, bytes);
  uint64_t v;
  ASSERT_TRUE(f.idx().Lookup(ks[5], &v).ok());
  EXPECT_EQ(v, 5u * 100 + 9);
}

// Defect: the inner node built by a leaf-array split was never persisted as a whole (only the
// parent's pointer to it was). Every cache line of the new node must be written back during
// the insert that splits, and before its last fence (the publish's).
TEST(RoartRegress, SplitNodeIsPersistedWhole) {
  PoolFixture f("roart");
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(f.idx().Insert(wort::test::Cat("s", static_cast<char>(i)), i).ok());
  struct Rec : pm::Hook {
    std::vector<uintptr_t> lines;
    size_t fences = 0;
    std::vector<size_t> lines_at_fence;
    void OnFlushLine(const void* l, const std::source_location&) override { lines.push_back(reinterpret_cast<uintptr_t>(l)); }
    void OnFence(const std::source_location&) override { lines_at_fence.push_back(lines.size()); }
  } rec;
  pm::Hook* old = pm::SetHook(&rec);
  Status s = f.idx().Insert("s\x80", 64);
  pm::SetHook(old);
  ASSERT_TRUE(s.ok());
  RootInfo ri;
  ASSERT_TRUE(f.pool().FindRoot("idx", &ri).ok());
  const uint64_t root = f.pool().at<roart::RootBlock>(ri.off)->root;
  ASSERT_EQ(root & roart::kTagMask, 0u) << "the root is now an inner node";
  const auto* n = f.pool().at<roart::NodeHead>(root);
  const size_t bytes = roart::NodeBytes(static_cast<uint8_t>(n->type));
  // The flushes before the second-to-last fence (the last one is the publish's own persist).
  ASSERT_GE(rec.lines_at_fence.size(), 2u);
  const size_t before_publish = rec.lines_at_fence[rec.lines_at_fence.size() - 2];
  std::set<uintptr_t> flushed(rec.lines.begin(), rec.lines.begin() + static_cast<long>(before_publish));
  for (size_t o = 0; o < bytes; o += 64)
    EXPECT_TRUE(flushed.count(reinterpret_cast<uintptr_t>(n) + o)) << "line " << o / 64 << " of the new node";
  f.ExpectCheckOk("split");
}

// Defect: leaf-array entries were scanned in slot order, and a scan resumed after a restart or
// a limit lost its continuation key. Keys inserted in shuffled order into one leaf array come
// out sorted; a scan continued from the last key emitted yields exactly the rest.
TEST(RoartRegress, SortedLeafArrayScanAndContinuation) {
  PoolFixture f("roart");
  Model m;
  std::vector<std::string> ks;
  for (int i = 0; i < 64; ++i) ks.push_back(wort::test::Cat("L", static_cast<char>(255 - i * 3), std::to_string(i)));
  std::mt19937_64 rng(1);
  std::shuffle(ks.begin(), ks.end(), rng);
  for (const auto& k : ks) {
    ASSERT_TRUE(f.idx().Insert(k, m.size()).ok());
    m[k] = m.size();
  }
  uint64_t counts[8];
  Tree(f).CountNodeTypes(counts);
  ASSERT_EQ(counts[roart::kLeafArray], 1u);
  EXPECT_EQ(ScanAll(f.idx(), "", nullptr, SIZE_MAX), ModelScan(m, "", nullptr, SIZE_MAX));
  // Paged scan: 7 keys at a time, each page starting after the last key of the previous one.
  for (int phase = 0; phase < 2; ++phase) {
    EXPECT_EQ(PagedScan(f), ModelScan(m, "", nullptr, SIZE_MAX));
    // Second phase: more keys than a scan batch, across split leaf arrays.
    for (int i = 0; i < 300; ++i) {
      const std::string k = wort::test::Cat("L", std::to_string(i * 7));
      if (f.idx().Insert(k, i).ok()) m[k] = i;
    }
  }
  // Start keys between, before and inside keys of one leaf array.
  for (const auto& [k, v] : m) {
    const std::string inside = k.substr(0, k.size() - 1);
    EXPECT_EQ(ScanAll(f.idx(), inside, nullptr, 5), ModelScan(m, inside, nullptr, 5));
    EXPECT_EQ(ScanAll(f.idx(), k + '\0', nullptr, 3), ModelScan(m, k + '\0', nullptr, 3));
  }
}

// Issue 34: a scan sorts a leaf array's inline keys (format 3) by their SlotKV key word,
// byte-swapped, cut to the key's length and shifted past the array's depth, with no copy of the
// key; and it requests only the children a batch is expected to need (by class), the leaves of
// the next array unless every key is inline (a kU64 index). Keys of 0-8 bytes that are
// prefixes of one another, over bytes 0x00, 0x01, 0x7f, 0x80, 0xe7, 0xff, in arrays at depths
// 0 to 3, and 8-byte keys of a kU64 index over the whole byte range: every scan (from each key,
// inclusive; from just after it; from each proper prefix; paged by 8 as continuation does)
// equals the model's, before and after removes that leave dead slots.
TEST(RoartRegress, InlineKeysOfEveryLengthScanInOrder) {
  const unsigned char bytes[] = {0x00, 0x01, 0x7f, 0x80, 0xe7, 0xff};
  for (const KeyType kt : {KeyType::kBytes, KeyType::kU64}) {
    SCOPED_TRACE(kt == KeyType::kU64 ? "u64" : "bytes");
    PoolFixture f("roart", kt);
    Model m;
    std::mt19937_64 rng(11);
    std::vector<std::string> ks;
    if (kt == KeyType::kBytes) {
      ks.push_back("");
      for (unsigned char a : bytes) {
        ks.push_back(std::string(1, static_cast<char>(a)));
        for (unsigned char b : bytes) {
          ks.push_back(wort::test::Cat(static_cast<char>(a), static_cast<char>(b)));
          for (unsigned char c : bytes) ks.push_back(wort::test::Cat(static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)));
        }
      }
      for (int i = 0; i < 200; ++i) {  // 4-8 bytes, sharing the short keys' bytes
        std::string k(4 + rng() % 5, '\0');
        for (auto& c : k) c = static_cast<char>(bytes[rng() % 6]);
        ks.push_back(k);
      }
    } else {
      for (int i = 0; i < 3000; ++i) ks.push_back(RandKey(rng));
      for (int i = 0; i < 300; ++i) {  // clusters: arrays of keys differing in their last bytes
        std::string k = RandKey(rng);
        for (unsigned char c : bytes) ks.push_back(wort::test::Cat(k.substr(0, 7), static_cast<char>(c)));
      }
    }
    std::shuffle(ks.begin(), ks.end(), rng);
    for (const auto& k : ks)
      if (!m.count(k)) {
        ASSERT_TRUE(f.idx().Insert(k, m.size() + 1).ok());
        m[k] = m.size() + 1;
      }
    uint64_t counts[8];
    Tree(f).CountNodeTypes(counts);
    ASSERT_GT(counts[roart::kLeafArray], 10u);
    auto check = [&] {
      EXPECT_EQ(ScanAll(f.idx(), "", nullptr, SIZE_MAX), ModelScan(m, "", nullptr, SIZE_MAX));
      int n = 0;
      for (const auto& [k, v] : m) {
        if (kt == KeyType::kU64 && n++ % 7) continue;  // every 7th of the 4,800 8-byte keys
        EXPECT_EQ(ScanAll(f.idx(), k, nullptr, 100), ModelScan(m, k, nullptr, 100));
        EXPECT_EQ(ScanAll(f.idx(), k + '\0', nullptr, 5), ModelScan(m, k + '\0', nullptr, 5));
        if (!k.empty()) {
          const std::string p = k.substr(0, k.size() - 1);
          EXPECT_EQ(ScanAll(f.idx(), p, nullptr, 9), ModelScan(m, p, nullptr, 9));
        }
      }
      EXPECT_EQ(PagedScan(f), ModelScan(m, "", nullptr, SIZE_MAX));
    };
    check();
    int i = 0;
    for (auto it = m.begin(); it != m.end();) {  // every third key: dead slots in this session
      if (i++ % 3 == 0) {
        ASSERT_TRUE(f.idx().Remove(it->first).ok());
        it = m.erase(it);
      } else {
        ++it;
      }
    }
    check();
    f.ExpectCheckOk("inline scan");
  }
}

// Defect: the post-crash GC computed reachability but never reclaimed. After a crash that cut
// operations (blocks allocated, never linked) and left retired blocks pending, recovery leaves
// exactly the reachable blocks allocated.
TEST(RoartRegress, PostCrashGcReclaims) {
  wort::test::TempPath image("roart-gc");
  Model m;
  {
    PoolFixture f("roart");
    ByteKeyGen gen(21);
    std::mt19937_64 rng(21);
    RandomOps(f.idx(), m, rng, 5000, [&]() { return gen.Next(m); });
    // An insert cut by the crash: a leaf allocated and persisted, never published.
    for (int i = 0; i < 50; ++i) {
      uint64_t off;
      ASSERT_TRUE(f.pool().allocator().Alloc(100, &off).ok());
    }
    wort::test::CopyFile(f.path(), image.str());
  }
  std::unique_ptr<Pool> p;
  ASSERT_TRUE(Pool::Open(image.str(), SmallPoolOpts(), &p).ok());
  ASSERT_FALSE(p->opened_clean());
  ASSERT_TRUE(p->WaitForRecovery().ok());
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(OpenIndex(*p, "idx", &idx).ok());
  ExpectSoundAfterRecovery(*idx, *p, m, "roart", "");
  // Writers on the stale-generation nodes rebuild their metadata as they go.
  ByteKeyGen gen2(22);
  std::mt19937_64 rng2(22);
  RandomOps(*idx, m, rng2, 3000, [&]() { return gen2.Next(m); });
  ExpectSoundAfterRecovery(*idx, *p, m, "roart", "after writes");
  idx.reset();
  ASSERT_TRUE(p->Close().ok());
}

// The crash explorer on every write path of roart (leaf-array insert and split, leaf
// collision, node growth, prefix split, upsert, remove with emptied chains): no violation.
TEST(RoartCrash, ExplorerFindsNoViolation) {
  for (const auto dist : {bench::Dist::kStrings, bench::Dist::kSparse}) {
    crash::ExplorerConfig cfg;
    cfg.index = "roart";
    cfg.dir = "/dev/shm";
    cfg.dist = dist;
    cfg.keys = 60;
    cfg.explore_ops = 160;
    cfg.novel_only = true;
    cfg.max_points = 16;
    cfg.seed = 3;
    crash::ExplorerResult r;
    ASSERT_TRUE(crash::RunExplorer(cfg, &r).ok());
    EXPECT_EQ(r.violation_count, 0u) << (r.violations.empty() ? "" : r.violations.front().ToString());
    EXPECT_GT(r.images, 0u);
  }
}

}  // namespace wort::art::test

namespace wort::art::test {

// Leaf-array growth under concurrency (issue 34): 4 writers insert disjoint keys that share a
// few 2-byte prefixes, so the same arrays grow 8 -> 24 -> 64 and split while the others insert
// into them; 2 readers look up every key a writer has acknowledged (published in a per-writer
// watermark) and must find it with its value; a scanner checks that each scan is strictly
// ascending and holds every acknowledged key of its range. At the end every key is present,
// Size and Check agree, and (after a reopen) no block leaked. scripts/tsan.sh runs it.
TEST(RoartConcurrent, LeafArrayGrowthBesideReadersAndScans) {
  PoolFixture f("roart");
  constexpr int kWriters = 4, kReaders = 2;
  const int per = 6000 / wort::test::kSanitizerScale;
  auto key = [](int w, int i) {
    // 8 prefixes "\xf0" + p; then the writer and the index, big-endian, over the full byte range.
    const int p = i % 8;
    return wort::test::Cat("\xf0", static_cast<char>(0x7c + p), static_cast<char>(0x80 ^ (i * 37 & 0xff)),
                           static_cast<char>(w * 61), static_cast<char>(i >> 8), static_cast<char>(i & 0xff));
  };
  std::atomic<int> acked[kWriters] = {};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> lookups{0}, scans{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; ++w)
    ts.emplace_back([&, w] {
      for (int i = 0; i < per; ++i) {
        // Paced (2 loaded cores: the writers finished in 29 ms before the scanner's first scan,
        // a CI-like failure of "scans > 0"): every 1,000 inserts a writer waits, up to 5 s,
        // until the scanner has scanned that many times over.
        if (i % 1000 == 999) {
          const auto t0 = std::chrono::steady_clock::now();
          while (scans.load() < uint64_t(i + 1) / 1000 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
            std::this_thread::yield();
        }
        Status s = f.idx().Insert(key(w, i), uint64_t(w) << 32 | uint64_t(i));
        if (!s.ok()) ADD_FAILURE() << s.ToString();
        acked[w].store(i + 1, std::memory_order_release);
      }
    });
  for (int r = 0; r < kReaders; ++r)
    ts.emplace_back([&, r] {
      std::mt19937_64 rng(r + 1);
      while (!stop.load(std::memory_order_acquire)) {
        const int w = static_cast<int>(rng() % kWriters);
        const int n = acked[w].load(std::memory_order_acquire);
        if (n == 0) continue;
        const int i = static_cast<int>(rng() % uint64_t(n));
        uint64_t v = 0;
        Status s = f.idx().Lookup(key(w, i), &v);
        if (!s.ok() || v != (uint64_t(w) << 32 | uint64_t(i))) {
          ADD_FAILURE() << "acknowledged key " << w << "/" << i << " read as " << s.ToString() << " " << v;
          return;
        }
        lookups.fetch_add(1, std::memory_order_relaxed);
      }
    });
  ts.emplace_back([&] {
    while (!stop.load(std::memory_order_acquire)) {
      // Keys acknowledged before the scan starts must all be in it.
      std::set<std::string> must;
      for (int w = 0; w < kWriters; ++w) {
        const int n = acked[w].load(std::memory_order_acquire);
        for (int i = 0; i < n; ++i)
          if (i % 8 == 3) must.insert(key(w, i));  // prefix "\xf0\x7f": one range
      }
      const std::string lo("\xf0\x7f", 2), hi("\xf0\x80", 2);
      const std::string_view end(hi);
      std::string prev;
      bool first = true, ok = true;
      Status s = f.idx().Scan(lo, &end, SIZE_MAX, [&](std::string_view k, uint64_t) {
        if (!first && CompareKeys(prev, k) >= 0) ok = false;
        first = false;
        prev.assign(k);
        must.erase(std::string(k));
        return true;
      });
      if (!s.ok() || !ok || !must.empty()) {
        ADD_FAILURE() << "scan: " << s.ToString() << (ok ? "" : ", out of order") << ", " << must.size()
                      << " acknowledged keys missing";
        return;
      }
      scans.fetch_add(1, std::memory_order_relaxed);
    }
  });
  for (int w = 0; w < kWriters; ++w) ts[w].join();
  // At least one lookup and one scan each (bounded: a reader that failed has returned).
  for (const auto t0 = std::chrono::steady_clock::now();
       (lookups.load() == 0 || scans.load() == 0) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5);)
    std::this_thread::yield();
  stop.store(true, std::memory_order_release);
  for (size_t t = kWriters; t < ts.size(); ++t) ts[t].join();
  EXPECT_GT(lookups.load(), 0u);
  EXPECT_GT(scans.load(), 0u);
  for (int w = 0; w < kWriters; ++w)
    for (int i = 0; i < per; ++i) {
      uint64_t v = 0;
      ASSERT_TRUE(f.idx().Lookup(key(w, i), &v).ok()) << w << "/" << i;
      ASSERT_EQ(v, uint64_t(w) << 32 | uint64_t(i));
    }
  EXPECT_EQ(f.idx().Size(), size_t(kWriters) * size_t(per));
  f.ExpectCheckOk("after growth races");
  f.Reopen();
  f.ExpectCheckOk("reopened");
  EXPECT_EQ(f.Allocated(), f.Reachable()) << "a replaced leaf array leaked";
}

}  // namespace wort::art::test

namespace wort::art::test {

// Lookups read no version word (issue 34, ROWEX: RoartTree::LookupAttempt states the argument).
// Stable keys (inserted before the threads start, never removed; every length from 1 to 12 over
// the full byte range, so some are prefixes of others and nodes have compressed prefixes) are
// looked up while 2 writers insert and remove churn keys cut from the stable keys at every
// position and extended with random bytes: prefix splits inside compressed prefixes, leaf_here
// adds, leaf collisions, leaf-array growth and splits, NODE4 -> 16 -> 48 -> 256 growth and
// compaction, NODE48 appends and removes of the same bytes over and over, and unlinked chains.
// A stable key must always be found with its value, a key never inserted never, and a churn key
// found must carry its own value. Then Check, Size and a reopen agree. scripts/tsan.sh runs it.
TEST(RoartConcurrent, LookupsWithoutVersionsBesideEveryWritePath) {
  PoolFixture f("roart");
  constexpr int kWriters = 2, kReaders = 2;
  const int rounds = 100 / wort::test::kSanitizerScale + 2;
  auto value_of = [](std::string_view k) { return std::hash<std::string_view>()(k) & ((uint64_t(1) << 62) - 1); };
  std::mt19937_64 rng(34);
  std::set<std::string> stable_set;
  // 40 byte values spread over the whole range; the second byte from 12 of them: a NODE48 root
  // with NODE16 children whose subtrees are leaf arrays (more than 48 would make the root a
  // NODE256, more than 64 keys below a byte an inner node).
  auto alpha = [](uint64_t i) { return static_cast<char>((i % 40) * 6 + 0x83); };
  while (stable_set.size() < 2800) {
    std::string k(1 + rng() % 12, '\0');
    for (size_t j = 0; j < k.size(); ++j) k[j] = alpha(j == 1 ? rng() % 12 : rng());
    stable_set.insert(k);
  }
  for (int i = 0; i < 200; ++i)  // and a NODE256 below "\x83\x83"
    stable_set.insert(wort::test::Cat("\x83\x83", static_cast<char>(i * 5 / 4), i % 2 ? "" : "\xff\x00"));
  const std::vector<std::string> stable(stable_set.begin(), stable_set.end());
  for (const auto& k : stable) ASSERT_TRUE(f.idx().Insert(k, value_of(k)).ok());
  std::vector<std::vector<std::string>> churn(kWriters);
  std::set<std::string> ever(stable_set);
  for (int w = 0; w < kWriters; ++w)
    while (churn[w].size() < 600) {
      const std::string& s = stable[rng() % stable.size()];
      std::string k = s.substr(0, rng() % (s.size() + 1));
      const int extra = 1 + static_cast<int>(rng() % 4);
      for (int j = 0; j < extra; ++j)  // any byte past the second, else one of the 40
        k.push_back(k.size() >= 2 && rng() % 3 == 0 ? static_cast<char>(rng()) : alpha(rng()));
      if (ever.insert(k).second) churn[w].push_back(k);
    }
  std::vector<std::string> never;
  while (never.size() < 2000) {
    const std::string& s = stable[rng() % stable.size()];
    std::string k = s.substr(0, rng() % (s.size() + 1));
    k.push_back(static_cast<char>(rng()));
    if (!ever.count(k)) never.push_back(k);
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> lookups{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; ++w)
    ts.emplace_back([&, w] {
      for (int r = 0; r < rounds; ++r) {
        for (const auto& k : churn[w])
          if (Status s = f.idx().Insert(k, value_of(k)); !s.ok()) ADD_FAILURE() << s.ToString();
        for (size_t i = 0; i < churn[w].size(); ++i)  // half the rounds remove in another order
          if (Status s = f.idx().Remove(churn[w][r % 2 ? churn[w].size() - 1 - i : i]); !s.ok())
            ADD_FAILURE() << s.ToString();
      }
    });
  for (int t = 0; t < kReaders; ++t)
    ts.emplace_back([&, t] {
      std::mt19937_64 r(t + 100);
      while (!stop.load(std::memory_order_acquire)) {
        uint64_t v = 0;
        const std::string& k = stable[r() % stable.size()];
        if (Status s = f.idx().Lookup(k, &v); !s.ok() || v != value_of(k)) {
          ADD_FAILURE() << "stable key of " << k.size() << " bytes read as " << s.ToString();
          return;
        }
        const std::string& n = never[r() % never.size()];
        if (f.idx().Lookup(n, &v).ok()) {
          ADD_FAILURE() << "a key never inserted was found";
          return;
        }
        const auto& cw = churn[r() % kWriters];
        const std::string& c = cw[r() % cw.size()];
        if (f.idx().Lookup(c, &v).ok() && v != value_of(c)) {
          ADD_FAILURE() << "a churn key read with another key's value";
          return;
        }
        lookups.fetch_add(1, std::memory_order_relaxed);
      }
    });
  for (int w = 0; w < kWriters; ++w) ts[w].join();
  stop.store(true, std::memory_order_release);
  for (size_t t = kWriters; t < ts.size(); ++t) ts[t].join();
  EXPECT_GT(lookups.load(), 0u);
  uint64_t counts[8] = {};
  Tree(f).CountNodeTypes(counts);  // nodes are never shrunk: the grown types stay
  EXPECT_GT(counts[roart::kN16], 0u);
  EXPECT_GT(counts[roart::kN48], 0u);
  EXPECT_GT(counts[roart::kN256], 0u);
  EXPECT_GT(counts[roart::kLeafArray], 0u);
  for (const auto& k : stable) {
    uint64_t v = 0;
    ASSERT_TRUE(f.idx().Lookup(k, &v).ok());
    ASSERT_EQ(v, value_of(k));
  }
  for (const auto& k : never) {
    uint64_t v = 0;
    ASSERT_FALSE(f.idx().Lookup(k, &v).ok());
  }
  EXPECT_EQ(f.idx().Size(), stable.size());
  f.ExpectCheckOk("after lookups beside every write path");
  f.Reopen();
  f.ExpectCheckOk("reopened");
}

}  // namespace wort::art::test

namespace wort::art::test {

// The value of key k in round r: its hash in bits 16-47, so a reader that pairs a key with
// another key's value (a torn or reused SlotKV) is caught.
static uint64_t Tag(std::string_view k) { return (std::hash<std::string_view>()(k) & 0xffffffffu) << 16; }
static bool Mine(std::string_view k, uint64_t v) { return (v & ~uint64_t(0xffff)) == Tag(k); }

// The two RoartConcurrent tests below: two writers insert their churn keys (each then found by
// its writer), upsert them and every 7th stable key, and remove them, `rounds` times, while two
// readers look up stable keys (always found, with their own value) and churn keys (only ever
// with their own value) and a scanner reads the range of keys under `prefix` (every stable key,
// in order, each with its own value). The stable keys are in the tree; `all` holds every key.
static void ChurnBesideLookupsAndScans(PoolFixture& f, const std::vector<std::string>& stable,
                                       const std::vector<std::string> (&churn)[2], const std::set<std::string>& all,
                                       char prefix, int rounds, const char* what) {
  constexpr int kWriters = 2, kReaders = 2;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> lookups{0}, scans{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; ++w)
    ts.emplace_back([&, w] {
      for (int r = 0; r < rounds; ++r) {
        for (const auto& k : churn[w])
          if (Status s = f.idx().Insert(k, Tag(k) | uint64_t(r)); !s.ok()) ADD_FAILURE() << s.ToString();
        for (const auto& k : churn[w]) {  // acknowledged: found, beside the other writer's rebuilds
          uint64_t v = 0;
          if (Status s = f.idx().Lookup(k, &v); !s.ok() || !Mine(k, v)) ADD_FAILURE() << "own key " << k.size() << " bytes: " << s.ToString();
        }
        for (const auto& k : churn[w])  // an upsert of a present inline key: its value word
          if (Status s = f.idx().Upsert(k, Tag(k) | uint64_t(r + 1000)); !s.ok()) ADD_FAILURE() << s.ToString();
        for (size_t i = 0; i < stable.size(); i += 7)  // and of stable keys, beside the readers
          if (Status s = f.idx().Upsert(stable[i], Tag(stable[i]) | uint64_t(r)); !s.ok()) ADD_FAILURE() << s.ToString();
        for (size_t i = 0; i < churn[w].size(); ++i)
          if (Status s = f.idx().Remove(churn[w][r % 2 ? churn[w].size() - 1 - i : i]); !s.ok()) ADD_FAILURE() << s.ToString();
      }
    });
  for (int t = 0; t < kReaders; ++t)
    ts.emplace_back([&, t] {
      std::mt19937_64 r(t + 7);
      while (!stop.load(std::memory_order_acquire)) {
        uint64_t v = 0;
        const std::string& k = stable[r() % stable.size()];
        if (Status s = f.idx().Lookup(k, &v); !s.ok() || !Mine(k, v)) {
          ADD_FAILURE() << "stable key read as " << s.ToString() << " value " << v;
          return;
        }
        const auto& cw = churn[r() % kWriters];
        const std::string& c = cw[r() % cw.size()];
        if (f.idx().Lookup(c, &v).ok() && !Mine(c, v)) {
          ADD_FAILURE() << "a churn key read with another key's value";
          return;
        }
        lookups.fetch_add(1, std::memory_order_relaxed);
      }
    });
  ts.emplace_back([&] {
    const std::set<std::string> must_all(stable.begin(), stable.end());
    while (!stop.load(std::memory_order_acquire)) {
      std::set<std::string> must = must_all;
      std::string prev;
      bool first = true, ok = true;
      const std::string lo(1, prefix), hi(1, static_cast<char>(prefix + 1));
      const std::string_view end(hi);
      Status s = f.idx().Scan(lo, &end, SIZE_MAX, [&](std::string_view k, uint64_t v) {
        if ((!first && CompareKeys(prev, k) >= 0) || !Mine(k, v) || !all.count(std::string(k))) ok = false;
        first = false;
        prev.assign(k);
        must.erase(std::string(k));
        return true;
      });
      if (!s.ok() || !ok || !must.empty()) {
        ADD_FAILURE() << "scan: " << s.ToString() << (ok ? "" : ", out of order or a foreign value") << ", "
                      << must.size() << " stable keys missing";
        return;
      }
      scans.fetch_add(1, std::memory_order_relaxed);
    }
  });
  for (int w = 0; w < kWriters; ++w) ts[w].join();
  stop.store(true, std::memory_order_release);
  for (size_t t = kWriters; t < ts.size(); ++t) ts[t].join();
  EXPECT_GT(lookups.load(), 0u);
  EXPECT_GT(scans.load(), 0u);
  EXPECT_EQ(f.idx().Size(), stable.size());
  for (const auto& k : stable) {
    uint64_t v = 0;
    ASSERT_TRUE(f.idx().Lookup(k, &v).ok());
    EXPECT_TRUE(Mine(k, v));
  }
  f.ExpectCheckOk(what);
  f.Reopen();
  f.ExpectCheckOk("reopened");
  EXPECT_EQ(f.Allocated(), f.Reachable());
}


// Format 3 (issue 34): inline keys (at most 8 bytes, in the leaf array) beside lookups and scans
// that read no version (lookups) or validate their batch (scans). Two writers upsert, remove and
// insert again keys of 1..8 bytes (bytes over the whole range) in a few arrays that fill, grow,
// compact and split; every value carries its key's hash and a round, so a reader that paired a
// key with another key's value (a torn or reused SlotKV) is caught. Stable keys must always be
// found by lookups and by every scan of their range, in order, each with a value of its own.
// scripts/tsan.sh runs it (RoartConcurrent.*).
TEST(RoartConcurrent, InlineKeysBesideLookupsAndScans) {
  PoolFixture f("roart");
  const int rounds = 60 / wort::test::kSanitizerScale + 2;
  // Keys below 6 two-byte prefixes "\xb5" + p: stable ones and churn ones per writer.
  std::mt19937_64 rng(48);
  std::set<std::string> all;
  auto make = [&] {
    std::string k = wort::test::Cat("\xb5", static_cast<char>(0x80 + rng() % 6));
    const size_t len = 2 + rng() % 7;  // 2..8 bytes: inline
    while (k.size() < len) k.push_back(static_cast<char>(rng()));
    return k;
  };
  std::vector<std::string> stable, churn[2];
  while (stable.size() < 150)
    if (std::string k = make(); all.insert(k).second) stable.push_back(k);
  for (auto& c : churn)
    while (c.size() < 120)
      if (std::string k = make(); all.insert(k).second) c.push_back(k);
  for (const auto& k : stable) ASSERT_TRUE(f.idx().Insert(k, Tag(k)).ok());
  ChurnBesideLookupsAndScans(f, stable, churn, all, '\xb5', rounds, "after inline churn");
}

// Format 4 (issue 34): arrays of long stable keys have no SlotKV area; two writers insert
// churn keys, the long ones first (free slots: short keys get leaves in such arrays), then the
// short ones (growth by a short key: the array is replaced by one with the area and the short
// keys' leaves copied inline), upsert and remove them (full arrays with dead slots are
// compacted, dropping the area when no short key is left), while two readers look keys up
// (every stable key with its value, a churn key only with its own) and a scanner reads the
// range in order. In scripts/tsan.sh through RoartConcurrent.*.
TEST(RoartConcurrent, SlotKvAreaChangesBesideLookupsAndScans) {
  PoolFixture f("roart");
  const int rounds = 60 / wort::test::kSanitizerScale + 2;
  // Keys below 6 two-byte prefixes "\xc6" + p: long stable ones, long and short churn ones.
  std::mt19937_64 rng(65);
  std::set<std::string> all;
  auto make = [&](bool shrt) {
    std::string k = wort::test::Cat("\xc6", static_cast<char>(0x80 + rng() % 6));
    const size_t len = shrt ? 3 + rng() % 6 : 9 + rng() % 20;  // 3..8 bytes: inline; 9..28: a leaf
    while (k.size() < len) k.push_back(static_cast<char>(rng()));
    return k;
  };
  std::vector<std::string> stable, churn[2];
  while (stable.size() < 30)
    if (std::string k = make(false); all.insert(k).second) stable.push_back(k);
  for (auto& c : churn) {
    while (c.size() < 60)  // the long ones first
      if (std::string k = make(false); all.insert(k).second) c.push_back(k);
    while (c.size() < 120)
      if (std::string k = make(true); all.insert(k).second) c.push_back(k);
  }
  for (const auto& k : stable) ASSERT_TRUE(f.idx().Insert(k, Tag(k)).ok());
  ChurnBesideLookupsAndScans(f, stable, churn, all, '\xc6', rounds, "after churn of the SlotKV areas");
}

}  // namespace wort::art::test
