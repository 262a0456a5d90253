#include "tests/integration/process_ranks.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "transport/store/store.h"

namespace herd::testing {
namespace {

constexpr std::string_view kStatusKey = "status ";

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;  // the parent is gone; nothing to do
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

std::string OneLine(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '\n') c = ' ';
  }
  return out;
}

// The child: never returns. It leaves through _exit so that nothing the parent's runtime set
// up (gtest's state, static destructors, buffered output) runs twice; what it has to say went
// through the pipe already.
[[noreturn]] void RunChild(int rank, const ProcessRanksOptions& options, const std::string& dir,
                           int fd, const RankBody& body) {
  ParentChannel parent(fd);
  // The tests stay off the machine's network interfaces: loopback TCP and shared memory only.
  ::setenv("UCX_NET_DEVICES", "lo", /*overwrite=*/0);
  if (options.separate_hosts) {
    ::setenv("HERD_UCX_HOST_ID", absl::StrFormat("test-host-%d", rank).c_str(), 1);
  } else if (options.ranks_per_host > 0) {
    ::setenv("HERD_UCX_HOST_ID",
             absl::StrFormat("test-host-%d", rank / options.ranks_per_host).c_str(), 1);
  }
  int code = 2;
  absl::Status result;
  {
    auto store = transport::MakeFileStore(dir);
    auto comm = store.ok()
                    ? transport::CreateUcxCommunicator(rank, options.size, *store, options.ucx)
                    : absl::StatusOr<std::unique_ptr<transport::Communicator>>(store.status());
    if (!comm.ok()) {
      result = comm.status();
    } else {
      result = body(**comm, parent);
      code = result.ok() ? 0 : 1;
    }
    parent.Write(absl::StrFormat("%s%d %s", kStatusKey, static_cast<int>(result.code()),
                                 OneLine(std::string(result.message()))));
    // The communicator is destroyed here, before exiting: a crash or hang in the destructor
    // shows in the outcome.
  }
  std::fflush(nullptr);
  ::_exit(code);
}

}  // namespace

void ParentChannel::Write(std::string_view line) {
  std::string framed = OneLine(line);
  framed += '\n';
  WriteAll(fd_, framed);
}

void ParentChannel::Stamp(std::string_view key) {
  Write(absl::StrFormat("%s %d", key, MonotonicNanos()));
}

int64_t MonotonicNanos() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

int64_t RankOutcome::Stamp(std::string_view key) const {
  for (const std::string& line : lines) {
    std::string_view l(line);
    if (l.size() > key.size() && l.substr(0, key.size()) == key && l[key.size()] == ' ') {
      int64_t v = 0;
      if (absl::SimpleAtoi(std::string(l.substr(key.size() + 1)), &v)) return v;
    }
  }
  return -1;
}

std::string RankOutcome::Describe() const {
  std::string out = absl::StrFormat("rank %d: ", rank);
  if (killed_by_parent) {
    out += "still running at the timeout (killed)";
  } else if (exited) {
    out += absl::StrFormat("exit code %d", exit_code);
  } else {
    out += absl::StrFormat("killed by signal %d (%s)", signal, strsignal(signal));
  }
  out += absl::StrFormat(", status %s", status.ToString());
  for (const std::string& line : lines) out += absl::StrFormat("\n    %s", line);
  return out;
}

std::vector<RankOutcome> RunProcessRanks(const ProcessRanksOptions& options, const RankBody& body) {
  namespace fs = std::filesystem;
  char dir_template[] = "/tmp/herd-ucx-procs-XXXXXX";
  const char* made = ::mkdtemp(dir_template);
  std::vector<RankOutcome> outcomes(options.size);
  if (made == nullptr) {
    for (int r = 0; r < options.size; ++r) {
      outcomes[r].rank = r;
      outcomes[r].status = absl::InternalError("mkdtemp failed");
    }
    return outcomes;
  }
  const std::string dir = made;

  std::vector<pid_t> pids(options.size, -1);
  std::vector<int> fds(options.size, -1);
  std::vector<std::string> buffers(options.size);
  std::fflush(nullptr);  // nothing buffered may be written twice by the children
  for (int r = 0; r < options.size; ++r) {
    outcomes[r].rank = r;
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) {
      outcomes[r].status = absl::InternalError("pipe failed");
      continue;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      // The read ends of the older siblings' pipes were inherited too: close them, so that a
      // pipe reports end-of-file to the parent as soon as its own child is gone.
      ::close(pipe_fds[0]);
      for (int fd : fds) {
        if (fd >= 0) ::close(fd);
      }
      RunChild(r, options, dir, pipe_fds[1], body);
    }
    ::close(pipe_fds[1]);
    if (pid < 0) {
      ::close(pipe_fds[0]);
      outcomes[r].status = absl::InternalError("fork failed");
      continue;
    }
    pids[r] = pid;
    fds[r] = pipe_fds[0];
  }

  // Collect output and exits until every child is reaped or the timeout passes. Pipes are
  // drained while waiting: a child blocked on a full pipe would otherwise look hung.
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  int running = 0;
  for (pid_t pid : pids) running += pid > 0;
  auto drain = [&](int r, int wait_ms) {
    if (fds[r] < 0) return;
    pollfd pfd{fds[r], POLLIN, 0};
    while (::poll(&pfd, 1, wait_ms) > 0) {
      char buf[4096];
      ssize_t n = ::read(fds[r], buf, sizeof buf);
      if (n <= 0) {
        ::close(fds[r]);
        fds[r] = -1;
        return;
      }
      buffers[r].append(buf, static_cast<size_t>(n));
      wait_ms = 0;
    }
  };
  auto reap = [&](int r, int status) {
    outcomes[r].exited = WIFEXITED(status);
    outcomes[r].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    outcomes[r].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    pids[r] = -1;
    --running;
  };
  while (running > 0 && std::chrono::steady_clock::now() < deadline) {
    for (int r = 0; r < options.size; ++r) drain(r, 0);
    for (int r = 0; r < options.size; ++r) {
      int status = 0;
      if (pids[r] > 0 && ::waitpid(pids[r], &status, WNOHANG) == pids[r]) reap(r, status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < options.size; ++r) {
    if (pids[r] <= 0) continue;
    outcomes[r].killed_by_parent = true;
    ::kill(pids[r], SIGKILL);
    int status = 0;
    ::waitpid(pids[r], &status, 0);
    reap(r, status);
  }
  // What a child wrote just before exiting may still be in its pipe.
  for (int r = 0; r < options.size; ++r) drain(r, 100);

  // Parse what every child wrote: "status <code> <message>" once, free-form lines otherwise.
  for (int r = 0; r < options.size; ++r) {
    RankOutcome& o = outcomes[r];
    size_t at = 0;
    bool reported = false;
    while (at < buffers[r].size()) {
      size_t nl = buffers[r].find('\n', at);
      if (nl == std::string::npos) nl = buffers[r].size();
      std::string line = buffers[r].substr(at, nl - at);
      at = nl + 1;
      if (line.rfind(kStatusKey, 0) == 0) {
        std::string rest = line.substr(kStatusKey.size());
        size_t space = rest.find(' ');
        int code = 0;
        if (absl::SimpleAtoi(rest.substr(0, space), &code)) {
          o.status = absl::Status(static_cast<absl::StatusCode>(code),
                                  space == std::string::npos ? "" : rest.substr(space + 1));
          reported = true;
        }
      } else {
        o.lines.push_back(line);
      }
    }
    if (!reported && o.status.ok()) o.status = absl::UnknownError("no status reported");
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return outcomes;
}

}  // namespace herd::testing
