// Pairwise all-to-all: in step s (1 <= s < P) rank r sends input chunk r+s to rank r+s and
// receives output block r-s from rank r-s; step 0 is the local copy of chunk r. Every rank talks
// to one peer per step, so no rank is flooded by P-1 senders at once. Messages per rank: P-1
// each way. Extra memory: none (out of place by contract).

#include <cstdint>
#include <cstring>

#include "absl/strings/str_format.h"
#include "algorithms/collectives/alltoall.h"
#include "algorithms/collectives/internal.h"
#include "common/status.h"

namespace herd::collectives {

using transport::Communicator;
using transport::OpKind;
using transport::Request;
using transport::Tag;

absl::Status PairwiseAllToAll(const AllToAllOptions& o) {
  constexpr std::string_view kWhat = "pairwise all-to-all";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.input, o.count));
  HERD_RETURN_IF_ERROR(internal::RequireHostMemory(kWhat, *o.comm));
  Communicator& comm = *o.comm;
  const int P = comm.size(), r = comm.rank();
  const size_t esize = DTypeSize(o.dtype);
  const size_t block = ChunkSize(o.count, P, r) * esize;  // bytes of each output block
  const size_t in_bytes = o.count * esize, out_bytes = block * P;
  if (out_bytes > 0 && o.output == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: output is null but %u bytes are to be received", kWhat, out_bytes));
  }
  // Compared as integers: ranges in unrelated buffers have no defined pointer order.
  const auto in = reinterpret_cast<uintptr_t>(o.input);
  const auto out = reinterpret_cast<uintptr_t>(o.output);
  if (in_bytes > 0 && out_bytes > 0 && in < out + out_bytes && out < in + in_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: input [%p, +%u) and output [%p, +%u) overlap; the operation is out of place", kWhat,
        o.input, in_bytes, o.output, out_bytes));
  }
  if (o.count == 0) return absl::OkStatus();

  const auto* input = static_cast<const std::byte*>(o.input);
  auto* output = static_cast<std::byte*>(o.output);
  auto chunk = [&](int c) {
    return AsBytes(input + ChunkBegin(o.count, P, c) * esize, ChunkSize(o.count, P, c) * esize);
  };
  // Step 0: this rank's own block needs no message.
  if (block > 0) std::memcpy(output + r * block, chunk(r).data(), block);
  for (int s = 1; s < P; ++s) {
    const int to = (r + s) % P, from = (r - s + P) % P;
    const Tag tag = Tag::Make(OpKind::kAllToAll, o.tag, uint32_t(s));
    // Receive first, so the peer's send finds a posted buffer (rendezvous transports).
    Request recv, send;
    if (block > 0) recv = comm.irecv(from, tag, AsMutableBytes(output + from * block, block));
    if (!chunk(to).empty()) send = comm.isend(to, tag, chunk(to));
    if (block > 0) HERD_RETURN_IF_ERROR(internal::WaitRecv(comm, recv, block, deadline, kWhat));
    HERD_RETURN_IF_ERROR(internal::WaitSend(comm, send, deadline));
  }
  return absl::OkStatus();
}

}  // namespace herd::collectives
