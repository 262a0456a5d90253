#include "bench/emulator/run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace herd::emulator {
namespace {

// Reads both pipes until both are closed (the child exited or closed them): poll, so a
// child filling one pipe while we block on the other cannot deadlock.
void Drain(int out_fd, int err_fd, std::string& out, std::string& err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&out, &err};
  int open = 2;
  char buf[4096];
  while (open > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open;
      }
    }
  }
}

}  // namespace

std::string CommandLine(const std::vector<std::string>& argv) { return absl::StrJoin(argv, " "); }

absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("RunCommand: empty command line");
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError(strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return absl::InternalError(strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(out[0]);
    close(err[0]);
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot run `%s`: %s", CommandLine(argv), strerror(rc)));
  }
  std::string stdout_text, stderr_text;
  Drain(out[0], err[0], stdout_text, stderr_text);
  close(out[0]);
  close(err[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return stdout_text;
  const std::string how = WIFEXITED(status) ? absl::StrFormat("exit code %d", WEXITSTATUS(status))
                                            : absl::StrFormat("signal %d", WTERMSIG(status));
  return absl::InternalError(absl::StrFormat("`%s` failed (%s): %s", CommandLine(argv), how,
                                             absl::StripAsciiWhitespace(stderr_text)));
}

}  // namespace herd::emulator
