// SchedulerCore's checkpoints without gRPC: the cut, the policy, every process's report, the
// commit into a real directory (checkpoint::CheckpointWriter writes the files), aborts with
// their reasons, preemption, retention, resume at submission, and a restart on the state.

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "checkpoint/catalog.h"
#include "checkpoint/env.h"
#include "checkpoint/state_source.h"
#include "checkpoint/writer.h"
#include "scheduler/scheduler_core.h"
#include "tests/unit/scheduler/test_jobs.h"

namespace herd::scheduler {
namespace {

using namespace std::chrono_literals;
using testing::ExampleSpec;
using testing::TempDir;

struct Fixture {
  TempDir state, ckpt;
  std::unique_ptr<SchedulerCore> core;
  std::vector<uint64_t> ids;  // workers then servers

  Fixture(herd::v1::JobSpec spec, int workers, int servers) {
    core = std::move(SchedulerCore::Open({state.path(), 10s})).value();
    spec.set_workers(workers);
    spec.set_servers(servers);
    spec.mutable_mode()->set_mode("allreduce");
    spec.mutable_mode()->clear_topology();
    if (spec.checkpoint().dir().empty()) spec.mutable_checkpoint()->set_dir(ckpt.path());
    EXPECT_TRUE(core->SubmitJob(spec).ok());
    for (int i = 0; i < workers + servers; ++i) {
      herd::v1::RegisterNodeRequest r;
      r.set_job(spec.name());
      r.set_role(i < workers ? herd::v1::ROLE_WORKER : herd::v1::ROLE_SERVER);
      r.set_name((i < workers ? "w" : "s") + std::to_string(i));
      auto reg = core->RegisterNode(r);
      EXPECT_TRUE(reg.ok()) << reg.status();
      ids.push_back(reg->node_id());
    }
  }

  absl::StatusOr<herd::v1::Plan> Plan(int64_t iteration, int worker) {
    herd::v1::GetPlanRequest req;
    req.set_job("j1");
    req.set_iteration(iteration);
    req.set_node_id(ids[static_cast<size_t>(worker)]);
    return core->GetPlan(req);
  }

  // Writes process `process`'s file for checkpoint `c` as a real process would and reports it.
  absl::StatusOr<herd::v1::ReportCheckpointResponse> Report(const herd::v1::CheckpointRecord& c,
                                                            size_t node, std::string process) {
    checkpoint::ProcessState st;
    st.process = process;
    // A worker holds the whole model (ExampleSpec's two tensors), as a verified checkpoint
    // must; a shard of a collective job reports an empty state.
    if (process.rfind("worker-", 0) == 0) {
      const std::vector<float> weight(128 * 784, 0.5f), bias(128, 1.0f);
      checkpoint::AddExtent(st, "param/fc1.weight", 128 * 784, 0, weight);
      checkpoint::AddExtent(st, "param/fc1.bias", 128, 0, bias);
    }
    auto file = checkpoint::WriteStateFile(checkpoint::PosixEnv(), c.dir(), c.id(), st);
    EXPECT_TRUE(file.ok()) << file.status();
    herd::v1::ReportCheckpointRequest req;
    req.set_job("j1");
    req.set_node_id(ids[node]);
    req.set_id(c.id());
    *req.mutable_file() = *file;
    return core->ReportCheckpoint(req);
  }

  herd::v1::JobStatus Status() { return core->GetJob("j1").value(); }
};

herd::v1::RequestCheckpointRequest Ask(bool preempt = false) {
  herd::v1::RequestCheckpointRequest req;
  req.set_job("j1");
  req.set_preempt(preempt);
  req.set_who("test");
  return req;
}

TEST(Checkpoints, CutIsTheFirstIterationNoWorkerBegan) {
  Fixture f(ExampleSpec(), 2, 0);
  ASSERT_TRUE(f.Plan(0, 0).ok());
  ASSERT_TRUE(f.Plan(1, 0).ok());  // worker 0 began iteration 1
  auto c = f.core->RequestCheckpoint(Ask());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->iteration(), 2);
  EXPECT_EQ(c->id(), "it-00000002");
  EXPECT_EQ(c->expected_size(), 2);
  // Every plan up to the cut names it; the plan of the cut is where workers stage.
  auto p1 = f.Plan(1, 1);
  ASSERT_TRUE(p1.ok());
  EXPECT_EQ(p1->checkpoint_iteration(), 2);
  EXPECT_EQ(p1->checkpoint_id(), "it-00000002");
  EXPECT_EQ(p1->checkpoint_dir(), f.ckpt.path());
  // Asked again before anyone began the cut: the same checkpoint.
  auto again = f.core->RequestCheckpoint(Ask());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id(), c->id());
}

TEST(Checkpoints, CommitsWhenEveryProcessReported) {
  Fixture f(ExampleSpec(), 2, 1);
  ASSERT_TRUE(f.Plan(0, 0).ok());
  auto c = f.core->RequestCheckpoint(Ask());
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->expected_size(), 3);  // worker-0, worker-1, shard-0
  auto r0 = f.Report(*c, 0, "worker-0");
  ASSERT_TRUE(r0.ok()) << r0.status();
  EXPECT_FALSE(r0->committed());
  // A process reports its own file only.
  EXPECT_TRUE(absl::IsInvalidArgument(f.Report(*c, 1, "worker-0").status()));
  ASSERT_TRUE(f.Report(*c, 1, "worker-1").ok());
  EXPECT_EQ(f.Status().pending_checkpoint().files_size(), 2);
  auto last = f.Report(*c, 2, "shard-0");
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_TRUE(last->committed());
  const auto s = f.Status();
  EXPECT_TRUE(s.pending_checkpoint().id().empty());
  EXPECT_EQ(s.last_checkpoint().id(), c->id());
  EXPECT_EQ(s.checkpoints_committed(), 1);
  EXPECT_GT(s.last_checkpoint().bytes(), 0);
  // On disk: committed, verified, LATEST names it.
  auto resolved = checkpoint::ResolveCheckpoint(checkpoint::PosixEnv(), f.ckpt.path());
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->id, c->id());
  EXPECT_EQ(resolved->manifest.files_size(), 3);
  EXPECT_EQ(resolved->manifest.workers(), 2);
  EXPECT_EQ(resolved->manifest.mode(), "allreduce");
  EXPECT_EQ(resolved->manifest.layout_size(), 2);
}

// An elastic job of three grown to four (docs/elastic.md, "Grow past workers"): the checkpoint
// expects the fourth worker's file and its manifest counts the four processes that saved, so a
// resume reads every one of them (and reshards from four).
TEST(Checkpoints, AGrownElasticJobsCheckpointCountsItsFourWorkers) {
  herd::v1::JobSpec spec = ExampleSpec();
  spec.mutable_elastic()->set_min_workers(2);
  spec.mutable_elastic()->set_max_workers(4);
  spec.mutable_elastic()->set_max_failures(1);
  spec.mutable_elastic()->set_pending_timeout_ms(60000);
  Fixture f(spec, 3, 0);
  ASSERT_EQ(f.Status().state(), herd::v1::JOB_RUNNING);
  ASSERT_TRUE(f.Plan(0, 0).ok());
  herd::v1::RegisterNodeRequest extra;
  extra.set_job("j1");
  extra.set_role(herd::v1::ROLE_WORKER);
  extra.set_name("extra");
  auto grown = f.core->RegisterNode(extra);
  ASSERT_TRUE(grown.ok()) << grown.status();
  ASSERT_EQ(grown->rank(), 3);
  f.ids.push_back(grown->node_id());

  auto c = f.core->RequestCheckpoint(Ask());
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->expected_size(), 4);
  for (int w = 0; w < 4; ++w) {
    auto r = f.Report(*c, static_cast<size_t>(w), "worker-" + std::to_string(w));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->committed(), w == 3);
  }
  auto resolved = checkpoint::ResolveCheckpoint(checkpoint::PosixEnv(), f.ckpt.path());
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->manifest.files_size(), 4);
  EXPECT_EQ(resolved->manifest.workers(), 4) << "the slots that saved, not the spec's 3";

  // A job resumed from it learns the count it was saved at.
  herd::v1::JobSpec again = ExampleSpec();
  again.set_name("j2");
  again.set_workers(3);
  again.mutable_mode()->set_mode("allreduce");
  again.mutable_mode()->clear_topology();
  again.set_resume_from(f.ckpt.path());
  auto submitted = f.core->SubmitJob(again);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(f.core->GetJob("j2")->resumed().workers(), 4);
}

TEST(Checkpoints, AnErrorReportAbortsAndTrainingGoesOn) {
  Fixture f(ExampleSpec(), 2, 0);
  ASSERT_TRUE(f.Plan(0, 0).ok());
  auto c = f.core->RequestCheckpoint(Ask());
  ASSERT_TRUE(c.ok());
  herd::v1::ReportCheckpointRequest req;
  req.set_job("j1");
  req.set_node_id(f.ids[1]);
  req.set_id(c->id());
  req.set_error("RESOURCE_EXHAUSTED: no space left on device");
  ASSERT_TRUE(f.core->ReportCheckpoint(req).ok());
  const auto s = f.Status();
  EXPECT_EQ(s.state(), herd::v1::JOB_RUNNING);
  EXPECT_TRUE(s.pending_checkpoint().id().empty());
  EXPECT_EQ(s.failed_checkpoint().id(), c->id());
  EXPECT_NE(s.failed_checkpoint().error().find("worker-1: RESOURCE_EXHAUSTED"), std::string::npos)
      << s.failed_checkpoint().error();
  // A late report of the aborted checkpoint changes nothing; a new one can be asked for.
  auto late = f.Report(*c, 0, "worker-0");
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->committed());
  EXPECT_TRUE(f.core->RequestCheckpoint(Ask()).ok());
}

TEST(Checkpoints, TimeoutAborts) {
  auto spec = ExampleSpec();
  spec.mutable_checkpoint()->set_timeout_ms(1);
  Fixture f(spec, 1, 0);
  ASSERT_TRUE(f.Plan(0, 0).ok());
  auto c = f.core->RequestCheckpoint(Ask());
  ASSERT_TRUE(c.ok());
  std::this_thread::sleep_for(20ms);
  f.core->ExpireCheckpoints();
  const auto s = f.Status();
  EXPECT_TRUE(s.pending_checkpoint().id().empty());
  EXPECT_NE(s.failed_checkpoint().error().find("no report from worker-0"), std::string::npos)
      << s.failed_checkpoint().error();
}

TEST(Checkpoints, PolicyEveryIterations) {
  auto spec = ExampleSpec();
  spec.mutable_checkpoint()->set_every_iterations(3);
  Fixture f(spec, 1, 0);
  for (int i = 0; i < 3; ++i) {
    auto p = f.Plan(i, 0);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->checkpoint_iteration(), -1) << i;
  }
  auto p3 = f.Plan(3, 0);
  ASSERT_TRUE(p3.ok());
  EXPECT_EQ(p3->checkpoint_iteration(), 3);
  EXPECT_EQ(p3->checkpoint_id(), "it-00000003");
  // Until it commits, no other policy checkpoint starts.
  ASSERT_TRUE(f.Plan(6, 0).ok());
  EXPECT_EQ(f.Status().pending_checkpoint().iteration(), 3);
}

TEST(Checkpoints, NeedsADirectoryAndIterationsLeft) {
  auto spec = ExampleSpec();
  Fixture f(spec, 1, 0);
  ASSERT_TRUE(f.Plan(0, 0).ok());
  herd::v1::DeclareModelRequest d;
  d.set_job("j1");
  d.set_node_id(f.ids[0]);
  *d.mutable_tensors() = spec.tensors();
  d.set_planned_iterations(1);
  ASSERT_TRUE(f.core->DeclareModel(d).ok());
  auto c = f.core->RequestCheckpoint(Ask());
  EXPECT_TRUE(absl::IsFailedPrecondition(c.status())) << c.status();
  EXPECT_NE(c.status().message().find("last iteration"), std::string::npos);
  auto none = f.core->RequestCheckpoint([] {
    auto r = Ask();
    r.set_job("nope");
    return r;
  }());
  EXPECT_TRUE(absl::IsNotFound(none.status()));
}

TEST(Checkpoints, PreemptionEndsTheJobOnceCommitted) {
  Fixture f(ExampleSpec(), 1, 0);
  ASSERT_TRUE(f.Plan(0, 0).ok());
  auto c = f.core->RequestCheckpoint(Ask(/*preempt=*/true));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->preempt());
  auto p = f.Plan(1, 0);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->stop_at_checkpoint());
  ASSERT_TRUE(f.Report(*c, 0, "worker-0").ok());
  const auto s = f.Status();
  EXPECT_EQ(s.state(), herd::v1::JOB_PREEMPTED);
  EXPECT_NE(s.preempt_reason().find("it-00000001"), std::string::npos) << s.preempt_reason();
  EXPECT_TRUE(IsTerminal(s.state()));
}

TEST(Checkpoints, ResumeStartsAtTheCheckpointsIteration) {
  TempDir ckpt;
  {
    auto spec = ExampleSpec();
    spec.mutable_checkpoint()->set_dir(ckpt.path());
    Fixture f(spec, 1, 0);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(f.Plan(i, 0).ok());
    auto c = f.core->RequestCheckpoint(Ask());
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(f.Report(*c, 0, "worker-0").ok());
  }
  TempDir state;
  auto core = std::move(SchedulerCore::Open({state.path(), 10s})).value();
  auto spec = ExampleSpec();
  spec.mutable_mode()->set_mode("allreduce");
  spec.mutable_mode()->clear_topology();
  spec.set_resume_from(ckpt.path());
  auto s = core->SubmitJob(spec);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->resumed().iteration(), 5);
  EXPECT_EQ(s->resumed().path(), ckpt.path() + "/it-00000005");
  EXPECT_EQ(s->epoch_start_iteration(), 5);
  herd::v1::GetPlanRequest req;
  req.set_job("j1");
  req.set_iteration(5);
  auto plan = core->GetPlan(req);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->start_iteration(), 5);
  EXPECT_EQ(plan->resume_from(), ckpt.path() + "/it-00000005");

  // Another model: refused before anything runs, naming the tensor.
  auto other = ExampleSpec("j2");
  other.set_resume_from(ckpt.path());
  other.mutable_tensors(1)->set_name("fc9.bias");
  auto refused = core->SubmitJob(other);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("fc9.bias"), std::string::npos);
  // No checkpoint there: NOT_FOUND, nothing submitted.
  auto missing = ExampleSpec("j3");
  missing.set_resume_from(ckpt.path() + "/nothing");
  EXPECT_FALSE(core->SubmitJob(missing).ok());
  EXPECT_TRUE(absl::IsNotFound(core->GetJob("j3").status()));
}

TEST(Checkpoints, ARestartedSchedulerKeepsThePendingCheckpoint) {
  TempDir state, ckpt;
  herd::v1::CheckpointRecord c;
  std::vector<uint64_t> ids;
  {
    auto spec = ExampleSpec();
    spec.mutable_checkpoint()->set_dir(ckpt.path());
    Fixture f(spec, 2, 0);
    ASSERT_TRUE(f.Plan(0, 0).ok());
    c = f.core->RequestCheckpoint(Ask()).value();
    ASSERT_TRUE(f.Report(c, 0, "worker-0").ok());
    f.core.reset();  // as if killed: the state is what RocksDB holds
    std::filesystem::copy(f.state.path(), state.path(),
                          std::filesystem::copy_options::recursive |
                              std::filesystem::copy_options::overwrite_existing);
    ids = f.ids;
  }
  auto core = std::move(SchedulerCore::Open({state.path(), 10s})).value();
  auto s = core->GetJob("j1");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->pending_checkpoint().id(), c.id());
  EXPECT_EQ(s->pending_checkpoint().files_size(), 1);
  checkpoint::ProcessState st;
  st.process = "worker-1";
  auto file = checkpoint::WriteStateFile(checkpoint::PosixEnv(), c.dir(), c.id(), st);
  ASSERT_TRUE(file.ok());
  herd::v1::ReportCheckpointRequest req;
  req.set_job("j1");
  req.set_node_id(ids[1]);
  req.set_id(c.id());
  *req.mutable_file() = *file;
  auto r = core->ReportCheckpoint(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->committed());
}

}  // namespace
}  // namespace herd::scheduler
