// Following a job (scheduler/follow.cc, docs/scheduler.md "Following a job"), driven on
// SchedulerCore with sinks that record what each stream is sent: the first event's view, plans
// a follower computes that equal GetPlan's, the horizon and what is placed after it (a mode
// switch, a checkpoint cut, a joining worker), progress folded without per-message writes,
// answers to want_completed, the notice before a death, and the bad messages refused.

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "scheduler/client/epoch_plan.h"
#include "scheduler/scheduler_core.h"
#include "tests/unit/scheduler/test_jobs.h"

namespace herd::scheduler {
namespace {

using namespace std::chrono_literals;
using herd::v1::FollowEvent;
using herd::v1::FollowRequest;
using testing::ExampleSpec;
using testing::TempDir;

// What one stream was sent, as a process would hold it: the newest view and the highest
// horizon and completion.
class RecordingSink : public SchedulerCore::FollowSink {
 public:
  void Send(const FollowEvent& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(e);
    if (e.has_view()) view_ = e.view();
    horizon_ = std::max(horizon_, e.horizon());
    completed_ = std::max(completed_, e.completed_iteration());
    if (e.notice() != 0) notice_ = e.notice();
  }
  void Close(const absl::Status& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = why;
  }
  herd::v1::EpochView view() {
    std::lock_guard<std::mutex> lock(mu_);
    return view_;
  }
  int64_t horizon() {
    std::lock_guard<std::mutex> lock(mu_);
    return horizon_;
  }
  int64_t completed() {
    std::lock_guard<std::mutex> lock(mu_);
    return completed_;
  }
  uint64_t notice() {
    std::lock_guard<std::mutex> lock(mu_);
    return notice_;
  }
  size_t events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_.size();
  }
  size_t views() {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& e : events_) n += e.has_view();
    return n;
  }

 private:
  std::mutex mu_;
  std::vector<FollowEvent> events_;
  herd::v1::EpochView view_;
  int64_t horizon_ = -1, completed_ = -1;
  uint64_t notice_ = 0;
  absl::Status closed_;
};

herd::v1::JobSpec AllreduceSpec(const std::string& name, int workers, bool elastic) {
  auto spec = ExampleSpec(name, workers, 0);
  spec.mutable_mode()->clear_topology();
  spec.mutable_mode()->set_mode("allreduce");
  if (elastic) spec.mutable_elastic()->set_min_workers(1);
  return spec;
}

class Follow : public ::testing::Test {
 protected:
  void Open(std::chrono::milliseconds timeout = 10s) {
    SchedulerOptions o{dir_.path(), timeout};
    o.horizon_ahead = 200ms;
    auto core = SchedulerCore::Open(o);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
  }
  uint64_t Register(const std::string& job, const std::string& name) {
    herd::v1::RegisterNodeRequest r;
    r.set_job(job);
    r.set_role(herd::v1::ROLE_WORKER);
    r.set_name(name);
    auto got = core_->RegisterNode(r);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? got->node_id() : 0;
  }
  // Opens a stream for `node` and returns its id and sink.
  std::pair<uint64_t, std::shared_ptr<RecordingSink>> Stream(const std::string& job,
                                                             uint64_t node) {
    auto sink = std::make_shared<RecordingSink>();
    FollowRequest first;
    first.set_job(job);
    first.set_node_id(node);
    auto id = core_->OpenFollow(first, sink);
    EXPECT_TRUE(id.ok()) << id.status();
    return {id.ok() ? *id : 0, sink};
  }
  absl::Status Completed(uint64_t stream, int64_t iteration) {
    FollowRequest m;
    m.set_completed_iteration(iteration);
    auto* r = m.add_iterations();
    r->set_iteration(iteration);
    r->mutable_stats()->set_loss(0.5);
    return core_->TakeFollow(stream, m);
  }
  // Waits (bounded) until `ready` holds.
  template <typename F>
  bool Eventually(F ready, std::chrono::milliseconds bound = 5s) {
    const auto end = std::chrono::steady_clock::now() + bound;
    while (std::chrono::steady_clock::now() < end) {
      if (ready()) return true;
      std::this_thread::sleep_for(5ms);
    }
    return ready();
  }

  TempDir dir_;
  std::unique_ptr<SchedulerCore> core_;
};

TEST_F(Follow, AFollowerComputesThePlansGetPlanAnswersBitForBit) {
  Open();
  auto spec = ExampleSpec("j", 4, 0);  // decentralized, random topology: peers per iteration
  ASSERT_TRUE(core_->SubmitJob(spec).ok());
  std::vector<std::pair<uint64_t, std::shared_ptr<RecordingSink>>> streams;
  std::vector<uint64_t> ids;
  for (int w = 0; w < 4; ++w) ids.push_back(Register("j", "w" + std::to_string(w)));
  for (int w = 0; w < 4; ++w) streams.push_back(Stream("j", ids[w]));
  auto& [id0, sink0] = streams[0];
  ASSERT_TRUE(Eventually([&] { return sink0->horizon() >= 3; }))
      << "the first grant holds at least min_horizon iterations";
  const herd::v1::EpochView view = sink0->view();
  EXPECT_EQ(view.job_state(), herd::v1::JOB_RUNNING);
  EXPECT_EQ(view.worker_slots(), 4);
  EXPECT_EQ(view.absent_workers_size(), 0);
  const auto status = core_->GetJob("j");
  for (int64_t i = 0; i <= sink0->horizon(); ++i) {
    herd::v1::GetPlanRequest req;
    req.set_job("j");
    req.set_iteration(i);
    auto served = core_->GetPlan(req);
    ASSERT_TRUE(served.ok()) << served.status();
    EXPECT_EQ(BuildPlan(status->spec(), view, i).SerializeAsString(), served->SerializeAsString())
        << "iteration " << i;
  }
  // A view is O(what changed): it carries no member records, whatever the workers registered.
  EXPECT_LT(view.ByteSizeLong(), 200u) << view.DebugString();
}

TEST_F(Follow, WorkersOfAPendingJobGetNoViewPerRegistrationButTheOneItStartsWith) {
  Open();
  ASSERT_TRUE(core_->SubmitJob(AllreduceSpec("j", 3, false)).ok());
  const uint64_t a = Register("j", "w0");
  auto [sa, sink] = Stream("j", a);
  ASSERT_EQ(sink->views(), 1u) << "the stream's first event";
  EXPECT_EQ(sink->view().job_state(), herd::v1::JOB_PENDING);
  Register("j", "w1");
  EXPECT_EQ(sink->views(), 1u) << "another registration sends it nothing";
  Register("j", "w2");
  ASSERT_TRUE(Eventually([&] { return sink->view().job_state() == herd::v1::JOB_RUNNING; }));
  EXPECT_EQ(sink->views(), 2u);
}

TEST_F(Follow, TheHorizonFollowsProgressAndAModeSwitchComesAfterIt) {
  Open();
  ASSERT_TRUE(core_->SubmitJob(AllreduceSpec("j", 2, false)).ok());
  const uint64_t a = Register("j", "w0"), b = Register("j", "w1");
  auto [sa, sink_a] = Stream("j", a);
  auto [sb, sink_b] = Stream("j", b);
  ASSERT_TRUE(Eventually([&] { return sink_a->horizon() >= 0; }));
  // Two workers at 100 iterations a second: the horizon runs ahead of them.
  for (int64_t i = 0; i < 60; ++i) {
    ASSERT_TRUE(Completed(sa, i).ok());
    ASSERT_TRUE(Completed(sb, i).ok());
    ASSERT_GE(sink_a->horizon(), i) << "a worker never waits while the scheduler runs";
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_GT(sink_a->horizon(), 60) << "about horizon_ahead of work ahead";
  EXPECT_LT(sink_a->horizon(), 60 + 200) << "but not much more";
  EXPECT_EQ(sink_a->horizon(), sink_b->horizon());
  // Progress lives in memory (the record is not written per report); the ticker folds it.
  EXPECT_TRUE(Eventually([&] { return core_->GetJob("j")->completed_iteration() == 59; }));

  herd::v1::SetModeRequest set;
  set.set_job("j");
  set.mutable_mode()->set_mode("dear");
  auto switched = core_->SetMode(set);
  ASSERT_TRUE(switched.ok()) << switched.status();
  const int64_t from = switched->schedule(switched->schedule_size() - 1).from_iteration();
  EXPECT_EQ(from, switched->issued_iteration() + 1) << "after every iteration granted";
  ASSERT_TRUE(Eventually([&] { return sink_b->view().schedule_size() == 2; }));
  const auto spec = core_->GetJob("j")->spec();
  EXPECT_EQ(ModeAt(spec, sink_b->view().schedule(), from - 1).mode(), "allreduce");
  EXPECT_EQ(ModeAt(spec, sink_b->view().schedule(), from).mode(), "dear");
}

TEST_F(Follow, TheHorizonStopsBeforeTheSecondPolicyCutUntilTheFirstEnds) {
  Open();
  auto spec = AllreduceSpec("j", 1, false);
  spec.mutable_checkpoint()->set_dir(dir_.path() + "/ckpt");
  spec.mutable_checkpoint()->set_every_iterations(5);
  ASSERT_TRUE(core_->SubmitJob(spec).ok());
  const uint64_t a = Register("j", "w0");
  auto [sa, sink] = Stream("j", a);
  ASSERT_TRUE(Eventually([&] { return sink->horizon() >= 3; }));
  for (int64_t i = 0; i < 30 && sink->horizon() >= i; ++i) {
    ASSERT_TRUE(Completed(sa, i).ok());
    std::this_thread::sleep_for(10ms);
  }
  // The checkpoint at 5 was started when the horizon crossed it; nobody reports its file, so
  // it stays pending and the horizon waits before 10.
  auto job = core_->GetJob("j");
  EXPECT_EQ(job->pending_checkpoint().iteration(), 5);
  EXPECT_EQ(sink->view().checkpoint().iteration(), 5) << "the view names the cut";
  EXPECT_EQ(sink->horizon(), 9);
}

TEST_F(Follow, AWaiterHearsOnceEveryLiveWorkerCompletedAnIteration) {
  Open();
  ASSERT_TRUE(core_->SubmitJob(AllreduceSpec("j", 2, false)).ok());
  const uint64_t a = Register("j", "w0"), b = Register("j", "w1");
  auto [sa, sink_a] = Stream("j", a);
  auto [sb, sink_b] = Stream("j", b);
  ASSERT_TRUE(Eventually([&] { return sink_a->horizon() >= 3; }));
  FollowRequest ask;
  ask.set_completed_iteration(2);
  ask.set_want_completed(2);
  ASSERT_TRUE(core_->TakeFollow(sa, ask).ok());
  EXPECT_LT(sink_a->completed(), 2) << "worker 1 has not completed it";
  ASSERT_TRUE(Completed(sb, 2).ok());
  ASSERT_TRUE(Eventually([&] { return sink_a->completed() == 2; }));
}

TEST_F(Follow, BeforeADeathTheLiveWorkersAreAskedWhereTheyAre) {
  Open(400ms);
  ASSERT_TRUE(core_->SubmitJob(AllreduceSpec("j", 3, true)).ok());
  std::vector<uint64_t> ids;
  for (int w = 0; w < 3; ++w) ids.push_back(Register("j", "w" + std::to_string(w)));
  auto [s0, sink0] = Stream("j", ids[0]);
  auto [s1, sink1] = Stream("j", ids[1]);
  auto [s2, sink2] = Stream("j", ids[2]);
  ASSERT_TRUE(Eventually([&] { return sink0->horizon() >= 3; }));
  for (uint64_t s : {s0, s1, s2}) ASSERT_TRUE(Completed(s, 0).ok());
  // Workers 0 and 1 go on to iteration 2 but their batched reports have not gone up yet;
  // worker 2 stops.
  const auto silence = std::chrono::steady_clock::now();
  ASSERT_TRUE(Eventually(
      [&] {
        FollowRequest beat;
        (void)core_->TakeFollow(s0, beat);
        (void)core_->TakeFollow(s1, beat);
        return sink0->notice() != 0;
      },
      3s));
  EXPECT_GE(std::chrono::steady_clock::now() - silence, 400ms);
  EXPECT_EQ(core_->GetJob("j")->membership_generation(), 0) << "not declared before the answers";
  for (uint64_t s : {s0, s1}) {
    FollowRequest answer;
    answer.set_completed_iteration(2);
    answer.set_answers_notice(sink0->notice());
    ASSERT_TRUE(core_->TakeFollow(s, answer).ok());
  }
  auto job = core_->GetJob("j");
  EXPECT_EQ(job->membership_generation(), 1);
  EXPECT_FALSE(job->workers(2).alive());
  EXPECT_EQ(job->epoch_start_iteration(), 3) << "after what the survivors said they completed";
  ASSERT_TRUE(Eventually([&] { return sink1->view().membership_generation() == 1; }));
  const herd::v1::EpochView after = sink1->view();
  EXPECT_EQ(std::vector<int>(after.absent_workers().begin(), after.absent_workers().end()),
            (std::vector<int>{2}));
}

TEST_F(Follow, BadMessagesAreRefusedAndChangeNothing) {
  Open();
  ASSERT_TRUE(core_->SubmitJob(AllreduceSpec("j", 1, false)).ok());
  const uint64_t a = Register("j", "w0");
  auto sink = std::make_shared<RecordingSink>();
  FollowRequest stranger;
  stranger.set_job("j");
  stranger.set_node_id(a + 100);
  auto refused = core_->OpenFollow(stranger, sink);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kNotFound) << refused.status();
  auto [sa, ok_sink] = Stream("j", a);
  FollowRequest other;
  other.set_node_id(a + 1);
  EXPECT_EQ(core_->TakeFollow(sa, other).code(), absl::StatusCode::kInvalidArgument);
  FollowRequest far;
  far.set_want_horizon(int64_t{1} << 62);
  auto st = core_->TakeFollow(sa, far);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  FollowRequest negative;
  negative.set_completed_iteration(-7);
  EXPECT_EQ(core_->TakeFollow(sa, negative).code(), absl::StatusCode::kInvalidArgument);
  FollowRequest many;
  many.set_completed_iteration(0);
  for (int i = 0; i < 2000; ++i) many.add_iterations()->set_iteration(0);
  EXPECT_EQ(core_->TakeFollow(sa, many).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(core_->GetJob("j")->issued_iteration(), 1 << 20) << "the horizon did not move there";
  herd::v1::GetPlanRequest plan;
  plan.set_job("j");
  plan.set_node_id(a);
  plan.set_iteration(int64_t{1} << 62);
  EXPECT_EQ(core_->GetPlan(plan).status().code(), absl::StatusCode::kInvalidArgument)
      << "nor by a plan asked for";
  EXPECT_LT(core_->GetJob("j")->issued_iteration(), 1 << 20);
  core_->CloseFollow(sa);
  EXPECT_EQ(core_->FollowStreams(), 0u);
}

}  // namespace
}  // namespace herd::scheduler
