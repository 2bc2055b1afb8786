// Bad input gets a clear error, never a crash - also when the bad input is a pool image. For every
// persistent index kind: build an index of a few hundred keys, take two images of its pool (one
// closed cleanly, one copied while open, so that opening it runs the post-crash GC and with it
// the kind's visit function), then scribble deterministic seeded garbage into one block of the
// index (the root block, the blocks at the lowest offsets after it - the first leaves and inner
// nodes - and a sample of the others): random bytes, out-of-range offsets, offsets of the block itself
// (a `next` that points at itself), offsets of other blocks of the index (cycles through blocks
// of the wrong type), and huge counts. Each case reopens the image in a forked child under an
// alarm and requires: Pool::Open and OpenIndex return (ok or not), and when OpenIndex succeeded,
// a Lookup of every key, a full Scan (ordered kinds), Size, Stats and Check all return. A signal
// (SIGSEGV, SIGBUS, SIGABRT, or the alarm: a hang, e.g. a walk round a cycle) fails the case.
// Nothing is required of the results: garbage may read as anything, or as Corruption.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/index_test_util.h"
#include "common/test_util.h"
#include "index/kind_ids.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pool.h"

namespace wort {
namespace {

constexpr int kKeys = 300;
constexpr unsigned kChildSeconds = 10;  // a child that takes longer is hung

std::vector<std::string> PersistentKinds() {
  std::vector<std::string> v;
  for (const IndexKind* k : IndexKinds())
    if (k->type_id < kind_id::kTestFirst && !kind_id::IsVolatile(k->type_id)) v.emplace_back(k->name);
  return v;
}

std::vector<std::string> Keys() {
  std::vector<std::string> keys;
  std::mt19937_64 rng(15);
  for (int i = 0; i < kKeys; ++i) {
    // Lengths 1..40, distinct (the index as a prefix), so that key-length fields vary.
    std::string k = test::Cat("k", std::to_string(i), "-");
    k.resize(std::max<size_t>(k.size(), 2 + rng() % 39), static_cast<char>('a' + i % 26));
    keys.push_back(k);
  }
  return keys;
}

enum Pattern { kRandomBlock, kRandomHeader, kOutOfRange, kSelf, kOtherBlocks, kHugeCounts, kPatterns };
const char* PatternName(int p) {
  static const char* n[] = {"random-bytes", "random-header", "out-of-range-offsets", "self-offsets", "other-block-offsets",
                            "huge-counts"};
  return n[p];
}

struct Target {
  uint64_t off;
  uint64_t size;
  const char* what;
};

// The garbage one case writes over [t.off, t.off + len).
std::vector<char> Garbage(int pattern, const Target& t, const std::vector<Target>& blocks, uint64_t pool_size,
                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t len = pattern == kRandomHeader ? std::min<uint64_t>(64, t.size) : std::min<uint64_t>(t.size, 4096);
  std::vector<char> g(len);
  for (uint64_t i = 0; i + 8 <= len; i += 8) {
    uint64_t w = rng();
    switch (pattern) {
      case kRandomBlock:
      case kRandomHeader:
        break;
      case kOutOfRange: {
        const uint64_t choice[] = {pool_size + (w % 64) * 64, ~0ull - (w % 16) * 8, (1ull << 47) + w % 4096, 1 + w % 63,
                                   pool_size - 8};
        w = choice[rng() % 5];
        break;
      }
      case kSelf:
        w = (rng() % 4 == 0) ? t.off + (rng() % 8) * 8 : t.off;
        break;
      case kOtherBlocks:
        w = blocks[rng() % blocks.size()].off;
        break;
      case kHugeCounts: {
        const uint64_t choice[] = {~0ull, 0x7fffffffull, 0xffffffffull, 0xffffull, 0x8000000000000000ull, 0x00ff00ff00ff00ffull};
        w = choice[rng() % 6];
        break;
      }
    }
    std::memcpy(&g[i], &w, 8);
  }
  return g;
}

// Opens the image and reads everything; runs in the child. Returns normally unless it crashes.
void OpenAndRead(const std::string& path, const std::vector<std::string>& keys) {
  PoolOptions po = test::SmallPoolOptions();
  std::unique_ptr<Pool> pool;
  if (!Pool::Open(path, po, &pool).ok()) return;
  (void)pool->WaitForRecovery();
  std::unique_ptr<Index> idx;
  if (OpenIndex(*pool, "idx", &idx).ok()) {
    for (const auto& k : keys) {
      uint64_t v;
      (void)idx->Lookup(k, &v);
    }
    uint64_t v;
    (void)idx->Lookup("absent", &v);
    (void)idx->Lookup("", &v);
    size_t n = 0;
    (void)idx->Scan("", nullptr, ~size_t{0}, [&](std::string_view, uint64_t) { return ++n < 100000; });
    (void)idx->Size();
    (void)idx->Stats();
    std::string report;
    (void)idx->Check(&report);
  }
  idx.reset();
  (void)pool->Close();
}

// Runs one case in a forked child; returns "" when it returned, or what went wrong.
std::string RunCase(const std::string& image, const std::string& path, const Target& t, const std::vector<char>& garbage,
                    const std::vector<std::string>& keys, uint64_t seed) {
  test::CopyFile(image, path);
  {
    const int fd = ::open(path.c_str(), O_WRONLY);
    if (fd < 0 || ::pwrite(fd, garbage.data(), garbage.size(), static_cast<off_t>(t.off)) != ssize_t(garbage.size()))
      return "cannot write the garbage";
    ::close(fd);
  }
  // Debugging a failure: WORT_CORRUPT_IN_PROCESS=<seed> runs the case of that seed in this
  // process (under a debugger), the others not at all.
  if (const char* only = std::getenv("WORT_CORRUPT_IN_PROCESS")) {
    if (std::to_string(seed) == only) OpenAndRead(path, keys);
    std::filesystem::remove(path);
    return "";
  }
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(kChildSeconds);
    // Corruption reports on stderr are expected; keep the log short.
    const int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) ::dup2(devnull, 2);
    OpenAndRead(path, keys);
    ::_exit(0);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  std::filesystem::remove(path);
  if (WIFSIGNALED(st))
    return WTERMSIG(st) == SIGALRM ? "hung (no return within " + std::to_string(kChildSeconds) + " s)"
                                   : std::string("killed by signal ") + strsignal(WTERMSIG(st));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return "exited with status " + std::to_string(WEXITSTATUS(st));
  return "";
}

class CorruptImage : public ::testing::TestWithParam<std::string> {};

TEST_P(CorruptImage, OpenAndReadNeverCrashNorHang) {
  const std::string kind = GetParam();
  const auto keys = Keys();
  test::TempPath clean_image("corrupt-" + kind), crash_image("corrupt-crash-" + kind), work("corrupt-case-" + kind);
  std::vector<Target> blocks;  // the index's blocks, root first
  uint64_t pool_size = 0;
  {
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(clean_image.str(), test::SmallPoolOptions(), &pool).ok());
    std::unique_ptr<Index> idx;
    IndexOptions io;
    io.hash_capacity = 64;  // hash kinds resize and split within the few hundred keys
    io.cceh_segment_bytes = 256;  // cceh: many segments (node blocks to scribble on)
    Status s = CreateIndex(*pool, "idx", kind, io, &idx);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (size_t i = 0; i < keys.size(); ++i) ASSERT_TRUE(idx->Insert(keys[i], i + 1).ok()) << kind << " key " << i;
    for (size_t i = 0; i < keys.size(); i += 7) ASSERT_TRUE(idx->Remove(keys[i]).ok());
    RootInfo ri;
    ASSERT_TRUE(pool->FindRoot("idx", &ri).ok());
    std::vector<Target> others;
    pool->allocator().ForEachAllocated([&](uint64_t off, size_t size) {
      if (off == ri.off) blocks.insert(blocks.begin(), Target{off, size, "root block"});
      else others.push_back(Target{off, size, "block"});
    });
    ASSERT_FALSE(blocks.empty()) << "the root block is not an allocated block";
    std::sort(others.begin(), others.end(), [](const Target& a, const Target& b) { return a.off < b.off; });
    blocks.insert(blocks.end(), others.begin(), others.end());
    pool_size = pool->size();
    idx.reset();
    test::CopyFile(clean_image.str(), crash_image.str());  // copied while open: not closed cleanly
    ASSERT_TRUE(pool->Close().ok());
  }
  // The blocks scribbled on: the root block, the three at the lowest offsets after it (in this
  // fresh pool the first allocated: the first leaves and nodes), four chosen by the seed among the blocks larger than 64 bytes
  // (nodes, leaves, segments - not the B-trees' key blocks, which are most of the blocks) and
  // two among all.
  std::vector<Target> targets;
  for (size_t i = 0; i < blocks.size() && i < 4; ++i) targets.push_back(blocks[i]);
  std::vector<Target> big;
  for (size_t i = 4; i < blocks.size(); ++i)
    if (blocks[i].size > 64) big.push_back(blocks[i]);
  std::mt19937_64 pick(0x15);
  for (int i = 0; i < 4 && !big.empty(); ++i) {
    Target t = big[pick() % big.size()];
    t.what = "sampled node block";
    targets.push_back(t);
  }
  for (int i = 0; i < 2 && blocks.size() > 4; ++i) {
    Target t = blocks[4 + pick() % (blocks.size() - 4)];
    t.what = "sampled block";
    targets.push_back(t);
  }
  if (targets.size() > 1) targets[1].what = "first block after the root";

  const auto start = std::chrono::steady_clock::now();
  int cases = 0, failed = 0;
  for (size_t ti = 0; ti < targets.size(); ++ti) {
    for (int p = 0; p < kPatterns; ++p) {
      for (int crashed = 0; crashed < 2; ++crashed) {
        const uint64_t seed = 0x15c0ffee ^ (ti << 16) ^ (uint64_t(p) << 8) ^ uint64_t(crashed);
        const Target& t = targets[ti];
        const auto garbage = Garbage(p, t, blocks, pool_size, seed);
        const std::string err = RunCase(crashed ? crash_image.str() : clean_image.str(), work.str(), t, garbage, keys, seed);
        ++cases;
        if (!err.empty()) {
          ++failed;
          ADD_FAILURE() << kind << ": " << err << " - " << PatternName(p) << " over the " << t.what << " at offset "
                        << t.off << " (" << garbage.size() << " bytes, seed " << seed << "), image "
                        << (crashed ? "not closed cleanly (post-crash GC)" : "closed cleanly");
        }
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %d cases over %zu blocks of %zu, %d failed, %.2f s\n", kind.c_str(), cases, targets.size(), blocks.size(),
              failed, secs);
}

INSTANTIATE_TEST_SUITE_P(Kinds, CorruptImage, ::testing::ValuesIn(PersistentKinds()), test::KindParamName);

}  // namespace
}  // namespace wort
