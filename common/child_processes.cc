#include "common/child_processes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace herd {
namespace {

// argv[0] as given when it holds a '/', else the first executable of that name in PATH.
std::string Resolve(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", program);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return program;  // execve fails with ENOENT and the child's stderr says so
}

std::vector<std::string> MergedEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    const std::string key = entry.substr(0, entry.find('='));
    const bool overridden = std::any_of(extra.begin(), extra.end(), [&](const std::string& x) {
      return x.substr(0, x.find('=')) == key;
    });
    if (!overridden) env.push_back(std::move(entry));
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

absl::Status Errno(std::string_view what, std::string_view name) {
  return absl::InternalError(absl::StrFormat("%s for %s: %s", what, name, strerror(errno)));
}

// Everything in `fd` from `offset` on.
std::string ReadFrom(int fd, off_t offset) {
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = pread(fd, buf, sizeof buf, offset)) > 0 || (n < 0 && errno == EINTR)) {
    if (n < 0) continue;
    out.append(buf, static_cast<size_t>(n));
    offset += n;
  }
  return out;
}

}  // namespace

ChildProcesses::~ChildProcesses() {
  Stop({}, 3000);
  for (Child& c : children_) {
    for (int fd : c.fds) {
      if (fd >= 0) close(fd);
    }
  }
}

absl::StatusOr<size_t> ChildProcesses::Start(ChildSpec spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError(spec.name + ": empty command line");
  const std::string path = spec.exe.empty() ? Resolve(spec.argv[0]) : spec.exe;
  std::vector<std::string> env = MergedEnvironment(spec.env);
  std::vector<char*> argv = CStrings(spec.argv), envp = CStrings(env);

  Child c;
  c.name = spec.name;
  c.log_path = spec.log_path;
  int out_fd, err_fd;
  if (!spec.log_path.empty()) {
    out_fd = err_fd = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd < 0) return Errno(absl::StrCat("cannot create ", spec.log_path), spec.name);
  } else {
    c.fds[0] = out_fd = memfd_create("stdout", MFD_CLOEXEC);
    c.fds[1] = err_fd = memfd_create("stderr", MFD_CLOEXEC);
  }
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int exec_err[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {out_fd, err_fd, devnull, exec_err[0], exec_err[1]}) {
      if (fd >= 0 && (fd != err_fd || err_fd != out_fd)) close(fd);
    }
  };
  if (out_fd < 0 || err_fd < 0 || devnull < 0 || pipe2(exec_err, O_CLOEXEC) != 0) {
    absl::Status st = Errno("cannot prepare the output", spec.name);
    close_all();
    return st;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    absl::Status st = Errno("cannot fork", spec.name);
    close_all();
    return st;
  }
  if (pid == 0) {
    // Only async-signal-safe calls until exec: everything was prepared above.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, spec.death_signal);
    if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) signal(sig, SIG_DFL);
    dup2(devnull, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    execve(path.c_str(), argv.data(), envp.data());
    const int e = errno;
    [[maybe_unused]] ssize_t n = write(exec_err[1], &e, sizeof e);
    _exit(127);
  }
  setpgid(pid, pid);  // both sides set the group, so it is right whichever runs first
  close(exec_err[1]);
  exec_err[1] = -1;
  // Until the exec succeeded (EOF: the pipe closed on exec) or failed (its errno).
  int e = 0;
  ssize_t n;
  do {
    n = read(exec_err[0], &e, sizeof e);
  } while (n < 0 && errno == EINTR);
  if (n == sizeof e) {
    const std::string why = absl::StrFormat("cannot execute %s: %s\n", path, strerror(e));
    [[maybe_unused]] ssize_t w = write(err_fd, why.data(), why.size());
  }
  close(exec_err[0]);
  close(devnull);
  if (c.fds[0] < 0) close(out_fd);  // the log file: the child has its own copy
  c.pid = pid;
  children_.push_back(std::move(c));
  return children_.size() - 1;
}

absl::Status ChildProcesses::StartHerd(const std::string& exe, const std::string& name,
                                       const std::vector<std::string>& args,
                                       const std::string& log_path) {
  ChildSpec spec{
      .name = name, .argv = {"herd"}, .exe = exe, .log_path = log_path, .death_signal = SIGTERM};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  return Start(std::move(spec)).status();
}

void ChildProcesses::Reaped(Child& c, int status) {
  c.status = status;
  kill(-c.pid, SIGKILL);  // what it started and left behind goes with it
}

std::optional<ChildProcesses::Exit> ChildProcesses::PollExit() {
  for (size_t i = 0; i < children_.size(); ++i) {
    Child& c = children_[i];
    int status = 0;
    if (!c.status && waitpid(c.pid, &status, WNOHANG) == c.pid) Reaped(c, status);
    if (c.status && !c.reported) {
      c.reported = true;
      return Exit{i, c.name, *c.status};
    }
  }
  return std::nullopt;
}

std::vector<std::string> ChildProcesses::Names() const {
  std::vector<std::string> names;
  for (const Child& c : children_) names.push_back(c.name);
  return names;
}

bool ChildProcesses::Running(const std::string& name) const {
  for (const Child& c : children_) {
    if (c.name == name) return !c.status;
  }
  return false;
}

void ChildProcesses::Stop(const std::vector<std::string>& names, int grace_ms) {
  std::vector<size_t> indices;
  for (size_t i = 0; i < children_.size(); ++i) {
    if (names.empty() || std::find(names.begin(), names.end(), children_[i].name) != names.end()) {
      indices.push_back(i);
    }
  }
  StopIndices(indices, grace_ms);
}

void ChildProcesses::StopIndices(const std::vector<size_t>& indices, int grace_ms) {
  for (size_t i : indices) {
    if (!children_[i].status) kill(-children_[i].pid, SIGTERM);
  }
  const Deadline grace = Deadline::After(std::chrono::milliseconds(grace_ms));
  for (bool left = true; left;) {
    left = false;
    for (size_t i : indices) {
      Child& c = children_[i];
      int status = 0;
      if (!c.status && waitpid(c.pid, &status, WNOHANG) == c.pid) Reaped(c, status);
      left |= !c.status;
    }
    if (left && grace.expired()) break;
    if (left) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (size_t i : indices) {
    Child& c = children_[i];
    if (c.status) continue;
    kill(-c.pid, SIGKILL);
    int status = 0;
    while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    Reaped(c, status);
  }
}

void ChildProcesses::Kill(size_t index) {
  Child& c = children_[index];
  if (c.status) return;
  kill(-c.pid, SIGKILL);
  int status = 0;
  while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  Reaped(c, status);
}

std::vector<std::string> ChildProcesses::NewLines(size_t index, Stream stream) {
  Child& c = children_[index];
  const int s = stream == Stream::kStdout ? 0 : 1;
  if (c.fds[s] < 0) return {};
  std::string fresh = ReadFrom(c.fds[s], c.read_offset[s]);
  c.read_offset[s] += static_cast<off_t>(fresh.size());
  std::string& text = c.partial[s];
  text += fresh;
  std::vector<std::string> lines;
  size_t start = 0, nl;
  while ((nl = text.find('\n', start)) != std::string::npos) {
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  text.erase(0, start);
  if (c.status && !text.empty()) lines.push_back(std::exchange(text, ""));
  return lines;
}

std::string ChildProcesses::Output(size_t index, Stream stream) const {
  const int fd = children_[index].fds[stream == Stream::kStdout ? 0 : 1];
  return fd < 0 ? std::string() : ReadFrom(fd, 0);
}

std::vector<std::string> ChildProcesses::TailLines(size_t index, size_t lines) const {
  const Child& c = children_[index];
  std::string text;
  constexpr off_t kWindow = 64 * 1024;  // enough for any tail a person reads
  const int fd = c.fds[1] >= 0 ? c.fds[1] : open(c.log_path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0) {
    text = ReadFrom(fd, std::max<off_t>(0, st.st_size - kWindow));
  }
  if (fd >= 0 && fd != c.fds[1]) close(fd);
  std::vector<std::string> all = absl::StrSplit(absl::StripTrailingAsciiWhitespace(text), '\n');
  if (all.size() == 1 && all[0].empty()) all.clear();
  if (all.size() > lines) all.erase(all.begin(), all.end() - static_cast<ptrdiff_t>(lines));
  return all;
}

std::string ChildProcesses::LogTail(const std::string& name, int lines) const {
  for (size_t i = 0; i < children_.size(); ++i) {
    if (children_[i].name == name) return absl::StrJoin(TailLines(i, lines), "\n");
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

absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv, Deadline deadline) {
  const std::string line = absl::StrJoin(argv, " ");
  ChildProcesses children;
  auto index = children.Start({.name = line, .argv = argv});
  if (!index.ok()) return index.status();
  // Most commands the emulator runs take milliseconds: poll finely at first.
  for (auto pause = std::chrono::microseconds(50); children.running(*index);
       pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10))) {
    if (children.PollExit()) break;
    if (deadline.expired()) {
      children.StopIndices({*index}, 1000);
      return absl::DeadlineExceededError(absl::StrFormat("`%s` did not finish in time", line));
    }
    std::this_thread::sleep_for(pause);
  }
  const int status = *children.status(*index);
  const std::string err(
      absl::StripAsciiWhitespace(children.Output(*index, ChildProcesses::Stream::kStderr)));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    return children.Output(*index, ChildProcesses::Stream::kStdout);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && absl::StartsWith(err, "cannot execute")) {
    return absl::FailedPreconditionError(absl::StrFormat("cannot run `%s`: %s", line, err));
  }
  const std::string how = WIFEXITED(status) ? absl::StrFormat("exit code %d", WEXITSTATUS(status))
                                            : absl::StrFormat("signal %d", WTERMSIG(status));
  return absl::InternalError(absl::StrFormat("`%s` failed (%s): %s", line, how, err));
}

}  // namespace herd
