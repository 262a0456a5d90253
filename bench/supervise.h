#pragma once
// How a benchmark driver runs a set of cooperating processes (herd's rank processes, mpirun,
// Gloo's ranks, the ranks of an emulated cluster), on common/child_processes.h, so that
// nothing hangs and nothing is left behind:
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
#include "common/json.h"

namespace herd::bench {

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

// `argv` + {"--rank", r, "--ranks", P, "--store", store} for r in [0, P), named "<label> rank r".
std::vector<ChildSpec> RankChildren(const std::string& label, const std::vector<std::string>& argv,
                                    int ranks, const std::string& store);

// This program's path (/proc/self/exe), for re-executing it as rank processes.
std::string SelfExe();

// A line {"progress": "..."} on a rank's stdout is a heartbeat, not a result.
inline constexpr std::string_view kProgressKey = "progress";

// Runs the RankChildren of `argv` in a fresh store directory (each passed through `wrap` when
// set: into a network namespace, say) and returns the JSON objects rank 0 printed. Rank 0's
// heartbeats go to stderr as "<label>: <what>", everything else the ranks print as
// "[<label> rank r] <line>". A Ctrl-C stops the ranks (it installs InstallInterruptHandlers).
// Errors: how the ranks failed (GroupOutcome::Describe), or no JSON line from rank 0.
absl::StatusOr<std::vector<json::Object>> RunRanks(
    const std::string& label, const std::vector<std::string>& argv, int ranks,
    std::chrono::milliseconds silence_timeout,
    const std::function<ChildSpec(int rank, ChildSpec child)>& wrap = {});

}  // namespace herd::bench
