// "vbptree": a plain volatile B+-tree in DRAM, the B-tree reference of the WORT paper's figures.
// Data is lost on close (see volatile_common.h: the pool holds a marker only; reopen is empty).
//
// Nodes hold up to kFanout sorted keys (std::string, so 8-byte keys stay inline by SSO) and are
// searched by binary search; leaves are linked left to right (sibling) for scans. A full node
// splits in half on the way back up; a delete removes the entry and frees a leaf that becomes
// empty (no merging or redistribution otherwise: the reference is insert/search oriented).
//
// Invariants (DoCheck verifies them):
//   V1. Every node's keys are strictly increasing; an inner node with k keys has k+1 children.
//   V2. All leaves are at the same depth; keys of child i lie in [key[i-1], key[i]).
//   V3. The leaf chain visits every leaf in key order; no leaf but a root leaf is empty.
#include <algorithm>
#include <vector>

#include "index/kind_ids.h"
#include "index/registry.h"
#include "index/volatile/volatile_common.h"

namespace wort::vol {
namespace {

constexpr int kFanout = 32;

struct Node {
  bool leaf;
  std::vector<std::string> keys;
  std::vector<uint64_t> vals;     // leaf
  std::vector<Node*> children;    // inner: keys.size() + 1
  Node* next = nullptr;           // leaf sibling
  explicit Node(bool l) : leaf(l) {}
};

// First index with keys[i] >= k (leaf) / child index for k (inner).
int LowerBound(const Node* n, std::string_view k) {
  int lo = 0, hi = static_cast<int>(n->keys.size());
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (CompareKeys(n->keys[mid], k) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
int ChildIndex(const Node* n, std::string_view k) {
  int lo = 0, hi = static_cast<int>(n->keys.size());  // first key > k
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (CompareKeys(n->keys[mid], k) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

class VbpTree final : public VolatileIndex {
 public:
  using VolatileIndex::VolatileIndex;
  ~VbpTree() override { Destroy(root_); }
  std::string_view kind() const override { return "vbptree"; }

 protected:
  Status DoPut(std::string_view key, uint64_t value, bool replace, bool* inserted) override {
    std::string up_key;
    Node* up_node = nullptr;
    Put(root_, key, value, replace, inserted, &up_key, &up_node);
    if (up_node) {
      auto* r = new Node(false);
      r->keys.push_back(std::move(up_key));
      r->children = {root_, up_node};
      root_ = r;
      ++height_;
    }
    return Status::OK();
  }

  bool DoLookup(std::string_view key, uint64_t* value) const override {
    const Node* n = root_;
    while (!n->leaf) n = n->children[ChildIndex(n, key)];
    const int i = LowerBound(n, key);
    if (i < static_cast<int>(n->keys.size()) && n->keys[i] == key) {
      *value = n->vals[i];
      return true;
    }
    return false;
  }

  bool DoRemove(std::string_view key) override {
    bool found = false;
    Erase(root_, key, &found);
    if (root_->leaf == false && root_->children.size() == 1) {
      Node* old = root_;
      root_ = old->children[0];
      old->children.clear();
      delete old;
      --height_;
    }
    return found;
  }

  void DoScan(std::string_view start, const Emit& emit) const override {
    const Node* n = root_;
    while (!n->leaf) n = n->children[ChildIndex(n, start)];
    int i = LowerBound(n, start);
    for (; n; n = n->next, i = 0)
      for (; i < static_cast<int>(n->keys.size()); ++i)
        if (!emit(n->keys[i], n->vals[i])) return;
  }

  uint64_t DoCheck(std::string* report) const override {
    uint64_t keys = 0;
    std::vector<const Node*> leaves;
    CheckNode(root_, 0, nullptr, nullptr, report, &keys, &leaves);
    const Node* n = leaves.empty() ? nullptr : leaves[0];
    for (size_t i = 0; i < leaves.size(); ++i, n = n ? n->next : nullptr)
      if (n != leaves[i]) {
        *report += "leaf chain differs from tree order\n";
        break;
      }
    if (n) *report += "leaf chain longer than the tree\n";
    return keys;
  }

  void DoStats(IndexStats* st) const override {
    uint64_t bytes = 0;
    Count(root_, st, &bytes);
    st->avg_leaf_depth = height_;
    st->volatile_bytes = bytes;
  }

 private:
  // Inserts below n; on a split of n returns the new right node and its separator.
  void Put(Node* n, std::string_view key, uint64_t value, bool replace, bool* inserted, std::string* up_key,
           Node** up_node) {
    if (n->leaf) {
      const int i = LowerBound(n, key);
      if (i < static_cast<int>(n->keys.size()) && n->keys[i] == key) {
        if (replace) n->vals[i] = value;
        *inserted = false;
        return;
      }
      n->keys.insert(n->keys.begin() + i, std::string(key));
      n->vals.insert(n->vals.begin() + i, value);
      *inserted = true;
      if (static_cast<int>(n->keys.size()) > kFanout) {
        auto* r = new Node(true);
        const size_t m = n->keys.size() / 2;
        r->keys.assign(std::make_move_iterator(n->keys.begin() + m), std::make_move_iterator(n->keys.end()));
        r->vals.assign(n->vals.begin() + m, n->vals.end());
        n->keys.resize(m);
        n->vals.resize(m);
        r->next = n->next;
        n->next = r;
        *up_key = r->keys[0];
        *up_node = r;
      }
      return;
    }
    const int c = ChildIndex(n, key);
    std::string k2;
    Node* r2 = nullptr;
    Put(n->children[c], key, value, replace, inserted, &k2, &r2);
    if (!r2) return;
    n->keys.insert(n->keys.begin() + c, std::move(k2));
    n->children.insert(n->children.begin() + c + 1, r2);
    if (static_cast<int>(n->keys.size()) > kFanout) {
      auto* r = new Node(false);
      const size_t m = n->keys.size() / 2;  // keys[m] moves up
      *up_key = std::move(n->keys[m]);
      r->keys.assign(std::make_move_iterator(n->keys.begin() + m + 1), std::make_move_iterator(n->keys.end()));
      r->children.assign(n->children.begin() + m + 1, n->children.end());
      n->keys.resize(m);
      n->children.resize(m + 1);
      *up_node = r;
    }
  }

  // Removes key below n. Returns true iff n became empty and must be dropped by its parent
  // (never for the root).
  bool Erase(Node* n, std::string_view key, bool* found) {
    if (n->leaf) {
      const int i = LowerBound(n, key);
      if (i < static_cast<int>(n->keys.size()) && n->keys[i] == key) {
        n->keys.erase(n->keys.begin() + i);
        n->vals.erase(n->vals.begin() + i);
        *found = true;
      }
      return n->keys.empty();
    }
    const int c = ChildIndex(n, key);
    Node* child = n->children[c];
    if (!Erase(child, key, found)) return false;
    // Drop the empty child: unlink a leaf from the chain first (its left neighbour in key order).
    if (child->leaf) {
      Node* prev = LeftLeaf(child);
      if (prev) prev->next = child->next;
    }
    delete child;
    n->children.erase(n->children.begin() + c);
    if (!n->keys.empty()) n->keys.erase(n->keys.begin() + (c > 0 ? c - 1 : 0));
    if (n->children.empty()) return true;
    return false;
  }

  // The leaf before `leaf` in the chain (walks from the leftmost leaf; deletes that empty a leaf
  // are rare).
  Node* LeftLeaf(const Node* leaf) const {
    Node* n = root_;
    while (!n->leaf) n = n->children[0];
    if (n == leaf) return nullptr;
    while (n && n->next != leaf) n = n->next;
    return n;
  }

  void CheckNode(const Node* n, int depth, const std::string* lo, const std::string* hi, std::string* report,
                 uint64_t* keys, std::vector<const Node*>* leaves) const {
    for (size_t i = 0; i < n->keys.size(); ++i) {
      if (i > 0 && CompareKeys(n->keys[i - 1], n->keys[i]) >= 0) *report += "keys not increasing in a node\n";
      if (lo && CompareKeys(n->keys[i], *lo) < 0) *report += "key below its node's range\n";
      if (hi && CompareKeys(n->keys[i], *hi) >= 0) *report += "key above its node's range\n";
    }
    if (n->leaf) {
      if (depth != height_) *report += "leaf at depth " + std::to_string(depth) + ", height " + std::to_string(height_) + "\n";
      if (n->keys.empty() && n != root_) *report += "empty non-root leaf\n";
      if (n->vals.size() != n->keys.size()) *report += "leaf values/keys size mismatch\n";
      *keys += n->keys.size();
      leaves->push_back(n);
      return;
    }
    if (n->children.size() != n->keys.size() + 1) {
      *report += "inner node child count != keys + 1\n";
      return;
    }
    for (size_t i = 0; i < n->children.size(); ++i)
      CheckNode(n->children[i], depth + 1, i == 0 ? lo : &n->keys[i - 1], i == n->keys.size() ? hi : &n->keys[i],
                report, keys, leaves);
  }

  void Count(const Node* n, IndexStats* st, uint64_t* bytes) const {
    *bytes += sizeof(Node) + n->keys.capacity() * sizeof(std::string) + n->vals.capacity() * 8 +
              n->children.capacity() * sizeof(Node*);
    for (const auto& k : n->keys)
      if (k.capacity() > 15) *bytes += k.capacity() + 1;
    if (n->leaf) {
      ++st->leaves;
      return;
    }
    ++st->inner_nodes;
    for (const Node* c : n->children) Count(c, st, bytes);
  }

  static void Destroy(Node* n) {
    if (!n) return;
    for (Node* c : n->children) Destroy(c);
    delete n;
  }

  Node* root_ = new Node(true);
  int height_ = 0;
};

Status Create(Pool& pool, const IndexOptions& opts, uint64_t* root_off) {
  return CreateMarker(pool, opts, kind_id::kVbpTree, root_off);
}
Status Open(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) {
  KeyType kt;
  WORT_RETURN_IF_ERROR(ReadMarker(pool, root_off, kind_id::kVbpTree, &kt));
  *out = std::make_unique<VbpTree>(&pool, root_off, kt);
  return Status::OK();
}

const IndexKind kKind = {"vbptree", kind_id::kVbpTree,
                         "volatile reference: plain B+-tree in DRAM (sorted nodes, binary search, leaf siblings); "
                         "data lost on close",
                         true, &Create, &Open, &VisitMarker};
const bool kRegistered = RegisterIndexKind(&kKind);

}  // namespace
}  // namespace wort::vol
