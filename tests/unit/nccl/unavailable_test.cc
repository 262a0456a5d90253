// A build without the CUDA toolkit: the NCCL entry points exist and say why they cannot work.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "transport/loopback/loopback_communicator.h"
#include "transport/nccl/nccl_communicator.h"
#include "transport/store/store.h"

namespace herd::transport {
namespace {

using ::testing::HasSubstr;

TEST(NcclUnavailableTest, SaysItWasBuiltWithoutNccl) {
  std::string why;
  EXPECT_FALSE(NcclUsable(&why));
  EXPECT_THAT(why, HasSubstr("built without NCCL"));
  EXPECT_FALSE(NcclUsable(nullptr));
}

TEST(NcclUnavailableTest, CreateReturnsUnimplemented) {
  auto comm = CreateNcclCommunicator(0, 1, MakeInProcessStore());
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("CUDA toolkit was not found"));
}

TEST(NcclUnavailableTest, FlushReturnsUnimplemented) {
  auto comms = MakeLoopbackCommunicators(1);
  EXPECT_EQ(FlushNccl(*comms[0], Deadline::After(std::chrono::seconds(1))).code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace herd::transport
