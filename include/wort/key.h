// wort/key.h - key codecs shared by every index.
//
// Every index orders keys as byte strings compared lexicographically as *unsigned* bytes
// (memcmp order; a key that is a proper prefix of another sorts first). 8-byte integer keys are
// encoded big-endian, so that their byte order equals their integer order.
#pragma once

// wort's C++ headers use C++20 (e.g. std::source_location in pm.h): a
// consumer must compile with -std=c++20 (wort.pc's Cflags and the CMake targets' compile
// features say so). A C program, or C++ of any standard, may use the C API (wort.h) instead.
#if defined(__cplusplus) && __cplusplus < 202002L
#error "wort's C++ headers need C++20: compile with -std=c++20 (or use the C API, wort.h)"
#endif

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace wort {

// Longest key any index accepts; longer keys get InvalidArgument.
inline constexpr size_t kMaxKeyLen = 4096;

enum class KeyType : uint8_t {
  kU64 = 1,    // exactly 8 bytes: a big-endian encoded uint64_t
  kBytes = 2,  // 0..kMaxKeyLen bytes, any byte values
};

struct U64Key {
  char buf[8];
  explicit U64Key(uint64_t v) {
    const uint64_t be = __builtin_bswap64(v);
    std::memcpy(buf, &be, 8);
  }
  std::string_view view() const { return {buf, 8}; }
  operator std::string_view() const { return view(); }
};

inline uint64_t DecodeU64(std::string_view k) {
  uint64_t be = 0;
  std::memcpy(&be, k.data(), 8);
  return __builtin_bswap64(be);
}
inline std::string EncodeU64(uint64_t v) { return std::string(U64Key(v).view()); }

// Three-way comparison in index order (unsigned bytes, shorter prefix first).
inline int CompareKeys(std::string_view a, std::string_view b) {
  const size_t n = a.size() < b.size() ? a.size() : b.size();
  const int c = n ? std::memcmp(a.data(), b.data(), n) : 0;  // memcmp compares unsigned bytes
  if (c != 0) return c < 0 ? -1 : 1;
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

}  // namespace wort
