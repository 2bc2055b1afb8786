#include "cli/files.h"

#include <fmt/core.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

namespace wort::cli {
namespace {

bool Exists(const std::string& p) { return !p.empty() && access(p.c_str(), R_OK) == 0; }

// The source tree: this file is src/cli/files.cc in it.
std::string SourceRoot() {
  std::string f = __FILE__;
  const auto pos = f.rfind("/src/cli/");
  return pos == std::string::npos ? "" : f.substr(0, pos);
}

}  // namespace

std::string SelfExe() {
  char buf[PATH_MAX];
  const ssize_t len = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (len <= 0) return "";
  buf[len] = 0;
  return buf;
}

std::string FindFile(const char* env, const std::string& rel) {
  if (const char* e = std::getenv(env); e && *e) return e;
  const std::string exe = SelfExe();
  const std::string dir = exe.substr(0, exe.rfind('/'));
  // Beside the executable (a build tree inside the source tree: build/../scripts), then where
  // an install puts them (<prefix>/bin/wort: <prefix>/share/wort, cmake/install.cmake), then the
  // source tree this binary was compiled from - only from a build tree (its directory has a
  // CMakeCache.txt): an installed wort never reads a source tree that may have moved on.
  for (const std::string& c : {dir + "/../" + rel, dir + "/" + rel, dir + "/../share/wort/" + rel})
    if (Exists(c)) return c;
  if (Exists(dir + "/CMakeCache.txt") && Exists(SourceRoot() + "/" + rel)) return SourceRoot() + "/" + rel;
  return "";
}

std::string FindPython() {
  if (const char* e = std::getenv("WORT_PYTHON"); e && *e) return e;
  for (const char* p : {"/usr/bin/python3", "python3"}) {
    const std::string cmd = fmt::format("{} -c 'import matplotlib' >/dev/null 2>&1", p);
    if (std::system(cmd.c_str()) == 0) return p;
  }
  return "python3";
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    std::string item = s.substr(pos, comma - pos);
    if (!item.empty() && item != "all") out.push_back(item);
    pos = comma + 1;
  }
  return out;
}

}  // namespace wort::cli
