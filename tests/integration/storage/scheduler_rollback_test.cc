// The real `herd scheduler` whose write-ahead log was cut at a record boundary: the log
// replays "cleanly" without the job's registrations, and the running job's processes are the
// witnesses that tell (scheduler/witness.cc). The restarted scheduler refuses with DATA_LOSS,
// the real `herd server` of the job exits 1 naming it, a later start refuses at once, and
// --accept-data-loss serves the job exactly as recovered.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "herd/v1/job.pb.h"
#include "scheduler/client/scheduler_client.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/integration/storage/wal_surgery.h"

namespace herd {
namespace {

namespace fs = std::filesystem;
using scheduler::testing::ReadFile;
using scheduler::testing::SchedulerProcess;
using scheduler::testing::SpawnHerd;
using scheduler::testing::WaitExit;

herd::v1::JobSpec RollbackPsJob(const std::string& name) {
  herd::v1::JobSpec spec;
  spec.set_name(name);
  spec.mutable_mode()->set_mode("ps_sync");
  spec.set_workers(1);
  spec.set_servers(1);
  spec.mutable_optimizer()->set_name("sgd");
  spec.mutable_optimizer()->set_learning_rate(0.5);
  auto* t = spec.add_tensors();
  t->set_name("w");
  t->add_shape(64);
  t->set_dtype("fp32");
  return spec;
}

class SchedulerRollbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("herd_sched_rollback_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << "scheduler log:\n" << scheduler_.log() << "\n";
      std::cerr << "shard log:\n" << ReadFile((dir_ / "shard.log").string()) << "\n";
    }
    if (shard_ > 0) {
      kill(shard_, SIGKILL);
      waitpid(shard_, nullptr, 0);
    }
    scheduler_.Stop(SIGKILL);
    fs::remove_all(dir_);
  }
  std::unique_ptr<scheduler::SchedulerClient> Client() {
    scheduler::ClientOptions o;
    o.address = scheduler_.address();
    auto c = scheduler::SchedulerClient::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  fs::path dir_;
  SchedulerProcess scheduler_;
  pid_t shard_ = -1;
};

TEST_F(SchedulerRollbackTest, SchedulerWhoseLogWasCutAtARecordBoundaryRefusesToGoBackInTime) {
  const fs::path state = dir_ / "scheduler";
  const std::vector<std::string> flags = {"--heartbeat-timeout", "900ms"};
  scheduler_.Start(state.string(), 0, flags);
  const int port = scheduler_.port();
  auto client = Client();  // this test's worker: a witness like any process of the job
  ASSERT_TRUE(client->SubmitJob(RollbackPsJob("cut")).ok());

  // The job runs: a real shard and the worker are registered, the shard heartbeats.
  shard_ = SpawnHerd({"server", "--scheduler", scheduler_.address(), "--job", "cut", "--state",
                      (dir_ / "shard").string(), "--listen", "127.0.0.1:0"},
                     (dir_ / "shard.log").string());
  bool shard_in = false;
  for (int i = 0; i < 200 * scheduler::testing::TimeScale() && !shard_in; ++i) {
    auto job = client->GetJob("cut");
    ASSERT_TRUE(job.ok()) << job.status();
    shard_in = job->servers(0).alive();
    if (!shard_in) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(shard_in) << "the shard did not register";
  herd::v1::RegisterNodeRequest reg;
  reg.set_job("cut");
  reg.set_role(herd::v1::ROLE_WORKER);
  reg.set_name("w0");
  auto worker = client->RegisterNode(reg);
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ(worker->job_state(), herd::v1::JOB_RUNNING);
  const uint64_t heard = client->SeenStateSeq();
  EXPECT_EQ(heard, worker->state_seq());
  scheduler_.Stop(SIGKILL);

  // Cut the log right after its first batch, the job's submission: what is left is a whole,
  // shorter log without either registration.
  const fs::path log = testing::NewestLog(state);
  ASSERT_FALSE(log.empty());
  const std::vector<uint64_t> ends = testing::BatchEnds(log);
  ASSERT_GE(ends.size(), 3u) << "the submission and two registrations";
  fs::resize_file(log, ends[0]);

  // Restarted on the same address, the scheduler serves until the first witness calls; the
  // shard's heartbeats and the worker's carry numbers the state lacks.
  scheduler_.Start(state.string(), port, flags);
  herd::v1::HeartbeatRequest beat;
  beat.set_job("cut");
  beat.set_node_id(worker->node_id());
  auto refused = client->Heartbeat(beat);
  ASSERT_TRUE(absl::IsDataLoss(refused.status())) << refused.status();
  const std::string said(refused.status().message());
  for (const std::string& part :
       {state.string(), std::string("went back in time"), std::string("recovered state sequence"),
        log.filename().string(), std::string("--accept-data-loss")}) {
    EXPECT_NE(said.find(part), std::string::npos) << part << " in: " << said;
  }
  // Every call answers it, nothing is served, and the scheduler reports it is not serving.
  EXPECT_TRUE(absl::IsDataLoss(client->GetJob("cut").status()));
  EXPECT_TRUE(absl::IsDataLoss(client->ListJobs().status()));
  EXPECT_FALSE(client->CheckHealth().ok());
  // The job's shard ends with the refusal (exit 1: an operator must act), its state untouched.
  const int shard_status = WaitExit(shard_, 30 * scheduler::testing::TimeScale());
  shard_ = -1;
  ASSERT_TRUE(WIFEXITED(shard_status)) << shard_status;
  EXPECT_EQ(WEXITSTATUS(shard_status), 1);
  EXPECT_NE(ReadFile((dir_ / "shard.log").string()).find("went back in time"), std::string::npos);
  scheduler_.Stop(SIGKILL);

  // A later start refuses at once, although no process is left to tell it.
  const std::string out = (dir_ / "refused.log").string();
  const int status =
      WaitExit(SpawnHerd({"scheduler", "--state", state.string(), "--listen", "127.0.0.1:0"}, out),
               30 * scheduler::testing::TimeScale());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(ReadFile(out).find("went back in time"), std::string::npos) << ReadFile(out);

  // The operator accepts the loss: the job is served as recovered, without the registrations
  // (the refusal changed nothing), and the worker's number no longer refuses anything.
  std::vector<std::string> accept = flags;
  accept.push_back("--accept-data-loss");
  scheduler_.Start(state.string(), port, accept);
  auto job = client->GetJob("cut");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), herd::v1::JOB_PENDING);
  EXPECT_EQ(job->epoch(), 1u);
  EXPECT_TRUE(job->servers(0).name().empty());
  EXPECT_TRUE(job->workers(0).name().empty());
  EXPECT_TRUE(absl::IsNotFound(client->Heartbeat(beat).status()));
  auto again = client->RegisterNode(reg);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_GT(again->state_seq(), heard);
  EXPECT_TRUE(client->CheckHealth().ok());
  EXPECT_NE(scheduler_.log().find("--accept-data-loss"), std::string::npos);
}

}  // namespace
}  // namespace herd
