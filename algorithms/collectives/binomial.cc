// Binomial-tree (minimum spanning tree) broadcast and reduce, and all-reduce = reduce to rank 0
// then broadcast from it. ceil(log2 P) rounds of whole messages: the fewest steps, so the
// algorithms for short, latency-bound vectors; long ones belong to the ring or the pipeline.
//
// Ranks are renumbered relative to the root, v = (rank - root) mod P. In the tree, v's parent is
// v minus its lowest set bit and its children are v + m for every power of two m below that bit
// (and below P - v); the root (v = 0) has children 1, 2, 4, ... < P. Broadcast: receive from
// the parent, then send to the children, largest subtree first. Reduce runs the same tree the
// other way: receive from the children, smallest subtree first, reducing each into data, then
// send the partial result to the parent.

#include <memory>
#include <vector>

#include "algorithms/collectives/allreduce.h"
#include "algorithms/collectives/broadcast.h"
#include "algorithms/collectives/internal.h"
#include "algorithms/collectives/reduce.h"
#include "common/status.h"

namespace herd::collectives {
namespace {

using transport::Communicator;
using transport::OpKind;
using transport::Request;
using transport::Tag;

absl::Status TreeBroadcast(Communicator& comm, std::byte* data, size_t bytes, int root, Tag tag,
                           Deadline deadline, std::string_view what) {
  const int P = comm.size(), v = (comm.rank() - root + P) % P;
  auto real = [&](int vr) { return (vr + root) % P; };
  // The lowest set bit of v is the round in which v receives; the root has none and ends the
  // loop with mask >= P.
  int mask = 1;
  while (mask < P) {
    if (v & mask) {
      Request recv = comm.irecv(real(v - mask), tag, AsMutableBytes(data, bytes));
      HERD_RETURN_IF_ERROR(internal::WaitRecv(comm, recv, bytes, deadline, what));
      break;
    }
    mask <<= 1;
  }
  // Children v + m for m below that bit; sends are posted together and waited at the end.
  std::vector<Request> sends;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < P) sends.push_back(comm.isend(real(v + mask), tag, AsBytes(data, bytes)));
  }
  return comm.WaitAll(absl::MakeSpan(sends), deadline);
}

// Leaves the reduction in the root's data (not yet divided for an average).
absl::Status TreeReduce(Communicator& comm, std::byte* data, size_t count, DType dtype, ReduceOp op,
                        int root, Tag tag, Deadline deadline, std::string_view what) {
  const int P = comm.size(), v = (comm.rank() - root + P) % P;
  const size_t bytes = count * DTypeSize(dtype);
  auto real = [&](int vr) { return (vr + root) % P; };
  std::unique_ptr<std::byte[]> incoming;  // one copy of the vector, on ranks with children
  // Round m: ranks with bit m set send their partial result to v - m and are done; the others
  // receive from v + m (if it exists) and go on.
  for (int mask = 1; mask < P; mask <<= 1) {
    if (v & mask) {
      Request send = comm.isend(real(v - mask), tag, AsBytes(data, bytes));
      return internal::WaitSend(comm, send, deadline);
    }
    if (v + mask < P) {
      if (!incoming) incoming = std::make_unique_for_overwrite<std::byte[]>(bytes);
      Request recv = comm.irecv(real(v + mask), tag, AsMutableBytes(incoming.get(), bytes));
      HERD_RETURN_IF_ERROR(internal::WaitRecv(comm, recv, bytes, deadline, what));
      ReduceInto(dtype, op, data, incoming.get(), count);
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTree(std::string_view what, const CommonOptions& o, const void* data,
                          size_t count) {
  HERD_RETURN_IF_ERROR(internal::ValidateBase(what, o, data, count));
  return internal::RequireHostMemory(what, *o.comm);
}

}  // namespace

absl::Status BinomialBroadcast(const BroadcastOptions& o) {
  constexpr std::string_view kWhat = "binomial broadcast";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(ValidateTree(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidateRoot(kWhat, o.root, o.comm->size()));
  if (o.comm->size() == 1 || o.count == 0) return absl::OkStatus();
  return TreeBroadcast(*o.comm, static_cast<std::byte*>(o.data), o.count * DTypeSize(o.dtype),
                       o.root, Tag::Make(OpKind::kBroadcast, o.tag, 0), deadline, kWhat);
}

absl::Status BinomialReduce(const ReduceOptions& o) {
  constexpr std::string_view kWhat = "binomial reduce";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(ValidateTree(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidateOp(kWhat, o.dtype, o.op));
  HERD_RETURN_IF_ERROR(internal::ValidateRoot(kWhat, o.root, o.comm->size()));
  Communicator& comm = *o.comm;
  if (comm.size() == 1 || o.count == 0) return absl::OkStatus();
  HERD_RETURN_IF_ERROR(TreeReduce(comm, static_cast<std::byte*>(o.data), o.count, o.dtype, o.op,
                                  o.root, Tag::Make(OpKind::kReduce, o.tag, 0), deadline, kWhat));
  if (comm.rank() == o.root) FinishReduction(o.dtype, o.op, o.data, o.count, comm.size());
  return absl::OkStatus();
}

absl::Status BinomialTreeAllReduce(const AllReduceOptions& o) {
  constexpr std::string_view kWhat = "binomial-tree all-reduce";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(ValidateTree(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidateOp(kWhat, o.dtype, o.op));
  Communicator& comm = *o.comm;
  if (comm.size() == 1 || o.count == 0) return absl::OkStatus();
  auto* data = static_cast<std::byte*>(o.data);
  // Reduce messages use step 0, broadcast messages step 1.
  HERD_RETURN_IF_ERROR(TreeReduce(comm, data, o.count, o.dtype, o.op, 0,
                                  Tag::Make(OpKind::kAllReduce, o.tag, 0), deadline, kWhat));
  if (comm.rank() == 0) FinishReduction(o.dtype, o.op, data, o.count, comm.size());
  return TreeBroadcast(comm, data, o.count * DTypeSize(o.dtype), 0,
                       Tag::Make(OpKind::kAllReduce, o.tag, 1), deadline, kWhat);
}

}  // namespace herd::collectives
