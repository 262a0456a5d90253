// herd-torch: the subcommands of herd that load libtorch (cli/executables.h), run as `herd
// worker`, `herd local` and `herd checkpoint export`; `herd` execs it with the user's
// arguments.

#include "cli/app.h"

int main(int argc, char** argv) { return herd::cli::RunCommandLine(argc, argv); }
