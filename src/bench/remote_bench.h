// src/bench/remote_bench.h - `wort bench-remote`: the CANRT paper's measurements (section 4) of a
// remote key-value design (src/remote/designs.h) through its RemoteKV client.
//
// Keys are the paper's: 16 bytes, "key" + 13 decimal digits of the record number (so their order
// is the numbers' and a range of r keys from record i is records i..i+r-1); values 15 bytes.
// Phases, each printed as a line and (with --json) one JSON record:
//   load         `keys` Puts in a random order, one client (the table the others run on)
//   put          latency of Puts of new keys in increasing order, all after the loaded ones
//                (sequential inserts: each lands in the last data node), one client: p50/p99
//   get          latency of Gets of random loaded keys, one client
//   update       latency of Puts of random loaded keys (overwrite), one client
//   range-<r>    latency of a Scan of r keys from a random loaded record, one client
//   ycsb-<mix>   throughput with N client threads (each its own connection) of the mixes
//                write-only (100% update), 50:50, 95:5 (read:update) and read-only, uniform
//                keys over the loaded records, `ycsb_ops` ops per thread
//   put-random   (last: its keys sit between the records the ranges check) latency of Puts of
//                new keys spread over the key space: a random record's key with its last digit
//                replaced by ':' .. '?' (16 bytes, sorting just after its decade), one client
//   put-string   (after put-random) latency of Puts of new keys of 16 random letters and digits
//                (the paper's "random String workload", section 4.1), one client; each is read
//                back after the phase. They sort around the records' "key" prefix: the tree grows
//                new data nodes for them, where put-random's keys land in nodes packed with
//                whole decades of records (up to 30 of 31 slots), so 7-14% of those puts split a
//                node against 3-4% of put-string's (doc/remote.md "Random strings")
// resizes_per_op (load, put, put-random, put-string, update): the share of writes that found their node
// full and waited for a resize (RemoteKV::resize_requests; 0 for the request/reply designs).
// CPU time: cpu_ns_per_op is the client threads' CPU time per op (CLOCK_THREAD_CPUTIME_ID). When
// the server runs in this process (no --connect), server_cpu_ns_per_op is the process's CPU time
// (getrusage) minus the client threads', per op: every server-side thread (a baseline's polling
// thread, the transport's notify/progress thread) - the paper's "server CPU on the path". With
// --connect it is not known here (-1; `wort serve-remote` prints its own at exit).
// Transport operations: reads/writes/atomics/notifies (and bytes) per op are the clients'
// connections' counters over the phase (the paper's round trips per operation; a request/reply
// client's polls for the reply count as Reads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "wort/status.h"

namespace wort::bench {

struct RemoteBenchConfig {
  std::vector<std::string> designs = {"reply-wort", "reply-woart"};
  std::string backend = "local";
  std::string tls;            // ucx: UCX_TLS for this run ("" = leave the environment alone)
  std::string connect;        // an info file of a running `wort serve-remote` (then one design: its own)
  std::string dir = "/dev/shm";  // where in-process servers put their pools (removed after)
  std::uint64_t pool_size = 1ull << 30;
  std::size_t keys = 10000;
  std::size_t latency_ops = 2000;   // per latency phase
  std::vector<std::size_t> ranges = {1000};  // range sizes (keys per scan)
  std::size_t range_ops = 20;       // scans per range size
  std::vector<int> threads = {1, 2};
  std::size_t ycsb_ops = 5000;      // per thread per mix
  std::vector<std::string> mixes = {"write-only", "50:50", "95:5", "read-only"};
  std::uint64_t seed = 1;
  // Instead of the designs: the transport's own operations (design "transport", ops read-8,
  // read-2048, write-64, fetch-add, compare-swap, notify), `transport_ops` of each, one client,
  // against a 1 MiB region in a file under `dir`.
  bool transport = false;
  std::size_t transport_ops = 20000;
};

struct RemoteResult {
  std::string design, backend, tls, op;
  int threads = 1;
  std::uint64_t ops = 0, errors = 0;
  double seconds = 0, ops_per_s = 0, p50_ns = 0, p99_ns = 0;
  double cpu_ns_per_op = 0;          // client threads
  double server_cpu_ns_per_op = -1;  // -1: not measured (external server)
  std::size_t range_keys = 0;        // range phases: keys per scan
  // The clients' one-sided operations per op (RemoteKV::transport_counters; -1: not measured,
  // the --transport phases). A baseline's polls for its reply are Reads.
  double reads_per_op = -1, writes_per_op = -1, atomics_per_op = -1, notifies_per_op = -1;
  double bytes_read_per_op = -1, bytes_written_per_op = -1;
  double resizes_per_op = -1;  // writes that waited for a resize, per op (-1: not a write phase)
  // Writes whose post found no free word (CANRT: notified one by one instead), per op (-1: not
  // a write phase of one client).
  double post_fallbacks_per_op = -1;
  // Write phases of one client (h53, the profile of a put's tail): apply waits per op (CANRT:
  // write attempts that found an earlier item waiting for its apply), the p50/p99 of the ops that
  // neither requested a resize nor waited for an apply ("quiet"), and of the ops at or above the
  // phase's p99 the share that requested a resize and the share that waited for an apply (and
  // requested no resize). -1: not measured.
  double apply_waits_per_op = -1, quiet_p50_ns = -1, quiet_p99_ns = -1;
  double tail_resize_share = -1, tail_wait_share = -1;
  // (h69) The mean of the quiet ops, and the p50 and mean of the ops that requested a resize
  // (what one resize costs the writer that waits for it). -1: not measured (no such op).
  double quiet_mean_ns = -1, resize_p50_ns = -1, resize_mean_ns = -1;
};

// The 16-byte key of record i.
std::string RemoteBenchKey(std::uint64_t i);

// Runs every phase for every design; results in *out (printed as they come when `print`).
Status RunRemoteBench(const RemoteBenchConfig& cfg, bool print, std::vector<RemoteResult>* out);
nlohmann::json ToJson(const RemoteResult& r, const RemoteBenchConfig& cfg, const Environment& env);

}  // namespace wort::bench
