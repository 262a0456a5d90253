#pragma once
// The benchmark's own synchronisation over a Communicator: a barrier before each timed loop
// and the gather of every rank's report to rank 0. Both use tags no collective uses
// (OpKind::kBarrier, and OpKind::kUser id kReportTagId), so they cannot match a collective's
// messages.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/report.h"
#include "common/deadline.h"
#include "transport/communicator.h"

namespace herd::bench {

// Dissemination barrier: ceil(log2 P) rounds of one-byte messages; in round k rank r signals
// r + 2^k and waits for r - 2^k. No rank leaves before every rank has entered. Errors name the
// round and the peer (from the transport), and abort the communicator.
absl::Status Barrier(transport::Communicator& comm, Deadline deadline);

inline constexpr uint32_t kReportTagId = 0xbe;

// On rank 0 returns every rank's report (index = rank); on the others sends `mine` and returns
// an empty vector.
absl::StatusOr<std::vector<RankReport>> GatherReports(transport::Communicator& comm,
                                                      const RankReport& mine, Deadline deadline);

}  // namespace herd::bench
