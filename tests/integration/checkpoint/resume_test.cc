// Checkpoint and resume with real processes (`herd local`: a scheduler, workers, shards): a
// job killed with SIGKILL after a checkpoint and resumed from it ends with the parameters and
// the per-iteration losses of the job that never stopped. The per-mode matrix, other worker
// and shard counts, preemption and kills during a save are resume_matrix_test (label slow).

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/integration/checkpoint/local_runs.h"

namespace herd::testing {
namespace {

namespace fs = std::filesystem;

TEST(Resume, AllreduceKilledAfterACheckpointContinuesBitForBit) {
  // 1280 samples, 2 workers x 32: 20 iterations; a checkpoint every 6.
  const auto job = SmallJob("allreduce", 2, 1280);
  ScratchDir whole, killed, resumed;
  LocalRun reference = RunLocal(job, whole.path);
  ASSERT_EQ(reference.rc, 0) << reference.out;
  ASSERT_EQ(reference.losses.size(), 20u) << reference.out;
  ASSERT_FALSE(reference.digest.empty()) << reference.out;

  const std::string ckpt = killed.path + "/ckpt";
  auto with_ckpt = job;
  with_ckpt.insert(with_ckpt.end(), {"--checkpoint-dir", ckpt, "--checkpoint-every", "6"});
  // Every process is SIGKILLed once the first checkpoint committed (mid-training).
  const bool held = RunLocalAndKill(
      with_ckpt, killed.path, [&] { return !Latest(ckpt).empty(); }, std::chrono::seconds(120));
  ASSERT_TRUE(held) << "the job ended before its first checkpoint committed";
  const std::string id = Latest(ckpt);
  ASSERT_TRUE(id == "it-00000006" || id == "it-00000012") << id;

  auto resume = job;
  resume.insert(resume.end(), {"--resume", ckpt});
  LocalRun after = RunLocal(resume, resumed.path);
  ASSERT_EQ(after.rc, 0) << after.out;
  EXPECT_EQ(after.digest, reference.digest) << after.out;
  const int64_t from = std::stoll(id.substr(3));
  ASSERT_EQ(after.losses.size(), static_cast<size_t>(20 - from)) << after.out;
  for (const auto& [it, loss] : after.losses) {
    EXPECT_EQ(loss, reference.losses[it]) << "iteration " << it;
  }
  // No temporary directory of the killed save is taken for a checkpoint.
  for (const auto& e : fs::directory_iterator(ckpt)) {
    const std::string name = e.path().filename();
    EXPECT_TRUE(name == "LATEST" || name == "OWNER" || name.rfind("it-", 0) == 0 ||
                name.rfind(".tmp-", 0) == 0)
        << name;
  }
}

}  // namespace
}  // namespace herd::testing
