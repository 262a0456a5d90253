// Failure paths of the UCX backend: abort, bootstrap timeouts and bad records, peers that go
// away while others wait for them.

#include <chrono>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/ucx/ucx_test_util.h"

namespace herd::transport {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

Deadline FailureSoon() { return Deadline::After(20s); }

TEST(UcxFailureTest, AbortWakesEveryWaiterAndSticks) {
  auto comms = herd::testing::MakeUcxCommunicators(2);
  ASSERT_EQ(comms.size(), 2u);
  int v = 0, w = 0;
  // Larger than a receiver's shared-memory FIFO (16 MiB), so it stays in flight unreceived.
  std::vector<char> big(size_t{64} << 20);
  Request r1 = comms[0]->irecv(1, Tag::Make(OpKind::kUser, 0, 1), AsMutableBytes(&v, 4));
  Request r2 = comms[0]->irecv(1, Tag::Make(OpKind::kUser, 0, 2), AsMutableBytes(&w, 4));
  // A send nobody receives: abort must release it too.
  Request s = comms[0]->isend(1, Tag::Make(OpKind::kUser, 0, 3), AsBytes(big.data(), big.size()));
  absl::Status other_thread;
  std::thread waiter([&] { other_thread = comms[0]->wait(r2, FailureSoon()); });
  std::thread aborter([&] {
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(comms[0]->abort(absl::CancelledError("plan epoch changed")).ok());
  });
  auto start = Clock::now();
  absl::Status st = comms[0]->wait(r1, FailureSoon());
  EXPECT_LT(Clock::now() - start, 5s);
  aborter.join();
  waiter.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(std::string(st.message()), HasSubstr("plan epoch changed"));
  EXPECT_EQ(other_thread.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(comms[0]->wait(s, FailureSoon()).code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(comms[0]->status().code(), absl::StatusCode::kCancelled);
  // Every later operation fails with the abort status, and the first status sticks.
  EXPECT_TRUE(comms[0]->abort(absl::InternalError("second")).ok());
  Request later = comms[0]->isend(1, Tag{}, AsBytes(&v, 4));
  absl::Status later_status = comms[0]->wait(later, FailureSoon());
  EXPECT_EQ(later_status.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(std::string(later_status.message()), HasSubstr("plan epoch changed"));
}

TEST(UcxFailureTest, AbortTellsThePeersWhy) {
  auto comms = herd::testing::MakeUcxCommunicators(3);
  ASSERT_EQ(comms.size(), 3u);
  int v = 0;
  Request from0 = comms[1]->irecv(0, Tag::Make(OpKind::kAllReduce, 1, 2), AsMutableBytes(&v, 4));
  Request from2 = comms[1]->irecv(2, Tag::Make(OpKind::kAllReduce, 1, 2), AsMutableBytes(&v, 4));
  auto start = Clock::now();
  ASSERT_TRUE(comms[0]->abort(absl::DataLossError("checksum mismatch in bucket 1")).ok());
  absl::Status st = comms[1]->wait(from0, Deadline::After(10s));
  EXPECT_LT(Clock::now() - start, 3s);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("from rank 0"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("rank 0 aborted its communicator"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("checksum mismatch in bucket 1"));
  // Rank 1's other peer is unaffected; a deadline on it mentions rank 0's abort.
  absl::Status other = comms[1]->wait(from2, Deadline::After(20ms));
  EXPECT_EQ(other.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(other.message()), HasSubstr("rank 0 aborted"));
  ASSERT_TRUE(comms[1]->abort(absl::CancelledError("test over")).ok());
}

TEST(UcxFailureTest, AbortedReceiveBufferIsNotWrittenAfterAbort) {
  auto comms = herd::testing::MakeUcxCommunicators(2);
  ASSERT_EQ(comms.size(), 2u);
  std::vector<char> buf(1 << 20, 'u'), msg(1 << 20, 'm');
  Request r = comms[0]->irecv(1, Tag{}, AsMutableBytes(buf.data(), buf.size()));
  ASSERT_TRUE(comms[0]->abort(absl::AbortedError("give up")).ok());
  // The message arrives after the abort; it must not land in the buffer.
  Request s = comms[1]->isend(0, Tag{}, AsBytes(msg.data(), msg.size()));
  Request probe = comms[0]->irecv(1, Tag::Make(OpKind::kUser, 0, 1), AsMutableBytes(buf.data(), 1));
  EXPECT_EQ(comms[0]->wait(probe, FailureSoon()).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(comms[0]->wait(r, FailureSoon()).code(), absl::StatusCode::kAborted);
  // The sender may complete (the message fits the receiver's FIFO) or not; either way rank 0,
  // aborted, never takes it.
  (void)comms[1]->wait(s, Deadline::After(200ms));
  EXPECT_EQ(buf, std::vector<char>(1 << 20, 'u'));
}

TEST(UcxFailureTest, BootstrapTimeoutNamesTheMissingRanks) {
  herd::testing::UseLoopbackNetworkOnly();
  auto store = MakeInProcessStore();
  UcxOptions options;
  options.prefix = "job7";
  options.bootstrap_timeout = 300ms;
  // Ranks 0 and 1 of 4 show up; 2 and 3 never do.
  std::vector<absl::Status> results(2);
  std::vector<std::thread> threads;
  auto start = Clock::now();
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back(
        [&, r] { results[r] = CreateUcxCommunicator(r, 4, store, options).status(); });
  }
  for (auto& t : threads) t.join();
  EXPECT_LT(Clock::now() - start, 5s);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kDeadlineExceeded) << results[r];
    EXPECT_THAT(std::string(results[r].message()), HasSubstr("2, 3 did not publish"));
    EXPECT_THAT(std::string(results[r].message()), HasSubstr("job7/ucx/"));
  }
}

TEST(UcxFailureTest, GarbageAddressRecordIsInvalidArgumentNamingTheRank) {
  herd::testing::UseLoopbackNetworkOnly();
  auto store = MakeInProcessStore();
  ASSERT_TRUE(store->Set("herd/ucx/1", "not an address").ok());
  auto made = CreateUcxCommunicator(0, 2, store, UcxOptions{});
  EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument) << made.status();
  EXPECT_THAT(std::string(made.status().message()), HasSubstr("rank 1"));
}

TEST(UcxFailureTest, BadArgumentsAreRejected) {
  auto store = MakeInProcessStore();
  EXPECT_EQ(CreateUcxCommunicator(2, 2, store).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateUcxCommunicator(0, 0, store).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateUcxCommunicator(0, 1, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(UcxFailureTest, PeerThatGoesAwayFailsItsRequestsWithUnavailable) {
  auto comms = herd::testing::MakeUcxCommunicators(3);
  ASSERT_EQ(comms.size(), 3u);
  int v = 0;
  Tag tag = Tag::Make(OpKind::kAllGather, 2, 3);
  Request r = comms[0]->irecv(2, tag, AsMutableBytes(&v, 4));
  Request keep = comms[0]->irecv(1, tag, AsMutableBytes(&v, 4));
  auto start = Clock::now();
  comms[2].reset();  // rank 2 leaves: its endpoints close
  absl::Status st = comms[0]->wait(r, Deadline::After(10s));
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("recv of 4 bytes from rank 2"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("allgather id=2 step=3"));
  // Later operations with rank 2 fail at once; rank 1 is unaffected, and a deadline on it
  // mentions the dead rank.
  Request s = comms[0]->isend(2, tag, AsBytes(&v, 4));
  EXPECT_EQ(comms[0]->wait(s, Deadline::After(1s)).code(), absl::StatusCode::kUnavailable);
  absl::Status other = comms[0]->wait(keep, Deadline::After(20ms));
  EXPECT_EQ(other.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(other.message()), HasSubstr("rank 2 is unreachable"));
  int one = 1;
  Request s1 = comms[1]->isend(0, tag, AsBytes(&one, 4));
  EXPECT_TRUE(comms[0]->wait(keep, FailureSoon()).ok());
  EXPECT_TRUE(comms[1]->wait(s1, FailureSoon()).ok());
  EXPECT_EQ(v, 1);
}

}  // namespace
}  // namespace herd::transport
