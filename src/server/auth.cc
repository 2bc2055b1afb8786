// Password file, text-protocol authentication and SASL PLAIN for `wort serve` (see auth.h).
#include "server/auth.h"

#include <fmt/core.h>

#include <charconv>
#include <fstream>
#include <sstream>

namespace wort::server {

bool ConstantTimeEquals(std::string_view a, std::string_view secret) {
  // The accumulator is volatile so that the compiler cannot turn the loop into an early exit.
  volatile unsigned char acc = a.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    acc = acc | static_cast<unsigned char>(x ^ static_cast<unsigned char>(secret[i]));
  }
  return acc == 0;
}

Status AuthFile::Load(const std::string& path, std::unique_ptr<AuthFile>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::IOError(fmt::format("cannot read the password file {}", path));
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return Status::IOError(fmt::format("cannot read the password file {}", path));
  Status s = Parse(ss.str(), path, out);
  if (s.ok()) (*out)->path_ = path;
  return s;
}

Status AuthFile::Parse(std::string_view text, std::string_view origin, std::unique_ptr<AuthFile>* out) {
  auto a = std::make_unique<AuthFile>();
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    // The password ends at the first '\r' or '\n', as in memcached's reader.
    if (size_t cr = line.find('\r'); cr != std::string_view::npos) line = line.substr(0, cr);
    if (line.empty()) continue;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return Status::InvalidArgument(fmt::format(
          "password file {} line {}: expected 'user:password'{}", origin, line_no,
          colon == 0 ? " (empty user)" : ""));
    }
    a->entries_.emplace_back(std::string(line.substr(0, colon)), std::string(line.substr(colon + 1)));
  }
  if (a->entries_.empty()) return Status::InvalidArgument(fmt::format("password file {} has no 'user:password' line", origin));
  *out = std::move(a);
  return Status::OK();
}

bool AuthFile::Check(std::string_view user, std::string_view password) const {
  // Every entry is compared in full (no early exit on a match, & instead of &&).
  unsigned ok = 0;
  for (const auto& [u, p] : entries_)
    ok |= static_cast<unsigned>(ConstantTimeEquals(user, u)) & static_cast<unsigned>(ConstantTimeEquals(password, p));
  return ok != 0;
}

bool CheckSaslPlain(const AuthFile& auth, std::string_view payload) {
  const size_t z1 = payload.find('\0');
  if (z1 == std::string_view::npos) return false;
  const size_t z2 = payload.find('\0', z1 + 1);
  if (z2 == std::string_view::npos) return false;
  const std::string_view authzid = payload.substr(0, z1);
  const std::string_view user = payload.substr(z1 + 1, z2 - z1 - 1);
  const std::string_view password = payload.substr(z2 + 1);
  if (user.empty()) return false;
  const bool ok = auth.Check(user, password);
  return ok && (authzid.empty() || authzid == user);
}

TextAuthStep TextAuth(const AuthFile& auth, std::string_view input, size_t* pending) {
  TextAuthStep r;
  if (*pending == 0) {
    const size_t nl = input.find('\n');
    if (nl == std::string_view::npos) {
      if (input.size() > 2048) r.outcome = TextAuthStep::Outcome::kClose;
      return r;  // kNeedMore
    }
    std::string_view line = input.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    r.outcome = TextAuthStep::Outcome::kReply;
    r.consumed = nl + 1;
    // Tokens separated by spaces: set <key> <flags> <exptime> <bytes> [...]
    std::string_view tok[6];
    size_t n = 0;
    for (size_t i = 0; i < line.size() && n < 6;) {
      while (i < line.size() && line[i] == ' ') ++i;
      const size_t b = i;
      while (i < line.size() && line[i] != ' ') ++i;
      if (i > b) tok[n++] = line.substr(b, i - b);
    }
    uint32_t size = 0;
    bool size_ok = false;
    if (n >= 5) {
      const auto res = std::from_chars(tok[4].data(), tok[4].data() + tok[4].size(), size);
      size_ok = res.ec == std::errc() && res.ptr == tok[4].data() + tok[4].size();
    }
    if (n < 5 || tok[0] != "set" || !size_ok) {
      r.reply = "CLIENT_ERROR unauthenticated";
      return r;
    }
    if (size > kMaxAuthPayload) {
      r.reply = "CLIENT_ERROR auth token too long";
      return r;
    }
    *pending = size + 2;
    input.remove_prefix(r.consumed);
  }
  // The payload "<user> <password>\r\n".
  if (input.size() < *pending) {
    // Wait for the payload; the caller drops the `set` line if this call consumed it.
    r.outcome = TextAuthStep::Outcome::kNeedMore;
    return r;
  }
  const size_t len = *pending;
  *pending = 0;
  const std::string_view data = input.substr(0, len);
  r.outcome = TextAuthStep::Outcome::kReply;
  r.consumed += len;
  if (data.substr(len - 2) != "\r\n") {
    r.reply = "CLIENT_ERROR bad command line termination";
    return r;
  }
  const std::string_view token = data.substr(0, len - 2);
  const size_t sp = token.find(' ');
  if (sp == std::string_view::npos) {
    r.reply = "CLIENT_ERROR bad authentication token format";
    return r;
  }
  if (auth.Check(token.substr(0, sp), token.substr(sp + 1))) {
    r.reply = "STORED";
    r.authenticated = true;
  } else {
    r.reply = "CLIENT_ERROR authentication failure";
  }
  return r;
}

}  // namespace wort::server
