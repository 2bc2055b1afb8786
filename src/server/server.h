// server/server.h - the network loop of `wort serve`: connections speaking memcached's protocol
// over TCP (one listener per address of config.listen, SO_REUSEADDR, TCP_NODELAY on every
// connection), a unix domain socket (config.unix_socket, file mode config.unix_mask), or TLS over
// TCP (config.tls, asio::ssl on OpenSSL), on standalone Asio.
//
// Threading (as memcached's): `threads` worker threads, each running its own io_context; the
// listeners accept on worker 0 and hand each new connection to the next worker round-robin.
// A connection lives on one worker and has at most one operation in flight (read, or write of
// the replies to everything parsed so far), so it needs no lock of its own; an idle connection
// holds no thread, only its socket and a small read buffer. Each worker keeps the set of its
// connections (touched only on its thread) for the idle sweep and for shutdown.
//
// Bounds per connection: the read buffer grows to at most one command line + one value
// (Limits), and shrinks back when drained; the reply buffer is flushed every
// Handler::kHighWater bytes. Past max_conns, a new connection gets memcached's
// "ERROR Too many open connections" (in plain text, before any TLS handshake) and is closed.
// With config.idle_timeout, a sweep once a second per worker closes connections that have
// waited that many sweeps for input. With config.auth, a text connection must authenticate
// first (server/auth.h); until then its input goes to TextAuth, not to the parser.
//
// Shutdown (Stop, SIGINT, SIGTERM): the listeners close; connections waiting for input close;
// a connection that is executing or sending finishes every complete request it has received and
// sends the replies, then closes; Run returns when all are gone (after at most 10 s it stops the
// loops regardless). The caller then closes the Store (a clean pool).
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
