// The ending of one optimistic attempt of a writer (sync.h, the restart rule R4): a write
// operation loops `while (XAttempt(...) == Attempt::kRestart) Backoff(attempt)`; an attempt ends
// either with its result (kDone, the Status stored for the caller) or asking for a restart.
// Shared by the radix trees' insert and remove attempts (art_tree.cc, wort.cc, roart.cc).
#pragma once

#include <cstdint>
#include <utility>

#include "sync/version_lock.h"
#include "wort/status.h"

namespace wort::sync {

// Result of one optimistic attempt of an operation.
enum class Attempt { kDone, kRestart };

class AttemptEnd {
 public:
  explicit AttemptEnd(Status* out) : out_(out) {}
  // The attempt's result: stored for the caller; the operation ends.
  Attempt Done(Status st) const {
    *out_ = std::move(st);
    return Attempt::kDone;
  }
  // The key was found absent while reading the node locked by `l` at version `v`: NotFound if
  // that version still holds (what was read is consistent), else a restart.
  Attempt NotFound(const VersionLock& l, uint64_t v) const {
    return l.CheckOrRestart(v) ? Done(Status::NotFound("key not found")) : Attempt::kRestart;
  }

 private:
  Status* out_;
};

}  // namespace wort::sync
