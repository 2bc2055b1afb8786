// index/volatile/volatile_common.h - what the volatile reference indexes share (vbptree, vart,
// vradix).
//
// These kinds are the DRAM baselines of the WORT paper's figures (thesis Fig 5.5): they keep every
// node in DRAM (operator new; vart: its NodeArena, node_arena.h), make no persistence claim and
// use no wort::pm call at all. Their
// data is LOST ON CLOSE: the pool holds only a 64-byte *marker* root block (magic, key type), so
// the kind can be named in a pool's root table, and Open of such a root returns an EMPTY index.
// Kind names start with "v"; the crash suite excludes them (they make no crash claim).
//
// Marker root block (64 B allocator block, never changed after Create):
//   magic u64 | key_type u32 | pad
// The marker is written with plain stores (no flush): a pool closed cleanly keeps it (MAP_SHARED);
// after a power failure it may be lost, and Open then reports Corruption.
//
// Visit reports the marker block only (nothing else of these kinds lives in the pool).
//
// Thread safety of vbptree and vradix (VolatileIndex below): one std::shared_mutex per index
// object: readers shared, writers exclusive. Scan calls fn while holding the lock in shared mode:
// fn must not write to the same index. vart does not use VolatileIndex: it is concurrent
// (optimistic lock coupling on src/sync; lock-free readers, callbacks run with no lock held; see
// vart.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>

#include "wort/alloc.h"
#include "wort/index.h"
#include "wort/pool.h"

namespace wort::vol {

inline constexpr uint64_t kMarkerMagic = 0x4b52414d4c4f5621ull;  // "!VOLMARK"

struct Marker {
  uint64_t magic;
  uint32_t key_type;
  uint32_t kind_id;
  uint64_t pad[6];
};
static_assert(sizeof(Marker) == 64);

// Base class: key validation, the lock, the marker and the Index methods; a kind implements the
// Do* hooks (called with the lock held).
class VolatileIndex : public Index {
 public:
  VolatileIndex(Pool* pool, uint64_t root_off, KeyType kt) : pool_(pool), root_off_(root_off), kt_(kt) {}
  KeyType key_type() const override { return kt_; }
  // Keeps ClaimSoleHandle's token for this handle's life (registry.h: one handle per index).
  void KeepSoleHandle(std::shared_ptr<void> token) { sole_handle_ = std::move(token); }

  Status Insert(std::string_view key, uint64_t value) override {
    WORT_RETURN_IF_ERROR(ValidKey(key));
    std::unique_lock<std::shared_mutex> g(mu_);
    bool inserted = false;
    WORT_RETURN_IF_ERROR(DoPut(key, value, /*replace=*/false, &inserted));
    if (!inserted) return Status::AlreadyExists("key present");
    ++size_;
    return Status::OK();
  }
  Status Upsert(std::string_view key, uint64_t value, bool* inserted) override {
    WORT_RETURN_IF_ERROR(ValidKey(key));
    std::unique_lock<std::shared_mutex> g(mu_);
    bool ins = false;
    WORT_RETURN_IF_ERROR(DoPut(key, value, /*replace=*/true, &ins));
    if (ins) ++size_;
    if (inserted) *inserted = ins;
    return Status::OK();
  }
  Status Lookup(std::string_view key, uint64_t* value) const override {
    WORT_RETURN_IF_ERROR(ValidKey(key));
    std::shared_lock<std::shared_mutex> g(mu_);
    return DoLookup(key, value) ? Status::OK() : Status::NotFound("key absent");
  }
  Status Remove(std::string_view key) override {
    WORT_RETURN_IF_ERROR(ValidKey(key));
    std::unique_lock<std::shared_mutex> g(mu_);
    if (!DoRemove(key)) return Status::NotFound("key absent");
    --size_;
    return Status::OK();
  }
  Status Scan(std::string_view start, const std::string_view* end, size_t limit, const ScanFn& fn) const override {
    if (limit == 0) return Status::OK();
    std::shared_lock<std::shared_mutex> g(mu_);
    size_t n = 0;
    DoScan(start, [&](std::string_view k, uint64_t v) {
      if (end && CompareKeys(k, *end) > 0) return false;
      if (!fn(k, v)) return false;
      return ++n < limit;
    });
    return Status::OK();
  }
  uint64_t Size() const override {
    std::shared_lock<std::shared_mutex> g(mu_);
    return size_;
  }
  Status Check(std::string* report) const override {
    std::shared_lock<std::shared_mutex> g(mu_);
    std::string r;
    const uint64_t n = DoCheck(&r);
    if (n != size_) r += "key count " + std::to_string(n) + " != Size() " + std::to_string(size_) + "\n";
    if (r.empty()) return Status::OK();
    if (report) *report += r;
    return Status::Corruption(std::string(kind()) + ": " + r);
  }
  IndexStats Stats() const override {
    std::shared_lock<std::shared_mutex> g(mu_);
    IndexStats st;
    DoStats(&st);
    st.keys = size_;
    st.bytes_allocated = pool_->allocator().UsableSize(root_off_);
    return st;
  }

 protected:
  using Emit = std::function<bool(std::string_view, uint64_t)>;
  // Adds or (replace) overwrites; *inserted = whether the key was new. When !replace and the key
  // exists, nothing changes and *inserted = false.
  virtual Status DoPut(std::string_view key, uint64_t value, bool replace, bool* inserted) = 0;
  virtual bool DoLookup(std::string_view key, uint64_t* value) const = 0;
  virtual bool DoRemove(std::string_view key) = 0;
  // Emits keys >= start in ascending order until emit returns false.
  virtual void DoScan(std::string_view start, const Emit& emit) const = 0;
  // Verifies the structure; appends findings; returns the number of keys found.
  virtual uint64_t DoCheck(std::string* report) const = 0;
  // Fills inner_nodes, leaves, avg_leaf_depth, volatile_bytes (bytes_allocated = the marker).
  virtual void DoStats(IndexStats* st) const = 0;

  Status ValidKey(std::string_view key) const {
    if (kt_ == KeyType::kU64) {
      if (key.size() != 8) return Status::InvalidArgument("this index takes 8-byte keys (KeyType::kU64)");
    } else if (key.size() > kMaxKeyLen) {
      return Status::InvalidArgument("key longer than kMaxKeyLen");
    }
    return Status::OK();
  }

  Pool* pool_;
  std::shared_ptr<void> sole_handle_;
  uint64_t root_off_;
  KeyType kt_;
  uint64_t size_ = 0;
  mutable std::shared_mutex mu_;
};

// Creates the marker block (plain stores; see above).
Status CreateMarker(Pool& pool, const IndexOptions& opts, uint32_t kind_id, uint64_t* root_off);
// Reads the marker: its key type. Corruption if it is not a marker of kind_id.
Status ReadMarker(Pool& pool, uint64_t root_off, uint32_t kind_id, KeyType* kt);
// Visit of every volatile kind: the marker only.
void VisitMarker(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark);

}  // namespace wort::vol
