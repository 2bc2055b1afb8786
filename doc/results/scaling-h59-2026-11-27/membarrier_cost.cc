// What one membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) costs the caller and the other running
// thread of the process (an IPI to its core). Thread B spins counting loop iterations; thread A
// calls membarrier N times (or sleeps the same wall time without calling it). B's iterations per
// second with and without the calls give B's loss per call. g++ -O2 -pthread membarrier_cost.cc
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>
#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <thread>
static long mb(int cmd) { return syscall(__NR_membarrier, cmd, 0u, 0); }
static double now() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static double tcpu() { timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 20000;
  mb(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
  for (int with_other = 0; with_other < 2; ++with_other)
    for (int calls = 0; calls < 2; ++calls) {
      std::atomic<bool> stop{false};
      std::atomic<uint64_t> iters{0};
      double b_cpu = 0;
      std::thread b;
      if (with_other)
        b = std::thread([&] {
          const double c0 = tcpu();
          uint64_t k = 0;
          while (!stop.load(std::memory_order_relaxed)) ++k;
          b_cpu = tcpu() - c0;
          iters = k;
        });
      usleep(20000);
      const double t0 = now(), c0 = tcpu();
      if (calls) for (int i = 0; i < n; ++i) mb(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
      else while (now() - t0 < 0.05 + n * 3e-6) {}
      const double wall = now() - t0, a_cpu = tcpu() - c0;
      stop = true;
      if (with_other) b.join();
      std::printf("other thread running: %d  membarrier calls: %6d  caller %.2f us/call (cpu %.2f)  other: %.3e iters per cpu-s\n",
                  with_other, calls ? n : 0, calls ? wall / n * 1e6 : 0.0, calls ? a_cpu / n * 1e6 : 0.0,
                  with_other && b_cpu > 0 ? iters / b_cpu : 0.0);
    }
}
