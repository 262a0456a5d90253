#pragma once
// What the tests of child_processes.h and supervise.h ask of processes: a shell child, whether
// a pid still runs, and a pid a child wrote to a file.

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/child_processes.h"

namespace herd::testing {

inline ChildSpec Shell(std::string name, std::string script) {
  return ChildSpec{.name = std::move(name), .argv = {"/bin/sh", "-c", std::move(script)}};
}

inline std::string TempPath(const std::string& name) {
  return absl::StrFormat("%s/%s-%d", ::testing::TempDir(), name, getpid());
}

// True while a process with this pid runs. A zombie is dead: an orphan killed with the group is
// reparented to PID 1, which in a container may never reap it.
inline bool Alive(pid_t pid) {
  std::ifstream in(absl::StrFormat("/proc/%d/stat", pid));
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

// A killed process may still be finishing its exit for a moment.
inline bool GoneSoon(pid_t pid) {
  const auto until = Clock::now() + std::chrono::seconds(2);
  while (Alive(pid)) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// The pid a child wrote to `path`, waiting up to 5 s for it; -1 if none came.
inline pid_t ReadPid(const std::string& path) {
  const auto until = Clock::now() + std::chrono::seconds(5);
  pid_t pid = -1;
  while (pid <= 0 && Clock::now() < until) {
    std::ifstream(path) >> pid;
    if (pid <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pid;
}

}  // namespace herd::testing
