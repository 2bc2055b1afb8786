// Helpers shared by the tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <type_traits>

namespace wort::test {

// The factor multi-threaded stress tests divide their sizes by: 8 under ThreadSanitizer (about
// 10x slower), else 1.
#if defined(__SANITIZE_THREAD__)
inline constexpr int kSanitizerScale = 8;
#else
inline constexpr int kSanitizerScale = 1;
#endif

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

// Runs `cmd` through the shell with stderr joined to stdout, appends its output to *out and
// returns its exit code (-1 if it did not exit normally).
inline int RunShell(const std::string& cmd, std::string* out) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return -1;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, got);
  const int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Concatenates strings and characters: Cat("k", std::to_string(i), '\x90'). The tests build keys
// with it rather than with chains of `"literal" + std::string(...)`, on which GCC 12 reports false
// -Wrestrict warnings once they are inlined (GCC bug 105329).
template <typename... Parts>
std::string Cat(const Parts&... parts) {
  std::string s;
  auto add = [&s](const auto& p) {
    if constexpr (std::is_same_v<std::decay_t<decltype(p)>, char>) {
      s += p;
    } else {
      s += std::string_view(p);
    }
  };
  (add(parts), ...);
  return s;
}

}  // namespace wort::test
