// `wort serve` as a process on the network (tests/server/serve_net.py, one gtest per mode):
// memcached's command line, the unix socket, connection limits and idle timeouts, graceful
// shutdown, authentication (-Y), TLS (-Z, with real TLS clients) and a 3-node cluster behind
// nutcracker and behind a client-side ketama ring. The script's output names every failed check.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/test_util.h"
#include "server/e2e_util.h"

namespace wort {
namespace {

int RunMode(const std::string& mode) {
  test::TempPath pool("net-" + mode);
  const std::string script = (std::filesystem::path(__FILE__).parent_path() / "serve_net.py").string();
  return test::RunPythonMode(script, mode, pool.str());
}

// memcached's flags with the same meaning; unsupported ones, a bad --index, -Y or -Z exit 2
// before any pool file is created.
TEST(ServeNet, MemcachedCommandLine) { EXPECT_EQ(RunMode("flags"), 0); }
TEST(ServeNet, UnixSocketWithMode) { EXPECT_EQ(RunMode("unix"), 0); }
TEST(ServeNet, ConnectionLimitAndIdleTimeout) { EXPECT_EQ(RunMode("limits"), 0); }
// SIGTERM and SIGINT under a pipelined write load: exit 0, acknowledged writes kept, the restart
// finds a clean pool.
TEST(ServeNet, GracefulShutdown) { EXPECT_EQ(RunMode("shutdown"), 0); }
// Instant restart: kill -9 during the background item count, then the count is exact.
TEST(ServeNet, KillDuringTheBackgroundItemCount) { EXPECT_EQ(RunMode("restart"), 0); }
// Memory outside the pool: 160 half-sent 1 MB sets stay within the input buffer budget.
TEST(ServeNet, HalfSentValuesStayWithinTheBufferBudget) { EXPECT_EQ(RunMode("memory"), 0); }
TEST(ServeNet, TextProtocolAuthentication) { EXPECT_EQ(RunMode("auth"), 0); }
TEST(ServeNet, TlsWithRealClients) { EXPECT_EQ(RunMode("tls"), 0); }
TEST(ServeNet, ClusterBehindNutcrackerAndKetama) { EXPECT_EQ(RunMode("cluster"), 0); }

}  // namespace
}  // namespace wort
