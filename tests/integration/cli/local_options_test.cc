// `herd local`'s mode options (--topology, --teams, --density, --block-bytes, --staleness,
// --compressor): one that applies to none of the job's modes (the starting mode and the
// --switch-mode-at modes) is refused before anything starts, with a message naming the flag,
// the job's modes and the modes it applies to; one that applies to some of them goes to those.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/scheduler/scheduler_process.h"

namespace herd {
namespace {

using scheduler::testing::CliResult;
using scheduler::testing::RunHerd;
namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "herd-local-options-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

// A short MLP job on 2 workers (1280 samples: 10 iterations), plus `extra`.
std::vector<std::string> Job(const std::string& mode, std::vector<std::string> extra) {
  std::vector<std::string> args = {"local", "--workers", "2", "--mode",          mode,  "--model",
                                   "mlp",   "--epochs",  "1", "--train-samples", "1280"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Runs a job that must be refused: exit status 1, the message, and nothing started (the state
// directory stays empty: no logs, no scheduler state).
void ExpectRefused(const std::string& mode, std::vector<std::string> extra,
                   const std::string& message) {
  TempDir dir;
  extra.insert(extra.end(), {"--state", dir.path});
  CliResult r = RunHerd(Job(mode, extra));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(dir.path)) << "herd local started something before refusing";
}

TEST(LocalOptions, AnOptionNoModeOfTheJobTakesIsRefused) {
  ExpectRefused("ps_sync", {"--staleness", "2"},
                "--staleness does not apply to mode ps_sync; it applies to ps_async");
  ExpectRefused("dear", {"--density", "0.1"},
                "--density does not apply to mode dear; it applies to sparse and topk_allgather");
  ExpectRefused("allreduce", {"--compressor", "sign"},
                "--compressor does not apply to mode allreduce; it applies to decentralized_lp, "
                "clps and ps_ec");
  ExpectRefused("clps", {"--topology", "random"},
                "--topology does not apply to mode clps; it applies to decentralized and "
                "decentralized_lp");
  ExpectRefused("allreduce", {"--teams", "2"}, "--teams does not apply to mode allreduce");
  ExpectRefused("dear", {"--block-bytes", "4096"}, "--block-bytes does not apply to mode dear");
}

TEST(LocalOptions, EveryModeOfTheJobCounts) {
  // Neither allreduce nor ps_sync takes a staleness bound.
  ExpectRefused("allreduce", {"--switch-mode-at", "5:ps_sync", "--staleness", "2"},
                "--staleness does not apply to the modes allreduce and ps_sync; it applies to "
                "ps_async");
  ExpectRefused("allreduce", {"--switch-mode-at", "5:gossip"},
                "--switch-mode-at '5:gossip': unknown mode 'gossip'; known modes: allreduce");
  ExpectRefused("gossip", {}, "unknown mode 'gossip'; known modes: allreduce");
}

// --density applies to topk_allgather, not to allreduce: the job trains, topk_allgather runs
// with it, and allreduce does not get it (the scheduler would refuse the switch if it did).
TEST(LocalOptions, AnOptionGoesToTheModesThatTakeIt) {
  TempDir dir;
  CliResult r = RunHerd(Job("topk_allgather", {"--switch-mode-at", "4:allreduce", "--density",
                                               "0.05", "--state", dir.path, "--json"}));
  ASSERT_EQ(r.rc, 0) << r.out;
  for (int w = 0; w < 2; ++w) {
    std::ifstream in(dir.path + "/logs/worker-" + std::to_string(w) + ".log");
    std::stringstream log;
    log << in.rdbuf();
    EXPECT_NE(log.str().find("iteration 0: topk_allgather: density 0.05"), std::string::npos)
        << log.str();
    EXPECT_NE(log.str().find("iteration 4: allreduce"), std::string::npos) << log.str();
  }
}

}  // namespace
}  // namespace herd
