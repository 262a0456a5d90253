// The Spar-Reduce-Scatter schedule, simulated for every P up to 130: which rank's data each copy
// of a block carries, so that the claims of schedule.h are checked, not assumed: a block is
// sent once by each rank (never its own), nothing arrives into a block after it was sent or
// while it is being sent, and at the end rank r holds block r with every rank's contribution.

#include <bitset>
#include <vector>

#include <gtest/gtest.h>

#include "algorithms/sparse/schedule.h"

namespace herd::sparse {
namespace {

constexpr int kMaxRanks = 130;
using Ranks = std::bitset<kMaxRanks>;

TEST(SrsScheduleTest, EveryBlockReducedOnItsOwner) {
  for (int P = 1; P <= kMaxRanks; ++P) {
    SCOPED_TRACE(P);
    const std::vector<SrsRound> rounds = SrsSchedule(P);
    ASSERT_EQ(static_cast<int>(rounds.size()), CeilLog2(P));
    // carries[r][b]: the ranks whose contribution rank r's copy of block b holds.
    std::vector<std::vector<Ranks>> carries(P, std::vector<Ranks>(P));
    std::vector<std::vector<bool>> sent(P, std::vector<bool>(P, false));
    for (int r = 0; r < P; ++r) {
      for (int b = 0; b < P; ++b) carries[r][b].set(r);
    }
    int transfers = 0;
    for (const SrsRound& round : rounds) {
      ASSERT_EQ(round.first_transfer, transfers);
      ASSERT_GE(round.bag, 1);
      ASSERT_LE(round.bag, round.distance);
      transfers += round.bag;
      // All sends of the round are taken from the state before its receives.
      std::vector<std::vector<Ranks>> before = carries;
      std::vector<std::vector<bool>> sending(P, std::vector<bool>(P, false));
      for (int r = 0; r < P; ++r) {
        for (int j = 0; j < round.bag; ++j) {
          const int b = (r + round.distance + j) % P;
          ASSERT_NE(b, r) << "rank " << r << " sends its own block";
          ASSERT_FALSE(sent[r][b]) << "rank " << r << " sends block " << b << " twice";
          sent[r][b] = sending[r][b] = true;
        }
      }
      for (int r = 0; r < P; ++r) {
        const int from = ((r - round.distance) % P + P) % P;
        for (int j = 0; j < round.bag; ++j) {
          const int b = (r + j) % P;
          // What `from` sends as its j-th block must be what r expects as its j-th.
          ASSERT_EQ((from + round.distance + j) % P, b);
          ASSERT_FALSE(sent[r][b])
              << "rank " << r << " receives block " << b << " after (or while) sending it";
          carries[r][b] |= before[from][b];
        }
      }
      for (int r = 0; r < P; ++r) {
        for (int b = 0; b < P; ++b) {
          if (sending[r][b]) carries[r][b].reset();  // moved away
        }
      }
    }
    EXPECT_EQ(transfers, P - 1);
    for (int r = 0; r < P; ++r) {
      EXPECT_EQ(carries[r][r].count(), static_cast<size_t>(P)) << "rank " << r;
      for (int b = 0; b < P; ++b) EXPECT_EQ(sent[r][b], b != r) << "rank " << r << " block " << b;
    }
  }
}

TEST(SrsScheduleTest, RoundsOfSix) {
  // P = 6, R = 3: distances 4, 2, 1 with bags 2, 2, 1 (the example of the paper's figure).
  const std::vector<SrsRound> rounds = SrsSchedule(6);
  ASSERT_EQ(rounds.size(), 3u);
  EXPECT_EQ(rounds[0].distance, 4);
  EXPECT_EQ(rounds[0].bag, 2);
  EXPECT_EQ(rounds[1].distance, 2);
  EXPECT_EQ(rounds[1].bag, 2);
  EXPECT_EQ(rounds[2].distance, 1);
  EXPECT_EQ(rounds[2].bag, 1);
  EXPECT_TRUE(SrsSchedule(1).empty());
}

TEST(GroupTest, RanksWrap) {
  const Group across{2, 3, 4, 1};  // position 2 of four teams of three
  EXPECT_EQ(across.Rank(0), 2);
  EXPECT_EQ(across.Rank(3), 11);
  EXPECT_EQ(across.Rank(-1), 11);
  EXPECT_EQ(across.Rank(5), 5);
  EXPECT_TRUE(IsPowerOfTwo(8));
  EXPECT_FALSE(IsPowerOfTwo(6));
  EXPECT_EQ(CeilLog2(1), 0);
  EXPECT_EQ(CeilLog2(5), 3);
}

}  // namespace
}  // namespace herd::sparse
