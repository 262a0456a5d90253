// In `herd` only: the subcommands of herd-torch, listed in `herd --help` like every other and
// handed over by exec (cli/executables.h). main() hands them over before parsing, so their
// flags, --help and --check-args are herd-torch's own; these entries run only if a parse
// reached them some other way, and then hand over too.

#include "cli/checkpoint_export.h"
#include "cli/command.h"
#include "cli/executables.h"
#include "cli/torch_commands.h"

namespace herd::cli {
namespace {

class ForwardedCommand final : public Command {
 public:
  void Configure(CLI::App& app) override {
    app.allow_extras();
    app.prefix_command();
  }
  int Run() override { return ExecTorchExecutable(ProcessArguments()); }
};

CommandInfo Forwarded(const TorchCommand& c) {
  return CommandInfo{c.name, c.description, c.order, []() -> std::unique_ptr<Command> {
                       return std::make_unique<ForwardedCommand>();
                     }};
}

[[maybe_unused]] const CommandRegistrar forwarded_local{Forwarded(kLocalCommand)};
[[maybe_unused]] const CommandRegistrar forwarded_worker{Forwarded(kWorkerCommand)};

}  // namespace
}  // namespace herd::cli

namespace herd::cli {

// `herd checkpoint export` parses and checks its flags here (so --check-args answers without
// herd-torch), then herd-torch runs the same command line.
int ExportModel(const std::string&, const std::string&) {
  return ExecTorchExecutable(ProcessArguments());
}

}  // namespace herd::cli
