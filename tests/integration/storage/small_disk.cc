#include "tests/integration/storage/small_disk.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace herd::testing {

bool SmallDiskProcess::Supported() {
  const std::string probe = std::filesystem::temp_directory_path() / "herd_small_disk_probe";
  std::filesystem::create_directories(probe);
  const std::string cmd =
      "unshare -rm sh -c 'mount -t tmpfs -o size=1m tmpfs \"$0\"' " + probe + " >/dev/null 2>&1";
  const bool ok = std::system(cmd.c_str()) == 0;
  std::filesystem::remove_all(probe);
  return ok;
}

void SmallDiskProcess::Start(const std::string& mount_point, int size_mib,
                             std::vector<std::string> args, const std::string& port_file,
                             const std::string& log_path, std::chrono::seconds patience) {
  Stop(SIGKILL);
  mount_point_ = mount_point;
  log_path_ = log_path;
  port_ = 0;
  std::filesystem::remove(port_file);
  // sh mounts, then execs herd: the pid is the herd process's, and the tmpfs lives as long as
  // it does.
  std::vector<std::string> argv = {
      "unshare",
      "-rm",
      "sh",
      "-c",
      "mount -t tmpfs -o size=" + std::to_string(size_mib) + "m tmpfs \"$0\" && exec \"$@\"",
      mount_point,
      HERD_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--port-file", port_file});
  pid_ = fork();
  ASSERT_GE(pid_, 0);
  if (pid_ == 0) {
    FILE* log = std::fopen(log_path.c_str(), "a");
    if (log != nullptr) {
      dup2(fileno(log), 1);
      dup2(fileno(log), 2);
    }
    std::vector<char*> raw;
    for (auto& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    execvp(raw[0], raw.data());
    _exit(127);
  }
  const auto give_up = std::chrono::steady_clock::now() + patience;
  while (std::chrono::steady_clock::now() < give_up) {
    std::ifstream in(port_file);
    if (in >> port_ && port_ > 0) return;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      FAIL() << "herd on a small disk ended at start (status " << status << "): " << log();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL() << "herd on a small disk did not serve in time: " << log();
}

void SmallDiskProcess::Stop(int sig) {
  if (pid_ <= 0) return;
  kill(pid_, sig);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

bool SmallDiskProcess::Alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  return waitpid(pid_, &status, WNOHANG) == 0;
}

std::string SmallDiskProcess::Ballast() const {
  // The process's view of its mount point, seen from outside its namespace.
  return "/proc/" + std::to_string(pid_) + "/root" + mount_point_ + "/ballast";
}

int64_t SmallDiskProcess::Fill() {
  const int fd = ::open(Ballast().c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd < 0) {
    ADD_FAILURE() << "cannot create " << Ballast() << ": " << std::strerror(errno);
    return 0;
  }
  int64_t total = 0;
  const std::string block(4096, 'b');
  for (;;) {
    const ssize_t n = ::write(fd, block.data(), block.size());
    if (n <= 0) break;
    total += n;
  }
  ::close(fd);
  return total;
}

void SmallDiskProcess::Free() { std::filesystem::remove(Ballast()); }

std::string SmallDiskProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace herd::testing
