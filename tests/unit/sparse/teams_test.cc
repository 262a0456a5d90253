// SparDL with teams > 1 (Spar-All-Gather). What still holds, and is checked here for every
// (P, teams, SAG) below, counts {0, 1, P-1, P+1, 1000, 10007, 100003}, two densities and
// three consecutive calls:
//  (1) bitwise identical results; (3) nothing lost; (4) outside the support every residual is
//      its rank's input;
//  (2) every block of the result holds at most k non-zeros; blocks longer than k exactly k with
//      R-SAG (a union of two k-sets has at least k entries), possibly fewer with B-SAG (the
//      gathered sum of the k' selections can hold fewer than k);
//  (5) weakened: a supported index carries no residual on at least one of the teams' ranks
//      holding its block (the one whose selection survived every SAG step); the others may keep
//      their own unselected value there, or their share of what a SAG step discarded.
// And the B-SAG controller on its own.

#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "algorithms/sparse/spar_all_gather.h"
#include "tests/unit/sparse/sparse_test_util.h"

namespace herd::sparse::testing {
namespace {

using TeamsParam = std::tuple<int, int, SagAlgorithm>;  // ranks, teams, SAG

class TeamsSweep : public ::testing::TestWithParam<TeamsParam> {};

TEST_P(TeamsSweep, Invariants) {
  const auto [P, T, sag] = GetParam();
  std::vector<size_t> counts = {0, 1, static_cast<size_t>(P) + 1, 1000, 10007, 100003};
  if (P > 2) counts.push_back(static_cast<size_t>(P) - 1);
  for (size_t count : counts) {
    for (double density : {0.01, 0.3}) {
      Case c;
      c.ranks = P;
      c.teams = T;
      c.sag = sag;
      c.count = count;
      c.density = density;
      ExpectInvariants(c);
    }
  }
}

TEST_P(TeamsSweep, TiedAndSampled) {
  const auto [P, T, sag] = GetParam();
  Case c;
  c.ranks = P;
  c.teams = T;
  c.sag = sag;
  c.count = 40009;
  c.density = 0.02;
  c.inputs = Inputs::kTies;
  ExpectInvariants(c);
  c.inputs = Inputs::kRandom;
  c.topk = TopkMethod::kSampled;
  ExpectInvariants(c);
}

INSTANTIATE_TEST_SUITE_P(
    Sparse, TeamsSweep,
    ::testing::Values(
        TeamsParam{2, 2, SagAlgorithm::kRecursive}, TeamsParam{4, 2, SagAlgorithm::kRecursive},
        TeamsParam{4, 4, SagAlgorithm::kRecursive}, TeamsParam{6, 2, SagAlgorithm::kRecursive},
        TeamsParam{8, 2, SagAlgorithm::kRecursive}, TeamsParam{8, 4, SagAlgorithm::kRecursive},
        TeamsParam{8, 8, SagAlgorithm::kRecursive}, TeamsParam{4, 2, SagAlgorithm::kBruck},
        TeamsParam{4, 4, SagAlgorithm::kBruck}, TeamsParam{3, 3, SagAlgorithm::kBruck},
        TeamsParam{5, 5, SagAlgorithm::kBruck}, TeamsParam{6, 3, SagAlgorithm::kBruck},
        TeamsParam{6, 6, SagAlgorithm::kAuto}, TeamsParam{8, 4, SagAlgorithm::kBruck}),
    [](const auto& info) {
      return absl::StrFormat("P%d_T%d_%s", std::get<0>(info.param), std::get<1>(info.param),
                             SagAlgorithmName(std::get<2>(info.param)));
    });

TEST(BsagControllerTest, StartsAtOneOverTeams) {
  BsagState s;
  EXPECT_EQ(BsagKeep(s, 1000, 4), 250u);
  EXPECT_EQ(BsagKeep(s, 1, 4), 1u);  // never below one entry
}

TEST(BsagControllerTest, StepDoublesWhileTheDirectionHoldsAndHalvesWhenItTurns) {
  BsagState s;
  const int T = 4;               // ratio in [0.25, 1]
  BsagUpdate(&s, 500, 1000, T);  // few gathered: up by the first step 0.25
  EXPECT_DOUBLE_EQ(s.ratio, 0.5);
  EXPECT_DOUBLE_EQ(s.step, 0.25);
  BsagUpdate(&s, 900, 1000, T);  // still up: the step doubles
  EXPECT_DOUBLE_EQ(s.step, 0.5);
  EXPECT_DOUBLE_EQ(s.ratio, 1.0);
  BsagUpdate(&s, 1500, 1000, T);  // too many: turn down, the step halves
  EXPECT_DOUBLE_EQ(s.step, 0.25);
  EXPECT_DOUBLE_EQ(s.ratio, 0.75);
  EXPECT_EQ(s.direction, -1);
  EXPECT_EQ(s.last_gathered, 1500u);
  EXPECT_EQ(BsagKeep(s, 1000, T), 750u);
  BsagUpdate(&s, 1000, 1000, T);  // exactly k is not too many: up again, halved
  EXPECT_DOUBLE_EQ(s.step, 0.125);
  EXPECT_DOUBLE_EQ(s.ratio, 0.875);
}

TEST(BsagControllerTest, StaysWithinBounds) {
  BsagState s;
  const int T = 3;
  for (int i = 0; i < 50; ++i) BsagUpdate(&s, 0, 100, T);
  EXPECT_DOUBLE_EQ(s.ratio, 1.0);
  EXPECT_LE(s.step, 1.0 - 1.0 / T);
  for (int i = 0; i < 50; ++i) BsagUpdate(&s, 1000, 100, T);
  EXPECT_DOUBLE_EQ(s.ratio, 1.0 / T);
  // Alternating verdicts shrink the step to its floor, never to zero.
  for (int i = 0; i < 50; ++i) BsagUpdate(&s, i % 2 ? 1000 : 0, 100, T);
  EXPECT_GT(s.step, 0.0);
  EXPECT_GE(s.step, (1.0 - 1.0 / T) / 64 - 1e-12);
}

// Over calls on independent random gradients (little index overlap across teams) the
// controller settles near ratio 1/T, and the gathered sum stays near k.
TEST(BsagControllerTest, SettlesOverCalls) {
  Case c;
  c.ranks = 6;
  c.teams = 3;
  c.sag = SagAlgorithm::kBruck;
  c.count = 60000;
  c.density = 0.01;
  c.calls = 8;
  auto records = RunCalls(c);
  ASSERT_TRUE(records.ok()) << records.status();
  // The last call's result: each block holds at most k, and not far below it.
  const CallRecord& last = records->back();
  const size_t k = BlockK(c), block = BlockElements(c);
  for (size_t begin = 0; begin < c.count; begin += block) {
    size_t nonzeros = 0;
    for (size_t i = begin; i < std::min(c.count, begin + block); ++i) {
      nonzeros += last.result[0][i] != 0;
    }
    EXPECT_LE(nonzeros, k);
    EXPECT_GE(nonzeros, k / 2) << "block at " << begin;
  }
}

}  // namespace
}  // namespace herd::sparse::testing
