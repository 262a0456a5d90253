// The replay over threads-as-ranks (loopback): no network limit, so iterations take their
// compute time; configurations parse; the tuner settles and is measured at its threshold.
#include "bench/dear/replay.h"

#include <gtest/gtest.h>

#include <thread>

#include "bench/dear/pacer.h"
#include "tests/support/spawn.h"

namespace herd::emulator {
namespace {

ModelProfile Tiny(double forward_s, double backward_s) {
  std::vector<LayerWork> layers;
  for (int i = 0; i < 12; ++i) {
    layers.push_back({"l" + std::to_string(i),
                      {{"l" + std::to_string(i) + ".w", size_t(1000 + 500 * i)},
                       {"l" + std::to_string(i) + ".b", size_t(10)}},
                      1.0 + i % 3});
  }
  return DistributeCompute("tiny", layers, forward_s, backward_s);
}

TEST(ReplayConfigTest, ParsesAndFormats) {
  auto c = ParseReplayConfig("allreduce:25M:comm");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->mode, "allreduce");
  EXPECT_EQ(c->threshold_bytes, size_t{25} << 20);
  EXPECT_FALSE(c->compute);
  EXPECT_EQ(FormatReplayConfig(*c), "allreduce:25M:comm");
  EXPECT_TRUE(ParseReplayConfig("dear:tune")->tune);
  for (const char* bad : {"", "dear", "dear:25Q", "allreduce:tune", "dear:1M:fast", ":1M"}) {
    EXPECT_EQ(ParseReplayConfig(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(PacerTest, SleepOvershootsDoNotAddUp) {
  // 400 phases of 0.25 ms: each sleep overshoots by tens of microseconds, which alone would
  // add 10-30 ms.
  Pacer pacer;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 400; ++i) {
    pacer.Spend(0.00025);
    pacer.AfterExecutorCall(std::chrono::steady_clock::now());
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(s, 0.0999);
  EXPECT_LT(s, 0.106);
  // A call that blocks moves the clock: the 20 ms stall is added, not absorbed.
  pacer.Restart();
  const auto again = std::chrono::steady_clock::now();
  pacer.Spend(0.01);
  const auto call = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  pacer.AfterExecutorCall(call);
  pacer.Spend(0.01);
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - again).count();
  EXPECT_GT(t, 0.0399);
}

TEST(ReplayTest, IterationsTakeTheirComputeTimeWithoutANetworkLimit) {
  ReplayOptions o;
  o.model = Tiny(0.02, 0.04);
  o.configs = {*ParseReplayConfig("allreduce:4K"), *ParseReplayConfig("dear:4K"),
               *ParseReplayConfig("dear:4K:comm"), *ParseReplayConfig("dear:tune")};
  o.rounds = 2;
  o.iters = 3;
  o.tune_trials = 4;
  o.iterations_per_trial = 1;
  o.tune_min_bytes = 1024;
  o.tune_max_bytes = 1 << 20;
  o.timeout = std::chrono::seconds(30);
  std::vector<std::vector<ReplayResult>> results(3);
  auto statuses = testing::SpawnRanks(3, [&](transport::Communicator& comm) -> absl::Status {
    auto r = RunReplay(comm, o);
    if (!r.ok()) return r.status();
    results[comm.rank()] = *r;
    return absl::OkStatus();
  });
  ASSERT_TRUE(testing::FirstError(statuses).ok()) << testing::FirstError(statuses);
  const std::vector<ReplayResult>& r = results[0];
  ASSERT_EQ(r.size(), 4u);
  for (int i : {0, 1, 3}) {
    SCOPED_TRACE(r[i].config);
    // 60 ms of compute, which no iteration can beat; loopback adds little, but the upper
    // bound leaves room for a loaded machine.
    EXPECT_GT(r[i].iter_s, 0.059);
    EXPECT_LT(r[i].iter_s, 0.2);
    EXPECT_GT(r[i].forward_s, 0.0195);
  }
  // Communication only: none of the 60 ms of compute is spent (loopback itself takes a few ms,
  // more on a loaded machine).
  EXPECT_LT(r[2].iter_s, 0.059) << "communication only: no compute";
  EXPECT_EQ(r[3].config, "dear:tune");
  EXPECT_GE(r[3].tuner_trials, 1);
  EXPECT_LE(r[3].tuner_trials, 4);
  EXPECT_GE(r[3].threshold, 1024u);
  EXPECT_LE(r[3].threshold, 1u << 20);
  EXPECT_EQ(r[0].round_iter_s.size(), 2u);
  auto back = ReplayResultFromJson(*json::ParseObject(ToJson(r[3]).Write()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->config, "dear:tune");
  EXPECT_EQ(back->threshold, r[3].threshold);
  EXPECT_EQ(back->tuner_trials, r[3].tuner_trials);
  ASSERT_EQ(back->round_iter_s.size(), 2u);
  EXPECT_NEAR(back->round_iter_s[1], r[3].round_iter_s[1], 1e-6);
  // Every rank reports the same agreed numbers (the maximum over ranks).
  EXPECT_EQ(results[1][0].iter_s, r[0].iter_s);
  EXPECT_EQ(results[2][3].threshold, r[3].threshold);
}

}  // namespace
}  // namespace herd::emulator
