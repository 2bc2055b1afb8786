// Batches, value checksums and refused opens of the key-value store (wort/kv.h: "Batches",
// "Integrity", "A refused open writes nothing"). The crash explorer and the kill test of
// batches are in tests/crash/kv_crash_test.cc.
#include "wort/kv.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <thread>

#include "common/test_util.h"
#include "crash/oracle.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pool.h"

namespace wort {
namespace {

using test::TempPath;
using Model = std::map<std::string, std::string>;
using crash::Rng;

KvConfig Config(const std::string& path, const std::string& kind, uint64_t size = 128ull << 20) {
  KvConfig c;
  c.path = path;
  c.kind = kind;
  c.size = size;
  return c;
}

// "prefix" + n (appended: GCC 12's -Wrestrict misreads operator+ on a temporary).
std::string Name(const char* prefix, long n) {
  std::string s(prefix);
  s.append(std::to_string(n));
  return s;
}

std::unique_ptr<KvStore> OpenKv(const KvConfig& c) {
  std::unique_ptr<KvStore> db;
  Status s = KvStore::Open(c, &db);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return db;
}

// Keys over the full byte range.
std::vector<std::string> Keys() {
  std::vector<std::string> k = {"", std::string(1, '\0'), "\x80", "\xff", "\xff\xff", "a", "ab", std::string(300, 'p')};
  for (int i = 0; i < 60; ++i) k.push_back("key" + std::to_string(i * 7919 % 1000));
  return k;
}

std::string ValueFor(uint64_t r) {
  static const size_t kSizes[] = {0, 1, 7, 56, 200, 4000, Allocator::kMaxSmall + 10};
  const size_t n = kSizes[r % 7];
  std::string v(n, '\0');
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(r * 31 + i * 131);
  return v;
}

Model Contents(const KvStore& db, const std::vector<std::string>& universe) {
  Model m;
  for (const std::string& k : universe) {
    std::string v;
    Status s = db.Get(k, &v);
    if (s.ok()) m[k] = v;
    else EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  }
  uint64_t n = 0;
  EXPECT_TRUE(db.Count(&n).ok());
  EXPECT_EQ(n, m.size());
  return m;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class KvBatchTest : public ::testing::TestWithParam<std::string> {};

// Random batches against a model, with the last-operation-wins rule, removes of absent keys,
// reopen (the batch log root is found again) and the reachability contract after each step.
TEST_P(KvBatchTest, DifferentialWithReopen) {
  TempPath p("kvb");
  const std::vector<std::string> keys = Keys();
  Model m;
  Rng rng(7);
  for (int round = 0; round < 3; ++round) {
    auto db = OpenKv(Config(p, GetParam()));
    ASSERT_TRUE(db);
    EXPECT_EQ(Contents(*db, keys), m);
    for (int b = 0; b < 30; ++b) {
      KvBatch batch;
      Model next = m;
      const size_t n = rng.Below(b % 5 == 0 ? 60 : 8);  // now and then a big one (0: empty)
      for (size_t i = 0; i < n; ++i) {
        const std::string& k = keys[rng.Below(keys.size())];
        if (rng.Below(3) == 0) {
          batch.Remove(k);
          next.erase(k);
        } else {
          const std::string v = ValueFor(rng.Next());
          batch.Put(k, v);
          next[k] = v;
        }
      }
      EXPECT_EQ(batch.size(), n);
      Status s = db->Write(batch);
      ASSERT_TRUE(s.ok()) << s.ToString();
      m = std::move(next);
    }
    EXPECT_EQ(Contents(*db, keys), m);
    std::string rep;
    Status s = crash::CheckReachability(db->pool(), &rep);
    EXPECT_TRUE(s.ok()) << s.ToString() << rep;
    s = db->Check(&rep);
    EXPECT_TRUE(s.ok()) << s.ToString() << rep;
    EXPECT_EQ(db->pool().allocator().Stats().retired_outside_epoch, 0u);
    ASSERT_TRUE(db->Close().ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, KvBatchTest, ::testing::Values("woart", "wort", "fastfair", "wbtree", "cceh", "linp"));

TEST(KvBatch, LastOperationOfAKeyCounts) {
  TempPath p("kvb");
  auto db = OpenKv(Config(p, "woart"));
  ASSERT_TRUE(db->Put("gone", "x").ok());
  KvBatch b;
  b.Put("a", "1");
  b.Remove("a");  // removed in the end
  b.Remove("b");
  b.Put("b", "2");  // present in the end
  b.Put("c", "3");
  b.Put("c", "4");
  b.Remove("gone");
  b.Remove("never-there");  // no error
  ASSERT_TRUE(db->Write(b).ok());
  std::string v;
  EXPECT_TRUE(db->Get("a", &v).IsNotFound());
  ASSERT_TRUE(db->Get("b", &v).ok());
  EXPECT_EQ(v, "2");
  ASSERT_TRUE(db->Get("c", &v).ok());
  EXPECT_EQ(v, "4");
  EXPECT_TRUE(db->Get("gone", &v).IsNotFound());
  uint64_t n = 0;
  ASSERT_TRUE(db->Count(&n).ok());
  EXPECT_EQ(n, 2u);
  // An empty batch is OK and changes nothing; a cleared batch is empty.
  b.Clear();
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.bytes(), 0u);
  EXPECT_TRUE(db->Write(b).ok());
  std::string rep;
  EXPECT_TRUE(crash::CheckReachability(db->pool(), &rep).ok()) << rep;
}

TEST(KvBatch, BadBatchesChangeNothing) {
  TempPath p("kvb");
  KvConfig c = Config(p, "woart");
  auto db = OpenKv(c);
  ASSERT_TRUE(db->Put("keep", "v").ok());
  const std::string before = ReadFile(p);  // (the pool is open: its bytes are the mapping's)
  KvBatch b;
  b.Put("ok", "1");
  b.Put(std::string(kMaxKeyLen + 1, 'k'), "too long a key");
  Status s = db->Write(b);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  b.Clear();
  b.Put("ok", "1");
  b.Put("big", std::string(kMaxValueLen + 1, 'v'));
  EXPECT_EQ(db->Write(b).code(), Code::kInvalidArgument);
  b.Clear();
  // More operations than the limit: refused with a message naming it.
  for (size_t i = 0; i <= kMaxBatchOps; ++i) b.Remove("k");
  s = db->Write(b);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find(std::to_string(kMaxBatchOps)), std::string::npos) << s.ToString();
  b.Clear();
  std::string v;
  EXPECT_TRUE(db->Get("ok", &v).IsNotFound());
  uint64_t n = 0;
  ASSERT_TRUE(db->Count(&n).ok());
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(ReadFile(p), before);  // nothing was allocated or written
  // u64 stores check every key's length.
  ASSERT_TRUE(db->Close().ok());
  TempPath q("kvb");
  KvConfig cu = Config(q, "woart");
  cu.key_type = KeyType::kU64;
  auto du = OpenKv(cu);
  b.Put(EncodeU64(1), "a");
  b.Put("short", "b");
  EXPECT_EQ(du->Write(b).code(), Code::kInvalidArgument);
  EXPECT_TRUE(du->Get(EncodeU64(1), &v).IsNotFound());
}

// A full pool: the batch is refused as a whole (PoolFull) and nothing of it is visible.
TEST(KvBatch, PoolFullChangesNothing) {
  TempPath p("kvb");
  KvConfig c = Config(p, "woart");
  c.size = 4ull << 20;
  auto db = OpenKv(c);
  ASSERT_TRUE(db->Put("keep", "v").ok());
  KvBatch b;
  for (int i = 0; i < 8; ++i) b.Put("big" + std::to_string(i), std::string(Allocator::kMaxSmall + 10, 'x'));
  Status s = db->Write(b);
  EXPECT_EQ(s.code(), Code::kPoolFull) << s.ToString();
  uint64_t n = 0;
  ASSERT_TRUE(db->Count(&n).ok());
  EXPECT_EQ(n, 1u);
  std::string rep;
  EXPECT_TRUE(crash::CheckReachability(db->pool(), &rep).ok()) << rep;
  // A smaller batch still fits.
  b.Clear();
  b.Put("small", "s");
  EXPECT_TRUE(db->Write(b).ok());
}

// Readers see all of a batch or none: every batch sets keys k0..k9 to its number, in that order;
// a reader that Gets k0..k9 in order must never see a number decrease (a batch half applied
// would show k0 = i, then k9 = i - 1). Puts of other keys run beside the batches.
TEST(KvBatch, ConcurrentReadersSeeWholeBatches) {
  TempPath p("kvb");
  auto db = OpenKv(Config(p, "woart"));
  constexpr int kKeys = 10;
  auto key = [](int i) { return Name("k", i); };
  {
    KvBatch b;
    for (int i = 0; i < kKeys; ++i) b.Put(key(i), "00000000");
    ASSERT_TRUE(db->Write(b).ok());
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0}, bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t)
    readers.emplace_back([&] {
      while (!stop.load()) {
        long prev = -1;
        for (int i = 0; i < kKeys; ++i) {
          std::string v;
          if (!db->Get(key(i), &v).ok()) {
            ++bad;
            continue;
          }
          const long x = std::stol(v);
          if (x < prev) ++bad;
          prev = x;
        }
        ++reads;
      }
    });
  std::thread putter([&] {
    for (int i = 0; !stop.load(); ++i) (void)db->Put(Name("other", i % 50), std::string(i % 300, 'o'));
  });
  char buf[16];
  for (int n = 1; n <= 3000; ++n) {
    KvBatch b;
    std::snprintf(buf, sizeof buf, "%08d", n);
    for (int i = 0; i < kKeys; ++i) b.Put(key(i), buf);
    ASSERT_TRUE(db->Write(b).ok());
  }
  stop = true;
  for (auto& t : readers) t.join();
  putter.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(reads.load(), 0u);
  std::string v;
  ASSERT_TRUE(db->Get(key(kKeys - 1), &v).ok());
  EXPECT_EQ(v, "00003000");
  std::string rep;
  EXPECT_TRUE(crash::CheckReachability(db->pool(), &rep).ok()) << rep;
}

// Writers of single keys and batches over the same keys, from several threads: at the end each
// key holds the value of its last writer (values name their writer and sequence), no block is
// leaked or freed twice.
TEST(KvBatch, BatchesBesidePutsOfTheSameKeys) {
  TempPath p("kvb");
  auto db = OpenKv(Config(p, "fastfair"));
  constexpr int kKeys = 40;
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t)
    ts.emplace_back([&, t] {
      Rng rng(t + 1);
      for (int i = 0; i < 400; ++i) {
        if (t == 0) {
          KvBatch b;
          for (int j = 0; j < 6; ++j) {
            const std::string k = Name("k", static_cast<long>(rng.Below(kKeys)));
            if (rng.Below(4) == 0) b.Remove(k);
            else b.Put(k, Name("batch", i));
          }
          EXPECT_TRUE(db->Write(b).ok());
        } else {
          const std::string k = Name("k", static_cast<long>(rng.Below(kKeys)));
          EXPECT_TRUE(db->Put(k, Name("put", t * 1000 + i)).ok());
        }
      }
    });
  for (auto& t : ts) t.join();
  std::string rep;
  EXPECT_TRUE(db->Check(&rep).ok()) << rep;
  EXPECT_TRUE(crash::CheckReachability(db->pool(), &rep).ok()) << rep;
  ASSERT_TRUE(db->Close().ok());
  auto again = OpenKv(Config(p, "fastfair"));
  EXPECT_TRUE(again->Check(&rep).ok()) << rep;
}

// ---- integrity ---------------------------------------------------------------------------

// The offset of key's value block (through the index directly).
uint64_t ValueOffset(const std::string& path, const std::string& key) {
  std::unique_ptr<Pool> pool;
  PoolOptions o;
  o.read_only = true;
  EXPECT_TRUE(Pool::Open(path, o, &pool).ok());
  std::unique_ptr<Index> idx;
  EXPECT_TRUE(OpenIndex(*pool, "kv", &idx).ok());
  uint64_t off = 0;
  EXPECT_TRUE(idx->Lookup(key, &off).ok());
  return off;
}

void FlipBit(const std::string& path, uint64_t at, int bit) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char c = 0;
  ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(at)), 1);
  c ^= static_cast<unsigned char>(1u << bit);
  ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(at)), 1);
  ::close(fd);
}

class KvChecksumTest : public ::testing::TestWithParam<std::string> {};

// One flipped bit anywhere in a value (its bytes, its length, its checksum word) is a Corruption
// error on Get and on Check - never the wrong bytes - and the other keys still read.
TEST_P(KvChecksumTest, FlippedValueBitsAreDetected) {
  const std::string value = std::string(100, 'v') + "\x80\xff";
  for (uint64_t where : {uint64_t{kValueHeaderLen}, uint64_t{kValueHeaderLen + 57}, uint64_t{kValueHeaderLen + 101},
                         uint64_t{0}, uint64_t{9}}) {
    TempPath p("kvc");
    {
      auto db = OpenKv(Config(p, GetParam()));
      ASSERT_TRUE(db->Put("victim", value).ok());
      ASSERT_TRUE(db->Put("other", "fine").ok());
      ASSERT_TRUE(db->Close().ok());
    }
    const uint64_t off = ValueOffset(p, "victim");
    ASSERT_NE(off, 0u);
    FlipBit(p, off + where, static_cast<int>(where % 8));
    auto db = OpenKv(Config(p, GetParam()));
    std::string v = "untouched";
    Status s = db->Get("victim", &v);
    EXPECT_EQ(s.code(), Code::kCorruption) << "byte " << where << ": " << s.ToString();
    EXPECT_EQ(v, "untouched");  // no bytes handed out
    ASSERT_TRUE(db->Get("other", &v).ok());
    EXPECT_EQ(v, "fine");
    std::string rep;
    s = db->Check(&rep);
    EXPECT_EQ(s.code(), Code::kCorruption) << "byte " << where << ": " << s.ToString();
    EXPECT_NE(rep.find(std::to_string(off)), std::string::npos) << rep;
    if (db->Capabilities().ordered) {
      s = db->Scan("", std::nullopt, [](std::string_view, std::string_view) { return true; });
      EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, KvChecksumTest, ::testing::Values("woart", "fastfair", "cceh"));

// ---- a refused open writes nothing -------------------------------------------------------

TEST(KvRefusedOpen, LeavesTheFileByteIdentical) {
  constexpr uint64_t kSmall = 4ull << 20;
  TempPath p("kvr");
  {
    auto db = OpenKv(Config(p, "woart", kSmall));
    ASSERT_TRUE(db->Put("a", "1").ok());
    ASSERT_TRUE(db->Close().ok());
  }
  // Also a pool that was not closed cleanly (an image of an open pool): no recovery may run.
  TempPath crashed("kvr");
  auto live = OpenKv(Config(p, "", kSmall));
  ASSERT_TRUE(live->Put("b", "2").ok());
  test::CopyFile(p, crashed);
  ASSERT_TRUE(live->Close().ok());
  for (const std::string* path : {&p.str(), &crashed.str()}) {
    const std::string before = ReadFile(*path);
    std::unique_ptr<KvStore> db;
    auto refused = [&](KvConfig c, Code want, const char* what) {
      Status s = KvStore::Open(c, &db);
      EXPECT_EQ(s.code(), want) << what << ": " << s.ToString();
      EXPECT_TRUE(ReadFile(*path) == before) << what << ": the file changed";
    };
    KvConfig c = Config(*path, "wort", kSmall);
    refused(c, Code::kInvalidArgument, "wrong kind");
    c = Config(*path, "cceh", kSmall);
    refused(c, Code::kInvalidArgument, "wrong kind (hash)");
    c = Config(*path, "woart", kSmall);
    c.key_type = KeyType::kU64;
    refused(c, Code::kInvalidArgument, "wrong key type");
    c = Config(*path, "woart", kSmall);
    c.name = "no-such-store";
    c.create_if_missing = false;
    refused(c, Code::kNotFound, "absent store");
    c = Config(*path, "", kSmall);
    c.name = "no-such-store";
    refused(c, Code::kInvalidArgument, "new store without a kind");
    for (int i = 0; i < 5; ++i) refused(Config(*path, "wort", kSmall), Code::kInvalidArgument, "wrong kind again");
  }
  // Busy: the second opener (here the same process) is refused before it writes.
  {
    auto db = OpenKv(Config(p, "woart", kSmall));
    const std::string before = ReadFile(p);
    std::unique_ptr<KvStore> db2;
    Status s = KvStore::Open(Config(p, "woart", kSmall), &db2);
    EXPECT_EQ(s.code(), Code::kBusy);
    EXPECT_NE(s.message().find("in this process"), std::string::npos) << s.ToString();
    EXPECT_TRUE(ReadFile(p) == before) << "busy: the file changed";
  }
  // Busy, held by another process: the message says so.
  {
    int fds[2], back[2];  // child -> parent: ready; parent -> child: done
    ASSERT_EQ(::pipe(fds), 0);
    ASSERT_EQ(::pipe(back), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::unique_ptr<KvStore> held;
      if (!KvStore::Open(Config(p, "woart", kSmall), &held).ok()) ::_exit(3);
      if (::write(fds[1], "R", 1) != 1) ::_exit(4);
      char c;
      (void)!::read(back[0], &c, 1);  // until the parent has tried
      ::_exit(0);  // no close: the pool stays as the writer left it
    }
    char c = 0;
    ASSERT_EQ(::read(fds[0], &c, 1), 1);
    const std::string before = ReadFile(p);
    std::unique_ptr<KvStore> db2;
    Status s = KvStore::Open(Config(p, "woart", kSmall), &db2);
    EXPECT_EQ(s.code(), Code::kBusy);
    EXPECT_NE(s.message().find("another process"), std::string::npos) << s.ToString();
    EXPECT_TRUE(ReadFile(p) == before) << "busy (another process): the file changed";
    ASSERT_EQ(::write(back[1], "x", 1), 1);
    int st = 0;
    ::waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
    for (int fd : {fds[0], fds[1], back[0], back[1]}) ::close(fd);
  }
  // A corrupt header, and the old layout version: Corruption naming it, nothing written.
  {
    std::string img = ReadFile(p);
    img[60] ^= 1;  // the uuid: inside the checksummed header fields
    { std::ofstream(p.str(), std::ios::binary | std::ios::trunc) << img; }
    std::unique_ptr<KvStore> db;
    Status s = KvStore::Open(Config(p, "woart", kSmall), &db);
    EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
    EXPECT_TRUE(ReadFile(p) == img) << "corrupt header: the file changed";
    img[60] ^= 1;
    img[8] = 1;  // layout version 1 (no value checksums)
    { std::ofstream(p.str(), std::ios::binary | std::ios::trunc) << img; }
    s = KvStore::Open(Config(p, "woart", kSmall), &db);
    EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find("layout version 1"), std::string::npos) << s.ToString();
    EXPECT_TRUE(ReadFile(p) == img) << "old version: the file changed";
  }
}

}  // namespace
}  // namespace wort
