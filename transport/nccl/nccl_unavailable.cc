// The NCCL backend's entry points in a build without the CUDA toolkit: they say so, so that
// callers can be written once for both kinds of build.

#include "transport/nccl/nccl_communicator.h"

namespace herd::transport {
namespace {

constexpr char kNotBuilt[] = "herd was built without NCCL: the CUDA toolkit was not found";

}  // namespace

bool NcclUsable(std::string* why) {
  if (why != nullptr) *why = kNotBuilt;
  return false;
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(int, int,
                                                                     std::shared_ptr<Store>,
                                                                     const NcclOptions&) {
  return absl::UnimplementedError(kNotBuilt);
}

absl::Status FlushNccl(Communicator&, Deadline) { return absl::UnimplementedError(kNotBuilt); }

}  // namespace herd::transport
