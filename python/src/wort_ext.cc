// wort._wort: the Python binding of the key-value store API (wort/kv.h). The Python-facing
// layer (argument parsing, exceptions, iteration) is python/wort/__init__.py; this file maps
// the C++ calls one to one, releases the GIL around every store operation, and turns a Status
// into the exception class that __init__.py registered for its code.
#include <nanobind/nanobind.h>
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

#include "wort/kv.h"
#include "wort/version.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

nb::dict g_errors;  // wort::Code (int) -> exception class; set by __init__.py

[[noreturn]] void Raise(const wort::Status& s) {
  nb::object cls;
  {
    nb::int_ code(static_cast<int>(s.code()));
    if (g_errors.is_valid() && g_errors.contains(code)) cls = g_errors[code];
  }
  PyErr_SetString(cls.is_valid() ? cls.ptr() : PyExc_RuntimeError, s.ToString().c_str());
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
            const std::string& key_type, const std::string& sync, bool create) {
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
  std::unique_ptr<wort::KvStore> kv;
  wort::Status s;
  {
    nb::gil_scoped_release nogil;
    s = wort::KvStore::Open(c, &kv);
  }
  Check(s);
  return new Store(std::move(kv));
}

}  // namespace

NB_MODULE(_wort, m) {
  m.doc() = "wort's C++ key-value API (internal: use the wort package)";
  m.def("_set_errors", [](nb::dict d) { g_errors = d; });
  m.def("kinds", [] { return wort::KvKinds(); }, "The index kinds a store can use.");
  m.def("open", &Open, "path"_a, "kind"_a, "size"_a, "name"_a, "key_type"_a, "sync"_a, "create"_a,
        nb::rv_policy::take_ownership);
  m.attr("MAX_KEY_LEN") = wort::kMaxKeyLen;
  m.attr("MAX_VALUE_LEN") = wort::kMaxValueLen;
  m.attr("VERSION") = wort::Version();  // the library's version (CMakeLists.txt's project())
  nb::class_<Store>(m, "Store")
      .def("put", &Store::Put, "key"_a, "value"_a)
      .def("get", &Store::Get, "key"_a)
      .def("exists", &Store::Exists, "key"_a)
      .def("remove", &Store::Remove, "key"_a)
      .def("count", &Store::Count)
      .def("scan", &Store::Scan, "start"_a, "end"_a.none(), "limit"_a, "skip_start"_a)
      .def("capabilities", &Store::Capabilities)
      .def("close", &Store::Close)
      .def("_bench_cpp", &Store::BenchCpp, "op"_a, "keys"_a, "value"_a);
  // The dict of error classes lives as long as the module.
  nb::module_::import_("atexit").attr("register")(nb::cpp_function([] { g_errors.reset(); }));
}
