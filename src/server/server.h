// server/server.h - the network loop of `wort serve`: TCP connections speaking memcached's text
// protocol, on standalone Asio.
//
// Threading (as memcached's): `threads` worker threads, each running its own io_context; the
// listener accepts on worker 0 and hands each new connection to the next worker round-robin.
// A connection lives on one worker and has at most one operation in flight (read, or write of
// the replies to everything parsed so far), so it needs no lock of its own; an idle connection
// holds no thread, only its socket and a small read buffer.
//
// Bounds per connection: the read buffer grows to at most one command line + one value
// (Limits), and shrinks back when drained; the reply buffer is flushed every
// Handler::kHighWater bytes. A client that sends half a request and vanishes costs its buffer
// until the socket reports the close. Past max_conns, a new connection gets
// "SERVER_ERROR Too many open connections" and is closed (memcached's behaviour).
//
// Thread safety: Start, then Run on one thread; Stop from any thread (or a signal handler via
// asio::signal_set inside Run).
#pragma once

#include <memory>

#include "server/handler.h"
#include "server/store.h"
#include "wort/status.h"

namespace wort::server {

// OK if `tls` describes a usable server certificate and key (the files load and match).
Status CheckTls(const TlsConfig& tls);

class Server {
 public:
  Server(Store& store, const ServerConfig& config);
  ~Server();

  // Binds and listens. config.port 0 picks a free port (see port()).
  Status Start();
  uint16_t port() const;
  // Serves until Stop() or SIGINT/SIGTERM. Returns when every worker has stopped.
  void Run();
  void Stop();

  ServerStats& stats();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace wort::server
