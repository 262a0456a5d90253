#pragma once
// The subcommands that live in herd-torch (cli/executables.h): their names, places in
// `herd --help` and descriptions, shared by their own registration in herd-torch and by the
// entries that list them in herd's help and hand them over (cli/torch_forwarding.cc).

#include <string_view>

namespace herd::cli {

struct TorchCommand {
  const char* name;
  int order;  // CommandInfo::order
  const char* description;
};

inline constexpr TorchCommand kLocalCommand{
    "local", 5,
    "Train a job on this machine: scheduler, servers and workers as child processes, with live "
    "progress"};
inline constexpr TorchCommand kWorkerCommand{
    "worker", 40, "One training process of a job: trains its shard in the job's mode"};

inline constexpr TorchCommand kTorchCommands[] = {kLocalCommand, kWorkerCommand};

// Whether argv names a subcommand of herd-torch: `herd local ...`, `herd worker ...`.
inline bool IsTorchCommand(int argc, char** argv) {
  if (argc < 2) return false;
  for (const TorchCommand& c : kTorchCommands) {
    if (std::string_view(argv[1]) == c.name) return true;
  }
  return false;
}

}  // namespace herd::cli
