// index/volatile/vart.h - what vart (vart.cc) shows beyond the Index interface: the accounting of
// its node allocator (NodeArena), for tests and diagnostics.
#pragma once

#include <cstdint>

#include "sync/epoch.h"
#include "wort/index.h"

namespace wort::vol {

struct VartMemory {
  int64_t blocks_live = 0;        // blocks the arena handed out and did not get back
  int64_t bytes_live = 0;         // their class bytes
  uint64_t tree_blocks = 0;       // nodes (the root excepted: it is not the arena's) and leaves in the tree
  uint64_t retired_pending = 0;   // blocks retired to the epoch manager, not yet given back
  uint64_t chunks = 0;            // chunks the arena mapped
  uint64_t chunk_bytes = 0;
  uint64_t caches = 0;            // thread caches (threads that wrote or reclaimed)
  uint64_t shared_blocks = 0;     // free blocks in the arena's shared pool
};

// Fills *out for a vart index (writers quiesced while the tree is walked): with no writer
// running, blocks_live == tree_blocks + retired_pending (nothing leaked, nothing freed twice).
// False if idx is not a vart.
bool VartMemoryOf(const Index& idx, VartMemory* out);

// The counts of vart's own epoch manager (its writers' epochs and retires; vart does not use the
// pool's), for diagnostics (wort bench ycsb). False if idx is not a vart.
bool VartEpochStatsOf(const Index& idx, sync::EpochStats* out);
// True iff the calling thread is inside vart's epoch (for tests: NodeArena's map hook checks
// that no chunk is mapped inside it). False also if idx is not a vart.
bool VartThreadInEpoch(const Index& idx);

}  // namespace wort::vol
