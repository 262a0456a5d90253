// herd: one binary, one subcommand per file in cli/ (see cli/command.h).

#include <CLI/CLI.hpp>
#include <memory>
#include <utility>
#include <vector>

#include "cli/command.h"

int main(int argc, char** argv) {
  CLI::App app{"herd: data-parallel training with collectives and parameter servers"};
  app.name("herd");
  app.set_version_flag("--version", "herd " HERD_VERSION);
  app.require_subcommand(1);

  std::vector<std::pair<CLI::App*, std::unique_ptr<herd::cli::Command>>> commands;
  for (const herd::cli::CommandInfo& info : herd::cli::RegisteredCommands()) {
    CLI::App* sub = app.add_subcommand(info.name, info.description);
    auto command = info.make();
    command->Configure(*sub);
    commands.emplace_back(sub, std::move(command));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end here with code 0; every real parse error is a usage error.
    const int code = app.exit(e);
    return code == 0 ? herd::cli::kExitOk : herd::cli::kExitUsage;
  }
  for (auto& [sub, command] : commands) {
    if (sub->parsed()) return command->Run();
  }
  return herd::cli::kExitUsage;  // unreachable: require_subcommand(1)
}
