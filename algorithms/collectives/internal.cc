#include "algorithms/collectives/internal.h"

#include <limits>
#include <string>

#include "absl/strings/str_format.h"
#include "transport/native_collectives.h"

namespace herd::collectives::internal {

absl::Status ValidateBase(std::string_view what, const CommonOptions& o, const void* data,
                          size_t count) {
  // ValidateCommon's message does not say which collective refused: prefix it.
  absl::Status s = ValidateCommon(o, data, count);
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", what, std::string(s.message())));
  }
  size_t es = DTypeSize(o.dtype);
  if (es == 0) {  // a value outside the enum, e.g. from a peer's or a user's config
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: unknown dtype %d", what, static_cast<int>(o.dtype)));
  }
  if (count > std::numeric_limits<size_t>::max() / es) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: count %u of %s elements overflows the byte size", what, count, DTypeName(o.dtype)));
  }
  return absl::OkStatus();
}

absl::Status ValidateOp(std::string_view what, DType dtype, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return absl::OkStatus();
    case ReduceOp::kAverage:
      if (IsFloating(dtype)) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: op avg needs a floating dtype, got %s (integer division would truncate; use sum "
          "and divide where the rounding is yours to choose)",
          what, DTypeName(dtype)));
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: unknown reduce op %d", what, static_cast<int>(op)));
}

absl::Status ValidateRoot(std::string_view what, int root, int size) {
  if (root < 0 || root >= size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: root %d is out of range [0, %d)", what, root, size));
  }
  return absl::OkStatus();
}

absl::Status ValidatePositive(std::string_view what, std::string_view field, size_t value) {
  if (value == 0) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s must be > 0", what, field));
  }
  return absl::OkStatus();
}

absl::Status RequireHostMemory(std::string_view what, const transport::Communicator& comm) {
  if (comm.memory() == transport::MemoryKind::kHost) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s needs host memory, but the %s communicator holds device memory; use the ring "
      "algorithms or 'native' there",
      what, comm.backend()));
}

absl::StatusOr<transport::NativeCollectives*> Native(std::string_view what,
                                                     transport::Communicator& comm) {
  transport::NativeCollectives* native = comm.native();
  if (native == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: the %s backend has no native collectives", what, comm.backend()));
  }
  return native;
}

// The pieces are at most ceil(elements / pieces) <= per_piece elements long, so none exceeds
// max_bytes (when max_bytes holds at least one element).
size_t PiecesFor(size_t elements, size_t element_size, size_t max_bytes) {
  size_t per_piece = max_bytes / element_size;
  if (per_piece == 0) per_piece = 1;
  size_t pieces = (elements + per_piece - 1) / per_piece;
  return pieces == 0 ? 1 : pieces;
}

absl::Status WaitRecv(transport::Communicator& comm, transport::Request& req, size_t expected,
                      Deadline deadline, std::string_view what) {
  // The request is emptied by a successful wait: keep what names it for the size check.
  int peer = req.empty() ? -1 : req.state()->peer;
  transport::Tag tag = req.empty() ? transport::Tag{} : req.state()->tag;
  absl::Status s = comm.wait(req, deadline);
  if (!s.ok()) return Fail(comm, std::move(s));
  // The transport already failed a longer message (OUT_OF_RANGE); a shorter one fits the
  // buffer and must be caught here, or the reduction would read stale scratch.
  if (req.received() != expected) {
    return Fail(comm, absl::InvalidArgumentError(absl::StrFormat(
                          "%s: rank %d sent %u bytes (%s), expected %u; every rank must pass "
                          "the same count, dtype and options",
                          what, peer, req.received(), tag.ToString(), expected)));
  }
  return absl::OkStatus();
}

absl::Status WaitSend(transport::Communicator& comm, transport::Request& req, Deadline deadline) {
  absl::Status s = comm.wait(req, deadline);
  if (!s.ok()) return Fail(comm, std::move(s));
  return absl::OkStatus();
}

absl::Status Fail(transport::Communicator& comm, absl::Status error) {
  // abort() only reports a failure to abort, and there is nothing better to do with it than
  // to return the original error.
  comm.abort(error).IgnoreError();
  return error;
}

}  // namespace herd::collectives::internal
