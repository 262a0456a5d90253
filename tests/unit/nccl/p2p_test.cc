// Point-to-point over NCCL: sends and receives queued until the first wait, launched in one
// group. P = 1 (send to self) needs one GPU; the ring needs two or more.

#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "tests/support/spawn.h"
#include "tests/unit/nccl/nccl_test_util.h"
#include "transport/loopback/loopback_communicator.h"
#include "transport/native_collectives.h"
#include "transport/store/store.h"

namespace herd::transport::nccl::testing {
namespace {

using ::testing::HasSubstr;

// Bytes that say who sent them and which message they are.
std::vector<std::byte> Pattern(int sender, int message, size_t bytes) {
  std::vector<std::byte> v(bytes);
  for (size_t i = 0; i < bytes; ++i) {
    v[i] = static_cast<std::byte>((i * 31 + static_cast<size_t>(sender) * 7 + message * 13) & 0xff);
  }
  return v;
}

// Every rank sends `messages` messages to its right neighbour and receives as many from its left
// one, all posted before the first wait (the exchange that deadlocks if NCCL sees them one by
// one), then checks what arrived.
absl::Status RingExchange(Communicator& comm, int messages, size_t bytes) {
  const int p = comm.size(), right = (comm.rank() + 1) % p, left = (comm.rank() + p - 1) % p;
  std::vector<std::unique_ptr<DeviceBuffer>> out, in;
  std::vector<Request> reqs;
  for (int m = 0; m < messages; ++m) {
    out.push_back(std::make_unique<DeviceBuffer>(bytes));
    in.push_back(std::make_unique<DeviceBuffer>(bytes));
    HERD_RETURN_IF_ERROR(out.back()->status());
    HERD_RETURN_IF_ERROR(in.back()->status());
    HERD_RETURN_IF_ERROR(out.back()->Upload(Pattern(comm.rank(), m, bytes)));
  }
  for (int m = 0; m < messages; ++m) {
    const Tag tag = Tag::Make(OpKind::kUser, 0, m);
    reqs.push_back(comm.isend(right, tag, AsBytes(out[m]->data(), bytes)));
    reqs.push_back(comm.irecv(left, tag, AsMutableBytes(in[m]->data(), bytes)));
  }
  // Receives first: the order of the waits must not matter.
  for (int m = 0; m < messages; ++m) {
    Request& recv = reqs[2 * m + 1];
    HERD_RETURN_IF_ERROR(comm.wait(recv, Deadline::After(kTimeout)));
    if (recv.received() != bytes) {
      return absl::InternalError(
          absl::StrFormat("received %u bytes, expected %u", recv.received(), bytes));
    }
  }
  HERD_RETURN_IF_ERROR(comm.WaitAll(absl::MakeSpan(reqs), Deadline::After(kTimeout)));
  for (int m = 0; m < messages; ++m) {
    HERD_ASSIGN_OR_RETURN(std::vector<std::byte> got, in[m]->Download());
    if (got != Pattern(left, m, bytes)) {
      return absl::InternalError(
          absl::StrFormat("rank %d: message %d from rank %d is wrong", comm.rank(), m, left));
    }
  }
  return absl::OkStatus();
}

TEST(NcclP2pTest, SendToSelf) {
  HERD_REQUIRE_GPUS(1);
  auto statuses = RunNcclRanks(1, [](Communicator& comm) -> absl::Status {
    HERD_RETURN_IF_ERROR(RingExchange(comm, 1, 1));
    HERD_RETURN_IF_ERROR(RingExchange(comm, 3, 1 << 20));
    return comm.status();
  });
  EXPECT_TRUE(herd::testing::FirstError(statuses).ok()) << herd::testing::FirstError(statuses);
}

TEST(NcclP2pTest, RingExchangeAcrossAllDevices) {
  HERD_REQUIRE_GPUS(2);
  auto statuses = RunNcclRanks(VisibleDevices(), [](Communicator& comm) -> absl::Status {
    HERD_RETURN_IF_ERROR(RingExchange(comm, 1, 4));
    HERD_RETURN_IF_ERROR(RingExchange(comm, 4, (1 << 20) + 3));
    HERD_RETURN_IF_ERROR(RingExchange(comm, 2, 64 << 20));
    return comm.status();
  });
  EXPECT_TRUE(herd::testing::FirstError(statuses).ok()) << herd::testing::FirstError(statuses);
}

TEST(NcclP2pTest, QueuedRequestsRunBeforeACollective) {
  HERD_REQUIRE_GPUS(1);
  auto statuses = RunNcclRanks(1, [](Communicator& comm) -> absl::Status {
    // Posted but not waited for: the collective must launch them first, in posting order.
    constexpr size_t kBytes = 4096;
    DeviceBuffer out(kBytes), in(kBytes), vec(64 * sizeof(float));
    HERD_RETURN_IF_ERROR(out.Upload(Pattern(0, 9, kBytes)));
    HERD_RETURN_IF_ERROR(vec.Upload(Encode(DType::kFloat32, std::vector<double>(64, 2.0))));
    Request send = comm.isend(0, Tag{}, AsBytes(out.data(), kBytes));
    Request recv = comm.irecv(0, Tag{}, AsMutableBytes(in.data(), kBytes));
    HERD_RETURN_IF_ERROR(comm.native()->AllReduce(vec.data(), 64, DType::kFloat32, ReduceOp::kSum,
                                                  Deadline::After(kTimeout)));
    HERD_RETURN_IF_ERROR(comm.WaitAll({&send, &recv}, Deadline::After(kTimeout)));
    HERD_ASSIGN_OR_RETURN(std::vector<std::byte> got, in.Download());
    if (got != Pattern(0, 9, kBytes)) return absl::InternalError("self message is wrong");
    return absl::OkStatus();
  });
  EXPECT_TRUE(herd::testing::FirstError(statuses).ok()) << herd::testing::FirstError(statuses);
}

TEST(NcclP2pTest, FlushLaunchesBeforeAnyWait) {
  HERD_REQUIRE_GPUS(1);
  auto comm = CreateNcclCommunicator(0, 1, MakeInProcessStore());
  ASSERT_TRUE(comm.ok()) << comm.status();
  constexpr size_t kBytes = 1 << 16;
  DeviceBuffer out(kBytes), in(kBytes);
  ASSERT_TRUE(out.Upload(Pattern(0, 5, kBytes)).ok());
  ASSERT_TRUE(in.Upload(std::vector<std::byte>(kBytes)).ok());
  Request send = (*comm)->isend(0, Tag{}, AsBytes(out.data(), kBytes));
  Request recv = (*comm)->irecv(0, Tag{}, AsMutableBytes(in.data(), kBytes));
  ASSERT_TRUE(FlushNccl(**comm, Deadline::After(kTimeout)).ok());
  // The exchange is on the GPU without any wait(): once the device is idle the data is there.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto got = in.Download();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got == Pattern(0, 5, kBytes));
  EXPECT_TRUE((*comm)->WaitAll({&send, &recv}, Deadline::After(kTimeout)).ok());
}

TEST(NcclP2pTest, FlushNeedsAnNcclCommunicator) {
  auto comms = MakeLoopbackCommunicators(1);
  absl::Status s = FlushNccl(*comms[0], Deadline::After(kTimeout));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("loopback"));
}

// The contract: isend/irecv never fail directly; the request carries the error to wait().
TEST(NcclP2pTest, BadRequestsFailAtWait) {
  HERD_REQUIRE_GPUS(1);
  auto comm = CreateNcclCommunicator(0, 1, MakeInProcessStore());
  ASSERT_TRUE(comm.ok()) << comm.status();
  DeviceBuffer buf(16);
  Request out_of_range = (*comm)->isend(3, Tag{}, AsBytes(buf.data(), 16));
  absl::Status s = (*comm)->wait(out_of_range, Deadline::After(kTimeout));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("peer rank 3 is out of range"));
  Request null_buffer = (*comm)->irecv(0, Tag{}, MutableBytes(nullptr, 16));
  EXPECT_EQ((*comm)->wait(null_buffer, Deadline::After(kTimeout)).code(),
            absl::StatusCode::kInvalidArgument);
  // Empty messages complete without NCCL.
  Request empty = (*comm)->isend(0, Tag{}, ConstBytes());
  EXPECT_TRUE((*comm)->wait(empty, Deadline::After(kTimeout)).ok());
  // None of that hurt the communicator.
  EXPECT_TRUE((*comm)->status().ok());
}

// abort() must wake a request NCCL would never complete (an unmatched receive from self), with
// the caller's reason, and fail everything after it, collectives included.
TEST(NcclP2pTest, AbortFailsPendingAndLaterRequests) {
  HERD_REQUIRE_GPUS(1);
  auto comm = CreateNcclCommunicator(0, 1, MakeInProcessStore());
  ASSERT_TRUE(comm.ok()) << comm.status();
  DeviceBuffer buf(1024);
  Request pending = (*comm)->irecv(0, Tag{}, AsMutableBytes(buf.data(), 1024));
  ASSERT_TRUE((*comm)->abort(absl::CancelledError("plan epoch 7 replaced")).ok());
  absl::Status s = (*comm)->wait(pending, Deadline::After(kTimeout));
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(std::string(s.message()), HasSubstr("plan epoch 7 replaced"));
  Request later = (*comm)->isend(0, Tag{}, AsBytes(buf.data(), 1024));
  EXPECT_EQ((*comm)->wait(later, Deadline::After(kTimeout)).code(), absl::StatusCode::kCancelled);
  absl::Status collective = (*comm)->native()->AllReduce(buf.data(), 256, DType::kFloat32,
                                                         ReduceOp::kSum, Deadline::After(kTimeout));
  EXPECT_EQ(collective.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(std::string((*comm)->status().message()), HasSubstr("plan epoch 7 replaced"));
}

}  // namespace
}  // namespace herd::transport::nccl::testing
