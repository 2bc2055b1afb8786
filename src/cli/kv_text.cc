#include "cli/kv_text.h"

#include <fmt/core.h>

#include "wort/kv.h"

namespace wort::cli {
namespace {
int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

void EscapeBytes(std::string_view bytes, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->reserve(out->size() + bytes.size());
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out->append("\\\\");
    } else if (c >= 0x20 && c <= 0x7e) {
      out->push_back(ch);
    } else {
      out->push_back('\\');
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 15]);
    }
  }
}

std::string Escape(std::string_view bytes) {
  std::string s;
  EscapeBytes(bytes, &s);
  return s;
}

Status Unescape(std::string_view text, std::string* out) {
  std::string r;
  r.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      if (i + 1 < text.size() && text[i + 1] == '\\') {
        r.push_back('\\');
        ++i;
        continue;
      }
      const int hi = i + 1 < text.size() ? HexDigit(text[i + 1]) : -1;
      const int lo = i + 2 < text.size() ? HexDigit(text[i + 2]) : -1;
      if (hi < 0 || lo < 0)
        return Status::InvalidArgument(fmt::format("column {}: '\\' must be followed by '\\' or two hex digits", i + 1));
      r.push_back(static_cast<char>(hi << 4 | lo));
      i += 2;
    } else if (c < 0x20 || c > 0x7e) {
      return Status::InvalidArgument(
          fmt::format("column {}: byte 0x{:02x} must be escaped (as \\{:02x})", i + 1, static_cast<unsigned>(c), c));
    } else {
      r.push_back(static_cast<char>(c));
    }
  }
  *out = std::move(r);
  return Status::OK();
}

std::string DumpHeaderText(const DumpHeader& h) {
  return fmt::format("VERSION={}\nformat=print\nkind={}\nkey_type={}\nHEADER=END\n", h.version, h.kind,
                     h.key_type == KeyType::kU64 ? "u64" : "bytes");
}

Status ReadDump(std::istream& in, DumpHeader* header, std::vector<std::pair<std::string, std::string>>* pairs) {
  std::string line;
  uint64_t n = 0;
  auto bad = [&](const std::string& why) { return Status::InvalidArgument(fmt::format("line {}: {}", n, why)); };
  // Header.
  DumpHeader h;
  bool version = false, format = false, kind = false, key_type = false, header_end = false;
  while (!header_end && std::getline(in, line)) {
    ++n;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return bad("expected a header line NAME=VALUE, found '" + Escape(line) + "'");
    const std::string name = line.substr(0, eq), value = line.substr(eq + 1);
    if (n == 1 && name != "VERSION") return bad("not a wort dump: the first line must be VERSION=1");
    if (name == "VERSION") {
      if (value != "1") return bad("unsupported format version '" + Escape(value) + "' (this wort reads VERSION=1)");
      version = true;
    } else if (name == "format") {
      if (value != "print") return bad("unsupported format '" + Escape(value) + "' (only format=print)");
      format = true;
    } else if (name == "kind") {
      if (value.empty()) return bad("kind= names no index kind");
      h.kind = value;
      kind = true;
    } else if (name == "key_type") {
      if (value == "bytes") h.key_type = KeyType::kBytes;
      else if (value == "u64") h.key_type = KeyType::kU64;
      else return bad("key_type must be bytes or u64, not '" + Escape(value) + "'");
      key_type = true;
    } else if (name == "HEADER") {
      if (value != "END") return bad("expected HEADER=END");
      header_end = true;
    } else {
      return bad("unknown header line '" + Escape(name) + "'");
    }
  }
  if (n == 0) return Status::InvalidArgument("empty input: not a wort dump");
  if (!header_end) return bad("the header has no HEADER=END line");
  if (!version || !format || !kind || !key_type)
    return bad(std::string("the header lacks ") + (!version ? "VERSION" : !format ? "format" : !kind ? "kind" : "key_type"));
  // Data.
  std::vector<std::pair<std::string, std::string>> out;
  const size_t max_key = h.key_type == KeyType::kU64 ? 8 : kMaxKeyLen;
  bool data_end = false;
  std::string key;
  bool have_key = false;
  while (std::getline(in, line)) {
    ++n;
    if (data_end) return bad("text after DATA=END");
    if (line == "DATA=END") {
      if (have_key) return bad("DATA=END where the value of the key on line " + std::to_string(n - 1) + " belongs");
      data_end = true;
      continue;
    }
    if (line.empty() || line[0] != ' ')
      return bad(std::string("a ") + (have_key ? "value" : "key") + " line must start with a space");
    std::string bytes;
    if (Status s = Unescape(std::string_view(line).substr(1), &bytes); !s.ok()) {
      // Columns of the line as in the file (the leading space is column 1).
      const std::string& m = s.message();
      const size_t col = std::stoul(m.substr(7));
      return bad(fmt::format("column {}{}", col + 1, m.substr(m.find(':'))));
    }
    if (!have_key) {
      if (h.key_type == KeyType::kU64 && bytes.size() != 8)
        return bad(fmt::format("a u64 key is 8 bytes, this one {}", bytes.size()));
      if (bytes.size() > max_key) return bad(fmt::format("key of {} bytes (at most {})", bytes.size(), max_key));
      key = std::move(bytes);
      have_key = true;
    } else {
      if (bytes.size() > kMaxValueLen) return bad(fmt::format("value of {} bytes (at most {})", bytes.size(), kMaxValueLen));
      out.emplace_back(std::move(key), std::move(bytes));
      have_key = false;
    }
  }
  if (in.bad()) return Status::IOError(fmt::format("read failed after line {}", n));
  if (!data_end)
    return bad(have_key ? "the input ends after a key line, without its value (truncated?)"
                        : "the input ends without DATA=END (truncated?)");
  *header = h;
  *pairs = std::move(out);
  return Status::OK();
}

}  // namespace wort::cli
