// Bruck all-gather for any P, in place on `data` without a temporary vector.
//
// Rank r keeps `data` rotated during the steps: physical element x holds logical element
// (x + ChunkBegin(r)) mod count, so the buffer reads chunk r, r+1, ..., P-1, 0, ..., r-1 and
// "position q" (chunk r+q) is a contiguous range starting at
//   off(q) = ChunkBegin(r+q) - ChunkBegin(r)            if r+q < P,
//            count - ChunkBegin(r) + ChunkBegin(r+q-P)  otherwise.
//   start   move chunk r to the front (memmove; positions 1.. are not valid yet).
//   step i  with d = 2^i and n = min(d, P-d): send positions [0, n) to rank r-d and receive
//           rank r+d's positions [0, n), which are this rank's positions [d, d+n).
//           After the step positions [0, d+n) are valid; after ceil(log2 P) steps all are.
//   end     rotate right by ChunkBegin(r) elements (std::rotate: in place, O(1) memory).
// Messages per rank: ceil(log2 P) each way. Extra memory: none.

#include <algorithm>
#include <cstring>

#include "algorithms/collectives/allgather.h"
#include "algorithms/collectives/internal.h"
#include "common/status.h"

namespace herd::collectives {

using transport::Communicator;
using transport::OpKind;
using transport::Request;
using transport::Tag;

absl::Status BruckAllGather(const AllGatherOptions& o) {
  return internal::BruckAllGatherOfKind(o, OpKind::kAllGather);
}

absl::Status internal::BruckAllGatherOfKind(const AllGatherOptions& o, OpKind kind) {
  constexpr std::string_view kWhat = "bruck all-gather";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::RequireHostMemory(kWhat, *o.comm));
  Communicator& comm = *o.comm;
  const int P = comm.size(), r = comm.rank();
  if (P == 1 || o.count == 0) return absl::OkStatus();

  auto* data = static_cast<std::byte*>(o.data);
  const size_t esize = DTypeSize(o.dtype), count = o.count;
  const size_t own_begin = ChunkBegin(count, P, r);
  // Element offset of position q in the rotated buffer; off(P) = count.
  auto off = [&](int q) -> size_t {
    if (q >= P) return count;
    if (r + q < P) return ChunkBegin(count, P, r + q) - own_begin;
    return count - own_begin + ChunkBegin(count, P, r + q - P);
  };

  if (own_begin > 0) {
    std::memmove(data, data + own_begin * esize, ChunkSize(count, P, r) * esize);
  }
  for (int d = 1, step = 0; d < P; d <<= 1, ++step) {
    const int n = std::min(d, P - d);
    const Tag tag = Tag::Make(kind, o.tag, uint32_t(step));
    const size_t out_bytes = off(n) * esize;
    const size_t in_begin = off(d) * esize, in_bytes = off(d + n) * esize - in_begin;
    Request recv, send;
    if (in_bytes > 0) {
      recv = comm.irecv((r + d) % P, tag, AsMutableBytes(data + in_begin, in_bytes));
    }
    if (out_bytes > 0) send = comm.isend((r - d + P) % P, tag, AsBytes(data, out_bytes));
    if (in_bytes > 0) {
      HERD_RETURN_IF_ERROR(internal::WaitRecv(comm, recv, in_bytes, deadline, kWhat));
    }
    HERD_RETURN_IF_ERROR(internal::WaitSend(comm, send, deadline));
  }
  // Logical element (x + own_begin) sits at x: rotating right by own_begin puts it in place.
  if (own_begin > 0) {
    std::rotate(data, data + (count - own_begin) * esize, data + count * esize);
  }
  return absl::OkStatus();
}

}  // namespace herd::collectives
