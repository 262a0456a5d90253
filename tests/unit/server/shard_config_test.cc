// The shard's config from the scheduler's JobSpec and Plan: mode parameters, optimizer,
// durability, the shard map; and the jobs a shard must refuse.

#include "server/shard_config.h"

#include <gtest/gtest.h>

#include "herd/v1/job.pb.h"

namespace herd::server {
namespace {

herd::v1::JobSpec Spec(const std::string& mode) {
  herd::v1::JobSpec spec;
  spec.set_name("j");
  spec.set_workers(3);
  spec.set_servers(2);
  spec.mutable_mode()->set_mode(mode);
  auto* t = spec.add_tensors();
  t->set_name("w");
  t->add_shape(10);
  t->set_dtype("fp32");
  return spec;
}

herd::v1::Plan PlanOf(const herd::v1::JobSpec& spec) {
  herd::v1::Plan plan;
  *plan.mutable_mode() = spec.mode();
  for (int c = 0; c < 2; ++c) {
    auto* e = plan.add_shards();
    e->set_tensor(0);
    e->set_chunk(c);
    e->set_offset(5 * c);
    e->set_count(5);
    e->set_server(c);
  }
  return plan;
}

TEST(ShardConfigTest, EcJobWithSignCompressorAndMomentum) {
  auto spec = Spec("ps_ec");
  spec.mutable_mode()->set_compressor("sign");
  spec.mutable_optimizer()->set_name("momentum");
  spec.mutable_optimizer()->set_learning_rate(0.2);
  auto c = ShardConfigFromJob(spec, PlanOf(spec), 1, *ParseDurability("every-k:3"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->mode, Mode::kEc);
  EXPECT_EQ(c->compressor, compression::Compressor::kSign);
  EXPECT_EQ(c->workers, 3);
  EXPECT_EQ(c->shard, 1);
  EXPECT_EQ(c->optimizer.kind, OptimizerConfig::Kind::kMomentum);
  EXPECT_DOUBLE_EQ(c->optimizer.learning_rate, 0.2);
  EXPECT_DOUBLE_EQ(c->optimizer.momentum, 0.9);
  EXPECT_EQ(c->durability.kind, Durability::Kind::kEveryK);
  EXPECT_EQ(c->durability.k, 3);
  ASSERT_EQ(c->keys.size(), 2u);
  EXPECT_EQ(c->keys.at(KeyId{0, 1}).server, 1);
  EXPECT_EQ(c->keys.at(KeyId{0, 1}).count, 5);
}

TEST(ShardConfigTest, AsyncStalenessComesFromTheMode) {
  auto spec = Spec("ps_async");
  spec.mutable_mode()->set_staleness(0);
  auto c = ShardConfigFromJob(spec, PlanOf(spec), 0, {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->staleness, 0);
  spec.mutable_mode()->set_staleness(-1);  // job.proto: no bound
  c = ShardConfigFromJob(spec, PlanOf(spec), 0, {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->staleness, ShardConfig::kInfiniteStaleness);
}

TEST(ShardConfigTest, JobsAShardCannotServeAreRefused) {
  auto allreduce = Spec("allreduce");
  auto st = ShardConfigFromJob(allreduce, PlanOf(allreduce), 0, {}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("ps_sync, ps_async and ps_ec only"), absl::string_view::npos);
  auto half = Spec("ps_sync");
  half.mutable_tensors(0)->set_dtype("fp16");
  st = ShardConfigFromJob(half, PlanOf(half), 0, {}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("fp32 tensors only"), absl::string_view::npos);
  auto lamb = Spec("ps_sync");
  lamb.mutable_optimizer()->set_name("lamb");
  EXPECT_EQ(ShardConfigFromJob(lamb, PlanOf(lamb), 0, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto qsgd = Spec("ps_ec");
  qsgd.mutable_mode()->set_compressor("qsgd");
  EXPECT_EQ(ShardConfigFromJob(qsgd, PlanOf(qsgd), 0, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ShardConfigTest, DurabilityNames) {
  EXPECT_EQ(ParseDurability("every-round")->kind, Durability::Kind::kEveryRound);
  EXPECT_EQ(ParseDurability("checkpoint-only")->kind, Durability::Kind::kCheckpointOnly);
  for (const char* bad : {"every-k:0", "every-k:", "every-k:x", "sometimes", ""}) {
    EXPECT_EQ(ParseDurability(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(DurabilityName(*ParseDurability("every-k:7")), "every-k:7");
}

}  // namespace
}  // namespace herd::server
