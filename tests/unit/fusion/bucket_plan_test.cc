#include "algorithms/fusion/bucket_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace herd::fusion {
namespace {

// Checks every property PlanBuckets promises, plus greedy maximality (no bucket could have
// taken the next tensor), which pins the grouping down uniquely.
void ExpectValidPlan(const std::vector<size_t>& sizes, size_t threshold,
                     const std::vector<Bucket>& plan) {
  SCOPED_TRACE(::testing::Message()
               << "threshold " << threshold << ", " << sizes.size() << " tensors");
  if (sizes.empty()) {
    EXPECT_TRUE(plan.empty());
    return;
  }
  ASSERT_FALSE(plan.empty());
  EXPECT_EQ(plan.front().first, 0);
  EXPECT_EQ(plan.back().last, static_cast<int>(sizes.size()) - 1);
  for (size_t b = 0; b < plan.size(); ++b) {
    const Bucket& k = plan[b];
    ASSERT_LE(k.first, k.last) << "bucket " << b;
    if (b > 0) {
      EXPECT_EQ(k.first, plan[b - 1].last + 1) << "bucket " << b << " is not next";
    }
    size_t sum = 0;
    for (int i = k.first; i <= k.last; ++i) sum += sizes[i];
    EXPECT_EQ(k.bytes, sum) << "bucket " << b;
    if (threshold == 0) {
      EXPECT_EQ(k.first, k.last) << "threshold 0 fuses nothing";
    } else if (k.first != k.last) {
      EXPECT_LE(k.bytes, threshold) << "bucket " << b << " of several tensors is over";
    }
    if (threshold > 0 && b + 1 < plan.size()) {
      const size_t next = sizes[k.last + 1];
      EXPECT_TRUE(k.bytes > threshold || next > threshold - k.bytes)
          << "bucket " << b << " (" << k.bytes << " B) could have taken tensor " << k.last + 1
          << " (" << next << " B)";
    }
  }
}

TEST(BucketPlanTest, EmptyInputGivesNoBuckets) {
  EXPECT_TRUE(PlanBuckets({}, 0).empty());
  EXPECT_TRUE(PlanBuckets({}, 1 << 20).empty());
}

TEST(BucketPlanTest, ThresholdZeroIsOneBucketPerTensor) {
  const std::vector<size_t> sizes = {4, 0, 0, 100, 7};
  const auto plan = PlanBuckets(sizes, 0);
  ASSERT_EQ(plan.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(plan[i].first, static_cast<int>(i));
    EXPECT_EQ(plan[i].last, static_cast<int>(i));
    EXPECT_EQ(plan[i].bytes, sizes[i]);
  }
}

TEST(BucketPlanTest, GroupsGreedilyUpToTheThresholdInclusive) {
  const std::vector<size_t> sizes = {3, 3, 4, 5, 4, 1, 9};
  const auto plan = PlanBuckets(sizes, 10);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].first, 0);
  EXPECT_EQ(plan[0].last, 2);  // 3 + 3 + 4 = 10 fills the bucket exactly
  EXPECT_EQ(plan[0].bytes, 10u);
  EXPECT_EQ(plan[1].first, 3);
  EXPECT_EQ(plan[1].last, 5);
  EXPECT_EQ(plan[1].bytes, 10u);
  EXPECT_EQ(plan[2].first, 6);
  EXPECT_EQ(plan[2].bytes, 9u);
  ExpectValidPlan(sizes, 10, plan);
}

TEST(BucketPlanTest, ZeroSizedTensorsJoinTheOpenBucket) {
  const std::vector<size_t> sizes = {0, 0, 10, 0, 0, 1, 0};
  const auto plan = PlanBuckets(sizes, 10);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].last, 4);
  EXPECT_EQ(plan[1].first, 5);
  EXPECT_EQ(plan[1].last, 6);
  ExpectValidPlan(sizes, 10, plan);
}

TEST(BucketPlanTest, ATensorOverTheThresholdIsItsOwnBucket) {
  const size_t huge = std::numeric_limits<size_t>::max() - 5;
  const std::vector<size_t> sizes = {1, 2, huge, 3, 4};
  const auto plan = PlanBuckets(sizes, 8);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].last, 1);
  EXPECT_EQ(plan[1].first, 2);
  EXPECT_EQ(plan[1].last, 2);
  EXPECT_EQ(plan[1].bytes, huge);
  EXPECT_EQ(plan[2].first, 3);
  EXPECT_EQ(plan[2].bytes, 7u);
  ExpectValidPlan(sizes, 8, plan);
}

TEST(BucketPlanTest, HugeThresholdNeverOverflows) {
  const size_t max = std::numeric_limits<size_t>::max();
  const std::vector<size_t> sizes = {max / 2, max / 2, 1, 1};
  const auto plan = PlanBuckets(sizes, max);
  ASSERT_EQ(plan.size(), 2u) << "max/2 + max/2 + 1 == max fits, the last 1 does not";
  EXPECT_EQ(plan[0].bytes, max);
  ExpectValidPlan(sizes, max, plan);
}

TEST(BucketPlanTest, RandomModelsKeepEveryInvariant) {
  std::mt19937_64 gen(7);
  for (int round = 0; round < 300; ++round) {
    const size_t n = gen() % 60;
    std::vector<size_t> sizes(n);
    for (auto& s : sizes) {
      // Mostly small tensors, some zero, some far over any threshold (like a CNN's biases
      // beside its fully connected layer).
      const uint64_t kind = gen() % 10;
      s = kind == 0 ? 0 : kind == 9 ? (gen() % (64u << 20)) : (gen() % (1u << 16));
    }
    for (size_t threshold :
         {size_t{0}, size_t{1}, size_t{1000}, size_t{1} << 16, size_t{1} << 20, size_t{1} << 30}) {
      ExpectValidPlan(sizes, threshold, PlanBuckets(sizes, threshold));
    }
  }
}

}  // namespace
}  // namespace herd::fusion
