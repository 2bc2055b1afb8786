#include "wort/status.h"

namespace wort {

const char* CodeName(Code c) {
  switch (c) {
    case Code::kOk: return "OK";
    case Code::kNotFound: return "NotFound";
    case Code::kAlreadyExists: return "AlreadyExists";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kPoolFull: return "PoolFull";
    case Code::kCorruption: return "Corruption";
    case Code::kIOError: return "IOError";
    case Code::kNotSupported: return "NotSupported";
    case Code::kBusy: return "Busy";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + msg_;
}

}  // namespace wort
