// Internal: how an index kind makes itself known. Registration is explicit: each index's .cc
// file defines an accessor wort::builtin_kinds::<Name>() (declared below), and
// BuiltinIndexKinds() (src/index/registry.cc) lists them all in one table. No kind registers
// itself by static initialisation, so a static link (libwort.a) carries every kind: the table
// references each one. A new kind: declare its accessor here, define it in its .cc, add it to
// the table.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "sync/epoch.h"
#include "wort/index.h"

namespace wort {
class Pool;

// The per-index reader-writer lock. Visit functions get only (pool, root offset); a visit that
// runs beside the index's writers (the post-crash GC in the background) takes the index's lock
// in shared mode, so it never sees a write half done. An open index and a visit find the same
// lock here, keyed by (pool mapping, root offset); it is created on first use and dropped when
// no one holds it. Used by the B-trees and the ART-based radix trees.
// A root type that is not an index kind (a structure of a layer above, e.g. CANRT's region in
// src/remote) makes its blocks known to the post-crash GC here: the lookup the registry installs
// (wort/pool.h SetRootVisitorLookup) consults these after the index kinds. Call before opening a
// pool that holds such a root (a static initialiser of the structure's .cc file does).
bool RegisterRootVisitor(uint32_t type_id, RootVisitFn visit);

std::shared_ptr<std::shared_mutex> IndexLock(const Pool* pool, uint64_t root_off);

// One handle per index per process. Every kind's handle keeps part of the index in DRAM that a
// second handle would not share: its key count (every kind), FPTree's and NVTree's inner nodes,
// the static hash tables' view, the volatile kinds' whole tree, the radix trees' fast bound.
// Through two handles, counts and Check go wrong, and FPTree's writes misplaced keys in its
// persistent leaves (found 2026-11-26: "leaf keys not above the previous leaf's"). So each
// kind's open claims the index, keyed like IndexLock, and keeps the token for the handle's life;
// a second open while it lives gets Busy, naming the kind (tests/conformance, SecondHandle).
// Share the handle instead: an Index is safe to use from many threads (wort/index.h).
Status ClaimSoleHandle(const Pool* pool, uint64_t root_off, const char* kind, std::shared_ptr<void>* token);

// Concurrency mode of the radix trees (and of any kind that follows src/sync's protocol):
// false (default): lock-free readers, per-node write locks (optimistic lock coupling);
// true: the old single reader-writer lock per index (IndexLock: readers shared, writers
// exclusive), kept for before/after comparisons (`wort bench --global-lock`). Read when an
// index is opened; the environment variable WORT_GLOBAL_LOCK=1 sets the initial value.
bool GlobalIndexLock();
void SetGlobalIndexLock(bool on);

// An index's lock (IndexLock) as a kind that follows src/sync's protocol holds it, by role:
//   kReader   global-lock mode: shared;    otherwise: not taken (readers are lock-free)
//   kWriter   global-lock mode: exclusive; otherwise: shared (writers lock nodes)
//   kQuiesce  global-lock mode: shared;    otherwise: exclusive (Check, Stats: no writer runs)
// With a writer gate (the pool's EpochManager; the radix trees, issue 31), kWriter and kQuiesce
// outside global-lock mode use the gate instead of the lock: a writer then stores only to its
// thread's epoch slot (no lock word shared by every writer), kQuiesce waits for the writers.
class IndexModeLock {
 public:
  enum Role { kReader, kWriter, kQuiesce };
  IndexModeLock(std::shared_mutex& mu, sync::EpochManager* gate, bool global_lock, Role role) {
    if (gate == nullptr || global_lock || role == kReader) {
      *this = IndexModeLock(mu, global_lock, role);
      return;
    }
    gate_ = gate;
    quiesce_ = role == kQuiesce;
    if (quiesce_) gate->QuiesceWriters();
    else gate->WriterEnter();
  }
  IndexModeLock& operator=(IndexModeLock&& o) noexcept {
    Release();
    mu_ = o.mu_;
    exclusive_ = o.exclusive_;
    gate_ = o.gate_;
    quiesce_ = o.quiesce_;
    o.mu_ = nullptr;
    o.gate_ = nullptr;
    return *this;
  }
  // A reader outside global-lock mode takes nothing: two stores, no call (this sits on every
  // lookup's path).
  IndexModeLock(std::shared_mutex& mu, bool global_lock, Role role) {
    const bool exclusive = global_lock ? role == kWriter : role == kQuiesce;
    if (exclusive) {
      mu.lock();
      mu_ = &mu;
      exclusive_ = true;
    } else if (global_lock || role != kReader) {
      mu.lock_shared();
      mu_ = &mu;
    }
  }
  IndexModeLock(const IndexModeLock&) = delete;
  IndexModeLock& operator=(const IndexModeLock&) = delete;
  IndexModeLock(IndexModeLock&& o) noexcept : mu_(o.mu_), exclusive_(o.exclusive_), gate_(o.gate_), quiesce_(o.quiesce_) {
    o.mu_ = nullptr;
    o.gate_ = nullptr;
  }
  ~IndexModeLock() { Release(); }
  // Lets go of the lock before the object ends (a scan releases it before its callbacks).
  void Release() {
    if (gate_ != nullptr) {
      if (quiesce_) gate_->EndQuiesce();
      else gate_->WriterExit();
      gate_ = nullptr;
    }
    if (mu_ == nullptr) return;
    if (exclusive_) mu_->unlock();
    else mu_->unlock_shared();
    mu_ = nullptr;
  }

 private:
  std::shared_mutex* mu_ = nullptr;
  bool exclusive_ = false;
  sync::EpochManager* gate_ = nullptr;
  bool quiesce_ = false;
};

// What the visit function of such a kind holds while it walks beside writers: in global-lock
// mode the index's lock, shared (as before); otherwise nothing (it follows the readers'
// protocol instead).
class VisitModeLock {
 public:
  VisitModeLock(const Pool* pool, uint64_t root_off) {
    if (!GlobalIndexLock()) return;
    mu_ = IndexLock(pool, root_off);
    g_ = std::shared_lock(*mu_);
  }

 private:
  std::shared_ptr<std::shared_mutex> mu_;
  std::shared_lock<std::shared_mutex> g_;
};

// Aborts on a duplicate name or type id (a programming error). Always returns true.
// The accessors of the built-in kinds, one per kind (defined next to each kind's code).
namespace builtin_kinds {
const IndexKind* B3Tree();
const IndexKind* FastFair();
const IndexKind* FpTree();
const IndexKind* NvTree();
const IndexKind* WbTree();
const IndexKind* WbTreeSlot();
const IndexKind* Cceh();
const IndexKind* CcehCow();
const IndexKind* Linp();
const IndexKind* Cuck();
const IndexKind* Bch();
const IndexKind* Levl();
const IndexKind* Path();
const IndexKind* ArtCow();
const IndexKind* Woart();
const IndexKind* Roart();
const IndexKind* Wort();
const IndexKind* Vart();
const IndexKind* VbpTree();
const IndexKind* Vradix();
}  // namespace builtin_kinds

// Every built-in kind, in one table (no registration side effects).
const std::vector<const IndexKind*>& BuiltinIndexKinds();

// Adds a kind that is not built in (tests add deliberately broken variants). Aborts on a
// duplicate name or type id (a programming error). Always returns true.
bool RegisterIndexKind(const IndexKind* k);
}  // namespace wort
