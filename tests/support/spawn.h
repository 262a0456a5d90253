#pragma once
// Threads-as-ranks: runs fn(comm) on one thread per rank over a fresh loopback fabric and
// returns each rank's status. Mirrors gloo's test/base_test.h spawn().

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "transport/communicator.h"

namespace herd::testing {

std::vector<absl::Status> SpawnRanks(
    int size, const std::function<absl::Status(transport::Communicator&)>& fn);

// The first non-OK status of `statuses`, prefixed by its rank, or OK.
absl::Status FirstError(const std::vector<absl::Status>& statuses);

}  // namespace herd::testing
