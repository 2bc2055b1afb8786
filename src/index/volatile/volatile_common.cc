// Marker root block of the volatile reference indexes (see volatile_common.h).
#include "index/volatile/volatile_common.h"

#include <cstring>

namespace wort::vol {

Status CreateMarker(Pool& pool, const IndexOptions& opts, uint32_t kind_id, uint64_t* root_off) {
  if (opts.values_are_blocks)
    return Status::InvalidArgument("volatile index kinds keep nothing in the pool: values_are_blocks is not supported");
  uint64_t off = 0;
  WORT_RETURN_IF_ERROR(pool.allocator().AllocZeroed(sizeof(Marker), &off));
  auto* m = pool.at<Marker>(off);
  m->magic = kMarkerMagic;
  m->key_type = static_cast<uint32_t>(opts.key_type);
  m->kind_id = kind_id;
  // No flush by design (volatile kinds use no pm call; see the header).
  *root_off = off;
  return Status::OK();
}

Status ReadMarker(Pool& pool, uint64_t root_off, uint32_t kind_id, KeyType* kt) {
  if (!pool.contains(root_off, sizeof(Marker))) return Status::Corruption("volatile index: marker outside the pool");
  const auto* m = pool.at<Marker>(root_off);
  if (m->magic != kMarkerMagic || m->kind_id != kind_id)
    return Status::Corruption("volatile index: bad marker block");
  if (m->key_type != static_cast<uint32_t>(KeyType::kU64) && m->key_type != static_cast<uint32_t>(KeyType::kBytes))
    return Status::Corruption("volatile index: bad key type in marker");
  *kt = static_cast<KeyType>(m->key_type);
  return Status::OK();
}

void VisitMarker(const Pool& pool, uint64_t root_off, const std::function<void(uint64_t)>& mark) { mark(root_off); }

}  // namespace wort::vol
