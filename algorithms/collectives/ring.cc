// Ring reduce-scatter, ring all-gather, and ring all-reduce = the two in a row on one buffer.
//
// Layout. The vector is cut in P chunks (ChunkBegin/ChunkSize of options.h; chunk c ends up
// owned by rank c) and every chunk in S segments of at most segment_bytes, S fixed by the
// largest chunk so that all ranks agree on it. The unit of work is (step s, segment k), numbered
// u = s * S + k; u is also the tag's step, so messages name the step they belong to.
//
// Schedule. Rank r sends to right = r + 1 and receives from left = r - 1 (mod P).
//   reduce-scatter, step s (0 <= s < P-1): send chunk r-s-1, receive chunk r-s-2 and reduce it
//     into data. The chunk received at step s is the one sent at step s+1, so each segment is
//     forwarded as soon as it is reduced; after step P-2 chunk r holds every rank's contribution.
//   all-gather, step s: send chunk r-s, receive chunk r-s-1 straight into data and forward it
//     at step s+1.
// Segments pipeline the ring: while segment k is reduced, segment k+1 is on the wire, and the
// right neighbour already forwards segment k-1.
//
// Memory. Sends read `data` directly (a chunk is never written after it has been sent);
// all-gather receives straight into `data`; reduce-scatter receives into four scratch segments
// used in turn (four receives outstanding while one is reduced), its only extra memory.

#include <algorithm>
#include <memory>
#include <vector>

#include "algorithms/collectives/allgather.h"
#include "algorithms/collectives/allreduce.h"
#include "algorithms/collectives/internal.h"
#include "algorithms/collectives/reduce_scatter.h"
#include "common/status.h"
#include "transport/native_collectives.h"

namespace herd::collectives {
namespace {

using transport::Communicator;
using transport::OpKind;
using transport::Request;
using transport::Tag;

// Receives posted ahead of the one being waited for in the all-gather (they land in `data`, so
// the window costs no memory; it only bounds the number of outstanding requests).
constexpr size_t kAllGatherWindow = 8;
// Scratch segments of the reduce-scatter: unit u lands in slot u % kScratchSlots, so this many
// receives are outstanding while one is reduced.
constexpr size_t kScratchSlots = 4;

class RingLayout {
 public:
  // The standard layout: chunk c = ChunkBegin/ChunkSize of count over `size` ranks.
  RingLayout(size_t count, int size, DType dtype, size_t segment_bytes)
      : count_(count),
        size_(size),
        esize_(DTypeSize(dtype)),
        segments_(internal::PiecesFor(ChunkSize(count, size, 0), esize_, segment_bytes)) {}
  // Chunk c = chunks[c], anywhere in the buffer (the hierarchical collectives' rails).
  RingLayout(std::vector<internal::Chunk> chunks, DType dtype, size_t segment_bytes)
      : count_(0),
        size_(static_cast<int>(chunks.size())),
        esize_(DTypeSize(dtype)),
        chunks_(std::move(chunks)) {
    size_t largest = 0;
    for (const internal::Chunk& c : chunks_) largest = std::max(largest, c.count);
    segments_ = internal::PiecesFor(largest, esize_, segment_bytes);
  }

  size_t segments() const { return segments_; }
  size_t units() const { return static_cast<size_t>(size_ - 1) * segments_; }
  size_t chunk_begin(int c) const {
    return chunks_.empty() ? ChunkBegin(count_, size_, c) : chunks_[c].begin;
  }
  size_t chunk_size(int c) const {
    return chunks_.empty() ? ChunkSize(count_, size_, c) : chunks_[c].count;
  }
  size_t offset(int chunk, size_t k) const {
    return (chunk_begin(chunk) + internal::SplitBegin(chunk_size(chunk), segments_, k)) * esize_;
  }
  size_t bytes(int chunk, size_t k) const {
    return internal::SplitSize(chunk_size(chunk), segments_, k) * esize_;
  }
  // The largest segment: segment 0 of the largest chunk.
  size_t max_segment_bytes() const {
    size_t largest = 0;
    for (int c = 0; c < (chunks_.empty() ? 1 : size_); ++c)
      largest = std::max(largest, bytes(c, 0));
    return largest;
  }

 private:
  size_t count_;
  int size_;
  size_t esize_;
  size_t segments_ = 1;
  std::vector<internal::Chunk> chunks_;  // empty: the standard layout
};

// The ring position `r - back` wrapped into [0, P).
int Back(int r, size_t back, int P) {
  return static_cast<int>((static_cast<size_t>(r) + P - back % P) % P);
}

// Reduce-scatter over the ring; the tag steps used are [step0, step0 + layout.units()).
absl::Status ReduceScatterRing(Communicator& comm, std::byte* data, const RingLayout& layout,
                               DType dtype, ReduceOp op, OpKind kind, uint32_t id, uint32_t step0,
                               Deadline deadline) {
  const int P = comm.size(), r = comm.rank();
  const int right = (r + 1) % P, left = Back(r, 1, P);
  const size_t S = layout.segments(), units = layout.units(), esize = DTypeSize(dtype);
  auto tag = [&](size_t u) { return Tag::Make(kind, id, static_cast<uint32_t>(step0 + u)); };
  auto recv_chunk = [&](size_t u) { return Back(r, u / S + 2, P); };

  // Step 0 sends this rank's own contribution to chunk r-1: all of it is ready now.
  std::vector<Request> sends(units);
  for (size_t k = 0; k < S; ++k) {
    int c = Back(r, 1, P);
    if (size_t n = layout.bytes(c, k); n > 0) {
      sends[k] = comm.isend(right, tag(k), AsBytes(data + layout.offset(c, k), n));
    }
  }

  // kScratchSlots scratch segments: unit u lands in its slot while earlier units are reduced.
  const size_t slot = layout.max_segment_bytes();
  auto scratch = std::make_unique_for_overwrite<std::byte[]>(kScratchSlots * slot);
  Request recvs[kScratchSlots];
  auto post_recv = [&](size_t u) {
    if (u >= units) return;
    int c = recv_chunk(u);
    if (size_t n = layout.bytes(c, u % S); n > 0) {
      recvs[u % kScratchSlots] =
          comm.irecv(left, tag(u), AsMutableBytes(scratch.get() + (u % kScratchSlots) * slot, n));
    }
  };
  for (size_t u = 0; u < kScratchSlots; ++u) post_recv(u);

  for (size_t u = 0; u < units; ++u) {
    const size_t s = u / S, k = u % S;
    const int c = recv_chunk(u);
    const size_t n = layout.bytes(c, k);
    std::byte* dst = data + layout.offset(c, k);
    if (n > 0) {
      HERD_RETURN_IF_ERROR(
          internal::WaitRecv(comm, recvs[u % kScratchSlots], n, deadline, "ring reduce-scatter"));
      ReduceInto(dtype, op, dst, scratch.get() + (u % kScratchSlots) * slot, n / esize);
    }
    post_recv(u + kScratchSlots);  // the slot just reduced is free again
    // The segment just completed is the one step s+1 forwards.
    if (s + 1 < static_cast<size_t>(P - 1) && n > 0) {
      sends[u + S] = comm.isend(right, tag(u + S), AsBytes(dst, n));
    }
  }
  HERD_RETURN_IF_ERROR(comm.WaitAll(absl::MakeSpan(sends), deadline));

  // Chunk r now holds the full reduction; an average divides once, here.
  FinishReduction(dtype, op, data + layout.offset(r, 0), layout.chunk_size(r), P);
  return absl::OkStatus();
}

// All-gather over the ring; the tag steps used are [step0, step0 + layout.units()).
absl::Status AllGatherRing(Communicator& comm, std::byte* data, const RingLayout& layout,
                           OpKind kind, uint32_t id, uint32_t step0, Deadline deadline) {
  const int P = comm.size(), r = comm.rank();
  const int right = (r + 1) % P, left = Back(r, 1, P);
  const size_t S = layout.segments(), units = layout.units();
  auto tag = [&](size_t u) { return Tag::Make(kind, id, static_cast<uint32_t>(step0 + u)); };
  auto recv_chunk = [&](size_t u) { return Back(r, u / S + 1, P); };

  std::vector<Request> sends(units);
  for (size_t k = 0; k < S; ++k) {
    if (size_t n = layout.bytes(r, k); n > 0) {
      sends[k] = comm.isend(right, tag(k), AsBytes(data + layout.offset(r, k), n));
    }
  }

  Request recvs[kAllGatherWindow];
  auto post_recv = [&](size_t u) {
    if (u >= units) return;
    int c = recv_chunk(u);
    if (size_t n = layout.bytes(c, u % S); n > 0) {
      recvs[u % kAllGatherWindow] =
          comm.irecv(left, tag(u), AsMutableBytes(data + layout.offset(c, u % S), n));
    }
  };
  for (size_t u = 0; u < kAllGatherWindow; ++u) post_recv(u);

  for (size_t u = 0; u < units; ++u) {
    const size_t s = u / S, k = u % S;
    const int c = recv_chunk(u);
    const size_t n = layout.bytes(c, k);
    if (n > 0) {
      HERD_RETURN_IF_ERROR(
          internal::WaitRecv(comm, recvs[u % kAllGatherWindow], n, deadline, "ring all-gather"));
    }
    post_recv(u + kAllGatherWindow);
    if (s + 1 < static_cast<size_t>(P - 1) && n > 0) {
      sends[u + S] = comm.isend(right, tag(u + S), AsBytes(data + layout.offset(c, k), n));
    }
  }
  return comm.WaitAll(absl::MakeSpan(sends), deadline);
}

}  // namespace

absl::Status internal::RingReduceScatterChunks(Communicator& comm, void* data,
                                               std::vector<Chunk> chunks, DType dtype, ReduceOp op,
                                               uint32_t tag, size_t segment_bytes,
                                               Deadline deadline) {
  if (comm.size() == 1) return absl::OkStatus();
  RingLayout layout(std::move(chunks), dtype, segment_bytes);
  return ReduceScatterRing(comm, static_cast<std::byte*>(data), layout, dtype, op,
                           OpKind::kReduceScatter, tag, 0, deadline);
}

absl::Status internal::RingAllGatherChunks(Communicator& comm, void* data,
                                           std::vector<Chunk> chunks, DType dtype, uint32_t tag,
                                           size_t segment_bytes, Deadline deadline) {
  if (comm.size() == 1) return absl::OkStatus();
  RingLayout layout(std::move(chunks), dtype, segment_bytes);
  return AllGatherRing(comm, static_cast<std::byte*>(data), layout, OpKind::kAllGather, tag, 0,
                       deadline);
}

absl::Status RingReduceScatter(const ReduceScatterOptions& o) {
  constexpr std::string_view kWhat = "ring reduce-scatter";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidateOp(kWhat, o.dtype, o.op));
  HERD_RETURN_IF_ERROR(internal::ValidatePositive(kWhat, "segment_bytes", o.segment_bytes));
  Communicator& comm = *o.comm;
  if (comm.size() == 1 || o.count == 0) return absl::OkStatus();
  if (comm.memory() != transport::MemoryKind::kHost) {
    HERD_ASSIGN_OR_RETURN(transport::NativeCollectives * native, internal::Native(kWhat, comm));
    return native->ReduceScatter(o.data, o.count, o.dtype, o.op, deadline);
  }
  RingLayout layout(o.count, comm.size(), o.dtype, o.segment_bytes);
  return ReduceScatterRing(comm, static_cast<std::byte*>(o.data), layout, o.dtype, o.op,
                           OpKind::kReduceScatter, o.tag, 0, deadline);
}

absl::Status RingAllGather(const AllGatherOptions& o) {
  constexpr std::string_view kWhat = "ring all-gather";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidatePositive(kWhat, "segment_bytes", o.segment_bytes));
  Communicator& comm = *o.comm;
  if (comm.size() == 1 || o.count == 0) return absl::OkStatus();
  if (comm.memory() != transport::MemoryKind::kHost) {
    HERD_ASSIGN_OR_RETURN(transport::NativeCollectives * native, internal::Native(kWhat, comm));
    return native->AllGather(o.data, o.count, o.dtype, deadline);
  }
  RingLayout layout(o.count, comm.size(), o.dtype, o.segment_bytes);
  return AllGatherRing(comm, static_cast<std::byte*>(o.data), layout, OpKind::kAllGather, o.tag, 0,
                       deadline);
}

absl::Status RingAllReduce(const AllReduceOptions& o) {
  constexpr std::string_view kWhat = "ring all-reduce";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(internal::ValidateBase(kWhat, o, o.data, o.count));
  HERD_RETURN_IF_ERROR(internal::ValidateOp(kWhat, o.dtype, o.op));
  HERD_RETURN_IF_ERROR(internal::ValidatePositive(kWhat, "segment_bytes", o.segment_bytes));
  Communicator& comm = *o.comm;
  if (comm.size() == 1 || o.count == 0) return absl::OkStatus();
  if (comm.memory() != transport::MemoryKind::kHost) {
    HERD_ASSIGN_OR_RETURN(transport::NativeCollectives * native, internal::Native(kWhat, comm));
    return native->AllReduce(o.data, o.count, o.dtype, o.op, deadline);
  }
  // Both halves carry the all-reduce kind; the all-gather's steps follow the reduce-scatter's,
  // so an all-reduce never matches a concurrent reduce-scatter or all-gather of the same id.
  RingLayout layout(o.count, comm.size(), o.dtype, o.segment_bytes);
  auto* data = static_cast<std::byte*>(o.data);
  HERD_RETURN_IF_ERROR(
      ReduceScatterRing(comm, data, layout, o.dtype, o.op, OpKind::kAllReduce, o.tag, 0, deadline));
  return AllGatherRing(comm, data, layout, OpKind::kAllReduce, o.tag,
                       static_cast<uint32_t>(layout.units()), deadline);
}

}  // namespace herd::collectives
