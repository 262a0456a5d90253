// The real `herd scheduler` process over gRPC: fake workers and servers register, one dies and
// every watcher hears the new epoch; SIGKILL and restart keep jobs and plans and let running
// processes reconnect; every bad input gets its precise code and changes nothing; TLS, the
// bearer token and the scheduler-backed bootstrap Store.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "scheduler/client/scheduler_client.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/unit/scheduler/test_jobs.h"
#include "worker/scheduler_store.h"

namespace herd::scheduler {
namespace {

using namespace std::chrono_literals;
using testing::AsyncSpec;
using testing::ExampleSpec;
using testing::SchedulerProcess;
using testing::TempDir;

std::unique_ptr<SchedulerClient> Client(const std::string& address, std::string token = "",
                                        std::string ca = "") {
  ClientOptions o;
  o.address = address;
  o.token = std::move(token);
  o.tls = !ca.empty();
  o.tls_ca_file = std::move(ca);
  o.call_timeout = 5s;
  auto c = SchedulerClient::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(c).value();
}

herd::v1::RegisterNodeRequest Reg(const std::string& job, herd::v1::Role role,
                                  const std::string& name) {
  herd::v1::RegisterNodeRequest r;
  r.set_job(job);
  r.set_role(role);
  r.set_name(name);
  r.set_address(name + ":9000");
  r.set_ucx_address("ucx:" + name);
  return r;
}

// Heartbeats for a set of nodes from a background thread, until stopped or told to drop one.
class Heartbeater {
 public:
  Heartbeater(SchedulerClient& c, std::string job, std::vector<uint64_t> ids,
              std::chrono::milliseconds every)
      : thread_([this, &c, job, ids, every] {
          while (!stop_) {
            for (uint64_t id : ids) {
              if (id == dropped_) continue;
              herd::v1::HeartbeatRequest h;
              h.set_job(job);
              h.set_node_id(id);
              (void)c.Heartbeat(h);
            }
            std::this_thread::sleep_for(every);
          }
        }) {}
  ~Heartbeater() {
    stop_ = true;
    thread_.join();
  }
  void Drop(uint64_t id) { dropped_ = id; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> dropped_{0};
  std::thread thread_;
};

std::string Jobs(SchedulerClient& c) {
  auto jobs = c.ListJobs();
  EXPECT_TRUE(jobs.ok()) << jobs.status();
  return jobs.ok() ? jobs->SerializeAsString() : "";
}

TEST(SchedulerProcess, AKilledWorkerStartsANewEpochThatEveryWatcherHears) {
  TempDir dir;
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0, {"--heartbeat-timeout", "500ms"});
  auto c = Client(proc.address());
  // ps_async: the mode that goes on with the survivors (in the others a death fails the job).
  ASSERT_TRUE(c->SubmitJob(AsyncSpec("j1", 3, 1)).ok());
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto r = c->RegisterNode(Reg("j1", herd::v1::ROLE_WORKER, "w" + std::to_string(i)));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->rank(), i);
    EXPECT_EQ(r->heartbeat_timeout_ms(), 500);
    ids.push_back(r->node_id());
  }
  auto s = c->RegisterNode(Reg("j1", herd::v1::ROLE_SERVER, "s0"));
  ASSERT_TRUE(s.ok()) << s.status();
  ids.push_back(s->node_id());
  auto job = c->GetJob("j1");
  ASSERT_EQ(job->state(), herd::v1::JOB_RUNNING);
  const uint64_t epoch = job->epoch();

  Heartbeater beats(*c, "j1", ids, 100ms);
  // Two watchers, as two surviving workers would be.
  std::vector<herd::v1::Plan> heard(2);
  std::vector<Clock::time_point> heard_at(2);
  std::vector<std::thread> watchers;
  for (int w = 0; w < 2; ++w) {
    watchers.emplace_back([&, w] {
      herd::v1::WatchPlanRequest req;
      req.set_job("j1");
      req.set_after_epoch(epoch);
      auto st = c->WatchPlan(req, Deadline::After(10s), [&](const herd::v1::Plan& p) {
        heard[static_cast<size_t>(w)] = p;
        heard_at[static_cast<size_t>(w)] = Clock::now();
        return false;
      });
      EXPECT_TRUE(st.ok()) << st;
    });
  }
  std::this_thread::sleep_for(200ms);
  const auto killed_at = Clock::now();
  beats.Drop(ids[1]);  // worker 1 "dies": its heartbeats stop
  for (auto& t : watchers) t.join();
  for (int w = 0; w < 2; ++w) {
    const auto& p = heard[static_cast<size_t>(w)];
    EXPECT_EQ(p.epoch(), epoch + 1);
    EXPECT_EQ(std::vector<int>(p.ranks().begin(), p.ranks().end()), (std::vector<int>{0, 2}))
        << "rank 1 is not among the live ones";
    // Dead after the 500 ms timeout; heard within one heartbeat period (166 ms) after that,
    // plus slack for two processes sharing two cores.
    EXPECT_LT(heard_at[static_cast<size_t>(w)] - killed_at, 500ms + 166ms + 400ms);
  }
  job = c->GetJob("j1");
  EXPECT_EQ(job->state(), herd::v1::JOB_RUNNING);
  EXPECT_NE(job->epoch_reason().find("'w1' (rank 1) declared dead"), std::string::npos);

  // Its heartbeat is now refused; the same identity takes rank 1 back.
  herd::v1::HeartbeatRequest h;
  h.set_job("j1");
  h.set_node_id(ids[1]);
  EXPECT_EQ(c->Heartbeat(h).status().code(), absl::StatusCode::kFailedPrecondition);
  auto back = c->RegisterNode(Reg("j1", herd::v1::ROLE_WORKER, "w1"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rank(), 1);
}

TEST(SchedulerProcess, SigkillAndRestartServeTheSameJobsAndPlans) {
  TempDir dir;
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0, {"--heartbeat-timeout", "3s"});
  const int port = proc.port();
  auto c = Client(proc.address());
  ASSERT_TRUE(c->SubmitJob(ExampleSpec("j1", 4, 2)).ok());
  ASSERT_TRUE(c->SubmitJob(ExampleSpec("j2", 2, 0)).ok());
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(
        c->RegisterNode(Reg("j1", herd::v1::ROLE_WORKER, "w" + std::to_string(i)))->node_id());
  }
  herd::v1::SetModeRequest sm;
  sm.set_job("j1");
  sm.mutable_mode()->set_mode("sparse");
  sm.mutable_mode()->set_teams(2);
  sm.set_from_iteration(3);
  ASSERT_TRUE(c->SetMode(sm).ok());
  ASSERT_TRUE(c->StoreSet("j1", "epoch/5/nccl_id", std::string("\0\1\2", 3)).ok());
  const std::string before = Jobs(*c);
  std::vector<std::string> plans;
  for (int it = 0; it < 6; ++it) {
    herd::v1::GetPlanRequest req;
    req.set_job("j1");
    req.set_iteration(it);
    plans.push_back(c->GetPlan(req)->SerializeAsString());
  }

  proc.Stop(SIGKILL);
  proc.Start(dir.path() + "/state", port, {"--heartbeat-timeout", "3s"});
  // The same client (a running process) reconnects to the restarted scheduler.
  EXPECT_EQ(Jobs(*c), before);
  for (int it = 0; it < 6; ++it) {
    herd::v1::GetPlanRequest req;
    req.set_job("j1");
    req.set_iteration(it);
    auto p = c->GetPlan(req);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->SerializeAsString(), plans[static_cast<size_t>(it)]) << "iteration " << it;
  }
  herd::v1::HeartbeatRequest h;
  h.set_job("j1");
  h.set_node_id(ids[3]);
  EXPECT_TRUE(c->Heartbeat(h).ok()) << "a running worker keeps its node id across the restart";
  EXPECT_EQ(*c->StoreGet("j1", "epoch/5/nccl_id", Deadline::After(1s)), std::string("\0\1\2", 3));
  EXPECT_TRUE(c->CheckHealth().ok());
}

TEST(SchedulerProcess, BadInputsGetPreciseCodesAndChangeNothing) {
  TempDir dir;
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0);
  auto c = Client(proc.address());
  ASSERT_TRUE(c->SubmitJob(ExampleSpec("j1", 2, 0)).ok());
  auto w0 = c->RegisterNode(Reg("j1", herd::v1::ROLE_WORKER, "w0"));
  ASSERT_TRUE(w0.ok());
  ASSERT_TRUE(c->SubmitJob(ExampleSpec("gone", 1, 0)).ok());
  ASSERT_TRUE(c->CancelJob("gone", "test").ok());
  const std::string before = Jobs(*c);
  const uint64_t epoch = c->GetJob("j1")->epoch();

  auto expect = [&](const absl::Status& st, absl::StatusCode code, const char* what) {
    EXPECT_EQ(st.code(), code) << what << ": " << st;
    EXPECT_FALSE(st.message().empty()) << what;
    EXPECT_EQ(Jobs(*c), before) << what << " changed the state";
  };
  expect(c->GetJob("nope").status(), absl::StatusCode::kNotFound, "unknown job");
  expect(c->CancelJob("nope", "").status(), absl::StatusCode::kNotFound, "cancel unknown job");
  expect(c->SubmitJob(ExampleSpec("j1")).status(), absl::StatusCode::kAlreadyExists,
         "duplicate job name");
  auto zero = ExampleSpec("j9");
  zero.set_workers(0);
  expect(c->SubmitJob(zero).status(), absl::StatusCode::kInvalidArgument, "zero workers");
  auto warp = ExampleSpec("j9");
  warp.mutable_mode()->set_mode("warp");
  expect(c->SubmitJob(warp).status(), absl::StatusCode::kInvalidArgument, "unknown mode");
  auto layout = ExampleSpec("j9");
  layout.mutable_tensors(0)->add_shape(-3);
  expect(c->SubmitJob(layout).status(), absl::StatusCode::kInvalidArgument,
         "inconsistent tensor layout");
  herd::v1::GetPlanRequest plan;
  plan.set_job("j1");
  plan.set_iteration(0);
  plan.set_epoch(epoch - 1);
  expect(c->GetPlan(plan).status(), absl::StatusCode::kFailedPrecondition, "stale epoch");
  plan.set_epoch(0);
  plan.set_job("gone");
  auto ended = c->GetPlan(plan);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->job_state(), herd::v1::JOB_CANCELLED) << "the plan says the job ended";
  EXPECT_EQ(ended->end_reason(), "test");
  expect(c->CancelJob("gone", "again").status(), absl::StatusCode::kFailedPrecondition,
         "cancel an ended job");
  expect(c->DeleteJob("j1"), absl::StatusCode::kFailedPrecondition, "delete a live job");
  herd::v1::HeartbeatRequest hb;
  hb.set_job("j1");
  hb.set_node_id(987654);
  expect(c->Heartbeat(hb).status(), absl::StatusCode::kNotFound, "unknown node");
  expect(c->RegisterNode(Reg("j1", herd::v1::ROLE_WORKER, "w0")).status(),
         absl::StatusCode::kAlreadyExists, "duplicate live node");
  herd::v1::SetModeRequest sm;
  sm.set_job("j1");
  sm.mutable_mode()->set_mode("ps_ec");
  expect(c->SetMode(sm).status(), absl::StatusCode::kFailedPrecondition, "mode the job cannot use");
  sm.mutable_mode()->set_mode("nope");
  expect(c->SetMode(sm).status(), absl::StatusCode::kInvalidArgument, "unknown mode switch");
  expect(c->StoreSet("nope", "k", "v"), absl::StatusCode::kNotFound, "store of unknown job");
}

TEST(SchedulerProcess, PlanIterationsFromBeforeTheEpochAreRefused) {
  TempDir dir;
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0, {"--heartbeat-timeout", "400ms"});
  auto c = Client(proc.address());
  ASSERT_TRUE(c->SubmitJob(AsyncSpec("j1", 2, 1)).ok());
  std::vector<uint64_t> ids;
  for (int i = 0; i < 2; ++i) {
    ids.push_back(
        c->RegisterNode(Reg("j1", herd::v1::ROLE_WORKER, "w" + std::to_string(i)))->node_id());
  }
  ids.push_back(c->RegisterNode(Reg("j1", herd::v1::ROLE_SERVER, "s0"))->node_id());
  {
    Heartbeater beats(*c, "j1", ids, 100ms);
    for (int it = 0; it < 4; ++it) {
      for (uint64_t id : {ids[0], ids[1]}) {
        herd::v1::ReportIterationRequest r;
        r.set_job("j1");
        r.set_node_id(id);
        r.set_iteration(it);
        ASSERT_TRUE(c->ReportIteration(r).ok());
      }
    }
    beats.Drop(ids[1]);
    const auto give_up = Clock::now() + 5s;
    while (c->GetJob("j1")->workers(1).alive() && Clock::now() < give_up) {
      std::this_thread::sleep_for(50ms);
    }
    ASSERT_EQ(c->GetJob("j1")->epoch_start_iteration(), 4);
    const std::string before = Jobs(*c);
    herd::v1::GetPlanRequest plan;
    plan.set_job("j1");
    plan.set_iteration(2);
    auto st = c->GetPlan(plan).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_NE(std::string(st.message()).find("begins at iteration 4"), std::string::npos) << st;
    herd::v1::HeartbeatRequest hb;
    hb.set_job("j1");
    hb.set_node_id(ids[1]);
    EXPECT_EQ(c->Heartbeat(hb).status().code(), absl::StatusCode::kFailedPrecondition)
        << "heartbeat from a dead node";
    EXPECT_EQ(Jobs(*c), before);
    plan.set_iteration(4);
    EXPECT_TRUE(c->GetPlan(plan).ok());
  }
}

TEST(SchedulerProcess, BearerTokenIsCheckedOnEveryCall) {
  TempDir dir;
  const std::string token_file = dir.path() + "/token";
  std::ofstream(token_file) << "s3cret\n";
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0, {"--token-file", token_file});
  auto none = Client(proc.address());
  auto wrong = Client(proc.address(), "guess");
  auto right = Client(proc.address(), "s3cret");
  EXPECT_EQ(none->ListJobs().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(wrong->SubmitJob(ExampleSpec()).status().code(), absl::StatusCode::kUnauthenticated);
  herd::v1::WatchPlanRequest w;
  w.set_job("j1");
  EXPECT_EQ(
      wrong->WatchPlan(w, Deadline::After(2s), [](const herd::v1::Plan&) { return false; }).code(),
      absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Jobs(*right), herd::v1::ListJobsResponse().SerializeAsString())
      << "the refused submission did not happen";
  EXPECT_TRUE(right->SubmitJob(ExampleSpec()).ok());
  EXPECT_TRUE(none->CheckHealth().ok()) << "health probes need no token";
}

TEST(SchedulerProcess, ServesTls) {
  TempDir dir;
  const std::string cert = dir.path() + "/cert.pem", key = dir.path() + "/key.pem";
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
      "subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "openssl cannot make a test certificate";
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0, {"--tls-cert", cert, "--tls-key", key});
  auto tls = Client(proc.address(), "", cert);
  EXPECT_TRUE(tls->SubmitJob(ExampleSpec()).ok());
  auto plain = Client(proc.address());
  EXPECT_EQ(plain->ListJobs().status().code(), absl::StatusCode::kUnavailable)
      << "a plaintext client cannot talk to a TLS scheduler";
}

TEST(SchedulerProcess, StoreBootstrapsProcessesThatKnowOnlyTheScheduler) {
  TempDir dir;
  SchedulerProcess proc;
  proc.Start(dir.path() + "/state", 0);
  std::shared_ptr<SchedulerClient> c = Client(proc.address());
  ASSERT_TRUE(c->SubmitJob(ExampleSpec("j1", 3, 0)).ok());
  // Three "ranks" publish their addresses and read everyone else's.
  std::vector<std::string> seen(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      auto store = worker::MakeSchedulerStore(c, "j1");
      std::this_thread::sleep_for(std::chrono::milliseconds(50 * r));
      ASSERT_TRUE(store->Set("addr/" + std::to_string(r), "ucx-" + std::to_string(r)).ok());
      for (int q = 0; q < 3; ++q) {
        auto v = store->Get("addr/" + std::to_string(q), Deadline::After(5s));
        ASSERT_TRUE(v.ok()) << v.status();
        seen[static_cast<size_t>(r)] += *v;
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (const auto& s : seen) EXPECT_EQ(s, "ucx-0ucx-1ucx-2");
  auto store = worker::MakeSchedulerStore(c, "j1");
  EXPECT_EQ(store->Set("addr/0", "x").code(), absl::StatusCode::kAlreadyExists);
  auto missing = store->Get("never", Deadline::After(300ms));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(std::string(missing.status().message()).find("'never'"), std::string::npos);
}

}  // namespace
}  // namespace herd::scheduler
