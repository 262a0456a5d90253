// Building a UcxCommunicator: the address exchange through the bootstrap store, the choice of
// endpoints per peer, and connecting a peer on first use.
//
// Why two endpoints to a peer on the same host. In Debian's UCX 1.13 the shared-memory
// transports (sysv, posix) do not support UCP_ERR_HANDLING_MODE_PEER: an endpoint that asks for
// peer error handling gets TCP only, several times slower. So messages to a same-host peer go
// through a plain endpoint (shared memory), and a second endpoint with peer error handling
// (TCP over loopback) carries no data and only tells when the peer dies: the kernel closes a
// dead process's sockets at once. Peers on other hosts get one endpoint with peer error
// handling, which loses nothing there (no shared memory to lose).
//
// Which peers. Each rank publishes its record (one Set), reads the records of its bootstrap
// peers (bootstrap_peers.h, one GetMany) and connects to them; the set is symmetric, so both
// ends of each of those pairs connect and WireUp completes their handshakes. Any other peer is
// connected by the first isend/irecv with it (EnsureConnected): one Get of its record. Both
// ends of a pair that talks use it (a send on one end meets a receive on the other), so both
// create their endpoints, in the same per-peer order, and the pairs meet as in the bootstrap.

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "transport/ucx/bootstrap_peers.h"
#include "transport/ucx/peer_record.h"
#include "transport/ucx/ucx_communicator_impl.h"

namespace herd::transport {
namespace ucx {
namespace {

using namespace std::chrono_literals;

// The rank field of the wire tag has 16 bits; its largest value marks abort notices.
constexpr int kMaxRanks = UcxCommunicator::kNoticeRank;
// A lazy connection waits for the peer's record in slices this long, looking at the abort
// status between them.
constexpr auto kRecordSlice = 500ms;

std::string KeyOf(const std::string& prefix, int rank) {
  return absl::StrFormat("%s/ucx/%d", prefix, rank);
}

}  // namespace

absl::Status UcxCommunicator::ConnectPeer(int p, const PeerRecord& record) {
  ucp_worker_h w = worker_->worker();
  UcxPeer& peer = peers_[p];
  peer.same_host = p == rank_ || record.host == my_host_;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  params.address = reinterpret_cast<const ucp_address_t*>(record.worker_address.data());

  if (peer.same_host) {
    ucs_status_t s = ucp_ep_create(w, &params, &peer.data);
    if (s != UCS_OK) {
      peer.data = nullptr;
      return UcsError(absl::StatusCode::kUnavailable, s,
                      absl::StrFormat("rank %d cannot create an endpoint to rank %d "
                                      "(same host, pid %d)",
                                      rank_, p, record.pid));
    }
    ++endpoints_;
    peer.lanes = DescribeLanes(peer.data);
    // Same host by our identity, yet UCX put a network transport on this endpoint (e.g.
    // UCX_TLS excludes shared memory): it has no peer error handling, and UCX aborts the
    // process when a transfer on such an endpoint fails. Say so once.
    if (p != rank_ && !LanesAreSharedMemory(peer.lanes) && !warned_unprotected_) {
      warned_unprotected_ = true;
      Log().warn(
          "ucx rank {}: the endpoint to rank {} on this host uses network transports without "
          "peer error handling (lanes: {}); if such a rank dies mid-transfer UCX may abort this "
          "process. Let UCX use shared memory (UCX_TLS) to avoid this.",
          rank_, p, peer.lanes);
    }
  }
  if (p == rank_) return absl::OkStatus();

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
    // This worker has watched peers before, so UCX has a transport for it: it is this peer
    // UCX cannot reach (e.g. its process is gone and its TCP port refuses the connection).
    if (watches_ > 0) {
      return UcsError(absl::StatusCode::kUnavailable, s,
                      absl::StrFormat("rank %d cannot connect to rank %d (pid %d) to watch it",
                                      rank_, p, record.pid));
    }
    if (peer.data == nullptr) {
      // No transport to this peer supports error handling: talk to it without.
      s = ucp_ep_create(w, &params, &peer.data);
      if (s != UCS_OK) {
        peer.data = nullptr;
        return UcsError(absl::StatusCode::kUnavailable, s,
                        absl::StrFormat("rank %d cannot create an endpoint to rank %d (pid %d)",
                                        rank_, p, record.pid));
      }
      ++endpoints_;
      peer.lanes = DescribeLanes(peer.data);
    }
    Log().debug(
        "ucx rank {}: rank {} cannot be watched for failures ({}); a dead rank {} will "
        "show as deadline errors",
        rank_, p, ucs_status_string(s), p);
  } else {
    ++endpoints_;
    ++watches_;
    if (peer.data == nullptr) {
      peer.data = peer.watch;
      peer.lanes = DescribeLanes(peer.data);
    }
  }
  Log().debug("ucx rank {} -> rank {}: {} host, lanes [{}]{}", rank_, p,
              peer.same_host ? "same" : "other", peer.lanes,
              peer.watch == nullptr     ? ", not watched"
              : peer.watch != peer.data ? ", watched by a second endpoint"
                                        : ", with peer error handling");
  return absl::OkStatus();
}

absl::Status UcxCommunicator::Connect(const std::vector<std::pair<int, PeerRecord>>& records) {
  std::lock_guard<std::mutex> wl(worker_mu_);
  // This rank's own endpoint (self-sends), from the record it published.
  PeerRecord self{my_host_, ::getpid(), worker_->address()};
  HERD_RETURN_IF_ERROR(ConnectPeer(rank_, self));
  connected_[rank_].store(true, std::memory_order_release);
  for (const auto& [p, record] : records) {
    HERD_RETURN_IF_ERROR(ConnectPeer(p, record));
    connected_[p].store(true, std::memory_order_release);
    ++bootstrap_peers_;
  }
  PostNoticeReceive();
  return absl::OkStatus();
}

void UcxCommunicator::EnsureConnected(int peer) {
  if (peer < 0 || peer >= size_ || connected_[peer].load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> cl(connect_mu_);
  if (connected_[peer].load(std::memory_order_acquire)) return;  // another thread did it
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_.ok() || !dead_[peer].ok()) return;  // Refused() says why
  }
  const std::string key = KeyOf(options_.prefix, peer);
  const Deadline deadline = Deadline::After(options_.bootstrap_timeout);
  absl::StatusOr<std::string> value;
  for (;;) {
    value = store_->Get(key, Deadline(std::min(deadline.at(), Clock::now() + kRecordSlice)));
    if (value.ok() || !absl::IsDeadlineExceeded(value.status())) break;
    if (!status().ok() || deadline.expired()) break;
  }
  absl::Status failed;
  if (!value.ok()) {
    if (!status().ok()) return;  // aborted while waiting
    failed = absl::IsDeadlineExceeded(value.status())
                 ? absl::UnavailableError(absl::StrFormat(
                       "rank %d is unreachable: it did not publish its address under '%s' "
                       "within %d ms of rank %d's first operation with it",
                       peer, key, options_.bootstrap_timeout.count(), rank_))
                 : absl::UnavailableError(absl::StrFormat(
                       "rank %d is unreachable: rank %d cannot read its address '%s': %s", peer,
                       rank_, key, value.status().message()));
  } else if (absl::StatusOr<PeerRecord> record = DecodePeerRecord(
                 *value, absl::StrFormat("the store value '%s' (rank %d's address)", key, peer));
             !record.ok()) {
    failed = absl::UnavailableError(
        absl::StrFormat("rank %d is unreachable: %s", peer, record.status().message()));
  } else {
    std::lock_guard<std::mutex> wl(worker_mu_);
    if (shutting_down_) return;  // aborted meanwhile: Refused() says so
    failed = ConnectPeer(peer, *record);
    if (failed.ok()) {
      ++lazy_peers_;
      connected_[peer].store(true, std::memory_order_release);
      Log().debug("ucx rank {}: connected rank {} on first use ({} peers connected lazily)", rank_,
                  peer, lazy_peers_);
      return;
    }
    // What was created stays for the shutdown to close; the peer is not used again.
    failed = absl::UnavailableError(
        absl::StrFormat("rank %d is unreachable: %s", peer, failed.message()));
  }
  Log().debug("ucx rank {}: {}", rank_, std::string(failed.message()));
  std::lock_guard<std::mutex> lock(mu_);
  MarkDeadLocked(peer, std::move(failed));
}

void UcxCommunicator::MarkDeadLocked(int peer, absl::Status why) {
  if (!dead_[peer].ok()) return;
  dead_[peer] = std::move(why);
  // A notice from it (it may have connected to this rank) would tell more.
  dead_by_watch_[peer] = true;
  death_order_.push_back(peer);
  deaths_pending_.store(true, std::memory_order_release);
}

UcxEndpointStats UcxCommunicator::endpoint_stats() const {
  std::lock_guard<std::mutex> wl(worker_mu_);
  return UcxEndpointStats{bootstrap_peers_, lazy_peers_, endpoints_};
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

  ucx::WorkerConfig config;
  config.copy_through_fifo = !options.same_host_zero_copy;
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<ucx::UcxWorker> worker, ucx::UcxWorker::Create(config));

  const ucx::PeerRecord mine{ucx::LocalHostIdentity(), ::getpid(), worker->address()};
  const std::string my_key = ucx::KeyOf(options.prefix, rank);
  if (absl::Status s = store->Set(my_key, ucx::EncodePeerRecord(mine)); !s.ok()) {
    return absl::Status(s.code(), absl::StrFormat("UCX bootstrap of rank %d: cannot publish its "
                                                  "address under '%s': %s",
                                                  rank, my_key, s.message()));
  }
  // The bootstrap peers' records in one read; the error lists every one missing at the deadline.
  const std::vector<int> peers = ucx::BootstrapPeers(rank, size);
  std::vector<std::string> keys;
  keys.reserve(peers.size());
  for (int p : peers) keys.push_back(ucx::KeyOf(options.prefix, p));
  std::vector<size_t> absent;
  absl::StatusOr<std::vector<std::string>> values = store->GetMany(keys, deadline, &absent);
  if (!values.ok()) {
    if (!absl::IsDeadlineExceeded(values.status()) || absent.empty()) {
      return absl::Status(
          values.status().code(),
          absl::StrFormat("UCX bootstrap of rank %d: reading the addresses of "
                          "ranks %s: %s",
                          rank, absl::StrJoin(peers, ", "), values.status().message()));
    }
    std::vector<int> missing;
    for (size_t i : absent) missing.push_back(peers[i]);
    return absl::DeadlineExceededError(absl::StrFormat(
        "UCX bootstrap of rank %d of %d: rank%s %s did not publish %s address under '%s/ucx/' "
        "within %d ms",
        rank, size, missing.size() > 1 ? "s" : "", absl::StrJoin(missing, ", "),
        missing.size() > 1 ? "their" : "its", options.prefix, options.bootstrap_timeout.count()));
  }
  std::vector<std::pair<int, ucx::PeerRecord>> records;
  records.reserve(peers.size());
  for (size_t i = 0; i < peers.size(); ++i) {
    HERD_ASSIGN_OR_RETURN(
        ucx::PeerRecord record,
        ucx::DecodePeerRecord((*values)[i], absl::StrFormat("the store value '%s' (rank %d's "
                                                            "address)",
                                                            keys[i], peers[i])));
    records.emplace_back(peers[i], std::move(record));
  }

  auto comm = std::make_unique<ucx::UcxCommunicator>(rank, size, std::move(worker), options,
                                                     std::move(store), mine.host);
  HERD_RETURN_IF_ERROR(comm->Connect(records));
  HERD_RETURN_IF_ERROR(comm->WireUp(deadline));
  Log().debug("ucx rank {} of {}: connected to {} bootstrap peers (prefix '{}')", rank, size,
              peers.size(), options.prefix);
  return std::unique_ptr<Communicator>(std::move(comm));
}

absl::StatusOr<UcxEndpointStats> GetUcxEndpointStats(const Communicator& comm) {
  const auto* ucx = dynamic_cast<const ucx::UcxCommunicator*>(&comm);
  if (ucx == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a %s communicator has no UCX endpoints", comm.backend()));
  }
  return ucx->endpoint_stats();
}

}  // namespace herd::transport
