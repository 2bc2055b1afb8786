// src/remote/ucx.cc - the "ucx" backend (to come in the next commit).
#include "remote/backend.h"

namespace wort::remote {

Status ListenUcx(void*, std::uint64_t, std::string_view, NotifyHandler, std::unique_ptr<Server>*) {
  return Status::NotSupported("remote: the ucx backend is not built yet");
}
Status ConnectUcx(const RegionInfo&, std::unique_ptr<Connection>*) {
  return Status::NotSupported("remote: the ucx backend is not built yet");
}

}  // namespace wort::remote
