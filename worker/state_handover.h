#pragma once
// How a worker that joins a running elastic job gets the model's state from the live workers,
// never from disk (docs/elastic.md, "Rejoin"). The pieces, each usable alone:
//
// - EncodeState / DecodeState: a ProcessState (checkpoint/state.h: the export a checkpoint and
//   the in-memory commit use) as one byte string and back; the decoder checks every length, so
//   a short or damaged message is an error (DATA_LOSS), never a read past its end.
// - ExchangeJoining: on a new communicator every member says whether it joins (holds no state);
//   each member learns everyone's answer (one byte to each other member).
// - HandoverSource: who sends a joining member its state: the nearest member before it (in
//   member order, wrapping) that does not join. In a ring that is its ring predecessor: a
//   decentralized newcomer takes a neighbour's model.
// - SendState / ReceiveState: the bytes over the communicator, a size first, then chunks.
// - ConfirmReceived: the receiver's one-byte answer that the state arrived, which its sender
//   waits for before it closes a communicator made for one handover (ps_ec's, below).
// - DropOwnState: what the newcomer must not take from its source because it belongs to that
//   worker alone (its error-feedback residuals and replicas): such state starts at zero.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/state.h"
#include "common/deadline.h"
#include "transport/communicator.h"

namespace herd::worker {

std::string EncodeState(const checkpoint::ProcessState& state);
absl::StatusOr<checkpoint::ProcessState> DecodeState(std::string_view bytes);

// joining[m] for every member m of `comm` (this member's own answer included).
absl::StatusOr<std::vector<bool>> ExchangeJoining(transport::Communicator& comm, bool joining,
                                                  Deadline deadline);

// The member that sends joining member `member` its state; -1 when every member joins.
int HandoverSource(const std::vector<bool>& joining, int member);

absl::Status SendState(transport::Communicator& comm, int to, std::string_view bytes,
                       Deadline deadline);
// At most `max_bytes` are accepted (a larger announced size is refused before allocating).
absl::StatusOr<std::string> ReceiveState(transport::Communicator& comm, int from, int64_t max_bytes,
                                         Deadline deadline);

// After ReceiveState (receiver true: sends the byte to `peer`) or SendState (receiver false:
// waits for it from `peer`): once it returned on both sides the state has arrived, and the
// communicator may close.
absl::Status ConfirmReceived(transport::Communicator& comm, int peer, bool receiver,
                             Deadline deadline);

// Removes the extents of kinds that belong to the exporting worker alone ("residual/",
// "reducer_residual/", "replica/") and returns their bytes.
int64_t DropOwnState(checkpoint::ProcessState& state);

}  // namespace herd::worker
