// server/loadgen.h - a memcached load client for `wort bench-server`: the mc-benchmark pattern of
// the WORT paper (section 5.4): a series of SETs of string keys chosen uniformly at random from
// a key set, then a series of GETs of the same kind, over C client connections (one thread and
// one blocking socket each, one request in flight per connection, like mc-benchmark's clients;
// more with LoadOptions::pipeline).
// It speaks the text protocol to any memcached-compatible server, so `wort serve` and memcached
// are measured by the same client with the same settings.
//
// Bounds: every phase stops after `requests` requests or `max_seconds`, whichever comes first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wort/status.h"

namespace wort::server {

struct LoadOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 11211;
  // More servers (same host): each client connection then holds one socket per server and sends
  // a key to server hash(key) % n, a client-side partitioning like a cluster's clients do.
  std::vector<uint16_t> more_ports;
  int get_percent = 90;        // kMixed: share of gets
  int connections = 4;
  uint64_t requests = 200000;  // per phase, over all connections
  uint64_t keyspace = 100000;  // keys are "key:<n>" with n uniform in [0, keyspace)
  size_t value_size = 32;
  // Keys per GET request (memcached's multi-get, "get k1 k2 ... kN"): with N > 1 a request costs
  // the client and the kernel about as much as one key, so the server's own per-key work
  // dominates (how memcached's mc-crusher saturates a server). Results count keys, not requests.
  // Not with more_ports.
  int keys_per_get = 1;
  // Requests in flight per connection (pipelining): the connection sends up to this many before
  // it reads the oldest reply, so a server worker never waits for the client's round trip (with
  // one in flight, a server thread per connection idles while its client parses the reply and
  // sends the next). Latencies are then from a request's send to its reply, queueing included.
  // Not with more_ports. Keep depth x reply size below the socket buffers (~100 KiB on
  // loopback): a client that sends without reading can stall a server that cannot write.
  int pipeline = 1;
  double max_seconds = 60;     // per phase
  uint64_t seed = 1;
};

struct PhaseResult {
  std::string name;       // "SET", "GET", "FILL" or "MIX<get percent>"
  uint64_t requests = 0;  // completed operations: keys (a multi-get of N keys counts N)
  uint64_t errors = 0;    // unexpected replies (a GET miss is not an error; see misses)
  uint64_t misses = 0;    // keys a GET did not find
  double seconds = 0;
  double ops_per_sec = 0;                      // keys per second
  double p50_us = 0, p99_us = 0, max_us = 0;  // per request (a multi-get is one request)
};

enum class Phase {
  kSet,    // sets of random keys
  kGet,    // gets of random keys
  kFill,   // one set of every key of the key space, in order (before kMixed, so gets hit)
  kMixed,  // random keys, get_percent gets and the rest sets
};

// Runs one phase. Fails with IOError if no connection can be made, InvalidArgument on options
// that do not fit together.
Status RunPhase(const LoadOptions& opts, Phase phase, PhaseResult* out);

}  // namespace wort::server
