#pragma once
// CUDA and NCCL results as absl::Status, and herd's dtypes and reduce ops as NCCL's. Internal
// to the NCCL backend (needs the CUDA toolkit's headers).
//
// Every message names the call and carries the library's own error string, e.g.
// "ncclGroupEnd failed: ncclRemoteError (remote process exited or there was a network error);
// last NCCL error: ...". Status codes: no device / old driver -> FAILED_PRECONDITION, out of
// memory -> RESOURCE_EXHAUSTED, a peer or the network gone (ncclRemoteError, ncclSystemError)
// -> UNAVAILABLE, bad arguments -> INVALID_ARGUMENT, the rest -> INTERNAL.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/reduce.h"

namespace herd::transport::nccl {

// OK for cudaSuccess. Clears the runtime's non-sticky last error so it is not reported twice.
absl::Status CudaStatus(std::string_view call, cudaError_t error);

// OK for ncclSuccess (and ncclInProgress, which is not a failure). `comm`, when given, adds
// ncclGetLastError's detail.
absl::Status NcclStatus(std::string_view call, ncclResult_t result, ncclComm_t comm = nullptr);

// The NCCL element type of `dtype` (all of herd's dtypes have one).
absl::StatusOr<ncclDataType_t> NcclType(DType dtype);

// The NCCL reduction of `op` on `dtype`; avg needs a floating dtype (as the host collectives).
absl::StatusOr<ncclRedOp_t> NcclOp(DType dtype, ReduceOp op);

// `status` with `context` in front of its message, same code; OK stays OK.
absl::Status WithContext(std::string_view context, const absl::Status& status);

}  // namespace herd::transport::nccl
