// The one differential harness of the index tests (issue 14): an index against a std::map
// model. Used by the conformance suite (every kind), the B-tree, hybrid B-tree and volatile
// reference tests.
//   ExpectSame   Size, a Lookup of every model key, a full scan equal to the model (ordered
//                kinds), and optionally Check().
//   RandomOps    a random mix of Insert / Upsert / Lookup / Remove / Scan checked op by op
//                against the model (AlreadyExists, the inserted flag, a failed Lookup leaves
//                *value alone, scans with random bounds and limits; NotSupported when unordered).
//   Key sources  KeyGen (dense, sparse, clustered 8-byte keys; short byte strings), ByteKeys (the
//                full byte range, shared prefixes, long keys), NextU64 (the extremes and random
//                words), EdgeByteKeys / EdgeU64Keys (fixed edge keys).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/index_test_util.h"
#include "util/splitmix64.h"
#include "wort/index.h"
#include "wort/key.h"

namespace wort::test {

using Model = std::map<std::string, uint64_t>;

// Everything in idx equals the model: Size, a Lookup of every key (the first few differences
// reported), a full scan (ordered kinds), and Check() when `check`.
inline void ExpectSame(const Index& idx, const Model& m, const std::string& what = "", bool ordered = true,
                       bool check = true) {
  EXPECT_EQ(idx.Size(), m.size()) << what;
  size_t bad = 0;
  for (const auto& [k, v] : m) {
    uint64_t got = ~v;
    Status s = idx.Lookup(k, &got);
    if ((!s.ok() || got != v) && bad++ < 5)
      ADD_FAILURE() << what << ": key of " << k.size() << " bytes: " << s.ToString() << " value " << got << " want "
                    << v;
  }
  if (ordered) {
    EXPECT_EQ(ScanAll(idx, "", nullptr, SIZE_MAX), ModelScan(m, "", nullptr, SIZE_MAX)) << what;
  }
  if (check) {
    std::string report;
    EXPECT_TRUE(idx.Check(&report).ok()) << what << ": " << report;
  }
}

enum class KeyGen { kDense, kSparse, kClustered, kBytes };

// A key of generator g: dense (< n), sparse or clustered (runs of 64 consecutive values at
// about n/64 scattered bases) 8-byte keys, or short byte strings over the full byte range (the
// empty key, runs of 0x00 / 0xff, some long keys, bytes < n or near 0x80).
inline std::string MakeKey(KeyGen g, std::mt19937_64& rng, uint64_t n) {
  switch (g) {
    case KeyGen::kDense: return EncodeU64(rng() % n);
    case KeyGen::kSparse: return EncodeU64(rng() % 4 == 0 ? (rng() % 64) : rng());
    case KeyGen::kClustered: {
      const uint64_t base = SplitMix64Mix(rng() % (n / 64 + 1));
      return EncodeU64(base + rng() % 64);
    }
    case KeyGen::kBytes: {
      const int kind = static_cast<int>(rng() % 10);
      if (kind == 0) return std::string();
      if (kind == 1) return std::string(1 + rng() % 6, static_cast<char>(rng() % 2 ? 0x00 : 0xff));
      if (kind == 2) return std::string(100 + rng() % 400, static_cast<char>('a' + rng() % 2));
      std::string s(rng() % 12, '\0');
      for (auto& c : s) c = static_cast<char>(rng() % 4 == 0 ? 0x7f + rng() % 3 : rng() % n);
      return s;
    }
  }
  return {};
}

// Fixed edge keys. Byte strings: the empty key, runs of 0x00 and 0xff, 0x7f / 0x80 neighbours,
// keys of kMaxKeyLen and one byte less, a chain of 40 keys each a prefix of the next (past any
// inline prefix), one key per 15th first byte. 8-byte keys: the u64 extremes and neighbours.
inline std::vector<std::string> EdgeByteKeys() {
  std::vector<std::string> k = {"",
                                std::string(1, '\0'),
                                std::string(2, '\0'),
                                std::string(9, '\0'),
                                "\x7f",
                                "\x7f\xff",
                                "\x80",
                                std::string("\x80\x00", 2),
                                "\xff",
                                "\xff\xff",
                                std::string(8, '\xff'),
                                "a",
                                "ab",
                                "abc",
                                "b",
                                std::string(kMaxKeyLen, '\x80'),
                                std::string(kMaxKeyLen - 1, '\x80'),
                                std::string(kMaxKeyLen, '\0')};
  for (size_t n = 1; n <= 40; ++n) k.push_back(std::string(n, 'p'));
  for (int b = 0; b < 256; b += 15) k.push_back(std::string("x") + static_cast<char>(b));
  return k;
}

inline std::vector<std::string> EdgeU64Keys() {
  std::vector<std::string> k;
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{0xff}, uint64_t{0x100}, uint64_t{0x7fffffffffffffffull},
                     uint64_t{0x8000000000000000ull}, uint64_t{0x80000000000000ffull}, uint64_t{0xff00000000000000ull},
                     ~uint64_t{0} - 1, ~uint64_t{0}})
    k.push_back(EncodeU64(v));
  return k;
}

// Byte-string keys over the full byte range: biased to 0x00, 0x7f, 0x80, 0xff; a few stems so
// keys share prefixes; proper prefixes and extensions of present keys; now and then a long key.
class ByteKeys {
 public:
  explicit ByteKeys(uint64_t seed, std::string tag = "") : rng_(seed), tag_(std::move(tag)) {
    stems_ = {"", std::string(1, '\0'), std::string(3, '\0'), "\x7f", "\x80", "\xff\xff", std::string(40, '\x80'),
              "stem/a", "stem/b"};
  }
  std::string Next(const Model& m) {
    const unsigned r = rng_() % 100;
    if (r < 20 && !m.empty()) {
      auto it = m.lower_bound(tag_ + Bytes(2));
      if (it == m.end() || it->first.compare(0, tag_.size(), tag_) != 0) return tag_ + Bytes(rng_() % 6);
      const std::string& k = it->first;
      if (r < 10) return k.substr(0, tag_.size() + (k.size() > tag_.size() ? rng_() % (k.size() - tag_.size()) : 0));
      return k + Bytes(1 + rng_() % 3);
    }
    if (r == 20) return tag_ + Bytes(300 + rng_() % 1200);
    return tag_ + stems_[rng_() % stems_.size()] + Bytes(rng_() % 10);
  }

 private:
  std::string Bytes(size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) {
      const unsigned r = rng_() % 6;
      c = static_cast<char>(r == 0 ? 0x00 : r == 1 ? 0x7f : r == 2 ? 0x80 : r == 3 ? 0xff : rng_() % 256);
    }
    return s;
  }
  std::mt19937_64 rng_;
  std::string tag_;
  std::vector<std::string> stems_;
};

// 8-byte keys: the extremes and their neighbours, small values, and random words.
inline std::string NextU64(std::mt19937_64& rng) {
  static const uint64_t kEdges[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fffffffffffffffull, 0x8000000000000000ull,
                                    0x8000000000000001ull, ~0ull - 1, ~0ull};
  const unsigned r = rng() % 10;
  if (r == 0) return EncodeU64(kEdges[rng() % std::size(kEdges)]);
  if (r < 5) return EncodeU64(rng() % 4096);
  return EncodeU64(rng());
}

// `ops` random operations on idx and the model; `next` draws a key. Ordered kinds also scan with
// random start, optional end and limit; unordered kinds must answer NotSupported.
template <class KeyFn>
inline void RandomOps(Index& idx, Model& m, std::mt19937_64& rng, int ops, bool ordered, KeyFn&& next) {
  for (int i = 0; i < ops; ++i) {
    const unsigned r = rng() % 100;
    const uint64_t v = rng();
    std::string k = next();
    if (r < 50 && !m.empty() && rng() % 2) {  // often a present key
      auto it = m.lower_bound(k);
      k = it == m.end() ? m.begin()->first : it->first;
    }
    auto it = m.find(k);
    if (r < 35) {
      Status s = idx.Insert(k, v);
      if (it == m.end()) {
        ASSERT_TRUE(s.ok()) << "insert #" << i << ": " << s.ToString();
        m[k] = v;
      } else {
        ASSERT_TRUE(s.IsAlreadyExists()) << "insert of a present key #" << i << ": " << s.ToString();
      }
    } else if (r < 50) {
      bool inserted = it != m.end();
      ASSERT_TRUE(idx.Upsert(k, v, &inserted).ok()) << "upsert #" << i;
      ASSERT_EQ(inserted, it == m.end()) << "upsert #" << i;
      m[k] = v;
    } else if (r < 70) {
      uint64_t got = 12345;
      Status s = idx.Lookup(k, &got);
      if (it == m.end()) {
        ASSERT_TRUE(s.IsNotFound()) << "lookup of an absent key #" << i << ": " << s.ToString();
        ASSERT_EQ(got, 12345u) << "a failed lookup wrote *value";
      } else {
        ASSERT_TRUE(s.ok()) << "lookup #" << i << ": " << s.ToString();
        ASSERT_EQ(got, it->second) << "lookup #" << i;
      }
    } else if (r < 92) {
      Status s = idx.Remove(k);
      if (it == m.end()) {
        ASSERT_TRUE(s.IsNotFound()) << "remove of an absent key #" << i << ": " << s.ToString();
      } else {
        ASSERT_TRUE(s.ok()) << "remove #" << i << ": " << s.ToString();
        m.erase(it);
      }
    } else {
      const std::string end_key = next();
      const std::string_view ev(end_key);
      const std::string_view* end = rng() % 2 ? &ev : nullptr;
      const size_t limit = rng() % 4 == 0 ? SIZE_MAX : rng() % 30;
      std::vector<std::pair<std::string, uint64_t>> got;
      Status s = idx.Scan(k, end, limit, [&](std::string_view key, uint64_t val) {
        got.emplace_back(std::string(key), val);
        return true;
      });
      if (!ordered) {
        ASSERT_EQ(s.code(), Code::kNotSupported) << s.ToString();
        continue;
      }
      ASSERT_TRUE(s.ok()) << s.ToString();
      std::vector<std::pair<std::string, uint64_t>> want;
      for (auto jt = m.lower_bound(k); jt != m.end() && want.size() < limit; ++jt) {
        if (end && CompareKeys(jt->first, *end) > 0) break;
        want.emplace_back(jt->first, jt->second);
      }
      ASSERT_EQ(got, want) << "scan #" << i << " from a key of " << k.size() << " bytes, limit " << limit;
    }
  }
}

}  // namespace wort::test
