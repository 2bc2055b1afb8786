// A tiny persistent structure behind wort::Index, for testing the crash explorer and the kill
// test (test code only): a sorted singly linked list of nodes in the pool, plus deliberately
// broken copies that the explorer must catch.
//
// Persistent layout
//   ListRoot (one 64-byte block):  magic | head | count | key_type | 4 reserved words
//     head   offset of the first node, 0 when empty (an 8-byte commit word)
//     count  number of nodes: maintained by the "linepair" variant only (0 otherwise)
//   ListNode (a block of 24 + key_len bytes): next | value | key_len | pad | key bytes
//     next   offset of the next node, 0 at the end (an 8-byte commit word)
//     value  updated in place by Upsert (an 8-byte commit word)
// Invariants (checked by Check)
//   1. every node offset lies in the pool, 64-byte aligned; the list has no cycle;
//   2. sorted variants: keys strictly ascending (unsigned bytes); key_len <= kMaxKeyLen;
//   3. linepair variant: root.count equals the number of nodes.
// Write order of the correct variant
//   Insert: write the node (next = successor) -> persist(node) -> store8(link = node) ->
//           persist(link). The commit point is the store8 of the predecessor's link word.
//   Upsert of a present key: store8(value) -> persist(value) (the commit point).
//   Remove: store8(link = node.next) -> persist(link) (the commit point) -> Free(node).
// The broken variants
//   nopersist  Insert omits persist(node): the link can reach memory before the node.
//   swapped    Insert publishes first: store8(link) -> persist(link) -> persist(node).
//   linepair   an unsorted list whose Insert prepends: write node -> persist(node) ->
//              store8(head) and store8(count), both in the root's one line -> persist(root).
//              Correct only if a cache line reaches memory whole (the explorer's default
//              model); a torn line (the --torn model) can persist head without count. Its
//              Remove is not failure-atomic (count is persisted after the unlink): explore it
//              with insert and upsert only.
//   earlylink  Insert links an empty node (key_len 0), then spins ~300 us, then writes the key:
//              even a process crash (SIGKILL, every store kept) in that window breaks it. For
//              the kill test.
//   leaky      Remove never frees the unlinked node: crash-consistent (recovery reclaims it)
//              but a leak while the pool stays open.
//   segv, hang correct, but Open of a pool that was not closed cleanly (a crash image) crashes
//              with SIGSEGV or spins forever: the explorer must report these, not die or hang.
#pragma once

#include <chrono>
#include <cstring>
#include <mutex>
#include <string>

#include "index/kind_ids.h"
#include "index/registry.h"
#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pm.h"
#include "wort/pool.h"

namespace wort::testlist {

enum class Variant { kCorrect, kUnordered, kNoPersist, kSwapped, kLinePair, kEarlyLink, kSegvOnRecovery, kHangOnRecovery, kLeaky };

inline constexpr uint64_t kListMagic = 0x5453494C54534554ull;  // "TESTLIST"

struct ListRoot {
  uint64_t magic;
  uint64_t head;
  uint64_t count;
  uint64_t key_type;
  uint64_t reserved[4];
};
static_assert(sizeof(ListRoot) == 64);

struct ListNode {
  uint64_t next;
  uint64_t value;
  uint32_t key_len;
  uint32_t pad;
  char key[];
  std::string_view Key() const { return {key, key_len}; }
};
static_assert(sizeof(ListNode) == 24 && alignof(ListNode) == 8);

template <Variant V>
class TestList final : public Index {
 public:
  static constexpr bool kSorted = V != Variant::kLinePair;

  TestList(Pool& pool, uint64_t root_off) : pool_(pool), root_(pool.at<ListRoot>(root_off)) {}

  std::string_view kind() const override { return Name(); }
  KeyType key_type() const override { return static_cast<KeyType>(root_->key_type); }

  Status Insert(std::string_view key, uint64_t value) override {
    WORT_RETURN_IF_ERROR(CheckKey(key));
    uint64_t* link;
    ListNode* found;
    Find(key, &link, &found);
    if (found) return Status::AlreadyExists("key exists");
    return Add(key, value, link);
  }

  Status Upsert(std::string_view key, uint64_t value, bool* inserted) override {
    WORT_RETURN_IF_ERROR(CheckKey(key));
    uint64_t* link;
    ListNode* found;
    Find(key, &link, &found);
    if (found) {
      pm::store8(&found->value, value);  // the commit point
      pm::persist(&found->value, 8);
      if (inserted) *inserted = false;
      return Status::OK();
    }
    if (inserted) *inserted = true;
    return Add(key, value, link);
  }

  Status Lookup(std::string_view key, uint64_t* value) const override {
    WORT_RETURN_IF_ERROR(CheckKey(key));
    uint64_t* link;
    ListNode* found;
    Find(key, &link, &found);
    if (!found) return Status::NotFound("no such key");
    *value = pm::load8(&found->value);
    return Status::OK();
  }

  Status Remove(std::string_view key) override {
    WORT_RETURN_IF_ERROR(CheckKey(key));
    uint64_t* link;
    ListNode* found;
    Find(key, &link, &found);
    if (!found) return Status::NotFound("no such key");
    const uint64_t off = pool_.offset_of(found);
    pm::store8(link, found->next);  // the commit point: unlinked
    pm::persist(link, 8);
    if (V == Variant::kLinePair) {
      pm::store8(&root_->count, root_->count - 1);
      pm::persist(&root_->count, 8);
    }
    if (V != Variant::kLeaky) pool_.allocator().Free(off);  // leaky: BROKEN, never freed
    return Status::OK();
  }

  Status Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const override {
    if (V == Variant::kUnordered || !kSorted) return Status::NotSupported("unordered test list");
    size_t n = 0;
    for (uint64_t off = root_->head; off != 0 && n < limit; off = Node(off)->next) {
      const ListNode* node = Node(off);
      if (CompareKeys(node->Key(), start) < 0) continue;
      if (end && CompareKeys(node->Key(), *end) > 0) break;
      ++n;
      if (!fn(node->Key(), node->value)) break;
    }
    return Status::OK();
  }

  uint64_t Size() const override {
    uint64_t n = 0;
    for (uint64_t off = root_->head; off != 0; off = Node(off)->next) ++n;
    return n;
  }

  Status Check(std::string* report) const override {
    auto bad = [&](const std::string& m) {
      if (report) *report += m + "\n";
      return Status::Corruption(m);
    };
    if (root_->magic != kListMagic) return bad("root: bad magic");
    uint64_t n = 0;
    const ListNode* prev = nullptr;
    const uint64_t max_nodes = pool_.size() / 64;
    for (uint64_t off = root_->head; off != 0; off = Node(off)->next) {
      if (off % 64 != 0 || !pool_.contains(off, sizeof(ListNode))) return bad("node offset out of the pool");
      const ListNode* node = Node(off);
      if (node->key_len > kMaxKeyLen || !pool_.contains(off, sizeof(ListNode) + node->key_len))
        return bad("node key length out of range");
      if (kSorted && prev && CompareKeys(prev->Key(), node->Key()) >= 0) return bad("keys not in ascending order");
      if (++n > max_nodes) return bad("cycle in the list");
      prev = node;
    }
    if (V == Variant::kLinePair && root_->count != n)
      return bad("root count " + std::to_string(root_->count) + " != " + std::to_string(n) + " nodes");
    return Status::OK();
  }

  IndexStats Stats() const override {
    IndexStats s;
    s.keys = s.leaves = Size();
    return s;
  }

  // ---- the IndexKind functions ------------------------------------------------------------
  static const char* Name() {
    switch (V) {
      case Variant::kCorrect: return "test-list";
      case Variant::kUnordered: return "test-list-unordered";
      case Variant::kNoPersist: return "test-list-nopersist";
      case Variant::kSwapped: return "test-list-swapped";
      case Variant::kLinePair: return "test-list-linepair";
      case Variant::kEarlyLink: return "test-list-earlylink";
      case Variant::kSegvOnRecovery: return "test-list-segv";
      case Variant::kHangOnRecovery: return "test-list-hang";
      case Variant::kLeaky: return "test-list-leaky";
    }
    return "?";
  }

  static Status Create(Pool& pool, const IndexOptions& opts, uint64_t* root_off) {
    uint64_t off = 0;
    WORT_RETURN_IF_ERROR(pool.allocator().AllocZeroed(sizeof(ListRoot), &off));
    ListRoot* r = pool.at<ListRoot>(off);
    r->magic = kListMagic;
    r->head = 0;
    r->count = 0;
    r->key_type = static_cast<uint64_t>(opts.key_type);
    pm::persist(r, sizeof(*r));
    *root_off = off;
    return Status::OK();
  }

  static Status Open(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) {
    if (!pool.contains(root_off, sizeof(ListRoot)) || pool.at<ListRoot>(root_off)->magic != kListMagic)
      return Status::Corruption("not a test list root");
    if (V == Variant::kSegvOnRecovery && !pool.opened_clean()) {
      // Page 0 is never mapped: SIGSEGV (not a null pointer, which UBSan would stop first).
      volatile int* volatile nowhere = reinterpret_cast<volatile int*>(uintptr_t{16});
      *nowhere = 1;
    }
    if (V == Variant::kHangOnRecovery && !pool.opened_clean()) {
      for (volatile bool forever = true; forever;) {
      }
    }
    *out = std::make_unique<TestList>(pool, root_off);
    return Status::OK();
  }

  static void Visit(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark) {
    mark(root_off);
    const uint64_t max_nodes = pool.size() / 64;
    uint64_t n = 0;
    for (uint64_t off = pool.at<ListRoot>(root_off)->head; off != 0 && n++ < max_nodes;
         off = pool.at<ListNode>(off)->next) {
      if (!pool.contains(off, sizeof(ListNode))) break;
      mark(off);
    }
  }

 private:
  ListNode* Node(uint64_t off) const { return pool_.at<ListNode>(off); }

  Status CheckKey(std::string_view key) const {
    if (key.size() > kMaxKeyLen) return Status::InvalidArgument("key too long");
    if (key_type() == KeyType::kU64 && key.size() != 8) return Status::InvalidArgument("u64 keys are 8 bytes");
    return Status::OK();
  }

  // Sets *link to the word that points (or would point) at the key's node, *found to the node
  // or nullptr. Sorted variants: the first node with a key >= key; unsorted: the head.
  void Find(std::string_view key, uint64_t** link, ListNode** found) const {
    uint64_t* l = &root_->head;
    *found = nullptr;
    if (kSorted) {
      for (uint64_t off = *l; off != 0; off = *l) {
        ListNode* node = Node(off);
        const int c = CompareKeys(node->Key(), key);
        if (c == 0) *found = node;
        if (c >= 0) break;
        l = &node->next;
      }
      *link = l;
      return;
    }
    // Unsorted: the link to the node when found, else the head (Add prepends).
    for (uint64_t off = *l; off != 0; off = *l) {
      if (Node(off)->Key() == key) {
        *found = Node(off);
        *link = l;
        return;
      }
      l = &Node(off)->next;
    }
    *link = &root_->head;
  }

  Status Add(std::string_view key, uint64_t value, uint64_t* link) {
    uint64_t off = 0;
    WORT_RETURN_IF_ERROR(pool_.allocator().Alloc(sizeof(ListNode) + key.size(), &off));
    ListNode* node = Node(off);
    node->next = *link;
    node->value = value;
    node->key_len = static_cast<uint32_t>(key.size());
    node->pad = 0;
    std::memcpy(node->key, key.data(), key.size());
    const size_t size = sizeof(ListNode) + key.size();
    if (V == Variant::kEarlyLink) {  // BROKEN: published before its key is written
      node->key_len = 0;
      pm::persist(node, size);
      pm::store8(link, off);
      pm::persist(link, 8);
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(300);
      while (std::chrono::steady_clock::now() < until) {
      }
      node->key_len = static_cast<uint32_t>(key.size());
      pm::persist(node, size);
      return Status::OK();
    }
    switch (V) {
      case Variant::kCorrect:
      case Variant::kUnordered:
      case Variant::kEarlyLink:
      case Variant::kSegvOnRecovery:
      case Variant::kHangOnRecovery:
      case Variant::kLeaky:
        pm::persist(node, size);    // write -> persist
        pm::store8(link, off);      // -> publish (the commit point)
        pm::persist(link, 8);       // -> persist
        break;
      case Variant::kNoPersist:     // BROKEN: the node is never persisted
        pm::store8(link, off);
        pm::persist(link, 8);
        break;
      case Variant::kSwapped:       // BROKEN: published before the node is persistent
        pm::store8(link, off);
        pm::persist(link, 8);
        pm::persist(node, size);
        break;
      case Variant::kLinePair:      // correct only with whole-line write-back
        pm::persist(node, size);
        pm::store8(&root_->head, off);
        pm::store8(&root_->count, root_->count + 1);
        pm::persist(root_, sizeof(ListRoot));
        break;
    }
    return Status::OK();
  }

  Pool& pool_;
  ListRoot* root_;
};

template <Variant V>
const IndexKind* KindOf(uint32_t id, bool ordered) {
  static const IndexKind k{TestList<V>::Name(), id, "test-only persistent linked list", ordered,
                           &TestList<V>::Create, &TestList<V>::Open, &TestList<V>::Visit};
  return &k;
}

// Registers the test kinds (ids kind_id::kTestFirst + 0..8) once per process.
inline void RegisterTestLists() {
  static const bool once = [] {
    const uint32_t f = kind_id::kTestFirst;
    RegisterIndexKind(KindOf<Variant::kCorrect>(f + 0, true));
    RegisterIndexKind(KindOf<Variant::kUnordered>(f + 1, false));
    RegisterIndexKind(KindOf<Variant::kNoPersist>(f + 2, true));
    RegisterIndexKind(KindOf<Variant::kSwapped>(f + 3, true));
    RegisterIndexKind(KindOf<Variant::kLinePair>(f + 4, false));
    RegisterIndexKind(KindOf<Variant::kEarlyLink>(f + 5, true));
    RegisterIndexKind(KindOf<Variant::kSegvOnRecovery>(f + 6, true));
    RegisterIndexKind(KindOf<Variant::kHangOnRecovery>(f + 7, true));
    RegisterIndexKind(KindOf<Variant::kLeaky>(f + 8, true));
    return true;
  }();
  (void)once;
}

}  // namespace wort::testlist
