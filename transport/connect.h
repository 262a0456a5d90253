#pragma once
// One entry point to every backend: a process that needs a communicator names the backend
// (`--transport ucx|nccl`) and gets one, so the worker and the benchmarks reach NCCL as well
// as UCX without knowing how either bootstraps.
//
//   auto comm = transport::Connect({.kind = Backend::kUcx, .rank = r, .size = p,
//                                   .store = store, .prefix = "stretch-12"});
//
// A communicator of one rank over host memory needs no peers and no store: Connect returns a
// single-rank loopback communicator for it (the same code path as the threads-as-ranks tests).
// NCCL is never replaced that way: its buffers are device memory, whatever the size.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "transport/communicator.h"
#include "transport/store/store.h"

namespace herd::transport {

enum class Backend : uint8_t { kUcx, kNccl };

// "ucx" | "nccl"; INVALID_ARGUMENT names the backends otherwise.
absl::StatusOr<Backend> ParseBackend(std::string_view name);
std::string_view BackendName(Backend backend);
// The memory a backend's buffers live in (host for UCX, CUDA device memory for NCCL).
MemoryKind BackendMemory(Backend backend);

struct ConnectOptions {
  Backend kind = Backend::kUcx;
  int rank = 0;
  int size = 1;
  std::shared_ptr<Store> store;  // where the ranks find each other; unused for a single rank
  // Key prefix in the store, the same on every rank and new for every communicator (e.g. the
  // plan epoch or the first iteration of a stretch): stores write a key once.
  std::string prefix = "herd";
  std::chrono::milliseconds bootstrap_timeout{std::chrono::seconds(60)};
  int device = -1;  // NCCL: the CUDA device (-1: rank % visible devices)
};

// Builds this rank's communicator. Errors are the backend's (transport/ucx/ucx_communicator.h,
// transport/nccl/nccl_communicator.h): INVALID_ARGUMENT for a rank outside [0, size) or a
// missing store, DEADLINE_EXCEEDED naming the rank that did not show up, FAILED_PRECONDITION
// or UNIMPLEMENTED where NCCL cannot run here.
absl::StatusOr<std::unique_ptr<Communicator>> Connect(const ConnectOptions& options);

}  // namespace herd::transport
