// `wort serve-remote` and `wort bench-remote` (issue 18): a remote key-value design over the
// one-sided transport (src/remote), served from a pool, and the paper's measurements of it.
#include <fmt/core.h>
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/remote_bench.h"
#include "cli/command.h"
#include "remote/designs.h"

namespace wort::cli {
namespace {

void Fail(const char* cmd, const Status& s) {
  cli::Fail(std::string("wort ") + cmd, s);
}

void AddServeRemote(CLI::App& app) {
  struct Opts {
    std::string design = "reply-woart", backend = "local", pool, info, tls;
    std::uint64_t pool_size = 1ull << 30;
    double seconds = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "serve-remote",
      "Serve a pool's key-value index to remote clients over the one-sided transport (designs: " +
          remote::RemoteDesignNames() + ")");
  cmd->add_option("--design", o->design, "Remote design: " + remote::RemoteDesignNames())->capture_default_str();
  cmd->add_option("--backend", o->backend, "Transport: local (clients on this host map the region) or ucx (UCP)")
      ->check(CLI::IsMember({"local", "ucx"}))
      ->capture_default_str();
  cmd->add_option("--pool", o->pool, "Pool file (created when absent; under /dev/shm for tmpfs)")->required();
  cmd->add_option("--pool-size", o->pool_size, "Maximum size of a new pool, bytes")->capture_default_str();
  cmd->add_option("--info", o->info, "Where to write the clients' info file (default: <pool>.remote)");
  cmd->add_option("--tls", o->tls, "ucx: UCX_TLS for this server (e.g. sm, tcp); default: the environment's");
  cmd->add_option("--seconds", o->seconds, "Stop after this many seconds (0: at SIGINT/SIGTERM)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->callback([o] {
    const remote::RemoteDesign* d = remote::FindRemoteDesign(o->design);
    if (d == nullptr) {
      fmt::print(stderr, "wort serve-remote: unknown design '{}' ({})\n", o->design, remote::RemoteDesignNames());
      throw CLI::RuntimeError(kExitUsage);
    }
    if (!o->tls.empty()) ::setenv("UCX_TLS", o->tls.c_str(), 1);
    // Block the stop signals before any thread starts, so that every thread inherits the mask
    // and sigtimedwait below is the one place that receives them.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    remote::ServeOptions so;
    so.backend = o->backend;
    so.pool = o->pool;
    so.pool_size = o->pool_size;
    std::unique_ptr<remote::RemoteService> svc;
    Status s = d->serve(so, &svc);
    if (!s.ok()) Fail("serve-remote", s);
    const std::string info_path = o->info.empty() ? o->pool + ".remote" : o->info;
    const remote::RegionInfo info = svc->info();
    s = remote::WriteInfoFile(info_path, d->name, info);
    if (!s.ok()) {
      (void)svc->Stop();
      Fail("serve-remote", s);
    }
    fmt::print("wort serve-remote: {} on {} (backend {}{}, address {}, {} bytes); info file {}\n", d->name, o->pool,
               info.backend, info.backend == "ucx" ? std::string(", UCX_TLS=") + (std::getenv("UCX_TLS") ? std::getenv("UCX_TLS") : "default") : "",
               info.address, info.size, info_path);
    std::fflush(stdout);
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      timespec ts{0, 200 * 1000 * 1000};
      int sig = sigtimedwait(&set, nullptr, &ts);
      if (sig == SIGINT || sig == SIGTERM) break;
      if (o->seconds > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= o->seconds) break;
    }
    std::remove(info_path.c_str());
    const std::uint64_t served = svc->requests_served();
    s = svc->Stop();
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    double cpu = u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
    fmt::print("wort serve-remote: stopped; {} requests served, process CPU {:.3f} s{}\n", served, cpu,
               served ? fmt::format(" ({:.0f} ns per request)", cpu * 1e9 / static_cast<double>(served)) : "");
    if (!s.ok()) Fail("serve-remote", s);
  });
}

void AddBenchRemote(CLI::App& app) {
  auto c = std::make_shared<bench::RemoteBenchConfig>();
  auto json = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("bench-remote",
                                 "Latency (put/get/range p50/p99) and YCSB throughput of remote designs over the "
                                 "one-sided transport, with server CPU time per op");
  cmd->add_option("--design", c->designs, "Designs, run one after the other in this process: " + remote::RemoteDesignNames())
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--backend", c->backend, "Transport: local or ucx")->check(CLI::IsMember({"local", "ucx"}))->capture_default_str();
  cmd->add_option("--tls", c->tls, "ucx: UCX_TLS (sm, tcp, ...); default: the environment's");
  cmd->add_option("--connect", c->connect, "Info file of a running `wort serve-remote` (instead of a server in this process)");
  cmd->add_option("--dir", c->dir, "Directory of the in-process servers' pools")->capture_default_str();
  cmd->add_option("--keys", c->keys, "Records loaded (16-byte keys, 15-byte values)")->capture_default_str();
  cmd->add_option("--latency-ops", c->latency_ops, "Operations per latency phase (put, get)")->capture_default_str();
  cmd->add_option("--range", c->ranges, "Range sizes, keys per scan")->delimiter(',')->capture_default_str();
  cmd->add_option("--range-ops", c->range_ops, "Scans per range size")->capture_default_str();
  cmd->add_option("--threads", c->threads, "Client thread counts for the YCSB mixes")->delimiter(',')->capture_default_str();
  cmd->add_option("--ycsb-ops", c->ycsb_ops, "Operations per client thread per mix")->capture_default_str();
  cmd->add_option("--mix", c->mixes, "YCSB mixes (read:update): write-only, 50:50, 95:5, read-only")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--seed", c->seed, "Random seed")->capture_default_str();
  cmd->add_flag("--transport", c->transport,
                "Measure the transport's own operations instead (read-8, read-2048, write-64, fetch-add, "
                "compare-swap, notify; one client)");
  cmd->add_option("--transport-ops", c->transport_ops, "Operations per transport op kind")->capture_default_str();
  cmd->add_option("--json", *json, "Append one JSON object per result to this file (JSON Lines)");
  cmd->callback([c, json] {
    bench::Environment env = bench::CaptureEnvironment();
    fmt::print("# bench-remote: backend {}{}, {} keys, {} CPUs ({}), commit {}\n", c->backend,
               c->tls.empty() ? "" : ", UCX_TLS=" + c->tls, c->keys, env.cpus, env.cpu, env.git_commit);
    std::vector<bench::RemoteResult> results;
    Status s = bench::RunRemoteBench(*c, true, &results);
    if (!json->empty() && !results.empty()) {
      std::vector<nlohmann::json> recs;
      for (const auto& r : results) recs.push_back(bench::ToJson(r, *c, env));
      Status js = bench::AppendJsonLines(*json, recs);
      if (!js.ok()) Fail("bench-remote", js);
      fmt::print("appended {} records to {}\n", recs.size(), *json);
    }
    if (!s.ok()) Fail("bench-remote", s);
    for (const auto& r : results)
      if (r.errors) {
        fmt::print(stderr, "wort bench-remote: {} {} had {} errors\n", r.design, r.op, r.errors);
        throw CLI::RuntimeError(kExitError);
      }
  });
}

const bool kRegServe = RegisterCommand(&AddServeRemote, {"serve-remote"});
const bool kRegBench = RegisterCommand(&AddBenchRemote, {"bench-remote"});

}  // namespace
}  // namespace wort::cli
