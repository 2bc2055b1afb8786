// Workload generation shared by `wort bench`, `wort reproduce`, `wort crashtest` and the tests.
//
// Distributions (WORT paper, section 4), always returned in a seeded random order:
//   dense      1..N
//   sparse     N distinct uniformly random 64-bit keys
//   clustered  N/64 runs of 64 consecutive keys, each run starting at a random point
//   strings    N distinct random printable keys of 8..64 bytes
//   words      the words of a dictionary file (/usr/share/dict/words, or $WORT_DICT), shuffled,
//              deduplicated, truncated to N (fewer if the file has fewer); falls back to
//              `strings` with a warning if no dictionary file exists
//   bytes      N distinct random keys of 4..128 bytes, every byte uniform over 0x00..0xff (the
//              ROART paper's "random keys of 4-128 bytes"; some keys may be prefixes of others)
// Integer keys are encoded big-endian (wort/key.h) when returned as byte strings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wort::bench {

enum class Dist { kDense, kSparse, kClustered, kStrings, kWords, kBytes };
// Every distribution, in the order help texts list them.
inline constexpr Dist kAllDists[] = {Dist::kDense, Dist::kSparse, Dist::kClustered, Dist::kStrings, Dist::kWords, Dist::kBytes};

const char* DistName(Dist d);
bool ParseDist(const std::string& name, Dist* out);
bool IsIntegerDist(Dist d);

// N distinct integer keys of an integer distribution, in seeded random order.
std::vector<uint64_t> GenerateU64Keys(Dist d, size_t n, uint64_t seed);
// N distinct keys as byte strings (integer distributions are big-endian encoded).
std::vector<std::string> GenerateKeys(Dist d, size_t n, uint64_t seed);

// Start keys for range queries: `count` keys drawn (seeded) from `keys`.
std::vector<std::string> SampleKeys(const std::vector<std::string>& keys, size_t count, uint64_t seed);

}  // namespace wort::bench
