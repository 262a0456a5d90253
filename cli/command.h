#pragma once
// A subcommand of the `herd` binary. Each one lives in its own file, cli/<name>_command.cc, and
// registers itself with HERD_REGISTER_COMMAND; adding a subcommand is that file plus its line
// in cli/CMakeLists.txt. main() builds the CLI11 app from the registry, parses, and runs the
// one subcommand that was given.

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace herd::cli {

// Exit codes every subcommand uses.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the command ran and something failed
// Bad flags, arguments or environment: nothing was run, and running the same command again
// cannot succeed. A Kubernetes pod failure policy fails a whole Job on this code at once
// instead of retrying the pod (docs/kubernetes.md).
inline constexpr int kExitUsage = 2;
// A worker or shard whose job ended without completing (FAILED elsewhere, or CANCELLED): its
// own restart cannot help, so a pod failure policy fails the Kubernetes Job at once as well.
inline constexpr int kExitJobEnded = 3;
// `herd local`: the job completed, but its final checkpoint (of a job with a checkpoint
// directory) did not commit: the trained state is not on disk.
inline constexpr int kExitCheckpointFailed = 4;

class Command {
 public:
  virtual ~Command() = default;
  // Adds the subcommand's options (and its own subcommands) to `app`, which main() created with
  // the registered name and description. Bound variables are members of the Command.
  virtual void Configure(CLI::App& app) = 0;
  // Checks what CLI11 cannot (durations, enumerations, combinations of flags) and turns the
  // values into the options Run uses. Opens no file, binds no port, dials no one: `herd ...
  // --check-args` runs it alone. On a bad value prints the error and returns kExitUsage.
  virtual int Validate() { return kExitOk; }
  // Runs once parsing and Validate succeeded; returns the process exit code.
  virtual int Run() = 0;
};

struct CommandInfo {
  std::string name;
  std::string description;
  int order = 0;  // position in `herd --help` (ascending)
  std::function<std::unique_ptr<Command>()> make;
};

// Every registered subcommand, sorted by `order`.
std::vector<CommandInfo> RegisteredCommands();

class CommandRegistrar {
 public:
  explicit CommandRegistrar(CommandInfo info);
};

// Prints "herd <path>: <message>" and a pointer to --help on stderr; returns kExitUsage.
int UsageError(const CLI::App& app, const std::string& message);

}  // namespace herd::cli

// In the subcommand's file, in the namespace of its class, e.g.
//   HERD_REGISTER_COMMAND(BenchCommand, "bench", 60, "Benchmarks ...");
#define HERD_REGISTER_COMMAND(Type, name, order, description)                                \
  [[maybe_unused]] const ::herd::cli::CommandRegistrar herd_command_registrar_##Type {       \
    ::herd::cli::CommandInfo {                                                               \
      name, description, order,                                                              \
          []() -> std::unique_ptr<::herd::cli::Command> { return std::make_unique<Type>(); } \
    }                                                                                        \
  }
