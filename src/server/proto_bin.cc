// memcached's binary protocol: parser and encoder (see proto_bin.h for the rules).
#include "server/proto_bin.h"

#include <algorithm>

namespace wort::server::bin {

void PutU32(char* p, uint32_t v) {
  for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<char>(v & 0xff);
}
void PutU64(char* p, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<char>(v & 0xff);
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(p[i]);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | static_cast<unsigned char>(p[i]);
  return v;
}

namespace {
uint16_t GetU16(const char* p) {
  return static_cast<uint16_t>(static_cast<unsigned char>(p[0]) << 8 | static_cast<unsigned char>(p[1]));
}
}  // namespace

std::string_view StatusText(Status s) {
  switch (s) {
    case kOk: return "";
    case kKeyNotFound: return "Not found";
    case kKeyExists: return "Data exists for key.";
    case kTooLarge: return "Too large.";
    case kInvalid: return "Invalid arguments";
    case kNotStored: return "Not stored.";
    case kNonNumeric: return "Non-numeric server-side value for incr or decr";
    case kAuthError: return "Auth failure.";
    case kAuthContinue: return "";
    case kUnknownCommand: return "Unknown command";
    case kNoMemory: return "Out of memory";
  }
  return "Unknown error";
}

uint8_t BaseOp(uint8_t op) {
  switch (op) {
    case kGetQ: return kGet;
    case kGetKQ: return kGetK;
    case kSetQ: return kSet;
    case kAddQ: return kAdd;
    case kReplaceQ: return kReplace;
    case kDeleteQ: return kDelete;
    case kIncrementQ: return kIncrement;
    case kDecrementQ: return kDecrement;
    case kQuitQ: return kQuit;
    case kFlushQ: return kFlush;
    case kAppendQ: return kAppend;
    case kPrependQ: return kPrepend;
    case kGatQ: return kGat;
    case kGatKQ: return kGatK;
    default: return op;
  }
}

bool IsQuiet(uint8_t op) { return BaseOp(op) != op; }

uint32_t Request::ExtraU32(size_t at) const { return at + 4 <= extras.size() ? GetU32(extras.data() + at) : 0; }
uint64_t Request::ExtraU64(size_t at) const { return at + 8 <= extras.size() ? GetU64(extras.data() + at) : 0; }

ParseResult Parser::Parse(std::string_view in, Request* req) {
  ParseResult r;
  // 1. Dropping the body of a refused request.
  if (skip_ > 0) {
    if (in.empty()) return r;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(skip_, in.size()));
    skip_ -= n;
    r.action = Action::kSkipped;
    r.consumed = n;
    return r;
  }
  // 2. The header.
  if (in.size() < kHeaderSize) {
    r.need = kHeaderSize;
    return r;
  }
  const char* h = in.data();
  const uint8_t magic = static_cast<uint8_t>(h[0]);
  const uint8_t opcode = static_cast<uint8_t>(h[1]);
  const uint16_t keylen = GetU16(h + 2);
  const uint8_t extlen = static_cast<uint8_t>(h[4]);
  const uint32_t bodylen = GetU32(h + 8);
  r.opcode = opcode;
  r.opaque = GetU32(h + 12);
  auto close = [&](Status s, bool silent = false) {
    r.action = Action::kClose;
    r.status = s;
    r.silent = silent;
    return r;
  };
  if (magic != kRequestMagic) return close(kInvalid, /*silent=*/true);
  if (uint32_t{keylen} + extlen > bodylen) return close(kUnknownCommand);
  // A request memcached answers and then skips the body of (the connection stays usable): an
  // unknown opcode and a verbosity of the wrong shape ("unknown command"). Any bodylen: the body
  // is dropped as it arrives, never buffered (memcached answers only once it has read it all).
  auto refuse_and_skip = [&](Status s) {
    r.action = Action::kError;
    r.status = s;
    r.consumed = kHeaderSize;
    skip_ = bodylen;
    return r;
  };
  const uint8_t op = BaseOp(opcode);
  const uint64_t vlen = bodylen - keylen - extlen;
  bool shape = false;
  bool may_have_value = false;
  switch (op) {
    case kGet:
    case kGetK:
    case kDelete: shape = extlen == 0 && keylen > 0 && vlen == 0; break;
    case kSet:
    case kAdd:
    case kReplace:
      shape = extlen == 8 && keylen > 0;
      may_have_value = true;
      break;
    case kAppend:
    case kPrepend:
    case kSaslAuth:
    case kSaslStep:
      shape = extlen == 0 && keylen > 0;
      may_have_value = true;
      break;
    case kIncrement:
    case kDecrement: shape = extlen == 20 && keylen > 0 && vlen == 0; break;
    case kQuit:
    case kNoop:
    case kVersion:
    case kSaslListMechs: shape = bodylen == 0; break;
    case kFlush: shape = keylen == 0 && vlen == 0 && (extlen == 0 || extlen == 4); break;
    case kStat: shape = extlen == 0 && vlen == 0; break;
    case kVerbosity:
      // memcached 1.6 answers every verbosity "unknown command"; wort executes a well-formed one
      // and answers a malformed one as memcached does, without closing.
      if (!(keylen == 0 && extlen == 4 && vlen == 0)) return refuse_and_skip(kUnknownCommand);
      shape = true;
      break;
    case kTouch:
    case kGat:
    case kGatK: shape = extlen == 4 && keylen > 0 && vlen == 0; break;
    default:
      // Unknown opcode: answer and skip its body; the connection stays usable.
      return refuse_and_skip(kUnknownCommand);
  }
  if (!shape || keylen > kMaxKeyLength) return close(kInvalid);
  const size_t fixed = kHeaderSize + extlen + keylen;
  req->opcode = opcode;
  req->op = op;
  req->quiet = op != opcode;
  req->opaque = r.opaque;
  req->cas = GetU64(h + 16);
  req->value_len = vlen;
  req->value = {};
  req->too_large = may_have_value && vlen > limits_.max_item_size;
  const size_t total = req->too_large ? fixed : kHeaderSize + static_cast<size_t>(bodylen);
  if (in.size() < total) {
    r.need = total;
    return r;
  }
  req->extras = in.substr(kHeaderSize, extlen);
  req->key = in.substr(kHeaderSize + extlen, keylen);
  if (req->too_large) skip_ = vlen;  // dropped as it arrives
  else req->value = in.substr(fixed, static_cast<size_t>(vlen));
  r.action = Action::kRequest;
  r.consumed = total;
  return r;
}

void AppendResponse(std::string* out, uint8_t opcode, uint16_t status, uint32_t opaque, uint64_t cas,
                    std::string_view extras, std::string_view key, std::string_view value) {
  char h[kHeaderSize] = {};
  h[0] = static_cast<char>(kResponseMagic);
  h[1] = static_cast<char>(opcode);
  h[2] = static_cast<char>(key.size() >> 8);
  h[3] = static_cast<char>(key.size() & 0xff);
  h[4] = static_cast<char>(extras.size());
  h[6] = static_cast<char>(status >> 8);
  h[7] = static_cast<char>(status & 0xff);
  PutU32(h + 8, static_cast<uint32_t>(extras.size() + key.size() + value.size()));
  PutU32(h + 12, opaque);
  PutU64(h + 16, cas);
  out->append(h, kHeaderSize);
  out->append(extras);
  out->append(key);
  out->append(value);
}

std::string EncodeRequest(uint8_t opcode, std::string_view extras, std::string_view key, std::string_view value,
                          uint32_t opaque, uint64_t cas) {
  std::string out;
  AppendResponse(&out, opcode, 0, opaque, cas, extras, key, value);
  out[0] = static_cast<char>(kRequestMagic);
  return out;
}

bool DecodeResponse(std::string_view in, Response* out) {
  if (in.size() < kHeaderSize) return false;
  const char* h = in.data();
  const uint16_t keylen = GetU16(h + 2);
  const uint8_t extlen = static_cast<uint8_t>(h[4]);
  const uint32_t bodylen = GetU32(h + 8);
  if (in.size() < kHeaderSize + bodylen || uint32_t{keylen} + extlen > bodylen) return false;
  out->magic = static_cast<uint8_t>(h[0]);
  out->opcode = static_cast<uint8_t>(h[1]);
  out->status = GetU16(h + 6);
  out->opaque = GetU32(h + 12);
  out->cas = GetU64(h + 16);
  out->extras.assign(h + kHeaderSize, extlen);
  out->key.assign(h + kHeaderSize + extlen, keylen);
  out->value.assign(h + kHeaderSize + extlen + keylen, bodylen - extlen - keylen);
  out->size = kHeaderSize + bodylen;
  return true;
}

}  // namespace wort::server::bin
