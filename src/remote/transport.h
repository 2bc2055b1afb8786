// src/remote/transport.h - the one-sided remote-memory interface CANRT and the request/reply
// baselines are written against (issue 18).
//
// A server exposes one memory region (a wort pool's mapping, or a region carved from it) to its
// clients. A client holds a Connection to that region and does, by offset into the region:
//   Read        - copy `len` bytes of the region into a local buffer      (RDMA READ,  ucp_get)
//   Write       - copy a local buffer into the region                      (RDMA WRITE, ucp_put)
//   FetchAdd64  - atomic 64-bit add on an 8-byte-aligned word, old value   (ucp_atomic FADD)
//   CompareSwap64 - atomic 64-bit CAS on an aligned word, returns old value (ucp_atomic CSWAP)
//   Notify      - a small message to the server's handler (RDMA write-with-immediate has no UCP
//                 equivalent: put + active message, ucp_am_send_nbx)
// and Flush() waits until every earlier Write/atomic of this connection is complete at the target
// (remote completion, ucp_ep_flush). Every call returns only when its own operation is complete
// locally (the read data is in `dst`, the atomic's old value is known); Write is complete at the
// target only after Flush() or after any later Read/atomic on the same connection (the ucx backend
// flushes before returning from Write, so "returned" means "visible at the target" for both
// backends: keep it that way, callers rely on it).
//
// Atomicity: FetchAdd64/CompareSwap64 are atomic with respect to each other on the same backend.
// They are NOT promised atomic with respect to the server's CPU stores to the same word on real
// RDMA hardware (only devices with global atomicity give that). A server that must change a word
// that clients touch with atomics does it through its own loopback Connection (ServerSide()
// below), or the structure's header says why a CPU store is safe for that word.
//
// Backends (both must pass the same tests):
//   "local" - the client maps the region's pool file in its own process (or is the server's own
//             process) and uses CPU loads, stores and std::atomic_ref. Deterministic; lets the
//             crash explorer cut between a client's write and the server's metadata update.
//   "ucx"   - UCX's UCP API (Debian libucx-dev). UCX_TLS=sm/posix: truly one-sided over shared
//             memory; UCX_TLS=tcp: software emulation, the target must progress its worker (the
//             server runs a progress thread); on InfiniBand/RoCE the same calls are RDMA.
//
// Persistence: a client's Write lands in the server's mapping; it is durable when the server
// persists it, or when the client's Persist(off, len) returns:
//   local - the client maps the region, so it writes the lines back itself through wort's
//           persistence module (PersistMapped below: pm::persist on its mapping). Durable.
//   ucx   - a remote-completion flush of the endpoint (ucp_ep_flush) and then a Read of the last
//           word of the range: the read-after-write that RDMA uses to push an earlier WRITE out
//           of the NIC and PCIe buffers into the target's memory system, since UCP 1.13 has no
//           persistent flush (no RDMA FLUSH verb). This makes the bytes durable only where the
//           target's caches are in the persistence domain (eADR) or its NIC writes around them
//           (DDIO off); on a target with ADR only, they may sit in its CPU cache until the
//           server's own persist. On this machine the ucx paths to a pool mapping are emulated
//           by the server's progress thread with CPU stores (doc/remote.md): the same caveat.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "wort/status.h"

namespace wort::remote {

// What a server publishes; a client needs all of it to connect (it travels out of band: the
// local backend reads it from the pool file, the ucx backend from a TCP bootstrap socket).
struct RegionInfo {
  std::string backend;       // "local" or "ucx"
  std::string address;       // local: the pool file path; ucx: "host:port" of the bootstrap
  std::uint64_t size = 0;    // bytes of the region
};

// The server side's handler of Notify messages: called on a server thread with the sender's id
// and the message bytes. It must not block for long (it runs on the progress path).
using NotifyHandler = std::function<void(std::uint32_t client_id, std::string_view msg)>;

class Connection {
 public:
  virtual ~Connection() = default;
  virtual Status Read(std::uint64_t off, void* dst, std::size_t len) = 0;
  virtual Status Write(std::uint64_t off, const void* src, std::size_t len) = 0;
  virtual Status FetchAdd64(std::uint64_t off, std::uint64_t add, std::uint64_t* old) = 0;
  virtual Status CompareSwap64(std::uint64_t off, std::uint64_t expected, std::uint64_t desired,
                               std::uint64_t* old) = 0;
  virtual Status Notify(std::string_view msg) = 0;
  virtual Status Flush() = 0;
  // Makes the bytes [off, off+len) of this connection's earlier Writes durable at the target
  // (see "Persistence" above for what each backend guarantees).
  virtual Status Persist(std::uint64_t off, std::size_t len) = 0;
  virtual std::uint32_t client_id() const = 0;
  // Counters for the benchmark: one-sided operations issued by this connection.
  struct Counters {
    std::uint64_t reads = 0, writes = 0, atomics = 0, notifies = 0, bytes_read = 0,
                  bytes_written = 0;
  };
  virtual Counters counters() const = 0;
};

// The server's end: owns the exposed region and dispatches notifications.
class Server {
 public:
  virtual ~Server() = default;
  virtual RegionInfo info() const = 0;
  // Connection from the server to its own region through the same transport (for atomics that
  // must be atomic with the clients' atomics, see above).
  virtual Connection& ServerSide() = 0;
  virtual void Stop() = 0;
};

// Copies out of / into an exposed region word by word with atomic loads (acquire) / stores
// (release) - 8-byte words where aligned, bytes at the edges - never memcpy: clients and the
// server's CPU store to the same words concurrently (RDMA gives a READ no atomicity beyond a
// word either; the protocols above check what they read: CANRT's crc and acknowledgement, the
// baselines' seq and CRC), and under the C++ memory model a plain copy racing with those stores
// is a data race (ThreadSanitizer reported them: a CANRT client's acknowledgement poll against
// the server's valid-byte store, the request/reply server's poll of a request slot against a
// client's Write, a CANRT resize's prefix-area copy against a client's Refresh). Acquire /
// release per word (plain moves on x86) also orders what a reader does after it saw a word with
// what the writer did before it stored that word: a client that reads CANRT's committed state
// word then touches the new data nodes the server zeroed before the commit. The local backend's
// Read/Write and every server-side access to words that clients use concurrently go through these.
void CopyFromRegion(char* dst, const char* region_src, std::size_t len);
void CopyToRegion(char* region_dst, const char* src, std::size_t len);
// The local backend's Persist: pm::persist of [p, p+len) of the caller's mapping of the region
// (also used by tests' in-process connections, so that the crash explorer sees this very site).
void PersistMapped(const char* p, std::size_t len);

// Expose [base, base+size) - memory the caller owns (a pool mapping) - to clients.
// `pool_path` is the file behind the mapping (the local backend's clients map it).
Status Listen(std::string_view backend, void* base, std::uint64_t size, std::string_view pool_path,
              NotifyHandler on_notify, std::unique_ptr<Server>* out);
// Connect to a published region.
Status Connect(const RegionInfo& info, std::unique_ptr<Connection>* out);

}  // namespace wort::remote
