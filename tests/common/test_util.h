// Helpers shared by the tests.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>

namespace wort::test {

// A unique path under /dev/shm, removed (with any copies made from it) when destroyed.
class TempPath {
 public:
  explicit TempPath(const std::string& tag = "t") {
    static std::atomic<int> n{0};
    path_ = "/dev/shm/wort-test-" + std::to_string(::getpid()) + "-" + tag + "-" + std::to_string(n++) + ".pool";
    std::filesystem::remove(path_);
  }
  ~TempPath() { std::filesystem::remove(path_); }
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  const std::string& str() const { return path_; }
  operator const std::string&() const { return path_; }

 private:
  std::string path_;
};

// Copies a file byte for byte (used to take "crash images" of an open pool).
inline void CopyFile(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
}

}  // namespace wort::test
