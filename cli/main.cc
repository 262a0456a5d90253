// herd: one binary, one subcommand per file in cli/ (see cli/command.h).

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "cli/env_twins.h"

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
  bool check_args = false;
  for (auto& [sub, command] : commands) {
    herd::cli::AddCheckArgs(*sub, check_args);
    herd::cli::AddEnvironmentTwins(*sub);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end here with code 0; every real parse error is a usage error.
    const int code = app.exit(e);
    return code == 0 ? herd::cli::kExitOk : herd::cli::kExitUsage;
  }
  for (auto& [sub, command] : commands) {
    if (!sub->parsed()) continue;
    if (const int rc = command->Validate(); rc != herd::cli::kExitOk) return rc;
    if (check_args) {
      std::string path = sub->get_name();  // down to the leaf: "job submit"
      for (const CLI::App* a = sub; !a->get_subcommands().empty();) {
        a = a->get_subcommands().front();
        path += " " + a->get_name();
      }
      std::printf("herd %s: arguments accepted\n", path.c_str());
      return herd::cli::kExitOk;
    }
    return command->Run();
  }
  return herd::cli::kExitUsage;  // unreachable: require_subcommand(1)
}
