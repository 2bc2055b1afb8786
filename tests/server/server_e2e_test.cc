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
#include "wort/index.h"

namespace wort {
namespace {

std::string Python() {
  std::string venv;
  if (const char* v = std::getenv("WORT_VENV")) venv = v;
  else if (const char* h = std::getenv("HOME")) venv = std::string(h) + "/.cache/wort-venv";
  const std::string py = venv + "/bin/python3";
  if (!venv.empty() && std::filesystem::exists(py)) return py;
  return "python3";
}

std::string Script() {
  return (std::filesystem::path(__FILE__).parent_path() / "server_e2e.py").string();
}

// Runs one mode; returns its exit status (or -1).
int RunMode(const std::string& mode, const std::string& index) {
  test::TempPath pool("serve-" + mode);
  std::string cmd = Python() + " -c 'import pymemcache' 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "pymemcache is missing for " << Python() << ": run scripts/setup.sh";
    return -1;
  }
  cmd = Python() + " " + Script() + " " + mode + " --wort " + WORT_CLI_PATH + " --pool " + pool.str();
  if (!index.empty()) cmd += " --index " + index;
  const int st = std::system(cmd.c_str());
  std::filesystem::remove(pool.str() + ".mc");
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(ServerE2E, EveryCommandThroughRealClients) { EXPECT_EQ(RunMode("clients", ""), 0); }

// mg/ms/md/ma/me/mn over a loopback socket: quiet pipelines ended by mn, binary keys via b,
// cas conflicts, stale/win state across a restart.
TEST(ServerE2E, MetaCommandsOverASocket) { EXPECT_EQ(RunMode("meta", ""), 0); }

TEST(ServerE2E, PoolFullAnswersOutOfMemoryAndReadsWork) { EXPECT_EQ(RunMode("oom", "wort"), 0); }

// --evict lru: ten times an 8 MiB pool written over a socket, hot keys kept, big values stored,
// survivors kept by a restart.
TEST(ServerE2E, EvictLruKeepsAcceptingWrites) { EXPECT_EQ(RunMode("evict", ""), 0); }

// SIGKILL mid-load with --evict lru: evicted keys may be absent, no value is ever wrong.
TEST(ServerE2E, SigkillWithEvictionNeverReturnsAWrongValue) { EXPECT_EQ(RunMode("killevict", ""), 0); }

TEST(ServerE2E, RangeOnAHashIndexIsAClearError) {
  ASSERT_NE(FindIndexKind("cceh"), nullptr) << "cceh is a built-in kind";
  EXPECT_EQ(RunMode("unordered", "cceh"), 0);
}

// SIGKILL mid-load, restart, every acknowledged write is back; then `wort pool check`.
class ServerKill : public ::testing::TestWithParam<std::string> {};
TEST_P(ServerKill, AcknowledgedWritesSurviveSigkill) {
  ASSERT_NE(FindIndexKind(GetParam()), nullptr) << GetParam() << " is a built-in kind";
  EXPECT_EQ(RunMode("kill", GetParam()), 0);
}
INSTANTIATE_TEST_SUITE_P(Kinds, ServerKill, ::testing::Values("wort", "woart", "artcow", "cceh"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace wort
