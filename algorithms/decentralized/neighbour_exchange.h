#pragma once
// What D_FP_S and D_LP_S share: a segmented, windowed exchange with a fixed set of peers.
// Internal to algorithms/decentralized.
//
// For each segment k = 0..segments-1 this rank sends one payload to every rank of `send_to`
// (empty: the ranks of `peers`) and receives one payload from each of `peers`. Up to `window`
// segments are in flight: while segment k is finished (reduced, decoded), segments k+1.. are
// on the wire. All messages carry the tag (kDecentralized, tag, (first_segment_tag + k) mod
// 2^20); two ranks post the same segments in the same order, and messages with equal tags
// between a pair match in send order, so wrapping is harmless.
//
// Order of events for segment k: prepare(k) (the payload, which must stay valid until
// finish(k) returns), receives and sends posted; later all of them complete, then finish(k)
// gets the peers' payloads. So finish(k) may overwrite the memory prepare(k) sent from, and
// segment k + window is prepared only after finish(k).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/bytes.h"
#include "common/deadline.h"
#include "transport/communicator.h"

namespace herd::decentralized::internal {

// Segments of work queued at once. Four keeps the wire busy while one segment is processed,
// for 4 x peers x max_recv_bytes of scratch.
inline constexpr size_t kWindow = 4;

struct SegmentedExchange {
  transport::Communicator* comm = nullptr;
  std::vector<int> peers;    // received from: distinct, not this rank
  std::vector<int> send_to;  // sent to: distinct, not this rank; empty means `peers`
  uint32_t tag = 0;
  Deadline deadline = Deadline::Infinite();
  std::string_view what;  // names the operation in errors
  size_t segments = 0;
  size_t first_segment_tag = 0;  // segment k is tagged first_segment_tag + k: two exchanges
                                 // of one call with the same pair of ranks stay apart
  size_t max_recv_bytes = 0;     // the largest payload of any segment from one peer

  std::function<ConstBytes(size_t k)> prepare;
  std::function<size_t(size_t k)> recv_bytes;  // each peer's payload size for segment k
  // received[i] is peers[i]'s payload of segment k.
  std::function<absl::Status(size_t k, absl::Span<const ConstBytes> received)> finish;
};

// Runs the exchange. A transport error or a failed finish() aborts the communicator and is
// returned; a peer whose payload has the wrong size is INVALID_ARGUMENT naming it.
absl::Status RunSegmentedExchange(const SegmentedExchange& x);

// peers: each in [0, size), none equal to `rank`, strictly ascending. INVALID_ARGUMENT naming
// the first offender otherwise.
absl::Status ValidatePeers(std::string_view what, const std::vector<int>& peers, int rank,
                           int size);

}  // namespace herd::decentralized::internal
