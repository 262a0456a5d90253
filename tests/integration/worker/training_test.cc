// Short training jobs through `herd local` for every mode the worker runs, a mid-job switch
// between a collective and a server mode and back, and the failures an operator meets (a
// crashed worker, a missing dataset, Ctrl-C). The MLP on 12000 samples for one epoch keeps each
// job to seconds; the accuracy bounds are loose versions of docs/BENCHMARKS.md's table.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace herd {
namespace {

using scheduler::testing::CliResult;
using scheduler::testing::ReadFile;
using scheduler::testing::RunHerd;
using scheduler::testing::SpawnHerd;
using scheduler::testing::WaitExit;
namespace fs = std::filesystem;

// A fresh directory, removed at the end.
struct TempDir {
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "herd-training-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

std::vector<std::string> ShortJob(const std::string& mode, int workers) {
  return {"local",    "--workers", std::to_string(workers), "--mode", mode,    "--model", "mlp",
          "--epochs", "1",         "--train-samples",       "12000",  "--json"};
}

// A number field of `herd local --json`'s summary line.
double Field(const std::string& out, const std::string& key) {
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (line.substr(0, 7) != "{\"job\":") continue;
    const std::string needle = "\"" + key + "\":";
    const size_t at = line.find(needle);
    if (at == absl::string_view::npos) return NAN;
    absl::string_view rest = line.substr(at + needle.size());
    rest = rest.substr(0, rest.find_first_of(",}"));
    double v = NAN;
    return absl::SimpleAtod(rest, &v) ? v : NAN;
  }
  return NAN;
}

struct ModeBound {
  std::string mode;
  double min_accuracy;
};

void PrintTo(const ModeBound& b, std::ostream* os) { *os << b.mode << " >= " << b.min_accuracy; }

class ModeTrainsTest : public ::testing::TestWithParam<ModeBound> {};

TEST_P(ModeTrainsTest, FourWorkersLearnFashionMnist) {
  const ModeBound& c = GetParam();
  CliResult r = RunHerd(ShortJob(c.mode, 4));
  ASSERT_EQ(r.rc, 0) << r.out;
  const double accuracy = Field(r.out, "test_accuracy");
  EXPECT_GE(accuracy, c.min_accuracy) << r.out;
  EXPECT_EQ(Field(r.out, "iterations"), 46) << r.out;  // 12000 / 4 workers / batch 64
  EXPECT_GT(Field(r.out, "samples_per_second"), 0) << r.out;
}

// One epoch of 12000 samples leaves the synchronous modes at about 0.74 (they run the same
// arithmetic); asynchronous updates trail it, and so do the sparse modes (density 0.01, each
// gradient delivered late through error feedback: measured 0.69 and 0.70). Measured for the
// decentralized and low-precision modes: decentralized 0.746, decentralized_lp 0.745, clps 0.744.
// ps_async depends on how the 4 workers' pushes interleave: 46 iterations gave 0.51-0.63 in
// different runs, so its bound only says it learns (chance is 0.10); the 2-epoch CNN table in
// docs/BENCHMARKS.md is where its accuracy is compared.
INSTANTIATE_TEST_SUITE_P(
    Modes, ModeTrainsTest,
    ::testing::Values(ModeBound{"allreduce", 0.70}, ModeBound{"dear", 0.70}, ModeBound{"lp", 0.70},
                      ModeBound{"ps_sync", 0.70}, ModeBound{"ps_async", 0.40},
                      ModeBound{"ps_ec", 0.68}, ModeBound{"sparse", 0.60},
                      ModeBound{"topk_allgather", 0.60}, ModeBound{"decentralized", 0.68},
                      ModeBound{"decentralized_lp", 0.68}, ModeBound{"clps", 0.68}),
    [](const auto& info) { return info.param.mode; });

TEST(Training, DearAndAllreduceMatchOneWorkerOnTheSameGlobalBatch) {
  // 4 workers x 64 samples average the same gradient as one worker x 256.
  auto one = ShortJob("allreduce", 1);
  one.insert(one.end(), {"--batch-size", "256"});
  CliResult single = RunHerd(one);
  ASSERT_EQ(single.rc, 0) << single.out;
  CliResult dear = RunHerd(ShortJob("dear", 4));
  ASSERT_EQ(dear.rc, 0) << dear.out;
  CliResult allreduce = RunHerd(ShortJob("allreduce", 4));
  ASSERT_EQ(allreduce.rc, 0) << allreduce.out;
  const double base = Field(single.out, "test_accuracy");
  EXPECT_NEAR(Field(dear.out, "test_accuracy"), base, 0.03) << single.out << dear.out;
  EXPECT_NEAR(Field(allreduce.out, "test_accuracy"), base, 0.03) << single.out << allreduce.out;
  // dear reorders the same arithmetic: the models agree.
  EXPECT_NEAR(Field(dear.out, "final_loss"), Field(allreduce.out, "final_loss"), 1e-3);
}

TEST(Training, SwitchesFromAllreduceToPsSyncAndBackMidJob) {
  TempDir dir;
  auto args = ShortJob("allreduce", 4);
  args.insert(args.end(), {"--switch-mode-at", "15:ps_sync", "--switch-mode-at", "30:allreduce",
                           "--state", dir.path});
  CliResult r = RunHerd(args);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_GE(Field(r.out, "test_accuracy"), 0.68) << r.out;
  for (int w = 0; w < 4; ++w) {
    std::ifstream in(absl::StrFormat("%s/logs/worker-%d.log", dir.path, w));
    std::stringstream log;
    log << in.rdbuf();
    EXPECT_NE(log.str().find("iteration 0: allreduce"), std::string::npos) << log.str();
    EXPECT_NE(log.str().find("iteration 15: ps_sync"), std::string::npos) << log.str();
    EXPECT_NE(log.str().find("iteration 30: allreduce"), std::string::npos) << log.str();
  }
}

TEST(Training, WritesAChromeTraceTimelinePerWorker) {
  TempDir dir;
  auto args = ShortJob("dear", 2);
  args.insert(args.end(), {"--timeline", dir.path});
  CliResult r = RunHerd(args);
  ASSERT_EQ(r.rc, 0) << r.out;
  for (int w = 0; w < 2; ++w) {
    std::ifstream in(absl::StrFormat("%s/worker-%d.json", dir.path, w));
    std::stringstream trace;
    trace << in.rdbuf();
    EXPECT_EQ(trace.str().rfind("{\"traceEvents\":[", 0), 0u) << trace.str().substr(0, 200);
    EXPECT_NE(trace.str().find("\"RS bucket"), std::string::npos);
    EXPECT_NE(trace.str().find("\"AG bucket"), std::string::npos);
    EXPECT_NE(trace.str().find("\"iteration 0\""), std::string::npos);
    EXPECT_NE(trace.str().find("\"forward\""), std::string::npos);
    EXPECT_NE(trace.str().find("\"backward\""), std::string::npos);
  }
}

TEST(Training, AMissingDatasetIsAClearError) {
  auto args = ShortJob("allreduce", 2);
  args.insert(args.end(), {"--data-dir", "/nonexistent/fashion"});
  CliResult r = RunHerd(args);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("worker-"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/fashion/train-images-idx3-ubyte.gz"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("dataset-fashion-mnist"), std::string::npos) << r.out;
}

// The pids of the children of `parent` whose command line contains `needle`.
std::vector<pid_t> FindChildren(pid_t parent, const std::string& needle) {
  std::vector<pid_t> found;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    int pid = 0;
    if (!absl::SimpleAtoi(name, &pid)) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string s;
    std::getline(stat, s);
    const size_t close = s.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> fields = absl::StrSplit(s.substr(close + 2), ' ');
    if (fields.size() < 2 || fields[1] != std::to_string(parent)) continue;
    std::ifstream cmd(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    for (char& ch : cmdline) {
      if (ch == '\0') ch = ' ';
    }
    if (cmdline.find(needle) != std::string::npos) found.push_back(pid);
  }
  return found;
}

pid_t FindChild(pid_t parent, const std::string& needle) {
  auto found = FindChildren(parent, needle);
  return found.empty() ? -1 : found[0];
}

bool Alive(pid_t pid) { return ::kill(pid, 0) == 0; }

TEST(Training, ACrashedWorkerStopsTheJobAndIsNamed) {
  TempDir dir;
  auto args = ShortJob("allreduce", 3);
  args[args.size() - 2] = "60000";  // --train-samples  // long enough to be killed mid-way
  const std::string log = dir.path + "/local.log";
  const pid_t local = SpawnHerd(args, log);
  pid_t victim = -1;
  for (int i = 0; i < 600 && victim < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    victim = FindChild(local, "--name worker-1");
  }
  ASSERT_GT(victim, 0) << ReadFile(log);
  std::this_thread::sleep_for(std::chrono::seconds(2));  // let it train a little
  const std::vector<pid_t> children = FindChildren(local, "--");
  ASSERT_GE(children.size(), 4u) << "scheduler and 3 workers";
  ::kill(victim, SIGKILL);
  const int status = WaitExit(local, 60);
  ASSERT_TRUE(WIFEXITED(status)) << status << ReadFile(log);
  EXPECT_EQ(WEXITSTATUS(status), 1) << ReadFile(log);
  const std::string out = ReadFile(log);
  EXPECT_NE(out.find("worker-1 was killed by signal 9"), std::string::npos) << out;
  for (pid_t child : children)
    EXPECT_FALSE(Alive(child)) << "child " << child << " outlived herd local";
}

TEST(Training, CtrlCStopsEveryChild) {
  TempDir dir;
  auto args = ShortJob("ps_sync", 2);
  args[args.size() - 2] = "60000";  // --train-samples
  const std::string log = dir.path + "/local.log";
  const pid_t local = SpawnHerd(args, log);
  for (int i = 0; i < 600 && FindChild(local, "--name worker-1") < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::vector<pid_t> children = FindChildren(local, "--");
  ASSERT_GE(children.size(), 4u) << "scheduler, a shard and 2 workers";
  ::kill(local, SIGINT);
  const int status = WaitExit(local, 30);
  ASSERT_TRUE(WIFEXITED(status)) << status << ReadFile(log);
  EXPECT_EQ(WEXITSTATUS(status), 130) << ReadFile(log);
  EXPECT_NE(ReadFile(log).find("stopping every process"), std::string::npos) << ReadFile(log);
  for (pid_t child : children)
    EXPECT_FALSE(Alive(child)) << "child " << child << " outlived herd local";
}

}  // namespace
}  // namespace herd
