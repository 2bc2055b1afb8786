// CCEH and CCEH(C) specific tests: segment splits and directory doubling with tiny segments,
// the directory recovery of cut splits (Algorithm 4), two threads, visit beside writers,
// read-only opens.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include "hash/hash_test_util.h"
#include "index/hash/cceh.h"
#include "sync/sync.h"

namespace wort::hash::test {
namespace {

// Parameters: a kind, or "cceh:VARIANT" (WORT_CCEH_VARIANT, cceh.h "Variants": lsb, exth).
std::string KindOf(const std::string& p) { return p.substr(0, p.find(':')); }
std::string VariantOf(const std::string& p) {
  const size_t c = p.find(':');
  return c == std::string::npos ? "msb" : p.substr(c + 1);
}

class CcehTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Tiny segments (4 buckets of 4 slots) and a one-segment table: splits and doublings early.
  ScopedEnv seg_{"WORT_CCEH_SEGMENT_BYTES", "256"};
  ScopedEnv cap_{"WORT_HASH_CAPACITY", "16"};
  ScopedEnv variant_{"WORT_CCEH_VARIANT", VariantOf(GetParam())};
  const std::string kind_ = KindOf(GetParam());
  const bool lsb_ = VariantOf(GetParam()) != "msb";
};

uint64_t Rev(uint64_t x, unsigned bits) {
  uint64_t r = 0;
  for (unsigned i = 0; i < bits; ++i) r |= ((x >> i) & 1) << (bits - 1 - i);
  return r;
}
// The directory indexes naming the segment whose run starts at entry i (depth L, global g), in
// run order (cceh.h: MSB adjacent, LSB every 2^L-th), and that segment's pattern.
std::vector<uint64_t> RunIndexes(bool lsb, uint64_t i, unsigned L, unsigned g) {
  std::vector<uint64_t> out;
  for (uint64_t k = 0; k < (1ull << (g - L)); ++k) out.push_back(lsb ? i + (k << L) : i + k);
  return out;
}
bool StartsRun(bool lsb, uint64_t i, unsigned L, unsigned g) {
  return lsb ? (i >> L) == 0 : i % (1ull << (g - L)) == 0;
}
uint64_t PatternAt(bool lsb, uint64_t i, unsigned L, unsigned g) { return lsb ? Rev(i, L) : i >> (g - L); }

const HashRoot* RootOf(Pool& pool) {
  RootInfo ri;
  EXPECT_TRUE(pool.FindRoot("idx", &ri).ok());
  return pool.at<const HashRoot>(ri.off);
}
const CcehDirectory* DirOf(Pool& pool) { return pool.at<const CcehDirectory>(RootOf(pool)->table); }

TEST_P(CcehTest, SplitsAndDoublings) {
  HashFixture f(kind_, KeyType::kU64);
  EXPECT_EQ(DirOf(f.pool())->depth, 0u);
  std::mt19937_64 rng(1);
  std::unordered_map<uint64_t, uint64_t> model;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t k = rng(), v = rng();
    ASSERT_TRUE(f.idx().Insert(k, v).ok());
    model[k] = v;
  }
  const HashCounters c = GetHashCounters(f.idx());
  EXPECT_GT(c.splits, 1000u);
  EXPECT_GE(c.doublings, 8u);
  EXPECT_GE(DirOf(f.pool())->depth, 8u);
  EXPECT_EQ(f.idx().Size(), model.size());
  f.ExpectCheckOk("after growth");
  // Load factor: a segment split only when a 4-bucket window is full.
  const IndexStats st = f.idx().Stats();
  EXPECT_GT(double(model.size()) / (st.inner_nodes * 16.0), 0.35) << st.inner_nodes << " segments";
  f.Reopen();
  for (auto& [k, v] : model) {
    uint64_t got = 0;
    ASSERT_TRUE(f.idx().Lookup(k, &got).ok());
    ASSERT_EQ(got, v);
  }
  f.ExpectCheckOk("after reopen");
}

// Builds by hand the states a crash in the middle of a split's in-place directory update leaves:
// the new segment(s) written and persisted, then (case 0) only the rightmost entry of the run
// switched to (S1, L+1), (case 1) the whole right half switched, (case 2) the right half and the
// rightmost entry of the left half (:= (S, L+1) for CCEH, (S0, L+1) for CCEH(C)). Recovery must
// make the directory whole (CCEH: always completing the split; CCEH(C): completing it in case 2,
// rolling it back otherwise), lose no key and leak nothing.
TEST_P(CcehTest, RecoversCutSplit) {
  const bool cow = kind_ == "cceh-cow";
  for (int cut = 0; cut < 3; ++cut) {
    HashFixture f(kind_, KeyType::kU64);
    std::mt19937_64 rng(cut + 1);
    std::unordered_map<uint64_t, uint64_t> model;
    // Grow until some segment has a run of >= 4 entries (local depth <= G - 2).
    const CcehDirectory* d = nullptr;
    uint64_t run = 0, stride = 0;
    for (int i = 0; i < 100000 && stride < 4; ++i) {
      const uint64_t k = rng(), v = rng();
      ASSERT_TRUE(f.idx().Insert(k, v).ok());
      model[k] = v;
      if (i % 64 != 0) continue;
      d = DirOf(f.pool());
      const unsigned g = static_cast<unsigned>(d->depth);
      for (uint64_t j = 0; j < (1ull << g); ++j) {
        const unsigned dj = EntryDepth(d->entries()[j]);
        if (StartsRun(lsb_, j, dj, g) && g - dj >= 2) {
          run = j;
          stride = 1ull << (g - dj);
          break;
        }
      }
    }
    ASSERT_GE(stride, 4u);
    d = DirOf(f.pool());
    const uint64_t half = stride / 2;
    const uint64_t e = d->entries()[run];
    const unsigned L = EntryDepth(e);
    const unsigned G = static_cast<unsigned>(d->depth);
    const HashRoot* root = RootOf(f.pool());
    EXPECT_EQ(root->param[1], lsb_ ? (VariantOf(GetParam()) == "exth" ? 2u : 1u) : 0u) << "the variant in the root";
    const uint64_t seg_bytes = (1ull << root->param[0]) * sizeof(CcehBucket);
    const uint64_t pattern = PatternAt(lsb_, run, L, G);
    // The run in split order: the right half (the new segment's: MSB the upper half, LSB the odd
    // positions) and the left half, each as written, last entry first.
    const std::vector<uint64_t> idx = RunIndexes(lsb_, run, L, G);
    std::vector<uint64_t> rhalf, lhalf;
    for (uint64_t k = 0; k < idx.size(); ++k)
      ((lsb_ ? (k & 1) != 0 : k >= half) ? rhalf : lhalf).push_back(idx[k]);
    // The split's new segment(s): records of S whose bit L is 1 (right) or 0 (left, CCEH(C)).
    auto make_half = [&](unsigned bit) {
      uint64_t off = 0;
      EXPECT_TRUE(f.pool().allocator().AllocZeroed(seg_bytes, &off).ok());
      const auto* src = f.pool().at<const CcehBucket>(EntrySegment(e));
      auto* dst = f.pool().at<CcehBucket>(off);
      for (uint64_t b = 0; b < seg_bytes / sizeof(CcehBucket); ++b)
        for (unsigned j = 0; j < kSlotsPerBucket; ++j) {
          const uint64_t w = src[b].slot[j].key;
          if (w != 0 && Prefix(w, L) == pattern && ((w >> (63 - L)) & 1) == bit) dst[b].slot[j] = src[b].slot[j];
        }
      pm::persist(dst, seg_bytes);
      return off;
    };
    const uint64_t right = make_half(1);
    const uint64_t left = cut == 2 && cow ? make_half(0) : EntrySegment(e);
    auto* ent = const_cast<uint64_t*>(d->entries());
    const uint64_t nright = cut == 0 ? 1 : half;
    for (uint64_t k = 0; k < nright; ++k) pm::store8(&ent[rhalf[half - 1 - k]], MakeEntry(right, L + 1));
    if (cut == 2) pm::store8(&ent[lhalf[half - 1]], MakeEntry(left, L + 1));
    for (uint64_t i : idx) pm::persist(&ent[i], 8);

    f.CrashAndReopen();
    d = DirOf(f.pool());
    if (cow && cut < 2) {
      for (uint64_t k : idx) EXPECT_EQ(d->entries()[k], e) << "cut " << cut << ": rolled back";
    } else {
      for (uint64_t k : lhalf) EXPECT_EQ(d->entries()[k], MakeEntry(left, L + 1)) << "cut " << cut;
      for (uint64_t k : rhalf) EXPECT_EQ(d->entries()[k], MakeEntry(right, L + 1)) << "cut " << cut;
    }
    f.ExpectCheckOk("after recovery of cut " + std::to_string(cut));
    EXPECT_EQ(f.idx().Size(), model.size());
    for (auto& [k, v] : model) {
      uint64_t got = 0;
      ASSERT_TRUE(f.idx().Lookup(k, &got).ok());
      ASSERT_EQ(got, v);
    }
    for (int i = 0; i < 2000; ++i) ASSERT_TRUE(f.idx().Insert(rng(), 1).ok());
    f.ExpectCheckOk("after inserts, cut " + std::to_string(cut));
  }
}

// A directory that is neither whole nor a cut split is reported, not "repaired".
TEST_P(CcehTest, CorruptDirectoryRefused) {
  HashFixture f(kind_, KeyType::kU64);
  for (uint64_t i = 0; i < 3000; ++i) ASSERT_TRUE(f.idx().Insert(i, i).ok());
  const CcehDirectory* d = DirOf(f.pool());
  ASSERT_GE(d->depth, 2u);
  auto* ent = const_cast<uint64_t*>(d->entries());
  // Give an entry of depth G the depth G - 1: a run of 2^(G-(G-1)) = 2 entries whose other entry
  // names the split's other half (MSB: the entry beside it; LSB and EXTH: the one 2^(G-1) away)
  // - a run that is not whole. (It took an odd entry before: in LSB mode the two halves of a
  // split sit 2^(G-1) apart, both even or both odd, and with every full-depth segment at even
  // entries there was none - a CI failure, 1 run in many.)
  uint64_t j = 0;
  while (j < (1ull << d->depth) && EntryDepth(ent[j]) != d->depth) ++j;
  ASSERT_LT(j, 1ull << d->depth);
  const uint64_t e1 = ent[j];
  pm::store8(&ent[j], MakeEntry(EntrySegment(e1), static_cast<unsigned>(d->depth - 1)));
  std::string report;
  EXPECT_FALSE(f.idx().Check(&report).ok());
  EXPECT_NE(report.find("C2"), std::string::npos) << report;
  pm::store8(&ent[j], e1);
  f.Reopen();  // the count cached by the first Check was taken over the broken directory
  f.ExpectCheckOk("restored");
}

// Two threads insert, look up and remove disjoint keys while splits and doublings happen; a
// third set of keys, loaded first, must be found by every lookup throughout.
TEST_P(CcehTest, TwoThreads) {
  HashFixture f(kind_, KeyType::kU64);
  const uint64_t kStable = 2000, kPer = 15000;
  for (uint64_t i = 0; i < kStable; ++i) ASSERT_TRUE(f.idx().Insert(i, i * 3).ok());
  std::atomic<uint64_t> errors{0};
  auto worker = [&](uint64_t t) {
    std::mt19937_64 rng(t);
    for (uint64_t i = 0; i < kPer; ++i) {
      const uint64_t k = (t + 1) * 1000000 + i;
      if (!f.idx().Insert(k, k).ok()) ++errors;
      uint64_t v = 0;
      if (!f.idx().Lookup(k, &v).ok() || v != k) ++errors;
      const uint64_t s = rng() % kStable;
      if (!f.idx().Lookup(s, &v).ok() || v != s * 3) ++errors;
      if (i % 3 == 0) {
        if (!f.idx().Remove(k).ok()) ++errors;
        if (!f.idx().Lookup(k, &v).IsNotFound()) ++errors;
      }
    }
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_EQ(f.idx().Size(), kStable + 2 * (kPer - (kPer + 2) / 3));
  f.ExpectCheckOk("two threads");
  EXPECT_GT(GetHashCounters(f.idx()).doublings, 4u);
}

// Readers (lock-free in CCEH(C)) beside a writer that splits: never miss a stable key.
TEST_P(CcehTest, ReaderBesideSplittingWriter) {
  HashFixture f(kind_, KeyType::kBytes);
  std::vector<std::string> stable;
  for (int i = 0; i < 1000; ++i) stable.push_back("stable-key-" + std::to_string(i) + (i % 2 ? "" : "-long-tail-xx"));
  for (size_t i = 0; i < stable.size(); ++i) ASSERT_TRUE(f.idx().Insert(stable[i], i).ok());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> errors{0}, reads{0};
  std::thread reader([&] {
    std::mt19937_64 rng(9);
    while (!stop.load()) {
      const size_t i = rng() % stable.size();
      uint64_t v = 0;
      if (!f.idx().Lookup(stable[i], &v).ok() || v != i) ++errors;
      ++reads;
    }
  });
  for (int i = 0; i < 20000; ++i) {
    const std::string k = "churn-" + std::to_string(i) + std::string(i % 3 ? 0 : 20, 'z');
    ASSERT_TRUE(f.idx().Insert(k, i).ok());
    if (i % 2) {
      ASSERT_TRUE(f.idx().Remove(k).ok());
    }
  }
  stop = true;
  reader.join();
  EXPECT_EQ(errors.load(), 0u) << reads.load() << " reads";
  f.ExpectCheckOk("reader beside writer");
}

// Stress with checked results (issue 19), byte-string keys over the full byte range: two
// writers race to insert the same keys (exactly one insert of each key succeeds, the other gets
// AlreadyExists) while splits and doublings happen, and upsert stable keys between two values;
// a reader beside them must find every stable key, always with one of its two values (never a
// torn or foreign value), and every raced key it finds must have one of the two writers' values.
TEST_P(CcehTest, StressRacingInsertsAndReaders) {
  HashFixture f(kind_, KeyType::kBytes);
  auto key = [](const char* tag, uint64_t i) {
    std::string k(tag);
    for (int b = 0; b < 8; ++b) k.push_back(static_cast<char>((i * 0x9e3779b97f4a7c15ull) >> (8 * b)));  // 0x00..0xff
    if (i % 5 == 0) k.resize(3);  // short keys too (inline words), and prefixes of others
    return k;
  };
  constexpr uint64_t kStable = 500, kRaced = 12000;
  for (uint64_t i = 0; i < kStable; ++i) ASSERT_TRUE(f.idx().Upsert(key("s", i), i * 2).ok());
  std::vector<std::atomic<int>> wins(kRaced);
  std::atomic<uint64_t> errors{0}, reads{0};
  std::atomic<int> writers_done{0};
  auto writer = [&](uint64_t t) {
    for (uint64_t i = 0; i < kRaced; ++i) {
      const uint64_t j = t == 0 ? i : kRaced - 1 - i;  // meet in the middle: real races there
      Status s = f.idx().Insert(key("r", j), j * 2 + t);
      if (s.ok()) ++wins[j];
      else if (!s.IsAlreadyExists()) ++errors;
      if (i % 4 == t) {
        const uint64_t k = i % kStable;
        if (!f.idx().Upsert(key("s", k), k * 2 + (i / 4) % 2).ok()) ++errors;
      }
    }
    ++writers_done;
  };
  std::thread reader([&] {
    std::mt19937_64 rng(5);
    while (writers_done.load() < 2) {
      const uint64_t k = rng() % kStable;
      uint64_t v = ~0ull;
      if (!f.idx().Lookup(key("s", k), &v).ok() || (v != k * 2 && v != k * 2 + 1)) ++errors;
      const uint64_t j = rng() % kRaced;
      Status s = f.idx().Lookup(key("r", j), &v);
      if (s.ok() ? (v != j * 2 && v != j * 2 + 1) : !s.IsNotFound()) ++errors;
      ++reads;
    }
  });
  std::thread a(writer, 0), b(writer, 1);
  a.join();
  b.join();
  reader.join();
  EXPECT_EQ(errors.load(), 0u) << reads.load() << " reads";
  for (uint64_t j = 0; j < kRaced; ++j) ASSERT_EQ(wins[j].load(), 1) << "key " << j;
  EXPECT_EQ(f.idx().Size(), kStable + kRaced);
  for (uint64_t j = 0; j < kRaced; ++j) {
    uint64_t v = 0;
    ASSERT_TRUE(f.idx().Lookup(key("r", j), &v).ok()) << j;
    EXPECT_TRUE(v == j * 2 || v == j * 2 + 1);
  }
  f.ExpectCheckOk("racing inserts");  // drains the blocks retired while the reader was inside
}

// h72: updates of a few hot keys by three threads beside two readers, while a fourth thread
// inserts and removes other keys (splits and doublings of the hot keys' segments: an update,
// which leaves the segment's version word alone, must still exclude them). Byte-string keys
// over the full byte range (short inline words, 8-byte keys and long ones with key blocks). A
// value names its key, its writer and the writer's sequence number for that key. Every read
// returns a value some writer wrote for that key (key and writer right, its number already
// started by that writer), and a reader never sees a writer's value for a key older than one it
// saw before (a value copied by a split and then updated in the old segment would come back).
// At the end every hot key holds the last value of one of its writers.
TEST_P(CcehTest, HotKeyUpdatesBesideReadersAndSplits) {
  HashFixture f(kind_, KeyType::kBytes);
  constexpr uint64_t kHot = 32, kWriters = 3, kReaders = 2, kInitial = 0xff;
  const uint64_t per_writer = 60000 / ::wort::test::kSanitizerScale;
  auto hot = [](uint64_t k) {
    std::string s(1, static_cast<char>(0x80 + k));
    const uint64_t x = (k + 1) * 0x9e3779b97f4a7c15ull;
    for (int b = 0; b < 8; ++b) s.push_back(static_cast<char>(x >> (8 * b)));  // 0x00..0xff
    if (k % 3 == 1) s.resize(4);                                             // an inline word
    if (k % 3 == 2) s.append(20, static_cast<char>(0xf0 + k % 16));          // a key block
    return s;
  };
  auto enc = [](uint64_t k, uint64_t t, uint64_t seq) { return (k + 1) << 40 | t << 32 | seq; };
  for (uint64_t k = 0; k < kHot; ++k) ASSERT_TRUE(f.idx().Insert(hot(k), enc(k, kInitial, 0)).ok());
  // started[t][k]: the sequence number of writer t's latest update of key k, stored before the
  // update (so a reader that finds that value afterwards also sees the number).
  std::vector<std::atomic<uint64_t>> started(kWriters * kHot);
  for (auto& x : started) x = 0;
  std::atomic<uint64_t> errors{0}, reads{0}, churn{0};
  std::atomic<int> writers_done{0};
  auto note = [&](const std::string& what) {
    if (errors.fetch_add(1) < 5) ADD_FAILURE() << what;
  };
  auto writer = [&](uint64_t t) {
    std::mt19937_64 rng(t + 17);
    for (uint64_t i = 0; i < per_writer; ++i) {
      const uint64_t k = rng() % 2 ? rng() % 3 : rng() % kHot;  // half of them on three keys
      const uint64_t seq = started[t * kHot + k].load(std::memory_order_relaxed) + 1;
      started[t * kHot + k].store(seq, std::memory_order_release);
      bool inserted = true;
      const Status s = f.idx().Upsert(hot(k), enc(k, t, seq), &inserted);
      if (!s.ok() || inserted) note("upsert of hot key " + std::to_string(k) + ": " + s.ToString());
      // Read back: this value, or another writer's (a later one); never one of ours before it.
      uint64_t v = 0;
      if (!f.idx().Lookup(hot(k), &v).ok()) {
        note("hot key " + std::to_string(k) + " not found after its update");
      } else if (((v >> 32) & 0xff) == t ? v != enc(k, t, seq) : ((v >> 32) & 0xff) == kInitial) {
        note("hot key " + std::to_string(k) + ": update " + std::to_string(seq) + " of writer " + std::to_string(t) +
             " lost (read back " + std::to_string(v) + ")");
      }
    }
    ++writers_done;
  };
  auto reader = [&](uint64_t r) {
    std::mt19937_64 rng(r + 31);
    std::vector<uint64_t> seen(kWriters * kHot, 0);
    while (writers_done.load() < static_cast<int>(kWriters)) {
      const uint64_t k = rng() % 2 ? rng() % 3 : rng() % kHot;
      uint64_t v = 0;
      if (!f.idx().Lookup(hot(k), &v).ok()) {
        note("hot key " + std::to_string(k) + " not found");
        continue;
      }
      const uint64_t vk = (v >> 40) - 1, t = (v >> 32) & 0xff, seq = v & 0xffffffffu;
      if (vk != k || (t != kInitial && t >= kWriters) || (t == kInitial && seq != 0)) {
        note("hot key " + std::to_string(k) + ": a value no writer wrote for it: " + std::to_string(v));
      } else if (t != kInitial) {
        if (seq > started[t * kHot + k].load(std::memory_order_acquire))
          note("hot key " + std::to_string(k) + ": a value its writer had not started");
        if (seq < seen[t * kHot + k])
          note("hot key " + std::to_string(k) + ": writer " + std::to_string(t) + "'s value " + std::to_string(seq) +
               " after its later " + std::to_string(seen[t * kHot + k]));
        seen[t * kHot + k] = std::max(seen[t * kHot + k], seq);
      }
      ++reads;
    }
  };
  std::thread inserter([&] {
    // Other keys into the same table: tiny segments split and the directory doubles throughout.
    for (uint64_t i = 0; writers_done.load() < static_cast<int>(kWriters); ++i) {
      std::string k(1, static_cast<char>(i * 7));
      for (int b = 0; b < 8; ++b) k.push_back(static_cast<char>((i * 0xd1b54a32d192ed03ull) >> (8 * b)));
      if (i % 4 == 0) k.append(12, '\xee');
      if (!f.idx().Insert(k, i).ok()) note("insert of churn key " + std::to_string(i));
      if (i % 2 == 0 && !f.idx().Remove(k).ok()) note("remove of churn key " + std::to_string(i));
      churn = i + 1;
    }
  });
  std::vector<std::thread> ts;
  for (uint64_t r = 0; r < kReaders; ++r) ts.emplace_back(reader, r);
  for (uint64_t t = 0; t < kWriters; ++t) ts.emplace_back(writer, t);
  for (auto& th : ts) th.join();
  inserter.join();
  EXPECT_EQ(errors.load(), 0u) << reads.load() << " reads";
  EXPECT_GT(reads.load(), 0u);
  EXPECT_GT(GetHashCounters(f.idx()).splits, 10u) << churn.load() << " churn inserts";
  for (uint64_t k = 0; k < kHot; ++k) {
    uint64_t v = 0;
    ASSERT_TRUE(f.idx().Lookup(hot(k), &v).ok()) << k;
    bool last = true;  // never updated: the initial value
    for (uint64_t t = 0; t < kWriters; ++t) last &= started[t * kHot + k].load() == 0;
    bool ok = last && v == enc(k, kInitial, 0);
    for (uint64_t t = 0; t < kWriters; ++t)
      if (const uint64_t n = started[t * kHot + k].load()) ok |= v == enc(k, t, n);
    EXPECT_TRUE(ok) << "hot key " << k << " holds " << v << ", not the last value of any of its writers";
  }
  EXPECT_EQ(f.idx().Size(), kHot + churn.load() / 2);
  f.ExpectCheckOk("hot key updates");
}

// h72: an update takes its segment's lock (not its version word): it still waits for a split of
// that segment. A pm hook stops an insert inside its split, after the records were copied to the
// new segment(s) and before the directory names them, and lets another thread update every key
// of the table meanwhile; once the split is done every key must hold its update (an update
// made in the old segment after the copy would be lost for the keys that moved).
TEST_P(CcehTest, UpdateWaitsForASplitOfItsSegment) {
  HashFixture f(kind_, KeyType::kBytes);
  auto key = [](uint64_t i) {
    std::string k = "\x80\xffsplit-";
    for (int b = 0; b < 6; ++b) k.push_back(static_cast<char>((i * 0x9e3779b97f4a7c15ull) >> (8 * b)));
    if (i % 3 == 0) k.append(12, '\xc3');
    return k;
  };
  struct StopInSplit : pm::Hook {
    std::thread::id splitter;
    std::atomic<bool> armed{false}, stopped{false}, go{false}, done{false};
    void OnFlushLine(const void*, const std::source_location& w) override { Stop(w); }
    void OnFence(const std::source_location& w) override { Stop(w); }
    void Stop(const std::source_location& w) {
      if (std::this_thread::get_id() != splitter || !armed.load()) return;
      if (std::string_view(w.function_name()).find("Split") == std::string_view::npos) return;
      armed = false;
      stopped = true;
      go = true;  // the new segment is written, the directory does not name it yet
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      while (!done.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    }
  };
  uint64_t n = 0;
  int splits_stopped = 0;
  for (int round = 1; splits_stopped < 3 && n < 2000; ++round) {
    StopInSplit h;
    h.splitter = std::this_thread::get_id();
    const uint64_t updating = n;  // the keys present before this insert
    std::atomic<uint64_t> errors{0};
    std::thread updater([&] {
      while (!h.go.load()) std::this_thread::yield();
      for (uint64_t i = 0; i < updating; ++i)
        if (!f.idx().Upsert(key(i), i + 1000000 * round).ok()) ++errors;
      h.done = true;
    });
    pm::Hook* prev = pm::SetHook(&h);
    h.armed = true;
    ASSERT_TRUE(f.idx().Insert(key(n), n + 1000000 * round).ok());
    pm::SetHook(prev);
    ++n;
    h.go = true;  // no split this time: the updater updates the keys now
    updater.join();
    ASSERT_EQ(errors.load(), 0u);
    splits_stopped += h.stopped.load();
    uint64_t lost = 0;
    for (uint64_t i = 0; i < updating; ++i) {
      uint64_t v = 0;
      if (!f.idx().Lookup(key(i), &v).ok() || v != i + 1000000 * round) ++lost;
    }
    ASSERT_EQ(lost, 0u) << "updates lost beside the split in round " << round << " (" << updating << " keys)";
  }
  EXPECT_EQ(splits_stopped, 3);
  f.ExpectCheckOk("updates beside splits");
}

// h72: an update of a present key holds its segment's lock but not the version word lock-free
// lookups validate: a lookup of the same key while the update's value is being persisted (here:
// stopped inside its flush by a pm hook) returns at once, with the old or the new value. Before,
// it restarted until it took the segment's lock shared, i.e. it waited for the update's persist.
// (CCEH(C)'s lookups never validated a version: the same result either way.)
TEST_P(CcehTest, LookupDoesNotWaitForAnUpdatesPersist) {
  HashFixture f(kind_, KeyType::kBytes);
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) {
    std::string k = "\xff\x80upd-" + std::to_string(i);
    if (i % 2) k.append(16, static_cast<char>(0x90 + i % 64));
    keys.push_back(k);
    ASSERT_TRUE(f.idx().Insert(k, 1000 + i).ok());
  }
  struct StopInFlush : pm::Hook {
    std::thread::id updater;
    std::atomic<bool> armed{false}, stopped{false}, go{false}, done{false}, timed_out{false};
    void OnFlushLine(const void*, const std::source_location&) override { Stop(); }
    void OnFence(const std::source_location&) override { Stop(); }
    void Stop() {
      if (std::this_thread::get_id() != updater || !armed.exchange(false)) return;
      stopped = true;
      go = true;  // the value is stored, its persist not done: the reader looks up now
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (!done.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      timed_out = !done.load();
    }
  };
  for (int round = 0; round < 3; ++round) {
    const size_t i = round * 97 + 5;
    StopInFlush h;
    h.updater = std::this_thread::get_id();
    uint64_t seen = 0;
    Status ls;
    std::thread reader([&] {
      while (!h.go.load()) std::this_thread::yield();
      ls = f.idx().Lookup(keys[i], &seen);
      h.done = true;
    });
    pm::Hook* prev = pm::SetHook(&h);
    h.armed = true;
    bool inserted = true;
    const Status us = f.idx().Upsert(keys[i], 5000 + i, &inserted);
    pm::SetHook(prev);
    h.go = true;  // (no flush seen: let the reader go; the check below fails)
    reader.join();
    ASSERT_TRUE(us.ok() && !inserted) << us.ToString();
    EXPECT_TRUE(h.stopped.load()) << "the update persisted nothing";
    EXPECT_FALSE(h.timed_out.load()) << "a lookup of key " << i << " waited for an update's persist";
    ASSERT_TRUE(ls.ok()) << ls.ToString();
    EXPECT_TRUE(seen == 1000 + i || seen == 5000 + i) << seen;
    uint64_t v = 0;
    ASSERT_TRUE(f.idx().Lookup(keys[i], &v).ok());
    EXPECT_EQ(v, 5000 + i);
  }
  f.ExpectCheckOk("lookup beside an update's persist");
}

// Issue 31: many writers, each inserting enough keys that segment splits and directory
// doublings happen concurrently (inserts proceed under the old directory while a doubling builds
// the new one; split of one segment beside inserts into others). Keys are byte strings over the
// full byte range (0x00..0xff, short inline ones and long ones with key blocks), each writer's
// own, and every writer looks up what it inserted as it goes and at random keys of the others
// (found with the right value, or not found if not yet inserted). At the end: every key found
// with its value, Size exact, Check() clean, every allocated block reachable (no leak).
TEST_P(CcehTest, ManyWritersSplitAndDoubleConcurrently) {
  HashFixture f(kind_, KeyType::kBytes);
  constexpr int kThreads = 6;
  const uint64_t per = 24000 / ::wort::test::kSanitizerScale;
  auto key = [](uint64_t t, uint64_t i) {
    std::string k(1, static_cast<char>(0x80 | t));
    const uint64_t x = i * 0x9e3779b97f4a7c15ull;  // odd factor: the low 32 bits differ per i
    for (int b = 0; b < 8; ++b) k.push_back(static_cast<char>(x >> (8 * b)));  // 0x00..0xff
    if (i % 3 == 0) k.append(17, static_cast<char>(0xfe));  // long: a key block
    if (i % 7 == 0) k.resize(5);                            // short: an inline key word
    return k;
  };
  std::atomic<uint64_t> errors{0}, done[kThreads];
  for (auto& d : done) d = 0;
  const HashCounters c0 = GetHashCounters(f.idx());
  auto writer = [&](uint64_t t) {
    std::mt19937_64 rng(t + 100);
    for (uint64_t i = 0; i < per; ++i) {
      const Status s = f.idx().Insert(key(t, i), t * per + i);
      if (!s.ok() && errors.fetch_add(1) == 0) ADD_FAILURE() << "insert: " << s.ToString();  // the keys are distinct
      done[t].store(i + 1, std::memory_order_release);
      uint64_t v = 0;
      if (!f.idx().Lookup(key(t, i), &v).ok() || v != t * per + i) ++errors;
      const uint64_t o = rng() % kThreads;
      const uint64_t n = done[o].load(std::memory_order_acquire);
      if (n > 0) {
        const uint64_t j = rng() % n;
        if (!f.idx().Lookup(key(o, j), &v).ok() || v != o * per + j) ++errors;
      }
    }
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) ts.emplace_back(writer, t);
  for (auto& th : ts) th.join();
  EXPECT_EQ(errors.load(), 0u);
  const HashCounters c1 = GetHashCounters(f.idx());
  EXPECT_GT(c1.splits - c0.splits, 100u);
  EXPECT_GE(c1.doublings - c0.doublings, 5u);
  EXPECT_EQ(f.idx().Size(), kThreads * per);
  uint64_t missing = 0;
  for (uint64_t t = 0; t < kThreads; ++t)
    for (uint64_t i = 0; i < per; ++i) {
      uint64_t v = 0;
      if (!f.idx().Lookup(key(t, i), &v).ok() || v != t * per + i) ++missing;
    }
  EXPECT_EQ(missing, 0u);
  f.ExpectCheckOk("many writers");  // Check() and allocated == reachable (no leaked block)
  f.Reopen();
  EXPECT_EQ(f.idx().Size(), kThreads * per);
  f.ExpectCheckOk("many writers, reopened");
}

// The visit function beside writers (as during post-crash GC with instant restart): every block
// that was allocated before the visit began and is reachable when it ends was reported. The
// visit runs inside an epoch, so CCEH(C)'s split segments, retired while it reads them, are not
// reused under it.
TEST_P(CcehTest, VisitBesideWriters) {
  HashFixture f(kind_, KeyType::kBytes);
  std::vector<std::string> keys;
  for (int i = 0; i < 3000; ++i) keys.push_back("visit-key-" + std::to_string(i) + "-with-a-tail");
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_TRUE(f.idx().Insert(keys[i], i).ok());
  std::set<uint64_t> before;
  f.pool().allocator().ForEachAllocated([&](uint64_t off, size_t) { before.insert(off); });
  RootInfo ri;
  ASSERT_TRUE(f.pool().FindRoot("idx", &ri).ok());
  const IndexKind* kind = FindIndexKind(kind_);
  for (int round = 0; round < 5; ++round) {
    // Held until the final visit: nothing retired in the round is freed and reused, so an offset
    // in `before` that is reachable at the end is the same block (not a new one at a reused
    // offset, which the first visit rightly never saw).
    std::optional<sync::EpochGuard> hold(std::in_place, f.pool().allocator().epoch());
    std::set<uint64_t> marked;
    std::atomic<bool> go{false};
    std::thread writer([&] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < 3000; ++i)
        ASSERT_TRUE(f.idx().Insert("new-" + std::to_string(round) + "-" + std::to_string(i) + "-tail-tail", i).ok());
    });
    go = true;
    kind->visit(f.pool(), ri.off, [&](uint64_t off) { marked.insert(off); });
    writer.join();
    std::set<uint64_t> reach;
    kind->visit(f.pool(), ri.off, [&](uint64_t off) { reach.insert(off); });
    size_t missing = 0;
    for (uint64_t off : reach)
      if (before.count(off) && !marked.count(off)) ++missing;
    EXPECT_EQ(missing, 0u) << "round " << round;
    hold.reset();
    std::set<uint64_t> now;
    f.pool().allocator().ForEachAllocated([&](uint64_t off, size_t) { now.insert(off); });
    before = std::move(now);
  }
  f.ExpectCheckOk("visit beside writers");
}

// Instant restart: after a crash the index is opened and written (splits, removes, upserts)
// while the post-crash GC marks on its background thread. When it ends, nothing reachable may
// have been freed and nothing unreachable kept.
TEST_P(CcehTest, InstantRestart) { RunWritesBesideGc(kind_, 60000, 20000, 3); }

TEST_P(CcehTest, ReadOnlyOpen) {
  ::wort::test::TempPath path("cceh-ro");
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(path.str(), TestPoolOpts(), &pool).ok());
    std::unique_ptr<Index> idx;
    IndexOptions io;
    io.key_type = KeyType::kU64;
    ASSERT_TRUE(CreateIndex(*pool, "idx", kind_, io, &idx).ok());
    for (uint64_t i = 0; i < 5000; ++i) ASSERT_TRUE(idx->Insert(i, i + 1).ok());
    idx.reset();
    ASSERT_TRUE(pool->Close().ok());
  }
  PoolOptions po = TestPoolOpts();
  po.read_only = true;
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Open(path.str(), po, &pool).ok());
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(OpenIndex(*pool, "idx", &idx).ok());
  EXPECT_EQ(idx->Size(), 5000u);
  uint64_t v = 0;
  ASSERT_TRUE(idx->Lookup(77, &v).ok());
  EXPECT_EQ(v, 78u);
  std::string report;
  EXPECT_TRUE(idx->Check(&report).ok()) << report;
}

// The directory routes every valid record by its variant's index (MSB: the top G hash bits; LSB,
// EXTH: those bits reversed), and (EXTH) a split leaves no stale copy behind in the old bucket.
TEST_P(CcehTest, VariantLayout) {
  HashFixture f(kind_, KeyType::kU64);
  std::mt19937_64 rng(9);
  for (int i = 0; i < 6000; ++i) ASSERT_TRUE(f.idx().Insert(rng(), i).ok());
  const CcehDirectory* d = DirOf(f.pool());
  const unsigned G = static_cast<unsigned>(d->depth);
  ASSERT_GE(G, 6u);
  const uint64_t nb = 1ull << RootOf(f.pool())->param[0];
  uint64_t routed = 0, nonempty = 0;
  for (uint64_t i = 0; i < (1ull << G); ++i) {
    const uint64_t e = d->entries()[i];
    const unsigned L = EntryDepth(e);
    if (!StartsRun(lsb_, i, L, G)) continue;
    const uint64_t pattern = PatternAt(lsb_, i, L, G);
    const auto* seg = f.pool().at<const CcehBucket>(EntrySegment(e));
    for (uint64_t b = 0; b < nb; ++b)
      for (const auto& slot : seg[b].slot) {
        if (slot.key == 0) continue;
        ++nonempty;
        if (Prefix(slot.key, L) != pattern) continue;  // a stale copy (lazy deletion)
        const uint64_t at = lsb_ ? Rev(Prefix(slot.key, G), G) : Prefix(slot.key, G);
        ASSERT_EQ(d->entries()[at], e) << "record routed to entry " << at << ", found under " << i;
        ++routed;
      }
  }
  EXPECT_EQ(routed, f.idx().Size());
  if (VariantOf(GetParam()) == "exth") {
    EXPECT_EQ(nonempty, routed) << "EXTH clears the moved records";
  } else if (kind_ == "cceh") {
    EXPECT_GT(nonempty, routed) << "lazy deletion leaves stale copies";
  }
  f.ExpectCheckOk("layout");
}

// Byte-string keys over the full byte range (0x00..0xff, lengths 1..40): inserted, half removed,
// upserted, reopened; every lookup agrees with a model.
TEST_P(CcehTest, FullByteRangeKeys) {
  HashFixture f(kind_, KeyType::kBytes);
  std::mt19937_64 rng(17);
  std::unordered_map<std::string, uint64_t> model;
  for (int i = 0; i < 4000; ++i) {
    std::string k(1 + rng() % 40, '\0');
    for (char& c : k) c = static_cast<char>(rng() & 0xff);
    if (i % 7 == 0) k[0] = static_cast<char>(0x80 | (rng() & 0x7f));
    if (model.count(k)) continue;
    ASSERT_TRUE(f.idx().Insert(k, i).ok());
    model[k] = i;
  }
  int n = 0;
  for (auto it = model.begin(); it != model.end();) {
    if (n++ % 2 == 0) {
      ASSERT_TRUE(f.idx().Remove(it->first).ok());
      it = model.erase(it);
    } else {
      ASSERT_TRUE(f.idx().Upsert(it->first, it->second + 1).ok());
      ++it->second;
      ++it;
    }
  }
  f.Reopen();
  EXPECT_EQ(f.idx().Size(), model.size());
  for (auto& [k, v] : model) {
    uint64_t got = 0;
    ASSERT_TRUE(f.idx().Lookup(k, &got).ok());
    ASSERT_EQ(got, v);
  }
  f.ExpectCheckOk("full byte range");
}

// A bad variant name, and a variant for cceh-cow, are refused at create with a clear error.
TEST(CcehVariant, BadVariantRefused) {
  {
    ScopedEnv v("WORT_CCEH_VARIANT", "middle");
    ::wort::test::TempPath path("cceh-var");
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(path.str(), TestPoolOpts(), &pool).ok());
    std::unique_ptr<Index> idx;
    const Status s = CreateIndex(*pool, "idx", "cceh", IndexOptions{}, &idx);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.ToString().find("WORT_CCEH_VARIANT"), std::string::npos) << s.ToString();
  }
  {
    ScopedEnv v("WORT_CCEH_VARIANT", "lsb");
    ::wort::test::TempPath path("cceh-var");
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(path.str(), TestPoolOpts(), &pool).ok());
    std::unique_ptr<Index> idx;
    EXPECT_EQ(CreateIndex(*pool, "idx", "cceh-cow", IndexOptions{}, &idx).code(), Code::kInvalidArgument);
  }
}

// IndexOptions::cceh_variant chooses the variant without the environment (and over it), the
// root block keeps it across a reopen, and cceh-cow refuses anything but msb.
TEST(CcehVariant, OptionSelectsTheVariantAndTheRootKeepsIt) {
  const std::pair<CcehVariant, uint64_t> cases[] = {{CcehVariant::kMsb, 0u},
                                                     {CcehVariant::kLsb, 1u},
                                                     {CcehVariant::kExth, 2u}};
  for (const auto& [cv, want] : cases) {
    ScopedEnv v("WORT_CCEH_VARIANT", "middle");  // a bad name: the option must win, not fail
    ::wort::test::TempPath path("cceh-opt");
    {
      std::unique_ptr<Pool> pool;
      ASSERT_TRUE(Pool::Create(path.str(), TestPoolOpts(), &pool).ok());
      IndexOptions o;
      o.cceh_variant = cv;
      std::unique_ptr<Index> idx;
      ASSERT_TRUE(CreateIndex(*pool, "idx", "cceh", o, &idx).ok());
      for (uint64_t k = 1; k <= 3000; ++k) ASSERT_TRUE(idx->Insert(std::string_view(reinterpret_cast<const char*>(&k), 8), k).ok());
      EXPECT_EQ(RootOf(*pool)->param[1], want);
      if (cv != CcehVariant::kMsb) {
        std::unique_ptr<Index> cow;
        EXPECT_EQ(CreateIndex(*pool, "cow", "cceh-cow", o, &cow).code(), Code::kInvalidArgument);
      }
      idx.reset();
      ASSERT_TRUE(pool->Close().ok());
    }
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Open(path.str(), TestPoolOpts(), &pool).ok());
    std::unique_ptr<Index> idx;
    ASSERT_TRUE(OpenIndex(*pool, "idx", &idx).ok());
    EXPECT_EQ(RootOf(*pool)->param[1], want);
    for (uint64_t k = 1; k <= 3000; ++k) {
      uint64_t got = 0;
      ASSERT_TRUE(idx->Lookup(std::string_view(reinterpret_cast<const char*>(&k), 8), &got).ok());
      ASSERT_EQ(got, k);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, CcehTest, ::testing::Values("cceh", "cceh-cow", "cceh:lsb", "cceh:exth"),
                         ::wort::test::KindParamName);

}  // namespace
}  // namespace wort::hash::test
