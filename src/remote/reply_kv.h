// src/remote/reply_kv.h - the paper's baselines (CANRT section 4): WORT and WOART served by
// request/reply over the one-sided transport. Designs "reply-wort" and "reply-woart".
//
// Server (ReplyService): a wort KvStore (src/kv: index kind wort or woart, byte-string values in
// value blocks) in the pool, and a ring region exposed through the transport. The region is a
// side file "<pool>.rings" (MAP_SHARED; recreated zeroed at every start: a request of a previous
// server's client is never replayed), laid out as
//   [0, 64)      header: magic, version, max clients, slot bytes, request bytes, reply bytes
//   [64, 72)     client bitmap: bit i set = slot i is owned by a connected client
//   [4096 + i * slot)   slot i: request area (kRequestBytes), then reply area (kReplyBytes)
// A client claims a free slot with one CompareSwap64 on the bitmap and releases it the same way
// when it closes. A message (request or reply) is a 24-byte header - seq (8), payload length (4),
// op or status code (4), crc (8: util/crc32c.h over seq, length, op and payload) - then the
// payload. The client writes a request - header and payload - with ONE Write; a polling server
// thread sees a sequence number it has not served in the slot, and takes the request only when
// its crc matches (a Write's bytes may land in any order, on either backend: until the crc
// matches the request is incomplete and the thread looks again later). It executes the request
// on the KvStore (a Put/Remove is persisted before the reply, so an acknowledged write is
// durable), then writes the reply payload and header into the slot's reply area with CPU stores
// (the region is its own memory), the seq word last. The client polls the reply header with
// Reads until the seq is its own and the crc matches, then reads the rest if it did not fit in
// the first Read. One outstanding request per client (each client is synchronous).
//
// Scan: one request returns as many pairs as fit in the reply area, with a "more" flag; the
// client continues after the last key it got. (The paper's baselines issued one read request per
// key of a range; batching is the stronger baseline, and the one measured here.)
//
// Polling: the server thread spins over the owned slots; after ~50 us without a request it
// yields between rounds, after ~100 ms it sleeps 100 us between rounds (so an idle server costs
// little CPU on a shared machine; the first request after a long idle period waits up to 100 us).
//
// Limits: kMaxClients connected clients; key + value of a Put at most kRequestBytes - 32 bytes
// (InvalidArgument beyond); a value read back must fit in the reply area likewise.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "remote/remote_kv.h"
#include "remote/transport.h"

namespace wort::remote {

inline constexpr std::uint64_t kReplyMaxClients = 64;
inline constexpr std::uint64_t kReplyRequestBytes = 64 << 10;
inline constexpr std::uint64_t kReplyReplyBytes = 64 << 10;

struct ServeOptions {
  std::string backend = "local";   // transport backend: "local" or "ucx"
  std::string pool;                // the pool file (created when absent)
  std::uint64_t pool_size = 1ull << 30;  // maximum size of a new pool
  std::string kind;                // index kind, for designs that take one ("" = the design's)
};

// A running remote service of any design: what the client needs, and a way to stop it.
class RemoteService {
 public:
  virtual ~RemoteService() = default;
  virtual RegionInfo info() const = 0;
  virtual std::string design() const = 0;
  // Requests served so far (for the benchmark's server CPU time per operation; 0 when the design
  // does not count them).
  virtual std::uint64_t requests_served() const = 0;
  // Stops the server threads and closes the pool cleanly. Idempotent.
  virtual Status Stop() = 0;
};

// Starts the request/reply server of index kind `kind` ("wort" or "woart").
Status ServeReply(const ServeOptions& opts, const std::string& kind, std::unique_ptr<RemoteService>* out);
// Connects a client of that server.
Status ConnectReply(const RegionInfo& info, const std::string& kind, std::unique_ptr<RemoteKV>* out);

}  // namespace wort::remote
