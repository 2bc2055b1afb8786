// server/proto_bin.h - memcached's binary protocol: the request parser (pure, no I/O, no store)
// and the response encoder. The Handler executes parsed requests (handler_bin.cc); the network
// loop selects this protocol for a connection whose first byte is 0x80, as memcached does.
//
// Wire format (memcached's protocol_binary.h; all integers big-endian): a 24-byte header
//   magic(1) opcode(1) keylen(2) extlen(1) datatype(1) vbucket|status(2) bodylen(4) opaque(4) cas(8)
// then the body: extlen bytes of extras, keylen bytes of key, bodylen-extlen-keylen of value.
// Requests have magic 0x80, responses 0x81; a response echoes the opcode and the opaque.
//
// Request shapes (extras / key / value; anything else is a protocol error, see below):
//   get getq getk getkq          -/key/-             set setq add addq replace replaceq:
//   delete deleteq               -/key/-               flags(4) exptime(4) / key / value
//   incr decr (+q)  delta(8) initial(8) exptime(4) / key / -   (exptime 0xffffffff: no create)
//   append prepend (+q)          -/key/value         touch gat gatq gatk gatkq  exptime(4)/key/-
//   flush flushq   [exptime(4)]/-/-                  verbosity  level(4)/-/-
//   noop version quit quitq      -/-/-               stat       -/[group]/-
//   sasl_list_mechs -/-/-        sasl_auth sasl_step  -/mechanism/data
// Keys are any bytes, 1..250 of them (binary keys are not tokens: spaces and control bytes
// are fine, as in memcached).
//
// Errors, as memcached 1.6.18 answers them (checked side by side on loopback):
//   magic other than 0x80                          close, no reply (memcached: the same after a
//                                                  binary request; a first byte other than 0x80
//                                                  selects the text protocol in both)
//   keylen + extlen > bodylen                      "unknown command", then close
//   keylen > 250, or a shape that does not fit
//   the opcode (table above)                       "invalid arguments", then close
//   unknown opcode, any bodylen                    "unknown command"; the body is skipped, the
//                                                  connection stays open
//   verbosity of the wrong shape                   "unknown command"; the body is skipped (memcached
//                                                  answers every verbosity so; wort executes a
//                                                  well-formed one)
//   a value longer than Limits::max_item_size      a request with too_large set (the handler
//   (any bodylen, over 1 GiB too)                  answers "too large"); the value is skipped
//                                                  as it arrives, never buffered
// memcached answers the last three only once it has read the whole body (over 1 GiB: after it
// has read the gigabyte); wort answers at the header and drops the body as it arrives.
// Where memcached leaves extra body bytes of stat/touch/gat unread (and then parses them as the
// next request), wort refuses the request as a protocol error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/protocol.h"

namespace wort::server::bin {

inline constexpr uint8_t kRequestMagic = 0x80;
inline constexpr uint8_t kResponseMagic = 0x81;
inline constexpr size_t kHeaderSize = 24;

enum Op : uint8_t {
  kGet = 0x00, kSet = 0x01, kAdd = 0x02, kReplace = 0x03, kDelete = 0x04, kIncrement = 0x05,
  kDecrement = 0x06, kQuit = 0x07, kFlush = 0x08, kGetQ = 0x09, kNoop = 0x0a, kVersion = 0x0b,
  kGetK = 0x0c, kGetKQ = 0x0d, kAppend = 0x0e, kPrepend = 0x0f, kStat = 0x10, kSetQ = 0x11,
  kAddQ = 0x12, kReplaceQ = 0x13, kDeleteQ = 0x14, kIncrementQ = 0x15, kDecrementQ = 0x16,
  kQuitQ = 0x17, kFlushQ = 0x18, kAppendQ = 0x19, kPrependQ = 0x1a, kVerbosity = 0x1b,
  kTouch = 0x1c, kGat = 0x1d, kGatQ = 0x1e, kSaslListMechs = 0x20, kSaslAuth = 0x21,
  kSaslStep = 0x22, kGatK = 0x23, kGatKQ = 0x24,
};

enum Status : uint16_t {
  kOk = 0x00, kKeyNotFound = 0x01, kKeyExists = 0x02, kTooLarge = 0x03, kInvalid = 0x04,
  kNotStored = 0x05, kNonNumeric = 0x06, kAuthError = 0x20, kAuthContinue = 0x21,
  kUnknownCommand = 0x81, kNoMemory = 0x82,
};

// The text memcached sends as the body of an error response ("" for kOk).
std::string_view StatusText(Status s);

// For a quiet opcode, the opcode it is the quiet form of; otherwise `op` itself.
uint8_t BaseOp(uint8_t op);
bool IsQuiet(uint8_t op);

// One parsed request. The views point into the parser's input.
struct Request {
  uint8_t opcode = 0;  // as sent
  uint8_t op = 0;      // BaseOp(opcode)
  bool quiet = false;
  uint32_t opaque = 0;
  uint64_t cas = 0;
  std::string_view extras, key, value;
  uint64_t value_len = 0;
  bool too_large = false;  // value_len > Limits::max_item_size: `value` is empty, being skipped

  // Big-endian fields of the extras.
  uint32_t ExtraU32(size_t at) const;
  uint64_t ExtraU64(size_t at) const;
};

enum class Action : uint8_t {
  kNeedMore,  // read more; `need` (when not 0) is the input size the request needs
  kSkipped,   // `consumed` bytes of a skipped body were dropped; call Parse again
  kRequest,   // *req holds the request
  kError,     // answer `status` (AppendError) and go on
  kClose,     // answer `status` unless `silent`, then close the connection
};

struct ParseResult {
  Action action = Action::kNeedMore;
  size_t consumed = 0;
  size_t need = 0;
  Status status = kOk;
  bool silent = false;
  uint8_t opcode = 0;  // of the refused request (kError/kClose)
  uint32_t opaque = 0;
};

// One per connection; stateful only in the count of body bytes still to be skipped.
class Parser {
 public:
  explicit Parser(const Limits& limits = Limits()) : limits_(limits) {}
  // Parses the request at the front of `in`. Never reads outside `in`.
  ParseResult Parse(std::string_view in, Request* req);
  uint64_t skipping() const { return skip_; }

 private:
  Limits limits_;
  uint64_t skip_ = 0;
};

// Appends one response packet.
void AppendResponse(std::string* out, uint8_t opcode, uint16_t status, uint32_t opaque, uint64_t cas,
                    std::string_view extras, std::string_view key, std::string_view value);
// Appends an error response with memcached's text for `status`.
inline void AppendError(std::string* out, uint8_t opcode, Status status, uint32_t opaque) {
  AppendResponse(out, opcode, status, opaque, 0, {}, {}, StatusText(status));
}

// Encodes a request packet (tests and tools).
std::string EncodeRequest(uint8_t opcode, std::string_view extras, std::string_view key, std::string_view value,
                          uint32_t opaque = 0, uint64_t cas = 0);

// A decoded response packet (tests). Decode returns false if `in` holds no complete packet.
struct Response {
  uint8_t magic = 0, opcode = 0;
  uint16_t status = 0;
  uint32_t opaque = 0;
  uint64_t cas = 0;
  std::string extras, key, value;
  size_t size = 0;  // bytes of the packet
};
bool DecodeResponse(std::string_view in, Response* out);

void PutU32(char* p, uint32_t v);
void PutU64(char* p, uint64_t v);
uint32_t GetU32(const char* p);
uint64_t GetU64(const char* p);

}  // namespace wort::server::bin
