#pragma once
// One sparse operation's view of the communicator: its tags, its deadline, and the rule that
// any transport failure aborts the communicator (so no backend touches a buffer of this call
// afterwards) and is returned unchanged, its message naming the peer, direction and tag.
// Internal to algorithms/sparse.
//
// Tags: kind OpKind::kSparse, the caller's id, and a step (20 bits) made of the phase in the
// top 4 bits and a number within the phase in the low 16 (a transfer of Spar-Reduce-Scatter,
// a round of Spar-All-Gather or of a Bruck all-gather): phases never match each other, and
// groups of up to 65536 ranks number their transfers without wrapping.

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/bytes.h"
#include "common/deadline.h"
#include "transport/communicator.h"

namespace herd::sparse {

enum class Phase : uint32_t {
  kReduceScatter = 0,  // SparDL: Spar-Reduce-Scatter block transfers
  kSag = 1,            // SparDL: Spar-All-Gather across teams
  kTeamGather = 2,     // SparDL: final sparse Bruck all-gather inside a team
  kTopA = 3,           // TopA: sparse Bruck all-gather of every rank's top-k
};

inline constexpr int kPhaseShift = 16;
inline constexpr uint32_t kMaxPhaseStep = (1u << kPhaseShift) - 1;

class Wire {
 public:
  Wire(transport::Communicator& comm, uint32_t id, Deadline deadline, std::string_view what)
      : comm_(comm), id_(id), deadline_(deadline), what_(what) {}

  transport::Communicator& comm() { return comm_; }
  int rank() const { return comm_.rank(); }
  std::string_view what() const { return what_; }

  transport::Tag TagOf(Phase phase, uint32_t step) const;
  transport::Request Send(int peer, Phase phase, uint32_t step, ConstBytes bytes);
  transport::Request Recv(int peer, Phase phase, uint32_t step, MutableBytes bytes);

  // Waits for a receive; returns the bytes that arrived.
  absl::StatusOr<size_t> WaitRecv(transport::Request& req);
  absl::Status WaitSend(transport::Request& req);
  absl::Status WaitSends(absl::Span<transport::Request> reqs);

  // A frame from `peer` that did not parse: INVALID_ARGUMENT naming the peer and the tag,
  // after aborting the communicator (the peers may wait for messages that never come).
  absl::Status BadFrame(int peer, Phase phase, uint32_t step, const absl::Status& why);
  // Aborts the communicator with `error` and returns it.
  absl::Status Fail(absl::Status error);

 private:
  transport::Communicator& comm_;
  const uint32_t id_;
  const Deadline deadline_;
  const std::string_view what_;
};

}  // namespace herd::sparse
