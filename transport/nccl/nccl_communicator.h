#pragma once
// The NCCL backend: a Communicator whose buffers are CUDA device pointers, with point-to-point
// messages over ncclSend/ncclRecv and the dense collectives run natively (ncclReduceScatter,
// ncclAllGather, ncclAllReduce) through native().
//
// This header compiles in every build. Where herd was built without the CUDA toolkit, NcclUsable
// returns false and CreateNcclCommunicator returns UNIMPLEMENTED, so callers need no #ifdefs.
//
// Differences from the Communicator contract (transport/communicator.h), all imposed by NCCL:
//  - Tags are ignored. Every rank must post its sends and receives with each peer in the same
//    order, and the sizes of a matching send and receive must be equal (received() is always
//    the full buffer). A mismatch is not detected: it hangs until the deadline or corrupts data.
//  - isend/irecv only queue the operation. The first wait() (or FlushNccl) launches everything
//    queued so far in one ncclGroupStart/ncclGroupEnd, so a ring exchange (send right, receive
//    left) posted on every rank before its first wait() cannot deadlock. A request that is never
//    waited for is launched by the next wait(), flush or native collective, or dropped when the
//    communicator goes.
//  - A wait() that reaches its deadline aborts the communicator (ncclCommAbort) before it
//    returns DEADLINE_EXCEEDED: a pending NCCL kernel blocks its stream, so nothing queued after
//    it could ever run. Any failure of a CUDA or NCCL call aborts it as well.
//  - Collectives (native()) and point-to-point operations share one CUDA stream: all ranks must
//    issue them in the same order, and one thread at a time should issue collectives.
//  - That stream does not wait for the caller's streams: a buffer must be ready when it is
//    passed (the kernel or copy that fills it has completed, e.g. after cudaStreamSynchronize on
//    its stream). When wait() or a collective returns OK, the result is in device memory and
//    visible to any later work on any stream.
//
// Thread safety: all methods may be called from several threads (one mutex serialises the NCCL
// calls, and each call selects the communicator's device for the calling thread).

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "transport/communicator.h"
#include "transport/store/store.h"

namespace herd::transport {

struct NcclOptions {
  std::string prefix = "herd";  // store key prefix
  int device = -1;              // CUDA device; -1: rank % device count
  std::chrono::milliseconds bootstrap_timeout{std::chrono::seconds(60)};
};

// Whether a CUDA device and NCCL are usable here; if not, `why` says why (built without CUDA, no
// device, driver...).
bool NcclUsable(std::string* why);

// Rank 0 creates the ncclUniqueId and publishes it in `store` under "<prefix>/nccl/unique_id";
// the others read it; ncclCommInitRank (non-blocking config, so the init itself honours the
// deadline and can be aborted).
//
// Errors: INVALID_ARGUMENT (rank, size, store, device out of range, a malformed id in the store),
// FAILED_PRECONDITION (no usable device: the reason from NcclUsable), ALREADY_EXISTS (the key
// is taken: use a fresh prefix per communicator, e.g. with the plan epoch), DEADLINE_EXCEEDED
// (the id or a rank did not show up within bootstrap_timeout), UNIMPLEMENTED (built without
// NCCL), or the NCCL/CUDA error of the call that failed.
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    int rank, int size, std::shared_ptr<Store> store, const NcclOptions& options = {});

// Launches the operations `comm` (an NCCL communicator) has queued, in one group, and returns
// once NCCL has put them on the GPU stream; they complete asynchronously (wait() for them). Use it
// to start an exchange before host work it should overlap with.
// Errors: INVALID_ARGUMENT for another backend's communicator, DEADLINE_EXCEEDED when NCCL was
// still enqueuing at the deadline (the operations stay in flight), the abort status of an aborted
// communicator, UNIMPLEMENTED without NCCL.
absl::Status FlushNccl(Communicator& comm, Deadline deadline);

}  // namespace herd::transport
