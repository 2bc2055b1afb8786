// Helpers of the remote tests: the transport configurations every test runs over, a region in a
// file under /dev/shm (what the local backend's clients in other processes map), and children
// that re-execute the test binary as remote clients.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "remote/transport.h"

extern char** environ;

namespace wort::test {

// The configurations: "local", "ucx-sm" (UCX_TLS=sm), "ucx-tcp" (UCX_TLS=tcp). The ucx backend
// reads UCX_TLS when a Server or Connection is created, and children inherit it.
inline std::vector<std::string> RemoteConfigs() { return {"local", "ucx-sm", "ucx-tcp"}; }
inline std::string RemoteParamName(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}
// Sets UCX_TLS for the configuration and returns the backend name.
inline std::string UseRemoteConfig(const std::string& config) {
  if (config == "local") return "local";
  ::setenv("UCX_TLS", config == "ucx-sm" ? "sm" : "tcp", 1);
  return "ucx";
}

// `size` bytes of a zeroed file under /dev/shm, mapped MAP_SHARED.
class FileRegion {
 public:
  explicit FileRegion(std::uint64_t size) : size_(size) {
    int fd = ::open(path_.str().c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
    base_ = static_cast<char*>(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    EXPECT_NE(base_, MAP_FAILED);
    ::close(fd);
  }
  ~FileRegion() { ::munmap(base_, size_); }
  char* base() const { return base_; }
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_.str(); }

 private:
  TempPath path_{"region"};
  std::uint64_t size_;
  char* base_ = nullptr;
};

// Starts this test binary again as a child with `env` added; the child's static initializer
// (RemoteChildMain in the test file) sees WORT_REMOTE_CHILD and does its part.
inline pid_t SpawnSelf(const std::vector<std::string>& env) {
  std::vector<std::string> all;
  for (char** e = environ; *e != nullptr; ++e) all.emplace_back(*e);
  all.insert(all.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& s : all) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  char* argv[] = {exe.data(), nullptr};
  pid_t pid = -1;
  EXPECT_EQ(::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data()), 0);
  return pid;
}
// The exit code of a child (-1 if it did not exit normally).
inline int WaitChild(pid_t pid) {
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace wort::test
