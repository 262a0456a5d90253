#pragma once
// The real `herd scheduler` a control-plane benchmark measures: a child process on loopback
// with its own state directory, and what it costs (CPU seconds and resident memory, read from
// /proc) over a stretch of the run.

#include <sys/types.h>

#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "common/child_processes.h"
#include "common/temp_dir.h"

namespace herd::bench::control_plane {

struct SchedulerProcessOptions {
  std::string binary;  // the herd executable ("": this one)
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::string log_path;  // its output ("": into the state directory)
  std::vector<std::string> extra_args;
};

class SchedulerProcess {
 public:
  // Starts it and waits until it serves (its --port-file), at most a minute.
  static absl::StatusOr<std::unique_ptr<SchedulerProcess>> Start(SchedulerProcessOptions options);
  ~SchedulerProcess();

  const std::string& address() const { return address_; }
  // CPU seconds (user + system) it used so far, and its resident memory now (MiB).
  double CpuSeconds() const;
  double RssMib() const;
  bool running();

 private:
  SchedulerProcess(TempDir dir) : dir_(std::move(dir)) {}
  TempDir dir_;
  ChildProcesses children_;
  size_t index_ = 0;
  pid_t pid_ = -1;
  std::string address_;
};

}  // namespace herd::bench::control_plane
