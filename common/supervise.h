#pragma once
// Runs a set of cooperating processes that must all succeed (the ranks of a benchmark: herd's
// rank processes, mpirun, Gloo's ranks, the ranks of an emulated cluster), on
// child_processes.h, so that nothing hangs and nothing is left behind:
//  - a child that fails (non-zero exit, signal) gives the others `failure_grace` to end on
//    their own (their own error messages, naming the peer they lost, come through), then the
//    rest are stopped;
//  - a set silent (no output line from any child) for `silence_timeout` is stopped: a hang;
//  - SIGINT, SIGTERM or SIGHUP of the driver (InstallInterruptHandlers) stop the set;
//  - the children die with the driver (parent-death signal) and take their own children
//    (mpirun's ranks) with them (process groups).
// Stopping is SIGTERM to each child's process group, SIGKILL after 2 s.

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/child_processes.h"

namespace herd {

struct ChildOutcome {
  std::string name;
  int exit_code = -1;   // when it exited
  int term_signal = 0;  // when a signal ended it
  bool killed_by_us = false;
  std::vector<std::string> stderr_tail;  // its last lines on stderr

  bool ok() const { return exit_code == 0; }
  // "exited with code 1", "killed by SIGKILL", "killed by the driver".
  std::string HowItEnded() const;
};

struct GroupOutcome {
  std::vector<ChildOutcome> children;
  int interrupt_signal = 0;  // the driver got SIGINT/SIGTERM/SIGHUP
  bool silent_too_long = false;
  std::chrono::milliseconds silence_timeout{0};
  int first_failure = -1;  // index of the child that failed first, -1 if none did

  bool ok() const;
  // Which child failed first and why, with the last lines it wrote on stderr (backtrace frames
  // left out); or which children were still running when a hang or an interrupt ended the run.
  std::string Describe() const;
};

struct SuperviseOptions {
  std::chrono::milliseconds silence_timeout{std::chrono::seconds(60)};
  std::chrono::milliseconds failure_grace{std::chrono::seconds(2)};
  // Each complete line a child writes (without the newline), on the calling thread.
  std::function<void(size_t child, std::string_view line)> on_stdout_line;
  // Default: forwarded to the driver's stderr as "[name] line".
  std::function<void(size_t child, std::string_view line)> on_stderr_line;
  size_t stderr_tail_lines = 20;
};

// Starts the children (their log_path must be empty: the output is read) and supervises them
// until every one has ended. Errors only for what prevents it (fork, files); a child that
// cannot be executed is an outcome (exit code 127, its stderr tail says why).
absl::StatusOr<GroupOutcome> Supervise(std::vector<ChildSpec> children,
                                       const SuperviseOptions& options);

// Routes SIGINT, SIGTERM and SIGHUP to Supervise (idempotent) and ignores SIGPIPE (a reader of
// our stdout that goes away must not kill us before we clean up). Call once, early.
void InstallInterruptHandlers();

}  // namespace herd
