// TopA over threads-as-ranks: identical results, nothing lost, each rank's residual is its input
// minus exactly its k delivered entries, and the result is the rank-order sum of the selections.

#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "tests/support/spawn.h"
#include "tests/unit/sparse/sparse_test_util.h"

namespace herd::sparse::testing {
namespace {

class TopASweep : public ::testing::TestWithParam<int> {};

TEST_P(TopASweep, Invariants) {
  const int P = GetParam();
  std::vector<size_t> counts = {0, 1, static_cast<size_t>(P) + 1, 1000, 10007, 200003};
  for (size_t count : counts) {
    for (double density : {0.001, 0.01, 0.3}) {
      for (TopkMethod topk : {TopkMethod::kExact, TopkMethod::kSampled}) {
        Case c;
        c.algo = Algo::kTopA;
        c.ranks = P;
        c.count = count;
        c.density = density;
        c.topk = topk;
        ExpectInvariants(c);
      }
    }
  }
  Case ties;
  ties.algo = Algo::kTopA;
  ties.ranks = P;
  ties.count = 5003;
  ties.density = 0.05;
  ties.inputs = Inputs::kTies;
  ExpectInvariants(ties);
}

INSTANTIATE_TEST_SUITE_P(Sparse, TopASweep, ::testing::Range(1, 9),
                         [](const auto& info) { return absl::StrFormat("P%d", info.param); });

// P = 2, k = 1 of 4: rank 0 delivers -5 at 1, rank 1 delivers 6 at 3; result [0, -5, 0, 6] / 2.
TEST(TopATest, TwoRanksByHand) {
  std::vector<std::vector<float>> data = {{1, -5, 3, 0.5f}, {2, 1, -4, 6}};
  std::vector<std::vector<float>> residual(2, std::vector<float>(4, 0.0f));
  auto statuses = herd::testing::SpawnRanks(2, [&](transport::Communicator& comm) {
    SparseAllReduceOptions o;
    o.comm = &comm;
    o.data = data[comm.rank()].data();
    o.residual = residual[comm.rank()].data();
    o.count = 4;
    o.density = 0.25;
    return TopkAllGatherAllReduce(o);
  });
  ASSERT_TRUE(herd::testing::FirstError(statuses).ok()) << herd::testing::FirstError(statuses);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(data[r], (std::vector<float>{0, -2.5f, 0, 3}));
  EXPECT_EQ(residual[0], (std::vector<float>{1, 0, 3, 0.5f}));
  EXPECT_EQ(residual[1], (std::vector<float>{2, 1, -4, 0}));
}

}  // namespace
}  // namespace herd::sparse::testing
