// The long checkpoint matrix (label slow), with real processes through `herd local`:
//  - every mode: killed with SIGKILL after a checkpoint and resumed, a deterministic mode ends
//    with the parameters and the per-iteration losses of the run that never stopped; ps_async
//    (not deterministic) holds every push acknowledged before the cut, resumes at the
//    checkpoint's iteration and finishes;
//  - a checkpoint of 4 workers and 2 shards resumes at other worker and shard counts and in
//    another mode, starting from the checkpoint's model (rank 0's first loss is the one the
//    saved model gives on that batch);
//  - SIGTERM to a worker: the job checkpoints and every process exits 0; resumed, it ends as
//    the run that never stopped;
//  - SIGKILL while a save is being written or renamed: resume finds a whole checkpoint;
//  - a checkpoint of another model is refused, naming the first tensor that differs;
//  - `herd job checkpoint --wait` on a running job.

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpoint/env.h"
#include "checkpoint/reader.h"
#include "tests/integration/checkpoint/local_runs.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace herd::testing {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kSamples = 1280;  // 2 workers x 32: 20 iterations
constexpr int64_t kIterations = 20;

std::vector<std::string> With(std::vector<std::string> args, std::vector<std::string> extra) {
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// ps_async: no acknowledged update is lost at a cut. Every worker pushed once per iteration
// before it and waited for the acknowledgement, and the shard copies its keys only once every
// worker is at the cut: each key's clocks (pushes applied, per worker) are the cut on every
// worker.
void ExpectEveryPushBeforeTheCutApplied(const std::string& path, int64_t cut) {
  auto reader = checkpoint::OpenCheckpoint(checkpoint::PosixEnv(), path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const std::optional<std::string> keys = (*reader)->Value("shard-0", "shard/keys");
  ASSERT_TRUE(keys.has_value());
  int checked = 0;
  const std::vector<std::string> lines = absl::StrSplit(*keys, '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    const std::vector<std::string> f = absl::StrSplit(line, ' ');
    ASSERT_EQ(f.size(), 3u) << line;
    const std::optional<std::string> clocks =
        (*reader)->Value("shard-0", absl::StrCat("clocks/", f[0], "@", f[1]));
    ASSERT_TRUE(clocks.has_value()) << line;
    EXPECT_EQ(*clocks, absl::StrCat(cut, ",", cut)) << "key " << line;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

class EveryMode : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryMode, KilledAfterACheckpointAndResumed) {
  const std::string mode = GetParam();
  const bool deterministic = mode != "ps_async";
  const auto job = SmallJob(mode, 2, kSamples);
  ScratchDir whole, killed, resumed;
  LocalRun reference = RunLocal(job, whole.path);
  ASSERT_EQ(reference.rc, 0) << reference.out;
  ASSERT_EQ(reference.losses.size(), static_cast<size_t>(kIterations));

  const std::string ckpt = killed.path + "/ckpt";
  ASSERT_TRUE(RunLocalAndKill(
      With(job, {"--checkpoint-dir", ckpt, "--checkpoint-every", "6"}), killed.path,
      [&] { return !Latest(ckpt).empty(); }, std::chrono::seconds(180)));
  const int64_t from = std::stoll(Latest(ckpt).substr(3));
  if (!deterministic) ExpectEveryPushBeforeTheCutApplied(ckpt + "/" + Latest(ckpt), from);
  LocalRun after = RunLocal(With(job, {"--resume", ckpt}), resumed.path);
  ASSERT_EQ(after.rc, 0) << after.out;
  ASSERT_EQ(after.losses.size(), static_cast<size_t>(kIterations - from)) << after.out;
  EXPECT_EQ(after.losses.begin()->first, from);
  if (!deterministic) return;
  EXPECT_EQ(after.digest, reference.digest) << mode << "\n" << after.out;
  for (const auto& [it, loss] : after.losses) {
    EXPECT_EQ(loss, reference.losses[it]) << mode << ": iteration " << it;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, EveryMode,
                         ::testing::Values("allreduce", "dear", "lp", "sparse", "topk_allgather",
                                           "decentralized", "decentralized_lp", "clps", "ps_sync",
                                           "ps_async", "ps_ec"));

// ps_sync and ps_ec at 4 workers, where the order a round's pushes are summed in matters (with
// 2, a + b == b + a): the shard sums in rank order, so a resumed run ends bit for bit as the
// run that never stopped, as the collective modes do.
class FourWorkerPs : public ::testing::TestWithParam<std::string> {};

TEST_P(FourWorkerPs, KilledAfterACheckpointAndResumedContinuesBitForBit) {
  const std::string mode = GetParam();
  const auto job = With(SmallJob(mode, 4, 2 * kSamples, 1), {"--seed", "5"});  // 20 iterations
  ScratchDir whole, killed, resumed;
  LocalRun reference = RunLocal(job, whole.path);
  ASSERT_EQ(reference.rc, 0) << reference.out;
  ASSERT_EQ(reference.losses.size(), static_cast<size_t>(kIterations));
  const std::string ckpt = killed.path + "/ckpt";
  ASSERT_TRUE(RunLocalAndKill(
      With(job, {"--checkpoint-dir", ckpt, "--checkpoint-every", "6"}), killed.path,
      [&] { return !Latest(ckpt).empty(); }, std::chrono::seconds(180)));
  const int64_t from = std::stoll(Latest(ckpt).substr(3));
  LocalRun after = RunLocal(With(job, {"--resume", ckpt}), resumed.path);
  ASSERT_EQ(after.rc, 0) << after.out;
  ASSERT_EQ(after.losses.size(), static_cast<size_t>(kIterations - from)) << after.out;
  EXPECT_EQ(after.digest, reference.digest) << mode << "\n" << after.out;
  for (const auto& [it, loss] : after.losses) {
    EXPECT_EQ(loss, reference.losses[it]) << mode << ": iteration " << it;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, FourWorkerPs, ::testing::Values("ps_sync", "ps_ec"));

// A checkpoint of 4 workers and 2 shards (ps_sync, iteration 4 of 10 at 4 x 32), resumed.
struct Reshape {
  std::string mode;
  int workers;
  int servers;
};

class OtherShape : public ::testing::TestWithParam<Reshape> {};

TEST_P(OtherShape, ResumesFromTheSavedModel) {
  const Reshape r = GetParam();
  ScratchDir first, second;
  const std::string ckpt = first.path + "/ckpt";
  auto job = With(SmallJob("ps_sync", 4, kSamples, 2),
                  {"--checkpoint-dir", ckpt, "--checkpoint-every", "4"});
  LocalRun saved = RunLocal(job, first.path);
  ASSERT_EQ(saved.rc, 0) << saved.out;
  const std::string at = ckpt + "/it-00000004";
  ASSERT_TRUE(fs::exists(at + "/MANIFEST"));
  LocalRun after = RunLocal(
      With(SmallJob(r.mode, r.workers, kSamples, r.servers), {"--resume", at}), second.path);
  ASSERT_EQ(after.rc, 0) << after.out;
  ASSERT_FALSE(after.losses.empty());
  EXPECT_EQ(after.losses.begin()->first, 4);
  // Rank 0's part of a global batch is its first B samples at any worker count, and the
  // parameters are the checkpoint's: the first loss is the saved run's at iteration 4
  // (within float noise of other thread counts).
  const double expected = std::strtod(saved.losses[4].c_str(), nullptr);
  const double got = std::strtod(after.losses.begin()->second.c_str(), nullptr);
  EXPECT_NEAR(got, expected, 1e-4 * std::abs(expected)) << after.out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, OtherShape,
                         ::testing::Values(Reshape{"ps_sync", 1, 1}, Reshape{"ps_sync", 2, 3},
                                           Reshape{"ps_sync", 3, 2}, Reshape{"ps_sync", 6, 1},
                                           Reshape{"allreduce", 2, 0},
                                           Reshape{"decentralized", 3, 0}, Reshape{"ps_ec", 2, 1},
                                           Reshape{"sparse", 2, 0}),
                         [](const ::testing::TestParamInfo<Reshape>& info) {
                           return info.param.mode + "_" + std::to_string(info.param.workers) +
                                  "w_" + std::to_string(info.param.servers) + "s";
                         });

TEST(Preemption, SigtermToAWorkerCheckpointsAndStopsEveryProcess) {
  const auto job = SmallJob("allreduce", 2, 3200);  // 50 iterations
  ScratchDir whole, preempted, resumed;
  LocalRun reference = RunLocal(job, whole.path);
  ASSERT_EQ(reference.rc, 0) << reference.out;

  const std::string ckpt = preempted.path + "/ckpt";
  const auto args =
      With(job, {"--checkpoint-dir", ckpt, "--json", "--losses", preempted.path + "/losses.txt",
                 "--state", preempted.path + "/state"});
  const pid_t pid = scheduler::testing::SpawnHerd(args, preempted.path + "/run.log");
  // Once training is under way, SIGTERM to one worker (a child named worker-1 in its logs).
  bool sent = false;
  for (int i = 0; i < 6000 && !sent; ++i) {
    if (scheduler::testing::ReadFile(preempted.path + "/losses.txt").size() > 40) {
      for (pid_t child : ChildrenOf(pid)) {
        const std::string cmd =
            scheduler::testing::ReadFile("/proc/" + std::to_string(child) + "/cmdline");
        if (cmd.find("worker-1") != std::string::npos) {
          ::kill(child, SIGTERM);
          sent = true;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(sent);
  const int status = scheduler::testing::WaitExit(pid, 120);
  const std::string log = scheduler::testing::ReadFile(preempted.path + "/run.log");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log;
  EXPECT_NE(log.find("PREEMPTED"), std::string::npos) << log;
  ASSERT_FALSE(Latest(ckpt).empty());

  LocalRun after = RunLocal(With(job, {"--resume", ckpt}), resumed.path);
  ASSERT_EQ(after.rc, 0) << after.out;
  EXPECT_EQ(after.digest, reference.digest) << after.out;
}

// SIGKILL of every process while a save is in a given phase: resume finds a whole checkpoint
// (the previous one, or the new one), and ends as the run that never stopped.
class KilledDuringASave : public ::testing::TestWithParam<std::string> {};

TEST_P(KilledDuringASave, ResumeFindsAWholeCheckpoint) {
  const std::string phase = GetParam();
  const auto job = SmallJob("allreduce", 2, kSamples);
  ScratchDir whole, killed, resumed;
  LocalRun reference = RunLocal(job, whole.path);
  ASSERT_EQ(reference.rc, 0) << reference.out;
  const std::string ckpt = killed.path + "/ckpt";
  // The second save (it-00000012) is the one killed: it-00000006 is whole by then.
  auto ready = [&] {
    if (phase == "writing") return fs::exists(ckpt + "/.tmp-it-00000012");
    if (phase == "renamed") return fs::exists(ckpt + "/it-00000012");
    return Latest(ckpt) == "it-00000012";  // "latest"
  };
  ASSERT_TRUE(RunLocalAndKill(With(job, {"--checkpoint-dir", ckpt, "--checkpoint-every", "6"}),
                              killed.path, ready, std::chrono::seconds(180)));
  LocalRun after = RunLocal(With(job, {"--resume", ckpt}), resumed.path);
  ASSERT_EQ(after.rc, 0) << after.out;
  EXPECT_EQ(after.digest, reference.digest) << after.out;
  const int64_t from = after.losses.begin()->first;
  EXPECT_TRUE(from == 6 || from == 12) << from;
}

INSTANTIATE_TEST_SUITE_P(Phases, KilledDuringASave,
                         ::testing::Values("writing", "renamed", "latest"));

TEST(Refused, ACheckpointOfAnotherModel) {
  ScratchDir run, other;
  const std::string ckpt = run.path + "/ckpt";
  auto job = SmallJob("allreduce", 1, 320);
  job.insert(job.end(), {"--checkpoint-dir", ckpt, "--checkpoint-every", "4"});
  LocalRun first = RunLocal(job, run.path);
  ASSERT_EQ(first.rc, 0) << first.out;
  ASSERT_FALSE(Latest(ckpt).empty());
  // The CNN's first tensor is not the MLP's: refused at submission, naming it.
  auto cnn = SmallJob("allreduce", 1, 320);
  for (auto& a : cnn) {
    if (a == "mlp") a = "cnn";
  }
  cnn.insert(cnn.end(), {"--resume", ckpt});
  LocalRun refused = RunLocal(cnn, other.path);
  EXPECT_EQ(refused.rc, 1) << refused.out;
  EXPECT_NE(refused.out.find("tensor #0"), std::string::npos) << refused.out;
}

// `herd job checkpoint NAME --wait` on a running job: committed at the first iteration no
// worker had begun, shown by `herd job status`; then the job is killed and resumed from it.
TEST(OnDemand, HerdJobCheckpointWaitsForTheCommit) {
  const auto job = SmallJob("allreduce", 2, 6400);  // 100 iterations
  ScratchDir run;
  const std::string ckpt = run.path + "/ckpt";
  std::string committed;
  const bool held = RunLocalAndKill(
      With(job, {"--checkpoint-dir", ckpt}), run.path,
      [&] {
        if (scheduler::testing::ReadFile(run.path + "/losses.txt").size() < 20) return false;
        std::string port = scheduler::testing::ReadFile(run.path + "/state/scheduler.port");
        while (!port.empty() && port.back() == '\n') port.pop_back();
        auto r = scheduler::testing::RunHerd(
            {"job", "checkpoint", "local", "--scheduler", "127.0.0.1:" + port, "--wait"});
        committed = r.out;
        auto status = scheduler::testing::RunHerd(
            {"job", "status", "local", "--scheduler", "127.0.0.1:" + port});
        committed += status.out;
        return true;
      },
      std::chrono::seconds(180));
  ASSERT_TRUE(held);
  EXPECT_NE(committed.find("committed " + ckpt + "/it-"), std::string::npos) << committed;
  EXPECT_NE(committed.find("last checkpoint " + ckpt + "/it-"), std::string::npos) << committed;
  EXPECT_FALSE(Latest(ckpt).empty());
}

}  // namespace
}  // namespace herd::testing
