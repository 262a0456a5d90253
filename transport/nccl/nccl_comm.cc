// The NCCL communicator: point-to-point requests, progress, waits and abort. See nccl_comm.h for
// the life of an operation.

#include "transport/nccl/nccl_comm.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"
#include "transport/nccl/nccl_errors.h"
#include "transport/nccl/poll_backoff.h"

namespace herd::transport::nccl {
namespace {

using Phase = NcclRequest::Phase;

// How long teardown waits for NCCL and the GPU before it gives up and aborts.
constexpr std::chrono::milliseconds kFinalizeTimeout{10000};
constexpr std::chrono::milliseconds kDrainTimeout{10000};

void Finish(NcclRequest& r, absl::Status status) {
  r.phase = Phase::kDone;
  r.status = std::move(status);
}

}  // namespace

NcclRequest::~NcclRequest() {
  // Safe while the event is still pending: CUDA releases it once it completes.
  if (event != nullptr) cudaEventDestroy(event);
}

NcclCommunicator::NcclCommunicator(int rank, int size, int device, ncclComm_t comm,
                                   cudaStream_t stream)
    : rank_(rank), size_(size), device_(device), stream_(stream), comm_(comm) {}

NcclCommunicator::~NcclCommunicator() {
  SelectDevice().IgnoreError();
  std::lock_guard<std::mutex> lock(mu_);
  if (comm_ != nullptr) {
    // Operations never launched cannot be finalized: the peers may wait for them forever.
    bool clean = queued_.empty() && enqueuing_.empty();
    if (clean) {
      absl::Status s = FinalizeLocked(kFinalizeTimeout);
      if (!s.ok()) {
        Log().warn("NCCL rank {} of {}: finalizing the communicator failed, aborting it: {}", rank_,
                   size_, std::string(s.message()));
        clean = false;
      }
    }
    if (!clean) {
      AbortLocked(absl::CancelledError(absl::StrFormat(
          "NCCL communicator of rank %d of %d was destroyed with operations pending", rank_,
          size_)));
    }
  }
  if (scratch_ != nullptr) cudaFreeAsync(scratch_, stream_);
  DrainStream(kDrainTimeout);
  cudaStreamDestroy(stream_);
}

absl::Status NcclCommunicator::SelectDevice() const {
  // The current device is per thread, and callers may come from any thread.
  return CudaStatus(absl::StrFormat("cudaSetDevice(%d)", device_), cudaSetDevice(device_));
}

Request NcclCommunicator::isend(int peer, Tag tag, ConstBytes buf) {
  return Post(Direction::kSend, peer, tag, buf.data(), nullptr, buf.size());
}

Request NcclCommunicator::irecv(int peer, Tag tag, MutableBytes buf) {
  return Post(Direction::kRecv, peer, tag, nullptr, buf.data(), buf.size());
}

Request NcclCommunicator::Post(Direction dir, int peer, Tag tag, const void* send_data,
                               void* recv_data, size_t bytes) {
  auto r = std::make_shared<NcclRequest>(this, dir, peer, tag, bytes, send_data, recv_data);
  const void* data = dir == Direction::kSend ? send_data : recv_data;
  std::lock_guard<std::mutex> lock(mu_);
  if (peer < 0 || peer >= size_) {
    Finish(*r, absl::InvalidArgumentError(absl::StrFormat(
                   "%s: peer rank %d is out of range [0, %d)", r->Describe(), peer, size_)));
  } else if (!aborted_.ok()) {
    Finish(*r, aborted_);
  } else if (bytes == 0) {
    // Nothing to move, and the matching request on the peer is empty too (NCCL needs equal
    // sizes), so both ends complete without NCCL.
    Finish(*r, absl::OkStatus());
  } else if (data == nullptr) {
    Finish(*r,
           absl::InvalidArgumentError(absl::StrFormat("%s: the buffer is null", r->Describe())));
  } else {
    queued_.push_back(r);
  }
  return Request(std::move(r));
}

absl::Status NcclCommunicator::wait(Request& req, Deadline deadline) {
  if (req.empty()) return absl::OkStatus();
  auto* r = dynamic_cast<NcclRequest*>(req.state());
  if (r == nullptr || r->owner != this) {
    return absl::InvalidArgumentError(
        absl::StrFormat("NCCL rank %d: wait() was given a request of another communicator (%s)",
                        rank_, req.state()->Describe()));
  }
  HERD_RETURN_IF_ERROR(SelectDevice());
  absl::Status s = WaitUntilDone(*r, deadline);
  if (s.ok()) {
    // NCCL receives exactly the posted size (a matching send must have the same size).
    req.set_received(r->direction == Direction::kRecv ? r->bytes : 0);
    req.reset();
  }
  return s;
}

absl::Status NcclCommunicator::WaitUntilDone(NcclRequest& r, Deadline deadline) {
  PollBackoff backoff;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (r.phase != Phase::kDone) {
        absl::Status s = ProgressLocked(/*launch_queued=*/true);
        if (s.ok()) s = PollLocked(r);
        if (!s.ok()) {
          AbortLocked(
              WithContext(absl::StrFormat("%s (NCCL rank %d of %d)", r.Name(), rank_, size_), s));
        }
      }
      if (r.phase == Phase::kDone) return r.status;
      if (deadline.expired()) {
        absl::Status err = absl::DeadlineExceededError(absl::StrFormat(
            "deadline exceeded waiting for %s (NCCL rank %d of %d); the NCCL communicator was "
            "aborted, because the pending kernel would block every later operation on its "
            "stream",
            r.Name(), rank_, size_));
        AbortLocked(err);
        return err;
      }
    }
    backoff.Wait(deadline);
  }
}

// Like WaitUntilDone without a request: progress until nothing is queued or enqueuing. A flush
// that times out does not abort, because nothing it started is lost or blocked for good.
absl::Status NcclCommunicator::Flush(Deadline deadline) {
  HERD_RETURN_IF_ERROR(SelectDevice());
  PollBackoff backoff;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!aborted_.ok()) return aborted_;
      absl::Status s = ProgressLocked(/*launch_queued=*/true);
      if (!s.ok()) {
        absl::Status err =
            WithContext(absl::StrFormat("NCCL flush on rank %d of %d", rank_, size_), s);
        AbortLocked(err);
        return err;
      }
      if (queued_.empty() && enqueuing_.empty()) return absl::OkStatus();
      if (deadline.expired()) {
        // Nothing is lost: the operations stay in flight and a later wait() finishes them.
        return absl::DeadlineExceededError(absl::StrFormat(
            "NCCL flush on rank %d of %d: NCCL was still enqueuing at the deadline (a peer that "
            "has not launched its matching operations yet?)",
            rank_, size_));
      }
    }
    backoff.Wait(deadline);
  }
}

absl::Status NcclCommunicator::abort(absl::Status why) {
  SelectDevice().IgnoreError();  // ncclCommAbort and the drain work from any device as well
  std::lock_guard<std::mutex> lock(mu_);
  AbortLocked(std::move(why));
  return absl::OkStatus();
}

absl::Status NcclCommunicator::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

// Called by every poll. The async-error check doubles as the "is NCCL done enqueuing" test:
// a non-blocking communicator reports ncclInProgress until its background enqueue finished.
absl::Status NcclCommunicator::ProgressLocked(bool launch_queued) {
  if (comm_ == nullptr) return aborted_;
  ncclResult_t async = ncclSuccess;
  HERD_RETURN_IF_ERROR(
      NcclStatus("ncclCommGetAsyncError", ncclCommGetAsyncError(comm_, &async), comm_));
  // Still enqueuing the last launch: no other NCCL call may be made on the communicator yet.
  if (async == ncclInProgress) return absl::OkStatus();
  HERD_RETURN_IF_ERROR(NcclStatus("NCCL (asynchronous error)", async, comm_));
  if (!enqueuing_.empty()) HERD_RETURN_IF_ERROR(FinishEnqueueLocked());
  if (launch_queued && !queued_.empty()) HERD_RETURN_IF_ERROR(LaunchQueuedLocked());
  return absl::OkStatus();
}

absl::Status NcclCommunicator::LaunchQueuedLocked() {
  HERD_RETURN_IF_ERROR(PruneLaunchedLocked());
  std::vector<RequestPtr> batch = std::move(queued_);
  queued_.clear();
  // Every queued send and receive in one group: NCCL then runs them in one kernel, so a send
  // never blocks the stream waiting for a receive that was posted after it.
  Issue issue = [this, &batch](bool* in_progress) -> absl::Status {
    absl::Status first = NcclStatus("ncclGroupStart", ncclGroupStart());
    if (!first.ok()) return first;
    for (const RequestPtr& r : batch) {
      ncclResult_t res = r->direction == Direction::kSend
                             ? ncclSend(r->send_data, r->bytes, ncclUint8, r->peer, comm_, stream_)
                             : ncclRecv(r->recv_data, r->bytes, ncclUint8, r->peer, comm_, stream_);
      if (first.ok()) {
        first = WithContext(
            r->Describe(),
            NcclStatus(r->direction == Direction::kSend ? "ncclSend" : "ncclRecv", res, comm_));
      }
    }
    // The group is closed even after an error, or the thread would stay inside it.
    ncclResult_t end = ncclGroupEnd();
    *in_progress = end == ncclInProgress;
    if (first.ok()) first = NcclStatus("ncclGroupEnd", end, comm_);
    return first;
  };
  return LaunchLocked(batch, issue, nullptr);
}

absl::Status NcclCommunicator::LaunchLocked(std::vector<RequestPtr> batch, const Issue& issue,
                                            StreamWork after) {
  // The batch is tracked before anything is issued, so an abort fails its requests too.
  for (const RequestPtr& r : batch) r->phase = Phase::kEnqueuing;
  enqueuing_ = std::move(batch);
  after_enqueue_ = std::move(after);
  bool in_progress = false;
  HERD_RETURN_IF_ERROR(issue(&in_progress));
  if (in_progress) return absl::OkStatus();  // ProgressLocked finishes it later
  return FinishEnqueueLocked();
}

absl::Status NcclCommunicator::FinishEnqueueLocked() {
  // NCCL's kernel is on the stream now: what follows it (the copy out of a padded buffer, the
  // completion events) is ordered after it.
  StreamWork after = std::move(after_enqueue_);
  after_enqueue_ = nullptr;
  if (after) HERD_RETURN_IF_ERROR(after());
  for (const RequestPtr& r : enqueuing_) {
    if (r->event == nullptr) {
      HERD_RETURN_IF_ERROR(CudaStatus("cudaEventCreateWithFlags",
                                      cudaEventCreateWithFlags(&r->event, cudaEventDisableTiming)));
    }
    HERD_RETURN_IF_ERROR(CudaStatus("cudaEventRecord", cudaEventRecord(r->event, stream_)));
  }
  for (const RequestPtr& r : enqueuing_) {
    r->phase = Phase::kLaunched;
    launched_.push_back(r);
  }
  enqueuing_.clear();
  return absl::OkStatus();
}

absl::Status NcclCommunicator::PollLocked(NcclRequest& r) {
  if (r.phase != Phase::kLaunched) return absl::OkStatus();
  cudaError_t q = cudaEventQuery(r.event);
  if (q == cudaErrorNotReady) return absl::OkStatus();
  HERD_RETURN_IF_ERROR(CudaStatus("cudaEventQuery", q));
  Finish(r, absl::OkStatus());
  launched_.erase(std::remove_if(launched_.begin(), launched_.end(),
                                 [&](const RequestPtr& p) { return p.get() == &r; }),
                  launched_.end());
  return absl::OkStatus();
}

absl::Status NcclCommunicator::PruneLaunchedLocked() {
  // Requests nobody waits for would otherwise pile up here.
  absl::Status error;
  auto done = [&](const RequestPtr& r) {
    cudaError_t q = cudaEventQuery(r->event);
    if (q == cudaErrorNotReady) return false;
    if (q != cudaSuccess && error.ok()) error = CudaStatus("cudaEventQuery", q);
    if (q != cudaSuccess) return false;
    Finish(*r, absl::OkStatus());
    return true;
  };
  launched_.erase(std::remove_if(launched_.begin(), launched_.end(), done), launched_.end());
  return error;
}

void NcclCommunicator::AbortLocked(absl::Status why) {
  if (why.ok()) {
    why = absl::CancelledError(
        absl::StrFormat("NCCL communicator of rank %d of %d was aborted", rank_, size_));
  }
  if (aborted_.ok()) aborted_ = std::move(why);
  if (comm_ != nullptr) {
    // Stops NCCL's kernels and proxy threads, so nothing waits on a peer any more.
    ncclResult_t res = ncclCommAbort(comm_);
    comm_ = nullptr;
    if (res != ncclSuccess) {
      Log().warn("NCCL rank {} of {}: ncclCommAbort failed: {}", rank_, size_,
                 ncclGetErrorString(res));
    }
    // The copies queued behind an aborted kernel still run; once the stream is empty, no user
    // buffer is touched again.
    DrainStream(kDrainTimeout);
  }
  for (auto* list : {&queued_, &enqueuing_, &launched_}) {
    for (const RequestPtr& r : *list) Finish(*r, aborted_);
    list->clear();
  }
  after_enqueue_ = nullptr;
}

absl::Status NcclCommunicator::FinalizeLocked(std::chrono::milliseconds timeout) {
  HERD_RETURN_IF_ERROR(NcclStatus("ncclCommFinalize", ncclCommFinalize(comm_), comm_));
  const Deadline deadline = Deadline::After(timeout);
  PollBackoff backoff;
  while (true) {
    ncclResult_t async = ncclSuccess;
    HERD_RETURN_IF_ERROR(
        NcclStatus("ncclCommGetAsyncError", ncclCommGetAsyncError(comm_, &async), comm_));
    if (async != ncclInProgress) {
      HERD_RETURN_IF_ERROR(NcclStatus("ncclCommFinalize", async, comm_));
      break;
    }
    if (deadline.expired()) {
      return absl::DeadlineExceededError(
          absl::StrFormat("ncclCommFinalize did not finish within %d ms", timeout.count()));
    }
    backoff.Wait(deadline);
  }
  HERD_RETURN_IF_ERROR(NcclStatus("ncclCommDestroy", ncclCommDestroy(comm_)));
  comm_ = nullptr;
  return absl::OkStatus();
}

// Bounded, unlike cudaStreamSynchronize: a kernel that abort failed to stop must not hang the
// caller, and teardown goes on (with a warning) after the timeout.
void NcclCommunicator::DrainStream(std::chrono::milliseconds timeout) {
  const Deadline deadline = Deadline::After(timeout);
  PollBackoff backoff;
  while (true) {
    cudaError_t q = cudaStreamQuery(stream_);
    if (q != cudaErrorNotReady) {
      if (q != cudaSuccess) {
        Log().warn("NCCL rank {} of {}: {}", rank_, size_,
                   std::string(CudaStatus("cudaStreamQuery", q).message()));
      }
      return;
    }
    if (deadline.expired()) {
      Log().warn("NCCL rank {} of {}: the stream did not drain within {} ms after an abort", rank_,
                 size_, timeout.count());
      return;
    }
    backoff.Wait(deadline);
  }
}

}  // namespace herd::transport::nccl
