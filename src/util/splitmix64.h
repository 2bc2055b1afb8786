// splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", 2014): the
// one copy used by the workload generator, the crash explorer's replays and the hash functions.
// Small, seeded, and the same on every platform: replays and stored hash layouts depend on the
// exact sequence, so never change the constants.
#pragma once

#include <cstdint>

namespace wort {

// The splitmix64 finalizer: a bijection of 64-bit integers with full avalanche.
inline uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The generator: a 64-bit state, one add of the golden gamma and the finalizer per output.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : s_(seed) {}
  uint64_t Next() { return SplitMix64Mix(s_ += 0x9e3779b97f4a7c15ull); }
  // Uniform in [0, bound), bound > 0 (Lemire's multiply-shift; the bias is < bound / 2^64).
  uint64_t Below(uint64_t bound) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * bound) >> 64);
  }
  bool Bit() { return Next() >> 63; }

 private:
  uint64_t s_;
};

}  // namespace wort
