// The pure pieces of the emulator's mode probes (bench/emulator/mode_probes.h); the probes
// themselves need the emulated cluster (root) and are not run here.
#include "bench/emulator/mode_probes.h"

#include <gtest/gtest.h>

namespace herd::emulator {
namespace {

TEST(MedianOf, EmptyIsZero) { EXPECT_EQ(MedianOf({}), 0.0); }

TEST(MedianOf, OddCountTakesTheMiddle) {
  EXPECT_EQ(MedianOf({3.0}), 3.0);
  EXPECT_EQ(MedianOf({5.0, 1.0, 9.0}), 5.0);
}

TEST(MedianOf, EvenCountAveragesTheMiddleTwo) {
  EXPECT_EQ(MedianOf({4.0, 1.0, 10.0, 2.0}), 3.0);
  EXPECT_EQ(MedianOf({2.0, 2.0}), 2.0);
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
  ProbeResult r{"sparse", 4, 100, 3, 0.5, 1600, 0.01};
  auto parsed = ParseProbeResult(ToJsonLine(r));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->probe, "sparse");
  EXPECT_DOUBLE_EQ(parsed->density, 0.01);
  EXPECT_DOUBLE_EQ(parsed->seconds, 0.5);
}

TEST(ProbeResultJson, DensityIsOptional) {
  auto parsed = ParseProbeResult(
      R"({"probe":"allreduce","ranks":2,"bytes":8,"iters":1,"seconds":1,"bits_per_s":64})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->density, 0.0);
}

}  // namespace
}  // namespace herd::emulator
