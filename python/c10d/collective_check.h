#pragma once
// What every rank of a herd process group says before each collective: the call's sequence
// number in the group, the operation and what it was called on. The ranks exchange these
// descriptors (one small message to every other rank, posted before the collective's own
// messages) and compare them, so ranks that called different collectives, or the same one on
// other shapes or dtypes, are named at once ("rank 0 called allreduce(sum) on float32[10, 4];
// rank 1 called broadcast(root 0) on float32[10, 4]") instead of hanging until the timeout or
// reducing garbage. A rank that never makes the call is named when the wait for its descriptor
// ends (the deadline, or its death), with the last call it did make. The exchange is also the
// group's barrier: no rank leaves it before every rank entered it.
//
// No torch here: the backend (process_group.cc) fills the descriptors from its tensors.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/deadline.h"
#include "transport/communicator.h"

namespace herd::python::c10d_backend {

struct CallDescriptor {
  uint64_t seq = 0;           // the group's collective calls so far, from 0
  std::string op;             // "allreduce(sum)", "broadcast(root 0)", "barrier"
  std::string signature;      // what must match on every rank: "float32[10, 4]"
  std::string rank_specific;  // shown, never compared (a root's tensor list, alltoall splits)

  std::string Describe() const;  // "allreduce(sum) on float32[10, 4]"
  std::string Encode() const;
  static bool Decode(const std::string& bytes, CallDescriptor& out);
};

// The backend's own point-to-point traffic on the group's communicator, beside herd's
// collectives (which tag their messages with their own operation kinds): user send/recv, the
// descriptors, and the rooted or uneven exchanges herd's collectives have no algorithm for.
// All use OpKind::kUser; the step keeps them apart, the id is the call's sequence number (the
// user's tag for send/recv).
enum class UserStep : uint32_t {
  kSendRecv = 0,
  kDescriptor = 1,
  kGather = 2,
  kScatter = 3,
  kAllToAll = 4,
  kMonitoredBarrier = 5,
};
transport::Tag UserTag(UserStep step, uint64_t id);

// Exchanges `mine` with every other rank of `comm` and checks that they agree. On success the
// group has passed a barrier. Errors (the communicator is aborted on a transport error, not on
// a mismatch, so the group stays usable after a refused call):
//   FAILED_PRECONDITION  the descriptors differ: the message lists every rank's call
//   DEADLINE_EXCEEDED    a rank did not make the call by the deadline: names it and its last call
//   the transport's      a rank died or aborted (UNAVAILABLE naming it), with its last call
// `last` holds every rank's last descriptor seen (updated here), for those messages.
absl::Status ExchangeDescriptors(transport::Communicator& comm, const CallDescriptor& mine,
                                 std::vector<CallDescriptor>& last, Deadline deadline,
                                 const std::string& group);

}  // namespace herd::python::c10d_backend
