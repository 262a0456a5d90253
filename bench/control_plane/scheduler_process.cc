#include "bench/control_plane/scheduler_process.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace herd::bench::control_plane {

absl::StatusOr<std::unique_ptr<SchedulerProcess>> SchedulerProcess::Start(
    SchedulerProcessOptions options) {
  HERD_ASSIGN_OR_RETURN(TempDir dir, TempDir::Create("herd-cp-bench"));
  std::unique_ptr<SchedulerProcess> p(new SchedulerProcess(std::move(dir)));
  const std::string port_file = p->dir_.path() + "/port";
  ChildSpec spec;
  spec.name = "scheduler";
  spec.argv = {options.binary.empty() ? std::string("herd") : options.binary,
               "scheduler",
               "--listen",
               "127.0.0.1:0",
               "--state",
               p->dir_.path() + "/state",
               "--port-file",
               port_file,
               "--heartbeat-timeout",
               absl::StrFormat("%dms", options.heartbeat_timeout.count())};
  for (const auto& a : options.extra_args) spec.argv.push_back(a);
  if (options.binary.empty()) spec.exe = "/proc/self/exe";
  spec.log_path = options.log_path.empty() ? p->dir_.path() + "/scheduler.log" : options.log_path;
  HERD_ASSIGN_OR_RETURN(p->index_, p->children_.Start(spec));
  p->pid_ = p->children_.pid(p->index_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  for (;;) {
    std::ifstream in(port_file);
    int port = 0;
    if (in >> port && port > 0) {
      p->address_ = absl::StrFormat("127.0.0.1:%d", port);
      return p;
    }
    if (p->children_.PollExit().has_value() || std::chrono::steady_clock::now() > deadline) {
      return absl::UnavailableError(absl::StrFormat("the scheduler did not start: %s",
                                                    p->children_.LogTail("scheduler", 10)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

SchedulerProcess::~SchedulerProcess() { children_.Stop({}, 3000); }

bool SchedulerProcess::running() { return children_.running(index_); }

double SchedulerProcess::CpuSeconds() const {
  std::ifstream in(absl::StrFormat("/proc/%d/stat", pid_));
  std::string line;
  std::getline(in, line);
  // Fields after the command name (which may hold spaces) start after the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> f = absl::StrSplit(line.substr(close + 2), ' ');
  // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after ')'.
  if (f.size() < 13) return 0;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return (std::stod(f[11]) + std::stod(f[12])) / ticks;
}

double SchedulerProcess::RssMib() const {
  std::ifstream in(absl::StrFormat("/proc/%d/status", pid_));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      std::istringstream s(line.substr(6));
      double kb = 0;
      s >> kb;
      return kb / 1024.0;
    }
  }
  return 0;
}

}  // namespace herd::bench::control_plane
