#include "tests/integration/scheduler/scheduler_process.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace herd::scheduler::testing {
namespace {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

int TimeScale() {
  const char* v = std::getenv("HERD_TEST_TIME_SCALE");
  const int scale = v == nullptr ? 1 : std::atoi(v);
  return std::clamp(scale, 1, 20);
}

void HerdProcess::Start(const std::string& subcommand, std::vector<std::string> args,
                        const std::string& port_file, const std::string& log_path,
                        std::chrono::seconds patience) {
  Stop(SIGKILL);
  log_path_ = log_path;
  port_ = 0;
  std::filesystem::remove(port_file);
  args.insert(args.begin(), {HERD_BINARY, subcommand});
  args.insert(args.end(), {"--port-file", port_file});
  pid_ = fork();
  ASSERT_GE(pid_, 0) << "fork failed";
  if (pid_ == 0) {
    FILE* log = std::fopen(log_path_.c_str(), "a");
    if (log != nullptr) {
      dup2(fileno(log), 1);
      dup2(fileno(log), 2);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  patience *= TimeScale();
  const auto give_up = std::chrono::steady_clock::now() + patience;
  while (std::chrono::steady_clock::now() < give_up) {
    std::ifstream in(port_file);
    if (in >> port_ && port_ > 0) return;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      const std::string how = WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                                                : "signal " + std::to_string(WTERMSIG(status));
      FAIL() << "herd " << subcommand << " ended at start (" << how << "): " << log();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL() << "herd " << subcommand << " did not start serving within " << patience.count()
         << " s: " << log();
}

void HerdProcess::Stop(int sig) {
  if (pid_ <= 0) return;
  kill(pid_, sig);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string HerdProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void SchedulerProcess::Start(const std::string& state_dir, int port,
                             std::vector<std::string> extra) {
  std::filesystem::create_directories(state_dir);
  std::vector<std::string> args = {"--listen", "127.0.0.1:" + std::to_string(port), "--state",
                                   state_dir};
  args.insert(args.end(), extra.begin(), extra.end());
  process_.Start("scheduler", std::move(args), state_dir + ".port", state_dir + ".log",
                 std::chrono::seconds(10));
}

CliResult RunHerd(const std::vector<std::string>& args) {
  std::string cmd = ShellQuote(HERD_BINARY);
  for (const auto& a : args) cmd += " " + ShellQuote(a);
  cmd += " 2>&1";
  CliResult result;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) result.out.append(buf, n);
  const int status = pclose(p);
  result.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

pid_t SpawnHerd(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    ::dup2(fileno(f), STDOUT_FILENO);
    ::dup2(fileno(f), STDERR_FILENO);
    std::vector<std::string> all = {HERD_BINARY};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(HERD_BINARY, argv.data());
    ::_exit(127);
  }
  return pid;
}

int WaitExit(pid_t pid, int seconds) {
  for (int i = 0; i < seconds * 20 * TimeScale(); ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace herd::scheduler::testing
