// server/handler.h - executes parsed memcached requests against the Store and writes the reply
// text. One Handler per connection; no I/O (the network loop in server.cc moves the bytes), so
// tests can drive it directly.
//
// Large replies are produced in pieces: a multi-key get or a range whose reply passes
// kHighWater bytes stops (Step::kMore); the caller sends what is in `out` and calls Resume().
// This bounds a connection's output buffer to about kHighWater + one value.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "server/protocol.h"
#include "server/store.h"
#include "wort/version.h"

namespace wort::server {

inline constexpr const char* kVersionString = "1.6.18-wort-" WORT_VERSION_STRING;  // memcached protocol 1.6.18, then wort::Version()

struct ServerConfig {
  std::string listen = "127.0.0.1";
  uint16_t port = 11211;
  int threads = 4;
  uint32_t max_conns = 1024;
  Limits limits;  // max_item_size and line limits
};

// memcached's general-purpose counters (field names as in `stats`).
struct ServerStats {
  int64_t start_time = 0;  // unix seconds
  std::atomic<uint64_t> curr_connections{0}, total_connections{0}, rejected_connections{0};
  std::atomic<uint64_t> cmd_get{0}, cmd_set{0}, cmd_flush{0}, cmd_touch{0};
  std::atomic<uint64_t> get_hits{0}, get_misses{0}, get_expired{0}, get_flushed{0};
  std::atomic<uint64_t> delete_hits{0}, delete_misses{0};
  std::atomic<uint64_t> incr_hits{0}, incr_misses{0}, decr_hits{0}, decr_misses{0};
  std::atomic<uint64_t> cas_hits{0}, cas_misses{0}, cas_badval{0};
  std::atomic<uint64_t> touch_hits{0}, touch_misses{0};
  std::atomic<uint64_t> store_too_large{0}, store_no_memory{0};
  std::atomic<uint64_t> bytes_read{0}, bytes_written{0};
  std::atomic<uint32_t> verbosity{0};
  void Reset();
};

class Handler {
 public:
  enum class Step { kDone, kMore, kClose };
  static constexpr size_t kHighWater = 1 << 20;

  Handler(Store& store, ServerStats& stats, const ServerConfig& config)
      : store_(store), stats_(stats), config_(config) {}

  // Executes `req` and appends its reply to *out (nothing for noreply). On kMore, the request's
  // views must stay valid until Resume returns kDone.
  Step Execute(const Request& req, std::string* out);
  // Continues a retrieval that returned kMore.
  Step Resume(std::string* out);

 private:
  Step Retrieve(std::string* out);
  Step RangeStep(std::string* out);
  // mg, ms, md, ma, me, mn (the reply formats are in handler.cc).
  void Meta(const Request& req, std::string* out);
  void Stats(std::string_view group, std::string* out);

  Store& store_;
  ServerStats& stats_;
  const ServerConfig& config_;
  // The retrieval in progress (get/gets/gat/gats/range).
  Request pending_;
  size_t next_key_ = 0;
  std::string range_next_;
  uint64_t range_left_ = 0;
};

}  // namespace wort::server
