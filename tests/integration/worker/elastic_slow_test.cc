// Elastic membership with real processes, the longer runs (label slow): failures past
// max_failures fail the job with the count, a job that lost a worker a third in ends within
// 2 points of test accuracy of the same job undisturbed, and a job of three grows to four.
#include "tests/integration/worker/elastic_jobs.h"

namespace herd::elastic_testing {
namespace {

TEST_F(ElasticJob, FailuresPastMaxFailuresFailTheJobWithTheCount) {
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "3s"});
  Submit("flaky", 4, 60000, "{min_workers: 1, max_failures: 1}");
  std::vector<pid_t> w;
  for (int i = 0; i < 4; ++i) w.push_back(Worker("flaky", i));
  WaitForIteration("flaky", 5);
  ::kill(w[3], SIGKILL);
  // The first failure is survived: wait until the three went on, then lose another.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (JsonNumber(Json("flaky"), "resumedUnixMs") <= 0 &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(w[2], SIGKILL);
  for (int i : {0, 1}) {
    // Exit 3: the job ended without completing, failed by the scheduler (cli/command.h).
    EXPECT_EQ(ExitCode(w[i], 60), 3) << ReadFile(Log("flaky-w" + std::to_string(i)));
  }
  const std::string status = Status("flaky");
  EXPECT_NE(status.find("FAILED"), std::string::npos) << status;
  EXPECT_NE(status.find("2 worker failures, more than the job's max_failures of 1"),
            std::string::npos)
      << status;
  EXPECT_NE(ReadFile(Log("flaky-w0")).find("max_failures"), std::string::npos)
      << ReadFile(Log("flaky-w0"));
}

// The same job (same seed, data order and global batch) undisturbed and with a worker killed a
// third in: the rollback loses no update and the survivors keep the global batch, so the final
// test accuracy stays within 2 points.
TEST_F(ElasticJob, AJobThatLostAWorkerEndsNearTheUndisturbedAccuracy) {
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "3s"});
  const std::string bounds = "{min_workers: 2, max_failures: 2}";
  Submit("calm", 4, 30000, bounds);
  std::vector<pid_t> calm;
  for (int i = 0; i < 4; ++i) calm.push_back(Worker("calm", i));
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(ExitCode(calm[i], 180), 0) << ReadFile(Log("calm-w" + std::to_string(i)));
  }
  Submit("hit", 4, 30000, bounds);
  std::vector<pid_t> hit;
  for (int i = 0; i < 4; ++i) hit.push_back(Worker("hit", i));
  WaitForIteration("hit", 78);
  ::kill(hit[2], SIGKILL);
  for (int i : {0, 1, 3}) {
    ASSERT_EQ(ExitCode(hit[i], 180), 0) << ReadFile(Log("hit-w" + std::to_string(i)));
  }
  const double undisturbed = Accuracy(Status("calm"));
  const double disturbed = Accuracy(Status("hit"));
  EXPECT_GT(undisturbed, 0.7) << Status("calm");
  EXPECT_NEAR(disturbed, undisturbed, 0.02) << Status("hit");
  std::printf("test accuracy: undisturbed %.4f, a worker killed a third in %.4f\n", undisturbed,
              disturbed);
}

// Every mode that shrinks besides allreduce (elastic_test.cc): a worker killed a third in, the
// three survivors rebuild the mode for P = 3 (ring, Linear-Pipeline chain, SparDL teams, the
// decentralized peers) and complete the job.
class ElasticModes : public ElasticJob, public ::testing::WithParamInterface<const char*> {};

TEST_P(ElasticModes, AWorkerKilledAThirdInLeavesThreeThatFinishTheJob) {
  const std::string mode = GetParam();
  const std::string job = "shrink-" + std::string(mode == "topk_allgather" ? "topk" : mode);
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "3s"});
  Submit(job, 4, 30000, "{min_workers: 2, max_failures: 1}", mode);
  std::vector<pid_t> w;
  for (int i = 0; i < 4; ++i) w.push_back(Worker(job, i));
  WaitForIteration(job, 78);
  ::kill(w[1], SIGKILL);
  for (int i : {0, 2, 3}) {
    EXPECT_EQ(ExitCode(w[i], 180), 0) << ReadFile(Log(job + "-w" + std::to_string(i)));
  }
  const std::string status = Status(job);
  EXPECT_NE(status.find("COMPLETED"), std::string::npos) << status;
  EXPECT_NE(status.find("3 workers from iteration"), std::string::npos) << status;
  EXPECT_NE(ReadFile(Log(job + "-w0")).find("again with 3 workers"), std::string::npos)
      << ReadFile(Log(job + "-w0"));
  EXPECT_GT(Accuracy(status), 0.6) << status;
  std::printf("%s: test accuracy %.4f after losing a worker\n", mode.c_str(), Accuracy(status));
}

INSTANTIATE_TEST_SUITE_P(Modes, ElasticModes,
                         ::testing::Values("lp", "sparse", "topk_allgather", "decentralized"));

// The modes whose shrink takes more than rebuilding the executor for P = 3 (docs/elastic.md):
// ps_ec (the shard completes the open round with the survivors' pushes), clps (the reducer
// residuals follow the new chunk owners), decentralized_lp (the new ring neighbours' replicas
// are exchanged whole) and dear (its commit does not wait for the all-gathers in flight). A
// worker killed a third in: the three survivors go on within the heartbeat timeout plus 2 s,
// finish the job, and end within 2 points of test accuracy of the same job undisturbed.
class ElasticAgainstUndisturbed : public ElasticJob,
                                  public ::testing::WithParamInterface<const char*> {};

TEST_P(ElasticAgainstUndisturbed, AWorkerKilledAThirdInEndsNearTheUndisturbedRun) {
  const std::string mode = GetParam();
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "3s"});
  const std::string calm = FourWorkers("calm", mode, /*kill=*/false);
  int64_t killed_at = 0;
  const std::string hit = FourWorkers("hit", mode, /*kill=*/true, &killed_at);
  EXPECT_NE(calm.find("COMPLETED"), std::string::npos) << calm;
  EXPECT_NE(hit.find("COMPLETED"), std::string::npos) << hit;
  EXPECT_NE(hit.find("'w1' (rank 1) declared dead"), std::string::npos) << hit;
  EXPECT_NE(hit.find("3 workers from iteration"), std::string::npos) << hit;
  const std::string w0 = ReadFile(Log("hit-w0"));
  EXPECT_NE(w0.find(mode.rfind("ps_", 0) == 0 ? "3 live worker(s) from iteration"
                                              : "again with 3 workers"),
            std::string::npos)
      << w0;
  if (mode == "ps_ec") {
    EXPECT_NE(w0.find("own error-feedback residuals (about"), std::string::npos) << w0;
  }
  const long long resumed = JsonNumber(Json("hit"), "resumedUnixMs");
  ASSERT_GT(resumed, 0) << Json("hit");
  EXPECT_LT(resumed - killed_at, 3000 + 2000) << Json("hit");
  const double undisturbed = Accuracy(calm);
  const double disturbed = Accuracy(hit);
  EXPECT_GT(undisturbed, 0.6) << calm;
  EXPECT_NEAR(disturbed, undisturbed, 0.02) << hit;
  std::printf(
      "%s: kill to every survivor past the epoch %lld ms; test accuracy undisturbed %.4f, a "
      "worker killed a third in %.4f\n",
      mode.c_str(), resumed - killed_at, undisturbed, disturbed);
}

INSTANTIATE_TEST_SUITE_P(Modes, ElasticAgainstUndisturbed,
                         ::testing::Values("ps_ec", "clps", "decentralized_lp", "dear",
                                           "ps_async"));

// The same modes with the killed worker started again (allreduce: elastic_test.cc): it rejoins
// with the state of a live worker (in the decentralized modes its ring predecessor's model), the
// job ends with four. The replicated modes end with four identical replicas; the residuals of
// sparse and topk_allgather start at zero on the newcomer, which the updates average out.
class ElasticRejoin : public ElasticJob, public ::testing::WithParamInterface<const char*> {};

TEST_P(ElasticRejoin, AWorkerKilledAndRestartedRejoinsAndTheJobEndsWithFour) {
  const std::string mode = GetParam();
  const std::string job = "rejoin-" + std::string(mode == "topk_allgather" ? "topk" : mode);
  const std::string json = KillAndRestart(job, mode);
  if (mode.rfind("decentralized", 0) != 0) {  // the decentralized models differ per rank
    const auto digests = JsonStrings(json, "paramsDigest");
    ASSERT_GE(digests.size(), 4u) << json;
    for (const auto& d : digests) EXPECT_EQ(d, digests[0]) << json;
  }
  EXPECT_GT(Accuracy(Status(job)), 0.6) << Status(job);
  std::printf("%s: test accuracy %.4f after a worker rejoined\n", mode.c_str(),
              Accuracy(Status(job)));
  PrintRejoin(mode, job, json);
}

INSTANTIATE_TEST_SUITE_P(Modes, ElasticRejoin,
                         ::testing::Values("lp", "sparse", "topk_allgather", "decentralized",
                                           "clps", "decentralized_lp", "dear"));

// A job of three with `max_workers: 4` grows: a fourth `herd worker` under a new name, started
// while all three are alive (it registers once its model and data are loaded, seconds later:
// a few hundred iterations in), gets a new rank (3) at a new epoch after the horizon and the
// state of a
// live worker; the four split the spec's global batch of 3 x 32 and the job ends with four
// finished workers. The replicated modes end with four identical replicas.
class ElasticGrow : public ElasticJob, public ::testing::WithParamInterface<const char*> {};

TEST_P(ElasticGrow, AFourthWorkerJoinsAJobOfThreeAndTheJobEndsWithFour) {
  const std::string mode = GetParam();
  const std::string job = "grow-" + std::string(mode == "topk_allgather" ? "topk" : mode);
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "3s"});
  // 60000 samples in global batches of 96: 625 iterations. The newcomer's start (libtorch, the
  // model, the data) takes about 9 s on a loaded machine, in which the three run hundreds of
  // iterations; started any later, it joins at the end or not at all.
  Submit(job, 3, 60000, "{min_workers: 2, max_workers: 4, max_failures: 1}", mode);
  std::vector<pid_t> w;
  for (int i = 0; i < 3; ++i) w.push_back(Worker(job, i));
  WaitForIteration(job, 20);
  // No --rank: every slot is alive, so the scheduler gives the newcomer a new one.
  const pid_t extra =
      SpawnHerd({"worker", "--scheduler", sched_.address(), "--job", job, "--name", "extra",
                 "--wait-for-job", "60", "--threads", "1", "--timeout", "60"},
                Log(job + "-extra"));
  pids_.push_back(extra);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ExitCode(w[i], 240), 0) << ReadFile(Log(job + "-w" + std::to_string(i)));
  }
  EXPECT_EQ(ExitCode(extra, 240), 0) << ReadFile(Log(job + "-extra"));
  const std::string status = Status(job);
  EXPECT_NE(status.find("COMPLETED"), std::string::npos) << status;
  EXPECT_NE(status.find("completed: 4 of 4 workers finished"), std::string::npos) << status;
  EXPECT_NE(status.find("worker 'extra' joined as new rank 3 (4 of at most 4 workers); 4 "
                        "workers from iteration"),
            std::string::npos)
      << status;
  EXPECT_EQ(status.find("declared dead"), std::string::npos) << status;
  EXPECT_NE(status.find("0 of at most 1 failures"), std::string::npos) << status;
  const std::string joined = ReadFile(Log(job + "-extra"));
  EXPECT_NE(joined.find("joined job '" + job + "' at iteration"), std::string::npos) << joined;
  const std::string json = Json(job);
  if (mode.rfind("decentralized", 0) != 0) {  // the decentralized models differ per rank
    const auto digests = JsonStrings(json, "paramsDigest");
    ASSERT_GE(digests.size(), 4u) << json;
    for (const auto& d : digests) EXPECT_EQ(d, digests[0]) << json;
  }
  EXPECT_GT(Accuracy(status), 0.6) << status;
  std::printf("%s: test accuracy %.4f after growing from 3 to 4 workers\n", mode.c_str(),
              Accuracy(status));
  PrintRejoin(mode, job, json);
}

INSTANTIATE_TEST_SUITE_P(Modes, ElasticGrow,
                         ::testing::Values("allreduce", "dear", "lp", "sparse", "topk_allgather",
                                           "decentralized", "decentralized_lp", "clps"));

// A job of three grown to four whose fourth worker then dies (SIGKILL): the three go on at
// P = 3 from the commit before the new epoch and complete the job. The grown slot stays an
// empty slot (a restart under its name, or another newcomer, would take it back): the job
// counts the death against max_failures and ends with 3 of its 4 slots finished.
TEST_F(ElasticJob, AGrownJobWhoseExtraWorkerDiesGoesOnWithThree) {
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "3s"});
  // 625 iterations: the newcomer joins, and is killed, well before the end (see ElasticGrow).
  Submit("grownkill", 3, 60000, "{min_workers: 3, max_workers: 4, max_failures: 1}");
  std::vector<pid_t> w;
  for (int i = 0; i < 3; ++i) w.push_back(Worker("grownkill", i));
  WaitForIteration("grownkill", 20);
  const pid_t extra =
      SpawnHerd({"worker", "--scheduler", sched_.address(), "--job", "grownkill", "--name", "extra",
                 "--wait-for-job", "60", "--threads", "1", "--timeout", "60"},
                Log("grownkill-extra"));
  pids_.push_back(extra);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (JsonNumbers(Json("grownkill"), "resumedUnixMs").empty() &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(JsonNumbers(Json("grownkill"), "resumedUnixMs").empty()) << Status("grownkill");
  ::kill(extra, SIGKILL);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ExitCode(w[i], 240), 0) << ReadFile(Log("grownkill-w" + std::to_string(i)));
  }
  const std::string status = Status("grownkill");
  EXPECT_NE(status.find("COMPLETED"), std::string::npos) << status;
  EXPECT_NE(status.find("worker 'extra' joined as new rank 3"), std::string::npos) << status;
  EXPECT_NE(status.find("worker 'extra' (rank 3) declared dead"), std::string::npos) << status;
  EXPECT_NE(status.find("3 workers from iteration"), std::string::npos) << status;
  EXPECT_NE(status.find("1 of at most 1 failures"), std::string::npos) << status;
  EXPECT_NE(status.find("completed: 3 of 4 workers finished"), std::string::npos) << status;
  // min_workers 3 counts live workers: three alive is not a pause.
  EXPECT_EQ(status.find("paused"), std::string::npos) << status;
  // The three survivors' replicas (and the job's result) are equal; the dead slot's result is
  // empty.
  const std::string json = Json("grownkill");
  std::vector<std::string> digests;
  for (const auto& d : JsonStrings(json, "paramsDigest")) {
    if (!d.empty()) digests.push_back(d);
  }
  ASSERT_EQ(digests.size(), 4u) << json;
  for (const auto& d : digests) EXPECT_EQ(d, digests[0]) << json;
  EXPECT_GT(Accuracy(status), 0.6) << status;
  std::printf("test accuracy after growing to four and losing the fourth: %.4f\n",
              Accuracy(status));
}

// A checkpoint of a job grown from three to four resumes: the checkpoint (requested once the
// fourth worker joined) holds the four workers' files and its manifest counts four, and a job
// of three resumed from it starts at its iteration, reads all four (the decentralized models
// are averaged over the four: a resume at another worker count) and completes.
TEST_F(ElasticJob, ACheckpointOfAGrownJobResumesWithThree) {
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "3s"});
  const std::string ckpt = dir_ + "/grown-ckpt";
  // 625 iterations: the newcomer joins well before the end (see ElasticGrow).
  Submit("grownck", 3, 60000, "{min_workers: 2, max_workers: 4, max_failures: 1}", "decentralized");
  std::vector<pid_t> w;
  for (int i = 0; i < 3; ++i) w.push_back(Worker("grownck", i));
  WaitForIteration("grownck", 20);
  const pid_t extra =
      SpawnHerd({"worker", "--scheduler", sched_.address(), "--job", "grownck", "--name", "extra",
                 "--wait-for-job", "60", "--threads", "1", "--timeout", "60"},
                Log("grownck-extra"));
  pids_.push_back(extra);
  // Once the four trained together (the join's event went on), a checkpoint.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (JsonNumbers(Json("grownck"), "resumedUnixMs").empty() &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto asked = RunHerd({"job", "checkpoint", "grownck", "--dir", ckpt, "--wait", "--wait-timeout",
                        "60", "--scheduler", sched_.address()});
  ASSERT_EQ(asked.rc, 0) << asked.out << Status("grownck");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ExitCode(w[i], 240), 0) << ReadFile(Log("grownck-w" + std::to_string(i)));
  }
  EXPECT_EQ(ExitCode(extra, 240), 0) << ReadFile(Log("grownck-extra"));
  EXPECT_NE(Status("grownck").find("completed: 4 of 4 workers finished"), std::string::npos)
      << Status("grownck");

  // The checkpoint's manifest, as `herd checkpoint` shows it: four workers.
  auto shown = RunHerd({"checkpoint", "list", ckpt});
  EXPECT_EQ(shown.rc, 0) << shown.out;
  EXPECT_TRUE(std::regex_search(shown.out, std::regex("decentralized +4 +0 "))) << shown.out;

  Submit("resumed", 3, 60000, "{min_workers: 2}\nresume_from: " + ckpt, "decentralized");
  std::vector<pid_t> r;
  for (int i = 0; i < 3; ++i) r.push_back(Worker("resumed", i));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ExitCode(r[i], 240), 0) << ReadFile(Log("resumed-w" + std::to_string(i)));
  }
  const std::string status = Status("resumed");
  EXPECT_NE(status.find("COMPLETED"), std::string::npos) << status;
  EXPECT_NE(status.find("decentralized with 4 workers"), std::string::npos) << status;
  const std::string w0 = ReadFile(Log("resumed-w0"));
  EXPECT_NE(w0.find("resuming from " + ckpt), std::string::npos) << w0;
  EXPECT_GT(Accuracy(status), 0.6) << status;
  std::printf("%s\ntest accuracy after resuming the grown job's checkpoint with three: %.4f\n",
              shown.out.c_str(), Accuracy(status));
}

// A checkpoint taken while the job runs without worker 0 (killed, not restarted) holds no file
// of its slot; a job resumed from it with four workers starts at the checkpoint's data
// position (the lowest worker that saved a file has it), not at the start of the epoch, and
// runs only the iterations left.
TEST_F(ElasticJob, ACheckpointTakenWithoutWorkerZeroResumesAtItsDataPosition) {
  sched_.Start(dir_ + "/scheduler", 0, {"--heartbeat-timeout", "3s"});
  const std::string ckpt = dir_ + "/shrunk-ckpt";
  Submit("shrunk", 4, 30000, "{min_workers: 2, max_failures: 1}", "decentralized");
  std::vector<pid_t> w;
  for (int i = 0; i < 4; ++i) w.push_back(Worker("shrunk", i));
  WaitForIteration("shrunk", 60);
  ::kill(w[0], SIGKILL);
  // Once the three went on without it, a checkpoint.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (JsonNumbers(Json("shrunk"), "resumedUnixMs").empty() &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto asked = RunHerd({"job", "checkpoint", "shrunk", "--dir", ckpt, "--wait", "--wait-timeout",
                        "60", "--scheduler", sched_.address()});
  ASSERT_EQ(asked.rc, 0) << asked.out << Status("shrunk");
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(ExitCode(w[i], 240), 0) << ReadFile(Log("shrunk-w" + std::to_string(i)));
  }
  std::smatch cut;
  ASSERT_TRUE(std::regex_search(asked.out, cut, std::regex("at iteration ([0-9]+)"))) << asked.out;
  const long long at = std::stoll(cut[1]);

  Submit("resumed", 4, 30000, "{min_workers: 2}\nresume_from: " + ckpt, "decentralized");
  std::vector<pid_t> r;
  for (int i = 0; i < 4; ++i) r.push_back(Worker("resumed", i));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(ExitCode(r[i], 240), 0) << ReadFile(Log("resumed-w" + std::to_string(i)));
  }
  // One epoch of 30000 samples at a global batch of 4 x 32: iterations 0..233; the data
  // position of iteration `at` is `at` global batches in.
  const std::string position = "at iteration " + std::to_string(at) + " (data epoch 0, offset " +
                               std::to_string(at * 128) + ")";
  for (int i = 0; i < 4; ++i) {
    const std::string log = ReadFile(Log("resumed-w" + std::to_string(i)));
    EXPECT_NE(log.find(position), std::string::npos) << position << "\n" << log;
  }
  const std::string status = Status("resumed");
  EXPECT_NE(status.find("completed iteration 233"), std::string::npos) << status;
  EXPECT_GT(Accuracy(status), 0.6) << status;
}

// A job killed and restarted a sixth in against the same job undisturbed: within 2 points.
TEST_F(ElasticJob, AJobWhoseWorkerRejoinedEndsNearTheUndisturbedAccuracy) {
  const std::string json = KillAndRestart("back", "allreduce");
  const double rejoined = Accuracy(Status("back"));
  Submit("calm", 4, 30000, "{min_workers: 2, max_failures: 2}");
  std::vector<pid_t> calm;
  for (int i = 0; i < 4; ++i) calm.push_back(Worker("calm", i));
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(ExitCode(calm[i], 180), 0) << ReadFile(Log("calm-w" + std::to_string(i)));
  }
  const double undisturbed = Accuracy(Status("calm"));
  EXPECT_NEAR(rejoined, undisturbed, 0.02) << Status("back");
  std::printf("test accuracy: undisturbed %.4f, a worker killed and rejoined %.4f\n", undisturbed,
              rejoined);
}

// ps_async: worker 1 killed a sixth in and restarted takes its slot back, starts at the
// iteration the scheduler serves it (the join's epoch, not 0) with the parameters pulled from
// the shard, and the job ends with four. Its accuracy is printed beside the undisturbed run's
// but not held within 2 points of it: rank 0's final accuracy in ps_async spreads from 0.69 to
// 0.78 between undisturbed runs of this job (the order of the asynchronous pushes), more than
// the rejoin moves it.
TEST_F(ElasticJob, APsAsyncWorkerKilledAndRestartedRejoinsAndTheJobEndsWithFour) {
  const std::string json = KillAndRestart("back-async", "ps_async");
  const std::string back = Status("back-async");
  const std::string joined = ReadFile(Log("back-async-w1-restarted"));
  EXPECT_NE(joined.find("pulls the parameters from the shards"), std::string::npos) << joined;
  // It goes on past the kill (iteration 40), where the live workers are.
  std::smatch at;
  ASSERT_TRUE(std::regex_search(joined, at, std::regex("joined job '[^']*' at iteration ([0-9]+)")))
      << joined;
  EXPECT_GE(std::atoll(at[1].str().c_str()), 40) << joined;
  const std::string calm = FourWorkers("calm-async", "ps_async", /*kill=*/false);
  EXPECT_NE(calm.find("completed: 4 of 4 workers finished"), std::string::npos) << calm;
  const double undisturbed = Accuracy(calm);
  const double rejoined = Accuracy(back);
  EXPECT_GT(undisturbed, 0.6) << calm;
  EXPECT_GT(rejoined, 0.6) << back;
  std::printf("ps_async: test accuracy undisturbed %.4f, a worker killed and rejoined %.4f\n",
              undisturbed, rejoined);
  PrintRejoin("ps_async", "back-async", json);
}

// ps_sync: worker 1 killed a sixth in and restarted takes its slot back with a live worker's
// iteration, round and data position (handed over on a communicator of two at the source's
// next iteration boundary, as in ps_ec), pulls that round's parameters from the shard, and is
// announced to the shard with the source's pushes of that round: its iteration and its round
// agree (a joiner that picked its round on its own could be one ahead, and its last push would
// be of a round nobody else pushes), and the job ends with four identical models (every worker
// pulls the shard's parameters).
TEST_F(ElasticJob, APsSyncWorkerKilledAndRestartedRejoinsAndTheJobEndsWithFour) {
  const std::string json = KillAndRestart("back-sync", "ps_sync");
  std::string joined;
  const std::smatch took = ExpectHandedBackByWorkerZero("back-sync", json, &joined);
  ASSERT_FALSE(took.empty());
  EXPECT_EQ(took[2].str(), took[1].str()) << "one round per iteration from 0: they agree";
  EXPECT_NE(joined.find("its executor pulls that round's parameters from the shards"),
            std::string::npos)
      << joined;
  // The executor it built pulled the round it was handed: its round is its iteration.
  const std::regex built("iteration ([0-9]+): ps_sync: [0-9]+ shards, round ([0-9]+)");
  int described = 0;
  for (auto it = std::sregex_iterator(joined.begin(), joined.end(), built);
       it != std::sregex_iterator(); ++it, ++described) {
    EXPECT_EQ((*it)[2].str(), (*it)[1].str()) << it->str() << "\n" << joined;
  }
  EXPECT_GE(described, 1) << joined;
  const std::string back = Status("back-sync");
  EXPECT_GT(Accuracy(back), 0.6) << back;
  std::printf(
      "ps_sync: test accuracy with a worker killed and rejoined %.4f; the joiner took %s bytes "
      "from worker %s in %s s at iteration %s (round %s)\n",
      Accuracy(back), took[3].str().c_str(), took[4].str().c_str(), took[5].str().c_str(),
      took[1].str().c_str(), took[2].str().c_str());
  PrintRejoin("ps_sync", "back-sync", json);
}

// ps_ec: worker 1 killed a sixth in and restarted takes its slot back with the state of a live
// worker (its model, optimizer state and round, handed over on a communicator of two at the
// source's next iteration boundary) and is announced to the shard with the source's pushes of
// that iteration: the job ends with four identical models, within 2 points of the same job
// undisturbed.
TEST_F(ElasticJob, APsEcWorkerKilledAndRestartedRejoinsAndTheJobEndsWithFour) {
  const std::string json = KillAndRestart("back-ec", "ps_ec");
  std::string joined;
  const std::smatch took = ExpectHandedBackByWorkerZero("back-ec", json, &joined);
  ASSERT_FALSE(took.empty());
  const std::string source = ReadFile(Log("back-ec-w0"));
  std::smatch handed;
  ASSERT_TRUE(std::regex_search(source, handed,
                                std::regex("to worker 1, back in its slot, in ([0-9.]+) s")))
      << source;
  const std::string calm = FourWorkers("calm-ec", "ps_ec", /*kill=*/false);
  EXPECT_NE(calm.find("completed: 4 of 4 workers finished"), std::string::npos) << calm;
  const double undisturbed = Accuracy(calm);
  const double rejoined = Accuracy(Status("back-ec"));
  EXPECT_GT(undisturbed, 0.7) << calm;
  EXPECT_NEAR(rejoined, undisturbed, 0.02) << Status("back-ec");
  std::printf(
      "ps_ec: test accuracy undisturbed %.4f, a worker killed and rejoined %.4f; the joiner took "
      "%s bytes from worker %s in %s s at iteration %s (round %s); the source's handover (from "
      "its boundary to the joiner's confirmation) %s s\n",
      undisturbed, rejoined, took[3].str().c_str(), took[4].str().c_str(), took[5].str().c_str(),
      took[1].str().c_str(), took[2].str().c_str(), handed[1].str().c_str());
  PrintRejoin("ps_ec", "back-ec", json);
}

}  // namespace
}  // namespace herd::elastic_testing

namespace herd::elastic_testing {
namespace {

// `herd local --min-workers 2 --max-restarts 1`: worker-1 killed with SIGKILL while the job
// runs is started again by herd local under its name, rejoins, and the job completes with four.
class HerdLocalRestart : public ElasticJob, public ::testing::WithParamInterface<const char*> {};

TEST_P(HerdLocalRestart, HerdLocalRestartsAKilledWorkerWhichRejoins) {
  const std::string mode = GetParam();
  const std::string state = dir_ + "/local";
  const std::string job = "local-rejoin";
  std::vector<std::string> args = {
      "local", "--mode",   mode, "--model",       "mlp", "--workers",
      "4",     "--epochs", "2",  "--batch-size",  "32",  "--train-samples",
      "60000", "--job",    job,  "--min-workers", "2",   "--max-restarts",
      "1",     "--state",  state};
  if (mode.rfind("ps_", 0) == 0) {
    args.push_back("--servers");
    args.push_back("1");
  }
  const pid_t local = SpawnHerd(args, Log("herd-local"));
  pids_.push_back(local);
  // Once the job runs, a few seconds in, worker-1 is killed. Two epochs (936 iterations, about
  // 35 s on a quiet machine) leave room for herd local's heartbeat timeout (10 s) and the
  // rejoin before the end: with one epoch a quiet machine finished the job before the
  // scheduler declared the worker dead, and the join then met the final barrier.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (ReadFile(state + "/logs/scheduler.log").find("(RUNNING") == std::string::npos &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::this_thread::sleep_for(std::chrono::seconds(5));
  const pid_t victim = FindProcess(local, {"worker", "--job " + job, "--name worker-1 "});
  ASSERT_GT(victim, 0) << ReadFile(Log("herd-local"));
  ::kill(victim, SIGKILL);
  EXPECT_EQ(ExitCode(local, 300), 0) << ReadFile(Log("herd-local"));
  const std::string out = ReadFile(Log("herd-local"));
  EXPECT_NE(out.find("worker-1 was killed by signal 9 (Killed); restarting it (1 of at most 1)"),
            std::string::npos)
      << out;
  const std::string restarted = ReadFile(state + "/logs/worker-1-restart-1.log");
  EXPECT_NE(restarted.find("joined job '" + job + "' at iteration"), std::string::npos)
      << restarted;
  if (mode == "ps_sync" || mode == "ps_ec") {
    // Its source handed it its iteration and round together (one round per iteration from 0).
    std::smatch at;
    ASSERT_TRUE(
        std::regex_search(restarted, at, std::regex("at iteration ([0-9]+) \\(round ([0-9]+)\\)")))
        << restarted;
    EXPECT_EQ(at[2].str(), at[1].str()) << restarted;
  }
  EXPECT_NE(ReadFile(state + "/logs/scheduler.log").find("COMPLETED"), std::string::npos)
      << ReadFile(state + "/logs/scheduler.log");
}

// ps_async takes the restarted worker back in its slot (it pulls the model from the shard);
// ps_sync and ps_ec too (a live worker hands it its iteration, round and data position, and in
// ps_ec the model).
INSTANTIATE_TEST_SUITE_P(Modes, HerdLocalRestart,
                         ::testing::Values("allreduce", "ps_async", "ps_sync", "ps_ec"));

}  // namespace
}  // namespace herd::elastic_testing
