// Workload generation (see workload.h for the contract).
//
// Every generator draws from its own stream of a small seeded PRNG (splitmix64), so a given
// (distribution, n, seed) always yields the same keys in the same order, on every platform.
// Distinctness is guaranteed without node-based sets:
//   sparse     generate, sort a copy, and redraw only if two values collided (rare)
//   clustered  draw run starts, sort them, redraw any start that overlaps the previous run
//   strings    a flat open-addressing set of 64-bit hashes: a candidate whose hash was seen is
//              redrawn (equal strings have equal hashes, so the accepted keys are distinct)
#include "bench/workload.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string_view>

#include "wort/key.h"

namespace wort::bench {
namespace {

// splitmix64 (Steele, Lea, Flood): a 64-bit state, one add and a finalizer per output.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound) (Lemire's multiply-shift; the bias is < bound / 2^64, negligible here).
  uint64_t Below(uint64_t bound) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * bound) >> 64);
  }

 private:
  uint64_t s_;
};

// Independent streams per purpose, so that e.g. the shuffle of `dense` does not repeat the
// values of `sparse` for the same seed.
enum Stream : uint64_t {
  kStreamShuffle = 1,
  kStreamSparse = 2,
  kStreamClustered = 3,
  kStreamStrings = 4,
  kStreamSample = 5,
};
Rng StreamRng(uint64_t seed, Stream s) {
  Rng mix(seed ^ (static_cast<uint64_t>(s) * 0xd6e8feb86659fd93ull));
  return Rng(mix.Next());
}

template <class T>
void Shuffle(std::vector<T>& v, uint64_t seed) {
  Rng r = StreamRng(seed, kStreamShuffle);
  for (size_t i = v.size(); i > 1; --i) {
    const size_t j = r.Below(i);
    std::swap(v[i - 1], v[j]);
  }
}

std::vector<uint64_t> Dense(size_t n, uint64_t seed) {
  std::vector<uint64_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i + 1;
  Shuffle(v, seed);
  return v;
}

std::vector<uint64_t> Sparse(size_t n, uint64_t seed) {
  Rng r = StreamRng(seed, kStreamSparse);
  std::vector<uint64_t> v(n);
  for (auto& x : v) x = r.Next();
  // i.i.d. draws are already in random order; only collisions need work.
  std::vector<uint64_t> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end()) return v;
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  while (sorted.size() < n) {
    const size_t have = sorted.size();
    for (size_t i = have; i < n; ++i) sorted.push_back(r.Next());
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  }
  Shuffle(sorted, seed);
  return sorted;
}

constexpr uint64_t kRunLen = 64;

std::vector<uint64_t> Clustered(size_t n, uint64_t seed) {
  Rng r = StreamRng(seed, kStreamClustered);
  const size_t runs = (n + kRunLen - 1) / kRunLen;  // the last run may be shorter
  // A run starts anywhere a whole run fits: [0, 2^64 - 64].
  auto draw = [&r] { return r.Below(~0ull - kRunLen + 2); };
  std::vector<uint64_t> starts(runs);
  for (auto& s : starts) s = draw();
  for (;;) {
    std::sort(starts.begin(), starts.end());
    bool overlap = false;
    for (size_t i = 1; i < runs; ++i) {
      if (starts[i] - starts[i - 1] < kRunLen) {
        starts[i] = draw();
        overlap = true;
      }
    }
    if (!overlap) break;
  }
  std::vector<uint64_t> v;
  v.reserve(n);
  for (size_t i = 0; i < runs; ++i)
    for (uint64_t k = 0; k < kRunLen && v.size() < n; ++k) v.push_back(starts[i] + k);
  Shuffle(v, seed);
  return v;
}

uint64_t HashBytes(std::string_view s) {
  // FNV-1a over the bytes, then a splitmix finalizer to spread the low bits.
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  h ^= s.size();
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// A set of nonzero 64-bit hashes, open addressing with linear probing, load <= 1/2.
class HashSet {
 public:
  explicit HashSet(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    slots_.assign(cap, 0);
    mask_ = cap - 1;
  }
  // True iff h was not present (it is now).
  bool Insert(uint64_t h) {
    if (h == 0) h = 1;  // 0 marks an empty slot
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      if (slots_[i] == h) return false;
      if (slots_[i] == 0) {
        slots_[i] = h;
        return true;
      }
    }
  }

 private:
  std::vector<uint64_t> slots_;
  size_t mask_ = 0;
};

constexpr size_t kMinStringLen = 8, kMaxStringLen = 64;
constexpr char kFirstPrintable = 0x21, kLastPrintable = 0x7e;  // '!'..'~' (no space)

std::vector<std::string> Strings(size_t n, uint64_t seed) {
  Rng r = StreamRng(seed, kStreamStrings);
  HashSet seen(n);
  std::vector<std::string> v;
  v.reserve(n);
  std::string s;
  while (v.size() < n) {
    const size_t len = kMinStringLen + r.Below(kMaxStringLen - kMinStringLen + 1);
    s.resize(len);
    for (size_t i = 0; i < len; ++i)
      s[i] = static_cast<char>(kFirstPrintable + r.Below(kLastPrintable - kFirstPrintable + 1));
    if (seen.Insert(HashBytes(s))) v.push_back(s);
  }
  return v;  // i.i.d. draws: already in random order
}

std::vector<std::string> Words(size_t n, uint64_t seed) {
  const char* env = std::getenv("WORT_DICT");
  const std::string path = env && *env ? env : "/usr/share/dict/words";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fmt::print(stderr, "wort: warning: no dictionary file at {} (set WORT_DICT); using 'strings' keys instead\n", path);
    return Strings(n, seed);
  }
  std::vector<std::string> words;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.size() > kMaxKeyLen) continue;
    words.push_back(line);
  }
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  Shuffle(words, seed);
  if (words.size() > n) words.resize(n);
  return words;
}

}  // namespace

const char* DistName(Dist d) {
  switch (d) {
    case Dist::kDense: return "dense";
    case Dist::kSparse: return "sparse";
    case Dist::kClustered: return "clustered";
    case Dist::kStrings: return "strings";
    case Dist::kWords: return "words";
  }
  return "?";
}

bool ParseDist(const std::string& name, Dist* out) {
  for (Dist d : {Dist::kDense, Dist::kSparse, Dist::kClustered, Dist::kStrings, Dist::kWords}) {
    if (name == DistName(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

bool IsIntegerDist(Dist d) { return d == Dist::kDense || d == Dist::kSparse || d == Dist::kClustered; }

std::vector<uint64_t> GenerateU64Keys(Dist d, size_t n, uint64_t seed) {
  switch (d) {
    case Dist::kDense: return Dense(n, seed);
    case Dist::kSparse: return Sparse(n, seed);
    case Dist::kClustered: return Clustered(n, seed);
    case Dist::kStrings:
    case Dist::kWords: break;
  }
  return {};  // not an integer distribution
}

std::vector<std::string> GenerateKeys(Dist d, size_t n, uint64_t seed) {
  if (d == Dist::kStrings) return Strings(n, seed);
  if (d == Dist::kWords) return Words(n, seed);
  const std::vector<uint64_t> ints = GenerateU64Keys(d, n, seed);
  std::vector<std::string> v;
  v.reserve(ints.size());
  for (uint64_t k : ints) v.push_back(EncodeU64(k));
  return v;
}

std::vector<std::string> SampleKeys(const std::vector<std::string>& keys, size_t count, uint64_t seed) {
  std::vector<std::string> out;
  if (keys.empty()) return out;
  Rng r = StreamRng(seed, kStreamSample);
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) out.push_back(keys[r.Below(keys.size())]);
  return out;
}

}  // namespace wort::bench
