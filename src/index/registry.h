// Internal: how an index kind makes itself known. Each index's .cc file does
//   static const bool kRegistered = wort::RegisterIndexKind(&kMyKind);
// The library is built as an object library, so these registrations are always linked in.
#pragma once
#include "wort/index.h"

namespace wort {
// Aborts on a duplicate name or type id (a programming error). Always returns true.
bool RegisterIndexKind(const IndexKind* k);
}  // namespace wort
