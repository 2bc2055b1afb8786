// `wort bench-server`: the WORT paper's mc-benchmark pattern (SETs, then GETs, of random string
// keys) against any memcached-compatible server on this machine (src/server/loadgen.h).
// scripts/bench_server.sh runs it against `wort serve` (each radix tree) and memcached.
#include <fmt/core.h>

#include <memory>
#include <vector>

#include "cli/command.h"
#include "server/loadgen.h"

namespace wort::cli {
namespace {

void AddBenchServer(CLI::App& app) {
  auto o = std::make_shared<server::LoadOptions>();
  auto label = std::make_shared<std::string>("server");
  auto mix = std::make_shared<int>(-1);
  auto fill = std::make_shared<bool>(true);
  auto* cmd = app.add_subcommand("bench-server",
                                 "mc-benchmark pattern (SETs then GETs of random string keys) against a memcached-"
                                 "compatible server");
  cmd->add_option("--host", o->host, "Server address (IPv4)")->capture_default_str();
  cmd->add_option("--port", o->port, "Server port")->capture_default_str();
  cmd->add_option("--conns", o->connections, "Client connections (one thread each)")->capture_default_str();
  cmd->add_option("--requests", o->requests, "Requests per phase, over all connections")->capture_default_str();
  cmd->add_option("--keyspace", o->keyspace, "Keys are key:<n>, n uniform in [0, keyspace)")->capture_default_str();
  cmd->add_option("--value-size", o->value_size, "Bytes per value")->capture_default_str();
  cmd->add_option("--keys-per-get", o->keys_per_get,
                  "Keys per GET request (multi-get 'get k1 ... kN'; ops/s and misses then count keys, "
                  "latencies requests)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--pipeline", o->pipeline,
                  "Requests in flight per connection (it sends up to this many before reading the oldest reply; "
                  "latencies then include the queueing)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--max-seconds", o->max_seconds, "Time limit per phase")->capture_default_str();
  cmd->add_option("--label", *label, "Name printed in the result lines")->capture_default_str();
  cmd->add_option("--more-ports", o->more_ports,
                  "More servers on the same host (space- or comma-separated): each key goes to one server by a hash "
                  "of the key, as a cluster's clients partition keys")
      ->delimiter(',');
  cmd->add_option("--mix", *mix,
                  "Instead of a SET phase then a GET phase: fill the key space once, then one phase of random keys "
                  "with this percentage of gets and the rest sets (e.g. 90 or 50)")
      ->check(CLI::Range(0, 100));
  cmd->add_flag("!--no-fill", *fill, "With --mix: skip the fill (the keys are already there)");
  cmd->callback([o, label, mix, fill] {
    fmt::print("# bench-server: {} at {}:{}{}, {} connections, {} requests per phase, keyspace {}, {}-byte values{}{}\n",
               *label, o->host, o->port,
               o->more_ports.empty() ? "" : fmt::format(" (+{} more servers, keys partitioned by hash)", o->more_ports.size()),
               o->connections, o->requests, o->keyspace, o->value_size,
               o->keys_per_get > 1 ? fmt::format(", {} keys per get (counts are keys)", o->keys_per_get) : "",
               o->pipeline > 1 ? fmt::format(", {} requests in flight per connection", o->pipeline) : "");
    fmt::print("{:<16} {:>5} {:>6} {:>10} {:>12} {:>9} {:>9} {:>9} {:>7} {:>7}\n", "server", "conns", "op", "requests",
               "ops/s", "p50_us", "p99_us", "max_us", "misses", "errors");
    bool failed = false;
    std::vector<server::Phase> phases{server::Phase::kSet, server::Phase::kGet};
    if (*mix >= 0) {
      o->get_percent = *mix;
      phases = {server::Phase::kMixed};
      if (*fill) phases.insert(phases.begin(), server::Phase::kFill);
    }
    for (server::Phase phase : phases) {
      server::PhaseResult r;
      Status s = server::RunPhase(*o, phase, &r);
      if (!s.ok()) {
        Fail("wort bench-server", s);
      }
      fmt::print("{:<16} {:>5} {:>6} {:>10} {:>12.0f} {:>9.1f} {:>9.1f} {:>9.1f} {:>7} {:>7}\n", *label,
                 o->connections, r.name, r.requests, r.ops_per_sec, r.p50_us, r.p99_us, r.max_us, r.misses, r.errors);
      std::fflush(stdout);
      failed |= r.errors > 0;
    }
    if (failed) throw CLI::RuntimeError(kExitError);
  });
}

const bool kReg = RegisterCommand(&AddBenchServer, {"bench-server"});

}  // namespace
}  // namespace wort::cli
