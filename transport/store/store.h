#pragma once
// The bootstrap store: how the ranks of a communicator find each other (UCX worker addresses,
// the NCCL unique id). A small key-value store where Get waits for a key to appear.
// Implementations: in-process (threads as ranks), a shared directory (processes on one machine
// or a shared volume); for real jobs the scheduler (worker/scheduler_store.h, which
// lives there because transport/ must not depend on gRPC).

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/deadline.h"

namespace herd::transport {

class Store {
 public:
  virtual ~Store() = default;
  // Publishes `value` under `key`; a key is written once (ALREADY_EXISTS otherwise).
  virtual absl::Status Set(std::string_view key, std::string_view value) = 0;
  // Returns the value of `key`, waiting for it until the deadline (DEADLINE_EXCEEDED names it).
  virtual absl::StatusOr<std::string> Get(std::string_view key, Deadline deadline) = 0;
};

std::shared_ptr<Store> MakeInProcessStore();
// Keys become files in `dir` (created if missing), written atomically by rename.
absl::StatusOr<std::shared_ptr<Store>> MakeFileStore(std::string dir);

}  // namespace herd::transport
