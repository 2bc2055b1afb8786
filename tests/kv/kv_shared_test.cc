// Read-only opens and readers in other processes (wort/kv.h, "Read-only opens and readers in
// other processes"; src/pm/share.h): a read-only open writes nothing (also of a file and a
// directory this user cannot write), mutating calls fail cleanly, a pool that needs recovery
// is refused, a second writer is refused naming the holder, forked readers check every value
// they read against what the writer acknowledged, and kill -9 of a reader (its slot is cleared
// and reclamation resumes) and of the writer (readers read on; the next writer recovers).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "pm/share.h"
#include "wort/alloc.h"
#include "wort/kv.h"
#include "wort/pool.h"

namespace wort {
namespace {

using test::TempPath;
using Clock = std::chrono::steady_clock;

constexpr int kKeys = 64;

// Keys over the full byte range (bytes >= 0x80, 0x00, lengths 1..4).
std::string KeyOf(int i) { return std::string(1, static_cast<char>(i * 3 + 1)) + std::string(i % 4, static_cast<char>(0x80 + i)); }

// The value of write number `seq` of key i: "<seq>|" then (seq * 37) % 300 filler bytes that
// depend on both, so a torn or misplaced value cannot pass.
std::string ValueOf(int i, uint64_t seq) {
  std::string v = std::to_string(seq) + "|";
  const size_t n = (seq * 37) % 300;
  for (size_t j = 0; j < n; ++j) v.push_back(static_cast<char>((i * 131 + seq * 7 + j) & 0xff));
  return v;
}
// Write number seq of a key removes it when seq % 5 == 4.
bool Removed(uint64_t seq) { return seq % 5 == 4; }

// Shared with the forked processes (MAP_SHARED anonymous): per key, the last acknowledged seq.
struct Shared {
  std::atomic<uint64_t> ack[kKeys];
  std::atomic<int> go;
  std::atomic<int> stop;
  std::atomic<uint64_t> reads;
  std::atomic<uint64_t> reader_errors;
  std::atomic<int> in_read;
  char msg[512];
};

Shared* NewShared() {
  void* m = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(m, MAP_FAILED);
  return new (m) Shared();
}

std::string ReadFile(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

KvConfig Cfg(const std::string& path, const std::string& kind, bool ro) {
  KvConfig c;
  c.path = path;
  c.kind = ro ? "" : kind;
  c.size = 64ull << 20;
  c.read_only = ro;
  c.create_if_missing = !ro;
  return c;
}

// Creates the store with every key at write number 0.
void Preload(const std::string& path, const std::string& kind, Shared* sh) {
  std::unique_ptr<KvStore> db;
  ASSERT_TRUE(KvStore::Open(Cfg(path, kind, false), &db).ok());
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(db->Put(KeyOf(i), ValueOf(i, 0)).ok());
    if (sh) sh->ack[i].store(0);
  }
  ASSERT_TRUE(db->Close().ok());
}

// The check of one value read for key i between acks lo (before the read) and hi (after).
// Returns "" or what is wrong.
std::string CheckRead(int i, bool found, std::string_view v, uint64_t lo, uint64_t hi) {
  // Any write number in [lo, hi + 1] may be current (hi + 1: written, not yet acknowledged).
  if (!found) {
    for (uint64_t s = lo; s <= hi + 1; ++s)
      if (Removed(s)) return "";
    return "key " + std::to_string(i) + " not found, but no remove in writes " + std::to_string(lo) + ".." +
           std::to_string(hi + 1);
  }
  const size_t bar = v.find('|');
  if (bar == std::string_view::npos) return "key " + std::to_string(i) + ": value without a write number";
  const uint64_t s = std::strtoull(std::string(v.substr(0, bar)).c_str(), nullptr, 10);
  if (s < lo || s > hi + 1 || Removed(s))
    return "key " + std::to_string(i) + ": write " + std::to_string(s) + " read, acknowledged " + std::to_string(lo) +
           ".." + std::to_string(hi);
  if (v != ValueOf(i, s)) return "key " + std::to_string(i) + ": value of write " + std::to_string(s) + " is torn";
  return "";
}

void Fail(Shared* sh, const std::string& m) {
  if (sh->reader_errors.fetch_add(1) == 0) std::snprintf(sh->msg, sizeof(sh->msg), "%s", m.c_str());
}

// A reader process: opens the store read-only, then Gets (and Scans, for ordered kinds) until
// told to stop, checking each result. Exits 0; errors go to sh.
[[noreturn]] void ReaderMain(const std::string& path, Shared* sh, bool ordered) {
  while (sh->go.load() == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  std::unique_ptr<KvStore> db;
  Status s = KvStore::Open(Cfg(path, "", true), &db);
  if (!s.ok()) {
    Fail(sh, "reader open: " + s.ToString());
    ::_exit(1);
  }
  uint64_t n = 0;
  while (sh->stop.load() == 0) {
    for (int i = 0; i < kKeys; ++i) {
      const uint64_t lo = sh->ack[i].load();
      std::string v;
      s = db->Get(KeyOf(i), &v);
      const uint64_t hi = sh->ack[i].load();
      if (!s.ok() && !s.IsNotFound()) {
        Fail(sh, "get: " + s.ToString());
        continue;
      }
      if (std::string e = CheckRead(i, s.ok(), v, lo, hi); !e.empty()) Fail(sh, "get " + e);
      ++n;
    }
    // A whole pass: each pair in order, each one checked; a key absent from the pass must have
    // had a remove in its window.
    uint64_t lo[kKeys], hi[kKeys];
    for (int i = 0; i < kKeys; ++i) lo[i] = sh->ack[i].load();
    std::map<std::string, std::string> seen;
    std::string prev;
    bool first = true;
    auto each = [&](std::string_view k, std::string_view v) {
      if (ordered && !first && !(std::string(k) > prev)) Fail(sh, "scan out of order");
      first = false;
      prev = std::string(k);
      seen[std::string(k)] = std::string(v);
      return true;
    };
    s = ordered ? db->Scan("", std::nullopt, each) : db->ForEach(each);
    for (int i = 0; i < kKeys; ++i) hi[i] = sh->ack[i].load();
    if (!s.ok()) Fail(sh, "scan: " + s.ToString());
    if (seen.size() > kKeys) Fail(sh, "scan gave " + std::to_string(seen.size()) + " keys");
    for (int i = 0; i < kKeys; ++i) {
      auto it = seen.find(KeyOf(i));
      if (std::string e = CheckRead(i, it != seen.end(), it != seen.end() ? it->second : "", lo[i], hi[i]); !e.empty())
        Fail(sh, "scan " + e);
    }
    uint64_t cnt = 0;
    if (!db->Count(&cnt).ok() || cnt > kKeys) Fail(sh, "count " + std::to_string(cnt));
  }
  sh->reads.fetch_add(n);
  ::_exit(db->Close().ok() ? 0 : 1);
}

// The writer's loop: round-robin over the keys, each write acknowledged after it returned.
void WriteRounds(KvStore& db, Shared* sh, uint64_t* seq, Clock::duration d) {
  const auto end = Clock::now() + d;
  while (Clock::now() < end) {
    for (int i = 0; i < kKeys; ++i) {
      const uint64_t s = seq[i] + 1;
      Status st = Removed(s) ? db.Remove(KeyOf(i)) : db.Put(KeyOf(i), ValueOf(i, s));
      ASSERT_TRUE(st.ok()) << st.ToString();
      seq[i] = s;
      sh->ack[i].store(s);
    }
  }
}

// fork(); the child dies with this process (a failed assertion must not leave it waiting).
pid_t Fork() {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(99);
  }
  return pid;
}

int WaitExit(pid_t pid) {
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

uint64_t NReaders(const Pool& p) { return std::atomic_ref<uint64_t>(*p.at<uint64_t>(share::kNReadersOff)).load(); }

TEST(KvShared, ReadOnlyOpenWritesNothingAndRefusesWrites) {
  TempPath path("kvro");
  Preload(path, "woart", nullptr);
  const std::string before = ReadFile(path);
  {
    std::unique_ptr<KvStore> db;
    ASSERT_TRUE(KvStore::Open(Cfg(path, "", true), &db).ok());
    EXPECT_TRUE(db->Capabilities().read_only);
    for (int i = 0; i < kKeys; ++i) {
      std::string v;
      ASSERT_TRUE(db->Get(KeyOf(i), &v).ok());
      EXPECT_EQ(v, ValueOf(i, 0));
      EXPECT_TRUE(db->Exists(KeyOf(i)).ok());
    }
    uint64_t n = 0;
    ASSERT_TRUE(db->Count(&n).ok());
    EXPECT_EQ(n, static_cast<uint64_t>(kKeys));
    size_t scanned = 0;
    ASSERT_TRUE(db->Scan("", std::nullopt, [&](std::string_view, std::string_view) { return ++scanned > 0; }).ok());
    EXPECT_EQ(scanned, static_cast<size_t>(kKeys));
    std::string report;
    EXPECT_TRUE(db->Check(&report).ok()) << report;
    // A Get from a Get callback (a nested read keeps the outer read's epoch).
    std::string inner;
    ASSERT_TRUE(db->Get(KeyOf(5), [&](std::string_view) { EXPECT_TRUE(db->Get(KeyOf(6), &inner).ok()); }).ok());
    EXPECT_EQ(inner, ValueOf(6, 0));
    Status s = db->Put("x", "y");
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("read-only"), std::string::npos) << s.ToString();
    EXPECT_EQ(db->Remove(KeyOf(0)).code(), Code::kInvalidArgument);
    KvBatch b;
    b.Put("x", "y");
    EXPECT_EQ(db->Write(b).code(), Code::kInvalidArgument);
    ASSERT_TRUE(db->Close().ok());
  }
  EXPECT_TRUE(ReadFile(path) == before) << "a read-only open changed the file";
  // A missing pool or store: NotFound, nothing created.
  std::unique_ptr<KvStore> db;
  EXPECT_TRUE(KvStore::Open(Cfg(path.str() + ".absent", "", true), &db).IsNotFound());
  EXPECT_FALSE(std::filesystem::exists(path.str() + ".absent"));
  KvConfig c = Cfg(path, "", true);
  c.name = "other";
  EXPECT_TRUE(KvStore::Open(c, &db).IsNotFound());
  EXPECT_TRUE(ReadFile(path) == before);
}

// A pool on a read-only file in a read-only directory: the reader cannot register, so it holds
// a shared flock (a writer is refused meanwhile) and reads; the file stays byte-identical. Run
// as user nobody when the test runs as root (root writes any file).
TEST(KvShared, ReadOnlyFileAndDirectory) {
  char tmpl[] = "/tmp/wort-rodir-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, path = dir + "/ro.pool";
  Preload(path, "wort", nullptr);
  const std::string before = ReadFile(path);
  ASSERT_EQ(::chmod(path.c_str(), 0444), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
  Shared* sh = NewShared();
  const pid_t pid = Fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::geteuid() == 0 && ::setresgid(65534, 65534, 65534) != 0) ::_exit(10);
    if (::geteuid() == 0 && ::setresuid(65534, 65534, 65534) != 0) ::_exit(11);
    if (::open(path.c_str(), O_RDWR) >= 0) ::_exit(12);  // the setup did not make it read-only
    std::unique_ptr<KvStore> db;
    Status s = KvStore::Open(Cfg(path, "", true), &db);
    if (!s.ok()) {
      Fail(sh, "open: " + s.ToString());
      ::_exit(13);
    }
    for (int i = 0; i < kKeys; ++i) {
      std::string v;
      if (!db->Get(KeyOf(i), &v).ok() || v != ValueOf(i, 0)) ::_exit(14);
    }
    sh->go.store(1);
    while (sh->stop.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ::_exit(db->Close().ok() ? 0 : 15);
  }
  while (sh->go.load() == 0 && sh->reader_errors.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // While it reads, no writer: Busy (the reader's shared lock).
  std::unique_ptr<KvStore> w;
  Status s = KvStore::Open(Cfg(path, "wort", false), &w);
  EXPECT_EQ(s.code(), Code::kBusy) << s.ToString();
  sh->stop.store(1);
  EXPECT_EQ(WaitExit(pid), 0) << sh->msg;
  EXPECT_TRUE(ReadFile(path) == before) << "a read-only open changed a read-only file";
  ::chmod(dir.c_str(), 0755);
  std::filesystem::remove_all(dir);
}

TEST(KvShared, PoolThatNeedsRecoveryIsRefusedReadOnly) {
  TempPath path("kvrec");
  Preload(path, "woart", nullptr);
  const pid_t pid = Fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // a writer that dies without closing
    std::unique_ptr<KvStore> db;
    if (!KvStore::Open(Cfg(path, "woart", false), &db).ok()) ::_exit(1);
    if (!db->Put("k", "v").ok()) ::_exit(2);
    ::kill(::getpid(), SIGKILL);
  }
  EXPECT_EQ(WaitExit(pid), 128 + SIGKILL);
  const std::string before = ReadFile(path);
  std::unique_ptr<KvStore> db;
  Status s = KvStore::Open(Cfg(path, "", true), &db);
  EXPECT_EQ(s.code(), Code::kBusy) << s.ToString();
  EXPECT_NE(s.message().find("pool needs recovery"), std::string::npos) << s.ToString();
  EXPECT_TRUE(ReadFile(path) == before);
  // A writable open recovers; then read-only opens work.
  ASSERT_TRUE(KvStore::Open(Cfg(path, "woart", false), &db).ok());
  ASSERT_TRUE(db->Close().ok());
  ASSERT_TRUE(KvStore::Open(Cfg(path, "", true), &db).ok());
  std::string v;
  EXPECT_TRUE(db->Get("k", &v).ok());
  EXPECT_EQ(v, "v");
}

// Beside a writer in another process: a second writer is refused naming its pid; readers get
// in; kinds with DRAM structure are refused with the reason.
TEST(KvShared, SecondWriterBusyReadersAdmittedDramKindsRefused) {
  for (const std::string kind : {"woart", "fptree", "nvtree"}) {
    TempPath path("kvbusy");
    Preload(path, kind, nullptr);
    Shared* sh = NewShared();
    const pid_t pid = Fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::unique_ptr<KvStore> db;
      if (!KvStore::Open(Cfg(path, kind, false), &db).ok()) ::_exit(1);
      sh->go.store(1);
      while (sh->stop.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ::_exit(db->Close().ok() ? 0 : 2);
    }
    while (sh->go.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::unique_ptr<KvStore> db;
    Status s = KvStore::Open(Cfg(path, kind, false), &db);
    EXPECT_EQ(s.code(), Code::kBusy) << s.ToString();
    EXPECT_NE(s.message().find("pid " + std::to_string(pid)), std::string::npos) << s.ToString();
    s = KvStore::Open(Cfg(path, "", true), &db);
    if (kind == "woart") {
      ASSERT_TRUE(s.ok()) << s.ToString();
      std::string v;
      EXPECT_TRUE(db->Get(KeyOf(1), &v).ok());
      EXPECT_EQ(v, ValueOf(1, 0));
      EXPECT_TRUE(db->Close().ok());
    } else {
      EXPECT_EQ(s.code(), Code::kNotSupported) << s.ToString();
      EXPECT_NE(s.message().find("DRAM"), std::string::npos) << s.ToString();
    }
    sh->stop.store(1);
    EXPECT_EQ(WaitExit(pid), 0);
    // With no writer, every kind opens read-only.
    ASSERT_TRUE(KvStore::Open(Cfg(path, "", true), &db).ok()) << kind;
    std::string v;
    EXPECT_TRUE(db->Get(KeyOf(2), &v).ok());
  }
}

// Three reader processes under one writer (this process), for every kind readers in other
// processes support: each value read checked against the writes acknowledged around the read.
TEST(KvShared, ReaderProcessesUnderWriterSeeAcknowledgedValues) {
  const std::vector<std::string> kinds = {"woart", "wort",    "artcow", "roart", "fastfair",
                                          "wbtree", "wbtree-slot", "b3tree", "cceh", "cceh-cow"};
  for (const std::string& kind : kinds) {
    SCOPED_TRACE(kind);
    TempPath path("kvmp");
    Shared* sh = NewShared();
    Preload(path, kind, sh);
    const bool ordered = kind != "cceh" && kind != "cceh-cow";
    std::vector<pid_t> readers;
    for (int r = 0; r < 3; ++r) {
      const pid_t pid = Fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) ReaderMain(path, sh, ordered);
      readers.push_back(pid);
    }
    std::unique_ptr<KvStore> db;
    ASSERT_TRUE(KvStore::Open(Cfg(path, kind, false), &db).ok());
    const uint64_t base = db->pool().allocator().Stats().blocks_allocated;
    sh->go.store(1);
    uint64_t seq[kKeys] = {};
    WriteRounds(*db, sh, seq, std::chrono::milliseconds(700));
    sh->stop.store(1);
    for (pid_t p : readers) EXPECT_EQ(WaitExit(p), 0) << sh->msg;
    EXPECT_EQ(sh->reader_errors.load(), 0u) << sh->msg;
    EXPECT_GT(sh->reads.load(), 0u);
    EXPECT_GT(seq[0], 5u);
    EXPECT_EQ(NReaders(db->pool()), 0u);
    // What the readers held back is freed once they are gone: after a grace period the blocks
    // in use are those of the first open plus what the index grew by, not one per write.
    (void)db->pool().allocator().ReclaimRetired();  // false: nothing was left to reclaim
    const uint64_t after = db->pool().allocator().Stats().blocks_allocated;
    uint64_t writes = 0;
    for (uint64_t s : seq) writes += s;
    std::fprintf(stderr, "%s: %llu writes, blocks %llu at open, %llu after\n", kind.c_str(),
                 (unsigned long long)writes, (unsigned long long)base, (unsigned long long)after);
    EXPECT_LT(after, base + writes / 4) << "overwritten values were never freed";
    ASSERT_TRUE(db->Close().ok());
  }
}

// kill -9 of a reader inside a read: the writer's reclamation is held back while it lives, and
// resumes once the writer finds it dead (its slot cleared).
TEST(KvShared, KilledReaderIsDetectedAndReclamationResumes) {
  TempPath path("kvkr");
  Shared* sh = NewShared();
  Preload(path, "woart", sh);
  std::unique_ptr<KvStore> db;
  ASSERT_TRUE(KvStore::Open(Cfg(path, "woart", false), &db).ok());
  const pid_t pid = Fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::unique_ptr<KvStore> r;
    if (!KvStore::Open(Cfg(path, "", true), &r).ok()) ::_exit(1);
    (void)r->Get(KeyOf(0), [&](std::string_view) {
      sh->in_read.store(1);
      for (;;) ::pause();  // killed here, inside the read
    });
    ::_exit(2);
  }
  while (sh->in_read.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(NReaders(db->pool()), 1u);
  const uint64_t base = db->pool().allocator().Stats().blocks_allocated;
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(db->Put(KeyOf(1), ValueOf(1, 1 + i % 3)).ok());
  const uint64_t held = db->pool().allocator().Stats().blocks_allocated;
  EXPECT_GT(held, base + 1500) << "blocks a live reader may hold were freed";
  ::kill(pid, SIGKILL);
  EXPECT_EQ(WaitExit(pid), 128 + SIGKILL);
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(db->Put(KeyOf(1), ValueOf(1, 1 + i % 3)).ok());
  EXPECT_EQ(NReaders(db->pool()), 0u) << "the dead reader's slot was not cleared";
  EXPECT_LT(db->pool().allocator().Stats().blocks_allocated, base + 300) << "reclamation did not resume";
  ASSERT_TRUE(db->Close().ok());
}

// kill -9 of the writer (a child) while readers read: they keep reading a consistent state;
// the next writer (this process) recovers beside them; every acknowledged write is there.
TEST(KvShared, KilledWriterReadersReadOnNextWriterRecovers) {
  TempPath path("kvkw");
  Shared* sh = NewShared();
  Preload(path, "woart", sh);
  std::vector<pid_t> readers;
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = Fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) ReaderMain(path, sh, true);
    readers.push_back(pid);
  }
  const pid_t w = Fork();
  ASSERT_GE(w, 0);
  if (w == 0) {
    std::unique_ptr<KvStore> db;
    if (!KvStore::Open(Cfg(path, "woart", false), &db).ok()) ::_exit(1);
    sh->go.store(1);
    uint64_t seq[kKeys] = {};
    WriteRounds(*db, sh, seq, std::chrono::seconds(60));  // killed long before
    ::_exit(3);
  }
  while (sh->go.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ::kill(w, SIGKILL);
  EXPECT_EQ(WaitExit(w), 128 + SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // readers on the dead writer's image
  {
    std::unique_ptr<KvStore> db;
    Status s = KvStore::Open(Cfg(path, "woart", false), &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(db->pool().WaitForRecovery().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // readers beside the new writer
    sh->stop.store(1);
    for (pid_t p : readers) EXPECT_EQ(WaitExit(p), 0) << sh->msg;
    EXPECT_EQ(sh->reader_errors.load(), 0u) << sh->msg;
    for (int i = 0; i < kKeys; ++i) {
      const uint64_t a = sh->ack[i].load();
      std::string v;
      s = db->Get(KeyOf(i), &v);
      EXPECT_EQ(CheckRead(i, s.ok(), v, a, a), "") << "after recovery";
    }
    std::string report;
    EXPECT_TRUE(db->Check(&report).ok()) << report;
    ASSERT_TRUE(db->Close().ok());
  }
}

// Two named stores of one pool open at once in one process (kv.h: they share the pool; the
// last Close closes it); the same store twice is Busy.
TEST(KvShared, TwoNamedStoresOfOnePoolInOneProcess) {
  TempPath path("kvtwo");
  KvConfig ca = Cfg(path, "woart", false), cb = Cfg(path, "cceh", false);
  ca.name = "a";
  cb.name = "b";
  std::unique_ptr<KvStore> a, b;
  ASSERT_TRUE(KvStore::Open(ca, &a).ok());
  Status s = KvStore::Open(cb, &b);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(&a->pool(), &b->pool());
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(a->Put(KeyOf(i), ValueOf(i, 1)).ok());
    ASSERT_TRUE(b->Put(KeyOf(i), ValueOf(i, 2)).ok());
  }
  std::unique_ptr<KvStore> a2;
  s = KvStore::Open(ca, &a2);
  EXPECT_EQ(s.code(), Code::kBusy) << s.ToString();
  ASSERT_TRUE(a->Close().ok());
  std::string v;
  ASSERT_TRUE(b->Get(KeyOf(3), &v).ok());  // the pool stays open for b
  EXPECT_EQ(v, ValueOf(3, 2));
  ASSERT_TRUE(b->Put("late", "x").ok());
  ASSERT_TRUE(KvStore::Open(ca, &a).ok());  // reopened beside b
  ASSERT_TRUE(a->Get(KeyOf(3), &v).ok());
  EXPECT_EQ(v, ValueOf(3, 1));
  ASSERT_TRUE(a->Close().ok());
  ASSERT_TRUE(b->Close().ok());
  // Both reopen (clean close: the last Close closed the pool) with everything.
  ASSERT_TRUE(KvStore::Open(cb, &b).ok());
  EXPECT_TRUE(b->pool().opened_clean());
  ASSERT_TRUE(b->Get("late", &v).ok());
  uint64_t n = 0;
  ASSERT_TRUE(b->Count(&n).ok());
  EXPECT_EQ(n, static_cast<uint64_t>(kKeys + 1));
}

// The hand-off (src/pm/share.h): a write that began with no reader registered writes no lane;
// a reader registering meanwhile must not begin its first read before that write has ended
// (else it would validate against lanes the write never touched), and writes that begin after
// its registration use the lanes. Fails if Begin returns while the write is open.
TEST(KvShared, ReaderRegisteringBesideAWriteWithoutLanesWaitsForIt) {
  TempPath path("kvhand");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, PoolOptions{}, &pool).ok());
  share::Writer* w = pool->share_writer();
  ASSERT_NE(w, nullptr);
  std::atomic<int> phase{0};
  std::thread writer([&] {
    share::WriteSection ws(w);
    EXPECT_FALSE(ws.laned()) << "no reader is registered: the write must not touch a lane";
    phase.store(1);
    while (phase.load() != 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (phase.load() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::unique_ptr<share::ReaderTable> table;
  ASSERT_TRUE(share::ReaderTable::Attach(path, pool->base(), &table).ok());
  ASSERT_TRUE(table->registered());
  std::atomic<bool> began{false};
  std::thread reader([&] {
    share::ReaderTable::Read r(*table);
    EXPECT_TRUE(r.Begin().ok());
    began.store(true);
    EXPECT_TRUE(r.Valid());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(began.load()) << "a read began while a write without lanes was in progress";
  phase.store(2);
  writer.join();
  reader.join();
  EXPECT_TRUE(began.load());
  EXPECT_GE(w->handoffs(), 1u);
  {
    share::WriteSection ws(w);
    EXPECT_TRUE(ws.laned()) << "a reader is registered: writes must use the lanes";
  }
  table.reset();  // its slot freed: writes go without lanes again
  {
    share::WriteSection ws(w);
    EXPECT_FALSE(ws.laned());
  }
  ASSERT_TRUE(pool->Close().ok());
}

// The quiet window (src/pm/share.h): a read that has failed kQuietAfter times or more asks the
// writer to start no write until its window ends; writers with lanes then wait, so the read
// validates although a writer thread writes without pause beside it; once the read ends (its
// window withdrawn) the writer goes on. Fails if writers ignore the window (the read's Valid()
// sees their lanes move).
TEST(KvShared, StarvingReadersQuietWindowHoldsWritersBack) {
  TempPath path("kvquiet");
  std::unique_ptr<Pool> pool;
  ASSERT_TRUE(Pool::Create(path, PoolOptions{}, &pool).ok());
  share::Writer* w = pool->share_writer();
  std::unique_ptr<share::ReaderTable> table;
  ASSERT_TRUE(share::ReaderTable::Attach(path, pool->base(), &table).ok());
  {
    share::ReaderTable::Read r(*table);  // registers (the hand-off) before the writer starts
    ASSERT_TRUE(r.Begin().ok());
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> writes{0};
  std::thread writer([&] {
    while (!stop.load()) {
      share::WriteSection ws(w);
      EXPECT_TRUE(ws.laned());
      writes.fetch_add(1);
    }
  });
  while (writes.load() < 1000) std::this_thread::yield();
  for (int round = 0; round < 3; ++round) {
    // As the 12th and later attempts of a read: windows of 128 ms. A writer that looked at the
    // window word just before the window and opened its lane just after the snapshot steps out
    // again, which costs the read one more attempt: three are allowed.
    bool valid = false;
    uint64_t ran_on = 0;
    for (int attempt = 0; attempt < 3 && !valid; ++attempt) {
      share::ReaderTable::Read r(*table);
      ASSERT_TRUE(r.Begin(share::kQuietAfter + 7 + attempt).ok());
      const uint64_t before = writes.load();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      valid = r.Valid();
      ran_on = writes.load() - before;
    }
    EXPECT_TRUE(valid) << "three reads in quiet windows each met a write";
    EXPECT_LE(ran_on, 1u) << "writes went on inside the quiet window";
    const uint64_t after = writes.load();
    const auto t0 = Clock::now();
    while (writes.load() < after + 100 && Clock::now() - t0 < std::chrono::seconds(5)) std::this_thread::yield();
    EXPECT_GE(writes.load(), after + 100) << "the writer did not resume after the window was withdrawn";
  }
  stop.store(true);
  writer.join();
  table.reset();
  ASSERT_TRUE(pool->Close().ok());
}

// A reader cannot starve: writer threads that Put without a pause (on two cores there is rarely
// an instant with no write in progress) and a reader in another process whose reads are long
// (Count and ForEach of a cceh store: each one read of the whole table). Before the quiet
// windows such a read never validated; now each must complete, with the exact count and every
// value whole.
namespace starve {
constexpr int kN = 20000;
std::string Key(int i) {
  return std::string{static_cast<char>(0x80 | (i & 0x7f)), static_cast<char>(i >> 7), static_cast<char>(0xff), '\0'};
}
std::string Value(int i, uint64_t seq) {
  std::string v = std::to_string(i) + ":" + std::to_string(seq) + "|";
  for (uint64_t j = 0; j < seq % 40; ++j) v.push_back(static_cast<char>((i * 7 + seq * 13 + j) & 0xff));
  return v;
}
std::string CheckPair(std::string_view k, std::string_view v) {
  const size_t colon = v.find(':'), bar = v.find('|');
  if (colon == std::string_view::npos || bar == std::string_view::npos || bar < colon) return "a value without its numbers";
  const int i = std::atoi(std::string(v.substr(0, colon)).c_str());
  const uint64_t seq = std::strtoull(std::string(v.substr(colon + 1, bar - colon - 1)).c_str(), nullptr, 10);
  if (i < 0 || i >= kN || Key(i) != k) return "a value under another key";
  if (v != Value(i, seq)) return "value " + std::to_string(seq) + " of key " + std::to_string(i) + " is torn";
  return "";
}
}  // namespace starve

TEST(KvShared, ReaderIsNotStarvedByWritersWithoutPause) {
  using namespace starve;
  TempPath path("kvstarve");
  {
    std::unique_ptr<KvStore> db;
    ASSERT_TRUE(KvStore::Open(Cfg(path, "cceh", false), &db).ok());
    for (int i = 0; i < kN; ++i) ASSERT_TRUE(db->Put(Key(i), Value(i, 0)).ok());
    ASSERT_TRUE(db->Close().ok());
  }
  Shared* sh = NewShared();
  constexpr int kReads = 10;
  const pid_t pid = Fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    while (sh->go.load() == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::unique_ptr<KvStore> db;
    Status s = KvStore::Open(Cfg(path, "", true), &db);
    if (!s.ok()) {
      Fail(sh, "reader open: " + s.ToString());
      ::_exit(1);
    }
    for (int r = 0; r < kReads; ++r) {
      uint64_t n = 0;
      s = db->Count(&n);
      if (!s.ok() || n != kN) Fail(sh, "count " + std::to_string(n) + " " + s.ToString());
      size_t pairs = 0;
      s = db->ForEach([&](std::string_view k, std::string_view v) {
        if (std::string e = CheckPair(k, v); !e.empty()) Fail(sh, e);
        ++pairs;
        return true;
      });
      if (!s.ok() || pairs != kN) Fail(sh, "foreach gave " + std::to_string(pairs) + " pairs " + s.ToString());
      sh->reads.fetch_add(1);
    }
    ::_exit(db->Close().ok() ? 0 : 1);
  }
  std::unique_ptr<KvStore> db;
  ASSERT_TRUE(KvStore::Open(Cfg(path, "cceh", false), &db).ok());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> puts{0}, errors{0};
  std::vector<std::thread> ws;
  for (int t = 0; t < 2; ++t)
    ws.emplace_back([&, t] {
      uint64_t seq = 1, x = 0x9e3779b97f4a7c15ull * (t + 1);
      while (!stop.load(std::memory_order_relaxed)) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const int i = static_cast<int>(x % kN);
        if (!db->Put(Key(i), Value(i, seq++)).ok()) errors.fetch_add(1);
        puts.fetch_add(1, std::memory_order_relaxed);
      }
    });
  while (puts.load() < 1000) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // writing before the reader opens
  sh->go.store(1);
  const auto t0 = Clock::now();
  while (sh->reads.load() < kReads && Clock::now() - t0 < std::chrono::seconds(60) && sh->reader_errors.load() == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const uint64_t reads = sh->reads.load();
  const uint64_t puts_during = puts.load();
  stop.store(true);
  for (auto& t : ws) t.join();
  if (reads < kReads) ::kill(pid, SIGKILL);
  const int rc = WaitExit(pid);
  EXPECT_EQ(sh->reader_errors.load(), 0u) << sh->msg;
  EXPECT_EQ(reads, static_cast<uint64_t>(kReads)) << "the reader starved: " << reads << " of " << kReads
                                                    << " whole-table reads in 60 s beside " << puts_during << " puts";
  EXPECT_EQ(rc, reads < kReads ? 128 + SIGKILL : 0);
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_GT(puts_during, 0u);
  ASSERT_TRUE(db->Close().ok());
}

// A value block is not reused while a reader can still read it (issue 31: the value-block path
// keeps what readers in other processes may hold per writer thread and tags it in batches). A
// reader holds the value of one key inside a Get callback (the store's promise: the bytes stay
// whole until the callback returns) while the writer overwrites that key 3 * kTagBatch + 5 times
// with values of the same size class (its thread cache hands a freed block straight to the next
// Put); then the reader compares what it holds with the copy it made on entry. Three readers: a
// thread of the writing process on the writer's handle (the pool's epoch protects it), a thread
// of the writing process on a read-only handle, and another process (both: the reader table).
// Fails when a retired block is freed early: freeing at once what readers may hold, or a tag
// taken before the increment of the cross-process epoch (then a reader that loaded that value
// before the unlink counts as entered after it: the bug of the code before 2026-11-27).
std::string ReuseValue(uint64_t n) {
  std::string v(200, static_cast<char>(0x80 + n % 97));
  std::memcpy(v.data(), &n, 8);
  return v;
}

TEST(KvShared, RetiredBlockIsNotReusedWhileAReaderHoldsIt) {
  const std::string key = KeyOf(7);
  const uint64_t kOverwrites = 3 * share::kTagBatch + 5;
  const char* names[] = {"a thread on the writer's handle", "a thread on a read-only handle", "another process"};
  for (int mode = 0; mode < 3; ++mode) {
    SCOPED_TRACE(names[mode]);
    TempPath path("kvreuse");
    Shared* sh = NewShared();
    std::unique_ptr<KvStore> db;
    ASSERT_TRUE(KvStore::Open(Cfg(path, "woart", false), &db).ok());
    for (int i = 0; i < kKeys; ++i) ASSERT_TRUE(db->Put(KeyOf(i), ReuseValue(1000 + i)).ok());
    ASSERT_TRUE(db->Put(key, ReuseValue(0)).ok());
    auto hold = [&](KvStore& r) {
      Status s = r.Get(key, [&](std::string_view v) {
        const std::string copy(v);
        sh->in_read.store(1);
        while (sh->go.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (v != copy || copy != ReuseValue(0))
          Fail(sh, "the value block a reader held was reused: it now starts with write " +
                       std::to_string(v.size() >= 8 ? *reinterpret_cast<const uint64_t*>(v.data()) : ~0ull));
      });
      if (!s.ok()) Fail(sh, "get: " + s.ToString());
    };
    pid_t pid = -1;
    std::thread t;
    std::unique_ptr<KvStore> ro;
    if (mode == 2) {
      pid = Fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        std::unique_ptr<KvStore> r;
        Status s = KvStore::Open(Cfg(path, "", true), &r);
        if (!s.ok()) {
          Fail(sh, "reader open: " + s.ToString());
          sh->in_read.store(1);
          ::_exit(1);
        }
        hold(*r);
        ::_exit(r->Close().ok() ? 0 : 1);
      }
    } else {
      if (mode == 1) {
        ASSERT_TRUE(KvStore::Open(Cfg(path, "", true), &ro).ok());
      }
      t = std::thread([&] { hold(mode == 1 ? *ro : *db); });
    }
    while (sh->in_read.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (mode > 0) {
      EXPECT_GE(NReaders(db->pool()), 1u);  // the reader's slot (an open's own read may hold another)
    }
    const uint64_t before = db->pool().allocator().Stats().blocks_allocated;
    for (uint64_t i = 1; i <= kOverwrites; ++i) EXPECT_TRUE(db->Put(key, ReuseValue(i)).ok());
    // The writer's reclamation ran meanwhile (each Put collects; the batches were tagged); what
    // it could not free is the reader's.
    EXPECT_GT(db->pool().allocator().Stats().blocks_allocated, before) << "nothing was held back for the reader";
    sh->go.store(1);
    if (mode == 2) {
      EXPECT_EQ(WaitExit(pid), 0);
    } else {
      t.join();
    }
    EXPECT_EQ(sh->reader_errors.load(), 0u) << sh->msg;
    std::string v;
    ASSERT_TRUE(db->Get(key, &v).ok());
    EXPECT_EQ(v, ReuseValue(kOverwrites));
    if (ro) {
      ASSERT_TRUE(ro->Close().ok());
    }
    ro.reset();
    // With the reader gone, what was held for it is freed by the next writes (no reader
    // registered: everything held goes back).
    // (The pool epoch collects every kBatch retires of a thread: sync::EpochManager::kRetireBatch.)
    constexpr uint64_t kBatch = 64;
    for (uint64_t i = 1; i <= 2 * kBatch + 2; ++i) ASSERT_TRUE(db->Put(key, ReuseValue(i)).ok());
    EXPECT_LE(db->pool().allocator().Stats().blocks_allocated, before + 2 * kBatch + 8)
        << "what was held for the reader was not freed after it left";
    ASSERT_TRUE(db->Close().ok());
    ::munmap(sh, sizeof(Shared));
  }
}

}  // namespace
}  // namespace wort
