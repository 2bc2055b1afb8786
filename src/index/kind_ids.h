// Type ids of the index kinds, as stored in a pool's root table. Never reuse a number.
#pragma once
#include <cstdint>

namespace wort::kind_id {
inline constexpr uint32_t kWort = 1;
inline constexpr uint32_t kWoart = 2;
inline constexpr uint32_t kArtCow = 3;
inline constexpr uint32_t kRoart = 4;  // ROART (Ma et al., FAST 2021)
// B-trees: 10..19 (FAST&FAIR, wB+Tree, FPTree, NVTree, B3-tree); hash tables: 20..29 (CCEH...).
// B-trees (src/index/btree/); 14..19 are left for FPTree, NVTree and others:
inline constexpr uint32_t kFastFair = 10;    // FAST&FAIR (Hwang et al., FAST 2018)
inline constexpr uint32_t kWbTree = 11;      // wB+Tree, bitmap + slot array (Chen and Jin, VLDB 2015)
inline constexpr uint32_t kWbTreeSlot = 12;  // wB+Tree, slot-only variant
inline constexpr uint32_t kB3Tree = 13;      // B3-tree (thesis chapter IV)
inline constexpr uint32_t kFpTree = 14;      // FPTree (Oukid et al., SIGMOD 2016)
inline constexpr uint32_t kNvTree = 15;      // NVTree (Yang et al., FAST 2015)
// Hash tables (src/index/hash/):
inline constexpr uint32_t kCceh = 20;     // CCEH with lazy deletion (thesis 4.4)
inline constexpr uint32_t kCcehCow = 21;  // CCEH(C): copy-on-write split, lock-free search
inline constexpr uint32_t kLinp = 22;     // linear probing
inline constexpr uint32_t kCuck = 23;     // cuckoo hashing
inline constexpr uint32_t kBch = 24;      // bucketized cuckoo hashing
inline constexpr uint32_t kLevl = 25;     // level hashing
inline constexpr uint32_t kPath = 26;     // path hashing
// Volatile references (src/index/volatile/; DRAM only, no crash claim): 30..39.
inline constexpr uint32_t kVbpTree = 30;  // plain B+-tree
inline constexpr uint32_t kVart = 31;     // plain ART
inline constexpr uint32_t kVradix = 32;   // plain radix tree, 4-bit span, no path compression
inline constexpr bool IsVolatile(uint32_t id) { return id >= 30 && id <= 39; }
// Roots that are not index kinds (their visit functions: index/registry.h RegisterRootVisitor): 40..49.
inline constexpr uint32_t kCanrt = 40;  // CANRT's region (src/remote/canrt.h)
inline constexpr uint32_t kKnn = 41;    // a kNN SS-tree (src/knn/layout.h)
inline constexpr uint32_t kKvBatch = 42;  // a key-value store's batch log (src/kv/batch_log.h)
// Test-only structures: 1000 and up.
inline constexpr uint32_t kTestFirst = 1000;
}  // namespace wort::kind_id
