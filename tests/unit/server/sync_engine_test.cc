// ps_sync: sums, the optimizer after the M-th push, waiting pulls, duplicate pushes, rounds of
// different keys completing independently, and bad input leaving the state unchanged.

#include <gtest/gtest.h>

#include <limits>

#include <thread>

#include "engine_test_util.h"

namespace herd::server {
namespace {

using testing::Bytes;
using testing::Floats;
using testing::kA;
using testing::kB;
using testing::kElsewhere;
using testing::Later;
using testing::Soon;

absl::Status PushOf(Engine& e, int worker, KeyId key, int64_t round, const std::vector<float>& g) {
  const std::string data = Bytes(g);
  return e.Push(PushArgs{"j", worker, key, round, data, "fp32"}, Later());
}

std::vector<float> PullNow(Engine& e, KeyId key, int64_t min_version, int64_t* version = nullptr) {
  auto p = e.Pull("j", 0, key, min_version, Later());
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  if (version != nullptr) *version = p->version;
  return Floats(p->data);
}

std::unique_ptr<Engine> Initialised(ShardConfig config) {
  auto e = Engine::Create(std::move(config), nullptr);
  EXPECT_TRUE(*e->Init("j", kA, Bytes({1, 2, 3, 4})));
  EXPECT_TRUE(*e->Init("j", kB, Bytes({10, 20, 30})));
  return e;
}

TEST(SyncEngineTest, RoundAveragesAllWorkersThenAppliesSgd) {
  auto e = Initialised(testing::SmallJob(Mode::kSync, 2));
  ASSERT_TRUE(PushOf(*e, 0, kA, 0, {1, 1, 1, 1}).ok());
  // One push of two: the round is open, a pull of round 0's result waits and runs out.
  EXPECT_EQ(e->Pull("j", 0, kA, 1, Soon()).status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(PushOf(*e, 1, kA, 0, {3, -1, 0, 2}).ok());
  int64_t version = -1;
  auto p = PullNow(*e, kA, 1, &version);
  EXPECT_EQ(version, 1);
  // mean gradient {2, 0, 0.5, 1.5}, lr 0.5
  EXPECT_EQ(p, (std::vector<float>{0, 2, 2.75, 3.25}));
}

// A push may carry the worker's learning rate (a scheduled one): the round steps with it. The
// pushes of one round must agree; a disagreeing one, or a rate out of range, is refused and
// changes nothing.
TEST(SyncEngineTest, TheRoundStepsWithThePushesLearningRate) {
  auto e = Initialised(testing::SmallJob(Mode::kSync, 2));
  const std::string g0 = Bytes({1, 1, 1, 1}), g1 = Bytes({3, -1, 0, 2});
  for (double bad : {-1.0, 2e6, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_EQ(e->Push(PushArgs{"j", 0, kA, 0, g0, "fp32", bad}, Later()).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  ASSERT_TRUE(e->Push(PushArgs{"j", 0, kA, 0, g0, "fp32", 0.25}, Later()).ok());
  const absl::Status disagreeing = e->Push(PushArgs{"j", 1, kA, 0, g1, "fp32", 0.5}, Later());
  EXPECT_EQ(disagreeing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(disagreeing.message().find("learning rate 0.5"), std::string::npos) << disagreeing;
  ASSERT_TRUE(e->Push(PushArgs{"j", 1, kA, 0, g1, "fp32", 0.25}, Later()).ok());
  // mean gradient {2, 0, 0.5, 1.5} at lr 0.25 (the job's is 0.5)
  EXPECT_EQ(PullNow(*e, kA, 1), (std::vector<float>{0.5, 2, 2.875, 3.625}));
}

TEST(SyncEngineTest, SumWhenNotAveraging) {
  auto config = testing::SmallJob(Mode::kSync, 2);
  config.average = false;
  auto e = Initialised(config);
  ASSERT_TRUE(PushOf(*e, 0, kA, 0, {1, 1, 1, 1}).ok());
  ASSERT_TRUE(PushOf(*e, 1, kA, 0, {3, -1, 0, 2}).ok());
  EXPECT_EQ(PullNow(*e, kA, 1), (std::vector<float>{-1, 2, 2.5, 2.5}));
}

TEST(SyncEngineTest, EarlyPullWaitsForTheRound) {
  auto e = Initialised(testing::SmallJob(Mode::kSync, 2));
  absl::StatusOr<Pulled> early;
  std::thread puller([&] { early = e->Pull("j", 1, kB, 1, Later()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ASSERT_TRUE(PushOf(*e, 0, kB, 0, {2, 2, 2}).ok());
  ASSERT_TRUE(PushOf(*e, 1, kB, 0, {2, 2, 2}).ok());
  puller.join();
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_EQ(early->version, 1);
  EXPECT_EQ(Floats(early->data), (std::vector<float>{9, 19, 29}));
}

TEST(SyncEngineTest, DuplicatePushIsRejectedNotAddedTwice) {
  auto e = Initialised(testing::SmallJob(Mode::kSync, 2));
  ASSERT_TRUE(PushOf(*e, 0, kA, 0, {2, 2, 2, 2}).ok());
  auto dup = PushOf(*e, 0, kA, 0, {2, 2, 2, 2});
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists) << dup;
  EXPECT_NE(dup.message().find("worker 0 already pushed round 0"), absl::string_view::npos);
  ASSERT_TRUE(PushOf(*e, 1, kA, 0, {0, 0, 0, 0}).ok());
  EXPECT_EQ(PullNow(*e, kA, 1), (std::vector<float>{0.5, 1.5, 2.5, 3.5}));
  EXPECT_EQ(e->Stats().rejected, 1);
}

TEST(SyncEngineTest, RoundsOfDifferentKeysCompleteOutOfOrder) {
  auto e = Initialised(testing::SmallJob(Mode::kSync, 2));
  ASSERT_TRUE(PushOf(*e, 0, kA, 0, {0, 0, 0, 0}).ok());
  ASSERT_TRUE(PushOf(*e, 0, kB, 0, {1, 1, 1}).ok());
  ASSERT_TRUE(PushOf(*e, 1, kB, 0, {1, 1, 1}).ok());  // B's round 0 completes first
  ASSERT_TRUE(PushOf(*e, 0, kB, 1, {1, 1, 1}).ok());
  ASSERT_TRUE(PushOf(*e, 1, kB, 1, {1, 1, 1}).ok());  // and its round 1, while A waits
  int64_t va = -1, vb = -1;
  PullNow(*e, kA, 0, &va);
  EXPECT_EQ(PullNow(*e, kB, 2, &vb), (std::vector<float>{9, 19, 29}));
  EXPECT_EQ(va, 0);
  EXPECT_EQ(vb, 2);
  ASSERT_TRUE(PushOf(*e, 1, kA, 0, {4, 4, 4, 4}).ok());
  EXPECT_EQ(PullNow(*e, kA, 1, &va), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(va, 1);
}

TEST(SyncEngineTest, MomentumWithWeightDecayOverTwoRounds) {
  auto config = testing::SmallJob(Mode::kSync, 1);
  config.optimizer = {OptimizerConfig::Kind::kMomentum, /*lr=*/0.1, /*momentum=*/0.5,
                      /*weight_decay=*/0.1};
  auto e = Initialised(config);
  ASSERT_TRUE(PushOf(*e, 0, kB, 0, {1, 1, 1}).ok());
  ASSERT_TRUE(PushOf(*e, 0, kB, 1, {1, 1, 1}).ok());
  // p0 = 10: m1 = 1 + 0.1*10 = 2, p1 = 9.8; m2 = 0.5*2 + 1 + 0.98 = 2.98, p2 = 9.502
  auto p = PullNow(*e, kB, 2);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_NEAR(p[0], 9.502f, 1e-5);
}

TEST(SyncEngineTest, BadInputIsRefusedPreciselyAndChangesNothing) {
  auto e = Initialised(testing::SmallJob(Mode::kSync, 2));
  const std::string four = Bytes({1, 1, 1, 1});
  auto push = [&](std::string_view job, int worker, KeyId key, int64_t round, std::string_view data,
                  std::string_view dtype = "fp32") {
    return e->Push(PushArgs{job, worker, key, round, data, dtype}, Later());
  };
  auto st = push("other", 0, kA, 0, four);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(st.message().find("job 'other'"), absl::string_view::npos) << st;
  st = push("j", 2, kA, 0, four);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(st.message().find("worker rank 2 is not in job 'j'"), absl::string_view::npos) << st;
  st = push("j", 0, kElsewhere, 0, Bytes({1, 1}));
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(st.message().find("is on shard 1"), absl::string_view::npos) << st;
  st = push("j", 0, KeyId{7, 0}, 0, four);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  st = push("j", 0, kA, 0, Bytes({1, 1, 1}));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("want 16 bytes"), absl::string_view::npos) << st;
  st = push("j", 0, kA, 0, four, "fp16");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  st = push("j", 0, kA, 0, Bytes({1, std::numeric_limits<float>::quiet_NaN(), 1, 1}));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("non-finite value at index 1"), absl::string_view::npos) << st;
  st = push("j", 1, kA, 0, Bytes({1, 1, 1, std::numeric_limits<float>::infinity()}));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  st = push("j", 0, kA, 1, four);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("not open yet"), absl::string_view::npos) << st;
  // Complete round 0, then push it again: it is in the past.
  ASSERT_TRUE(push("j", 0, kA, 0, four).ok());
  ASSERT_TRUE(push("j", 1, kA, 0, four).ok());
  st = push("j", 0, kA, 0, four);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("already completed"), absl::string_view::npos) << st;
  // Only the one good round happened.
  int64_t version = -1;
  EXPECT_EQ(PullNow(*e, kA, 0, &version), (std::vector<float>{0.5, 1.5, 2.5, 3.5}));
  EXPECT_EQ(version, 1);
  EXPECT_EQ(e->Stats().rejected, 10);
  EXPECT_EQ(e->Stats().pushes, 2);
}

TEST(SyncEngineTest, UninitialisedKeyAndBadInitAreRefused) {
  auto e = Engine::Create(testing::SmallJob(Mode::kSync, 1), nullptr);
  auto st = PushOf(*e, 0, kA, 0, {1, 1, 1, 1});
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("call InitKeys first"), absl::string_view::npos) << st;
  EXPECT_EQ(e->Init("j", kA, Bytes({1})).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      e->Init("j", kA, Bytes({1, 2, std::numeric_limits<float>::infinity(), 4})).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(*e->Init("j", kA, Bytes({1, 2, 3, 4})));
  EXPECT_FALSE(*e->Init("j", kA, Bytes({9, 9, 9, 9})));  // the first value stays
  EXPECT_EQ(PullNow(*e, kA, 0), (std::vector<float>{1, 2, 3, 4}));
}

TEST(SyncEngineTest, ShutdownWakesWaitersWithUnavailable) {
  auto e = Initialised(testing::SmallJob(Mode::kSync, 2));
  absl::Status got;
  std::thread waiter([&] { got = e->Pull("j", 0, kA, 1, Later()).status(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  e->Shutdown();
  waiter.join();
  EXPECT_EQ(got.code(), absl::StatusCode::kUnavailable);
}

// Elastic jobs (docs/elastic.md): a round completes once every live worker pushed it. A round
// that waited only for a worker that died completes when the shard hears of the death, and a
// pull blocked on it returns; the mean is over the pushes the round took.
TEST(SyncEngineTest, ElasticRoundCompletesWithoutTheDeadWorker) {
  auto config = testing::SmallJob(Mode::kSync, 3);
  config.elastic = true;
  config.plan_wait = std::chrono::milliseconds(100);  // the dead worker's push waits that long
  auto e = Initialised(config);
  ASSERT_TRUE(PushOf(*e, 0, kA, 0, {1, 1, 1, 1}).ok());
  ASSERT_TRUE(PushOf(*e, 1, kA, 0, {3, -1, 0, 2}).ok());
  absl::StatusOr<Pulled> waited;
  std::thread puller([&] { waited = e->Pull("j", 0, kA, 1, Later()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  e->SetLiveWorkers({0, 1});  // worker 2 declared dead
  puller.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(waited->version, 1);
  // mean gradient {2, 0, 0.5, 1.5}, lr 0.5
  EXPECT_EQ(Floats(waited->data), (std::vector<float>{0, 2, 2.75, 3.25}));
  // The dead worker's late push is refused and changes nothing.
  const absl::Status late = PushOf(*e, 2, kA, 1, {100, 100, 100, 100});
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_NE(late.message().find("not a live worker"), std::string::npos) << late;
  // The next round takes the two live workers' pushes.
  ASSERT_TRUE(PushOf(*e, 0, kA, 1, {2, 2, 2, 2}).ok());
  ASSERT_TRUE(PushOf(*e, 1, kA, 1, {0, 0, 0, 0}).ok());
  EXPECT_EQ(PullNow(*e, kA, 2), (std::vector<float>{-0.5, 1.5, 2.25, 2.75}));
}

TEST(SyncEngineTest, ElasticRoundKeepsAPushTheDeadWorkerMadeBeforeItDied) {
  auto config = testing::SmallJob(Mode::kSync, 3);
  config.elastic = true;
  auto e = Initialised(config);
  ASSERT_TRUE(PushOf(*e, 2, kA, 0, {3, 3, 3, 3}).ok());
  e->SetLiveWorkers({0, 1});
  ASSERT_TRUE(PushOf(*e, 0, kA, 0, {0, 0, 0, 0}).ok());
  EXPECT_EQ(e->Pull("j", 0, kA, 1, Soon()).status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(PushOf(*e, 1, kA, 0, {0, -3, 0, 3}).ok());
  // mean of the three pushes {1, 0, 1, 2}, lr 0.5
  EXPECT_EQ(PullNow(*e, kA, 1), (std::vector<float>{0.5, 2, 2.5, 3}));
}

// A worker back in its slot (restarted into the elastic job) counts in a key's rounds only
// from the round a live worker (its source, which handed it its iteration and round) announces
// it in: the rounds before complete without it, its push of one of them is refused (its round
// and its iteration would disagree), and the announced round and every later one wait for it.
TEST(SyncEngineTest, ElasticReturnedWorkerIsNotCountedBeforeItsAnnouncementThenItsRoundsWait) {
  auto config = testing::SmallJob(Mode::kSync, 3);
  config.elastic = true;
  auto e = Initialised(config);
  e->SetLiveWorkers({0, 1});     // worker 2 died
  e->SetLiveWorkers({0, 1, 2});  // and is back: the plans name it live again
  // Round 0 completes with the two others: nobody announced worker 2 yet.
  ASSERT_TRUE(PushOf(*e, 0, kA, 0, {2, 2, 2, 2}).ok());
  ASSERT_TRUE(PushOf(*e, 1, kA, 0, {0, 0, 0, 0}).ok());
  int64_t version = -1;
  EXPECT_EQ(PullNow(*e, kA, 1, &version), (std::vector<float>{0.5, 1.5, 2.5, 3.5}));
  EXPECT_EQ(version, 1);
  // Its push of the round that completed without it is refused and changes nothing.
  const absl::Status late = PushOf(*e, 2, kA, 0, {100, 100, 100, 100});
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_NE(late.message().find("worker 2 is back in job 'j' but key"), std::string::npos) << late;
  EXPECT_NE(late.message().find("completed round 0 without it"), std::string::npos) << late;
  EXPECT_EQ(PullNow(*e, kA, 1, &version), (std::vector<float>{0.5, 1.5, 2.5, 3.5}));
  EXPECT_EQ(version, 1);
  // Worker 0 (its source) announces it in round 1: that round waits for it.
  ASSERT_TRUE(PushOf(*e, 1, kA, 1, {0, 0, 0, 0}).ok());
  const std::string announcing = Bytes({3, 3, 3, 3});
  ASSERT_TRUE(e->Push(PushArgs{"j", 0, kA, 1, announcing, "fp32", 0, {2}}, Later()).ok());
  EXPECT_EQ(e->Pull("j", 0, kA, 2, Soon()).status().code(), absl::StatusCode::kDeadlineExceeded)
      << "round 1 waits for the announced worker";
  ASSERT_TRUE(PushOf(*e, 2, kA, 1, {0, 0, 0, 3}).ok());
  // mean {1, 1, 1, 2}, lr 0.5
  EXPECT_EQ(PullNow(*e, kA, 2), (std::vector<float>{0, 1, 2, 2.5}));
  // And every round after it.
  ASSERT_TRUE(PushOf(*e, 0, kA, 2, {0, 0, 0, 0}).ok());
  ASSERT_TRUE(PushOf(*e, 1, kA, 2, {0, 0, 0, 0}).ok());
  EXPECT_EQ(e->Pull("j", 0, kA, 3, Soon()).status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(PushOf(*e, 2, kA, 2, {0, 0, 0, 0}).ok());
  EXPECT_TRUE(e->Pull("j", 0, kA, 3, Soon()).ok());
  // The other key heard no announcement: its rounds still complete without worker 2.
  ASSERT_TRUE(PushOf(*e, 0, kB, 0, {0, 0, 0}).ok());
  ASSERT_TRUE(PushOf(*e, 1, kB, 0, {0, 0, 0}).ok());
  EXPECT_TRUE(e->Pull("j", 0, kB, 1, Soon()).ok());
}

// A returned worker whose first push is the key's open round (before its source's
// announcement) takes part in it, and the key counts it from then on.
TEST(SyncEngineTest, ElasticReturnedWorkersFirstPushOfTheOpenRoundCountsInIt) {
  auto config = testing::SmallJob(Mode::kSync, 3);
  config.elastic = true;
  auto e = Initialised(config);
  e->SetLiveWorkers({0, 1});
  ASSERT_TRUE(PushOf(*e, 0, kA, 0, {3, 3, 3, 3}).ok());
  e->SetLiveWorkers({0, 1, 2});
  ASSERT_TRUE(PushOf(*e, 2, kA, 0, {0, 0, 0, 3}).ok());
  EXPECT_EQ(e->Pull("j", 0, kA, 1, Soon()).status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(PushOf(*e, 1, kA, 0, {0, 0, 0, 0}).ok());
  EXPECT_EQ(PullNow(*e, kA, 1), (std::vector<float>{0.5, 1.5, 2.5, 3}));
  // Round 1 waits for it without an announcement.
  ASSERT_TRUE(PushOf(*e, 0, kA, 1, {0, 0, 0, 0}).ok());
  ASSERT_TRUE(PushOf(*e, 1, kA, 1, {0, 0, 0, 0}).ok());
  EXPECT_EQ(e->Pull("j", 0, kA, 2, Soon()).status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(PushOf(*e, 2, kA, 1, {0, 0, 0, 0}).ok());
  EXPECT_TRUE(e->Pull("j", 0, kA, 2, Soon()).ok());
}

// A restarted worker may push before the shard's watch heard the plan naming it live again:
// its push waits for that plan (bounded) instead of being refused.
TEST(SyncEngineTest, ElasticPushBeforeThePlanNamesItsWorkerLiveWaitsForThePlan) {
  auto config = testing::SmallJob(Mode::kSync, 3);
  config.elastic = true;
  config.plan_wait = std::chrono::milliseconds(3000);
  auto e = Initialised(config);
  e->SetLiveWorkers({0, 1});
  absl::Status pushed;
  const auto begin = std::chrono::steady_clock::now();
  std::thread restarted([&] { pushed = PushOf(*e, 2, kA, 0, {0, 0, 0, 3}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  e->SetLiveWorkers({0, 1, 2});
  restarted.join();
  ASSERT_TRUE(pushed.ok()) << pushed;
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(2000));
  ASSERT_TRUE(PushOf(*e, 0, kA, 0, {3, 3, 3, 3}).ok());
  ASSERT_TRUE(PushOf(*e, 1, kA, 0, {0, 0, 0, 0}).ok());
  EXPECT_EQ(PullNow(*e, kA, 1), (std::vector<float>{0.5, 1.5, 2.5, 3}));
}

TEST(SyncEngineTest, WithoutAnElasticBlockARoundWaitsForEveryWorker) {
  auto e = Initialised(testing::SmallJob(Mode::kSync, 3));
  ASSERT_TRUE(PushOf(*e, 0, kA, 0, {1, 1, 1, 1}).ok());
  ASSERT_TRUE(PushOf(*e, 1, kA, 0, {1, 1, 1, 1}).ok());
  e->SetLiveWorkers({0, 1});
  EXPECT_EQ(e->Pull("j", 0, kA, 1, Soon()).status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(PushOf(*e, 2, kA, 0, {1, 1, 1, 1}).ok());
  EXPECT_EQ(PullNow(*e, kA, 1), (std::vector<float>{0.5, 1.5, 2.5, 3.5}));
}

}  // namespace
}  // namespace herd::server
