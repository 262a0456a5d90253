// /metrics from the first second (metrics/process_info.h): an idle scheduler and a shard that
// has not joined a job yet already answer with their build, role, start and up-time, and
// their role's unlabelled series at zero.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <optional>
#include <regex>
#include <string>
#include <thread>

#include "common/temp_dir.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/support/http_get.h"

namespace herd {
namespace {

using scheduler::testing::ReadFile;
using scheduler::testing::SchedulerProcess;
using scheduler::testing::SpawnHerd;
using scheduler::testing::WaitExit;

// The port of "metrics at http://127.0.0.1:PORT/metrics" in a process's log, once written.
std::optional<int> MetricsPort(const std::string& log_path) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  const std::regex url(R"(metrics at http://127\.0\.0\.1:(\d+)/metrics)");
  while (std::chrono::steady_clock::now() < deadline) {
    std::smatch m;
    const std::string log = ReadFile(log_path);
    if (std::regex_search(log, m, url)) return std::stoi(m[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

std::string Scrape(int port) {
  auto got = herd::testing::HttpGet("127.0.0.1", port, "/metrics");
  EXPECT_TRUE(got.ok()) << got.status();
  if (!got.ok()) return "";
  EXPECT_EQ(got->status, 200);
  return got->body;
}

void ExpectLine(const std::string& text, const std::string& line) {
  EXPECT_NE(text.find("\n" + line + "\n"), std::string::npos) << "no line '" << line << "' in:\n"
                                                              << text;
}

// The value of an unlabelled gauge `name`, or -1.
double Value(const std::string& text, const std::string& name) {
  std::smatch m;
  const std::regex line("\n" + name + " ([0-9.e+]+)\n");
  return std::regex_search(text, m, line) ? std::stod(m[1]) : -1;
}

TEST(FirstScrape, AnIdleSchedulerSaysWhatItIsAndSinceWhen) {
  auto dir = TempDir::Create("herd-first-scrape-test");
  ASSERT_TRUE(dir.ok());
  SchedulerProcess scheduler;
  scheduler.Start(dir->path() + "/scheduler", 0, {"--metrics-listen", "127.0.0.1:0"});
  const auto now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::smatch m;
  const std::string log = scheduler.log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(metrics at http://127\.0\.0\.1:(\d+))")))
      << log;
  const std::string text = Scrape(std::stoi(m[1]));
  ExpectLine(text, "herd_build_info{role=\"scheduler\",version=\"" HERD_VERSION "\"} 1");
  const double started = Value(text, "herd_process_start_time_seconds");
  EXPECT_GT(started, now - 60) << text;
  EXPECT_LE(started, now + 1) << text;
  const double up = Value(text, "herd_uptime_seconds");
  EXPECT_GE(up, 0) << text;
  EXPECT_LT(up, 60) << text;
  // The scheduler's and every process's unlabelled series, at zero before any job.
  ExpectLine(text, "herd_scheduler_heartbeats_total 0");
  ExpectLine(text, "herd_scheduler_connected_processes 0");
  ExpectLine(text, "herd_heartbeats_missed_total 0");
  // The up-time moves between scrapes.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_GT(Value(Scrape(std::stoi(m[1])), "herd_uptime_seconds"), up + 1);
}

TEST(FirstScrape, AShardWaitingForItsJobAlreadyAnswers) {
  auto dir = TempDir::Create("herd-first-scrape-test");
  ASSERT_TRUE(dir.ok());
  SchedulerProcess scheduler;
  scheduler.Start(dir->path() + "/scheduler", 0);
  const std::string log = dir->path() + "/shard.log";
  const pid_t shard =
      SpawnHerd({"server", "--scheduler", scheduler.address(), "--job", "later", "--state",
                 dir->path() + "/shard", "--metrics-listen", "127.0.0.1:0"},
                log);
  ASSERT_GT(shard, 0);
  const std::optional<int> port = MetricsPort(log);
  ASSERT_TRUE(port.has_value()) << ReadFile(log);
  const std::string text = Scrape(*port);
  ExpectLine(text, "herd_build_info{role=\"shard\",version=\"" HERD_VERSION "\"} 1");
  EXPECT_GE(Value(text, "herd_uptime_seconds"), 0) << text;
  ExpectLine(text, "herd_heartbeats_missed_total 0");
  kill(shard, SIGKILL);
  WaitExit(shard, 10);
}

}  // namespace
}  // namespace herd
