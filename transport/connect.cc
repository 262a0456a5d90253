#include "transport/connect.h"

#include "absl/strings/str_format.h"
#include "transport/loopback/loopback_communicator.h"
#include "transport/nccl/nccl_communicator.h"
#include "transport/ucx/ucx_communicator.h"

namespace herd::transport {

absl::StatusOr<Backend> ParseBackend(std::string_view name) {
  if (name == "ucx") return Backend::kUcx;
  if (name == "nccl") return Backend::kNccl;
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown transport '%s'; use ucx (host memory) or nccl (GPU memory)", name));
}

std::string_view BackendName(Backend backend) { return backend == Backend::kNccl ? "nccl" : "ucx"; }

MemoryKind BackendMemory(Backend backend) {
  return backend == Backend::kNccl ? MemoryKind::kCuda : MemoryKind::kHost;
}

absl::StatusOr<std::unique_ptr<Communicator>> Connect(const ConnectOptions& o) {
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot connect rank %d of %d: ranks are 0..size-1", o.rank, o.size));
  }
  if (o.kind == Backend::kUcx && o.size == 1) {
    return std::move(MakeLoopbackCommunicators(1)[0]);
  }
  if (o.store == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot connect rank %d of %d over %s: no bootstrap store", o.rank, o.size,
                        BackendName(o.kind)));
  }
  if (o.kind == Backend::kNccl) {
    NcclOptions nccl;
    nccl.prefix = o.prefix;
    nccl.device = o.device;
    nccl.bootstrap_timeout = o.bootstrap_timeout;
    return CreateNcclCommunicator(o.rank, o.size, o.store, nccl);
  }
  UcxOptions ucx;
  ucx.prefix = o.prefix;
  ucx.bootstrap_timeout = o.bootstrap_timeout;
  return CreateUcxCommunicator(o.rank, o.size, o.store, ucx);
}

}  // namespace herd::transport
