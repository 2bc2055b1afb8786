// Internal: what the `wort` subcommands that run a script (reproduce, knn bench) share - finding
// the binary, an installed or source-tree file, a python3 with matplotlib - and the comma lists
// of their options.
#pragma once

#include <string>
#include <vector>

namespace wort::cli {

// The running binary's path ("" if /proc/self/exe cannot be read).
std::string SelfExe();
// The first existing of: $env, <exe dir>/../<rel>, <exe dir>/<rel>, <exe dir>/../share/wort/<rel>,
// and, for a binary in a build tree (a CMakeCache.txt beside it), <source tree>/<rel> ("" if
// none): an installed wort finds its share files (cmake/install.cmake), a build its source tree's.
std::string FindFile(const char* env, const std::string& rel);
// $WORT_PYTHON, else the first python3 that has matplotlib (/usr/bin/python3 before the PATH's,
// since a pyenv shim may shadow the system's packages), else "python3".
std::string FindPython();
// "a,b,,c" -> {"a", "b", "c"}; empty items and "all" are dropped.
std::vector<std::string> SplitComma(const std::string& s);

}  // namespace wort::cli
