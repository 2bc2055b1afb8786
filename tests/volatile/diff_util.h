// Differential test helpers shared by the volatile reference tests and the FPTree/NVTree tests:
// random op mixes against a std::map model, key generators over the full byte range.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "wort/index.h"
#include "wort/key.h"

namespace wort::test {

enum class KeyGen { kDense, kSparse, kBytes };

inline std::string MakeKey(KeyGen g, std::mt19937_64& rng, uint64_t n) {
  switch (g) {
    case KeyGen::kDense: return EncodeU64(rng() % n);
    case KeyGen::kSparse: return EncodeU64(rng() % 4 == 0 ? (rng() % 64) : rng());
    case KeyGen::kBytes: {
      // Full byte range; the empty key; prefix chains; some long keys.
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

// Everything in idx equals the model (lookup of every key, a full scan, Size, Check).
inline void ExpectSame(const Index& idx, const std::map<std::string, uint64_t>& model) {
  ASSERT_EQ(idx.Size(), model.size());
  for (const auto& [k, v] : model) {
    uint64_t got = 0;
    ASSERT_TRUE(idx.Lookup(k, &got).ok()) << "missing key of size " << k.size();
    ASSERT_EQ(got, v);
  }
  auto it = model.begin();
  size_t n = 0;
  ASSERT_TRUE(idx.Scan("", nullptr, SIZE_MAX, [&](std::string_view k, uint64_t v) {
                  EXPECT_TRUE(it != model.end());
                  if (it == model.end()) return false;
                  EXPECT_EQ(std::string(k), it->first);
                  EXPECT_EQ(v, it->second);
                  ++it;
                  ++n;
                  return true;
                }).ok());
  EXPECT_EQ(n, model.size());
  std::string report;
  EXPECT_TRUE(idx.Check(&report).ok()) << report;
}

// `ops` random operations on idx and model; scans with random bounds and limits.
inline void RandomOps(Index* idx, std::map<std::string, uint64_t>* model, KeyGen g, uint64_t range, int ops,
                      std::mt19937_64& rng) {
  for (int i = 0; i < ops; ++i) {
    const std::string k = MakeKey(g, rng, range);
    const uint64_t v = rng();
    const int op = static_cast<int>(rng() % 100);
    if (op < 40) {
      Status s = idx->Insert(k, v);
      if (model->count(k)) {
        ASSERT_TRUE(s.IsAlreadyExists()) << s.ToString();
      } else {
        ASSERT_TRUE(s.ok()) << s.ToString();
        (*model)[k] = v;
      }
    } else if (op < 55) {
      bool inserted = false;
      ASSERT_TRUE(idx->Upsert(k, v, &inserted).ok());
      ASSERT_EQ(inserted, model->count(k) == 0);
      (*model)[k] = v;
    } else if (op < 75) {
      uint64_t got = 12345;
      Status s = idx->Lookup(k, &got);
      auto it = model->find(k);
      if (it == model->end()) {
        ASSERT_TRUE(s.IsNotFound());
        ASSERT_EQ(got, 12345u);
      } else {
        ASSERT_TRUE(s.ok());
        ASSERT_EQ(got, it->second);
      }
    } else if (op < 95) {
      Status s = idx->Remove(k);
      ASSERT_EQ(s.ok(), model->erase(k) == 1) << s.ToString();
      if (!s.ok()) {
        ASSERT_TRUE(s.IsNotFound());
      }
    } else {
      const std::string end = MakeKey(g, rng, range);
      const bool bounded = rng() % 2;
      const size_t limit = 1 + rng() % 50;
      std::vector<std::pair<std::string, uint64_t>> got, want;
      std::string_view ev = end;
      ASSERT_TRUE(idx->Scan(k, bounded ? &ev : nullptr, limit, [&](std::string_view kk, uint64_t vv) {
                       got.emplace_back(std::string(kk), vv);
                       return true;
                     }).ok());
      for (auto it = model->lower_bound(k); it != model->end() && want.size() < limit; ++it) {
        if (bounded && CompareKeys(it->first, end) > 0) break;
        want.emplace_back(*it);
      }
      ASSERT_EQ(got, want);
    }
  }
}

}  // namespace wort::test
