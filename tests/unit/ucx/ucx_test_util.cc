#include "tests/unit/ucx/ucx_test_util.h"

#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

namespace herd::testing {

void UseLoopbackNetworkOnly() { ::setenv("UCX_NET_DEVICES", "lo", /*overwrite=*/0); }

std::vector<std::unique_ptr<transport::Communicator>> MakeUcxCommunicators(
    int size, transport::UcxOptions options) {
  return MakeUcxCommunicators(size, transport::MakeInProcessStore(), std::move(options));
}

std::vector<std::unique_ptr<transport::Communicator>> MakeUcxCommunicators(
    int size, std::shared_ptr<transport::Store> store, transport::UcxOptions options) {
  UseLoopbackNetworkOnly();
  std::vector<absl::StatusOr<std::unique_ptr<transport::Communicator>>> made(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back(
        [&, r] { made[r] = transport::CreateUcxCommunicator(r, size, store, options); });
  }
  for (auto& t : threads) t.join();
  std::vector<std::unique_ptr<transport::Communicator>> comms;
  for (int r = 0; r < size; ++r) {
    if (!made[r].ok()) {
      ADD_FAILURE() << "rank " << r << ": " << made[r].status();
      return {};
    }
    comms.push_back(std::move(made[r]).value());
  }
  return comms;
}

}  // namespace herd::testing
