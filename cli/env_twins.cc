#include "cli/env_twins.h"

#include <cctype>
#include <vector>

namespace herd::cli {
namespace {

constexpr const char* kCheckArgs = "--check-args";
constexpr const char* kCheckArgsName = "check-args";

std::vector<CLI::App*> Subcommands(CLI::App& app) {
  return app.get_subcommands([](CLI::App*) { return true; });
}

bool GetsNoTwin(const CLI::App& app, const CLI::Option* option) {
  return option == app.get_help_ptr() || option == app.get_help_all_ptr() ||
         option == app.get_version_ptr() || option->check_lname(kCheckArgsName);
}

}  // namespace

std::string EnvironmentTwin(const std::string& long_name) {
  std::string twin = "HERD_";
  for (char c : long_name) {
    twin += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return twin;
}

void AddEnvironmentTwins(CLI::App& app) {
  for (CLI::Option* option : app.get_options([](CLI::Option*) { return true; })) {
    if (GetsNoTwin(app, option) || !option->get_envname().empty()) continue;
    const auto& names = option->get_lnames();
    if (names.empty()) continue;  // positional arguments and short-only flags
    option->envname(EnvironmentTwin(names.front()));
  }
  // CLI11 reads the environment of every subcommand without a parse-complete callback,
  // parsed or not, after the whole command line: a sibling's twin would overwrite a shared
  // variable and run the sibling's validators (a file that must exist). With the callback, a
  // subcommand reads its environment when its own parsing completes, and only if it was given.
  if (app.get_parent() != nullptr) app.parse_complete_callback([] {});
  for (CLI::App* sub : Subcommands(app)) AddEnvironmentTwins(*sub);
}

void AddCheckArgs(CLI::App& app, bool& check_args) {
  const auto subs = Subcommands(app);
  if (subs.empty()) {
    app.add_flag(kCheckArgs, check_args,
                 "Parse the flags and the environment, check their values and exit (0: "
                 "accepted; 2: the error is printed) without starting anything");
    return;
  }
  for (CLI::App* sub : subs) AddCheckArgs(*sub, check_args);
}

}  // namespace herd::cli
