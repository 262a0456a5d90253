// Point-to-point behaviour of the UCX backend: matching, message sizes, truncation, deadlines.
// Ranks are threads of this process; UCX still moves the bytes (shared memory, loopback TCP).

#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/unit/ucx/ucx_test_util.h"

namespace herd::transport {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

Deadline Soon() { return Deadline::After(20s); }

// Bytes whose value depends on position and a seed, so misplaced or stale data shows.
std::vector<uint32_t> Pattern(size_t words, uint32_t seed) {
  std::vector<uint32_t> v(words);
  for (size_t i = 0; i < words; ++i) v[i] = static_cast<uint32_t>(i * 2654435761u) ^ seed;
  return v;
}

TEST(UcxPointToPointTest, SendRecvBothOrders) {
  auto comms = herd::testing::MakeUcxCommunicators(2);
  ASSERT_EQ(comms.size(), 2u);
  EXPECT_EQ(comms[1]->backend(), "ucx");
  EXPECT_EQ(comms[1]->rank(), 1);
  EXPECT_EQ(comms[1]->size(), 2);
  int sent = 42, got = 0;
  // Receive posted first.
  Request r = comms[1]->irecv(0, Tag::Make(OpKind::kUser, 0, 0), AsMutableBytes(&got, sizeof got));
  Request s = comms[0]->isend(1, Tag::Make(OpKind::kUser, 0, 0), AsBytes(&sent, sizeof sent));
  absl::Status st = comms[0]->wait(s, Soon());
  ASSERT_TRUE(st.ok()) << st;
  st = comms[1]->wait(r, Soon());
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got, 42);
  EXPECT_EQ(r.received(), sizeof got);
  EXPECT_TRUE(r.empty());
  // Send posted first: the message waits in UCX's unexpected queue.
  sent = 7;
  s = comms[0]->isend(1, Tag::Make(OpKind::kUser, 0, 1), AsBytes(&sent, sizeof sent));
  ASSERT_TRUE(comms[0]->wait(s, Soon()).ok());
  r = comms[1]->irecv(0, Tag::Make(OpKind::kUser, 0, 1), AsMutableBytes(&got, sizeof got));
  ASSERT_TRUE(comms[1]->wait(r, Soon()).ok());
  EXPECT_EQ(got, 7);
}

TEST(UcxPointToPointTest, LargeMessageArrivesIntact) {
  auto comms = herd::testing::MakeUcxCommunicators(2);
  ASSERT_EQ(comms.size(), 2u);
  const size_t words = (size_t{64} << 20) / sizeof(uint32_t);  // 64 MiB
  std::vector<uint32_t> out = Pattern(words, 0x5eed), in(words, 0);
  Tag tag = Tag::Make(OpKind::kAllReduce, 3, 1);
  // Both orders of posting, so both the expected and the unexpected paths run.
  for (bool recv_first : {true, false}) {
    std::fill(in.begin(), in.end(), 0);
    Request r, s;
    if (recv_first) r = comms[1]->irecv(0, tag, AsMutableBytes(in.data(), words * 4));
    s = comms[0]->isend(1, tag, AsBytes(out.data(), words * 4));
    if (!recv_first) r = comms[1]->irecv(0, tag, AsMutableBytes(in.data(), words * 4));
    // 64 MiB exceed the receiver's FIFO: the sender cannot finish before the receiver drains
    // it, so both wait concurrently.
    absl::Status send_status;
    std::thread sender([&] { send_status = comms[0]->wait(s, Soon()); });
    ASSERT_TRUE(comms[1]->wait(r, Soon()).ok());
    sender.join();
    ASSERT_TRUE(send_status.ok()) << send_status;
    EXPECT_EQ(r.received(), words * 4);
    EXPECT_TRUE(in == out) << "64 MiB message corrupted (recv posted first: " << recv_first << ")";
  }
}

TEST(UcxPointToPointTest, TagsKeepMessagesApartAndSameTagIsFifo) {
  auto comms = herd::testing::MakeUcxCommunicators(3);
  ASSERT_EQ(comms.size(), 3u);
  int a = 1, b = 2, c = 3, d = 4, x = 0, y = 0, z = 0, w = 0;
  Tag t1 = Tag::Make(OpKind::kReduceScatter, 1, 0), t2 = Tag::Make(OpKind::kAllGather, 1, 0);
  Request s1 = comms[0]->isend(1, t1, AsBytes(&a, 4));
  Request s2 = comms[0]->isend(1, t2, AsBytes(&b, 4));
  Request s3 = comms[0]->isend(1, t1, AsBytes(&c, 4));
  // Same tag from another sender: the rank in the wire tag keeps it apart.
  Request s4 = comms[2]->isend(1, t1, AsBytes(&d, 4));
  Request r2 = comms[1]->irecv(0, t2, AsMutableBytes(&y, 4));
  Request r4 = comms[1]->irecv(2, t1, AsMutableBytes(&w, 4));
  Request r1 = comms[1]->irecv(0, t1, AsMutableBytes(&x, 4));
  Request r3 = comms[1]->irecv(0, t1, AsMutableBytes(&z, 4));
  ASSERT_TRUE(comms[1]->WaitAll({&r1, &r2, &r3, &r4}, Soon()).ok());
  ASSERT_TRUE(comms[0]->WaitAll({&s1, &s2, &s3}, Soon()).ok());
  ASSERT_TRUE(comms[2]->wait(s4, Soon()).ok());
  EXPECT_EQ(x, 1);
  EXPECT_EQ(y, 2);
  EXPECT_EQ(z, 3);
  EXPECT_EQ(w, 4);
}

TEST(UcxPointToPointTest, ReceiveBufferLargerThanMessageReportsLength) {
  auto comms = herd::testing::MakeUcxCommunicators(2);
  ASSERT_EQ(comms.size(), 2u);
  // A short message (one fragment) and a long one (many).
  for (size_t bytes : {size_t{3}, size_t{3} << 20}) {
    std::vector<char> msg(bytes, 'm'), buf(bytes + 4096, 0);
    Request r = comms[1]->irecv(0, Tag{}, AsMutableBytes(buf.data(), buf.size()));
    Request s = comms[0]->isend(1, Tag{}, AsBytes(msg.data(), msg.size()));
    std::thread sender([&] { EXPECT_TRUE(comms[0]->wait(s, Soon()).ok()); });
    ASSERT_TRUE(comms[1]->wait(r, Soon()).ok());
    sender.join();
    EXPECT_EQ(r.received(), bytes);
    EXPECT_EQ(std::string(buf.data(), bytes), std::string(bytes, 'm'));
    EXPECT_EQ(buf[bytes], 0) << "bytes past the message were written";
  }
}

TEST(UcxPointToPointTest, MessageLongerThanBufferIsOutOfRange) {
  auto comms = herd::testing::MakeUcxCommunicators(2);
  ASSERT_EQ(comms.size(), 2u);
  for (size_t bytes : {size_t{8}, size_t{1} << 20}) {
    std::vector<char> msg(bytes, 'x'), buf(bytes / 2, 0);
    Tag tag = Tag::Make(OpKind::kUser, 7, static_cast<uint32_t>(bytes));
    Request r = comms[1]->irecv(0, tag, AsMutableBytes(buf.data(), buf.size()));
    Request s = comms[0]->isend(1, tag, AsBytes(msg.data(), msg.size()));
    absl::Status send_status;
    std::thread sender([&] { send_status = comms[0]->wait(s, Deadline::After(5s)); });
    absl::Status st = comms[1]->wait(r, Soon());
    sender.join();
    EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr("from rank 0"));
    EXPECT_THAT(std::string(st.message()), HasSubstr("user id=7"));
    // UCX reports truncation to the receiver only; the sender must at least not hang.
    EXPECT_NE(send_status.code(), absl::StatusCode::kDeadlineExceeded) << send_status;
  }
}

TEST(UcxPointToPointTest, DeadlineNamesThePeerAndLeavesTheRequestInFlight) {
  auto comms = herd::testing::MakeUcxCommunicators(3);
  ASSERT_EQ(comms.size(), 3u);
  int v = 0, sent = 99;
  Tag tag = Tag::Make(OpKind::kAllReduce, 4, 9);
  Request r = comms[0]->irecv(2, tag, AsMutableBytes(&v, 4));
  auto start = Clock::now();
  absl::Status st = comms[0]->wait(r, Deadline::After(50ms));
  auto took = Clock::now() - start;
  EXPECT_GE(took, 50ms);
  EXPECT_LT(took, 2s);
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(st.message()), HasSubstr("recv of 4 bytes from rank 2"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("allreduce id=4 step=9"));
  // Still posted: a later message completes it.
  Request s = comms[2]->isend(0, tag, AsBytes(&sent, 4));
  ASSERT_TRUE(comms[0]->wait(r, Soon()).ok());
  ASSERT_TRUE(comms[2]->wait(s, Soon()).ok());
  EXPECT_EQ(v, 99);
}

TEST(UcxPointToPointTest, SelfSendAndPeerOutOfRange) {
  auto comms = herd::testing::MakeUcxCommunicators(2);
  ASSERT_EQ(comms.size(), 2u);
  int in = 0, out = 5;
  Request r = comms[1]->irecv(1, Tag{}, AsMutableBytes(&in, 4));
  Request s = comms[1]->isend(1, Tag{}, AsBytes(&out, 4));
  ASSERT_TRUE(comms[1]->WaitAll({&s, &r}, Soon()).ok());
  EXPECT_EQ(in, 5);
  Request bad = comms[0]->isend(2, Tag{}, AsBytes(&out, 4));
  absl::Status st = comms[0]->wait(bad, Soon());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("rank 2"));
}

TEST(UcxPointToPointTest, SingleRankCommunicator) {
  auto comms = herd::testing::MakeUcxCommunicators(1);
  ASSERT_EQ(comms.size(), 1u);
  std::vector<uint32_t> out = Pattern(1 << 18, 3), in(1 << 18);
  Request r = comms[0]->irecv(0, Tag{}, AsMutableBytes(in.data(), in.size() * 4));
  Request s = comms[0]->isend(0, Tag{}, AsBytes(out.data(), out.size() * 4));
  ASSERT_TRUE(comms[0]->WaitAll({&s, &r}, Soon()).ok());
  EXPECT_EQ(in, out);
}

TEST(UcxPointToPointTest, RingExchangeAmongFourRanks) {
  constexpr int kRanks = 4;
  auto comms = herd::testing::MakeUcxCommunicators(kRanks);
  ASSERT_EQ(comms.size(), size_t{kRanks});
  const size_t words = (size_t{1} << 20) / 4;
  std::vector<absl::Status> results(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      Communicator& c = *comms[rank];
      const int right = (rank + 1) % kRanks, left = (rank + kRanks - 1) % kRanks;
      std::vector<uint32_t> in(words);
      for (uint32_t step = 0; step < 5; ++step) {
        std::vector<uint32_t> out = Pattern(words, rank * 100 + step);
        Request r =
            c.irecv(left, Tag::Make(OpKind::kUser, 1, step), AsMutableBytes(in.data(), words * 4));
        Request s =
            c.isend(right, Tag::Make(OpKind::kUser, 1, step), AsBytes(out.data(), words * 4));
        absl::Status st = c.WaitAll({&r, &s}, Soon());
        if (!st.ok()) {
          results[rank] = st;
          return;
        }
        if (in != Pattern(words, left * 100 + step)) {
          results[rank] = absl::InternalError(absl::StrCat("wrong data from rank ", left));
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < kRanks; ++rank) EXPECT_TRUE(results[rank].ok()) << results[rank];
}

}  // namespace
}  // namespace herd::transport
