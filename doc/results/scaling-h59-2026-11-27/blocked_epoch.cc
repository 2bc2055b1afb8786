// One thread inserts N sparse u64 keys into a vart; optionally a second thread sits inside vart's
// epoch the whole time (a Scan whose callback waits: what a writer preempted inside its operation
// does to the other writers' epoch advances). Prints the inserting thread's CPU ns per insert.
// g++ -O2 -std=c++20 -pthread -I include blocked_epoch.cc -L build -lwort -Wl,-rpath,build
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>
#include "wort/index.h"
#include "wort/pool.h"
using namespace wort;
static double tcpu() { timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  const bool block = argc > 2 && std::atoi(argv[2]) != 0;
  std::vector<std::string> keys(n);
  uint64_t x = 1;
  for (auto& k : keys) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    k.resize(8);
    for (int i = 0; i < 8; ++i) k[i] = static_cast<char>(z >> (56 - 8 * i));
  }
  const std::string path = "/dev/shm/h59-blocked-" + std::to_string(getpid());
  std::unique_ptr<Pool> pool;
  PoolOptions po;
  po.max_size = 1ull << 30;
  if (!Pool::Create(path, po, &pool).ok()) return 1;
  std::unique_ptr<Index> idx;
  IndexOptions io;
  io.key_type = KeyType::kU64;
  if (!CreateIndex(*pool, "v", "vart", io, &idx).ok()) return 1;
  for (int i = 0; i < 1000; ++i) idx->Insert(keys[i], 1);  // something to scan
  std::atomic<int> phase{0};
  std::thread blocker;
  if (block) {
    blocker = std::thread([&] {
      idx->Scan("", nullptr, 1, [&](std::string_view, uint64_t) {
        phase = 1;
        while (phase.load() != 2) usleep(1000);
        return false;
      });
    });
    while (phase.load() != 1) usleep(100);
  }
  rusage r0{}, r1{};
  getrusage(RUSAGE_THREAD, &r0);
  const double c0 = tcpu();
  for (size_t i = 1000; i < n; ++i) idx->Insert(keys[i], i);
  const double c = tcpu() - c0;
  getrusage(RUSAGE_THREAD, &r1);
  auto us = [](timeval a, timeval b) { return (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_usec - a.tv_usec); };
  std::printf("blocker %d: %.1f cpu-ns/insert (usr %.1f sys %.1f), minor faults %ld\n", block ? 1 : 0, c * 1e9 / (n - 1000),
              us(r0.ru_utime, r1.ru_utime) * 1e3 / (n - 1000), us(r0.ru_stime, r1.ru_stime) * 1e3 / (n - 1000),
              r1.ru_minflt - r0.ru_minflt);
  if (block) { phase = 2; blocker.join(); }
  idx.reset();
  pool.reset();
  unlink(path.c_str());
}
