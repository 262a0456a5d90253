// CreateNcclCommunicator: argument checks and the no-device path run on every machine; the rest
// needs a GPU and is skipped, with the reason, where there is none.

#include <chrono>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/nccl/nccl_test_util.h"
#include "transport/nccl/nccl_communicator.h"
#include "transport/store/store.h"

namespace herd::transport::nccl::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(NcclBootstrapTest, RejectsBadArgumentsBeforeTouchingCuda) {
  auto store = MakeInProcessStore();
  for (auto [rank, size] : {std::pair{-1, 2}, std::pair{2, 2}, std::pair{0, 0}}) {
    auto comm = CreateNcclCommunicator(rank, size, store);
    ASSERT_FALSE(comm.ok());
    EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument) << comm.status();
  }
  auto comm = CreateNcclCommunicator(0, 1, nullptr);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("store is null"));
}

TEST(NcclBootstrapTest, FailsCleanlyWithoutDevice) {
  std::string why;
  if (NcclUsable(&why))
    GTEST_SKIP() << "a CUDA device is usable here: this test is for machines without one";
  EXPECT_FALSE(why.empty());
  // Rank 1 would otherwise wait up to a minute for rank 0's id: it must fail before that.
  const auto start = std::chrono::steady_clock::now();
  auto comm = CreateNcclCommunicator(1, 2, MakeInProcessStore());
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kFailedPrecondition) << comm.status();
  EXPECT_THAT(std::string(comm.status().message()),
              AllOf(HasSubstr("rank 1 of 2"), HasSubstr(why)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(NcclBootstrapTest, DeviceOutOfRangeIsRejected) {
  HERD_REQUIRE_GPUS(1);
  NcclOptions options;
  options.device = VisibleDevices();
  auto comm = CreateNcclCommunicator(0, 1, MakeInProcessStore(), options);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument) << comm.status();
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("CUDA device"));
}

TEST(NcclBootstrapTest, SingleRankCommunicator) {
  HERD_REQUIRE_GPUS(1);
  auto comm = CreateNcclCommunicator(0, 1, MakeInProcessStore());
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->rank(), 0);
  EXPECT_EQ((*comm)->size(), 1);
  EXPECT_EQ((*comm)->backend(), "nccl");
  EXPECT_EQ((*comm)->memory(), MemoryKind::kCuda);
  EXPECT_NE((*comm)->native(), nullptr);
  EXPECT_TRUE((*comm)->status().ok());
}

// Two communicators on one key would join each other's NCCL clique: the second must be refused
// with advice, and a fresh prefix must work.
TEST(NcclBootstrapTest, ReusedPrefixIsRefused) {
  HERD_REQUIRE_GPUS(1);
  auto store = MakeInProcessStore();
  auto first = CreateNcclCommunicator(0, 1, store);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = CreateNcclCommunicator(0, 1, store);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("prefix"));
  NcclOptions fresh;
  fresh.prefix = "herd/epoch-2";
  EXPECT_TRUE(CreateNcclCommunicator(0, 1, store, fresh).ok());
}

// Another program (or a stale run) wrote the key: the id is checked, not copied blindly into
// NCCL, which would then try to connect to whatever the bytes say.
TEST(NcclBootstrapTest, MalformedIdInTheStoreIsRejected) {
  HERD_REQUIRE_GPUS(1);
  auto store = MakeInProcessStore();
  ASSERT_TRUE(store->Set("herd/nccl/unique_id", "not an id").ok());
  NcclOptions options;
  options.device = 0;
  auto comm = CreateNcclCommunicator(1, 2, store, options);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument) << comm.status();
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("herd/nccl/unique_id"));
}

TEST(NcclBootstrapTest, MissingRankZeroEndsAtTheDeadline) {
  HERD_REQUIRE_GPUS(1);
  NcclOptions options;
  options.device = 0;
  options.bootstrap_timeout = std::chrono::milliseconds(300);
  auto comm = CreateNcclCommunicator(1, 2, MakeInProcessStore(), options);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("rank 0"));
}

TEST(NcclBootstrapTest, MissingPeerAbortsTheInitAtTheDeadline) {
  HERD_REQUIRE_GPUS(1);
  // Rank 0 of 2 publishes its id, but rank 1 never starts: the non-blocking init must give up.
  NcclOptions options;
  options.bootstrap_timeout = std::chrono::seconds(2);
  const auto start = std::chrono::steady_clock::now();
  auto comm = CreateNcclCommunicator(0, 2, MakeInProcessStore(), options);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("ncclCommInitRankConfig"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
}  // namespace herd::transport::nccl::testing
