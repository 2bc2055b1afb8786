// src/remote/designs.cc - the table of remote designs and the info file (designs.h).
#include "remote/designs.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace wort::remote {
namespace {

Status ServeReplyWort(const ServeOptions& o, std::unique_ptr<RemoteService>* out) { return ServeReply(o, "wort", out); }
Status ServeReplyWoart(const ServeOptions& o, std::unique_ptr<RemoteService>* out) { return ServeReply(o, "woart", out); }
Status ConnectReplyWort(const RegionInfo& i, std::unique_ptr<RemoteKV>* out) { return ConnectReply(i, "wort", out); }
Status ConnectReplyWoart(const RegionInfo& i, std::unique_ptr<RemoteKV>* out) { return ConnectReply(i, "woart", out); }

}  // namespace

const std::vector<RemoteDesign>& RemoteDesigns() {
  static const std::vector<RemoteDesign> designs = {
      {"reply-wort", "WORT served by request/reply: a per-client request ring, a polling server thread (baseline)",
       ServeReplyWort, ConnectReplyWort},
      {"reply-woart", "WOART served by request/reply: a per-client request ring, a polling server thread (baseline)",
       ServeReplyWoart, ConnectReplyWoart},
      // CANRT plugs in here with one entry: {"canrt", "...", ServeCanrt, ConnectCanrt}, where
      // ServeCanrt opens the pool and the CANRT root, Listen()s on its region with the
      // service's notify handler and returns them as a RemoteService, and ConnectCanrt is the
      // CANRT client's Connect.
  };
  return designs;
}

const RemoteDesign* FindRemoteDesign(std::string_view name) {
  for (const auto& d : RemoteDesigns())
    if (name == d.name) return &d;
  return nullptr;
}

std::string RemoteDesignNames() {
  std::string s;
  for (const auto& d : RemoteDesigns()) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

Status WriteInfoFile(const std::string& path, const std::string& design, const RegionInfo& info) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << "wort-remote 1\ndesign " << design << "\nbackend " << info.backend << "\naddress " << info.address
      << "\nsize " << info.size << "\n";
    if (!f) return Status::IOError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Status::IOError("cannot rename " + tmp + " to " + path);
  return Status::OK();
}

Status ReadInfoFile(const std::string& path, std::string* design, RegionInfo* info) {
  std::ifstream f(path);
  if (!f) return Status::NotFound("cannot open the info file " + path);
  std::string line, magic;
  if (!std::getline(f, magic) || magic != "wort-remote 1") return Status::InvalidArgument(path + " is not a wort-remote info file");
  RegionInfo r;
  std::string d;
  bool have_size = false;
  while (std::getline(f, line)) {
    std::size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    std::string k = line.substr(0, sp), v = line.substr(sp + 1);
    if (k == "design") d = v;
    else if (k == "backend") r.backend = v;
    else if (k == "address") r.address = v;
    else if (k == "size") {
      try {
        r.size = std::stoull(v);
        have_size = true;
      } catch (...) {
        return Status::InvalidArgument(path + ": bad size '" + v + "'");
      }
    }
  }
  if (d.empty() || r.backend.empty() || r.address.empty() || !have_size) {
    return Status::InvalidArgument(path + ": incomplete info file (design, backend, address, size)");
  }
  *design = d;
  *info = r;
  return Status::OK();
}

}  // namespace wort::remote
