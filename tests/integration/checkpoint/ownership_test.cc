// Who owns a checkpoint directory, through the real `herd local`: a run commits and retires
// only its own checkpoints, so the same job run again into a used directory, or another job
// writing into it, never deletes what the first run committed; a run that resumes from the
// directory continues it (and still keeps the finished run's checkpoints); and a job whose
// final checkpoint failed says so in its exit code instead of reporting success.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include "checkpoint/catalog.h"
#include "checkpoint/env.h"
#include "tests/integration/checkpoint/local_runs.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/integration/storage/small_disk.h"

namespace herd::testing {
namespace {

namespace fs = std::filesystem;
using scheduler::testing::CliResult;
using ::testing::HasSubstr;

// 512 samples, 2 workers x 32: 8 iterations; a checkpoint every 3 (it-3, it-6, final it-8).
std::vector<std::string> Job(const std::string& ckpt, const std::string& name = "own") {
  auto args = SmallJob("allreduce", 2, 512);
  args.insert(args.end(), {"--job", name, "--checkpoint-dir", ckpt, "--checkpoint-every", "3",
                           "--keep-last", "1"});
  return args;
}

// Runs a command through the shell; its exit code and output (stdout and stderr).
CliResult RunShell(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The ids of DIR's checkpoints whose every checksum holds, oldest first.
std::vector<std::string> GoodCheckpoints(const std::string& dir) {
  std::vector<std::string> out;
  auto list = checkpoint::ListCheckpoints(checkpoint::PosixEnv(), dir);
  if (!list.ok()) return out;
  for (const auto& c : *list) {
    if (checkpoint::VerifyCheckpoint(checkpoint::PosixEnv(), c.path).ok()) out.push_back(c.id);
  }
  return out;
}

TEST(CheckpointOwnership, TheSameJobRunAgainIntoItsDirectoryDeletesNothingItDidNotCommit) {
  ScratchDir first, second;
  const std::string ckpt = first.path + "/ckpt";
  LocalRun one = RunLocal(Job(ckpt), first.path);
  ASSERT_EQ(one.rc, 0) << one.out;
  ASSERT_EQ(GoodCheckpoints(ckpt), std::vector<std::string>{"it-00000008"}) << one.out;
  auto before = checkpoint::ReadManifest(checkpoint::PosixEnv(), ckpt + "/it-00000008");
  ASSERT_TRUE(before.ok()) << before.status();

  // Again, without --resume: refused before anything runs, naming the directory's owner.
  LocalRun two = RunLocal(Job(ckpt), second.path);
  EXPECT_NE(two.rc, 0) << two.out;
  EXPECT_THAT(two.out, HasSubstr(ckpt)) << two.out;
  EXPECT_THAT(two.out, HasSubstr("--resume")) << two.out;
  // The first run's checkpoint is there, whole and unchanged.
  EXPECT_EQ(GoodCheckpoints(ckpt), std::vector<std::string>{"it-00000008"});
  auto after = checkpoint::ReadManifest(checkpoint::PosixEnv(), ckpt + "/it-00000008");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->created_unix_ms(), before->created_unix_ms());
  EXPECT_EQ(after->params_digest(), before->params_digest());
}

TEST(CheckpointOwnership, AnotherJobCannotWriteIntoAJobsDirectory) {
  ScratchDir first, second;
  const std::string ckpt = first.path + "/ckpt";
  LocalRun one = RunLocal(Job(ckpt, "owner"), first.path);
  ASSERT_EQ(one.rc, 0) << one.out;
  LocalRun other = RunLocal(Job(ckpt, "intruder"), second.path);
  EXPECT_NE(other.rc, 0) << other.out;
  EXPECT_THAT(other.out, HasSubstr("owner")) << other.out;
  EXPECT_EQ(GoodCheckpoints(ckpt), std::vector<std::string>{"it-00000008"});
}

TEST(CheckpointOwnership, AResumedRunContinuesTheDirectoryAndKeepsTheFinishedRunsCheckpoints) {
  ScratchDir first, second;
  const std::string ckpt = first.path + "/ckpt";
  // The first run ends with its final it-8 alone (keep-last 1).
  LocalRun one = RunLocal(Job(ckpt), first.path);
  ASSERT_EQ(one.rc, 0) << one.out;
  // Two epochs from it-8: iterations 8..15, its own checkpoints it-9, it-12, it-15 and the
  // final it-16, keep-last 1 of its own; the first run's it-8 stays.
  auto resume = Job(ckpt);
  for (size_t i = 0; i + 1 < resume.size(); ++i) {
    if (resume[i] == "--epochs") resume[i + 1] = "2";
  }
  resume.insert(resume.end(), {"--resume", ckpt});
  LocalRun two = RunLocal(resume, second.path);
  ASSERT_EQ(two.rc, 0) << two.out;
  EXPECT_EQ(GoodCheckpoints(ckpt), (std::vector<std::string>{"it-00000008", "it-00000016"}))
      << two.out;
  EXPECT_THAT(two.out, HasSubstr("\"last_checkpoint\":\"" + ckpt + "/it-00000016\"")) << two.out;
}

TEST(CheckpointOwnership, ResumingACheckpointPastTheJobsLastIterationSaysSo) {
  ScratchDir first, second;
  const std::string ckpt = first.path + "/ckpt";
  LocalRun one = RunLocal(Job(ckpt), first.path);  // ends with it-8
  ASSERT_EQ(one.rc, 0) << one.out;
  // Half the samples: 4 iterations, all behind the checkpoint's 8.
  auto shorter = SmallJob("allreduce", 2, 256);
  shorter.insert(shorter.end(), {"--resume", ckpt});
  LocalRun two = RunLocal(shorter, second.path);
  EXPECT_NE(two.rc, 0) << two.out;
  EXPECT_THAT(two.out, HasSubstr("iteration 8")) << two.out;
  EXPECT_THAT(two.out, HasSubstr("4 iterations")) << two.out;
}

TEST(CheckpointOwnership, AFailedFinalCheckpointIsAFailureOfHerdLocal) {
  if (!SmallDiskProcess::Supported()) GTEST_SKIP() << "unshare -rm with tmpfs is not allowed here";
  ScratchDir scratch;
  // The checkpoint directory is a 64 KiB disk: no worker's state file (hundreds of KiB) fits,
  // so every checkpoint, the final one too, fails with RESOURCE_EXHAUSTED.
  const std::string ckpt = scratch.path + "/ckpt";
  fs::create_directories(ckpt);
  std::string cmd = "unshare -rm sh -c 'mount -t tmpfs -o size=64k tmpfs \"$0\" && exec \"$@\"' " +
                    ckpt + " " + HERD_BINARY;
  auto args = Job(ckpt);
  args.insert(args.end(), {"--json", "--state", scratch.path + "/state"});
  for (const auto& a : args) cmd += " '" + a + "'";
  CliResult r = RunShell(cmd);
  EXPECT_EQ(r.rc, 4) << "the job's final checkpoint failed: " << r.out;
  EXPECT_THAT(r.out, HasSubstr("final checkpoint")) << r.out;
  // Nothing that failed is reported as the last checkpoint.
  EXPECT_THAT(r.out, HasSubstr("\"last_checkpoint\":\"\"")) << r.out;
}

}  // namespace
}  // namespace herd::testing
