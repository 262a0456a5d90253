// `herd server` refuses what it cannot run with a message a person can act on.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/integration/scheduler/scheduler_process.h"

namespace herd::server {
namespace {

using scheduler::testing::RunHerd;

TEST(ServerCliTest, BadDurabilityIsAUsageError) {
  auto r = RunHerd({"server", "--scheduler", "127.0.0.1:1", "--job", "j", "--state", "/tmp/x",
                    "--durability", "sometimes"});
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("every-round, every-k:K (K >= 1), checkpoint-only"), std::string::npos)
      << r.out;
}

TEST(ServerCliTest, UnknownJobFailsWithTheSchedulersAnswer) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("herd_server_cli_" + std::to_string(getpid()));
  scheduler::testing::SchedulerProcess sched;
  sched.Start((dir / "scheduler").string(), 0);
  auto r = RunHerd({"server", "--scheduler", sched.address(), "--job", "nope", "--state",
                    (dir / "shard").string(), "--register-timeout", "2", "--wait-for-job", "1"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("nope"), std::string::npos) << r.out;
  sched.Stop();
  std::filesystem::remove_all(dir);
}

TEST(ServerCliTest, WithoutAJobAndNoJobWaitingForShardsIsAClearError) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("herd_server_cli_nojob_" + std::to_string(getpid()));
  scheduler::testing::SchedulerProcess sched;
  sched.Start((dir / "scheduler").string(), 0);
  auto r = RunHerd({"server", "--scheduler", sched.address(), "--state", (dir / "shard").string(),
                    "--wait-for-job", "1"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("no job on the scheduler"), std::string::npos) << r.out;
  sched.Stop();
  std::filesystem::remove_all(dir);
}

TEST(ServerCliTest, TooFewThreadsIsRefusedBeforeRegistering) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("herd_server_cli_thr_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  scheduler::testing::SchedulerProcess sched;
  sched.Start((dir / "scheduler").string(), 0);
  const std::string spec = (dir / "ps.yaml").string();
  std::ofstream(spec) << "name: ps4\nmode: ps_sync\nworkers: 4\nservers: 1\ntensors:\n"
                         "  - {name: w, shape: [16], dtype: fp32}\n";
  auto submitted = RunHerd({"job", "submit", spec, "--scheduler", sched.address()});
  ASSERT_EQ(submitted.rc, 0) << submitted.out;
  auto r = RunHerd({"server", "--scheduler", sched.address(), "--state", (dir / "shard").string(),
                    "--threads", "3"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("--threads 3 is too few for job 'ps4' with 4 workers"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("at least 9"), std::string::npos) << r.out;
  // Nothing changed at the scheduler: the shard slot is still free.
  auto status = RunHerd({"job", "status", "ps4", "--scheduler", sched.address()});
  ASSERT_EQ(status.rc, 0) << status.out;
  EXPECT_NE(status.out.find("servers (1)\n    0  empty"), std::string::npos) << status.out;
  sched.Stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace herd::server
