// ps_ec: the C_LP_S books balance (nothing lost), bad payloads are refused without effect.

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "algorithms/compression/error_feedback.h"
#include "engine_test_util.h"

namespace herd::server {
namespace {

using testing::Bytes;
using testing::kA;
using testing::Later;

void CheckNothingLost(compression::Compressor compressor) {
  constexpr int kWorkers = 3;
  constexpr int kRounds = 20;
  constexpr size_t kN = 4;
  auto config = testing::SmallJob(Mode::kEc, kWorkers);
  config.compressor = compressor;
  testing::RecordingWriter writer;
  auto e = Engine::Create(config, &writer);
  ASSERT_TRUE(*e->Init("j", kA, Bytes({0, 0, 0, 0})));

  std::mt19937 gen(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<float>> delta(kWorkers, std::vector<float>(kN, 0.0f));
  std::vector<double> meant(kN, 0.0), received(kN, 0.0);
  std::vector<float> scratch, decoded(kN);
  std::string bytes;
  for (int round = 0; round < kRounds; ++round) {
    for (int w = 0; w < kWorkers; ++w) {
      std::vector<float> x(kN);
      for (size_t i = 0; i < kN; ++i) {
        x[i] = dist(gen);
        meant[i] += x[i];
      }
      compression::CompressWithFeedback(compressor, x, delta[w], &bytes, &scratch);
      ASSERT_TRUE(e->Push(PushArgs{"j", w, kA, round, bytes, "fp32"}, Later()).ok());
    }
    auto pulled = e->Pull("j", 0, kA, round + 1, Later());
    ASSERT_TRUE(pulled.ok()) << pulled.status();
    ASSERT_TRUE(compression::Decompress(compressor, pulled->data, decoded).ok());
    for (size_t i = 0; i < kN; ++i) received[i] += decoded[i];
  }
  const KeyRecord server = writer.Last(kA);
  ASSERT_EQ(server.version, kRounds);
  ASSERT_EQ(server.epsilon.size(), kN);
  double lost_without_residuals = 0.0;
  for (size_t i = 0; i < kN; ++i) {
    double books = received[i] + server.epsilon[i];
    for (int w = 0; w < kWorkers; ++w) books += delta[w][i];
    EXPECT_NEAR(books, meant[i], 1e-3) << i;
    lost_without_residuals += std::fabs(received[i] - meant[i]);
  }
  EXPECT_GT(lost_without_residuals, 1e-4);  // compression did lose something on the way
}

TEST(EcEngineTest, MinMaxNothingLost) { CheckNothingLost(compression::Compressor::kMinMaxUInt8); }
TEST(EcEngineTest, SignNothingLost) { CheckNothingLost(compression::Compressor::kSign); }

TEST(EcEngineTest, UndecodablePayloadIsRefusedAndTheRoundGoesOn) {
  auto e = Engine::Create(testing::SmallJob(Mode::kEc, 2), nullptr);
  ASSERT_TRUE(*e->Init("j", kA, Bytes({0, 0, 0, 0})));
  auto st = e->Push(PushArgs{"j", 0, kA, 0, std::string(5, 'x'), ""}, Later());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("does not decode"), absl::string_view::npos) << st;
  std::string good;
  compression::Compress(compression::Compressor::kMinMaxUInt8, std::vector<float>{1, 1, 1, 1},
                        &good);
  // The refused push did not count: worker 0 may still push round 0.
  ASSERT_TRUE(e->Push(PushArgs{"j", 0, kA, 0, good, ""}, Later()).ok());
  ASSERT_TRUE(e->Push(PushArgs{"j", 1, kA, 0, good, ""}, Later()).ok());
  auto pulled = e->Pull("j", 0, kA, 1, Later());
  ASSERT_TRUE(pulled.ok());
  std::vector<float> sum(4);
  ASSERT_TRUE(
      compression::Decompress(compression::Compressor::kMinMaxUInt8, pulled->data, sum).ok());
  EXPECT_EQ(sum, (std::vector<float>{2, 2, 2, 2}));
}

TEST(EcEngineTest, BeforeTheFirstRoundAPullHasVersionZeroAndNoPayload) {
  auto e = Engine::Create(testing::SmallJob(Mode::kEc, 1), nullptr);
  ASSERT_TRUE(*e->Init("j", kA, Bytes({0, 0, 0, 0})));
  auto pulled = e->Pull("j", 0, kA, 0, Later());
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->version, 0);
  EXPECT_TRUE(pulled->data.empty());
}

// Elastic jobs (docs/elastic.md): like ps_sync's, a round completes once every live worker
// pushed it; the compressed sum is scaled to M pushes' worth (the workers divide by M), so the
// survivors step with the mean of their pushes. Constant vectors compress exactly (minmax).
std::string Compressed(const std::vector<float>& v) {
  std::string bytes;
  compression::Compress(compression::Compressor::kMinMaxUInt8, v, &bytes);
  return bytes;
}

std::vector<float> Decoded(const Pulled& pulled) {
  std::vector<float> sum(4);
  EXPECT_TRUE(
      compression::Decompress(compression::Compressor::kMinMaxUInt8, pulled.data, sum).ok());
  return sum;
}

TEST(EcEngineTest, ElasticRoundCompletesWithoutTheDeadWorkerAsMPushesWorth) {
  auto config = testing::SmallJob(Mode::kEc, 4);
  config.elastic = true;
  config.plan_wait = std::chrono::milliseconds(100);  // the dead worker's push waits that long
  auto e = Engine::Create(config, nullptr);
  ASSERT_TRUE(*e->Init("j", kA, Bytes({0, 0, 0, 0})));
  ASSERT_TRUE(e->Push(PushArgs{"j", 0, kA, 0, Compressed({1, 1, 1, 1}), ""}, Later()).ok());
  ASSERT_TRUE(e->Push(PushArgs{"j", 1, kA, 0, Compressed({2, 2, 2, 2}), ""}, Later()).ok());
  ASSERT_TRUE(e->Push(PushArgs{"j", 2, kA, 0, Compressed({3, 3, 3, 3}), ""}, Later()).ok());
  absl::StatusOr<Pulled> waited;
  std::thread puller([&] { waited = e->Pull("j", 0, kA, 1, Later()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  e->SetLiveWorkers({0, 1, 2});  // worker 3 declared dead
  puller.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(waited->version, 1);
  // The sum 6 of three pushes, as four pushes' worth: 8 (the workers' mean 8 / 4 = 2).
  EXPECT_EQ(Decoded(*waited), (std::vector<float>{8, 8, 8, 8}));
  const absl::Status late =
      e->Push(PushArgs{"j", 3, kA, 1, Compressed({100, 100, 100, 100}), ""}, Later());
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_NE(late.message().find("not a live worker"), std::string::npos) << late;
  // The next round takes the three live workers' pushes and completes with the last of them.
  for (int w = 0; w < 3; ++w) {
    ASSERT_TRUE(e->Push(PushArgs{"j", w, kA, 1, Compressed({3, 3, 3, 3}), ""}, Later()).ok());
  }
  auto next = e->Pull("j", 0, kA, 2, testing::Soon());
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(Decoded(*next), (std::vector<float>{12, 12, 12, 12}));
}

TEST(EcEngineTest, ElasticRoundKeepsAPushTheDeadWorkerMadeBeforeItDied) {
  auto config = testing::SmallJob(Mode::kEc, 3);
  config.elastic = true;
  auto e = Engine::Create(config, nullptr);
  ASSERT_TRUE(*e->Init("j", kA, Bytes({0, 0, 0, 0})));
  ASSERT_TRUE(e->Push(PushArgs{"j", 2, kA, 0, Compressed({3, 3, 3, 3}), ""}, Later()).ok());
  e->SetLiveWorkers({0, 1});
  ASSERT_TRUE(e->Push(PushArgs{"j", 0, kA, 0, Compressed({0, 0, 0, 0}), ""}, Later()).ok());
  EXPECT_EQ(e->Pull("j", 0, kA, 1, testing::Soon()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(e->Push(PushArgs{"j", 1, kA, 0, Compressed({3, 3, 3, 3}), ""}, Later()).ok());
  auto pulled = e->Pull("j", 0, kA, 1, Later());
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(Decoded(*pulled), (std::vector<float>{6, 6, 6, 6})) << "three pushes: no scaling";
}

// ---- A worker back in its slot (a restarted worker that took its state from a live one) ----

std::unique_ptr<Engine> ElasticEc(int workers) {
  auto config = testing::SmallJob(Mode::kEc, workers);
  config.elastic = true;
  auto e = Engine::Create(config, nullptr);
  EXPECT_TRUE(*e->Init("j", kA, Bytes({0, 0, 0, 0})));
  return e;
}

absl::Status PushEc(Engine& e, int worker, int64_t round, float value,
                    std::vector<int> joiners = {}) {
  PushArgs args{"j", worker, kA, round, "", ""};
  const std::string bytes = Compressed({value, value, value, value});
  args.data = bytes;
  args.joiners = std::move(joiners);
  return e.Push(args, Later());
}

TEST(EcEngineTest, AReturnedWorkerIsNotCountedBeforeItsAnnouncementThenItsRoundWaitsForIt) {
  auto e = ElasticEc(3);
  e->SetLiveWorkers({0, 1});     // worker 2 died
  e->SetLiveWorkers({0, 1, 2});  // and is back: the plans name it live again
  // Round 0 completes with the two others: nobody announced worker 2 yet.
  ASSERT_TRUE(PushEc(*e, 0, 0, 1).ok());
  ASSERT_TRUE(PushEc(*e, 1, 0, 2).ok());
  auto round0 = e->Pull("j", 0, kA, 1, testing::Soon());
  ASSERT_TRUE(round0.ok()) << round0.status();
  EXPECT_EQ(Decoded(*round0), (std::vector<float>{4.5, 4.5, 4.5, 4.5})) << "3 as 3 pushes' worth";
  // Worker 0 (its source) announces it in round 1: that round waits for it.
  ASSERT_TRUE(PushEc(*e, 1, 1, 1).ok());
  ASSERT_TRUE(PushEc(*e, 0, 1, 1, {2}).ok());
  EXPECT_EQ(e->Pull("j", 0, kA, 2, testing::Soon()).status().code(),
            absl::StatusCode::kDeadlineExceeded)
      << "round 1 waits for the announced worker";
  ASSERT_TRUE(PushEc(*e, 2, 1, 4).ok());
  auto round1 = e->Pull("j", 0, kA, 2, testing::Soon());
  ASSERT_TRUE(round1.ok()) << round1.status();
  EXPECT_EQ(Decoded(*round1), (std::vector<float>{6, 6, 6, 6})) << "three pushes: not scaled";
  // And every round after it.
  ASSERT_TRUE(PushEc(*e, 0, 2, 1).ok());
  ASSERT_TRUE(PushEc(*e, 1, 2, 1).ok());
  EXPECT_EQ(e->Pull("j", 0, kA, 3, testing::Soon()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(PushEc(*e, 2, 2, 1).ok());
  EXPECT_TRUE(e->Pull("j", 0, kA, 3, testing::Soon()).ok());
}

// The shard's watch may see only the later of two plans close together (the death, then the
// restarted process back in the slot): the slot's new node id says it returned.
TEST(EcEngineTest, AnotherProcessInALiveSlotIsAReturnToo) {
  auto e = ElasticEc(3);
  e->SetLiveWorkers({0, 1, 2}, {10, 11, 12});
  e->SetLiveWorkers({0, 1, 2}, {10, 11, 22});  // worker 2 restarted between two plans
  ASSERT_TRUE(PushEc(*e, 0, 0, 1).ok());
  ASSERT_TRUE(PushEc(*e, 1, 0, 2).ok());
  auto round0 = e->Pull("j", 0, kA, 1, testing::Soon());
  ASSERT_TRUE(round0.ok()) << round0.status() << ": the round waited for the returned worker";
  EXPECT_EQ(Decoded(*round0), (std::vector<float>{4.5, 4.5, 4.5, 4.5}));
  // The same process again is no return: announced, it is counted, and stays counted.
  e->SetLiveWorkers({0, 1, 2}, {10, 11, 22});
  ASSERT_TRUE(PushEc(*e, 0, 1, 1, {2}).ok());
  ASSERT_TRUE(PushEc(*e, 1, 1, 1).ok());
  EXPECT_EQ(e->Pull("j", 0, kA, 2, testing::Soon()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(PushEc(*e, 2, 1, 1).ok());
  EXPECT_TRUE(e->Pull("j", 0, kA, 2, testing::Soon()).ok());
}

TEST(EcEngineTest, AReturnedWorkersFirstPushOfTheOpenRoundCountsInIt) {
  auto e = ElasticEc(3);
  e->SetLiveWorkers({0, 1});
  e->SetLiveWorkers({0, 1, 2});
  // Its push comes before its source's announcement: the open round takes it and waits for
  // the others.
  ASSERT_TRUE(PushEc(*e, 2, 0, 3).ok());
  ASSERT_TRUE(PushEc(*e, 0, 0, 1, {2}).ok());
  EXPECT_EQ(e->Pull("j", 0, kA, 1, testing::Soon()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(PushEc(*e, 1, 0, 2).ok());
  auto pulled = e->Pull("j", 0, kA, 1, testing::Soon());
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(Decoded(*pulled), (std::vector<float>{6, 6, 6, 6}));
}

TEST(EcEngineTest, AReturnedWorkersPushOfARoundCompletedWithoutItIsRefused) {
  auto e = ElasticEc(3);
  e->SetLiveWorkers({0, 1});
  e->SetLiveWorkers({0, 1, 2});
  ASSERT_TRUE(PushEc(*e, 0, 0, 1).ok());
  ASSERT_TRUE(PushEc(*e, 1, 0, 1).ok());
  ASSERT_TRUE(e->Pull("j", 0, kA, 1, testing::Soon()).ok());
  const absl::Status late = PushEc(*e, 2, 0, 100);
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_NE(late.message().find("worker 2 is back in job 'j' but key"), std::string::npos) << late;
  EXPECT_NE(late.message().find("completed round 0 without it"), std::string::npos) << late;
  // Nothing changed: the key is at version 1 and its round 1 does not wait for worker 2.
  ASSERT_TRUE(PushEc(*e, 0, 1, 1).ok());
  ASSERT_TRUE(PushEc(*e, 1, 1, 1).ok());
  auto next = e->Pull("j", 0, kA, 2, testing::Soon());
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->version, 2);
  EXPECT_EQ(Decoded(*next), (std::vector<float>{3, 3, 3, 3}));
}

TEST(EcEngineTest, APushBeforeThePlanNamesItsWorkerLiveWaitsForThePlan) {
  auto config = testing::SmallJob(Mode::kEc, 3);
  config.elastic = true;
  config.plan_wait = std::chrono::milliseconds(3000);
  auto e = Engine::Create(config, nullptr);
  ASSERT_TRUE(*e->Init("j", kA, Bytes({0, 0, 0, 0})));
  e->SetLiveWorkers({0, 1});  // worker 2 died; its restart pushes before the shard hears of it
  absl::Status pushed;
  const auto begin = std::chrono::steady_clock::now();
  std::thread restarted([&] { pushed = PushEc(*e, 2, 0, 3); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  e->SetLiveWorkers({0, 1, 2});
  restarted.join();
  const auto waited = std::chrono::steady_clock::now() - begin;
  ASSERT_TRUE(pushed.ok()) << pushed;
  EXPECT_GE(waited, std::chrono::milliseconds(200));
  EXPECT_LT(waited, std::chrono::milliseconds(2000)) << "woken by the plan, not the bound";
  ASSERT_TRUE(PushEc(*e, 0, 0, 1).ok());
  ASSERT_TRUE(PushEc(*e, 1, 0, 2).ok());
  auto pulled = e->Pull("j", 0, kA, 1, testing::Soon());
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(Decoded(*pulled), (std::vector<float>{6, 6, 6, 6}));
}

TEST(EcEngineTest, APushFromADeadWorkerIsRefusedAfterTheBoundedWait) {
  auto config = testing::SmallJob(Mode::kEc, 3);
  config.elastic = true;
  config.plan_wait = std::chrono::milliseconds(300);
  auto e = Engine::Create(config, nullptr);
  ASSERT_TRUE(*e->Init("j", kA, Bytes({0, 0, 0, 0})));
  e->SetLiveWorkers({0, 1});
  const auto begin = std::chrono::steady_clock::now();
  const absl::Status late = PushEc(*e, 2, 0, 3);
  const auto waited = std::chrono::steady_clock::now() - begin;
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_NE(late.message().find("not a live worker"), std::string::npos) << late;
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  EXPECT_LT(waited, std::chrono::milliseconds(2000));
  // Its push of another key is refused at once: one wait per plan, not one per key.
  ASSERT_TRUE(*e->Init("j", testing::kB, Bytes({0, 0, 0})));
  PushArgs other{"j", 2, testing::kB, 0, "", ""};
  const std::string bytes = Compressed({1, 1, 1});
  other.data = bytes;
  const auto again = std::chrono::steady_clock::now();
  const absl::Status refused = e->Push(other, Later());
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_NE(refused.message().find("not a live worker"), std::string::npos) << refused;
  EXPECT_LT(std::chrono::steady_clock::now() - again, std::chrono::milliseconds(200));
  // Its push changed nothing: the round completes with the two live workers.
  ASSERT_TRUE(PushEc(*e, 0, 0, 1).ok());
  ASSERT_TRUE(PushEc(*e, 1, 0, 1).ok());
  auto pulled = e->Pull("j", 0, kA, 1, testing::Soon());
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(Decoded(*pulled), (std::vector<float>{3, 3, 3, 3}));
}

TEST(EcEngineTest, WithoutAnElasticBlockARoundWaitsForEveryWorker) {
  auto e = Engine::Create(testing::SmallJob(Mode::kEc, 3), nullptr);
  ASSERT_TRUE(*e->Init("j", kA, Bytes({0, 0, 0, 0})));
  ASSERT_TRUE(e->Push(PushArgs{"j", 0, kA, 0, Compressed({1, 1, 1, 1}), ""}, Later()).ok());
  ASSERT_TRUE(e->Push(PushArgs{"j", 1, kA, 0, Compressed({1, 1, 1, 1}), ""}, Later()).ok());
  e->SetLiveWorkers({0, 1});
  EXPECT_EQ(e->Pull("j", 0, kA, 1, testing::Soon()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(e->Push(PushArgs{"j", 2, kA, 0, Compressed({1, 1, 1, 1}), ""}, Later()).ok());
  auto pulled = e->Pull("j", 0, kA, 1, Later());
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(Decoded(*pulled), (std::vector<float>{3, 3, 3, 3}));
}

}  // namespace
}  // namespace herd::server
