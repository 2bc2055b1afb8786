// src/remote/transport.cc - Listen/Connect: dispatch to the backend named in the call/RegionInfo.
#include "remote/transport.h"

#include <string>

#include "remote/backend.h"

namespace wort::remote {

#ifdef WORT_NO_UCX
// A build without the ucx backend (-DWORT_UCX=OFF; the default of ThreadSanitizer builds).
namespace {
Status NoUcx() {
  return Status::NotSupported("remote: this build has no ucx backend (configured with -DWORT_UCX=OFF)");
}
}  // namespace
Status ListenUcx(void*, std::uint64_t, std::string_view, NotifyHandler, std::unique_ptr<Server>*) { return NoUcx(); }
Status ConnectUcx(const RegionInfo&, std::unique_ptr<Connection>*) { return NoUcx(); }
#endif

Status CheckRange(std::uint64_t off, std::uint64_t len, std::uint64_t size) {
  if (off > size || len > size - off) {
    return Status::InvalidArgument("remote: range [" + std::to_string(off) + ", +" + std::to_string(len) +
                                   ") is outside the region of " + std::to_string(size) + " bytes");
  }
  return Status::OK();
}

Status CheckAtomic(std::uint64_t off, std::uint64_t size) {
  if (off % 8 != 0) return Status::InvalidArgument("remote: atomic at offset " + std::to_string(off) + " is not 8-byte aligned");
  return CheckRange(off, 8, size);
}

Status Listen(std::string_view backend, void* base, std::uint64_t size, std::string_view pool_path,
              NotifyHandler on_notify, std::unique_ptr<Server>* out) {
  if (base == nullptr || size == 0) return Status::InvalidArgument("remote: Listen needs a non-empty region");
  if (backend == "local") return ListenLocal(base, size, pool_path, std::move(on_notify), out);
  if (backend == "ucx") return ListenUcx(base, size, pool_path, std::move(on_notify), out);
  return Status::InvalidArgument("remote: unknown backend '" + std::string(backend) + "' (local, ucx)");
}

Status Connect(const RegionInfo& info, std::unique_ptr<Connection>* out) {
  if (info.backend == "local") return ConnectLocal(info, out);
  if (info.backend == "ucx") return ConnectUcx(info, out);
  return Status::InvalidArgument("remote: unknown backend '" + info.backend + "' (local, ucx)");
}

}  // namespace wort::remote
