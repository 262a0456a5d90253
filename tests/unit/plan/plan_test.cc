// The pure plan rules: topologies, teams and the shard map (plan/), and the generator behind
// the random ones (common/splitmix.h).

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/splitmix.h"
#include "plan/shard_map.h"
#include "plan/topology.h"

namespace herd::plan {
namespace {

std::vector<int> Iota(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

// Every edge appears in both directions; no rank is its own peer; absent ranks have no peers
// and are no one's peer.
void ExpectSymmetric(const std::vector<std::vector<int>>& peers, const std::vector<int>& ranks) {
  const std::set<int> present(ranks.begin(), ranks.end());
  for (int r = 0; r < static_cast<int>(peers.size()); ++r) {
    if (!present.contains(r)) {
      EXPECT_TRUE(peers[static_cast<size_t>(r)].empty()) << "rank " << r;
    }
    for (int q : peers[static_cast<size_t>(r)]) {
      EXPECT_NE(q, r);
      EXPECT_TRUE(present.contains(q)) << r << " -> absent " << q;
      const auto& back = peers[static_cast<size_t>(q)];
      EXPECT_NE(std::find(back.begin(), back.end(), r), back.end()) << r << " -> " << q;
    }
  }
}

TEST(SplitMix64, KnownSequence) {
  // Reference values of splitmix64 seeded with 0 (Vigna's reference implementation).
  SplitMix64 g(0);
  EXPECT_EQ(g.Next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(g.Next(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(g.Next(), 0x06C45D188009454Full);
}

TEST(SplitMix64, BelowIsInRangeAndCoversIt) {
  SplitMix64 g(42);
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = g.Below(7);
    ASSERT_LT(x, 7u);
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_EQ(g.Below(1), 0u);
}

TEST(RingPeers, LeftAndRightForEveryCount) {
  for (int n = 1; n <= 9; ++n) {
    const auto peers = RingPeers(Iota(n), n);
    ExpectSymmetric(peers, Iota(n));
    for (int r = 0; r < n; ++r) {
      const auto& p = peers[static_cast<size_t>(r)];
      std::set<int> want;
      if (n >= 2) {
        want = {(r + n - 1) % n, (r + 1) % n};
      }
      EXPECT_EQ(std::set<int>(p.begin(), p.end()), want) << "n=" << n << " r=" << r;
    }
  }
}

TEST(RingPeers, SkipsAbsentRanks) {
  const std::vector<int> ranks = {0, 2, 3, 5};
  const auto peers = RingPeers(ranks, 6);
  ExpectSymmetric(peers, ranks);
  EXPECT_EQ(peers[0], (std::vector<int>{2, 5}));
  EXPECT_EQ(peers[2], (std::vector<int>{0, 3}));
  EXPECT_TRUE(peers[1].empty());
  EXPECT_TRUE(peers[4].empty());
}

TEST(RandomPeers, PerfectPairingOrOneTriple) {
  for (int n = 1; n <= 12; ++n) {
    for (int64_t it = 0; it < 20; ++it) {
      const auto peers = RandomPeers(Iota(n), n, 7, it);
      ExpectSymmetric(peers, Iota(n));
      int degree1 = 0, degree2 = 0;
      for (const auto& p : peers) {
        if (p.size() == 1) ++degree1;
        if (p.size() == 2) ++degree2;
        EXPECT_LE(p.size(), 2u);
        if (n >= 2) {
          EXPECT_GE(p.size(), 1u) << "every rank averages with someone";
        }
      }
      if (n >= 2) {
        EXPECT_EQ(degree2, n % 2 == 1 ? 3 : 0) << "n=" << n;
        EXPECT_EQ(degree1, n % 2 == 1 ? n - 3 : n) << "n=" << n;
      }
    }
  }
}

TEST(RandomPeers, IdenticalWhenRecomputedAndChangesAcrossIterations) {
  const auto ranks = Iota(8);
  std::set<std::vector<std::vector<int>>> distinct;
  for (int64_t it = 0; it < 30; ++it) {
    const auto a = RandomPeers(ranks, 8, 7, it);
    EXPECT_EQ(a, RandomPeers(ranks, 8, 7, it)) << "iteration " << it;
    distinct.insert(a);
  }
  // 105 pairings of 8 ranks: 30 draws repeating into fewer than 15 would mean a broken stream.
  EXPECT_GE(distinct.size(), 15u);
  // Consecutive iterations differ (for these seeds and iterations: checked, not assumed).
  int changes = 0;
  for (int64_t it = 0; it < 29; ++it)
    changes += RandomPeers(ranks, 8, 7, it) != RandomPeers(ranks, 8, 7, it + 1);
  EXPECT_GE(changes, 25);
  // Another seed gives another sequence.
  int differ = 0;
  for (int64_t it = 0; it < 10; ++it)
    differ += RandomPeers(ranks, 8, 7, it) != RandomPeers(ranks, 8, 8, it);
  EXPECT_GE(differ, 7);
}

TEST(RandomPeers, PinnedValues) {
  // Pinned so an accidental change of the documented algorithm (docs/scheduler.md) fails here:
  // workers recompute these plans and must agree with the scheduler.
  const auto p = RandomPeers(Iota(6), 6, 7, 0);
  std::vector<std::vector<int>> again = RandomPeers(Iota(6), 6, 7, 0);
  EXPECT_EQ(p, again);
  SplitMix64 g(IterationSeed(7, 0));
  std::vector<int> order = Iota(6);
  for (size_t i = 5; i > 0; --i) std::swap(order[i], order[static_cast<size_t>(g.Below(i + 1))]);
  for (size_t i = 0; i < 6; i += 2) {
    EXPECT_EQ(p[static_cast<size_t>(order[i])], std::vector<int>{order[i + 1]});
  }
}

TEST(Teams, PartitionTheRanksEqually) {
  for (int n = 1; n <= 12; ++n) {
    for (int req = 1; req <= n + 2; ++req) {
      const int t = EffectiveTeams(n, req);
      ASSERT_GE(t, 1);
      ASSERT_LE(t, std::min(n, req));
      ASSERT_EQ(n % t, 0);
      const auto teams = Teams(Iota(n), t);
      ASSERT_EQ(static_cast<int>(teams.size()), t);
      std::multiset<int> all;
      for (const auto& team : teams) {
        EXPECT_EQ(static_cast<int>(team.size()), n / t);
        all.insert(team.begin(), team.end());
      }
      const auto want = Iota(n);
      EXPECT_EQ(all, std::multiset<int>(want.begin(), want.end()));
      if (n % req == 0) {
        EXPECT_EQ(t, req);
      }
    }
  }
  EXPECT_EQ(EffectiveTeams(5, 4), 1);
  EXPECT_EQ(EffectiveTeams(6, 4), 3);
  EXPECT_EQ(EffectiveTeams(0, 2), 0);
}

TEST(ShardMap, CoversEveryChunkExactlyOnceAndBalances) {
  const std::vector<TensorLayout> tensors = {{1000, 4}, {1, 4}, {30000, 4}, {77, 8}, {4096, 2}};
  for (int servers : {1, 2, 3, 5}) {
    for (int64_t chunk_bytes : {4, 100, 4096, 1 << 20}) {
      const auto map = ShardMap(tensors, chunk_bytes, servers);
      std::map<int, int64_t> covered;  // tensor -> next expected offset
      std::vector<int64_t> load(static_cast<size_t>(servers), 0);
      int last_tensor = -1, last_chunk = -1;
      for (const auto& c : map) {
        ASSERT_GE(c.server, 0);
        ASSERT_LT(c.server, servers);
        const auto& t = tensors[static_cast<size_t>(c.tensor)];
        EXPECT_EQ(c.offset, covered[c.tensor]) << "chunks are contiguous, in order";
        EXPECT_GT(c.count, 0);
        EXPECT_LE(c.count * t.element_bytes, std::max(chunk_bytes, t.element_bytes));
        covered[c.tensor] = c.offset + c.count;
        EXPECT_EQ(c.chunk, c.tensor == last_tensor ? last_chunk + 1 : 0);
        last_tensor = c.tensor;
        last_chunk = c.chunk;
        load[static_cast<size_t>(c.server)] += c.count * t.element_bytes;
      }
      for (size_t t = 0; t < tensors.size(); ++t) {
        EXPECT_EQ(covered[static_cast<int>(t)], tensors[t].elements) << "tensor " << t;
      }
      // Greedy least-loaded: no shard exceeds another by more than one chunk.
      const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
      EXPECT_LE(*hi - *lo, std::max<int64_t>(chunk_bytes, 8)) << servers << " " << chunk_bytes;
    }
  }
  EXPECT_TRUE(ShardMap(tensors, 4096, 0).empty());
}

}  // namespace
}  // namespace herd::plan
