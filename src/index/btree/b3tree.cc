// B3-tree (see b3tree.h for the design, invariants, write order and commit points).
#include "index/btree/b3tree.h"

#include <algorithm>
#include <bitset>
#include <cstdlib>
#include <string_view>
#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "index/btree/btree_common.h"
#include "index/kind_ids.h"
#include "index/registry.h"
#include "wort/index.h"

namespace wort::btree::b3 {
namespace {

constexpr uint32_t kFlagNegInf = 1;
constexpr uint64_t kDeleted = 1ull << 63;  // leaf node: bit 63 of `right`

struct BNode {
  uint64_t key;
  uint64_t val;
  uint64_t left;
  uint64_t right;
};
static_assert(sizeof(BNode) == 32);

// See b3tree.h, "Persistent layout".
struct Page {
  uint64_t root;
  uint64_t count;
  uint64_t sibling;
  uint64_t low;
  uint32_t level;
  uint32_t flags;
  uint64_t pad[3];
  BNode node[kMaxNodes];  // a page of P bytes uses the first NodesPerPage(P) only (its block ends there)
};
static_assert(sizeof(Page) == kMaxPageBytes);
static_assert(offsetof(Page, node) == 64);

struct RootBlock {
  uint64_t magic;
  uint32_t key_type;
  uint32_t flags;
  uint64_t root;
  uint64_t page_bytes;  // kRootMagicSized only: the page size (kRootMagic: 0, meaning 1024)
  uint64_t pad[4];
};
static_assert(sizeof(RootBlock) == 64);
BTREE_ROOT_HEADER_LAYOUT(RootBlock, root);

// The page size a root block names: kDefaultPageBytes for kRootMagic, the stored size for
// kRootMagicSized; 0 when that is not a valid size (a damaged root block: Open refuses it).
inline uint64_t RootPageBytes(const RootBlock* rb) {
  if (Load(rb->magic) != kRootMagicSized) return kDefaultPageBytes;
  const uint64_t b = Load(rb->page_bytes);
  return ValidPageBytes(b) ? b : 0;
}

// ---- references (b3tree.h: 0 none, odd BST node, even page) ----
inline uint64_t NodeRef(int i) { return (static_cast<uint64_t>(i) << 1) | 1; }
inline bool IsNode(uint64_t r) { return (r & 1) != 0; }
// The node index of a reference; kMaxNodes (out of range: callers check against the page's node
// count) for an index past the largest page, so that a damaged word never turns into a negative
// or huge int.
inline int NodeIdx(uint64_t r) {
  return (r >> 1) < static_cast<uint64_t>(kMaxNodes) ? static_cast<int>(r >> 1) : kMaxNodes;
}
inline uint64_t RefOf(uint64_t word) { return word & ~kDeleted; }
// Stores a reference in a child word, keeping the deleted flag of a leaf node's `right`.
inline void SetRef(uint64_t* w, uint64_t ref) { Store(*w, ref | (Load(*w) & kDeleted)); }

inline bool NegInf(const Page* p) { return (p->flags & kFlagNegInf) != 0; }
inline bool IsLeaf(const Page* p) { return p->level == 0; }
// The page's count, at most `nodes` (the page's node slots).
inline int Count(const Page* p, int nodes) {
  const uint64_t c = Load(p->count);
  return c > static_cast<uint64_t>(nodes) ? nodes : static_cast<int>(c);
}

struct KV {
  uint64_t key;
  uint64_t val;
};

// A page's contents in order. Leaf: entries (live and tombstones apart). Inner: children and the
// separator keys between them (keys.size() + 1 == children.size()).
struct Contents {
  std::vector<KV> live;
  std::vector<uint64_t> dead_keys;  // tombstones' key words
  std::vector<uint64_t> children;
  std::vector<uint64_t> keys;
};

// Where a page is named: the word, the page holding it and, for a BST node's word, the node.
struct Slot {
  uint64_t page = 0;        // parent page offset (0: the root block)
  uint64_t* word = nullptr;
};

class B3Tree final : public TreeBase<RootBlock> {
 public:
  B3Tree(Pool& pool, uint64_t root_off)
      : TreeBase(pool, root_off),
        page_bytes_(RootPageBytes(rb_)),
        nodes_(NodesPerPage(page_bytes_ ? page_bytes_ : kDefaultPageBytes)),
        min_live_(nodes_ / 2),
        rebalance_((rb_->flags & kRootNoRebalance) == 0) {}

  Status Init();
  std::string_view kind() const override { return "b3tree"; }
  Status Insert(std::string_view key, uint64_t value) override { return Put(key, value, false, nullptr); }
  Status Upsert(std::string_view key, uint64_t value, bool* inserted) override { return Put(key, value, true, inserted); }
  Status Lookup(std::string_view key, uint64_t* value) const override;
  Status Remove(std::string_view key) override;
  Status Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const override;
  uint64_t Size() const override { return size_.Get(*lock_, [this] { return CountKeys(); }); }
  Status Check(std::string* report) const override;
  IndexStats Stats() const override;

  // Visit without taking the lock (the caller holds it; kKind.visit is VisitShared).
  static void VisitLocked(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark);

 private:
  struct PathStep {
    uint64_t page;
    Slot where;  // the word naming this page
  };

  Page* P(uint64_t off) const { return pool_.at<Page>(off); }
  uint64_t Root() const { return Load(rb_->root); }
  int Count(const Page* p) const { return b3::Count(p, nodes_); }
  // A new page is read only up to its count: flush the header and the nodes in use (the rest of
  // the block is never interpreted, whatever it holds).
  void FlushPage(const Page* pg) const { pm::flush(pg, 64 + static_cast<size_t>(Count(pg)) * sizeof(BNode)); }

  // The page size in bytes (root block; 0 when the root block holds none: an invalid one, which
  // Init refuses) and the BST node slots of a page, min_live_ below which a page is rebalanced.
  const uint64_t page_bytes_;
  const int nodes_;
  const int min_live_;

  // ---- reading a page ----
  // Follows the page's BST to the child word for probe p (inner page). Keys >= a node's key go
  // right.
  uint64_t* RouteWord(Page* pg, const Probe& p) const {
    uint64_t* w = &pg->root;
    for (int guard = 0; guard <= nodes_ && IsNode(RefOf(Load(*w))) && NodeIdx(RefOf(Load(*w))) < nodes_; ++guard) {
      BNode& n = pg->node[NodeIdx(RefOf(Load(*w)))];
      w = ko_.Compare(Load(n.key), p) > 0 ? &n.left : &n.right;
    }
    return w;
  }
  // As RouteWord, for the greatest keys below p (to find a page's left neighbour).
  uint64_t* RouteWordBelow(Page* pg, const Probe& p) const {
    uint64_t* w = &pg->root;
    for (int guard = 0; guard <= nodes_ && IsNode(RefOf(Load(*w))) && NodeIdx(RefOf(Load(*w))) < nodes_; ++guard) {
      BNode& n = pg->node[NodeIdx(RefOf(Load(*w)))];
      w = ko_.Compare(Load(n.key), p) >= 0 ? &n.left : &n.right;
    }
    return w;
  }
  // Leaf page: the node holding p (index), or -1 and *at = the empty child word where it goes.
  int FindInLeaf(Page* pg, const Probe& p, uint64_t** at) const {
    uint64_t* w = &pg->root;
    for (int guard = 0; guard <= nodes_; ++guard) {
      const uint64_t r = RefOf(Load(*w));
      if (!IsNode(r) || NodeIdx(r) >= nodes_) break;
      BNode& n = pg->node[NodeIdx(r)];
      const int c = ko_.Compare(Load(n.key), p);
      if (c == 0) return NodeIdx(r);
      w = c > 0 ? &n.left : &n.right;
    }
    if (at) *at = w;
    return -1;
  }
  // The leaf page for probe p (readers: moves right through logical pages when tolerant_).
  // Or 0 when the descent meets an offset that is not a page or reaches no leaf (a damaged image).
  uint64_t LeafFor(const Probe& p) const {
    uint64_t off = Root();
    for (int guard = 0; guard < 64 && PageOk(off); ++guard) {
      if (tolerant_) off = MoveRight(off, p);
      Page* pg = P(off);
      if (IsLeaf(pg)) return off;
      off = RefOf(Load(*RouteWord(pg, p)));
    }
    return 0;
  }
  // Whether `off` can be a page: not 0, 64-byte aligned (so not a BST node reference), inside
  // the pool. Every walk checks the page offsets it follows with it.
  bool PageOk(uint64_t off) const { return off != 0 && (off & 63) == 0 && pool_.contains(off, page_bytes_); }
  // The next page of a level's chain, or 0 at its end or when the link is not a page.
  uint64_t Sibling(uint64_t off) const {
    const uint64_t sib = Load(P(off)->sibling);
    return PageOk(sib) ? sib : 0;
  }
  // A page of a level's chain as the open walk read it: Repair groups each level's chain under
  // its parents from these (the chains Repair reads are the image's: it writes only levels above
  // the one it examines), without walking the chains again.
  struct ChainPage {
    uint64_t off;
    uint64_t low;  // the low key word
    bool neg_inf;
  };
  // The open walk of an image that needs Repair: every level's chain and every child a page
  // names are pages of the expected level, chains end, key words name key blocks. Corruption
  // naming the first problem otherwise. On OK, (*chains)[l] is level l's chain in order.
  Status Validate(std::vector<std::vector<ChainPage>>* chains) const;
  uint64_t MoveRight(uint64_t off, const Probe& p) const {
    for (int guard = 0; guard < 1 << 20; ++guard) {
      const uint64_t sib = Load(P(off)->sibling);
      if (!PageOk(sib) || ko_.Compare(Load(P(sib)->low), p) > 0) return off;
      off = sib;
    }
    return off;
  }
  // In-order walk of a page's BST without allocating: node(i) for each reachable node index in
  // key order and child(r) for each non-null reference that is not a BST node (an inner page's
  // child pages), in order. Each node at most once: a node met twice (a cycle, corruption) or an
  // index past the page's slots ends the walk.
  template <class NodeFn, class ChildFn>
  void ForInOrder(const Page* pg, NodeFn&& node, ChildFn&& child) const {
    std::bitset<kMaxNodes> seen;
    int stack[kMaxNodes];  // each node is pushed at most once
    int depth = 0;
    uint64_t r = RefOf(Load(pg->root));
    for (;;) {
      while (IsNode(r)) {
        const int i = NodeIdx(r);
        if (i >= nodes_ || seen[i]) return;
        seen[i] = true;
        stack[depth++] = i;
        r = RefOf(Load(pg->node[i].left));
      }
      if (r != 0) child(r);
      if (depth == 0) return;
      const int i = stack[--depth];
      node(i);
      r = RefOf(Load(pg->node[i].right));
    }
  }
  // In-order reachable node indices of a page (each node once; bounded against cycles).
  void InOrder(const Page* pg, std::vector<int>* nodes, std::vector<uint64_t>* child_words_refs = nullptr) const;
  Contents Read(const Page* pg) const;
  int Live(const Page* pg) const {
    int n = 0;
    std::vector<int> v;
    InOrder(pg, &v);
    for (int i : v)
      if (!(Load(pg->node[i].right) & kDeleted)) ++n;
    return n;
  }
  int InnerNodes(const Page* pg) const {
    std::vector<int> v;
    InOrder(pg, &v);
    return static_cast<int>(v.size());
  }
  // A slot for a new BST node: past count, or a dead node (lazy defragmentation); -1 if none.
  int FreeSlot(const Page* pg) const;

  // False when the descent meets an offset that is not a page of the expected level.
  bool Descend(const Probe& p, int level, std::vector<PathStep>* path) const;
  std::vector<PathStep> PathTo(uint64_t page) const;
  uint64_t FirstOfLevel(int level) const;
  uint64_t LeftNeighbour(uint64_t off) const;

  // ---- building pages ----
  Status AllocPage(uint64_t* off);
  void InitPage(Page* pg, uint32_t level, uint64_t low, bool neg_inf, uint64_t sibling);
  const bool rebalance_;  // root flags bit 1 clear (b3tree.h, kRootNoRebalance)
  uint64_t BuildLeafBST(Page* pg, const KV* e, int lo, int hi, int* next);
  uint64_t BuildInnerBST(Page* pg, const std::vector<uint64_t>& ch, const std::vector<uint64_t>& keys, int l, int r, int* next);
  void FillLeaf(Page* pg, const KV* e, int n);
  void FillInner(Page* pg, const std::vector<uint64_t>& ch, const std::vector<uint64_t>& keys);

  // ---- writers ----
  Status Put(std::string_view key, uint64_t value, bool upsert, bool* inserted);
  Status SplitPage(const std::vector<PathStep>& path, int i);
  Status DefragPage(const std::vector<PathStep>& path, int i);
  void Rebalance(const std::vector<PathStep>& path, int i);
  // Replaces the group of 1 or 2 adjacent pages `g` (named by words `w`) by the new pages `h`.
  // For 2 -> x: `lca` is the separator node between the two words in `parent`, `lca_word` the
  // word naming it. `sep` is the separator key word for 1 -> 2 (a new BST node) or 2 -> 2 (the
  // LCA's new key).
  void Replace(uint64_t parent, const std::vector<uint64_t>& g, const std::vector<uint64_t*>& w, int lca,
               uint64_t* lca_word, const std::vector<uint64_t>& h, uint64_t sep, int new_slot);
  void FreeOldPage(uint64_t off, bool free_low);
  Status Repair(const std::vector<std::vector<ChainPage>>& chains);
  void Reachable(std::unordered_set<uint64_t>* out) const;
  uint64_t CountKeys() const;

  LazyCount size_;  // counted on first Size() after open
  bool tolerant_ = false;
};

// ---- reading ---------------------------------------------------------------------------------

void B3Tree::InOrder(const Page* pg, std::vector<int>* nodes, std::vector<uint64_t>* children) const {
  ForInOrder(pg, [&](int i) { nodes->push_back(i); }, [&](uint64_t r) {
    if (children) children->push_back(r);
  });
}

Contents B3Tree::Read(const Page* pg) const {
  Contents c;
  std::vector<int> nodes;
  if (IsLeaf(pg)) {
    InOrder(pg, &nodes);
    for (int i : nodes) {
      const BNode& n = pg->node[i];
      if (Load(n.right) & kDeleted) c.dead_keys.push_back(Load(n.key));
      else c.live.push_back({Load(n.key), Load(n.val)});
    }
  } else {
    InOrder(pg, &nodes, &c.children);
    for (int i : nodes) c.keys.push_back(Load(pg->node[i].key));
  }
  return c;
}

int B3Tree::FreeSlot(const Page* pg) const {
  const int cnt = Count(pg);
  if (cnt < nodes_) return cnt;
  std::vector<int> v;
  InOrder(pg, &v);
  std::bitset<kMaxNodes> used;
  for (int i : v) used[i] = true;
  for (int i = 0; i < cnt; ++i)
    if (!used[i]) return i;  // a dead node: unreachable, free to overwrite
  return -1;
}

bool B3Tree::Descend(const Probe& p, int level, std::vector<PathStep>* path) const {
  path->clear();
  uint64_t off = Root();
  Slot where{0, &rb_->root};
  for (int guard = 0; guard < 64; ++guard) {
    if (!PageOk(off)) return false;
    if (tolerant_) off = MoveRight(off, p);
    path->push_back({off, where});
    Page* pg = P(off);
    if (static_cast<int>(pg->level) <= level) break;
    uint64_t* w = RouteWord(pg, p);
    where = {off, w};
    off = RefOf(Load(*w));
  }
  std::reverse(path->begin(), path->end());  // path[0] at `level`, the root last
  return !path->empty() && static_cast<int>(P((*path)[0].page)->level) == level;
}

std::vector<B3Tree::PathStep> B3Tree::PathTo(uint64_t target) const {
  std::vector<PathStep> path;
  const Page* t = P(target);
  if (!NegInf(t)) {
    Descend(ko_.ProbeOf(Load(t->low)), static_cast<int>(t->level), &path);
    return path;
  }
  uint64_t off = Root();
  Slot where{0, &rb_->root};
  for (int guard = 0; guard < 64 && PageOk(off); ++guard) {
    path.push_back({off, where});
    if (P(off)->level <= t->level) break;
    uint64_t* w = &P(off)->root;
    for (int g2 = 0; g2 <= nodes_ && IsNode(RefOf(Load(*w))) && NodeIdx(RefOf(Load(*w))) < nodes_; ++g2)
      w = &P(off)->node[NodeIdx(RefOf(Load(*w)))].left;
    where = {off, w};
    off = RefOf(Load(*w));
  }
  std::reverse(path.begin(), path.end());
  return path;
}

uint64_t B3Tree::FirstOfLevel(int level) const {
  uint64_t off = Root();
  for (int guard = 0; guard < 64 && PageOk(off) && static_cast<int>(P(off)->level) > level; ++guard) {
    uint64_t r = RefOf(Load(P(off)->root));
    for (int g2 = 0; g2 <= nodes_ && IsNode(r) && NodeIdx(r) < nodes_; ++g2) r = RefOf(Load(P(off)->node[NodeIdx(r)].left));
    off = r;
  }
  return PageOk(off) && static_cast<int>(P(off)->level) == level ? off : 0;  // 0: a damaged image
}

uint64_t B3Tree::LeftNeighbour(uint64_t off) const {
  const Page* t = P(off);
  if (NegInf(t)) return 0;
  const Probe p = ko_.ProbeOf(Load(t->low));
  uint64_t cur = Root();
  for (int guard = 0; guard < 64 && PageOk(cur) && P(cur)->level > t->level; ++guard) cur = RefOf(Load(*RouteWordBelow(P(cur), p)));
  if (!PageOk(cur)) return 0;
  for (int guard = 0; guard < 1 << 20 && cur != 0; ++guard) {
    const uint64_t s = Sibling(cur);
    if (s == off) return cur;
    cur = s;
  }
  return 0;
}

// ---- building --------------------------------------------------------------------------------

Status B3Tree::AllocPage(uint64_t* off) { return pool_.allocator().AllocZeroed(page_bytes_, off); }

void B3Tree::InitPage(Page* pg, uint32_t level, uint64_t low, bool neg_inf, uint64_t sibling) {
  pg->root = 0;
  pg->count = 0;
  pg->sibling = sibling;
  pg->low = neg_inf ? 0 : low;
  pg->level = level;
  pg->flags = neg_inf ? kFlagNegInf : 0;
}

// A complete BST over e[lo, hi) (rebalancing optimisation, 4.2.4.1).
uint64_t B3Tree::BuildLeafBST(Page* pg, const KV* e, int lo, int hi, int* next) {
  if (lo >= hi) return 0;
  const int mid = (lo + hi) / 2;
  const int i = (*next)++;
  pg->node[i].key = e[mid].key;
  pg->node[i].val = e[mid].val;
  pg->node[i].left = BuildLeafBST(pg, e, lo, mid, next);
  pg->node[i].right = BuildLeafBST(pg, e, mid + 1, hi, next);
  return NodeRef(i);
}

// Keys keys[l..r] (1-based into `keys` shifted by one) with children ch[l-1..r].
uint64_t B3Tree::BuildInnerBST(Page* pg, const std::vector<uint64_t>& ch, const std::vector<uint64_t>& keys, int l, int r,
                               int* next) {
  if (l > r) return ch[l - 1];
  const int mid = (l + r) / 2;
  const int i = (*next)++;
  pg->node[i].key = keys[mid - 1];
  pg->node[i].val = 0;
  pg->node[i].left = BuildInnerBST(pg, ch, keys, l, mid - 1, next);
  pg->node[i].right = BuildInnerBST(pg, ch, keys, mid + 1, r, next);
  return NodeRef(i);
}

void B3Tree::FillLeaf(Page* pg, const KV* e, int n) {
  if (!rebalance_) {  // a chain in ascending order: node i's right child is node i + 1
    for (int i = 0; i < n; ++i) {
      pg->node[i].key = e[i].key;
      pg->node[i].val = e[i].val;
      pg->node[i].left = 0;
      pg->node[i].right = i + 1 < n ? NodeRef(i + 1) : 0;
    }
    pg->root = n ? NodeRef(0) : 0;
    pg->count = n;
    return;
  }
  int next = 0;
  pg->root = BuildLeafBST(pg, e, 0, n, &next);
  pg->count = next;
}

void B3Tree::FillInner(Page* pg, const std::vector<uint64_t>& ch, const std::vector<uint64_t>& keys) {
  const int k = static_cast<int>(keys.size());
  if (!rebalance_ && k > 0) {  // a chain: node i separates ch[i] (left) from the rest (right)
    for (int i = 0; i < k; ++i) {
      pg->node[i].key = keys[i];
      pg->node[i].val = 0;
      pg->node[i].left = ch[i];
      pg->node[i].right = i + 1 < k ? NodeRef(i + 1) : ch[k];
    }
    pg->root = NodeRef(0);
    pg->count = k;
    return;
  }
  int next = 0;
  pg->root = BuildInnerBST(pg, ch, keys, 1, k, &next);
  pg->count = next;
}

// ---- open ------------------------------------------------------------------------------------

Status B3Tree::Validate(std::vector<std::vector<ChainPage>>* chains) const {
  const uint64_t limit = pool_.size() / page_bytes_ + 1;
  auto bad = [](const std::string& what) { return Status::Corruption("b3tree: " + what); };
  const int height = static_cast<int>(P(Root())->level);  // <= 64 (Init)
  chains->assign(height + 1, {});
  for (int level = height; level >= 0; --level) {
    std::vector<ChainPage>& chain = (*chains)[level];
    const uint64_t first = FirstOfLevel(level);
    if (first == 0) return bad("the leftmost path does not reach level " + std::to_string(level));
    uint64_t seen = 0;
    for (uint64_t off = first; off != 0; off = Load(P(off)->sibling)) {
      if (!PageOk(off)) return bad("level " + std::to_string(level) + " links to " + std::to_string(off) + ", not a page");
      if (seen++ >= limit) return bad("the chain of level " + std::to_string(level) + " does not end (a cycle)");
      const Page* pg = P(off);
      auto where = [off] { return "page @" + std::to_string(off); };
      if (static_cast<int>(pg->level) != level)
        return bad(where() + " has level " + std::to_string(pg->level) + ", expected " + std::to_string(level));
      if (!NegInf(pg) && !ko_.PlausibleBlock(Load(pg->low))) return bad(where() + ": low key names no key block");
      chain.push_back({off, Load(pg->low), NegInf(pg)});
      // The page's BST (ForInOrder, no allocation): every key word names a key block, every child
      // is a page of the level below. A leaf of 8-byte keys has nothing to check (its key words
      // are the keys, PlausibleBlock holds for any), so its BST is not walked.
      if (level == 0 && !ko_.bytes()) continue;
      bool bad_key = false, bad_child = false;
      ForInOrder(
          pg, [&](int i) { bad_key = bad_key || !ko_.PlausibleBlock(Load(pg->node[i].key)); },
          [&](uint64_t ch) {
            bad_child = bad_child || (level > 0 && (!PageOk(ch) || static_cast<int>(P(ch)->level) != level - 1));
          });
      if (bad_key) return bad(where() + (level == 0 ? ": a key names no key block" : ": a separator names no key block"));
      if (bad_child) return bad(where() + ": a child is not a page of the level below");
    }
  }
  return Status::OK();
}

Status B3Tree::Init() {
  const uint64_t magic = Load(rb_->magic) == kRootMagicSized ? kRootMagicSized : kRootMagic;
  WORT_RETURN_IF_ERROR(CheckRoot("b3tree", magic));
  if (page_bytes_ == 0)
    return Status::Corruption("b3tree: the root block's page size " + std::to_string(Load(rb_->page_bytes)) +
                              " is not a power of two in [" + std::to_string(kMinPageBytes) + ", " +
                              std::to_string(kMaxPageBytes) + "]");
  const uint64_t r = Root();
  if (!PageOk(r) || P(r)->level > 64) return Status::Corruption("b3tree: bad root page offset " + std::to_string(r));
  std::unique_lock<std::shared_mutex> g(*lock_);
  if (!pool_.opened_clean()) {
    std::vector<std::vector<ChainPage>> chains;
    WORT_RETURN_IF_ERROR(Validate(&chains));  // Repair follows (and writes) only what it checked
    if (pool_.read_only()) tolerant_ = true;
    else WORT_RETURN_IF_ERROR(Repair(chains));
  }
  return Status::OK();
}

uint64_t B3Tree::CountKeys() const {
  uint64_t total = 0;
  const uint64_t limit = pool_.size() / page_bytes_ + 1;
  uint64_t seen = 0, last = 0;
  bool have_last = false;
  for (uint64_t off = FirstOfLevel(0); off != 0 && seen++ < limit; off = Sibling(off)) {
    const Contents c = Read(P(off));
    for (const KV& kv : c.live) {
      if (tolerant_ && have_last && ko_.CompareWords(kv.key, last) <= 0) continue;
      last = kv.key;
      have_last = true;
      ++total;
    }
  }
  return total;
}

// ---- readers ---------------------------------------------------------------------------------

Status B3Tree::Lookup(std::string_view key, uint64_t* value) const {
  WORT_RETURN_IF_ERROR(ko_.ValidKey(key));
  const Probe p = ko_.MakeProbe(key);
  std::shared_lock<std::shared_mutex> g(*lock_);
  const uint64_t leaf_off = LeafFor(p);
  if (leaf_off == 0) return Status::Corruption("b3tree: the descent meets an offset that is not a page");
  Page* leaf = P(leaf_off);
  const int i = FindInLeaf(leaf, p, nullptr);
  if (i < 0 || (Load(leaf->node[i].right) & kDeleted)) return Status::NotFound("key not found");
  *value = Load(leaf->node[i].val);
  return Status::OK();
}

Status B3Tree::Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const {
  return ScanInBatches(
      ko_, *lock_, start, end, limit, fn,
      [&](const Probe& p) { return LeafFor(p); },
      [&](uint64_t off, auto&& take) {
        for (const KV& kv : Read(P(off)).live)
          if (!take(kv.key, kv.val)) return;
      },
      [&](uint64_t off) { return Sibling(off); });
}

// ---- page replacement (b3tree.h steps 1-3) ---------------------------------------------------------

void B3Tree::Replace(uint64_t parent, const std::vector<uint64_t>& g, const std::vector<uint64_t*>& w, int lca,
                     uint64_t* lca_word, const std::vector<uint64_t>& h, uint64_t sep, int new_slot) {
  Page* pp = parent ? P(parent) : nullptr;
  const uint64_t ls = LeftNeighbour(g[0]);
  if (ls != 0) {
    // 1. Every word naming an old page names l: l and the old pages form one logical page.
    for (uint64_t* wi : w) {
      SetRef(wi, ls);
      // crash-site: redundant: without it the word may stay at the old page it named until step 3; every such state is a crash state readers and recovery interpret (a parent word naming an old page that left the chain: the old page is unmodified, still allocated - every caller frees the old pages only after Replace returns - and its sibling leads on to the rest of the level; D2 rebuilds the parent), and by the end of Replace each step-1 word is either overwritten by a persisted store (split, defragmentation, redistribution, a merge's deeper word) or lies in BST node x, which a persisted COMMIT unlinks (merge) before any old page is freed
      pm::persist(wi, 8);
    }
    // 2. The new pages replace the old ones in the chain (one store).
    Store(P(ls)->sibling, h[0]);
    pm::persist(&P(ls)->sibling, 8);
  }
  // 3. Restructure the parent's BST.
  if (g.size() == 1 && h.size() == 1) {  // defragmentation (or a root replaced)
    SetRef(w[0], h[0]);  // COMMIT
    // The COMMIT of a defragmentation, and of Repair's rebuilt parent page (which Repair then frees): the plan's recovery_persists check catches its removal.
    pm::persist(w[0], 8);
  } else if (g.size() == 1 && h.size() == 2) {  // split (Algorithm 3)
    if (pp) {
      BNode& s = pp->node[new_slot];
      Store(s.key, sep);
      Store(s.val, 0);
      Store(s.left, h[0]);
      Store(s.right, h[1]);
      pm::persist(&s, sizeof(BNode));
      if (new_slot >= Count(pp)) {
        Store(pp->count, new_slot + 1);
        pm::persist(&pp->count, 8);
      }
      SetRef(w[0], NodeRef(new_slot));  // COMMIT: s(m, n1, n2) replaces the old page
      pm::persist(w[0], 8);
    }
  } else if (g.size() == 2) {
    BNode& x = pp->node[lca];
    const bool lp_eq_rp = RefOf(Load(x.left)) != 0 && w[0] == &x.left && w[1] == &x.right;
    if (h.size() == 1) {  // merge (Algorithm 2)
      if (lp_eq_rp) {
        SetRef(lca_word, h[0]);  // COMMIT: the merged page replaces x and both pages
        // a COMMIT word of page replacement: without it the parent names freed pages; caught by the plan's 150-key delete step (read-only view first)
        pm::persist(lca_word, 8);
      } else if (w[0] == &x.left) {  // the left page is x's direct child; the right one deeper
        if (ls == 0) {
          SetRef(w[1], g[0]);  // the left page heads the logical page
          pm::persist(w[1], 8);
          SetRef(lca_word, RefOf(Load(x.right)));  // x leaves the BST
          pm::persist(lca_word, 8);
          SetRef(w[1], h[0]);  // COMMIT
          // without it w[1] - the parent's first word, on the level's leftmost path - keeps naming the old first page g[0], which the next page allocation hands out again while this line is still dirty: caught by the plan's step 0d (sparse deletes, the next merge reuses g[0]; read-only view first)
          pm::persist(w[1], 8);
        } else {
          SetRef(w[1], h[0]);
          pm::persist(w[1], 8);
          SetRef(lca_word, RefOf(Load(x.right)));  // COMMIT: x leaves the BST
          pm::persist(lca_word, 8);
        }
      } else {  // the right page is x's direct child (l always exists here)
        SetRef(w[0], h[0]);
        // Needed: without it w[0] keeps naming l (step 1's persisted value) after the operation - a logical page (l.sibling names the merged page) that readers move right through and D2 rebuilds - until l itself is replaced and freed: if its block is reused while this line is still dirty, the parent names the reused page (of another level: Validate rejects the image; a leaf of another range: readers miss keys). No crash image of the plans draws that reuse (a later persist of the line usually comes first: tried over 1250-key delete runs and 29 shorter ones, every distribution); the return rule catches its removal - the operation returns with this line dirty (ExplorerConfig::op_persists; the mutation gate's verdict "caught at return only", step 0e)
        pm::persist(w[0], 8);
        SetRef(lca_word, RefOf(Load(x.left)));  // COMMIT: x leaves the BST
        // without it lca_word keeps naming x, whose right word names l (step 1's value), until a later merge replaces, frees and reuses l while this line is still dirty: caught by the plan's step 0e (word deletes; read-only view first)
        pm::persist(lca_word, 8);
      }
    } else {  // redistribution (Figure 11)
      if (ls == 0) {
        SetRef(w[1], g[0]);  // the left page heads the logical page
        // crash-site: redundant: l absent means the left page is the first of its level, so it is x.left itself (w[0] == &x.left). If w[1] == &x.right, w[1] shares x's line (a BNode is 32-byte aligned) with w[0], whose persist below (and x.key's, when the key changes) writes it back: in the whole-line model its absence adds no state. If w[1] lies deeper, the left page is the underflowing one (the partner is across the page's own BST node, D3), so entries move left and the separator goes up: until the COMMIT below persists w[1] itself (before the operation returns and before any old page is freed), w[1] keeps naming the old right page g[1], its value before the operation, which holds every key at or above the new separator - the keys readers route there - and D2 rebuilds the parent from the chain, as it does with w[1] naming g[0]; only --torn needs this persist
        pm::persist(w[1], 8);
      }
      if (Load(x.key) != sep) {
        Store(x.key, sep);  // both words name one logical page: the key is free to change
        // crash-site: redundant: x.key lies in BST node x (32-byte aligned: one cache line with x.left and x.right), and one of w[0], w[1] is x's own word (the underflowing page is x's direct child, D3), stored and persisted just below (w[0] = &x.left) or at the COMMIT (w[1] = &x.right), which writes x.key back before the operation returns. In the second case, between the persist of w[0] and the COMMIT, x.key may still hold the old (higher) separator: a key in [new, old) reaches h[0] and moves right to h[1] (readers), w[1] still names l (step 1), and D2 rebuilds the parent from the chain; only --torn needs this persist
        pm::persist(&x.key, 8);
      }
      SetRef(w[0], h[0]);
      // Needed: when l does not exist and w[0] is not in w[1]'s line, nothing else writes w[0] back, so it can keep naming the old left page, freed below and reused; caught by the plan's 1250-key delete step with the read-only view first (crash/plans.cc, step 0c: op #854)
      pm::persist(w[0], 8);
      SetRef(w[1], h[1]);  // COMMIT
      // a COMMIT word of page replacement: without it the parent names freed pages; caught by the plan's 150-key delete step (read-only view first)
      pm::persist(w[1], 8);
    }
  }
}

void B3Tree::FreeOldPage(uint64_t off, bool free_low) {
  Page* pg = P(off);
  if (IsLeaf(pg) && ko_.bytes()) {
    const Contents c = Read(pg);
    for (uint64_t k : c.dead_keys) ko_.FreeWord(pool_, k);  // tombstones dropped by the rebuild
  }
  if (free_low && !NegInf(pg)) ko_.FreeWord(pool_, Load(pg->low));
  pool_.allocator().Free(off);
}

// Splits page path[i] into two new pages. REQUIRES its parent page (if any) to have a free slot.
Status B3Tree::SplitPage(const std::vector<PathStep>& path, int i) {
  const uint64_t off = path[i].page;
  Page* pg = P(off);
  const Contents c = Read(pg);
  const bool leaf = IsLeaf(pg);
  uint64_t n1 = 0, n2 = 0, sep = 0, low2 = 0, root = 0;
  std::vector<uint64_t> allocated;
  auto fail = [&](Status s) {
    for (uint64_t o : allocated) pool_.allocator().Free(o);
    if (ko_.bytes()) {
      if (sep && leaf) ko_.FreeWord(pool_, sep);
      if (low2) ko_.FreeWord(pool_, low2);
    }
    return s;
  };
  Status s = AllocPage(&n1);
  if (!s.ok()) return fail(s);
  allocated.push_back(n1);
  if (!(s = AllocPage(&n2)).ok()) return fail(s);
  allocated.push_back(n2);
  const bool is_root = i + 1 == static_cast<int>(path.size());
  if (is_root) {
    if (!(s = AllocPage(&root)).ok()) return fail(s);
    allocated.push_back(root);
  }
  Page* p1 = P(n1);
  Page* p2 = P(n2);
  InitPage(p1, pg->level, Load(pg->low), NegInf(pg), n2);
  if (leaf) {
    const int n = static_cast<int>(c.live.size());
    const int m = n / 2;
    if (!(s = ko_.CopyWord(pool_, c.live[m].key, &sep)).ok()) return fail(s);
    if (!(s = ko_.CopyWord(pool_, c.live[m].key, &low2)).ok()) return fail(s);
    InitPage(p2, 0, low2, false, Load(pg->sibling));
    FillLeaf(p1, c.live.data(), m);
    FillLeaf(p2, c.live.data() + m, n - m);
  } else {
    const int k = static_cast<int>(c.keys.size());
    const int m = k / 2;  // the median separator moves up
    sep = c.keys[m];
    if (!(s = ko_.CopyWord(pool_, sep, &low2)).ok()) return fail(s);
    InitPage(p2, pg->level, low2, false, Load(pg->sibling));
    FillInner(p1, std::vector<uint64_t>(c.children.begin(), c.children.begin() + m + 1),
              std::vector<uint64_t>(c.keys.begin(), c.keys.begin() + m));
    FillInner(p2, std::vector<uint64_t>(c.children.begin() + m + 1, c.children.end()),
              std::vector<uint64_t>(c.keys.begin() + m + 1, c.keys.end()));
  }
  FlushPage(p1);
  FlushPage(p2);
  // crash-site: redundant: fence after flushing new pages: every path after it runs a persist (so a fence) before the first persistent store that names a new page (Replace's step 1 when the left neighbour exists, else its first persist: a split's new BST node, a redistribution's word naming the old left page; a new root's own fence)
  pm::fence();
  if (is_root) {
    Page* r = P(root);
    InitPage(r, pg->level + 1, 0, true, 0);
    r->node[0] = {sep, 0, n1, n2};
    r->root = NodeRef(0);
    r->count = 1;
    FlushPage(r);
    pm::fence();
    Store(rb_->root, root);  // COMMIT: the tree grows by one level
    pm::persist(&rb_->root, 8);
  } else {
    const uint64_t parent = path[i + 1].page;
    const int slot = FreeSlot(P(parent));
    Replace(parent, {off}, {path[i].where.word}, -1, nullptr, {n1, n2}, sep, slot);
  }
  FreeOldPage(off, false);  // its low moved to n1
  return Status::OK();
}

// Rebuilds page path[i] (a leaf with many tombstones) into one new page.
Status B3Tree::DefragPage(const std::vector<PathStep>& path, int i) {
  const uint64_t off = path[i].page;
  Page* pg = P(off);
  const Contents c = Read(pg);
  uint64_t n1 = 0;
  WORT_RETURN_IF_ERROR(AllocPage(&n1));
  Page* p1 = P(n1);
  InitPage(p1, pg->level, Load(pg->low), NegInf(pg), Load(pg->sibling));
  FillLeaf(p1, c.live.data(), static_cast<int>(c.live.size()));
  FlushPage(p1);
  pm::fence();
  if (i + 1 == static_cast<int>(path.size())) {
    Store(rb_->root, n1);  // COMMIT
    pm::persist(&rb_->root, 8);
  } else {
    Replace(path[i + 1].page, {off}, {path[i].where.word}, -1, nullptr, {n1}, 0, -1);
  }
  FreeOldPage(off, false);
  return Status::OK();
}

Status B3Tree::Put(std::string_view key, uint64_t value, bool upsert, bool* inserted) {
  WORT_RETURN_IF_ERROR(CheckWrite(key));
  const Probe p = ko_.MakeProbe(key);
  std::unique_lock<std::shared_mutex> g(*lock_);
  std::vector<PathStep> path;
  for (int round = 0; round < 128; ++round) {
    if (!Descend(p, 0, &path)) return Status::Corruption("b3tree: the descent meets an offset that is not a page");
    Page* leaf = P(path[0].page);
    uint64_t* at = nullptr;
    const int found = FindInLeaf(leaf, p, &at);
    if (found >= 0) {
      BNode& n = leaf->node[found];
      if (!(Load(n.right) & kDeleted)) {
        if (!upsert) return Status::AlreadyExists("key exists");
        Store(n.val, value);  // COMMIT (failure-atomic replace)
        pm::persist(&n.val, 8);
        if (inserted) *inserted = false;
        return Status::OK();
      }
      // Revive the tombstone (it keeps its key block).
      Store(n.val, value);
      // crash-site: redundant: val and right share one line (BNode: 32-byte aligned), so the COMMIT persist of right below writes val back with it; only --torn (8-byte write-back) needs this persist.
      pm::persist(&n.val, 8);
      Store(n.right, Load(n.right) & ~kDeleted);  // COMMIT
      pm::persist(&n.right, 8);
      size_.Add(1);
      if (inserted) *inserted = true;
      return Status::OK();
    }
    const int slot = FreeSlot(leaf);
    if (slot >= 0) {
      uint64_t kw = 0;
      WORT_RETURN_IF_ERROR(ko_.MakeWord(pool_, p, &kw));
      // Algorithm 1: write the node -> persist -> count -> persist -> link (COMMIT) -> persist.
      BNode& n = leaf->node[slot];
      Store(n.key, kw);
      Store(n.val, value);
      Store(n.left, 0);
      Store(n.right, 0);
      pm::persist(&n, sizeof(BNode));
      if (slot >= Count(leaf)) {
        Store(leaf->count, slot + 1);
        pm::persist(&leaf->count, 8);
      }
      SetRef(at, NodeRef(slot));  // COMMIT
      pm::persist(at, 8);
      size_.Add(1);
      if (inserted) *inserted = true;
      return Status::OK();
    }
    // The leaf is full. Many tombstones: rebuild it in place of a split.
    if (Live(leaf) <= nodes_ / 2) {
      WORT_RETURN_IF_ERROR(DefragPage(path, 0));
      continue;
    }
    // Split the highest full page of the path first, so that each split's parent has room.
    int top = 0;
    while (top + 1 < static_cast<int>(path.size()) && FreeSlot(P(path[top + 1].page)) < 0) ++top;
    WORT_RETURN_IF_ERROR(SplitPage(path, top));
  }
  return Status::Corruption("b3tree: insert did not converge");
}

// ---- delete ----------------------------------------------------------------------------------

Status B3Tree::Remove(std::string_view key) {
  WORT_RETURN_IF_ERROR(CheckWrite(key));
  const Probe p = ko_.MakeProbe(key);
  std::unique_lock<std::shared_mutex> g(*lock_);
  std::vector<PathStep> path;
  if (!Descend(p, 0, &path)) return Status::Corruption("b3tree: the descent meets an offset that is not a page");
  Page* leaf = P(path[0].page);
  const int i = FindInLeaf(leaf, p, nullptr);
  if (i < 0 || (Load(leaf->node[i].right) & kDeleted)) return Status::NotFound("key not found");
  Store(leaf->node[i].right, Load(leaf->node[i].right) | kDeleted);  // COMMIT: a tombstone
  pm::persist(&leaf->node[i].right, 8);
  size_.Add(-1);
  if (path.size() > 1 && Live(leaf) < min_live_) Rebalance(path, 0);
  return Status::OK();
}

// Merges or redistributes the under-full page path[i] with its partner: the page on the other
// side of its own parent BST node (b3tree.h, D3).
void B3Tree::Rebalance(const std::vector<PathStep>& path, int i) {
  const uint64_t xoff = path[i].page;
  const uint64_t poff = path[i + 1].page;
  Page* pp = P(poff);
  uint64_t* xw = path[i].where.word;
  if (xw == &pp->root) return;  // the parent names this page alone: no partner under it
  // Find the BST node owning xw, and the word naming that node.
  int xnode = -1;
  uint64_t* xnode_word = nullptr;
  {
    std::vector<uint64_t*> work{&pp->root};
    std::bitset<kMaxNodes> used;
    while (!work.empty() && xnode < 0) {
      uint64_t* w = work.back();
      work.pop_back();
      const uint64_t r = RefOf(Load(*w));
      if (!IsNode(r) || NodeIdx(r) >= nodes_ || used[NodeIdx(r)]) continue;
      used[NodeIdx(r)] = true;
      BNode& n = pp->node[NodeIdx(r)];
      if (&n.left == xw || &n.right == xw) {
        xnode = NodeIdx(r);
        xnode_word = w;
      }
      work.push_back(&n.left);
      work.push_back(&n.right);
    }
  }
  if (xnode < 0) return;
  BNode& x = pp->node[xnode];
  uint64_t loff, roff;
  uint64_t *lw, *rw;
  if (xw == &x.left) {  // partner: the leftmost page of x.right
    loff = xoff;
    lw = xw;
    rw = &x.right;
    for (int guard = 0; guard <= nodes_ && IsNode(RefOf(Load(*rw))); ++guard) rw = &pp->node[NodeIdx(RefOf(Load(*rw)))].left;
    roff = RefOf(Load(*rw));
  } else {  // partner: the rightmost page of x.left
    roff = xoff;
    rw = xw;
    lw = &x.left;
    for (int guard = 0; guard <= nodes_ && IsNode(RefOf(Load(*lw))); ++guard) lw = &pp->node[NodeIdx(RefOf(Load(*lw)))].right;
    loff = RefOf(Load(*lw));
  }
  Page* lp = P(loff);
  Page* rp = P(roff);
  const bool leaf = IsLeaf(lp);
  const Contents lc = Read(lp), rc = Read(rp);
  std::vector<uint64_t> alloc;
  auto undo = [&]() {
    for (uint64_t o : alloc) pool_.allocator().Free(o);
  };
  const uint64_t old_sep = Load(x.key);
  if (leaf) {
    std::vector<KV> all(lc.live);
    all.insert(all.end(), rc.live.begin(), rc.live.end());
    const int total = static_cast<int>(all.size());
    if (total < 2 * min_live_) {  // merge: redistribution would leave both under-full
      uint64_t m = 0;
      if (!AllocPage(&m).ok()) return;
      Page* mp = P(m);
      InitPage(mp, 0, Load(lp->low), NegInf(lp), Load(rp->sibling));
      FillLeaf(mp, all.data(), total);
      FlushPage(mp);
      pm::fence();
      Replace(poff, {loff, roff}, {lw, rw}, xnode, xnode_word, {m}, 0, -1);
      ko_.FreeWord(pool_, old_sep);  // the separator left the parent
      FreeOldPage(loff, false);
      FreeOldPage(roff, true);
    } else {
      const int j = total / 2;
      uint64_t h1 = 0, h2 = 0, sep = 0, low2 = 0;
      if (!AllocPage(&h1).ok()) return;
      alloc.push_back(h1);
      if (!AllocPage(&h2).ok()) return undo();
      alloc.push_back(h2);
      if (!ko_.CopyWord(pool_, all[j].key, &sep).ok()) return undo();
      if (!ko_.CopyWord(pool_, all[j].key, &low2).ok()) {
        if (ko_.bytes()) ko_.FreeWord(pool_, sep);
        return undo();
      }
      Page* p1 = P(h1);
      Page* p2 = P(h2);
      InitPage(p1, 0, Load(lp->low), NegInf(lp), h2);
      InitPage(p2, 0, low2, false, Load(rp->sibling));
      FillLeaf(p1, all.data(), j);
      FillLeaf(p2, all.data() + j, total - j);
      FlushPage(p1);
      FlushPage(p2);
      // crash-site: redundant: fence after flushing new pages: every path after it runs a persist (so a fence) before the first persistent store that names a new page (Replace's step 1 when the left neighbour exists, else its first persist: a split's new BST node, a redistribution's word naming the old left page; a new root's own fence)
      pm::fence();
      Replace(poff, {loff, roff}, {lw, rw}, xnode, xnode_word, {h1, h2}, sep, -1);
      ko_.FreeWord(pool_, old_sep);
      FreeOldPage(loff, false);
      FreeOldPage(roff, true);
    }
  } else {
    std::vector<uint64_t> ch(lc.children), keys(lc.keys);
    keys.push_back(old_sep);
    ch.insert(ch.end(), rc.children.begin(), rc.children.end());
    keys.insert(keys.end(), rc.keys.begin(), rc.keys.end());
    const int nk = static_cast<int>(keys.size());
    if (nk < 2 * min_live_ && nk <= nodes_) {  // merge; the separator moves down into the page
      uint64_t m = 0;
      if (!AllocPage(&m).ok()) return;
      Page* mp = P(m);
      InitPage(mp, lp->level, Load(lp->low), NegInf(lp), Load(rp->sibling));
      FillInner(mp, ch, keys);
      FlushPage(mp);
      pm::fence();
      Replace(poff, {loff, roff}, {lw, rw}, xnode, xnode_word, {m}, 0, -1);
      FreeOldPage(loff, false);
      FreeOldPage(roff, true);
    } else {
      const int mid = nk / 2;  // keys[mid] becomes the separator
      uint64_t h1 = 0, h2 = 0, low2 = 0;
      if (!AllocPage(&h1).ok()) return;
      alloc.push_back(h1);
      if (!AllocPage(&h2).ok()) return undo();
      alloc.push_back(h2);
      if (!ko_.CopyWord(pool_, keys[mid], &low2).ok()) return undo();
      Page* p1 = P(h1);
      Page* p2 = P(h2);
      InitPage(p1, lp->level, Load(lp->low), NegInf(lp), h2);
      InitPage(p2, lp->level, low2, false, Load(rp->sibling));
      FillInner(p1, std::vector<uint64_t>(ch.begin(), ch.begin() + mid + 1), std::vector<uint64_t>(keys.begin(), keys.begin() + mid));
      FillInner(p2, std::vector<uint64_t>(ch.begin() + mid + 1, ch.end()), std::vector<uint64_t>(keys.begin() + mid + 1, keys.end()));
      FlushPage(p1);
      FlushPage(p2);
      // crash-site: redundant: fence after flushing new pages: every path after it runs a persist (so a fence) before the first persistent store that names a new page (Replace's step 1 when the left neighbour exists, else its first persist: a split's new BST node, a redistribution's word naming the old left page; a new root's own fence)
      pm::fence();
      Replace(poff, {loff, roff}, {lw, rw}, xnode, xnode_word, {h1, h2}, keys[mid], -1);
      // old_sep moved into h1 or h2 (unless it is keys[mid], now x's key again): nothing to free.
      FreeOldPage(loff, false);
      FreeOldPage(roff, true);
      return;
    }
  }
  // A merge removed a BST node from the parent.
  if (i + 2 == static_cast<int>(path.size())) {
    if (!IsNode(RefOf(Load(pp->root)))) {  // the root names a single page: collapse
      Store(rb_->root, RefOf(Load(pp->root)));  // COMMIT
      pm::persist(&rb_->root, 8);
      pool_.allocator().Free(poff);
    }
  } else if (InnerNodes(pp) < min_live_) {
    Rebalance(path, i + 1);
  }
}

// ---- recovery (b3tree.h, D2) -------------------------------------------------------------------

void B3Tree::Reachable(std::unordered_set<uint64_t>* out) const {
  VisitLocked(pool_, root_off_, [&](uint64_t off) { out->insert(off); });
}

Status B3Tree::Repair(const std::vector<std::vector<ChainPage>>& chains) {
  // Blocks reachable before the first rebuild (the post-crash GC keeps exactly these), collected
  // only when a page needs one: an image whose parents all match their chains (every operation
  // returned, as kill -9 usually leaves it) is not written, and nothing becomes unreachable.
  std::unordered_set<uint64_t> before;
  bool rebuilt = false;
  std::vector<uint64_t> expect, children, seps;
  for (int level = static_cast<int>(chains.size()) - 2; level >= 0; --level) {
    // The chain of `level`, and of its parents, as the image holds them: so far only pages above
    // level + 1 were rebuilt, and a rebuild writes the parent level of the page it replaces and
    // that page's left neighbour, nothing below; a parent rebuilt below is never read again
    // (only the next one is), and its replacement keeps its low key word.
    const std::vector<ChainPage>& chain = chains[level];
    const std::vector<ChainPage>& parents = chains[level + 1];
    // Each parent page must name exactly the chain pages in its key range, in order.
    size_t ci = 0;
    for (size_t pi = 0; pi < parents.size(); ++pi) {
      const uint64_t poff = parents[pi].off;
      Page* pp = P(poff);
      const ChainPage* next = pi + 1 < parents.size() ? &parents[pi + 1] : nullptr;
      const size_t first = ci;
      expect.clear();
      while (ci < chain.size()) {
        if (next != nullptr && !expect.empty() && !chain[ci].neg_inf && ko_.CompareWords(chain[ci].low, next->low) >= 0)
          break;
        expect.push_back(chain[ci++].off);
      }
      children.clear();
      seps.clear();
      ForInOrder(pp, [&](int i) { seps.push_back(Load(pp->node[i].key)); }, [&](uint64_t r) { children.push_back(r); });
      bool ok = children == expect;
      for (size_t k = 0; ok && k < seps.size(); ++k)
        ok = first + k + 1 < ci && ko_.CompareWords(seps[k], chain[first + k + 1].low) == 0;
      if (ok) continue;
      if (!rebuilt) {
        Reachable(&before);  // nothing is written (or allocated) before this point
        rebuilt = true;
      }
      // Rebuild the parent page naming `expect`, separators copied from the pages' low keys.
      std::vector<uint64_t> keys;
      for (size_t k = 1; k < expect.size(); ++k) {
        uint64_t kw = 0;
        WORT_RETURN_IF_ERROR(ko_.CopyWord(pool_, chain[first + k].low, &kw));
        keys.push_back(kw);
      }
      if (keys.size() > static_cast<size_t>(nodes_)) return Status::Corruption("b3tree: repair: too many children");
      uint64_t np = 0;
      WORT_RETURN_IF_ERROR(AllocPage(&np));
      Page* npp = P(np);
      InitPage(npp, pp->level, Load(pp->low), NegInf(pp), Load(pp->sibling));
      FillInner(npp, expect, keys);
      FlushPage(npp);
      pm::fence();
      // Replace pp by np through its own parent (consistent: levels above are repaired).
      const std::vector<PathStep> path = PathTo(poff);
      if (path[0].page != poff) return Status::Corruption("b3tree: repair: parent page not found");
      if (path.size() == 1) {
        Store(rb_->root, np);
        // The repair's new root word: needed (Repair then frees the old root; a later allocation
        // can reuse it while the word is still dirty); the plan's recovery_persists check catches
        // its removal.
        pm::persist(&rb_->root, 8);
      } else {
        Replace(path[1].page, {poff}, {path[0].where.word}, -1, nullptr, {np}, 0, -1);
      }
    }
  }
  // Free what the repair made unreachable (old pages, separators, ...).
  if (!rebuilt) return Status::OK();
  std::unordered_set<uint64_t> after;
  Reachable(&after);
  for (uint64_t b : before)
    if (!after.count(b)) pool_.allocator().Free(b);
  return Status::OK();
}

// ---- check / stats / visit -------------------------------------------------------------------

Status B3Tree::Check(std::string* report) const {
  std::shared_lock<std::shared_mutex> g(*lock_);
  Findings fail("b3tree");
  const uint64_t limit = pool_.size() / page_bytes_ + 1;
  const uint64_t root = Root();
  const int height = static_cast<int>(P(root)->level);
  if (Load(P(root)->sibling) != 0) fail("root page has a sibling");
  if (!NegInf(P(root))) fail("root page's low key is not minus infinity");
  uint64_t live = 0;
  std::vector<uint64_t> upper;
  for (int level = height; level >= 0; --level) {
    std::vector<uint64_t> chain;
    uint64_t seen = 0;
    for (uint64_t off = FirstOfLevel(level); off != 0; off = Load(P(off)->sibling)) {
      if (seen++ > limit || !pool_.contains(off, page_bytes_) || (off & 63)) {
        fail("level " + std::to_string(level) + ": chain leaves the pool or loops");
        break;
      }
      chain.push_back(off);
    }
    if (level < height && chain != upper && !tolerant_)
      fail("level " + std::to_string(level) + ": chain (" + std::to_string(chain.size()) +
           " pages) differs from the parents' children (" + std::to_string(upper.size()) + ")");
    std::vector<uint64_t> next_upper;
    for (size_t ci = 0; ci < chain.size(); ++ci) {
      const Page* pg = P(chain[ci]);
      const std::string where = "page @" + std::to_string(chain[ci]) + " (level " + std::to_string(level) + ")";
      if (static_cast<int>(pg->level) != level) fail(where + ": level field " + std::to_string(pg->level));
      if ((ci == 0) != NegInf(pg)) fail(where + ": minus-infinity flag wrong");
      if (!NegInf(pg) && !ko_.PlausibleBlock(Load(pg->low))) fail(where + ": low key block invalid");
      std::vector<int> nodes;
      std::vector<uint64_t> children;
      InOrder(pg, &nodes, level > 0 ? &children : nullptr);
      for (int i : nodes)
        if (i >= Count(pg)) fail(where + ": BST uses node " + std::to_string(i) + " past count");
      for (size_t k = 0; k < nodes.size(); ++k) {
        const BNode& n = pg->node[nodes[k]];
        const uint64_t kw = Load(n.key);
        if (!ko_.PlausibleBlock(kw)) {
          fail(where + ": key block invalid");
          continue;
        }
        if (k > 0 && ko_.PlausibleBlock(Load(pg->node[nodes[k - 1]].key)) &&
            ko_.CompareWords(Load(pg->node[nodes[k - 1]].key), kw) >= 0)
          fail(where + ": in-order keys not increasing");
        if (!NegInf(pg) && ko_.CompareWords(kw, Load(pg->low)) < 0) fail(where + ": key below the low key");
        const uint64_t sib = Load(pg->sibling);
        if (sib && pool_.contains(sib, page_bytes_) && ko_.PlausibleBlock(Load(P(sib)->low)) &&
            ko_.CompareWords(kw, Load(P(sib)->low)) >= 0 && !tolerant_)
          fail(where + ": key at or past the sibling's low key");
        if (level == 0) {
          if ((RefOf(Load(n.left)) != 0 && !IsNode(RefOf(Load(n.left)))) || (RefOf(Load(n.right)) != 0 && !IsNode(RefOf(Load(n.right)))))
            fail(where + ": leaf BST node names a page");
          if (!(Load(n.right) & kDeleted)) ++live;
        } else if (RefOf(Load(n.left)) == 0 || RefOf(Load(n.right)) == 0) {
          fail(where + ": inner BST node without two children");
        }
      }
      if (level > 0) {
        if (children.size() != nodes.size() + 1) fail(where + ": children count does not match BST nodes");
        for (size_t k = 0; k < children.size(); ++k) {
          const uint64_t ch = children[k];
          next_upper.push_back(ch);
          if (!pool_.contains(ch, page_bytes_) || (ch & 63)) {
            fail(where + ": child page outside the pool or not page-aligned");
            continue;
          }
          const Page* cp = P(ch);
          if (tolerant_) continue;  // logical pages: separators and words may lag the chain
          if (k == 0) {
            if (NegInf(cp) != NegInf(pg) || (!NegInf(pg) && ko_.CompareWords(Load(cp->low), Load(pg->low)) != 0))
              fail(where + ": first child's low key differs from the page's");
          } else if (k - 1 < nodes.size()) {
            if (NegInf(cp) || ko_.CompareWords(Load(cp->low), Load(pg->node[nodes[k - 1]].key)) != 0)
              fail(where + ": separator differs from the child's low key");
          }
        }
      }
    }
    upper = std::move(next_upper);
  }
  if (!tolerant_ && size_.known() && live != size_.peek())
    fail("Size() " + std::to_string(size_.peek()) + " but leaves hold " + std::to_string(live));
  return fail.Finish(report);
}

IndexStats B3Tree::Stats() const {
  std::shared_lock<std::shared_mutex> g(*lock_);
  IndexStats st;
  st.keys = size_.GetLocked([this] { return CountKeys(); });
  const int height = static_cast<int>(P(Root())->level);
  st.avg_leaf_depth = height;
  const uint64_t limit = pool_.size() / page_bytes_ + 1;
  for (int level = height; level >= 0; --level) {
    uint64_t seen = 0;
    for (uint64_t off = FirstOfLevel(level); off != 0 && seen++ < limit; off = Sibling(off))
      (level == 0 ? st.leaves : st.inner_nodes)++;
  }
  // The index's own blocks: root block, pages, low keys and BST node keys (not the values).
  st.bytes_allocated = UsableBytes(pool_, [&](const std::function<void(uint64_t)>& add) {
    add(root_off_);
    for (int level = height; level >= 0; --level) {
      uint64_t n = 0;
      for (uint64_t off = FirstOfLevel(level); off != 0 && n++ < limit; off = Sibling(off)) {
        const Page* pg = P(off);
        add(off);
        if (!ko_.bytes()) continue;
        if (!NegInf(pg)) add(Load(pg->low));
        std::vector<int> nodes;
        InOrder(pg, &nodes);
        for (int i : nodes) add(Load(pg->node[i].key));
      }
    }
  });
  return st;
}

void B3Tree::VisitLocked(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark) {
  mark(root_off);
  const auto* rb = pool.at<RootBlock>(root_off);
  const auto [bytes, vab] = ReadRootFlags(rb);
  const uint64_t page_bytes = RootPageBytes(rb);
  if (page_bytes == 0) return;  // not a page size: Open refuses this index, and reports nothing in it
  const int nodes = NodesPerPage(page_bytes);
  std::unordered_set<uint64_t> seen;
  std::vector<uint64_t> stack{Load(rb->root)};
  const uint64_t limit = pool.size() / page_bytes + 1;
  while (!stack.empty()) {
    const uint64_t off = stack.back();
    stack.pop_back();
    if (off == 0 || (off & 63) || !pool.contains(off, page_bytes) || !seen.insert(off).second || seen.size() > limit) continue;
    mark(off);
    const Page* pg = pool.at<Page>(off);
    if (bytes && !NegInf(pg)) mark(Load(pg->low));
    stack.push_back(Load(pg->sibling));
    // The page's reachable BST nodes (bounded walk).
    std::bitset<kMaxNodes> used;
    std::vector<uint64_t> work{RefOf(Load(pg->root))};
    while (!work.empty()) {
      const uint64_t r = work.back();
      work.pop_back();
      if (r == 0) continue;
      if (!IsNode(r)) {
        if (pg->level > 0) stack.push_back(r);
        continue;
      }
      const int i = NodeIdx(r);
      if (i >= nodes || used[i]) continue;
      used[i] = true;
      const BNode& n = pg->node[i];
      if (bytes) mark(Load(n.key));
      if (pg->level == 0 && vab && !(Load(n.right) & kDeleted)) mark(Load(n.val));
      work.push_back(RefOf(Load(n.left)));
      work.push_back(RefOf(Load(n.right)));
    }
  }
}

// ---- registration ----------------------------------------------------------------------------

Status Create(Pool& pool, const IndexOptions& opts, uint64_t* root_off) {
  const char* env = std::getenv("WORT_B3_REBALANCE");
  if (env && std::string_view(env) != "0" && std::string_view(env) != "1")
    return Status::InvalidArgument("WORT_B3_REBALANCE must be 0 or 1");
  const bool off = opts.b3_no_rebalance || (env && std::string_view(env) == "0");
  const uint64_t page_bytes = opts.b3_page_bytes ? opts.b3_page_bytes : kDefaultPageBytes;
  if (!ValidPageBytes(page_bytes))
    return Status::InvalidArgument("b3tree: the page size (IndexOptions::b3_page_bytes) must be a power of two in [" +
                                   std::to_string(kMinPageBytes) + ", " + std::to_string(kMaxPageBytes) + "], not " +
                                   std::to_string(page_bytes));
  // 1 KB pages keep the original root block (kRootMagic, no size field): readable by builds that
  // predate the option. Other sizes use kRootMagicSized, which those builds refuse (b3tree.h).
  const bool sized = page_bytes != kDefaultPageBytes;
  return CreateTree(pool, opts, sized ? kRootMagicSized : kRootMagic, off ? kRootNoRebalance : 0, &RootBlock::root,
                    page_bytes, [&](uint64_t off) {
    Page* pg = pool.at<Page>(off);
    pg->flags = kFlagNegInf;  // an empty leaf page: the whole tree
    pm::persist(pg, 64);      // the header: an empty page reads nothing else
  }, root_off, [&](RootBlock* rb) {
    rb->page_bytes = sized ? page_bytes : 0;  // persisted with the rest of the root block
  });
}

Status Open(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) {
  return OpenTree<B3Tree, RootBlock>(pool, root_off, "b3tree", out);
}

const IndexKind kKind = {"b3tree", kind_id::kB3Tree,
                         "B3-tree: failure-atomic BST inside each page, lazy defragmentation, logical-page split/merge",
                         true, &Create, &Open, &VisitShared<&B3Tree::VisitLocked>};

}  // namespace
}  // namespace wort::btree::b3

// Listed in the table of built-in kinds (BuiltinIndexKinds, src/index/registry.cc).
const wort::IndexKind* wort::builtin_kinds::B3Tree() { return &wort::btree::b3::kKind; }
