// One-shot all-reduce, reduce-scatter and all-gather: every rank exchanges with every other
// rank directly, in a single round. P-1 messages each way per rank, all posted at once, so the
// whole operation costs one message latency (plus the time to push P-1 messages through the
// transport): the choice for short vectors, where the ring's 2(P-1) or the trees' 2 log2(P)
// dependent rounds are what takes the time, and where the extra bytes do not matter.
//
//   all-reduce      every rank sends its whole vector to every other and sums the P vectors
//                   itself, in rank order (so every rank gets the same bits). Sends n(P-1),
//                   extra memory (P-1) n.
//   reduce-scatter  every rank sends chunk q to rank q and sums the P contributions to its own
//                   chunk. Sends (P-1)/P n, the ring's volume; extra memory (P-1) n/P.
//   all-gather      every rank sends its chunk to every other; receives land in place. Sends
//                   (P-1) n/P, the ring's volume; extra memory none.

#include <cstring>
#include <memory>
#include <vector>

#include "algorithms/collectives/allgather.h"
#include "algorithms/collectives/allreduce.h"
#include "algorithms/collectives/internal.h"
#include "algorithms/collectives/reduce_scatter.h"
#include "common/status.h"

namespace herd::collectives {
namespace {

using transport::Communicator;
using transport::OpKind;
using transport::Request;
using transport::Tag;

// The peers in the order this rank serves them: r+1, r+2, ..., so that P ranks posting at once
// do not all start with rank 0.
int PeerAt(int r, int i, int P) { return (r + 1 + i) % P; }

absl::Status WaitAllRecvs(Communicator& comm, std::vector<Request>& recvs,
                          const std::vector<size_t>& bytes, Deadline deadline,
                          std::string_view what) {
  for (size_t i = 0; i < recvs.size(); ++i) {
    if (bytes[i] > 0) {
      HERD_RETURN_IF_ERROR(internal::WaitRecv(comm, recvs[i], bytes[i], deadline, what));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status OneShotAllReduce(const AllReduceOptions& o) {
  constexpr std::string_view kWhat = "one-shot all-reduce";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidateOp(kWhat, o.dtype, o.op));
  HERD_RETURN_IF_ERROR(internal::RequireHostMemory(kWhat, *o.comm));
  Communicator& comm = *o.comm;
  const int P = comm.size(), r = comm.rank();
  if (P == 1 || o.count == 0) return absl::OkStatus();

  auto* data = static_cast<std::byte*>(o.data);
  const size_t bytes = o.count * DTypeSize(o.dtype);
  const Tag tag = Tag::Make(OpKind::kAllReduce, o.tag, 0);
  // Rank q's vector: `data` for this rank's own, else one of P-1 scratch slots.
  auto scratch = std::make_unique_for_overwrite<std::byte[]>(static_cast<size_t>(P - 1) * bytes);
  auto slot = [&](int q) {
    return q == r ? data : scratch.get() + static_cast<size_t>(q < r ? q : q - 1) * bytes;
  };

  std::vector<Request> recvs(P - 1), sends(P - 1);
  for (int i = 0; i < P - 1; ++i) {
    const int q = PeerAt(r, i, P);
    recvs[i] = comm.irecv(q, tag, AsMutableBytes(slot(q), bytes));
  }
  for (int i = 0; i < P - 1; ++i) sends[i] = comm.isend(PeerAt(r, i, P), tag, AsBytes(data, bytes));
  HERD_RETURN_IF_ERROR(
      WaitAllRecvs(comm, recvs, std::vector<size_t>(P - 1, bytes), deadline, kWhat));
  HERD_RETURN_IF_ERROR(comm.WaitAll(absl::MakeSpan(sends), deadline));

  // ((x0 + x1) + x2) + ... on every rank: the same operands in the same order, the same bits.
  std::byte* sum = slot(0);
  for (int q = 1; q < P; ++q) ReduceInto(o.dtype, o.op, sum, slot(q), o.count);
  if (sum != data) std::memcpy(data, sum, bytes);
  FinishReduction(o.dtype, o.op, data, o.count, P);
  return absl::OkStatus();
}

absl::Status OneShotReduceScatter(const ReduceScatterOptions& o) {
  constexpr std::string_view kWhat = "one-shot reduce-scatter";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidateOp(kWhat, o.dtype, o.op));
  HERD_RETURN_IF_ERROR(internal::RequireHostMemory(kWhat, *o.comm));
  Communicator& comm = *o.comm;
  const int P = comm.size(), r = comm.rank();
  if (P == 1 || o.count == 0) return absl::OkStatus();

  auto* data = static_cast<std::byte*>(o.data);
  const size_t esize = DTypeSize(o.dtype);
  const size_t mine = ChunkSize(o.count, P, r) * esize;
  const Tag tag = Tag::Make(OpKind::kReduceScatter, o.tag, 0);
  auto scratch = std::make_unique_for_overwrite<std::byte[]>(static_cast<size_t>(P - 1) * mine);

  std::vector<Request> recvs(P - 1), sends(P - 1);
  for (int i = 0; i < P - 1; ++i) {
    if (mine > 0) {
      recvs[i] = comm.irecv(PeerAt(r, i, P), tag,
                            AsMutableBytes(scratch.get() + static_cast<size_t>(i) * mine, mine));
    }
  }
  for (int i = 0; i < P - 1; ++i) {
    const int q = PeerAt(r, i, P);
    if (size_t n = ChunkSize(o.count, P, q) * esize; n > 0) {
      sends[i] = comm.isend(q, tag, AsBytes(data + ChunkBegin(o.count, P, q) * esize, n));
    }
  }
  HERD_RETURN_IF_ERROR(
      WaitAllRecvs(comm, recvs, std::vector<size_t>(P - 1, mine), deadline, kWhat));
  // The chunk summed here is written only on this rank and never sent, so the sends may still be
  // in flight; the order is fixed, so a run is reproducible.
  std::byte* own = data + ChunkBegin(o.count, P, r) * esize;
  for (int i = 0; i < P - 1; ++i) {
    ReduceInto(o.dtype, o.op, own, scratch.get() + static_cast<size_t>(i) * mine, mine / esize);
  }
  FinishReduction(o.dtype, o.op, own, mine / esize, P);
  return comm.WaitAll(absl::MakeSpan(sends), deadline);
}

absl::Status OneShotAllGather(const AllGatherOptions& o) {
  constexpr std::string_view kWhat = "one-shot all-gather";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::RequireHostMemory(kWhat, *o.comm));
  Communicator& comm = *o.comm;
  const int P = comm.size(), r = comm.rank();
  if (P == 1 || o.count == 0) return absl::OkStatus();

  auto* data = static_cast<std::byte*>(o.data);
  const size_t esize = DTypeSize(o.dtype);
  const Tag tag = Tag::Make(OpKind::kAllGather, o.tag, 0);
  std::vector<Request> recvs(P - 1), sends(P - 1);
  std::vector<size_t> bytes(P - 1);
  for (int i = 0; i < P - 1; ++i) {
    const int q = PeerAt(r, i, P);
    bytes[i] = ChunkSize(o.count, P, q) * esize;
    if (bytes[i] > 0) {
      recvs[i] =
          comm.irecv(q, tag, AsMutableBytes(data + ChunkBegin(o.count, P, q) * esize, bytes[i]));
    }
  }
  const size_t mine = ChunkSize(o.count, P, r) * esize;
  for (int i = 0; i < P - 1 && mine > 0; ++i) {
    sends[i] =
        comm.isend(PeerAt(r, i, P), tag, AsBytes(data + ChunkBegin(o.count, P, r) * esize, mine));
  }
  HERD_RETURN_IF_ERROR(WaitAllRecvs(comm, recvs, bytes, deadline, kWhat));
  return comm.WaitAll(absl::MakeSpan(sends), deadline);
}

}  // namespace herd::collectives
