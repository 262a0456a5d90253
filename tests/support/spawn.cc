#include "tests/support/spawn.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "transport/loopback/loopback_communicator.h"

namespace herd::testing {

std::vector<absl::Status> SpawnRanks(
    int size, const std::function<absl::Status(transport::Communicator&)>& fn) {
  return SpawnRanksOnHosts(std::vector<std::string>(size), fn);
}

std::vector<absl::Status> SpawnRanksOnHosts(
    const std::vector<std::string>& hosts,
    const std::function<absl::Status(transport::Communicator&)>& fn) {
  const int size = static_cast<int>(hosts.size());
  const bool labelled = std::any_of(hosts.begin(), hosts.end(), [](auto& h) { return !h.empty(); });
  auto comms = labelled ? transport::MakeLoopbackCommunicators(size, hosts)
                        : transport::MakeLoopbackCommunicators(size);
  std::vector<absl::Status> statuses(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] { statuses[r] = fn(*comms[r]); });
  }
  for (auto& t : threads) t.join();
  return statuses;
}

absl::Status FirstError(const std::vector<absl::Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (!statuses[r].ok()) {
      return absl::Status(statuses[r].code(),
                          absl::StrCat("rank ", r, ": ", statuses[r].message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::testing
