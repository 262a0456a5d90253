// Linear Pipeline (LP) broadcast, reduce and all-reduce (Wang, Wu, Bosilca, Vuduc, Xu: "Efficient
// communications in training large scale neural networks").
//
// The ranks form a chain and the message is cut into blocks of block_bytes (the last block may
// be shorter). Each rank receives block k+1 from its predecessor while it forwards block k to its
// successor, so once the pipe is full every link carries a block at each step:
//   broadcast  chain root, root+1, ..., root+P-1; blocks flow down, received straight into data.
//   reduce     chain root+1, ..., root+P-1, root; block k is received into scratch, reduced into
//              data and forwarded, so the root ends with every rank's contribution.
//   all-reduce chain 0, 1, ..., P-1; reduce flows down to rank P-1, which finishes each block and
//              sends it back up the chain; the finished blocks flow up while later partial
//              blocks still flow down, so the pipe is filled once for both directions.
// Cost (paper, table 1): (P - 1 + n/b) alpha + (b(P-1) + n) beta per direction, nearly
// invariant in P for n >> bP.

#include <algorithm>
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

// Receives posted ahead when they land in `data` (broadcast): bounds outstanding requests only.
constexpr size_t kRecvWindow = 8;

struct Blocks {
  Blocks(size_t count, DType dtype, size_t block_bytes)
      : count(count),
        esize(DTypeSize(dtype)),
        per_block(std::max<size_t>(1, block_bytes / esize)),
        n((count + per_block - 1) / per_block) {}
  size_t offset(size_t k) const { return k * per_block * esize; }
  size_t bytes(size_t k) const { return std::min(per_block, count - k * per_block) * esize; }

  size_t count;
  size_t esize;
  size_t per_block;  // elements
  size_t n;          // number of blocks
};

// Two scratch blocks used alternately: block k lands in slot k % 2 while block k-1 is reduced.
class DoubleBuffer {
 public:
  explicit DoubleBuffer(size_t slot_bytes)
      : slot_(slot_bytes), mem_(std::make_unique_for_overwrite<std::byte[]>(2 * slot_bytes)) {}
  std::byte* slot(size_t k) { return mem_.get() + (k % 2) * slot_; }

 private:
  size_t slot_;
  std::unique_ptr<std::byte[]> mem_;
};

absl::Status ValidateBlocks(std::string_view what, const CommonOptions& o, const void* data,
                            size_t count, size_t block_bytes) {
  HERD_RETURN_IF_ERROR(internal::ValidateBase(what, o, data, count));
  HERD_RETURN_IF_ERROR(internal::ValidatePositive(what, "block_bytes", block_bytes));
  return internal::RequireHostMemory(what, *o.comm);
}

}  // namespace

absl::Status LinearPipelineBroadcast(const BroadcastOptions& o) {
  constexpr std::string_view kWhat = "linear-pipeline broadcast";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(ValidateBlocks(kWhat, o, o.data, o.count, o.block_bytes));
  Communicator& comm = *o.comm;
  const int P = comm.size();
  HERD_RETURN_IF_ERROR(internal::ValidateRoot(kWhat, o.root, P));
  if (P == 1 || o.count == 0) return absl::OkStatus();

  const int r = comm.rank(), pos = (r - o.root + P) % P;
  const int prev = (r - 1 + P) % P, next = (r + 1) % P;
  const bool has_prev = pos > 0, has_next = pos < P - 1;
  auto* data = static_cast<std::byte*>(o.data);
  const Blocks blocks(o.count, o.dtype, o.block_bytes);
  auto tag = [&](size_t k) { return Tag::Make(OpKind::kBroadcast, o.tag, uint32_t(k)); };

  std::vector<Request> sends(blocks.n);
  if (!has_prev) {  // the root: every block is ready
    for (size_t k = 0; k < blocks.n; ++k) {
      sends[k] = comm.isend(next, tag(k), AsBytes(data + blocks.offset(k), blocks.bytes(k)));
    }
    return comm.WaitAll(absl::MakeSpan(sends), deadline);
  }
  Request recvs[kRecvWindow];
  auto post_recv = [&](size_t k) {
    if (k >= blocks.n) return;
    recvs[k % kRecvWindow] =
        comm.irecv(prev, tag(k), AsMutableBytes(data + blocks.offset(k), blocks.bytes(k)));
  };
  for (size_t k = 0; k < kRecvWindow; ++k) post_recv(k);
  for (size_t k = 0; k < blocks.n; ++k) {
    HERD_RETURN_IF_ERROR(
        internal::WaitRecv(comm, recvs[k % kRecvWindow], blocks.bytes(k), deadline, kWhat));
    post_recv(k + kRecvWindow);
    if (has_next) {
      sends[k] = comm.isend(next, tag(k), AsBytes(data + blocks.offset(k), blocks.bytes(k)));
    }
  }
  return comm.WaitAll(absl::MakeSpan(sends), deadline);
}

absl::Status LinearPipelineReduce(const ReduceOptions& o) {
  constexpr std::string_view kWhat = "linear-pipeline reduce";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(ValidateBlocks(kWhat, o, o.data, o.count, o.block_bytes));
  HERD_RETURN_IF_ERROR(internal::ValidateOp(kWhat, o.dtype, o.op));
  Communicator& comm = *o.comm;
  const int P = comm.size();
  HERD_RETURN_IF_ERROR(internal::ValidateRoot(kWhat, o.root, P));
  if (P == 1 || o.count == 0) return absl::OkStatus();

  // Chain root+1, root+2, ..., root: the root is last.
  const int r = comm.rank(), pos = (r - o.root - 1 + 2 * P) % P;
  const int prev = (r - 1 + P) % P, next = (r + 1) % P;
  const bool has_prev = pos > 0, has_next = pos < P - 1;
  auto* data = static_cast<std::byte*>(o.data);
  const Blocks blocks(o.count, o.dtype, o.block_bytes);
  auto tag = [&](size_t k) { return Tag::Make(OpKind::kReduce, o.tag, uint32_t(k)); };

  std::vector<Request> sends(blocks.n);
  if (!has_prev) {  // the head of the chain sends its own vector as it is
    for (size_t k = 0; k < blocks.n; ++k) {
      sends[k] = comm.isend(next, tag(k), AsBytes(data + blocks.offset(k), blocks.bytes(k)));
    }
    return comm.WaitAll(absl::MakeSpan(sends), deadline);
  }
  DoubleBuffer scratch(blocks.bytes(0));
  Request recvs[2];
  auto post_recv = [&](size_t k) {
    if (k >= blocks.n) return;
    recvs[k % 2] = comm.irecv(prev, tag(k), AsMutableBytes(scratch.slot(k), blocks.bytes(k)));
  };
  post_recv(0);
  post_recv(1);
  for (size_t k = 0; k < blocks.n; ++k) {
    HERD_RETURN_IF_ERROR(internal::WaitRecv(comm, recvs[k % 2], blocks.bytes(k), deadline, kWhat));
    std::byte* dst = data + blocks.offset(k);
    ReduceInto(o.dtype, o.op, dst, scratch.slot(k), blocks.bytes(k) / blocks.esize);
    post_recv(k + 2);
    if (has_next) sends[k] = comm.isend(next, tag(k), AsBytes(dst, blocks.bytes(k)));
  }
  HERD_RETURN_IF_ERROR(comm.WaitAll(absl::MakeSpan(sends), deadline));
  if (!has_next) FinishReduction(o.dtype, o.op, data, o.count, P);
  return absl::OkStatus();
}

// Rank i of the chain 0..P-1 runs one loop over time steps t. At step t it handles the partial
// block t coming down (receive into scratch, reduce, forward; the last rank finishes it and
// sends it back up) and then the finished block t - lag coming up (receive into data, forward
// to the predecessor). With every rank moving one block per step, partial block k passes rank i
// at step k and its finished version comes back 2 (P-1-i) steps later, hence
// lag = 2 (P-1-i): waits then find their block (nearly) ready. Any lag that does not grow down
// the chain is deadlock-free, since every wait depends only on earlier steps of the successor.
//
// A finished block overwrites the partial block this rank sent down, so its receive is posted
// only once that send has completed (the transport may still read the buffer until then).
absl::Status LinearPipelineAllReduce(const AllReduceOptions& o) {
  constexpr std::string_view kWhat = "linear-pipeline all-reduce";
  const Deadline deadline = Deadline::After(o.timeout);
  HERD_RETURN_IF_ERROR(ValidateBlocks(kWhat, o, o.data, o.count, o.block_bytes));
  HERD_RETURN_IF_ERROR(internal::ValidateOp(kWhat, o.dtype, o.op));
  Communicator& comm = *o.comm;
  const int P = comm.size();
  if (P == 1 || o.count == 0) return absl::OkStatus();

  const int r = comm.rank();
  const bool has_prev = r > 0, has_next = r < P - 1;
  auto* data = static_cast<std::byte*>(o.data);
  const Blocks blocks(o.count, o.dtype, o.block_bytes);
  const size_t nb = blocks.n, lag = 2 * static_cast<size_t>(P - 1 - r);
  // Down (partial) block k uses step 2k, up (finished) block k step 2k+1.
  auto down = [&](size_t k) { return Tag::Make(OpKind::kAllReduce, o.tag, uint32_t(2 * k)); };
  auto up = [&](size_t k) { return Tag::Make(OpKind::kAllReduce, o.tag, uint32_t(2 * k + 1)); };
  auto block = [&](size_t k) { return data + blocks.offset(k); };

  std::vector<Request> down_sends(nb), up_sends(nb);
  std::unique_ptr<DoubleBuffer> scratch;
  Request down_recvs[2];
  auto post_down_recv = [&](size_t k) {
    if (k >= nb) return;
    down_recvs[k % 2] =
        comm.irecv(r - 1, down(k), AsMutableBytes(scratch->slot(k), blocks.bytes(k)));
  };
  if (has_prev) {
    scratch = std::make_unique<DoubleBuffer>(blocks.bytes(0));
    post_down_recv(0);
    post_down_recv(1);
  } else {  // rank 0 sends its own vector down as it is
    for (size_t k = 0; k < nb; ++k) {
      down_sends[k] = comm.isend(r + 1, down(k), AsBytes(block(k), blocks.bytes(k)));
    }
  }

  // Receives of finished blocks, posted one ahead of the one waited for.
  std::vector<Request> up_recvs(has_next ? nb : 0);
  size_t up_posted = 0;
  auto post_up_recv = [&](size_t j) -> absl::Status {
    HERD_RETURN_IF_ERROR(internal::WaitSend(comm, down_sends[j], deadline));
    up_recvs[j] = comm.irecv(r + 1, up(j), AsMutableBytes(block(j), blocks.bytes(j)));
    return absl::OkStatus();
  };

  for (size_t t = 0; t < nb + lag; ++t) {
    if (t < nb && has_prev) {
      const size_t k = t;
      HERD_RETURN_IF_ERROR(
          internal::WaitRecv(comm, down_recvs[k % 2], blocks.bytes(k), deadline, kWhat));
      ReduceInto(o.dtype, o.op, block(k), scratch->slot(k), blocks.bytes(k) / blocks.esize);
      post_down_recv(k + 2);
      if (has_next) {
        down_sends[k] = comm.isend(r + 1, down(k), AsBytes(block(k), blocks.bytes(k)));
      } else {  // the last rank finishes block k and turns it around
        FinishReduction(o.dtype, o.op, block(k), blocks.bytes(k) / blocks.esize, P);
        up_sends[k] = comm.isend(r - 1, up(k), AsBytes(block(k), blocks.bytes(k)));
      }
    }
    if (has_next && t >= lag) {
      const size_t j = t - lag;
      // lag >= 2 here, so down blocks j and j+1 have been sent already.
      while (up_posted <= j + 1 && up_posted < nb) HERD_RETURN_IF_ERROR(post_up_recv(up_posted++));
      HERD_RETURN_IF_ERROR(internal::WaitRecv(comm, up_recvs[j], blocks.bytes(j), deadline, kWhat));
      if (has_prev) up_sends[j] = comm.isend(r - 1, up(j), AsBytes(block(j), blocks.bytes(j)));
    }
  }
  HERD_RETURN_IF_ERROR(comm.WaitAll(absl::MakeSpan(down_sends), deadline));
  return comm.WaitAll(absl::MakeSpan(up_sends), deadline);
}

}  // namespace herd::collectives
