// Scans of the lock-free radix kinds (index/batched_scan.h: roart, woart, artcow, wort, vart)
// allocate nothing once their thread is warm (issue 34, h62): the batch and the continuation
// key live on the scan's stack, the version lists are per-thread buffers reused; roart's inserts
// keep their write locks in their frame. This binary
// replaces the global operator new with one that counts the calls of the thread that asks.
#include <cstdlib>
#include <new>
#include <random>

#include "radix/art_test_common.h"

namespace {
thread_local bool g_counting = false;
thread_local size_t g_allocs = 0;
}  // namespace

// GCC (12, -Wmismatched-new-delete) sees free() on a pointer from operator new wherever these
// are inlined: it does not know that the replacement's operator new is malloc. They match here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (g_counting) ++g_allocs;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace wort::art::test {
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ArtKindTest);  // (art_test_common.h's, run by the kinds' files)
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ArtTreeTest);
namespace {

class ScanAllocTest : public ::testing::TestWithParam<const char*> {};

// Counts the operator new calls of fn, run on this thread.
template <class F>
size_t AllocsOf(F&& fn) {
  g_allocs = 0;
  g_counting = true;
  fn();
  g_counting = false;
  return g_allocs;
}

TEST_P(ScanAllocTest, WarmScansAllocateNothing) {
  PoolFixture f(GetParam());
  std::mt19937_64 rng(62);
  // 8-byte keys over the whole byte range and 40-byte keys (longer than a std::string's inline
  // buffer: the continuation key of a batch is one of them).
  std::vector<std::string> keys;
  for (int i = 0; i < 3000; ++i) {
    std::string k(i % 3 == 0 ? 40 : 8, '\0');
    for (auto& c : k) c = static_cast<char>(rng());
    keys.push_back(std::move(k));
  }
  for (size_t i = 0; i < keys.size(); ++i) (void)f.idx().Insert(keys[i], i + 1);
  std::sort(keys.begin(), keys.end(), [](const std::string& a, const std::string& b) { return CompareKeys(a, b) < 0; });
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  ASSERT_EQ(f.idx().Size(), keys.size());

  // Every scan checks its keys against the model: in order, from the start, none missing.
  size_t pos = 0, got = 0, bad = 0, inner = 0;
  const ScanFn check = [&](std::string_view k, uint64_t) {
    if (pos + got >= keys.size() || k != keys[pos + got]) ++bad;
    ++got;
    return true;
  };
  const ScanFn nested_inner = [&](std::string_view, uint64_t) { return ++inner < 150; };
  std::string_view nested_start;
  const ScanFn nested = [&](std::string_view k, uint64_t v) {
    // A scan started from inside a scan's callback (its own batch and cursor).
    if (got == 5) (void)f.idx().Scan(nested_start, nullptr, 150, nested_inner);
    return check(k, v);
  };
  auto run = [&](size_t from, size_t limit, const ScanFn& fn) {
    pos = from;
    got = 0;
    (void)f.idx().Scan(keys[from], nullptr, limit, fn);
    const size_t expect = std::min(limit, keys.size() - from);
    EXPECT_EQ(got, expect) << "from " << from;
  };
  run(0, 10, check);  // warm: the thread's epoch slot and per-thread buffers
  run(0, keys.size(), check);
  nested_start = keys[7];
  run(1, 300, nested);

  const size_t allocs = AllocsOf([&] {
    for (size_t from : {size_t(0), size_t(17), keys.size() / 2, keys.size() - 250})
      for (size_t limit : {size_t(1), size_t(100), size_t(300)}) run(from, limit, check);  // 300: several batches
    inner = 0;
    run(3, 300, nested);
  });
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(inner, 150u);
  EXPECT_EQ(allocs, 0u) << "operator new calls in 13 warm scans of " << GetParam();
}

// roart's inserts (h62): the write locks an insert holds are kept in the operation's frame (they
// were a std::vector reserved per attempt: one operator new per insert). A split of a leaf
// array (its key list) or the allocator's refill may still allocate now and then, hence a
// bound, not 0.
TEST(RoartInsertAlloc, WarmInsertsAllocateAlmostNothing) {
  PoolFixture f("roart");
  std::mt19937_64 rng(6262);
  auto key = [&] {
    std::string k(8, '\0');
    for (auto& c : k) c = static_cast<char>(rng());
    return k;
  };
  for (int i = 0; i < 20000; ++i) (void)f.idx().Insert(key(), i + 1);
  std::vector<std::string> more;
  for (int i = 0; i < 2000; ++i) more.push_back(key());
  const size_t allocs = AllocsOf([&] {
    for (size_t i = 0; i < more.size(); ++i) (void)f.idx().Insert(more[i], i + 1);
  });
  // 90 now (leaf-array splits and growth), 2090 before: at least one per insert.
  EXPECT_LT(allocs, more.size() / 4) << "operator new calls in 2000 inserts";
  for (size_t i = 0; i < more.size(); ++i) {
    uint64_t v = 0;
    ASSERT_TRUE(f.idx().Lookup(more[i], &v).ok());
    EXPECT_EQ(v, i + 1);
  }
  f.ExpectCheckOk("after the inserts");
}

INSTANTIATE_TEST_SUITE_P(Radix, ScanAllocTest, ::testing::Values("roart", "woart", "artcow", "wort", "vart"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace wort::art::test
