// Top-k selection against a reference that sorts (|x| descending, position ascending): the
// exact method must return exactly the reference's first min(k, non-zeros) positions for every
// size, k and distribution; the sampled one the reference's first m positions for some m <= k,
// close to k on smooth inputs.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "algorithms/sparse/topk.h"

namespace herd::sparse {
namespace {

enum class Dist { kUniform, kGauss, kTies, kMostlyZero, kAscending, kAllZero, kSignAlternating };

std::vector<float> Make(Dist d, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    switch (d) {
      case Dist::kUniform:
        x[i] = u(rng);
        break;
      case Dist::kGauss:
        x[i] = g(rng) * std::exp(g(rng));  // heavy-tailed, like gradients
        break;
      case Dist::kTies:
        x[i] = static_cast<float>(static_cast<int>(rng() % 5) - 2);
        break;
      case Dist::kMostlyZero:
        x[i] = rng() % 97 == 0 ? u(rng) : 0.0f;
        break;
      case Dist::kAscending:
        x[i] = static_cast<float>(i);
        break;
      case Dist::kAllZero:
        x[i] = 0;
        break;
      case Dist::kSignAlternating:
        x[i] = (i % 2 ? -1.0f : 1.0f) * static_cast<float>(i % 1000);
        break;
    }
  }
  return x;
}

// The non-zero positions in selection order (sorted once per input).
std::vector<uint32_t> SelectionOrder(const std::vector<float>& x) {
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < x.size(); ++i) {
    if (x[i] != 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const float fa = std::fabs(x[a]), fb = std::fabs(x[b]);
    return fa != fb ? fa > fb : a < b;
  });
  return order;
}

// Positions of the reference top-k, ascending.
std::vector<uint32_t> Reference(const std::vector<uint32_t>& order, size_t k) {
  std::vector<uint32_t> top(order.begin(), order.begin() + std::min(k, order.size()));
  std::sort(top.begin(), top.end());
  return top;
}

std::vector<size_t> KsFor(size_t n) {
  std::vector<size_t> ks = {0, 1, 2, 7, n / 1000, n / 100, n / 10, n / 2, n - 1, n, n + 5};
  ks.erase(std::remove_if(ks.begin(), ks.end(), [n](size_t k) { return k > n + 5; }), ks.end());
  return ks;
}

const Dist kDists[] = {Dist::kUniform,   Dist::kGauss,   Dist::kTies,           Dist::kMostlyZero,
                       Dist::kAscending, Dist::kAllZero, Dist::kSignAlternating};
const size_t kSizes[] = {0, 1, 5, 1000, kSmallInput - 1, kSmallInput, 100003, size_t{1} << 20};

TEST(TopkTest, ExactMatchesReference) {
  TopkScratch scratch;
  std::vector<uint32_t> got;
  for (Dist d : kDists) {
    for (size_t n : kSizes) {
      const std::vector<float> x = Make(d, n, static_cast<uint32_t>(n) * 31 + static_cast<int>(d));
      const std::vector<uint32_t> order = SelectionOrder(x);
      for (size_t k : KsFor(n)) {
        SCOPED_TRACE(absl::StrFormat("dist %d n %u k %u", static_cast<int>(d), n, k));
        SelectTopK(x, k, TopkMethod::kExact, &got, &scratch);
        ASSERT_EQ(got, Reference(order, k));
      }
    }
  }
}

TEST(TopkTest, SampledIsAPrefixOfTheReferenceAndCloseToK) {
  TopkScratch scratch;
  std::vector<uint32_t> got;
  for (Dist d : kDists) {
    for (size_t n : kSizes) {
      const std::vector<float> x = Make(d, n, static_cast<uint32_t>(n) * 17 + static_cast<int>(d));
      const std::vector<uint32_t> order = SelectionOrder(x);
      for (size_t k : KsFor(n)) {
        SCOPED_TRACE(absl::StrFormat("dist %d n %u k %u", static_cast<int>(d), n, k));
        SelectTopK(x, k, TopkMethod::kSampled, &got, &scratch);
        ASSERT_LE(got.size(), k);
        ASSERT_EQ(got, Reference(order, got.size()));
        // Smooth inputs with enough non-zeros: within 15 % of k (k >= 100 for the statistics).
        const bool smooth = d == Dist::kUniform || d == Dist::kGauss || d == Dist::kAscending;
        if (smooth && k >= 100 && k < n) {
          EXPECT_GE(got.size(), static_cast<size_t>(0.85 * static_cast<double>(k)));
        }
      }
    }
  }
}

// The fused variant selects what SelectTopK selects on the sum, and leaves w = the sum (one
// fp32 addition per element) and g = zeros, for every path (whole input, sampled, retries).
TEST(TopkTest, OfSumMatchesSelectionOfTheSum) {
  TopkScratch scratch;
  std::vector<uint32_t> fused, plain;
  for (Dist d : kDists) {
    for (size_t n : {size_t{0}, size_t{5}, size_t{1000}, size_t{100003}}) {
      const std::vector<float> a = Make(d, n, 3), b = Make(Dist::kMostlyZero, n, 4);
      std::vector<float> sum(n);
      for (size_t i = 0; i < n; ++i) sum[i] = a[i] + b[i];
      for (size_t k : {size_t{0}, size_t{1}, n / 100, n / 2, n + 1}) {
        for (TopkMethod m : {TopkMethod::kExact, TopkMethod::kSampled}) {
          SCOPED_TRACE(absl::StrFormat("dist %d n %u k %u method %s", static_cast<int>(d), n, k,
                                       std::string(TopkMethodName(m))));
          std::vector<float> w = a, g = b;
          SelectTopKOfSum(absl::MakeSpan(w), absl::MakeSpan(g), k, m, &fused, &scratch);
          SelectTopK(sum, k, m, &plain, &scratch);
          ASSERT_EQ(fused, plain);
          ASSERT_EQ(w, sum);
          ASSERT_EQ(g, std::vector<float>(n, 0.0f));
        }
      }
    }
  }
}

TEST(TopkTest, TiesGoToTheSmallerPosition) {
  const std::vector<float> x = {0.5f, -3, 0, 2, -2, 1};
  std::vector<uint32_t> got;
  SelectTopK(x, 2, TopkMethod::kExact, &got, nullptr);
  // |x|: 3 at 1, then 2 at 3 and at 4: the tie goes to 3.
  EXPECT_EQ(got, (std::vector<uint32_t>{1, 3}));

  CooBlock in, kept, dropped;
  in.index = {2, 10, 11, 40};
  in.value = {1, -4, 4, 0.25f};
  SplitTopK(in, 1, TopkMethod::kExact, &kept, &dropped, nullptr);
  EXPECT_EQ(kept.index, (std::vector<uint32_t>{10}));  // |-4| == |4|: the smaller index
  EXPECT_EQ(dropped.index, (std::vector<uint32_t>{2, 11, 40}));
  EXPECT_EQ(dropped.value, (std::vector<float>{1, 4, 0.25f}));
}

// Not a benchmark: reports the time of one 25M-element selection at density 0.01 (the size of
// docs/sparse.md) so that a regression to a sort shows in the log.
TEST(TopkTest, LargeInputTiming) {
  const size_t n = 25'000'000, k = n / 100;
  const std::vector<float> x = Make(Dist::kGauss, n, 5);
  TopkScratch scratch;
  std::vector<uint32_t> got;
  for (TopkMethod m : {TopkMethod::kExact, TopkMethod::kSampled}) {
    const auto start = std::chrono::steady_clock::now();
    SelectTopK(x, k, m, &got, &scratch);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("top-k %s of %zu fp32, k = %zu: %zu selected in %.1f ms\n",
                std::string(TopkMethodName(m)).c_str(), n, k, got.size(), ms);
    EXPECT_LE(got.size(), k);
    if (m == TopkMethod::kExact) {
      EXPECT_EQ(got.size(), k);
    }
  }
}

}  // namespace
}  // namespace herd::sparse
