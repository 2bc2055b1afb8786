// `wort serve`: a memcached-compatible server whose items live in a wort pool (doc/server.md).
#include <fmt/core.h>

#include <cctype>
#include <cstdio>
#include <memory>
#include <thread>

#include "cli/command.h"
#include "server/server.h"
#include "server/store.h"

namespace wort::cli {
namespace {

uint64_t ParseBytes(const std::string& s) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw CLI::ValidationError("size", "bad size '" + s + "'");
  }
  uint64_t mul = 1;
  if (pos < s.size()) {
    switch (std::toupper(static_cast<unsigned char>(s[pos]))) {
      case 'K': mul = 1ull << 10; break;
      case 'M': mul = 1ull << 20; break;
      case 'G': mul = 1ull << 30; break;
      case 'T': mul = 1ull << 40; break;
      default: throw CLI::ValidationError("size", "bad size suffix in '" + s + "'");
    }
  }
  if (v < 0) throw CLI::ValidationError("size", "negative size '" + s + "'");
  return static_cast<uint64_t>(v * static_cast<double>(mul));
}

struct ServeOpts {
  std::string pool, index, listen = "127.0.0.1", max_item_size = "1M", pool_size = "1G";
  uint16_t port = 11211;
  int threads = 4;
  uint32_t max_conns = 1024;
  std::string evict = "none";
};

void AddServe(CLI::App& app) {
  auto o = std::make_shared<ServeOpts>();
  auto* cmd = app.add_subcommand(
      "serve", "Serve memcached's text protocol from a pool: acknowledged writes survive kill -9 (doc/server.md)");
  cmd->add_option("--pool", o->pool, "Pool file (created if missing), e.g. /dev/shm/mc.pool")->required();
  cmd->add_option("--index", o->index,
                  "Index kind for a new pool (default: " + server::DefaultIndexKind() + "); must match an existing one");
  cmd->add_option("--port", o->port, "TCP port (0 = any free port; the chosen one is printed)")->capture_default_str();
  cmd->add_option("--listen", o->listen, "Address to listen on")->capture_default_str();
  cmd->add_option("--threads", o->threads, "Worker threads")->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("--max-conns", o->max_conns, "Simultaneous connections")->capture_default_str()->check(CLI::Range(1u, 1000000u));
  cmd->add_option("--max-item-size", o->max_item_size, "Largest value (bytes, or with K/M/G)")->capture_default_str();
  cmd->add_option("--pool-size", o->pool_size, "Size a new pool may grow to (bytes, or with K/M/G/T)")->capture_default_str();
  cmd->add_option("--evict", o->evict,
                  "When the pool is full: 'none' refuses the write (SERVER_ERROR out of memory), 'lru' evicts "
                  "sampled least-recently-used items, as memcached does. none is the default because a persistent "
                  "store should not drop acknowledged data silently")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "lru"}));
  cmd->callback([o] {
    server::StoreOptions so;
    so.pool_path = o->pool;
    so.index_kind = o->index;
    so.pool_size = ParseBytes(o->pool_size);
    so.max_item_size = ParseBytes(o->max_item_size);
    so.evict = o->evict == "lru" ? server::EvictPolicy::kLru : server::EvictPolicy::kNone;
    if (so.max_item_size < 1024 || so.max_item_size > (1ull << 30)) {
      fmt::print(stderr, "wort serve: --max-item-size must be between 1K and 1G\n");
      throw CLI::RuntimeError(2);
    }
    std::unique_ptr<server::Store> store;
    Status s = server::Store::Open(so, &store);
    if (!s.ok()) {
      fmt::print(stderr, "wort serve: {}\n", s.ToString());
      throw CLI::RuntimeError(1);
    }
    const bool clean = store->pool().opened_clean();
    fmt::print("wort serve: pool {} opened in {:.3f} ms ({}), index {}, {} items, generation {}\n", o->pool,
               store->open_seconds() * 1e3,
               clean ? "clean shutdown" : "after an unclean shutdown: post-crash recovery runs in the background",
               store->index_kind(), store->curr_items(), store->pool().generation());
    std::fflush(stdout);
    std::thread recovery_log;
    if (!clean) {
      recovery_log = std::thread([st = store.get()] {
        Status r = st->pool().WaitForRecovery();
        fmt::print("wort serve: post-crash recovery {} in {:.3f} s\n", r.ok() ? "finished" : "FAILED: " + r.ToString(),
                   st->pool().recovery_seconds());
        std::fflush(stdout);
      });
    }

    server::ServerConfig cfg;
    cfg.listen = o->listen;
    cfg.port = o->port;
    cfg.threads = o->threads;
    cfg.max_conns = o->max_conns;
    cfg.limits.max_item_size = so.max_item_size;
    server::Server srv(*store, cfg);
    s = srv.Start();
    if (!s.ok()) {
      fmt::print(stderr, "wort serve: {}\n", s.ToString());
      if (recovery_log.joinable()) recovery_log.join();
      throw CLI::RuntimeError(1);
    }
    cfg.port = srv.port();
    fmt::print("wort serve: listening on {}:{} with {} threads (max {} connections, items up to {} bytes, evict {})\n",
               cfg.listen, srv.port(), cfg.threads, cfg.max_conns, cfg.limits.max_item_size, o->evict);
    std::fflush(stdout);
    srv.Run();
    fmt::print("wort serve: shutting down\n");
    if (recovery_log.joinable()) recovery_log.join();
    s = store->Close();
    if (!s.ok()) {
      fmt::print(stderr, "wort serve: close: {}\n", s.ToString());
      throw CLI::RuntimeError(1);
    }
    fmt::print("wort serve: pool closed cleanly\n");
  });
}

const bool kReg = RegisterCommand(&AddServe);

}  // namespace
}  // namespace wort::cli
