// NVTree: append-only persistent leaves, contiguous DRAM internal nodes (see nvtree.h).
#include "index/btree/nvtree.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "index/btree/btree_common.h"
#include "index/kind_ids.h"
#include "index/registry.h"

namespace wort::btree::nv {
namespace {

constexpr int kSlots = 32;
constexpr int kPln = 128;  // separators per PLN
constexpr uint64_t kRootMagic = 0x4545525456764e21ull;  // "!NvTREE"
constexpr uint64_t kOpInsert = 1, kOpDelete = 2;

struct RootBlock {
  uint64_t magic;
  uint32_t key_type;
  uint32_t flags;
  uint64_t head;  // first leaf (COMMIT word of the first leaf's replacement)
  uint64_t pad[5];
};
static_assert(sizeof(RootBlock) == 64);
BTREE_ROOT_HEADER_LAYOUT(RootBlock, head);

struct Entry {
  uint64_t key;
  uint64_t val;
  uint64_t op;
};
static_assert(sizeof(Entry) == 24);
struct alignas(64) Leaf {
  uint64_t count;  // entries [0, count) are valid (COMMIT word of appends)
  uint64_t next;   // next leaf (COMMIT word of the next leaf's replacement)
  uint64_t pad[6];
  Entry e[kSlots];
};
static_assert(sizeof(Leaf) == 832);
static_assert(offsetof(Leaf, e) == 64);

struct Pln {
  int n = 0;
  std::string keys[kPln];   // keys[i]: separator (low key) of leaves[i]
  uint64_t leaves[kPln];
};

class NvTree final : public TreeBase<RootBlock> {
 public:
  NvTree(Pool& pool, uint64_t root_off) : TreeBase(pool, root_off) {}

  Status Init();
  double rebuild_seconds() const { return rebuild_seconds_; }

  std::string_view kind() const override { return "nvtree"; }
  Status Insert(std::string_view key, uint64_t value) override { return Append(key, value, kOpInsert, false, nullptr); }
  Status Upsert(std::string_view key, uint64_t value, bool* inserted) override {
    return Append(key, value, kOpInsert, true, inserted);
  }
  Status Lookup(std::string_view key, uint64_t* value) const override;
  Status Remove(std::string_view key) override { return Append(key, 0, kOpDelete, false, nullptr); }
  Status Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const override;
  uint64_t Size() const override { return size_; }
  Status Check(std::string* report) const override;
  IndexStats Stats() const override;

  // Visit without taking the lock (the caller holds it; kKind.visit is VisitShared).
  static void VisitLocked(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark);
  // Live entries of a leaf: (key word, value), one per live key, in no particular order.
  static void Live(const Leaf* l, std::vector<std::pair<uint64_t, uint64_t>>* out);

 private:
  struct Pos {
    int p, i;
  };
  Leaf* L(uint64_t off) const { return pool_.at<Leaf>(off); }
  Pos Find(std::string_view key) const {
    // Last PLN whose first separator <= key, then the last separator <= key in it.
    int lo = 0, hi = static_cast<int>(first_.size());
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (CompareKeys(first_[mid], key) <= 0) lo = mid + 1;
      else hi = mid;
    }
    const int p = lo > 0 ? lo - 1 : 0;
    const Pln& pl = plns_[p];
    lo = 0;
    hi = pl.n;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (CompareKeys(pl.keys[mid], key) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return {p, lo > 0 ? lo - 1 : 0};
  }
  // The latest entry of the key in the leaf, or -1.
  int Latest(const Leaf* l, const Probe& pr) const {
    for (int j = static_cast<int>(Load(l->count)) - 1; j >= 0; --j)
      if (ko_.Compare(l->e[j].key, pr) == 0) return j;
    return -1;
  }
  // The 8-byte word that links to the leaf at pos (the predecessor's next or the head).
  uint64_t* LinkTo(Pos pos) {
    if (pos.i > 0) return &L(plns_[pos.p].leaves[pos.i - 1])->next;
    if (pos.p > 0) {
      const Pln& prev = plns_[pos.p - 1];
      return &L(prev.leaves[prev.n - 1])->next;
    }
    return &rb_->head;
  }
  Status Append(std::string_view key, uint64_t value, uint64_t op, bool replace, bool* inserted);
  Status Consolidate(Pos pos);
  // Re-lays all (separator, leaf) pairs into half-full PLNs in one new contiguous block.
  void Relayout(std::vector<std::pair<std::string, uint64_t>>&& all);
  void Rebuild();
  // Open's first step, before anything is written or rebuilt: every leaf of the chain lies
  // inside the pool, 64-byte aligned, with count <= kSlots, the chain ends (no cycle), and every
  // entry's key word names a key block. Corruption naming the first problem otherwise; after
  // it, Rebuild and the readers follow only what it checked.
  Status ValidateChain() const;

  std::vector<Pln> plns_;
  std::vector<std::string> first_;  // first separator of each PLN (the contiguous IN level)
  uint64_t size_ = 0;
  uint64_t relayouts_ = 0;
  double rebuild_seconds_ = 0;
};

void NvTree::Live(const Leaf* l, std::vector<std::pair<uint64_t, uint64_t>>* out) {
  out->clear();
  const int cnt = static_cast<int>(std::min<uint64_t>(Load(l->count), kSlots));
  uint64_t seen[kSlots];
  int ns = 0;
  for (int j = cnt - 1; j >= 0; --j) {
    const uint64_t w = l->e[j].key;
    bool dup = false;
    for (int s = 0; s < ns && !dup; ++s) dup = seen[s] == w;
    if (dup) continue;
    seen[ns++] = w;
    if (l->e[j].op == kOpInsert) out->emplace_back(w, l->e[j].val);
  }
}

Status NvTree::Init() {
  WORT_RETURN_IF_ERROR(CheckRoot("nvtree", kRootMagic));
  std::unique_lock<std::shared_mutex> g(*lock_);
  WORT_RETURN_IF_ERROR(ValidateChain());
  Rebuild();
  return Status::OK();
}

void NvTree::Relayout(std::vector<std::pair<std::string, uint64_t>>&& all) {
  std::vector<Pln> plns((all.size() + kPln / 2 - 1) / (kPln / 2));
  if (plns.empty()) plns.resize(1);
  std::vector<std::string> first(plns.size());
  for (size_t j = 0; j < all.size(); ++j) {
    Pln& p = plns[j / (kPln / 2)];
    p.keys[p.n] = std::move(all[j].first);
    p.leaves[p.n] = all[j].second;
    ++p.n;
  }
  for (size_t j = 0; j < plns.size(); ++j) first[j] = plns[j].keys[0];
  plns_ = std::move(plns);
  first_ = std::move(first);
  ++relayouts_;
}

Status NvTree::ValidateChain() const {
  const uint64_t limit = pool_.size() / sizeof(Leaf) + 1;
  uint64_t seen = 0;
  for (uint64_t off = Load(rb_->head); off != 0; off = Load(L(off)->next)) {
    if (!pool_.contains(off, sizeof(Leaf)) || (off & 63))
      return Status::Corruption("nvtree: leaf chain leaves the pool (leaf offset " + std::to_string(off) + ")");
    if (seen++ >= limit) return Status::Corruption("nvtree: leaf chain does not end (a cycle)");
    const Leaf* l = L(off);
    const uint64_t cnt = Load(l->count);
    if (cnt > kSlots)
      return Status::Corruption("nvtree: leaf at " + std::to_string(off) + " has count " + std::to_string(cnt) + " > " +
                                std::to_string(kSlots));
    for (uint64_t j = 0; j < cnt; ++j)
      if (!ko_.PlausibleBlock(l->e[j].key))
        return Status::Corruption("nvtree: leaf at " + std::to_string(off) + " holds a key word that names no key block");
  }
  return Status::OK();
}

// From the leaf chain: separators = smallest live key (first leaf: the empty key). A writable
// pool also unlinks leaves with no live entry (but never the only leaf).
void NvTree::Rebuild() {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, uint64_t>> all;
  std::vector<std::pair<uint64_t, uint64_t>> live;
  size_ = 0;
  const uint64_t limit = pool_.size() / sizeof(Leaf) + 1;
  uint64_t seen = 0;
  uint64_t* link = &rb_->head;
  for (uint64_t off = Load(rb_->head); off != 0 && seen++ < limit;) {
    const Leaf* l = L(off);
    const uint64_t next = Load(l->next);
    Live(l, &live);
    if (live.empty() && !pool_.read_only() && (next != 0 || !all.empty())) {
      // Unlink the empty leaf: *link := next (COMMIT) -> persist -> free it and its key blocks.
      Store(*link, next);
      pm::persist(link, 8);
      std::vector<uint64_t> words;
      for (int j = 0; j < static_cast<int>(std::min<uint64_t>(l->count, kSlots)); ++j) words.push_back(l->e[j].key);
      std::sort(words.begin(), words.end());
      words.erase(std::unique(words.begin(), words.end()), words.end());
      for (uint64_t w : words) ko_.FreeWord(pool_, w);
      pool_.allocator().Free(off);
      off = next;
      continue;
    }
    size_ += live.size();
    std::string sep;
    if (!all.empty() && !live.empty()) {
      uint64_t minw = live[0].first;
      for (const auto& [w, v] : live)
        if (ko_.CompareWords(w, minw) < 0) minw = w;
      sep = ko_.ToString(minw);
    }
    if (!all.empty() && live.empty()) {
      // Read-only pool: an empty leaf stays in the chain but gets no PLN entry (nothing routes
      // to it; scans pass through it; Check skips it).
      link = &L(off)->next;
      off = next;
      continue;
    }
    all.emplace_back(std::move(sep), off);
    link = &L(off)->next;
    off = next;
  }
  Relayout(std::move(all));
  rebuild_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Status NvTree::Lookup(std::string_view key, uint64_t* value) const {
  WORT_RETURN_IF_ERROR(ko_.ValidKey(key));
  std::shared_lock<std::shared_mutex> g(*lock_);
  const Pos pos = Find(key);
  const Leaf* l = L(plns_[pos.p].leaves[pos.i]);
  const int j = Latest(l, ko_.MakeProbe(key));
  if (j < 0 || l->e[j].op != kOpInsert) return Status::NotFound("key absent");
  *value = l->e[j].val;
  return Status::OK();
}

Status NvTree::Append(std::string_view key, uint64_t value, uint64_t op, bool replace, bool* inserted) {
  WORT_RETURN_IF_ERROR(CheckWrite(key));
  std::unique_lock<std::shared_mutex> g(*lock_);
  const Probe pr = ko_.MakeProbe(key);
  Pos pos = Find(key);
  Leaf* l = L(plns_[pos.p].leaves[pos.i]);
  int j = Latest(l, pr);
  const bool present = j >= 0 && l->e[j].op == kOpInsert;
  if (op == kOpDelete && !present) return Status::NotFound("key absent");
  if (op == kOpInsert && present && !replace) return Status::AlreadyExists("key present");
  if (Load(l->count) == kSlots) {
    WORT_RETURN_IF_ERROR(Consolidate(pos));
    pos = Find(key);
    l = L(plns_[pos.p].leaves[pos.i]);
    j = Latest(l, pr);
  }
  uint64_t word = 0;
  if (j >= 0) word = l->e[j].key;  // all entries of a key in a leaf share its word
  else WORT_RETURN_IF_ERROR(ko_.MakeWord(pool_, pr, &word));
  const uint64_t c = Load(l->count);
  Entry& e = l->e[c];
  e.key = word;
  e.val = value;
  e.op = op;
  pm::persist(&e, sizeof(Entry));
  Store(l->count, c + 1);  // COMMIT
  pm::persist(&l->count, 8);
  if (op == kOpDelete) --size_;
  else if (!present) ++size_;
  if (inserted) *inserted = !present;
  return Status::OK();
}

Status NvTree::Consolidate(Pos pos) {
  const uint64_t off = plns_[pos.p].leaves[pos.i];
  Leaf* o = L(off);
  std::vector<std::pair<uint64_t, uint64_t>> live;
  Live(o, &live);
  std::sort(live.begin(), live.end(), [&](const auto& a, const auto& b) { return ko_.CompareWords(a.first, b.first) < 0; });
  const bool split = live.size() > kSlots / 2;
  uint64_t n1 = 0, n2 = 0;
  WORT_RETURN_IF_ERROR(pool_.allocator().Alloc(sizeof(Leaf), &n1));
  if (split) {
    Status s = pool_.allocator().Alloc(sizeof(Leaf), &n2);
    if (!s.ok()) {
      pool_.allocator().Free(n1);
      return s;
    }
  }
  const size_t m = split ? live.size() / 2 : live.size();
  auto fill = [&](uint64_t noff, size_t from, size_t to, uint64_t next) {
    Leaf* n = L(noff);
    std::memset(static_cast<void*>(n), 0, 64);
    for (size_t k = from; k < to; ++k) n->e[k - from] = {live[k].first, live[k].second, kOpInsert};
    n->count = to - from;
    n->next = next;
    pm::flush(n, 64 + (to - from) * sizeof(Entry));
  };
  const uint64_t onext = Load(o->next);
  if (split) {
    fill(n2, m, live.size(), onext);
    fill(n1, 0, m, n2);
  } else {
    fill(n1, 0, m, onext);
  }
  pm::fence();
  uint64_t* link = LinkTo(pos);
  Store(*link, n1);  // COMMIT: the new leaves replace the old one
  pm::persist(link, 8);
  // Free the old leaf and the key blocks of its dead keys.
  if (ko_.bytes()) {
    std::vector<uint64_t> keep, words;
    for (const auto& kv : live) keep.push_back(kv.first);
    std::sort(keep.begin(), keep.end());
    for (int j = 0; j < kSlots; ++j) words.push_back(o->e[j].key);
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    for (uint64_t w : words)
      if (!std::binary_search(keep.begin(), keep.end(), w)) ko_.FreeWord(pool_, w);
  }
  pool_.allocator().Free(off);
  // DRAM: the PLN entry now names n1; n2 gets a new entry (a full PLN rebuilds the block).
  Pln& p = plns_[pos.p];
  p.leaves[pos.i] = n1;
  if (split) {
    std::string sep = ko_.ToString(live[m].first);
    if (p.n < kPln) {
      for (int k = p.n; k > pos.i + 1; --k) {
        p.keys[k] = std::move(p.keys[k - 1]);
        p.leaves[k] = p.leaves[k - 1];
      }
      p.keys[pos.i + 1] = std::move(sep);
      p.leaves[pos.i + 1] = n2;
      ++p.n;
    } else {
      std::vector<std::pair<std::string, uint64_t>> all;
      for (size_t q = 0; q < plns_.size(); ++q)
        for (int k = 0; k < plns_[q].n; ++k) {
          all.emplace_back(std::move(plns_[q].keys[k]), plns_[q].leaves[k]);
          if (static_cast<int>(q) == pos.p && k == pos.i) all.emplace_back(sep, n2);
        }
      Relayout(std::move(all));
    }
  }
  return Status::OK();
}

Status NvTree::Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const {
  return ScanUnsortedLeaves(
      ko_, *lock_, start, end, limit, fn,
      [&](std::string_view s) {
        const Pos pos = Find(s);
        return plns_[pos.p].leaves[pos.i];
      },
      [&](uint64_t off, std::vector<std::pair<uint64_t, uint64_t>>* out) { Live(L(off), out); },
      [&](uint64_t off) { return Load(L(off)->next); });
}

Status NvTree::Check(std::string* report) const {
  std::shared_lock<std::shared_mutex> g(*lock_);
  Findings bad("nvtree");
  std::vector<std::pair<const std::string*, uint64_t>> dram;
  for (const Pln& p : plns_)
    for (int k = 0; k < p.n; ++k) dram.emplace_back(&p.keys[k], p.leaves[k]);
  for (size_t q = 0; q < plns_.size(); ++q)
    if (plns_[q].n == 0 || first_[q] != plns_[q].keys[0]) bad("PLN first key mismatch or empty PLN");
  const uint64_t limit = pool_.size() / sizeof(Leaf) + 1;
  uint64_t seen = 0, keys = 0;
  size_t idx = 0;
  std::vector<std::pair<uint64_t, uint64_t>> live;
  for (uint64_t off = Load(rb_->head); off != 0; off = Load(L(off)->next), ++idx) {
    if (seen++ >= limit || !pool_.contains(off, sizeof(Leaf)) || (off & 63)) {
      bad("leaf chain broken or cyclic");
      break;
    }
    if ((idx >= dram.size() || dram[idx].second != off) && pool_.read_only()) {
      Live(L(off), &live);
      if (live.empty()) {
        --idx;  // an empty leaf a read-only open could not unlink
        continue;
      }
    }
    if (idx >= dram.size() || dram[idx].second != off) {
      bad("leaf chain differs from the DRAM PLN order at leaf " + std::to_string(idx));
      break;
    }
    const Leaf* l = L(off);
    if (l->count > kSlots) bad("count > slots");
    const int cnt = static_cast<int>(std::min<uint64_t>(l->count, kSlots));
    for (int j = 0; j < cnt; ++j) {
      if (l->e[j].op != kOpInsert && l->e[j].op != kOpDelete) bad("bad op flag");
      if (!ko_.PlausibleBlock(l->e[j].key)) bad("implausible key block");
      for (int i = 0; i < j; ++i)
        if (l->e[i].key != l->e[j].key && ko_.CompareWords(l->e[i].key, l->e[j].key) == 0)
          bad("one key with two key words in a leaf");
    }
    if (idx > 0 && CompareKeys(*dram[idx - 1].first, *dram[idx].first) >= 0) bad("separators not increasing");
    Live(l, &live);
    keys += live.size();
    const std::string* hi = idx + 1 < dram.size() ? dram[idx + 1].first : nullptr;
    for (const auto& [w, v] : live) {
      const std::string k = ko_.ToString(w);
      if (CompareKeys(k, *dram[idx].first) < 0 || (hi && CompareKeys(k, *hi) >= 0)) bad("key outside its separator range");
    }
  }
  if (bad.empty() && idx != dram.size()) bad("DRAM PLNs name more leaves than the chain");
  if (keys != size_) bad("Size() " + std::to_string(size_) + " != live keys " + std::to_string(keys));
  return bad.Finish(report);
}

IndexStats NvTree::Stats() const {
  std::shared_lock<std::shared_mutex> g(*lock_);
  IndexStats st;
  st.keys = size_;
  st.inner_nodes = plns_.size() + 1;  // the PLNs and the contiguous first-key level
  st.avg_leaf_depth = 2;
  st.volatile_bytes = plns_.capacity() * sizeof(Pln) + first_.capacity() * sizeof(std::string);
  for (const Pln& p : plns_) {
    st.leaves += p.n;
    for (int k = 0; k < p.n; ++k)
      if (p.keys[k].capacity() > 15) st.volatile_bytes += p.keys[k].capacity() + 1;
  }
  st.bytes_allocated = UsableBytes(pool_, [&](const std::function<void(uint64_t)>& add) { VisitLocked(pool_, root_off_, add); });
  return st;
}

void NvTree::VisitLocked(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark) {
  mark(root_off);
  const auto* rb = pool.at<RootBlock>(root_off);
  const auto [bytes, vab] = ReadRootFlags(rb);
  const uint64_t limit = pool.size() / sizeof(Leaf) + 1;
  uint64_t seen = 0;
  std::vector<std::pair<uint64_t, uint64_t>> live;
  for (uint64_t off = Load(rb->head); off != 0 && (off & 63) == 0 && pool.contains(off, sizeof(Leaf)) && seen++ < limit;
       off = Load(pool.at<Leaf>(off)->next)) {
    mark(off);
    const Leaf* l = pool.at<Leaf>(off);
    const int cnt = static_cast<int>(std::min<uint64_t>(Load(l->count), kSlots));
    if (bytes)
      for (int j = 0; j < cnt; ++j) mark(l->e[j].key);
    if (vab) {
      Live(l, &live);
      for (const auto& kv : live) mark(kv.second);
    }
  }
}

Status Create(Pool& pool, const IndexOptions& opts, uint64_t* root_off) {
  return CreateTree(pool, opts, kRootMagic, 0, &RootBlock::head, sizeof(Leaf),
                    [&](uint64_t off) { pm::persist(pool.at<Leaf>(off), 64); }, root_off);  // creation's first leaf (zeroed in the cache only): needed over reused space; the plan's first step (--dirty-free-space, which covers the leaf's 832-byte class) catches its removal
}

Status Open(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) {
  return OpenTree<NvTree, RootBlock>(pool, root_off, "nvtree", out);
}

const IndexKind kKind = {"nvtree", kind_id::kNvTree,
                         "NVTree: append-only persistent leaves (count committed after the entry), contiguous DRAM "
                         "internal nodes rebuilt on PLN split and on open (FAST 2015)",
                         true, &Create, &Open, &VisitShared<&NvTree::VisitLocked>};

}  // namespace

double LastRebuildSeconds(const Index& idx) {
  if (idx.kind() != "nvtree") return -1;
  return static_cast<const NvTree&>(idx).rebuild_seconds();
}

}  // namespace wort::btree::nv

// Listed in the table of built-in kinds (BuiltinIndexKinds, src/index/registry.cc).
const wort::IndexKind* wort::builtin_kinds::NvTree() { return &wort::btree::nv::kKind; }
