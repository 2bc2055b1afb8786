// Registry of index kinds and the pool-level create/open helpers.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <shared_mutex>
#include <memory>
#include <map>

#include "index/registry.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pool.h"

namespace wort {

namespace {
std::vector<const IndexKind*>& Kinds() {
  static std::vector<const IndexKind*> v;
  return v;
}
}  // namespace

bool RegisterIndexKind(const IndexKind* k) {
  for (const IndexKind* o : Kinds()) {
    if (o->type_id == k->type_id || std::string_view(o->name) == k->name) {
      std::fprintf(stderr, "wort: duplicate index kind %s (id %u)\n", k->name, k->type_id);
      std::abort();
    }
  }
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

// ---- per-index locks (registry.h) ----------------------------------------------------------
namespace {
struct LockRegistry {
  std::mutex mu;
  std::map<std::pair<const void*, uint64_t>, std::weak_ptr<std::shared_mutex>> locks;
};
LockRegistry& LockRegistryInstance() {
  static LockRegistry* r = new LockRegistry;  // never destroyed: used from static destructors
  return *r;
}
}  // namespace

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
  LockRegistry& r = LockRegistryInstance();
  std::lock_guard<std::mutex> g(r.mu);
  // Drop expired entries now and then so the map stays small.
  if (r.locks.size() > 64) {
    for (auto it = r.locks.begin(); it != r.locks.end();) it = it->second.expired() ? r.locks.erase(it) : std::next(it);
  }
  auto& w = r.locks[{pool->base(), root_off}];
  if (auto sp = w.lock()) return sp;
  auto sp = std::make_shared<std::shared_mutex>();
  w = sp;
  return sp;
}

}  // namespace wort
