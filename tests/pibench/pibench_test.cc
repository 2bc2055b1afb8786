// libwort_pibench.so loaded with dlopen and driven through PiBench's tree_api, against a model,
// for every ordered index kind.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>

#include "common/test_util.h"
#include "pibench/tree_api.h"
#include "wort/index.h"

namespace {

using CreateFn = tree_api* (*)(const tree_options_t&);

CreateFn LoadCreateTree() {
  static void* h = ::dlopen(WORT_PIBENCH_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  return reinterpret_cast<CreateFn>(::dlsym(h, "create_tree"));
}

std::vector<std::string> OrderedKinds() {
  std::vector<std::string> v;
  for (const wort::IndexKind* k : wort::IndexKinds())
    // Not the volatile references (ids 30..39): their data is lost on reopen by design.
    if (k->ordered && k->type_id < 1000 && !(k->type_id >= 30 && k->type_id <= 39)) v.push_back(k->name);
  return v;
}

void Drive(const std::string& kind, size_t key_size, size_t value_size) {
  SCOPED_TRACE(kind + " key " + std::to_string(key_size) + " value " + std::to_string(value_size));
  CreateFn create = LoadCreateTree();
  ASSERT_NE(create, nullptr) << ::dlerror();
  wort::test::TempPath path("pibench");
  ::setenv("WORT_PIBENCH_INDEX", kind.c_str(), 1);
  tree_options_t opt;
  opt.key_size = key_size;
  opt.value_size = value_size;
  opt.pool_path = path.str();
  opt.pool_size = 256 << 20;
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(key_size * 31 + value_size);
  auto rand_bytes = [&](size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng() % 4 == 0 ? 0xff - rng() % 3 : rng() % 6);  // low and high bytes
    return s;
  };
  for (int round = 0; round < 2; ++round) {  // the second round reopens the pool
    ::setenv("WORT_PIBENCH_REUSE_POOL", round == 0 ? "0" : "1", 1);
    std::unique_ptr<tree_api> t(create(opt));
    ASSERT_NE(t, nullptr);
    std::vector<char> out(value_size);
    for (int i = 0; i < 3000; ++i) {
      const std::string k = rand_bytes(key_size), v = rand_bytes(value_size);
      const auto it = model.find(k);
      switch (rng() % 5) {
        case 0:
        case 1:
          ASSERT_EQ(t->insert(k.data(), k.size(), v.data(), v.size()), it == model.end());
          if (it == model.end()) model[k] = v;
          break;
        case 2:
          ASSERT_EQ(t->update(k.data(), k.size(), v.data(), v.size()), it != model.end());
          if (it != model.end()) it->second = v;
          break;
        case 3:
          ASSERT_EQ(t->remove(k.data(), k.size()), it != model.end());
          if (it != model.end()) model.erase(it);
          break;
        default: {
          ASSERT_EQ(t->find(k.data(), k.size(), out.data()), it != model.end());
          if (it != model.end()) {
            ASSERT_EQ(std::string(out.data(), value_size), it->second);
          }
        }
      }
      if (i % 500 == 0) {
        const int want = 1 + static_cast<int>(rng() % 40);
        char* recs = nullptr;
        const int n = t->scan(k.data(), k.size(), want, recs);
        auto m = model.lower_bound(k);
        int expect = 0;
        for (auto mm = m; mm != model.end() && expect < want; ++mm) ++expect;
        ASSERT_EQ(n, expect);
        for (int r = 0; r < n; ++r, ++m) {
          const char* rec = recs + r * (key_size + value_size);
          ASSERT_EQ(std::string(rec, key_size), m->first) << "record " << r;
          ASSERT_EQ(std::string(rec + key_size, value_size), m->second) << "record " << r;
        }
      }
    }
  }
}

TEST(PiBench, EveryOrderedKindThroughTreeApi) {
  const auto kinds = OrderedKinds();
  ASSERT_FALSE(kinds.empty()) << "the built-in kinds include ordered ones";
  for (const auto& k : kinds) {
    Drive(k, 8, 8);
    Drive(k, 16, 32);  // longer keys; values in their own blocks
  }
}

TEST(PiBench, UnknownKindGivesNoTree) {
  CreateFn create = LoadCreateTree();
  ASSERT_NE(create, nullptr) << ::dlerror();
  wort::test::TempPath path("pibench");
  ::setenv("WORT_PIBENCH_INDEX", "no-such-index", 1);
  tree_options_t opt;
  opt.pool_path = path.str();
  opt.pool_size = 64 << 20;
  EXPECT_EQ(create(opt), nullptr);
}

}  // namespace
