// The dense collective executors (allreduce, lp, dear) over threads-as-ranks: after every
// iteration each rank's parameters must equal the closed form of SGD on the mean gradient, for
// any rank count, tensor layout and fusion threshold; dear must have each bucket's update in
// place right after that bucket's BeforeForward of the next iteration.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "plan/modes.h"
#include "tests/support/spawn.h"
#include "worker/executor.h"
#include "worker/fusion_tuning.h"

namespace herd::worker {
namespace {

constexpr float kLr = 0.125f;

// The gradient rank r produces for element i of tensor t at iteration it (small integers and
// halves, so sums and means are exact in fp32).
float Grad(int r, int it, int t, size_t i) {
  return static_cast<float>(static_cast<int>((r + 1) * (it + 2) + t * 3 + i % 11) % 17) * 0.5f;
}
float Initial(int t, size_t i) { return static_cast<float>(t) + 0.25f * (i % 7); }

// The parameters after `iterations` SGD steps on the mean over P ranks.
float Expected(int P, int iterations, int t, size_t i) {
  float p = Initial(t, i);
  for (int it = 0; it < iterations; ++it) {
    double sum = 0;
    for (int r = 0; r < P; ++r) sum += Grad(r, it, t, i);
    p -= kLr * static_cast<float>(sum / P);
  }
  return p;
}

struct Case {
  std::string mode;
  int ranks;
  size_t threshold;
  bool tune = false;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return absl::StrFormat("%s_P%d_T%d%s", info.param.mode, info.param.ranks, info.param.threshold,
                         info.param.tune ? "_tuned" : "");
}

class DenseExecutorTest : public ::testing::TestWithParam<Case> {};

// Tensor sizes with no common factor: fusion must cope with any layout.
const std::vector<size_t> kCounts = {5, 100, 1, 33, 1000, 7, 64, 3};
constexpr int kIterations = 4;

// With the tuner on, enough iterations for its trials (a warm-up plus one measured iteration
// each) to run out, so thresholds switch several times mid-run.
constexpr int kTunedIterations = 16;

absl::Status RunRank(const Case& c, transport::Communicator& comm) {
  const int P = comm.size();
  std::vector<std::vector<float>> params(kCounts.size());
  ExecutorContext ctx;
  ctx.plan.mutable_mode()->set_mode(c.mode);
  ctx.plan.mutable_mode()->set_block_bytes(128);
  ctx.plan.set_world_size(P);
  ctx.rank = comm.rank();
  ctx.comm = &comm;
  ctx.optimizer.learning_rate = kLr;
  ctx.fusion.threshold_bytes = c.threshold;
  ctx.fusion.tune = c.tune;
  ctx.fusion.tune_trials = 5;
  ctx.fusion.iterations_per_trial = 1;
  ctx.fusion.tune_min_bytes = 16;
  ctx.fusion.tune_max_bytes = 8192;
  const int iterations = c.tune ? kTunedIterations : kIterations;
  ctx.timeout = std::chrono::seconds(30);
  for (size_t t = 0; t < kCounts.size(); ++t) {
    params[t].resize(kCounts[t]);
    for (size_t i = 0; i < kCounts[t]; ++i) params[t][i] = Initial(static_cast<int>(t), i);
    ctx.tensors.push_back({absl::StrFormat("t%d", t), params[t].data(), kCounts[t]});
  }
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec, MakeExecutor(ctx));
  const int T = static_cast<int>(kCounts.size());
  auto check = [&](int t, int iterations, const char* when) -> absl::Status {
    for (size_t i = 0; i < kCounts[t]; ++i) {
      const float want = Expected(P, iterations, t, i);
      if (std::fabs(params[t][i] - want) > 1e-4f * (1 + std::fabs(want))) {
        return absl::InternalError(
            absl::StrFormat("rank %d, %s: tensor %d element %d is %g, expected %g after %d updates",
                            comm.rank(), when, t, i, params[t][i], want, iterations));
      }
    }
    return absl::OkStatus();
  };
  for (int it = 0; it < iterations; ++it) {
    HERD_RETURN_IF_ERROR(exec->BeginIteration(it));
    for (int t = 0; t < T; ++t) {
      HERD_RETURN_IF_ERROR(exec->BeforeForward(t));
      // Whatever the mode, the forward of iteration it sees it updates.
      HERD_RETURN_IF_ERROR(check(t, it, "in forward"));
    }
    for (int t = T - 1; t >= 0; --t) {
      std::vector<float> g(kCounts[t]);
      for (size_t i = 0; i < g.size(); ++i) g[i] = Grad(comm.rank(), it, t, i);
      HERD_RETURN_IF_ERROR(exec->GradientReady(t, g));
    }
    HERD_RETURN_IF_ERROR(exec->EndBackward());
  }
  HERD_RETURN_IF_ERROR(exec->Flush());
  for (int t = 0; t < T; ++t) HERD_RETURN_IF_ERROR(check(t, iterations, "after Flush"));
  if (c.tune && exec->Describe().find("settled") == std::string::npos) {
    return absl::InternalError("the tuner did not settle within its trials: " + exec->Describe());
  }
  return absl::OkStatus();
}

TEST_P(DenseExecutorTest, EveryRankAppliesSgdOnTheMeanGradient) {
  const Case c = GetParam();
  auto statuses =
      testing::SpawnRanks(c.ranks, [&](transport::Communicator& comm) { return RunRank(c, comm); });
  EXPECT_TRUE(testing::FirstError(statuses).ok()) << testing::FirstError(statuses);
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const char* mode : {"allreduce", "lp", "dear"}) {
    for (int P : {1, 2, 3, 4, 5}) {
      for (size_t threshold : {size_t{0}, size_t{256}, size_t{1} << 20}) {
        cases.push_back({mode, P, threshold});
      }
    }
  }
  // dear with the tuner: every rank switches thresholds at the same iterations (else the
  // collectives would not meet) and the updates stay exact across the switches.
  for (int P : {1, 3, 4}) cases.push_back({"dear", P, 0, true});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Modes, DenseExecutorTest, ::testing::ValuesIn(AllCases()), CaseName);

TEST(ExecutorFactory, RefusesUnknownModesAndCollectiveModesWithoutCommunicator) {
  ExecutorContext ctx;
  ctx.plan.mutable_mode()->set_mode("gossip");
  auto unknown = MakeExecutor(ctx);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("dear"), std::string::npos) << unknown.status();
  ctx.plan.mutable_mode()->set_mode("dear");
  auto no_comm = MakeExecutor(ctx);
  ASSERT_FALSE(no_comm.ok());
  EXPECT_EQ(no_comm.status().code(), absl::StatusCode::kInvalidArgument);
}

// Adding a mode is a registry entry plus its executor: neither may exist without the other.
TEST(ExecutorFactory, EveryRegistryModeHasABuilderAndNothingElseDoes) {
  std::set<std::string> registry;
  for (const plan::ModeInfo& m : plan::Modes()) registry.emplace(m.name);
  const std::vector<std::string> built = ExecutorModes();
  EXPECT_EQ(std::set<std::string>(built.begin(), built.end()), registry);
  EXPECT_EQ(built.size(), registry.size());
  for (const plan::ModeInfo& m : plan::Modes()) {
    EXPECT_EQ(ModeUsesCommunicator(m.name), m.needs_communicator) << m.name;
  }
  EXPECT_FALSE(ModeUsesCommunicator("gossip"));
}

// The warm start's link model: x* = sqrt(M t0 / beta) minimises (M / x) t0 + x beta.
TEST(FusionTuningModel, ThresholdMinimisesTheLinkModel) {
  // ResNet-50's gradients at 1 Gbit/s among 4 ranks: t0 0.5 ms, beta 2 (P-1)/P / 125 MB/s.
  const size_t m = 102'228'128;
  const double t0 = 5e-4, beta = 1.5 / 125e6;
  const size_t x = FusionTuning::ModelThreshold(m, t0, beta);
  EXPECT_NEAR(static_cast<double>(x), std::sqrt(m * t0 / beta), 1.0);
  auto cost = [&](double v) { return m / v * t0 + v * beta; };
  EXPECT_LT(cost(x), cost(x * 1.5));
  EXPECT_LT(cost(x), cost(x / 1.5));
  EXPECT_EQ(FusionTuning::ModelThreshold(0, t0, beta), 0u);
  EXPECT_EQ(FusionTuning::ModelThreshold(m, 0.0, beta), 0u);
  EXPECT_EQ(FusionTuning::ModelThreshold(m, t0, -1.0), 0u);
}

TEST(ExecutorFactory, PsModesNeedShardsInThePlan) {
  ExecutorContext ctx;
  ctx.plan.mutable_mode()->set_mode("ps_sync");
  auto st = MakeExecutor(ctx);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition) << st.status();
}

}  // namespace
}  // namespace herd::worker
