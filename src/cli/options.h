// Internal: the one parser of sizes and counts for every `wort` subcommand (and for anything else
// that reads such a value from a user, e.g. an environment variable).
//
//   size  (bytes): N, or N with K/M/G/T/P/E (powers of 1024; KB/KiB, MB/MiB, ... mean the same);
//                  case-insensitive, e.g. 64M, 64MiB, 1g, 4096.
//   count        : N, or N with K/M/G/T (powers of 1000), e.g. 1M = 1 000 000, 250K, 2000.
//
// N is a whole decimal number (no sign, no fraction, no 0x). Anything else - "abc", "-1",
// "64Mxyz", "1.5M", a value that does not fit in 64 bits - is refused with a message naming the
// option and the accepted forms; `wort` then exits with code 2 (cli/command.h ExitCode).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "wort/status.h"

namespace wort::cli {

// Plain parsers. InvalidArgument (message without the option's name) on bad input.
Status ParseSize(std::string_view text, uint64_t* out);
Status ParseCount(std::string_view text, uint64_t* out);

// CLI11 transformers: rewrite the option's text to its value in decimal, or throw
// CLI::ValidationError. Use with ->transform(SizeValue()) on an option of an unsigned type.
CLI::Validator SizeValue();
CLI::Validator CountValue();

// An option `name` (e.g. "--pool-size") whose value is a size / count, stored in *out; *out's
// value when the option is absent is its default and is shown in --help. Chain ->check(...) for
// a range, e.g. ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40)).
CLI::Option* AddSizeOption(CLI::App* app, const std::string& name, uint64_t* out, const std::string& help);
CLI::Option* AddCountOption(CLI::App* app, const std::string& name, uint64_t* out, const std::string& help);

// "64 MiB" / "1.5 GiB" / "4096 B": a size as --help and messages print it.
std::string FormatSize(uint64_t bytes);

}  // namespace wort::cli
