// FPTree: persistent unsorted leaves with fingerprints, DRAM inner nodes (see fptree.h).
#include "index/btree/fptree.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <numeric>
#include <shared_mutex>
#include <vector>

#include "index/btree/btree_common.h"
#include "index/kind_ids.h"
#include "index/registry.h"

namespace wort::btree::fp {
namespace {

constexpr int kSlots = 32;
constexpr uint64_t kRootMagic = 0x45455254504621ull;  // "!FPTREE"

struct RootBlock {
  uint64_t magic;
  uint32_t key_type;
  uint32_t flags;
  uint64_t head;      // first leaf (fixed at Create)
  uint64_t log_leaf;  // split log: the leaf being split (0 = no split in progress)
  uint64_t log_new;   // split log: the new right leaf
  uint64_t pad[3];
};
static_assert(sizeof(RootBlock) == 64);
BTREE_ROOT_HEADER_LAYOUT(RootBlock, head);

struct Slot {
  uint64_t key;
  uint64_t val;
};
struct alignas(64) Leaf {
  uint64_t bitmap;  // bit i: slot i valid (COMMIT word of inserts and removes)
  uint64_t next;    // next leaf in key order (COMMIT word of a split)
  uint8_t fp[kSlots];
  uint8_t pad[16];
  Slot slot[kSlots];
};
static_assert(sizeof(Leaf) == 576);
static_assert(offsetof(Leaf, slot) == 64);

constexpr uint64_t kFull = kSlots == 64 ? ~0ull : ((1ull << kSlots) - 1);

// 1-byte fingerprint of a key word (kU64: the integer; kBytes: the bytes).
inline uint8_t FingerprintU64(uint64_t u) {
  u ^= u >> 33;
  u *= 0xff51afd7ed558ccdull;
  u ^= u >> 33;
  return static_cast<uint8_t>(u);
}
inline uint8_t FingerprintBytes(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return FingerprintU64(h);
}

// ---- DRAM inner nodes: a plain B+-tree of separators over leaf offsets ----------------------
constexpr int kInnerFanout = 64;
struct INode {
  bool bottom;                  // children are leaf offsets
  std::vector<std::string> keys;
  std::vector<uint64_t> kids;   // keys.size() + 1; INode* (as integer) or leaf offset
  explicit INode(bool b) : bottom(b) {}
};

int ChildIdx(const INode* n, std::string_view k) {
  int lo = 0, hi = static_cast<int>(n->keys.size());  // first separator > k
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (CompareKeys(n->keys[mid], k) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

class InnerTree {
 public:
  ~InnerTree() { Destroy(root_); }
  void Reset(uint64_t first_leaf) {
    Destroy(root_);
    root_ = new INode(true);
    root_->kids.push_back(first_leaf);
    height_ = 1;
  }
  uint64_t Find(std::string_view k) const {
    const INode* n = root_;
    for (;;) {
      const uint64_t c = n->kids[ChildIdx(n, k)];
      if (n->bottom) return c;
      n = reinterpret_cast<const INode*>(c);
    }
  }
  // Adds separator sep -> leaf (the leaf right of the one holding keys just below sep).
  void Add(std::string sep, uint64_t leaf) {
    std::string up;
    INode* r = Put(root_, std::move(sep), leaf, &up);
    if (r) {
      auto* nr = new INode(false);
      nr->keys.push_back(std::move(up));
      nr->kids = {reinterpret_cast<uint64_t>(root_), reinterpret_cast<uint64_t>(r)};
      root_ = nr;
      ++height_;
    }
  }
  // Leaves in order with their separator ranges: fn(leaf, lo or nullptr, hi or nullptr).
  void ForEachLeaf(const std::function<void(uint64_t, const std::string*, const std::string*)>& fn) const {
    Walk(root_, nullptr, nullptr, fn);
  }
  int height() const { return height_; }
  uint64_t nodes() const { return Count(root_, nullptr); }
  uint64_t bytes() const {
    uint64_t b = 0;
    Count(root_, &b);
    return b;
  }

 private:
  INode* Put(INode* n, std::string sep, uint64_t leaf, std::string* up) {
    const int c = ChildIdx(n, sep);
    if (n->bottom) {
      n->keys.insert(n->keys.begin() + c, std::move(sep));
      n->kids.insert(n->kids.begin() + c + 1, leaf);
    } else {
      std::string up2;
      INode* r2 = Put(reinterpret_cast<INode*>(n->kids[c]), std::move(sep), leaf, &up2);
      if (!r2) return nullptr;
      n->keys.insert(n->keys.begin() + c, std::move(up2));
      n->kids.insert(n->kids.begin() + c + 1, reinterpret_cast<uint64_t>(r2));
    }
    if (static_cast<int>(n->keys.size()) <= kInnerFanout) return nullptr;
    auto* r = new INode(n->bottom);
    const size_t m = n->keys.size() / 2;
    *up = std::move(n->keys[m]);
    r->keys.assign(std::make_move_iterator(n->keys.begin() + m + 1), std::make_move_iterator(n->keys.end()));
    r->kids.assign(n->kids.begin() + m + 1, n->kids.end());
    n->keys.resize(m);
    n->kids.resize(m + 1);
    return r;
  }
  void Walk(const INode* n, const std::string* lo, const std::string* hi,
            const std::function<void(uint64_t, const std::string*, const std::string*)>& fn) const {
    for (size_t i = 0; i < n->kids.size(); ++i) {
      const std::string* l = i == 0 ? lo : &n->keys[i - 1];
      const std::string* h = i == n->keys.size() ? hi : &n->keys[i];
      if (n->bottom) fn(n->kids[i], l, h);
      else Walk(reinterpret_cast<const INode*>(n->kids[i]), l, h, fn);
    }
  }
  uint64_t Count(const INode* n, uint64_t* bytes) const {
    if (!n) return 0;
    if (bytes) {
      *bytes += sizeof(INode) + n->keys.capacity() * sizeof(std::string) + n->kids.capacity() * 8;
      for (const auto& k : n->keys)
        if (k.capacity() > 15) *bytes += k.capacity() + 1;
    }
    uint64_t c = 1;
    if (!n->bottom)
      for (uint64_t k : n->kids) c += Count(reinterpret_cast<const INode*>(k), bytes);
    return c;
  }
  static void Destroy(INode* n) {
    if (!n) return;
    if (!n->bottom)
      for (uint64_t k : n->kids) Destroy(reinterpret_cast<INode*>(k));
    delete n;
  }
  INode* root_ = nullptr;
  int height_ = 0;
};

class FpTree final : public TreeBase<RootBlock> {
 public:
  FpTree(Pool& pool, uint64_t root_off) : TreeBase(pool, root_off) {}

  Status Init();
  double rebuild_seconds() const { return rebuild_seconds_; }

  std::string_view kind() const override { return "fptree"; }
  Status Insert(std::string_view key, uint64_t value) override { return Put(key, value, false, nullptr); }
  Status Upsert(std::string_view key, uint64_t value, bool* inserted) override { return Put(key, value, true, inserted); }
  Status Lookup(std::string_view key, uint64_t* value) const override;
  Status Remove(std::string_view key) override;
  Status Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const override;
  uint64_t Size() const override { return size_; }
  Status Check(std::string* report) const override;
  IndexStats Stats() const override;

  // Visit without taking the lock (the caller holds it; kKind.visit is VisitShared).
  static void VisitLocked(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark);

 private:
  Leaf* L(uint64_t off) const { return pool_.at<Leaf>(off); }
  uint8_t Fp(const Probe& p) const { return ko_.bytes() ? FingerprintBytes(p.s) : FingerprintU64(p.u); }
  uint8_t FpWord(uint64_t w) const { return ko_.bytes() ? FingerprintBytes(ko_.View(w)) : FingerprintU64(w); }
  // Slot of the key in leaf, or -1.
  int FindSlot(const Leaf* l, const Probe& p, uint8_t fp) const {
    uint64_t bm = Load(l->bitmap);
    while (bm) {
      const int i = __builtin_ctzll(bm);
      bm &= bm - 1;
      if (l->fp[i] == fp && ko_.Compare(Load(l->slot[i].key), p) == 0) return i;
    }
    return -1;
  }
  Status Put(std::string_view key, uint64_t value, bool replace, bool* inserted);
  // Splits the full leaf at off; *right is the new leaf, *sep its lowest key.
  Status Split(uint64_t off, uint64_t* right, std::string* sep);
  void Recover();
  void Rebuild();
  // Open's first step, before anything is written or rebuilt: every leaf of the chain (and the
  // split log's leaves) lies inside the pool, 64-byte aligned, the chain ends (no cycle), and
  // every valid slot's key word names a key block. Corruption naming the first problem
  // otherwise; after it, Recover, Rebuild and the readers follow only what it checked.
  Status ValidateChain() const;

  InnerTree inner_;
  uint64_t size_ = 0;
  double rebuild_seconds_ = 0;
};

Status FpTree::Init() {
  WORT_RETURN_IF_ERROR(CheckRoot("fptree", kRootMagic));
  if (!pool_.contains(rb_->head, sizeof(Leaf))) return Status::Corruption("fptree: head leaf outside the pool");
  std::unique_lock<std::shared_mutex> g(*lock_);
  WORT_RETURN_IF_ERROR(ValidateChain());
  if (!pool_.read_only()) Recover();
  Rebuild();
  return Status::OK();
}

Status FpTree::ValidateChain() const {
  const uint64_t limit = pool_.size() / sizeof(Leaf) + 1;
  uint64_t seen = 0;
  for (uint64_t off = rb_->head; off != 0; off = Load(L(off)->next)) {
    if (!pool_.contains(off, sizeof(Leaf)) || (off & 63))
      return Status::Corruption("fptree: leaf chain leaves the pool (leaf offset " + std::to_string(off) + ")");
    if (seen++ >= limit) return Status::Corruption("fptree: leaf chain does not end (a cycle)");
    const Leaf* l = L(off);
    for (uint64_t bm = Load(l->bitmap); bm != 0; bm &= bm - 1) {
      if (!ko_.PlausibleBlock(Load(l->slot[__builtin_ctzll(bm)].key)))
        return Status::Corruption("fptree: leaf at " + std::to_string(off) + " holds a key word that names no key block");
    }
  }
  const uint64_t lo = Load(rb_->log_leaf), nw = Load(rb_->log_new);
  if (lo != 0 && (!pool_.contains(lo, sizeof(Leaf)) || (lo & 63) || (nw != 0 && (!pool_.contains(nw, sizeof(Leaf)) || (nw & 63)))))
    return Status::Corruption("fptree: split log names a leaf outside the pool");
  return Status::OK();
}

// Completes or rolls back a split cut by a crash (idempotent; see fptree.h).
void FpTree::Recover() {
  const uint64_t lo = Load(rb_->log_leaf);
  if (lo == 0) return;
  const uint64_t nw = Load(rb_->log_new);
  if (nw != 0 && pool_.contains(lo, sizeof(Leaf)) && Load(L(lo)->next) == nw) {
    Leaf* l = L(lo);
    Store(l->bitmap, Load(l->bitmap) & ~Load(L(nw)->bitmap));  // roll forward
    pm::persist(&l->bitmap, 8);
  }
  Store(rb_->log_leaf, 0);  // the split is complete (or never happened)
  pm::persist(&rb_->log_leaf, 8);
}

// Rebuilds the DRAM inner nodes from the leaf chain: the separator of each non-empty leaf but
// the first is its smallest key.
void FpTree::Rebuild() {
  const auto t0 = std::chrono::steady_clock::now();
  inner_.Reset(rb_->head);
  size_ = 0;
  const uint64_t limit = pool_.size() / sizeof(Leaf) + 1;
  uint64_t seen = 0;
  uint64_t prev = 0;
  for (uint64_t off = rb_->head; off != 0 && seen++ < limit; off = Load(L(off)->next)) {
    const Leaf* l = L(off);
    uint64_t bm = Load(l->bitmap);
    if (bm == 0 && prev != 0 && !pool_.read_only()) {
      // Unlink an empty leaf (D2): prev.next := next (store8, COMMIT) -> persist -> free it.
      Store(L(prev)->next, Load(l->next));
      pm::persist(&L(prev)->next, 8);
      pool_.allocator().Free(off);
      off = prev;
      continue;
    }
    prev = off;
    size_ += __builtin_popcountll(bm);
    if (off == rb_->head || bm == 0) continue;
    uint64_t minw = 0;
    bool first = true;
    while (bm) {
      const int i = __builtin_ctzll(bm);
      bm &= bm - 1;
      const uint64_t w = Load(l->slot[i].key);
      if (first || ko_.CompareWords(w, minw) < 0) minw = w;
      first = false;
    }
    inner_.Add(ko_.ToString(minw), off);
  }
  rebuild_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Status FpTree::Lookup(std::string_view key, uint64_t* value) const {
  WORT_RETURN_IF_ERROR(ko_.ValidKey(key));
  std::shared_lock<std::shared_mutex> g(*lock_);
  const Probe p = ko_.MakeProbe(key);
  const Leaf* l = L(inner_.Find(key));
  const int i = FindSlot(l, p, Fp(p));
  if (i < 0) return Status::NotFound("key absent");
  *value = Load(l->slot[i].val);
  return Status::OK();
}

Status FpTree::Put(std::string_view key, uint64_t value, bool replace, bool* inserted) {
  WORT_RETURN_IF_ERROR(CheckWrite(key));
  std::unique_lock<std::shared_mutex> g(*lock_);
  const Probe p = ko_.MakeProbe(key);
  const uint8_t fp = Fp(p);
  uint64_t off = inner_.Find(key);
  Leaf* l = L(off);
  const int found = FindSlot(l, p, fp);
  if (found >= 0) {
    if (!replace) return Status::AlreadyExists("key present");
    Store(l->slot[found].val, value);  // COMMIT (D3)
    pm::persist(&l->slot[found].val, 8);
    if (inserted) *inserted = false;
    return Status::OK();
  }
  uint64_t word = 0;
  WORT_RETURN_IF_ERROR(ko_.MakeWord(pool_, p, &word));  // key block persistent before use
  if (Load(l->bitmap) == kFull) {
    uint64_t right = 0;
    std::string sep;
    Status s = Split(off, &right, &sep);
    if (!s.ok()) {
      ko_.FreeWord(pool_, word);
      return s;
    }
    if (CompareKeys(key, sep) >= 0) {
      off = right;
      l = L(off);
    }
  }
  const int i = __builtin_ctzll(~Load(l->bitmap));
  l->slot[i].key = word;
  l->slot[i].val = value;
  l->fp[i] = fp;
  pm::flush(&l->slot[i], sizeof(Slot));
  pm::persist(&l->fp[i], 1);
  Store(l->bitmap, Load(l->bitmap) | (1ull << i));  // COMMIT
  pm::persist(&l->bitmap, 8);
  ++size_;
  if (inserted) *inserted = true;
  return Status::OK();
}

Status FpTree::Split(uint64_t off, uint64_t* right, std::string* sep) {
  uint64_t nw = 0;
  WORT_RETURN_IF_ERROR(pool_.allocator().Alloc(sizeof(Leaf), &nw));
  Leaf* l = L(off);
  Leaf* n = L(nw);
  // The split log: log_new, then log_leaf (the log is live).
  Store(rb_->log_new, nw);
  pm::persist(&rb_->log_new, 8);  // shares a line with log_leaf: needed under torn write-back (plan step 0 catches it)
  Store(rb_->log_leaf, off);
  pm::persist(&rb_->log_leaf, 8);
  // Median of the (full) leaf.
  int idx[kSlots];
  std::iota(idx, idx + kSlots, 0);
  std::sort(idx, idx + kSlots, [&](int a, int b) { return ko_.CompareWords(l->slot[a].key, l->slot[b].key) < 0; });
  uint64_t upper = 0;
  for (int j = kSlots / 2; j < kSlots; ++j) upper |= 1ull << idx[j];
  std::memcpy(static_cast<void*>(n), l, sizeof(Leaf));
  n->bitmap = upper;
  n->next = Load(l->next);
  pm::persist(n, sizeof(Leaf));
  Store(l->next, nw);  // COMMIT of the split
  pm::persist(&l->next, 8);  // shares line 0 with the bitmap: needed under torn write-back (the plan's torn model catches it)
  Store(l->bitmap, Load(l->bitmap) & ~upper);
  pm::persist(&l->bitmap, 8);
  Store(rb_->log_leaf, 0);  // log cleared
  pm::persist(&rb_->log_leaf, 8);
  *sep = ko_.ToString(n->slot[idx[kSlots / 2]].key);
  inner_.Add(*sep, nw);
  *right = nw;
  return Status::OK();
}

Status FpTree::Remove(std::string_view key) {
  WORT_RETURN_IF_ERROR(CheckWrite(key));
  std::unique_lock<std::shared_mutex> g(*lock_);
  const Probe p = ko_.MakeProbe(key);
  Leaf* l = L(inner_.Find(key));
  const int i = FindSlot(l, p, Fp(p));
  if (i < 0) return Status::NotFound("key absent");
  const uint64_t word = Load(l->slot[i].key);
  Store(l->bitmap, Load(l->bitmap) & ~(1ull << i));  // COMMIT
  pm::persist(&l->bitmap, 8);
  ko_.FreeWord(pool_, word);
  --size_;
  return Status::OK();
}

Status FpTree::Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const {
  return ScanUnsortedLeaves(
      ko_, *lock_, start, end, limit, fn, [&](std::string_view s) { return inner_.Find(s); },
      [&](uint64_t off, std::vector<std::pair<uint64_t, uint64_t>>* out) {
        const Leaf* l = L(off);
        out->clear();
        for (uint64_t bm = Load(l->bitmap); bm != 0; bm &= bm - 1) {
          const int i = __builtin_ctzll(bm);
          out->emplace_back(Load(l->slot[i].key), Load(l->slot[i].val));
        }
      },
      [&](uint64_t off) { return Load(L(off)->next); });
}

Status FpTree::Check(std::string* report) const {
  std::shared_lock<std::shared_mutex> g(*lock_);
  Findings bad("fptree");
  if (Load(rb_->log_leaf) != 0) bad("split log not empty");
  const uint64_t limit = pool_.size() / sizeof(Leaf) + 1;
  uint64_t seen = 0, keys = 0;
  std::vector<uint64_t> chain;
  bool have_prev = false;
  uint64_t prev_max = 0;
  for (uint64_t off = rb_->head; off != 0; off = Load(L(off)->next)) {
    if (seen++ >= limit || !pool_.contains(off, sizeof(Leaf)) || (off & 63)) {
      bad("leaf chain broken or cyclic");
      break;
    }
    chain.push_back(off);
    const Leaf* l = L(off);
    uint64_t bm = Load(l->bitmap);
    std::vector<uint64_t> ws;
    while (bm) {
      const int i = __builtin_ctzll(bm);
      bm &= bm - 1;
      const uint64_t w = Load(l->slot[i].key);
      if (!ko_.PlausibleBlock(w)) {
        bad("implausible key block");
        continue;
      }
      if (l->fp[i] != FpWord(w)) bad("fingerprint mismatch");
      ws.push_back(w);
    }
    std::sort(ws.begin(), ws.end(), [&](uint64_t a, uint64_t b) { return ko_.CompareWords(a, b) < 0; });
    for (size_t j = 1; j < ws.size(); ++j)
      if (ko_.CompareWords(ws[j - 1], ws[j]) == 0) bad("duplicate key in a leaf");
    if (!ws.empty()) {
      if (have_prev && ko_.CompareWords(prev_max, ws.front()) >= 0) bad("leaf keys not above the previous leaf's");
      prev_max = ws.back();
      have_prev = true;
    }
    keys += ws.size();
  }
  if (keys != size_) bad("Size() " + std::to_string(size_) + " != keys in leaves " + std::to_string(keys));
  // I3: the inner tree's leaves are a subsequence of the chain, keys within their ranges.
  size_t pos = 0;
  inner_.ForEachLeaf([&](uint64_t leaf, const std::string* lo, const std::string* hi) {
    while (pos < chain.size() && chain[pos] != leaf) ++pos;
    if (pos == chain.size()) {
      bad("inner tree leaf not in chain order");
      return;
    }
    const Leaf* l = L(leaf);
    uint64_t bm = Load(l->bitmap);
    while (bm) {
      const int i = __builtin_ctzll(bm);
      bm &= bm - 1;
      std::string k = ko_.ToString(Load(l->slot[i].key));
      if ((lo && CompareKeys(k, *lo) < 0) || (hi && CompareKeys(k, *hi) >= 0)) bad("key outside its separator range");
    }
  });
  return bad.Finish(report);
}

IndexStats FpTree::Stats() const {
  std::shared_lock<std::shared_mutex> g(*lock_);
  IndexStats st;
  st.keys = size_;
  st.inner_nodes = inner_.nodes();
  st.avg_leaf_depth = inner_.height();
  st.volatile_bytes = inner_.bytes();
  st.bytes_allocated = UsableBytes(pool_, [&](const std::function<void(uint64_t)>& add) {
    VisitLocked(pool_, root_off_, [&](uint64_t o) {
      // (with values_are_blocks this counts the value blocks too)
      add(o);
    });
  });
  const uint64_t limit = pool_.size() / sizeof(Leaf) + 1;
  uint64_t seen = 0;
  for (uint64_t off = rb_->head; off != 0 && seen++ < limit; off = Load(L(off)->next)) ++st.leaves;
  return st;
}

void FpTree::VisitLocked(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark) {
  mark(root_off);
  const auto* rb = pool.at<RootBlock>(root_off);
  const auto [bytes, vab] = ReadRootFlags(rb);
  const uint64_t limit = pool.size() / sizeof(Leaf) + 1;
  uint64_t seen = 0;
  for (uint64_t off = rb->head; off != 0 && (off & 63) == 0 && pool.contains(off, sizeof(Leaf)) && seen++ < limit;
       off = Load(pool.at<Leaf>(off)->next)) {
    mark(off);
    const Leaf* l = pool.at<Leaf>(off);
    uint64_t bm = Load(l->bitmap);
    while (bm) {
      const int i = __builtin_ctzll(bm);
      bm &= bm - 1;
      if (bytes) mark(Load(l->slot[i].key));
      if (vab) mark(Load(l->slot[i].val));
    }
  }
}

Status Create(Pool& pool, const IndexOptions& opts, uint64_t* root_off) {
  return CreateTree(pool, opts, kRootMagic, 0, &RootBlock::head, sizeof(Leaf),
                    [&](uint64_t off) { pm::persist(pool.at<Leaf>(off), sizeof(Leaf)); }, root_off);  // creation's first leaf (zeroed in the cache only): needed over reused space; the plan's first step (--dirty-free-space, which covers the leaf's 576-byte class) catches its removal
}

Status Open(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) {
  return OpenTree<FpTree, RootBlock>(pool, root_off, "fptree", out);
}

const IndexKind kKind = {"fptree", kind_id::kFpTree,
                         "FPTree: persistent unsorted leaves with fingerprints and bitmap, DRAM inner nodes rebuilt on "
                         "open, micro-logged leaf split (SIGMOD 2016)",
                         true, &Create, &Open, &VisitShared<&FpTree::VisitLocked>};

}  // namespace

double LastRebuildSeconds(const Index& idx) {
  if (idx.kind() != "fptree") return -1;
  return static_cast<const FpTree&>(idx).rebuild_seconds();
}

}  // namespace wort::btree::fp

// Listed in the table of built-in kinds (BuiltinIndexKinds, src/index/registry.cc).
const wort::IndexKind* wort::builtin_kinds::FpTree() { return &wort::btree::fp::kKind; }
