// Shared by the end-to-end server tests that run a Python script (server_e2e_test.cc,
// serve_net_test.cc): the Python interpreter of the venv scripts/setup.sh makes ($WORT_VENV,
// default ~/.cache/wort-venv, which has pymemcache), else python3 from PATH.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace wort::test {

inline std::string VenvPython() {
  std::string venv;
  if (const char* v = std::getenv("WORT_VENV")) venv = v;
  else if (const char* h = std::getenv("HOME")) venv = std::string(h) + "/.cache/wort-venv";
  const std::string py = venv + "/bin/python3";
  if (!venv.empty() && std::filesystem::exists(py)) return py;
  return "python3";
}

// Runs `script mode --wort <wort> --pool <pool> extra` with the venv's Python; returns its exit
// status (-1 if it did not exit normally, or if pymemcache is missing: then the test fails).
inline int RunPythonMode(const std::string& script, const std::string& mode, const std::string& pool,
                         const std::string& extra = "") {
  const std::string py = VenvPython();
  if (std::system((py + " -c 'import pymemcache' 2>/dev/null").c_str()) != 0) {
    ADD_FAILURE() << "pymemcache is missing for " << py << ": run scripts/setup.sh";
    return -1;
  }
  const std::string cmd = py + " " + script + " " + mode + " --wort " + WORT_CLI_PATH + " --pool " + pool + extra;
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace wort::test
