// RocksDB state: what every-round acknowledged is there after a simulated crash (the engine
// and the database dropped without a checkpoint, then reopened); every-k and checkpoint-only
// write what they promise; the recovered shard continues exactly like one that never stopped.

#include "server/state/shard_store.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "engine_test_util.h"
#include "server/recovery_check.h"

namespace herd::server {
namespace {

using testing::Bytes;
using testing::Floats;
using testing::kA;
using testing::kB;
using testing::Later;

class ShardStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("herd_shard_store_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A shard: store + engine restored from it.
  struct Shard {
    std::unique_ptr<ShardStore> store;
    std::unique_ptr<Engine> engine;
  };
  Shard Open(const ShardConfig& config) {
    Shard s;
    auto store = ShardStore::Open(dir_.string());
    EXPECT_TRUE(store.ok()) << store.status();
    s.store = std::move(*store);
    s.engine = Engine::Create(config, s.store.get());
    auto records = s.store->Load(config.job);
    EXPECT_TRUE(records.ok()) << records.status();
    for (const auto& r : *records) EXPECT_TRUE(s.engine->Restore(r).ok());
    return s;
  }

  // Three rounds and half of a fourth, a "crash" (everything dropped, no checkpoint), a
  // restart on the same directory: the shard continues exactly like one that never stopped.
  void CrashAndContinue(const ShardConfig& config);

  std::filesystem::path dir_;
};

// A job whose optimizer has state (Adam's two moments, or momentum's velocity) that must come
// back with the parameters; weight decay on.
ShardConfig StatefulJob(Mode mode, Durability durability,
                        OptimizerConfig::Kind kind = OptimizerConfig::Kind::kAdam) {
  auto c = testing::SmallJob(mode, 2);
  c.optimizer = {kind, 0.1, 0.9, 0.01};
  c.durability = durability;
  return c;
}

void Round(Engine& e, int64_t round, float g) {
  const std::string data = Bytes({g, -g, 2 * g, 0});
  ASSERT_TRUE(e.Push(PushArgs{"j", 0, kA, round, data, ""}, Later()).ok());
  ASSERT_TRUE(e.Push(PushArgs{"j", 1, kA, round, data, ""}, Later()).ok());
}

Pulled PullOf(Engine& e, KeyId key) {
  auto p = e.Pull("j", 0, key, 0, Later());
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Pulled{};
}

TEST_F(ShardStoreTest, EveryRoundSurvivesACrashAndContinuesIdentically) {
  for (auto kind : {OptimizerConfig::Kind::kAdam, OptimizerConfig::Kind::kMomentum}) {
    SCOPED_TRACE(kind == OptimizerConfig::Kind::kAdam ? "adam" : "momentum");
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    CrashAndContinue(StatefulJob(Mode::kSync, {}, kind));
  }
}

void ShardStoreTest::CrashAndContinue(const ShardConfig& config) {
  auto reference = Engine::Create(config, nullptr);
  ASSERT_TRUE(*reference->Init("j", kA, Bytes({1, 2, 3, 4})));
  {
    Shard s = Open(config);
    ASSERT_TRUE(*s.engine->Init("j", kA, Bytes({1, 2, 3, 4})));
    for (int r = 0; r < 3; ++r) {
      Round(*s.engine, r, 0.5f * (r + 1));
      Round(*reference, r, 0.5f * (r + 1));
    }
    // Half a round: one push, not acknowledged as a completed round; lost in the crash.
    ASSERT_TRUE(s.engine->Push(PushArgs{"j", 0, kA, 3, Bytes({9, 9, 9, 9}), ""}, Later()).ok());
    // The "crash": everything dropped, no checkpoint, no flush.
  }
  Shard s = Open(config);
  Pulled got = PullOf(*s.engine, kA), want = PullOf(*reference, kA);
  EXPECT_EQ(got.version, 3);
  EXPECT_EQ(Floats(got.data), Floats(want.data));
  // The optimizer's state came back too: the next round matches the shard that never stopped.
  Round(*s.engine, 3, 1.0f);
  Round(*reference, 3, 1.0f);
  EXPECT_EQ(Floats(PullOf(*s.engine, kA).data), Floats(PullOf(*reference, kA).data));
  // The key never initialised stays uninitialised.
  EXPECT_EQ(s.engine->Stats().keys_initialized, 1);
}

TEST_F(ShardStoreTest, EveryKWritesEveryKthRound) {
  const auto config = StatefulJob(Mode::kSync, {Durability::Kind::kEveryK, 2});
  {
    Shard s = Open(config);
    ASSERT_TRUE(*s.engine->Init("j", kA, Bytes({1, 2, 3, 4})));
    for (int r = 0; r < 3; ++r) Round(*s.engine, r, 1.0f);
  }
  Shard s = Open(config);
  EXPECT_EQ(PullOf(*s.engine, kA).version, 2);
}

TEST_F(ShardStoreTest, CheckpointOnlyWritesAtCheckpoints) {
  const auto config = StatefulJob(Mode::kSync, {Durability::Kind::kCheckpointOnly, 1});
  std::vector<float> at_checkpoint;
  {
    Shard s = Open(config);
    ASSERT_TRUE(*s.engine->Init("j", kA, Bytes({1, 2, 3, 4})));
    ASSERT_TRUE(*s.engine->Init("j", kB, Bytes({5, 6, 7})));
    Round(*s.engine, 0, 1.0f);
    EXPECT_EQ(*s.engine->WriteAll(), 2);
    at_checkpoint = Floats(PullOf(*s.engine, kA).data);
    Round(*s.engine, 1, 1.0f);  // after the checkpoint: lost in the crash
  }
  Shard s = Open(config);
  Pulled got = PullOf(*s.engine, kA);
  EXPECT_EQ(got.version, 1);
  EXPECT_EQ(Floats(got.data), at_checkpoint);
  EXPECT_EQ(Floats(PullOf(*s.engine, kB).data), (std::vector<float>{5, 6, 7}));
}

TEST_F(ShardStoreTest, AsyncClocksAndEcResidualsSurvive) {
  {
    auto config = testing::SmallJob(Mode::kAsync, 2);
    Shard s = Open(config);
    ASSERT_TRUE(*s.engine->Init("j", kA, Bytes({1, 2, 3, 4})));
    ASSERT_TRUE(s.engine->Push(PushArgs{"j", 1, kA, 0, Bytes({1, 1, 1, 1}), ""}, Later()).ok());
  }
  {
    auto config = testing::SmallJob(Mode::kAsync, 2);
    Shard s = Open(config);
    // Worker 1's clock came back: its clock 0 is a repeat now.
    EXPECT_EQ(s.engine->Push(PushArgs{"j", 1, kA, 0, Bytes({1, 1, 1, 1}), ""}, Later()).code(),
              absl::StatusCode::kAlreadyExists);
  }
  std::filesystem::remove_all(dir_);
  auto config = testing::SmallJob(Mode::kEc, 1);
  config.compressor = compression::Compressor::kSign;
  std::string before;
  {
    Shard s = Open(config);
    ASSERT_TRUE(*s.engine->Init("j", kA, Bytes({0, 0, 0, 0})));
    std::string payload;
    compression::Compress(config.compressor, std::vector<float>{1, -3, 0.5, 2}, &payload);
    ASSERT_TRUE(s.engine->Push(PushArgs{"j", 0, kA, 0, payload, ""}, Later()).ok());
    before = PullOf(*s.engine, kA).data;
  }
  Shard s = Open(config);
  Pulled got = PullOf(*s.engine, kA);
  EXPECT_EQ(got.version, 1);
  EXPECT_EQ(got.data, before);
}

// A worker back in its slot of an elastic ps_async job counts its clock from its new
// executor's 0; the shard maps that onto the slot's clock (AsyncEngine). A shard restarted on
// its state directory after that keeps the mapping: the worker's next push is taken, a repeat
// of its last one is still a repeat.
TEST_F(ShardStoreTest, AWorkerBackInItsSlotKeepsItsClockAcrossARestart) {
  auto config = testing::SmallJob(Mode::kAsync, 2);
  auto push = [](Engine& e, int worker, int64_t clock) {
    return e.Push(PushArgs{"j", worker, kA, clock, Bytes({1, 1, 1, 1}), ""}, Later());
  };
  {
    Shard s = Open(config);
    ASSERT_TRUE(*s.engine->Init("j", kA, Bytes({1, 2, 3, 4})));
    ASSERT_TRUE(push(*s.engine, 1, 0).ok());  // worker 1 pushes once, then dies
    s.engine->SetLiveWorkers({0});
    for (int clock = 0; clock < 3; ++clock) ASSERT_TRUE(push(*s.engine, 0, clock).ok());
    s.engine->SetLiveWorkers({0, 1});         // back, with a new executor counting from 0
    ASSERT_TRUE(push(*s.engine, 1, 0).ok());  // the slot's clock 3
  }
  Shard s = Open(config);
  EXPECT_EQ(push(*s.engine, 1, 0).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(push(*s.engine, 1, 1).ok()) << "the returned worker's next push after the restart";
  ASSERT_TRUE(push(*s.engine, 0, 3).ok());
  EXPECT_EQ(PullOf(*s.engine, kA).version, 7);
}

// The version on disk the shard reports (the lowest over its keys, none while a key has no
// record), and the check a restart makes against it: a key behind it, or without a record, is
// DATA_LOSS naming the directory, unless the loss is accepted.
TEST_F(ShardStoreTest, ARestartIsCheckedAgainstTheVersionReportedOnDisk) {
  const ShardConfig config = StatefulJob(Mode::kSync, Durability{});
  {
    Shard s = Open(config);
    EXPECT_EQ(s.engine->DurableVersion(), std::nullopt);
    ASSERT_TRUE(*s.engine->Init("j", kA, Bytes({1, 2, 3, 4})));
    EXPECT_EQ(s.engine->DurableVersion(), std::nullopt) << "key B has no record yet";
    ASSERT_TRUE(*s.engine->Init("j", kB, Bytes({1, 2, 3})));
    EXPECT_EQ(s.engine->DurableVersion(), 0);
    Round(*s.engine, 0, 1.0f);
    Round(*s.engine, 1, 1.0f);
    EXPECT_EQ(s.engine->DurableVersion(), 0) << "key B is still at version 0";
  }
  Shard s = Open(config);
  EXPECT_EQ(s.engine->DurableVersion(), 0);
  auto records = s.store->Load("j");
  ASSERT_TRUE(records.ok());
  RecoveredState r{"j",      0,    dir_.string(), s.store->replayed_logs(), 0, s.engine->Keys(),
                   *records, false};
  EXPECT_TRUE(CheckNotBehind(r).ok());
  r.reported = std::nullopt;
  EXPECT_TRUE(CheckNotBehind(r).ok()) << "nothing reported: nothing to hold it against";
  r.reported = 1;  // more than key B ever had
  absl::Status behind = CheckNotBehind(r);
  EXPECT_EQ(behind.code(), absl::StatusCode::kDataLoss) << behind;
  EXPECT_NE(behind.message().find("key (tensor 0, chunk 1) recovered version 0"), std::string::npos)
      << behind;
  EXPECT_NE(behind.message().find(dir_.string()), std::string::npos) << behind;
  r.records.clear();  // the directory lost everything
  behind = CheckNotBehind(r);
  EXPECT_NE(behind.message().find("has no record at all"), std::string::npos) << behind;
  EXPECT_NE(behind.message().find("(2 of 2 keys are behind)"), std::string::npos) << behind;
  r.accept_data_loss = true;
  EXPECT_TRUE(CheckNotBehind(r).ok());
}

TEST_F(ShardStoreTest, SecondOpenOfTheSameDirectoryIsRefused) {
  auto first = ShardStore::Open(dir_.string());
  ASSERT_TRUE(first.ok());
  auto second = ShardStore::Open(dir_.string());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace herd::server
