// CRC32C (SSE4.2 crc32 instruction; the build targets x86-64-v3): the one copy used by the
// pool's header and root-entry checksums (src/pm/pool.cc) and the remote request/reply
// messages (src/remote/reply_kv.cc).
#pragma once

#include <nmmintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace wort {

// CRC32C over the bytes, widened: the CRC in the low 32 bits, the length `n` in the high 32.
inline uint64_t Crc64(const void* p, size_t n, uint64_t seed = 0) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t c = ~seed & 0xffffffffu;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, b + i, 8);
    c = _mm_crc32_u64(c, w);
  }
  for (; i < n; ++i) c = _mm_crc32_u8(static_cast<uint32_t>(c), b[i]);
  return (~c & 0xffffffffu) | (uint64_t(n) << 32);
}

}  // namespace wort
