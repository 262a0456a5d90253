#include "cli/executables.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "cli/command.h"

namespace herd::cli {

std::string SiblingExecutable(const std::string& name) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return name;  // no /proc: looked up in PATH
  return (self.parent_path() / name).string();
}

int ExecTorchExecutable(char** argv) {
  const std::string path = SiblingExecutable(kTorchExecutable);
  execv(path.c_str(), argv);
  const int e = errno;
  std::fprintf(stderr,
               "herd %s: this subcommand runs in %s, the part of herd that loads libtorch, and "
               "it cannot be started: %s (install it beside herd)\n",
               argv[1] != nullptr ? argv[1] : "", path.c_str(), std::strerror(e));
  return kExitFailure;
}

}  // namespace herd::cli
