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
}  // namespace wort::cli
