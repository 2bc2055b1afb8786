// The kill test. See crash/killtest.h.
#include "crash/killtest.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "wort/pool.h"

namespace wort::crash {
namespace {

// One message from the child, written with one write() (atomic: smaller than PIPE_BUF).
struct Msg {
  enum Kind : uint32_t { kReady = 1, kBegin = 2, kAck = 3, kOpError = 4, kOpenError = 5, kDone = 6 };
  uint32_t kind = 0;
  uint32_t op_type = 0;
  uint64_t seq = 0;    // operation number within the round
  uint64_t key = 0;    // index into Workload::keys()
  uint64_t value = 0;  // the op's value; for errors, the status code returned
};
static_assert(sizeof(Msg) == 32);

void Send(int fd, const Msg& m) {
  const char* p = reinterpret_cast<const char*>(&m);
  size_t left = sizeof(m);
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) ::_exit(4);  // the parent is gone
    p += w;
    left -= static_cast<size_t>(w);
  }
}

// The child: opens the pool, runs operations, reports each one. Never returns.
[[noreturn]] void ChildMain(int fd, const KillConfig& cfg, const Workload& wl, const std::string& path,
                            const Contents& start, int round) {
  PoolOptions po;
  po.background_recovery = round % 2 == 0;
  std::unique_ptr<Pool> pool;
  Status s = Pool::Open(path, po, &pool);
  std::unique_ptr<Index> index;
  if (s.ok()) s = OpenIndex(*pool, "kill", &index);
  if (!s.ok()) {
    Msg m;
    m.kind = Msg::kOpenError;
    m.value = static_cast<uint64_t>(s.code());
    Send(fd, m);
    std::fprintf(stderr, "killtest child: %s\n", s.ToString().c_str());
    ::_exit(3);
  }
  Msg ready;
  ready.kind = Msg::kReady;
  Send(fd, ready);
  Contents m = start;
  Rng rng(MixSeed(cfg.seed, 0xc41d, static_cast<uint64_t>(round)));
  for (uint64_t i = 0; i < cfg.ops_per_round; ++i) {
    const Op op = wl.Next(m, cfg.ops, rng);
    const Code want = wl.Apply(op, &m);
    Msg b;
    b.kind = Msg::kBegin;
    b.op_type = static_cast<uint32_t>(op.type);
    b.seq = i;
    b.key = op.key;
    b.value = op.value;
    Send(fd, b);
    const Status r = wl.Run(*index, op);
    if (r.code() != want) {
      Msg e = b;
      e.kind = Msg::kOpError;
      e.value = static_cast<uint64_t>(r.code());
      Send(fd, e);
      ::_exit(2);
    }
    Msg a;
    a.kind = Msg::kAck;
    a.seq = i;
    Send(fd, a);
  }
  Msg d;
  d.kind = Msg::kDone;
  Send(fd, d);
  for (;;) ::pause();  // wait to be killed
}

// Reads one message; false at end of file. Waits at most timeout_ms (then *timed_out).
bool Receive(int fd, Msg* m, int timeout_ms, bool* timed_out) {
  char* p = reinterpret_cast<char*>(m);
  size_t got = 0;
  *timed_out = false;
  while (got < sizeof(*m)) {
    if (timeout_ms >= 0) {
      pollfd pf{fd, POLLIN, 0};
      const int r = ::poll(&pf, 1, timeout_ms);
      if (r == 0) {
        *timed_out = true;
        return false;
      }
      if (r < 0 && errno == EINTR) continue;
    }
    const ssize_t n = ::read(fd, p + got, sizeof(*m) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Status RunKillTest(const KillConfig& cfg, KillResult* out) {
  const auto t0 = std::chrono::steady_clock::now();
  KillResult res;
  res.index = cfg.index;
  IndexOptions iopts;
  WORT_RETURN_IF_ERROR(ResolveRunIndex(cfg.index, cfg.ops, cfg.index_options, cfg.key_type_from_dist, cfg.dist, &iopts));
  const IndexKind* kind = FindIndexKind(cfg.index);
  const Workload wl(cfg.dist, iopts.key_type, cfg.keys, cfg.insert_keys, cfg.edge_keys, cfg.seed);

  const std::string path = UniquePoolPath(cfg.dir, "kill");
  const std::string check_path = path + ".check";
  struct Cleanup {
    std::string a, b;
    ~Cleanup() {
      ::unlink(a.c_str());
      ::unlink(b.c_str());
    }
  } cleanup{path, check_path};

  // Setup.
  Contents model;
  {
    PoolOptions po;
    po.initial_size = cfg.pool_initial_size;
    po.max_size = cfg.pool_max_size;
    std::unique_ptr<Pool> pool;
    WORT_RETURN_IF_ERROR(Pool::Create(path, po, &pool));
    std::unique_ptr<Index> index;
    WORT_RETURN_IF_ERROR(CreateIndex(*pool, "kill", cfg.index, iopts, &index));
    for (size_t i = 0; i < wl.setup_count(); ++i) {
      const Op op{OpType::kInsert, static_cast<uint32_t>(i), MixSeed(cfg.seed, 0x5e70, i)};
      Status s = wl.Run(*index, op);
      if (!s.ok()) return Status(s.code(), "setup, " + wl.Describe(op) + ": " + s.message());
      (void)wl.Apply(op, &model);
    }
    index.reset();
    WORT_RETURN_IF_ERROR(pool->Close());
  }

  const CheckTarget target{kind, "kill", &wl, true};
  auto violation = [&](int round, const std::string& what) {
    std::string v = fmt::format("VIOLATION kill test {} round {}: {}\n  rerun (kill timing is not reproducible): wort crashtest --kill --index {} --dist {} --keys {} --ops {} --seed {} --rounds {}",
                                cfg.index, round, what, cfg.index, bench::DistName(cfg.dist), cfg.keys,
                                OpTypesName(cfg.ops), cfg.seed, cfg.rounds);
    if (cfg.log) std::fprintf(cfg.log, "%s\n", v.c_str());
    res.violations.push_back(std::move(v));
  };

  // With keep_failed, the image each round's child starts from is kept until the round passes:
  // a violation can then be replayed from the state the failing child recovered.
  const std::string start_copy = path + ".round-start";
  struct UnlinkStart {
    std::string p;
    ~UnlinkStart() { ::unlink(p.c_str()); }
  } unlink_start{start_copy};
  // Keeps the round's start image and the pool as the kill left it; returns the message tail.
  auto keep = [&](int round) -> std::string {
    if (!cfg.keep_failed) return {};
    std::error_code e1, e2;
    const std::string base = fmt::format("{}/wort-kill-failed-{}-{}-round{}", cfg.dir, cfg.index, ::getpid(), round);
    std::filesystem::copy_file(start_copy, base + "-start.pool", std::filesystem::copy_options::overwrite_existing, e1);
    std::filesystem::copy_file(path, base + "-end.pool", std::filesystem::copy_options::overwrite_existing, e2);
    if (e1 || e2)
      return fmt::format("\n  (could not keep the round's pools under {}: {})", cfg.dir, (e1 ? e1 : e2).message());
    return "\n  kept (root \"kill\"): " + base + "-start.pool (the image the round's child recovered), " + base +
           "-end.pool (the pool as the kill left it, before recovery)";
  };

  for (int round = 1; round <= cfg.rounds && res.violations.empty(); ++round) {
    if (cfg.keep_failed) {
      std::error_code ec;
      std::filesystem::copy_file(path, start_copy, std::filesystem::copy_options::overwrite_existing, ec);
      if (ec) return Status::IOError("cannot copy " + path + ": " + ec.message());
    }
    int fds[2];
    int pid = 0;
    WORT_RETURN_IF_ERROR(ForkWithPipe(fds, &pid));
    if (pid == 0) {
      ::close(fds[0]);
      ChildMain(fds[1], cfg, wl, path, model, round);
    }
    ::close(fds[1]);

    Rng rr(MixSeed(cfg.seed, 0x4b1, static_cast<uint64_t>(round)));
    const uint64_t delay_us = rr.Below(cfg.max_delay_us + 1);

    std::optional<Op> pending;
    uint64_t acks = 0;
    std::string child_error;
    bool hung = false, done = false;
    auto handle = [&](const Msg& m) {
      switch (m.kind) {
        case Msg::kBegin:
          pending = Op{static_cast<OpType>(m.op_type), static_cast<uint32_t>(m.key), m.value};
          break;
        case Msg::kAck:
          if (pending) (void)wl.Apply(*pending, &model);
          pending.reset();
          ++acks;
          break;
        case Msg::kOpError:
          child_error = fmt::format("the child's {} returned {}, the oracle expected otherwise",
                                    wl.Describe(Op{static_cast<OpType>(m.op_type), static_cast<uint32_t>(m.key), 0}),
                                    CodeName(static_cast<Code>(m.value)));
          break;
        case Msg::kOpenError:
          child_error = fmt::format("the child could not open the crashed pool: {}", CodeName(static_cast<Code>(m.value)));
          break;
        case Msg::kDone: done = true; break;
        default: break;
      }
    };
    // Wait for the child to be ready, then let it run for the chosen time, reading its
    // messages meanwhile (so that it never blocks on a full pipe), then kill it.
    Msg m;
    bool ready = false;
    std::chrono::steady_clock::time_point deadline{};
    for (;;) {
      int wait_ms = 20000;
      if (ready) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) break;
        wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count());
      }
      pollfd pf{fds[0], POLLIN, 0};
      const int pr = ::poll(&pf, 1, std::max(wait_ms, 0));
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) {
        if (ready) {
          if (std::chrono::steady_clock::now() >= deadline) break;
          continue;  // poll's millisecond rounding: spin out the rest
        }
        hung = true;
        break;
      }
      bool timed_out = false;
      if (!Receive(fds[0], &m, -1, &timed_out)) break;  // the child died
      handle(m);
      if (m.kind == Msg::kReady) {
        ready = true;
        deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(delay_us);
      }
      if (done || !child_error.empty()) break;
    }
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
    // Whatever the child wrote before dying: acknowledged operations count.
    bool timed_out = false;
    while (Receive(fds[0], &m, -1, &timed_out)) handle(m);
    ::close(fds[0]);
    res.acked_ops += acks;
    ++res.rounds;

    if (hung) {
      violation(round, "the child did not open the pool within 20 s" + keep(round));
      break;
    }
    if (!child_error.empty()) {
      violation(round, child_error + keep(round));
      break;
    }
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) {
      violation(round, (WIFSIGNALED(st) ? fmt::format("the child died of signal {}", WTERMSIG(st))
                                        : fmt::format("the child exited with status {}", WEXITSTATUS(st))) +
                           keep(round));
      break;
    }

    // Check a copy of the crashed pool; the next child recovers the original.
    std::error_code ec;
    std::filesystem::copy_file(path, check_path, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return Status::IOError("cannot copy " + path + ": " + ec.message());
    Contents with_pending = model;
    if (pending) (void)wl.Apply(*pending, &with_pending);
    std::vector<const Contents*> allowed{&model};
    if (pending) allowed.push_back(&with_pending);
    int matched = -1;
    Status cs = CheckCrashedPoolIsolated(check_path, target, allowed, &matched);
    ::unlink(check_path.c_str());
    if (!cs.ok()) {
      // The timing does not replay: keep the pools for a post-mortem.
      violation(round, fmt::format("after {} acknowledged operations{}: {}{}", acks,
                                   pending ? ", with " + wl.Describe(*pending) + " cut" : std::string(), cs.message(),
                                   keep(round)));
      break;
    }
    if (pending) {
      if (matched == 1) {
        ++res.pending_applied;
        model = std::move(with_pending);
      } else {
        ++res.pending_absent;
      }
    }
    if (cfg.log)
      std::fprintf(cfg.log, "  round %d: killed after %llu acknowledged operations (%s), check OK\n", round,
                   static_cast<unsigned long long>(acks),
                   !pending ? "none in progress" : matched == 1 ? "the cut one applied" : "the cut one absent");
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *out = std::move(res);
  return Status::OK();
}

}  // namespace wort::crash
