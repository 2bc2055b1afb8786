// The kNN benchmark: chapter V's figures 28 and 30-33 (knn_bench.h).
#include "bench/knn_bench.h"

#include <fmt/core.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>
#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "workload/knn_data.h"
#include "wort/knn.h"
#include "wort/pool.h"

namespace wort::bench {
namespace {

using knn_data::Matrix;
using wort::knn::BuildMethod;
using wort::knn::Device;
using wort::knn::Engine;
using Json = nlohmann::json;

constexpr const char* kTreeName = "knn-bench";
constexpr uint64_t kQuerySeedOffset = 1000;
constexpr double kDistTolerance = 1e-5;  // relative; ids must match exactly

// ---- the plan: which trees to build and which searches to run on each ----------------------

struct DataKey {
  uint32_t dim = 0;
  double std = 0;
  bool operator==(const DataKey&) const = default;
};

struct TreeKey {
  DataKey data;
  BuildMethod method = BuildMethod::kKMeans;
  uint32_t degree = 0;
  bool operator==(const TreeKey&) const = default;
};

// One experiment's point: a tree, a k, and the engines the experiment compares.
struct Probe {
  std::string experiment;
  TreeKey tree;
  uint32_t k = 0;
  std::vector<Engine> engines;
  bool faiss = false;  // also run faiss-cpu on this tree's data
};

const std::vector<Engine> kAllEngines = {Engine::kBruteForce, Engine::kBranchAndBound, Engine::kPsb};

TreeKey DefaultTree(const KnnScale& s) { return {{s.dim, s.std}, BuildMethod::kKMeans, s.degree}; }

std::vector<Probe> PlanFig28(const KnnScale& s) {
  std::vector<Probe> out;
  for (uint32_t dim : s.fig28_dims)
    for (BuildMethod m : {BuildMethod::kHilbert, BuildMethod::kKMeans})
      out.push_back({"fig28", {{dim, s.std}, m, s.degree}, s.k, {Engine::kBruteForce, Engine::kBranchAndBound}});
  return out;
}

std::vector<Probe> PlanExperiment(const std::string& exp, const KnnScale& s) {
  std::vector<Probe> out;
  if (exp == "fig28") return PlanFig28(s);
  if (exp == "fig30")
    for (double std : s.fig30_stds) out.push_back({exp, {{s.dim, std}, BuildMethod::kKMeans, s.degree}, s.k, kAllEngines});
  if (exp == "fig31")
    for (uint32_t deg : s.fig31_degrees) out.push_back({exp, {{s.dim, s.std}, BuildMethod::kKMeans, deg}, s.k, kAllEngines});
  if (exp == "fig32")
    for (uint32_t dim : s.fig32_dims) out.push_back({exp, {{dim, s.std}, BuildMethod::kKMeans, s.degree}, s.k, kAllEngines});
  if (exp == "fig33")
    for (uint32_t k : s.fig33_ks) out.push_back({exp, DefaultTree(s), k, kAllEngines});
  if (exp == "faiss") out.push_back({exp, DefaultTree(s), s.k, kAllEngines, true});
  return out;
}

// The distinct trees of the plan, in order of first use.
std::vector<TreeKey> DistinctTrees(const std::vector<Probe>& plan) {
  std::vector<TreeKey> trees;
  for (const Probe& p : plan)
    if (std::find(trees.begin(), trees.end(), p.tree) == trees.end()) trees.push_back(p.tree);
  return trees;
}

// ---- one measured search ---------------------------------------------------------------------

struct SearchRun {
  Engine engine = Engine::kBruteForce;
  Device device = Device::kCpu;
  std::string mode;  // "single" or "batch"
  unsigned threads = 1;
  double seconds = 0;
  std::vector<double> latency_ns;  // single: per query
  double cpu_seconds = 0;          // CPU time of the search: the calling thread (single), the process (batch)
  knn::Counters counters;
  std::vector<uint64_t> ids;
  std::vector<float> dists;
  uint64_t queries_wrong = 0;
  double max_rel_dist_error = 0;
  bool counters_differ = false;  // GPU: counters not equal to the CPU run's of the same engine
};

double CpuSeconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One query at a time on one thread: each query's latency.
Status RunSingle(const knn::KnnIndex& idx, const Matrix& q, uint32_t k, SearchRun* r) {
  knn::SearchOptions so{r->engine, r->device, 1};
  r->threads = 1;
  r->ids.assign(q.n * k, 0);
  r->dists.assign(q.n * k, 0);
  r->latency_ns.resize(q.n);
  const double start = NowSeconds();
  const double cpu0 = CpuSeconds(CLOCK_THREAD_CPUTIME_ID);  // threads = 1 searches on this thread
  for (uint64_t i = 0; i < q.n; ++i) {
    knn::Counters c;
    const double t0 = NowSeconds();
    WORT_RETURN_IF_ERROR(idx.Search(q.row(i), 1, k, so, &r->ids[i * k], &r->dists[i * k], &c));
    r->latency_ns[i] = (NowSeconds() - t0) * 1e9;
    r->counters.queries += c.queries;
    r->counters.inner_visits += c.inner_visits;
    r->counters.leaf_visits += c.leaf_visits;
    r->counters.sphere_bytes += c.sphere_bytes;
    r->counters.point_bytes += c.point_bytes;
  }
  r->seconds = NowSeconds() - start;
  r->cpu_seconds = CpuSeconds(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  return Status::OK();
}

// All queries in one Search on `threads` threads.
Status RunBatch(const knn::KnnIndex& idx, const Matrix& q, uint32_t k, unsigned threads, SearchRun* r) {
  knn::SearchOptions so{r->engine, r->device, threads};
  r->threads = threads;
  r->ids.assign(q.n * k, 0);
  r->dists.assign(q.n * k, 0);
  const double t0 = NowSeconds();
  const double cpu0 = CpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
  WORT_RETURN_IF_ERROR(idx.Search(q.data.data(), q.n, k, so, r->ids.data(), r->dists.data(), &r->counters));
  r->seconds = NowSeconds() - t0;
  r->cpu_seconds = CpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  return Status::OK();
}

// Compares a run's answers with the brute-force reference: queries whose ids differ, and the
// largest relative difference of a distance.
void CheckExact(const SearchRun& ref, uint64_t nq, uint32_t k, SearchRun* r) {
  r->queries_wrong = 0;
  r->max_rel_dist_error = 0;
  for (uint64_t q = 0; q < nq; ++q) {
    bool wrong = false;
    for (uint32_t i = 0; i < k; ++i) {
      const uint64_t j = q * k + i;
      if (r->ids[j] != ref.ids[j]) wrong = true;
      const double a = r->dists[j], b = ref.dists[j];
      const double rel = std::fabs(a - b) / std::max(1e-30, std::max(std::fabs(a), std::fabs(b)));
      if (a != b) r->max_rel_dist_error = std::max(r->max_rel_dist_error, rel);
      if (rel > kDistTolerance) wrong = true;
    }
    if (wrong) ++r->queries_wrong;
  }
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// ---- the state of a run: pool, current data, current tree ----------------------------------

struct BuiltTree {
  TreeKey key;
  knn::BuildStats stats;
  double seconds = 0;
  double reopen_seconds = 0;  // Pool::Open + KnnIndex::Open after a clean close
  knn::TreeInfo info;
};

class Bench {
 public:
  Bench(const KnnBenchConfig& cfg, const KnnLogFn& log) : cfg_(cfg), log_(log) {}
  ~Bench();
  Status Run(KnnBenchSummary* summary);

 private:
  void Log(const std::string& line) const {
    if (log_) log_(line);
  }
  Status OpenPool();
  Status EnsureData(const DataKey& key);
  Status BuildTree(const TreeKey& key);
  Status MeasureK(const std::vector<const Probe*>& probes, uint32_t k);
  Status MeasureEngine(Engine e, Device d, uint32_t k, const SearchRun& ref, std::vector<SearchRun>* runs);
  Json BaseRecord(const Probe& p) const;
  Json RunRecord(const Probe& p, const SearchRun& r) const;
  void RunFaiss(const Probe& p, const SearchRun& ref);
  Status Emit(Json rec);
  Status WriteConfig() const;

  const KnnBenchConfig& cfg_;
  KnnLogFn log_;
  Environment env_;
  std::vector<Device> devices_ = {Device::kCpu};
  std::string gpu_why_;
  unsigned threads_ = 1;
  std::string pool_path_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<knn::KnnIndex> index_;
  bool have_data_ = false;
  DataKey data_key_;
  Matrix points_, queries_;
  BuiltTree tree_;
  std::string results_path_;
  KnnBenchSummary summary_;
};

Bench::~Bench() {
  index_.reset();
  if (pool_) {
    Status s = pool_->Close();
    if (!s.ok()) Log("closing " + pool_path_ + ": " + s.ToString());
    pool_.reset();
  }
  if (!pool_path_.empty() && !cfg_.keep_pool) std::filesystem::remove(pool_path_);
}

Status Bench::OpenPool() {
  pool_path_ = cfg_.pool_path.empty() ? fmt::format("/dev/shm/wort-knn-bench-{}.pool", getpid()) : cfg_.pool_path;
  if (access(pool_path_.c_str(), F_OK) == 0) {
    const std::string p = pool_path_;
    pool_path_.clear();  // not ours: never removed
    return Status::AlreadyExists("pool file " + p + " exists; remove it or choose another --pool");
  }
  PoolOptions o;
  o.initial_size = 64ull << 20;
  // The largest tree of the run, twice (a build writes the new tree before freeing the old), and
  // room: points, ids and the spheres of a tree of the smallest degree.
  uint32_t max_dim = cfg_.scale.dim;
  for (uint32_t d : cfg_.scale.fig28_dims) max_dim = std::max(max_dim, d);
  for (uint32_t d : cfg_.scale.fig32_dims) max_dim = std::max(max_dim, d);
  const uint64_t tree = cfg_.scale.n * (uint64_t{max_dim} * 4 * 2 + 16);
  o.max_size = std::max<uint64_t>(1ull << 30, 3 * tree + (256ull << 20));
  o.background_recovery = false;
  Status s = Pool::Create(pool_path_, o, &pool_);
  if (!s.ok()) {
    pool_path_.clear();
    return Status(s.code(), "creating the bench pool: " + s.message());
  }
  return Status::OK();
}

Status Bench::EnsureData(const DataKey& key) {
  if (have_data_ && data_key_ == key) return Status::OK();
  knn_data::ClusterSpec spec;
  spec.n = cfg_.scale.n;
  spec.dim = key.dim;
  spec.clusters = cfg_.scale.clusters;
  spec.std = key.std;
  spec.seed = cfg_.seed;
  WORT_RETURN_IF_ERROR(knn_data::GenerateClustered(spec, &points_));
  WORT_RETURN_IF_ERROR(knn_data::GenerateClusteredQueries(spec, cfg_.scale.queries, cfg_.seed + kQuerySeedOffset, &queries_));
  data_key_ = key;
  have_data_ = true;
  return Status::OK();
}

Status Bench::BuildTree(const TreeKey& key) {
  WORT_RETURN_IF_ERROR(EnsureData(key.data));
  index_.reset();  // Build of a name with an open handle is Busy
  knn::BuildOptions bo;
  bo.method = key.method;
  bo.degree = key.degree;
  bo.seed = cfg_.seed;
  bo.threads = threads_;
  tree_ = BuiltTree{};
  tree_.key = key;
  const double t0 = NowSeconds();
  WORT_RETURN_IF_ERROR(knn::KnnIndex::Build(*pool_, kTreeName, points_.data.data(), nullptr, points_.n, points_.dim, bo,
                                            &tree_.stats));
  tree_.seconds = NowSeconds() - t0;
  // The restart: the pool closed and opened again, then the tree (no rebuild: its header only).
  WORT_RETURN_IF_ERROR(pool_->Close());
  pool_.reset();
  PoolOptions o;
  o.background_recovery = false;
  const double t1 = NowSeconds();
  WORT_RETURN_IF_ERROR(Pool::Open(pool_path_, o, &pool_));
  WORT_RETURN_IF_ERROR(knn::KnnIndex::Open(*pool_, kTreeName, &index_));
  tree_.reopen_seconds = NowSeconds() - t1;
  tree_.info = index_->info();
  Log(fmt::format("tree: dim {} std {:g} {} degree {}: built in {:.2f} s ({} leaves, {} inner nodes, height {}), "
                  "reopened in {:.3f} ms", key.data.dim, key.data.std, knn::BuildMethodName(key.method), key.degree,
                  tree_.seconds, tree_.info.leaves, tree_.info.inner_nodes, tree_.info.height, tree_.reopen_seconds * 1e3));
  return Status::OK();
}

Status Bench::MeasureEngine(Engine e, Device d, uint32_t k, const SearchRun& ref, std::vector<SearchRun>* runs) {
  for (const char* mode : {"single", "batch"}) {
    if (e == Engine::kBruteForce && d == Device::kCpu && std::string(mode) == "batch") {
      runs->push_back(ref);  // the reference itself
      continue;
    }
    SearchRun r;
    r.engine = e;
    r.device = d;
    r.mode = mode;
    if (r.mode == "single") {
      WORT_RETURN_IF_ERROR(RunSingle(*index_, queries_, k, &r));
    } else {
      WORT_RETURN_IF_ERROR(RunBatch(*index_, queries_, k, threads_, &r));
    }
    CheckExact(ref, queries_.n, k, &r);
    runs->push_back(std::move(r));
  }
  return Status::OK();
}

bool SameCounters(const knn::Counters& a, const knn::Counters& b) {
  return a.queries == b.queries && a.inner_visits == b.inner_visits && a.leaf_visits == b.leaf_visits &&
         a.sphere_bytes == b.sphere_bytes && a.point_bytes == b.point_bytes;
}

// The CPU and GPU versions of an engine count the same way (wort/knn.h): a GPU run whose counters
// differ from the CPU run's of the same engine and mode is marked.
void CompareDevices(std::vector<SearchRun>* runs) {
  for (SearchRun& g : *runs) {
    if (g.device != Device::kGpu) continue;
    for (const SearchRun& c : *runs)
      if (c.device == Device::kCpu && c.engine == g.engine && c.mode == g.mode) g.counters_differ = !SameCounters(c.counters, g.counters);
  }
}

Status Bench::MeasureK(const std::vector<const Probe*>& probes, uint32_t k) {
  // The union of the engines the probes compare, brute force first (the reference).
  std::vector<Engine> engines = {Engine::kBruteForce};
  for (const Probe* p : probes)
    for (Engine e : p->engines)
      if (std::find(engines.begin(), engines.end(), e) == engines.end()) engines.push_back(e);
  SearchRun ref;
  ref.engine = Engine::kBruteForce;
  ref.mode = "batch";
  WORT_RETURN_IF_ERROR(RunBatch(*index_, queries_, k, threads_, &ref));
  std::vector<SearchRun> runs;
  for (Engine e : engines)
    for (Device d : devices_) WORT_RETURN_IF_ERROR(MeasureEngine(e, d, k, ref, &runs));
  CompareDevices(&runs);
  std::string line = fmt::format("  k {}:", k);
  for (const SearchRun& r : runs)
    if (r.mode == "single")
      line += fmt::format(" {}/{} {:.1f} us{}", knn::EngineName(r.engine), knn::DeviceName(r.device),
                          Percentile(r.latency_ns, 0.5) / 1e3, r.queries_wrong || r.counters_differ ? " WRONG" : "");
  Log(line);
  for (const Probe* p : probes) {
    for (const SearchRun& r : runs)
      if (std::find(p->engines.begin(), p->engines.end(), r.engine) != p->engines.end()) WORT_RETURN_IF_ERROR(Emit(RunRecord(*p, r)));
    if (p->faiss) RunFaiss(*p, ref);
  }
  return Status::OK();
}

Json Bench::BaseRecord(const Probe& p) const {
  Json j;
  j["experiment"] = p.experiment;
  j["scale"] = cfg_.scale.name;
  j["dist"] = "clustered";
  j["n"] = cfg_.scale.n;
  j["dim"] = p.tree.data.dim;
  j["std"] = p.tree.data.std;
  j["clusters"] = cfg_.scale.clusters;
  j["k"] = p.k;
  j["degree"] = p.tree.degree;
  j["method"] = knn::BuildMethodName(p.tree.method);
  j["queries"] = queries_.n;
  j["seed"] = cfg_.seed;
  j["query_seed"] = cfg_.seed + kQuerySeedOffset;
  j["build_seconds"] = tree_.seconds;
  j["reopen_ms"] = tree_.reopen_seconds * 1e3;
  j["build_seconds_order"] = tree_.stats.seconds_order;
  j["build_seconds_spheres"] = tree_.stats.seconds_spheres;
  j["build_seconds_persist"] = tree_.stats.seconds_persist;
  j["build_threads"] = threads_;
  j["tree_bytes"] = tree_.info.bytes;
  j["leaves"] = tree_.info.leaves;
  j["inner_nodes"] = tree_.info.inner_nodes;
  j["height"] = tree_.info.height;
  j["nproc"] = env_.cpus;
  j["cpu"] = env_.cpu;
  j["git_commit"] = env_.git_commit;
  j["wort_version"] = env_.wort_version;
  j["timestamp"] = env_.timestamp;
  j["host"] = env_.host;
  return j;
}

Json Bench::RunRecord(const Probe& p, const SearchRun& r) const {
  Json j = BaseRecord(p);
  const double nq = static_cast<double>(std::max<uint64_t>(1, queries_.n));
  j["engine"] = knn::EngineName(r.engine);
  j["device"] = knn::DeviceName(r.device);
  j["mode"] = r.mode;
  j["threads"] = r.threads;
  j["seconds"] = r.seconds;
  j["ns_per_query"] = r.seconds * 1e9 / nq;
  j["qps"] = r.seconds > 0 ? nq / r.seconds : 0.0;
  // CPU time per query (all threads): unaffected by waiting for a core on a shared machine.
  j["cpu_ns_per_query"] = r.cpu_seconds * 1e9 / nq;
  if (r.mode == "single") {
    double sum = 0;
    for (double v : r.latency_ns) sum += v;
    j["ns_per_query"] = sum / nq;  // the mean latency
    j["p50_ns"] = Percentile(r.latency_ns, 0.50);
    j["p99_ns"] = Percentile(r.latency_ns, 0.99);
  }
  j["nodes_visited_per_query"] = static_cast<double>(r.counters.nodes_visited()) / nq;
  j["inner_visits_per_query"] = static_cast<double>(r.counters.inner_visits) / nq;
  j["leaf_visits_per_query"] = static_cast<double>(r.counters.leaf_visits) / nq;
  j["sphere_bytes_per_query"] = static_cast<double>(r.counters.sphere_bytes) / nq;
  j["point_bytes_per_query"] = static_cast<double>(r.counters.point_bytes) / nq;
  j["bytes_per_query"] = static_cast<double>(r.counters.bytes()) / nq;
  j["queries_wrong"] = r.queries_wrong;
  j["max_rel_dist_error"] = r.max_rel_dist_error;
  if (r.device == Device::kGpu) j["counters_equal_cpu"] = !r.counters_differ;
  j["status"] = r.queries_wrong || r.counters_differ ? "WRONG" : "ok";
  return j;
}

Status Bench::Emit(Json rec) {
  ++summary_.records;
  if (rec.value("status", "") == "WRONG") ++summary_.wrong_records;
  return AppendJsonLines(results_path_, {rec});
}

// ---- faiss-cpu --------------------------------------------------------------------------------

// Runs `cmd`, returns its exit status and its stdout in *out.
int RunCapture(const std::string& cmd, std::string* out) {
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return -1;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, got);
  const int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Fraction of the reference's ids that `ids` has, per query, averaged; and whether they are equal.
double Recall(const std::vector<int32_t>& ids, const SearchRun& ref, uint64_t nq, uint32_t k, bool* exact) {
  *exact = ids.size() == nq * k;
  if (!*exact) return 0;
  double sum = 0;
  for (uint64_t q = 0; q < nq; ++q) {
    std::vector<uint64_t> want(ref.ids.begin() + q * k, ref.ids.begin() + (q + 1) * k);
    std::sort(want.begin(), want.end());
    uint32_t hit = 0;
    for (uint32_t i = 0; i < k; ++i) {
      const int32_t id = ids[q * k + i];
      if (static_cast<uint64_t>(id) != ref.ids[q * k + i]) *exact = false;
      if (id >= 0 && std::binary_search(want.begin(), want.end(), static_cast<uint64_t>(id))) ++hit;
    }
    sum += static_cast<double>(hit) / k;
  }
  return sum / static_cast<double>(nq);
}

void Bench::RunFaiss(const Probe& p, const SearchRun& ref) {
  auto skip = [&](const std::string& why) {
    Json j = BaseRecord(p);
    j["engine"] = "faiss-flat";
    j["skipped"] = true;
    j["reason"] = why;
    j["status"] = "skipped";
    summary_.skipped.push_back("faiss: " + why);
    Log("  faiss skipped: " + why);
    Status s = Emit(j);
    if (!s.ok()) Log(s.ToString());
  };
  if (cfg_.faiss_script.empty()) return skip("scripts/knn_faiss.py not found");
  std::string why;
  const std::string python = cfg_.python.empty() ? FindFaissPython(&why) : cfg_.python;
  if (python.empty()) return skip(why);
  const std::string dir = cfg_.out_dir + "/";
  Status s = knn_data::WriteFvecs(dir + "faiss_data.fvecs", points_);
  if (s.ok()) s = knn_data::WriteFvecs(dir + "faiss_queries.fvecs", queries_);
  if (!s.ok()) return skip("writing the data for faiss: " + s.ToString());
  const std::string cmd = fmt::format("{} {} --data {} --queries {} --k {} --threads {} --ids-out {} 2>{}", ShellQuote(python),
                                      ShellQuote(cfg_.faiss_script), ShellQuote(dir + "faiss_data.fvecs"),
                                      ShellQuote(dir + "faiss_queries.fvecs"), p.k, threads_,
                                      ShellQuote(dir + "faiss_ids.ivecs"), ShellQuote(dir + "faiss_stderr.txt"));
  std::string out;
  const int rc = RunCapture(cmd, &out);
  // The data went to faiss; it is the run's (seeded) data, not a result: not left in --out (a
  // paper-scale run's would be 256 MB).
  std::error_code ec;
  std::filesystem::remove(dir + "faiss_data.fvecs", ec);
  std::filesystem::remove(dir + "faiss_queries.fvecs", ec);
  if (rc != 0) return skip(fmt::format("{} exited with {} (see faiss_stderr.txt)", cfg_.faiss_script, rc));
  std::filesystem::remove(dir + "faiss_stderr.txt", ec);
  knn_data::IntMatrix ids;
  s = knn_data::ReadIvecs(dir + "faiss_ids.ivecs", &ids);
  std::filesystem::remove(dir + "faiss_ids.ivecs", ec);
  bool exact = false;
  const double recall = s.ok() ? Recall(ids.data, ref, queries_.n, p.k, &exact) : 0.0;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t nl = out.find('\n', pos);
    if (nl == std::string::npos) nl = out.size();
    const std::string line = out.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty() || line[0] != '{') continue;
    Json f = Json::parse(line, nullptr, false);
    if (f.is_discarded()) continue;
    Json j = BaseRecord(p);
    for (auto it = f.begin(); it != f.end(); ++it) j[it.key()] = it.value();
    j["recall"] = recall;
    j["exact_ids"] = exact;
    j["status"] = "ok";  // faiss is not checked for exactness: its distances round differently
    Log(fmt::format("  faiss {} {:.1f} us/query, recall {:.4f}", j.value("mode", "?"), j.value("ns_per_query", 0.0) / 1e3, recall));
    s = Emit(j);
    if (!s.ok()) Log(s.ToString());
  }
}

Status Bench::WriteConfig() const {
  Json c;
  const KnnScale& s = cfg_.scale;
  c["scale"] = s.name;
  c["n"] = s.n;
  c["queries"] = s.queries;
  c["dim"] = s.dim;
  c["std"] = s.std;
  c["clusters"] = s.clusters;
  c["k"] = s.k;
  c["degree"] = s.degree;
  c["fig28_dims"] = s.fig28_dims;
  c["fig30_stds"] = s.fig30_stds;
  c["fig31_degrees"] = s.fig31_degrees;
  c["fig32_dims"] = s.fig32_dims;
  c["fig33_ks"] = s.fig33_ks;
  c["only"] = cfg_.only;
  c["threads"] = threads_;
  c["seed"] = cfg_.seed;
  c["gpu"] = devices_.size() > 1;
  c["gpu_why"] = gpu_why_;
  c["nproc"] = env_.cpus;
  c["cpu"] = env_.cpu;
  c["git_commit"] = env_.git_commit;
  c["timestamp"] = env_.timestamp;
  c["means_range"] = {0, 10000};
  std::ofstream out(cfg_.out_dir + "/config.json");
  out << c.dump(2) << '\n';
  if (!out) return Status::IOError("cannot write " + cfg_.out_dir + "/config.json");
  return Status::OK();
}

Status ValidateConfig(const KnnBenchConfig& cfg) {
  const KnnScale& s = cfg.scale;
  if (s.n == 0 || s.queries == 0) return Status::InvalidArgument("the scale has no points or no queries");
  for (uint32_t k : s.fig33_ks)
    if (k == 0 || k > s.n) return Status::InvalidArgument(fmt::format("k {} out of range 1..{}", k, s.n));
  if (s.k == 0 || s.k > s.n) return Status::InvalidArgument(fmt::format("k {} out of range 1..{}", s.k, s.n));
  const auto& names = KnnExperimentNames();
  for (const std::string& e : cfg.only)
    if (std::find(names.begin(), names.end(), e) == names.end()) {
      std::string valid;
      for (const auto& n : names) valid += (valid.empty() ? "" : ", ") + n;
      return Status::InvalidArgument(fmt::format("unknown experiment '{}' (valid: {})", e, valid));
    }
  if (cfg.out_dir.empty()) return Status::InvalidArgument("no output directory");
  return Status::OK();
}

Status Bench::Run(KnnBenchSummary* summary) {
  WORT_RETURN_IF_ERROR(ValidateConfig(cfg_));
  std::error_code ec;
  std::filesystem::create_directories(cfg_.out_dir, ec);
  if (ec) return Status::IOError(fmt::format("cannot create {}: {}", cfg_.out_dir, ec.message()));
  results_path_ = cfg_.out_dir + "/results.jsonl";
  std::filesystem::remove(results_path_, ec);
  env_ = CaptureEnvironment();
  threads_ = cfg_.threads ? cfg_.threads : std::max(1u, std::thread::hardware_concurrency());
  if (knn::GpuAvailable(&gpu_why_)) devices_.push_back(Device::kGpu);
  Log(fmt::format("knn bench, scale {}: {} points, {} queries, {} threads, cpu {} ({} threads), gpu: {}", cfg_.scale.name,
                  cfg_.scale.n, cfg_.scale.queries, threads_, env_.cpu, env_.cpus, devices_.size() > 1 ? gpu_why_ : "none (" + gpu_why_ + ")"));
  WORT_RETURN_IF_ERROR(WriteConfig());
  std::vector<Probe> plan;
  for (const std::string& exp : KnnExperimentNames())
    if (cfg_.only.empty() || std::find(cfg_.only.begin(), cfg_.only.end(), exp) != cfg_.only.end()) {
      auto probes = PlanExperiment(exp, cfg_.scale);
      plan.insert(plan.end(), probes.begin(), probes.end());
    }
  WORT_RETURN_IF_ERROR(OpenPool());
  for (const TreeKey& tree : DistinctTrees(plan)) {
    WORT_RETURN_IF_ERROR(BuildTree(tree));
    std::vector<uint32_t> ks;
    for (const Probe& p : plan)
      if (p.tree == tree && std::find(ks.begin(), ks.end(), p.k) == ks.end()) ks.push_back(p.k);
    for (uint32_t k : ks) {
      std::vector<const Probe*> probes;
      for (const Probe& p : plan)
        if (p.tree == tree && p.k == k) probes.push_back(&p);
      WORT_RETURN_IF_ERROR(MeasureK(probes, k));
    }
  }
  summary_.results_path = results_path_;
  *summary = summary_;
  return Status::OK();
}

}  // namespace

Status KnnScaleByName(const std::string& name, KnnScale* out) {
  KnnScale s;
  s.name = name;
  s.fig28_dims = {4, 16, 64};
  s.fig30_stds = {40, 160, 640, 2560, 10240};
  s.fig31_degrees = {32, 64, 128, 256, 512};
  s.fig32_dims = {2, 4, 8, 16, 32, 64};
  s.fig33_ks = {1, 2, 4, 8, 16, 32, 64, 128};
  if (name == "paper") {
    s.n = 1000000;
    s.queries = 240;
  } else if (name == "quick") {
    s.n = 200000;
    s.queries = 100;
  } else if (name == "tiny") {
    s.n = 4000;
    s.queries = 16;
    s.fig28_dims = {4, 64};
    s.fig30_stds = {40, 2560};
    s.fig31_degrees = {32, 128, 256};
    s.fig32_dims = {4, 64};
    s.fig33_ks = {1, 32};
  } else {
    return Status::InvalidArgument("unknown scale '" + name + "' (valid: tiny, quick, paper)");
  }
  *out = std::move(s);
  return Status::OK();
}

const std::vector<std::string>& KnnExperimentNames() {
  static const std::vector<std::string> names = {"fig28", "fig30", "fig31", "fig32", "fig33", "faiss"};
  return names;
}

std::string FindFaissPython(std::string* why) {
  std::vector<std::string> candidates;
  if (const char* e = std::getenv("WORT_PYTHON"); e && *e) candidates.push_back(e);
  if (const char* h = std::getenv("HOME"); h && *h) candidates.push_back(std::string(h) + "/.cache/wort-venv/bin/python3");
  candidates.push_back("python3");
  std::string tried;
  for (const std::string& p : candidates) {
    const std::string cmd = ShellQuote(p) + " -c 'import faiss, numpy' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return p;
    tried += (tried.empty() ? "" : ", ") + p;
  }
  if (why) *why = "no python with faiss and numpy (tried " + tried + "; scripts/setup.sh installs faiss-cpu into the venv)";
  return "";
}

Status RunKnnBench(const KnnBenchConfig& cfg, KnnBenchSummary* summary, const KnnLogFn& log) {
  Bench b(cfg, log);
  return b.Run(summary);
}

}  // namespace wort::bench
