#include "cli/command.h"

#include <fmt/core.h>

#include <cstring>
#include <string>
#include <vector>

namespace wort::cli {
namespace {
std::vector<Registration>& Regs() {
  static std::vector<Registration> v;
  return v;
}
}  // namespace
bool RegisterCommand(AddFn fn, std::initializer_list<std::string_view> names) {
  Regs().push_back({fn, std::vector<std::string_view>(names)});
  return true;
}
const std::vector<Registration>& Registrations() { return Regs(); }
void AddAll(CLI::App& app) {
  for (const Registration& r : Regs()) r.fn(app);
}
void AddFor(CLI::App& app, int argc, char** argv) {
  if (argc >= 2 && argv[1][0] != '-') {
    const std::string_view want = argv[1];
    for (const Registration& r : Regs())
      for (std::string_view n : r.names)
        if (n == want) {
          r.fn(app);
          return;
        }
  }
  AddAll(app);
}
int ExitStatusOf(const Status& s) {
  switch (s.code()) {
    case Code::kOk:
      return kExitOk;
    case Code::kInvalidArgument:
      return kExitUsage;
    case Code::kCorruption:
      return kExitCorruption;
    case Code::kNotFound:
      return kExitNotFound;
    case Code::kBusy:
      return kExitBusy;
    default:
      return kExitError;
  }
}
void Fail(std::string_view prefix, const Status& s) {
  fmt::print(stderr, "{}: {}\n", prefix, s.ToString());
  throw CLI::RuntimeError(ExitStatusOf(s));
}
int ExitCode(const CLI::App& app, const CLI::ParseError& e) {
  const int code = app.exit(e);
  if (code == 0 || dynamic_cast<const CLI::RuntimeError*>(&e) != nullptr) return code;
  return kExitUsage;
}

namespace {
// The first argument after a command that takes a subcommand and no positional argument must be
// one of its subcommands: CLI11 would call it an unexpected extra argument; name it instead.
bool CheckCommandNames(CLI::App& app, int argc, char** argv) {
  CLI::App* cur = &app;
  std::string path = "wort";
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (a[0] == '-') return true;  // options: CLI11 judges them (and what follows)
    auto subs = cur->get_subcommands([](CLI::App*) { return true; });
    if (subs.empty()) return true;
    bool has_positional = false;
    for (const CLI::Option* o : cur->get_options())
      if (o->get_positional()) has_positional = true;
    if (has_positional) return true;
    CLI::App* next = nullptr;
    for (CLI::App* s : subs)
      if (s->check_name(a)) next = s;
    if (next == nullptr) {
      std::string names;
      for (CLI::App* s : subs)
        if (!s->get_name().empty()) names += (names.empty() ? "" : ", ") + s->get_name();
      fmt::print(stderr, "{}: unknown command '{}' (commands: {}; see {} --help)\n", path, a, names, path);
      return false;
    }
    path += " " + next->get_name();
    cur = next;
  }
  return true;
}
}  // namespace

int Main(CLI::App& app, int argc, char** argv) {
  if (!CheckCommandNames(app, argc, argv)) return kExitUsage;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ExitCode(app, e);
  }
  return kExitOk;
}
}  // namespace wort::cli
