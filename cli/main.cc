// herd: the executable users and manifests run (cli/executables.h). The subcommands that need
// libtorch are handed to herd-torch before anything is parsed; every other one runs here,
// without libtorch loaded.

#include "cli/app.h"
#include "cli/executables.h"
#include "cli/torch_commands.h"

int main(int argc, char** argv) {
  if (herd::cli::IsTorchCommand(argc, argv)) return herd::cli::ExecTorchExecutable(argv);
  return herd::cli::RunCommandLine(argc, argv);
}
