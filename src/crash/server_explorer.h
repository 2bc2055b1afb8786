// crash/server_explorer.h - the crash explorer over the write paths of `wort serve`'s item store
// (server/store.h): the creation of the store (index and metadata block), set, add, replace,
// append, prepend, incr, decr, cas, touch, gat, delete, the meta commands (mg T/N/R, ms I, md I,
// ma N), flush_all (at once and delayed), the lazy removal of an expired item, the crawler's
// removals and LRU eviction, with values from 1 byte to the item size limit.
//
// The model is the explorer's (crash/explorer.h: every flush and fence a crash point, in-flight
// and dirty lines in any subset); PathExplorer runs it over the store's pool, shadowed from
// before the store creates its index. The oracle is the store's own raw state, read through its
// index (ScanIndexForTest) before and after each operation: every entry's key with its record's
// cas, exptime, time word (meta state bits included), flags and data bytes, and the metadata
// block's flush_cas and flush_time. The check of a crash image:
//   1. Store::Open of the image (the server's own open: pool, post-crash GC, index, metadata
//      block), then Pool::WaitForRecovery;
//   2. its raw state equals the state before or after the operation in progress (after it, at
//      the return point): no key names a record whose bytes did not all reach memory, no touch
//      or flush_all is half applied;
//   3. the reachability contract (crash/oracle.h CheckReachability): allocated blocks are
//      exactly the reachable ones (no record leaked or freed while named);
//   4. the item count made in the background (store.h, Item count) equals the entries found;
//   5. the store still works: set, overwrite, get, delete of a fresh key, and a clean close.
// The operations come from a seeded generator over a key universe spanning the byte range
// (bytes >= 0x80, a 0x01 inside a key, prefix chains, a 250-byte key).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crash/explorer.h"
#include "wort/status.h"

namespace wort::crash {

struct ServerExplorerConfig {
  // explore.index (an ordered kind), explore_ops, seed, subsets, max_points, novel_only,
  // drop_site, dir, max_violations, log are used.
  ExplorerConfig explore;
  bool evict = false;                 // --evict lru in a small pool: the operations are sets
                                      // of large values that make the store evict
  uint64_t pool_size = 16ull << 20;   // the store's pool (its initial size too: images are whole)
  uint64_t max_item_size = 1 << 20;   // the item limit; values reach it exactly
};

// Runs the server store's crash explorer. Non-OK only when it could not run; violations are in
// *out, and out->sites lists the persist sites met.
Status RunServerExplorer(const ServerExplorerConfig& cfg, ExplorerResult* out);

// The server store's plan: the steps that together meet every persist site of src/server/. The
// gates run it as the pseudo-kind "server" (crash/plans.h kServerGateKind; tests/crash/
// coverage_test.cc and `wort crashtest --index server --coverage --mutate`).
std::vector<ServerExplorerConfig> ServerPlan(const std::string& dir = "/dev/shm");

}  // namespace wort::crash
