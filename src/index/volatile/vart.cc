// "vart": a plain volatile Adaptive Radix Tree (Leis et al., ICDE 2013) in DRAM, the ART
// reference of the WORT paper's figures. Data is lost on close (see volatile_common.h: the pool
// holds a marker only; reopen is empty).
//
// Nodes: NODE4 and NODE16 (sorted key bytes beside their children, compared as unsigned bytes,
// linear/binary search without SIMD), NODE48 (child_index[256] holding position + 1, 0 = empty:
// see Slot48), NODE256 (a child per byte). Path compression is pessimistic: an inner node keeps
// its whole compressed prefix (std::string, no length limit). Leaves hold the whole key and the
// value; a child reference is tagged (low bit 1 = leaf: see the three helpers below). A key that
// ends at an inner node (a prefix of other keys) is that node's `term` leaf.
//
// Inserts grow a full node to the next type; a delete frees an emptied node, and a node left with
// one child and no term leaf is merged with that child (path compression restored). Nodes do not
// shrink to a smaller type (the reference is insert/search oriented).
//
// Invariants (DoCheck verifies them):
//   V1. Children of NODE4/16 are in strictly increasing unsigned key-byte order; count matches.
//   V2. Every leaf below a node at depth d has the node's path (d bytes + prefix) as its key prefix
//       and the child's key byte at the next position; a term leaf's key is the path itself.
//   V3. Every inner node has a term leaf or at least two children (no single-child chains).
#include <algorithm>
#include <cstring>
#include <vector>

#include "index/kind_ids.h"
#include "index/registry.h"
#include "index/volatile/volatile_common.h"

namespace wort::vol {
namespace {

enum NodeType : uint8_t { NODE4 = 0, NODE16 = 1, NODE48 = 2, NODE256 = 3 };

struct Leaf {
  std::string key;
  uint64_t value;
};

struct Inner;
// A child reference: an Inner* or a Leaf* with the low bit set (tagging helpers).
using Ref = uintptr_t;
inline bool IsLeaf(Ref r) { return (r & 1) != 0; }
inline Leaf* AsLeaf(Ref r) { return reinterpret_cast<Leaf*>(r & ~uintptr_t(1)); }
inline Ref LeafRef(Leaf* l) { return reinterpret_cast<uintptr_t>(l) | 1; }
inline Inner* AsInner(Ref r) { return reinterpret_cast<Inner*>(r); }
inline Ref InnerRef(Inner* n) { return reinterpret_cast<uintptr_t>(n); }

struct Inner {
  NodeType type;
  uint16_t count = 0;
  std::string prefix;
  Leaf* term = nullptr;
  explicit Inner(NodeType t) : type(t) {}
};
struct Node4 : Inner {
  uint8_t keys[4];
  Ref child[4] = {};
  Node4() : Inner(NODE4) {}
};
struct Node16 : Inner {
  uint8_t keys[16];
  Ref child[16] = {};
  Node16() : Inner(NODE16) {}
};
// NODE48 encoding: child_index[b] == 0 means no child for byte b; otherwise the child is
// child[child_index[b] - 1].
struct Node48 : Inner {
  uint8_t child_index[256] = {};
  Ref child[48] = {};
  Node48() : Inner(NODE48) {}
};
inline int Slot48(const Node48* n, uint8_t b) { return n->child_index[b] - 1; }
struct Node256 : Inner {
  Ref child[256] = {};
  Node256() : Inner(NODE256) {}
};

size_t NodeBytes(const Inner* n) {
  switch (n->type) {
    case NODE4: return sizeof(Node4);
    case NODE16: return sizeof(Node16);
    case NODE48: return sizeof(Node48);
    default: return sizeof(Node256);
  }
}

void DeleteInner(Inner* n) {
  switch (n->type) {
    case NODE4: delete static_cast<Node4*>(n); break;
    case NODE16: delete static_cast<Node16*>(n); break;
    case NODE48: delete static_cast<Node48*>(n); break;
    default: delete static_cast<Node256*>(n); break;
  }
}

// The slot holding the child for byte b, or nullptr.
Ref* FindChild(Inner* n, uint8_t b) {
  switch (n->type) {
    case NODE4: {
      auto* x = static_cast<Node4*>(n);
      for (int i = 0; i < x->count; ++i)
        if (x->keys[i] == b) return &x->child[i];
      return nullptr;
    }
    case NODE16: {
      auto* x = static_cast<Node16*>(n);
      uint8_t* e = std::lower_bound(x->keys, x->keys + x->count, b);
      return (e != x->keys + x->count && *e == b) ? &x->child[e - x->keys] : nullptr;
    }
    case NODE48: {
      auto* x = static_cast<Node48*>(n);
      const int s = Slot48(x, b);
      return s >= 0 ? &x->child[s] : nullptr;
    }
    default: {
      auto* x = static_cast<Node256*>(n);
      return x->child[b] ? &x->child[b] : nullptr;
    }
  }
}

// Calls fn(byte, ref) for every child in increasing byte order, from byte `from`; stops when fn
// returns false (and returns false).
template <class F>
bool ForEachChild(const Inner* n, int from, F&& fn) {
  switch (n->type) {
    case NODE4:
    case NODE16: {
      const uint8_t* keys = n->type == NODE4 ? static_cast<const Node4*>(n)->keys : static_cast<const Node16*>(n)->keys;
      const Ref* child = n->type == NODE4 ? static_cast<const Node4*>(n)->child : static_cast<const Node16*>(n)->child;
      for (int i = 0; i < n->count; ++i)
        if (keys[i] >= from && !fn(keys[i], child[i])) return false;
      return true;
    }
    case NODE48: {
      const auto* x = static_cast<const Node48*>(n);
      for (int b = from; b < 256; ++b)
        if (x->child_index[b] && !fn(static_cast<uint8_t>(b), x->child[x->child_index[b] - 1])) return false;
      return true;
    }
    default: {
      const auto* x = static_cast<const Node256*>(n);
      for (int b = from; b < 256; ++b)
        if (x->child[b] && !fn(static_cast<uint8_t>(b), x->child[b])) return false;
      return true;
    }
  }
}

// Copies header fields when a node changes type.
void CopyHeader(Inner* to, const Inner* from) {
  to->count = from->count;
  to->prefix = from->prefix;
  to->term = from->term;
}

// Adds child (b -> r) to *slot's node (REQUIRES: no child for b), growing it when full; *slot is
// updated when the node is replaced.
void AddChild(Ref* slot, uint8_t b, Ref r) {
  Inner* n = AsInner(*slot);
  switch (n->type) {
    case NODE4:
    case NODE16: {
      const int cap = n->type == NODE4 ? 4 : 16;
      uint8_t* keys = n->type == NODE4 ? static_cast<Node4*>(n)->keys : static_cast<Node16*>(n)->keys;
      Ref* child = n->type == NODE4 ? static_cast<Node4*>(n)->child : static_cast<Node16*>(n)->child;
      if (n->count < cap) {
        int i = n->count;
        while (i > 0 && keys[i - 1] > b) {
          keys[i] = keys[i - 1];
          child[i] = child[i - 1];
          --i;
        }
        keys[i] = b;
        child[i] = r;
        ++n->count;
        return;
      }
      if (n->type == NODE4) {
        auto* g = new Node16;
        CopyHeader(g, n);
        std::memcpy(g->keys, keys, 4);
        std::memcpy(g->child, child, 4 * sizeof(Ref));
        delete static_cast<Node4*>(n);
        *slot = InnerRef(g);
      } else {
        auto* g = new Node48;
        CopyHeader(g, n);
        for (int i = 0; i < 16; ++i) {
          g->child[i] = child[i];
          g->child_index[keys[i]] = static_cast<uint8_t>(i + 1);
        }
        delete static_cast<Node16*>(n);
        *slot = InnerRef(g);
      }
      return AddChild(slot, b, r);
    }
    case NODE48: {
      auto* x = static_cast<Node48*>(n);
      if (x->count < 48) {
        int pos = 0;
        while (x->child[pos]) ++pos;
        x->child[pos] = r;
        x->child_index[b] = static_cast<uint8_t>(pos + 1);
        ++x->count;
        return;
      }
      auto* g = new Node256;
      CopyHeader(g, x);
      for (int c = 0; c < 256; ++c)
        if (x->child_index[c]) g->child[c] = x->child[x->child_index[c] - 1];
      delete x;
      *slot = InnerRef(g);
      return AddChild(slot, b, r);
    }
    default: {
      auto* x = static_cast<Node256*>(n);
      x->child[b] = r;
      ++x->count;
      return;
    }
  }
}

// Removes the child for byte b (present).
void RemoveChild(Inner* n, uint8_t b) {
  switch (n->type) {
    case NODE4:
    case NODE16: {
      uint8_t* keys = n->type == NODE4 ? static_cast<Node4*>(n)->keys : static_cast<Node16*>(n)->keys;
      Ref* child = n->type == NODE4 ? static_cast<Node4*>(n)->child : static_cast<Node16*>(n)->child;
      int i = 0;
      while (keys[i] != b) ++i;
      for (; i + 1 < n->count; ++i) {
        keys[i] = keys[i + 1];
        child[i] = child[i + 1];
      }
      child[n->count - 1] = 0;
      --n->count;
      return;
    }
    case NODE48: {
      auto* x = static_cast<Node48*>(n);
      x->child[Slot48(x, b)] = 0;
      x->child_index[b] = 0;
      --x->count;
      return;
    }
    default: {
      auto* x = static_cast<Node256*>(n);
      x->child[b] = 0;
      --x->count;
      return;
    }
  }
}

void Destroy(Ref r) {
  if (!r) return;
  if (IsLeaf(r)) {
    delete AsLeaf(r);
    return;
  }
  Inner* n = AsInner(r);
  ForEachChild(n, 0, [](uint8_t, Ref c) {
    Destroy(c);
    return true;
  });
  delete n->term;
  DeleteInner(n);
}

class VArt final : public VolatileIndex {
 public:
  using VolatileIndex::VolatileIndex;
  ~VArt() override { Destroy(root_); }
  std::string_view kind() const override { return "vart"; }

 protected:
  Status DoPut(std::string_view key, uint64_t value, bool replace, bool* inserted) override {
    Ref* slot = &root_;
    size_t depth = 0;
    for (;;) {
      if (*slot == 0) {
        *slot = LeafRef(new Leaf{std::string(key), value});
        *inserted = true;
        return Status::OK();
      }
      if (IsLeaf(*slot)) {
        Leaf* l = AsLeaf(*slot);
        if (l->key == key) {
          if (replace) l->value = value;
          *inserted = false;
          return Status::OK();
        }
        // Split the leaf: a NODE4 holding the common part beyond depth.
        size_t p = depth;
        while (p < l->key.size() && p < key.size() && l->key[p] == key[p]) ++p;
        auto* n = new Node4;
        n->prefix.assign(key.data() + depth, p - depth);
        Ref nr = InnerRef(n);
        auto* nl = new Leaf{std::string(key), value};
        Place(&nr, l, p);
        Place(&nr, nl, p);
        *slot = nr;
        *inserted = true;
        return Status::OK();
      }
      Inner* n = AsInner(*slot);
      const size_t plen = n->prefix.size();
      size_t p = 0;
      while (p < plen && depth + p < key.size() && n->prefix[p] == key[depth + p]) ++p;
      if (p < plen) {
        // Prefix mismatch: a new NODE4 above n with the common part.
        auto* m = new Node4;
        m->prefix = n->prefix.substr(0, p);
        const auto b = static_cast<uint8_t>(n->prefix[p]);
        n->prefix.erase(0, p + 1);
        Ref mr = InnerRef(m);
        AddChild(&mr, b, InnerRef(n));
        Place(&mr, new Leaf{std::string(key), value}, depth + p);
        *slot = mr;
        *inserted = true;
        return Status::OK();
      }
      depth += plen;
      if (depth == key.size()) {
        if (n->term) {
          if (replace) n->term->value = value;
          *inserted = false;
        } else {
          n->term = new Leaf{std::string(key), value};
          *inserted = true;
        }
        return Status::OK();
      }
      const auto b = static_cast<uint8_t>(key[depth]);
      Ref* c = FindChild(n, b);
      if (!c) {
        AddChild(slot, b, LeafRef(new Leaf{std::string(key), value}));
        *inserted = true;
        return Status::OK();
      }
      slot = c;
      ++depth;
    }
  }

  bool DoLookup(std::string_view key, uint64_t* value) const override {
    Ref r = root_;
    size_t depth = 0;
    while (r) {
      if (IsLeaf(r)) {
        const Leaf* l = AsLeaf(r);
        if (l->key != key) return false;
        *value = l->value;
        return true;
      }
      Inner* n = AsInner(r);
      const size_t plen = n->prefix.size();
      if (depth + plen > key.size() || std::memcmp(n->prefix.data(), key.data() + depth, plen) != 0) return false;
      depth += plen;
      if (depth == key.size()) {
        if (!n->term) return false;
        *value = n->term->value;
        return true;
      }
      Ref* c = FindChild(n, static_cast<uint8_t>(key[depth]));
      if (!c) return false;
      r = *c;
      ++depth;
    }
    return false;
  }

  bool DoRemove(std::string_view key) override { return Erase(&root_, key, 0); }

  void DoScan(std::string_view start, const Emit& emit) const override {
    std::string path;
    Walk(root_, start, true, &path, emit);
  }

  uint64_t DoCheck(std::string* report) const override {
    uint64_t keys = 0;
    std::string path;
    CheckRef(root_, &path, report, &keys);
    return keys;
  }

  void DoStats(IndexStats* st) const override {
    uint64_t bytes = 0, sum = 0;
    CountRef(root_, 0, st, &bytes, &sum);
    st->avg_leaf_depth = st->leaves ? static_cast<double>(sum) / st->leaves : 0;
    st->volatile_bytes = bytes;
  }

 private:
  // Puts leaf l into the fresh node at *nr whose path ends at key position `end`.
  static void Place(Ref* nr, Leaf* l, size_t end) {
    if (l->key.size() == end) AsInner(*nr)->term = l;
    else AddChild(nr, static_cast<uint8_t>(l->key[end]), LeafRef(l));
  }

  // Removes key below *slot (whose path has `depth` bytes). Returns true iff found.
  bool Erase(Ref* slot, std::string_view key, size_t depth) {
    const Ref r = *slot;
    if (!r) return false;
    if (IsLeaf(r)) {
      if (AsLeaf(r)->key != key) return false;
      delete AsLeaf(r);
      *slot = 0;
      return true;
    }
    Inner* n = AsInner(r);
    const size_t plen = n->prefix.size();
    if (depth + plen > key.size() || std::memcmp(n->prefix.data(), key.data() + depth, plen) != 0) return false;
    depth += plen;
    if (depth == key.size()) {
      if (!n->term) return false;
      delete n->term;
      n->term = nullptr;
    } else {
      const auto b = static_cast<uint8_t>(key[depth]);
      Ref* c = FindChild(n, b);
      if (!c || !Erase(c, key, depth + 1)) return false;
      if (*c == 0) RemoveChild(n, b);
    }
    Collapse(slot);
    return true;
  }

  // Restores V3 at *slot after a removal below it.
  static void Collapse(Ref* slot) {
    Inner* n = AsInner(*slot);
    if (n->count == 0) {
      *slot = n->term ? LeafRef(n->term) : 0;
      DeleteInner(n);
      return;
    }
    if (n->count == 1 && !n->term) {
      uint8_t b = 0;
      Ref only = 0;
      ForEachChild(n, 0, [&](uint8_t k, Ref c) {
        b = k;
        only = c;
        return false;
      });
      if (!IsLeaf(only)) {
        Inner* c = AsInner(only);
        c->prefix = n->prefix + static_cast<char>(b) + c->prefix;
      }
      *slot = only;
      DeleteInner(n);
    }
  }

  // In-order walk from `start`; `bounded` while the path so far is a prefix of start.
  bool Walk(Ref r, std::string_view start, bool bounded, std::string* path, const Emit& emit) const {
    if (!r) return true;
    if (IsLeaf(r)) {
      const Leaf* l = AsLeaf(r);
      if (bounded && CompareKeys(l->key, start) < 0) return true;
      return emit(l->key, l->value);
    }
    const Inner* n = AsInner(r);
    const size_t base = path->size();
    path->append(n->prefix);
    bool ok = true;
    int from = 0;
    bool b2 = bounded;
    if (bounded) {
      const size_t m = std::min(path->size(), start.size());
      const int c = CompareKeys(std::string_view(*path).substr(0, m), start.substr(0, m));
      if (c < 0) {
        path->resize(base);
        return true;  // the whole subtree is below start
      }
      if (c > 0 || path->size() > start.size()) b2 = false;  // the whole subtree is >= start
      if (b2) from = path->size() < start.size() ? static_cast<uint8_t>(start[path->size()]) : 0;
    }
    if (n->term && (!b2 || path->size() >= start.size())) ok = emit(n->term->key, n->term->value);
    if (ok) {
      ok = ForEachChild(n, from, [&](uint8_t k, Ref c) {
        path->push_back(static_cast<char>(k));
        const bool go = Walk(c, start, b2 && path->size() <= start.size() && k == from, path, emit);
        path->pop_back();
        return go;
      });
    }
    path->resize(base);
    return ok;
  }

  void CheckRef(Ref r, std::string* path, std::string* report, uint64_t* keys) const {
    if (!r) return;
    if (IsLeaf(r)) {
      const Leaf* l = AsLeaf(r);
      if (l->key.compare(0, path->size(), *path) != 0 || l->key.size() < path->size())
        *report += "leaf key does not extend its path\n";
      ++*keys;
      return;
    }
    const Inner* n = AsInner(r);
    const size_t base = path->size();
    path->append(n->prefix);
    if (n->term) {
      if (n->term->key != *path) *report += "term leaf key != node path\n";
      ++*keys;
    }
    int count = 0, last = -1;
    ForEachChild(n, 0, [&](uint8_t k, Ref c) {
      if (static_cast<int>(k) <= last) *report += "children not in increasing byte order\n";
      last = k;
      ++count;
      if (!c) *report += "null child\n";
      path->push_back(static_cast<char>(k));
      CheckRef(c, path, report, keys);
      path->pop_back();
      return true;
    });
    if (count != n->count) *report += "child count mismatch\n";
    if (!n->term && count < 2 && r != root_) *report += "inner node with fewer than two children and no term leaf\n";
    path->resize(base);
  }

  void CountRef(Ref r, int depth, IndexStats* st, uint64_t* bytes, uint64_t* sum) const {
    if (!r) return;
    if (IsLeaf(r)) {
      const Leaf* l = AsLeaf(r);
      ++st->leaves;
      *sum += depth;
      *bytes += sizeof(Leaf) + (l->key.capacity() > 15 ? l->key.capacity() + 1 : 0);
      return;
    }
    const Inner* n = AsInner(r);
    ++st->inner_nodes;
    *bytes += NodeBytes(n) + (n->prefix.capacity() > 15 ? n->prefix.capacity() + 1 : 0);
    if (n->term) CountRef(LeafRef(n->term), depth + 1, st, bytes, sum);
    ForEachChild(n, 0, [&](uint8_t, Ref c) {
      CountRef(c, depth + 1, st, bytes, sum);
      return true;
    });
  }

  Ref root_ = 0;
};

Status Create(Pool& pool, const IndexOptions& opts, uint64_t* root_off) {
  return CreateMarker(pool, opts, kind_id::kVart, root_off);
}
Status Open(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) {
  KeyType kt;
  WORT_RETURN_IF_ERROR(ReadMarker(pool, root_off, kind_id::kVart, &kt));
  *out = std::make_unique<VArt>(&pool, root_off, kt);
  return Status::OK();
}

const IndexKind kKind = {"vart", kind_id::kVart,
                         "volatile reference: plain ART in DRAM (NODE4/16/48/256, path compression); data lost on close",
                         true, &Create, &Open, &VisitMarker};

}  // namespace
}  // namespace wort::vol

// Listed in the table of built-in kinds (BuiltinIndexKinds, src/index/registry.cc).
const wort::IndexKind* wort::builtin_kinds::Vart() { return &wort::vol::kKind; }
