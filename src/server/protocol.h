// server/protocol.h - the parser of memcached's text protocol: bytes in, one request (or one
// error line) out. It does no I/O and touches no storage, so it can be unit-tested and fuzzed
// on its own (tests/server/protocol_test.cc); the network loop (server.cc) feeds it whatever
// bytes have arrived and the handler (handler.cc) executes what it returns.
//
// Grammar (memcached doc/protocol.txt; a line ends in "\r\n", a bare "\n" is accepted too;
// tokens are separated by one or more spaces; command names are case-sensitive):
//   get|gets <key>+                        gat|gats <exptime> <key>+
//   set|add|replace|append|prepend <key> <flags> <exptime> <bytes> [noreply]\r\n<data>\r\n
//   cas <key> <flags> <exptime> <bytes> <cas unique> [noreply]\r\n<data>\r\n
//   delete <key> [0] [noreply]             incr|decr <key> <delta> [noreply]
//   touch <key> <exptime> [noreply]        flush_all [delay] [noreply]
//   version    verbosity <level> [noreply]    stats [<group> [<arg>*]]    quit
//   slabs automove <0|1|2>                 slabs reassign <src> <dst>
//   lru_crawler metadump <all|hash|<class>[,<class>]*>
//   range <start> <end> <limit> [values]   (wort extension: keys in order; doc/server.md)
//   mg <key> <flag>*    ms <key> <datalen> <flag>*\r\n<data>\r\n    md <key> <flag>*
//   ma <key> <flag>*    me <key> [b]    mn                     (meta commands, below)
// Keys are as in memcached 1.6: 1..250 bytes of anything but a space (the separator), "\n"
// (ends the line) and 0x00 (memcached reads the line as a C string: a 0x00 ends it, and the
// rest of the line is dropped). Other control bytes (0x10 as memaslap sends, tab, a "\r" that
// is not the line's last byte, 0x7f) and bytes >= 0x80 are key bytes.
//
// Meta commands (memcached 1.6.18's protocol.txt, "Meta Commands"): each flag is one character,
// possibly followed by a token ("T30", "Oabc"), at most once per request ("CLIENT_ERROR
// duplicate flag"). Accepted flags (P and L, proxy hints, are accepted and ignored by all):
//   mg  b c f k O q s t u v N R T         ms  b c C F I k M O q T
//   md  b C I k O q T                     ma  b c C D J k M N O q t T v
//   me  b (as the second token)           mn  (any tokens ignored)
// Refused with a CLIENT_ERROR naming the flag, because the store cannot honour them:
//   h, l (mg: hit-before / last-access time: the store keeps neither)
//   E (any: a client-chosen cas; wort's cas values double as flush_all's marker, see store.h)
// Any other flag: "CLIENT_ERROR invalid flag". As in memcached, a flag that takes no token
// ignores any bytes after its character ("vx" = v). With `b` the key token is base64 (standard
// alphabet, padded, canonical) and decodes to any bytes (0x00..0xff); the token itself must be
// <= 250 bytes, as memcached checks it ("CLIENT_ERROR error decoding key" if it does not decode).
// Meta errors are always sent (q suppresses only success codes and mg's EN; see handler.cc).
//
// Errors follow memcached 1.6 (checked against memcached 1.6.18):
//   ERROR                                  unknown command, wrong number of tokens
//   (the connection is closed, no reply)   an unknown command of 2+ tokens whose last token
//                                          starts with "HTTP/" (an HTTP request line), as
//                                          memcached does
//   CLIENT_ERROR bad command line format   bad key, bad number, negative length
//   CLIENT_ERROR bad data chunk            the <bytes> of data are not followed by "\r\n"
//   CLIENT_ERROR invalid exptime argument  touch/gat/flush_all with a non-numeric time
//   CLIENT_ERROR invalid numeric delta argument
//   CLIENT_ERROR line too long             (then the connection is closed) a line longer than
//                                          Limits::max_line (max_retrieval_line for get/gets/
//                                          gat/gats/range) without its "\n"
//   a value longer than Limits::max_item_size is returned as a request with too_large set: its
//   data is swallowed (discarded as it arrives, never buffered) and the handler answers
//   "SERVER_ERROR object too large for cache".
// Where a storage command line is malformed but its <bytes> field is a valid length, its data
// block is swallowed too (memcached would instead parse the data as a command line and answer
// an extra ERROR); the connection stays in step with the client either way.
// With noreply, error lines caused by the request are suppressed (ParseResult::noreply), as
// memcached does; errors found before noreply could be parsed are always sent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wort::server {

inline constexpr size_t kMaxKeyLength = 250;
// An exptime above this many seconds (30 days) is an absolute unix time; at or below, relative.
inline constexpr int64_t kMaxRelativeExptime = 60 * 60 * 24 * 30;
// Largest `limit` of a range request.
inline constexpr uint64_t kMaxRangeLimit = 1'000'000;
// memcached's MAX_NUMBER_OF_SLAB_CLASSES: class ids of stats cachedump / lru_crawler metadump
// are below it (wort reports all its items in class 1).
inline constexpr uint32_t kMaxSlabClasses = 64;
// Longest opaque token (O flag) of a meta command, as memcached.
inline constexpr size_t kMaxOpaqueLength = 32;

enum class Command : uint8_t {
  kGet, kGets, kGat, kGats,
  kSet, kAdd, kReplace, kAppend, kPrepend, kCas,
  kDelete, kIncr, kDecr, kTouch,
  kFlushAll, kVersion, kVerbosity, kStats, kQuit,
  kSlabsAutomove, kSlabsReassign, kLruMetadump, kCacheMemlimit,
  kRange,
  kMetaGet, kMetaSet, kMetaDelete, kMetaArith, kMetaDebug, kMetaNoop,
};
const char* CommandName(Command c);

// The flags of a meta request. Defaults are memcached's.
struct MetaFlags {
  // The flags that add a token to the reply ('c', 'f', 'k', 'O', 's', 't'), in request order.
  char ret[8] = {};
  uint8_t nret = 0;
  bool base64 = false;      // b: the key token is base64
  bool quiet = false;       // q: suppress the success code (mg: the miss code EN)
  bool value = false;       // v: return the value (mg, ma)
  bool invalidate = false;  // I: ms with C: a lower cas stores a stale item; md: mark stale
  bool has_ttl = false;     // T<ttl>: mg/ma: new exptime on a hit; ms: exptime; md: with I
  int64_t ttl = 0;
  bool vivify = false;      // N<ttl>: mg/ma: create the item on a miss with this exptime
  int64_t vivify_ttl = 0;
  bool recache = false;     // R<ttl>: mg: win the recache if the item's remaining ttl < this
  int64_t recache_ttl = 0;
  bool has_cas = false;     // C<cas>: compare cas
  uint64_t cas = 0;
  uint32_t client_flags = 0;  // F<flags> (ms)
  uint64_t delta = 1;       // D<delta> (ma)
  uint64_t initial = 0;     // J<initial> (ma with N)
  char mode = 0;            // M<mode>, normalized: ms 'S','E','A','P','R'; ma '+','-'; 0 = default
  std::string_view opaque;  // O<opaque>, up to 32 bytes
};

// One parsed request. Every string_view points into the parser's input and stays valid until
// the caller drops the consumed bytes.
struct Request {
  Command cmd = Command::kGet;
  bool noreply = false;
  // get/gets/gat/gats: one or more keys. set..cas, delete, incr, decr, touch: exactly one.
  // range: two (start, end).
  std::vector<std::string_view> keys;
  uint32_t flags = 0;       // storage commands
  int64_t exptime = 0;      // storage commands, touch, gat, gats: as sent (see ToAbsoluteExptime)
  uint64_t cas_unique = 0;  // cas
  uint64_t delta = 0;       // incr, decr
  int64_t delay = 0;        // flush_all (0 = now)
  uint32_t verbosity = 0;   // verbosity
  std::string_view arg2;    // stats detail: on|off|dump (empty if absent)
  std::string_view arg;     // stats: the group ("" for plain stats, "settings", "reset", ...);
                            // stats cachedump: keys[0], keys[1] are its two arguments
  uint32_t class_id = 0;    // stats cachedump: the slab class; lru_crawler metadump: 1 when the
                            // list names class 1 (or all/hash), else 0 (wort's one class is 1)
  uint64_t limit = 0;       // range
  bool with_values = false; // range
  // meta commands: keys[0] is the key token as sent; with meta.base64, binary_key holds its
  // decoded bytes. Use MetaKey().
  MetaFlags meta;
  std::string binary_key;
  std::string_view MetaKey() const { return meta.base64 ? std::string_view(binary_key) : keys[0]; }
  // storage commands and ms: exactly `bytes` bytes of value (the trailing "\r\n" is not included)
  std::string_view data;
  uint64_t bytes = 0;
  bool bytes_valid = false;  // ms: `bytes` was parsed (a rejected request's data is swallowed)
  // storage commands and ms: the value is longer than Limits::max_item_size; `data` is empty and the
  // value's bytes are being swallowed.
  bool too_large = false;

  void Clear();
  bool is_storage() const { return cmd >= Command::kSet && cmd <= Command::kCas; }
};

struct Limits {
  uint64_t max_item_size = 1 << 20;        // value bytes
  size_t max_line = 2048;                  // any command line, "\n" included
  size_t max_retrieval_line = 256 << 10;   // a get/gets/gat/gats/range line, "\n" included
};

enum class Outcome : uint8_t {
  kNeedMore,  // no complete request at the front of the input: read more bytes. `need`, when
              // not 0, is the total input size the next request needs (line + data + 2).
  kSkipped,   // `consumed` bytes of a swallowed value were dropped; call Parse again
  kRequest,   // *req holds the request
  kError,     // `error` is the reply line (without "\r\n"); the connection stays usable
  kClose,     // send `error` (unless empty) and close the connection
};

struct ParseResult {
  Outcome outcome = Outcome::kNeedMore;
  size_t consumed = 0;     // bytes at the front of the input that the caller must now drop
  size_t need = 0;         // kNeedMore: input size needed, when known
  std::string_view error;  // kError/kClose: a static reply line
  bool noreply = false;    // kError: the request asked for noreply, so send nothing
};

// Stateful only in one respect: the count of bytes of a rejected value still to be swallowed.
// One Parser per connection.
class Parser {
 public:
  explicit Parser(const Limits& limits = Limits()) : limits_(limits) {}

  // Parses the request at the front of `in`. On kRequest, *req is overwritten; otherwise it is
  // unspecified. Never reads outside `in`.
  ParseResult Parse(std::string_view in, Request* req);

  // Bytes of a rejected value still to be discarded.
  uint64_t swallowing() const { return swallow_; }
  // Discards the next n input bytes (the rest of a request refused before it was read whole:
  // the server's buffer budget, server.cc).
  void Swallow(uint64_t n) { swallow_ += n; }
  const Limits& limits() const { return limits_; }

 private:
  ParseResult ParseLine(std::string_view in, std::string_view line, size_t line_len, Request* req);
  ParseResult ParseStorage(std::string_view in, size_t line_len, const std::vector<std::string_view>& tok,
                           Request* req);
  ParseResult ParseMeta(std::string_view in, size_t line_len, const std::vector<std::string_view>& tok,
                        Request* req);
  // ms: the data block after the line (or its swallowing when too large).
  ParseResult ParseData(std::string_view in, size_t line_len, Request* req);

  Limits limits_;
  uint64_t swallow_ = 0;
  std::vector<std::string_view> tokens_;  // reused between calls
};

// True iff `key` is a valid memcached text key (1..250 bytes, no space, "\n" or 0x00).
bool ValidKey(std::string_view key);

// Decodes standard, padded, canonical base64 (RFC 4648 section 4) into *out. True iff valid.
bool DecodeBase64(std::string_view in, std::string* out);
// Appends the padded base64 encoding of `in` to *out.
void EncodeBase64(std::string_view in, std::string* out);

// memcached's exptime rule: 0 = never (returns 0); negative = already expired (returns -1);
// > 30 days = absolute unix time; otherwise relative to `now` (unix seconds).
int64_t ToAbsoluteExptime(int64_t exptime, int64_t now);

// Strict decimal parsers (no sign for unsigned, no spaces, no overflow). True iff parsed.
bool ParseU64(std::string_view s, uint64_t* out);
bool ParseI64(std::string_view s, int64_t* out);

}  // namespace wort::server
