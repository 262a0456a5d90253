// The pure pieces of the emulator's probes (bench/emu/probe.h) and the median the benchmarks
// report; the probes themselves need the emulated cluster (root) and run in emulator_test.
#include "bench/emu/probe.h"

#include <gtest/gtest.h>

#include "bench/result.h"

namespace herd::emulator {
namespace {

using bench::Median;

TEST(Median, EmptyIsZero) { EXPECT_EQ(Median({}), 0.0); }

TEST(Median, OddCountTakesTheMiddle) {
  EXPECT_EQ(Median({3.0}), 3.0);
  EXPECT_EQ(Median({5.0, 1.0, 9.0}), 5.0);
}

TEST(Median, EvenCountAveragesTheMiddleTwo) {
  EXPECT_EQ(Median({4.0, 1.0, 10.0, 2.0}), 3.0);
  EXPECT_EQ(Median({2.0, 2.0}), 2.0);
}

TEST(IsModeProbe, KnowsTheModes) {
  for (const char* name :
       {"ring", "sparse", "topk_allgather", "clps", "decentralized", "decentralized_whole"}) {
    EXPECT_TRUE(IsModeProbe(name)) << name;
  }
  EXPECT_FALSE(IsModeProbe("allreduce"));
  EXPECT_FALSE(IsModeProbe("stream"));
  EXPECT_FALSE(IsModeProbe(""));
}

TEST(ProbeResultJson, DensityRoundTrips) {
  ProbeResult r{"sparse", "", 4, 1, 100, 3, 0.5, 1600, 0.01};
  auto parsed = ProbeResultFromJson(*json::ParseObject(ToJson(r).Write()));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->probe, "sparse");
  EXPECT_DOUBLE_EQ(parsed->density, 0.01);
  EXPECT_DOUBLE_EQ(parsed->seconds, 0.5);
}

TEST(ProbeResultJson, DensityIsOptional) {
  auto parsed = ProbeResultFromJson(*json::ParseObject(
      R"({"probe":"allreduce","ranks":2,"bytes":8,"iters":1,"seconds":1,"bits_per_s":64})"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->density, 0.0);
}

}  // namespace
}  // namespace herd::emulator
