// The persist-site inventory (crash/sites.h). The table itself is generated at build time by
// scripts/pm_sites.py into the build directory's generated/pm_sites.inc.
#include "crash/sites.h"

#include <algorithm>
#include <cstring>

#include "index/kind_ids.h"
#include "wort/index.h"

namespace wort::crash {
namespace {

struct Owner {
  const char* file;
  const char* kinds;    // space-separated kind names, or "*" (every crash-tested kind)
  const char* outside;  // non-null: no index operation reaches this file's sites, and why
};

// Which kinds' operations reach which file. Keep in step with the kinds' sources (the coverage
// test fails on a file with sites and no entry here).
constexpr Owner kSiteOwners[] = {
    {"src/index/radix/wort.cc", "wort", nullptr},
    {"src/index/radix/art_tree.cc", "woart artcow", nullptr},
    {"src/index/radix/roart.cc", "roart", nullptr},
    {"src/index/btree/fastfair.cc", "fastfair", nullptr},
    {"src/index/btree/b3tree.cc", "b3tree", nullptr},
    {"src/index/btree/fptree.cc", "fptree", nullptr},
    {"src/index/btree/nvtree.cc", "nvtree", nullptr},
    {"src/index/btree/wbtree.cc", "wbtree wbtree-slot", nullptr},
    {"src/index/btree/btree_common.h", "fastfair b3tree fptree nvtree wbtree wbtree-slot", nullptr},
    {"src/index/btree/btree_common.cc", "fastfair b3tree fptree nvtree wbtree wbtree-slot", nullptr},
    {"src/index/hash/cceh.cc", "cceh cceh-cow", nullptr},
    {"src/index/hash/static_hash.cc", "linp cuck bch levl path", nullptr},
    {"src/index/hash/hash_common.cc", "cceh cceh-cow linp cuck bch levl path", nullptr},
    {"src/alloc/alloc.cc", "*", nullptr},
    {"src/pm/pool.cc", "*", nullptr},
    // The server's item store (records, touch, expiry, flush_all, meta commands, eviction): not an
    // index kind but the gates' pseudo-kind "server" (crash/plans.h kServerGateKind), whose plan is
    // the server store's crash explorer (crash/server_explorer.h).
    {"src/server/store.cc", "server", nullptr},
    {"src/remote/canrt_server.cc", "",
     "CANRT's server (the remote layer): not an index kind; explored by its own crash explorer over the write "
     "path, resize and recovery (tests/remote/canrt_test.cc, CanrtCrash)"},
    {"src/remote/transport.cc", "",
     "the local transport's Persist (a CANRT client writing back its own DataItem): not an index kind; explored "
     "by CANRT's crash explorer with the server's apply deferred (tests/remote/canrt_test.cc, CanrtCrash)"},
    {"src/crash/explorer.cc", "",
     "the crash explorer's own setup (ExplorerConfig::dirty_free_space: blocks filled and freed before the "
     "index is created): not an index operation"},
    {"src/knn/build.cc", "",
     "the kNN tree's build (its arrays and header written back before publication): not an index kind; explored "
     "by its own crash test over build, replace and drop (tests/knn/knn_crash_test.cc)"},
    {"src/knn/tree.cc", "",
     "the kNN tree's publication (root block, commit word) and drop: not an index kind; explored by its own "
     "crash test (tests/knn/knn_crash_test.cc)"},
    {"src/kv/kv.cc", "",
     "the key-value store's value blocks: not an index kind; explored by the KV crash explorer and kill test "
     "(crash/kv_explorer.h, tests/crash/kv_crash_test.cc)"},
};

const std::vector<PmSite> kInventory = {
#include "pm_sites.inc"
};

std::vector<std::string> Split(const char* s) {
  std::vector<std::string> v;
  std::string cur;
  for (const char* p = s;; ++p) {
    if (*p == ' ' || *p == 0) {
      if (!cur.empty()) v.push_back(cur);
      cur.clear();
      if (*p == 0) break;
    } else {
      cur += *p;
    }
  }
  return v;
}

std::vector<std::string> CrashKinds() {
  std::vector<std::string> v;
  for (const IndexKind* k : IndexKinds())
    if (k->type_id < kind_id::kTestFirst && !kind_id::IsVolatile(k->type_id)) v.push_back(k->name);
  return v;
}

}  // namespace

const std::vector<PmSite>& PmSites() { return kInventory; }

std::vector<std::string> SiteOwners(const std::string& file, std::string* outside) {
  if (outside) outside->clear();
  for (const Owner& o : kSiteOwners) {
    if (file != o.file) continue;
    if (o.outside) {
      if (outside) *outside = o.outside;
      return {};
    }
    if (std::strcmp(o.kinds, "*") == 0) return CrashKinds();
    return Split(o.kinds);
  }
  return {};
}

std::vector<PmSite> SitesOfKind(const std::string& kind) {
  std::vector<PmSite> v;
  for (const PmSite& s : kInventory)
    for (const std::string& k : SiteOwners(s.file))
      if (k == kind) {
        v.push_back(s);
        break;
      }
  return v;
}

bool SiteGated(const PmSite& s) {
  return std::strcmp(s.note, "outside") != 0 && !SiteOwners(s.file).empty();
}

bool SiteMutatedBy(const PmSite& s, const std::string& kind) {
  const auto owners = SiteOwners(s.file);
  if (owners.empty()) return false;
  // A file of every kind (the allocator, the pool): WORT's, whose every key is a block.
  for (const Owner& o : kSiteOwners)
    if (s.file == std::string(o.file) && std::strcmp(o.kinds, "*") == 0)
      for (const std::string& k : owners)
        if (k == "wort") return kind == "wort";
  return owners.front() == kind;
}

bool SiteNotedUnreachable(const PmSite& s) { return std::strcmp(s.note, "unreachable") == 0; }

std::vector<std::string> StableSiteIds(const std::vector<PmSite>& sites) {
  std::vector<size_t> order(sites.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int f = std::strcmp(sites[a].file, sites[b].file);
    return f != 0 ? f < 0 : sites[a].line < sites[b].line;
  });
  std::map<std::string, size_t> seen;
  std::vector<std::string> ids(sites.size());
  for (size_t i : order) {
    const std::string base = std::string(sites[i].file) + "|" + sites[i].func + "|" + sites[i].code;
    ids[i] = base + "#" + std::to_string(seen[base]++);
  }
  return ids;
}

std::string SiteStableId(const PmSite& s) {
  static const std::map<std::string, std::string> ids = [] {
    std::map<std::string, std::string> m;
    const std::vector<std::string> v = StableSiteIds(kInventory);
    for (size_t i = 0; i < v.size(); ++i) m[kInventory[i].Name()] = v[i];
    return m;
  }();
  auto it = ids.find(s.Name());
  return it == ids.end() ? StableSiteIds({s}).front() : it->second;
}

const PmSite* FindSite(const std::string& name) {
  for (const PmSite& s : kInventory)
    if (s.Name() == name) return &s;
  return nullptr;
}

}  // namespace wort::crash
