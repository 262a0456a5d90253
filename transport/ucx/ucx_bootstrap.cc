// Building a UcxCommunicator: the address exchange through the bootstrap store, and the choice
// of endpoints per peer.
//
// Why two endpoints to a peer on the same host. In Debian's UCX 1.13 the shared-memory
// transports (sysv, posix) do not support UCP_ERR_HANDLING_MODE_PEER: an endpoint that asks for
// peer error handling gets TCP only, several times slower. So messages to a same-host peer go
// through a plain endpoint (shared memory), and a second endpoint with peer error handling
// (TCP over loopback) carries no data and only tells when the peer dies: the kernel closes a
// dead process's sockets at once. Peers on other hosts get one endpoint with peer error
// handling, which loses nothing there (no shared memory to lose).

#include <unistd.h>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "transport/ucx/peer_record.h"
#include "transport/ucx/ucx_communicator_impl.h"

namespace herd::transport {
namespace ucx {
namespace {

// The rank field of the wire tag has 16 bits; its largest value marks abort notices.
constexpr int kMaxRanks = UcxCommunicator::kNoticeRank;

}  // namespace

absl::Status UcxCommunicator::Connect(const std::vector<PeerRecord>& records,
                                      const std::string& my_host) {
  std::lock_guard<std::mutex> wl(worker_mu_);
  ucp_worker_h w = worker_->worker();
  peers_.resize(size_);
  watch_args_.resize(size_);
  std::vector<int> unprotected;  // same-host peers reached over a network transport
  // Every rank creates its endpoints in the same order (by peer rank, data before watch), so the
  // TCP wireup of the two sides pairs the same endpoints.
  for (int p = 0; p < size_; ++p) {
    UcxPeer& peer = peers_[p];
    peer.same_host = p == rank_ || records[p].host == my_host;
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    params.address = reinterpret_cast<const ucp_address_t*>(records[p].worker_address.data());

    if (peer.same_host) {
      ucs_status_t s = ucp_ep_create(w, &params, &peer.data);
      if (s != UCS_OK) {
        return UcsError(absl::StatusCode::kUnavailable, s,
                        absl::StrFormat("rank %d cannot create an endpoint to rank %d "
                                        "(same host, pid %d)",
                                        rank_, p, records[p].pid));
      }
      peer.lanes = DescribeLanes(peer.data);
      // Same host by our identity, yet UCX put a network transport on this endpoint (e.g.
      // UCX_TLS excludes shared memory): it has no peer error handling, and UCX aborts the
      // process when a transfer on such an endpoint fails. Say so once.
      if (p != rank_ && !LanesAreSharedMemory(peer.lanes)) unprotected.push_back(p);
    }
    if (p == rank_) continue;

    watch_args_[p] = std::make_unique<WatchArg>(WatchArg{this, p});
    ucp_ep_params_t watched = params;
    watched.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    watched.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    watched.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t s) {
      auto* watch = static_cast<WatchArg*>(arg);
      watch->comm->OnPeerFailed(watch->peer, s);
    };
    watched.err_handler.arg = watch_args_[p].get();
    ucs_status_t s = ucp_ep_create(w, &watched, &peer.watch);
    if (s != UCS_OK) {
      peer.watch = nullptr;
      if (peer.data == nullptr) {
        // No transport to this peer supports error handling: talk to it without.
        s = ucp_ep_create(w, &params, &peer.data);
        if (s != UCS_OK) {
          return UcsError(absl::StatusCode::kUnavailable, s,
                          absl::StrFormat("rank %d cannot create an endpoint to rank %d (pid %d)",
                                          rank_, p, records[p].pid));
        }
        peer.lanes = DescribeLanes(peer.data);
      }
      Log().debug(
          "ucx rank {}: rank {} cannot be watched for failures ({}); a dead rank {} will "
          "show as deadline errors",
          rank_, p, ucs_status_string(s), p);
    } else if (peer.data == nullptr) {
      peer.data = peer.watch;
      peer.lanes = DescribeLanes(peer.data);
    }
    Log().debug("ucx rank {} -> rank {}: {} host, lanes [{}]{}", rank_, p,
                peer.same_host ? "same" : "other", peer.lanes,
                peer.watch == nullptr     ? ", not watched"
                : peer.watch != peer.data ? ", watched by a second endpoint"
                                          : ", with peer error handling");
  }
  if (!unprotected.empty()) {
    Log().warn(
        "ucx rank {}: endpoints to ranks {} on this host use network transports without peer "
        "error handling (lanes of rank {}: {}); if one of those ranks dies mid-transfer UCX may "
        "abort this process. Let UCX use shared memory (UCX_TLS) to avoid this.",
        rank_, absl::StrJoin(unprotected, ","), unprotected[0], peers_[unprotected[0]].lanes);
  }
  PostNoticeReceive();
  return absl::OkStatus();
}

absl::Status UcxCommunicator::WireUp(Deadline deadline) {
  std::lock_guard<std::mutex> wl(worker_mu_);
  ucp_worker_h w = worker_->worker();
  struct Flush {
    int peer;
    void* request;
  };
  std::vector<Flush> flushes;
  for (int p = 0; p < size_; ++p) {
    for (ucp_ep_h ep : {peers_[p].data, peers_[p].watch}) {
      if (ep == nullptr || (ep == peers_[p].watch && ep == peers_[p].data && !flushes.empty() &&
                            flushes.back().peer == p)) {
        continue;
      }
      ucp_request_param_t param{};
      ucs_status_ptr_t h = ucp_ep_flush_nbx(ep, &param);
      if (UCS_PTR_IS_ERR(h)) {
        return UcsError(absl::StatusCode::kUnavailable, UCS_PTR_STATUS(h),
                        absl::StrFormat("rank %d connecting to rank %d", rank_, p));
      }
      if (h != nullptr) flushes.push_back({p, h});
    }
  }
  absl::Status result;
  while (!flushes.empty() && result.ok()) {
    unsigned n = ProgressOnce();
    for (auto it = flushes.begin(); it != flushes.end();) {
      ucs_status_t s = ucp_request_check_status(it->request);
      if (s == UCS_INPROGRESS) {
        ++it;
        continue;
      }
      if (s != UCS_OK && result.ok()) {
        result = UcsError(absl::StatusCode::kUnavailable, s,
                          absl::StrFormat("rank %d connecting to rank %d", rank_, it->peer));
      }
      ucp_request_free(it->request);
      it = flushes.erase(it);
    }
    if (flushes.empty() || !result.ok()) break;
    if (deadline.expired()) {
      std::vector<int> late;
      for (const Flush& f : flushes) late.push_back(f.peer);
      result = absl::DeadlineExceededError(absl::StrFormat(
          "UCX bootstrap of rank %d: the connection to rank(s) %s was not established in time",
          rank_, absl::StrJoin(late, ", ")));
      break;
    }
    if (n == 0 && ucp_worker_arm(w) == UCS_OK) SleepOnFd(worker_->event_fd(), deadline);
  }
  for (const Flush& f : flushes) ucp_request_free(f.request);  // released when they complete
  return result;
}

}  // namespace ucx

absl::StatusOr<std::unique_ptr<Communicator>> CreateUcxCommunicator(int rank, int size,
                                                                    std::shared_ptr<Store> store,
                                                                    const UcxOptions& options) {
  if (size < 1 || size > ucx::kMaxRanks) {
    return absl::InvalidArgumentError(
        absl::StrFormat("UCX communicator size %d is out of range [1, %d]", size, ucx::kMaxRanks));
  }
  if (rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("UCX communicator rank %d is out of range [0, %d)", rank, size));
  }
  if (store == nullptr) return absl::InvalidArgumentError("UCX communicator needs a store");
  const Deadline deadline = Deadline::After(options.bootstrap_timeout);
  auto key_of = [&](int r) { return absl::StrFormat("%s/ucx/%d", options.prefix, r); };

  ucx::WorkerConfig config;
  config.copy_through_fifo = !options.same_host_zero_copy;
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<ucx::UcxWorker> worker, ucx::UcxWorker::Create(config));

  std::vector<ucx::PeerRecord> records(size);
  records[rank] = ucx::PeerRecord{ucx::LocalHostIdentity(), ::getpid(), worker->address()};
  if (absl::Status s = store->Set(key_of(rank), ucx::EncodePeerRecord(records[rank])); !s.ok()) {
    return absl::Status(s.code(), absl::StrFormat("UCX bootstrap of rank %d: cannot publish its "
                                                  "address under '%s': %s",
                                                  rank, key_of(rank), s.message()));
  }
  // Read every peer's record; after the first one missing at the deadline the others are only
  // looked up, so the error lists every rank that did not show up.
  std::vector<int> missing;
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    absl::StatusOr<std::string> value = store->Get(key_of(p), deadline);
    if (!value.ok()) {
      if (value.status().code() != absl::StatusCode::kDeadlineExceeded) {
        return absl::Status(value.status().code(),
                            absl::StrFormat("UCX bootstrap of rank %d: reading rank %d's "
                                            "address: %s",
                                            rank, p, value.status().message()));
      }
      missing.push_back(p);
      continue;
    }
    HERD_ASSIGN_OR_RETURN(records[p],
                          ucx::DecodePeerRecord(*value, absl::StrFormat("the store value '%s' "
                                                                        "(rank %d's address)",
                                                                        key_of(p), p)));
  }
  if (!missing.empty()) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "UCX bootstrap of rank %d of %d: rank%s %s did not publish %s address under '%s/ucx/' "
        "within %d ms",
        rank, size, missing.size() > 1 ? "s" : "", absl::StrJoin(missing, ", "),
        missing.size() > 1 ? "their" : "its", options.prefix, options.bootstrap_timeout.count()));
  }

  auto comm = std::make_unique<ucx::UcxCommunicator>(rank, size, std::move(worker), options);
  HERD_RETURN_IF_ERROR(comm->Connect(records, records[rank].host));
  HERD_RETURN_IF_ERROR(comm->WireUp(deadline));
  Log().debug("ucx rank {} of {}: connected (prefix '{}')", rank, size, options.prefix);
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace herd::transport
