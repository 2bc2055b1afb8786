// End-to-end tests of `wort serve` (the built `wort` binary, WORT_CLI_PATH) through real
// clients: each test runs one mode of tests/server/server_e2e.py (pymemcache, the libmemcached
// tools, raw sockets) and checks its exit status. The script's own output names every failed
// check. pymemcache comes from the venv that scripts/setup.sh makes ($WORT_VENV, default
// ~/.cache/wort-venv).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/test_util.h"
#include "server/e2e_util.h"
#include "wort/index.h"

namespace wort {
namespace {

std::string Script() {
  return (std::filesystem::path(__FILE__).parent_path() / "server_e2e.py").string();
}

// Runs one mode (binary: its binary-protocol twin); returns its exit status (or -1).
int RunMode(const std::string& mode, const std::string& index, bool binary = false) {
  test::TempPath pool("serve-" + mode + (binary ? "-bin" : ""));
  std::string extra;
  if (!index.empty()) extra += " --index " + index;
  if (binary) extra += " --binary";
  const int st = test::RunPythonMode(Script(), mode, pool.str(), extra);
  std::filesystem::remove(pool.str() + ".mc");
  return st;
}

// Each test runs twice: over the text protocol (pymemcache, raw text) and over the binary
// protocol (the script's BinClient, raw packets, the libmemcached tools with --binary;
// memccapable -a and -b).
class ServerE2E : public ::testing::TestWithParam<bool> {
 protected:
  bool binary() const { return GetParam(); }
};

TEST_P(ServerE2E, EveryCommandThroughRealClients) { EXPECT_EQ(RunMode("clients", "", binary()), 0); }

TEST_P(ServerE2E, PoolFullAnswersOutOfMemoryAndReadsWork) { EXPECT_EQ(RunMode("oom", "wort", binary()), 0); }

// --evict lru: ten times an 8 MiB pool written over a socket, hot keys kept, big values stored,
// survivors kept by a restart.
TEST_P(ServerE2E, EvictLruKeepsAcceptingWrites) { EXPECT_EQ(RunMode("evict", "", binary()), 0); }

// SIGKILL mid-load with --evict lru: evicted keys may be absent, no value is ever wrong.
TEST_P(ServerE2E, SigkillWithEvictionNeverReturnsAWrongValue) { EXPECT_EQ(RunMode("killevict", "", binary()), 0); }

TEST_P(ServerE2E, RangeOnAHashIndexIsAClearError) {
  ASSERT_NE(FindIndexKind("cceh"), nullptr) << "cceh is a built-in kind";
  EXPECT_EQ(RunMode("unordered", "cceh", binary()), 0);
}

INSTANTIATE_TEST_SUITE_P(Protocol, ServerE2E, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "binary" : "text"; });

// mg/ms/md/ma/me/mn over a loopback socket: quiet pipelines ended by mn, binary keys via b,
// cas conflicts, stale/win state across a restart. (Text only: the binary protocol has no meta
// commands.)
TEST(ServerE2EText, MetaCommandsOverASocket) { EXPECT_EQ(RunMode("meta", ""), 0); }

// `wort bench-server`, the load client of scripts/bench_server.sh, against the real server: keys,
// misses and errors counted right for single gets and multi-gets (--keys-per-get).
TEST(ServerE2EText, LoadClientCountsKeysOfMultiGets) { EXPECT_EQ(RunMode("loadgen", ""), 0); }

// SIGKILL mid-load, restart, every acknowledged write is back; then `wort pool check`. The
// writers speak the text protocol, then (binary) the binary protocol.
class ServerKill : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};
TEST_P(ServerKill, AcknowledgedWritesSurviveSigkill) {
  const std::string kind = std::get<0>(GetParam());
  ASSERT_NE(FindIndexKind(kind), nullptr) << kind << " is a built-in kind";
  EXPECT_EQ(RunMode("kill", kind, std::get<1>(GetParam())), 0);
}
INSTANTIATE_TEST_SUITE_P(Kinds, ServerKill,
                         ::testing::Combine(::testing::Values("wort", "woart", "artcow", "cceh"),
                                            ::testing::Values(false, true)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + (std::get<1>(info.param) ? "_binary" : "_text");
                         });

}  // namespace
}  // namespace wort
