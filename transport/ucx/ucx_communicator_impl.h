#pragma once
// The UcxCommunicator class: shared by the data path (ucx_communicator.cc) and the bootstrap
// that builds it (ucx_bootstrap.cc). Not part of the public API; use CreateUcxCommunicator.
//
// Locking. Three mutexes, always taken in this order:
//  - connect_mu_ serializes connecting peers on first use (EnsureConnected); it is held while
//    the peer's record is read from the store, never while waiting for the worker.
//  - worker_mu_ serializes every call into UCP (the worker runs in serialized thread mode).
//    UCX invokes completion and error callbacks from inside ucp_worker_progress /
//    ucp_request_cancel, hence with worker_mu_ held.
//  - mu_ guards the bookkeeping: request states, the in-flight table, dead peers, the abort
//    status and the progress token.
// A mutex rather than UCS_THREAD_MODE_MULTI because a thread must be able to sleep on the
// worker's event fd without holding the worker, and because the bookkeeping needs a lock of its
// own anyway; MULTI would add UCX's internal lock to every call on top of ours.
//
// Progress. wait() progresses the worker in the calling thread. At most one thread holds the
// progress token (progressing_); it spins while UCX makes progress, then arms the worker and
// sleeps on its event fd. Other waiters sleep on cv_, woken when a request completes or the
// token is handed back. isend/irecv signal the worker so a sleeping progressor notices new work.

#include <ucp/api/ucp.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "transport/communicator.h"
#include "transport/store/store.h"
#include "transport/ucx/peer_record.h"
#include "transport/ucx/ucx_communicator.h"
#include "transport/ucx/ucx_worker.h"

namespace herd::transport::ucx {

class UcxCommunicator;

// Sleeps until `fd` is readable or `d` passes, at most 100 ms (so that UCX's timers still run
// and a transport without wakeup support costs latency, never a hang). True if `fd` woke it.
bool SleepOnFd(int fd, Deadline d);

struct UcxRequest final : RequestState {
  UcxRequest(UcxCommunicator* comm, Direction d, int peer, Tag tag, size_t bytes)
      : RequestState(d, peer, tag, bytes), comm(comm) {}

  UcxCommunicator* const comm;
  // True once the request has its final status for the user; set under mu_, read without it
  // by the spinning progressor.
  std::atomic<bool> done{false};
  absl::Status status;  // guarded by comm->mu_
  size_t received = 0;  // guarded by comm->mu_
  // The UCX operation while UCX still owns it (it may outlive `done`: a receive failed because
  // its peer died is still matched inside UCX). Guarded by comm->worker_mu_.
  void* ucp_request = nullptr;
  // UCX called the completion callback (guarded by comm->worker_mu_). In UCX 1.13 this can
  // happen inside ucp_tag_send_nbx for a multi-fragment eager send that still returns a
  // request pointer, already released by the callback.
  bool callback_ran = false;
  ucp_tag_recv_info_t recv_info{};  // filled by UCX when a receive completes at once
  bool notice = false;              // the communicator's own receive of abort notices
};

// Posts a tag receive of `length` bytes into `buf` whose completion lands in
// UcxCommunicator::OnUcxComplete(&r, ...) with the length and sender tag. Requires worker_mu_.
ucs_status_ptr_t PostTagRecv(ucp_worker_h worker, void* buf, size_t length, uint64_t tag,
                             uint64_t mask, UcxRequest& r);

// Per-peer connection state: no endpoint until the peer is connected (while the communicator
// is built for its bootstrap peers, on first use for the others).
struct UcxPeer {
  ucp_ep_h data = nullptr;   // where this rank's tag messages to the peer go
  ucp_ep_h watch = nullptr;  // endpoint with peer error handling; == data for other hosts
  bool same_host = false;
  std::string lanes;  // transports of `data`, for logs
};

class UcxCommunicator final : public Communicator {
 public:
  // The rank field of abort notices' wire tags; real ranks are below it.
  static constexpr int kNoticeRank = 0xFFFF;
  static constexpr size_t kNoticeBytes = 2048;  // longer reasons are cut

  // Takes over a worker whose endpoints are not created yet; Connect() creates them. `store`
  // is where the records of peers connected on first use are read (under options.prefix);
  // `my_host` is this process's host identity (PeerRecord::host).
  UcxCommunicator(int rank, int size, std::unique_ptr<UcxWorker> worker, const UcxOptions& options,
                  std::shared_ptr<Store> store, std::string my_host);
  ~UcxCommunicator() override;

  // Creates the endpoints to this rank and to each peer of `records` (its bootstrap peers,
  // bootstrap_peers.h). Fails naming the peer whose endpoint could not be created.
  absl::Status Connect(const std::vector<std::pair<int, PeerRecord>>& records);

  // Completes the connection handshakes (flushes every endpoint), progressing the worker while
  // the peers do the same in their bootstrap. Without it a TCP endpoint whose peer has not
  // answered yet keeps the worker's event fd readable, and every wait() would spin.
  absl::Status WireUp(Deadline deadline);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend() const override { return "ucx"; }
  Request isend(int peer, Tag tag, ConstBytes buf) override;
  Request irecv(int peer, Tag tag, MutableBytes buf) override;
  absl::Status wait(Request& req, Deadline deadline) override;
  absl::Status abort(absl::Status why) override;
  absl::Status status() const override;

  UcxEndpointStats endpoint_stats() const;

  // UCX callbacks (static trampolines in the .cc land here). Called with worker_mu_ held.
  void OnUcxComplete(UcxRequest* r, void* ucp_request, ucs_status_t s, size_t length,
                     uint64_t sender_tag);
  void OnPeerFailed(int peer, ucs_status_t s);

 private:
  struct WatchArg {
    UcxCommunicator* comm;
    int peer;
  };

  // Endpoints to one peer from its record: for a same-host peer a data endpoint without error
  // handling (shared memory) and then a watch endpoint with it (TCP); for another host one
  // endpoint with peer error handling. Both ends create the endpoints of a pair in this order
  // (data, then watch), whenever each end does it: UCX pairs the i-th endpoint one worker
  // creates to another with the i-th that one creates back (a connection sequence number per
  // destination), so the TCP wire-up of the watch endpoints meets. Requires worker_mu_.
  absl::Status ConnectPeer(int p, const PeerRecord& record);
  // The lazy path of isend/irecv: connects `peer` unless it is connected already, reading its
  // record from the store (one Get; it waits in slices until the bootstrap timeout, giving up
  // when the communicator is aborted meanwhile). A peer that cannot be connected is marked
  // dead with the reason, so the operation and every later one with it fail with UNAVAILABLE
  // naming it. Takes connect_mu_, then worker_mu_; call with neither held.
  void EnsureConnected(int peer);
  // Marks `peer` dead with `why` (unless it already is). Requires mu_.
  void MarkDeadLocked(int peer, absl::Status why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Validation common to isend/irecv: completes `r` with its error and returns true if the
  // operation must not start (peer out of range, communicator aborted, peer dead).
  bool Refused(UcxRequest& r);
  // Records the result of posting `r` (the return value of ucp_tag_*_nbx). Requires worker_mu_.
  void Posted(const std::shared_ptr<UcxRequest>& r, ucs_status_ptr_t handle);
  void FinishLocked(UcxRequest& r, absl::Status s, size_t received = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status StatusFromUcx(const UcxRequest& r, ucs_status_t s, size_t length)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // UNAVAILABLE for a request whose peer is dead; DEADLINE_EXCEEDED for one still in flight.
  // Both mention the other dead peers: the rank that died first is often not the one a wait
  // was blocked on.
  absl::Status DeadPeerError(const UcxRequest& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status DeadlineError(const UcxRequest& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `text` + "; note: rank 2 is unreachable (...)" for every dead peer other than `except`, in
  // the order they failed, unless `text` already tells it.
  std::string WithDeadPeersNote(std::string text, int except = -1) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Progresses the worker (this thread holds the progress token) until `r` is done, the
  // deadline passes or the communicator is shut down.
  void ProgressUntil(const UcxRequest& r, Deadline deadline);
  // One ucp_worker_progress plus the handling of peers found dead. Requires worker_mu_.
  unsigned ProgressOnce();
  // Fails the requests of peers that died since the last call. Requires worker_mu_.
  void HandleDeadPeers();
  // abort() and the destructor: fail what is pending with `why`, cancel receives, let matched
  // transfers with live peers finish for a bounded time, close every endpoint (gracefully when
  // `graceful`), release what UCX still holds. Afterwards the worker is never progressed again.
  // Requires worker_mu_.
  void Shutdown(const absl::Status& why, bool graceful);
  void CloseEndpoints(bool graceful);

  // Abort notices (ucx_abort_notice.cc). A rank that aborts tells every live peer why, in a
  // message with the reserved rank kNoticeRank in its wire tag; each rank keeps one receive for
  // them posted. A peer that gets one marks the sender dead with that reason, so an error
  // several hops away from a failure still names the rank that failed first.
  // All require worker_mu_.
  void PostNoticeReceive();
  void OnNotice(uint64_t sender_tag, size_t length);
  void SendAbortNotices(const absl::Status& why);
  void AwaitToldPeers(const std::vector<int>& told, Clock::time_point until);
  bool TakeUnexpectedNotice(Clock::time_point until);
  // Receives and drops messages no one posted a receive for, so that UCX does not report
  // leaked buffers when the worker is destroyed. Requires worker_mu_.
  void DiscardUnexpected();

  const int rank_;
  const int size_;
  const UcxOptions options_;
  std::unique_ptr<UcxWorker> worker_;  // reset first in the destructor
  const std::shared_ptr<Store> store_;
  const std::string my_host_;
  // Written under worker_mu_ when a peer is connected (Connect, EnsureConnected) and read under
  // it (every user of an endpoint holds worker_mu_ anyway).
  std::vector<UcxPeer> peers_;
  std::vector<std::unique_ptr<WatchArg>> watch_args_;
  // connected_[p]: peers_[p] has its endpoints. Set under worker_mu_ after they are created,
  // read without a lock by isend/irecv to skip the lazy path.
  std::unique_ptr<std::atomic<bool>[]> connected_;
  // Serializes lazy connections, so two threads never connect one peer twice. Taken before
  // worker_mu_ and never while waiting for the worker.
  std::mutex connect_mu_;
  int bootstrap_peers_ = 0;          // connected by Connect(); guarded by worker_mu_
  int lazy_peers_ = 0;               // connected on first use; guarded by worker_mu_
  int endpoints_ = 0;                // UCP endpoints created; guarded by worker_mu_
  int watches_ = 0;                  // watch endpoints created; guarded by worker_mu_
  bool warned_unprotected_ = false;  // the warning of ConnectPeer; guarded by worker_mu_

  mutable std::mutex worker_mu_;
  bool shutting_down_ ABSL_GUARDED_BY(worker_mu_) = false;  // Shutdown() has begun
  bool shut_down_ ABSL_GUARDED_BY(worker_mu_) = false;      // ...and ended: never progress again
  bool repost_notice_ ABSL_GUARDED_BY(worker_mu_) = false;  // the notice receive completed
  std::array<char, kNoticeBytes> notice_buffer_;            // where notices arrive
  std::string notice_text_;  // what this rank's abort sends (kept until the worker is gone)

  mutable std::mutex mu_;
  std::condition_variable cv_;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> dead_ ABSL_GUARDED_BY(mu_);  // per peer; OK while alive
  std::vector<int> death_order_ ABSL_GUARDED_BY(mu_);    // dead peers, first failure first
  // dead_[p] came from the watch endpoint; a notice from p, more telling, may replace it.
  std::vector<bool> dead_by_watch_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> deaths_pending_{false};  // set by OnPeerFailed, cleared by HandleDeadPeers
  std::atomic<uint64_t> posts_{0};           // operations handed to UCX, for the progressor
  std::atomic<int> sends_in_flight_{0};      // sends in inflight_
  bool progressing_ ABSL_GUARDED_BY(mu_) = false;
  // Requests UCX still owns, kept alive until their callback (or the shutdown) releases them.
  std::unordered_map<UcxRequest*, std::shared_ptr<UcxRequest>> inflight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace herd::transport::ucx
