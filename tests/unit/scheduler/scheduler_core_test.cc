// SchedulerCore without gRPC: membership, failure detection, epochs, plans, mode switches,
// barriers, the store, and recovery of the RocksDB state.

#include "scheduler/scheduler_core.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/unit/scheduler/test_jobs.h"

namespace herd::scheduler {
namespace {

using namespace std::chrono_literals;
using testing::AsyncSpec;
using testing::ExampleSpec;
using testing::TempDir;

std::unique_ptr<SchedulerCore> OpenCore(const std::string& dir,
                                        std::chrono::milliseconds timeout = 10s) {
  auto core = SchedulerCore::Open({dir, timeout});
  EXPECT_TRUE(core.ok()) << core.status();
  return std::move(core).value();
}

herd::v1::RegisterNodeRequest Reg(const std::string& job, herd::v1::Role role,
                                  const std::string& name) {
  herd::v1::RegisterNodeRequest r;
  r.set_job(job);
  r.set_role(role);
  r.set_name(name);
  r.set_address(name + ":1234");
  r.set_host("host-" + name);
  r.set_ucx_address("ucx-" + name);
  return r;
}

// Registers `workers` workers w0.. and `servers` servers s0..; returns their node ids.
std::vector<uint64_t> RegisterAll(SchedulerCore& core, const std::string& job, int workers,
                                  int servers) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < workers; ++i) {
    auto r = core.RegisterNode(Reg(job, herd::v1::ROLE_WORKER, "w" + std::to_string(i)));
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->rank(), i);
    ids.push_back(r->node_id());
  }
  for (int i = 0; i < servers; ++i) {
    auto r = core.RegisterNode(Reg(job, herd::v1::ROLE_SERVER, "s" + std::to_string(i)));
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->rank(), i);
    ids.push_back(r->node_id());
  }
  return ids;
}

herd::v1::GetPlanRequest PlanReq(const std::string& job, int64_t iteration, uint64_t epoch = 0,
                                 uint64_t node = 0) {
  herd::v1::GetPlanRequest r;
  r.set_job(job);
  r.set_iteration(iteration);
  r.set_epoch(epoch);
  r.set_node_id(node);
  return r;
}

void Report(SchedulerCore& core, const std::string& job, uint64_t node, int64_t iteration) {
  herd::v1::ReportIterationRequest r;
  r.set_job(job);
  r.set_node_id(node);
  r.set_iteration(iteration);
  r.mutable_stats()->set_loss(1.0 / static_cast<double>(iteration + 1));
  auto got = core.ReportIteration(r);
  ASSERT_TRUE(got.ok()) << got.status();
}

std::string Snapshot(SchedulerCore& core) {
  std::string all;
  for (const auto& j : core.ListJobs()) all += j.SerializeAsString();
  return all;
}

TEST(SchedulerCore, PlansASubmittedJobBeforeItsProcessesRegister) {
  TempDir dir;
  auto core = OpenCore(dir.path());
  auto job = core->SubmitJob(ExampleSpec());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), herd::v1::JOB_PENDING);
  EXPECT_EQ(job->epoch(), 1u);
  auto plan = core->GetPlan(PlanReq("j1", 3));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->iteration(), 3);
  EXPECT_EQ(plan->mode().mode(), "decentralized");
  ASSERT_EQ(plan->peers_size(), 6);
  for (const auto& p : plan->peers()) EXPECT_EQ(p.ranks_size(), 1) << "6 ranks pair up";
  EXPECT_EQ(plan->ranks_size(), 6);
  EXPECT_FALSE(plan->shards().empty());
  EXPECT_EQ(plan->next_switch_iteration(), -1);
}

TEST(SchedulerCore, RegistrationAssignsRanksAndStartsTheJob) {
  TempDir dir;
  auto core = OpenCore(dir.path());
  ASSERT_TRUE(core->SubmitJob(ExampleSpec("j1", 3, 1)).ok());
  RegisterAll(*core, "j1", 3, 0);
  EXPECT_EQ(core->GetJob("j1")->state(), herd::v1::JOB_PENDING) << "the server is missing";
  RegisterAll(*core, "j1", 0, 1);
  auto job = core->GetJob("j1");
  EXPECT_EQ(job->state(), herd::v1::JOB_RUNNING);
  EXPECT_EQ(job->epoch(), 5u) << "one epoch per membership change";
  auto plan = core->GetPlan(PlanReq("j1", 0));
  EXPECT_EQ(std::vector<int>(plan->ranks().begin(), plan->ranks().end()),
            (std::vector<int>{0, 1, 2}));
  // A plan no longer carries every worker's record (the communicators meet through the store):
  // its size does not grow with the workers' addresses.
  EXPECT_EQ(plan->workers_size(), 0);
  EXPECT_EQ(plan->incarnations_size(), 0) << "every slot holds the process it started with";
  // Nor does the status: UCX records live in the store, where the ranks that talk read them.
  EXPECT_TRUE(job->workers(2).ucx_address().empty()) << "the job's status does not keep it";
  EXPECT_EQ(plan->servers(0).address(), "s0:1234");
  // A fourth worker is not needed.
  auto extra = core->RegisterNode(Reg("j1", herd::v1::ROLE_WORKER, "w9"));
  EXPECT_EQ(extra.status().code(), absl::StatusCode::kFailedPrecondition) << extra.status();
}

TEST(SchedulerCore, DeadNodeBumpsTheEpochAndComesBackToItsRank) {
  TempDir dir;
  auto core = OpenCore(dir.path(), 300ms);
  ASSERT_TRUE(core->SubmitJob(AsyncSpec("j1", 3, 1)).ok());
  auto ids = RegisterAll(*core, "j1", 3, 1);
  const uint64_t running_epoch = core->GetJob("j1")->epoch();
  std::atomic<bool> stop{false};
  std::thread beat([&] {  // w0, w2 and the server stay alive; w1 goes silent
    while (!stop) {
      for (int i : {0, 2, 3}) {
        herd::v1::HeartbeatRequest h;
        h.set_job("j1");
        h.set_node_id(ids[static_cast<size_t>(i)]);
        (void)core->Heartbeat(h);
      }
      std::this_thread::sleep_for(50ms);
    }
  });
  const auto start = Clock::now();
  auto plan = core->WaitForEpoch("j1", running_epoch, Deadline::After(5s));
  const auto waited = Clock::now() - start;
  stop = true;
  beat.join();
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->has_value());
  // Timeout 300 ms + detection within 30 ms; the rest is slack for a loaded 2-core machine.
  EXPECT_LT(waited, 300ms + 400ms) << "heard soon after the timeout";
  EXPECT_EQ((*plan)->ranks_size(), 2);
  EXPECT_EQ((*plan)->peers(1).ranks_size(), 0) << "the dead rank has no peers";
  auto job = core->GetJob("j1");
  EXPECT_EQ(job->state(), herd::v1::JOB_RUNNING) << "ps_async goes on with the live workers";
  EXPECT_FALSE(job->workers(1).alive());
  EXPECT_NE(job->epoch_reason().find("'w1' (rank 1) declared dead"), std::string::npos)
      << job->epoch_reason();

  // The dead node's heartbeat is refused; the same identity takes rank 1 back.
  herd::v1::HeartbeatRequest h;
  h.set_job("j1");
  h.set_node_id(ids[1]);
  EXPECT_EQ(core->Heartbeat(h).status().code(), absl::StatusCode::kFailedPrecondition);
  auto back = core->RegisterNode(Reg("j1", herd::v1::ROLE_WORKER, "w1"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rank(), 1);
  EXPECT_NE(back->node_id(), ids[1]);
  EXPECT_EQ(core->GetJob("j1")->state(), herd::v1::JOB_RUNNING);
}

TEST(SchedulerCore, BadInputsAreRejectedAndChangeNothing) {
  TempDir dir;
  std::vector<uint64_t> ids;
  {
    // Two workers run five iterations and die (no heartbeats); a second job is cancelled.
    auto core = OpenCore(dir.path(), 200ms);
    ASSERT_TRUE(core->SubmitJob(AsyncSpec("j2", 2, 1)).ok());
    ids = RegisterAll(*core, "j2", 2, 1);
    for (int it = 0; it < 5; ++it) {
      for (int w = 0; w < 2; ++w) Report(*core, "j2", ids[static_cast<size_t>(w)], it);
    }
    ASSERT_TRUE(core->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
    ASSERT_TRUE(core->CancelJob("j1", "").ok());
    ASSERT_TRUE(core->SubmitJob(ExampleSpec("j4", 2, 0)).ok());
    std::this_thread::sleep_for(400ms);
    auto j2 = core->GetJob("j2");
    ASSERT_EQ(j2->state(), herd::v1::JOB_RUNNING) << "ps_async outlives its processes";
    ASSERT_FALSE(j2->workers(0).alive());
  }
  // Restarted with a long timeout, so nothing dies while the bad inputs arrive.
  auto core = OpenCore(dir.path());
  auto w0 = core->RegisterNode(Reg("j2", herd::v1::ROLE_WORKER, "w0"));
  ASSERT_TRUE(w0.ok()) << w0.status();
  auto job = core->GetJob("j2");
  ASSERT_EQ(job->epoch_start_iteration(), 5) << "the new epoch begins after the last completed";
  const uint64_t epoch = job->epoch();

  const std::string before = Snapshot(*core);
  auto expect = [&](const absl::Status& st, absl::StatusCode code, const std::string& needle,
                    const char* what) {
    EXPECT_EQ(st.code(), code) << what << ": " << st;
    EXPECT_NE(std::string(st.message()).find(needle), std::string::npos) << what << ": " << st;
    EXPECT_EQ(Snapshot(*core), before) << what << " changed the state";
  };
  herd::v1::SetModeRequest sm;
  sm.set_job("nope");
  sm.mutable_mode()->set_mode("allreduce");
  expect(core->SetMode(sm).status(), absl::StatusCode::kNotFound, "job 'nope'", "unknown job");
  expect(core->GetJob("nope").status(), absl::StatusCode::kNotFound, "nope", "get unknown");
  expect(core->SubmitJob(ExampleSpec("j2")).status(), absl::StatusCode::kAlreadyExists,
         "already exists", "duplicate job");
  auto zero = ExampleSpec("j3");
  zero.set_workers(0);
  expect(core->SubmitJob(zero).status(), absl::StatusCode::kInvalidArgument, "workers",
         "zero workers");
  auto warp = ExampleSpec("j3");
  warp.mutable_mode()->set_mode("warp");
  expect(core->SubmitJob(warp).status(), absl::StatusCode::kInvalidArgument, "unknown mode",
         "unknown mode");
  auto dup = ExampleSpec("j3");
  dup.mutable_tensors(1)->set_name("fc1.weight");
  expect(core->SubmitJob(dup).status(), absl::StatusCode::kInvalidArgument, "twice",
         "inconsistent layout");
  expect(core->GetPlan(PlanReq("j2", 3)).status(), absl::StatusCode::kFailedPrecondition,
         "begins at iteration 5", "iteration before the epoch");
  expect(core->GetPlan(PlanReq("j2", 7, epoch - 1)).status(), absl::StatusCode::kFailedPrecondition,
         "stale", "stale epoch");
  expect(core->GetPlan(PlanReq("j2", 7, epoch + 5)).status(), absl::StatusCode::kInvalidArgument,
         "does not exist yet", "future epoch");
  expect(core->GetPlan(PlanReq("j2", -1)).status(), absl::StatusCode::kInvalidArgument, "iteration",
         "negative iteration");
  auto ended = core->GetPlan(PlanReq("j1", 7));
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->job_state(), herd::v1::JOB_CANCELLED) << "a plan says the job ended";
  EXPECT_EQ(ended->end_reason(), "cancelled by the operator");
  herd::v1::HeartbeatRequest hb;
  hb.set_job("j2");
  hb.set_node_id(ids[1]);
  expect(core->Heartbeat(hb).status(), absl::StatusCode::kFailedPrecondition, "declared dead",
         "heartbeat from a dead node");
  hb.set_node_id(424242);
  expect(core->Heartbeat(hb).status(), absl::StatusCode::kNotFound, "not registered",
         "unknown node");
  sm.set_job("j4");
  sm.mutable_mode()->set_mode("ps_sync");
  expect(core->SetMode(sm).status(), absl::StatusCode::kFailedPrecondition, "parameter servers",
         "mode the job cannot use");
  sm.set_job("j2");
  sm.mutable_mode()->set_mode("allreduce");
  sm.set_from_iteration(2);
  expect(core->SetMode(sm).status(), absl::StatusCode::kFailedPrecondition, "--from-iteration",
         "switch in the past");
  expect(core->RegisterNode(Reg("nope", herd::v1::ROLE_WORKER, "x")).status(),
         absl::StatusCode::kNotFound, "nope", "register to an unknown job");
  expect(core->RegisterNode(Reg("j2", herd::v1::ROLE_SCHEDULER, "x")).status(),
         absl::StatusCode::kInvalidArgument, "only workers and servers", "bad role");
  expect(core->RegisterNode(Reg("j4", herd::v1::ROLE_SERVER, "x")).status(),
         absl::StatusCode::kFailedPrecondition, "no servers", "server for a job without");
  auto bad_rank = Reg("j2", herd::v1::ROLE_WORKER, "x");
  bad_rank.set_requested_rank(9);
  expect(core->RegisterNode(bad_rank).status(), absl::StatusCode::kInvalidArgument, "ranks 0..1",
         "rank out of range");
  herd::v1::ReportIterationRequest rep;
  rep.set_job("j2");
  rep.set_node_id(w0->node_id());
  rep.set_iteration(2);
  expect(core->ReportIteration(rep).status(), absl::StatusCode::kFailedPrecondition,
         "before the current epoch", "report from the past");
  expect(core->CancelJob("j1", "").status(), absl::StatusCode::kFailedPrecondition, "cancelled",
         "cancel twice");
  expect(core->RegisterNode(Reg("j2", herd::v1::ROLE_WORKER, "w0")).status(),
         absl::StatusCode::kAlreadyExists, "alive", "duplicate live node name");
  expect(core->StoreSet("j2", "", "v"), absl::StatusCode::kInvalidArgument, "store key is empty",
         "empty store key");
}

TEST(SchedulerCore, ModeSwitchTakesEffectAtAnIterationBoundary) {
  TempDir dir;
  auto core = OpenCore(dir.path());
  ASSERT_TRUE(core->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
  auto ids = RegisterAll(*core, "j1", 2, 0);
  for (int it = 0; it <= 3; ++it) ASSERT_TRUE(core->GetPlan(PlanReq("j1", it, 0, ids[0])).ok());
  herd::v1::SetModeRequest sm;
  sm.set_job("j1");
  sm.mutable_mode()->set_mode("allreduce");
  sm.set_from_iteration(3);
  EXPECT_EQ(core->SetMode(sm).status().code(), absl::StatusCode::kFailedPrecondition)
      << "iteration 3 has begun";
  sm.clear_from_iteration();
  auto job = core->SetMode(sm);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->schedule_size(), 2);
  EXPECT_EQ(job->schedule(1).from_iteration(), 4);
  auto p3 = core->GetPlan(PlanReq("j1", 3));
  EXPECT_EQ(p3->mode().mode(), "decentralized");
  EXPECT_EQ(p3->next_switch_iteration(), 4);
  EXPECT_EQ(p3->next_mode().mode(), "allreduce");
  auto p4 = core->GetPlan(PlanReq("j1", 4));
  EXPECT_EQ(p4->mode().mode(), "allreduce");
  EXPECT_EQ(p4->peers(0).ranks_size(), 0) << "allreduce has no peer list";
  // A later switch back, scheduled ahead.
  sm.mutable_mode()->set_mode("decentralized");
  sm.mutable_mode()->set_topology("ring");
  sm.set_from_iteration(10);
  ASSERT_TRUE(core->SetMode(sm).ok());
  EXPECT_EQ(core->GetPlan(PlanReq("j1", 9))->mode().mode(), "allreduce");
  EXPECT_EQ(core->GetPlan(PlanReq("j1", 10))->mode().topology(), "ring");
}

TEST(SchedulerCore, StateSurvivesARestart) {
  TempDir dir;
  std::string before;
  std::vector<std::string> plans;
  std::vector<uint64_t> ids;
  {
    auto core = OpenCore(dir.path());
    ASSERT_TRUE(core->SubmitJob(ExampleSpec("j1", 4, 2)).ok());
    ASSERT_TRUE(core->SubmitJob(ExampleSpec("j2", 3, 0)).ok());
    ids = RegisterAll(*core, "j1", 4, 2);
    for (uint64_t id : {ids[0], ids[1], ids[2], ids[3]}) Report(*core, "j1", id, 0);
    herd::v1::SetModeRequest sm;
    sm.set_job("j1");
    sm.mutable_mode()->set_mode("sparse");
    sm.mutable_mode()->set_teams(2);
    sm.set_from_iteration(5);
    ASSERT_TRUE(core->SetMode(sm).ok());
    ASSERT_TRUE(core->StoreSet("j1", "epoch/1/nccl_id", "abc").ok());
    ASSERT_TRUE(core->CancelJob("j2", "test").ok());
    before = Snapshot(*core);
    for (int it = 1; it < 8; ++it)
      plans.push_back(core->GetPlan(PlanReq("j1", it))->SerializeAsString());
  }
  auto core = OpenCore(dir.path());
  EXPECT_EQ(Snapshot(*core), before);
  for (int it = 1; it < 8; ++it) {
    EXPECT_EQ(core->GetPlan(PlanReq("j1", it))->SerializeAsString(),
              plans[static_cast<size_t>(it - 1)])
        << "iteration " << it;
  }
  // Running processes reconnect with the node ids they hold.
  herd::v1::HeartbeatRequest hb;
  hb.set_job("j1");
  hb.set_node_id(ids[2]);
  EXPECT_TRUE(core->Heartbeat(hb).ok());
  EXPECT_EQ(*core->StoreGet("j1", "epoch/1/nccl_id", Deadline::After(1s)), "abc");
  EXPECT_EQ(core->GetJob("j2")->state(), herd::v1::JOB_CANCELLED);
  // New node ids never reuse old ones.
  ASSERT_TRUE(core->SubmitJob(ExampleSpec("j3", 1, 0)).ok());
  auto fresh = core->RegisterNode(Reg("j3", herd::v1::ROLE_WORKER, "w0"));
  ASSERT_TRUE(fresh.ok());
  for (uint64_t id : ids) EXPECT_NE(fresh->node_id(), id);
}

// A shard's heartbeat reports the version it has on disk; the scheduler keeps the last report
// in the shard's member, across its own restart and the shard's, so a restarted shard can tell
// whether it recovered everything (server/recovery_check.h).
TEST(SchedulerCore, KeepsTheVersionEachShardReportsOnDisk) {
  TempDir dir;
  std::vector<uint64_t> ids;
  {
    auto core = OpenCore(dir.path());
    ASSERT_TRUE(core->SubmitJob(testing::AsyncSpec("j1", 1, 2)).ok());
    ids = RegisterAll(*core, "j1", 1, 2);  // w0, s0, s1
    herd::v1::HeartbeatRequest hb;
    hb.set_job("j1");
    hb.set_node_id(ids[1]);
    hb.set_durable_version(7);
    ASSERT_TRUE(core->Heartbeat(hb).ok());
    hb.set_node_id(ids[2]);
    hb.clear_durable_version();
    ASSERT_TRUE(core->Heartbeat(hb).ok());
    // Only servers report one, never negative; a refused report changes nothing.
    hb.set_node_id(ids[0]);
    hb.set_durable_version(3);
    EXPECT_EQ(core->Heartbeat(hb).status().code(), absl::StatusCode::kInvalidArgument);
    hb.set_node_id(ids[1]);
    hb.set_durable_version(-1);
    EXPECT_EQ(core->Heartbeat(hb).status().code(), absl::StatusCode::kInvalidArgument);
    auto job = core->GetJob("j1");
    EXPECT_EQ(job->servers(0).durable_version(), 7);
    EXPECT_FALSE(job->servers(1).has_durable_version());
    EXPECT_FALSE(job->workers(0).has_durable_version());
  }
  auto core = OpenCore(dir.path());
  EXPECT_EQ(core->GetJob("j1")->servers(0).durable_version(), 7);
  // The last report counts, lower too (a shard that accepted a loss serves an older state).
  herd::v1::HeartbeatRequest hb;
  hb.set_job("j1");
  hb.set_node_id(ids[1]);
  hb.set_durable_version(5);
  ASSERT_TRUE(core->Heartbeat(hb).ok());
  EXPECT_EQ(core->GetJob("j1")->servers(0).durable_version(), 5);
}

TEST(SchedulerCore, TheStateDirectoryHasOneOwner) {
  TempDir dir;
  auto core = OpenCore(dir.path());
  auto second = SchedulerCore::Open({dir.path(), 10s});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
}

TEST(SchedulerCore, BarrierReleasesEveryLiveWorkerOrNamesTheMissing) {
  TempDir dir;
  auto core = OpenCore(dir.path());
  ASSERT_TRUE(core->SubmitJob(ExampleSpec("j1", 3, 0)).ok());
  auto ids = RegisterAll(*core, "j1", 3, 0);
  auto req = [&](uint64_t id) {
    herd::v1::BarrierRequest b;
    b.set_job("j1");
    b.set_name("start");
    b.set_node_id(id);
    return b;
  };
  std::vector<absl::Status> results(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      results[static_cast<size_t>(i)] =
          core->Barrier(req(ids[static_cast<size_t>(i)]), Deadline::After(5s)).status();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& st : results) EXPECT_TRUE(st.ok()) << st;
  // Reused name, one worker missing.
  std::thread a([&] { results[0] = core->Barrier(req(ids[0]), Deadline::After(300ms)).status(); });
  auto st = core->Barrier(req(ids[1]), Deadline::After(300ms)).status();
  a.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(std::string(st.message()).find("'w2' (rank 2)"), std::string::npos) << st;
}

TEST(SchedulerCore, StoreWritesOnceAndWaitsForKeys) {
  TempDir dir;
  auto core = OpenCore(dir.path());
  ASSERT_TRUE(core->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(core->StoreSet("j1", "k", "v").ok());
  });
  auto got = core->StoreGet("j1", "k", Deadline::After(5s));
  later.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v");
  EXPECT_EQ(core->StoreSet("j1", "k", "w").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(core->StoreGet("j1", "missing", Deadline::After(50ms)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(core->StoreSet("nope", "k", "v").code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace herd::scheduler
