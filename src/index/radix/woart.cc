// WOART: Write Optimal Adaptive Radix Tree (WORT paper, FAST 2017, section 3.5; thesis
// Algorithms 3-5). An ART with 8-bit partial keys and path compression whose every mutation is
// made failure-atomic by ordering and one 8-byte commit store, without logging. The code is
// shared with ART+CoW (art_tree.{h,cc}); layouts and their static_asserts are in art_node.h.
//
// Nodes (art_node.h): NODE4 = W4 (sorted partial keys + slot array in one 8-byte word, child
// words appended where free), NODE16 = W16 (unsorted partial keys + child words, 16-bit bitmap
// in one 8-byte word), NODE48 (child index array, encoding "child word index + 1, 0 = empty",
// + 48 child words), NODE256 (256 child words, as WORT). Each inner node has a compression
// header (depth 12 bits, prefix length 12 bits, 5 inline prefix bytes: one 8-byte word) and a
// leaf_here word for the key that ends exactly at the node. Leaves hold key length, key bytes
// and the 8-byte value; a reference's bit 0 tells a leaf (1) from an inner node (0).
//
// Invariants a reader may rely on after any crash (Check() verifies each):
//   1. Every reference reachable from the root block names a persisted, allocated block: leaves
//      and nodes are persisted before the store that publishes them.
//   2. An entry of a node is valid iff its node's commit word says so (NODE4 slot word, NODE16
//      bitmap, NODE48 child index, NODE256/leaf_here non-zero); valid entries name non-null
//      children and valid partial keys are distinct; NODE4 keys are sorted ascending, unsigned.
//   3. Every inner node has >= 2 entries (children + leaf_here) and a child count in its type's
//      range: NODE4 [0,4], NODE16 [4,16], NODE48 [13,48], NODE256 [37,256].
//   4. Every key below a node starts with the node's path bytes; its children differ at the
//      branch position depth + prefix_len; leaf_here's key has exactly that length; keys come
//      out of an in-order walk strictly ascending; every leaf is found by Lookup.
//   5. A node's stored depth equals its real depth, EXCEPT for a node caught in an interrupted
//      prefix split or path merge (WORT's depth rule): its header was stored, its parent's word
//      was not. Such a header keeps depth + prefix_len equal to the real branch position, so
//      readers skip its prefix comparison (the full key is compared at the leaf), Scan and
//      writers recompute the real header from the smallest and largest leaf below (Algorithm 2)
//      and writers store it back (one store8 + persist). Check() reports it as a note, not an
//      error.
//   6. Blocks that were allocated by an operation cut by the crash and never published are
//      unreachable; the pool's post-crash GC (visit function) reclaims them.
//
// Write order and commit point (the one 8-byte store that publishes the change) per mutation;
// "persist" = pm::persist (flush + fence), "commit" = pm::store8 then persist:
//   Upsert of an existing key  commit leaf.value.
//   Insert into an empty tree  persist leaf; commit root word.
//   Insert beside a leaf       persist leaf, persist new NODE4 (both keys); commit parent word.
//   Insert at a node's end     persist leaf; commit node.leaf_here.
//   Insert, NODE4 (Alg. 3)     store child[free] + persist; commit the slot word (keys + slots).
//   Insert, NODE16 (Alg. 4)    keys[free], child[free] + persist; commit the bitmap word.
//   Insert, NODE48 (Alg. 5)    child[free] (free found via the child index array) + persist;
//                              commit the 8-byte word holding child_index[c].
//   Insert, NODE256            commit child[c].
//   Grow 4->16->48->256        persist leaf, persist the new larger node; commit parent word;
//                              then free the old node (copy-and-exchange).
//   Prefix split (Alg. 1)      persist leaf, persist new parent NODE4; commit-like store8 +
//                              persist of the old node's header (depth += i+1, prefix cut; the
//                              invariant-5 window opens); commit parent word (window closes).
//   Remove, no shrink          commit the node's slot word / bitmap / child index word / child
//                              word / leaf_here; then free the leaf.
//   Shrink 256->48->16->4      persist the new smaller node; commit parent word; free old node
//                              and leaf (copy-and-exchange).
//   Path merge (1 entry left)  remaining entry a leaf: commit parent word := leaf; free node and
//                              removed leaf. Remaining entry a node C: store8 + persist C's
//                              header (depth := node's depth, prefix := node prefix + partial
//                              key + C prefix; the invariant-5 window opens, and a repair
//                              restores C's old header: the removal is then wholly absent);
//                              commit parent word := C; free node and removed leaf.
//   Header repair (Alg. 2)     commit the node's header.
//
// Size: a DRAM counter, recounted by walking the tree on the first Size() after open (so a crash
// cannot make it wrong and Open costs nothing), then kept by the writers.
// PoolFull: every block an operation needs is allocated before its first persistent store; on
// failure the blocks already allocated are freed and the tree is unchanged. Remove can need a
// block (shrink) and can therefore also return PoolFull.
// Open: reads the root block only; no rebuild, no recovery pass (repairs are lazy, invariant 5).
// Concurrency: see art_tree.h (optimistic lock coupling, epochs; the visit follows the readers'
// protocol beside writers).
#include "index/kind_ids.h"
#include "index/radix/art_tree.h"
#include "index/registry.h"

namespace wort::art {
namespace {

constexpr uint64_t kWoartMagic = 0x3142'5254'5241'4f57ull;  // "WOARTRB1" little-endian

constexpr ArtPolicy kWoartPolicy{"woart", kind_id::kWoart, kWoartMagic, kW4, kW16, /*in_place=*/true};

Status CreateWoart(Pool& pool, const IndexOptions& opts, uint64_t* root_off) {
  return ArtTree::Create(pool, kWoartPolicy, opts, root_off);
}
Status OpenWoart(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) {
  return ArtTree::Open(pool, root_off, kWoartPolicy, out);
}

const IndexKind kWoartKind{
    "woart",
    kind_id::kWoart,
    "WOART: adaptive radix tree, NODE4/16/48 updated in place by one 8-byte commit (WORT paper 3.5)",
    /*ordered=*/true,
    &CreateWoart,
    &OpenWoart,
    &ArtTree::Visit,
};
[[maybe_unused]] const bool kRegistered = RegisterIndexKind(&kWoartKind);

}  // namespace
}  // namespace wort::art
