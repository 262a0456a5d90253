#include "bench/process_group.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/deadline.h"

extern char** environ;

namespace herd::bench {
namespace {

// --- Interrupts: the handler only records the signal and wakes poll() through a pipe.

int g_interrupt_pipe[2] = {-1, -1};
std::atomic<int> g_interrupt_signal{0};

void OnInterrupt(int sig) {
  int expected = 0;
  g_interrupt_signal.compare_exchange_strong(expected, sig);
  const char byte = static_cast<char>(sig);
  [[maybe_unused]] ssize_t n = write(g_interrupt_pipe[1], &byte, 1);
}

std::string SignalName(int sig) {
  const char* name = sigabbrev_np(sig);
  return name ? absl::StrFormat("SIG%s", name) : absl::StrFormat("signal %d", sig);
}

// --- Launching.

// argv[0] as given when it holds a '/', else the first executable of that name in PATH.
std::string Resolve(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    if (colon == std::string::npos) colon = dirs.size();
    std::string dir = dirs.substr(start, colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = colon + 1;
  }
  return program;  // execve fails with ENOENT and the outcome says so
}

std::vector<std::string> MergedEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    const std::string key = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const std::string& x : extra) overridden |= x.substr(0, x.find('=')) == key;
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

struct Running {
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  std::string out_partial, err_partial;
  bool reaped = false;
  std::deque<std::string> tail;
  ChildOutcome outcome;
};

// Forks one child into process group `pgid` (0: a new group led by the child). Only
// async-signal-safe calls between fork and exec: everything is prepared beforehand.
absl::Status Launch(const ChildSpec& spec, pid_t& pgid, int devnull, Running& run) {
  std::vector<std::string> args = spec.argv;
  if (args.empty()) return absl::InvalidArgumentError(spec.label + ": empty command line");
  const std::string path = Resolve(args[0]);
  std::vector<std::string> env = MergedEnvironment(spec.env);
  std::vector<char*> argv = CStrings(args), envp = CStrings(env);

  int out[2], err[2], exec_err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(exec_err, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrFormat("pipe for %s: %s", spec.label, strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("fork for %s: %s", spec.label, strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, pgid);
    prctl(PR_SET_PDEATHSIG, spec.death_signal);
    if (getppid() != parent) _exit(1);  // the driver died before prctl took effect
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) signal(sig, SIG_DFL);
    dup2(devnull, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execve(path.c_str(), argv.data(), envp.data());
    const int e = errno;
    [[maybe_unused]] ssize_t n = write(exec_err[1], &e, sizeof e);
    _exit(127);
  }
  // Both sides set the group, so it is right whichever runs first.
  setpgid(pid, pgid == 0 ? pid : pgid);
  if (pgid == 0) pgid = pid;
  close(out[1]);
  close(err[1]);
  close(exec_err[1]);
  run.pid = pid;
  run.out_fd = out[0];
  run.err_fd = err[0];
  run.outcome.label = spec.label;
  // Blocks until the exec succeeded (EOF: the pipe closed on exec) or failed (errno).
  int e = 0;
  ssize_t n;
  do {
    n = read(exec_err[0], &e, sizeof e);
  } while (n < 0 && errno == EINTR);
  close(exec_err[0]);
  if (n == sizeof e) {
    run.tail.push_back(absl::StrFormat("cannot execute %s: %s", path, strerror(e)));
  }
  return absl::OkStatus();
}

// "==== backtrace (tid: 1) ====", " 3  /lib/libucp.so.0(...) [0x...]", "=====".
bool IsBacktraceLine(std::string_view line) {
  size_t i = line.find_first_not_of(' ');
  if (i == std::string_view::npos) return true;
  if (line[i] == '=') return true;
  size_t digits = i;
  while (digits < line.size() && std::isdigit(static_cast<unsigned char>(line[digits]))) ++digits;
  return digits > i && digits < line.size() && line[digits] == ' ';
}

}  // namespace

void InstallInterruptHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (pipe2(g_interrupt_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
    struct sigaction sa {};
    sa.sa_handler = OnInterrupt;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
    // A reader of our stdout that goes away (| head) must not kill us before we clean up.
    signal(SIGPIPE, SIG_IGN);
  });
}

int InterruptSignal() { return g_interrupt_signal.load(); }

std::string ChildOutcome::HowItEnded() const {
  if (killed_by_us) return "killed by the driver";
  if (term_signal != 0) return absl::StrFormat("killed by %s", SignalName(term_signal));
  return absl::StrFormat("exited with code %d", exit_code);
}

bool GroupOutcome::ok() const {
  if (interrupt_signal != 0 || silent_too_long || first_failure >= 0) return false;
  for (const ChildOutcome& c : children) {
    if (!c.ok()) return false;
  }
  return true;
}

std::string GroupOutcome::Describe() const {
  std::vector<std::string> parts;
  // The last n lines of a child's stderr, leaving out the frames of a backtrace (UCX and glibc
  // print them after the line that says what went wrong, which is the one worth showing).
  auto last_lines = [](const ChildOutcome& c, size_t n) {
    std::vector<std::string> lines;
    for (auto it = c.stderr_tail.rbegin(); it != c.stderr_tail.rend() && lines.size() < n; ++it) {
      if (!IsBacktraceLine(*it)) lines.insert(lines.begin(), *it);
    }
    return lines.empty() ? std::string("(nothing on stderr)") : absl::StrJoin(lines, " | ");
  };
  std::vector<std::string> killed;
  for (const ChildOutcome& c : children) {
    if (c.killed_by_us) killed.push_back(c.label);
  }
  if (interrupt_signal != 0) {
    parts.push_back(absl::StrFormat("interrupted by %s", SignalName(interrupt_signal)));
  }
  if (silent_too_long) {
    parts.push_back(absl::StrFormat("no output from any process for %d s (hung?)",
                                    silence_timeout.count() / 1000));
  }
  if (first_failure >= 0) {
    const ChildOutcome& c = children[first_failure];
    parts.push_back(
        absl::StrFormat("%s failed first: %s: %s", c.label, c.HowItEnded(), last_lines(c, 3)));
  }
  // The others that failed on their own usually name the peer they lost: worth showing.
  for (size_t i = 0; i < children.size(); ++i) {
    const ChildOutcome& c = children[i];
    if (static_cast<int>(i) == first_failure || c.ok() || c.killed_by_us) continue;
    parts.push_back(absl::StrFormat("%s then %s: %s", c.label, c.HowItEnded(), last_lines(c, 1)));
  }
  if (!killed.empty()) {
    parts.push_back(absl::StrFormat("killed: %s", absl::StrJoin(killed, ", ")));
  }
  if (parts.empty()) return "all processes succeeded";
  return absl::StrJoin(parts, "; ");
}

absl::StatusOr<GroupOutcome> RunProcessGroup(const std::vector<ChildSpec>& children,
                                             const RunOptions& options) {
  GroupOutcome result;
  result.silence_timeout = options.silence_timeout;
  std::vector<Running> runs(children.size());
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) return absl::InternalError("cannot open /dev/null");
  pid_t pgid = 0;

  // Stops the whole group: SIGTERM now, SIGKILL once `kill_at` passes.
  bool terminating = false, sent_kill = false;
  Clock::time_point kill_at{};
  auto terminate = [&] {
    if (terminating) return;
    terminating = true;
    for (Running& r : runs) {
      if (r.pid > 0 && !r.reaped) r.outcome.killed_by_us = true;
    }
    if (pgid > 0) kill(-pgid, SIGTERM);
    kill_at = Clock::now() + std::chrono::seconds(2);
  };

  absl::Status launch_error;
  for (size_t i = 0; i < children.size() && launch_error.ok(); ++i) {
    launch_error = Launch(children[i], pgid, devnull, runs[i]);
  }
  close(devnull);
  if (!launch_error.ok()) terminate();  // reap what did start, then report the error

  auto deliver = [&](size_t i, bool is_err, std::string_view line) {
    Running& r = runs[i];
    if (is_err) {
      r.tail.emplace_back(line);
      if (r.tail.size() > options.stderr_tail_lines) r.tail.pop_front();
      if (options.on_stderr_line) {
        options.on_stderr_line(i, line);
      } else {
        std::fprintf(stderr, "[%s] %.*s\n", children[i].label.c_str(),
                     static_cast<int>(line.size()), line.data());
      }
    } else if (options.on_stdout_line) {
      options.on_stdout_line(i, line);
    }
  };
  // Reads what is there; returns false at EOF (the fd is then closed and set to -1).
  auto drain = [&](size_t i, bool is_err) {
    Running& r = runs[i];
    int& fd = is_err ? r.err_fd : r.out_fd;
    std::string& partial = is_err ? r.err_partial : r.out_partial;
    char buf[65536];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      if (!partial.empty()) deliver(i, is_err, partial);
      partial.clear();
      close(fd);
      fd = -1;
      return;
    }
    partial.append(buf, static_cast<size_t>(n));
    size_t start = 0, nl;
    while ((nl = partial.find('\n', start)) != std::string::npos) {
      deliver(i, is_err, std::string_view(partial).substr(start, nl - start));
      start = nl + 1;
    }
    partial.erase(0, start);
  };

  auto last_activity = Clock::now();
  Clock::time_point failure_at{}, all_reaped_at{};
  bool all_reaped = false;
  while (true) {
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, bool>> owners;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (runs[i].out_fd >= 0) {
        fds.push_back({runs[i].out_fd, POLLIN, 0});
        owners.emplace_back(i, false);
      }
      if (runs[i].err_fd >= 0) {
        fds.push_back({runs[i].err_fd, POLLIN, 0});
        owners.emplace_back(i, true);
      }
    }
    // Done once every child is reaped and its pipes are closed. A grandchild that inherited
    // a pipe and outlives the group kill cannot hold us for more than a second.
    if (all_reaped && (fds.empty() || Clock::now() - all_reaped_at > std::chrono::seconds(1))) {
      break;
    }
    if (g_interrupt_pipe[0] >= 0) fds.push_back({g_interrupt_pipe[0], POLLIN, 0});
    const int ready = poll(fds.data(), fds.size(), 100);
    if (ready > 0) {
      for (size_t k = 0; k < owners.size(); ++k) {
        if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) {
          drain(owners[k].first, owners[k].second);
          last_activity = Clock::now();
        }
      }
    }
    if (const int sig = g_interrupt_signal.load(); sig != 0 && result.interrupt_signal == 0) {
      result.interrupt_signal = sig;
      terminate();
    }

    for (size_t i = 0; i < runs.size(); ++i) {
      Running& r = runs[i];
      if (r.pid <= 0 || r.reaped) continue;
      int status = 0;
      const pid_t got = waitpid(r.pid, &status, WNOHANG);
      if (got != r.pid) continue;
      r.reaped = true;
      if (WIFEXITED(status)) r.outcome.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) r.outcome.term_signal = WTERMSIG(status);
      if (!r.outcome.ok() && !r.outcome.killed_by_us && result.first_failure < 0) {
        result.first_failure = static_cast<int>(i);
        failure_at = Clock::now();
      }
    }
    const auto now = Clock::now();
    const bool any_running = std::any_of(runs.begin(), runs.end(),
                                         [](const Running& r) { return r.pid > 0 && !r.reaped; });
    if (!any_running && !all_reaped) {
      all_reaped = true;
      all_reaped_at = now;
      // Anything the children started and left behind goes too.
      if (pgid > 0) kill(-pgid, SIGKILL);
    }
    if (any_running && !terminating) {
      if (result.first_failure >= 0 && now - failure_at > options.failure_grace) terminate();
      if (now - last_activity > options.silence_timeout) {
        result.silent_too_long = true;
        terminate();
      }
    }
    if (terminating && !sent_kill && any_running && now > kill_at) {
      sent_kill = true;
      kill(-pgid, SIGKILL);
    }
  }
  for (Running& r : runs) {
    if (r.out_fd >= 0) close(r.out_fd);
    if (r.err_fd >= 0) close(r.err_fd);
    r.outcome.stderr_tail.assign(r.tail.begin(), r.tail.end());
    result.children.push_back(std::move(r.outcome));
  }
  if (!launch_error.ok()) return launch_error;
  return result;
}

}  // namespace herd::bench
