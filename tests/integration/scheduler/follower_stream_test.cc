// A process's Follow stream (scheduler/client/follower.h) ends under its feet: the scheduler
// refuses it, or the process closes it, while threads outside gRPC's callbacks (a worker's
// iteration loop asking for a horizon, the heartbeat clock) are about to write on it. A write
// must never reach a call gRPC has already finished; such a write was a use after free that
// aborted a shard at a cancelled job's end ("ref_counted.h: assertion failed: prior > 0").
//
// The real scheduler process refuses each stream of a node it does not know right after the
// stream's first message, so every stream here ends within a few milliseconds of opening;
// a slow `fill` (what a shard adds to each message) widens the window between taking the
// stream and writing on it, as a loaded machine does.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "scheduler/client/follower.h"
#include "scheduler/client/scheduler_client.h"
#include "tests/integration/scheduler/scheduler_process.h"
#include "tests/integration/scheduler/scheduler_with_client.h"

namespace herd::scheduler {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

class FollowerStream : public testing::SchedulerWithClient {
 protected:
  FollowerStream() : SchedulerWithClient("herd_follower_stream_") {}
};

TEST_F(FollowerStream, AWriteTakenBeforeTheStreamEndedIsDroppedNotStartedOnTheEndedCall) {
  // Of a job that does not exist: the scheduler refuses the stream after its first message.
  FollowerOptions o;
  o.job = "nobody-runs-this";
  o.what = "stranger";
  // The test thread's write takes the stream, then waits in `fill` until the stream has
  // ended: the slowest a loaded machine can be between the two.
  const std::thread::id test_thread = std::this_thread::get_id();
  std::atomic<Follower*> self{nullptr};
  std::atomic<int> held{0};
  o.fill = [&](herd::v1::FollowRequest&) {
    if (std::this_thread::get_id() != test_thread) return;
    held.fetch_add(1);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (self.load()->Current().refused.ok() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(milliseconds(1));
    }
  };
  herd::v1::RegisterNodeResponse reg;
  reg.set_node_id(1000);
  reg.set_heartbeat_interval_ms(5000);  // no heartbeat of the clock's meanwhile
  auto follower = std::make_unique<Follower>(*client_, std::move(o), reg);
  self.store(follower.get());
  // Asks until one of its writes is the one held (the stream's first message goes first, from
  // the clock's thread; this thread's ask gets its turn once that write is done).
  herd::v1::IterationStats stats;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int64_t it = 0; held.load() == 0 && std::chrono::steady_clock::now() < give_up; ++it) {
    follower->AskHorizon(it);
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_EQ(held.load(), 1) << "no write of this thread's was taken on an open stream";
  const Follower::State s = follower->Current();
  EXPECT_TRUE(absl::IsNotFound(s.refused)) << s.refused;
  EXPECT_EQ(s.view, nullptr);
  // The process goes on: its next streams are refused too, and it closes cleanly.
  for (int64_t it = 1000; it < 1100; ++it) {
    follower->AskHorizon(it);
    follower->Completed(it, stats, /*now=*/true);
  }
  follower.reset();
}

// The call itself: once gRPC has ended it, a write is refused and nothing follows OnEnded.
class CountingHandler : public SchedulerClient::FollowHandler {
 public:
  void OnEvent(const herd::v1::FollowEvent&) override { events.fetch_add(1); }
  void OnWritten(bool) override {
    written.fetch_add(1);
    if (ended.load() != 0) after_end.fetch_add(1);
  }
  void OnEnded(const absl::Status& st) override {
    std::lock_guard<std::mutex> lock(mu);
    status = st;
    ended.fetch_add(1);
  }
  std::atomic<int> events{0}, written{0}, ended{0}, after_end{0};
  std::mutex mu;
  absl::Status status;
};

TEST_F(FollowerStream, AnEndedCallRefusesWritesAndNothingComesAfterItsEnd) {
  CountingHandler handler;
  std::shared_ptr<SchedulerClient::FollowCall> call = client_->StartFollow(&handler);
  herd::v1::FollowRequest first;
  first.set_job("nobody-runs-this");
  first.set_node_id(7);
  ASSERT_TRUE(call->Write(first));
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (handler.ended.load() == 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_EQ(handler.ended.load(), 1) << "the scheduler refuses a job that does not exist";
  {
    std::lock_guard<std::mutex> lock(handler.mu);
    EXPECT_TRUE(absl::IsNotFound(handler.status)) << handler.status;
  }
  EXPECT_FALSE(call->Write(first)) << "a write on a call gRPC has finished";
  call->Cancel();  // harmless after the end
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(handler.ended.load(), 1);
  EXPECT_EQ(handler.after_end.load(), 0);
  EXPECT_EQ(handler.events.load(), 0);
}

}  // namespace
}  // namespace herd::scheduler
