#include "sync/version_lock.h"

#include <thread>

namespace wort::sync {

void Backoff(int attempt) {
  if (attempt < 8) {
    for (int i = 0; i < (1 << attempt); ++i) CpuRelax();
  } else {
    std::this_thread::yield();
  }
}

VersionLockTable::VersionLockTable(unsigned bits)
    : mask_((size_t{1} << bits) - 1), words_(std::make_unique<Word[]>(mask_ + 1)) {}

// Constant-initialized (every word 0): usable from any static initializer, never destroyed.
constinit detail::NodeLockArray detail::g_node_locks;

}  // namespace wort::sync
