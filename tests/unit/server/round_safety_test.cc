// What a shard keeps when a round cannot be kept: a round whose result would be non-finite is
// refused naming the key and the workers, and a round whose write fails (a full or broken
// disk) is refused with UNAVAILABLE; in both cases the key stays at its last good round, pulls
// keep being served, and the round goes through once it can. Also: a job whose optimizer
// parameters are not finite or out of range is refused by the shard.

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <limits>

#include "algorithms/compression/compressor.h"
#include "engine_test_util.h"
#include "herd/v1/job.pb.h"

namespace herd::server {
namespace {

using testing::Bytes;
using testing::Floats;
using testing::kA;
using testing::Later;
using testing::Soon;

constexpr float kHuge = 3e38f;  // finite; two of them overflow fp32

absl::Status PushOf(Engine& e, int worker, int64_t round, const std::vector<float>& g) {
  const std::string data = Bytes(g);
  return e.Push(PushArgs{"j", worker, kA, round, data, "fp32"}, Later());
}

// The key's version and values right now.
std::pair<int64_t, std::vector<float>> Now(Engine& e) {
  auto p = e.Pull("j", 0, kA, 0, Later());
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::make_pair(p->version, Floats(p->data))
                : std::make_pair(int64_t{-1}, std::vector<float>{});
}

std::unique_ptr<Engine> Initialised(ShardConfig config, KeyWriter* writer = nullptr) {
  auto e = Engine::Create(std::move(config), writer);
  EXPECT_TRUE(*e->Init("j", kA, Bytes({1, 2, 3, 4})));
  return e;
}

TEST(RoundSafetyTest, SyncRoundOverflowingIsRefusedNamingKeyAndWorkersAndReopened) {
  auto e = Initialised(testing::SmallJob(Mode::kSync, 2));
  ASSERT_TRUE(PushOf(*e, 0, 0, {kHuge, 0, 0, 0}).ok());
  // Worker 0 waits for its acknowledgement (the round's completion).
  auto waiter = std::async(std::launch::async, [&] { return e->WaitRound(kA, 0, Later()); });
  const absl::Status refused = PushOf(*e, 1, 0, {kHuge, 0, 0, 0});
  ASSERT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_NE(refused.message().find("key (tensor 0, chunk 0)"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("workers 0 and 1"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("non-finite"), std::string::npos) << refused;
  // The waiting worker hears the same, not a deadline.
  const absl::Status heard = waiter.get();
  EXPECT_TRUE(absl::IsInvalidArgument(heard)) << heard;
  // A pull of the refused round's result is told at once too.
  EXPECT_TRUE(absl::IsInvalidArgument(e->Pull("j", 0, kA, 1, Later()).status()));
  // State: the last good round.
  EXPECT_EQ(Now(*e), std::make_pair(int64_t{0}, std::vector<float>{1, 2, 3, 4}));
  // The round is open again and completes with finite gradients.
  ASSERT_TRUE(PushOf(*e, 0, 0, {2, 2, 2, 2}).ok());
  ASSERT_TRUE(PushOf(*e, 1, 0, {0, 0, 0, 0}).ok());
  EXPECT_EQ(Now(*e), std::make_pair(int64_t{1}, std::vector<float>{0.5, 1.5, 2.5, 3.5}));
}

TEST(RoundSafetyTest, SyncLearningRateOverflowingTheParametersIsRefused) {
  auto config = testing::SmallJob(Mode::kSync, 1);
  config.optimizer.learning_rate = 1e38;
  auto e = Initialised(config);
  const absl::Status refused = PushOf(*e, 0, 0, {100, 0, 0, 0});
  ASSERT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_NE(refused.message().find("the push of worker 0"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("parameter at index 0"), std::string::npos) << refused;
  EXPECT_EQ(Now(*e), std::make_pair(int64_t{0}, std::vector<float>{1, 2, 3, 4}));
}

TEST(RoundSafetyTest, AsyncPushOverflowingIsRefusedAndItsClockNotTaken) {
  auto config = testing::SmallJob(Mode::kAsync, 2);
  config.optimizer.learning_rate = 1e38;
  auto e = Initialised(config);
  const absl::Status refused = PushOf(*e, 1, 0, {0, 0, 0, -100});
  ASSERT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_NE(refused.message().find("worker 1 (clock 0)"), std::string::npos) << refused;
  EXPECT_EQ(Now(*e), std::make_pair(int64_t{0}, std::vector<float>{1, 2, 3, 4}));
  // Clock 0 of worker 1 is still open: a finite push at it is taken.
  ASSERT_TRUE(PushOf(*e, 1, 0, {0, 0, 0, 0}).ok());
  EXPECT_EQ(Now(*e).first, 1);
}

TEST(RoundSafetyTest, AdamStateStaysFiniteOrTheRoundIsRefused) {
  auto config = testing::SmallJob(Mode::kSync, 1);
  config.optimizer = {OptimizerConfig::Kind::kAdam, 0.1, 0.9, 0.0};
  auto e = Initialised(config);
  // g^2 overflows Adam's second moment.
  const absl::Status refused = PushOf(*e, 0, 0, {kHuge, 0, 0, 0});
  ASSERT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_NE(refused.message().find("optimizer"), std::string::npos) << refused;
  EXPECT_EQ(Now(*e), std::make_pair(int64_t{0}, std::vector<float>{1, 2, 3, 4}));
}

TEST(RoundSafetyTest, EcSumOverflowingIsRefusedAndTheResidualKept) {
  auto config = testing::SmallJob(Mode::kEc, 2);
  config.compressor = compression::Compressor::kMinMaxUInt8;
  auto e = Initialised(config);
  std::string huge;
  compression::Compress(config.compressor, std::vector<float>{kHuge, kHuge, kHuge, kHuge}, &huge);
  ASSERT_TRUE(e->Push(PushArgs{"j", 0, kA, 0, huge, "fp32"}, Later()).ok());
  const absl::Status refused = e->Push(PushArgs{"j", 1, kA, 0, huge, "fp32"}, Later());
  ASSERT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_NE(refused.message().find("workers 0 and 1"), std::string::npos) << refused;
  auto p = e->Pull("j", 0, kA, 0, Later());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->version, 0);
  EXPECT_TRUE(p->data.empty());
}

// A writer whose writes can be made to fail, like a store on a full disk.
class FlakyWriter : public testing::RecordingWriter {
 public:
  std::atomic<bool> refuse_writable{false}, refuse_write{false};
  absl::Status Write(const std::string& job, const KeyRecordView& r) override {
    if (refuse_write) return absl::UnavailableError("disk full (test)");
    return RecordingWriter::Write(job, r);
  }
  absl::Status Writable() override {
    return refuse_writable ? absl::UnavailableError("disk full (test)") : absl::OkStatus();
  }
};

TEST(RoundSafetyTest, AFailedWriteKeepsTheLastWrittenRoundAndTheRoundGoesThroughLater) {
  FlakyWriter writer;
  auto config = testing::SmallJob(Mode::kSync, 2);
  config.durability = {Durability::Kind::kEveryRound, 1};
  auto e = Initialised(config, &writer);
  ASSERT_TRUE(PushOf(*e, 0, 0, {2, 2, 2, 2}).ok());
  writer.refuse_write = true;  // the disk fills up between the two pushes
  const absl::Status failed = PushOf(*e, 1, 0, {0, 0, 0, 0});
  ASSERT_TRUE(absl::IsUnavailable(failed)) << failed;
  EXPECT_NE(failed.message().find("disk full"), std::string::npos);
  // Nothing a pull sees is off the disk: still version 0, as written.
  EXPECT_EQ(Now(*e), std::make_pair(int64_t{0}, std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(writer.Last(kA).version, 0);
  // While the store says it cannot write, pushes are refused up front and waiters told why.
  writer.refuse_writable = true;
  EXPECT_TRUE(absl::IsUnavailable(PushOf(*e, 1, 0, {0, 0, 0, 0})));
  EXPECT_TRUE(absl::IsUnavailable(e->WaitRound(kA, 0, Later())));
  // Worker 0's push is still in the round: pushing it again is a duplicate.
  writer.refuse_writable = false;
  writer.refuse_write = false;
  EXPECT_TRUE(absl::IsAlreadyExists(PushOf(*e, 0, 0, {2, 2, 2, 2})));
  // The disk is back: worker 1 pushes again and the round completes once, written.
  ASSERT_TRUE(PushOf(*e, 1, 0, {0, 0, 0, 0}).ok());
  EXPECT_EQ(Now(*e), std::make_pair(int64_t{1}, std::vector<float>{0.5, 1.5, 2.5, 3.5}));
  EXPECT_EQ(writer.Last(kA).version, 1);
  EXPECT_EQ(writer.Last(kA).params, (std::vector<float>{0.5, 1.5, 2.5, 3.5}));
}

TEST(RoundSafetyTest, AFailedInitialWriteLeavesTheKeyWithoutAValue) {
  FlakyWriter writer;
  auto config = testing::SmallJob(Mode::kSync, 1);
  config.durability = {Durability::Kind::kEveryRound, 1};
  auto e = Engine::Create(config, &writer);
  writer.refuse_write = true;
  EXPECT_TRUE(absl::IsUnavailable(e->Init("j", kA, Bytes({1, 2, 3, 4})).status()));
  EXPECT_TRUE(absl::IsDeadlineExceeded(e->Pull("j", 0, kA, 0, Soon()).status()));
  writer.refuse_write = false;
  ASSERT_TRUE(*e->Init("j", kA, Bytes({1, 2, 3, 4})));
  EXPECT_EQ(Now(*e), std::make_pair(int64_t{0}, std::vector<float>{1, 2, 3, 4}));
}

TEST(RoundSafetyTest, StoredNonFiniteStateIsNotRestored) {
  auto e = Engine::Create(testing::SmallJob(Mode::kSync, 1), nullptr);
  KeyRecord r;
  r.key = kA;
  r.version = 3;
  r.params = {1, std::numeric_limits<float>::quiet_NaN(), 3, 4};
  EXPECT_TRUE(absl::IsDataLoss(e->Restore(r)));
}

herd::v1::JobSpec PsSpec() {
  herd::v1::JobSpec spec;
  spec.set_name("j");
  spec.set_workers(2);
  spec.set_servers(1);
  spec.mutable_mode()->set_mode("ps_sync");
  auto* t = spec.add_tensors();
  t->set_name("w");
  t->add_shape(4);
  t->set_dtype("fp32");
  return spec;
}

TEST(RoundSafetyTest, ShardRefusesNonFiniteOrOutOfRangeOptimizerParameters) {
  herd::v1::Plan plan;
  plan.mutable_mode()->set_mode("ps_sync");
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto refused = [&](auto set, const char* field) {
    auto spec = PsSpec();
    set(*spec.mutable_optimizer());
    auto c = ShardConfigFromJob(spec, plan, 0, Durability{});
    EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << field << ": " << c.status();
    if (!c.ok()) EXPECT_NE(c.status().message().find(field), std::string::npos) << c.status();
  };
  refused([&](auto& o) { o.set_learning_rate(inf); }, "learning_rate");
  refused([&](auto& o) { o.set_learning_rate(nan); }, "learning_rate");
  refused([&](auto& o) { o.set_learning_rate(-0.1); }, "learning_rate");
  refused([&](auto& o) { o.set_weight_decay(inf); }, "weight_decay");
  refused([&](auto& o) { o.set_weight_decay(-1); }, "weight_decay");
  refused([&](auto& o) { o.set_momentum(1.0); }, "momentum");
  refused([&](auto& o) { o.set_momentum(nan); }, "momentum");
  auto ok = PsSpec();
  ok.mutable_optimizer()->set_learning_rate(0.1);
  ok.mutable_optimizer()->set_weight_decay(1e-4);
  EXPECT_TRUE(ShardConfigFromJob(ok, plan, 0, Durability{}).ok());
}

}  // namespace
}  // namespace herd::server
