// `herd server` refuses what it cannot run with a message a person can act on.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

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
                    (dir / "shard").string(), "--register-timeout", "2"});
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("nope"), std::string::npos) << r.out;
  sched.Stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace herd::server
