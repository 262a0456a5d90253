// The horizon's pure rules (scheduler/horizon.h): the rate a job runs at, measured from its
// workers' reports, and how far ahead of it the plans are granted.

#include "scheduler/horizon.h"

#include <gtest/gtest.h>

namespace herd::scheduler {
namespace {

using std::chrono::milliseconds;
using Clock = RateEstimate::Clock;

TEST(RateEstimate, FollowsTheRateOfSteadyReports) {
  RateEstimate r;
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(r.rate(), 0);
  // 10 iterations a second, every one reported.
  for (int i = 0; i <= 40; ++i) r.Observe(i, t0 + milliseconds(100 * i));
  EXPECT_NEAR(r.rate(), 10, 1e-6);
}

TEST(RateEstimate, WorkersOneIterationApartAMillisecondApartDoNotInflateTheRate) {
  RateEstimate r;
  const Clock::time_point t0 = Clock::now();
  // Four workers at 10 iterations a second, each reporting its own progress at its own moment:
  // worker w reports iteration i + w a millisecond after worker w - 1 (they lead one another by
  // an iteration). Pairwise, that is a thousand iterations a second.
  for (int i = 0; i < 40; i += 4) {
    for (int w = 0; w < 4; ++w) {
      r.Observe(i + w, t0 + milliseconds(100 * i + w));
    }
  }
  EXPECT_GT(r.rate(), 5);
  EXPECT_LT(r.rate(), 20) << "a burst of reports is no measure of the rate";
  EXPECT_EQ(r.highest(), 39);
}

TEST(RateEstimate, OnlyANewHighestCountsAndTheEstimateMovesOnAtTheRate) {
  RateEstimate r;
  const Clock::time_point t0 = Clock::now();
  r.Observe(10, t0);
  r.Observe(20, t0 + milliseconds(1000));
  EXPECT_NEAR(r.rate(), 10, 1e-9);
  r.Observe(15, t0 + milliseconds(1100));  // a rolled-back worker's report
  EXPECT_EQ(r.highest(), 20);
  EXPECT_EQ(r.Estimate(t0 + milliseconds(1200)), 22);
  // Never more than half a second of extrapolation: a job that stopped reporting (it waits on
  // a dead peer) does not run on in the scheduler's eyes.
  EXPECT_EQ(r.Estimate(t0 + milliseconds(4000)), 25);
}

TEST(HorizonTarget, GrantsAboutASecondAheadInHalfSecondSteps) {
  RateEstimate r;
  const Clock::time_point t0 = Clock::now();
  r.Observe(0, t0);
  r.Observe(100, t0 + milliseconds(1000));  // 100 iterations a second
  const HorizonRule rule{milliseconds(1000), 4};
  const auto now = t0 + milliseconds(1000);
  EXPECT_EQ(HorizonTarget(rule, 0, r, now, -1, 0), 200);
  // Less than half the lookahead to gain: no grant (one event per half second of work).
  EXPECT_EQ(HorizonTarget(rule, 170, r, now, -1, 0), 170);
  // But a worker waiting at the horizon is answered at once.
  EXPECT_EQ(HorizonTarget(rule, 170, r, now, 171, 0), 270);
  // Never past the planned end's last iteration.
  EXPECT_EQ(HorizonTarget(rule, 0, r, now, -1, 150), 149);
  // Before any rate, min_ahead iterations past the ask.
  RateEstimate none;
  EXPECT_EQ(HorizonTarget(rule, -1, none, now, 0, 0), 3);
}

}  // namespace
}  // namespace herd::scheduler
