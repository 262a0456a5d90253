#include "transport/nccl/nccl_errors.h"

#include <string>

#include "absl/strings/str_format.h"

namespace herd::transport::nccl {

absl::Status CudaStatus(std::string_view call, cudaError_t error) {
  if (error == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();  // reset the non-sticky error this call left behind
  std::string msg = absl::StrFormat("%s failed: %s (%s)", call, cudaGetErrorName(error),
                                    cudaGetErrorString(error));
  // The codes say what a caller can do: FAILED_PRECONDITION is about this machine (no device,
  // old driver), RESOURCE_EXHAUSTED may pass with smaller buckets, INTERNAL is a bug or a GPU
  // fault and leaves the context unusable.
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
      return absl::FailedPreconditionError(msg);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(msg);
    case cudaErrorInvalidValue:
      return absl::InvalidArgumentError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status NcclStatus(std::string_view call, ncclResult_t result, ncclComm_t comm) {
  if (result == ncclSuccess || result == ncclInProgress) return absl::OkStatus();
  std::string msg = absl::StrFormat("%s failed: %s", call, ncclGetErrorString(result));
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && last[0] != '\0') msg += absl::StrFormat("; last NCCL error: %s", last);
  }
  // ncclRemoteError and ncclSystemError are what a dead peer or a broken link look like from
  // here: UNAVAILABLE, as the other backends report a lost peer.
  switch (result) {
    case ncclInvalidArgument:
      return absl::InvalidArgumentError(msg);
    case ncclInvalidUsage:
      return absl::FailedPreconditionError(msg);
    case ncclRemoteError:
    case ncclSystemError:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::StatusOr<ncclDataType_t> NcclType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kUInt8:
      return ncclUint8;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown dtype %d for NCCL", static_cast<int>(dtype)));
}

// ncclAvg divides inside NCCL (for floats it may scale before summing); the host collectives
// refuse avg on integers because the division would truncate, and so does this.
absl::StatusOr<ncclRedOp_t> NcclOp(DType dtype, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kAverage:
      if (IsFloating(dtype)) return ncclAvg;
      return absl::InvalidArgumentError(absl::StrFormat(
          "op avg needs a floating dtype, got %s (integer division would truncate; use sum and "
          "divide where the rounding is yours to choose)",
          DTypeName(dtype)));
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown reduce op %d for NCCL", static_cast<int>(op)));
}

absl::Status WithContext(std::string_view context, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrFormat("%s: %s", context, std::string(status.message())));
}

}  // namespace herd::transport::nccl
