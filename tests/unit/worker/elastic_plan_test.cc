// The worker's pure elastic rules (worker/elastic_plan.h): the plan of the live workers
// renumbered to positions is the plan the rules give for that many workers (so every executor
// runs at P-1 unchanged), and the global batch is split so the live workers cover all of it.

#include "worker/elastic_plan.h"

#include <gtest/gtest.h>

#include <vector>

#include "plan/topology.h"

namespace herd::worker {
namespace {

std::vector<int> Ints(const google::protobuf::RepeatedField<int32_t>& r) {
  return std::vector<int>(r.begin(), r.end());
}

// The scheduler's plan over `live` of `world` (plan_builder.cc's rules).
herd::v1::Plan PlanOver(const std::vector<int>& live, int world, plan::Topology topology,
                        int64_t iteration, int teams) {
  herd::v1::Plan p;
  p.set_world_size(world);
  p.set_seed(11);
  p.set_iteration(iteration);
  for (int r : live) p.add_ranks(r);
  const auto ring = plan::RingOrder(live);
  for (int r : ring) p.add_ring(r);
  for (const auto& peers : plan::Peers(topology, live, world, 11, iteration)) {
    auto* l = p.add_peers();
    for (int q : peers) l->add_ranks(q);
  }
  for (const auto& team : plan::Teams(ring, plan::EffectiveTeams(ring.size(), teams))) {
    auto* t = p.add_teams();
    for (int r : team) t->add_ranks(r);
  }
  for (int r = 0; r < world; ++r) {
    auto* m = p.add_workers();
    m->set_rank(r);
    m->set_name("w" + std::to_string(r));
  }
  return p;
}

TEST(CompactPlan, AFullPlanIsUnchanged) {
  const auto full = PlanOver({0, 1, 2, 3}, 4, plan::Topology::kRandom, 3, 2);
  EXPECT_EQ(CompactPlan(full).SerializeAsString(), full.SerializeAsString());
  EXPECT_EQ(MemberIndex(full, 2), 2);
}

TEST(CompactPlan, TheLiveWorkersRenumberedFollowTheRulesForTheirCount) {
  for (auto topology : {plan::Topology::kRing, plan::Topology::kRandom}) {
    for (int64_t it = 0; it < 20; ++it) {
      const std::vector<int> live = {0, 2, 3, 5, 6};
      const auto compact = CompactPlan(PlanOver(live, 7, topology, it, 1));
      const auto expected = PlanOver({0, 1, 2, 3, 4}, 5, topology, it, 1);
      EXPECT_EQ(compact.world_size(), 5);
      EXPECT_EQ(Ints(compact.ranks()), Ints(expected.ranks()));
      EXPECT_EQ(Ints(compact.ring()), Ints(expected.ring()));
      ASSERT_EQ(compact.peers_size(), 5);
      for (int r = 0; r < 5; ++r) {
        EXPECT_EQ(Ints(compact.peers(r).ranks()), Ints(expected.peers(r).ranks()))
            << "iteration " << it << " rank " << r;
        // What the decentralized executors compute locally (PlanPeers) agrees.
        EXPECT_EQ(Ints(compact.peers(r).ranks()), plan::PeersForIteration(topology, 5, 11, it, r));
      }
      ASSERT_EQ(compact.workers_size(), 5);
      EXPECT_EQ(compact.workers(1).name(), "w2");
      EXPECT_EQ(compact.workers(1).rank(), 1);
    }
  }
}

TEST(CompactPlan, TeamsAreRenumbered) {
  // 6 live of 8 in 3 teams of two consecutive ranks.
  const auto compact = CompactPlan(PlanOver({1, 2, 4, 5, 6, 7}, 8, plan::Topology::kRing, 0, 3));
  ASSERT_EQ(compact.teams_size(), 3);
  EXPECT_EQ(Ints(compact.teams(0).ranks()), (std::vector<int>{0, 1}));
  EXPECT_EQ(Ints(compact.teams(2).ranks()), (std::vector<int>{4, 5}));
  EXPECT_EQ(MemberIndex(PlanOver({1, 2, 4}, 8, plan::Topology::kRing, 0, 1), 4), 2);
  EXPECT_EQ(MemberIndex(PlanOver({1, 2, 4}, 8, plan::Topology::kRing, 0, 1), 3), -1);
}

TEST(SliceOfGlobalBatch, TheLiveWorkersCoverTheGlobalBatchOnceAndEvenly) {
  for (int64_t global : {1, 7, 128, 256, 1000}) {
    for (int members = 1; members <= 9; ++members) {
      int64_t next = 0;
      for (int j = 0; j < members; ++j) {
        const BatchSlice s = SliceOfGlobalBatch(global, j, members);
        EXPECT_EQ(s.first, next) << global << " " << members << " " << j;
        EXPECT_GE(s.count, global / members);
        EXPECT_LE(s.count, global / members + 1);
        next = s.first + s.count;
      }
      EXPECT_EQ(next, global);
    }
  }
  EXPECT_EQ(SliceOfGlobalBatch(128, 3, 3).count, 0) << "outside the members";
}

}  // namespace
}  // namespace herd::worker
