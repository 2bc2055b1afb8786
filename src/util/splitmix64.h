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

namespace detail {
// The inverse of an odd 64-bit multiplier (Newton's iteration: each step doubles the exact bits).
constexpr uint64_t InverseOdd(uint64_t c) {
  uint64_t x = c;  // exact to 3 bits for odd c
  for (int i = 0; i < 5; ++i) x *= 2 - c * x;
  return x;
}
// The inverse of z ^= z >> s.
constexpr uint64_t UnXorShift(uint64_t z, unsigned s) {
  uint64_t x = z;
  for (unsigned k = s; k < 64; k += s) x = z ^ (x >> s);
  return x;
}
}  // namespace detail

// The inverse of SplitMix64Mix: SplitMix64Unmix(SplitMix64Mix(z)) == z. The crash explorer uses
// it to choose keys by their hash (the u64 key whose mixed word is a given value).
constexpr uint64_t SplitMix64Unmix(uint64_t z) {
  z = detail::UnXorShift(z, 31);
  z = detail::UnXorShift(z * detail::InverseOdd(0x94d049bb133111ebull), 27);
  z = detail::UnXorShift(z * detail::InverseOdd(0xbf58476d1ce4e5b9ull), 30);
  return z;
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
