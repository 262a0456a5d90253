#pragma once
// UCX communicators as threads of one process, bootstrapped through an in-process store.

#include <atomic>
#include <memory>
#include <vector>

#include "transport/store/store.h"
#include "transport/ucx/ucx_communicator.h"

namespace herd::testing {

// Keeps UCX off the machine's real network interfaces: the tests run on loopback TCP and
// shared memory only. UCX offers TCP on every interface by default; UCX_NET_DEVICES selects
// network devices only, so the shared-memory transports stay available. A value already in the
// environment wins. Call before the first UCX context is created.
void UseLoopbackNetworkOnly();

// One communicator per rank of a `size`-rank UCX communicator (each built on its own thread,
// since bootstrap waits for every rank). Fails the current test and returns an empty vector if
// any rank cannot be built.
std::vector<std::unique_ptr<transport::Communicator>> MakeUcxCommunicators(
    int size, transport::UcxOptions options = {});
// The same over a store of the caller's.
std::vector<std::unique_ptr<transport::Communicator>> MakeUcxCommunicators(
    int size, std::shared_ptr<transport::Store> store, transport::UcxOptions options);

// A Store that counts the calls made to it (all ranks together) and forwards them.
class CountingStore final : public transport::Store {
 public:
  explicit CountingStore(std::shared_ptr<transport::Store> inner) : inner_(std::move(inner)) {}
  absl::Status Set(std::string_view key, std::string_view value) override {
    ++sets;
    return inner_->Set(key, value);
  }
  absl::StatusOr<std::string> Get(std::string_view key, Deadline deadline) override {
    ++gets;
    return inner_->Get(key, deadline);
  }
  absl::StatusOr<std::vector<std::string>> GetMany(const std::vector<std::string>& keys,
                                                   Deadline deadline,
                                                   std::vector<size_t>* missing) override {
    ++get_manys;
    return inner_->GetMany(keys, deadline, missing);
  }
  std::atomic<int> sets{0}, gets{0}, get_manys{0};

 private:
  std::shared_ptr<transport::Store> inner_;
};

}  // namespace herd::testing
