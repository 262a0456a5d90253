#include "transport/loopback/loopback_communicator.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/spawn.h"

namespace herd::transport {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

Deadline Soon() { return Deadline::After(10s); }

TEST(LoopbackTest, SendRecvBothOrders) {
  auto comms = MakeLoopbackCommunicators(2);
  int sent = 42, got = 0;
  // Receive posted first.
  Request r = comms[1]->irecv(0, Tag::Make(OpKind::kUser, 0, 0), AsMutableBytes(&got, sizeof got));
  Request s = comms[0]->isend(1, Tag::Make(OpKind::kUser, 0, 0), AsBytes(&sent, sizeof sent));
  ASSERT_TRUE(comms[0]->wait(s, Soon()).ok());
  ASSERT_TRUE(comms[1]->wait(r, Soon()).ok());
  EXPECT_EQ(got, 42);
  EXPECT_EQ(r.received(), sizeof got);
  // Send posted first.
  sent = 7;
  s = comms[0]->isend(1, Tag::Make(OpKind::kUser, 0, 1), AsBytes(&sent, sizeof sent));
  r = comms[1]->irecv(0, Tag::Make(OpKind::kUser, 0, 1), AsMutableBytes(&got, sizeof got));
  ASSERT_TRUE(comms[1]->wait(r, Soon()).ok());
  ASSERT_TRUE(comms[0]->wait(s, Soon()).ok());
  EXPECT_EQ(got, 7);
}

TEST(LoopbackTest, TagsKeepConcurrentMessagesApartAndSameTagIsFifo) {
  auto comms = MakeLoopbackCommunicators(2);
  int a = 1, b = 2, c = 3, x = 0, y = 0, z = 0;
  Tag t1 = Tag::Make(OpKind::kReduceScatter, 1, 0), t2 = Tag::Make(OpKind::kAllGather, 1, 0);
  Request s1 = comms[0]->isend(1, t1, AsBytes(&a, 4));
  Request s2 = comms[0]->isend(1, t2, AsBytes(&b, 4));
  Request s3 = comms[0]->isend(1, t1, AsBytes(&c, 4));
  Request r2 = comms[1]->irecv(0, t2, AsMutableBytes(&y, 4));
  Request r1 = comms[1]->irecv(0, t1, AsMutableBytes(&x, 4));
  Request r3 = comms[1]->irecv(0, t1, AsMutableBytes(&z, 4));
  ASSERT_TRUE(comms[1]->WaitAll({&r1, &r2, &r3}, Soon()).ok());
  ASSERT_TRUE(comms[0]->WaitAll({&s1, &s2, &s3}, Soon()).ok());
  EXPECT_EQ(x, 1);
  EXPECT_EQ(y, 2);
  EXPECT_EQ(z, 3);
}

TEST(LoopbackTest, ShorterMessageIntoLargerBufferReportsLength) {
  auto comms = MakeLoopbackCommunicators(2);
  char msg[3] = {'a', 'b', 'c'}, buf[8] = {};
  Request r = comms[1]->irecv(0, Tag{}, AsMutableBytes(buf, sizeof buf));
  Request s = comms[0]->isend(1, Tag{}, AsBytes(msg, sizeof msg));
  ASSERT_TRUE(comms[1]->wait(r, Soon()).ok());
  EXPECT_EQ(r.received(), 3u);
  EXPECT_EQ(std::string(buf, 3), "abc");
  ASSERT_TRUE(comms[0]->wait(s, Soon()).ok());
}

TEST(LoopbackTest, TooLongMessageFailsBothEnds) {
  auto comms = MakeLoopbackCommunicators(2);
  char msg[8] = {}, buf[4] = {};
  Request r = comms[1]->irecv(0, Tag{}, AsMutableBytes(buf, sizeof buf));
  Request s = comms[0]->isend(1, Tag{}, AsBytes(msg, sizeof msg));
  EXPECT_EQ(comms[1]->wait(r, Soon()).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(comms[0]->wait(s, Soon()).code(), absl::StatusCode::kOutOfRange);
}

TEST(LoopbackTest, PeerOutOfRangeIsInvalidArgument) {
  auto comms = MakeLoopbackCommunicators(2);
  int v = 0;
  Request s = comms[0]->isend(2, Tag{}, AsBytes(&v, 4));
  absl::Status st = comms[0]->wait(s, Soon());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("rank 2"));
}

TEST(LoopbackTest, DeadlineNamesThePeerAndTag) {
  auto comms = MakeLoopbackCommunicators(3);
  int v = 0;
  Request r = comms[0]->irecv(2, Tag::Make(OpKind::kAllReduce, 4, 9), AsMutableBytes(&v, 4));
  auto start = Clock::now();
  absl::Status st = comms[0]->wait(r, Deadline::After(50ms));
  EXPECT_GE(Clock::now() - start, 50ms);
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(st.message(), HasSubstr("from rank 2"));
  EXPECT_THAT(st.message(), HasSubstr("allreduce id=4 step=9"));
}

TEST(LoopbackTest, KilledPeerFailsWaitersWithItsName) {
  auto fabric = LoopbackFabric::Create(3);
  auto c0 = fabric->communicator(0);
  int v = 0;
  Request r = c0->irecv(1, Tag{}, AsMutableBytes(&v, 4));
  std::thread killer([&] {
    std::this_thread::sleep_for(20ms);
    fabric->kill(1, absl::AbortedError("process crashed"));
  });
  absl::Status st = c0->wait(r, Soon());
  killer.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(st.message(), HasSubstr("rank 1"));
  // Later operations with the dead rank fail at once.
  Request s = c0->isend(1, Tag{}, AsBytes(&v, 4));
  EXPECT_EQ(c0->wait(s, Soon()).code(), absl::StatusCode::kUnavailable);
}

TEST(LoopbackTest, AbortWakesEveryWaiterAndSticks) {
  auto comms = MakeLoopbackCommunicators(2);
  int v = 0, w = 0;
  Request r1 = comms[0]->irecv(1, Tag::Make(OpKind::kUser, 0, 1), AsMutableBytes(&v, 4));
  Request r2 = comms[0]->irecv(1, Tag::Make(OpKind::kUser, 0, 2), AsMutableBytes(&w, 4));
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    EXPECT_TRUE(comms[0]->abort(absl::CancelledError("plan epoch changed")).ok());
  });
  EXPECT_EQ(comms[0]->wait(r1, Soon()).code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(comms[0]->wait(r2, Soon()).code(), absl::StatusCode::kCancelled);
  t.join();
  EXPECT_EQ(comms[0]->status().code(), absl::StatusCode::kCancelled);
  Request s = comms[0]->isend(1, Tag{}, AsBytes(&v, 4));
  EXPECT_EQ(comms[0]->wait(s, Soon()).code(), absl::StatusCode::kCancelled);
}

TEST(LoopbackTest, SpawnRanksRingExchange) {
  for (int p : {1, 2, 5, 16}) {
    auto statuses = herd::testing::SpawnRanks(p, [p](Communicator& c) -> absl::Status {
      int mine = c.rank(), from_left = -1;
      Request r = c.irecv((c.rank() + p - 1) % p, Tag{}, AsMutableBytes(&from_left, 4));
      Request s = c.isend((c.rank() + 1) % p, Tag{}, AsBytes(&mine, 4));
      auto st = c.WaitAll({&r, &s}, Soon());
      if (!st.ok()) return st;
      if (from_left != (c.rank() + p - 1) % p) return absl::InternalError("wrong value");
      return absl::OkStatus();
    });
    EXPECT_TRUE(herd::testing::FirstError(statuses).ok()) << herd::testing::FirstError(statuses);
  }
}

}  // namespace
}  // namespace herd::transport

namespace herd::transport {
namespace {

// A rank that gives up tells its peers: a rank waiting on it fails at once with its name and
// reason, so a failure spreads instead of every rank running into its own deadline.
TEST(LoopbackTest, AbortReachesPeersWaitingOnTheAbortedRank) {
  auto comms = MakeLoopbackCommunicators(3);
  int v = 0;
  Request r = comms[0]->irecv(1, Tag::Make(OpKind::kAllReduce, 0, 3), AsMutableBytes(&v, 4));
  Request unrelated = comms[0]->irecv(2, Tag{}, AsMutableBytes(&v, 4));
  EXPECT_TRUE(comms[1]->abort(absl::UnavailableError("rank 2 died")).ok());
  absl::Status st = comms[0]->wait(r, Deadline::After(std::chrono::seconds(10)));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("rank 1 aborted: rank 2 died"));
  // Requests with other peers are untouched, and new ones with the aborted rank fail at once.
  EXPECT_EQ(comms[0]->wait(unrelated, Deadline::After(std::chrono::milliseconds(10))).code(),
            absl::StatusCode::kDeadlineExceeded);
  Request s = comms[0]->isend(1, Tag{}, AsBytes(&v, 4));
  EXPECT_EQ(comms[0]->wait(s, Deadline::After(std::chrono::seconds(1))).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(comms[0]->abort(absl::CancelledError("test over")).ok());
}

}  // namespace
}  // namespace herd::transport
