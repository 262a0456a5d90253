#include "cli/command.h"

#include <algorithm>
#include <cstdio>

namespace herd::cli {
namespace {

// A function-local static: registrars in other files run during static initialisation, in
// an order the language leaves open, so the vector must exist before the first of them.
std::vector<CommandInfo>& Registry() {
  static auto* registry = new std::vector<CommandInfo>();
  return *registry;
}

}  // namespace

CommandRegistrar::CommandRegistrar(CommandInfo info) { Registry().push_back(std::move(info)); }

std::vector<CommandInfo> RegisteredCommands() {
  std::vector<CommandInfo> commands = Registry();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const CommandInfo& a, const CommandInfo& b) { return a.order < b.order; });
  return commands;
}

int UsageError(const CLI::App& app, const std::string& message) {
  // "herd bench collectives" from the chain of parents.
  std::string path;
  for (const CLI::App* a = &app; a != nullptr; a = a->get_parent()) {
    path = a->get_name() + (path.empty() ? "" : " " + path);
  }
  std::fprintf(stderr, "%s: %s\nRun with --help for more information.\n", path.c_str(),
               message.c_str());
  return kExitUsage;
}

}  // namespace herd::cli
