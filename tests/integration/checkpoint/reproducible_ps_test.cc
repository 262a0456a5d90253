// Reproducible parameter-server rounds, through the real `herd local` (4 workers, so the order
// in which a round's pushes are summed matters: with 2, a + b == b + a): two ps_sync or ps_ec
// runs with the same seed end with the same parameters and the same per-iteration losses,
// because a shard sums each round in rank order, whatever order the pushes arrive in.
// The kill-and-resume exactness check at 4 workers is in resume_matrix_test (label slow).

#include <gtest/gtest.h>

#include "tests/integration/checkpoint/local_runs.h"

namespace herd::testing {
namespace {

class ReproduciblePs : public ::testing::TestWithParam<std::string> {};

TEST_P(ReproduciblePs, TwoRunsWithTheSameSeedEndWithTheSameDigest) {
  // 1280 samples, 4 workers x 32: 10 iterations.
  auto job = SmallJob(GetParam(), 4, 1280, 1);
  job.insert(job.end(), {"--seed", "5"});
  ScratchDir a, b;
  LocalRun first = RunLocal(job, a.path);
  ASSERT_EQ(first.rc, 0) << first.out;
  ASSERT_FALSE(first.digest.empty()) << first.out;
  LocalRun second = RunLocal(job, b.path);
  ASSERT_EQ(second.rc, 0) << second.out;
  EXPECT_EQ(first.digest, second.digest) << first.out << "\n" << second.out;
  ASSERT_EQ(first.losses.size(), second.losses.size());
  for (const auto& [it, loss] : first.losses) {
    EXPECT_EQ(loss, second.losses[it]) << "iteration " << it;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ReproduciblePs, ::testing::Values("ps_sync", "ps_ec"));

}  // namespace
}  // namespace herd::testing
