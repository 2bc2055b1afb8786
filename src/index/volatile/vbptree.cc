// "vbptree": a cache-conscious volatile B+-tree in DRAM, the B-tree reference of the WORT paper's
// figures. Data is lost on close (see volatile_common.h: the pool holds a marker only; reopen is
// empty).
//
// Nodes are fixed-size arrays in one 64-byte-aligned allocation each (no per-node heap vectors).
// The key representation depends on the index's KeyType (one tree class per representation,
// chosen at Open):
//   kU64   - a key is the decoded uint64_t (big-endian decode, so integer order == byte order);
//            8 bytes per key slot, compared as integers.
//   kBytes - a key is a 16-byte BKey: `head`, the first 7 key bytes zero-padded and big-endian
//            with min(len, 8) in the low byte (see HeadOf), and `buf`, nullptr for keys of up to
//            7 bytes (the head alone is the key) or an owned heap block [u32 len][len bytes] for
//            longer keys. Comparing two heads as integers orders keys exactly unless both keys
//            are longer than 7 bytes and share their first 7 bytes; only then are the buffers
//            compared (see BytesKeys::Less).
// Node size, chosen by measurement (`wort bench --index vbptree --dist dense,sparse --keys 1M
// --ops insert,search,scan`, each configuration run 3 times interleaved on a loaded 2-core VM;
// median cpu-ns/op dense insert / search / scan):
//   leaf/inner 256/256: 763 / 1150 / 4856 (one run; 5 levels)   512/512: 674 / 788 / 3804
//   1024/1024: 547 / 918 / 2727   1024/512 + prefetch: 627 / 740 / 2135
//   512/512 + prefetch: 672 / 777 / 3113   1024/1024 + prefetch: 590 / 645 / 2257 (kept)
// The spread between runs was about +-30%, so only 256 B (worse) and the scan gain of 1 KiB
// leaves are clear; 1 KiB nodes also take the least space (24.6 B/key at 1M random u64 keys).
// Capacities: u64 62 keys per leaf, 63 per inner node; bytes 41 and 42. Before each node's binary
// search its key lines are prefetched (PrefetchKeys), so they load in parallel; prefetching the
// whole node (children / values too) measured no different within the noise, so it is not done.
//
// Search: branchless binary search over the key array (lower bound in leaves, upper bound in
// inner nodes). Insert: descent recording the path; a full leaf splits in half and its
// separator goes up the path (an inner split moves its middle key up). For byte keys the
// separator is the shortest prefix of the right leaf's first key that is greater than the left
// leaf's last key (suffix truncation), so separators are short and usually inline.
// Delete: removes the entry; a leaf that becomes empty (and is not the root) is unlinked from the
// leaf chain and freed, and its separator leaves the parent; an inner node that loses its only
// child is freed the same way; a root with a single child is replaced by it. No merging or
// redistribution otherwise (the reference is insert/search oriented).
//
// Invariants (DoCheck verifies them):
//   V1. Every node's keys are strictly increasing and count <= capacity; an inner node with k
//       keys has k + 1 children; an inner root has at least one key.
//   V2. All leaves are at the same depth (height_); keys of child i lie in [key[i-1], key[i]).
//   V3. The leaf chain (next, and prev backwards) visits every leaf in key order; no leaf but a
//       root leaf is empty.
//   V4. (kBytes) Every key's head encodes its first bytes and length, and buf is non-null
//       exactly for keys longer than 7 bytes.
//
// Stats().volatile_bytes: every node's sizeof plus 16 bytes of allocator overhead, plus, for
// each owned key buffer, malloc_usable_size + 8 (glibc's chunk header).
#include <malloc.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <vector>

#include "index/kind_ids.h"
#include "index/registry.h"
#include "index/volatile/volatile_common.h"

namespace wort::vol {
namespace {

constexpr size_t kLeafBytes = 1024;
constexpr size_t kInnerBytes = 1024;
constexpr size_t kNodeOverhead = 16;  // charged per node allocation in Stats
constexpr int kMaxHeight = 48;        // far above any reachable height (fanout >= 20 per level)

// ---- kU64 keys: the decoded integer. -------------------------------------------------------
struct U64Keys {
  using Key = uint64_t;
  using Probe = uint64_t;
  static Probe MakeProbe(std::string_view k) { return DecodeU64(k); }
  // Scan's start may have any length: the least integer whose encoding is >= start; false if
  // there is none (start > the encoding of UINT64_MAX).
  static bool ScanProbe(std::string_view start, Probe* p) {
    char b[8] = {};
    std::memcpy(b, start.data(), start.size() < 8 ? start.size() : 8);
    *p = DecodeU64({b, 8});
    if (start.size() <= 8) return true;  // a shorter start is a prefix of its zero-padding
    if (*p == UINT64_MAX) return false;
    ++*p;  // start extends the encoding of *p, so it is greater
    return true;
  }
  static bool Less(Key a, Probe b) { return a < b; }
  static bool LessEq(Key a, Probe b) { return a <= b; }
  static bool Equal(Key a, Probe b) { return a == b; }
  static int Compare(Key a, Key b) { return a < b ? -1 : (a > b ? 1 : 0); }
  static Key Own(Probe p, std::string_view) { return p; }
  static void Free(Key) {}
  static Key Separator(Key /*left_last*/, Key right_first) { return right_first; }
  // The key's bytes; scratch must hold 8 bytes.
  static std::string_view View(Key k, char* scratch) {
    const uint64_t be = __builtin_bswap64(k);
    std::memcpy(scratch, &be, 8);
    return {scratch, 8};
  }
  static uint64_t OwnedBytes(Key) { return 0; }
  static bool RepOk(Key) { return true; }
};

// ---- kBytes keys: inline head + owned buffer for keys longer than 7 bytes. --------------------
struct BKey {
  uint64_t head;  // HeadOf(key)
  char* buf;      // nullptr iff len <= 7; else [u32 len][len bytes], owned by this key slot
};
static_assert(sizeof(BKey) == 16);

constexpr size_t kInlineMax = 7;

// Head encoding: bytes 0..6 of the key (zero-padded), then min(len, 8), read big-endian. For keys
// a, b: HeadOf(a) < HeadOf(b) implies a < b, and equal heads mean a == b unless both are longer
// than 7 bytes (then their first 7 bytes are equal and the rest decides).
inline uint64_t HeadOf(std::string_view k) {
  unsigned char b[8] = {};
  const size_t n = k.size() < kInlineMax ? k.size() : kInlineMax;
  if (n) std::memcpy(b, k.data(), n);
  b[7] = static_cast<unsigned char>(k.size() < 8 ? k.size() : 8);
  uint64_t v;
  std::memcpy(&v, b, 8);
  return __builtin_bswap64(v);
}
inline uint32_t BufLen(const char* buf) {
  uint32_t n;
  std::memcpy(&n, buf, 4);
  return n;
}
inline std::string_view BufView(const char* buf) { return {buf + 4, BufLen(buf)}; }

struct BytesKeys {
  using Key = BKey;
  struct Probe {
    uint64_t head;
    std::string_view key;
  };
  static Probe MakeProbe(std::string_view k) { return {HeadOf(k), k}; }
  static bool ScanProbe(std::string_view start, Probe* p) {
    *p = MakeProbe(start);
    return true;
  }
  // Heads equal and a.buf set: both keys are longer than 7 bytes; compare the rest.
  static int Tail(const Key& a, const Probe& b) { return CompareKeys(BufView(a.buf), b.key); }
  static bool Less(const Key& a, const Probe& b) {
    if (a.head != b.head) return a.head < b.head;
    return a.buf && Tail(a, b) < 0;
  }
  static bool LessEq(const Key& a, const Probe& b) {
    if (a.head != b.head) return a.head < b.head;
    return !a.buf || Tail(a, b) <= 0;
  }
  static bool Equal(const Key& a, const Probe& b) {
    return a.head == b.head && (!a.buf || BufView(a.buf) == b.key);
  }
  static int Compare(const Key& a, const Key& b) {
    if (a.head != b.head) return a.head < b.head ? -1 : 1;
    if (!a.buf || !b.buf) return a.buf == b.buf ? 0 : (a.buf ? 1 : -1);  // (unequal heads if so)
    return CompareKeys(BufView(a.buf), BufView(b.buf));
  }
  static Key Own(const Probe& p, std::string_view key) {
    Key k{p.head, nullptr};
    if (key.size() > kInlineMax) {
      const auto n = static_cast<uint32_t>(key.size());
      k.buf = static_cast<char*>(::operator new(4 + n));
      std::memcpy(k.buf, &n, 4);
      std::memcpy(k.buf + 4, key.data(), n);
    }
    return k;
  }
  static void Free(const Key& k) { ::operator delete(k.buf); }
  // scratch must hold kInlineMax bytes.
  static std::string_view View(const Key& k, char* scratch) {
    if (k.buf) return BufView(k.buf);
    const uint64_t be = __builtin_bswap64(k.head);
    std::memcpy(scratch, &be, kInlineMax);
    return {scratch, static_cast<size_t>(k.head & 0xff)};
  }
  // Shortest prefix of right_first that is > left_last (left_last < right_first).
  static Key Separator(const Key& left_last, const Key& right_first) {
    char s1[8], s2[8];
    const std::string_view l = View(left_last, s1), r = View(right_first, s2);
    size_t i = 0;
    while (i < l.size() && l[i] == r[i]) ++i;  // r is longer than the common prefix (r > l)
    const std::string_view sep = r.substr(0, i + 1);
    return Own(MakeProbe(sep), sep);
  }
  static uint64_t OwnedBytes(const Key& k) { return k.buf ? malloc_usable_size(k.buf) + 8 : 0; }
  static bool RepOk(const Key& k) {
    char s[8];
    const std::string_view v = View(k, s);
    return (k.buf != nullptr) == (v.size() > kInlineMax) && HeadOf(v) == k.head;
  }
};

// ---- Nodes ---------------------------------------------------------------------------------
template <class T>
constexpr int LeafCap() {
  return static_cast<int>((kLeafBytes - 24) / (sizeof(typename T::Key) + 8));
}
template <class T>
constexpr int InnerCap() {
  return static_cast<int>((kInnerBytes - 16) / (sizeof(typename T::Key) + 8));
}

template <class T>
struct alignas(64) Leaf {
  static constexpr int kCap = LeafCap<T>();
  uint32_t count = 0;
  Leaf* prev = nullptr;
  Leaf* next = nullptr;
  typename T::Key keys[kCap];  // [0, count) sorted
  uint64_t vals[kCap];
};

template <class T>
struct alignas(64) Inner {
  static constexpr int kCap = InnerCap<T>();
  uint32_t count = 0;          // keys; children = count + 1
  typename T::Key keys[kCap];  // [0, count) sorted separators
  void* child[kCap + 1];       // Inner<T>* above the leaf level, Leaf<T>* at it
};

static_assert(sizeof(Leaf<U64Keys>) <= kLeafBytes && sizeof(Inner<U64Keys>) <= kInnerBytes);
static_assert(sizeof(Leaf<BytesKeys>) <= kLeafBytes && sizeof(Inner<BytesKeys>) <= kInnerBytes);

// Asks for the cache lines of a node's header and key array before its binary search, so that
// they load in parallel rather than one dependent miss per probe.
template <class NodeT>
inline void PrefetchKeys(const NodeT* n) {
  constexpr size_t kEnd = offsetof(NodeT, keys) + sizeof(n->keys);
  const char* p = reinterpret_cast<const char*>(n);
  for (size_t off = 0; off < kEnd; off += 64) __builtin_prefetch(p + off);
}

// Branchless binary search over keys[0, n): with kUpper, the first i with p < keys[i] (the
// child to descend into); otherwise the first i with !(keys[i] < p). n if there is none.
template <class T, bool kUpper>
inline int Bound(const typename T::Key* keys, int n, const typename T::Probe& p) {
  auto before = [&p](const typename T::Key& k) {
    if constexpr (kUpper) return T::LessEq(k, p);
    else return T::Less(k, p);
  };
  if (n == 0) return 0;
  const typename T::Key* base = keys;
  while (n > 1) {
    const int half = n / 2;
    base = before(base[half - 1]) ? base + half : base;
    n -= half;
  }
  return static_cast<int>(base - keys) + (before(*base) ? 1 : 0);
}
template <class T>
inline int LowerBound(const typename T::Key* keys, int n, const typename T::Probe& p) {
  return Bound<T, false>(keys, n, p);
}
template <class T>
inline int UpperBound(const typename T::Key* keys, int n, const typename T::Probe& p) {
  return Bound<T, true>(keys, n, p);
}

template <class T>
class VbpTree final : public VolatileIndex {
  using Key = typename T::Key;
  using Probe = typename T::Probe;
  using LeafT = Leaf<T>;
  using InnerT = Inner<T>;

 public:
  using VolatileIndex::VolatileIndex;
  ~VbpTree() override { Destroy(root_, 0); }
  std::string_view kind() const override { return "vbptree"; }

 protected:
  Status DoPut(std::string_view key, uint64_t value, bool replace, bool* inserted) override {
    const Probe p = T::MakeProbe(key);
    InnerT* path[kMaxHeight];
    int at[kMaxHeight];
    void* n = root_;
    for (int d = 0; d < height_; ++d) {
      auto* in = static_cast<InnerT*>(n);
      at[d] = UpperBound<T>(in->keys, in->count, p);
      path[d] = in;
      n = in->child[at[d]];
      Prefetch(n, d + 1);
    }
    auto* leaf = static_cast<LeafT*>(n);
    const int i = LowerBound<T>(leaf->keys, leaf->count, p);
    if (i < static_cast<int>(leaf->count) && T::Equal(leaf->keys[i], p)) {
      if (replace) leaf->vals[i] = value;
      *inserted = false;
      return Status::OK();
    }
    *inserted = true;
    const Key k = T::Own(p, key);
    if (leaf->count < LeafT::kCap) {
      LeafInsertAt(leaf, i, k, value);
      return Status::OK();
    }
    // Split the full leaf: the upper half moves to a new right sibling, then the key goes in.
    auto* r = new LeafT;
    constexpr int m = (LeafT::kCap + 1) / 2;
    r->count = LeafT::kCap - m;
    std::memcpy(r->keys, leaf->keys + m, sizeof(Key) * r->count);
    std::memcpy(r->vals, leaf->vals + m, 8 * r->count);
    leaf->count = m;
    if (i <= m) LeafInsertAt(leaf, i, k, value);
    else LeafInsertAt(r, i - m, k, value);
    r->next = leaf->next;
    if (r->next) r->next->prev = r;
    r->prev = leaf;
    leaf->next = r;
    Key up = T::Separator(leaf->keys[leaf->count - 1], r->keys[0]);
    void* right = r;
    for (int d = height_ - 1; d >= 0; --d) {
      InnerT* in = path[d];
      if (in->count < InnerT::kCap) {
        InnerInsertAt(in, at[d], up, right);
        return Status::OK();
      }
      SplitInner(in, at[d], &up, &right);
    }
    auto* nr = new InnerT;
    nr->count = 1;
    nr->keys[0] = up;
    nr->child[0] = root_;
    nr->child[1] = right;
    root_ = nr;
    ++height_;
    return Status::OK();
  }

  bool DoLookup(std::string_view key, uint64_t* value) const override {
    const Probe p = T::MakeProbe(key);
    const LeafT* leaf = FindLeaf(p);
    const int i = LowerBound<T>(leaf->keys, leaf->count, p);
    if (i < static_cast<int>(leaf->count) && T::Equal(leaf->keys[i], p)) {
      *value = leaf->vals[i];
      return true;
    }
    return false;
  }

  bool DoRemove(std::string_view key) override {
    const Probe p = T::MakeProbe(key);
    InnerT* path[kMaxHeight];
    int at[kMaxHeight];
    void* n = root_;
    for (int d = 0; d < height_; ++d) {
      auto* in = static_cast<InnerT*>(n);
      at[d] = UpperBound<T>(in->keys, in->count, p);
      path[d] = in;
      n = in->child[at[d]];
      Prefetch(n, d + 1);
    }
    auto* leaf = static_cast<LeafT*>(n);
    const int i = LowerBound<T>(leaf->keys, leaf->count, p);
    if (i >= static_cast<int>(leaf->count) || !T::Equal(leaf->keys[i], p)) return false;
    T::Free(leaf->keys[i]);
    const int tail = static_cast<int>(leaf->count) - i - 1;
    std::memmove(leaf->keys + i, leaf->keys + i + 1, sizeof(Key) * tail);
    std::memmove(leaf->vals + i, leaf->vals + i + 1, 8 * tail);
    --leaf->count;
    if (leaf->count > 0 || height_ == 0) return true;
    // The leaf is empty and not the root: unlink it, then drop it from its parent (and any
    // ancestor left without children; the root always keeps one, see below).
    if (leaf->prev) leaf->prev->next = leaf->next;
    if (leaf->next) leaf->next->prev = leaf->prev;
    delete leaf;
    for (int d = height_ - 1; d >= 0; --d) {
      InnerT* in = path[d];
      if (in->count == 0) {  // its only child is gone
        if (d == 0) {          // unreachable while V1 holds (an inner root has a key); stay valid
          delete in;
          root_ = new LeafT;
          height_ = 0;
          return true;
        }
        delete in;
        continue;
      }
      // Child c goes with separator c-1 (child c-1 takes over c's range) or, for c == 0,
      // separator 0 (child 1 becomes the first child).
      const int c = at[d];
      const int kd = c > 0 ? c - 1 : 0;
      T::Free(in->keys[kd]);
      std::memmove(in->keys + kd, in->keys + kd + 1, sizeof(Key) * (in->count - kd - 1));
      std::memmove(in->child + c, in->child + c + 1, sizeof(void*) * (in->count - c));
      --in->count;
      break;
    }
    while (height_ > 0 && static_cast<InnerT*>(root_)->count == 0) {
      auto* old = static_cast<InnerT*>(root_);
      root_ = old->child[0];
      delete old;
      --height_;
    }
    return true;
  }

  void DoScan(std::string_view start, const Emit& emit) const override {
    Probe p;
    if (!T::ScanProbe(start, &p)) return;
    const LeafT* leaf = FindLeaf(p);
    int i = LowerBound<T>(leaf->keys, leaf->count, p);
    char scratch[8];
    for (; leaf; leaf = leaf->next, i = 0)
      for (; i < static_cast<int>(leaf->count); ++i)
        if (!emit(T::View(leaf->keys[i], scratch), leaf->vals[i])) return;
  }

  uint64_t DoCheck(std::string* report) const override {
    uint64_t keys = 0;
    std::vector<const LeafT*> leaves;
    if (height_ > 0 && static_cast<const InnerT*>(root_)->count == 0) *report += "V1: inner root without keys\n";
    CheckNode(root_, 0, nullptr, nullptr, report, &keys, &leaves);
    const LeafT* n = leaves.empty() ? nullptr : leaves[0];
    if (n && n->prev) *report += "V3: first leaf has a prev link\n";
    for (size_t i = 0; i < leaves.size(); ++i, n = n->next) {
      if (n != leaves[i]) {
        *report += "V3: leaf chain differs from tree order\n";
        return keys;
      }
      if (i > 0 && n->prev != leaves[i - 1]) {
        *report += "V3: leaf prev link differs from tree order\n";
        return keys;
      }
    }
    if (n) *report += "V3: leaf chain longer than the tree\n";
    return keys;
  }

  void DoStats(IndexStats* st) const override {
    uint64_t bytes = 0;
    Count(root_, 0, st, &bytes);
    st->avg_leaf_depth = height_;
    st->volatile_bytes = bytes;
  }

 private:
  const LeafT* FindLeaf(const Probe& p) const {
    const void* n = root_;
    for (int d = 0; d < height_; ++d) {
      const auto* in = static_cast<const InnerT*>(n);
      n = in->child[UpperBound<T>(in->keys, in->count, p)];
      Prefetch(n, d + 1);
    }
    return static_cast<const LeafT*>(n);
  }
  // Prefetches the key lines of the node at `depth`.
  void Prefetch(const void* n, int depth) const {
    if (depth == height_) PrefetchKeys(static_cast<const LeafT*>(n));
    else PrefetchKeys(static_cast<const InnerT*>(n));
  }

  // REQUIRES: leaf->count < kCap.
  static void LeafInsertAt(LeafT* leaf, int i, const Key& k, uint64_t v) {
    const int tail = static_cast<int>(leaf->count) - i;
    std::memmove(leaf->keys + i + 1, leaf->keys + i, sizeof(Key) * tail);
    std::memmove(leaf->vals + i + 1, leaf->vals + i, 8 * tail);
    leaf->keys[i] = k;
    leaf->vals[i] = v;
    ++leaf->count;
  }
  // Inserts separator k at i and its right child at i + 1. REQUIRES: in->count < kCap.
  static void InnerInsertAt(InnerT* in, int i, const Key& k, void* right) {
    const int tail = static_cast<int>(in->count) - i;
    std::memmove(in->keys + i + 1, in->keys + i, sizeof(Key) * tail);
    std::memmove(in->child + i + 2, in->child + i + 1, sizeof(void*) * tail);
    in->keys[i] = k;
    in->child[i + 1] = right;
    ++in->count;
  }
  // `in` is full; (*up, *right) must go in at i. Splits: `in` keeps the lower half, a new node the
  // upper half; the middle key and the new node are returned in (*up, *right) for the parent.
  static void SplitInner(InnerT* in, int i, Key* up, void** right) {
    constexpr int kN = InnerT::kCap + 1;  // keys after the insert
    Key keys[kN];
    void* child[kN + 1];
    std::memcpy(keys, in->keys, sizeof(Key) * i);
    keys[i] = *up;
    std::memcpy(keys + i + 1, in->keys + i, sizeof(Key) * (InnerT::kCap - i));
    std::memcpy(child, in->child, sizeof(void*) * (i + 1));
    child[i + 1] = *right;
    std::memcpy(child + i + 2, in->child + i + 1, sizeof(void*) * (InnerT::kCap - i));
    constexpr int m = kN / 2;  // keys[m] moves up
    auto* r = new InnerT;
    in->count = m;
    std::memcpy(in->keys, keys, sizeof(Key) * m);
    std::memcpy(in->child, child, sizeof(void*) * (m + 1));
    r->count = kN - m - 1;
    std::memcpy(r->keys, keys + m + 1, sizeof(Key) * r->count);
    std::memcpy(r->child, child + m + 1, sizeof(void*) * (r->count + 1));
    *up = keys[m];
    *right = r;
  }

  void CheckNode(const void* node, int depth, const Key* lo, const Key* hi, std::string* report, uint64_t* nkeys,
                 std::vector<const LeafT*>* leaves) const {
    const bool is_leaf = depth == height_;
    const Key* keys = is_leaf ? static_cast<const LeafT*>(node)->keys : static_cast<const InnerT*>(node)->keys;
    const int count = static_cast<int>(is_leaf ? static_cast<const LeafT*>(node)->count
                                               : static_cast<const InnerT*>(node)->count);
    if (count > (is_leaf ? LeafT::kCap : InnerT::kCap)) {
      *report += "V1: node count above capacity\n";
      return;
    }
    for (int i = 0; i < count; ++i) {
      if (!T::RepOk(keys[i])) *report += "V4: key head/buffer inconsistent\n";
      if (i > 0 && T::Compare(keys[i - 1], keys[i]) >= 0) *report += "V1: keys not increasing in a node\n";
      if (lo && T::Compare(keys[i], *lo) < 0) *report += "V2: key below its node's range\n";
      if (hi && T::Compare(keys[i], *hi) >= 0) *report += "V2: key above its node's range\n";
    }
    if (is_leaf) {
      if (count == 0 && node != root_) *report += "V3: empty non-root leaf\n";
      *nkeys += count;
      leaves->push_back(static_cast<const LeafT*>(node));
      return;
    }
    if (depth >= kMaxHeight) {
      *report += "V2: tree deeper than kMaxHeight\n";
      return;
    }
    const auto* in = static_cast<const InnerT*>(node);
    for (int i = 0; i <= count; ++i) {
      if (!in->child[i]) {
        *report += "V1: null child\n";
        continue;
      }
      CheckNode(in->child[i], depth + 1, i == 0 ? lo : &keys[i - 1], i == count ? hi : &keys[i], report, nkeys,
                leaves);
    }
  }

  void Count(const void* node, int depth, IndexStats* st, uint64_t* bytes) const {
    if (depth == height_) {
      const auto* l = static_cast<const LeafT*>(node);
      ++st->leaves;
      *bytes += sizeof(LeafT) + kNodeOverhead;
      for (uint32_t i = 0; i < l->count; ++i) *bytes += T::OwnedBytes(l->keys[i]);
      return;
    }
    const auto* in = static_cast<const InnerT*>(node);
    ++st->inner_nodes;
    *bytes += sizeof(InnerT) + kNodeOverhead;
    for (uint32_t i = 0; i < in->count; ++i) *bytes += T::OwnedBytes(in->keys[i]);
    for (uint32_t i = 0; i <= in->count; ++i) Count(in->child[i], depth + 1, st, bytes);
  }

  void Destroy(void* node, int depth) {
    if (depth == height_) {
      auto* l = static_cast<LeafT*>(node);
      for (uint32_t i = 0; i < l->count; ++i) T::Free(l->keys[i]);
      delete l;
      return;
    }
    auto* in = static_cast<InnerT*>(node);
    for (uint32_t i = 0; i < in->count; ++i) T::Free(in->keys[i]);
    for (uint32_t i = 0; i <= in->count; ++i) Destroy(in->child[i], depth + 1);
    delete in;
  }

  void* root_ = new LeafT;  // a LeafT when height_ == 0, else an InnerT
  int height_ = 0;          // inner levels above the leaves
};

Status Create(Pool& pool, const IndexOptions& opts, uint64_t* root_off) {
  return CreateMarker(pool, opts, kind_id::kVbpTree, root_off);
}
Status Open(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) {
  KeyType kt;
  WORT_RETURN_IF_ERROR(ReadMarker(pool, root_off, kind_id::kVbpTree, &kt));
  std::shared_ptr<void> token;
  WORT_RETURN_IF_ERROR(ClaimSoleHandle(&pool, root_off, "vbptree", &token));
  std::unique_ptr<VolatileIndex> idx;
  if (kt == KeyType::kU64) idx = std::make_unique<VbpTree<U64Keys>>(&pool, root_off, kt);
  else idx = std::make_unique<VbpTree<BytesKeys>>(&pool, root_off, kt);
  idx->KeepSoleHandle(std::move(token));
  *out = std::move(idx);
  return Status::OK();
}

const IndexKind kKind = {"vbptree", kind_id::kVbpTree,
                         "volatile reference: cache-conscious B+-tree in DRAM (fixed-size array nodes, u64 keys as "
                         "integers, byte keys as inline head + buffer, leaf siblings); data lost on close",
                         true, &Create, &Open, &VisitMarker};

}  // namespace
}  // namespace wort::vol

// Listed in the table of built-in kinds (BuiltinIndexKinds, src/index/registry.cc).
const wort::IndexKind* wort::builtin_kinds::VbpTree() { return &wort::vol::kKind; }
