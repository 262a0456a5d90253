// The scheduler paused with SIGSTOP for longer than the heartbeat timeout in the middle of an
// elastic job (docs/scheduler.md, "Following a job"), with real processes: a scheduler and four
// `herd worker`s over UCX. The workers do not stop with it: they run on to the horizon the
// scheduler granted before it stopped, then wait for more. Nothing is lost: after SIGCONT nobody
// is declared dead for the silence (the scheduler knows it did not run and does not count its
// own pause against the workers), the job completes with every worker, and the model is bit for
// bit the model of the same job undisturbed.
#include <sys/wait.h>

#include "tests/integration/worker/elastic_jobs.h"

namespace herd::elastic_testing {
namespace {

// The last iteration in a worker's loss file (-1: none yet).
long long LastIteration(const std::string& loss_file) {
  std::ifstream in(loss_file);
  long long last = -1;
  for (std::string line; std::getline(in, line);) last = std::max(last, std::atoll(line.c_str()));
  return last;
}

bool Alive(pid_t pid) { return ::waitpid(pid, nullptr, WNOHANG) == 0; }

class PausedScheduler : public ElasticJob {
 protected:
  static constexpr int kWorkers = 4;
  static constexpr int kSamples = 12000;  // about 93 iterations of 4 x 32

  // Runs `job` to its end with every worker, calling `during` once worker 0 completed
  // iteration 30. Returns the JSON status.
  template <typename During>
  std::string Run(const std::string& job, During during) {
    Submit(job, kWorkers, kSamples, "{min_workers: 2, max_failures: 1}");
    std::vector<pid_t> w;
    for (int i = 0; i < kWorkers; ++i) w.push_back(Worker(job, i));
    WaitForIteration(job, 30);
    during(w);
    for (int i = 0; i < kWorkers; ++i) {
      EXPECT_EQ(ExitCode(w[i], 180), 0) << ReadFile(Log(job + "-w" + std::to_string(i)));
    }
    const std::string status = Status(job);
    EXPECT_NE(status.find("COMPLETED"), std::string::npos) << status << sched_.log();
    EXPECT_NE(status.find("completed: 4 of 4 workers finished"), std::string::npos) << status;
    return Json(job);
  }
};

TEST_F(PausedScheduler, WorkersRunOnThroughASigstopAndTheJobEndsWithTheUndisturbedModel) {
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "3s"});
  const std::string undisturbed = Run("undisturbed", [](const std::vector<pid_t>&) {});

  long long at_stop = -1;
  long long after_pause = -1;
  const std::string paused = Run("paused", [&](const std::vector<pid_t>& w) {
    sched_.Signal(SIGSTOP);
    at_stop = LastIteration(LossFile("paused", 0));
    // Longer than the heartbeat timeout (3 s): a scheduler that counted its own pause as the
    // workers' silence would declare all four dead on waking.
    std::this_thread::sleep_for(std::chrono::seconds(4));
    after_pause = LastIteration(LossFile("paused", 0));
    for (int i = 0; i < kWorkers; ++i) EXPECT_TRUE(Alive(w[i])) << "worker " << i;
    sched_.Signal(SIGCONT);
  });

  // The workers ran on while the scheduler was stopped: the horizon it had granted held them.
  EXPECT_GT(after_pause, at_stop) << "at SIGSTOP " << at_stop << ", 4 s later " << after_pause;
  const std::string status = Status("paused");
  EXPECT_EQ(status.find("declared dead"), std::string::npos)
      << "the scheduler's pause is not the workers' death\n"
      << status;
  // Every worker completed every iteration once, in order, with the undisturbed run's losses:
  // nothing was skipped, repeated or computed differently.
  for (int i = 0; i < kWorkers; ++i) {
    const std::string losses = ReadFile(LossFile("paused", i));
    EXPECT_FALSE(losses.empty()) << "worker " << i;
    EXPECT_EQ(losses, ReadFile(LossFile("undisturbed", i))) << "worker " << i;
  }
  // allreduce is deterministic: the pause changed nothing in the arithmetic.
  const auto before = JsonStrings(undisturbed, "paramsDigest");
  const auto after = JsonStrings(paused, "paramsDigest");
  ASSERT_FALSE(before.empty()) << undisturbed;
  ASSERT_EQ(after.size(), before.size()) << paused;
  for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i], before.front()) << paused;
  std::printf("scheduler stopped at iteration %lld; worker 0 at %lld 4 s later\n", at_stop,
              after_pause);
}

}  // namespace
}  // namespace herd::elastic_testing
