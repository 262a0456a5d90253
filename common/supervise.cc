#include "common/supervise.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace herd {
namespace {

std::atomic<int> g_interrupt_signal{0};

void OnInterrupt(int sig) {
  int expected = 0;
  g_interrupt_signal.compare_exchange_strong(expected, sig);
}

std::string SignalName(int sig) {
  const char* name = sigabbrev_np(sig);
  return name ? absl::StrFormat("SIG%s", name) : absl::StrFormat("signal %d", sig);
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
    struct sigaction sa {};
    sa.sa_handler = OnInterrupt;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
  });
}

std::string ChildOutcome::HowItEnded() const {
  if (killed_by_us) return "killed by the driver";
  if (term_signal != 0) return absl::StrFormat("killed by %s", SignalName(term_signal));
  return absl::StrFormat("exited with code %d", exit_code);
}

bool GroupOutcome::ok() const {
  return interrupt_signal == 0 && !silent_too_long && first_failure < 0 &&
         std::all_of(children.begin(), children.end(), [](const auto& c) { return c.ok(); });
}

std::string GroupOutcome::Describe() const {
  std::vector<std::string> parts;
  // The last n lines of a child's stderr without the frames of a backtrace (UCX and glibc
  // print them after the line that says what went wrong, which is the one worth showing).
  auto last_lines = [](const ChildOutcome& c, size_t n) {
    std::vector<std::string> lines;
    for (auto it = c.stderr_tail.rbegin(); it != c.stderr_tail.rend() && lines.size() < n; ++it) {
      if (!IsBacktraceLine(*it)) lines.insert(lines.begin(), *it);
    }
    return lines.empty() ? std::string("(nothing on stderr)") : absl::StrJoin(lines, " | ");
  };
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
        absl::StrFormat("%s failed first: %s: %s", c.name, c.HowItEnded(), last_lines(c, 3)));
  }
  // The others that failed on their own usually name the peer they lost: worth showing.
  std::vector<std::string> killed;
  for (size_t i = 0; i < children.size(); ++i) {
    const ChildOutcome& c = children[i];
    if (c.killed_by_us) killed.push_back(c.name);
    if (static_cast<int>(i) == first_failure || c.ok() || c.killed_by_us) continue;
    parts.push_back(absl::StrFormat("%s then %s: %s", c.name, c.HowItEnded(), last_lines(c, 1)));
  }
  if (!killed.empty()) parts.push_back("killed: " + absl::StrJoin(killed, ", "));
  return parts.empty() ? "all processes succeeded" : absl::StrJoin(parts, "; ");
}

absl::StatusOr<GroupOutcome> Supervise(std::vector<ChildSpec> children,
                                       const SuperviseOptions& options) {
  GroupOutcome result;
  result.silence_timeout = options.silence_timeout;
  result.children.resize(children.size());
  ChildProcesses procs;
  for (ChildSpec& spec : children) {
    result.children[procs.size()].name = spec.name;
    absl::StatusOr<size_t> started = procs.Start(std::move(spec));
    if (!started.ok()) return started.status();  // ~ChildProcesses stops what did start
  }
  // Every line that is there; true when there was any.
  auto deliver = [&] {
    bool any = false;
    for (size_t i = 0; i < procs.size(); ++i) {
      for (const std::string& line : procs.NewLines(i, ChildProcesses::Stream::kStdout)) {
        any = true;
        if (options.on_stdout_line) options.on_stdout_line(i, line);
      }
      for (const std::string& line : procs.NewLines(i, ChildProcesses::Stream::kStderr)) {
        any = true;
        if (options.on_stderr_line) {
          options.on_stderr_line(i, line);
        } else {
          std::fprintf(stderr, "[%s] %s\n", procs.name(i).c_str(), line.c_str());
        }
      }
    }
    return any;
  };
  auto stop_the_rest = [&] {
    std::vector<size_t> running;
    for (size_t i = 0; i < procs.size(); ++i) {
      if (procs.running(i)) {
        running.push_back(i);
        result.children[i].killed_by_us = true;
      }
    }
    procs.StopIndices(running, 2000);
  };

  auto last_activity = Clock::now(), failure_at = Clock::now();
  while (true) {
    if (deliver()) last_activity = Clock::now();
    while (auto exit = procs.PollExit()) {
      const int st = exit->status;
      if (!result.children[exit->index].killed_by_us && result.first_failure < 0 &&
          !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        result.first_failure = static_cast<int>(exit->index);
        failure_at = Clock::now();
      }
    }
    bool any_running = false;
    for (size_t i = 0; i < procs.size(); ++i) any_running |= procs.running(i);
    if (!any_running) break;
    const auto now = Clock::now();
    if (const int sig = g_interrupt_signal.load(); sig != 0) {
      result.interrupt_signal = sig;
      stop_the_rest();
    } else if (result.first_failure >= 0 && now - failure_at > options.failure_grace) {
      stop_the_rest();
    } else if (now - last_activity > options.silence_timeout) {
      result.silent_too_long = true;
      stop_the_rest();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  deliver();
  for (size_t i = 0; i < procs.size(); ++i) {
    ChildOutcome& c = result.children[i];
    const int st = *procs.status(i);
    if (WIFEXITED(st)) c.exit_code = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) c.term_signal = WTERMSIG(st);
    c.stderr_tail = procs.TailLines(i, options.stderr_tail_lines);
  }
  return result;
}

}  // namespace herd
