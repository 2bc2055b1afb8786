// wort._wort: the Python binding of the key-value store API (wort/kv.h). The Python-facing
// layer (argument parsing, exceptions, iteration) is python/wort/__init__.py; this file maps
// the C++ calls one to one, releases the GIL around every store operation, and turns a Status
// into the exception class that __init__.py registered for its code.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <time.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wort/knn.h"
#include "wort/kv.h"
#include "wort/pool.h"
#include "wort/version.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// __init__.py's _error(code, message): the exception to raise for a Status (its class from the
// code, and for a failed system call the errno the message names: FileNotFoundError,
// PermissionError...).
nb::object g_error_factory;

[[noreturn]] void Raise(const wort::Status& s) {
  if (g_error_factory.is_valid()) {
    nb::object exc = g_error_factory(static_cast<int>(s.code()), s.ToString());
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  } else {
    PyErr_SetString(PyExc_RuntimeError, s.ToString().c_str());
  }
  throw nb::python_error();
}

void Check(const wort::Status& s) {
  if (!s.ok()) Raise(s);
}

std::string_view View(const nb::bytes& b) { return {b.c_str(), b.size()}; }

nb::bytes Bytes(const std::string& s) { return nb::bytes(s.data(), s.size()); }

class Store {
 public:
  explicit Store(std::unique_ptr<wort::KvStore> kv) : kv_(std::move(kv)) {}

  void Put(nb::bytes key, nb::bytes value) {
    wort::Status s;
    {
      nb::gil_scoped_release nogil;
      s = kv_->Put(View(key), View(value));
    }
    Check(s);
  }
  // None when absent.
  nb::object Get(nb::bytes key) {
    std::string v;
    wort::Status s;
    {
      nb::gil_scoped_release nogil;
      s = kv_->Get(View(key), &v);
    }
    if (s.IsNotFound()) return nb::none();
    Check(s);
    return Bytes(v);
  }
  bool Exists(nb::bytes key) {
    wort::Status s;
    {
      nb::gil_scoped_release nogil;
      s = kv_->Exists(View(key));
    }
    if (s.IsNotFound()) return false;
    Check(s);
    return true;
  }
  // False when absent.
  bool Remove(nb::bytes key) {
    wort::Status s;
    {
      nb::gil_scoped_release nogil;
      s = kv_->Remove(View(key));
    }
    if (s.IsNotFound()) return false;
    Check(s);
    return true;
  }
  // Applies (key, value) pairs all-or-nothing (KvStore::Write); value None: remove the key.
  void Write(const std::vector<std::pair<nb::bytes, std::optional<nb::bytes>>>& ops) {
    wort::KvBatch b;
    for (const auto& [k, v] : ops) {
      if (v) b.Put(View(k), View(*v));
      else b.Remove(View(k));
    }
    wort::Status s;
    {
      nb::gil_scoped_release nogil;
      s = kv_->Write(b);
    }
    Check(s);
  }
  uint64_t Count() {
    uint64_t n = 0;
    wort::Status s;
    {
      nb::gil_scoped_release nogil;
      s = kv_->Count(&n);
    }
    Check(s);
    return n;
  }
  // Up to `limit` pairs with start <= key < end (end None: unbounded), skipping the key equal
  // to `after` (the continuation of a previous batch).
  nb::list Scan(nb::bytes start, std::optional<nb::bytes> end, size_t limit, bool skip_start) {
    std::vector<std::pair<std::string, std::string>> out;
    wort::Status s;
    {
      nb::gil_scoped_release nogil;
      std::optional<std::string_view> e;
      if (end) e = View(*end);
      const std::string_view st = View(start);
      s = kv_->Scan(st, e, [&](std::string_view k, std::string_view v) {
        if (skip_start && k == st) return true;
        out.emplace_back(k, v);
        return out.size() < limit;
      });
    }
    Check(s);
    nb::list l;
    for (auto& [k, v] : out) l.append(nb::make_tuple(Bytes(k), Bytes(v)));
    return l;
  }
  // Every pair (ForEach: a hash kind's, in no particular order), at most `limit` (0: all).
  nb::list ItemsUnordered(size_t limit) {
    std::vector<std::pair<std::string, std::string>> out;
    wort::Status s;
    {
      nb::gil_scoped_release nogil;
      s = kv_->ForEach([&](std::string_view k, std::string_view v) {
        out.emplace_back(k, v);
        return limit == 0 || out.size() < limit;
      });
    }
    Check(s);
    nb::list l;
    for (auto& [k, v] : out) l.append(nb::make_tuple(Bytes(k), Bytes(v)));
    return l;
  }
  nb::dict Capabilities() {
    const wort::KvCapabilities c = kv_->Capabilities();
    nb::dict d;
    d["kind"] = c.kind;
    d["description"] = c.description;
    d["ordered"] = c.ordered;
    d["thread_safe"] = c.thread_safe;
    d["parallel_writes"] = c.parallel_writes;
    d["key_type"] = c.key_type == wort::KeyType::kU64 ? "u64" : "bytes";
    d["max_key_len"] = c.max_key_len;
    d["max_value_len"] = c.max_value_len;
    d["durability"] = wort::DurabilityName(c.durability);
    d["sync"] = c.sync == wort::SyncMode::kMsync ? "msync" : "persist";
    return d;
  }
  // The C++ API's cost of the same operations, without Python (python/bench.py): runs `op`
  // ("put", "get", "remove") over every key (values: `value` for puts) in one C++ loop and
  // returns {cpu_ns, wall_ns} for the whole loop. Keys are converted before the clock starts.
  std::pair<double, double> BenchCpp(const std::string& op, const std::vector<nb::bytes>& keys, nb::bytes value) {
    std::vector<std::string> ks;
    ks.reserve(keys.size());
    for (const nb::bytes& k : keys) ks.emplace_back(View(k));
    const std::string v(View(value));
    wort::Status bad;
    timespec c0, c1;
    std::chrono::steady_clock::time_point w0, w1;
    {
      nb::gil_scoped_release nogil;
      std::string out;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
      w0 = std::chrono::steady_clock::now();
      for (const std::string& k : ks) {
        wort::Status s = op == "put" ? kv_->Put(k, v) : op == "get" ? kv_->Get(k, &out) : kv_->Remove(k);
        if (!s.ok()) bad = s;
      }
      w1 = std::chrono::steady_clock::now();
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    }
    Check(bad);
    const double cpu = (c1.tv_sec - c0.tv_sec) * 1e9 + (c1.tv_nsec - c0.tv_nsec);
    return {cpu, std::chrono::duration<double, std::nano>(w1 - w0).count()};
  }
  void Close() {
    wort::Status s;
    {
      nb::gil_scoped_release nogil;
      s = kv_->Close();
    }
    Check(s);
  }

 private:
  std::unique_ptr<wort::KvStore> kv_;
};

Store* Open(const std::string& path, const std::string& kind, uint64_t size, const std::string& name,
            const std::string& key_type, const std::string& sync, bool create, bool read_only) {
  wort::KvConfig c;
  c.path = path;
  c.kind = kind;
  c.size = size;
  c.name = name;
  if (key_type == "bytes") c.key_type = wort::KeyType::kBytes;
  else if (key_type == "u64") c.key_type = wort::KeyType::kU64;
  else Raise(wort::Status::InvalidArgument("key_type must be 'bytes' or 'u64', not '" + key_type + "'"));
  if (sync == "persist") c.sync = wort::SyncMode::kPersist;
  else if (sync == "msync") c.sync = wort::SyncMode::kMsync;
  else Raise(wort::Status::InvalidArgument("sync must be 'persist' or 'msync', not '" + sync + "'"));
  c.create_if_missing = create;
  c.read_only = read_only;
  std::unique_ptr<wort::KvStore> kv;
  wort::Status s;
  {
    nb::gil_scoped_release nogil;
    s = wort::KvStore::Open(c, &kv);
  }
  Check(s);
  return new Store(std::move(kv));
}

// ---- wort.knn: the kNN SS-tree (wort/knn.h) ---------------------------------------------------
// Arrays cross as C-contiguous CPU ndarrays; python/wort/knn.py converts what it is given and
// allocates the outputs.
using FloatMatrix = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using IdVector = nb::ndarray<const uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using IdOut = nb::ndarray<uint64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using DistOut = nb::ndarray<float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

std::unique_ptr<wort::Pool> OpenPool(const std::string& path, uint64_t max_size, bool create) {
  wort::PoolOptions po;
  po.max_size = max_size;
  std::unique_ptr<wort::Pool> pool;
  wort::Status s;
  {
    nb::gil_scoped_release nogil;
    s = create ? wort::Pool::OpenOrCreate(path, po, &pool) : wort::Pool::Open(path, po, &pool);
  }
  Check(s);
  return pool;
}

class KnnTree {
 public:
  KnnTree(std::unique_ptr<wort::Pool> pool, std::unique_ptr<wort::knn::KnnIndex> idx)
      : pool_(std::move(pool)), idx_(std::move(idx)) {}

  nb::dict Info() const {
    const wort::knn::TreeInfo& i = Live().info();
    nb::dict d;
    d["dim"] = i.dim;
    d["degree"] = i.degree;
    d["points"] = i.points;
    d["leaves"] = i.leaves;
    d["inner_nodes"] = i.inner_nodes;
    d["height"] = i.height;
    d["method"] = wort::knn::BuildMethodName(i.method);
    d["seed"] = i.seed;
    d["bytes"] = i.bytes;
    return d;
  }

  nb::dict Search(FloatMatrix q, uint32_t k, const std::string& engine, const std::string& device, unsigned threads,
                  IdOut ids, DistOut dists) const {
    wort::knn::SearchOptions so;
    if (!wort::knn::ParseEngine(engine, &so.engine))
      Raise(wort::Status::InvalidArgument("engine must be 'psb', 'bnb' or 'brute', not '" + engine + "'"));
    if (!wort::knn::ParseDevice(device, &so.device))
      Raise(wort::Status::InvalidArgument("device must be 'cpu' or 'gpu', not '" + device + "'"));
    so.threads = threads;
    const wort::knn::KnnIndex& idx = Live();
    if (q.shape(1) != idx.info().dim)
      Raise(wort::Status::InvalidArgument("queries have " + std::to_string(q.shape(1)) + " dimensions, the tree " +
                                          std::to_string(idx.info().dim)));
    if (ids.shape(0) != q.shape(0) || ids.shape(1) != k || dists.shape(0) != q.shape(0) || dists.shape(1) != k)
      Raise(wort::Status::InvalidArgument("output arrays must be (queries, k)"));
    wort::knn::Counters c;
    wort::Status s;
    {
      nb::gil_scoped_release nogil;
      s = idx.Search(q.data(), q.shape(0), k, so, ids.data(), dists.data(), &c);
    }
    Check(s);
    nb::dict d;
    d["queries"] = c.queries;
    d["inner_visits"] = c.inner_visits;
    d["leaf_visits"] = c.leaf_visits;
    d["sphere_bytes"] = c.sphere_bytes;
    d["point_bytes"] = c.point_bytes;
    return d;
  }

  void CheckTree() const {
    std::string report;
    wort::Status s;
    {
      nb::gil_scoped_release nogil;
      s = Live().Check(&report);
    }
    if (!s.ok()) Raise(wort::Status(s.code(), s.message() + (report.empty() ? "" : ": " + report)));
  }

  void Close() {
    idx_.reset();
    if (pool_) {
      wort::Status s = pool_->Close();
      pool_.reset();
      Check(s);
    }
  }

 private:
  const wort::knn::KnnIndex& Live() const {
    if (!idx_) Raise(wort::Status::InvalidArgument("the kNN index is closed"));
    return *idx_;
  }
  std::unique_ptr<wort::Pool> pool_;
  std::unique_ptr<wort::knn::KnnIndex> idx_;
};

nb::dict KnnBuild(const std::string& path, const std::string& name, FloatMatrix points, std::optional<IdVector> ids,
                  const std::string& method, uint32_t degree, uint32_t kmeans_k, uint32_t kmeans_iterations,
                  uint64_t seed, unsigned threads, uint64_t size, const std::string& device) {
  wort::knn::BuildOptions bo;
  if (!wort::knn::ParseBuildMethod(method, &bo.method))
    Raise(wort::Status::InvalidArgument("method must be 'kmeans' or 'hilbert', not '" + method + "'"));
  if (!wort::knn::ParseDevice(device, &bo.device))
    Raise(wort::Status::InvalidArgument("device must be 'cpu' or 'gpu', not '" + device + "'"));
  // Before the pool is opened or created: nothing is written where the GPU build cannot run.
  if (std::string why; bo.device == wort::knn::Device::kGpu && !wort::knn::GpuAvailable(&why))
    Raise(wort::Status::NotSupported("knn build on the GPU: " + why));
  bo.degree = degree;
  bo.kmeans_k = kmeans_k;
  bo.kmeans_iterations = kmeans_iterations;
  bo.seed = seed;
  bo.threads = threads;
  if (ids && ids->shape(0) != points.shape(0))
    Raise(wort::Status::InvalidArgument("ids must have one entry per point"));
  std::unique_ptr<wort::Pool> pool = OpenPool(path, size, true);
  wort::knn::BuildStats st;
  wort::Status s;
  {
    nb::gil_scoped_release nogil;
    s = wort::knn::KnnIndex::Build(*pool, name, points.data(), ids ? ids->data() : nullptr, points.shape(0),
                                   static_cast<uint32_t>(points.shape(1)), bo, &st);
    wort::Status c = pool->Close();
    if (s.ok()) s = c;
  }
  Check(s);
  nb::dict d;
  d["seconds_order"] = st.seconds_order;
  d["seconds_spheres"] = st.seconds_spheres;
  d["seconds_persist"] = st.seconds_persist;
  d["bytes"] = st.bytes;
  d["assign_device"] = wort::knn::DeviceName(st.assign_device);
  d["keys_device"] = wort::knn::DeviceName(st.keys_device);
  d["seconds_gpu"] = st.seconds_gpu;
  return d;
}

KnnTree* KnnOpen(const std::string& path, const std::string& name) {
  std::unique_ptr<wort::Pool> pool = OpenPool(path, 0, false);
  std::unique_ptr<wort::knn::KnnIndex> idx;
  Check(wort::knn::KnnIndex::Open(*pool, name, &idx));
  return new KnnTree(std::move(pool), std::move(idx));
}

void KnnDrop(const std::string& path, const std::string& name) {
  std::unique_ptr<wort::Pool> pool = OpenPool(path, 0, false);
  wort::Status s = wort::knn::KnnIndex::Drop(*pool, name);
  wort::Status c = pool->Close();
  Check(s);
  Check(c);
}

}  // namespace

NB_MODULE(_wort, m) {
  m.doc() = "wort's C++ key-value API (internal: use the wort package)";
  m.def("_set_error_factory", [](nb::object f) { g_error_factory = std::move(f); });
  m.def("kinds", [] { return wort::KvKinds(); }, "The index kinds a store can use.");
  m.def("open", &Open, "path"_a, "kind"_a, "size"_a, "name"_a, "key_type"_a, "sync"_a, "create"_a,
        "read_only"_a, nb::rv_policy::take_ownership);
  m.attr("MAX_KEY_LEN") = wort::kMaxKeyLen;
  m.attr("MAX_VALUE_LEN") = wort::kMaxValueLen;
  m.attr("MAX_BATCH_OPS") = wort::kMaxBatchOps;
  m.attr("MAX_BATCH_BYTES") = wort::kMaxBatchBytes;
  m.attr("VERSION") = wort::Version();  // the library's version (CMakeLists.txt's project())
  nb::class_<Store>(m, "Store")
      .def("put", &Store::Put, "key"_a, "value"_a)
      .def("get", &Store::Get, "key"_a)
      .def("exists", &Store::Exists, "key"_a)
      .def("remove", &Store::Remove, "key"_a)
      .def("count", &Store::Count)
      .def("write", &Store::Write, "ops"_a)
      .def("scan", &Store::Scan, "start"_a, "end"_a.none(), "limit"_a, "skip_start"_a)
      .def("items_unordered", &Store::ItemsUnordered, "limit"_a)
      .def("capabilities", &Store::Capabilities)
      .def("close", &Store::Close)
      .def("_bench_cpp", &Store::BenchCpp, "op"_a, "keys"_a, "value"_a);
  m.def("knn_build", &KnnBuild, "path"_a, "name"_a, "points"_a, "ids"_a.none(), "method"_a, "degree"_a, "kmeans_k"_a,
        "kmeans_iterations"_a, "seed"_a, "threads"_a, "size"_a, "device"_a = "cpu");
  m.def("knn_open", &KnnOpen, "path"_a, "name"_a, nb::rv_policy::take_ownership);
  m.def("knn_drop", &KnnDrop, "path"_a, "name"_a);
  m.def("knn_gpu_available", [] {
    std::string why;
    const bool ok = wort::knn::GpuAvailable(&why);
    return std::make_pair(ok, why);
  });
  nb::class_<KnnTree>(m, "KnnTree")
      .def("info", &KnnTree::Info)
      .def("search", &KnnTree::Search, "queries"_a, "k"_a, "engine"_a, "device"_a, "threads"_a, "ids"_a, "dists"_a)
      .def("check", &KnnTree::CheckTree)
      .def("close", &KnnTree::Close);
  // The dict of error classes lives as long as the module.
  nb::module_::import_("atexit").attr("register")(nb::cpp_function([] { g_error_factory.reset(); }));
}
