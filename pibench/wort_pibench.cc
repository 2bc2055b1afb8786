// libwort_pibench.so: any wort index behind PiBench's tree_api.
//
// Choosing the index: environment variable WORT_PIBENCH_INDEX (default "woart"; any kind that
// `wort bench --help` lists). The pool: PiBench's pool_path (default /dev/shm/wort-pibench.pool)
// and pool_size (the pool's maximum size; default 16 GiB). Root name: WORT_PIBENCH_ROOT (default
// "pibench").
//
// Each run starts from a fresh pool: an existing wort pool at pool_path is removed first (and
// the removal printed), so that a second run measures the same work as the first. With
// WORT_PIBENCH_REUSE_POOL=1 an existing pool is reopened instead, and its key count is printed.
// A file at pool_path that is not a wort pool is never removed: create_tree then fails.
//
// Keys are the raw key_size bytes PiBench passes, ordered as unsigned bytes (so scans are in
// byte order; PiBench's integer keys are little-endian in memory, so byte order is not integer
// order - PiBench only requires that scans be ascending in the tree's own order). Values of up
// to 8 bytes are stored inline (zero-padded); longer values live in their own pool block
// (IndexOptions::values_are_blocks), written and persisted before the index commit.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "pibench/tree_api.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace {

class WortTree final : public tree_api {
 public:
  WortTree(std::unique_ptr<wort::Pool> pool, std::unique_ptr<wort::Index> idx, size_t key_size, size_t value_size)
      : pool_(std::move(pool)), idx_(std::move(idx)), key_size_(key_size), value_size_(value_size) {}

  ~WortTree() override {
    idx_.reset();
    wort::Status s = pool_->Close();
    if (!s.ok()) std::fprintf(stderr, "wort_pibench: close: %s\n", s.ToString().c_str());
  }

  bool find(const char* key, size_t sz, char* value_out) override {
    uint64_t v;
    if (!idx_->Lookup(std::string_view(key, sz), &v).ok()) return false;
    CopyOut(v, value_out);
    return true;
  }

  bool insert(const char* key, size_t key_sz, const char* value, size_t value_sz) override {
    uint64_t v;
    if (!Encode(value, value_sz, &v)) return false;
    wort::Status s = idx_->Insert(std::string_view(key, key_sz), v);
    if (!s.ok()) Release(v);
    return s.ok();
  }

  bool update(const char* key, size_t key_sz, const char* value, size_t value_sz) override {
    const std::string_view k(key, key_sz);
    uint64_t old;
    if (!idx_->Lookup(k, &old).ok()) return false;
    uint64_t v;
    if (!Encode(value, value_sz, &v)) return false;
    if (!idx_->Upsert(k, v).ok()) {
      Release(v);
      return false;
    }
    Release(old);
    return true;
  }

  bool remove(const char* key, size_t key_sz) override {
    const std::string_view k(key, key_sz);
    uint64_t old = 0;
    const bool blocks = value_size_ > 8;
    if (blocks && !idx_->Lookup(k, &old).ok()) return false;
    if (!idx_->Remove(k).ok()) return false;
    if (blocks) Release(old);
    return true;
  }

  int scan(const char* key, size_t key_sz, int scan_sz, char*& values_out) override {
    thread_local std::vector<char> buf;
    const size_t rec = key_size_ + value_size_;
    buf.assign(rec * static_cast<size_t>(std::max(scan_sz, 0)), 0);
    int n = 0;
    wort::Status s = idx_->Scan(std::string_view(key, key_sz), nullptr, static_cast<size_t>(std::max(scan_sz, 0)),
                                [&](std::string_view k, uint64_t v) {
                                  char* r = buf.data() + rec * n;
                                  std::memcpy(r, k.data(), std::min(k.size(), key_size_));
                                  CopyOut(v, r + key_size_);
                                  ++n;
                                  return true;
                                });
    values_out = buf.data();
    return s.ok() ? n : 0;
  }

 private:
  bool Encode(const char* value, size_t value_sz, uint64_t* v) {
    if (value_size_ <= 8) {
      *v = 0;
      std::memcpy(v, value, std::min<size_t>(value_sz, 8));
      return true;
    }
    uint64_t off;
    if (!pool_->allocator().Alloc(value_size_, &off).ok()) return false;
    char* p = pool_->at<char>(off);
    std::memset(p, 0, value_size_);
    std::memcpy(p, value, std::min(value_sz, value_size_));
    wort::pm::persist(p, value_size_);
    *v = off;
    return true;
  }
  void Release(uint64_t v) {
    if (value_size_ > 8) pool_->allocator().Free(v);
  }
  void CopyOut(uint64_t v, char* out) const {
    if (value_size_ <= 8) std::memcpy(out, &v, value_size_);
    else std::memcpy(out, pool_->at<char>(v), value_size_);
  }

  std::unique_ptr<wort::Pool> pool_;
  std::unique_ptr<wort::Index> idx_;
  size_t key_size_, value_size_;
};

const char* Env(const char* name, const char* dflt) {
  const char* v = std::getenv(name);
  return v && *v ? v : dflt;
}

}  // namespace

extern "C" tree_api* create_tree(const tree_options_t& opt) {
  const std::string kind = Env("WORT_PIBENCH_INDEX", "woart");
  const std::string root = Env("WORT_PIBENCH_ROOT", "pibench");
  const std::string path = opt.pool_path.empty() ? "/dev/shm/wort-pibench.pool" : opt.pool_path;
  const bool reuse = std::string(Env("WORT_PIBENCH_REUSE_POOL", "0")) == "1";
  wort::PoolOptions po;
  po.max_size = opt.pool_size ? opt.pool_size : (16ull << 30);
  po.initial_size = std::min<uint64_t>(po.max_size / 2, 256ull << 20);
  std::unique_ptr<wort::Pool> pool;
  wort::Status s;
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  if (existed && !reuse) {
    // Remove only what is a wort pool: open it read-only first.
    wort::PoolOptions ro;
    ro.read_only = true;
    ro.background_recovery = false;
    std::unique_ptr<wort::Pool> old;
    s = wort::Pool::Open(path, ro, &old);
    if (!s.ok()) {
      std::fprintf(stderr, "wort_pibench: %s exists and is not a wort pool (%s); not removing it\n", path.c_str(),
                   s.ToString().c_str());
      return nullptr;
    }
    old.reset();
    std::filesystem::remove(path, ec);
    if (ec) {
      std::fprintf(stderr, "wort_pibench: cannot remove the old pool %s: %s\n", path.c_str(), ec.message().c_str());
      return nullptr;
    }
    std::fprintf(stderr, "wort_pibench: removed the existing pool %s; starting from a fresh one "
                 "(WORT_PIBENCH_REUSE_POOL=1 reopens it instead)\n", path.c_str());
  }
  s = wort::Pool::OpenOrCreate(path, po, &pool);
  if (!s.ok()) {
    std::fprintf(stderr, "wort_pibench: pool %s: %s\n", path.c_str(), s.ToString().c_str());
    return nullptr;
  }
  wort::IndexOptions io;
  io.key_type = opt.key_size == 8 ? wort::KeyType::kU64 : wort::KeyType::kBytes;
  io.values_are_blocks = opt.value_size > 8;
  if (opt.key_size == 0 || opt.key_size > wort::kMaxKeyLen) {
    std::fprintf(stderr, "wort_pibench: key_size %zu not supported (1..%zu)\n", opt.key_size, wort::kMaxKeyLen);
    return nullptr;
  }
  std::unique_ptr<wort::Index> idx;
  s = wort::OpenOrCreateIndex(*pool, root, kind, io, &idx);
  if (!s.ok()) {
    std::fprintf(stderr, "wort_pibench: index %s: %s\n", kind.c_str(), s.ToString().c_str());
    return nullptr;
  }
  if (existed && reuse)
    std::fprintf(stderr, "wort_pibench: REOPENED the existing pool %s: index %s already holds %llu keys\n",
                 path.c_str(), kind.c_str(), static_cast<unsigned long long>(idx->Size()));
  std::fprintf(stderr, "wort_pibench: index %s in %s (flush %s)\n", kind.c_str(), path.c_str(),
               wort::pm::FlushKindName(wort::pm::GetFlushKind()));
  return new WortTree(std::move(pool), std::move(idx), opt.key_size, opt.value_size);
}
