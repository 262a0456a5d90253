#pragma once
// The command line of both executables (cli/executables.h): every subcommand registered in the
// executable (cli/command.h), parsed with CLI11, its environment twins and --check-args
// (cli/env_twins.h), then the one subcommand given is run.

namespace herd::cli {

// Parses argv and runs the subcommand; returns the process exit code.
int RunCommandLine(int argc, char** argv);

}  // namespace herd::cli
