#include "cli/app.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "cli/env_twins.h"
#include "cli/executables.h"

namespace herd::cli {
namespace {

char** process_arguments = nullptr;

}  // namespace

char** ProcessArguments() { return process_arguments; }

int RunCommandLine(int argc, char** argv) {
  process_arguments = argv;
  CLI::App app{"herd: data-parallel training with collectives and parameter servers"};
  app.name("herd");  // in herd-torch too: its user typed `herd`
  app.set_version_flag("--version", "herd " HERD_VERSION);
  app.require_subcommand(1);

  std::vector<std::pair<CLI::App*, std::unique_ptr<Command>>> commands;
  for (const CommandInfo& info : RegisteredCommands()) {
    CLI::App* sub = app.add_subcommand(info.name, info.description);
    auto command = info.make();
    command->Configure(*sub);
    commands.emplace_back(sub, std::move(command));
  }
  bool check_args = false;
  for (auto& [sub, command] : commands) {
    AddCheckArgs(*sub, check_args);
    AddEnvironmentTwins(*sub);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end here with code 0; every real parse error is a usage error.
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  for (auto& [sub, command] : commands) {
    if (!sub->parsed()) continue;
    if (const int rc = command->Validate(); rc != kExitOk) return rc;
    if (check_args) {
      std::string path = sub->get_name();  // down to the leaf: "job submit"
      for (const CLI::App* a = sub; !a->get_subcommands().empty();) {
        a = a->get_subcommands().front();
        path += " " + a->get_name();
      }
      std::printf("herd %s: arguments accepted\n", path.c_str());
      return kExitOk;
    }
    return command->Run();
  }
  return kExitUsage;  // unreachable: require_subcommand(1)
}

}  // namespace herd::cli
