// The life of a job in SchedulerCore: a declared model, workers finishing, a process failing,
// a death where the mode needs every worker, and deletion.

#include <gtest/gtest.h>

#include <thread>

#include "scheduler/scheduler_core.h"
#include "tests/unit/scheduler/test_jobs.h"

namespace herd::scheduler {
namespace {

using namespace std::chrono_literals;
using testing::ExampleSpec;
using testing::TempDir;

class Lifecycle : public ::testing::Test {
 protected:
  void Open(std::chrono::milliseconds timeout = 10s) {
    core_.reset();
    auto core = SchedulerCore::Open({dir_.path(), timeout});
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
  }
  // Registers `workers` workers named w0.. and returns their node ids.
  std::vector<uint64_t> Register(const std::string& job, int workers) {
    std::vector<uint64_t> ids;
    for (int i = 0; i < workers; ++i) {
      herd::v1::RegisterNodeRequest r;
      r.set_job(job);
      r.set_role(herd::v1::ROLE_WORKER);
      r.set_name("w" + std::to_string(i));
      auto got = core_->RegisterNode(r);
      EXPECT_TRUE(got.ok()) << got.status();
      ids.push_back(got.ok() ? got->node_id() : 0);
    }
    return ids;
  }
  absl::StatusOr<herd::v1::JobStatus> Finish(const std::string& job, uint64_t id, double accuracy) {
    herd::v1::FinishWorkerRequest req;
    req.set_job(job);
    req.set_node_id(id);
    req.mutable_result()->set_iterations(10);
    req.mutable_result()->set_final_loss(0.5);
    req.mutable_result()->set_test_accuracy(accuracy);
    (*req.mutable_result()->mutable_metrics())["f1"] = 0.75;
    return core_->FinishWorker(req);
  }
  herd::v1::DeclareModelRequest Declare(const std::string& job, uint64_t id,
                                        const herd::v1::JobSpec& layout, int64_t iterations) {
    herd::v1::DeclareModelRequest req;
    req.set_job(job);
    req.set_node_id(id);
    *req.mutable_tensors() = layout.tensors();
    req.set_planned_iterations(iterations);
    return req;
  }

  TempDir dir_;
  std::unique_ptr<SchedulerCore> core_;
};

TEST_F(Lifecycle, AJobCompletesWhenEveryWorkerFinished) {
  Open();
  ASSERT_TRUE(core_->SubmitJob(ExampleSpec("j", 2, 0)).ok());
  auto ids = Register("j", 2);
  ASSERT_EQ(core_->GetJob("j")->state(), herd::v1::JOB_RUNNING);
  auto after_one = Finish("j", ids[1], -1);
  ASSERT_TRUE(after_one.ok()) << after_one.status();
  EXPECT_EQ(after_one->state(), herd::v1::JOB_RUNNING) << "rank 0 is still training";
  EXPECT_TRUE(after_one->workers(1).finished());
  const uint64_t epoch = after_one->epoch();
  auto done = Finish("j", ids[0], 0.875);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), herd::v1::JOB_COMPLETED);
  EXPECT_GT(done->epoch(), epoch) << "the ending is a new epoch, so watchers hear it";
  EXPECT_DOUBLE_EQ(done->result().test_accuracy(), 0.875) << "rank 0's result is the job's";
  EXPECT_EQ(done->result().metrics().at("f1"), 0.75);
  EXPECT_GT(done->ended_unix_ms(), 0);
  // The plan tells every process the job ended; nothing else is accepted.
  herd::v1::GetPlanRequest pr;
  pr.set_job("j");
  pr.set_iteration(11);
  auto plan = core_->GetPlan(pr);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->job_state(), herd::v1::JOB_COMPLETED);
  herd::v1::SetModeRequest sm;
  sm.set_job("j");
  sm.mutable_mode()->set_mode("allreduce");
  EXPECT_EQ(core_->SetMode(sm).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(core_->CancelJob("j", "").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(Lifecycle, FinishedWorkersAreNotDeclaredDead) {
  Open(200ms);
  ASSERT_TRUE(core_->SubmitJob(ExampleSpec("j", 2, 0)).ok());
  auto ids = Register("j", 2);
  ASSERT_TRUE(Finish("j", ids[0], 0.9).ok());
  // w0 stops heartbeating (it finished); w1 keeps going for longer than the timeout.
  for (int i = 0; i < 10; ++i) {
    herd::v1::HeartbeatRequest hb;
    hb.set_job("j");
    hb.set_node_id(ids[1]);
    ASSERT_TRUE(core_->Heartbeat(hb).ok());
    std::this_thread::sleep_for(50ms);
  }
  auto job = core_->GetJob("j");
  EXPECT_EQ(job->state(), herd::v1::JOB_RUNNING);
  EXPECT_TRUE(job->workers(0).alive());
  ASSERT_TRUE(Finish("j", ids[1], -1).ok());
  EXPECT_EQ(core_->GetJob("j")->state(), herd::v1::JOB_COMPLETED);
}

TEST_F(Lifecycle, ADeadWorkerFailsAJobWhoseModeNeedsEveryWorker) {
  Open(300ms);
  ASSERT_TRUE(core_->SubmitJob(ExampleSpec("j", 2, 0)).ok());  // decentralized
  auto ids = Register("j", 2);
  for (int i = 0; i < 20 && core_->GetJob("j")->state() == herd::v1::JOB_RUNNING; ++i) {
    herd::v1::HeartbeatRequest hb;  // w0 stays, w1 is silent
    hb.set_job("j");
    hb.set_node_id(ids[0]);
    (void)core_->Heartbeat(hb);
    std::this_thread::sleep_for(50ms);
  }
  auto job = core_->GetJob("j");
  ASSERT_EQ(job->state(), herd::v1::JOB_FAILED);
  EXPECT_NE(job->failure_reason().find("'w1' (rank 1) declared dead"), std::string::npos)
      << job->failure_reason();
  EXPECT_NE(job->failure_reason().find("decentralized needs all 2 workers"), std::string::npos)
      << job->failure_reason();
  // The survivor's heartbeat answers with the ending, so it stops.
  herd::v1::HeartbeatRequest hb;
  hb.set_job("j");
  hb.set_node_id(ids[0]);
  auto answer = core_->Heartbeat(hb);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->job_state(), herd::v1::JOB_FAILED);
}

TEST_F(Lifecycle, AProcessFailsTheJobAndTheFirstEndingStands) {
  Open();
  ASSERT_TRUE(core_->SubmitJob(ExampleSpec("j", 2, 0)).ok());
  auto ids = Register("j", 2);
  herd::v1::FailJobRequest req;
  req.set_job("j");
  req.set_node_id(ids[1]);
  req.set_reason(std::string(5000, 'x'));
  auto failed = core_->FailJob(req);
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->state(), herd::v1::JOB_FAILED);
  EXPECT_EQ(failed->failed_process(), "worker 'w1' (rank 1)");
  EXPECT_LT(failed->failure_reason().size(), 1200u) << "a long reason is cut";
  req.set_node_id(ids[0]);
  req.set_reason("a consequence");
  auto again = core_->FailJob(req);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->failed_process(), "worker 'w1' (rank 1)") << "the first ending stands";
  req.set_node_id(99);
  EXPECT_EQ(core_->FailJob(req).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(Lifecycle, TheFirstWorkerDeclaresTheLayoutAndTheOthersMustMatchIt) {
  Open();
  auto spec = ExampleSpec("j", 2, 0);
  const auto layout = spec;
  spec.clear_tensors();
  ASSERT_TRUE(core_->SubmitJob(spec).ok()) << "a JobSpec need not list tensors";
  auto ids = Register("j", 2);
  EXPECT_EQ(core_->GetJob("j")->state(), herd::v1::JOB_PENDING) << "no layout yet";
  auto declared = core_->DeclareModel(Declare("j", ids[0], layout, 100));
  ASSERT_TRUE(declared.ok()) << declared.status();
  EXPECT_EQ(declared->spec().tensors_size(), 2);
  EXPECT_EQ(declared->spec().tensors(1).dtype(), "fp32") << "normalised like a submission";
  EXPECT_EQ(declared->state(), herd::v1::JOB_RUNNING);
  EXPECT_EQ(declared->planned_iterations(), 100);

  const std::string before = core_->GetJob("j")->SerializeAsString();
  auto other = layout;
  other.mutable_tensors(0)->set_shape(1, 783);
  auto mismatch = core_->DeclareModel(Declare("j", ids[1], other, 100));
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(mismatch.status().message()).find("tensor #0 is 'fc1.weight' [128x783]"),
            std::string::npos)
      << mismatch.status();
  auto count = core_->DeclareModel(Declare("j", ids[1], layout, 99));
  EXPECT_EQ(count.status().code(), absl::StatusCode::kFailedPrecondition) << count.status();
  EXPECT_EQ(core_->GetJob("j")->SerializeAsString(), before) << "refusals change nothing";
  EXPECT_TRUE(core_->DeclareModel(Declare("j", ids[1], layout, 100)).ok());

  // A switch the job would never reach is refused.
  herd::v1::SetModeRequest sm;
  sm.set_job("j");
  sm.mutable_mode()->set_mode("allreduce");
  sm.set_from_iteration(100);
  auto late = core_->SetMode(sm);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(late.status().message()).find("runs 100 iterations"), std::string::npos)
      << late.status();
  sm.set_from_iteration(99);
  EXPECT_TRUE(core_->SetMode(sm).ok());
}

TEST_F(Lifecycle, AnEndedJobCanBeDeletedAndItsNameReused) {
  Open();
  ASSERT_TRUE(core_->SubmitJob(ExampleSpec("j", 2, 0)).ok());
  auto running = core_->DeleteJob("j");
  EXPECT_EQ(running.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(running.message()).find("herd job cancel j"), std::string::npos);
  ASSERT_TRUE(core_->CancelJob("j", "done with it").ok());
  ASSERT_TRUE(core_->DeleteJob("j").ok());
  EXPECT_EQ(core_->GetJob("j").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(core_->DeleteJob("j").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(core_->SubmitJob(ExampleSpec("j", 2, 0)).ok()) << "the name is free again";
  // The deletion is durable: a restarted scheduler has only the new job.
  Open();
  auto job = core_->GetJob("j");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), herd::v1::JOB_PENDING);
}

TEST_F(Lifecycle, LongCancelReasonsAndBadMetricsAreRefused) {
  Open();
  ASSERT_TRUE(core_->SubmitJob(ExampleSpec("j", 1, 0)).ok());
  auto ids = Register("j", 1);
  EXPECT_EQ(core_->CancelJob("j", std::string(3 << 20, 'r')).status().code(),
            absl::StatusCode::kInvalidArgument);
  herd::v1::FinishWorkerRequest req;
  req.set_job("j");
  req.set_node_id(ids[0]);
  (*req.mutable_result()->mutable_metrics())["loss"] = std::nan("");
  EXPECT_EQ(core_->FinishWorker(req).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->GetJob("j")->state(), herd::v1::JOB_RUNNING);
}

}  // namespace
}  // namespace herd::scheduler
