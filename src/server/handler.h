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
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "server/proto_bin.h"
#include "server/protocol.h"
#include "server/store.h"
#include "sync/counter.h"
#include "wort/version.h"

namespace wort::server {

inline constexpr const char* kVersionString = "1.6.18-wort-" WORT_VERSION_STRING;  // memcached protocol 1.6.18, then wort::Version()

class AuthFile;  // server/auth.h

// TLS settings (memcached's -Z and -o ssl_*); see doc/server.md.
struct TlsConfig {
  bool enabled = false;
  std::string chain_cert, key, ca_cert, ciphers;  // PEM files; key defaults to chain_cert
  int verify_mode = 0;                            // 0 none, 1 request, 2 require, 3 once
  int min_version = 2;                            // 0 TLS 1.0 .. 3 TLS 1.3
};

class Handler;

struct ServerConfig {
  std::string listen = "127.0.0.1";  // one address or a comma-separated list
  uint16_t port = 11211;
  int threads = 4;
  uint32_t max_conns = 1024;
  Limits limits;  // max_item_size and line limits
  std::string unix_socket;           // non-empty: listen on this unix socket (and not on TCP)
  uint32_t unix_mask = 0700;         // the socket file's permissions
  uint32_t idle_timeout = 0;         // seconds without a request before a connection is closed; 0 = never
  // Seconds a connection may wait with a request half received (a command line, or a value
  // not yet whole) before it is closed; 0 = never. On by default (memcached's idle_timeout is
  // off by default, and stays so here): a client that stops in the middle of a request holds
  // server memory that no other client can use.
  uint32_t partial_timeout = 60;
  // The most bytes that all connections' input buffers may hold beyond their first 64 KiB
  // each (a value being received is buffered whole before it is stored). A request that would
  // go past it is refused as memcached refuses a value it has no memory for: "SERVER_ERROR out
  // of memory storing object", its data discarded as it arrives (binary protocol: the
  // connection is closed).
  uint64_t max_buffered = 64ull << 20;
  int backlog = 1024;
  const AuthFile* auth = nullptr;    // non-null: clients must authenticate (-Y)
  TlsConfig tls;
  std::string durability;            // the pool's durability level, shown by `stats`
};

// memcached's general-purpose counters (field names as in `stats`).
//
// Cache lines (issue 35; doc/server.md "What a request writes"): a request writes no line of this
// struct that another worker thread writes. The counters that requests change (Counters) are
// kept per thread: kShards copies, one 256-byte block each (the hot ones in its first line), a
// thread adding to its own block (the shard of sync/counter.h: given round robin at a thread's
// first add, so up to kShards threads never share one; beyond that, threads share blocks and
// still count exactly, the adds being atomic read-modify-writes). `stats` sums the blocks (Sum):
// exact when no request runs, otherwise a value each counter had at some moment of the read,
// as memcached's own per-thread counters. What changes per connection (connections, the input
// buffer budget, timeouts) stays in single words, on lines of their own apart from the
// read-mostly words that every request reads (verbosity, detail).
struct ServerStats {
  struct alignas(64) Counters {
    // First line: what a get and a set write.
    std::atomic<uint64_t> cmd_get{0}, get_hits{0}, get_misses{0}, bytes_read{0}, bytes_written{0}, cmd_set{0};
    std::atomic<uint64_t> cmd_touch{0}, get_expired{0};
    std::atomic<uint64_t> get_flushed{0}, cmd_flush{0};
    std::atomic<uint64_t> delete_hits{0}, delete_misses{0};
    std::atomic<uint64_t> incr_hits{0}, incr_misses{0}, decr_hits{0}, decr_misses{0};
    std::atomic<uint64_t> cas_hits{0}, cas_misses{0}, cas_badval{0};
    std::atomic<uint64_t> touch_hits{0}, touch_misses{0};
    std::atomic<uint64_t> store_too_large{0}, store_no_memory{0};
    std::atomic<uint64_t> auth_cmds{0}, auth_errors{0};
  };
  static constexpr unsigned kShards = 64;  // sync::ShardedCounter::kShards: the same shard numbers
  using Field = std::atomic<uint64_t> Counters::*;
  // The calling thread's counters: one thread-local load (initial-exec TLS), inline.
  Counters& Local() {
    unsigned s = sync::detail::t_counter_shard;  // shard + 1; 0: none yet
    if (s == 0) [[unlikely]] s = AssignShard();
    return shards_[s - 1];
  }
  // One counter, summed over the threads.
  uint64_t Sum(Field f) const {
    uint64_t s = 0;
    for (const Counters& c : shards_) s += (c.*f).load(std::memory_order_relaxed);
    return s;
  }

  // Read by every request (written only by `verbosity` and `stats detail on|off`).
  alignas(64) int64_t start_time = 0;  // unix seconds
  std::atomic<uint32_t> verbosity{0};
  std::atomic<bool> detail{false};
  // Per connection, not per request.
  alignas(64) std::atomic<uint64_t> curr_connections{0}, total_connections{0}, rejected_connections{0};
  std::atomic<uint64_t> idle_kicks{0};
  // Input buffer bytes held beyond the first 64 KiB per connection (ServerConfig::max_buffered),
  // requests refused for it, and connections closed with a request half received.
  std::atomic<uint64_t> buffered_bytes{0}, buffer_refusals{0}, partial_kicks{0};
  // stats detail (memcached's per-prefix counters, off by default): the prefix of a key is its
  // part before the first ':'; keys without one are not counted. Under prefix_mu.
  struct PrefixCounts {
    uint64_t get = 0, hit = 0, set = 0, del = 0;
  };
  std::mutex prefix_mu;
  std::map<std::string, PrefixCounts, std::less<>> prefixes;
  enum class DetailOp { kGet, kHit, kSet, kDel };
  void Detail(std::string_view key, DetailOp op) {
    if (detail.load(std::memory_order_relaxed)) CountDetail(key, op);  // off by default: one load
  }
  void CountDetail(std::string_view key, DetailOp op) {
    const size_t c = key.find(':');
    if (c == std::string_view::npos) return;
    std::lock_guard<std::mutex> g(prefix_mu);
    auto it = prefixes.find(key.substr(0, c));
    if (it == prefixes.end()) it = prefixes.emplace(std::string(key.substr(0, c)), PrefixCounts{}).first;
    PrefixCounts& p = it->second;
    (op == DetailOp::kGet ? p.get : op == DetailOp::kHit ? p.hit : op == DetailOp::kSet ? p.set : p.del) += 1;
  }
  // The connections (their handlers) for `stats conns`; see Handler::SetPeer.
  std::mutex conns_mu;
  std::set<const Handler*> conns;
  void Reset();

 private:
  // Gives the calling thread its shard as sync::ShardedCounter does (the same thread-local
  // number, so a thread's counters of every kind sit at the same index); returns shard + 1.
  static unsigned AssignShard();
  Counters shards_[kShards];
};

static_assert(ServerStats::kShards == sync::ShardedCounter::kShards);
static_assert(sizeof(ServerStats::Counters) == 256, "the hot counters fill the first line of a block");

class Handler {
 public:
  enum class Step { kDone, kMore, kClose };
  static constexpr size_t kHighWater = 1 << 20;

  Handler(Store& store, ServerStats& stats, const ServerConfig& config)
      : store_(store), stats_(stats), config_(config), bin_parser_(config.limits) {}
  ~Handler();
  Handler(const Handler&) = delete;
  Handler& operator=(const Handler&) = delete;

  // Names the connection for `stats conns` (its socket descriptor and memcached-style
  // addresses, "tcp:127.0.0.1:5000") and lists it there until the handler is destroyed.
  void SetPeer(int fd, std::string addr, std::string listen_addr);

  // Executes `req` and appends its reply to *out (nothing for noreply). On kMore, the request's
  // views must stay valid until Resume returns kDone.
  Step Execute(const Request& req, std::string* out);
  // Continues a retrieval that returned kMore.
  Step Resume(std::string* out);

  // ---- the binary protocol (handler_bin.cc) ----
  // What RunBinary did: `consumed` bytes of `in` are done; then the caller reads more (`need`:
  // the input size the next request needs, when known), or sends `out` and calls RunBinary
  // again (kFlush: the output passed kHighWater), or sends `out` and closes (kClose).
  struct BinProgress {
    enum class Next { kRead, kFlush, kClose };
    size_t consumed = 0;
    size_t need = 0;
    Next next = Next::kRead;
  };
  // Parses and executes the binary requests at the front of `in`, appending the responses.
  BinProgress RunBinary(std::string_view in, std::string* out);
  // Executes one parsed binary request (kClose: quit).
  Step ExecuteBinary(const bin::Request& req, std::string* out);

 private:
  Step Retrieve(const Request& req, std::string* out);
  Step RangeStep(std::string* out);
  // lru_crawler metadump, in pieces of about kHighWater bytes.
  Step MetadumpStep(std::string* out);
  // stats cachedump / items / slabs / conns: memcached's fields for wort's single class 1.
  void Cachedump(const Request& req, std::string* out);
  void ClassStats(std::string_view group, std::string* out);
  void Conns(std::string* out);
  // Seconds since the epoch from the coarse clock (stats conns' secs_since_last_cmd).
  static int64_t CoarseNow();
  // mg, ms, md, ma, me, mn (the reply formats are in handler.cc).
  void Meta(const Request& req, std::string* out);
  void Stats(std::string_view group, std::string* out);
  // The command logic that the text and the binary protocol share (each keeps its own wire
  // format: Execute and ExecuteBinary turn the Result into a line or a packet).
  //   StoreCommand   set/add/replace/append/prepend/cas: counts cmd_set; a value over the item
  //                  size limit (too_large) is kTooLarge without calling `store`, otherwise the
  //                  result of `store()`, with cas_hits/badval/misses counted when `is_cas`;
  //                  too large and no memory are counted and, as memcached does, a SET whose
  //                  value is too large or finds no memory unlinks the key's old value (no
  //                  stale value outlives a write the client believes it made).
  //   DeleteCommand  delete (cas 0: unconditional; else compared): counts hits and misses.
  //   CountArith     incr/decr's counts for a result (hits, misses, no memory).
  template <class StoreFn>
  Result StoreCommand(std::string_view key, bool is_set, bool is_cas, bool too_large, StoreFn&& store);
  Result DeleteCommand(std::string_view key, uint64_t cas);
  void Detail(std::string_view what, std::string* out);
  void CountArith(bool incr, Result r);

  Store& store_;
  ServerStats& stats_;
  const ServerConfig& config_;
  // The retrieval in progress (get/gets/gat/gats/range).
  Request pending_;
  size_t next_key_ = 0;
  std::string range_next_;
  uint64_t range_left_ = 0;
  // stats conns.
  int fd_ = -1;
  std::string peer_, listen_addr_;
  std::atomic<int64_t> last_cmd_{0};
  bool registered_ = false;
  // Binary protocol state.
  bin::Parser bin_parser_;
  bin::Request bin_req_;
  bool sasl_done_ = false;  // SASL PLAIN succeeded on this connection (config_.auth set)
};

template <class StoreFn>
Result Handler::StoreCommand(std::string_view key, bool is_set, bool is_cas, bool too_large, StoreFn&& store) {
  const auto relaxed = std::memory_order_relaxed;
  ServerStats::Counters& c = stats_.Local();
  c.cmd_set.fetch_add(1, relaxed);
  stats_.Detail(key, ServerStats::DetailOp::kSet);
  if (too_large) {
    if (is_set) store_.Unlink(key);
    c.store_too_large.fetch_add(1, relaxed);
    return Result::kTooLarge;
  }
  const Result r = store();
  if (is_cas) {
    if (r == Result::kStored) c.cas_hits.fetch_add(1, relaxed);
    else if (r == Result::kExists) c.cas_badval.fetch_add(1, relaxed);
    else if (r == Result::kNotFound) c.cas_misses.fetch_add(1, relaxed);
  }
  if (r == Result::kTooLarge) c.store_too_large.fetch_add(1, relaxed);
  if (r == Result::kNoMemory) {
    if (is_set) store_.Unlink(key);
    c.store_no_memory.fetch_add(1, relaxed);
  }
  return r;
}

}  // namespace wort::server
