// libwort_pibench.so called through PiBench's tree_api as PiBench's default branch (master)
// declares it - declared below on its own, NOT from pibench/tree_api.h, in that branch's order:
// virtual destructor, find, insert, update, remove, scan (no bulk_load). If the plugin's vtable
// had another order (e.g. bulk_load first, as on PiBench's bulk-loading branch), each call below
// would land on another function: insert would run find, and the keys would not be found.
// Also: a second create_tree on the same pool starts from a fresh pool unless
// WORT_PIBENCH_REUSE_POOL=1.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "common/test_util.h"

namespace pibench_master {

struct tree_options_t {
  size_t key_size = 8;
  size_t value_size = 8;
  std::string pool_path = "";
  size_t pool_size = 0;
  size_t num_threads = 1;
};

class tree_api {
 public:
  virtual ~tree_api() {}
  virtual bool find(const char* key, size_t sz, char* value_out) = 0;
  virtual bool insert(const char* key, size_t key_sz, const char* value, size_t value_sz) = 0;
  virtual bool update(const char* key, size_t key_sz, const char* value, size_t value_sz) = 0;
  virtual bool remove(const char* key, size_t key_sz) = 0;
  virtual int scan(const char* key, size_t key_sz, int scan_sz, char*& values_out) = 0;
};

}  // namespace pibench_master

namespace {

using pibench_master::tree_api;
using pibench_master::tree_options_t;
using CreateFn = tree_api* (*)(const tree_options_t&);

CreateFn LoadCreateTree() {
  static void* h = ::dlopen(WORT_PIBENCH_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  return reinterpret_cast<CreateFn>(::dlsym(h, "create_tree"));
}

std::string Key(uint64_t i) {
  std::string k(8, '\0');
  std::memcpy(k.data(), &i, 8);
  return k;
}

TEST(PiBenchAbi, DefaultBranchVtableOrder) {
  CreateFn create = LoadCreateTree();
  ASSERT_NE(create, nullptr) << ::dlerror();
  wort::test::TempPath path("pibench-abi");
  ::setenv("WORT_PIBENCH_INDEX", "woart", 1);
  ::unsetenv("WORT_PIBENCH_REUSE_POOL");
  tree_options_t opt;
  opt.pool_path = path.str();
  opt.pool_size = 64 << 20;
  std::unique_ptr<tree_api> t(create(opt));
  ASSERT_NE(t, nullptr);
  // Keys with bytes 0x00 and >= 0x80.
  const uint64_t keys[] = {0, 1, 0x80, 0xff00000000000000ull, 0x8000000000000001ull, 42};
  for (uint64_t k : keys) {
    const std::string key = Key(k), val = Key(k * 3 + 1);
    ASSERT_TRUE(t->insert(key.data(), 8, val.data(), 8)) << "insert " << k;
    ASSERT_FALSE(t->insert(key.data(), 8, val.data(), 8)) << "second insert " << k;
  }
  char out[8];
  for (uint64_t k : keys) {
    const std::string key = Key(k);
    ASSERT_TRUE(t->find(key.data(), 8, out)) << "find " << k;
    EXPECT_EQ(std::string(out, 8), Key(k * 3 + 1));
  }
  const std::string absent = Key(7);
  EXPECT_FALSE(t->find(absent.data(), 8, out));
  EXPECT_FALSE(t->update(absent.data(), 8, absent.data(), 8));
  EXPECT_FALSE(t->remove(absent.data(), 8));
  const std::string k42 = Key(42), v = Key(99);
  EXPECT_TRUE(t->update(k42.data(), 8, v.data(), 8));
  ASSERT_TRUE(t->find(k42.data(), 8, out));
  EXPECT_EQ(std::string(out, 8), v);
  EXPECT_TRUE(t->remove(k42.data(), 8));
  EXPECT_FALSE(t->find(k42.data(), 8, out));
  char* recs = nullptr;
  const std::string k0 = Key(0);
  EXPECT_EQ(t->scan(k0.data(), 8, 100, recs), 5);  // every key is >= 0x00.. in byte order
  ASSERT_NE(recs, nullptr);
  EXPECT_EQ(std::string(recs, 8), k0);
}

TEST(PiBenchAbi, FreshPoolUnlessReuseIsAsked) {
  CreateFn create = LoadCreateTree();
  ASSERT_NE(create, nullptr) << ::dlerror();
  wort::test::TempPath path("pibench-fresh");
  ::setenv("WORT_PIBENCH_INDEX", "woart", 1);
  tree_options_t opt;
  opt.pool_path = path.str();
  opt.pool_size = 64 << 20;
  const std::string key = Key(5);
  char out[8];
  ::unsetenv("WORT_PIBENCH_REUSE_POOL");
  {
    std::unique_ptr<tree_api> t(create(opt));
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(t->insert(key.data(), 8, key.data(), 8));
  }
  ::setenv("WORT_PIBENCH_REUSE_POOL", "1", 1);
  {
    std::unique_ptr<tree_api> t(create(opt));
    ASSERT_NE(t, nullptr);
    EXPECT_TRUE(t->find(key.data(), 8, out)) << "REUSE_POOL=1 reopens the pool";
  }
  ::unsetenv("WORT_PIBENCH_REUSE_POOL");
  {
    std::unique_ptr<tree_api> t(create(opt));
    ASSERT_NE(t, nullptr);
    EXPECT_FALSE(t->find(key.data(), 8, out)) << "a new run starts from a fresh pool";
    EXPECT_TRUE(t->insert(key.data(), 8, key.data(), 8));
  }
}

TEST(PiBenchAbi, NeverRemovesAFileThatIsNotAPool) {
  CreateFn create = LoadCreateTree();
  ASSERT_NE(create, nullptr) << ::dlerror();
  wort::test::TempPath path("pibench-notpool");
  {
    FILE* f = std::fopen(path.str().c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("not a pool, keep me\n", f);
    std::fclose(f);
  }
  ::setenv("WORT_PIBENCH_INDEX", "woart", 1);
  ::unsetenv("WORT_PIBENCH_REUSE_POOL");
  tree_options_t opt;
  opt.pool_path = path.str();
  EXPECT_EQ(create(opt), nullptr);
  FILE* f = std::fopen(path.str().c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[64] = {};
  ASSERT_NE(std::fgets(buf, sizeof buf, f), nullptr);
  std::fclose(f);
  EXPECT_STREQ(buf, "not a pool, keep me\n");
}

}  // namespace
