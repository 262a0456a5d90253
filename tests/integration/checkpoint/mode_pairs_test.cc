// Every mode-to-mode pair (label slow): a checkpoint written by a 2-worker job in one mode
// resumes in every other mode, on a tiny model, with real processes through `herd local`. The
// resumed run starts at the checkpoint's iteration and finishes; where the saved parameters are
// replicated (every mode but the decentralized ones, whose ranks hold their own models and
// resume at their average in another mode, and ps_async, whose workers trained on copies that
// may miss the other workers' last pushes while the resumed run takes the shards' model, which
// has them all), rank 0's first loss is the saved run's at that iteration: the model really
// came from the checkpoint, whatever state the new mode takes. (Not into ps_async either: a
// worker's first pull there may already hold another worker's first push.)

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "tests/integration/checkpoint/local_runs.h"

namespace herd::testing {
namespace {

constexpr int64_t kSamples = 512;  // 2 workers x 32: 8 iterations
constexpr int64_t kCut = 4;

const std::vector<std::string>& Modes() {
  static const std::vector<std::string> modes = {
      "allreduce",        "dear", "lp",      "sparse",   "topk_allgather", "decentralized",
      "decentralized_lp", "clps", "ps_sync", "ps_async", "ps_ec"};
  return modes;
}

int ServersFor(const std::string& mode) { return mode.rfind("ps_", 0) == 0 ? 1 : -1; }

class FromMode : public ::testing::TestWithParam<std::string> {};

TEST_P(FromMode, ResumesInEveryOtherMode) {
  const std::string from = GetParam();
  ScratchDir saved_dir;
  const std::string ckpt = saved_dir.path + "/ckpt";
  std::vector<std::string> job = SmallJob(from, 2, kSamples, ServersFor(from));
  job.insert(job.end(), {"--checkpoint-dir", ckpt, "--checkpoint-every", std::to_string(kCut)});
  LocalRun saved = RunLocal(job, saved_dir.path);
  ASSERT_EQ(saved.rc, 0) << saved.out;
  const std::string at = ckpt + "/it-0000000" + std::to_string(kCut);
  ASSERT_TRUE(std::filesystem::exists(at + "/MANIFEST")) << saved.out;
  const bool replicated = from.rfind("decentralized", 0) != 0 && from != "ps_async";
  const double expected = std::strtod(saved.losses[kCut].c_str(), nullptr);

  for (const std::string& to : Modes()) {
    if (to == from) continue;  // the same mode: resume_matrix_test's EveryMode
    SCOPED_TRACE(from + " -> " + to);
    ScratchDir resumed_dir;
    std::vector<std::string> again = SmallJob(to, 2, kSamples, ServersFor(to));
    again.insert(again.end(), {"--resume", at});
    LocalRun resumed = RunLocal(again, resumed_dir.path);
    ASSERT_EQ(resumed.rc, 0) << resumed.out;
    ASSERT_EQ(resumed.losses.size(), static_cast<size_t>(8 - kCut)) << resumed.out;
    EXPECT_EQ(resumed.losses.begin()->first, kCut);
    const double got = std::strtod(resumed.losses.begin()->second.c_str(), nullptr);
    EXPECT_TRUE(std::isfinite(got)) << resumed.out;
    if (replicated && to != "ps_async")
      EXPECT_NEAR(got, expected, 1e-4 * std::abs(expected)) << resumed.out;
  }
}

INSTANTIATE_TEST_SUITE_P(Pairs, FromMode, ::testing::ValuesIn(Modes()));

}  // namespace
}  // namespace herd::testing
