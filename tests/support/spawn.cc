#include "tests/support/spawn.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "transport/loopback/loopback_communicator.h"

namespace herd::testing {

std::vector<absl::Status> SpawnRanks(
    int size, const std::function<absl::Status(transport::Communicator&)>& fn) {
  auto comms = transport::MakeLoopbackCommunicators(size);
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
