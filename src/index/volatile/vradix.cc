// "vradix": a plain volatile radix tree in DRAM with a 4-bit span and no path compression (the
// layout of the WORT paper's radix-tree experiments, without persistence). Data is lost on close
// (see volatile_common.h: the pool holds a marker only; reopen is empty).
//
// A key of n bytes is the path of 2n nibbles (high nibble first) from the root; the node at the
// end of the path holds the value (has_value). A key that is a prefix of another ends at an inner
// node, so every node may hold a value and children. A delete clears the value and frees the
// nodes left with neither value nor child, bottom up.
//
// Invariants (DoCheck verifies them):
//   V1. Every node but the root holds a value or has a child (no dead branches).
//   V2. The number of nodes holding a value equals Size().
#include <vector>

#include "index/kind_ids.h"
#include "index/registry.h"
#include "index/volatile/volatile_common.h"

namespace wort::vol {
namespace {

constexpr int kSpan = 4;
constexpr int kFan = 1 << kSpan;

struct Node {
  Node* child[kFan] = {};
  uint64_t value = 0;
  bool has_value = false;
  uint8_t nchildren = 0;
};

inline int Nibble(std::string_view k, size_t d) {
  const auto b = static_cast<uint8_t>(k[d / 2]);
  return (d & 1) ? (b & 0xf) : (b >> 4);
}

class VRadix final : public VolatileIndex {
 public:
  using VolatileIndex::VolatileIndex;
  ~VRadix() override { Destroy(root_); }
  std::string_view kind() const override { return "vradix"; }

 protected:
  Status DoPut(std::string_view key, uint64_t value, bool replace, bool* inserted) override {
    Node* n = root_;
    for (size_t d = 0; d < key.size() * 2; ++d) {
      Node*& c = n->child[Nibble(key, d)];
      if (!c) {
        c = new Node;
        ++n->nchildren;
        ++nodes_;
      }
      n = c;
    }
    *inserted = !n->has_value;
    if (n->has_value && !replace) return Status::OK();
    n->has_value = true;
    n->value = value;
    return Status::OK();
  }

  bool DoLookup(std::string_view key, uint64_t* value) const override {
    const Node* n = root_;
    for (size_t d = 0; n && d < key.size() * 2; ++d) n = n->child[Nibble(key, d)];
    if (!n || !n->has_value) return false;
    *value = n->value;
    return true;
  }

  bool DoRemove(std::string_view key) override {
    std::vector<Node*> path;
    Node* n = root_;
    path.push_back(n);
    for (size_t d = 0; n && d < key.size() * 2; ++d) {
      n = n->child[Nibble(key, d)];
      if (n) path.push_back(n);
    }
    if (!n || !n->has_value) return false;
    n->has_value = false;
    // Free dead nodes bottom up (never the root).
    for (size_t i = path.size() - 1; i > 0; --i) {
      Node* x = path[i];
      if (x->has_value || x->nchildren) break;
      Node* p = path[i - 1];
      p->child[Nibble(key, i - 1)] = nullptr;
      --p->nchildren;
      delete x;
      --nodes_;
    }
    return true;
  }

  void DoScan(std::string_view start, const Emit& emit) const override {
    std::string key;
    Walk(root_, 0, start, true, &key, emit);
  }

  uint64_t DoCheck(std::string* report) const override {
    uint64_t keys = 0, nodes = 0;
    CheckNode(root_, true, report, &keys, &nodes);
    if (nodes != nodes_ + 1) *report += "node count mismatch\n";
    return keys;
  }

  void DoStats(IndexStats* st) const override {
    uint64_t leaf_depth_sum = 0;
    CountNode(root_, 0, st, &leaf_depth_sum);
    st->avg_leaf_depth = st->leaves ? static_cast<double>(leaf_depth_sum) / st->leaves : 0;
    st->volatile_bytes = (nodes_ + 1) * sizeof(Node);
  }

 private:
  // In-order walk: a node's own value (its key is a prefix of its children's) comes first.
  // `bounded`: the path so far equals start's first d nibbles, so subtrees below start are skipped.
  // `key` holds the bytes so far (a half byte is kept in its high nibble while d is odd).
  bool Walk(const Node* n, size_t d, std::string_view start, bool bounded, std::string* key, const Emit& emit) const {
    if (n->has_value && (!bounded || d >= start.size() * 2)) {
      if (!emit(*key, n->value)) return false;
    }
    int from = 0;
    if (bounded && d < start.size() * 2) from = Nibble(start, d);
    for (int i = from; i < kFan; ++i) {
      const Node* c = n->child[i];
      if (!c) continue;
      if (d & 1) key->back() = static_cast<char>(static_cast<uint8_t>(key->back()) | i);
      else key->push_back(static_cast<char>(i << 4));
      const bool b = bounded && d < start.size() * 2 && i == from;
      const bool go = Walk(c, d + 1, start, b, key, emit);
      if (d & 1) key->back() = static_cast<char>(static_cast<uint8_t>(key->back()) & 0xf0);
      else key->pop_back();
      if (!go) return false;
    }
    return true;
  }

  void CheckNode(const Node* n, bool root, std::string* report, uint64_t* keys, uint64_t* nodes) const {
    ++*nodes;
    int c = 0;
    for (const Node* x : n->child)
      if (x) ++c;
    if (c != n->nchildren) *report += "nchildren mismatch\n";
    if (!root && !n->has_value && c == 0) *report += "dead node (no value, no child)\n";
    if (n->has_value) ++*keys;
    for (const Node* x : n->child)
      if (x) CheckNode(x, false, report, keys, nodes);
  }

  void CountNode(const Node* n, int depth, IndexStats* st, uint64_t* sum) const {
    if (n->has_value) {
      ++st->leaves;
      *sum += depth;
    }
    if (n->nchildren) ++st->inner_nodes;
    for (const Node* x : n->child)
      if (x) CountNode(x, depth + 1, st, sum);
  }

  static void Destroy(Node* n) {
    for (Node* x : n->child)
      if (x) Destroy(x);
    delete n;
  }

  Node* root_ = new Node;
  uint64_t nodes_ = 0;  // nodes besides the root
};

Status Create(Pool& pool, const IndexOptions& opts, uint64_t* root_off) {
  return CreateMarker(pool, opts, kind_id::kVradix, root_off);
}
Status Open(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) {
  KeyType kt;
  WORT_RETURN_IF_ERROR(ReadMarker(pool, root_off, kind_id::kVradix, &kt));
  std::shared_ptr<void> token;
  WORT_RETURN_IF_ERROR(ClaimSoleHandle(&pool, root_off, "vradix", &token));
  auto idx = std::make_unique<VRadix>(&pool, root_off, kt);
  idx->KeepSoleHandle(std::move(token));
  *out = std::move(idx);
  return Status::OK();
}

const IndexKind kKind = {"vradix", kind_id::kVradix,
                         "volatile reference: plain radix tree in DRAM, 4-bit span, no path compression; "
                         "data lost on close",
                         true, &Create, &Open, &VisitMarker};

}  // namespace
}  // namespace wort::vol

// Listed in the table of built-in kinds (BuiltinIndexKinds, src/index/registry.cc).
const wort::IndexKind* wort::builtin_kinds::Vradix() { return &wort::vol::kKind; }
