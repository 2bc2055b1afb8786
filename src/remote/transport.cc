// src/remote/transport.cc - Listen/Connect: dispatch to the backend named in the call/RegionInfo.
#include "remote/transport.h"

#include <atomic>
#include <cstring>
#include <string>

#include "remote/backend.h"
#include "wort/pm.h"

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

namespace {
void CopyAtomicWords(char* dst, const char* src, std::size_t len, bool region_is_src) {
  char* region = region_is_src ? const_cast<char*>(src) : dst;
  std::size_t i = 0;
  auto byte = [&](std::size_t k) {
    if (region_is_src) {
      dst[k] = static_cast<char>(std::atomic_ref<unsigned char>(reinterpret_cast<unsigned char&>(region[k]))
                                     .load(std::memory_order_acquire));
    } else {
      std::atomic_ref<unsigned char>(reinterpret_cast<unsigned char&>(region[k]))
          .store(static_cast<unsigned char>(src[k]), std::memory_order_release);
    }
  };
  for (; i < len && reinterpret_cast<std::uintptr_t>(region + i) % 8 != 0; ++i) byte(i);
  for (; i + 8 <= len; i += 8) {
    auto& w = *reinterpret_cast<std::uint64_t*>(region + i);
    if (region_is_src) {
      const std::uint64_t v = std::atomic_ref<std::uint64_t>(w).load(std::memory_order_acquire);
      std::memcpy(dst + i, &v, 8);
    } else {
      std::uint64_t v;
      std::memcpy(&v, src + i, 8);
      std::atomic_ref<std::uint64_t>(w).store(v, std::memory_order_release);
    }
  }
  for (; i < len; ++i) byte(i);
}
}  // namespace

void CopyFromRegion(char* dst, const char* region_src, std::size_t len) { CopyAtomicWords(dst, region_src, len, true); }
void CopyToRegion(char* region_dst, const char* src, std::size_t len) { CopyAtomicWords(region_dst, src, len, false); }

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

// crash-site: outside: a CANRT client's write-back of its own DataItem (the local backend's Persist); explored by CANRT's crash explorer (tests/remote/canrt_test.cc, CanrtCrash ClientActive)
void PersistMapped(const char* p, std::size_t len) { pm::persist(p, len); }

}  // namespace wort::remote
