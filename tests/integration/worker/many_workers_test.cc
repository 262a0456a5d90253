// `herd local` with many real worker processes on this one machine: 16 (about 45 s, most of it
// sixteen processes loading libtorch on two cores) and 32 (label slow). One job does what a
// long job on a cluster does: it switches mode mid-job (allreduce to dear, planned at submit),
// loses a worker to SIGKILL after the switch, goes on with the others (elastic: the scheduler
// declares it dead, the survivors roll back to the last iteration every one of them finished and
// run on with one fewer), and completes, trained.
#include <regex>

#include "tests/integration/worker/elastic_jobs.h"

namespace herd::elastic_testing {
namespace {

struct ManyCase {
  int workers;
  int batch_size;  // 40,000 samples / (workers x batch) = 78 iterations for either
};

class ManyWorkers : public ElasticJob, public ::testing::WithParamInterface<ManyCase> {};

TEST_P(ManyWorkers, SwitchModeMidJobSurviveAKilledWorkerAndComplete) {
  const ManyCase c = GetParam();
  const std::string job = "many-" + std::to_string(c.workers);
  const std::string state = dir_ + "/local";
  const int victim_rank = c.workers / 2 - 1;
  const pid_t local = SpawnHerd({"local",
                                 "--mode",
                                 "allreduce",
                                 "--model",
                                 "mlp",
                                 "--workers",
                                 std::to_string(c.workers),
                                 "--epochs",
                                 "1",
                                 "--batch-size",
                                 std::to_string(c.batch_size),
                                 "--train-samples",
                                 "40000",
                                 "--job",
                                 job,
                                 "--switch-mode-at",
                                 "20:dear",
                                 "--min-workers",
                                 std::to_string(c.workers / 2),
                                 "--max-failures",
                                 "1",
                                 "--state",
                                 state,
                                 "--json"},
                                Log("herd-local"));
  pids_.push_back(local);

  // Once worker 0 runs dear (iteration 20 on; the start of that many processes takes most of
  // the time), a worker in the middle of the ring is killed.
  const std::string switched = "iteration 20: dear";
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (ReadFile(state + "/logs/worker-0.log").find(switched) == std::string::npos &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_NE(ReadFile(state + "/logs/worker-0.log").find(switched), std::string::npos)
      << ReadFile(Log("herd-local"));
  const std::string victim = "worker-" + std::to_string(victim_rank);
  const pid_t pid = FindProcess(local, {"worker", "--job " + job, "--name " + victim + " "});
  ASSERT_GT(pid, 0) << ReadFile(Log("herd-local"));
  ::kill(pid, SIGKILL);

  EXPECT_EQ(ExitCode(local, 300), 0) << ReadFile(Log("herd-local"));
  const std::string out = ReadFile(Log("herd-local"));
  EXPECT_NE(out.find(victim + " was killed by signal 9 (Killed); elastic job " + job +
                     " goes on without it"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\"modes\":\"allreduce (iterations 0-19), dear (iterations 20-77)\""),
            std::string::npos)
      << out;
  std::smatch accuracy;
  ASSERT_TRUE(std::regex_search(out, accuracy, std::regex("\"test_accuracy\":([0-9.]+)"))) << out;
  EXPECT_GT(std::atof(accuracy[1].str().c_str()), 0.65) << out;

  const std::string scheduler = ReadFile(state + "/logs/scheduler.log");
  EXPECT_NE(scheduler.find("worker '" + victim + "' (rank " + std::to_string(victim_rank) +
                           ") declared dead"),
            std::string::npos)
      << scheduler;
  EXPECT_NE(scheduler.find("completed: " + std::to_string(c.workers - 1) + " of " +
                           std::to_string(c.workers) + " workers finished 78 iterations"),
            std::string::npos)
      << scheduler;
  // Every survivor ran the new mode with one fewer after the death.
  for (int w = 0; w < c.workers; ++w) {
    if (w == victim_rank) continue;
    const std::string log = ReadFile(state + "/logs/worker-" + std::to_string(w) + ".log");
    EXPECT_NE(log.find("with " + std::to_string(c.workers - 1) + " workers"), std::string::npos)
        << "worker " << w << "\n"
        << log;
    EXPECT_NE(log.find("done: 78 iterations"), std::string::npos) << "worker " << w << "\n" << log;
  }
}

std::string CaseName(const ::testing::TestParamInfo<ManyCase>& info) {
  return std::to_string(info.param.workers) + "Workers";
}

// 16 in the default suite; 32 behind `slow` (many_workers_slow_test, this file built with
// HERD_THIRTY_TWO_WORKERS).
#ifndef HERD_THIRTY_TWO_WORKERS
INSTANTIATE_TEST_SUITE_P(Local, ManyWorkers, ::testing::Values(ManyCase{16, 32}), CaseName);
#else
INSTANTIATE_TEST_SUITE_P(Local, ManyWorkers, ::testing::Values(ManyCase{32, 16}), CaseName);
#endif

}  // namespace
}  // namespace herd::elastic_testing
