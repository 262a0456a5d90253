#pragma once
// Child processes: start them, follow their output, learn how they ended, stop them. One
// manager for every place herd runs other programs: `herd local` (scheduler, shards and
// workers, each writing a log file), the benchmark drivers (rank processes whose output they
// read line by line) and the cluster emulator (`ip` and `tc`, run to completion).
//
// - Each child leads a process group of its own: a signal to it reaches whatever it started
//   (mpirun's ranks), and a Ctrl-C at the terminal reaches only this process, which decides
//   what to stop.
// - Each child gets a parent-death signal (PR_SET_PDEATHSIG), so none outlives this process,
//   even one killed by SIGKILL. The signal fires when the *thread* that started the child
//   ends: start children from a thread that outlives them.
// - stdin is /dev/null. stdout and stderr go to the spec's log file, both into it; without
//   one, each into an in-memory file (memfd) that NewLines() follows and Output() reads. A
//   child never blocks on a reader, and its output is still there after it ended.
// - A program that cannot be executed is a child that exits with 127, its stderr saying why
//   ("cannot execute X: No such file or directory"), as a shell would have it.
//
// Threading: thread-compatible; one thread drives one manager. Errors: absl::Status for what
// prevents starting a child (files, fork); what a child does is its exit status.

#include <sys/types.h>

#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/deadline.h"

namespace herd {

struct ChildSpec {
  std::string name{};               // for messages and lookups: "scheduler", "herd rank 2"
  std::vector<std::string> argv{};  // argv[0]: the program, a path or a name looked up in PATH
  std::vector<std::string> env{};   // "KEY=VALUE", added to (or replacing in) our environment
  std::string exe{};                // executed instead of argv[0] when set ("/proc/self/exe")
  std::string log_path{};           // stdout and stderr to this file (truncated); "": captured
  int death_signal = SIGKILL;       // what the child gets when this process (thread) dies
};

class ChildProcesses {
 public:
  enum class Stream { kStdout, kStderr };
  struct Exit {
    size_t index;
    std::string name;
    int status;  // as waitpid gives it
  };

  ChildProcesses() = default;
  ~ChildProcesses();  // Stop({}, 3000): nothing is left running
  ChildProcesses(const ChildProcesses&) = delete;
  ChildProcesses& operator=(const ChildProcesses&) = delete;

  // Starts a child; returns its index (0, 1, ... in start order).
  absl::StatusOr<size_t> Start(ChildSpec spec);
  // `herd <args...>` run by executable `exe` (one of herd's own), as `name`, output to
  // `log_path`.
  absl::Status StartHerd(const std::string& exe, const std::string& name,
                         const std::vector<std::string>& args, const std::string& log_path);

  // A child that ended and was not reported yet (without waiting), if any. A child that ended
  // also takes down what it left in its process group.
  std::optional<Exit> PollExit();
  bool Running(const std::string& name) const;
  bool running(size_t index) const { return !children_[index].status.has_value(); }
  std::optional<int> status(size_t index) const { return children_[index].status; }
  const std::string& name(size_t index) const { return children_[index].name; }
  pid_t pid(size_t index) const { return children_[index].pid; }
  size_t size() const { return children_.size(); }
  std::vector<std::string> Names() const;  // of every child started, in start order

  // SIGTERM to the process groups of the named children (all when empty), SIGKILL to those
  // still there after `grace_ms`; reaps them (PollExit reports them afterwards).
  void Stop(const std::vector<std::string>& names = {}, int grace_ms = 5000);
  // Stop() by index.
  void StopIndices(const std::vector<size_t>& indices, int grace_ms);
  // SIGKILL to child `index`'s process group at once (a crash, not a stop: the child gets no
  // chance to clean up), and reaps it.
  void Kill(size_t index);

  // The complete lines a captured child wrote on `stream` since the last call; once the child
  // ended, also its last unterminated line. Empty for a child with a log file.
  std::vector<std::string> NewLines(size_t index, Stream stream);
  // Everything a captured child wrote on `stream` so far.
  std::string Output(size_t index, Stream stream) const;
  // The last `lines` lines of the child's log file (captured: of its stderr).
  std::string LogTail(const std::string& name, int lines = 15) const;
  std::vector<std::string> TailLines(size_t index, size_t lines) const;

  // "exited with status 1" / "was killed by signal 9 (Killed)".
  static std::string DescribeStatus(int status);

 private:
  struct Child {
    std::string name;
    pid_t pid = -1;
    std::string log_path;
    int fds[2] = {-1, -1};  // captured stdout, stderr (memfd); -1 with a log file
    off_t read_offset[2] = {0, 0};
    std::string partial[2];
    std::optional<int> status;
    bool reported = false;
  };
  void Reaped(Child& c, int status);

  std::vector<Child> children_;
};

// Runs `argv` (argv[0] looked up in PATH) to its end and returns its stdout when it exits 0.
// Otherwise: FAILED_PRECONDITION when it cannot be executed; DEADLINE_EXCEEDED when it still
// runs at `deadline` (it is stopped); INTERNAL with the command line, how it ended and its
// stderr when it fails.
absl::StatusOr<std::string> RunCommand(
    const std::vector<std::string>& argv,
    Deadline deadline = Deadline::After(std::chrono::minutes(1)));

}  // namespace herd
