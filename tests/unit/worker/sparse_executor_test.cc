// The sparse executors (sparse = SparDL, topk_allgather = TopA) over threads-as-ranks: with
// density 1 they apply SGD, momentum and Adam (catch-up Adam, which at density 1 is Adam) on the
// mean gradient like allreduce; with a small density every rank keeps bitwise identical
// parameters, and error feedback updates every parameter in the end; teams that do not fit are
// refused.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "tests/support/spawn.h"
#include "worker/executor.h"
#include "worker/executors/density_warmup.h"

namespace herd::worker {
namespace {

constexpr float kLr = 0.125f;
const std::vector<size_t> kCounts = {5, 100, 1, 33, 1000, 7, 64, 3};

// Small integers and halves: every sum of up to 8 ranks is exact in fp32.
float Grad(int r, int it, int t, size_t i) {
  return static_cast<float>(static_cast<int>((r + 1) * (it + 2) + t * 3 + i % 11) % 17) * 0.5f;
}
float Initial(int t, size_t i) { return static_cast<float>(t) + 0.25f * (i % 7); }

struct Job {
  Job(std::string mode, int ranks, double density = 1.0)
      : mode(std::move(mode)), ranks(ranks), density(density) {}

  std::string mode;
  int ranks = 1;
  double density = 1.0;
  int teams = 0;                // plan.mode().teams(); 0: unset
  std::vector<int> plan_teams;  // team sizes listed in the plan (consecutive ranks); empty: none
  size_t threshold = 256;
  int iterations = 3;
  bool constant_gradient = false;  // iteration 0's gradient every time
  float gradient_offset = 0;       // added to every gradient
  optim::OptimizerConfig optimizer = [] {
    optim::OptimizerConfig c;
    c.learning_rate = kLr;
    return c;
  }();
};

// Runs the executor on every rank; returns every rank's parameters after Flush.
absl::StatusOr<std::vector<std::vector<std::vector<float>>>> RunAll(const Job& run) {
  std::vector<std::vector<std::vector<float>>> params(run.ranks);
  auto statuses = testing::SpawnRanks(run.ranks, [&](transport::Communicator& comm) {
    auto& mine = params[comm.rank()];
    mine.resize(kCounts.size());
    ExecutorContext ctx;
    ctx.plan.mutable_mode()->set_mode(run.mode);
    ctx.plan.mutable_mode()->set_density(run.density);
    if (run.teams > 0) ctx.plan.mutable_mode()->set_teams(run.teams);
    int next = 0;
    for (int size : run.plan_teams) {
      auto* team = ctx.plan.add_teams();
      for (int i = 0; i < size; ++i) team->add_ranks(next++);
    }
    ctx.plan.set_world_size(run.ranks);
    ctx.rank = comm.rank();
    ctx.comm = &comm;
    ctx.optimizer = run.optimizer;
    ctx.fusion.threshold_bytes = run.threshold;
    ctx.timeout = std::chrono::seconds(30);
    for (size_t t = 0; t < kCounts.size(); ++t) {
      mine[t].resize(kCounts[t]);
      for (size_t i = 0; i < kCounts[t]; ++i) mine[t][i] = Initial(static_cast<int>(t), i);
      ctx.tensors.push_back({absl::StrFormat("t%d", t), mine[t].data(), kCounts[t]});
    }
    HERD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec, MakeExecutor(ctx));
    const int T = static_cast<int>(kCounts.size());
    for (int it = 0; it < run.iterations; ++it) {
      HERD_RETURN_IF_ERROR(exec->BeginIteration(it));
      for (int t = 0; t < T; ++t) HERD_RETURN_IF_ERROR(exec->BeforeForward(t));
      for (int t = T - 1; t >= 0; --t) {
        std::vector<float> g(kCounts[t]);
        for (size_t i = 0; i < g.size(); ++i) {
          g[i] = Grad(comm.rank(), run.constant_gradient ? 0 : it, t, i) + run.gradient_offset;
        }
        HERD_RETURN_IF_ERROR(exec->GradientReady(t, g));
      }
      HERD_RETURN_IF_ERROR(exec->EndBackward());
    }
    return exec->Flush();
  });
  HERD_RETURN_IF_ERROR(testing::FirstError(statuses));
  return params;
}

class SparseExecutorTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

// Density 1 delivers every non-zero: SGD on the mean gradient, as allreduce computes it.
TEST_P(SparseExecutorTest, DensityOneIsSgdOnTheMeanGradient) {
  const auto [mode, P] = GetParam();
  Job run{mode, P};
  auto params = RunAll(run);
  ASSERT_TRUE(params.ok()) << params.status();
  for (int r = 0; r < P; ++r) {
    for (size_t t = 0; t < kCounts.size(); ++t) {
      for (size_t i = 0; i < kCounts[t]; ++i) {
        float want = Initial(static_cast<int>(t), i);
        for (int it = 0; it < run.iterations; ++it) {
          double sum = 0;
          for (int q = 0; q < P; ++q) sum += Grad(q, it, static_cast<int>(t), i);
          want -= kLr * static_cast<float>(sum / P);
        }
        ASSERT_NEAR((*params)[r][t][i], want, 1e-4f * (1 + std::fabs(want)))
            << "rank " << r << " tensor " << t << " element " << i;
      }
    }
  }
}

// Momentum runs after the reduction, as in the dense modes (with weight decay).
TEST_P(SparseExecutorTest, DensityOneWithMomentumIsMomentumOnTheMeanGradient) {
  const auto [mode, P] = GetParam();
  Job run{mode, P};
  run.iterations = 4;
  run.optimizer.kind = optim::OptimizerConfig::Kind::kMomentum;
  run.optimizer.momentum = 0.5;
  run.optimizer.weight_decay = 0.25;
  auto params = RunAll(run);
  ASSERT_TRUE(params.ok()) << params.status();
  for (size_t t = 0; t < kCounts.size(); ++t) {
    for (size_t i = 0; i < kCounts[t]; ++i) {
      double p = Initial(static_cast<int>(t), i), m = 0;
      for (int it = 0; it < run.iterations; ++it) {
        double sum = 0;
        for (int q = 0; q < P; ++q) sum += Grad(q, it, static_cast<int>(t), i);
        m = 0.5 * m + sum / P + 0.25 * p;
        p -= kLr * m;
      }
      for (int r = 0; r < P; ++r) {
        ASSERT_NEAR((*params)[r][t][i], p, 1e-4 * (1 + std::fabs(p)))
            << "rank " << r << " tensor " << t << " element " << i;
      }
    }
  }
}

// Adam runs as catch-up Adam (catch_up_adam.h). At density 1 every element is delivered every
// iteration (n = 1), which is Adam on the mean gradient: what the dense mode computes.
TEST_P(SparseExecutorTest, DensityOneWithAdamIsAdamOnTheMeanGradient) {
  const auto [mode, P] = GetParam();
  Job sparse{mode, P}, dense{"allreduce", P};
  for (Job* run : {&sparse, &dense}) {
    run->iterations = 5;
    run->gradient_offset = 0.25f;  // no zero gradient: every element is delivered
    run->optimizer.kind = optim::OptimizerConfig::Kind::kAdam;
    run->optimizer.learning_rate = 0.01;
    run->optimizer.weight_decay = 0.125;
  }
  auto a = RunAll(sparse), b = RunAll(dense);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  for (int r = 0; r < P; ++r) {
    for (size_t t = 0; t < kCounts.size(); ++t) {
      for (size_t i = 0; i < kCounts[t]; ++i) {
        ASSERT_NEAR((*a)[r][t][i], (*b)[r][t][i], 1e-5f)
            << "rank " << r << " tensor " << t << " element " << i;
      }
    }
  }
}

// A small density: the replicas stay bitwise identical, and with a constant gradient error
// feedback eventually delivers every element whose mean gradient is not zero.
TEST_P(SparseExecutorTest, SparseUpdatesKeepReplicasIdenticalAndReachEveryElement) {
  const auto [mode, P] = GetParam();
  Job run{mode, P, 0.1};
  // An element is selected about every (sum of |mean gradient| / k) / |its gradient|
  // iterations: 80 for the smallest gradient here.
  run.iterations = 200;
  run.constant_gradient = true;
  auto params = RunAll(run);
  ASSERT_TRUE(params.ok()) << params.status();
  for (int r = 1; r < P; ++r) ASSERT_EQ((*params)[r], (*params)[0]) << "rank " << r;
  for (size_t t = 0; t < kCounts.size(); ++t) {
    for (size_t i = 0; i < kCounts[t]; ++i) {
      double sum = 0;
      for (int q = 0; q < P; ++q) sum += Grad(q, 0, static_cast<int>(t), i);
      if (sum == 0) continue;
      EXPECT_NE((*params)[0][t][i], Initial(static_cast<int>(t), i))
          << "tensor " << t << " element " << i << " was never updated";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, SparseExecutorTest,
                         ::testing::Combine(::testing::Values("sparse", "topk_allgather"),
                                            ::testing::Values(1, 2, 3, 5)),
                         [](const auto& info) {
                           return absl::StrFormat("%s_P%d", std::get<0>(info.param),
                                                  std::get<1>(info.param));
                         });

TEST(DensityWarmup, QuartersDownToTheRequestedDensity) {
  EXPECT_EQ(DensityAt(0.01, 0), 0.25);
  EXPECT_EQ(DensityAt(0.01, 49), 0.25);
  EXPECT_EQ(DensityAt(0.01, 50), 0.0625);
  EXPECT_EQ(DensityAt(0.01, 100), 0.015625);
  EXPECT_EQ(DensityAt(0.01, 150), 0.01);
  EXPECT_EQ(DensityAt(0.01, 1'000'000), 0.01);
  EXPECT_EQ(DensityAt(0.001, 150), 0.00390625);
  EXPECT_EQ(DensityAt(0.001, 200), 0.001);
  EXPECT_EQ(DensityAt(0.5, 0), 0.5);  // never below what was asked for
  EXPECT_EQ(DensityAt(1.0, 0), 1.0);
}

// The executor runs the warm-up: at density 0.01 its first iteration delivers a quarter of the
// bucket, not a hundredth.
TEST(DensityWarmup, TheFirstIterationDeliversAQuarter) {
  for (const char* mode : {"sparse", "topk_allgather"}) {
    for (int P : {2, 3}) {
      Job run{mode, P, 0.01};
      run.iterations = 1;
      run.threshold = size_t{1} << 20;  // one bucket
      auto params = RunAll(run);
      ASSERT_TRUE(params.ok()) << params.status();
      size_t changed = 0, total = 0;
      for (size_t t = 0; t < kCounts.size(); ++t) {
        for (size_t i = 0; i < kCounts[t]; ++i, ++total) {
          changed += (*params)[0][t][i] != Initial(static_cast<int>(t), i);
        }
      }
      EXPECT_GE(changed, total / 5) << mode << " P=" << P;
      EXPECT_LE(changed, size_t(P) * total / 4 + size_t(P) * P) << mode << " P=" << P;
    }
  }
}

TEST(SparseExecutorTeams, PlanTeamsAndModeTeams) {
  Job rsag{"sparse", 4, 0.2};
  rsag.plan_teams = {2, 2};
  auto a = RunAll(rsag);
  ASSERT_TRUE(a.ok()) << a.status();
  for (int r = 1; r < 4; ++r) EXPECT_EQ((*a)[r], (*a)[0]);
  Job bsag{"sparse", 6, 0.2};
  bsag.teams = 3;  // no teams in the plan: the mode's count, B-SAG
  auto b = RunAll(bsag);
  ASSERT_TRUE(b.ok()) << b.status();
  for (int r = 1; r < 6; ++r) EXPECT_EQ((*b)[r], (*b)[0]);
}

TEST(SparseExecutorTeams, RefusesTeamsThatDoNotFit) {
  Job mode_teams("sparse", 4, 0.2), plan_teams("sparse", 4, 0.2);
  mode_teams.teams = 3;
  plan_teams.plan_teams = {1, 3};
  for (const Job& run : {mode_teams, plan_teams}) {
    auto params = RunAll(run);
    ASSERT_FALSE(params.ok());
    EXPECT_EQ(params.status().code(), absl::StatusCode::kInvalidArgument) << params.status();
  }
  Job nan{"topk_allgather", 2, std::nan("")};
  EXPECT_EQ(RunAll(nan).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace herd::worker
