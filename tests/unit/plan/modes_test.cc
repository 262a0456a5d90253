// The mode registry (plan/modes.h): the table is consistent with itself (what a mode needs
// follows from where it runs, what it takes from what its plan carries), and the look-ups and
// the compressor rules answer as documented.

#include "plan/modes.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace herd::plan {
namespace {

TEST(ModeRegistry, ListsEveryModeOnceInDesignOrder) {
  EXPECT_EQ(ModeNameList(),
            "allreduce, dear, lp, sparse, topk_allgather, decentralized, decentralized_lp, clps, "
            "ps_sync, ps_async, ps_ec");
  std::set<std::string_view> names;
  for (const ModeInfo& m : Modes()) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_FALSE(m.summary.empty()) << m.name;
    EXPECT_EQ(FindMode(m.name), &m);
  }
}

TEST(ModeRegistry, WhatAModeNeedsFollowsFromWhereItRuns) {
  for (const ModeInfo& m : Modes()) {
    const bool on_workers = m.runs_on == RunsOn::kWorkers;
    EXPECT_EQ(m.needs_communicator, on_workers) << m.name;
    EXPECT_EQ(m.needs_servers, !on_workers) << m.name;
    EXPECT_EQ(m.server_engine != ServerEngine::kNone, !on_workers) << m.name;
    if (!on_workers) {
      EXPECT_EQ(ModeServedBy(m.server_engine), &m) << m.name;
    }
    EXPECT_EQ(m.compressors != Compressors::kNone, m.Takes(Param::kCompressor)) << m.name;
    // The shards serve fewer compressors than the workers implement.
    if (m.compressors != Compressors::kNone) {
      EXPECT_EQ(m.compressors == Compressors::kServers, !on_workers) << m.name;
    }
    EXPECT_EQ(m.plan_carries == PlanCarries::kPeers, m.Takes(Param::kTopology)) << m.name;
    EXPECT_EQ(m.plan_carries == PlanCarries::kTeams, m.Takes(Param::kTeams)) << m.name;
    if (m.fixed_peers) {
      EXPECT_EQ(m.plan_carries, PlanCarries::kPeers) << m.name;
    }
    // Someone holds the model: the workers, or the shards.
    EXPECT_TRUE(m.worker_state.contains(State::kParameters) ||
                m.server_state.contains(State::kParameters))
        << m.name;
    if (on_workers) {
      EXPECT_TRUE(m.server_state.empty()) << m.name;
    }
  }
  EXPECT_EQ(ModeServedBy(ServerEngine::kNone), nullptr);
}

TEST(ModeRegistry, TheParametersOfEachMode) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(ModesTaking(Param::kTopology), (V{"decentralized", "decentralized_lp"}));
  EXPECT_EQ(ModesTaking(Param::kTeams), (V{"sparse"}));
  EXPECT_EQ(ModesTaking(Param::kDensity), (V{"sparse", "topk_allgather"}));
  EXPECT_EQ(ModesTaking(Param::kBlockBytes), (V{"lp"}));
  EXPECT_EQ(ModesTaking(Param::kStaleness), (V{"ps_async"}));
  EXPECT_EQ(ModesTaking(Param::kCompressor), (V{"decentralized_lp", "clps", "ps_ec"}));
  std::set<std::string_view> names;
  for (Param p : kAllParams) names.insert(ParamName(p));
  EXPECT_EQ(names, (std::set<std::string_view>{"topology", "teams", "density", "block_bytes",
                                               "staleness", "compressor"}));
}

TEST(ModeRegistry, UnknownModesAreRefusedWithTheKnownOnes) {
  EXPECT_EQ(FindMode("gossip"), nullptr);
  auto m = LookUpMode("gossip");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("unknown mode 'gossip'"), std::string_view::npos);
  EXPECT_NE(m.status().message().find(ModeNameList()), std::string_view::npos);
  ASSERT_TRUE(LookUpMode("ps_ec").ok());
  EXPECT_EQ((*LookUpMode("ps_ec"))->server_engine, ServerEngine::kErrorCompensated);
}

TEST(ModeRegistry, CompressorsOfWorkersAndOfShards) {
  const ModeInfo& clps = *FindMode("clps");
  for (const char* ok :
       {"minmax_uint8", "sign", "fp16", "bf16", "qsgd", "qsgd:8", "topk", "topk:0.05"}) {
    EXPECT_TRUE(CheckCompressor(clps, ok).ok()) << ok;
  }
  for (const char* bad : {"qsgd:0", "qsgd:128", "qsgd:x", "topk:0", "topk:1.5", "zip", ""}) {
    EXPECT_EQ(CheckCompressor(clps, bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  const ModeInfo& ec = *FindMode("ps_ec");
  EXPECT_TRUE(CheckCompressor(ec, "minmax_uint8").ok());
  EXPECT_TRUE(CheckCompressor(ec, "sign").ok());
  const absl::Status qsgd = CheckCompressor(ec, "qsgd");
  EXPECT_EQ(qsgd.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(qsgd.message().find("not served by parameter servers"), std::string_view::npos);
  EXPECT_EQ(CheckCompressor(*FindMode("allreduce"), "sign").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ModeRegistry, StateTheCheckpointMustCarry) {
  EXPECT_TRUE(FindMode("sparse")->worker_state.contains(State::kBsagState));
  EXPECT_FALSE(FindMode("topk_allgather")->worker_state.contains(State::kBsagState));
  EXPECT_TRUE(FindMode("decentralized_lp")->worker_state.contains(State::kNeighbourReplicas));
  EXPECT_TRUE(FindMode("ps_ec")->server_state.contains(State::kErrorFeedback));
  EXPECT_TRUE(FindMode("ps_ec")->worker_state.contains(State::kErrorFeedback));
  EXPECT_TRUE(FindMode("ps_sync")->server_state.contains(State::kOptimizerSlots));
  EXPECT_FALSE(FindMode("ps_sync")->worker_state.contains(State::kParameters));
}

TEST(ModeRegistry, JoinsNamesForASentence) {
  EXPECT_EQ(JoinForSentence({}), "");
  EXPECT_EQ(JoinForSentence({"a"}), "a");
  EXPECT_EQ(JoinForSentence({"a", "b"}), "a and b");
  EXPECT_EQ(JoinForSentence({"ps_sync", "ps_async", "ps_ec"}), "ps_sync, ps_async and ps_ec");
}

}  // namespace
}  // namespace herd::plan
