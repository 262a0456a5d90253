#include "transport/communicator.h"

#include "absl/strings/str_format.h"

namespace herd::transport {

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kUser:
      return "user";
    case OpKind::kReduceScatter:
      return "reduce_scatter";
    case OpKind::kAllGather:
      return "allgather";
    case OpKind::kAllReduce:
      return "allreduce";
    case OpKind::kBroadcast:
      return "broadcast";
    case OpKind::kReduce:
      return "reduce";
    case OpKind::kAllToAll:
      return "alltoall";
    case OpKind::kBarrier:
      return "barrier";
    case OpKind::kSparse:
      return "sparse";
    case OpKind::kDecentralized:
      return "decentralized";
    case OpKind::kCompressed:
      return "compressed";
    case OpKind::kBootstrap:
      return "bootstrap";
    case OpKind::kStateHandover:
      return "state_handover";
    case OpKind::kTopology:
      return "topology";
  }
  return "unknown";
}

std::string Tag::ToString() const {
  return absl::StrFormat("%s id=%u step=%u", OpKindName(kind), id, step);
}

std::string RequestState::Describe() const {
  return absl::StrFormat("%s of %u bytes %s rank %d (%s)",
                         direction == Direction::kSend ? "send" : "recv", bytes,
                         direction == Direction::kSend ? "to" : "from", peer, tag.ToString());
}

Communicator::~Communicator() = default;

absl::StatusOr<CommunicatorAttachment*> Communicator::Attachment(
    std::string_view key,
    absl::FunctionRef<absl::StatusOr<std::unique_ptr<CommunicatorAttachment>>()> make) {
  std::lock_guard<std::mutex> lock(attachments_mu_);
  for (auto& [k, a] : attachments_) {
    if (k == key) return a.get();
  }
  absl::StatusOr<std::unique_ptr<CommunicatorAttachment>> made = make();
  if (!made.ok()) return made.status();
  attachments_.emplace_back(std::string(key), *std::move(made));
  return attachments_.back().second.get();
}

CommunicatorAttachment* Communicator::FindAttachment(std::string_view key) {
  std::lock_guard<std::mutex> lock(attachments_mu_);
  for (auto& [k, a] : attachments_) {
    if (k == key) return a.get();
  }
  return nullptr;
}

absl::Status Communicator::WaitAll(absl::Span<Request> reqs, Deadline deadline) {
  for (Request& r : reqs) {
    absl::Status s = wait(r, deadline);
    if (!s.ok()) {
      // The wait's error is the one to report; abort only fails if already aborted.
      (void)abort(s);
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status Communicator::WaitAll(std::initializer_list<Request*> reqs, Deadline deadline) {
  for (Request* r : reqs) {
    absl::Status s = wait(*r, deadline);
    if (!s.ok()) {
      // The wait's error is the one to report; abort only fails if already aborted.
      (void)abort(s);
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::transport
