// The kNN tree's root, publication, open, drop, check and the post-crash GC's visit
// (layout.h: invariants K1-K3 and the order of persistent writes).
#include <atomic>
#include <cmath>
#include <cstring>

#include "index/kind_ids.h"
#include "index/registry.h"
#include "index/root_block.h"
#include "knn/internal.h"
#include "util/crc32c.h"
#include "wort/alloc.h"
#include "wort/pm.h"

namespace wort::knn {

uint64_t HeaderCrc(const TreeHeader& h);

const char* BuildMethodName(BuildMethod m) { return m == BuildMethod::kHilbert ? "hilbert" : "kmeans"; }
const char* EngineName(Engine e) {
  switch (e) {
    case Engine::kBruteForce: return "brute";
    case Engine::kBranchAndBound: return "bnb";
    case Engine::kPsb: return "psb";
  }
  return "?";
}
const char* DeviceName(Device d) { return d == Device::kGpu ? "gpu" : "cpu"; }
bool ParseBuildMethod(std::string_view s, BuildMethod* out) {
  if (s == "hilbert") *out = BuildMethod::kHilbert;
  else if (s == "kmeans" || s == "k-means") *out = BuildMethod::kKMeans;
  else return false;
  return true;
}
bool ParseEngine(std::string_view s, Engine* out) {
  if (s == "brute" || s == "brute-force") *out = Engine::kBruteForce;
  else if (s == "bnb" || s == "branch-and-bound") *out = Engine::kBranchAndBound;
  else if (s == "psb") *out = Engine::kPsb;
  else return false;
  return true;
}
bool ParseDevice(std::string_view s, Device* out) {
  if (s == "cpu") *out = Device::kCpu;
  else if (s == "gpu") *out = Device::kGpu;
  else return false;
  return true;
}

namespace {

constexpr const char* kKind = "knn";

// The root block of `name`, checked: NotFound, or Corruption/InvalidArgument for another kind.
Status FindKnnRoot(const Pool& pool, std::string_view name, uint64_t* root_off) {
  RootInfo ri;
  Status s = pool.FindRoot(name, &ri);
  if (!s.ok()) return s.IsNotFound() ? Status::NotFound("knn: no tree named '" + std::string(name) + "'") : s;
  if (ri.type != kind_id::kKnn)
    return Status::InvalidArgument("knn: root '" + std::string(name) + "' holds another kind (type id " +
                                   std::to_string(ri.type) + "), not a kNN tree");
  WORT_RETURN_IF_ERROR(CheckRootBlockPlace(pool, ri.off, sizeof(RootBlock), kKind));
  if (pool.at<RootBlock>(ri.off)->magic != kRootMagic) return Status::Corruption("knn: bad root block magic");
  *root_off = ri.off;
  return Status::OK();
}

uint64_t LoadTree(const Pool& pool, uint64_t root_off) {
  return std::atomic_ref<uint64_t>(pool.at<RootBlock>(root_off)->tree).load(std::memory_order_acquire);
}

// The header at tree_off, checked in constant time: place, magic, version, CRC, the geometry
// recomputed from (points, degree), every array inside the pool. Fills the view and info.
Status CheckHeader(const Pool& pool, uint64_t tree_off, TreeView* v, TreeInfo* info) {
  if (!HeapBlockOk(pool, tree_off, sizeof(TreeHeader)))
    return Status::Corruption("knn: tree header offset " + std::to_string(tree_off) + " outside the pool");
  const TreeHeader& h = *pool.at<TreeHeader>(tree_off);
  if (h.magic != kTreeMagic) return Status::Corruption("knn: bad tree header magic");
  if (h.version != kLayoutVersion)
    return Status::Corruption("knn: tree layout version " + std::to_string(h.version) + ", this build reads " +
                              std::to_string(kLayoutVersion));
  if (h.header_crc != HeaderCrc(h)) return Status::Corruption("knn: tree header checksum mismatch");
  if (h.dim == 0 || h.dim > kMaxDim || h.degree < kMinDegree || h.degree > kMaxDegree || h.points == 0 ||
      (h.method != static_cast<uint32_t>(BuildMethod::kHilbert) && h.method != static_cast<uint32_t>(BuildMethod::kKMeans)))
    return Status::Corruption("knn: tree header geometry out of range");
  // The geometry is a function of (points, degree).
  uint64_t below = (h.points + h.degree - 1) / h.degree, inner = 0;
  uint32_t height = 0;
  if (below != h.leaves) return Status::Corruption("knn: leaf count does not match the point count");
  do {
    if (height >= kMaxLevels || h.level_start[height] != inner) return Status::Corruption("knn: bad level table");
    below = (below + h.degree - 1) / h.degree;
    inner += below;
    ++height;
  } while (below > 1);
  if (height != h.height || inner != h.inner || h.level_start[height] != inner)
    return Status::Corruption("knn: inner node count does not match the leaf count");
  struct Arr {
    uint64_t off, bytes;
    const char* what;
  } arrs[] = {{h.off_leaf_points, LeafPointsBytes(h.leaves, h.dim, h.degree), "leaf points"},
              {h.off_leaf_ids, LeafIdsBytes(h.leaves, h.degree), "leaf ids"},
              {h.off_leaf_meta, h.leaves * sizeof(LeafMeta), "leaf links"},
              {h.off_inner_spheres, InnerSpheresBytes(h.inner, h.dim, h.degree), "inner spheres"},
              {h.off_inner_meta, h.inner * sizeof(InnerMeta), "inner links"}};
  for (const Arr& a : arrs)
    if (!HeapBlockOk(pool, a.off, a.bytes)) return Status::Corruption(std::string("knn: ") + a.what + " outside the pool");
  v->dim = h.dim;
  v->degree = h.degree;
  v->points = h.points;
  v->leaves = h.leaves;
  v->inner = h.inner;
  v->root = static_cast<uint32_t>(h.inner - 1);
  v->leaf_points = pool.at<float>(h.off_leaf_points);
  v->leaf_ids = pool.at<uint64_t>(h.off_leaf_ids);
  v->leaf_meta = pool.at<LeafMeta>(h.off_leaf_meta);
  v->inner_spheres = pool.at<float>(h.off_inner_spheres);
  v->inner_meta = pool.at<InnerMeta>(h.off_inner_meta);
  info->dim = h.dim;
  info->degree = h.degree;
  info->points = h.points;
  info->leaves = h.leaves;
  info->inner_nodes = h.inner;
  info->height = h.height;
  info->method = static_cast<BuildMethod>(h.method);
  info->seed = h.seed;
  info->bytes = sizeof(TreeHeader);
  for (const Arr& a : arrs) info->bytes += a.bytes;
  return Status::OK();
}

// Frees the blocks of the tree at tree_off (header last). REQUIRES: no persistent reference to
// it remains (R2).
void FreeTree(Pool& pool, uint64_t tree_off) {
  TreeView v;
  TreeInfo info;
  Allocator& a = pool.allocator();
  if (CheckHeader(pool, tree_off, &v, &info).ok()) {
    const TreeHeader& h = *pool.at<TreeHeader>(tree_off);
    for (uint64_t off : {h.off_leaf_points, h.off_leaf_ids, h.off_leaf_meta, h.off_inner_spheres, h.off_inner_meta})
      a.Free(off);
  }
  if (HeapBlockOk(pool, tree_off, sizeof(TreeHeader))) a.Free(tree_off);
}

}  // namespace

Status ClaimForBuild(Pool& pool, std::string_view name, std::shared_ptr<void>* claim) {
  uint64_t root_off = 0;
  Status s = FindKnnRoot(pool, name, &root_off);
  if (s.IsNotFound()) return Status::OK();
  if (!s.ok()) return s;
  return ClaimSoleHandle(&pool, root_off, "kNN tree", claim);
}

Status PublishTree(Pool& pool, std::string_view name, uint64_t tree_off) {
  uint64_t root_off = 0;
  Status s = FindKnnRoot(pool, name, &root_off);
  if (s.ok()) {
    RootBlock* rb = pool.at<RootBlock>(root_off);
    const uint64_t old = LoadTree(pool, root_off);
    // The commit point: one 8-byte store names the new tree (K1), persisted before the old
    // tree's blocks are freed (R2).
    std::atomic_ref<uint64_t>(rb->tree).store(tree_off, std::memory_order_release);
    pm::persist(&rb->tree, sizeof(rb->tree));
    if (old != 0 && old != tree_off) FreeTree(pool, old);
    return Status::OK();
  }
  if (!s.IsNotFound()) return s;
  // A new name: the root block, persisted, then the pool's root entry (its own commit point).
  uint64_t off = 0;
  s = pool.allocator().Alloc(sizeof(RootBlock), &off);
  if (!s.ok()) return Status::PoolFull("knn: no room for the root block: " + s.message());
  RootBlock* rb = pool.at<RootBlock>(off);
  std::memset(rb, 0, sizeof(RootBlock));
  rb->magic = kRootMagic;
  rb->tree = tree_off;
  pm::persist(rb, sizeof(RootBlock));
  s = pool.AddRoot(name, kind_id::kKnn, off);
  if (!s.ok()) {
    pool.allocator().Free(off);
    return s;
  }
  return Status::OK();
}

void VisitRoot(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark) {
  if (!HeapBlockOk(pool, root_off, sizeof(RootBlock))) return;
  mark(root_off);
  const uint64_t tree = LoadTree(pool, root_off);
  TreeView v;
  TreeInfo info;
  if (tree == 0 || !CheckHeader(pool, tree, &v, &info).ok()) return;
  mark(tree);
  const TreeHeader& h = *pool.at<TreeHeader>(tree);
  for (uint64_t off : {h.off_leaf_points, h.off_leaf_ids, h.off_leaf_meta, h.off_inner_spheres, h.off_inner_meta})
    mark(off);
}

KnnIndex::KnnIndex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KnnIndex::~KnnIndex() = default;
const TreeInfo& KnnIndex::info() const { return impl_->info; }

Status KnnIndex::Open(Pool& pool, std::string_view name, std::unique_ptr<KnnIndex>* out) {
  auto impl = std::make_unique<Impl>();
  WORT_RETURN_IF_ERROR(FindKnnRoot(pool, name, &impl->root_off));
  WORT_RETURN_IF_ERROR(ClaimSoleHandle(&pool, impl->root_off, "kNN tree", &impl->claim));
  impl->tree_off = LoadTree(pool, impl->root_off);
  if (impl->tree_off == 0) return Status::Corruption("knn: root '" + std::string(name) + "' names no tree");
  WORT_RETURN_IF_ERROR(CheckHeader(pool, impl->tree_off, &impl->view, &impl->info));
  impl->pool = &pool;
  impl->name = std::string(name);
  out->reset(new KnnIndex(std::move(impl)));
  return Status::OK();
}

Status KnnIndex::Drop(Pool& pool, std::string_view name) {
  if (pool.read_only()) return Status::InvalidArgument("knn drop: the pool is open read-only");
  uint64_t root_off = 0;
  WORT_RETURN_IF_ERROR(FindKnnRoot(pool, name, &root_off));
  std::shared_ptr<void> claim;
  WORT_RETURN_IF_ERROR(ClaimSoleHandle(&pool, root_off, "kNN tree", &claim));
  const uint64_t tree = LoadTree(pool, root_off);
  WORT_RETURN_IF_ERROR(pool.RemoveRoot(name));  // persistent unpublish (R2), then the frees
  if (tree) FreeTree(pool, tree);
  pool.allocator().Free(root_off);
  return Status::OK();
}

Status KnnIndex::Check(std::string* report) const {
  const Pool& pool = *impl_->pool;
  const TreeView& v = impl_->view;
  const TreeHeader& h = *pool.at<TreeHeader>(impl_->tree_off);
  size_t bad = 0;
  auto fail = [&](const std::string& what) {
    if (bad++ < 20 && report) *report += "knn: " + what + "\n";
  };
  if (h.header_crc != HeaderCrc(h)) fail("tree header checksum mismatch");
  struct Arr {
    const void* p;
    uint64_t bytes, crc;
    const char* what;
  } arrs[] = {{v.leaf_points, LeafPointsBytes(v.leaves, v.dim, v.degree), h.crc_leaf_points, "leaf points"},
              {v.leaf_ids, LeafIdsBytes(v.leaves, v.degree), h.crc_leaf_ids, "leaf ids"},
              {v.leaf_meta, v.leaves * sizeof(LeafMeta), h.crc_leaf_meta, "leaf links"},
              {v.inner_spheres, InnerSpheresBytes(v.inner, v.dim, v.degree), h.crc_inner_spheres, "inner spheres"},
              {v.inner_meta, v.inner * sizeof(InnerMeta), h.crc_inner_meta, "inner links"}};
  for (const Arr& a : arrs)
    if (Crc64(a.p, a.bytes) != a.crc) fail(std::string(a.what) + " checksum mismatch");
  if (bad) return Status::Corruption("knn: " + std::to_string(bad) + " problem(s) found");
  // K3: links. K2: containment (in double, around each stored float center).
  for (uint64_t l = 0; l < v.leaves; ++l) {
    const LeafMeta& m = v.leaf_meta[l];
    const uint64_t want = std::min<uint64_t>(v.degree, v.points - l * v.degree);
    if (m.count != want) fail("leaf " + std::to_string(l) + " count " + std::to_string(m.count));
    if (m.parent >= v.inner || v.inner_meta[m.parent].level != 0 || l < v.inner_meta[m.parent].first_child ||
        l >= uint64_t{v.inner_meta[m.parent].first_child} + v.inner_meta[m.parent].count)
      fail("leaf " + std::to_string(l) + " parent link");
  }
  if (bad) return Status::Corruption("knn: " + std::to_string(bad) + " problem(s) found");
  for (uint64_t i = 0; i < v.inner; ++i) {
    const InnerMeta& m = v.inner_meta[i];
    const bool root = i == v.root;
    if ((m.parent == kNoParent) != root || m.count == 0 || m.count > v.degree) {
      fail("inner node " + std::to_string(i) + " parent or count");
      continue;
    }
    const uint64_t nchildren = m.level == 0 ? v.leaves : v.inner;
    if (uint64_t{m.first_child} + m.count > nchildren) {
      fail("inner node " + std::to_string(i) + " children out of range");
      continue;
    }
    for (uint32_t j = 0; j < m.count; ++j) {
      const uint64_t c = m.first_child + j;
      const double r = v.Radii(i)[j];
      auto dist_to_center = [&](auto coord) {
        double s = 0;
        for (uint32_t d = 0; d < v.dim; ++d) {
          const double t = double(coord(d)) - v.SphereRow(i, d)[j];
          s += t * t;
        }
        return std::sqrt(s);
      };
      if (m.level == 0) {
        if (v.leaf_meta[c].parent != i) fail("leaf " + std::to_string(c) + " parent link");
        for (uint32_t p = 0; p < v.leaf_meta[c].count; ++p)
          if (dist_to_center([&](uint32_t d) { return v.LeafRow(c, d)[p]; }) > r)
            fail("point " + std::to_string(p) + " of leaf " + std::to_string(c) + " outside its sphere");
      } else {
        const InnerMeta& cm = v.inner_meta[c];
        if (cm.parent != i || cm.level + 1 != m.level) fail("inner node " + std::to_string(c) + " parent link");
        for (uint32_t q = 0; q < cm.count; ++q)
          if (dist_to_center([&](uint32_t d) { return v.SphereRow(c, d)[q]; }) + v.Radii(c)[q] > r)
            fail("child " + std::to_string(q) + " of inner node " + std::to_string(c) + " outside its sphere");
      }
    }
    const uint32_t fl = m.level == 0 ? m.first_child : v.inner_meta[m.first_child].first_leaf;
    const uint32_t ll = m.level == 0 ? m.first_child + m.count - 1 : v.inner_meta[m.first_child + m.count - 1].last_leaf;
    if (m.first_leaf != fl || m.last_leaf != ll) fail("inner node " + std::to_string(i) + " leaf range");
  }
  if (v.inner_meta[v.root].first_leaf != 0 || v.inner_meta[v.root].last_leaf + 1 != v.leaves)
    fail("the root does not span every leaf");
  if (bad) return Status::Corruption("knn: " + std::to_string(bad) + " problem(s) found");
  return Status::OK();
}

bool GpuAvailable(std::string* why) { return gpu::Available(why); }

}  // namespace wort::knn
