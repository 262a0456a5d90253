// The invariant checks must be able to fail: each is run on a correct record and then on the
// same record with one value bent the way a bug would bend it.

#include <gtest/gtest.h>

#include "tests/unit/sparse/sparse_test_util.h"

namespace herd::sparse::testing {
namespace {

class CheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c_.ranks = 3;
    c_.count = 3000;
    c_.density = 0.02;
    auto records = RunCalls(c_);
    ASSERT_TRUE(records.ok()) << records.status();
    good_ = records->front();
    ASSERT_TRUE(SameOnEveryRank(good_));
    ASSERT_TRUE(NothingLost(good_));
    ASSERT_TRUE(OutsideSupportKeepsInput(good_));
    ASSERT_TRUE(OwnerKeepsNothing(good_, c_));
    ASSERT_TRUE(BlocksWithinK(good_, BlockElements(c_), BlockK(c_), true));
    for (size_t i = 0; i < c_.count; ++i) {
      if (good_.result[0][i] != 0) {
        supported_ = i;
        break;
      }
    }
    for (size_t i = 0; i < c_.count; ++i) {
      if (good_.result[0][i] == 0) {
        unsupported_ = i;
        break;
      }
    }
  }

  Case c_;
  CallRecord good_;
  size_t supported_ = 0, unsupported_ = 0;
};

TEST_F(CheckerTest, ADifferentResultOnOneRank) {
  CallRecord r = good_;
  r.result[2][supported_] *= 1.0000001f;
  EXPECT_FALSE(SameOnEveryRank(r));
}

TEST_F(CheckerTest, ALostValue) {
  CallRecord r = good_;
  r.residual[1][unsupported_] = 0;  // dropped instead of kept
  EXPECT_FALSE(NothingLost(r));
  EXPECT_FALSE(OutsideSupportKeepsInput(r));
}

TEST_F(CheckerTest, AnOwnerKeepingASelectedValue) {
  CallRecord r = good_;
  const int owner = static_cast<int>(supported_ / BlockElements(c_));
  r.residual[owner][supported_] = 1;
  EXPECT_FALSE(OwnerKeepsNothing(r, c_));
}

TEST_F(CheckerTest, TooManyOrTooFewInABlock) {
  CallRecord r = good_;
  r.result[0][unsupported_] = 1;
  EXPECT_FALSE(BlocksWithinK(r, BlockElements(c_), BlockK(c_), false));
  r = good_;
  r.result[0][supported_] = 0;
  EXPECT_FALSE(BlocksWithinK(r, BlockElements(c_), BlockK(c_), true));
}

TEST(TopACheckerTest, ResidualNeitherInputNorZeroOrTooMuchDelivered) {
  Case c;
  c.algo = Algo::kTopA;
  c.ranks = 2;
  c.count = 3000;
  c.density = 0.02;
  auto records = RunCalls(c);
  ASSERT_TRUE(records.ok()) << records.status();
  const CallRecord& good = records->front();
  ASSERT_TRUE(ResidualIsAllOrNothing(good, BlockK(c), true));
  CallRecord r = good;
  r.residual[0][7] += 1;
  EXPECT_FALSE(ResidualIsAllOrNothing(r, BlockK(c), false));
  r = good;
  for (size_t i = 0; i < c.count; ++i) {
    if (r.residual[1][i] != 0) {
      r.residual[1][i] = 0;  // one more delivered than k
      break;
    }
  }
  EXPECT_FALSE(ResidualIsAllOrNothing(r, BlockK(c), false));
}

}  // namespace
}  // namespace herd::sparse::testing
