// src/remote/backend.h - what the transport's backends (local.cc, ucx.cc) share: the per-backend
// entry points Listen/Connect dispatch to (transport.cc), the bounds checks every operation makes,
// and the Unix-domain notification channel the local backend uses.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "remote/transport.h"

namespace wort::remote {

Status ListenLocal(void* base, std::uint64_t size, std::string_view pool_path, NotifyHandler on_notify,
                   std::unique_ptr<Server>* out);
Status ConnectLocal(const RegionInfo& info, std::unique_ptr<Connection>* out);
Status ListenUcx(void* base, std::uint64_t size, std::string_view pool_path, NotifyHandler on_notify,
                 std::unique_ptr<Server>* out);
Status ConnectUcx(const RegionInfo& info, std::unique_ptr<Connection>* out);

// Largest Notify message (both backends): a notification is a small control message.
inline constexpr std::size_t kMaxNotifyLen = 4096;

// InvalidArgument unless [off, off+len) lies inside a region of `size` bytes.
Status CheckRange(std::uint64_t off, std::uint64_t len, std::uint64_t size);
// The same, and `off` 8-byte aligned (atomics).
Status CheckAtomic(std::uint64_t off, std::uint64_t size);

}  // namespace wort::remote
