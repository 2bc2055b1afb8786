// crash/kv_explorer.h - the crash explorer and the kill test over the key-value store API
// (wort/kv.h): its put (new key), overwrite and remove paths, value block and index entry
// together, and its batches (KvStore::Write: value blocks, record, commit word, apply, clear; a
// batch's allowed states are all of it or none of it, and the reopen finishes a committed one).
//
// The model is the explorer's (crash/explorer.h: every flush and fence a crash point, in-flight
// and dirty lines in any subset, optionally torn at 8 bytes); PathExplorer runs it. The oracle
// is a DRAM map key -> value bytes. The check of a crash image:
//   1. KvStore::Open of the image, then Pool::WaitForRecovery (the post-crash GC ends);
//   2. its contents (a Scan for ordered kinds, a Get of every key of the workload otherwise)
//      equal the state before or after the operation in progress (after it, at the return
//      point), value bytes included: no key points at a half-written value; Count agrees;
//   3. the reachability contract (crash/oracle.h CheckReachability): the allocated blocks are
//      exactly those reachable, so no key points at a freed value block and no value leaks;
//      KvStore::Check passes (every key's block is a whole value block);
//   4. the store still works: a put of a fresh key, an overwrite, a remove, a get, a clean close.
//
// The kill test (RunKvKillTest): a child process runs the workload on the store and reports each
// operation's begin and acknowledgement through a pipe; it is SIGKILLed at a random moment; the
// parent reopens the pool and checks 1-3 with "every acknowledged operation present, the one in
// progress present or absent". Rounds accumulate crashes on one pool.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

#include "crash/explorer.h"
#include "wort/kv.h"
#include "wort/status.h"

namespace wort::crash {

struct KvExplorerConfig {
  ExplorerConfig explore;   // index (the kind), keys (setup), explore_ops, seed, subsets, max_points,
                            // torn_lines, dir, log are used
  size_t big_every = 8;     // every n-th value is larger than Allocator::kMaxSmall (0: never)
  size_t batch_every = 0;   // one operation in n (at random) is a batch of 1..6 (KvStore::Write;
                            // 1: only batches); checked all-or-nothing. 0: no batches
};

// The expected contents of a store.
using KvContents = std::map<std::string, std::string>;

// Runs the KV crash explorer. Non-OK only when it could not run; violations are in *out.
Status RunKvExplorer(const KvExplorerConfig& cfg, ExplorerResult* out);

struct KvKillConfig {
  std::string kind = "woart";
  int rounds = 4;
  size_t keys = 64;                 // key universe (edge keys included)
  uint64_t max_delay_us = 20000;    // kill moment, uniform in [0, this] after the child is ready
  uint64_t seed = 1;
  std::string dir = "/dev/shm";
  FILE* log = nullptr;
  size_t batch_every = 0;           // as KvExplorerConfig::batch_every: the writer runs batches too
};

struct KvKillResult {
  int rounds = 0;
  uint64_t acked_ops = 0;
  int pending_applied = 0, pending_absent = 0;
  std::vector<std::string> violations;
};

Status RunKvKillTest(const KvKillConfig& cfg, KvKillResult* out);

// Checks 1-3 above on the pool at `path` (store root "kv"): the contents must equal one of
// `allowed`; *matched receives its position. `universe` is the keys to Get for unordered kinds.
Status CheckKvPool(const std::string& path, const std::vector<std::string>& universe,
                   const std::vector<const KvContents*>& allowed, bool exercise, int* matched);

}  // namespace wort::crash
