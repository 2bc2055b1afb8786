// wort/status.h - the result type of every fallible wort call.
//
// A Status is either OK or one of a few named failure codes with a human-readable message.
// wort never throws across its public API; every call that can fail returns a Status, and every
// output parameter is left untouched when the call does not return OK (unless the call's own
// comment says otherwise).
#pragma once

// wort's C++ headers use C++20 (e.g. std::source_location in pm.h): a
// consumer must compile with -std=c++20 (wort.pc's Cflags and the CMake targets' compile
// features say so). A C program, or C++ of any standard, may use the C API (wort.h) instead.
#if defined(__cplusplus) && __cplusplus < 202002L
#error "wort's C++ headers need C++20: compile with -std=c++20 (or use the C API, wort.h)"
#endif

#include <string>
#include <string_view>
#include <utility>

#include "wort/export.h"

namespace wort {

enum class Code : unsigned char {
  kOk = 0,
  kNotFound,        // the key (or root, or file) does not exist
  kAlreadyExists,   // insert of a key that is present; create of a root or pool that exists
  kInvalidArgument, // a key too long, a bad option, a malformed request
  kPoolFull,        // the pool has no space left (and may not grow further); nothing was changed
  kCorruption,      // a file that is not a pool, a bad checksum, a broken invariant
  kIOError,         // an operating-system call failed (open, mmap, ftruncate...)
  kNotSupported,    // the index does not offer this operation (e.g. scan on a hash table)
  kBusy,            // the resource is in use (e.g. a pool opened for writing by another process)
};

WORT_EXPORT const char* CodeName(Code c);

class [[nodiscard]] WORT_EXPORT Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string msg) : code_(code), msg_(std::move(msg)) {}

  static Status OK() { return Status(); }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status PoolFull(std::string m) { return {Code::kPoolFull, std::move(m)}; }
  static Status Corruption(std::string m) { return {Code::kCorruption, std::move(m)}; }
  static Status IOError(std::string m) { return {Code::kIOError, std::move(m)}; }
  static Status NotSupported(std::string m) { return {Code::kNotSupported, std::move(m)}; }
  static Status Busy(std::string m) { return {Code::kBusy, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  bool IsAlreadyExists() const { return code_ == Code::kAlreadyExists; }
  bool IsPoolFull() const { return code_ == Code::kPoolFull; }
  bool IsCorruption() const { return code_ == Code::kCorruption; }
  const std::string& message() const { return msg_; }
  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string msg_;
};

// Return early from the enclosing function when `expr` is not OK.
#define WORT_RETURN_IF_ERROR(expr)        \
  do {                                    \
    ::wort::Status _wort_s = (expr);      \
    if (!_wort_s.ok()) return _wort_s;    \
  } while (0)

}  // namespace wort
