// Internal: how a `wort` subcommand makes itself known. Each src/cli/<cmd>.cc defines
//   static const bool kReg = wort::cli::RegisterCommand(&AddMyCommand);
// where AddMyCommand(CLI::App& app) adds its subcommand(s) with app.add_subcommand(...) and sets
// a callback. A callback reports failure by throwing CLI::RuntimeError(exit_code) after printing
// the reason to stderr. Bad command-line input (an unknown option, a value that does not parse
// or is out of range) exits with code 2 (ExitCode).
#pragma once

#include <CLI/CLI.hpp>

namespace wort::cli {
using AddFn = void (*)(CLI::App& app);
bool RegisterCommand(AddFn fn);
// Adds every registered subcommand to `app` (in registration order).
void AddAll(CLI::App& app);
// Prints `e` the way CLI11 does (help, version, or the error) and returns the process exit code:
// 0 for --help/--version, a callback's own code for CLI::RuntimeError, 2 for every usage error.
int ExitCode(const CLI::App& app, const CLI::ParseError& e);
}  // namespace wort::cli
