// Elastic jobs in SchedulerCore (docs/elastic.md): the JobSpec's `elastic` block, a dead worker
// that starts a new epoch with the live workers instead of failing the job, max_failures, the
// pause below min_workers and its pending_timeout, a worker that joins the running job (a new
// epoch, the end of a pause, the joins refused), a job that grows past `workers` up to
// max_workers, and the membership events.

#include <gtest/gtest.h>

#include <thread>

#include "plan/modes.h"
#include "scheduler/client/job_yaml.h"
#include "scheduler/elastic.h"
#include "scheduler/job_spec.h"
#include "scheduler/scheduler_core.h"
#include "tests/unit/scheduler/test_jobs.h"

namespace herd::scheduler {
namespace {

using namespace std::chrono_literals;
using testing::ExampleSpec;
using testing::TempDir;

herd::v1::JobSpec ElasticSpec(const std::string& name, int workers, int min_workers,
                              int max_failures, int64_t pending_timeout_ms) {
  auto spec = ExampleSpec(name, workers, 0);
  spec.mutable_mode()->clear_topology();
  spec.mutable_mode()->set_mode("allreduce");
  auto* e = spec.mutable_elastic();
  e->set_min_workers(min_workers);
  e->set_max_failures(max_failures);
  e->set_pending_timeout_ms(pending_timeout_ms);
  return spec;
}

TEST(ElasticSpec, DefaultsAndBoundsAreChecked) {
  auto spec = ExampleSpec("e", 4, 0);
  spec.mutable_elastic();
  auto ok = NormalizeJobSpec(spec);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->elastic().min_workers(), 1);
  EXPECT_EQ(ok->elastic().max_workers(), 4);
  EXPECT_EQ(ok->elastic().max_failures(), 3);
  EXPECT_EQ(ok->elastic().pending_timeout_ms(), 600000);
  EXPECT_FALSE(NormalizeJobSpec(ExampleSpec("plain", 4, 0))->has_elastic())
      << "a job without the block is not elastic";

  auto bad = [&](auto edit, const std::string& names) {
    auto s = ExampleSpec("e", 4, 0);
    edit(*s.mutable_elastic());
    auto got = NormalizeJobSpec(s);
    ASSERT_FALSE(got.ok()) << names;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(got.status().message().find(names), std::string::npos) << got.status();
  };
  bad([](auto& e) { e.set_min_workers(5); }, "min_workers must be between 1 and workers (4)");
  bad([](auto& e) { e.set_min_workers(-1); }, "min_workers");
  bad([](auto& e) { e.set_max_workers(3); }, "max_workers must be between workers (4)");
  bad([](auto& e) { e.set_max_workers(1 << 20); }, "max_workers");
  bad([](auto& e) { e.set_max_failures(-1); }, "max_failures");
  bad([](auto& e) { e.set_pending_timeout_ms(-5); }, "pending_timeout");
  bad([](auto& e) { e.set_pending_timeout_ms(int64_t{1} << 60); }, "pending_timeout");
}

TEST(ElasticSpec, ReadFromYaml) {
  auto spec = ParseJobSpecYaml(
      "name: e\nmode: allreduce\nworkers: 4\n"
      "elastic: {min_workers: 2, max_workers: 6, max_failures: 0, pending_timeout: 90s}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->elastic().min_workers(), 2);
  EXPECT_EQ(spec->elastic().max_workers(), 6);
  ASSERT_TRUE(spec->elastic().has_max_failures()) << "0 is a value, not 'unset'";
  EXPECT_EQ(spec->elastic().max_failures(), 0);
  EXPECT_EQ(spec->elastic().pending_timeout_ms(), 90000);
  for (const char* bad : {"elastic: {pending_timeout: inf}", "elastic: {pending_timeout: -3s}",
                          "elastic: {min_workers: two}", "elastic: {min: 2}", "elastic: 3"}) {
    auto got = ParseJobSpecYaml(std::string("name: e\nmode: allreduce\nworkers: 4\n") + bad);
    EXPECT_FALSE(got.ok()) << bad;
  }
}

class Elastic : public ::testing::Test {
 protected:
  void Open(std::chrono::milliseconds timeout) {
    auto core = SchedulerCore::Open({dir_.path(), timeout});
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
  }
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
  absl::StatusOr<herd::v1::RegisterNodeResponse> Join(const std::string& job,
                                                      const std::string& name) {
    herd::v1::RegisterNodeRequest r;
    r.set_job(job);
    r.set_role(herd::v1::ROLE_WORKER);
    r.set_name(name);
    return core_->RegisterNode(r);
  }
  void Report(const std::string& job, uint64_t id, int64_t iteration) {
    herd::v1::ReportIterationRequest r;
    r.set_job(job);
    r.set_node_id(id);
    r.set_iteration(iteration);
    auto got = core_->ReportIteration(r);
    EXPECT_TRUE(got.ok()) << got.status();
  }
  // Heartbeats of `alive` for `time` (the others stay silent).
  void KeepAlive(const std::string& job, const std::vector<uint64_t>& alive,
                 std::chrono::milliseconds time) {
    const auto end = std::chrono::steady_clock::now() + time;
    while (std::chrono::steady_clock::now() < end) {
      for (uint64_t id : alive) {
        herd::v1::HeartbeatRequest hb;
        hb.set_job(job);
        hb.set_node_id(id);
        (void)core_->Heartbeat(hb);
      }
      std::this_thread::sleep_for(30ms);
    }
  }

  TempDir dir_;
  std::unique_ptr<SchedulerCore> core_;
};

TEST_F(Elastic, ADeadWorkerStartsAnEpochWithTheLiveWorkersAndTheIterationRunsAgain) {
  Open(300ms);
  ASSERT_TRUE(core_->SubmitJob(ElasticSpec("j", 4, 2, 3, 60000)).ok());
  auto ids = Register("j", 4);
  ASSERT_EQ(core_->GetJob("j")->state(), herd::v1::JOB_RUNNING);
  for (int w = 0; w < 4; ++w) Report("j", ids[w], 4);
  // Workers 0 and 2 completed iteration 5 before worker 1 died; worker 3 had not.
  Report("j", ids[0], 5);
  Report("j", ids[2], 5);
  herd::v1::GetPlanRequest begun;
  begun.set_job("j");
  begun.set_iteration(6);
  begun.set_node_id(ids[0]);
  ASSERT_TRUE(core_->GetPlan(begun).ok());
  KeepAlive("j", {ids[0], ids[2], ids[3]}, 700ms);

  auto job = core_->GetJob("j");
  ASSERT_EQ(job->state(), herd::v1::JOB_RUNNING) << job->failure_reason();
  EXPECT_FALSE(job->workers(1).alive());
  EXPECT_EQ(job->worker_failures(), 1);
  EXPECT_EQ(job->membership_generation(), 1);
  EXPECT_EQ(job->epoch_start_iteration(), 5) << "worker 3 had not completed iteration 5";
  ASSERT_EQ(job->membership_events_size(), 1);
  const auto& ev = job->membership_events(0);
  EXPECT_NE(ev.what().find("'w1' (rank 1) declared dead"), std::string::npos) << ev.what();
  EXPECT_EQ(ev.workers_after(), 3);
  EXPECT_EQ(ev.rerun_from_iteration(), 5);
  EXPECT_EQ(ev.iterations_rerun(), 2) << "iterations 5 and 6 had been begun";
  EXPECT_GT(ev.detected_unix_ms(), 0);
  EXPECT_EQ(ev.resumed_unix_ms(), 0);

  herd::v1::GetPlanRequest req;
  req.set_job("j");
  req.set_iteration(5);
  auto plan = core_->GetPlan(req);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(std::vector<int>(plan->ranks().begin(), plan->ranks().end()),
            (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(plan->membership_generation(), 1);
  EXPECT_FALSE(plan->paused());

  // The survivors run iteration 5 again; once all three reported it the event says when.
  for (int w : {0, 2, 3}) Report("j", ids[w], 5);
  job = core_->GetJob("j");
  EXPECT_GE(job->membership_events(0).resumed_unix_ms(),
            job->membership_events(0).detected_unix_ms());

  // The dead worker failing on its way out does not fail the job.
  herd::v1::FailJobRequest fail;
  fail.set_job("j");
  fail.set_node_id(ids[1]);
  fail.set_reason("transport error");
  ASSERT_TRUE(core_->FailJob(fail).ok());
  EXPECT_EQ(core_->GetJob("j")->state(), herd::v1::JOB_RUNNING);
}

TEST_F(Elastic, InAModeTheShardsRunADeathRerunsNothing) {
  Open(300ms);
  auto spec = ElasticSpec("p", 4, 2, 3, 60000);
  spec.set_servers(1);
  spec.mutable_mode()->set_mode("ps_sync");
  ASSERT_TRUE(core_->SubmitJob(spec).ok());
  herd::v1::RegisterNodeRequest shard;
  shard.set_job("p");
  shard.set_role(herd::v1::ROLE_SERVER);
  shard.set_name("s0");
  auto server = core_->RegisterNode(shard);
  ASSERT_TRUE(server.ok()) << server.status();
  auto ids = Register("p", 4);
  ASSERT_EQ(core_->GetJob("p")->state(), herd::v1::JOB_RUNNING);
  for (int w = 0; w < 4; ++w) Report("p", ids[w], 4);
  herd::v1::GetPlanRequest begun;
  begun.set_job("p");
  begun.set_iteration(6);
  begun.set_node_id(ids[0]);
  ASSERT_TRUE(core_->GetPlan(begun).ok());
  KeepAlive("p", {server->node_id(), ids[0], ids[2], ids[3]}, 700ms);

  auto job = core_->GetJob("p");
  ASSERT_EQ(job->state(), herd::v1::JOB_RUNNING) << job->failure_reason();
  ASSERT_EQ(job->membership_events_size(), 1);
  EXPECT_EQ(job->membership_events(0).iterations_rerun(), 0)
      << "the shard completes the open rounds with the live workers; no worker rolls back";
}

TEST_F(Elastic, APsEcWorkerIsTakenBackInItsDeadSlotButTheJobDoesNotGrow) {
  Open(300ms);
  auto spec = ElasticSpec("ec", 3, 1, 3, 60000);
  spec.set_servers(1);
  spec.mutable_mode()->set_mode("ps_ec");
  // A max_workers the mode can never reach is refused when the job is submitted.
  spec.mutable_elastic()->set_max_workers(4);
  auto refused = core_->SubmitJob(spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("never grows"), std::string::npos) << refused.status();
  spec.mutable_elastic()->set_max_workers(3);
  ASSERT_TRUE(core_->SubmitJob(spec).ok());
  herd::v1::RegisterNodeRequest shard;
  shard.set_job("ec");
  shard.set_role(herd::v1::ROLE_SERVER);
  shard.set_name("s0");
  auto server = core_->RegisterNode(shard);
  ASSERT_TRUE(server.ok()) << server.status();
  auto ids = Register("ec", 3);
  ASSERT_EQ(core_->GetJob("ec")->state(), herd::v1::JOB_RUNNING);
  for (int w = 0; w < 3; ++w) Report("ec", ids[w], 5);
  KeepAlive("ec", {server->node_id(), ids[0], ids[2]}, 700ms);
  ASSERT_FALSE(core_->GetJob("ec")->workers(1).alive());

  // A live worker hands the restarted one its state (docs/elastic.md, "ps_sync and ps_ec").
  auto back = Join("ec", "w1");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rank(), 1) << "the same name takes its old slot";
  EXPECT_TRUE(back->joins_running_job());
  auto job = core_->GetJob("ec");
  EXPECT_TRUE(job->workers(1).alive());
  EXPECT_EQ(job->membership_generation(), 2);
  EXPECT_EQ(job->epoch_start_iteration(), 6);

  // All three slots alive again: a newcomer would grow the job, which ps_ec does not do (its
  // rounds are of the `workers` pushes).
  const std::string before = core_->GetJob("ec")->SerializeAsString();
  auto extra = Join("ec", "w9");
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(extra.status().message().find("all alive"), std::string::npos) << extra.status();
  EXPECT_EQ(core_->GetJob("ec")->SerializeAsString(), before);
}

TEST_F(Elastic, ARestartedWorkerTakesItsSlotBackAtANewEpoch) {
  Open(300ms);
  ASSERT_TRUE(core_->SubmitJob(ElasticSpec("j", 4, 2, 3, 60000)).ok());
  std::vector<uint64_t> ids;
  for (int w = 0; w < 4; ++w) {
    auto got = Join("j", "w" + std::to_string(w));
    ASSERT_TRUE(got.ok()) << got.status();
    // The last one starts the job: none of the four joins a running one.
    EXPECT_FALSE(got->joins_running_job()) << w;
    ids.push_back(got->node_id());
  }
  ASSERT_EQ(core_->GetJob("j")->state(), herd::v1::JOB_RUNNING);
  for (int w = 0; w < 4; ++w) Report("j", ids[w], 9);
  KeepAlive("j", {ids[0], ids[2], ids[3]}, 700ms);
  ASSERT_EQ(core_->GetJob("j")->membership_generation(), 1);
  // The three go on from iteration 10; two of them completed it, one is still in it.
  Report("j", ids[0], 10);
  Report("j", ids[2], 10);

  // Iteration 10 is the newest one a worker began (completed): the horizon granted.
  ASSERT_EQ(core_->GetJob("j")->issued_iteration(), 10);
  auto back = Join("j", "w1");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rank(), 1) << "the same name takes its old slot";
  EXPECT_TRUE(back->joins_running_job()) << "it learns that it joins a running job";
  auto job = core_->GetJob("j");
  EXPECT_TRUE(job->workers(1).alive());
  EXPECT_EQ(job->membership_generation(), 2) << "a new communicator with the newcomer";
  EXPECT_EQ(job->epoch_start_iteration(), 11)
      << "after every iteration a worker may have begun (the horizon): nobody runs one again";
  EXPECT_EQ(job->workers(1).joined_epoch(), job->epoch()) << "a new incarnation of slot 1";
  EXPECT_EQ(job->progress(1).iteration(), 10) << "the newcomer starts at the boundary";
  EXPECT_EQ(job->worker_failures(), 1) << "a join does not undo a failure";
  ASSERT_EQ(job->membership_events_size(), 2);
  const auto& ev = job->membership_events(1);
  EXPECT_TRUE(ev.joined());
  EXPECT_NE(ev.what().find("worker 'w1' (rank 1) rejoined"), std::string::npos) << ev.what();
  EXPECT_EQ(ev.workers_after(), 4);
  EXPECT_EQ(ev.rerun_from_iteration(), 11);
  EXPECT_EQ(ev.resumed_unix_ms(), 0);

  // Worker 3 finishes iteration 10 with the three it began it with; from 11 on there are four.
  herd::v1::GetPlanRequest req;
  req.set_job("j");
  req.set_iteration(10);
  auto before = core_->GetPlan(req);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(std::vector<int>(before->ranks().begin(), before->ranks().end()),
            (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(before->membership_generation(), 1);
  req.set_iteration(11);
  auto plan = core_->GetPlan(req);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(std::vector<int>(plan->ranks().begin(), plan->ranks().end()),
            (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(plan->membership_generation(), 2);
  ASSERT_EQ(plan->incarnations_size(), 1);
  EXPECT_EQ(plan->incarnations(0).rank(), 1);

  // Training went on once all four completed iteration 11: the rejoin time is on the event.
  for (int w : {0, 2, 3}) Report("j", ids[w], 11);
  EXPECT_EQ(core_->GetJob("j")->membership_events(1).resumed_unix_ms(), 0)
      << "the newcomer has not completed an iteration yet";
  Report("j", back->node_id(), 11);
  job = core_->GetJob("j");
  EXPECT_GE(job->membership_events(1).resumed_unix_ms(),
            job->membership_events(1).detected_unix_ms());
  EXPECT_EQ(job->completed_iteration(), 11);

  // Another name takes a dead slot too (a replacement), and is an event of its own.
  KeepAlive("j", {ids[0], back->node_id(), ids[3]}, 700ms);
  ASSERT_FALSE(core_->GetJob("j")->workers(2).alive());
  auto other = Join("j", "spare");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->rank(), 2);
  job = core_->GetJob("j");
  EXPECT_NE(job->membership_events(job->membership_events_size() - 1)
                .what()
                .find("worker 'spare' replaced dead 'w2' as rank 2"),
            std::string::npos)
      << job->membership_events(job->membership_events_size() - 1).what();
}

TEST_F(Elastic, AWorkerRestartedOnceTheHorizonReachedTheEndIsRefusedAndChangesNothing) {
  Open(300ms);
  ASSERT_TRUE(core_->SubmitJob(ElasticSpec("j", 4, 2, 3, 60000)).ok());
  const std::vector<uint64_t> ids = Register("j", 4);
  ASSERT_EQ(core_->GetJob("j")->state(), herd::v1::JOB_RUNNING);
  // The workers run iterations 0..10 (they declared 11).
  herd::v1::DeclareModelRequest declare;
  declare.set_job("j");
  declare.set_node_id(ids[0]);
  *declare.mutable_tensors() = core_->GetJob("j")->spec().tensors();
  declare.set_planned_iterations(11);
  ASSERT_TRUE(core_->DeclareModel(declare).ok());
  for (int w = 0; w < 4; ++w) Report("j", ids[w], 9);
  KeepAlive("j", {ids[0], ids[2], ids[3]}, 700ms);
  ASSERT_FALSE(core_->GetJob("j")->workers(1).alive());
  Report("j", ids[0], 10);
  ASSERT_EQ(core_->GetJob("j")->issued_iteration(), 10) << "the horizon is at the last iteration";

  // A join would begin at iteration 11, which nobody runs: it would wait for a plan forever.
  const std::string before = core_->GetJob("j")->SerializeAsString();
  auto late = Join("j", "w1");
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(late.status().message().find("ends after iteration 10"), std::string::npos)
      << late.status();
  EXPECT_NE(late.status().message().find("nothing left for it to do"), std::string::npos)
      << late.status();
  EXPECT_EQ(core_->GetJob("j")->SerializeAsString(), before);
}

TEST_F(Elastic, AJoinEndsAPauseOnceMinWorkersAreBack) {
  Open(300ms);
  ASSERT_TRUE(core_->SubmitJob(ElasticSpec("j", 4, 4, 5, 60000)).ok());
  auto ids = Register("j", 4);
  KeepAlive("j", {ids[0], ids[3]}, 700ms);
  auto job = core_->GetJob("j");
  ASSERT_GT(job->paused_since_unix_ms(), 0);
  const int64_t paused_since = job->paused_since_unix_ms();

  ASSERT_TRUE(Join("j", "w1").ok());
  job = core_->GetJob("j");
  EXPECT_EQ(job->paused_since_unix_ms(), paused_since) << "3 of min 4: still paused";
  EXPECT_NE(job->pause_reason().find("3 of 4 workers alive"), std::string::npos)
      << job->pause_reason();
  EXPECT_NE(job->pause_reason().find("empty slots: rank 2 ('w2')"), std::string::npos)
      << job->pause_reason();

  ASSERT_TRUE(Join("j", "w2").ok());
  job = core_->GetJob("j");
  EXPECT_EQ(job->paused_since_unix_ms(), 0) << "four again: the job goes on";
  EXPECT_TRUE(job->pause_reason().empty()) << job->pause_reason();
  herd::v1::GetPlanRequest req;
  req.set_job("j");
  req.set_iteration(job->epoch_start_iteration());
  auto plan = core_->GetPlan(req);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->paused());
  EXPECT_EQ(plan->ranks_size(), 4);
}

TEST_F(Elastic, ANewcomerGrowsTheJobUpToMaxWorkers) {
  Open(300ms);
  auto spec = ElasticSpec("g", 3, 2, 3, 60000);
  spec.mutable_elastic()->set_max_workers(4);
  ASSERT_TRUE(core_->SubmitJob(spec).ok());
  auto ids = Register("g", 3);
  ASSERT_EQ(core_->GetJob("g")->state(), herd::v1::JOB_RUNNING);
  for (uint64_t id : ids) Report("g", id, 4);

  // Every slot alive, 3 of max_workers 4: the newcomer gets a new rank at a new epoch.
  auto grown = Join("g", "extra");
  ASSERT_TRUE(grown.ok()) << grown.status();
  EXPECT_EQ(grown->rank(), 3) << "a new slot: rank = the slot count";
  EXPECT_TRUE(grown->joins_running_job()) << "it takes its state from the live workers";
  auto job = core_->GetJob("g");
  ASSERT_EQ(job->workers_size(), 4);
  ASSERT_EQ(job->progress_size(), 4);
  EXPECT_EQ(job->spec().workers(), 3) << "the spec (and its global batch) stays as submitted";
  EXPECT_TRUE(job->workers(3).alive());
  EXPECT_EQ(job->workers(3).name(), "extra");
  EXPECT_EQ(job->progress(3).rank(), 3);
  EXPECT_EQ(job->progress(3).iteration(), 4) << "the newcomer starts at the epoch's boundary";
  EXPECT_EQ(job->epoch_start_iteration(), 5);
  EXPECT_EQ(job->membership_generation(), 1);
  EXPECT_EQ(job->worker_failures(), 0) << "a planned scale change is no failure";
  ASSERT_EQ(job->membership_events_size(), 1);
  EXPECT_TRUE(job->membership_events(0).joined());
  EXPECT_NE(job->membership_events(0).what().find(
                "worker 'extra' joined as new rank 3 (4 of at most 4 workers)"),
            std::string::npos)
      << job->membership_events(0).what();
  EXPECT_EQ(job->membership_events(0).workers_after(), 4);

  herd::v1::GetPlanRequest req;
  req.set_job("g");
  req.set_iteration(5);
  auto plan = core_->GetPlan(req);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(std::vector<int>(plan->ranks().begin(), plan->ranks().end()),
            (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(plan->ring_size(), 4);
  EXPECT_EQ(plan->world_size(), 4);
  ASSERT_EQ(plan->incarnations_size(), 1) << "the new slot's worker joined the running job";
  EXPECT_EQ(plan->incarnations(0).rank(), 3);

  // At max_workers: refused, naming it, and the job is unchanged.
  const std::string before = core_->GetJob("g")->SerializeAsString();
  auto more = Join("g", "one-too-many");
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(more.status().message().find("already has its 4 workers, all alive"), std::string::npos)
      << more.status();
  EXPECT_NE(more.status().message().find("max_workers is 4"), std::string::npos) << more.status();
  EXPECT_EQ(core_->GetJob("g")->SerializeAsString(), before) << "the job is unchanged";
  herd::v1::RegisterNodeRequest ask;
  ask.set_job("g");
  ask.set_role(herd::v1::ROLE_WORKER);
  ask.set_name("asks-for-4");
  ask.set_requested_rank(4);
  auto asked = core_->RegisterNode(ask);
  EXPECT_EQ(asked.status().code(), absl::StatusCode::kFailedPrecondition) << asked.status();
  EXPECT_NE(asked.status().message().find("max_workers 4"), std::string::npos) << asked.status();
  ask.set_requested_rank(5);
  asked = core_->RegisterNode(ask);
  EXPECT_EQ(asked.status().code(), absl::StatusCode::kInvalidArgument) << asked.status();
  EXPECT_EQ(core_->GetJob("g")->SerializeAsString(), before) << "the job is unchanged";

  // The new rank heartbeats and reports like any other (its heartbeat clock exists): four
  // heartbeating workers, nobody is declared dead.
  ids.push_back(grown->node_id());
  for (uint64_t id : ids) Report("g", id, 5);
  KeepAlive("g", ids, 700ms);
  job = core_->GetJob("g");
  for (int w = 0; w < 4; ++w) EXPECT_TRUE(job->workers(w).alive()) << w;
  EXPECT_EQ(job->completed_iteration(), 5);

  // The scheduler restarted on its state keeps the grown job (its stored form is valid).
  core_.reset();
  Open(300ms);
  job = core_->GetJob("g");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->workers_size(), 4);

  // A grown slot whose worker dies is a dead slot like any other: a failure, a new epoch with
  // three, and the slot is taken back by name.
  KeepAlive("g", {ids[0], ids[1], ids[2]}, 700ms);
  job = core_->GetJob("g");
  ASSERT_EQ(job->state(), herd::v1::JOB_RUNNING);
  EXPECT_FALSE(job->workers(3).alive());
  EXPECT_EQ(job->worker_failures(), 1);
  EXPECT_EQ(job->workers_size(), 4) << "the slot stays";
  auto back = Join("g", "extra");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rank(), 3);
  EXPECT_NE(core_->GetJob("g")->epoch_reason().find("worker 'extra' (rank 3) rejoined"),
            std::string::npos)
      << core_->GetJob("g")->epoch_reason();

  // The job completes when all four finished; the result says so.
  ids[3] = back->node_id();
  for (int w = 0; w < 4; ++w) {
    herd::v1::FinishWorkerRequest fin;
    fin.set_job("g");
    fin.set_node_id(ids[w]);
    fin.mutable_result()->set_iterations(10);
    auto done = core_->FinishWorker(fin);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->state(), w < 3 ? herd::v1::JOB_RUNNING : herd::v1::JOB_COMPLETED) << w;
  }
  EXPECT_NE(core_->GetJob("g")->epoch_reason().find("completed: 4 of 4 workers finished"),
            std::string::npos)
      << core_->GetJob("g")->epoch_reason();
}

// The last worker still training dies after the others finished (a grown job's newcomer
// killed at the end): nothing is left to wait for, and the job completes with those that
// finished instead of staying RUNNING for good.
TEST_F(Elastic, TheLastWorkerStillTrainingDyingAfterTheOthersFinishedCompletesTheJob) {
  Open(300ms);
  ASSERT_TRUE(core_->SubmitJob(ElasticSpec("e", 3, 2, 1, 60000)).ok());
  auto ids = Register("e", 3);
  ASSERT_EQ(core_->GetJob("e")->state(), herd::v1::JOB_RUNNING);
  for (int w : {0, 1}) {
    herd::v1::FinishWorkerRequest fin;
    fin.set_job("e");
    fin.set_node_id(ids[w]);
    fin.mutable_result()->set_iterations(10);
    fin.mutable_result()->set_final_loss(0.5f + static_cast<float>(w));
    auto done = core_->FinishWorker(fin);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->state(), herd::v1::JOB_RUNNING);
  }
  // Worker 2 stays silent past the heartbeat timeout; the finished ones send nothing more.
  KeepAlive("e", {}, 900ms);
  auto job = core_->GetJob("e");
  ASSERT_EQ(job->state(), herd::v1::JOB_COMPLETED) << job->epoch_reason();
  EXPECT_FALSE(job->workers(2).alive());
  EXPECT_EQ(job->worker_failures(), 1);
  EXPECT_NE(job->epoch_reason().find("completed: 2 of 3 workers finished 10 iterations"),
            std::string::npos)
      << job->epoch_reason();
  EXPECT_FLOAT_EQ(job->result().final_loss(), 0.5f) << "rank 0's result is the job's";
  ASSERT_EQ(job->membership_events_size(), 1);
  EXPECT_NE(job->membership_events(0).what().find("'w2' (rank 2) declared dead"),
            std::string::npos);
}

// A Kubernetes Indexed Job scaled up starts a pod whose index (its requested rank) is the next
// rank: it grows the job like a newcomer without a rank.
TEST_F(Elastic, ANewcomerAskingForTheNextRankGrowsTheJob) {
  Open(300ms);
  auto spec = ElasticSpec("k", 2, 1, 3, 60000);
  spec.mutable_elastic()->set_max_workers(3);
  ASSERT_TRUE(core_->SubmitJob(spec).ok());
  Register("k", 2);
  herd::v1::RegisterNodeRequest r;
  r.set_job("k");
  r.set_role(herd::v1::ROLE_WORKER);
  r.set_name("worker-2");
  r.set_requested_rank(2);
  auto got = core_->RegisterNode(r);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->rank(), 2);
  EXPECT_TRUE(got->joins_running_job());
  EXPECT_EQ(core_->GetJob("k")->workers_size(), 3);
  EXPECT_EQ(core_->GetJob("k")->membership_generation(), 1);
}

TEST_F(Elastic, JoinsThatTheJobCannotTakeAreRefusedAndChangeNothing) {
  Open(300ms);
  // Every slot alive and max_workers reached (the default: `workers`): a newcomer is not
  // needed.
  auto spec = ElasticSpec("full", 2, 1, 3, 60000);
  ASSERT_TRUE(core_->SubmitJob(spec).ok());
  Register("full", 2);
  const auto before = core_->GetJob("full");
  auto extra = Join("full", "w9");
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(extra.status().message().find("all alive"), std::string::npos) << extra.status();
  EXPECT_NE(extra.status().message().find("max_workers is 2"), std::string::npos) << extra.status();
  EXPECT_EQ(core_->GetJob("full")->SerializeAsString(), before->SerializeAsString());

  // ps_sync shrinks but takes no newcomer: a max_workers above `workers` is refused at
  // submission, and with every slot alive a newcomer is refused.
  auto ps = ElasticSpec("ps", 2, 1, 3, 60000);
  ps.mutable_mode()->set_mode("ps_sync");
  ps.set_servers(1);
  ps.mutable_elastic()->set_max_workers(3);
  EXPECT_EQ(core_->SubmitJob(ps).status().code(), absl::StatusCode::kInvalidArgument);
  ps.mutable_elastic()->set_max_workers(2);
  ASSERT_TRUE(core_->SubmitJob(ps).ok());
  Register("ps", 2);
  herd::v1::RegisterNodeRequest shard;
  shard.set_job("ps");
  shard.set_role(herd::v1::ROLE_SERVER);
  shard.set_name("s0");
  ASSERT_TRUE(core_->RegisterNode(shard).ok());
  ASSERT_EQ(core_->GetJob("ps")->state(), herd::v1::JOB_RUNNING);
  const std::string ps_before = core_->GetJob("ps")->SerializeAsString();
  auto ps_extra = Join("ps", "w9");
  ASSERT_FALSE(ps_extra.ok());
  EXPECT_EQ(ps_extra.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(ps_extra.status().message().find("all alive"), std::string::npos) << ps_extra.status();
  EXPECT_EQ(core_->GetJob("ps")->SerializeAsString(), ps_before);

  // ps_async takes a worker back in a dead slot, but does not grow.
  auto async = testing::AsyncSpec("async", 2, 1);
  *async.mutable_elastic() = spec.elastic();
  async.mutable_elastic()->set_max_workers(3);
  ASSERT_TRUE(core_->SubmitJob(async).ok());
  Register("async", 2);
  shard.set_job("async");
  ASSERT_TRUE(core_->RegisterNode(shard).ok());
  ASSERT_EQ(core_->GetJob("async")->state(), herd::v1::JOB_RUNNING);
  const std::string async_before = core_->GetJob("async")->SerializeAsString();
  auto async_extra = Join("async", "w9");
  ASSERT_FALSE(async_extra.ok());
  EXPECT_EQ(async_extra.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(async_extra.status().message().find("mode ps_async takes a worker back in a dead "
                                                "slot but does not grow"),
            std::string::npos)
      << async_extra.status();
  EXPECT_EQ(core_->GetJob("async")->SerializeAsString(), async_before);

  // A mode that neither shrinks nor takes a worker back (none of the registry's: one it does
  // not know) is refused; every mode that shrinks takes a worker back.
  herd::v1::ModeSpec unknown;
  unknown.set_mode("no_such_mode");
  EXPECT_NE(JoinRefusal(*before, unknown, "w9").find("mode no_such_mode does not go on"),
            std::string::npos);
  for (const char* name : {"allreduce", "dear", "lp", "sparse", "topk_allgather", "decentralized",
                           "decentralized_lp", "clps", "ps_async", "ps_sync", "ps_ec"}) {
    herd::v1::ModeSpec mode;
    mode.set_mode(name);
    EXPECT_EQ(JoinRefusal(*before, mode, "w9"), "") << name;
    // Each grows too, but the ps modes: they take a worker back only in a dead slot.
    const std::string n = name;
    EXPECT_EQ(GrowRefusal(*before, mode, "w9").find("does not grow") != std::string::npos,
              n == "ps_async" || n == "ps_sync" || n == "ps_ec")
        << name;
  }
  // A job that failed (a death past max_failures 0) takes nobody back.
  ASSERT_TRUE(core_->SubmitJob(ElasticSpec("gone", 3, 1, 0, 60000)).ok());
  auto ids = Register("gone", 3);
  KeepAlive("gone", {ids[0], ids[1]}, 700ms);
  ASSERT_EQ(core_->GetJob("gone")->state(), herd::v1::JOB_FAILED);
  auto late = Join("gone", "w2");
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(late.status().message().find("has ended"), std::string::npos) << late.status();

  // A job without the elastic block keeps its old rule: every slot taken, nobody else joins.
  ASSERT_TRUE(core_->SubmitJob(ExampleSpec("plain", 2, 0)).ok());
  Register("plain", 2);
  auto plain = Join("plain", "w9");
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(plain.status().message().find("max_workers"), std::string::npos) << plain.status();
}

TEST_F(Elastic, FailuresPastMaxFailuresFailTheJobWithTheCount) {
  Open(300ms);
  ASSERT_TRUE(core_->SubmitJob(ElasticSpec("j", 4, 1, 1, 60000)).ok());
  auto ids = Register("j", 4);
  KeepAlive("j", {ids[0], ids[1], ids[2]}, 700ms);
  ASSERT_EQ(core_->GetJob("j")->state(), herd::v1::JOB_RUNNING) << "one failure is allowed";
  KeepAlive("j", {ids[0], ids[1]}, 700ms);
  auto job = core_->GetJob("j");
  ASSERT_EQ(job->state(), herd::v1::JOB_FAILED);
  EXPECT_NE(job->failure_reason().find("2 worker failures, more than the job's max_failures of 1"),
            std::string::npos)
      << job->failure_reason();
}

TEST_F(Elastic, BelowMinWorkersTheJobPausesThenFailsNamingTheEmptySlots) {
  Open(300ms);
  ASSERT_TRUE(core_->SubmitJob(ElasticSpec("j", 4, 3, 5, 800)).ok());
  auto ids = Register("j", 4);
  KeepAlive("j", {ids[0], ids[3]}, 600ms);
  auto job = core_->GetJob("j");
  ASSERT_EQ(job->state(), herd::v1::JOB_RUNNING);
  EXPECT_GT(job->paused_since_unix_ms(), 0);
  EXPECT_NE(job->pause_reason().find("2 of 4 workers alive, below min_workers 3"),
            std::string::npos)
      << job->pause_reason();
  herd::v1::GetPlanRequest req;
  req.set_job("j");
  req.set_iteration(job->epoch_start_iteration());
  auto plan = core_->GetPlan(req);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->paused()) << "the workers wait at the boundary";
  KeepAlive("j", {ids[0], ids[3]}, 1000ms);
  job = core_->GetJob("j");
  ASSERT_EQ(job->state(), herd::v1::JOB_FAILED);
  EXPECT_NE(job->failure_reason().find("below min_workers 3"), std::string::npos)
      << job->failure_reason();
  EXPECT_NE(job->failure_reason().find("empty slots: rank 1 ('w1'), rank 2 ('w2')"),
            std::string::npos)
      << job->failure_reason();
}

// Every mode goes on at P-1 in an elastic job (plan/modes.h: `shrinks`, or ps_async's
// `survives_worker_loss`); dear, the last to learn it, with a real death.
TEST_F(Elastic, EveryModeGoesOnWithoutADeadWorker) {
  for (const plan::ModeInfo& m : plan::Modes()) {
    herd::v1::ModeSpec mode;
    mode.set_mode(std::string(m.name));
    EXPECT_TRUE(ModeShrinks(mode)) << m.name;
  }
  Open(300ms);
  auto spec = ElasticSpec("j", 3, 1, 3, 60000);
  spec.mutable_mode()->set_mode("dear");
  ASSERT_TRUE(core_->SubmitJob(spec).ok());
  auto ids = Register("j", 3);
  KeepAlive("j", {ids[0], ids[1]}, 700ms);
  auto job = core_->GetJob("j");
  ASSERT_EQ(job->state(), herd::v1::JOB_RUNNING) << job->failure_reason();
  EXPECT_EQ(job->membership_generation(), 1);
  EXPECT_FALSE(job->workers(2).alive());
}

}  // namespace
}  // namespace herd::scheduler
