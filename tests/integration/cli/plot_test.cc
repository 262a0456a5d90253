// `herd plot`: a job's history under a state directory drawn as a PNG by the real gnuplot;
// clear errors for a directory without history, an empty history, several jobs without --job,
// and a machine without gnuplot.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/child_processes.h"
#include "common/temp_dir.h"
#include "metrics/history.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace herd {
namespace {

namespace fs = std::filesystem;
using scheduler::testing::CliResult;
using scheduler::testing::ReadFile;
using scheduler::testing::RunHerd;

// 60 iterations of job `job` under STATE/scheduler-state/history, dear then ps_sync from 30.
void WriteHistory(const std::string& state, const std::string& job) {
  metrics::HistoryWriter writer(state + "/scheduler-state/history");
  for (int i = 0; i < 60; ++i) {
    metrics::HistoryRecord r;
    r.iteration = i;
    r.loss = 2.3 / (1 + 0.1 * i);
    r.samples_per_second = i < 30 ? 5000 + 100 * (i % 3) : 3000 + 100 * (i % 4);
    r.exposed_comm_seconds = i < 30 ? 0.002 : 0.01;
    r.mode = i < 30 ? "dear" : "ps_sync";
    r.workers = 4;
    writer.Append(job, r);
  }
}

TEST(Plot, DrawsAJobHistoryAsAPng) {
  auto dir = TempDir::Create("herd-plot-test");
  ASSERT_TRUE(dir.ok());
  WriteHistory(dir->path(), "local");
  const std::string out = dir->path() + "/plot.png";
  CliResult r = RunHerd({"plot", dir->path(), "--out", out});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("plot of job local (60 iterations) in " + out), std::string::npos) << r.out;
  const std::string png = ReadFile(out);
  ASSERT_GT(png.size(), 10000u);  // three panels, not an empty canvas
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  // The history file itself works as well.
  CliResult direct = RunHerd({"plot", dir->path() + "/scheduler-state/history/local.jsonl", "--out",
                              dir->path() + "/direct.png"});
  EXPECT_EQ(direct.rc, 0) << direct.out;
}

TEST(Plot, SaysWhatIsMissing) {
  auto dir = TempDir::Create("herd-plot-test");
  ASSERT_TRUE(dir.ok());
  const std::string out = dir->path() + "/plot.png";
  CliResult none = RunHerd({"plot", dir->path(), "--out", out});
  EXPECT_EQ(none.rc, 1);
  EXPECT_NE(none.out.find("no job history under " + dir->path()), std::string::npos) << none.out;

  fs::create_directories(dir->path() + "/scheduler-state/history");
  std::ofstream(dir->path() + "/scheduler-state/history/idle.jsonl").flush();
  CliResult empty = RunHerd({"plot", dir->path(), "--out", out});
  EXPECT_EQ(empty.rc, 1);
  EXPECT_NE(empty.out.find("holds no iterations yet"), std::string::npos) << empty.out;

  WriteHistory(dir->path(), "local");
  CliResult several = RunHerd({"plot", dir->path(), "--out", out});
  EXPECT_EQ(several.rc, 1);
  EXPECT_NE(several.out.find("several jobs (idle, local): pick one with --job"), std::string::npos)
      << several.out;
  EXPECT_FALSE(fs::exists(out));
  CliResult picked = RunHerd({"plot", dir->path(), "--job", "local", "--out", out});
  EXPECT_EQ(picked.rc, 0) << picked.out;
}

TEST(Plot, WithoutGnuplotSaysWhatToInstall) {
  auto dir = TempDir::Create("herd-plot-test");
  ASSERT_TRUE(dir.ok());
  WriteHistory(dir->path(), "local");
  ChildProcesses children;
  auto plot = children.Start(
      {.name = "herd plot",
       .argv = {HERD_BINARY, "plot", dir->path(), "--out", dir->path() + "/plot.png"},
       .env = {"PATH=" + dir->path()}});  // no gnuplot there
  ASSERT_TRUE(plot.ok()) << plot.status();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (children.running(*plot) && std::chrono::steady_clock::now() < deadline) {
    while (children.PollExit()) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(children.status(*plot).has_value());
  EXPECT_EQ(WEXITSTATUS(*children.status(*plot)), 1);
  const std::string err = children.Output(*plot, ChildProcesses::Stream::kStderr);
  EXPECT_NE(err.find("gnuplot is not installed"), std::string::npos) << err;
  EXPECT_NE(err.find("gnuplot-nox"), std::string::npos) << err;
}

}  // namespace
}  // namespace herd
