#include "cli/options.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace wort::cli {
namespace {

std::string Lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// Splits "<digits><letters>" (surrounding blanks allowed) and multiplies; `unit_factor` maps a
// lower-case unit to its factor (0 = unknown).
template <typename UnitFn>
Status ParseScaled(std::string_view text, const char* forms, UnitFn unit_factor, uint64_t* out) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(fmt::format("'{}' {}; expected {}", text, why, forms));
  };
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty()) return bad("is empty");
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  if (digits == 0) return bad(s[0] == '-' ? "is negative" : "is not a number");
  uint64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + digits, v);
  if (r.ec == std::errc::result_out_of_range) return bad("does not fit in 64 bits");
  std::string_view unit = s.substr(digits);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  uint64_t factor = 1;
  if (!unit.empty()) {
    if (unit.front() == '.' || unit.front() == ',') return bad("is not a whole number");
    for (char c : unit)
      if (!std::isalpha(static_cast<unsigned char>(c))) return bad("has a bad suffix");
    factor = unit_factor(Lower(unit));
    if (factor == 0) return bad(fmt::format("has an unknown suffix '{}'", unit));
  }
  if (v != 0 && factor > UINT64_MAX / v) return bad("does not fit in 64 bits");
  *out = v * factor;
  return Status::OK();
}

uint64_t SizeFactor(const std::string& u) {
  static const char kPrefixes[] = "kmgtpe";
  if (u == "b") return 1;
  const char* p = std::char_traits<char>::find(kPrefixes, 6, u[0]);
  if (p == nullptr) return 0;
  const std::string_view rest = std::string_view(u).substr(1);
  if (!(rest.empty() || rest == "b" || rest == "i" || rest == "ib")) return 0;
  return uint64_t{1} << (10 * (p - kPrefixes + 1));
}

uint64_t CountFactor(const std::string& u) {
  if (u == "k") return 1000ull;
  if (u == "m") return 1000ull * 1000;
  if (u == "g") return 1000ull * 1000 * 1000;
  if (u == "t") return 1000ull * 1000 * 1000 * 1000;
  return 0;
}

constexpr const char* kSizeForms = "a size in bytes: N or N with K, M, G, T (powers of 1024), e.g. 64M";
constexpr const char* kCountForms = "a count: N or N with K, M, G, T (powers of 1000), e.g. 250K";

CLI::Validator MakeValidator(Status (*parse)(std::string_view, uint64_t*), const char* desc) {
  return CLI::Validator(
      [parse](std::string& input) -> std::string {
        uint64_t v = 0;
        const Status s = parse(input, &v);
        if (!s.ok()) throw CLI::ValidationError(s.message());
        input = std::to_string(v);
        return {};
      },
      desc, "");
}

// "64 MiB" -> "64MiB", a form the parser accepts (for --help's defaults).
std::string Compact(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

}  // namespace

Status ParseSize(std::string_view text, uint64_t* out) { return ParseScaled(text, kSizeForms, SizeFactor, out); }
Status ParseCount(std::string_view text, uint64_t* out) { return ParseScaled(text, kCountForms, CountFactor, out); }

CLI::Validator SizeValue() { return MakeValidator(&ParseSize, "SIZE"); }
CLI::Validator CountValue() { return MakeValidator(&ParseCount, "COUNT"); }

std::string FormatSize(uint64_t b) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (u < 6 && b >= (uint64_t{1024} << (10 * u))) ++u;
  if (u == 0) return fmt::format("{} B", b);
  const uint64_t unit = uint64_t{1} << (10 * u);
  if (b % unit == 0) return fmt::format("{} {}", b / unit, kUnits[u]);
  return fmt::format("{:.1f} {}", static_cast<double>(b) / static_cast<double>(unit), kUnits[u]);
}

CLI::Option* AddSizeOption(CLI::App* app, const std::string& name, uint64_t* out, const std::string& help) {
  return app->add_option(name, *out, help)->transform(SizeValue())->default_str(Compact(FormatSize(*out)));
}
CLI::Option* AddCountOption(CLI::App* app, const std::string& name, uint64_t* out, const std::string& help) {
  return app->add_option(name, *out, help)->transform(CountValue())->capture_default_str();
}

}  // namespace wort::cli
