// src/remote/remote_kv.h - what a remote client of a key-value index offers, whichever design is
// behind it: CANRT (one-sided reads/writes/atomics on the server's data nodes) or the paper's
// baselines (WORT/WOART served by request/reply over the same transport). `wort bench-remote`
// and the remote tests drive this interface, so the comparison runs the same client code paths.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "remote/transport.h"
#include "wort/status.h"

namespace wort::remote {

class RemoteKV {
 public:
  virtual ~RemoteKV() = default;
  // Insert or overwrite. Returns OK only when the write is durable at the server (acknowledged).
  virtual Status Put(std::string_view key, std::string_view value) = 0;
  // NotFound when absent.
  virtual Status Get(std::string_view key, std::string* value) = 0;
  virtual Status Remove(std::string_view key) = 0;
  // Keys in [start, end) in ascending unsigned-byte order, at most `limit` (0 = no limit); the
  // callback returns false to stop early. An empty `end` means no upper bound.
  virtual Status Scan(std::string_view start, std::string_view end, std::size_t limit,
                      const std::function<bool(std::string_view key, std::string_view value)>& fn) = 0;
  virtual std::string name() const = 0;  // "canrt", "reply-wort", "reply-woart"
  // The one-sided operations this client's connection has issued so far (bench-remote reports
  // them per operation: the paper's round trips).
  virtual Connection::Counters transport_counters() const = 0;
  // Writes of this client that had to wait for a reorganisation of the structure (CANRT: a full
  // data node, RESIZE requested; 0 for designs without one). bench-remote reports them per op.
  virtual std::uint64_t resize_requests() const { return 0; }
  // Writes of this client that could not post their item without a notification of its own
  // (CANRT: its post segment or ring had no free word; 0 for designs without one).
  virtual std::uint64_t post_fallbacks() const { return 0; }
  // Write attempts of this client that found an earlier item waiting for the server's apply and
  // had to wait for it (CANRT: the key's item pending, or every free slot of the node pending;
  // 0 for designs without one). bench-remote reports them per op, and splits the tail by them.
  virtual std::uint64_t apply_waits() const { return 0; }
};

}  // namespace wort::remote
