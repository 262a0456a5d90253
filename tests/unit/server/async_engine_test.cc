// ps_async: pushes applied at once, the staleness bound with a slow worker, dead workers
// leaving the bound, clocks refusing duplicates.

#include <gtest/gtest.h>

#include <thread>

#include "engine_test_util.h"

namespace herd::server {
namespace {

using testing::Bytes;
using testing::Floats;
using testing::kA;
using testing::Later;
using testing::Soon;

std::unique_ptr<Engine> AsyncJob(int workers, int64_t staleness) {
  auto config = testing::SmallJob(Mode::kAsync, workers);
  config.staleness = staleness;
  auto e = Engine::Create(config, nullptr);
  EXPECT_TRUE(*e->Init("j", kA, Bytes({1, 2, 3, 4})));
  return e;
}

absl::Status PushOf(Engine& e, int worker, int64_t clock, Deadline deadline = Later()) {
  const std::string data = Bytes({2, 2, 2, 2});  // one push moves every value by -1 (lr 0.5)
  return e.Push(PushArgs{"j", worker, kA, clock, data, ""}, deadline);
}

int64_t Version(Engine& e) { return e.Pull("j", 0, kA, 0, Later())->version; }

TEST(AsyncEngineTest, EveryPushIsAppliedAtOnce) {
  auto e = AsyncJob(2, ShardConfig::kInfiniteStaleness);
  for (int clock = 0; clock < 3; ++clock) ASSERT_TRUE(PushOf(*e, 0, clock).ok());
  auto p = e->Pull("j", 1, kA, 0, Later());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->version, 3);
  EXPECT_EQ(Floats(p->data), (std::vector<float>{-2, -1, 0, 1}));
}

TEST(AsyncEngineTest, FastWorkerWaitsForSlowOneBeyondStaleness) {
  auto e = AsyncJob(2, /*staleness=*/1);
  ASSERT_TRUE(PushOf(*e, 0, 0).ok());
  ASSERT_TRUE(PushOf(*e, 0, 1).ok());  // 1 ahead of worker 1 (clock 0): allowed
  auto st = PushOf(*e, 0, 2, Soon());  // 2 ahead: must wait, and the wait runs out
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_NE(st.message().find("waited for worker 1 (clock 0)"), absl::string_view::npos) << st;
  EXPECT_EQ(Version(*e), 2);  // the refused push changed nothing

  absl::Status fast;
  std::thread t([&] { fast = PushOf(*e, 0, 2); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(Version(*e), 2);           // still waiting
  ASSERT_TRUE(PushOf(*e, 1, 0).ok());  // the slow worker moves: the gap closes
  t.join();
  ASSERT_TRUE(fast.ok()) << fast;
  EXPECT_EQ(Version(*e), 4);
}

TEST(AsyncEngineTest, ZeroStalenessIsLockStep) {
  auto e = AsyncJob(2, 0);
  ASSERT_TRUE(PushOf(*e, 0, 0).ok());
  EXPECT_EQ(PushOf(*e, 0, 1, Soon()).code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(PushOf(*e, 1, 0).ok());
  ASSERT_TRUE(PushOf(*e, 0, 1, Soon()).ok());
}

TEST(AsyncEngineTest, DeadWorkerLeavesTheBound) {
  auto e = AsyncJob(2, 0);
  ASSERT_TRUE(PushOf(*e, 0, 0).ok());
  absl::Status blocked;
  std::thread t([&] { blocked = PushOf(*e, 0, 1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  e->SetLiveWorkers({0});  // worker 1 died: nobody to wait for
  t.join();
  EXPECT_TRUE(blocked.ok()) << blocked;
  EXPECT_EQ(Version(*e), 2);
}

// A worker restarted into an elastic job takes its slot back with a new executor, whose clock
// starts at 0: the shard counts its pushes from the slowest live peer's clock, refuses repeats
// and gaps from there as before, and the others wait for it again within the bound.
TEST(AsyncEngineTest, AWorkerBackInItsSlotGoesOnAtTheSlowestLivePeersClock) {
  auto e = AsyncJob(3, /*staleness=*/1);
  ASSERT_TRUE(PushOf(*e, 1, 0).ok());  // worker 1 pushes once, then dies
  e->SetLiveWorkers({0, 2});
  for (int clock = 0; clock < 4; ++clock) {
    ASSERT_TRUE(PushOf(*e, 0, clock).ok());
    ASSERT_TRUE(PushOf(*e, 2, clock).ok());
  }
  ASSERT_TRUE(PushOf(*e, 0, 4).ok());  // worker 0 at clock 5, worker 2 at 4
  e->SetLiveWorkers({0, 1, 2});        // back: its old clock (1) would hold the others
  EXPECT_EQ(PushOf(*e, 0, 5, Soon()).code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(PushOf(*e, 1, 0).ok());  // its first push is clock 4, worker 2's
  EXPECT_EQ(PushOf(*e, 1, 0).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(PushOf(*e, 1, 2).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(PushOf(*e, 0, 5).ok());  // within 1 of the slowest (4) again
  ASSERT_TRUE(PushOf(*e, 1, 1).ok());
  EXPECT_EQ(Version(*e), 13);
}

// A push that says its iteration (PushChunk.iteration), as workers' pushes do.
absl::Status PushAt(Engine& e, int worker, int64_t clock, int64_t iteration,
                    Deadline deadline = Later()) {
  const std::string data = Bytes({2, 2, 2, 2});
  PushArgs args{"j", worker, kA, clock, data, ""};
  args.iteration = iteration;
  return e.Push(args, deadline);
}

// A worker back in its slot joins after the horizon its peers were granted, so at a later
// iteration than theirs. It goes on at the clock of its iteration (the peers' clocks run one
// per iteration): had it gone on at the slowest peer's clock, it would end that far behind, and
// after its last push the peers' last iterations would wait on it for good.
TEST(AsyncEngineTest, AWorkerBackInItsSlotGoesOnAtTheClockOfItsIteration) {
  // A job of 12 iterations (0 to 11), staleness 1.
  auto e = AsyncJob(3, /*staleness=*/1);
  ASSERT_TRUE(PushAt(*e, 1, 0, 0).ok());  // worker 1 pushes once, then dies
  e->SetLiveWorkers({0, 2});
  for (int it = 0; it < 4; ++it) {
    ASSERT_TRUE(PushAt(*e, 0, it, it).ok());
    ASSERT_TRUE(PushAt(*e, 2, it, it).ok());
  }
  e->SetLiveWorkers({0, 1, 2});  // back, at iteration 10: its new executor counts from 0
  // Its first push is clock 10, taken at once though beyond the bound (its gradient is of the
  // parameters it has just pulled), so that the shard's other keys hear it too.
  ASSERT_TRUE(PushAt(*e, 1, 0, 10, Soon()).ok());
  EXPECT_EQ(PushAt(*e, 1, 0, 10).code(), absl::StatusCode::kAlreadyExists);
  // Its last push (iteration 11) waits for the peers to come within the bound, as anyone
  // ahead does; the peers, the slowest, wait for no one through to their last iteration.
  absl::Status last;
  std::thread t([&] { last = PushAt(*e, 1, 1, 11); });
  absl::Status peers;
  for (int it = 4; it < 12 && peers.ok(); ++it) {
    peers = PushAt(*e, 0, it, it, Soon());
    if (peers.ok()) peers = PushAt(*e, 2, it, it, Soon());
  }
  t.join();
  ASSERT_TRUE(peers.ok()) << peers;
  ASSERT_TRUE(last.ok()) << last;
  EXPECT_EQ(Version(*e), 1 + 12 + 12 + 2);
}

TEST(AsyncEngineTest, AnIterationOutOfRangeIsRefusedAndChangesNothing) {
  auto e = AsyncJob(2, ShardConfig::kInfiniteStaleness);
  ASSERT_TRUE(PushAt(*e, 0, 0, 0).ok());
  for (int64_t bad : {int64_t{-1}, int64_t{-5}, int64_t{1} << 41, INT64_MAX}) {
    auto st = PushAt(*e, 0, 1, bad);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << st;
    EXPECT_NE(st.message().find("iterations are 0 to"), absl::string_view::npos) << st;
  }
  EXPECT_EQ(Version(*e), 1);
  ASSERT_TRUE(PushAt(*e, 0, 1, 1).ok());  // its clock is where it was
}

TEST(AsyncEngineTest, ClocksRefuseRepeatsAndGaps) {
  auto e = AsyncJob(2, ShardConfig::kInfiniteStaleness);
  ASSERT_TRUE(PushOf(*e, 0, 0).ok());
  EXPECT_EQ(PushOf(*e, 0, 0).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(PushOf(*e, 0, 5).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Version(*e), 1);
}

// With s = 0 a read after a push sees every live worker's push of the same clock (the
// synchronous case); with s = 1 one clock of lag is allowed; with no bound reads never wait.
TEST(AsyncEngineTest, ReadsAfterAPushWaitForWhatTheBoundPromises) {
  auto e = AsyncJob(2, /*staleness=*/0);
  ASSERT_TRUE(PushOf(*e, 0, 0).ok());
  auto st = e->WaitReadable(kA, 0, Soon());
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_NE(st.message().find("waited for worker 1 (0 pushes) to push clock 0"),
            absl::string_view::npos)
      << st;
  absl::Status read;
  std::thread t([&] { read = e->WaitReadable(kA, 0, Later()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(PushOf(*e, 1, 0).ok());  // the other worker's clock 0 arrives: the read may go
  t.join();
  EXPECT_TRUE(read.ok()) << read;
  EXPECT_EQ(Version(*e), 2);  // what it reads holds both updates

  auto lagging = AsyncJob(2, /*staleness=*/1);
  ASSERT_TRUE(PushOf(*lagging, 0, 0).ok());
  EXPECT_TRUE(lagging->WaitReadable(kA, 0, Soon()).ok());  // clock 0 - 1: nothing needed
  ASSERT_TRUE(PushOf(*lagging, 0, 1).ok());
  EXPECT_EQ(lagging->WaitReadable(kA, 1, Soon()).code(), absl::StatusCode::kDeadlineExceeded);
  lagging->SetLiveWorkers({0});  // worker 1 declared dead: it leaves the bound
  EXPECT_TRUE(lagging->WaitReadable(kA, 1, Soon()).ok());

  auto unbounded = AsyncJob(2, ShardConfig::kInfiniteStaleness);
  ASSERT_TRUE(PushOf(*unbounded, 0, 0).ok());
  EXPECT_TRUE(unbounded->WaitReadable(kA, 0, Soon()).ok());
}

}  // namespace
}  // namespace herd::server
