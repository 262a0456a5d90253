// The two executables (cli/executables.h): `herd` itself never loads libtorch, the subcommands
// that need it run in herd-torch in the same process `herd` was started as, and an installation
// without herd-torch says what is missing instead of failing obscurely.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "common/temp_dir.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace herd {
namespace {

namespace fs = std::filesystem;
using scheduler::testing::CliResult;
using scheduler::testing::ReadFile;
using scheduler::testing::RunHerd;
using scheduler::testing::SchedulerProcess;
using scheduler::testing::SpawnHerd;
using scheduler::testing::WaitExit;

bool LoadsLibtorch(pid_t pid) {
  return ReadFile("/proc/" + std::to_string(pid) + "/maps").find("libtorch") != std::string::npos;
}

// The executable `pid` runs now ("" once it is gone).
std::string ExecutableOf(pid_t pid) {
  std::error_code ec;
  return fs::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).filename().string();
}

TEST(Executables, ControlCommandsRunWithoutLibtorchAndWorkersRunInHerdTorchUnderTheSamePid) {
  auto dir = TempDir::Create("herd-executables-test");
  ASSERT_TRUE(dir.ok());
  SchedulerProcess scheduler;
  scheduler.Start(dir->path() + "/scheduler", 0);

  // A worker waiting for a job that is not submitted yet: herd execs herd-torch, same pid.
  const pid_t worker = SpawnHerd(
      {"worker", "--scheduler", scheduler.address(), "--job", "later", "--wait-for-job", "60s"},
      dir->path() + "/worker.log");
  ASSERT_GT(worker, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!LoadsLibtorch(worker) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(LoadsLibtorch(worker)) << ReadFile(dir->path() + "/worker.log");
  EXPECT_EQ(ExecutableOf(worker), "herd-torch");
  kill(worker, SIGKILL);
  WaitExit(worker, 10);

  // A control command stays herd, without libtorch: `herd job list` answers, and a process
  // that keeps running (`herd scheduler`) never maps it.
  CliResult list = RunHerd({"job", "list", "--scheduler", scheduler.address()});
  EXPECT_EQ(list.rc, 0) << list.out;
  const pid_t second =
      SpawnHerd({"scheduler", "--listen", "127.0.0.1:0", "--state", dir->path() + "/second"},
                dir->path() + "/second.log");
  ASSERT_GT(second, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(ExecutableOf(second), "herd") << ReadFile(dir->path() + "/second.log");
  EXPECT_FALSE(LoadsLibtorch(second));
  kill(second, SIGKILL);
  WaitExit(second, 10);

  // herd-torch's subcommands are listed by herd with the others.
  CliResult help = RunHerd({"--help"});
  EXPECT_EQ(help.rc, 0);
  for (const char* name : {"local", "worker", "scheduler", "job", "checkpoint"}) {
    EXPECT_NE(help.out.find(std::string("\n  ") + name + " "), std::string::npos) << name;
  }
  CliResult worker_help = RunHerd({"worker", "--help"});
  EXPECT_EQ(worker_help.rc, 0);
  EXPECT_NE(worker_help.out.find("Usage: herd worker"), std::string::npos) << worker_help.out;
}

TEST(Executables, WithoutHerdTorchBesideItHerdNamesWhatIsMissing) {
  auto dir = TempDir::Create("herd-executables-test");
  ASSERT_TRUE(dir.ok());
  const std::string lonely = dir->path() + "/herd";
  fs::copy_file(HERD_BINARY, lonely);
  const std::string quiet = " 2>&1";
  auto run = [&](const std::string& args, std::string& out) {
    FILE* p = popen((lonely + " " + args + quiet).c_str(), "r");
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    return WEXITSTATUS(pclose(p));
  };
  std::string out;
  EXPECT_EQ(run("--help", out), 0) << out;  // herd's own commands are unaffected
  out.clear();
  EXPECT_EQ(run("worker --scheduler 127.0.0.1:1 --job j", out), 1) << out;
  EXPECT_NE(out.find("herd worker: this subcommand runs in " + dir->path() + "/herd-torch"),
            std::string::npos)
      << out;
  out.clear();
  EXPECT_EQ(run("checkpoint export " + dir->path() + " --out " + dir->path() + "/m.pt", out), 1)
      << out;
  EXPECT_NE(out.find("herd-torch"), std::string::npos) << out;
}

}  // namespace
}  // namespace herd
