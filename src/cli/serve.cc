// `wort serve`: a memcached-compatible server whose items live in a wort pool (doc/server.md).
//
// Options: wort's long ones, and beside them memcached's own flags with the same meaning
// (-p -l -U 0 -s -a -c -t -m -I -M -v -vv -Y -Z -o ..., see AddServe), so that an init script or
// a container written for memcached starts `wort serve` with its flags plus --pool. A memcached
// flag that wort serve does not support is refused with a message naming it (exit code 2),
// never ignored.
#include <fmt/core.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <thread>

#include "cli/command.h"
#include "cli/options.h"
#include "server/auth.h"
#include "server/server.h"
#include "server/store.h"
#include "wort/pool.h"
#include "wort/version.h"

namespace wort::cli {
namespace {

// Usage errors: a message and exit code 2.
[[noreturn]] void Usage(const std::string& msg) {
  fmt::print(stderr, "wort serve: {}\n", msg);
  throw CLI::RuntimeError(kExitUsage);
}

// A size as every wort subcommand reads it (cli/options.h: 64M, 1g, 4096, ...).
uint64_t ParseBytes(const std::string& s, const char* what) {
  uint64_t v = 0;
  Status st = ParseSize(s, &v);
  if (!st.ok()) Usage(fmt::format("{}: {}", what, st.message()));
  return v;
}

uint64_t ParseUint(const std::string& s, const char* what, int base = 10) {
  size_t pos = 0;
  unsigned long long v = 0;
  try {
    if (s.empty() || s[0] == '-' || s[0] == '+') throw std::invalid_argument(s);
    v = std::stoull(s, &pos, base);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos == 0 || pos != s.size()) Usage(fmt::format("{}: '{}' is not {} number", what, s, base == 8 ? "an octal" : "a whole"));
  return v;
}

// memcached flags that have no counterpart in wort serve, with the reason the user sees.
struct Unsupported {
  const char* names;
  bool takes_value;
  const char* why;
};
constexpr Unsupported kUnsupported[] = {
    {"-d,--daemon", false, "run it under a supervisor (systemd, a container) instead"},
    {"-r,--enable-coredumps", false, "set the core limit with ulimit -c before starting"},
    {"-k,--lock-memory", false, "the pool is a memory-mapped file; lock it with the OS if needed"},
    {"-P,--pidfile", true, "wort serve does not daemonize; a supervisor knows its pid"},
    {"-f,--slab-growth-factor", true, "wort has no slab classes to tune (its allocator's size classes are fixed)"},
    {"-n,--slab-min-size", true, "wort has no slab classes to tune"},
    {"-L,--enable-largepages", false, "the pool is a file mapping; use a hugetlbfs or DAX mount for large pages"},
    {"-D", true, "per-prefix stats are not kept"},
    {"-R,--max-reqs-per-event", true, "not tunable in wort serve"},
    {"-C,--disable-cas", false, "cas values are always kept (they are part of the persistent record)"},
    {"-S,--enable-sasl", false, "use -Y FILE: it enables the text protocol's authentication (and SASL PLAIN, binary)"},
    {"-F,--disable-flush-all", false, "flush_all cannot be disabled"},
    {"-X,--disable-dumping", false, "not supported"},
    {"-W,--disable-watch", false, "watch is not implemented, so there is nothing to disable"},
    {"-e,--memory-file", true, "use --pool FILE: every wort pool is a memory-mapped file that survives restarts"},
    {"-A,--enable-shutdown", false, "the shutdown command is not implemented: stop the server with SIGTERM"},
    {"-B,--protocol", true, "the protocol is chosen per connection by its first byte"},
    {"-N,--napi_ids", true, "not supported"},
    {"-i,--license", false, "not supported"},
};

struct ServeOpts {
  std::string pool, index, max_item_size = "1M", pool_size = "1G", memory_limit;
  std::vector<std::string> listen;
  uint16_t port = 11211;
  uint16_t udp_port = 0;
  int threads = 4;
  uint32_t max_conns = 1024;
  std::string evict = "none";
  bool disable_evictions = false;
  std::string unix_socket, unix_mask = "700", auth_file, user;
  bool tls = false;
  bool sync = false;
  std::vector<std::string> extended;
  uint32_t idle_timeout = 0;
  uint32_t partial_timeout = 60;
  std::string max_buffered;  // "": 64 MiB or 4 items (-I), whichever is more
  int backlog = 1024;
  int verbose = 0;
  // memcached flags wort does not support: (flag, why), set when given.
  std::vector<std::pair<CLI::Option*, const Unsupported*>> unsupported;
};


void ApplyExtended(const ServeOpts& o, server::ServerConfig* cfg) {
  for (const std::string& list : o.extended) {
    size_t start = 0;
    while (start <= list.size()) {
      const size_t comma = std::min(list.find(',', start), list.size());
      const std::string item = list.substr(start, comma - start);
      start = comma + 1;
      if (item.empty()) continue;
      const size_t eq = item.find('=');
      const std::string name = item.substr(0, eq);
      const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
      const auto need = [&] {
        if (eq == std::string::npos || value.empty()) Usage(fmt::format("-o {}: needs a value ({}=...)", name, name));
      };
      if (name == "idle_timeout") {
        need();
        cfg->idle_timeout = static_cast<uint32_t>(ParseUint(value, "-o idle_timeout"));
      } else if (name == "ssl_chain_cert") {
        need();
        cfg->tls.chain_cert = value;
      } else if (name == "ssl_key") {
        need();
        cfg->tls.key = value;
      } else if (name == "ssl_ca_cert") {
        need();
        cfg->tls.ca_cert = value;
      } else if (name == "ssl_ciphers") {
        need();
        cfg->tls.ciphers = value;
      } else if (name == "ssl_verify_mode") {
        need();
        cfg->tls.verify_mode = static_cast<int>(ParseUint(value, "-o ssl_verify_mode"));
        if (cfg->tls.verify_mode > 3) Usage("-o ssl_verify_mode: 0 (none), 1 (request), 2 (require) or 3 (once)");
      } else if (name == "ssl_min_version") {
        need();
        cfg->tls.min_version = static_cast<int>(ParseUint(value, "-o ssl_min_version"));
        if (cfg->tls.min_version > 3) Usage("-o ssl_min_version: 0 (TLS 1.0), 1 (1.1), 2 (1.2) or 3 (1.3)");
      } else if (name == "ssl_keyformat") {
        need();
        if (value != "0" && value != "PEM" && value != "pem") Usage("-o ssl_keyformat: only PEM (0) keys are supported");
      } else if (name == "maxconns_fast") {
        // What wort serve always does: a connection past -c is refused at once.
      } else {
        Usage(fmt::format(
            "-o {}: not supported by wort serve (supported: idle_timeout, ssl_chain_cert, ssl_key, ssl_ca_cert, "
            "ssl_ciphers, ssl_verify_mode, ssl_min_version, ssl_keyformat, maxconns_fast)",
            name));
      }
    }
  }
}

void AddServe(CLI::App& app) {
  auto o = std::make_shared<ServeOpts>();
  auto* cmd = app.add_subcommand(
      "serve",
      "Serve memcached's protocol from a pool: acknowledged writes survive kill -9 (doc/server.md). memcached's own "
      "flags (-p -l -U 0 -s -a -c -t -m -I -M -v -Y -Z -o) are accepted with the same meaning");
  cmd->add_option("--pool", o->pool, "Pool file (created if missing), e.g. /dev/shm/mc.pool")->required();
  cmd->add_option("--index", o->index,
                  "Index kind for a new pool (default: " + server::DefaultIndexKind() + "); must match an existing one");
  CLI::Option* port_opt = cmd->add_option("-p,--port", o->port, "TCP port (0 = any free port; the chosen one is printed)")->capture_default_str();
  cmd->add_option("-l,--listen", o->listen,
                  "Address(es) to listen on: repeat the option or give a comma-separated list (default 127.0.0.1; "
                  "memcached's default is every interface)");
  cmd->add_option("-U,--udp-port", o->udp_port, "UDP port: only 0 (off) is supported, as memcached's default");
  cmd->add_option("-s,--unix-socket", o->unix_socket, "Listen on this unix domain socket instead of TCP (as memcached)");
  cmd->add_option("-a,--unix-mask", o->unix_mask, "Permissions of the unix socket, in octal")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Worker threads")->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("-c,--max-conns,--conn-limit", o->max_conns,
                  "Simultaneous connections; past them a new one gets 'ERROR Too many open connections'")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1000000u));
  cmd->add_option("-I,--max-item-size", o->max_item_size, "Largest value (bytes, or with k/m/g; 1k..1024m)")->capture_default_str();
  cmd->add_option("--pool-size", o->pool_size, "Size a new pool may grow to (bytes, or with K/M/G/T)")->capture_default_str();
  cmd->add_option("-m,--memory-limit", o->memory_limit,
                  "memcached's -m: the pool's size in megabytes (a number) or with a unit (64m, 2g); same as --pool-size");
  cmd->add_option("--evict", o->evict,
                  "When the pool is full: 'none' refuses the write (SERVER_ERROR out of memory), 'lru' evicts "
                  "sampled least-recently-used items, as memcached does. none is the default because a persistent "
                  "store should not drop acknowledged data silently")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "lru"}));
  cmd->add_flag("--sync", o->sync,
                "On a file without DAX: every persist also msyncs, so acknowledged writes survive an OS crash or "
                "power loss (file-sync durability), at a system call per write");
  cmd->set_version_flag("-V,--version", fmt::format("wort serve {} (memcached 1.6.18 protocol; the version command answers {})", Version(),
                                                    server::kVersionString));
  cmd->add_flag("-M,--disable-evictions", o->disable_evictions,
                "memcached's -M: refuse writes when the pool is full (wort's default, = --evict none)");
  cmd->add_flag("-v,--verbose", o->verbose,
                "-v: log errors (refused connections, failed authentications, TLS failures, idle timeouts) to "
                "stderr; -vv: also each connection opened and closed");
  cmd->add_option("-Y,--auth-file", o->auth_file,
                  "Require authentication: a file of user:password lines (memcached's -Y; text clients send "
                  "'set <any> 0 0 <n>\\r\\n<user> <password>\\r\\n' first)");
  cmd->add_flag("-Z,--enable-ssl", o->tls, "TLS on every connection; needs -o ssl_chain_cert=FILE[,ssl_key=FILE]");
  cmd->add_option("-o,--extended", o->extended,
                  "memcached's comma-separated extended options; supported: idle_timeout=SECONDS, ssl_chain_cert, "
                  "ssl_key, ssl_ca_cert, ssl_ciphers, ssl_verify_mode, ssl_min_version, ssl_keyformat, maxconns_fast");
  cmd->add_option("--idle-timeout", o->idle_timeout,
                  "Close a connection that sent nothing for this many seconds (0 = never; = -o idle_timeout)")
      ->capture_default_str();
  cmd->add_option("--partial-timeout", o->partial_timeout,
                  "Close a connection that has waited this many seconds in the middle of a request (a value "
                  "half sent; 0 = never)")
      ->capture_default_str();
  cmd->add_option("--max-buffered", o->max_buffered,
                  "Input buffer bytes all connections may hold beyond 64 KiB each (values being received); a "
                  "value past it gets 'SERVER_ERROR out of memory storing object'; default 64m or 4 items (-I), "
                  "whichever is more");
  cmd->add_option("-b,--listen-backlog", o->backlog, "Backlog of the listening socket")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-u,--user", o->user,
                  "memcached's -u: accepted when it names the user wort serve already runs as (it does not switch users)");
  for (const Unsupported& u : kUnsupported) {
    CLI::Option* opt = u.takes_value ? cmd->add_option(std::string(u.names)) : cmd->add_flag(std::string(u.names));
    opt->group("");  // hidden from --help
    o->unsupported.emplace_back(opt, &u);
  }

  cmd->callback([o, port_opt] {
    for (const auto& [opt, u] : o->unsupported) {
      std::string names = u->names;
      std::replace(names.begin(), names.end(), ',', '/');
      if (opt->count() > 0) Usage(fmt::format("memcached's {} is not supported: {}", names, u->why));
    }
    if (o->udp_port != 0) Usage("UDP is not supported (memcached's default is off too): drop -U or give -U 0");
    if (!o->user.empty()) {
      const passwd* pw = ::getpwuid(::geteuid());
      const std::string cur = pw ? pw->pw_name : "";
      if (o->user != cur)
        Usage(fmt::format("-u {}: wort serve does not switch users; start it as {} instead (it runs as {})", o->user,
                          o->user, cur.empty() ? "an unknown user" : cur));
    }
    if (o->disable_evictions && o->evict == "lru") Usage("-M (no evictions) contradicts --evict lru");
    if (!o->index.empty()) {
      // Before Store::Open creates anything: a bad kind leaves no pool file behind.
      Status k = server::CheckServableKind(o->index);
      if (!k.ok()) Usage("--index: " + k.message());
    }

    server::StoreOptions so;
    so.pool_path = o->pool;
    so.index_kind = o->index;
    so.pool_size = ParseBytes(o->pool_size, "--pool-size");
    if (!o->memory_limit.empty()) {
      const bool plain = o->memory_limit.find_first_not_of("0123456789") == std::string::npos;
      so.pool_size = plain ? ParseUint(o->memory_limit, "-m") << 20 : ParseBytes(o->memory_limit, "-m");
    }
    if (so.pool_size < (8ull << 20)) Usage("the pool size (-m/--pool-size) must be at least 8 MiB");
    so.max_item_size = ParseBytes(o->max_item_size, "-I/--max-item-size");
    so.evict = o->evict == "lru" ? server::EvictPolicy::kLru : server::EvictPolicy::kNone;
    so.sync = o->sync;
    if (so.max_item_size < 1024 || so.max_item_size > (1ull << 30))
      Usage("-I/--max-item-size must be between 1k and 1024m (as memcached's)");

    server::ServerConfig cfg;
    std::string listen;
    for (const std::string& l : o->listen) listen += (listen.empty() ? "" : ",") + l;
    if (!listen.empty()) cfg.listen = listen;
    cfg.port = o->port;
    cfg.threads = o->threads;
    cfg.max_conns = o->max_conns;
    cfg.limits.max_item_size = so.max_item_size;
    cfg.unix_socket = o->unix_socket;
    cfg.unix_mask = static_cast<uint32_t>(ParseUint(o->unix_mask, "-a/--unix-mask", 8));
    if (cfg.unix_mask > 0777) Usage("-a/--unix-mask: at most 777");
    cfg.idle_timeout = o->idle_timeout;
    cfg.partial_timeout = o->partial_timeout;
    cfg.max_buffered = o->max_buffered.empty() ? std::max<uint64_t>(64ull << 20, 4 * so.max_item_size)
                                               : ParseBytes(o->max_buffered, "--max-buffered");
    if (cfg.max_buffered < so.max_item_size + 2048)
      Usage("--max-buffered must hold at least one whole item (-I) and its command line");
    cfg.backlog = o->backlog;
    ApplyExtended(*o, &cfg);
    cfg.tls.enabled = o->tls;
    if (!o->tls && !cfg.tls.chain_cert.empty()) Usage("-o ssl_chain_cert given without -Z (enable TLS)");
    if (o->tls && !cfg.unix_socket.empty()) Usage("-Z (TLS) applies to TCP; it cannot be combined with -s");
    if (!cfg.unix_socket.empty() && (!o->listen.empty() || port_opt->count() > 0))
      fmt::print(stderr, "wort serve: note: -s listens on the unix socket only (as memcached): -p/-l are not used\n");
    if (cfg.tls.enabled) {
      // Certificates are checked before the pool is opened or created.
      Status t = server::CheckTls(cfg.tls);
      if (!t.ok()) Usage(t.message());
    }
    std::unique_ptr<server::AuthFile> auth;
    if (!o->auth_file.empty()) {
      Status a = server::AuthFile::Load(o->auth_file, &auth);
      if (!a.ok()) Usage("-Y: " + a.message());
      cfg.auth = auth.get();
    }

    std::unique_ptr<server::Store> store;
    Status s = server::Store::Open(so, &store);
    if (!s.ok()) {
      Fail("wort serve", s);
    }
    const bool clean = store->pool().opened_clean();
    const Durability dur = store->pool().durability();
    // No item count here: it is made in the background (server/store.h, Item count), and
    // `stats` reports it (curr_items, wort_curr_items_counting).
    fmt::print("wort serve {}: pool {} opened in {:.3f} ms ({}), index {}, {}, generation {}, durability {}\n",
               Version(), o->pool, store->open_seconds() * 1e3,
               store->created() ? "new store"
               : clean          ? "clean shutdown"
                                : "after an unclean shutdown: post-crash recovery runs in the background",
               store->index_kind(), store->created() ? "no items" : "items counted in the background",
               store->pool().generation(), DurabilityName(dur));
    fmt::print("wort serve: durability {}: {}\n", DurabilityName(dur), DurabilityDescription(dur));
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

    cfg.durability = DurabilityName(dur);
    server::Server srv(*store, cfg);
    srv.stats().verbosity.store(static_cast<uint32_t>(o->verbose));
    s = srv.Start();
    if (!s.ok()) {
      if (recovery_log.joinable()) recovery_log.join();
      (void)store->Close();
      Fail("wort serve", s);
    }
    const std::string where = cfg.unix_socket.empty()
                                  ? fmt::format("{}:{}", cfg.listen, srv.port())
                                  : fmt::format("unix socket {} (mode {:o})", cfg.unix_socket, cfg.unix_mask);
    fmt::print(
        "wort serve: listening on {} with {} threads (max {} connections, items up to {} bytes, evict {}, TLS {}, "
        "auth {}, idle timeout {}, partial-request timeout {}, input buffers up to {} bytes)\n",
        where, cfg.threads, cfg.max_conns, cfg.limits.max_item_size, o->evict, cfg.tls.enabled ? "on" : "off",
        auth ? fmt::format("on ({} users)", auth->size()) : std::string("off"),
        cfg.idle_timeout ? fmt::format("{} s", cfg.idle_timeout) : std::string("none"),
        cfg.partial_timeout ? fmt::format("{} s", cfg.partial_timeout) : std::string("none"), cfg.max_buffered);
    std::fflush(stdout);
    srv.Run();
    fmt::print("wort serve: shutting down\n");
    std::fflush(stdout);
    if (recovery_log.joinable()) recovery_log.join();
    s = store->Close();
    if (!s.ok()) {
      Fail("wort serve: close", s);
    }
    fmt::print("wort serve: pool closed cleanly\n");
  });
}

const bool kReg = RegisterCommand(&AddServe, {"serve"});

}  // namespace
}  // namespace wort::cli
