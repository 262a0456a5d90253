// The NCCL communicator's native collectives, with herd's chunk layout (padded_layout.h).
//
// AllReduce has no chunks and always runs in place. ReduceScatter and AllGather run in place when
// count % P == 0 (chunk r is then exactly NCCL's r-th slice). Otherwise the vector goes through a
// padded scratch buffer of P * ceil(count / P) elements:
//   reduce-scatter: copy all chunks in (count elements), ncclReduceScatter in place in the
//                   scratch, copy this rank's chunk out (count / P elements);
//   all-gather:     copy this rank's chunk in, ncclAllGather in place, copy all chunks out.
// That is (1 + 1/P) * count elements of device-to-device copies per call, about 2(1 + 1/P)
// count * element size bytes of memory traffic, plus the scratch memory.

#include <utility>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "transport/nccl/nccl_comm.h"
#include "transport/nccl/nccl_errors.h"
#include "transport/nccl/padded_layout.h"
#include "transport/nccl/poll_backoff.h"

namespace herd::transport::nccl {
namespace {

// Checks shared by the three collectives; returns the NCCL type.
absl::StatusOr<ncclDataType_t> Validate(std::string_view what, const void* data, size_t count,
                                        DType dtype) {
  absl::StatusOr<ncclDataType_t> type = NcclType(dtype);
  if (!type.ok()) return WithContext(what, type.status());
  if (count > 0 && data == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: data is null", what));
  }
  if (count > SIZE_MAX / DTypeSize(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: count %u overflows the byte size", what, count));
  }
  return *type;
}

}  // namespace

absl::Status NcclCommunicator::ReduceScatter(void* data, size_t count, DType dtype, ReduceOp op,
                                             Deadline deadline) {
  const std::string what =
      absl::StrFormat("NCCL reduce-scatter (%s) of %u %s elements on rank %d of %d",
                      ReduceOpName(op), count, DTypeName(dtype), rank_, size_);
  HERD_ASSIGN_OR_RETURN(ncclDataType_t type, Validate(what, data, count, dtype));
  absl::StatusOr<ncclRedOp_t> red = NcclOp(dtype, op);
  if (!red.ok()) return WithContext(what, red.status());
  if (count == 0) return absl::OkStatus();

  const PaddedLayout layout(count, size_);
  const size_t es = DTypeSize(dtype), m = layout.stride();
  auto* base = static_cast<std::byte*>(data);
  const ncclRedOp_t nop = *red;
  if (!layout.needs_padding()) {
    // Chunk rank_ is NCCL's output slice: recvbuff = sendbuff + rank * recvcount is in place.
    Issue issue = [=, this](bool* in_progress) {
      ncclResult_t res =
          ncclReduceScatter(base, base + rank_ * m * es, m, type, nop, comm_, stream_);
      *in_progress = res == ncclInProgress;
      return NcclStatus("ncclReduceScatter", res, comm_);
    };
    return RunCollective(what, count * es, deadline, nullptr, issue, nullptr);
  }
  StreamWork before = [=, this] {
    HERD_RETURN_IF_ERROR(EnsureScratchLocked(layout.padded_count() * es));
    return CopyPaddedLocked(base, count, es, /*to_padded=*/true);
  };
  Issue issue = [=, this](bool* in_progress) {
    ncclResult_t res =
        ncclReduceScatter(scratch_, scratch_ + rank_ * m * es, m, type, nop, comm_, stream_);
    *in_progress = res == ncclInProgress;
    return NcclStatus("ncclReduceScatter", res, comm_);
  };
  StreamWork after = [=, this] {
    return CudaStatus(
        "cudaMemcpyAsync (padded chunk out)",
        cudaMemcpyAsync(base + layout.ChunkBegin(rank_) * es, scratch_ + rank_ * m * es,
                        layout.ChunkSize(rank_) * es, cudaMemcpyDeviceToDevice, stream_));
  };
  return RunCollective(what, count * es, deadline, before, issue, after);
}

absl::Status NcclCommunicator::AllGather(void* data, size_t count, DType dtype, Deadline deadline) {
  const std::string what = absl::StrFormat("NCCL all-gather of %u %s elements on rank %d of %d",
                                           count, DTypeName(dtype), rank_, size_);
  HERD_ASSIGN_OR_RETURN(ncclDataType_t type, Validate(what, data, count, dtype));
  if (count == 0) return absl::OkStatus();

  const PaddedLayout layout(count, size_);
  const size_t es = DTypeSize(dtype), m = layout.stride();
  auto* base = static_cast<std::byte*>(data);
  if (!layout.needs_padding()) {
    // sendbuff = recvbuff + rank * sendcount: NCCL's in-place all-gather.
    Issue issue = [=, this](bool* in_progress) {
      ncclResult_t res = ncclAllGather(base + rank_ * m * es, base, m, type, comm_, stream_);
      *in_progress = res == ncclInProgress;
      return NcclStatus("ncclAllGather", res, comm_);
    };
    return RunCollective(what, count * es, deadline, nullptr, issue, nullptr);
  }
  StreamWork before = [=, this] {
    HERD_RETURN_IF_ERROR(EnsureScratchLocked(layout.padded_count() * es));
    return CudaStatus(
        "cudaMemcpyAsync (chunk into padded slot)",
        cudaMemcpyAsync(scratch_ + rank_ * m * es, base + layout.ChunkBegin(rank_) * es,
                        layout.ChunkSize(rank_) * es, cudaMemcpyDeviceToDevice, stream_));
  };
  Issue issue = [=, this](bool* in_progress) {
    ncclResult_t res = ncclAllGather(scratch_ + rank_ * m * es, scratch_, m, type, comm_, stream_);
    *in_progress = res == ncclInProgress;
    return NcclStatus("ncclAllGather", res, comm_);
  };
  StreamWork after = [=, this] { return CopyPaddedLocked(base, count, es, /*to_padded=*/false); };
  return RunCollective(what, count * es, deadline, before, issue, after);
}

absl::Status NcclCommunicator::AllReduce(void* data, size_t count, DType dtype, ReduceOp op,
                                         Deadline deadline) {
  const std::string what =
      absl::StrFormat("NCCL all-reduce (%s) of %u %s elements on rank %d of %d", ReduceOpName(op),
                      count, DTypeName(dtype), rank_, size_);
  HERD_ASSIGN_OR_RETURN(ncclDataType_t type, Validate(what, data, count, dtype));
  absl::StatusOr<ncclRedOp_t> red = NcclOp(dtype, op);
  if (!red.ok()) return WithContext(what, red.status());
  if (count == 0) return absl::OkStatus();
  const ncclRedOp_t nop = *red;
  Issue issue = [=, this](bool* in_progress) {
    ncclResult_t res = ncclAllReduce(data, data, count, type, nop, comm_, stream_);
    *in_progress = res == ncclInProgress;
    return NcclStatus("ncclAllReduce", res, comm_);
  };
  return RunCollective(what, count * DTypeSize(dtype), deadline, nullptr, issue, nullptr);
}

// The collective is a request like the point-to-point ones (one event after it), so its wait
// shares WaitUntilDone: the same deadline, async-error checks and abort.
absl::Status NcclCommunicator::RunCollective(std::string what, size_t bytes, Deadline deadline,
                                             StreamWork before, Issue issue, StreamWork after) {
  HERD_RETURN_IF_ERROR(WithContext(what, SelectDevice()));
  auto r = std::make_shared<NcclRequest>(this, std::move(what), bytes);
  PollBackoff backoff;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!aborted_.ok()) {
        return absl::Status(aborted_.code(),
                            absl::StrFormat("%s: the communicator was aborted: %s", r->what,
                                            std::string(aborted_.message())));
      }
      absl::Status s = ProgressLocked(/*launch_queued=*/true);
      if (s.ok() && enqueuing_.empty() && queued_.empty()) {
        // NCCL is idle and everything posted before this collective is issued.
        if (before) s = before();
        if (s.ok()) s = LaunchLocked({r}, issue, std::move(after));
        if (s.ok()) break;
      }
      if (!s.ok()) {
        absl::Status err = WithContext(r->what, s);
        AbortLocked(err);
        return err;
      }
      if (deadline.expired()) {
        absl::Status err = absl::DeadlineExceededError(absl::StrFormat(
            "%s: deadline exceeded while NCCL was still enqueuing earlier operations; the NCCL "
            "communicator was aborted",
            r->what));
        AbortLocked(err);
        return err;
      }
    }
    backoff.Wait(deadline);
  }
  return WaitUntilDone(*r, deadline);
}

absl::Status NcclCommunicator::EnsureScratchLocked(size_t bytes) {
  if (bytes <= scratch_bytes_) return absl::OkStatus();
  // Stream-ordered: the old buffer is freed after the work already queued that uses it, and
  // neither call synchronises the device (cudaFree would, and could block on a stuck kernel).
  if (scratch_ != nullptr) {
    HERD_RETURN_IF_ERROR(CudaStatus("cudaFreeAsync (scratch)", cudaFreeAsync(scratch_, stream_)));
    scratch_ = nullptr;
    scratch_bytes_ = 0;
  }
  void* p = nullptr;
  HERD_RETURN_IF_ERROR(
      CudaStatus(absl::StrFormat("cudaMallocAsync of %u bytes (padding scratch)", bytes),
                 cudaMallocAsync(&p, bytes, stream_)));
  scratch_ = static_cast<std::byte*>(p);
  scratch_bytes_ = bytes;
  return absl::OkStatus();
}

absl::Status NcclCommunicator::CopyPaddedLocked(std::byte* packed, size_t count,
                                                size_t element_size, bool to_padded) {
  const PaddedLayout layout(count, size_);
  const size_t es = element_size;
  for (const PaddedLayout::Block& b : layout.Blocks()) {
    std::byte* packed_at = packed + b.packed_offset * es;
    std::byte* padded_at = scratch_ + b.padded_offset * es;
    cudaError_t e =
        to_padded
            ? cudaMemcpy2DAsync(padded_at, b.padded_pitch * es, packed_at, b.packed_pitch * es,
                                b.width * es, b.rows, cudaMemcpyDeviceToDevice, stream_)
            : cudaMemcpy2DAsync(packed_at, b.packed_pitch * es, padded_at, b.padded_pitch * es,
                                b.width * es, b.rows, cudaMemcpyDeviceToDevice, stream_);
    HERD_RETURN_IF_ERROR(CudaStatus(to_padded ? "cudaMemcpy2DAsync (chunks into padded slots)"
                                              : "cudaMemcpy2DAsync (padded slots out to chunks)",
                                    e));
  }
  return absl::OkStatus();
}

}  // namespace herd::transport::nccl
