#pragma once
// The NCCL communicator behind CreateNcclCommunicator (internal to the backend; callers use
// nccl_communicator.h). Point-to-point in nccl_comm.cc, native collectives in nccl_native.cc.
//
// Life of an operation (an isend/irecv, or one native collective):
//   queued     posted by isend/irecv, nothing issued yet;
//   enqueuing  issued (ncclGroupEnd or the collective returned), but the communicator is
//              non-blocking and NCCL may still be enqueuing its kernel from a background thread
//              (ncclCommGetAsyncError says ncclInProgress); no other NCCL call may be made on the
//              communicator until that ends, and no event may be recorded yet;
//   launched   a cudaEvent is recorded after it on the communicator's stream;
//   done       the event completed, or the operation failed or was aborted (its status says).
// Queued operations are launched together, in one group, by the first wait() or collective that
// finds NCCL idle, so a rank's sends and receives of one exchange are always in one group.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "transport/communicator.h"
#include "transport/native_collectives.h"

namespace herd::transport::nccl {

struct NcclRequest final : RequestState {
  enum class Phase { kQueued, kEnqueuing, kLaunched, kDone };

  // A point-to-point request of `owner`.
  NcclRequest(const void* owner, Direction d, int peer, Tag tag, size_t bytes,
              const void* send_data, void* recv_data)
      : RequestState(d, peer, tag, bytes),
        owner(owner),
        send_data(send_data),
        recv_data(recv_data) {}
  // A native collective; `what` names it in errors.
  NcclRequest(const void* owner, std::string what, size_t bytes)
      : RequestState(Direction::kSend, -1, Tag{}, bytes), owner(owner), what(std::move(what)) {}
  ~NcclRequest() override;

  std::string Name() const { return what.empty() ? Describe() : what; }

  const void* const owner;  // the communicator, to refuse requests of another one
  const void* const send_data = nullptr;
  void* const recv_data = nullptr;
  const std::string what;
  // Guarded by the owner's mutex.
  Phase phase = Phase::kQueued;
  cudaEvent_t event = nullptr;
  absl::Status status;
};

class NcclCommunicator final : public Communicator, public NativeCollectives {
 public:
  // Takes ownership of `comm` and `stream`, both created on `device`.
  NcclCommunicator(int rank, int size, int device, ncclComm_t comm, cudaStream_t stream);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend() const override { return "nccl"; }
  MemoryKind memory() const override { return MemoryKind::kCuda; }
  NativeCollectives* native() override { return this; }

  Request isend(int peer, Tag tag, ConstBytes buf) override;
  Request irecv(int peer, Tag tag, MutableBytes buf) override;
  absl::Status wait(Request& req, Deadline deadline) override;
  absl::Status abort(absl::Status why) override;
  absl::Status status() const override;

  // See FlushNccl (nccl_communicator.h).
  absl::Status Flush(Deadline deadline);

  absl::Status ReduceScatter(void* data, size_t count, DType dtype, ReduceOp op,
                             Deadline deadline) override;
  absl::Status AllGather(void* data, size_t count, DType dtype, Deadline deadline) override;
  absl::Status AllReduce(void* data, size_t count, DType dtype, ReduceOp op,
                         Deadline deadline) override;

 private:
  using RequestPtr = std::shared_ptr<NcclRequest>;
  // Work on the stream around one NCCL call (padding copies); runs with mu_ held.
  using StreamWork = std::function<absl::Status()>;
  // Issues NCCL calls; sets *in_progress when NCCL returned ncclInProgress.
  using Issue = std::function<absl::Status(bool* in_progress)>;

  Request Post(Direction dir, int peer, Tag tag, const void* send_data, void* recv_data,
               size_t bytes);
  absl::Status SelectDevice() const;

  // Advances the communicator: finishes an enqueue NCCL has completed, and (when
  // `launch_queued`) launches the queued operations once NCCL is idle. An error means the
  // communicator must be aborted.
  absl::Status ProgressLocked(bool launch_queued) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status LaunchQueuedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status LaunchLocked(std::vector<RequestPtr> batch, const Issue& issue, StreamWork after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status FinishEnqueueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks `r` done when its event completed.
  absl::Status PollLocked(NcclRequest& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PruneLaunchedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ncclCommAbort, then fails every operation not yet done with `why` (the first abort's reason
  // is kept). Returns once the stream has drained, so no user buffer is touched afterwards.
  void AbortLocked(absl::Status why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ncclCommFinalize + ncclCommDestroy, bounded by `timeout`; on error comm_ stays set.
  absl::Status FinalizeLocked(std::chrono::milliseconds timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DrainStream(std::chrono::milliseconds timeout);

  // Polls `r` to completion; at the deadline aborts the communicator.
  absl::Status WaitUntilDone(NcclRequest& r, Deadline deadline);
  // Launches one collective once everything issued before it is (queued p2p first, so that NCCL
  // sees operations in the order they were posted), then waits for it.
  absl::Status RunCollective(std::string what, size_t bytes, Deadline deadline, StreamWork before,
                             Issue issue, StreamWork after);
  absl::Status EnsureScratchLocked(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies between a packed vector and the padded scratch layout (padded_layout.h).
  absl::Status CopyPaddedLocked(std::byte* packed, size_t count, size_t element_size,
                                bool to_padded) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int rank_;
  const int size_;
  const int device_;
  cudaStream_t const stream_;

  mutable std::mutex mu_;
  ncclComm_t comm_ ABSL_GUARDED_BY(mu_);  // null once aborted or finalized
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestPtr> queued_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestPtr> enqueuing_ ABSL_GUARDED_BY(mu_);
  StreamWork after_enqueue_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestPtr> launched_ ABSL_GUARDED_BY(mu_);
  // Padded buffer of the collectives whose count is not a multiple of size(); stream-ordered
  // (cudaMallocAsync), grown on demand, kept for the next collective.
  std::byte* scratch_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t scratch_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace herd::transport::nccl
