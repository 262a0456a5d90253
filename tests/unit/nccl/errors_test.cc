// CUDA and NCCL results as absl::Status, and herd's types as NCCL's. Needs the toolkit's
// libraries but no GPU.

#include "transport/nccl/nccl_errors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace herd::transport::nccl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(NcclErrorsTest, NcclResultsKeepTheCallAndNcclsText) {
  EXPECT_TRUE(NcclStatus("ncclSend", ncclSuccess).ok());
  // In progress is how a non-blocking communicator says "not yet", not a failure.
  EXPECT_TRUE(NcclStatus("ncclGroupEnd", ncclInProgress).ok());

  absl::Status remote = NcclStatus("ncclGroupEnd", ncclRemoteError);
  EXPECT_EQ(remote.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(remote.message()), AllOf(HasSubstr("ncclGroupEnd failed"),
                                                   HasSubstr(ncclGetErrorString(ncclRemoteError))));
  EXPECT_EQ(NcclStatus("ncclSend", ncclInvalidArgument).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclStatus("ncclSend", ncclInvalidUsage).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(NcclStatus("ncclSend", ncclInternalError).code(), absl::StatusCode::kInternal);
}

// cudaErrorInsufficientDriver is what this backend sees on a machine without a GPU driver.
TEST(NcclErrorsTest, CudaErrorsNameTheCallAndTheError) {
  EXPECT_TRUE(CudaStatus("cudaMalloc", cudaSuccess).ok());
  absl::Status driver = CudaStatus("cudaGetDeviceCount", cudaErrorInsufficientDriver);
  EXPECT_EQ(driver.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(driver.message()), AllOf(HasSubstr("cudaGetDeviceCount failed"),
                                                   HasSubstr("cudaErrorInsufficientDriver")));
  EXPECT_EQ(CudaStatus("cudaGetDeviceCount", cudaErrorNoDevice).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaStatus("cudaMalloc", cudaErrorMemoryAllocation).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CudaStatus("cudaMemcpy", cudaErrorIllegalAddress).code(), absl::StatusCode::kInternal);
}

TEST(NcclErrorsTest, EveryDTypeHasAnNcclType) {
  EXPECT_EQ(*NcclType(DType::kFloat32), ncclFloat32);
  EXPECT_EQ(*NcclType(DType::kFloat64), ncclFloat64);
  EXPECT_EQ(*NcclType(DType::kFloat16), ncclFloat16);
  EXPECT_EQ(*NcclType(DType::kBFloat16), ncclBfloat16);
  EXPECT_EQ(*NcclType(DType::kInt32), ncclInt32);
  EXPECT_EQ(*NcclType(DType::kInt64), ncclInt64);
  EXPECT_EQ(*NcclType(DType::kUInt8), ncclUint8);
  EXPECT_EQ(NcclType(static_cast<DType>(99)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NcclErrorsTest, OpsMapAndAverageNeedsAFloatingType) {
  EXPECT_EQ(*NcclOp(DType::kFloat32, ReduceOp::kSum), ncclSum);
  EXPECT_EQ(*NcclOp(DType::kFloat16, ReduceOp::kAverage), ncclAvg);
  EXPECT_EQ(*NcclOp(DType::kBFloat16, ReduceOp::kAverage), ncclAvg);
  EXPECT_EQ(*NcclOp(DType::kInt32, ReduceOp::kMin), ncclMin);
  EXPECT_EQ(*NcclOp(DType::kInt64, ReduceOp::kMax), ncclMax);
  absl::StatusOr<ncclRedOp_t> avg_int = NcclOp(DType::kInt32, ReduceOp::kAverage);
  EXPECT_EQ(avg_int.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(avg_int.status().message()), HasSubstr("floating"));
  EXPECT_EQ(NcclOp(DType::kFloat32, static_cast<ReduceOp>(42)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(NcclErrorsTest, WithContextKeepsTheCode) {
  absl::Status s = WithContext("recv of 8 bytes from rank 2", absl::UnavailableError("gone"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(std::string(s.message()), "recv of 8 bytes from rank 2: gone");
  EXPECT_TRUE(WithContext("x", absl::OkStatus()).ok());
}

}  // namespace
}  // namespace herd::transport::nccl
