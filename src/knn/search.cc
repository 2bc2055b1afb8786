// The CPU search engines (wort/knn.h): brute force, stackless branch-and-bound and PSB (thesis
// Algorithm 5), one query at a time per thread. src/knn/gpu.cu runs the same steps as CUDA
// kernels; both compute every distance with the helpers' operations in the same order.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

#include "knn/internal.h"

namespace wort::knn {

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
}

void LeafDistances(const TreeView& v, uint64_t leaf, uint32_t count, const float* q, float* out) {
  for (uint32_t j = 0; j < count; ++j) out[j] = 0.0f;
  for (uint32_t d = 0; d < v.dim; ++d) {
    const float* row = v.LeafRow(leaf, d);
    const float qd = q[d];
    for (uint32_t j = 0; j < count; ++j) {
      const float t = row[j] - qd;
      out[j] = out[j] + t * t;
    }
  }
}

void ChildBounds(const TreeView& v, uint64_t node, uint32_t count, const float* q, float* mind, float* maxd) {
  for (uint32_t j = 0; j < count; ++j) mind[j] = 0.0f;
  for (uint32_t d = 0; d < v.dim; ++d) {
    const float* row = v.SphereRow(node, d);
    const float qd = q[d];
    for (uint32_t j = 0; j < count; ++j) {
      const float t = row[j] - qd;
      mind[j] = mind[j] + t * t;
    }
  }
  const float* rad = v.Radii(node);
  for (uint32_t j = 0; j < count; ++j) {
    const float dist = std::sqrt(mind[j]);
    mind[j] = MinDist(dist, rad[j]);
    maxd[j] = MaxDist(dist, rad[j]);
  }
}

float KBest::Worst() const { return n_ == k_ ? d_[k_ - 1] : kInf; }

bool KBest::Offer(float d, uint64_t id) {
  if (n_ == k_ && !(d < d_[k_ - 1] || (d == d_[k_ - 1] && id < id_[k_ - 1]))) return false;
  uint32_t i = n_ == k_ ? k_ - 1 : n_++;
  while (i > 0 && (d < d_[i - 1] || (d == d_[i - 1] && id < id_[i - 1]))) {
    d_[i] = d_[i - 1];
    id_[i] = id_[i - 1];
    --i;
  }
  d_[i] = d;
  id_[i] = id;
  return true;
}

void KBest::CopyOut(uint64_t* ids, float* dists) const {
  for (uint32_t i = 0; i < n_; ++i) {
    ids[i] = id_[i];
    dists[i] = d_[i];
  }
}

float KthMaxDist(const float* maxd, const uint64_t* below, uint32_t count, uint32_t k, std::vector<uint32_t>* tmp) {
  // Children sorted by MAXDIST; ties in either order give the same m.
  std::vector<uint32_t>& idx = *tmp;
  idx.resize(count);
  for (uint32_t j = 0; j < count; ++j) idx[j] = j;
  std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return maxd[a] < maxd[b] || (maxd[a] == maxd[b] && a < b); });
  uint64_t acc = 0;
  for (uint32_t i = 0; i < count; ++i) {
    acc += below[idx[i]];
    if (acc >= k) return maxd[idx[i]];
  }
  return kInf;
}

QueryScratch::QueryScratch(const TreeView& v, uint32_t k)
    : best(k), mind(v.degree), maxd(v.degree), dist(v.degree), below(v.degree) {}

namespace {

struct Walk {
  const TreeView& v;
  const float* q;
  uint32_t k;
  QueryScratch& s;
  Counters& c;
  float prune = kInf;

  // The inner node whose children's bounds are in s.mind/s.maxd (kNoParent: none yet).
  uint64_t bounds_of = kNoParent;

  // Bounds of node's children into s.mind/s.maxd; the pruning distance tightened by the k-th
  // MINMAXDIST (weighted by points below each child). A node whose bounds are still there (the
  // walk came back to it from a leaf) is not computed again: not a visit, and nothing to tighten
  // (the same bound was applied when they were computed).
  void VisitInner(uint64_t node) {
    if (node == bounds_of) return;
    bounds_of = node;
    const InnerMeta& m = v.inner_meta[node];
    ChildBounds(v, node, m.count, q, s.mind.data(), s.maxd.data());
    ++c.inner_visits;
    c.sphere_bytes += uint64_t{m.count} * (v.dim + 1) * sizeof(float);
    for (uint32_t j = 0; j < m.count; ++j) s.below[j] = PointsBelow(v, node, j);
    prune = std::min(prune, KthMaxDist(s.maxd.data(), s.below.data(), m.count, k, &s.tmp));
  }
  // The order of children in the descent: (MINDIST, MAXDIST, position) ascending.
  bool Before(uint32_t a, uint32_t b) const {
    if (s.mind[a] != s.mind[b]) return s.mind[a] < s.mind[b];
    if (s.maxd[a] != s.maxd[b]) return s.maxd[a] < s.maxd[b];
    return a < b;
  }
  // Compares the leaf's points; true iff the k nearest changed.
  bool ScanLeaf(uint64_t leaf) {
    const uint32_t count = v.leaf_meta[leaf].count;
    LeafDistances(v, leaf, count, q, s.dist.data());
    ++c.leaf_visits;
    c.point_bytes += uint64_t{count} * v.dim * sizeof(float);
    const uint64_t* ids = v.LeafIds(leaf);
    bool changed = false;
    for (uint32_t j = 0; j < count; ++j) changed |= s.best.Offer(s.dist[j], ids[j]);
    if (s.best.full()) prune = std::min(prune, std::sqrt(s.best.Worst()));
    return changed;
  }

  void BruteForce() {
    for (uint64_t l = 0; l < v.leaves; ++l) ScanLeaf(l);
  }

  // Depth-first branch-and-bound without a stack: children in Before order; a
  // return from an inner child recomputes the parent's bounds (a visit: the child's overwrote
  // them) and takes the next child after the one it came from; a return from a leaf keeps them.
  void BranchAndBound() {
    uint64_t n = v.root;
    int64_t from = -1;  // position of the child we came back from (-1: came from above)
    for (;;) {
      VisitInner(n);
      const InnerMeta& m = v.inner_meta[n];
      for (;;) {
        int64_t pick = -1;
        for (uint32_t j = 0; j < m.count; ++j) {
          if (!(s.mind[j] <= prune)) continue;
          if (from >= 0 && !Before(static_cast<uint32_t>(from), j)) continue;
          if (pick < 0 || Before(j, static_cast<uint32_t>(pick))) pick = j;
        }
        if (pick < 0) {
          if (n == v.root) return;
          from = static_cast<int64_t>(n) - v.inner_meta[m.parent].first_child;
          n = m.parent;
          break;
        }
        if (m.level == 0) {
          ScanLeaf(m.first_child + pick);
          from = pick;
          continue;
        }
        n = m.first_child + pick;
        from = -1;
        break;
      }
    }
  }

  // Parallel Scan and Backtrack (thesis Algorithm 5).
  void Psb() {
    // The first descent: toward the first child in Before order, to the closest leaf; its points set the
    // pruning distance. That leaf is not scanned again below (a rescan changes nothing).
    uint64_t n = v.root;
    uint64_t first_leaf;
    for (;;) {
      VisitInner(n);
      const InnerMeta& m = v.inner_meta[n];
      uint32_t best = 0;
      for (uint32_t j = 1; j < m.count; ++j)
        if (Before(j, best)) best = j;
      if (m.level == 0) {
        first_leaf = m.first_child + best;
        break;
      }
      n = m.first_child + best;
    }
    ScanLeaf(first_leaf);
    // The sweep: leaves left to right. `visited`: every leaf up to it is scanned or pruned. A
    // return from leaves to the inner node whose bounds are kept finds them there (VisitInner).
    int64_t visited = -1;
    n = v.root;
    for (;;) {
      VisitInner(n);
      const InnerMeta& m = v.inner_meta[n];
      int64_t pick = -1;
      for (uint32_t j = 0; j < m.count; ++j) {
        const int64_t last = m.level == 0 ? m.first_child + j : v.inner_meta[m.first_child + j].last_leaf;
        if (last <= visited) continue;
        if (s.mind[j] <= prune) {
          pick = j;
          break;
        }
      }
      if (pick < 0) {  // backtrack: nothing left below n within the pruning distance
        visited = std::max<int64_t>(visited, m.last_leaf);
        if (n == v.root) return;
        n = m.parent;
        continue;
      }
      const uint64_t child = m.first_child + pick;
      const int64_t first = m.level == 0 ? static_cast<int64_t>(child) : v.inner_meta[child].first_leaf;
      visited = std::max(visited, first - 1);  // the children left of it are pruned
      if (m.level > 0) {
        n = child;
        continue;
      }
      // Scan: the leaf, then its right siblings while each changes the k nearest.
      uint64_t leaf = child;
      for (;;) {
        const bool changed = leaf != first_leaf && ScanLeaf(leaf);
        visited = static_cast<int64_t>(leaf);
        if (!changed || leaf + 1 == v.leaves) break;
        ++leaf;
      }
      n = v.leaf_meta[leaf].parent;
    }
  }
};

}  // namespace

void SearchOneCpu(const TreeView& v, Engine e, const float* q, uint32_t k, QueryScratch* s, Counters* c) {
  s->best.Reset();
  Walk w{v, q, k, *s, *c};
  switch (e) {
    case Engine::kBruteForce: w.BruteForce(); break;
    case Engine::kBranchAndBound: w.BranchAndBound(); break;
    case Engine::kPsb: w.Psb(); break;
  }
  ++c->queries;
}

Status KnnIndex::Search(const float* queries, uint64_t nq, uint32_t k, const SearchOptions& opts, uint64_t* ids,
                        float* dists, Counters* counters) const {
  const TreeView& v = impl_->view;
  if (k == 0 || k > v.points)
    return Status::InvalidArgument("knn search: k = " + std::to_string(k) + " outside [1, " + std::to_string(v.points) +
                                   "] (the tree's points)");
  if (opts.engine != Engine::kBruteForce && opts.engine != Engine::kBranchAndBound && opts.engine != Engine::kPsb)
    return Status::InvalidArgument("knn search: unknown engine");
  if (nq == 0) {
    if (counters) *counters = Counters{};
    return Status::OK();
  }
  if (!queries || !ids || !dists) return Status::InvalidArgument("knn search: null query or output array");
  for (uint64_t i = 0; i < nq * v.dim; ++i)
    if (!std::isfinite(queries[i]))
      return Status::InvalidArgument("knn search: query " + std::to_string(i / v.dim) + " has a non-finite coordinate (" +
                                     std::to_string(i % v.dim) + ")");
  if (opts.device == Device::kGpu) return gpu::Search(*impl_, queries, nq, k, opts.engine, ids, dists, counters);
  if (opts.device != Device::kCpu) return Status::InvalidArgument("knn search: unknown device");
  const unsigned threads = ThreadsFor(opts.threads, nq);
  std::vector<Counters> per(threads);
  std::atomic<uint64_t> next{0};
  // Each thread counts on its own stack and writes per[t] once at its end: the elements of `per`
  // share cache lines, which every visit's increments would otherwise bounce between cores.
  auto worker = [&](unsigned t) {
    QueryScratch s(v, k);
    Counters mine;
    for (;;) {
      const uint64_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= nq) break;
      SearchOneCpu(v, opts.engine, queries + i * v.dim, k, &s, &mine);
      s.best.CopyOut(ids + i * k, dists + i * k);
    }
    per[t] = mine;
  };
  if (threads == 1) {
    worker(0);
  } else {
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t) ts.emplace_back(worker, t);
    for (auto& t : ts) t.join();
  }
  if (counters) {
    Counters sum;
    for (const Counters& c : per) {
      sum.queries += c.queries;
      sum.inner_visits += c.inner_visits;
      sum.leaf_visits += c.leaf_visits;
      sum.sphere_bytes += c.sphere_bytes;
      sum.point_bytes += c.point_bytes;
    }
    *counters = sum;
  }
  return Status::OK();
}

}  // namespace wort::knn
