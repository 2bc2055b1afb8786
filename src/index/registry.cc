// Registry of index kinds and the pool-level create/open helpers.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <shared_mutex>
#include <memory>
#include <map>
#include <vector>

#include "index/registry.h"
#include "index/kind_ids.h"
#include "knn/internal.h"
#include "kv/batch_log.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pool.h"

namespace wort {

// Each IndexKind must be constant-initialised (constants only, or constinit): the table may be
// read during another file's static initialisation (a test that adds its own kinds).
const std::vector<const IndexKind*>& BuiltinIndexKinds() {
  namespace b = builtin_kinds;
  static const std::vector<const IndexKind*> v = {
      b::B3Tree(), b::FastFair(), b::FpTree(),  b::NvTree(), b::WbTree(), b::WbTreeSlot(), b::Cceh(),
      b::CcehCow(), b::Linp(),    b::Cuck(),    b::Bch(),    b::Levl(),   b::Path(),       b::ArtCow(),
      b::Woart(),  b::Roart(),  b::Wort(),     b::Vart(),    b::VbpTree(), b::Vradix(),
  };
  return v;
}

namespace {
void CheckUnique(const std::vector<const IndexKind*>& kinds, const IndexKind* k) {
  for (const IndexKind* o : kinds) {
    if (o->type_id == k->type_id || std::string_view(o->name) == k->name) {
      std::fprintf(stderr, "wort: duplicate index kind %s (id %u)\n", k->name, k->type_id);
      std::abort();
    }
  }
}
// The built-in kinds followed by those added with RegisterIndexKind (which must happen before
// the kinds are used from several threads: at a test's start).
std::vector<const IndexKind*>& Kinds() {
  static std::vector<const IndexKind*> v = [] {
    std::vector<const IndexKind*> all;
    for (const IndexKind* k : BuiltinIndexKinds()) {
      CheckUnique(all, k);  // a name or type id listed twice in the table: a programming error
      all.push_back(k);
    }
    return all;
  }();
  return v;
}

// The post-crash GC (src/alloc) finds each root's visit function through this lookup; the
// pool and allocator below this layer know nothing of index kinds (wort/pool.h).
// Visit functions of roots that are not index kinds (RegisterRootVisitor).
std::mutex g_extra_mu;
std::map<uint32_t, RootVisitFn>& ExtraVisitors() {
  static std::map<uint32_t, RootVisitFn> m;
  return m;
}
RootVisitFn VisitorOf(uint32_t type_id) {
  const IndexKind* k = FindIndexKindById(type_id);
  if (k) return k->visit;
  if (type_id == kind_id::kKnn) return &knn::VisitRoot;  // same layer: no registration needed
  if (type_id == kind_id::kKvBatch) return &kv::VisitBatchLog;  // a key-value store's batch log
  std::lock_guard<std::mutex> g(g_extra_mu);
  auto it = ExtraVisitors().find(type_id);
  return it == ExtraVisitors().end() ? nullptr : it->second;
}
// Installed when this file is linked in, i.e. in every program that can open an index (every
// kind-lookup entry point is here). A program of the pmem layer alone has no visitors: the GC
// then reports that it cannot visit the roots' kinds, as for a kind unknown to this build.
[[maybe_unused]] const bool kVisitorsInstalled = (SetRootVisitorLookup(&VisitorOf), true);
}  // namespace

bool RegisterRootVisitor(uint32_t type_id, RootVisitFn visit) {
  std::lock_guard<std::mutex> g(g_extra_mu);
  ExtraVisitors()[type_id] = visit;
  return true;
}

bool RegisterIndexKind(const IndexKind* k) {
  CheckUnique(Kinds(), k);
  Kinds().push_back(k);
  return true;
}

const std::vector<const IndexKind*>& IndexKinds() { return Kinds(); }

const IndexKind* FindIndexKind(std::string_view name) {
  for (const IndexKind* k : Kinds())
    if (name == k->name) return k;
  return nullptr;
}

const IndexKind* FindIndexKindById(uint32_t type_id) {
  for (const IndexKind* k : Kinds())
    if (k->type_id == type_id) return k;
  return nullptr;
}

static std::string KindList() {
  std::string s;
  for (const IndexKind* k : Kinds()) s += (s.empty() ? "" : ", ") + std::string(k->name);
  return s;
}

Status CreateIndex(Pool& pool, std::string_view name, std::string_view kind, const IndexOptions& opts,
                   std::unique_ptr<Index>* out) {
  const IndexKind* k = FindIndexKind(kind);
  if (!k) return Status::InvalidArgument("unknown index kind '" + std::string(kind) + "' (known: " + KindList() + ")");
  if (pool.FindRoot(name, nullptr).ok()) return Status::AlreadyExists("root '" + std::string(name) + "' exists");
  uint64_t root = 0;
  WORT_RETURN_IF_ERROR(k->create(pool, opts, &root));
  // The root block is persistent; publishing the root entry is the commit point. A crash before
  // it leaves an unreachable block, which recovery reclaims.
  Status s = pool.AddRoot(name, k->type_id, root);
  if (!s.ok()) {
    // Not published: nothing refers to the index's blocks. Free what visit reaches.
    std::vector<uint64_t> blocks;
    k->visit(pool, root, [&](uint64_t off) { blocks.push_back(off); });
    for (uint64_t b : blocks) pool.allocator().Free(b);
    return s;
  }
  return k->open(pool, root, out);
}

Status OpenIndex(Pool& pool, std::string_view name, std::unique_ptr<Index>* out) {
  RootInfo ri;
  WORT_RETURN_IF_ERROR(pool.FindRoot(name, &ri));
  const IndexKind* k = FindIndexKindById(ri.type);
  if (!k)
    return Status::NotSupported("root '" + std::string(name) + "' holds an index of kind id " +
                                std::to_string(ri.type) + ", which this build does not know");
  return k->open(pool, ri.off, out);
}

Status OpenOrCreateIndex(Pool& pool, std::string_view name, std::string_view kind, const IndexOptions& opts,
                         std::unique_ptr<Index>* out) {
  if (pool.FindRoot(name, nullptr).ok()) {
    WORT_RETURN_IF_ERROR(OpenIndex(pool, name, out));
    if ((*out)->kind() != kind)
      return Status::InvalidArgument("root '" + std::string(name) + "' holds a " + std::string((*out)->kind()) +
                                     " index, not " + std::string(kind));
    return Status::OK();
  }
  return CreateIndex(pool, name, kind, opts, out);
}

// ---- per-index DRAM objects: locks and sole-handle claims (registry.h) ---------------------
namespace {
// Objects kept per index of this process, keyed by (pool mapping, root offset), held weakly: an
// entry lives while someone holds its object. Never destroyed: used from static destructors.
template <class T>
struct PerIndex {
  std::mutex mu;
  std::map<std::pair<const void*, uint64_t>, std::weak_ptr<T>> m;
  // The entry of (pool, root_off), expired entries dropped now and then so the map stays small.
  // REQUIRES: mu held.
  std::weak_ptr<T>& At(const Pool* pool, uint64_t root_off) {
    if (m.size() > 64)
      for (auto it = m.begin(); it != m.end();) it = it->second.expired() ? m.erase(it) : std::next(it);
    return m[{pool->base(), root_off}];
  }
};
PerIndex<std::shared_mutex>& Locks() {
  static auto* r = new PerIndex<std::shared_mutex>;
  return *r;
}
PerIndex<char>& SoleHandles() {
  static auto* r = new PerIndex<char>;
  return *r;
}
}  // namespace

Status ClaimSoleHandle(const Pool* pool, uint64_t root_off, const char* kind, std::shared_ptr<void>* token) {
  PerIndex<char>& r = SoleHandles();
  std::lock_guard<std::mutex> g(r.mu);
  std::weak_ptr<char>& w = r.At(pool, root_off);
  if (!w.expired())
    return Status::Busy(std::string(kind) +
                        " index is already open in this process: a handle keeps part of the index in DRAM, which a "
                        "second handle would not share; use the open handle from every thread (or close it first)");
  auto t = std::make_shared<char>(0);
  w = t;
  *token = std::move(t);
  return Status::OK();
}

namespace {
std::atomic<bool>& GlobalLockFlag() {
  static std::atomic<bool> f{[] {
    const char* e = std::getenv("WORT_GLOBAL_LOCK");
    return e && *e && std::string_view(e) != "0";
  }()};
  return f;
}
}  // namespace

bool GlobalIndexLock() { return GlobalLockFlag().load(std::memory_order_relaxed); }
void SetGlobalIndexLock(bool on) { GlobalLockFlag().store(on); }

std::shared_ptr<std::shared_mutex> IndexLock(const Pool* pool, uint64_t root_off) {
  PerIndex<std::shared_mutex>& r = Locks();
  std::lock_guard<std::mutex> g(r.mu);
  auto& w = r.At(pool, root_off);
  if (auto sp = w.lock()) return sp;
  auto sp = std::make_shared<std::shared_mutex>();
  w = sp;
  return sp;
}

}  // namespace wort
