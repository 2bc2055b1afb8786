// src/remote/designs.h - the remote key-value designs `wort serve-remote` and `wort bench-remote`
// run, by name, and the info file a server publishes for its clients.
//
// A design is a server (Serve: a RemoteService over a pool and a transport backend) and a client
// (Connect: a RemoteKV). The table is in designs.cc: "reply-wort" and "reply-woart" (the paper's
// request/reply baselines, reply_kv.h); CANRT plugs in with one more entry there (see the
// comment in designs.cc).
//
// Info file: `wort serve-remote` writes "<pool>.remote" (or --info FILE), five lines
//   wort-remote 1
//   design <name>
//   backend <local|ucx>
//   address <RegionInfo.address>
//   size <RegionInfo.size>
// and removes it when it stops. `wort bench-remote --connect FILE` reads it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "remote/remote_kv.h"
#include "remote/reply_kv.h"
#include "remote/transport.h"

namespace wort::remote {

struct RemoteDesign {
  const char* name;
  const char* description;
  Status (*serve)(const ServeOptions& opts, std::unique_ptr<RemoteService>* out);
  Status (*connect)(const RegionInfo& info, std::unique_ptr<RemoteKV>* out);
};

const std::vector<RemoteDesign>& RemoteDesigns();
// Null when unknown.
const RemoteDesign* FindRemoteDesign(std::string_view name);
// "reply-wort, reply-woart, ..." (for --help and error messages).
std::string RemoteDesignNames();

Status WriteInfoFile(const std::string& path, const std::string& design, const RegionInfo& info);
Status ReadInfoFile(const std::string& path, std::string* design, RegionInfo* info);

}  // namespace wort::remote
