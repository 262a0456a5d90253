// The tables of `herd bench collectives`, and the flags every sweep program shares.

#include "bench/table.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "absl/strings/str_split.h"
#include "bench/sweep_spec.h"

namespace herd::bench {
namespace {

std::vector<BenchResult> Results() {
  const size_t m16 = size_t{16} << 20;
  std::vector<BenchResult> rs;
  // herd ring twice as fast as mpi, lp at mpi's speed, gloo half of mpi.
  rs.push_back(MakeResult("herd", BenchOp::kAllReduce, "ring", 4, m16, m16, "fp32", 10, 0.005));
  rs.push_back(MakeResult("herd", BenchOp::kAllReduce, "lp", 4, m16, m16, "fp32", 10, 0.010));
  rs.push_back(
      MakeResult("mpi", BenchOp::kAllReduce, "MPI_Allreduce", 4, m16, m16, "fp32", 10, 0.010));
  rs.push_back(MakeResult("gloo", BenchOp::kAllReduce, "ring", 4, m16, m16, "fp32", 10, 0.020));
  rs.push_back(
      MakeResult("herd", BenchOp::kReduceScatter, "ring", 4, 4096, 4096, "fp32", 10, 1e-5));
  rs.back().check = "failed";
  rs.back().detail = "herd reduce_scatter ring 4K: rank 1 element 3 is 2, expected 1";
  rs.push_back(MakeUnmeasured("gloo", BenchOp::kReduceScatter, "halving_doubling", 4, 4096, "fp32",
                              "no reason"));
  return rs;
}

TEST(RenderTables, OneTablePerOpWithRatios) {
  const std::string out = RenderTables(Results());
  SCOPED_TRACE(out);
  EXPECT_NE(out.find("allreduce: 4 ranks, fp32"), std::string::npos);
  EXPECT_NE(out.find("reduce_scatter: 4 ranks, fp32"), std::string::npos);
  EXPECT_NE(out.find("busbw = algbw x 1.5"), std::string::npos);
  EXPECT_NE(out.find("GB/s (10^9 bytes/s)"), std::string::npos);
  // Ratio columns: herd algbw over each peer's, per herd algorithm.
  for (const char* head : {"ring/mpi", "ring/gloo", "lp/mpi", "lp/gloo"}) {
    EXPECT_NE(out.find(head), std::string::npos) << head;
  }
  // 16M row: ring 2.00x mpi, 4.00x gloo; lp 1.00x mpi, 2.00x gloo; times 5000 and 10000 us.
  const size_t row = out.find("\n16M");
  ASSERT_NE(row, std::string::npos);
  const std::string line = out.substr(row + 1, out.find('\n', row + 1) - row - 1);
  EXPECT_NE(line.find("5000.0"), std::string::npos) << line;
  std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
  ASSERT_GE(cells.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(cells.end() - 4, cells.end()),
            (std::vector<std::string>{"2.00x", "4.00x", "1.00x", "2.00x"}))
      << line;
  EXPECT_NE(line.find("3.355"), std::string::npos) << line;  // 16 MiB / 5 ms in GB/s
  // A failed check is marked and explained; an unmeasured cell says why.
  EXPECT_NE(out.find("10.0!"), std::string::npos);
  EXPECT_NE(out.find("CHECK FAILED: herd reduce_scatter ring 4K: rank 1 element 3"),
            std::string::npos);
  EXPECT_NE(out.find("n/a"), std::string::npos);
  EXPECT_NE(out.find("no reason"), std::string::npos);
}

TEST(RenderTables, HerdColumnsShowTheShareOfTimeSpentWaiting) {
  std::vector<BenchResult> rs = Results();
  rs[0].wait_us = 2500;  // half of ring's 5000 us
  const std::string out = RenderTables(rs);
  EXPECT_NE(out.find("wait%"), std::string::npos) << out;
  const size_t row = out.find("\n16M");
  const std::string line = out.substr(row + 1, out.find('\n', row + 1) - row - 1);
  std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
  // size, then ring's time, algbw, busbw, wait%.
  ASSERT_GE(cells.size(), 5u);
  EXPECT_EQ(cells[4], "50") << line;
}

TEST(RenderTables, SingleHerdAlgorithmIsLabelledHerd) {
  std::vector<BenchResult> rs = Results();
  rs.erase(rs.begin() + 1);  // drop lp
  const std::string out = RenderTables(rs);
  EXPECT_NE(out.find("herd/mpi"), std::string::npos) << out;
  EXPECT_NE(out.find("herd/gloo"), std::string::npos) << out;
}

TEST(SweepFlags, ParseValidateAndTravelToChildren) {
  CLI::App app;
  SweepFlags flags;
  flags.Register(app, true);
  std::vector<std::string> given = {"--timeout-s",
                                    "2.5",
                                    "--check",
                                    "--dtype",
                                    "bf16",
                                    "--sizes",
                                    "4K,4000012",
                                    "--algos",
                                    "ring,lp",
                                    "--ops",
                                    "allreduce,broadcast"};
  std::reverse(given.begin(), given.end());  // CLI11 takes the vector back to front
  app.parse(given);
  auto spec = flags.ToSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->sizes, (std::vector<size_t>{4096, 4000012}));
  EXPECT_EQ(spec->dtype, DType::kBFloat16);
  EXPECT_EQ(spec->timeout, std::chrono::milliseconds(2500));
  EXPECT_TRUE(spec->check);

  // What the children get parses back to the same spec.
  CLI::App child;
  SweepFlags child_flags;
  child_flags.Register(child, false);
  std::vector<std::string> args = SweepArgs(*spec);
  std::reverse(args.begin(), args.end());  // CLI11 takes the vector back to front
  child.parse(args);
  auto again = child_flags.ToSpec();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ops, spec->ops);
  EXPECT_EQ(again->algos, spec->algos);
  EXPECT_EQ(again->sizes, spec->sizes);
  EXPECT_EQ(again->dtype, spec->dtype);
  EXPECT_EQ(again->iters, spec->iters);
  EXPECT_EQ(again->warmup, spec->warmup);
  EXPECT_EQ(again->check, spec->check);
  EXPECT_EQ(again->timeout, spec->timeout);
}

TEST(SweepFlags, BadValuesAreNamed) {
  auto error_of = [](std::vector<std::string> args) {
    CLI::App app;
    SweepFlags flags;
    flags.Register(app, true);
    std::reverse(args.begin(), args.end());
    app.parse(args);
    auto spec = flags.ToSpec();
    return spec.ok() ? std::string("ok") : std::string(spec.status().message());
  };
  EXPECT_NE(error_of({"--ops", "allreduse"}).find("--ops"), std::string::npos);
  EXPECT_NE(error_of({"--algos", "bruck", "--ops", "allreduce"}).find("--algos"),
            std::string::npos);
  EXPECT_NE(error_of({"--sizes", "4X"}).find("--sizes"), std::string::npos);
  EXPECT_NE(error_of({"--sizes", "2", "--dtype", "fp32"}).find("less than one fp32 element"),
            std::string::npos);
  EXPECT_NE(error_of({"--dtype", "int32"}).find("--dtype"), std::string::npos);
  EXPECT_NE(error_of({"--timeout-s", "0"}).find("--timeout-s"), std::string::npos);
  EXPECT_NE(error_of({"--iters", "-1"}).find("--iters"), std::string::npos);
  EXPECT_EQ(error_of({}), "ok");
}

TEST(IterationsFor, AutomaticCountsFollowTheSize) {
  SweepSpec spec;
  EXPECT_EQ(IterationsFor(spec, size_t{256} << 20), 10);
  EXPECT_EQ(IterationsFor(spec, size_t{16} << 20), 64);
  EXPECT_EQ(IterationsFor(spec, 4096), 500);
  EXPECT_EQ(WarmupFor(spec, size_t{256} << 20), 2);
  EXPECT_EQ(WarmupFor(spec, 4096), 50);
  spec.iters = 3;
  spec.warmup = 0;
  EXPECT_EQ(IterationsFor(spec, 4096), 3);
  EXPECT_EQ(WarmupFor(spec, 4096), 0);
}

TEST(FirstPointWarmupFor, WalksThePeersFifosAtSmallSizesOnly) {
  SweepSpec spec;
  EXPECT_EQ(FirstPointWarmupFor(spec, 4096), 2048);
  EXPECT_EQ(FirstPointWarmupFor(spec, size_t{64} << 10), 512);  // 32 MiB in all
  EXPECT_EQ(FirstPointWarmupFor(spec, size_t{16} << 20), 12);   // WarmupFor's
  spec.warmup = 5;
  EXPECT_EQ(FirstPointWarmupFor(spec, 4096), 5);  // an explicit --warmup as given
}

}  // namespace
}  // namespace herd::bench
