#pragma once
// herd is two executables side by side in one directory (docs/architecture.md, "The command
// line"): `herd`, which every user and manifest runs and which does not load libtorch, and
// `herd-torch`, which holds the subcommands that train (`worker`, `local`) or write torch's
// format (`checkpoint export`). `herd` hands those to `herd-torch` by exec: same process, same
// arguments, same environment, so a pod's PID 1 and its signals are unchanged.

#include <string>

namespace herd::cli {

inline constexpr char kHerdExecutable[] = "herd";
inline constexpr char kTorchExecutable[] = "herd-torch";

// The path of herd's executable `name` ("herd", "herd-torch"): beside the running one.
std::string SiblingExecutable(const std::string& name);

// The arguments main() was given (null-terminated, argv[0] first), kept by RunCommandLine.
char** ProcessArguments();

// Replaces this process with herd-torch run with `argv`. Returns only when that fails, after
// printing why: kExitFailure.
int ExecTorchExecutable(char** argv);

}  // namespace herd::cli
