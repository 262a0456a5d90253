#include "common/reduce.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/half.h"

namespace herd {
namespace {

TEST(ReduceTest, SumMinMaxFloat32) {
  std::vector<float> a = {1, -2, 3, 4.5f}, b = {10, 20, -30, 0.5f};
  auto s = a;
  ReduceInto(DType::kFloat32, ReduceOp::kSum, s.data(), b.data(), s.size());
  EXPECT_EQ(s, (std::vector<float>{11, 18, -27, 5}));
  auto mn = a;
  ReduceInto(DType::kFloat32, ReduceOp::kMin, mn.data(), b.data(), mn.size());
  EXPECT_EQ(mn, (std::vector<float>{1, -2, -30, 0.5f}));
  auto mx = a;
  ReduceInto(DType::kFloat32, ReduceOp::kMax, mx.data(), b.data(), mx.size());
  EXPECT_EQ(mx, (std::vector<float>{10, 20, 3, 4.5f}));
}

TEST(ReduceTest, Float64AndIntegers) {
  std::vector<double> d = {1e300, 2}, e = {1e300, 3};
  ReduceInto(DType::kFloat64, ReduceOp::kSum, d.data(), e.data(), 2);
  EXPECT_EQ(d[0], 2e300);
  EXPECT_EQ(d[1], 5);
  std::vector<int64_t> i = {1LL << 40, -5}, j = {1, 7};
  ReduceInto(DType::kInt64, ReduceOp::kSum, i.data(), j.data(), 2);
  EXPECT_EQ(i[0], (1LL << 40) + 1);
  EXPECT_EQ(i[1], 2);
}

// The vectorised fp16 path (8 at a time) and its scalar tail agree with the scalar reference.
TEST(ReduceTest, FP16MatchesScalarReferenceForAllLengths) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-100, 100);
  for (size_t n : {0, 1, 7, 8, 9, 31, 1000}) {
    std::vector<uint16_t> a(n), b(n);
    for (size_t k = 0; k < n; ++k) {
      a[k] = FloatToFP16(dist(rng));
      b[k] = FloatToFP16(dist(rng));
    }
    auto out = a;
    ReduceInto(DType::kFloat16, ReduceOp::kSum, out.data(), b.data(), n);
    for (size_t k = 0; k < n; ++k) {
      ASSERT_EQ(out[k], FloatToFP16(FP16ToFloat(a[k]) + FP16ToFloat(b[k])))
          << "n=" << n << " k=" << k;
    }
  }
}

TEST(ReduceTest, BF16Sum) {
  std::vector<uint16_t> a = {FloatToBF16(1.5f), FloatToBF16(-2.0f)};
  std::vector<uint16_t> b = {FloatToBF16(0.25f), FloatToBF16(8.0f)};
  ReduceInto(DType::kBFloat16, ReduceOp::kSum, a.data(), b.data(), 2);
  EXPECT_EQ(BF16ToFloat(a[0]), 1.75f);
  EXPECT_EQ(BF16ToFloat(a[1]), 6.0f);
}

TEST(ReduceTest, AverageFinishDividesByContributors) {
  std::vector<float> v = {3, 6, 9};
  FinishReduction(DType::kFloat32, ReduceOp::kAverage, v.data(), v.size(), 3);
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3}));
  FinishReduction(DType::kFloat32, ReduceOp::kSum, v.data(), v.size(), 3);
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3}));
}

TEST(ReduceTest, ParseReduceOp) {
  EXPECT_EQ(*ParseReduceOp("sum"), ReduceOp::kSum);
  EXPECT_EQ(*ParseReduceOp("AVG"), ReduceOp::kAverage);
  EXPECT_FALSE(ParseReduceOp("prod").ok());
}

}  // namespace
}  // namespace herd
