#include "bench/dear/dear_theory.h"

#include <gtest/gtest.h>

namespace herd::emulator {
namespace {

PhaseTimes Paper(double ff, double ag) {
  // Eq. 9's assumptions: t_bp = 2 t_ff, t_rs = t_ag, t_ar = 2 t_ag.
  return PhaseTimes{ff, 2 * ff, ag, ag, 2 * ag};
}

TEST(DearTheoryTest, Eq9IsEq8MinusEq7UnderItsAssumptions) {
  for (double ff : {0.01, 0.1, 1.0}) {
    for (double ratio : {0.0, 0.3, 1.0, 1.2, 1.7, 2.0, 2.5, 10.0}) {
      const PhaseTimes t = Paper(ff, ratio * ff);
      EXPECT_NEAR(BaselineIterationTime(t) - DearIterationTime(t), Eq9Improvement(t), 1e-12)
          << "t_ff " << ff << ", t_ag / t_ff " << ratio;
    }
  }
  // The three cases.
  EXPECT_DOUBLE_EQ(Eq9Improvement(Paper(1, 0.5)), 0.0);
  EXPECT_DOUBLE_EQ(Eq9Improvement(Paper(1, 1.5)), 0.5);
  EXPECT_DOUBLE_EQ(Eq9Improvement(Paper(1, 7)), 1.0);
}

TEST(DearTheoryTest, IterationTimesOverlapAsTheEquationsSay) {
  const PhaseTimes t{0.1, 0.2, 0.3, 0.25, 0.55};
  EXPECT_DOUBLE_EQ(DearIterationTime(t), 0.25 + 0.3);
  EXPECT_DOUBLE_EQ(BaselineIterationTime(t), 0.1 + 0.55);
  // With the ring's halves (t_rs = t_ag, t_ar = 2 t_ag) and t_bp = 2 t_ff DeAR is never
  // slower than the baseline ...
  for (double ag : {0.0, 0.05, 0.1, 0.15, 0.4}) {
    const PhaseTimes u{0.1, 0.2, ag, ag, 2 * ag};
    EXPECT_LE(DearIterationTime(u), BaselineIterationTime(u) + 1e-12) << ag;
  }
  // ... but it is when backward alone could hide the whole all-reduce (t_bp >= 2 t_ag > 2 t_ff):
  // WFBP then hides everything, DeAR leaves t_ag - t_ff exposed in forward.
  const PhaseTimes long_backward{0.1, 1.0, 0.3, 0.3, 0.6};
  EXPECT_NEAR(DearIterationTime(long_backward) - BaselineIterationTime(long_backward), 0.2, 1e-12);
}

TEST(DearTheoryTest, MaxSpeedupMatchesTableII) {
  // Table II, 64 GPUs on 10GbE, with t_ar = 2 m / B: ResNet-50 61.6, BERT-Base 25.5; the
  // compute times of model_profile.h were derived from these, so they must give them back.
  const double B = 10e9 / 8;
  const double r50 = 25.6e6 * 4 / B, bert = 110.1e6 * 4 / B;  // t_rs = t_ag = m / B
  EXPECT_NEAR(MaxSpeedup({0.0733, 0.1467, r50, r50, 2 * r50}, 64), 61.6, 0.1);
  EXPECT_NEAR(MaxSpeedup({0.0936, 0.1872, bert, bert, 2 * bert}, 64), 25.5, 0.1);
  // No communication: linear.
  EXPECT_DOUBLE_EQ(MaxSpeedup({0.1, 0.2, 0, 0, 0}, 8), 8.0);
}

TEST(DearTheoryTest, RingHalfIsTheLinkBound) {
  // 64 MiB over 4 ranks at 1 Gbit/s: each half moves 3/4 of it.
  EXPECT_NEAR(RingHalfSeconds(64.0 * (1 << 20), 4, 1e9), 0.75 * 64 * (1 << 20) * 8 / 1e9, 1e-12);
  EXPECT_EQ(RingHalfSeconds(1e6, 1, 1e9), 0.0);
}

}  // namespace
}  // namespace herd::emulator
