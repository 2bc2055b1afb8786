// Workload generator: the contract of src/workload/workload.h.
#include "workload/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <unistd.h>
#include <set>
#include <unordered_set>

#include "wort/key.h"

namespace wort::bench {
namespace {

constexpr Dist kIntDists[] = {Dist::kDense, Dist::kSparse, Dist::kClustered};

template <class T>
bool AllDistinct(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return std::adjacent_find(v.begin(), v.end()) == v.end();
}

TEST(Workload, NamesRoundTrip) {
  for (Dist d : kAllDists) {
    Dist back;
    ASSERT_TRUE(ParseDist(DistName(d), &back)) << DistName(d);
    EXPECT_EQ(back, d);
  }
  Dist d;
  EXPECT_FALSE(ParseDist("Dense", &d));
  EXPECT_FALSE(ParseDist("", &d));
  EXPECT_TRUE(IsIntegerDist(Dist::kClustered));
  EXPECT_FALSE(IsIntegerDist(Dist::kStrings));
  EXPECT_FALSE(IsIntegerDist(Dist::kWords));
  EXPECT_FALSE(IsIntegerDist(Dist::kBytes));
}

// `bytes`: the ROART paper's random keys of 4..128 bytes over the whole byte range.
TEST(Workload, BytesCoverLengthsAndTheFullByteRange) {
  const size_t n = 20000;
  auto v = GenerateKeys(Dist::kBytes, n, 5);
  ASSERT_EQ(v.size(), n);
  EXPECT_TRUE(AllDistinct(v));
  size_t min_len = SIZE_MAX, max_len = 0;
  std::vector<size_t> byte_count(256, 0);
  for (const std::string& k : v) {
    min_len = std::min(min_len, k.size());
    max_len = std::max(max_len, k.size());
    for (unsigned char c : k) ++byte_count[c];
  }
  EXPECT_EQ(min_len, 4u);
  EXPECT_EQ(max_len, 128u);
  for (size_t b = 0; b < 256; ++b) EXPECT_GT(byte_count[b], 0u) << "byte " << b << " never drawn";
  EXPECT_EQ(GenerateKeys(Dist::kBytes, n, 5), v);
  EXPECT_NE(GenerateKeys(Dist::kBytes, n, 6), v);
}

TEST(Workload, IntegerDistsAreDistinctAndSized) {
  for (Dist d : kIntDists) {
    for (size_t n : {0ul, 1ul, 63ul, 64ul, 65ul, 10000ul}) {
      auto v = GenerateU64Keys(d, n, 7);
      ASSERT_EQ(v.size(), n) << DistName(d);
      EXPECT_TRUE(AllDistinct(v)) << DistName(d) << " n=" << n;
    }
  }
}

TEST(Workload, DenseIsOneToN) {
  const size_t n = 5000;
  auto v = GenerateU64Keys(Dist::kDense, n, 3);
  // Random order: not simply ascending.
  EXPECT_FALSE(std::is_sorted(v.begin(), v.end()));
  std::sort(v.begin(), v.end());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], i + 1);
}

TEST(Workload, DeterministicPerSeedAndSeedsDiffer) {
  for (Dist d : {Dist::kDense, Dist::kSparse, Dist::kClustered, Dist::kStrings}) {
    auto a = GenerateKeys(d, 2000, 42);
    auto b = GenerateKeys(d, 2000, 42);
    auto c = GenerateKeys(d, 2000, 43);
    EXPECT_EQ(a, b) << DistName(d);
    EXPECT_NE(a, c) << DistName(d);
  }
}

TEST(Workload, SparseSpreadsOverTheWholeRange) {
  auto v = GenerateU64Keys(Dist::kSparse, 4096, 1);
  // With 4096 uniform draws every top nibble (16 buckets) occurs.
  std::set<uint64_t> top;
  for (uint64_t k : v) top.insert(k >> 60);
  EXPECT_EQ(top.size(), 16u);
}

TEST(Workload, ClusteredIsRunsOf64) {
  const size_t n = 64 * 100 + 10;  // 100 full runs and a short one
  auto v = GenerateU64Keys(Dist::kClustered, n, 9);
  ASSERT_EQ(v.size(), n);
  EXPECT_FALSE(std::is_sorted(v.begin(), v.end()));
  std::sort(v.begin(), v.end());
  std::vector<size_t> runs;  // lengths of maximal consecutive runs
  size_t len = 1;
  for (size_t i = 1; i < n; ++i) {
    if (v[i] == v[i - 1] + 1) {
      ++len;
    } else {
      runs.push_back(len);
      len = 1;
    }
  }
  runs.push_back(len);
  // Two random runs are adjacent with negligible probability; each run is 64 keys but one of 10.
  ASSERT_EQ(runs.size(), 101u);
  EXPECT_EQ(std::count(runs.begin(), runs.end(), 64u), 100);
  EXPECT_EQ(std::count(runs.begin(), runs.end(), 10u), 1);
}

TEST(Workload, IntegerKeysAreBigEndian) {
  for (Dist d : kIntDists) {
    auto ints = GenerateU64Keys(d, 500, 5);
    auto strs = GenerateKeys(d, 500, 5);
    ASSERT_EQ(ints.size(), strs.size());
    for (size_t i = 0; i < ints.size(); ++i) {
      ASSERT_EQ(strs[i].size(), 8u);
      EXPECT_EQ(DecodeU64(strs[i]), ints[i]);
      EXPECT_EQ(static_cast<unsigned char>(strs[i][0]), ints[i] >> 56);  // most significant first
    }
  }
  // Dense keys 1..N all begin with zero bytes: the 0x00 byte occurs in every key.
  auto dense = GenerateKeys(Dist::kDense, 10, 1);
  for (const auto& k : dense) EXPECT_EQ(k[0], '\0');
  // Sparse keys have bytes >= 0x80 in their first byte about half the time.
  auto sparse = GenerateKeys(Dist::kSparse, 1000, 1);
  size_t high = 0;
  for (const auto& k : sparse) high += static_cast<unsigned char>(k[0]) >= 0x80;
  EXPECT_GT(high, 300u);
  EXPECT_LT(high, 700u);
}

TEST(Workload, StringsArePrintableAndDistinct) {
  auto v = GenerateKeys(Dist::kStrings, 20000, 11);
  ASSERT_EQ(v.size(), 20000u);
  EXPECT_TRUE(AllDistinct(v));
  size_t min_len = 1000, max_len = 0;
  for (const auto& s : v) {
    min_len = std::min(min_len, s.size());
    max_len = std::max(max_len, s.size());
    for (unsigned char c : s) ASSERT_TRUE(std::isprint(c)) << int(c);
  }
  EXPECT_EQ(min_len, 8u);
  EXPECT_EQ(max_len, 64u);
}

TEST(Workload, WordsFromDictionaryFile) {
  char tmpl[] = "/tmp/wort_dict_XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(tmpl, std::ios::binary);
    // Duplicates, a CRLF line, an empty line, a prefix pair, and bytes >= 0x80.
    out << "apple\napple\nap\r\n\nbanana\n\xc3\xa9t\xc3\xa9\nzebra\n";
  }
  setenv("WORT_DICT", tmpl, 1);
  auto all = GenerateKeys(Dist::kWords, 100, 1);
  auto two = GenerateKeys(Dist::kWords, 2, 1);
  auto again = GenerateKeys(Dist::kWords, 100, 1);
  unsetenv("WORT_DICT");
  std::remove(tmpl);
  std::vector<std::string> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<std::string>{"ap", "apple", "banana", "zebra", "\xc3\xa9t\xc3\xa9"}));
  EXPECT_EQ(two.size(), 2u);
  EXPECT_EQ(all, again);
}

TEST(Workload, WordsFallBackToStrings) {
  setenv("WORT_DICT", "/nonexistent/wort-dict", 1);
  auto v = GenerateKeys(Dist::kWords, 100, 1);
  unsetenv("WORT_DICT");
  EXPECT_EQ(v.size(), 100u);
  EXPECT_TRUE(AllDistinct(v));
}

TEST(Workload, SampleKeysDrawsFromTheKeys) {
  auto keys = GenerateKeys(Dist::kSparse, 1000, 2);
  std::unordered_set<std::string> set(keys.begin(), keys.end());
  auto s1 = SampleKeys(keys, 300, 5);
  auto s2 = SampleKeys(keys, 300, 5);
  auto s3 = SampleKeys(keys, 300, 6);
  ASSERT_EQ(s1.size(), 300u);
  EXPECT_EQ(s1, s2);
  EXPECT_NE(s1, s3);
  for (const auto& k : s1) EXPECT_TRUE(set.count(k));
  EXPECT_TRUE(SampleKeys({}, 10, 1).empty());
}

}  // namespace
}  // namespace wort::bench
