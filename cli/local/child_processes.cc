#include "cli/local/child_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace herd::cli {

ChildProcesses::~ChildProcesses() { Stop({}, 3000); }

absl::Status ChildProcesses::Start(const std::string& name, const std::vector<std::string>& args,
                                   const std::string& log_path) {
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::InternalError(
        absl::StrFormat("cannot create %s: %s", log_path, std::strerror(errno)));
  }
  std::vector<std::string> argv_s = {"herd"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    return absl::InternalError(absl::StrFormat("cannot fork %s: %s", name, std::strerror(errno)));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    // A fresh signal mask: the parent may block SIGINT/SIGTERM to wait for them.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // Ctrl-C goes to herd local, which stops the children in order.
    ::setpgid(0, 0);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  children_.push_back({name, pid, log_path, false});
  return absl::OkStatus();
}

std::optional<ChildProcesses::Exit> ChildProcesses::PollExit() {
  for (Child& c : children_) {
    if (c.reaped) continue;
    int status = 0;
    if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
      c.reaped = true;
      return Exit{c.name, status};
    }
  }
  return std::nullopt;
}

std::vector<std::string> ChildProcesses::Names() const {
  std::vector<std::string> out;
  for (const auto& c : children_) out.push_back(c.name);
  return out;
}

bool ChildProcesses::Running(const std::string& name) const {
  for (const Child& c : children_) {
    if (c.name == name) return !c.reaped;
  }
  return false;
}

void ChildProcesses::Stop(const std::vector<std::string>& names, int grace_ms) {
  auto selected = [&](const Child& c) {
    if (c.reaped) return false;
    if (names.empty()) return true;
    for (const auto& n : names) {
      if (n == c.name) return true;
    }
    return false;
  };
  for (Child& c : children_) {
    if (selected(c)) ::kill(c.pid, SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  for (;;) {
    bool left = false;
    for (Child& c : children_) {
      if (!selected(c)) continue;
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
        c.reaped = true;
      } else {
        left = true;
      }
    }
    if (!left) return;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (Child& c : children_) {
    if (!selected(c)) continue;
    ::kill(c.pid, SIGKILL);
    int status = 0;
    ::waitpid(c.pid, &status, 0);
    c.reaped = true;
  }
}

std::string ChildProcesses::LogTail(const std::string& name, int lines) const {
  for (const Child& c : children_) {
    if (c.name != name) continue;
    std::ifstream in(c.log);
    std::deque<std::string> tail;
    for (std::string line; std::getline(in, line);) {
      tail.push_back(line);
      if (static_cast<int>(tail.size()) > lines) tail.pop_front();
    }
    return absl::StrJoin(tail, "\n");
  }
  return "";
}

std::string ChildProcesses::DescribeStatus(int status) {
  if (WIFEXITED(status)) return absl::StrFormat("exited with status %d", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrFormat("was killed by signal %d (%s)", WTERMSIG(status),
                           strsignal(WTERMSIG(status)));
  }
  return absl::StrFormat("ended with wait status %d", status);
}

}  // namespace herd::cli
