#pragma once
// The bootstrap store: how the ranks of a communicator find each other (UCX worker addresses,
// the NCCL unique id). A small key-value store where Get waits for a key to appear.
// Implementations: in-process (threads as ranks), a shared directory (processes on one machine
// or a shared volume); for real jobs the scheduler (worker/scheduler_store.h, which
// lives there because transport/ must not depend on gRPC).

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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
  // Returns the values of `keys`, in their order, once every one of them is set, waiting until
  // the deadline. DEADLINE_EXCEEDED names the keys still missing then (MissingKeysError) and,
  // when `missing` is not null, puts their positions in `keys` there (ascending). Any other
  // error is returned as it comes. No keys: an empty answer at once.
  //
  // A store that talks to a server answers in one round trip (the scheduler's store: one
  // StoreGetMany call); this default asks Get key by key, which is what a local store costs
  // anyway.
  virtual absl::StatusOr<std::vector<std::string>> GetMany(const std::vector<std::string>& keys,
                                                           Deadline deadline,
                                                           std::vector<size_t>* missing = nullptr);
};

// DEADLINE_EXCEEDED for GetMany: "store keys 'a/1', 'a/7' (2 of 9) <where> did not appear before
// the deadline", naming at most 8 keys (then "and N more") so the message stays short.
absl::Status MissingKeysError(const std::vector<std::string>& keys,
                              const std::vector<size_t>& missing, std::string_view where);

std::shared_ptr<Store> MakeInProcessStore();
// Keys become files in `dir` (created if missing), written atomically by rename.
absl::StatusOr<std::shared_ptr<Store>> MakeFileStore(std::string dir);

}  // namespace herd::transport
