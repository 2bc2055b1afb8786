// The allocator's chunk count is read without its mutex (ChunkOf, from Free and the post-crash
// GC's marking) while a growing allocation writes it under the mutex (issue 15: a data race that
// ThreadSanitizer reported). One thread grows the pool with large allocations while another frees
// small blocks; under -fsanitize=thread this test reports the race if nchunks_file is not atomic.
// Without TSan it checks that every allocation and free went through and the pool stays whole.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "wort/alloc.h"
#include "wort/pool.h"

namespace wort {
namespace {

TEST(AllocRace, PoolGrowsWhileAnotherThreadFrees) {
  const std::string path = "/dev/shm/wort-alloc-race-" + std::to_string(::getpid()) + ".pool";
  PoolOptions po;
  po.initial_size = 1;  // one chunk: the large allocations below grow the file
  po.max_size = 256ull << 20;
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, po, &pool).ok());
  Allocator& a = pool->allocator();
  std::vector<uint64_t> small(20000);
  for (auto& o : small) ASSERT_TRUE(a.Alloc(64, &o).ok());
  const uint64_t size0 = pool->size();
  std::atomic<bool> go{false};
  std::atomic<int> large_ok{0};
  std::thread grower([&] {
    while (!go.load()) {
    }
    for (int i = 0; i < 100; ++i) {
      uint64_t o;
      if (a.Alloc(512 * 1024, &o).ok()) large_ok.fetch_add(1);
    }
  });
  std::thread freer([&] {
    while (!go.load()) {
    }
    for (uint64_t o : small) a.Free(o);
  });
  go = true;
  grower.join();
  freer.join();
  EXPECT_EQ(large_ok.load(), 100);
  EXPECT_GT(pool->size(), size0);
  std::string rep;
  EXPECT_TRUE(pool->Check(&rep).ok()) << rep;
  EXPECT_TRUE(pool->Close().ok());
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace wort
