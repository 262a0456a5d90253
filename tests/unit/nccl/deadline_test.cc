// A receive that no one sends must end at its deadline with DEADLINE_EXCEEDED naming the peer,
// and leave the communicator aborted (the pending NCCL kernel would block its stream forever).

#include <chrono>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "tests/unit/nccl/nccl_test_util.h"
#include "transport/store/store.h"

namespace herd::transport::nccl::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr std::chrono::milliseconds kShort{500};

// Posts a receive from `peer` that nobody matches and waits kShort for it.
absl::Status ReceiveNothing(Communicator& comm, int peer) {
  DeviceBuffer buf(4096);
  HERD_RETURN_IF_ERROR(buf.status());
  Request recv =
      comm.irecv(peer, Tag::Make(OpKind::kAllReduce, 3, 1), AsMutableBytes(buf.data(), 4096));
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = comm.wait(recv, Deadline::After(kShort));
  // The abort (ncclCommAbort and the drain of the stream) is bounded as well.
  if (std::chrono::steady_clock::now() - start > kShort + std::chrono::seconds(20)) {
    return absl::InternalError("the wait overran its deadline by more than 20 s");
  }
  return s;
}

void ExpectDeadlineNamingPeer(const absl::Status& s, int peer) {
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("recv of 4096 bytes"),
                    HasSubstr(absl::StrFormat("from rank %d", peer)), HasSubstr("allreduce id=3")));
}

TEST(NcclDeadlineTest, UnmatchedReceiveFromSelf) {
  HERD_REQUIRE_GPUS(1);
  auto comm = CreateNcclCommunicator(0, 1, MakeInProcessStore());
  ASSERT_TRUE(comm.ok()) << comm.status();
  ExpectDeadlineNamingPeer(ReceiveNothing(**comm, 0), 0);
  // The communicator is aborted with that error; later operations fail at once with it.
  EXPECT_EQ((*comm)->status().code(), absl::StatusCode::kDeadlineExceeded);
  DeviceBuffer buf(16);
  Request later = (*comm)->isend(0, Tag{}, AsBytes(buf.data(), 16));
  EXPECT_EQ((*comm)->wait(later, Deadline::After(kTimeout)).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(NcclDeadlineTest, UnmatchedReceiveFromPeer) {
  HERD_REQUIRE_GPUS(2);
  auto statuses = RunNcclRanks(VisibleDevices(), [](Communicator& comm) -> absl::Status {
    if (comm.rank() != 1) return absl::OkStatus();  // rank 0 never sends
    return ReceiveNothing(comm, 0);
  });
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (r == 1) {
      ExpectDeadlineNamingPeer(statuses[r], 0);
    } else {
      EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    }
  }
}

}  // namespace
}  // namespace herd::transport::nccl::testing
