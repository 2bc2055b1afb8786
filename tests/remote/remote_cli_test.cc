// `wort serve-remote` and `wort bench-remote`: usage errors, the in-process benchmark's records,
// and a server in another process: bench-remote --connect against it, SIGTERM, restart on the
// same pool with every acknowledged write there (read by a client of this process).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "bench/remote_bench.h"
#include "common/test_util.h"
#include "remote/designs.h"
#include "remote/remote_test_util.h"

namespace wort::remote {
namespace {

std::string Cli() { return WORT_CLI_PATH; }

TEST(RemoteCli, UsageErrors) {
  std::string out;
  EXPECT_EQ(test::RunShell(Cli() + " serve-remote --help", &out), 0);
  EXPECT_NE(out.find("reply-woart"), std::string::npos);
  EXPECT_NE(out.find("--backend"), std::string::npos);
  out.clear();
  EXPECT_EQ(test::RunShell(Cli() + " bench-remote --help", &out), 0);
  EXPECT_NE(out.find("--threads"), std::string::npos);
  test::TempPath pool("cli");
  out.clear();
  EXPECT_EQ(test::RunShell(Cli() + " serve-remote --design nope --pool " + pool.str(), &out), 2) << out;
  EXPECT_NE(out.find("unknown design"), std::string::npos);
  EXPECT_EQ(test::RunShell(Cli() + " serve-remote --backend rdma --pool " + pool.str(), &out), 2);
  EXPECT_EQ(test::RunShell(Cli() + " bench-remote --design nope", &out), 2);
  EXPECT_EQ(test::RunShell(Cli() + " bench-remote --keys 10 --range 11", &out), 2);
  EXPECT_EQ(test::RunShell(Cli() + " bench-remote --mix 10:90", &out), 2);
  // A missing connect-info file is "not found" (doc/cli.md's exit statuses).
  EXPECT_EQ(test::RunShell(Cli() + " bench-remote --connect /dev/shm/no-such-wort-info", &out), 4) << out;
}

// The records bench-remote appends: every phase of every design, no errors, sane numbers.
void CheckRecords(const std::string& path, const std::set<std::string>& designs, bool server_here, std::size_t expect) {
  std::ifstream f(path);
  std::string line;
  std::size_t n = 0;
  std::set<std::string> seen_designs, ops;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line);
    ++n;
    EXPECT_EQ(j["bench"], "remote");
    EXPECT_EQ(j["errors"], 0u) << line;
    EXPECT_GT(j["ops"].get<std::uint64_t>(), 0u);
    EXPECT_GT(j["ops_per_s"].get<double>(), 0);
    EXPECT_GE(j["p99_ns"].get<double>(), j["p50_ns"].get<double>());
    EXPECT_EQ(j["server_in_process"].get<bool>(), server_here);
    if (server_here) EXPECT_GE(j["server_cpu_ns_per_op"].get<double>(), 0);
    else EXPECT_EQ(j["server_cpu_ns_per_op"].get<double>(), -1);
    const std::string op = j["op"].get<std::string>();
    const bool write_phase = op == "load" || op == "put" || op == "update" || op == "put-random" ||
                             op == "put-string";
    EXPECT_EQ(j.contains("resizes_per_op"), write_phase) << line;
    seen_designs.insert(j["design"].get<std::string>());
    ops.insert(j["op"].get<std::string>() + "/" + std::to_string(j["threads"].get<int>()));
  }
  EXPECT_EQ(n, expect);
  EXPECT_EQ(seen_designs, designs);
  for (const char* op : {"load/1", "put/1", "get/1", "update/1", "range-100/1", "ycsb-write-only/1", "ycsb-50:50/2",
                         "ycsb-95:5/2", "ycsb-read-only/2", "put-random/1", "put-string/1"}) {
    EXPECT_EQ(ops.count(op), 1u) << op;
  }
}

const char* kSmallRun = " --keys 300 --latency-ops 40 --range 100 --range-ops 2 --ycsb-ops 40 --threads 1,2";

class RemoteCliBackend : public ::testing::TestWithParam<std::string> {};

TEST_P(RemoteCliBackend, BenchInProcess) {
  const std::string backend = test::UseRemoteConfig(GetParam());
  test::TempPath json("json");
  std::string out;
  ASSERT_EQ(test::RunShell(Cli() + " bench-remote --backend " + backend + kSmallRun + " --json " + json.str(), &out), 0) << out;
  CheckRecords(json.str(), {"reply-wort", "reply-woart"}, true, 2 * 15);
  out.clear();
  ASSERT_EQ(test::RunShell(Cli() + " bench-remote --transport --transport-ops 50 --backend " + backend, &out), 0) << out;
  for (const char* op : {"read-8", "read-2048", "write-64", "fetch-add", "compare-swap", "notify"})
    EXPECT_NE(out.find(op), std::string::npos) << op;
}

TEST_P(RemoteCliBackend, ServerInAnotherProcess) {
  const std::string backend = test::UseRemoteConfig(GetParam());
  test::TempPath pool("served");
  const std::string info = pool.str() + ".remote";
  auto start = [&] {
    pid_t pid = -1;
    std::string cmd = Cli() + " serve-remote --design reply-wort --backend " + backend + " --pool " + pool.str() +
                      " > /dev/null";
    char* argv[] = {const_cast<char*>("sh"), const_cast<char*>("-c"), cmd.data(), nullptr};
    // exec: the shell is replaced, so the pid is the server's.
    cmd = "exec " + cmd;
    argv[2] = cmd.data();
    EXPECT_EQ(::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv, environ), 0);
    for (int i = 0; i < 3000 && !std::filesystem::exists(info); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_TRUE(std::filesystem::exists(info));
    return pid;
  };
  pid_t pid = start();
  test::TempPath json("json");
  std::string out;
  EXPECT_EQ(test::RunShell(Cli() + " bench-remote --connect " + info + kSmallRun + " --json " + json.str(), &out), 0) << out;
  CheckRecords(json.str(), {"reply-wort"}, false, 15);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(test::WaitChild(pid), 0);
  EXPECT_FALSE(std::filesystem::exists(info));  // removed at stop
  // Restart: every acknowledged write of the benchmark is in the pool (the load's records).
  pid = start();
  std::string design;
  RegionInfo ri;
  ASSERT_TRUE(ReadInfoFile(info, &design, &ri).ok());
  EXPECT_EQ(design, "reply-wort");
  std::unique_ptr<RemoteKV> kv;
  ASSERT_TRUE(FindRemoteDesign(design)->connect(ri, &kv).ok());
  // The load's 300 records in order, and between them the 40 keys of put-random (a record's key
  // with its last digit replaced by ':' .. '?'), all in [record 0, record 300).
  std::size_t n = 0, spread = 0;
  ASSERT_TRUE(kv->Scan(bench::RemoteBenchKey(0), bench::RemoteBenchKey(300), 0, [&](std::string_view k, std::string_view) {
                   if (k.back() >= ':' && k.back() <= '?') {
                     ++spread;
                     return true;
                   }
                   EXPECT_EQ(k, bench::RemoteBenchKey(n));
                   ++n;
                   return true;
                 }).ok());
  EXPECT_EQ(n, 300u);
  EXPECT_EQ(spread, 40u);
  kv.reset();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(test::WaitChild(pid), 0);
  std::filesystem::remove(pool.str() + ".rings");
}

INSTANTIATE_TEST_SUITE_P(Backends, RemoteCliBackend, ::testing::Values("local", "ucx-tcp"), test::RemoteParamName);

}  // namespace
}  // namespace wort::remote
