// Durability as a property of an open pool (wort/pool.h Durability): tmpfs, a file without DAX
// with and without sync mode (persist msyncs, counted by pm::GetSyncCounters, only for pools
// opened so); and the private copy-on-write open used by `wort pool check`: crash recovery runs
// in memory and the file stays byte for byte as it was.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "common/test_util.h"
#include "wort/index.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort {
namespace {

std::string ReadAll(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

PoolOptions Small() {
  PoolOptions o;
  o.initial_size = 2 << 20;
  o.max_size = 64 << 20;
  return o;
}

// A pool file on the disk's file system (not tmpfs): under the build tree's temp dir.
struct DiskPath {
  std::string path;
  DiskPath() {
    const char* dir = std::getenv("TMPDIR");
    path = std::string(dir && *dir ? dir : "/var/tmp") + "/wort-durability-" + std::to_string(::getpid()) + "-" +
           std::to_string(counter++) + ".pool";
    std::filesystem::remove(path);
  }
  ~DiskPath() { std::filesystem::remove(path); }
  static inline int counter = 0;
};

TEST(Durability, TmpfsPoolSaysSo) {
  test::TempPath path("dur-shm");
  std::unique_ptr<Pool> p;
  ASSERT_TRUE(Pool::Create(path, Small(), &p).ok());
  EXPECT_EQ(p->durability(), Durability::kTmpfs);
  EXPECT_STREQ(DurabilityName(p->durability()), "tmpfs");
  EXPECT_NE(std::string(DurabilityDescription(p->durability())).find("lost at reboot"), std::string::npos);
}

TEST(Durability, FileWithoutDaxIsProcessCrashUnlessSynced) {
  DiskPath path;
  std::unique_ptr<Pool> p;
  ASSERT_TRUE(Pool::Create(path.path, Small(), &p).ok());
  if (p->durability() == Durability::kPowerFail) GTEST_SKIP() << "the temp dir is on a DAX file system";
  if (p->durability() == Durability::kTmpfs) GTEST_SKIP() << "the temp dir is a tmpfs; set TMPDIR to a disk";
  EXPECT_EQ(p->durability(), Durability::kProcessCrash);
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(CreateIndex(*p, "t", "woart", {}, &idx).ok());
  const uint64_t before = pm::GetSyncCounters().msyncs;
  for (uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(idx->Insert(std::string(8, char(i)), i).ok());
  EXPECT_EQ(pm::GetSyncCounters().msyncs, before) << "no msync without sync mode";
  idx.reset();
  ASSERT_TRUE(p->Close().ok());

  PoolOptions o = Small();
  o.sync = true;
  ASSERT_TRUE(Pool::Open(path.path, o, &p).ok());
  EXPECT_EQ(p->durability(), Durability::kFileSync);
  EXPECT_STREQ(DurabilityName(p->durability()), "file-sync");
  ASSERT_TRUE(OpenIndex(*p, "t", &idx).ok());
  const pm::SyncCounters s0 = pm::GetSyncCounters();
  for (uint64_t i = 100; i < 200; ++i) ASSERT_TRUE(idx->Insert(std::string(8, char(i)) + "x", i).ok());
  const pm::SyncCounters s1 = pm::GetSyncCounters();
  EXPECT_GE(s1.msyncs - s0.msyncs, 100u) << "each insert's commit fence msyncs";
  EXPECT_EQ(s1.errors, 0u);

  // Another pool (tmpfs, not in sync mode) opened beside it is not synced.
  test::TempPath other("dur-other");
  std::unique_ptr<Pool> q;
  ASSERT_TRUE(Pool::Create(other, Small(), &q).ok());
  std::unique_ptr<Index> qi;
  ASSERT_TRUE(CreateIndex(*q, "t", "woart", {}, &qi).ok());
  const uint64_t m0 = pm::GetSyncCounters().msyncs;
  for (uint64_t i = 0; i < 50; ++i) ASSERT_TRUE(qi->Insert(std::string(8, char(i)), i).ok());
  EXPECT_EQ(pm::GetSyncCounters().msyncs, m0);
  qi.reset();
  ASSERT_TRUE(q->Close().ok());

  idx.reset();
  ASSERT_TRUE(p->Close().ok());
  // Every write reached the file: reopen and find them.
  ASSERT_TRUE(Pool::Open(path.path, Small(), &p).ok());
  ASSERT_TRUE(OpenIndex(*p, "t", &idx).ok());
  EXPECT_EQ(idx->Size(), 200u);
}

// A crash image: the file copied while a writer has it open (every write returned; no clean
// close), as the bench's recover phase makes it.
void MakeCrashImage(const std::string& path, const std::string& image, int keys) {
  std::unique_ptr<Pool> p;
  ASSERT_TRUE(Pool::Create(path, Small(), &p).ok());
  std::unique_ptr<Index> idx;
  ASSERT_TRUE(CreateIndex(*p, "t", "woart", {}, &idx).ok());
  for (int i = 0; i < keys; ++i) ASSERT_TRUE(idx->Insert(std::to_string(i) + "k", i).ok());
  std::filesystem::copy_file(path, image, std::filesystem::copy_options::overwrite_existing);
}

TEST(PrivateCopy, RecoversInMemoryAndLeavesTheFileAsItWas) {
  test::TempPath live("priv-live"), image("priv-image");
  MakeCrashImage(live, image, 500);
  const std::string bytes = ReadAll(image);
  {
    PoolOptions o;
    o.private_copy = true;
    o.background_recovery = false;
    std::unique_ptr<Pool> p;
    ASSERT_TRUE(Pool::Open(image, o, &p).ok());
    EXPECT_TRUE(p->private_copy());
    EXPECT_FALSE(p->opened_clean());
    ASSERT_TRUE(p->WaitForRecovery().ok());
    std::string report;
    EXPECT_TRUE(p->Check(&report).ok()) << report;
    std::unique_ptr<Index> idx;
    ASSERT_TRUE(OpenIndex(*p, "t", &idx).ok());
    EXPECT_EQ(idx->Size(), 500u);
    ASSERT_TRUE(idx->Insert("new", 1).ok()) << "writable in memory";
    idx.reset();
    ASSERT_TRUE(p->Close().ok());
  }
  EXPECT_TRUE(ReadAll(image) == bytes) << "a private-copy open wrote to the file";
}

TEST(PrivateCopy, DoesNotTakeTheWriterLock) {
  test::TempPath path("priv-lock");
  std::unique_ptr<Pool> w;
  ASSERT_TRUE(Pool::Create(path, Small(), &w).ok());
  PoolOptions o;
  o.private_copy = true;
  std::unique_ptr<Pool> p;
  EXPECT_TRUE(Pool::Open(path, o, &p).ok()) << "a check may look at a pool a writer has open";
  PoolOptions c = Small();
  c.private_copy = true;
  test::TempPath fresh("priv-create");
  EXPECT_EQ(Pool::Create(fresh, c, &p).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace wort
