// wort: command-line tool of the wort library. Subcommands live in src/cli/.
#include <cstdio>

#include "cli/command.h"
#include "wort/version.h"

int main(int argc, char** argv) {
  CLI::App app{"wort: persistent-memory key-value indexes (radix trees, B-trees, hash tables)", "wort"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", std::string("wort ") + wort::Version());
  wort::cli::AddFor(app, argc, argv);  // only the subcommand argv names, when it names one
  return wort::cli::Main(app, argc, argv);
}
