// Bandwidth arithmetic (nccl-tests conventions), the operation names and the herd plan.

#include <gtest/gtest.h>

#include <cmath>

#include "bench/bench_op.h"
#include "bench/result.h"

namespace herd::bench {
namespace {

TEST(BusBandwidthFactor, NcclTestsConvention) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kBroadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kReduce, 7), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(BenchOp::kAllReduce, 1), 0.0);
}

TEST(MakeResult, AlgbwIsBytesOverTimeAndJsonIsInGigabits) {
  // 16 MiB in 10 ms at 4 ranks.
  const size_t bytes = size_t{16} << 20;
  BenchResult r =
      MakeResult("herd", BenchOp::kAllReduce, "ring", 4, bytes, bytes, "fp32", 20, 0.010);
  EXPECT_DOUBLE_EQ(r.time_us, 10000.0);
  const double gbytes_per_s = bytes / 0.010 / 1e9;  // 1.6777216 GB/s
  EXPECT_NEAR(r.algbw_GBps(), gbytes_per_s, 1e-12);
  EXPECT_NEAR(r.algbw_gbps, gbytes_per_s * 8, 1e-9);
  EXPECT_NEAR(r.busbw_GBps(), gbytes_per_s * 1.5, 1e-12);
  EXPECT_TRUE(r.measured());
  EXPECT_EQ(r.check, kCheckOff);

  BenchResult rs = MakeResult("mpi", BenchOp::kReduceScatter, "MPI_Reduce_scatter_block", 4, bytes,
                              bytes, "fp32", 20, 0.005);
  EXPECT_NEAR(rs.busbw_gbps / rs.algbw_gbps, 0.75, 1e-12);
}

TEST(MakeResult, ZeroTimeGivesZeroBandwidthNotInfinity) {
  EXPECT_EQ(AlgBandwidthGBps(4096, 0.0), 0.0);
  BenchResult r = MakeUnmeasured("gloo", BenchOp::kReduceScatter, "halving_doubling", 4, 4096,
                                 "bf16", "no bf16");
  EXPECT_FALSE(r.measured());
  EXPECT_TRUE(std::isnan(r.time_us));
}

TEST(BenchOpNames, RoundTripAndAliases) {
  for (BenchOp op : AllBenchOps()) EXPECT_EQ(*ParseBenchOp(BenchOpName(op)), op);
  EXPECT_EQ(*ParseBenchOp("reduce-scatter"), BenchOp::kReduceScatter);
  EXPECT_FALSE(ParseBenchOp("allreduse").ok());
  auto list = ParseBenchOpList("allgather,allreduce,allgather");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<BenchOp>{BenchOp::kAllGather, BenchOp::kAllReduce}));
}

TEST(PlanHerdRuns, EachOpRunsTheRequestedAlgorithmsItHas) {
  auto plan = PlanHerdRuns({BenchOp::kAllReduce, BenchOp::kReduceScatter, BenchOp::kBroadcast},
                           {"ring", "lp"});
  ASSERT_TRUE(plan.ok());
  using Run = std::pair<BenchOp, std::string>;
  EXPECT_EQ(plan->runs, (std::vector<Run>{{BenchOp::kAllReduce, "ring"},
                                          {BenchOp::kAllReduce, "lp"},
                                          {BenchOp::kReduceScatter, "ring"},
                                          {BenchOp::kBroadcast, "lp"}}));
  EXPECT_TRUE(plan->skipped.empty());
}

TEST(PlanHerdRuns, DefaultsAndSkips) {
  auto plan = PlanHerdRuns(AllBenchOps(), {});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->runs.size(), 6u);
  EXPECT_EQ(plan->runs[0].second, "auto");      // allreduce: the decision table's pick
  EXPECT_EQ(plan->runs[3].second, "auto");      // broadcast
  EXPECT_EQ(plan->runs[5].second, "pairwise");  // alltoall

  plan = PlanHerdRuns({BenchOp::kAllGather, BenchOp::kBroadcast}, {"rd"});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->runs.size(), 1u);
  ASSERT_EQ(plan->skipped.size(), 1u);
  EXPECT_NE(plan->skipped[0].find("broadcast (supports auto, lp, tree, shm, hier)"),
            std::string::npos);
}

TEST(PlanHerdRuns, UnknownAlgorithmNamesWhatEachOpSupports) {
  auto plan = PlanHerdRuns({BenchOp::kAllReduce}, {"rign"});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      std::string(plan.status().message()).find("allreduce: auto, ring, lp, tree, rd, rh, oneshot"),
      std::string::npos)
      << plan.status();
}

}  // namespace
}  // namespace herd::bench
