// The memcached text-protocol parser (see protocol.h for the grammar and the error rules).
#include "server/protocol.h"

#include <cstring>
#include <limits>

namespace wort::server {

namespace {

constexpr std::string_view kErr = "ERROR";
constexpr std::string_view kBadFormat = "CLIENT_ERROR bad command line format";
constexpr std::string_view kBadChunk = "CLIENT_ERROR bad data chunk";
constexpr std::string_view kBadExptime = "CLIENT_ERROR invalid exptime argument";
constexpr std::string_view kBadDelta = "CLIENT_ERROR invalid numeric delta argument";
constexpr std::string_view kBadDelete = "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]";
constexpr std::string_view kLineTooLong = "CLIENT_ERROR line too long";
constexpr std::string_view kBadLine = "CLIENT_ERROR bad command line";
constexpr std::string_view kBadSlabId = "CLIENT_ERROR Illegal slab id";
constexpr std::string_view kBadClass = "BADCLASS invalid class id";
constexpr std::string_view kBadToken = "CLIENT_ERROR bad token in command line format";
constexpr std::string_view kBadFlag = "CLIENT_ERROR invalid flag";
constexpr std::string_view kDupFlag = "CLIENT_ERROR duplicate flag";
constexpr std::string_view kBadKey64 = "CLIENT_ERROR error decoding key";
constexpr std::string_view kLongOpaque = "CLIENT_ERROR opaque token too long";
constexpr std::string_view kBadMsMode = "CLIENT_ERROR invalid mode for ms M token";
constexpr std::string_view kBadMaMode = "CLIENT_ERROR invalid mode for ma M token";
constexpr std::string_view kNoFlagH = "CLIENT_ERROR flag h is not supported: wort serve keeps no hit-before data";
constexpr std::string_view kNoFlagL = "CLIENT_ERROR flag l is not supported: wort serve keeps no last-access time";
constexpr std::string_view kNoFlagE =
    "CLIENT_ERROR flag E is not supported: wort serve assigns cas values itself (they mark flush_all)";
constexpr std::string_view kBadRange = "CLIENT_ERROR bad command line format.  Usage: range <start> <end> <limit> [values]";

ParseResult Error(std::string_view line, size_t consumed, bool noreply = false) {
  ParseResult r;
  r.outcome = Outcome::kError;
  r.consumed = consumed;
  r.error = line;
  r.noreply = noreply;
  return r;
}

// Splits on runs of spaces (memcached tokenizes on ' ' only).
void Tokenize(std::string_view line, std::vector<std::string_view>* out) {
  out->clear();
  size_t i = 0;
  const size_t n = line.size();
  const char* const d = line.data();
  while (i < n) {
    while (i < n && d[i] == ' ') ++i;
    if (i == n) break;
    // The token's end: memchr (vectorized) rather than a loop over its bytes.
    const void* sp = std::memchr(d + i, ' ', n - i);
    const size_t j = sp ? static_cast<size_t>(static_cast<const char*>(sp) - d) : n;
    out->push_back(line.substr(i, j - i));
    i = j;
  }
}

// Whether a line that starts with `prefix` may be as long as Limits::max_retrieval_line.
// A key token from Tokenize: it cannot hold ' ' (tokens end there), '\n' or 0x00 (the line ends
// before them), so only its length is checked (ValidKey checks the bytes too, for other callers).
bool ValidKeyToken(std::string_view tok) { return !tok.empty() && tok.size() <= kMaxKeyLength; }

bool IsRetrievalPrefix(std::string_view in) {
  for (std::string_view c : {"get ", "gets ", "gat ", "gats ", "range "})
    if (in.substr(0, c.size()) == c) return true;
  return false;
}

}  // namespace

const char* CommandName(Command c) {
  switch (c) {
    case Command::kGet: return "get";
    case Command::kGets: return "gets";
    case Command::kGat: return "gat";
    case Command::kGats: return "gats";
    case Command::kSet: return "set";
    case Command::kAdd: return "add";
    case Command::kReplace: return "replace";
    case Command::kAppend: return "append";
    case Command::kPrepend: return "prepend";
    case Command::kCas: return "cas";
    case Command::kDelete: return "delete";
    case Command::kIncr: return "incr";
    case Command::kDecr: return "decr";
    case Command::kTouch: return "touch";
    case Command::kFlushAll: return "flush_all";
    case Command::kVersion: return "version";
    case Command::kVerbosity: return "verbosity";
    case Command::kStats: return "stats";
    case Command::kQuit: return "quit";
    case Command::kSlabsAutomove: return "slabs automove";
    case Command::kSlabsReassign: return "slabs reassign";
    case Command::kLruMetadump: return "lru_crawler metadump";
    case Command::kCacheMemlimit: return "cache_memlimit";
    case Command::kRange: return "range";
    case Command::kMetaGet: return "mg";
    case Command::kMetaSet: return "ms";
    case Command::kMetaDelete: return "md";
    case Command::kMetaArith: return "ma";
    case Command::kMetaDebug: return "me";
    case Command::kMetaNoop: return "mn";
  }
  return "?";
}

void Request::Clear() {
  cmd = Command::kGet;
  noreply = false;
  keys.clear();
  flags = 0;
  exptime = 0;
  cas_unique = 0;
  delta = 0;
  delay = 0;
  verbosity = 0;
  arg2 = {};
  arg = {};
  class_id = 0;
  limit = 0;
  with_values = false;
  data = {};
  bytes = 0;
  bytes_valid = false;
  too_large = false;
  meta = MetaFlags();
  binary_key.clear();
}


bool ValidKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxKeyLength) return false;
  // A token never holds these (the line ends at "\n" and at 0x00, tokens at ' '); checked
  // for callers that pass other strings.
  // (One pass over the bytes: find_first_of would search the 3-byte set once per key byte.)
  for (const char c : key)
    if (c == ' ' || c == '\n' || c == '\0') return false;
  return true;
}

int64_t ToAbsoluteExptime(int64_t exptime, int64_t now) {
  if (exptime == 0) return 0;
  if (exptime < 0) return -1;
  if (exptime > kMaxRelativeExptime) return exptime;
  return now + exptime;
}

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return false;
    const uint64_t d = static_cast<uint64_t>(ch - '0');
    // Overflow check with constants (no division per digit).
    constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
    if (v > kMax / 10 || (v == kMax / 10 && d > kMax % 10)) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool ParseI64(std::string_view s, int64_t* out) {
  const bool neg = !s.empty() && s[0] == '-';
  uint64_t mag = 0;
  if (!ParseU64(neg ? s.substr(1) : s, &mag)) return false;
  if (neg) {
    if (mag > uint64_t(std::numeric_limits<int64_t>::max()) + 1) return false;
    *out = static_cast<int64_t>(0 - mag);
  } else {
    if (mag > uint64_t(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(mag);
  }
  return true;
}

ParseResult Parser::Parse(std::string_view in, Request* req) {
  // 1. Still discarding a rejected value: drop what has arrived of it.
  if (swallow_ > 0) {
    if (in.empty()) return {};
    const size_t n = static_cast<size_t>(std::min<uint64_t>(swallow_, in.size()));
    swallow_ -= n;
    ParseResult r;
    r.outcome = Outcome::kSkipped;
    r.consumed = n;
    return r;
  }
  // 2. Find the end of the command line, within the line limit.
  const size_t limit = IsRetrievalPrefix(in) ? limits_.max_retrieval_line : limits_.max_line;
  const size_t scan = std::min(in.size(), limit);
  const void* nl = scan ? std::memchr(in.data(), '\n', scan) : nullptr;
  if (!nl) {
    if (in.size() >= limit) {
      ParseResult r;
      r.outcome = Outcome::kClose;
      r.error = kLineTooLong;
      return r;
    }
    return {};
  }
  const size_t line_len = static_cast<size_t>(static_cast<const char*>(nl) - in.data()) + 1;
  std::string_view line = in.substr(0, line_len - 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // memcached reads the line as a C string: a 0x00 ends it (what follows, up to "\n", is
  // dropped), so "get a\0b" asks for "a" and "set a\0b 0 0 1" has too few tokens.
  if (const void* nul = std::memchr(line.data(), '\0', line.size()))
    line = line.substr(0, static_cast<size_t>(static_cast<const char*>(nul) - line.data()));
  return ParseLine(in, line, line_len, req);
}

ParseResult Parser::ParseLine(std::string_view in, std::string_view line, size_t line_len, Request* req) {
  std::vector<std::string_view>& tok = tokens_;
  Tokenize(line, &tok);
  if (tok.empty()) return Error(kErr, line_len);
  const std::string_view name = tok[0];
  const size_t nt = tok.size();
  const bool last_noreply = tok.back() == "noreply";
  req->Clear();
  ParseResult ok;
  ok.outcome = Outcome::kRequest;
  ok.consumed = line_len;

  auto keys_from = [&](size_t first) -> bool {
    for (size_t i = first; i < nt; ++i) {
      if (!ValidKeyToken(tok[i])) return false;
      req->keys.push_back(tok[i]);
    }
    return true;
  };

  // ---- retrieval ------------------------------------------------------------------------
  if (name == "get" || name == "gets") {
    if (nt < 2) return Error(kErr, line_len);
    req->cmd = name == "get" ? Command::kGet : Command::kGets;
    if (!keys_from(1)) return Error(kBadFormat, line_len);
    return ok;
  }
  if (name == "gat" || name == "gats") {
    if (nt < 3) return Error(kErr, line_len);
    req->cmd = name == "gat" ? Command::kGat : Command::kGats;
    if (!ParseI64(tok[1], &req->exptime)) return Error(kBadExptime, line_len);
    if (!keys_from(2)) return Error(kBadFormat, line_len);
    return ok;
  }
  // ---- storage --------------------------------------------------------------------------
  if (name == "set" || name == "add" || name == "replace" || name == "append" || name == "prepend" || name == "cas")
    return ParseStorage(in, line_len, tok, req);
  // ---- meta commands --------------------------------------------------------------------
  if (name.size() == 2 && name[0] == 'm') return ParseMeta(in, line_len, tok, req);
  // ---- single-key commands --------------------------------------------------------------
  if (name == "delete") {
    // delete <key> | delete <key> noreply | delete <key> 0 | delete <key> 0 noreply
    if (nt < 2 || nt > 4) return Error(kErr, line_len);
    req->cmd = Command::kDelete;
    req->noreply = last_noreply;
    const size_t args = nt - 2 - (last_noreply ? 1 : 0);  // tokens between key and noreply
    if (args > 1 || (args == 1 && tok[2] != "0")) return Error(kBadDelete, line_len, req->noreply);
    if (!ValidKeyToken(tok[1])) return Error(kBadFormat, line_len, req->noreply);
    req->keys.push_back(tok[1]);
    return ok;
  }
  if (name == "incr" || name == "decr") {
    if (nt != 3 && nt != 4) return Error(kErr, line_len);
    req->cmd = name == "incr" ? Command::kIncr : Command::kDecr;
    req->noreply = nt == 4 && last_noreply;
    if (!ValidKeyToken(tok[1])) return Error(kBadFormat, line_len, req->noreply);
    if (!ParseU64(tok[2], &req->delta)) return Error(kBadDelta, line_len, req->noreply);
    req->keys.push_back(tok[1]);
    return ok;
  }
  if (name == "touch") {
    if (nt != 3 && nt != 4) return Error(kErr, line_len);
    req->cmd = Command::kTouch;
    req->noreply = nt == 4 && last_noreply;
    if (!ValidKeyToken(tok[1])) return Error(kBadFormat, line_len, req->noreply);
    if (!ParseI64(tok[2], &req->exptime)) return Error(kBadExptime, line_len, req->noreply);
    req->keys.push_back(tok[1]);
    return ok;
  }
  // ---- administrative -------------------------------------------------------------------
  if (name == "flush_all") {
    if (nt > 3) return Error(kErr, line_len);
    req->cmd = Command::kFlushAll;
    req->noreply = nt > 1 && last_noreply;
    const size_t args = nt - 1 - (req->noreply ? 1 : 0);
    if (args > 1) return Error(kErr, line_len);
    if (args == 1 && !ParseI64(tok[1], &req->delay)) return Error(kBadExptime, line_len, req->noreply);
    return ok;
  }
  if (name == "version") {  // memcached ignores any further tokens
    req->cmd = Command::kVersion;
    return ok;
  }
  if (name == "verbosity") {
    if (nt != 2 && nt != 3) return Error(kErr, line_len);
    req->cmd = Command::kVerbosity;
    req->noreply = last_noreply;  // "verbosity noreply" is silent in memcached too
    uint64_t v = 0;
    if (!ParseU64(tok[1], &v) || v > std::numeric_limits<uint32_t>::max())
      return Error(kBadFormat, line_len, req->noreply);
    req->verbosity = static_cast<uint32_t>(v);
    return ok;
  }
  if (name == "stats") {
    req->cmd = Command::kStats;
    if (nt >= 2) req->arg = tok[1];
    if (nt >= 3) req->arg2 = tok[2];
    if (req->arg == "cachedump") {
      // stats cachedump <class> <limit>: as memcached (a third argument is ignored).
      uint64_t cls = 0, lim = 0;
      if (nt < 4) return Error(kBadLine, line_len);
      if (!ParseU64(tok[2], &cls) || !ParseU64(tok[3], &lim) || lim > std::numeric_limits<uint32_t>::max())
        return Error(kBadFormat, line_len);
      if (cls >= kMaxSlabClasses) return Error(kBadSlabId, line_len);
      req->class_id = static_cast<uint32_t>(cls);
      req->limit = lim;
    }
    return ok;
  }
  if (name == "cache_memlimit") {  // cache_memlimit <megabytes> [noreply], as memcached
    if (nt != 2 && nt != 3) return Error(kErr, line_len);
    req->noreply = nt == 3 && last_noreply;
    uint64_t mb = 0;
    if ((nt == 3 && !req->noreply) || !ParseU64(tok[1], &mb)) return Error(kErr, line_len, req->noreply);
    req->cmd = Command::kCacheMemlimit;
    req->limit = mb;
    return ok;
  }
  if (name == "slabs") {
    // wort has no slab classes to move: automove is accepted (and does nothing), reassign is
    // refused as memcached refuses it when slab reassignment is off.
    req->noreply = last_noreply;
    const size_t args = nt - (last_noreply ? 1 : 0);
    if (args == 3 && tok[1] == "automove") {
      uint64_t level = 0;
      if (!ParseU64(tok[2], &level)) return Error(kBadFormat, line_len, req->noreply);
      if (level > 2) return Error(kErr, line_len, req->noreply);
      req->cmd = Command::kSlabsAutomove;
      req->verbosity = static_cast<uint32_t>(level);
      return ok;
    }
    if (args == 4 && tok[1] == "reassign") {
      int64_t a = 0, b = 0;
      if (!ParseI64(tok[2], &a) || !ParseI64(tok[3], &b)) return Error(kBadFormat, line_len, req->noreply);
      req->cmd = Command::kSlabsReassign;
      return ok;
    }
    return Error(kErr, line_len, req->noreply);
  }
  if (name == "lru_crawler") {
    if (nt != 3 || tok[1] != "metadump") return Error(kErr, line_len);
    req->cmd = Command::kLruMetadump;
    if (tok[2] == "all" || tok[2] == "hash") {
      req->class_id = 1;
      return ok;
    }
    // A comma-separated list of class ids, each below kMaxSlabClasses.
    std::string_view list = tok[2];
    while (true) {
      const size_t comma = list.find(',');
      uint64_t cls = 0;
      if (!ParseU64(list.substr(0, comma), &cls) || cls >= kMaxSlabClasses) return Error(kBadClass, line_len);
      if (cls == 1) req->class_id = 1;
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    return ok;
  }
  if (name == "quit") {  // likewise
    req->cmd = Command::kQuit;
    return ok;
  }
  // ---- wort extension: range <start> <end> <limit> [values] ---------------------------------
  if (name == "range") {
    if (nt != 4 && nt != 5) return Error(kBadRange, line_len);
    req->cmd = Command::kRange;
    if (!ValidKeyToken(tok[1]) || !ValidKeyToken(tok[2])) return Error(kBadFormat, line_len);
    if (!ParseU64(tok[3], &req->limit) || req->limit == 0 || req->limit > kMaxRangeLimit)
      return Error(kBadRange, line_len);
    if (nt == 5) {
      if (tok[4] != "values") return Error(kBadRange, line_len);
      req->with_values = true;
    }
    req->keys.push_back(tok[1]);
    req->keys.push_back(tok[2]);
    return ok;
  }
  // A client speaking HTTP to the memcached port ("GET / HTTP/1.1"): memcached closes the
  // connection without a reply.
  if (nt > 1 && tok.back().substr(0, 5) == "HTTP/") {
    ParseResult r;
    r.outcome = Outcome::kClose;
    r.consumed = line_len;
    return r;
  }
  return Error(kErr, line_len);
}

ParseResult Parser::ParseStorage(std::string_view in, size_t line_len, const std::vector<std::string_view>& tok,
                                 Request* req) {
  const std::string_view name = tok[0];
  const bool is_cas = name == "cas";
  const size_t base = is_cas ? 6 : 5;  // tokens without noreply
  const size_t nt = tok.size();
  if (nt != base && nt != base + 1) return Error(kErr, line_len);
  // memcached ignores an unknown sixth (seventh) token rather than rejecting it.
  req->noreply = nt == base + 1 && tok.back() == "noreply";
  if (name == "set") req->cmd = Command::kSet;
  else if (name == "add") req->cmd = Command::kAdd;
  else if (name == "replace") req->cmd = Command::kReplace;
  else if (name == "append") req->cmd = Command::kAppend;
  else if (name == "prepend") req->cmd = Command::kPrepend;
  else req->cmd = Command::kCas;

  // The value's length first: when it is valid, a rejected request's data block can be
  // swallowed and the connection stays in step with the client.
  // memcached reads these numbers with strtol/strtoul, which accept one leading '+' ("+5").
  const auto plus = [](std::string_view t) { return t.size() > 1 && t[0] == '+' ? t.substr(1) : t; };
  int64_t bytes = -1;
  const bool bytes_ok = ParseI64(plus(tok[4]), &bytes) && bytes >= 0 && bytes <= std::numeric_limits<int32_t>::max() - 2;
  uint64_t flags = 0;
  // Flags past 2^32 - 1 are refused (memcached 1.6.18 stores 2^32 as 0: a silent truncation).
  const bool fields_ok = bytes_ok && ValidKeyToken(tok[1]) && ParseU64(plus(tok[2]), &flags) &&
                         flags <= std::numeric_limits<uint32_t>::max() && ParseI64(plus(tok[3]), &req->exptime) &&
                         (!is_cas || ParseU64(tok[5], &req->cas_unique));
  if (!fields_ok) {
    if (bytes_ok) swallow_ = static_cast<uint64_t>(bytes) + 2;
    return Error(kBadFormat, line_len, req->noreply);
  }
  req->flags = static_cast<uint32_t>(flags);
  req->keys.push_back(tok[1]);
  req->bytes = static_cast<uint64_t>(bytes);
  return ParseData(in, line_len, req);
}

ParseResult Parser::ParseData(std::string_view in, size_t line_len, Request* req) {
  if (req->bytes > limits_.max_item_size) {
    // Answered by the handler (SERVER_ERROR object too large for cache); the data is dropped
    // as it arrives.
    req->too_large = true;
    swallow_ = req->bytes + 2;
    ParseResult r;
    r.outcome = Outcome::kRequest;
    r.consumed = line_len;
    return r;
  }
  const size_t total = line_len + static_cast<size_t>(req->bytes) + 2;
  if (in.size() < total) {
    ParseResult r;
    r.need = total;
    return r;
  }
  if (in[total - 2] != '\r' || in[total - 1] != '\n') return Error(kBadChunk, total, req->noreply);
  req->data = in.substr(line_len, static_cast<size_t>(req->bytes));
  ParseResult r;
  r.outcome = Outcome::kRequest;
  r.consumed = total;
  return r;
}

// ---- meta commands ---------------------------------------------------------------------------

namespace {

// The flags each meta command accepts (besides P and L), and the refused ones it recognizes.
constexpr std::string_view kMgFlags = "bcfkOqstuvNRT";
constexpr std::string_view kMsFlags = "bcCFIkMOqT";
constexpr std::string_view kMdFlags = "bCIkOqT";
constexpr std::string_view kMaFlags = "bcCDJkMNOqtTv";
// Flags that add a token to the reply.
constexpr std::string_view kReturnFlags = "cfkOst";

bool ParseTtl(std::string_view s, int64_t* out) {
  // memcached parses TTLs as 32-bit signed numbers.
  return ParseI64(s, out) && *out >= std::numeric_limits<int32_t>::min() && *out <= std::numeric_limits<int32_t>::max();
}

}  // namespace

ParseResult Parser::ParseMeta(std::string_view in, size_t line_len, const std::vector<std::string_view>& tok,
                              Request* req) {
  const std::string_view name = tok[0];
  const size_t nt = tok.size();
  ParseResult ok;
  ok.outcome = Outcome::kRequest;
  ok.consumed = line_len;
  if (name == "mn") {  // memcached ignores any tokens after mn
    req->cmd = Command::kMetaNoop;
    return ok;
  }
  std::string_view allowed;
  size_t first_flag = 2;
  if (name == "mg") {
    req->cmd = Command::kMetaGet;
    allowed = kMgFlags;
  } else if (name == "ms") {
    req->cmd = Command::kMetaSet;
    allowed = kMsFlags;
    first_flag = 3;
  } else if (name == "md") {
    req->cmd = Command::kMetaDelete;
    allowed = kMdFlags;
  } else if (name == "ma") {
    req->cmd = Command::kMetaArith;
    allowed = kMaFlags;
  } else if (name == "me") {
    // me <key> [b]: other second tokens are ignored, as memcached does.
    req->cmd = Command::kMetaDebug;
    if (nt < 2 || nt > 3) return Error(kBadFormat, line_len);
    req->meta.base64 = nt == 3 && tok[2] == "b";
  } else {
    return Error(kErr, line_len);
  }
  if (nt < 2) return Error(kErr, line_len);

  // ms: the data length comes first, so that a rejected request's data block can be swallowed
  // and the connection stays in step with the client.
  auto fail = [&](std::string_view line) -> ParseResult {
    if (req->cmd == Command::kMetaSet && req->bytes_valid) swallow_ = req->bytes + 2;
    return Error(line, line_len);
  };
  if (req->cmd == Command::kMetaSet) {
    int64_t bytes = -1;
    if (nt < 3 || !ParseI64(tok[2], &bytes) || bytes < 0 || bytes > std::numeric_limits<int32_t>::max() - 2)
      return Error(kBadFormat, line_len);
    req->bytes = static_cast<uint64_t>(bytes);
    req->bytes_valid = true;
  }

  MetaFlags& m = req->meta;
  uint64_t seen[2] = {0, 0};  // one bit per flag character (0..127)
  for (size_t i = first_flag; req->cmd != Command::kMetaDebug && i < nt; ++i) {
    const std::string_view t = tok[i];
    const unsigned char c = static_cast<unsigned char>(t[0]);
    const std::string_view arg = t.substr(1);
    if (c == 'P' || c == 'L') continue;  // proxy hints
    if (c == 'h' && req->cmd == Command::kMetaGet) return fail(kNoFlagH);
    if (c == 'l' && req->cmd == Command::kMetaGet) return fail(kNoFlagL);
    if (c == 'E') return fail(kNoFlagE);
    if (c >= 128 || allowed.find(static_cast<char>(c)) == std::string_view::npos) return fail(kBadFlag);
    if (seen[c >> 6] & (1ull << (c & 63))) return fail(kDupFlag);
    seen[c >> 6] |= 1ull << (c & 63);
    if (kReturnFlags.find(static_cast<char>(c)) != std::string_view::npos) m.ret[m.nret++] = static_cast<char>(c);
    switch (c) {
      case 'O':
        if (arg.size() > kMaxOpaqueLength) return fail(kLongOpaque);
        m.opaque = arg;
        continue;
      case 'T':
        if (!ParseTtl(arg, &m.ttl)) return fail(kBadToken);
        m.has_ttl = true;
        continue;
      case 'N':
        if (!ParseTtl(arg, &m.vivify_ttl)) return fail(kBadToken);
        m.vivify = true;
        continue;
      case 'R':
        if (!ParseTtl(arg, &m.recache_ttl)) return fail(kBadToken);
        m.recache = true;
        continue;
      case 'C':
        if (!ParseU64(arg, &m.cas)) return fail(kBadToken);
        m.has_cas = true;
        continue;
      case 'F': {
        uint64_t f = 0;
        if (!ParseU64(arg, &f) || f > std::numeric_limits<uint32_t>::max()) return fail(kBadFormat);
        m.client_flags = static_cast<uint32_t>(f);
        continue;
      }
      case 'D':
        if (!ParseU64(arg, &m.delta)) return fail(kBadToken);
        continue;
      case 'J':
        if (!ParseU64(arg, &m.initial)) return fail(kBadToken);
        continue;
      case 'M': {
        const char mode = arg.size() == 1 ? arg[0] : 0;
        if (req->cmd == Command::kMetaSet) {
          switch (mode) {
            case 'S': case 's': m.mode = 'S'; break;
            case 'E': case 'e': m.mode = 'E'; break;
            case 'A': case 'a': m.mode = 'A'; break;
            case 'P': case 'p': m.mode = 'P'; break;
            case 'R': case 'r': m.mode = 'R'; break;
            default: return fail(kBadMsMode);
          }
        } else {
          switch (mode) {
            case 'I': case 'i': case '+': m.mode = '+'; break;
            case 'D': case 'd': case '-': m.mode = '-'; break;
            default: return fail(kBadMaMode);
          }
        }
        continue;
      }
      default:
        break;
    }
    // A flag without a token: memcached ignores anything after its character ("kxyz" = k).
    switch (c) {
      case 'b': m.base64 = true; break;
      case 'q': m.quiet = true; break;
      case 'v': m.value = true; break;
      case 'I': m.invalidate = true; break;
      default: break;  // c f k s t: reply tokens; u: no LRU here, so nothing to skip
    }
  }

  // The key: as memcached, the token as sent is limited to 250 bytes, base64 or not.
  const std::string_view key = tok[1];
  if (m.base64) {
    if (key.size() > kMaxKeyLength) return fail(kBadFormat);
    if (!DecodeBase64(key, &req->binary_key)) return fail(kBadKey64);
  } else if (!ValidKey(key)) {
    return fail(kBadFormat);
  }
  req->keys.push_back(key);
  if (req->cmd == Command::kMetaSet) return ParseData(in, line_len, req);
  return ok;
}

// ---- base64 ----------------------------------------------------------------------------------

namespace {
constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
int B64Value(char ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == '+') return 62;
  if (ch == '/') return 63;
  return -1;
}
}  // namespace

bool DecodeBase64(std::string_view in, std::string* out) {
  out->clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  size_t pad = 0;
  if (in.back() == '=') ++pad;
  if (in.size() >= 2 && in[in.size() - 2] == '=') ++pad;
  if (pad == 1 && in.back() != '=') return false;
  const size_t n = in.size() - pad;  // significant characters
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    const int v = B64Value(in[i]);
    if (v < 0) return false;  // includes '=' before the padding
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  // Canonical: the bits left over from the last character are zero.
  return (acc & ((1u << bits) - 1)) == 0;
}

void EncodeBase64(std::string_view in, std::string* out) {
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out->push_back(kB64[(v >> s) & 63]);
  }
  const size_t rest = in.size() - i;
  if (rest == 1) {
    const uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    out->push_back(kB64[(v >> 18) & 63]);
    out->push_back(kB64[(v >> 12) & 63]);
    out->append("==");
  } else if (rest == 2) {
    const uint32_t v = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8);
    out->push_back(kB64[(v >> 18) & 63]);
    out->push_back(kB64[(v >> 12) & 63]);
    out->push_back(kB64[(v >> 6) & 63]);
    out->push_back('=');
  }
}

}  // namespace wort::server
