// memcached's administrative views in `wort serve` (stats items/slabs/conns/cachedump/sizes,
// lru_crawler metadump, slabs automove/reassign): parser + handler + store in-process. Field
// names and reply formats follow memcached 1.6.18 (compared side by side); the values are
// wort's (one class, 1, holds every item: doc/server.md).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/test_util.h"
#include "server_test_util.h"
#include "server/handler.h"
#include "server/protocol.h"
#include "server/store.h"
#include "wort/index.h"
#include "wort/version.h"

namespace wort::server {
namespace {

struct Admin : ::testing::Test {
  test::TempPath path{"admin"};
  std::unique_ptr<Store> st;
  ServerStats stats;
  ServerConfig config;
  void SetUp() override {
    StoreOptions o;
    o.pool_path = path.str();
    o.index_kind = testing_util::Kind();
    o.pool_size = 64ull << 20;
    o.crawler = false;
    ASSERT_TRUE(Store::Open(o, &st).ok());
  }
  void TearDown() override { EXPECT_TRUE(st->Close().ok()); }
  std::string Run(Handler& h, std::string_view in) { return testing_util::RunText(h, config.limits, in); }
  std::string Run(std::string_view in) {
    Handler h(*st, stats, config);
    return Run(h, in);
  }
};

TEST_F(Admin, EmptyStoreListsNoClass) {
  EXPECT_EQ(Run("stats items\r\n"), "END\r\n");
  EXPECT_EQ(Run("stats slabs\r\n"), "STAT active_slabs 0\r\nSTAT total_malloced 0\r\nEND\r\n");
  EXPECT_EQ(Run("stats cachedump 1 0\r\n"), "END\r\n");
  EXPECT_EQ(Run("lru_crawler metadump all\r\n"), "END\r\n");
  EXPECT_EQ(Run("stats sizes\r\n"), "STAT sizes_status disabled\r\nEND\r\n");
}

// The version reply and stats' version: memcached's protocol version, then wort's one version
// (wort::Version(), as `wort --version` and the bench records print it).
TEST_F(Admin, VersionIsWortsVersion) {
  const std::string v = std::string("1.6.18-wort-") + wort::Version();
  EXPECT_EQ(Run("version\r\n"), "VERSION " + v + "\r\n");
  EXPECT_NE(Run("stats\r\n").find("\r\nSTAT version " + v + "\r\n"), std::string::npos);
}

TEST_F(Admin, ItemsSlabsCachedumpMetadump) {
  Run("set foo 3 0 5\r\nhello\r\nset bar 0 100 2\r\nhi\r\nset k%20x\xff 0 0 1\r\nv\r\nget foo\r\n");
  const std::string items = Run("stats items\r\n");
  EXPECT_EQ(items.substr(0, 24), "STAT items:1:number 3\r\nS");
  EXPECT_NE(items.find("STAT items:1:hits_to_cold 1\r\n"), std::string::npos);
  EXPECT_NE(items.find("STAT items:1:evicted 0\r\n"), std::string::npos);
  const std::string slabs = Run("stats slabs\r\n");
  EXPECT_EQ(slabs.substr(0, 24), "STAT 1:chunk_size 64\r\nST");
  EXPECT_NE(slabs.find("STAT 1:cmd_set 3\r\n"), std::string::npos);
  EXPECT_NE(slabs.find("STAT active_slabs 1\r\n"), std::string::npos);
  // cachedump: key order, limit, other classes empty.
  const std::string all = Run("stats cachedump 1 0\r\n");
  const int64_t exp = Store::Now() + 100;
  const std::string bar1 = "ITEM bar [2 b; " + std::to_string(exp) + " s]\r\n";
  const std::string bar0 = "ITEM bar [2 b; " + std::to_string(exp - 1) + " s]\r\n";  // a second passed
  EXPECT_TRUE(all == bar1 + "ITEM foo [5 b; 0 s]\r\nITEM k%20x\xff [1 b; 0 s]\r\nEND\r\n" ||
              all == bar0 + "ITEM foo [5 b; 0 s]\r\nITEM k%20x\xff [1 b; 0 s]\r\nEND\r\n")
      << all;
  EXPECT_EQ(Run("stats cachedump 1 1\r\n").substr(0, 9), "ITEM bar ");
  EXPECT_EQ(Run("stats cachedump 1 1\r\n").find("foo"), std::string::npos);
  EXPECT_EQ(Run("stats cachedump 2 0\r\n"), "END\r\n");
  EXPECT_EQ(Run("stats cachedump 64 0\r\n"), "CLIENT_ERROR Illegal slab id\r\n");
  // metadump: keys uri-encoded, lines ended by "\n", exp -1 for never.
  const std::string md = Run("lru_crawler metadump all\r\n");
  EXPECT_EQ(md.substr(0, 8), "key=bar ");
  EXPECT_NE(md.find("\nkey=foo exp=-1 la="), std::string::npos);
  EXPECT_NE(md.find("\nkey=k%2520x%FF exp=-1 la="), std::string::npos);
  EXPECT_NE(md.find(" fetch=no cls=1 size=37\n"), std::string::npos);  // 32-byte record + 5
  EXPECT_EQ(md.substr(md.size() - 6), "\nEND\r\n");
  EXPECT_EQ(Run("lru_crawler metadump 2\r\n"), "END\r\n");
  EXPECT_EQ(Run("lru_crawler metadump 3,1\r\n"), md);
  // Dead items are not listed.
  Run("delete foo\r\n");
  EXPECT_EQ(Run("stats cachedump 1 0\r\n").find("foo"), std::string::npos);
  EXPECT_EQ(Run("lru_crawler metadump all\r\n").find("foo"), std::string::npos);
}

TEST_F(Admin, MetadumpOfManyItemsComesInPieces) {
  // More than Handler::kHighWater bytes of dump: the handler yields (kMore) and resumes.
  std::string load;
  for (int i = 0; i < 20000; ++i) load += "set key:" + std::to_string(100000 + i) + " 0 0 1\r\nv\r\n";
  Run(load);
  Handler h(*st, stats, config);
  Parser p;
  Request r;
  ASSERT_EQ(p.Parse("lru_crawler metadump all\r\n", &r).outcome, Outcome::kRequest);
  std::string out;
  int pieces = 1;
  Handler::Step s = h.Execute(r, &out);
  while (s == Handler::Step::kMore) {
    ++pieces;
    s = h.Resume(&out);
  }
  size_t lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(lines, 20001u);  // + END
  EXPECT_EQ(out.find("key=key%3A100000 "), 0u);
  EXPECT_GT(pieces, 1);
}

TEST_F(Admin, SlabsAndConns) {
  EXPECT_EQ(Run("slabs automove 1\r\nslabs automove 0\r\nslabs automove 1 noreply\r\n"), "OK\r\nOK\r\n");
  EXPECT_EQ(Run("slabs reassign 1 2\r\n"), "CLIENT_ERROR slab reassignment disabled\r\n");
  Handler a(*st, stats, config), b(*st, stats, config);
  a.SetPeer(12, "tcp:127.0.0.1:5000", "tcp:127.0.0.1:11211");
  b.SetPeer(11, "tcp:127.0.0.1:5001", "tcp:127.0.0.1:11211");
  const std::string conns = Run(a, "stats conns\r\n");
  EXPECT_EQ(conns,
            "STAT 11:addr tcp:127.0.0.1:5001\r\nSTAT 11:listen_addr tcp:127.0.0.1:11211\r\nSTAT 11:state conn_waiting\r\n"
            "STAT 11:secs_since_last_cmd 0\r\n"
            "STAT 12:addr tcp:127.0.0.1:5000\r\nSTAT 12:listen_addr tcp:127.0.0.1:11211\r\nSTAT 12:state conn_parse_cmd\r\n"
            "STAT 12:secs_since_last_cmd 0\r\nEND\r\n");
  {
    Handler c(*st, stats, config);
    c.SetPeer(13, "tcp:127.0.0.1:5002", "tcp:127.0.0.1:11211");
    EXPECT_NE(Run(a, "stats conns\r\n").find("13:addr"), std::string::npos);
  }
  EXPECT_EQ(Run(a, "stats conns\r\n").find("13:addr"), std::string::npos);  // gone with its handler
}

// stats detail, cache_memlimit and the storage command's '+' numbers: each reply as memcached
// 1.6.18 gives it (compared side by side with memcached -p ... on the same requests).
TEST_F(Admin, StatsDetailCacheMemlimitAndPlusNumbers) {
  Handler h(*st, stats, config);
  EXPECT_EQ(Run(h, "stats detail dump\r\n"), "END\r\n");
  EXPECT_EQ(Run(h, "stats detail on\r\n"), "OK\r\n");
  EXPECT_EQ(Run(h, "set a:x 0 0 1\r\n1\r\nset a:y 3 0 +5\r\nhello\r\nset \xff:z 0 0 1\r\nv\r\nset nocolon 0 0 1\r\nv\r\n"),
            "STORED\r\nSTORED\r\nSTORED\r\nSTORED\r\n");
  EXPECT_EQ(Run(h, "get a:x a:z nocolon\r\n"), "VALUE a:x 0 1\r\n1\r\nVALUE nocolon 0 1\r\nv\r\nEND\r\n");
  EXPECT_EQ(Run(h, "delete a:x\r\n"), "DELETED\r\n");
  EXPECT_EQ(Run(h, "stats detail dump\r\n"),
            "PREFIX a get 2 hit 1 set 2 del 1\r\nPREFIX \xff get 0 hit 0 set 1 del 0\r\nEND\r\n");
  EXPECT_EQ(Run(h, "stats detail off\r\n"), "OK\r\n");
  EXPECT_EQ(Run(h, "get a:y\r\n"), "VALUE a:y 3 5\r\nhello\r\nEND\r\n");  // not counted when off
  EXPECT_EQ(Run(h, "stats detail dump\r\n"),
            "PREFIX a get 2 hit 1 set 2 del 1\r\nPREFIX \xff get 0 hit 0 set 1 del 0\r\nEND\r\n");
  EXPECT_EQ(Run(h, "stats detail\r\n"), "CLIENT_ERROR usage: stats detail on|off|dump\r\n");
  EXPECT_EQ(Run(h, "stats detail foo\r\n"), "CLIENT_ERROR usage: stats detail on|off|dump\r\n");
  EXPECT_EQ(Run(h, "stats reset\r\nstats detail dump\r\n"), "RESET\r\nEND\r\n");
  // cache_memlimit <MiB>: at least 8; at most the pool's maximum (64 MiB here).
  EXPECT_EQ(Run(h, "cache_memlimit 32\r\n"), "OK\r\n");
  EXPECT_EQ(st->pool().growth_limit(), 32ull << 20);
  EXPECT_NE(Run(h, "stats\r\n").find("STAT limit_maxbytes 33554432\r\n"), std::string::npos);
  EXPECT_EQ(Run(h, "cache_memlimit 0\r\n"), "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n");
  EXPECT_EQ(Run(h, "cache_memlimit abc\r\ncache_memlimit\r\n"), "ERROR\r\nERROR\r\n");
  EXPECT_EQ(Run(h, "cache_memlimit 40 noreply\r\n"), "");
  EXPECT_EQ(st->pool().growth_limit(), 40ull << 20);
  EXPECT_EQ(Run(h, "cache_memlimit 65\r\n").rfind("SERVER_ERROR cache_memlimit: the pool's maximum size is 64 MiB", 0), 0u);
  EXPECT_EQ(Run(h, "cache_memlimit 64\r\n"), "OK\r\n");
  // '+' before the length, flags and exptime, as memcached's strtol accepts; flags 2^32 refused
  // (memcached stores it as 0: wort does not truncate silently), its data block swallowed.
  EXPECT_EQ(Run(h, "set f 0 0 +1\r\nx\r\nset g +3 +0 1\r\nx\r\nget g\r\n"), "STORED\r\nSTORED\r\nVALUE g 3 1\r\nx\r\nEND\r\n");
  EXPECT_EQ(Run(h, "set b 4294967295 0 1\r\nx\r\n"), "STORED\r\n");
  EXPECT_EQ(Run(h, "set b 4294967296 0 1\r\nx\r\nget b\r\n"),
            "CLIENT_ERROR bad command line format\r\nVALUE b 4294967295 1\r\nx\r\nEND\r\n");
  EXPECT_EQ(Run(h, "set e 0 0 +\r\n"), "CLIENT_ERROR bad command line format\r\n");
}

}  // namespace
}  // namespace wort::server
