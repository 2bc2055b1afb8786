#include "cli/command.h"

#include <vector>

namespace wort::cli {
namespace {
std::vector<AddFn>& Fns() {
  static std::vector<AddFn> v;
  return v;
}
}  // namespace
bool RegisterCommand(AddFn fn) {
  Fns().push_back(fn);
  return true;
}
void AddAll(CLI::App& app) {
  for (AddFn f : Fns()) f(app);
}
int ExitCode(const CLI::App& app, const CLI::ParseError& e) {
  const int code = app.exit(e);
  if (code == 0 || dynamic_cast<const CLI::RuntimeError*>(&e) != nullptr) return code;
  return 2;
}
}  // namespace wort::cli
