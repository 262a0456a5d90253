// The result lines the ranks, the peers and --json print, and their parser (the JSON codec
// itself is tested in tests/unit/common/json_test.cc).

#include "bench/result.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace herd::bench {
namespace {

TEST(ResultLine, HasTheRequiredFieldsAndRoundTrips) {
  BenchResult r =
      MakeResult("herd", BenchOp::kAllGather, "bruck", 4, 4000012, 4000012, "fp32", 30, 0.00123);
  r.check = "failed";
  r.detail = "herd allgather bruck 4000012: rank 2 element 17 is 3, expected 4";
  r.wait_us = 800;
  const std::string line = ToJsonLine(r);
  auto o = json::ParseObject(line);
  ASSERT_TRUE(o.ok()) << o.status();
  for (const char* key : {"impl", "op", "algo", "ranks", "bytes", "dtype", "iters", "time_us",
                          "algbw_gbps", "busbw_gbps", "check"}) {
    EXPECT_TRUE(o->Has(key)) << key << " missing from " << line;
  }
  auto back = ParseResultLine(line);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->impl, "herd");
  EXPECT_EQ(back->op, "allgather");
  EXPECT_EQ(back->algo, "bruck");
  EXPECT_EQ(back->ranks, 4);
  EXPECT_EQ(back->bytes, 4000012u);
  EXPECT_EQ(back->iters, 30);
  EXPECT_NEAR(back->time_us, 1230.0, 1e-6);
  EXPECT_NEAR(back->algbw_gbps, r.algbw_gbps, 1e-6);
  EXPECT_NEAR(back->busbw_gbps, r.busbw_gbps, 1e-6);
  EXPECT_EQ(back->check, "failed");
  EXPECT_EQ(back->detail, r.detail);
  EXPECT_DOUBLE_EQ(back->wait_us, 800);
}

TEST(ResultLine, UnmeasuredRowsCarryNullTime) {
  BenchResult r = MakeUnmeasured("gloo", BenchOp::kReduceScatter, "halving_doubling", 4, 4096,
                                 "bf16", "Gloo's reduce-scatter has no bf16 reduction");
  const std::string line = ToJsonLine(r);
  EXPECT_NE(line.find(R"("time_us":null)"), std::string::npos) << line;
  auto back = ParseResultLine(line);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->measured());
  EXPECT_EQ(back->detail, r.detail);
}

TEST(ResultLine, RejectsLinesThatAreNotResults) {
  EXPECT_FALSE(ParseResultLine(R"({"impl":"herd"})").ok());
  BenchResult r = MakeResult("herd", BenchOp::kAllReduce, "ring", 2, 8, 8, "fp32", 1, 1e-6);
  std::string line = ToJsonLine(r);
  line.replace(line.find(R"("check":"off")"), 13, R"("check":"maybe")");
  EXPECT_FALSE(ParseResultLine(line).ok());
}

}  // namespace
}  // namespace herd::bench
