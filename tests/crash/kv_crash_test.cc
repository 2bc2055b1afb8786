// The KV store API under the crash explorer and the kill test (crash/kv_explorer.h): never a key
// pointing at a freed or half-written value, every acknowledged write present.
#include "crash/kv_explorer.h"

#include <gtest/gtest.h>


#include "index/kind_ids.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pool.h"

namespace wort::crash {
namespace {

std::string Report(const ExplorerResult& r) {
  std::string s;
  for (const Violation& v : r.violations) s += v.ToString() + "\n";
  return s;
}

// Runs the explorer over c into *r: it must run, and find no violation.
void ExploreClean(const KvExplorerConfig& c, ExplorerResult* r, const std::string& what = "") {
  const Status s = RunKvExplorer(c, r);
  ASSERT_TRUE(s.ok()) << what << s.ToString();
  EXPECT_EQ(r->violation_count, 0u) << what << Report(*r);
}

// The kill test over c: it must run all its rounds, acknowledge writes, and find no violation.
void KillClean(const KvKillConfig& c) {
  KvKillResult r;
  const Status s = RunKvKillTest(c, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string v;
  for (const std::string& x : r.violations) v += x + "\n";
  EXPECT_TRUE(r.violations.empty()) << v;
  EXPECT_EQ(r.rounds, c.rounds);
  EXPECT_GT(r.acked_ops, 0u);
}

// The persist sites in src/kv/kv.cc (crash/sites.h: by their code text) that a short run of
// woart's KV store meets: `ops` operations, every one a batch with batch_every = 1.
void KvSitesMet(size_t ops, size_t batch_every, std::vector<std::string>* sites) {
  KvExplorerConfig probe;
  probe.explore.index = "woart";
  probe.explore.keys = 4;
  probe.explore.explore_ops = ops;
  probe.explore.max_points = 1;
  probe.explore.subsets = 0;
  probe.batch_every = batch_every;
  ExplorerResult pr;
  ASSERT_TRUE(RunKvExplorer(probe, &pr).ok());
  for (auto& [site, count] : pr.sites)
    if (site.rfind("src/kv/kv.cc:", 0) == 0) sites->push_back(site);
}

// The explorer over woart's KV store (12 operations) with `site` dropped (as if the call did
// not exist), stopping at the first violation.
void ExploreWithout(const std::string& site, size_t batch_every, ExplorerResult* r) {
  KvExplorerConfig c;
  c.explore.index = "woart";
  c.explore.keys = 8;
  c.explore.explore_ops = 12;
  c.explore.max_violations = 1;
  c.explore.drop_site = site;
  c.batch_every = batch_every;
  ASSERT_TRUE(RunKvExplorer(c, r).ok());
}

// Radix trees, a B-tree and a hash table: the KV layer is the same over all of them; each kind's
// own write path is explored by the per-kind crash tests.
class KvCrashTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KvCrashTest, ExplorerPutOverwriteRemove) {
  KvExplorerConfig c;
  c.explore.index = GetParam();
  c.explore.keys = 12;
  c.explore.explore_ops = 24;
  c.explore.subsets = 3;
  c.explore.max_points = 24;
  c.big_every = 6;
  ExplorerResult r;
  ASSERT_NO_FATAL_FAILURE(ExploreClean(c, &r));
  EXPECT_EQ(r.ops_run, c.explore.explore_ops);
  EXPECT_GT(r.crash_points, r.ops_run);  // points inside the operations, not only the returns
  EXPECT_GT(r.images, r.crash_points);
}

// Torn lines (8-byte write-back units): the KV layer needs nothing more than 8-byte atomicity
// (its value blocks are persisted whole before the commit), so it passes over the kinds whose
// own commit is one 8-byte store (the radix trees). fastfair and cceh write an entry's key and
// value words in one line with one persist, relying on whole-line write-back: they do not claim
// the torn model (nor do their own crash tests run it), so they are not listed here.
TEST(KvCrashTorn, RadixTreesUnderTornLines) {
  for (const char* kind : {"woart", "wort", "artcow"}) {
    KvExplorerConfig c;
    c.explore.index = kind;
    c.explore.keys = 8;
    c.explore.explore_ops = 10;
    c.explore.torn_lines = true;
    c.explore.max_points = 16;
    c.big_every = 0;
    ExplorerResult r;
    ASSERT_NO_FATAL_FAILURE(ExploreClean(c, &r, std::string(kind) + "\n"));
    EXPECT_GT(r.images, 0u);
  }
}

TEST_P(KvCrashTest, KillTest) {
  KvKillConfig c;
  c.kind = GetParam();
  c.rounds = 4;
  KillClean(c);
}

// Batches (KvStore::Write): at every persist point of a batch - its value blocks, its record,
// the commit word, each entry's apply, the clear - the image reopened shows all of the batch or
// none of it, and nothing else changed; after the return point, all of it.
TEST_P(KvCrashTest, ExplorerBatches) {
  KvExplorerConfig c;
  c.explore.index = GetParam();
  c.explore.keys = 10;
  c.explore.explore_ops = 10;
  c.explore.subsets = 2;
  c.explore.max_points = 40;
  c.big_every = 7;
  c.batch_every = 1;  // every operation a batch
  ExplorerResult r;
  ASSERT_NO_FATAL_FAILURE(ExploreClean(c, &r));
  EXPECT_EQ(r.ops_run, c.explore.explore_ops);
  EXPECT_GT(r.crash_points, 3 * r.ops_run);  // several points per batch
  // The batch's own sites were met: the record, the commit word and its clear, the log's head.
  size_t kv_sites = 0;
  for (auto& [site, count] : r.sites) kv_sites += site.rfind("src/kv/", 0) == 0;
  EXPECT_GE(kv_sites, 4u);
}

// A writer doing batches (and single writes) killed with SIGKILL repeatedly: after each reopen
// every batch is all there or not at all, and every acknowledged one is there.
TEST_P(KvCrashTest, KillTestBatches) {
  KvKillConfig c;
  c.kind = GetParam();
  c.rounds = 4;
  c.batch_every = 2;
  c.seed = 5;
  KillClean(c);
}

INSTANTIATE_TEST_SUITE_P(Kinds, KvCrashTest, ::testing::Values("woart", "wort", "artcow", "fastfair", "cceh"));

// Mutation tests of the batch's persist order: without the record's persist before the commit
// word, or without the commit word's persist before the apply, the explorer must find a crash
// state that is neither all of a batch nor none of it (or a record that does not read back).
TEST(KvCrashMutation, DroppingABatchPersistIsCaught) {
  // The sites by their code text (crash/sites.h): the record's persist and the commit's.
  std::vector<std::string> wanted;
  ASSERT_NO_FATAL_FAILURE(KvSitesMet(3, 1, &wanted));
  ASSERT_GE(wanted.size(), 3u);
  int caught = 0;
  for (const std::string& site : wanted) {
    ExplorerResult r;
    ASSERT_NO_FATAL_FAILURE(ExploreWithout(site, 1, &r));
    caught += r.violation_count > 0;
  }
  // The value blocks', the record's and the commit word's persists are each caught (the clear
  // of the commit word may not be within 12 operations: its loss shows only at a later crash).
  EXPECT_GE(caught, 3) << "of " << wanted.size() << " sites";
}

// Mutation test: without the persist of the value block before the commit point (the explorer
// drops that site, as if the call did not exist), a key can point at a half-written value, and
// the explorer must say so.
TEST(KvCrashMutation, DroppingTheValuePersistIsCaught) {
  // The flush sites met: the only one in src/kv/kv.cc is Put's persist of the value block.
  std::vector<std::string> kv_sites;
  ASSERT_NO_FATAL_FAILURE(KvSitesMet(4, 0, &kv_sites));
  ASSERT_EQ(kv_sites.size(), 1u) << "expected one flush site in src/kv/kv.cc";
  ExplorerResult r;
  ASSERT_NO_FATAL_FAILURE(ExploreWithout(kv_sites[0], 0, &r));
  ASSERT_GE(r.violation_count, 1u);
  // A lost header, or lost value bytes: seen as a wrong value, or (value checksums) as a value
  // block that fails its checksum. Which one depends on the image subset, which depends on every
  // line dirty at the crash point (the reader table's words in the header page count too).
  const std::string& what = r.violations[0].what;
  EXPECT_TRUE(what.find("not a value block") != std::string::npos || what.find("match no allowed state") != std::string::npos ||
              what.find("fails its checksum") != std::string::npos)
      << r.violations[0].ToString();
}

// A KV layer that frees the old value block BEFORE the commit point (or publishes the new one
// before it is persistent) must be caught: the check rejects a key whose block is free.
TEST(KvCrashCheck, DetectsAKeyPointingAtAFreedBlock) {
  const std::string path = UniquePoolPath("/dev/shm", "kv-freed");
  {
    KvConfig c;
    c.path = path;
    c.name = "kv";
    c.size = 64ull << 20;
    std::unique_ptr<KvStore> db;
    ASSERT_TRUE(KvStore::Open(c, &db).ok());
    ASSERT_TRUE(db->Put("a", "value-a").ok());
    ASSERT_TRUE(db->Close().ok());
  }
  {
    // Simulate the bug: free the live value block of "a" while the index still points at it
    // (through the pool and the index directly: the store's handle is the index's only one).
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Open(path, PoolOptions{}, &pool).ok());
    std::unique_ptr<Index> idx;
    ASSERT_TRUE(OpenIndex(*pool, "kv", &idx).ok());
    uint64_t off = 0;
    ASSERT_TRUE(idx->Lookup("a", &off).ok());
    idx.reset();
    pool->allocator().Free(off);
    ASSERT_TRUE(pool->Close().ok());
  }
  KvContents want{{"a", "value-a"}};
  int matched = -1;
  Status s = CheckKvPool(path, {"a"}, {&want}, false, &matched);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("reachability"), std::string::npos) << s.ToString();
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace wort::crash
