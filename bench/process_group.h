#pragma once
// Child processes of the benchmark driver: herd's rank processes, mpirun, Gloo's ranks.
//
// All children of one RunProcessGroup call share a new process group, so one kill(-pgid)
// reaches them and whatever they started (mpirun's ranks). Nothing is left behind:
//  - a child that fails (non-zero exit, signal) gives the others `failure_grace` to end on
//    their own (so their own error messages, naming the peer they lost, come through), then
//    the whole group is killed;
//  - a group silent (no output line from any child) for `silence_timeout` is killed: a hang;
//  - SIGINT/SIGTERM/SIGHUP of the driver (InstallInterruptHandlers) kill the group;
//  - each child gets a parent-death signal, so even a driver killed by SIGKILL takes its
//    children with it;
//  - on return every child has been reaped and the group signalled once more with SIGKILL.
// Termination is SIGTERM, then SIGKILL after a short grace.

#include <chrono>
#include <csignal>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::bench {

struct ChildSpec {
  std::string label;              // "herd rank 2", "mpirun", "gloo rank 1": used in messages
  std::vector<std::string> argv;  // argv[0]: the executable (a path, or a name looked up in PATH)
  std::vector<std::string> env;   // "KEY=VALUE" added to (or replacing in) the driver's environment
  int death_signal = SIGKILL;     // what the child gets if the driver dies
};

struct ChildOutcome {
  std::string label;
  int exit_code = -1;   // when it exited
  int term_signal = 0;  // when a signal ended it
  bool killed_by_us = false;
  std::vector<std::string> stderr_tail;  // its last lines on stderr

  bool ok() const { return exit_code == 0; }
  // "exited with code 1", "killed by signal 9 (SIGKILL)", "killed by the driver".
  std::string HowItEnded() const;
};

struct GroupOutcome {
  std::vector<ChildOutcome> children;
  int interrupt_signal = 0;  // the driver got SIGINT/SIGTERM/SIGHUP
  bool silent_too_long = false;
  std::chrono::milliseconds silence_timeout{0};
  int first_failure = -1;  // index of the child that failed first, -1 if none did

  bool ok() const;
  // Which child failed first and why, with the last lines it wrote on stderr; or which
  // children were still running when the silence timeout or an interrupt ended the run.
  std::string Describe() const;
};

struct RunOptions {
  std::chrono::milliseconds silence_timeout{std::chrono::seconds(60)};
  std::chrono::milliseconds failure_grace{std::chrono::seconds(2)};
  // Called for each complete line a child writes (without the newline), on the calling thread.
  std::function<void(size_t child, std::string_view line)> on_stdout_line;
  // Default: forward to the driver's stderr prefixed with "[label] ".
  std::function<void(size_t child, std::string_view line)> on_stderr_line;
  size_t stderr_tail_lines = 20;
};

// Starts the children and supervises them until every one has ended. Errors only for what
// prevents supervision (pipes, fork); a child that cannot be executed is an outcome
// (exit code 127, its stderr tail says why).
absl::StatusOr<GroupOutcome> RunProcessGroup(const std::vector<ChildSpec>& children,
                                             const RunOptions& options);

// Routes SIGINT, SIGTERM and SIGHUP to RunProcessGroup (idempotent). Call once, early, in a
// process that supervises children; the signal that arrived is in GroupOutcome.
void InstallInterruptHandlers();
// The first interrupt signal received since InstallInterruptHandlers(), or 0.
int InterruptSignal();

}  // namespace herd::bench
