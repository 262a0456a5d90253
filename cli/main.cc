// herd: one binary, one subcommand per file in cli/.

#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"herd: data-parallel training with collectives and parameter servers"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
