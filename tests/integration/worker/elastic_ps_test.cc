// ps_sync in an elastic job, with real processes (docs/elastic.md, "ps_sync"): a scheduler, one
// `herd server` shard and four `herd worker`s; one worker killed with SIGKILL a third into the
// job. The shard completes the round the dead worker left open with the survivors' pushes (and
// a push it made before it died), the survivors go on without rerunning anything, split the
// global batch three ways, and the job completes.
#include "tests/integration/worker/elastic_jobs.h"

namespace herd::elastic_testing {
namespace {

TEST_F(ElasticJob, PsSyncGoesOnWithTheSurvivorsOfAKilledWorker) {
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "3s"});
  const std::string path = dir_ + "/ps.yaml";
  std::ofstream(path) << "name: ps\nmode: ps_sync\nworkers: 4\nservers: 1\nseed: 5\n"
                      << "optimizer: {name: momentum, learning_rate: 0.05}\n"
                      << "training: {model: mlp, epochs: 1, batch_size: 32, train_samples: 30000}\n"
                      << "elastic: {min_workers: 2, max_failures: 1}\n";
  auto submitted = RunHerd({"job", "submit", path, "--scheduler", sched_.address()});
  ASSERT_EQ(submitted.rc, 0) << submitted.out;
  const pid_t shard = SpawnHerd({"server", "--scheduler", sched_.address(), "--job", "ps",
                                 "--state", dir_ + "/shard", "--wait-for-job", "60"},
                                Log("ps-shard"));
  pids_.push_back(shard);
  std::vector<pid_t> w;
  for (int i = 0; i < 4; ++i) w.push_back(Worker("ps", i));
  WaitForIteration("ps", 78);
  const int64_t killed_at = NowUnixMs();
  ::kill(w[1], SIGKILL);
  for (int i : {0, 2, 3}) {
    EXPECT_EQ(ExitCode(w[i], 180), 0) << ReadFile(Log("ps-w" + std::to_string(i)));
  }
  EXPECT_EQ(ExitCode(shard, 60), 0) << ReadFile(Log("ps-shard"));
  const std::string status = Status("ps");
  EXPECT_NE(status.find("COMPLETED"), std::string::npos) << status;
  EXPECT_NE(status.find("'w1' (rank 1) declared dead"), std::string::npos) << status;
  EXPECT_NE(status.find("3 workers from iteration"), std::string::npos) << status;
  const std::string w0 = ReadFile(Log("ps-w0"));
  EXPECT_NE(w0.find("3 live worker(s) from iteration"), std::string::npos) << w0;
  const std::string json = Json("ps");
  const long long resumed = JsonNumber(json, "resumedUnixMs");
  ASSERT_GT(resumed, 0) << json;
  EXPECT_LT(resumed - killed_at, 3000 + 2000) << json;
  EXPECT_GT(Accuracy(status), 0.7) << status;
  std::printf("ps_sync: kill to every survivor past the epoch %lld ms; test accuracy %.4f\n",
              resumed - killed_at, Accuracy(status));
}

}  // namespace
}  // namespace herd::elastic_testing
