#pragma once
// The child processes of `herd local`: each runs this same binary with a subcommand, its
// output going to a log file of its own; each dies with its parent (PR_SET_PDEATHSIG), so no
// process outlives a `herd local` that was killed.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::cli {

class ChildProcesses {
 public:
  struct Exit {
    std::string name;
    int status;  // as waitpid gives it
  };

  ChildProcesses() = default;
  ~ChildProcesses();  // stops whatever still runs (SIGTERM, then SIGKILL)
  ChildProcesses(const ChildProcesses&) = delete;
  ChildProcesses& operator=(const ChildProcesses&) = delete;

  // Starts `herd <args...>` as `name`, stdout and stderr to `log_path`.
  absl::Status Start(const std::string& name, const std::vector<std::string>& args,
                     const std::string& log_path);
  // A child that exited since the last call (without waiting), if any.
  std::optional<Exit> PollExit();
  bool Running(const std::string& name) const;
  // The names of every child started, in start order.
  std::vector<std::string> Names() const;
  // SIGTERM to the named children (all when empty), then SIGKILL to those still there after
  // `grace_ms`; reaps them.
  void Stop(const std::vector<std::string>& names = {}, int grace_ms = 5000);
  // The last `lines` lines of the child's log (what a person needs to see why it failed).
  std::string LogTail(const std::string& name, int lines = 15) const;

  // "exited with status 1" / "was killed by signal 9 (Killed)".
  static std::string DescribeStatus(int status);

 private:
  struct Child {
    std::string name;
    pid_t pid;
    std::string log;
    bool reaped;
  };
  std::vector<Child> children_;
};

}  // namespace herd::cli
