#include "transport/loopback/loopback_communicator.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "absl/strings/str_format.h"

namespace herd::transport {
namespace {

struct LoopbackRequest : RequestState {
  LoopbackRequest(Direction d, int owner, int peer, Tag tag, const std::byte* send_data,
                  std::byte* recv_data, size_t bytes)
      : RequestState(d, peer, tag, bytes),
        owner(owner),
        send_data(send_data),
        recv_data(recv_data) {}
  const int owner;  // the rank that issued it
  const std::byte* send_data;
  std::byte* recv_data;
  // Guarded by the fabric's mutex.
  bool done = false;
  absl::Status status;
  size_t received = 0;
};

using RequestPtr = std::shared_ptr<LoopbackRequest>;

class Fabric;

class LoopbackCommunicator final : public Communicator {
 public:
  LoopbackCommunicator(std::shared_ptr<Fabric> fabric, int rank);
  ~LoopbackCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override;
  std::string_view backend() const override { return "loopback"; }
  const std::string& host() const;
  absl::Status peer_status(int peer) const;
  Request isend(int peer, Tag tag, ConstBytes buf) override;
  Request irecv(int peer, Tag tag, MutableBytes buf) override;
  absl::Status wait(Request& req, Deadline deadline) override;
  absl::Status abort(absl::Status why) override;
  absl::Status status() const override;

 private:
  std::shared_ptr<Fabric> fabric_;
  const int rank_;
};

class Fabric final : public LoopbackFabric, public std::enable_shared_from_this<Fabric> {
 public:
  explicit Fabric(int size, std::vector<std::string> hosts = {})
      : size_(size), hosts_(std::move(hosts)), ranks_(size) {
    // A labelled fabric labels every rank (so that all or none run the host discovery).
    if (!hosts_.empty()) {
      hosts_.resize(size);
      for (int r = 0; r < size; ++r) {
        if (hosts_[r].empty()) hosts_[r] = absl::StrFormat("loopback-rank-%d", r);
      }
    }
    hosts_.resize(size);
  }

  const std::string& host(int rank) const { return hosts_[rank]; }
  absl::Status DeadStatus(int rank) const {
    std::lock_guard<std::mutex> lock(mu_);
    return rank < 0 || rank >= size_ ? absl::OkStatus() : ranks_[rank].dead;
  }

  int size() const override { return size_; }
  std::unique_ptr<Communicator> communicator(int rank) override {
    return std::make_unique<LoopbackCommunicator>(shared_from_this(), rank);
  }

  void kill(int rank, absl::Status why) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (rank < 0 || rank >= size_) return;
    ranks_[rank].dead = why;
    FailWhere([&](const LoopbackRequest& r) { return r.owner == rank; },
              [&](const LoopbackRequest&) { return why; });
    FailWhere([&](const LoopbackRequest& r) { return r.peer == rank; },
              [&](const LoopbackRequest& r) { return PeerDied(r, rank); });
  }

  Request Post(int owner, Direction dir, int peer, Tag tag, const std::byte* send_data,
               std::byte* recv_data, size_t bytes) {
    auto req =
        std::make_shared<LoopbackRequest>(dir, owner, peer, tag, send_data, recv_data, bytes);
    std::lock_guard<std::mutex> lock(mu_);
    if (peer < 0 || peer >= size_) {
      Complete(*req,
               absl::InvalidArgumentError(absl::StrFormat(
                   "%s: peer rank %d is out of range [0, %d)", req->Describe(), peer, size_)));
    } else if (!ranks_[owner].aborted.ok()) {
      Complete(*req, ranks_[owner].aborted);
    } else if (!ranks_[owner].dead.ok()) {
      Complete(*req, ranks_[owner].dead);
    } else if (!ranks_[peer].dead.ok()) {
      Complete(*req, PeerDied(*req, peer));
    } else if (!ranks_[peer].aborted.ok()) {
      Complete(*req, PeerAborted(*req, peer));
    } else if (dir == Direction::kSend) {
      // Look for a receive posted by `peer` for messages from `owner` with this tag.
      auto& queue = ranks_[peer].posted_recvs[MakeKey(owner, tag)];
      if (!queue.empty()) {
        RequestPtr recv = queue.front();
        queue.pop_front();
        Transfer(*req, *recv);
      } else {
        ranks_[peer].pending_sends[MakeKey(owner, tag)].push_back(req);
      }
    } else {
      auto& queue = ranks_[owner].pending_sends[MakeKey(peer, tag)];
      if (!queue.empty()) {
        RequestPtr send = queue.front();
        queue.pop_front();
        Transfer(*send, *req);
      } else {
        ranks_[owner].posted_recvs[MakeKey(peer, tag)].push_back(req);
      }
    }
    return Request(std::move(req));
  }

  absl::Status Wait(Request& handle, Deadline deadline) {
    if (handle.empty()) return absl::OkStatus();
    auto* req = handle.state_as<LoopbackRequest>();
    std::unique_lock<std::mutex> lock(mu_);
    while (!req->done) {
      if (cv_.wait_until(lock, deadline.at()) == std::cv_status::timeout && !req->done) {
        return absl::DeadlineExceededError(
            absl::StrFormat("deadline exceeded waiting for %s", req->Describe()));
      }
    }
    absl::Status s = req->status;
    handle.set_received(req->received);
    if (s.ok()) handle.reset();
    return s;
  }

  absl::Status Abort(int rank, absl::Status why) {
    if (why.ok()) why = absl::CancelledError("communicator aborted");
    std::lock_guard<std::mutex> lock(mu_);
    if (ranks_[rank].aborted.ok()) ranks_[rank].aborted = why;
    FailWhere([&](const LoopbackRequest& r) { return r.owner == rank; },
              [&](const LoopbackRequest&) { return ranks_[rank].aborted; });
    // The peers learn it, as a real backend's abort notice tells them: whoever waits on this
    // rank fails now, naming it and its reason, instead of running into its own deadline.
    FailWhere([&](const LoopbackRequest& r) { return r.peer == rank && r.owner != rank; },
              [&](const LoopbackRequest& r) { return PeerAborted(r, rank); });
    return absl::OkStatus();
  }

  absl::Status Status(int rank) const {
    std::lock_guard<std::mutex> lock(mu_);
    return ranks_[rank].aborted;
  }

 private:
  using Key = std::pair<int, uint64_t>;  // (other rank, packed tag)
  static Key MakeKey(int other, Tag tag) { return {other, tag.packed()}; }

  struct RankState {
    // Receives this rank posted, and sends to this rank that found no receive yet.
    std::map<std::pair<int, uint64_t>, std::deque<RequestPtr>> posted_recvs;
    std::map<std::pair<int, uint64_t>, std::deque<RequestPtr>> pending_sends;
    absl::Status aborted;
    absl::Status dead;
  };

  // Copies a matched pair and completes both. Requires mu_.
  void Transfer(LoopbackRequest& send, LoopbackRequest& recv) {
    if (send.bytes > recv.bytes) {
      auto err = absl::OutOfRangeError(absl::StrFormat(
          "message of %u bytes does not fit the %u-byte receive buffer (send: %s; recv: %s)",
          send.bytes, recv.bytes, send.Describe(), recv.Describe()));
      Complete(send, err);
      Complete(recv, err);
      return;
    }
    if (send.bytes > 0) std::memcpy(recv.recv_data, send.send_data, send.bytes);
    recv.received = send.bytes;
    Complete(send, absl::OkStatus());
    Complete(recv, absl::OkStatus());
  }

  void Complete(LoopbackRequest& r, absl::Status s) {
    r.done = true;
    r.status = std::move(s);
    cv_.notify_all();
  }

  absl::Status PeerDied(const LoopbackRequest& r, int peer) const {
    return absl::UnavailableError(
        absl::StrFormat("%s: rank %d died: %s", r.Describe(), peer, ranks_[peer].dead.message()));
  }
  absl::Status PeerAborted(const LoopbackRequest& r, int peer) const {
    return absl::UnavailableError(absl::StrFormat("%s: rank %d aborted: %s", r.Describe(), peer,
                                                  ranks_[peer].aborted.message()));
  }

  // Fails, with why(request), and unlinks every queued request for which pred is true.
  // Requires mu_.
  template <typename Pred, typename Why>
  void FailWhere(Pred pred, Why why) {
    for (RankState& rs : ranks_) {
      for (auto* table : {&rs.posted_recvs, &rs.pending_sends}) {
        for (auto& [key, queue] : *table) {
          for (auto it = queue.begin(); it != queue.end();) {
            if (pred(**it)) {
              Complete(**it, why(**it));
              it = queue.erase(it);
            } else {
              ++it;
            }
          }
        }
      }
    }
  }

  const int size_;
  std::vector<std::string> hosts_;  // per rank; empty: every rank a host of its own
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<RankState> ranks_;  // guarded by mu_
};

LoopbackCommunicator::LoopbackCommunicator(std::shared_ptr<Fabric> fabric, int rank)
    : fabric_(std::move(fabric)), rank_(rank) {}

LoopbackCommunicator::~LoopbackCommunicator() {
  (void)fabric_->Abort(rank_, absl::CancelledError("communicator destroyed"));
}

int LoopbackCommunicator::size() const { return fabric_->size(); }

Request LoopbackCommunicator::isend(int peer, Tag tag, ConstBytes buf) {
  return fabric_->Post(rank_, Direction::kSend, peer, tag, buf.data(), nullptr, buf.size());
}

Request LoopbackCommunicator::irecv(int peer, Tag tag, MutableBytes buf) {
  return fabric_->Post(rank_, Direction::kRecv, peer, tag, nullptr, buf.data(), buf.size());
}

absl::Status LoopbackCommunicator::wait(Request& req, Deadline deadline) {
  return fabric_->Wait(req, deadline);
}

absl::Status LoopbackCommunicator::abort(absl::Status why) {
  return fabric_->Abort(rank_, std::move(why));
}

absl::Status LoopbackCommunicator::status() const { return fabric_->Status(rank_); }

const std::string& LoopbackCommunicator::host() const { return fabric_->host(rank_); }

absl::Status LoopbackCommunicator::peer_status(int peer) const { return fabric_->DeadStatus(peer); }

}  // namespace

std::shared_ptr<LoopbackFabric> LoopbackFabric::Create(int size) {
  return std::make_shared<Fabric>(size);
}

std::shared_ptr<LoopbackFabric> LoopbackFabric::Create(int size, std::vector<std::string> hosts) {
  return std::make_shared<Fabric>(size, std::move(hosts));
}

std::vector<std::unique_ptr<Communicator>> MakeLoopbackCommunicators(int size) {
  return MakeLoopbackCommunicators(size, {});
}

std::vector<std::unique_ptr<Communicator>> MakeLoopbackCommunicators(
    int size, std::vector<std::string> hosts) {
  auto fabric = LoopbackFabric::Create(size, std::move(hosts));
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r) comms.push_back(fabric->communicator(r));
  return comms;
}

std::string LoopbackHost(const Communicator& comm) {
  const auto* c = dynamic_cast<const LoopbackCommunicator*>(&comm);
  return c == nullptr ? std::string() : c->host();
}

absl::Status LoopbackPeerStatus(const Communicator& comm, int peer) {
  const auto* c = dynamic_cast<const LoopbackCommunicator*>(&comm);
  return c == nullptr ? absl::OkStatus() : c->peer_status(peer);
}

}  // namespace herd::transport
