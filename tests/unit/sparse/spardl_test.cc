// SparDL with one team over threads-as-ranks: the invariants of sparse_allreduce.h for
// P = 1..8, counts {0, 1, P-1, P+1, 1000, 10007, 200003} (blocks above kSmallInput take the
// sampled path of the top-k), several densities and three consecutive calls with the residual
// carried over; and two cases worked out by hand.

#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "tests/support/spawn.h"
#include "tests/unit/sparse/sparse_test_util.h"

namespace herd::sparse::testing {
namespace {

std::vector<size_t> Counts(int P) {
  std::vector<size_t> counts = {0, 1, static_cast<size_t>(P) + 1, 1000, 10007, 200003};
  if (P > 2) counts.push_back(static_cast<size_t>(P) - 1);
  return counts;
}

class SparDLSweep : public ::testing::TestWithParam<int> {};

TEST_P(SparDLSweep, ExactTopk) {
  for (size_t count : Counts(GetParam())) {
    for (double density : {0.001, 0.01, 0.3, 1.0}) {
      Case c;
      c.ranks = GetParam();
      c.count = count;
      c.density = density;
      ExpectInvariants(c);
    }
  }
}

TEST_P(SparDLSweep, SampledTopk) {
  for (size_t count : Counts(GetParam())) {
    for (double density : {0.01, 0.1}) {
      Case c;
      c.ranks = GetParam();
      c.count = count;
      c.density = density;
      c.topk = TopkMethod::kSampled;
      ExpectInvariants(c);
    }
  }
}

// Equal magnitudes everywhere (the tie order decides) and exact cancellations.
TEST_P(SparDLSweep, TiedInputs) {
  for (size_t count : {size_t{1000}, size_t{50001}}) {
    Case c;
    c.ranks = GetParam();
    c.count = count;
    c.density = 0.05;
    c.inputs = Inputs::kTies;
    ExpectInvariants(c);
  }
}

// Blocks with fewer non-zeros than k.
TEST_P(SparDLSweep, SparseInputs) {
  for (double density : {0.01, 0.2}) {
    Case c;
    c.ranks = GetParam();
    c.count = 30011;
    c.density = density;
    c.inputs = Inputs::kSparse;
    c.calls = 4;
    ExpectInvariants(c);
  }
}

INSTANTIATE_TEST_SUITE_P(Sparse, SparDLSweep, ::testing::Range(1, 9),
                         [](const auto& info) { return absl::StrFormat("P%d", info.param); });

// P = 2, count 4, density 0.5: blocks of C = 2, k = 1.
//   rank 0: x = [1, -5, 3, 0.5] sends block 1's top-1 (index 2: 3), keeps [1, -5, 0, 0.5];
//   rank 1: x = [2, 1, -4, 6]   sends block 0's top-1 (index 0: 2), keeps [0, 1, -4, 6].
//   rank 0 adds 2 into block 0: [3, -5], keeps its top-1 (index 1: -5);
//   rank 1 adds 3 into block 1: [-1, 6], keeps its top-1 (index 3: 6).
//   result = [0, -5, 0, 6] / 2. Residuals: w at the support {1, 3}, the input elsewhere:
//   rank 0: [1, 0, 3, 0.5], rank 1: [2, 1, -4, 0].
TEST(SparDLTest, TwoRanksByHand) {
  const std::vector<std::vector<float>> grad = {{1, -5, 3, 0.5f}, {2, 1, -4, 6}};
  std::vector<std::vector<float>> data = grad, residual(2, std::vector<float>(4, 0.0f));
  auto statuses = herd::testing::SpawnRanks(2, [&](transport::Communicator& comm) {
    SparseAllReduceOptions o;
    o.comm = &comm;
    o.data = data[comm.rank()].data();
    o.residual = residual[comm.rank()].data();
    o.count = 4;
    o.density = 0.5;
    return SparDLAllReduce(o);
  });
  ASSERT_TRUE(herd::testing::FirstError(statuses).ok()) << herd::testing::FirstError(statuses);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(data[r], (std::vector<float>{0, -2.5f, 0, 3}));
  EXPECT_EQ(residual[0], (std::vector<float>{1, 0, 3, 0.5f}));
  EXPECT_EQ(residual[1], (std::vector<float>{2, 1, -4, 0}));
}

// P = 3, count 6, density 0.5: C = 2, k = 1; rounds: distance 2 (bag 1), distance 1 (bag 1).
//   inputs: r0 [1, 2, 3, 4, 5, 6], r1 [6, 5, 4, 3, 2, 1], r2 [-1, 0, 0, 0, 0, 7].
//   round 0 (r sends block r+2 to r+2, receives block r from r+1):
//     r0 sends block 2 top-1 (idx 5: 6)   -> r2; keeps [1, 2, 3, 4, 5, 0]
//     r1 sends block 0 top-1 (idx 0: 6)   -> r0; keeps [0, 5, 4, 3, 2, 1]
//     r2 sends block 1, [0, 0]: nothing (zeros are never selected) -> r1
//     r0 block 0 += 6 -> [7, 2]; r1 block 1 unchanged [4, 3]; r2 block 2 += 6 -> [0, 13]
//   round 1 (r sends block r+1 to r+1, receives block r from r-1):
//     r0 sends block 1 top-1 of [3, 4] (idx 3: 4) -> r1; keeps [7, 2, 3, 0, 5, 0]
//     r1 sends block 2 top-1 of [2, 1] (idx 4: 2) -> r2; keeps [0, 5, 4, 3, 0, 1]
//     r2 sends block 0 top-1 of [-1, 0] (idx 0: -1) -> r0; keeps [0, 0, 0, 0, 0, 13]
//     r0 block 0 [7 - 1, 2] = [6, 2] -> own top-1 idx 0: 6;   w0 = [0, 2, 3, 0, 5, 0]
//     r1 block 1 [4, 3 + 4] = [4, 7] -> own top-1 idx 3: 7;   w1 = [0, 5, 4, 0, 0, 1]
//     r2 block 2 [0 + 2, 13] = [2, 13] -> own top-1 idx 5: 13; w2 = [0, 0, 0, 0, 2, 0]
//   result = [6, 0, 0, 7, 0, 13] / 3; support {0, 3, 5}: residual = w there, input elsewhere.
TEST(SparDLTest, ThreeRanksByHand) {
  const std::vector<std::vector<float>> grad = {
      {1, 2, 3, 4, 5, 6}, {6, 5, 4, 3, 2, 1}, {-1, 0, 0, 0, 0, 7}};
  std::vector<std::vector<float>> data = grad, residual(3, std::vector<float>(6, 0.0f));
  auto statuses = herd::testing::SpawnRanks(3, [&](transport::Communicator& comm) {
    SparseAllReduceOptions o;
    o.comm = &comm;
    o.data = data[comm.rank()].data();
    o.residual = residual[comm.rank()].data();
    o.count = 6;
    o.density = 0.5;
    return SparDLAllReduce(o);
  });
  ASSERT_TRUE(herd::testing::FirstError(statuses).ok()) << herd::testing::FirstError(statuses);
  const std::vector<float> want = {6.0f / 3, 0, 0, 7.0f / 3, 0, 13.0f / 3};
  for (int r = 0; r < 3; ++r) EXPECT_EQ(data[r], want) << "rank " << r;
  EXPECT_EQ(residual[0], (std::vector<float>{0, 2, 3, 0, 5, 0}));
  EXPECT_EQ(residual[1], (std::vector<float>{0, 5, 4, 0, 2, 1}));
  EXPECT_EQ(residual[2], (std::vector<float>{0, 0, 0, 0, 0, 0}));
}

// One rank: the top-k of gradient + residual, error feedback over calls.
TEST(SparDLTest, OneRankIsTopkWithErrorFeedback) {
  std::vector<float> data = {1, -4, 2, 3}, residual = {0, 0, 0, 0};
  auto run = [&] {
    auto statuses = herd::testing::SpawnRanks(1, [&](transport::Communicator& comm) {
      SparseAllReduceOptions o;
      o.comm = &comm;
      o.data = data.data();
      o.residual = residual.data();
      o.count = 4;
      o.density = 0.5;  // k = 2
      return SparDLAllReduce(o);
    });
    ASSERT_TRUE(statuses[0].ok()) << statuses[0];
  };
  run();
  EXPECT_EQ(data, (std::vector<float>{0, -4, 0, 3}));
  EXPECT_EQ(residual, (std::vector<float>{1, 0, 2, 0}));
  data = {1, 0, 1, 0};  // x = [2, 0, 3, 0]
  run();
  EXPECT_EQ(data, (std::vector<float>{2, 0, 3, 0}));
  EXPECT_EQ(residual, (std::vector<float>{0, 0, 0, 0}));
}

}  // namespace
}  // namespace herd::sparse::testing
