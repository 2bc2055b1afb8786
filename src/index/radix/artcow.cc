// ART+CoW: adaptive radix tree made failure-atomic by copy-on-write (WORT paper, FAST 2017,
// section 3.6). NODE256 is updated as in WORT (one 8-byte child store), NODE48 as in WOART
// (Algorithm 5), and NODE4 / NODE16 - here in the original ART layout: sorted partial keys,
// parallel child words and a count (art_node.h, S4/S16) - by copy-on-write: a copy with the
// change is built and persisted, then the parent's word is swapped by one 8-byte store. Prefix
// splits and path merges also copy the node whose header changes, so no header is ever changed
// in place: the depth field is kept (Check uses it) but WORT's depth-based detection and repair
// (Algorithm 2) is never needed here, and a node whose stored depth differs from its real depth
// is reported by Check() as corruption. The code is shared with WOART (art_tree.{h,cc}).
//
// Invariants a reader may rely on after any crash (Check() verifies each):
//   1. Every reference reachable from the root block names a persisted, allocated block.
//   2. A published NODE4/NODE16 never changes except by a store8 of one of its child words
//      (replacing a child by its grown/shrunk/copied version) or of leaf_here; its count, keys
//      (sorted ascending, unsigned, distinct) and header are as built. NODE48/NODE256 entries
//      are valid iff their commit word says so (child index / non-null child word).
//   3. Every inner node has >= 2 entries and a child count in its type's range: NODE4 [0,4],
//      NODE16 [4,16], NODE48 [13,48], NODE256 [37,256].
//   4. Every key below a node starts with the node's path bytes, children differ at the branch
//      position depth + prefix_len, leaf_here's key has exactly that length, an in-order walk
//      is strictly ascending, every leaf is found by Lookup.
//   5. Every node's stored depth equals its real depth.
//   6. Blocks allocated by an operation cut by the crash are unreachable and reclaimed by the
//      pool's post-crash GC.
//
// Write order and commit point per mutation ("commit" = pm::store8 + persist):
//   Upsert of an existing key   commit leaf.value.
//   Insert into an empty tree   persist leaf; commit root word.
//   Insert beside a leaf        persist leaf, persist new NODE4; commit parent word.
//   Insert at a node's end      persist leaf; commit node.leaf_here.
//   Insert, NODE4/NODE16        persist leaf, persist the copy with the entry added (or the
//                               grown node); commit parent word; free the old node.
//   Insert, NODE48              child[free] + persist; commit the child index word.
//   Insert, NODE256             commit child[c].
//   Grow 48->256                persist the new node; commit parent word; free old node.
//   Prefix split                persist leaf, a copy of the node with its shortened prefix and
//                               the new parent NODE4; commit parent word; free the old node.
//   Remove from NODE4/NODE16    persist the copy without the entry (or the shrunk node);
//                               commit parent word; free old node and leaf.
//   Remove from NODE48/NODE256  commit child index word / child word (or shrink as above);
//                               free the leaf.
//   Path merge (1 entry left)   leaf left: commit parent word := leaf. Node C left: persist a
//                               copy of C with the merged header; commit parent word; free the
//                               node, C and the removed leaf.
//
// Size, PoolFull, Open and concurrency: as WOART (woart.cc, art_tree.h). Any NODE4/NODE16
// insert or remove allocates, so either can return PoolFull (with the tree unchanged).
#include "index/kind_ids.h"
#include "index/radix/art_tree.h"
#include "index/registry.h"

namespace wort::art {
namespace {

constexpr uint64_t kArtCowMagic = 0x3142'5257'4f43'5241ull;  // "ARCOWRB1" little-endian

constexpr ArtPolicy kArtCowPolicy{"artcow", kind_id::kArtCow, kArtCowMagic, kS4, kS16, /*in_place=*/false};

Status CreateArtCow(Pool& pool, const IndexOptions& opts, uint64_t* root_off) {
  return ArtTree::Create(pool, kArtCowPolicy, opts, root_off);
}
Status OpenArtCow(Pool& pool, uint64_t root_off, std::unique_ptr<Index>* out) {
  return ArtTree::Open(pool, root_off, kArtCowPolicy, out);
}

const IndexKind kArtCowKind{
    "artcow",
    kind_id::kArtCow,
    "ART+CoW: adaptive radix tree, NODE4/16 and prefix changes by copy-on-write (WORT paper 3.6)",
    /*ordered=*/true,
    &CreateArtCow,
    &OpenArtCow,
    &ArtTree::Visit,
};

}  // namespace
}  // namespace wort::art

// Listed in the table of built-in kinds (BuiltinIndexKinds, src/index/registry.cc).
const wort::IndexKind* wort::builtin_kinds::ArtCow() { return &wort::art::kArtCowKind; }
