// Sync mode (KvConfig::sync = SyncMode::kMsync, wort/pm.h "Sync mode") on a file without DAX:
// every line a write flushes is inside a range that an msync wrote before the fence that
// follows the flush returned, for puts (new keys, overwrites), removes and batches, on kinds
// with narrow and with wide flush patterns; every synced range is the hull of flushed pages (it
// begins and ends on a page that holds a flushed line), and the store reopens with every write.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "wort/kv.h"
#include "wort/pm.h"

namespace wort {
namespace {

constexpr uintptr_t kPage = 4096;

// Records the lines flushed inside [lo, hi) (the pool's mapping) since the last fence; at each
// fence they become the lines the msync that follows must cover; the next flush or fence checks
// that it did.
struct Coverage : pm::Hook {
  uintptr_t lo = 0, hi = 0;
  std::set<uintptr_t> pending;                 // flushed since the last fence
  std::set<uintptr_t> must;                    // flushed before the last fence
  std::vector<std::pair<uintptr_t, uintptr_t>> synced;  // msyncs since the last fence
  uint64_t fences_checked = 0, lines_checked = 0, ranges = 0, pages = 0;
  std::vector<std::string> failures;

  void Settle() {
    for (uintptr_t line : must) {
      bool in = false;
      for (auto [b, e] : synced) in |= line >= b && line + pm::kCacheLine <= e;
      if (!in && failures.size() < 10) failures.push_back("line at pool offset " + std::to_string(line - lo) + " flushed, fenced, not synced");
      ++lines_checked;
    }
    for (auto [b, e] : synced) {
      // The hull of the flushed pages: its first and last page hold a flushed line.
      bool first = false, last = false;
      for (uintptr_t line : must) {
        first |= line / kPage == b / kPage;
        last |= line / kPage == (e - 1) / kPage;
      }
      if (!(first && last) && failures.size() < 10)
        failures.push_back("synced range at pool offset " + std::to_string(b - lo) + " (" + std::to_string((e - b) / kPage) +
                           " pages) does not begin and end on flushed pages");
    }
    if (!must.empty()) ++fences_checked;
    must.clear();
    synced.clear();
  }
  void OnFlushLine(const void* line, const std::source_location&) override {
    const auto a = reinterpret_cast<uintptr_t>(line);
    if (!must.empty() || !synced.empty()) Settle();
    if (a >= lo && a < hi) pending.insert(a);
  }
  void OnFence(const std::source_location&) override {
    Settle();
    must.swap(pending);
  }
  static void Observe(const void* begin, size_t len, void* ctx) {
    auto* c = static_cast<Coverage*>(ctx);
    const auto b = reinterpret_cast<uintptr_t>(begin);
    c->synced.emplace_back(b, b + len);
    ++c->ranges;
    c->pages += len / kPage;
  }
};

std::string DiskDir() {
  const char* dir = std::getenv("TMPDIR");
  return dir && *dir ? dir : "/var/tmp";
}

class KvSync : public ::testing::TestWithParam<const char*> {};

TEST_P(KvSync, MsyncedRangesCoverEveryFlushedLine) {
  const std::string path = DiskDir() + "/wort-kv-sync-" + std::to_string(::getpid()) + "-" + GetParam() + ".pool";
  std::filesystem::remove(path);
  KvConfig cfg;
  cfg.path = path;
  cfg.kind = GetParam();
  cfg.sync = SyncMode::kMsync;
  std::unique_ptr<KvStore> db;
  ASSERT_TRUE(KvStore::Open(cfg, &db).ok());
  if (db->Capabilities().durability != Durability::kFileSync) {
    db.reset();
    std::filesystem::remove(path);
    GTEST_SKIP() << DiskDir() << " is not a file system without DAX (set TMPDIR to a disk directory)";
  }
  // Keys over the full byte range, some 8 bytes, some long; values small and large.
  std::map<std::string, std::string> want;
  auto key = [](int i) {
    std::string k(1 + i % 40, '\0');
    for (size_t j = 0; j < k.size(); ++j) k[j] = static_cast<char>((i * 37 + j * 101 + 0x80) & 0xff);
    return k + std::to_string(i);
  };
  Coverage cov;
  cov.lo = reinterpret_cast<uintptr_t>(db->pool().base());
  cov.hi = cov.lo + db->pool().max_size();
  const pm::SyncCounters s0 = pm::GetSyncCounters();
  pm::SetHook(&cov);
  pm::SetSyncObserver(&Coverage::Observe, &cov);
  for (int i = 0; i < 24; ++i) {
    const std::string v(i % 5 == 0 ? 5000 : 40, static_cast<char>(0xf0 + i % 16));
    ASSERT_TRUE(db->Put(key(i), v).ok());
    want[key(i)] = v;
  }
  for (int i = 0; i < 24; i += 3) {  // overwrites
    ASSERT_TRUE(db->Put(key(i), "over" + std::to_string(i)).ok());
    want[key(i)] = "over" + std::to_string(i);
  }
  for (int i = 1; i < 24; i += 4) {  // removes
    ASSERT_TRUE(db->Remove(key(i)).ok());
    want.erase(key(i));
  }
  KvBatch b;
  for (int i = 100; i < 106; ++i) {
    b.Put(key(i), "batch" + std::to_string(i));
    want[key(i)] = "batch" + std::to_string(i);
  }
  b.Remove(key(2));
  want.erase(key(2));
  ASSERT_TRUE(db->Write(b).ok());
  pm::fence();  // settles the last fence's check
  pm::SetSyncObserver(nullptr, nullptr);
  pm::SetHook(nullptr);
  const pm::SyncCounters s1 = pm::GetSyncCounters();
  for (const auto& f : cov.failures) ADD_FAILURE() << f;
  EXPECT_GT(cov.fences_checked, 24u * 2) << "every put fences at least twice (its value block, its commit)";
  EXPECT_GT(cov.lines_checked, cov.fences_checked);
  EXPECT_EQ(s1.msyncs - s0.msyncs, cov.ranges) << "one msync per fence that follows flushes in the pool";
  EXPECT_EQ(s1.pages - s0.pages, cov.pages);
  EXPECT_EQ(s1.errors, s0.errors);
  ASSERT_TRUE(db->Close().ok());
  db.reset();

  cfg.sync = SyncMode::kPersist;
  ASSERT_TRUE(KvStore::Open(cfg, &db).ok());
  for (const auto& [k, v] : want) {
    std::string got;
    ASSERT_TRUE(db->Get(k, &got).ok());
    EXPECT_EQ(got, v);
  }
  uint64_t n = 0;
  ASSERT_TRUE(db->Count(&n).ok());
  EXPECT_EQ(n, want.size());
  ASSERT_TRUE(db->Close().ok());
  db.reset();
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Kinds, KvSync, ::testing::Values("woart", "wort", "roart", "fastfair", "cceh"));

}  // namespace
}  // namespace wort
