#pragma once
// The command line's two rules for running in containers (docs/kubernetes.md, "Flags and their
// environment twins"):
//
// - Every long option `--foo-bar` of every subcommand has the environment twin `HERD_FOO_BAR`
//   (`--scheduler` -> HERD_SCHEDULER, `--token-file` -> HERD_TOKEN_FILE). A flag given on the
//   command line wins over its twin; the twin wins over the default; a required option is
//   satisfied by its twin. A pod sets the twins from its spec and the Downward API instead of
//   templating argument lists.
// - Every subcommand that runs something takes `--check-args`: parse the flags and the
//   environment, run the command's own checks of the values (Command::Validate), print
//   "arguments accepted" and exit 0 -- or print the error and exit 2 -- without opening a file,
//   binding a port or dialling anyone. Manifests are linted with it.

#include <CLI/CLI.hpp>
#include <string>

namespace herd::cli {

// The twin of a long option name: "token-file" -> "HERD_TOKEN_FILE".
std::string EnvironmentTwin(const std::string& long_name);

// Gives every long option of `app` and of its subcommands (recursively) that has no
// environment variable yet its twin. --help, --version and --check-args get none: an
// environment must never turn a process into something that does not run.
void AddEnvironmentTwins(CLI::App& app);

// Adds --check-args to every subcommand of `app` (recursively) that has no subcommands of its
// own, binding them all to `check_args`.
void AddCheckArgs(CLI::App& app, bool& check_args);

}  // namespace herd::cli
