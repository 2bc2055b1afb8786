// The kNN tree's write paths under the crash explorer (crash/explorer.h PathExplorer: every
// flush and fence of a build, a replace, a new name and a drop is a crash point, with images
// of what reached memory) and under SIGKILL during builds. After any crash the pool reopens
// (post-crash GC included) with each name naming the old tree or the new one - complete, exact
// answers, Check() clean - never a half-built tree, and the allocator holds exactly what the
// trees reach (CheckReachability).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "crash/explorer.h"
#include "crash/oracle.h"
#include "crash/sites.h"
#include "knn/knn_util.h"
#include "wort/knn.h"
#include "wort/pool.h"

namespace wort::test {
namespace {

using knn::KnnIndex;

// One version of a tree: its points, and the exact answers to a few queries.
struct Version {
  Points p;
  Points q;
  uint32_t k = 4;
};

Version MakeVersion(uint64_t n, uint64_t seed) {
  Version v;
  v.p = MakePoints(n, 3, 4, 300, seed);
  v.q = MakePoints(6, 3, 4, 300, seed, 0, seed + 1000);
  return v;
}

knn::BuildOptions Opts() {
  knn::BuildOptions bo;
  bo.degree = 8;
  bo.threads = 1;
  return bo;
}

// OK iff the tree named `name` in `pool` is `v`: its point count, Check() clean, exact answers.
Status IsVersion(Pool& pool, const std::string& name, const Version& v) {
  std::unique_ptr<KnnIndex> idx;
  WORT_RETURN_IF_ERROR(KnnIndex::Open(pool, name, &idx));
  if (idx->info().points != v.p.n) return Status::Corruption("points " + std::to_string(idx->info().points));
  std::string rep;
  Status s = idx->Check(&rep);
  if (!s.ok()) return Status::Corruption("Check: " + rep);
  std::vector<uint64_t> ids(v.k);
  std::vector<float> d(v.k);
  for (knn::Engine e : {knn::Engine::kPsb, knn::Engine::kBranchAndBound}) {
    knn::SearchOptions so;
    so.engine = e;
    so.threads = 1;
    for (uint64_t i = 0; i < v.q.n; ++i) {
      WORT_RETURN_IF_ERROR(idx->Search(v.q.row(i), 1, v.k, so, ids.data(), d.data()));
      const auto want = ExactKnn(v.p, {}, v.q.row(i), v.k);
      for (uint32_t r = 0; r < v.k; ++r)
        if (ids[r] != want[r].second) return Status::Corruption("query " + std::to_string(i) + " rank " + std::to_string(r));
    }
  }
  return Status::OK();
}

// Opens a crash image as recovery does and judges `name`: one of `allowed` (null: absent).
Status CheckImage(const std::string& path, const std::string& name, const std::vector<const Version*>& allowed,
                  int* which = nullptr) {
  PoolOptions po;
  po.background_recovery = false;
  std::unique_ptr<Pool> pool;
  WORT_RETURN_IF_ERROR(Pool::Open(path, po, &pool));
  std::string rep;
  Status s = crash::CheckReachability(*pool, &rep);
  if (!s.ok()) return Status::Corruption("reachability: " + rep);
  std::string why;
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (allowed[i] == nullptr) {
      std::unique_ptr<KnnIndex> idx;
      s = KnnIndex::Open(*pool, name, &idx);
      if (s.IsNotFound()) {
        if (which) *which = static_cast<int>(i);
        return Status::OK();
      }
      why += " [absent: " + s.ToString() + "]";
      continue;
    }
    s = IsVersion(*pool, name, *allowed[i]);
    if (s.ok()) {
      if (which) *which = static_cast<int>(i);
      return Status::OK();
    }
    why += " [version " + std::to_string(i) + ": " + s.ToString() + "]";
  }
  return Status::Corruption("'" + name + "' is none of the allowed trees:" + why);
}

// Explores a build, a replace, a new name, a drop and a replace; `drop_site` (file:line) runs
// them as if that persist site did not exist (mutation testing).
crash::ExplorerResult ExploreKnn(const std::string& drop_site) {
  TempPath path("knncrash");
  PoolOptions po;
  po.initial_size = 4ull << 20;
  po.max_size = 64ull << 20;
  std::unique_ptr<Pool> pool;
  crash::ExplorerResult res;
  EXPECT_TRUE(Pool::Create(path, po, &pool).ok());
  if (!pool) return res;
  const Version a = MakeVersion(150, 1), b = MakeVersion(90, 2), c = MakeVersion(40, 3);
  EXPECT_TRUE(KnnIndex::Build(*pool, "t", a.p.x.data(), nullptr, a.p.n, 3, Opts()).ok());  // setup

  crash::ExplorerConfig cfg;
  cfg.subsets = 3;
  cfg.max_points = 40;
  cfg.seed = 7;
  cfg.torn_lines = true;
  cfg.single_line_images = true;
  cfg.drop_site = drop_site;
  crash::PathExplorer px(pool.get(), cfg);
  struct Step {
    std::string desc;
    std::function<Status()> op;
    std::string name;
    std::vector<const Version*> during, after;
  };
  std::vector<Step> steps = {
      {"replace t: 150 -> 90 points", [&] { return KnnIndex::Build(*pool, "t", b.p.x.data(), nullptr, b.p.n, 3, Opts()); },
       "t", {&a, &b}, {&b}},
      {"build u (new name)", [&] { return KnnIndex::Build(*pool, "u", c.p.x.data(), nullptr, c.p.n, 3, Opts()); }, "u",
       {nullptr, &c}, {&c}},
      {"drop t", [&] { return KnnIndex::Drop(*pool, "t"); }, "t", {&b, nullptr}, {nullptr}},
      {"replace u: 40 -> 150 points", [&] { return KnnIndex::Build(*pool, "u", a.p.x.data(), nullptr, a.p.n, 3, Opts()); },
       "u", {&c, &a}, {&a}},
  };
  for (size_t i = 0; i < steps.size() && res.violation_count == 0; ++i) {
    const Step& st = steps[i];
    Status op_status;
    auto check = [&](const std::string& img, bool returned) {
      return CheckImage(img, st.name, returned ? st.after : st.during);
    };
    EXPECT_TRUE(px.Explore(i, st.desc, st.op, &op_status, check, &res).ok());
    EXPECT_TRUE(op_status.ok()) << st.desc << ": " << op_status.ToString();
  }
  return res;
}

TEST(KnnCrash, ExplorerBuildReplaceNewNameDrop) {
  const crash::ExplorerResult res = ExploreKnn("");
  for (const auto& v : res.violations) ADD_FAILURE() << v.ToString();
  EXPECT_EQ(res.violation_count, 0u);
  EXPECT_GT(res.crash_points, 40u);
  std::printf("knn explorer: operations %zu, crash points %zu, images %zu\n", res.ops_run, res.crash_points, res.images);
}

// The mutation gate of src/knn: each persist site of the build and the publication, dropped in
// turn, is caught by the explorer above (a crash image then holds a tree that is not whole).
TEST(KnnCrash, EveryPersistSiteIsNeeded) {
  size_t sites = 0;
  for (const crash::PmSite& site : crash::PmSites()) {
    const std::string file = site.file;
    if (file.rfind("src/knn/", 0) != 0) continue;
    ++sites;
    const crash::ExplorerResult res = ExploreKnn(site.Name());
    EXPECT_GT(res.violation_count, 0u) << site.Name() << " (" << site.code << ") dropped: no crash image caught it";
  }
  EXPECT_GE(sites, 8u);  // the build's six, the publish and the new root's
}

// A child process rebuilds one name over and over, alternating two point sets; it is killed at
// a random instant; the pool (copied, as a crash leaves it) must hold one of the two, whole.
TEST(KnnCrash, KillDuringBuilds) {
  TempPath path("knnkill");
  const Version a = MakeVersion(20000, 11), b = MakeVersion(12000, 12);
  {
    PoolOptions po;
    po.max_size = 256ull << 20;
    std::unique_ptr<Pool> pool;
    ASSERT_TRUE(Pool::Create(path, po, &pool).ok());
    ASSERT_TRUE(KnnIndex::Build(*pool, "t", a.p.x.data(), nullptr, a.p.n, 3, Opts()).ok());
    ASSERT_TRUE(pool->Close().ok());
  }
  std::mt19937_64 rng(5);
  int seen[2] = {0, 0};
  const std::string copy = path.str() + ".check";
  for (int round = 0; round < 8; ++round) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      PoolOptions po;
      po.background_recovery = false;
      std::unique_ptr<Pool> pool;
      if (!Pool::Open(path, po, &pool).ok()) ::_exit(3);
      if (::write(fds[1], "R", 1) != 1) ::_exit(5);
      for (uint64_t i = 0;; ++i) {
        const Version& v = (i + round) % 2 ? b : a;
        if (!KnnIndex::Build(*pool, "t", v.p.x.data(), nullptr, v.p.n, 3, Opts()).ok()) ::_exit(6);
      }
    }
    ::close(fds[1]);
    char ch = 0;
    ASSERT_EQ(::read(fds[0], &ch, 1), 1);
    std::this_thread::sleep_for(std::chrono::microseconds(20000 + rng() % 150000));
    ::kill(pid, SIGKILL);
    int wst = 0;
    ::waitpid(pid, &wst, 0);
    ::close(fds[0]);
    ASSERT_TRUE(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL) << "the builder died before the kill: status " << wst;
    std::filesystem::copy_file(path.str(), copy, std::filesystem::copy_options::overwrite_existing);
    int which = -1;
    Status s = CheckImage(copy, "t", {&a, &b}, &which);
    ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.ToString();
    ++seen[which];
    std::filesystem::remove(copy);
  }
  std::printf("knn kill test: 8 rounds, tree A found %d times, B %d times\n", seen[0], seen[1]);
  EXPECT_GT(seen[0] + seen[1], 0);
}

}  // namespace
}  // namespace wort::test
