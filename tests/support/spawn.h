#pragma once
// Threads-as-ranks: runs fn(comm) on one thread per rank over a fresh loopback fabric and
// returns each rank's status. Mirrors gloo's test/base_test.h spawn().

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "transport/communicator.h"

namespace herd::testing {

std::vector<absl::Status> SpawnRanks(
    int size, const std::function<absl::Status(transport::Communicator&)>& fn);
// The same on a fabric whose rank r is on host hosts[r] (shared memory among a label's ranks,
// LoopbackFabric::Create with hosts); one rank per entry.
std::vector<absl::Status> SpawnRanksOnHosts(
    const std::vector<std::string>& hosts,
    const std::function<absl::Status(transport::Communicator&)>& fn);

// The first non-OK status of `statuses`, prefixed by its rank, or OK.
absl::Status FirstError(const std::vector<absl::Status>& statuses);

}  // namespace herd::testing
