// Internal: how a `wort` subcommand makes itself known. Each src/cli/<cmd>.cc defines
//   static const bool kReg = wort::cli::RegisterCommand(&AddMyCommand);
// where AddMyCommand(CLI::App& app) adds its subcommand(s) with app.add_subcommand(...) and sets
// a callback. A callback reports failure by throwing CLI::RuntimeError(exit_code) after printing
// the reason to stderr - Fail(prefix, status) does both, with the status's exit code below.
//
// Exit statuses: the same for the same kind of error in every subcommand (doc/cli.md has the
// table; tests/cli/cli_test.cc checks it):
//   0 success
//   1 a runtime error: a system call failed, the pool is full, the kind does not offer the
//     operation, a benchmark or a remote run reported errors
//   2 a usage error: an unknown command or option, a value that does not parse or is out of
//     range, an invalid argument (InvalidArgument), malformed input (e.g. a `kv load` file)
//   3 corruption: a file that is not a pool, a broken invariant, a failed `pool check` or
//     `knn check`, a consistency violation found by `crashtest` (or a mutant its gate missed)
//   4 not found: the key, the store or the pool file does not exist
//   5 busy: the pool is open for writing in another process
#pragma once

#include <CLI/CLI.hpp>

#include <initializer_list>
#include <string_view>
#include <vector>

#include "wort/status.h"

namespace wort::cli {

enum ExitStatus : int {
  kExitOk = 0,
  kExitError = 1,
  kExitUsage = 2,
  kExitCorruption = 3,
  kExitNotFound = 4,
  kExitBusy = 5,
};
// The exit status of a failed Status (kExitOk for OK).
int ExitStatusOf(const Status& s);
// Prints "<prefix>: <status>" to stderr and throws CLI::RuntimeError(ExitStatusOf(s)).
[[noreturn]] void Fail(std::string_view prefix, const Status& s);

using AddFn = void (*)(CLI::App& app);
// `names`: the top-level subcommands that fn adds (exactly those; tests/cli/cli_test.cc checks
// every registration), so that a command line naming one of them registers only fn (AddFor).
bool RegisterCommand(AddFn fn, std::initializer_list<std::string_view> names);
struct Registration {
  AddFn fn;
  std::vector<std::string_view> names;
};
const std::vector<Registration>& Registrations();
// Adds every registered subcommand to `app` (in registration order).
void AddAll(CLI::App& app);
// Adds what the command line needs: when argv[1] is a name that a registration declared, only
// that registration's subcommands (issue 35: registering every subcommand's options was 44% of
// the instructions of a `wort serve` start before main's own work); otherwise (an option such as
// --help or --version first, an unknown name, no argument) every one, so that help and the
// "unknown command" message list them all.
void AddFor(CLI::App& app, int argc, char** argv);
// Prints `e` the way CLI11 does (help, version, or the error) and returns the process exit code:
// 0 for --help/--version, a callback's own code for CLI::RuntimeError, 2 for every usage error.
int ExitCode(const CLI::App& app, const CLI::ParseError& e);
// Parses argv into `app`, naming an unknown (sub)command ("wort: unknown command 'x' (commands:
// ...)"), and returns the process exit status (ExitCode).
int Main(CLI::App& app, int argc, char** argv);
}  // namespace wort::cli
