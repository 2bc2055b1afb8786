// The kill test with several writer threads, for wort, woart, artcow, roart and fastfair: a child process opens
// the pool (post-crash GC in the background on even rounds) and runs 3 writer threads, each on
// its own keys (a fixed sequence of inserts and removes), reporting "begin" and "ack" of every
// operation through a pipe; the parent SIGKILLs it at a random moment. Then, on a copy of the
// crashed pool: every acknowledged operation is in effect, each thread's one operation begun
// and not acknowledged is in effect or not, no other key exists, no key twice (scan strictly
// ascending), Check passes, and after the GC exactly the reachable blocks are allocated. The
// next round's child opens the crashed pool itself, so crashes accumulate.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "index/registry.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/key.h"
#include "wort/pool.h"

namespace wort {
namespace {

constexpr int kThreads = 3;
#if defined(__SANITIZE_THREAD__)
constexpr int kSlow = 20;  // ThreadSanitizer (scripts/tsan.sh): the child starts and runs ~10-20x slower
#else
constexpr int kSlow = 1;
#endif

// Thread w's operation j: every third one removes the oldest key it inserted and did not remove
// yet; the others insert its next key. Keys: 8 bytes over the full byte range.
struct Op {
  bool insert;
  std::string key;
};
std::string KeyOf(int w, uint64_t n) {
  uint64_t x = (uint64_t(w) << 40 | n) * 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  std::string k(8, '\0');
  for (int i = 0; i < 8; ++i) k[i] = static_cast<char>(x >> (56 - 8 * i));
  return k;
}
Op OpOf(int w, uint64_t j) {
  // Before op j: inserts so far = j - j/3, removes so far = j/3 (ops 2, 5, 8, ... remove).
  if (j % 3 == 2) return {false, KeyOf(w, j / 3)};
  return {true, KeyOf(w, j - j / 3)};
}

struct Msg {
  uint32_t kind;  // 1 begin, 2 ack, 3 error
  uint32_t thread;
  uint64_t seq;
};

[[noreturn]] void Child(int fd, const std::string& path, int round, const std::vector<uint64_t>& start) {
  PoolOptions po;
  po.background_recovery = round % 2 == 0;
  std::unique_ptr<Pool> pool;
  std::unique_ptr<Index> idx;
  if (!Pool::Open(path, po, &pool).ok() || !OpenIndex(*pool, "idx", &idx).ok()) ::_exit(3);
  std::vector<std::thread> ts;
  for (int w = 0; w < kThreads; ++w)
    ts.emplace_back([&, w] {
      for (uint64_t j = start[w];; ++j) {
        const Op op = OpOf(w, j);
        Msg b{1, uint32_t(w), j};
        if (::write(fd, &b, sizeof b) != sizeof b) ::_exit(4);
        const Status s = op.insert ? idx->Insert(op.key, j) : idx->Remove(op.key);
        Msg a{s.ok() ? 2u : 3u, uint32_t(w), j};
        if (::write(fd, &a, sizeof a) != sizeof a) ::_exit(4);
        if (!s.ok()) ::_exit(5);
      }
    });
  for (auto& t : ts) t.join();
  ::_exit(0);
}

class MultiWriterKillTest : public testing::TestWithParam<const char*> {};

TEST_P(MultiWriterKillTest, AcknowledgedWritesSurviveAndNoBlockIsLost) {
  test::TempPath path("mwkill"), copy("mwkill-copy");
  {
    std::unique_ptr<Pool> pool;
    PoolOptions po;
    po.initial_size = 8ull << 20;
    ASSERT_TRUE(Pool::Create(path, po, &pool).ok());
    std::unique_ptr<Index> idx;
    ASSERT_TRUE(CreateIndex(*pool, "idx", GetParam(), IndexOptions{}, &idx).ok());
    idx.reset();
    ASSERT_TRUE(pool->Close().ok());
  }
  std::vector<uint64_t> applied(kThreads, 0);  // ops of each thread in effect so far
  std::mt19937_64 rng(42);
  constexpr int kRounds = 6;
  uint64_t total_acks = 0;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      Child(fds[1], path.str(), round, applied);
    }
    ::close(fds[1]);
    std::vector<uint64_t> acked(applied), begun(applied);  // next op not acked / not begun
    auto drain = [&](int timeout_ms) {
      for (;;) {
        pollfd pf{fds[0], POLLIN, 0};
        const int r = ::poll(&pf, 1, timeout_ms);
        if (r == 0) return;
        if (r < 0 && errno == EINTR) continue;
        Msg m;
        const ssize_t n = ::read(fds[0], &m, sizeof m);
        if (n != sizeof m) return;
        ASSERT_NE(m.kind, 3u) << "operation failed in the child";
        if (m.kind == 1) begun[m.thread] = m.seq + 1;
        if (m.kind == 2) acked[m.thread] = m.seq + 1;
      }
    };
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSlow * (2000 + rng() % 30000));
    while (std::chrono::steady_clock::now() < until) drain(1);
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
    drain(0);
    ::close(fds[0]);
    ASSERT_TRUE(WIFSIGNALED(st)) << "child exited by itself: " << st;
    for (int w = 0; w < kThreads; ++w) total_acks += acked[w] - applied[w];

    // Check a copy; the next round continues on the crashed pool itself.
    test::CopyFile(path, copy);
    PoolOptions po;
    po.background_recovery = true;
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Open(copy, po, &pool).ok());
    std::unique_ptr<Index> idx;
    ASSERT_TRUE(OpenIndex(*pool, "idx", &idx).ok());
    ASSERT_TRUE(pool->WaitForRecovery().ok());
    std::map<std::string, uint64_t> got;
    std::string prev;
    bool first = true, ordered = true;
    ASSERT_TRUE(idx->Scan("", nullptr, SIZE_MAX, [&](std::string_view k, uint64_t v) {
      if (!first && CompareKeys(prev, k) >= 0) ordered = false;
      prev.assign(k);
      first = false;
      got.emplace(std::string(k), v);
      return true;
    }).ok());
    EXPECT_TRUE(ordered) << "scan not strictly ascending (a key twice?)";
    size_t expected_keys = 0;
    for (int w = 0; w < kThreads; ++w) {
      // Keys of thread w after its acknowledged ops; the pending op (begun, not acked) may or
      // may not be in effect.
      std::set<std::string> live;
      for (uint64_t j = 0; j < acked[w]; ++j) {
        const Op op = OpOf(w, j);
        if (op.insert) live.insert(op.key);
        else live.erase(op.key);
      }
      bool pending_applied = false;
      if (begun[w] > acked[w]) {
        const Op op = OpOf(w, acked[w]);
        pending_applied = op.insert ? got.count(op.key) != 0 : got.count(op.key) == 0;
        if (pending_applied) {
          if (op.insert) live.insert(op.key);
          else live.erase(op.key);
        }
      }
      for (const std::string& k : live)
        EXPECT_TRUE(got.count(k)) << "thread " << w << ": acknowledged key lost";
      expected_keys += live.size();
      applied[w] = acked[w] + (pending_applied ? 1 : 0);
    }
    EXPECT_EQ(got.size(), expected_keys) << "keys present that no acknowledged operation wrote";
    std::string report;
    EXPECT_TRUE(idx->Check(&report).ok()) << report;
    RootInfo ri;
    ASSERT_TRUE(pool->FindRoot("idx", &ri).ok());
    std::set<uint64_t> reach, alloc;
    FindIndexKind(GetParam())->visit(*pool, ri.off, [&](uint64_t o) { reach.insert(o); });
    pool->allocator().ForEachAllocated([&](uint64_t o, size_t) { alloc.insert(o); });
    EXPECT_TRUE(alloc == reach) << alloc.size() << " allocated, " << reach.size() << " reachable";
    idx.reset();
    ASSERT_TRUE(pool->Close().ok());
    if (HasFailure()) {
      ADD_FAILURE() << "crashed pool kept at " << path.str() << ".failed";
      test::CopyFile(path, path.str() + ".failed");
      return;
    }
  }
  EXPECT_GT(total_acks, 0u);
  RecordProperty("acknowledged_ops", std::to_string(total_acks));
}

INSTANTIATE_TEST_SUITE_P(Radix, MultiWriterKillTest, testing::Values("wort", "woart", "artcow", "roart"));
INSTANTIATE_TEST_SUITE_P(BTree, MultiWriterKillTest, testing::Values("fastfair"));

}  // namespace
}  // namespace wort
