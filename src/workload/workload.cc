// Workload generation (see workload.h for the contract).
//
// Every generator draws from its own stream of a small seeded PRNG (splitmix64), so a given
// (distribution, n, seed) always yields the same keys in the same order, on every platform.
// Distinctness is guaranteed without node-based sets:
//   sparse     generate, radix-sort a copy, and redraw only values that collided (rare)
//   clustered  draw run starts, sort them, redraw any start that overlaps the previous run
//   strings    radix-sort the keys' 64-bit hashes; a key whose hash occurred before is redrawn
//              (equal strings have equal hashes, so the accepted keys are distinct)
#include "workload/workload.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string_view>

#include "util/splitmix64.h"
#include "wort/key.h"

namespace wort::bench {
namespace {

uint64_t Mix64(uint64_t z) { return SplitMix64Mix(z); }
using Rng = SplitMix64;  // src/util/splitmix64.h

// Independent streams per purpose, so that e.g. the shuffle of `dense` does not repeat the
// values of `sparse` for the same seed.
enum Stream : uint64_t {
  kStreamShuffle = 1,
  kStreamSparse = 2,
  kStreamClustered = 3,
  kStreamStrings = 4,
  kStreamSample = 5,
  kStreamBytes = 6,
};
Rng StreamRng(uint64_t seed, Stream s) { return Rng(Mix64(seed ^ (static_cast<uint64_t>(s) * 0xd6e8feb86659fd93ull))); }

template <class T>
void Shuffle(std::vector<T>& v, uint64_t seed) {  // Fisher-Yates
  Rng r = StreamRng(seed, kStreamShuffle);
  for (size_t i = v.size(); i > 1; --i) {
    const size_t j = r.Below(i);
    std::swap(v[i - 1], v[j]);
  }
}

// Sorts 64-bit values: LSD radix sort, 6 passes of 11 bits (several times faster than
// std::sort at millions of keys). A pass whose digit is equal in every value is skipped.
void RadixSort(std::vector<uint64_t>& v) {
  constexpr int kBits = 11;
  constexpr size_t kBuckets = size_t{1} << kBits;
  std::vector<uint64_t> tmp(v.size());
  std::vector<size_t> count(kBuckets + 1);
  for (int shift = 0; shift < 64; shift += kBits) {
    std::fill(count.begin(), count.end(), 0);
    for (uint64_t x : v) ++count[((x >> shift) & (kBuckets - 1)) + 1];
    bool trivial = false;
    for (size_t b = 1; b <= kBuckets; ++b) trivial |= count[b] == v.size();
    if (trivial) continue;
    for (size_t b = 1; b <= kBuckets; ++b) count[b] += count[b - 1];
    for (uint64_t x : v) tmp[count[(x >> shift) & (kBuckets - 1)]++] = x;
    v.swap(tmp);
  }
}

// The values that occur more than once in `v`, sorted (usually none).
std::vector<uint64_t> Duplicates(const std::vector<uint64_t>& v) {
  std::vector<uint64_t> sorted = v;
  RadixSort(sorted);
  std::vector<uint64_t> dups;
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i] == sorted[i - 1] && (dups.empty() || dups.back() != sorted[i])) dups.push_back(sorted[i]);
  return dups;
}

// Keeps the first occurrence of each value listed in `dups` (sorted) and drops the later ones.
// `aux` (if non-null, the same length as v) is compacted alongside.
template <class Aux>
void DropLaterDuplicates(std::vector<uint64_t>& v, std::vector<Aux>* aux, const std::vector<uint64_t>& dups) {
  std::vector<bool> seen(dups.size(), false);
  size_t out = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    auto it = std::lower_bound(dups.begin(), dups.end(), v[i]);
    if (it != dups.end() && *it == v[i]) {
      const size_t d = it - dups.begin();
      if (seen[d]) continue;
      seen[d] = true;
    }
    if (aux) (*aux)[out] = std::move((*aux)[i]);
    v[out++] = v[i];
  }
  v.resize(out);
  if (aux) aux->resize(out);
}

std::vector<uint64_t> Dense(size_t n, uint64_t seed) {
  std::vector<uint64_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i + 1;
  Shuffle(v, seed);
  return v;
}

std::vector<uint64_t> Sparse(size_t n, uint64_t seed) {
  Rng r = StreamRng(seed, kStreamSparse);
  std::vector<uint64_t> v;
  v.reserve(n);
  // i.i.d. draws are already in random order; only collisions (rare) need work: drop the later
  // copies and draw replacements until all n are distinct.
  for (;;) {
    while (v.size() < n) v.push_back(r.Next());
    const std::vector<uint64_t> dups = Duplicates(v);
    if (dups.empty()) return v;
    DropLaterDuplicates<int>(v, nullptr, dups);
  }
}

constexpr uint64_t kRunLen = 64;

std::vector<uint64_t> Clustered(size_t n, uint64_t seed) {
  Rng r = StreamRng(seed, kStreamClustered);
  const size_t runs = (n + kRunLen - 1) / kRunLen;  // the last run may be shorter
  // A run starts anywhere a whole run fits: [0, 2^64 - 64], i.e. 2^64 - 63 choices.
  auto draw = [&r] { return r.Below(~0ull - kRunLen + 2); };
  std::vector<uint64_t> starts(runs);
  for (auto& s : starts) s = draw();
  for (;;) {
    RadixSort(starts);
    bool overlap = false;
    for (size_t i = 1; i < runs; ++i) {
      if (starts[i] - starts[i - 1] < kRunLen) {  // would share keys with the previous run
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

// A 64-bit hash of a byte string, 8 bytes per step. Equal strings hash equally; that is all the
// dedup needs (a rare collision of distinct strings only costs a redraw).
uint64_t HashBytes(std::string_view s) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 32;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  return Mix64(h ^ tail);
}

constexpr size_t kMinStringLen = 8, kMaxStringLen = 64;
constexpr char kFirstPrintable = 0x21, kLastPrintable = 0x7e;  // '!'..'~' (no space)

std::string RandomString(Rng& r) {
  const size_t len = kMinStringLen + r.Below(kMaxStringLen - kMinStringLen + 1);
  std::string s(len, '\0');
  // Several characters per 64-bit draw: each multiply by the alphabet size moves the next
  // uniform digit into the high word (about 6.6 bits per character; 5 per draw keeps >= 31
  // fresh bits behind every digit).
  constexpr uint64_t kAlphabet = kLastPrintable - kFirstPrintable + 1;
  for (size_t i = 0; i < len; i += 5) {
    uint64_t x = r.Next();
    for (size_t j = i; j < len && j < i + 5; ++j) {
      const unsigned __int128 m = static_cast<unsigned __int128>(x) * kAlphabet;
      s[j] = static_cast<char>(kFirstPrintable + static_cast<uint64_t>(m >> 64));
      x = static_cast<uint64_t>(m);
    }
  }
  return s;
}

constexpr size_t kMinBytesLen = 4, kMaxBytesLen = 128;

std::string RandomBytes(Rng& r) {
  const size_t len = kMinBytesLen + r.Below(kMaxBytesLen - kMinBytesLen + 1);
  std::string s(len, '\0');
  for (size_t i = 0; i < len; i += 8) {
    const uint64_t x = r.Next();
    std::memcpy(s.data() + i, &x, std::min<size_t>(8, len - i));
  }
  return s;
}

// N distinct keys drawn i.i.d. by `draw` (already in random order); duplicates are redrawn.
template <class Draw>
std::vector<std::string> DistinctDraws(size_t n, Rng r, Draw draw) {
  std::vector<std::string> v;
  std::vector<uint64_t> hashes;
  v.reserve(n);
  hashes.reserve(n);
  for (;;) {
    while (v.size() < n) {
      v.push_back(draw(r));
      hashes.push_back(HashBytes(v.back()));
    }
    const std::vector<uint64_t> dups = Duplicates(hashes);
    if (dups.empty()) return v;  // i.i.d. draws: already in random order
    DropLaterDuplicates(hashes, &v, dups);
  }
}

std::vector<std::string> Strings(size_t n, uint64_t seed) { return DistinctDraws(n, StreamRng(seed, kStreamStrings), RandomString); }
std::vector<std::string> Bytes(size_t n, uint64_t seed) { return DistinctDraws(n, StreamRng(seed, kStreamBytes), RandomBytes); }

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
    case Dist::kBytes: return "bytes";
  }
  return "?";
}

bool ParseDist(const std::string& name, Dist* out) {
  for (Dist d : kAllDists) {
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
    case Dist::kWords:
    case Dist::kBytes: break;
  }
  return {};  // not an integer distribution
}

std::vector<std::string> GenerateKeys(Dist d, size_t n, uint64_t seed) {
  if (d == Dist::kStrings) return Strings(n, seed);
  if (d == Dist::kWords) return Words(n, seed);
  if (d == Dist::kBytes) return Bytes(n, seed);
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
