#pragma once
// Runs the real `herd scheduler` binary (HERD_BINARY, set by CMake) as a child process on
// 127.0.0.1, and `herd job ...` commands, for the integration tests.

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace herd::scheduler::testing {

// One `herd <subcommand>` child process that reports its port through --port-file: its output
// goes to a log file, Start waits until the port is written, Stop (and the destructor) kill it.
class HerdProcess {
 public:
  // Runs `herd subcommand args... --port-file port_file`, waiting up to `patience` for it to
  // serve. Fails the test (with the exit status and the log) if it exits or times out first.
  void Start(const std::string& subcommand, std::vector<std::string> args,
             const std::string& port_file, const std::string& log_path,
             std::chrono::seconds patience);
  // Sends `sig` and reaps the process.
  void Stop(int sig = SIGTERM);
  // Sends `sig` and leaves the process be (SIGSTOP, SIGCONT).
  void Signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  ~HerdProcess() { Stop(SIGKILL); }

  int port() const { return port_; }
  std::string log() const;  // what the process wrote on stdout and stderr

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_path_;
};

class SchedulerProcess {
 public:
  // Starts `herd scheduler --state state_dir --listen 127.0.0.1:port` (port 0: a free one)
  // plus `extra` flags, and waits (up to 10 s) until it serves. Fails the test otherwise.
  void Start(const std::string& state_dir, int port, std::vector<std::string> extra = {});
  // Sends `sig` and reaps the process.
  void Stop(int sig = SIGTERM) { process_.Stop(sig); }
  // Sends `sig` and leaves the process be: SIGSTOP pauses the scheduler, SIGCONT resumes it.
  void Signal(int sig) const { process_.Signal(sig); }

  int port() const { return process_.port(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port()); }
  std::string log() const { return process_.log(); }

 private:
  HerdProcess process_;
};

struct CliResult {
  int rc = -1;
  std::string out;  // stdout and stderr together
};
// Runs `herd <args>` (arguments shell-quoted) and captures its output.
CliResult RunHerd(const std::vector<std::string>& args);

// Starts `herd <args>` in the background, stdout and stderr to `log`; returns its pid.
pid_t SpawnHerd(const std::vector<std::string>& args, const std::string& log);
// The factor on HerdProcess::Start's patience and WaitExit's seconds: HERD_TEST_TIME_SCALE
// (1 to 20, default 1). Instrumented builds start their processes several times slower
// (scripts/sanitize.sh sets 4).
int TimeScale();

// Waits up to `seconds` for `pid` to exit and returns its wait status; kills it and returns -1
// when it does not.
int WaitExit(pid_t pid, int seconds);
// The whole file ("" when it cannot be read).
std::string ReadFile(const std::string& path);

}  // namespace herd::scheduler::testing
