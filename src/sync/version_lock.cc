#include "sync/version_lock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace wort::sync {

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

VersionLockTable::VersionLockTable(unsigned bits)
    : mask_((size_t{1} << bits) - 1), words_(std::make_unique<Word[]>(mask_ + 1)) {}

}  // namespace wort::sync
