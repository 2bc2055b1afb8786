// `wort knn gen|build|query|info|check|bench`: exact k-nearest-neighbor search (wort/knn.h) from
// the command line. doc/knn.md describes the commands, the file formats and the benchmark.
//
// Exit codes: 0 success; 1 a failure while running (an I/O error, a full pool, a WRONG result in
// `knn bench`); 2 bad input (usage, an unreadable or malformed data file, k out of range); 3 a
// damaged tree (Corruption, `knn check` findings).
#include <fmt/core.h>
#include <limits.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bench/knn_bench.h"
#include "cli/command.h"
#include "cli/files.h"
#include "cli/options.h"
#include "workload/knn_data.h"
#include "wort/knn.h"
#include "wort/pool.h"

namespace wort::cli {
namespace {

using knn_data::Matrix;

[[noreturn]] void Fail(const Status& s) { cli::Fail("wort knn", s); }

// A data file's errors are bad input (exit 2), whatever their code; the tree's are not.
void CheckInput(const Status& s) {
  if (s.ok()) return;
  fmt::print(stderr, "wort knn: {}\n", s.ToString());
  throw CLI::RuntimeError(kExitUsage);
}

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// ---- gen --------------------------------------------------------------------------------------

struct GenOpts {
  std::string out, queries_out;
  uint64_t n = 100000, queries = 0;
  uint32_t dim = 64, clusters = 100;
  double std = 160;
  uint64_t seed = 1, query_seed = 0;
  bool uniform = false;
};

void RunGen(const GenOpts& o) {
  knn_data::ClusterSpec spec;
  spec.n = o.n;
  spec.dim = o.dim;
  spec.clusters = o.clusters;
  spec.std = o.std;
  spec.seed = o.seed;
  if (o.queries && o.queries_out.empty()) CheckInput(Status::InvalidArgument("--queries needs --queries-out FILE"));
  if (!o.queries && !o.queries_out.empty()) CheckInput(Status::InvalidArgument("--queries-out needs --queries N"));
  Matrix m;
  CheckInput(o.uniform ? knn_data::GenerateUniform(spec, &m) : knn_data::GenerateClustered(spec, &m));
  Status s = knn_data::WritePoints(o.out, m);
  if (!s.ok()) Fail(s);
  if (o.uniform)
    fmt::print("wrote {}: {} points x {} dims, uniform in [0, 10000), seed {}\n", o.out, m.n, m.dim, o.seed);
  else
    fmt::print("wrote {}: {} points x {} dims, {} clusters (means uniform in [0, 10000)), std {:g}, seed {}\n", o.out, m.n,
               m.dim, o.clusters, o.std, o.seed);
  if (!o.queries) return;
  const uint64_t qseed = o.query_seed ? o.query_seed : o.seed + 1000;
  Matrix q;
  CheckInput(o.uniform ? knn_data::GenerateUniformQueries(spec, o.queries, qseed, &q)
                       : knn_data::GenerateClusteredQueries(spec, o.queries, qseed, &q));
  s = knn_data::WritePoints(o.queries_out, q);
  if (!s.ok()) Fail(s);
  fmt::print("wrote {}: {} queries drawn like the data, seed {}\n", o.queries_out, q.n, qseed);
}

void AddGen(CLI::App* knn) {
  auto o = std::make_shared<GenOpts>();
  auto* c = knn->add_subcommand("gen", "Generate the chapter's clustered workload (or uniform points) into .fvecs or .npy");
  c->add_option("--out", o->out, "Output file (.fvecs or .npy)")->required();
  AddCountOption(c, "--n", &o->n, "Points");
  c->add_option("--dim", o->dim, "Dimensions")->capture_default_str()->check(CLI::Range(1u, knn::kMaxDim));
  c->add_option("--clusters", o->clusters, "Normal clusters (means uniform in [0, 10000) per dimension)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 24));
  c->add_option("--std", o->std, "Standard deviation of each cluster (the chapter: 40..10240)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e12));
  c->add_option("--seed", o->seed, "Seed of the data")->capture_default_str();
  c->add_flag("--uniform", o->uniform, "Uniform points in [0, 10000) instead of clusters");
  AddCountOption(c, "--queries", &o->queries, "Also write this many queries drawn like the data (another seed)");
  c->add_option("--queries-out", o->queries_out, "File for the queries (.fvecs or .npy)");
  c->add_option("--query-seed", o->query_seed, "Seed of the queries (0: seed + 1000)")->capture_default_str();
  c->callback([o] { RunGen(*o); });
}

// ---- pools and trees --------------------------------------------------------------------------

std::unique_ptr<Pool> OpenPool(const std::string& path, bool create, uint64_t max_size) {
  PoolOptions po;
  po.background_recovery = false;
  std::unique_ptr<Pool> p;
  Status s;
  if (create) {
    po.max_size = max_size;
    po.initial_size = std::min<uint64_t>(64ull << 20, max_size);
    s = Pool::OpenOrCreate(path, po, &p);
  } else {
    s = Pool::Open(path, po, &p);
  }
  if (!s.ok()) Fail(Status(s.code(), path + ": " + s.message()));
  return p;
}

void ClosePool(std::unique_ptr<Pool>& p) {
  Status s = p->Close();
  if (!s.ok()) Fail(s);
}

void PrintInfo(const knn::TreeInfo& i) {
  fmt::print("points:      {}\n", i.points);
  fmt::print("dim:         {}\n", i.dim);
  fmt::print("degree:      {}\n", i.degree);
  fmt::print("method:      {} (seed {})\n", knn::BuildMethodName(i.method), i.seed);
  fmt::print("leaves:      {}\n", i.leaves);
  fmt::print("inner nodes: {}\n", i.inner_nodes);
  fmt::print("height:      {} inner level(s)\n", i.height);
  fmt::print("bytes:       {} ({})\n", i.bytes, FormatSize(i.bytes));
}

std::unique_ptr<knn::KnnIndex> OpenTree(Pool& pool, const std::string& name) {
  std::unique_ptr<knn::KnnIndex> idx;
  Status s = knn::KnnIndex::Open(pool, name, &idx);
  if (!s.ok()) {
    cli::Fail("wort knn: tree " + std::string(name), s);
  }
  return idx;
}

// ---- build ------------------------------------------------------------------------------------

struct BuildOpts {
  std::string pool, name, input, method = "kmeans", device = "cpu";
  uint32_t degree = 128, kmeans_k = 0;
  uint64_t seed = 1, pool_size = 0;
  unsigned threads = 0;
};

// Large enough for the tree twice (a rebuild writes the new tree before freeing the old) and more.
uint64_t AutoPoolSize(const Matrix& m) {
  const uint64_t tree = m.n * (uint64_t{m.dim} * 4 * 2 + 16);
  return std::max<uint64_t>(16ull << 30, 3 * tree + (1ull << 30));
}

void RunBuild(const BuildOpts& o) {
  knn::BuildOptions bo;
  if (!knn::ParseBuildMethod(o.method, &bo.method))
    CheckInput(Status::InvalidArgument("unknown --method '" + o.method + "' (valid: kmeans, hilbert)"));
  if (!knn::ParseDevice(o.device, &bo.device))
    CheckInput(Status::InvalidArgument("unknown --device '" + o.device + "' (valid: cpu, gpu)"));
  // Before the points are read or the pool is created: nothing is written where it cannot run.
  if (std::string why; bo.device == knn::Device::kGpu && !knn::GpuAvailable(&why))
    Fail(Status::NotSupported("knn build on the GPU: " + why));
  bo.degree = o.degree;
  bo.kmeans_k = o.kmeans_k;
  bo.seed = o.seed;
  bo.threads = o.threads;
  Matrix m;
  const double t0 = Now();
  CheckInput(knn_data::ReadPoints(o.input, &m));
  fmt::print("read {}: {} points x {} dims in {:.2f} s\n", o.input, m.n, m.dim, Now() - t0);
  auto pool = OpenPool(o.pool, true, o.pool_size ? o.pool_size : AutoPoolSize(m));
  knn::BuildStats st;
  const double t1 = Now();
  Status s = knn::KnnIndex::Build(*pool, o.name, m.data.data(), nullptr, m.n, m.dim, bo, &st);
  if (!s.ok()) Fail(s);
  fmt::print("built tree {} in {} in {:.2f} s (order {:.2f} s, spheres {:.2f} s, persist {:.2f} s)\n", o.name, o.pool,
             Now() - t1, st.seconds_order, st.seconds_spheres, st.seconds_persist);
  if (bo.device == knn::Device::kGpu)
    fmt::print("on the GPU: Hilbert keys{} ({:.2f} s with copies); the rest on the CPU\n",
               st.assign_device == knn::Device::kGpu ? " and k-means assignments" : "", st.seconds_gpu);
  auto idx = OpenTree(*pool, o.name);
  PrintInfo(idx->info());
  idx.reset();
  ClosePool(pool);
}

void AddBuild(CLI::App* knn) {
  auto o = std::make_shared<BuildOpts>();
  auto* c = knn->add_subcommand("build", "Build a tree from .fvecs/.bvecs/.npy points and publish it in a pool (created if absent)");
  c->add_option("--pool", o->pool, "Pool file (created if absent)")->required();
  c->add_option("--name", o->name, "Tree name in the pool (a tree of that name is replaced)")->required();
  c->add_option("--input", o->input, "Points: .fvecs, .bvecs or .npy (float32, float64 or uint8; 2-D)")->required();
  c->add_option("--method", o->method, "kmeans or hilbert")->capture_default_str();
  c->add_option("--degree", o->degree, "Children per node and points per leaf")
      ->capture_default_str()
      ->check(CLI::Range(knn::kMinDegree, knn::kMaxDegree));
  c->add_option("--kmeans-k", o->kmeans_k, "k-means clusters (0: sqrt(n/2), as the chapter)")->capture_default_str();
  c->add_option("--seed", o->seed, "Seed of k-means and Ritter's first points")->capture_default_str();
  c->add_option("--threads", o->threads, "Build threads (0: all)")->capture_default_str()->check(CLI::Range(0u, 1024u));
  c->add_option("--device", o->device,
                "cpu, or gpu: k-means assignments and Hilbert keys on the GPU (the same tree, byte for byte)")
      ->capture_default_str();
  AddSizeOption(c, "--pool-size", &o->pool_size,
                "Max size of a new pool (0: large enough for the tree: max(16 GiB, 3x the tree + 1 GiB), reserved, not allocated)");
  c->callback([o] { RunBuild(*o); });
}

// ---- query ------------------------------------------------------------------------------------

struct QueryOpts {
  std::string pool, name, queries, out, engine = "psb", device = "cpu";
  uint32_t k = 32;
  unsigned threads = 0;
};

// The distances' file beside FILE.npy / FILE.ivecs: FILE.dist.npy / FILE.dist.fvecs.
std::string DistPath(const std::string& out, const char* ext) {
  const size_t dot = out.rfind('.');
  return out.substr(0, dot) + ".dist." + ext;
}

void WriteResults(const std::string& out, uint64_t nq, uint32_t k, const std::vector<uint64_t>& ids,
                  const std::vector<float>& dists) {
  Matrix d;
  d.n = nq;
  d.dim = k;
  d.data = dists;
  Status s;
  std::string dpath;
  if (knn_data::FormatOfPath(out) == knn_data::FileFormat::kNpy) {
    std::vector<int64_t> i64(ids.begin(), ids.end());
    s = knn_data::WriteNpyInt64(out, nq, k, i64.data());
    dpath = DistPath(out, "npy");
    if (s.ok()) s = knn_data::WriteNpy(dpath, d);
  } else if (knn_data::FormatOfPath(out) == knn_data::FileFormat::kIvecs) {
    knn_data::IntMatrix im;
    im.n = nq;
    im.dim = k;
    for (uint64_t id : ids) {
      if (id > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
        CheckInput(Status::InvalidArgument(fmt::format("id {} does not fit .ivecs (int32): use --out FILE.npy", id)));
      im.data.push_back(static_cast<int32_t>(id));
    }
    s = knn_data::WriteIvecs(out, im);
    dpath = DistPath(out, "fvecs");
    if (s.ok()) s = knn_data::WriteFvecs(dpath, d);
  } else {
    CheckInput(Status::InvalidArgument(out + ": --out must be .npy or .ivecs (or absent: text on stdout)"));
  }
  if (!s.ok()) Fail(s);
  fmt::print("# wrote ids to {} and squared distances to {}\n", out, dpath);
}

void PrintResults(uint64_t nq, uint32_t k, const std::vector<uint64_t>& ids, const std::vector<float>& dists) {
  std::string buf;
  for (uint64_t q = 0; q < nq; ++q)
    for (uint32_t i = 0; i < k; ++i) buf += fmt::format("{} {} {} {:.9g}\n", q, i, ids[q * k + i], dists[q * k + i]);
  std::fwrite(buf.data(), 1, buf.size(), stdout);
}

void PrintCounters(const knn::Counters& c, uint64_t nq, double seconds) {
  const double n = static_cast<double>(std::max<uint64_t>(1, nq));
  fmt::print("# queries {} in {:.6f} s ({:.1f} us/query)\n", nq, seconds, seconds * 1e6 / n);
  fmt::print("# per query: nodes visited {:.1f} (inner {:.1f}, leaves {:.1f}), sphere bytes {:.0f}, point bytes {:.0f}\n",
             c.nodes_visited() / n, c.inner_visits / n, c.leaf_visits / n, c.sphere_bytes / n, c.point_bytes / n);
}

void RunQuery(const QueryOpts& o) {
  knn::SearchOptions so;
  if (!knn::ParseEngine(o.engine, &so.engine))
    CheckInput(Status::InvalidArgument("unknown --engine '" + o.engine + "' (valid: psb, bnb, brute)"));
  if (!knn::ParseDevice(o.device, &so.device))
    CheckInput(Status::InvalidArgument("unknown --device '" + o.device + "' (valid: cpu, gpu)"));
  so.threads = o.threads;
  Matrix q;
  CheckInput(knn_data::ReadPoints(o.queries, &q));
  auto pool = OpenPool(o.pool, false, 0);
  auto idx = OpenTree(*pool, o.name);
  if (q.dim != idx->info().dim)
    CheckInput(Status::InvalidArgument(
        fmt::format("{}: queries have {} dims, tree {} has {}", o.queries, q.dim, o.name, idx->info().dim)));
  std::vector<uint64_t> ids(q.n * o.k);
  std::vector<float> dists(q.n * o.k);
  knn::Counters c;
  const double t0 = Now();
  Status s = idx->Search(q.data.data(), q.n, o.k, so, ids.data(), dists.data(), &c);
  const double secs = Now() - t0;
  if (!s.ok()) Fail(s);
  if (o.out.empty())
    PrintResults(q.n, o.k, ids, dists);
  else
    WriteResults(o.out, q.n, o.k, ids, dists);
  fmt::print("# engine {} on {}, k {}\n", knn::EngineName(so.engine), knn::DeviceName(so.device), o.k);
  PrintCounters(c, q.n, secs);
  idx.reset();
  ClosePool(pool);
}

void AddQuery(CLI::App* knn) {
  auto o = std::make_shared<QueryOpts>();
  auto* c = knn->add_subcommand("query",
                                "The exact k nearest points of each query: lines 'query rank id squared-distance' on "
                                "stdout (or --out), then '#' lines with the counters");
  c->add_option("--pool", o->pool, "Pool file")->required();
  c->add_option("--name", o->name, "Tree name")->required();
  c->add_option("--queries", o->queries, "Queries: .fvecs, .bvecs or .npy")->required();
  c->add_option("--k", o->k, "Neighbors per query")->capture_default_str()->check(CLI::Range(1u, 1u << 20));
  c->add_option("--engine", o->engine, "psb, bnb or brute")->capture_default_str();
  c->add_option("--device", o->device, "cpu or gpu")->capture_default_str();
  c->add_option("--threads", o->threads, "CPU threads over the queries (0: all)")->capture_default_str()->check(CLI::Range(0u, 1024u));
  c->add_option("--out", o->out,
                "FILE.npy (ids int64; distances in FILE.dist.npy) or FILE.ivecs (ids int32; distances in FILE.dist.fvecs)");
  c->callback([o] { RunQuery(*o); });
}

// ---- info, check ------------------------------------------------------------------------------

struct TreeOpts {
  std::string pool, name;
};

void AddInfoCheck(CLI::App* knn) {
  auto o = std::make_shared<TreeOpts>();
  auto* info = knn->add_subcommand("info", "Print a tree's geometry");
  info->add_option("--pool", o->pool, "Pool file")->required();
  info->add_option("--name", o->name, "Tree name")->required();
  info->callback([o] {
    auto pool = OpenPool(o->pool, false, 0);
    auto idx = OpenTree(*pool, o->name);
    fmt::print("tree:        {} in {}\n", o->name, o->pool);
    PrintInfo(idx->info());
    idx.reset();
    ClosePool(pool);
  });
  auto* check = knn->add_subcommand("check", "Verify a tree: checksums, links, every point inside its spheres");
  check->add_option("--pool", o->pool, "Pool file")->required();
  check->add_option("--name", o->name, "Tree name")->required();
  check->callback([o] {
    auto pool = OpenPool(o->pool, false, 0);
    auto idx = OpenTree(*pool, o->name);
    std::string report;
    Status s = idx->Check(&report);
    idx.reset();
    ClosePool(pool);
    if (!s.ok()) {
      fmt::print("{}check FAILED: {}\n", report, s.ToString());
      throw CLI::RuntimeError(kExitCorruption);
    }
    fmt::print("{}check passed\n", report);
  });
}

// ---- bench ------------------------------------------------------------------------------------

struct BenchOpts {
  std::string scale = "quick", only, out, pool;
  unsigned threads = 0;
  uint64_t seed = 1, n = 0, queries = 0;
  bool keep_pool = false, no_report = false;
};

void RunReport(const std::string& out_dir) {
  const std::string script = FindFile("WORT_KNN_REPORT_SCRIPT", "scripts/knn_report.py");
  if (script.empty()) {
    fmt::print(stderr, "wort knn bench: scripts/knn_report.py not found; no report.md or plots\n");
    return;
  }
  const std::string cmd = fmt::format("{} '{}' '{}'", FindPython(), script, out_dir);
  if (std::system(cmd.c_str()) != 0) fmt::print(stderr, "wort knn bench: {} failed\n", cmd);
}

void RunBench(const BenchOpts& o) {
  bench::KnnBenchConfig c;
  CheckInput(bench::KnnScaleByName(o.scale, &c.scale));
  if (o.n) c.scale.n = o.n;
  if (o.queries) c.scale.queries = o.queries;
  c.only = SplitComma(o.only);
  c.out_dir = o.out.empty() ? "knn-bench-" + o.scale : o.out;
  c.threads = o.threads;
  c.seed = o.seed;
  c.pool_path = o.pool;
  c.keep_pool = o.keep_pool;
  c.faiss_script = FindFile("WORT_KNN_FAISS_SCRIPT", "scripts/knn_faiss.py");
  bench::KnnBenchSummary sum;
  Status s = bench::RunKnnBench(c, &sum, [](const std::string& line) {
    fmt::print("{}\n", line);
    std::fflush(stdout);
  });
  if (!s.ok()) Fail(s);
  fmt::print("{} records in {}\n", sum.records, sum.results_path);
  for (const auto& k : sum.skipped) fmt::print("skipped: {}\n", k);
  if (!o.no_report) RunReport(c.out_dir);
  if (sum.wrong_records) {
    fmt::print(stderr, "wort knn bench: {} WRONG record(s): an engine's answer differs from brute force (see {})\n",
               sum.wrong_records, sum.results_path);
    throw CLI::RuntimeError(kExitError);
  }
}

void AddBench(CLI::App* knn) {
  auto o = std::make_shared<BenchOpts>();
  auto* c = knn->add_subcommand("bench",
                                "The chapter's figures 28 and 30-33 (and faiss-cpu beside): results.jsonl, report.md "
                                "and PNG plots in --out");
  c->add_option("--scale", o->scale, "tiny (seconds), quick (200K points, minutes), paper (1M points, 240 queries)")
      ->capture_default_str();
  c->add_option("--only", o->only, "Experiments, comma list: fig28,fig30,fig31,fig32,fig33,faiss (default all)");
  c->add_option("--out", o->out, "Output directory (default knn-bench-<scale>)");
  c->add_option("--threads", o->threads, "Threads of the batched runs and the builds (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 1024u));
  c->add_option("--seed", o->seed, "Data seed (queries: seed + 1000)")->capture_default_str();
  AddCountOption(c, "--n", &o->n, "Override the scale's number of points (0: the scale's)");
  AddCountOption(c, "--queries", &o->queries, "Override the scale's number of queries (0: the scale's)");
  c->add_option("--pool", o->pool, "Pool file to use (must not exist; default /dev/shm/wort-knn-bench-<pid>.pool)");
  c->add_flag("--keep-pool", o->keep_pool, "Keep the pool file at the end");
  c->add_flag("--no-report", o->no_report, "Do not run scripts/knn_report.py at the end");
  c->callback([o] { RunBench(*o); });
}

void AddKnn(CLI::App& app) {
  auto* knn = app.add_subcommand("knn", "Exact k-nearest-neighbor search on an SS-tree kept in a pool (doc/knn.md)");
  knn->require_subcommand(1);
  AddGen(knn);
  AddBuild(knn);
  AddQuery(knn);
  AddInfoCheck(knn);
  AddBench(knn);
}

const bool kRegistered = RegisterCommand(&AddKnn, {"knn"});

}  // namespace
}  // namespace wort::cli
