// JobSpec and mode validation (scheduler/job_spec.h).

#include "scheduler/job_spec.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/scheduler/test_jobs.h"

namespace herd::scheduler {
namespace {

using testing::ExampleSpec;

std::string Message(const absl::Status& st) { return std::string(st.message()); }

TEST(JobSpec, ExampleIsValidAndGetsDefaults) {
  auto spec = NormalizeJobSpec(ExampleSpec());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->mode().topology(), "random");
  EXPECT_EQ(spec->chunk_bytes(), 1 << 20);
  EXPECT_EQ(spec->optimizer().name(), "sgd");
  EXPECT_GT(spec->optimizer().learning_rate(), 0);
  EXPECT_EQ(spec->tensors(1).dtype(), "fp32") << "dtype names are canonical";
}

TEST(JobSpec, RejectsEachBadField) {
  struct Case {
    const char* what;
    void (*edit)(herd::v1::JobSpec&);
    const char* needle;
  };
  const Case cases[] = {
      {"zero workers", [](herd::v1::JobSpec& s) { s.set_workers(0); }, "workers"},
      {"negative servers", [](herd::v1::JobSpec& s) { s.set_servers(-1); }, "servers"},
      {"bad name", [](herd::v1::JobSpec& s) { s.set_name("Bad Name"); }, "job name"},
      {"empty name", [](herd::v1::JobSpec& s) { s.set_name(""); }, "job name"},
      {"unknown mode", [](herd::v1::JobSpec& s) { s.mutable_mode()->set_mode("warp"); },
       "unknown mode 'warp'"},
      {"no mode", [](herd::v1::JobSpec& s) { s.clear_mode(); }, "no mode"},
      {"unknown topology", [](herd::v1::JobSpec& s) { s.mutable_mode()->set_topology("star"); },
       "topology"},
      {"param of another mode", [](herd::v1::JobSpec& s) { s.mutable_mode()->set_teams(2); },
       "'teams' does not apply"},
      {"duplicate tensor",
       [](herd::v1::JobSpec& s) { s.mutable_tensors(1)->set_name("fc1.weight"); }, "appears twice"},
      {"zero dimension", [](herd::v1::JobSpec& s) { s.mutable_tensors(0)->set_shape(1, 0); },
       "dimension 0"},
      {"unknown dtype", [](herd::v1::JobSpec& s) { s.mutable_tensors(0)->set_dtype("fp8"); },
       "dtype 'fp8'"},
      {"unnamed tensor", [](herd::v1::JobSpec& s) { s.mutable_tensors(0)->clear_name(); },
       "name of tensor #0 is empty"},
      {"integer tensor for averaging",
       [](herd::v1::JobSpec& s) { s.mutable_tensors(0)->set_dtype("int32"); }, "floating"},
      {"ps mode without servers",
       [](herd::v1::JobSpec& s) {
         s.set_servers(0);
         s.mutable_mode()->Clear();
         s.mutable_mode()->set_mode("ps_sync");
       },
       "needs parameter servers"},
      {"teams not dividing workers",
       [](herd::v1::JobSpec& s) {
         s.mutable_mode()->Clear();
         s.mutable_mode()->set_mode("sparse");
         s.mutable_mode()->set_teams(4);
       },
       "divisible by 4"},
      {"density out of range",
       [](herd::v1::JobSpec& s) {
         s.mutable_mode()->Clear();
         s.mutable_mode()->set_mode("topk_allgather");
         s.mutable_mode()->set_density(1.5);
       },
       "density"},
      {"unknown optimizer", [](herd::v1::JobSpec& s) { s.mutable_optimizer()->set_name("lion"); },
       "optimizer 'lion'"},
      {"negative learning rate",
       [](herd::v1::JobSpec& s) { s.mutable_optimizer()->set_learning_rate(-1); }, "learning_rate"},
      // Non-finite and out-of-range numbers (limits.h), each refused naming its field.
      {"infinite learning rate",
       [](herd::v1::JobSpec& s) { s.mutable_optimizer()->set_learning_rate(INFINITY); },
       "learning_rate must be finite"},
      {"NaN learning rate",
       [](herd::v1::JobSpec& s) { s.mutable_optimizer()->set_learning_rate(NAN); },
       "learning_rate"},
      {"infinite weight decay",
       [](herd::v1::JobSpec& s) { s.mutable_optimizer()->set_weight_decay(INFINITY); },
       "weight_decay must be finite"},
      {"NaN weight decay",
       [](herd::v1::JobSpec& s) { s.mutable_optimizer()->set_weight_decay(NAN); }, "weight_decay"},
      {"momentum 1",
       [](herd::v1::JobSpec& s) {
         s.mutable_optimizer()->set_name("momentum");
         s.mutable_optimizer()->set_momentum(1);
       },
       "momentum must be in [0, 1)"},
      {"NaN momentum", [](herd::v1::JobSpec& s) { s.mutable_optimizer()->set_momentum(NAN); },
       "momentum"},
      {"NaN density",
       [](herd::v1::JobSpec& s) {
         s.mutable_mode()->Clear();
         s.mutable_mode()->set_mode("topk_allgather");
         s.mutable_mode()->set_density(NAN);
       },
       "density"},
      {"infinite density",
       [](herd::v1::JobSpec& s) {
         s.mutable_mode()->Clear();
         s.mutable_mode()->set_mode("topk_allgather");
         s.mutable_mode()->set_density(INFINITY);
       },
       "density"},
      {"staleness below -1",
       [](herd::v1::JobSpec& s) {
         s.set_servers(1);
         s.mutable_mode()->Clear();
         s.mutable_mode()->set_mode("ps_async");
         s.mutable_mode()->set_staleness(-2);
       },
       "staleness"},
      {"huge block",
       [](herd::v1::JobSpec& s) {
         s.mutable_mode()->Clear();
         s.mutable_mode()->set_mode("lp");
         s.mutable_mode()->set_block_bytes(int64_t{1} << 40);
       },
       "block_bytes must be between"},
      // Sizes.
      {"NUL in a tensor name",
       [](herd::v1::JobSpec& s) { s.mutable_tensors(0)->set_name(std::string("fc1\0x", 5)); },
       "control byte 0x00"},
      {"escape in a tensor name",
       [](herd::v1::JobSpec& s) { s.mutable_tensors(0)->set_name("fc1\x1b[2J"); },
       "control byte 0x1b"},
      {"long tensor name",
       [](herd::v1::JobSpec& s) { s.mutable_tensors(0)->set_name(std::string(1 << 20, 'a')); },
       "more than the limit of 256"},
      {"too many dimensions",
       [](herd::v1::JobSpec& s) {
         for (int i = 0; i < 20; ++i) s.mutable_tensors(0)->add_shape(1);
       },
       "dimensions, more than 16"},
      {"2^48-element tensor",
       [](herd::v1::JobSpec& s) {
         s.mutable_tensors(0)->clear_shape();
         s.mutable_tensors(0)->add_shape(int64_t{1} << 24);
         s.mutable_tensors(0)->add_shape(int64_t{1} << 24);
       },
       "more than 1099511627776 elements"},
      {"too many shard-map chunks",
       [](herd::v1::JobSpec& s) {
         s.set_servers(2);
         s.set_chunk_bytes(4);
         s.mutable_tensors(0)->clear_shape();
         s.mutable_tensors(0)->add_shape(1 << 20);
       },
       "shard-map chunks"},
      {"huge chunks", [](herd::v1::JobSpec& s) { s.set_chunk_bytes(int64_t{1} << 40); },
       "chunk_bytes must be between"},
      {"too many workers", [](herd::v1::JobSpec& s) { s.set_workers(1 << 20); }, "workers"},
      {"long mode",
       [](herd::v1::JobSpec& s) { s.mutable_mode()->set_mode(std::string(4096, 'm')); },
       "mode has 4096 bytes"},
      {"long optimizer",
       [](herd::v1::JobSpec& s) { s.mutable_optimizer()->set_name(std::string(4096, 'o')); },
       "optimizer name has 4096 bytes"},
  };
  for (const auto& c : cases) {
    herd::v1::JobSpec spec = ExampleSpec();
    c.edit(spec);
    auto got = NormalizeJobSpec(spec);
    ASSERT_FALSE(got.ok()) << c.what;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(Message(got.status()).find(c.needle), std::string::npos)
        << c.what << ": " << got.status();
  }
}

TEST(JobSpec, ModeCompatibilityIsAPrecondition) {
  auto spec = NormalizeJobSpec(ExampleSpec("j", 6, 0));
  ASSERT_TRUE(spec.ok());
  herd::v1::ModeSpec ps;
  ps.set_mode("ps_async");
  auto got = NormalizeMode(ps, *spec);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  herd::v1::ModeSpec bad;
  bad.set_mode("nope");
  EXPECT_EQ(NormalizeMode(bad, *spec).status().code(), absl::StatusCode::kInvalidArgument);

  // Integer tensors can be all-reduced but not averaged with peers.
  auto ints = ExampleSpec();
  ints.mutable_mode()->Clear();
  ints.mutable_mode()->set_mode("allreduce");
  ints.mutable_tensors(0)->set_dtype("int64");
  auto ok = NormalizeJobSpec(ints);
  ASSERT_TRUE(ok.ok()) << ok.status();
  herd::v1::ModeSpec dec;
  dec.set_mode("decentralized");
  EXPECT_EQ(NormalizeMode(dec, *ok).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JobSpec, DefaultsPerMode) {
  auto spec = NormalizeJobSpec(ExampleSpec());
  ASSERT_TRUE(spec.ok());
  herd::v1::ModeSpec m;
  m.set_mode("ps_async");
  auto got = NormalizeMode(m, *spec);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->has_staleness());
  EXPECT_EQ(got->staleness(), 4);
  m.set_staleness(0);  // zero is a valid bound, not "unset"
  EXPECT_EQ(NormalizeMode(m, *spec)->staleness(), 0);
  m.set_staleness(-1);  // no bound
  EXPECT_EQ(NormalizeMode(m, *spec)->staleness(), -1);
  m.set_staleness(-2);
  EXPECT_EQ(NormalizeMode(m, *spec).status().code(), absl::StatusCode::kInvalidArgument);
  // ps_ec takes only the compressors the shards implement.
  herd::v1::ModeSpec ec;
  ec.set_mode("ps_ec");
  EXPECT_EQ(NormalizeMode(ec, *spec)->compressor(), "minmax_uint8");
  ec.set_compressor("sign");
  EXPECT_TRUE(NormalizeMode(ec, *spec).ok());
  ec.set_compressor("qsgd");
  auto refused = NormalizeMode(ec, *spec);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("not served by parameter servers"),
            absl::string_view::npos);
  herd::v1::ModeSpec lp;
  lp.set_mode("lp");
  EXPECT_EQ(NormalizeMode(lp, *spec)->block_bytes(), 1 << 20);
  herd::v1::ModeSpec sparse;
  sparse.set_mode("sparse");
  EXPECT_EQ(NormalizeMode(sparse, *spec)->teams(), 1);
  EXPECT_DOUBLE_EQ(NormalizeMode(sparse, *spec)->density(), 0.01);
}

TEST(JobSpec, CompressorsAndTopologiesOfTheWorkerModes) {
  auto spec = NormalizeJobSpec(ExampleSpec());
  ASSERT_TRUE(spec.ok());
  herd::v1::ModeSpec clps;
  clps.set_mode("clps");
  for (const char* ok :
       {"minmax_uint8", "sign", "fp16", "bf16", "qsgd", "qsgd:8", "topk", "topk:0.05"}) {
    clps.set_compressor(ok);
    EXPECT_TRUE(NormalizeMode(clps, *spec).ok()) << ok;
  }
  for (const char* bad : {"qsgd:0", "qsgd:128", "qsgd:x", "topk:0", "topk:1.5", "zip"}) {
    clps.set_compressor(bad);
    EXPECT_EQ(NormalizeMode(clps, *spec).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  // D_LP_S keeps replicas of fixed neighbours: a random topology is refused at submission.
  herd::v1::ModeSpec dlp;
  dlp.set_mode("decentralized_lp");
  dlp.set_topology("random");
  auto refused = NormalizeMode(dlp, *spec);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("use ring"), absl::string_view::npos);
  dlp.set_topology("ring");
  EXPECT_TRUE(NormalizeMode(dlp, *spec).ok());
}

TEST(JobSpec, TensorsMayComeFromTheFirstWorker) {
  herd::v1::JobSpec spec = ExampleSpec();
  spec.clear_tensors();
  auto got = NormalizeJobSpec(spec);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->tensors_size(), 0) << "the layout is declared by the first worker";
}

}  // namespace
}  // namespace herd::scheduler
