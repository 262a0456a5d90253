// PeersForIteration: the ring and random rules seen from one rank of a full world, their
// symmetry and regularity (what keeps the global mean), and the topology names.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "plan/topology.h"

namespace herd::plan {
namespace {

std::vector<std::vector<int>> AllPeers(Topology t, int P, uint64_t seed, int64_t it) {
  std::vector<std::vector<int>> peers(P);
  for (int r = 0; r < P; ++r) peers[r] = PeersForIteration(t, P, seed, it, r);
  return peers;
}

TEST(PeersTest, RingIsLeftAndRight) {
  EXPECT_TRUE(PeersForIteration(Topology::kRing, 1, 0, 0, 0).empty());
  EXPECT_EQ(PeersForIteration(Topology::kRing, 2, 0, 0, 0), (std::vector<int>{1}));
  EXPECT_EQ(PeersForIteration(Topology::kRing, 2, 0, 0, 1), (std::vector<int>{0}));
  EXPECT_EQ(PeersForIteration(Topology::kRing, 5, 0, 0, 0), (std::vector<int>{1, 4}));
  EXPECT_EQ(PeersForIteration(Topology::kRing, 5, 0, 9, 3), (std::vector<int>{2, 4}));
}

TEST(PeersTest, OutOfRangeRanksHaveNoPeers) {
  EXPECT_TRUE(PeersForIteration(Topology::kRing, 4, 0, 0, -1).empty());
  EXPECT_TRUE(PeersForIteration(Topology::kRandom, 4, 0, 0, 4).empty());
  EXPECT_TRUE(PeersForIteration(Topology::kRandom, 0, 0, 0, 0).empty());
}

// Symmetric, and every rank of a group has the same number of peers: a perfect pairing,
// plus one triple when P is odd.
TEST(PeersTest, RandomIsASymmetricPairingWithATripleForOddP) {
  for (int P = 2; P <= 13; ++P) {
    for (int64_t it = 0; it < 40; ++it) {
      auto peers = AllPeers(Topology::kRandom, P, 77, it);
      int in_triple = 0;
      for (int r = 0; r < P; ++r) {
        ASSERT_FALSE(peers[r].empty()) << "P=" << P << " rank " << r;
        for (int q : peers[r]) {
          ASSERT_NE(q, r);
          ASSERT_NE(std::find(peers[q].begin(), peers[q].end(), r), peers[q].end());
          ASSERT_EQ(peers[q].size(), peers[r].size());  // regular within the group
        }
        ASSERT_LE(peers[r].size(), 2u);
        in_triple += peers[r].size() == 2;
      }
      EXPECT_EQ(in_triple, P % 2 == 1 ? 3 : 0) << "P=" << P;
    }
  }
}

TEST(PeersTest, RandomChangesWithTheIterationAndTheSeedOnly) {
  const int P = 8;
  std::set<std::vector<std::vector<int>>> seen;
  for (int64_t it = 0; it < 20; ++it) seen.insert(AllPeers(Topology::kRandom, P, 5, it));
  EXPECT_GT(seen.size(), 10u);  // 105 pairings of 8 ranks: repeats are rare
  EXPECT_EQ(AllPeers(Topology::kRandom, P, 5, 3), AllPeers(Topology::kRandom, P, 5, 3));
  EXPECT_NE(AllPeers(Topology::kRandom, P, 5, 3), AllPeers(Topology::kRandom, P, 6, 3));
}

TEST(PeersTest, ParsesTopologies) {
  EXPECT_EQ(*ParseTopology("ring"), Topology::kRing);
  EXPECT_EQ(*ParseTopology("random"), Topology::kRandom);
  EXPECT_EQ(ParseTopology("star").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TopologyName(Topology::kRandom), "random");
}

}  // namespace
}  // namespace herd::plan
