// Internal: how a `wort` subcommand makes itself known. Each src/cli/<cmd>.cc defines
//   static const bool kReg = wort::cli::RegisterCommand(&AddMyCommand);
// where AddMyCommand(CLI::App& app) adds its subcommand(s) with app.add_subcommand(...) and sets
// a callback. A callback reports failure by throwing CLI::RuntimeError(exit_code) after printing
// the reason to stderr.
#pragma once

#include <CLI/CLI.hpp>

namespace wort::cli {
using AddFn = void (*)(CLI::App& app);
bool RegisterCommand(AddFn fn);
// Adds every registered subcommand to `app` (in registration order).
void AddAll(CLI::App& app);
}  // namespace wort::cli
