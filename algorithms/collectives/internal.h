#pragma once
// Pieces every collective of this folder shares: option checks, byte arithmetic on the chunk
// layout, and the waits that turn a failure into "abort the communicator, return the error".
// Internal to algorithms/collectives (not part of the API).

#include <cstddef>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "algorithms/collectives/options.h"
#include "common/bytes.h"
#include "common/deadline.h"
#include "transport/communicator.h"

namespace herd::collectives {
struct AllGatherOptions;
}  // namespace herd::collectives

namespace herd::collectives::internal {

// --- Validation (INVALID_ARGUMENT, nothing sent). `what` names the operation, e.g.
// "ring reduce-scatter", and prefixes every message.

// ValidateCommon plus: a known dtype, and count * element size fits in size_t.
absl::Status ValidateBase(std::string_view what, const CommonOptions& o, const void* data,
                          size_t count);
// A known op that makes sense for the dtype: avg needs a floating dtype (integer division
// would truncate); sum/min/max work for every dtype.
absl::Status ValidateOp(std::string_view what, DType dtype, ReduceOp op);
absl::Status ValidateRoot(std::string_view what, int root, int size);
// block_bytes / segment_bytes: must be > 0.
absl::Status ValidatePositive(std::string_view what, std::string_view field, size_t value);
// FAILED_PRECONDITION unless the communicator's memory is host memory (the algorithms that read
// or reduce the buffer on the CPU).
absl::Status RequireHostMemory(std::string_view what, const transport::Communicator& comm);
// The backend's native collectives, or FAILED_PRECONDITION saying it has none.
absl::StatusOr<transport::NativeCollectives*> Native(std::string_view what,
                                                     transport::Communicator& comm);

// --- Layout.

// Piece i of [0, n) split in `parts` near-equal pieces (ChunkBegin's rule, in size_t so that
// segment counts never overflow an int).
inline size_t SplitBegin(size_t n, size_t parts, size_t i) {
  size_t base = n / parts, extra = n % parts;
  return i * base + (i < extra ? i : extra);
}
inline size_t SplitSize(size_t n, size_t parts, size_t i) {
  return n / parts + (i < n % parts ? 1 : 0);
}
// Number of pieces to cut `elements` into so that none exceeds max_bytes (at least one element
// per piece even when max_bytes is smaller than an element); 1 when elements == 0.
size_t PiecesFor(size_t elements, size_t element_size, size_t max_bytes);

inline std::byte* At(void* base, size_t byte_offset) {
  return static_cast<std::byte*>(base) + byte_offset;
}

// --- Waits. Every failure aborts the communicator (so no backend touches a buffer of this call
// afterwards) and is returned unchanged: the transport's message already names the peer, the
// direction and the tag.

// Waits for a receive and checks that exactly `expected` bytes arrived; a shorter message means
// the peer called with another count or dtype (INVALID_ARGUMENT naming the peer).
absl::Status WaitRecv(transport::Communicator& comm, transport::Request& req, size_t expected,
                      Deadline deadline, std::string_view what);
absl::Status WaitSend(transport::Communicator& comm, transport::Request& req, Deadline deadline);
// Aborts the communicator with `error` and returns it.
absl::Status Fail(transport::Communicator& comm, absl::Status error);

// --- Shared by several algorithms.

// BruckAllGather with its messages tagged `kind` instead of kAllGather (the host-layout
// discovery runs it on records, apart from any user all-gather of the same id).
absl::Status BruckAllGatherOfKind(const AllGatherOptions& o, transport::OpKind kind);

// The ring reduce-scatter and all-gather of ring.cc over chunks anywhere in `data` (chunk c,
// owned by rank c, is `count` elements from element `begin`), tagged kReduceScatter /
// kAllGather with `tag`. The reduce-scatter divides an average by comm.size(): pass kSum and
// divide yourself when the contributors are more. Errors abort the communicator.
struct Chunk {
  size_t begin = 0;
  size_t count = 0;
};
absl::Status RingReduceScatterChunks(transport::Communicator& comm, void* data,
                                     std::vector<Chunk> chunks, DType dtype, ReduceOp op,
                                     uint32_t tag, size_t segment_bytes, Deadline deadline);
absl::Status RingAllGatherChunks(transport::Communicator& comm, void* data,
                                 std::vector<Chunk> chunks, DType dtype, uint32_t tag,
                                 size_t segment_bytes, Deadline deadline);

}  // namespace herd::collectives::internal
