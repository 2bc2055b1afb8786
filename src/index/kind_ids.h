// Type ids of the index kinds, as stored in a pool's root table. Never reuse a number.
#pragma once
#include <cstdint>

namespace wort::kind_id {
inline constexpr uint32_t kWort = 1;
inline constexpr uint32_t kWoart = 2;
inline constexpr uint32_t kArtCow = 3;
// B-trees: 10..19 (FAST&FAIR, wB+Tree, FPTree, NVTree, B3-tree); hash tables: 20..29 (CCEH...).
// Test-only structures: 1000 and up.
inline constexpr uint32_t kTestFirst = 1000;
}  // namespace wort::kind_id
