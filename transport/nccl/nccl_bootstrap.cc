// Bootstrap of the NCCL backend: is a device there, which one this rank uses, the ncclUniqueId
// through the store, and a non-blocking ncclCommInitRankConfig that honours the deadline.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "transport/nccl/nccl_comm.h"
#include "transport/nccl/nccl_communicator.h"
#include "transport/nccl/nccl_errors.h"
#include "transport/nccl/poll_backoff.h"

namespace herd::transport {
namespace {

using nccl::CudaStatus;
using nccl::NcclStatus;

absl::StatusOr<int> DeviceCount() {
  int n = 0;
  HERD_RETURN_IF_ERROR(CudaStatus("cudaGetDeviceCount", cudaGetDeviceCount(&n)));
  return n;
}

// The id travels as hex: stores may be files or protobuf strings, which want text.
std::string EncodeId(const ncclUniqueId& id) {
  return absl::BytesToHexString(absl::string_view(id.internal, sizeof id.internal));
}

absl::StatusOr<ncclUniqueId> DecodeId(const std::string& key, const std::string& hex) {
  const bool all_hex = hex.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
  if (hex.size() != 2 * sizeof(ncclUniqueId::internal) || !all_hex) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "store key '%s' holds %u characters that are not the %u hex digits of an ncclUniqueId; "
        "is another program using the same prefix?",
        key, hex.size(), 2 * sizeof(ncclUniqueId::internal)));
  }
  std::string bytes = absl::HexStringToBytes(hex);
  ncclUniqueId id;
  std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  return id;
}

absl::StatusOr<ncclUniqueId> ShareUniqueId(int rank, Store& store, const std::string& key,
                                           Deadline deadline) {
  if (rank == 0) {
    ncclUniqueId id;
    HERD_RETURN_IF_ERROR(NcclStatus("ncclGetUniqueId", ncclGetUniqueId(&id)));
    absl::Status s = store.Set(key, EncodeId(id));
    if (absl::IsAlreadyExists(s)) {
      return absl::AlreadyExistsError(absl::StrFormat(
          "%s; an earlier communicator used this prefix: give each communicator its own "
          "NcclOptions::prefix (e.g. with the plan epoch)",
          std::string(s.message())));
    }
    HERD_RETURN_IF_ERROR(s);
    return id;
  }
  absl::StatusOr<std::string> hex = store.Get(key, deadline);
  if (absl::IsDeadlineExceeded(hex.status())) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "%s: rank 0 did not publish the NCCL id in time (is rank 0 running, with the same store "
        "and prefix?)",
        std::string(hex.status().message())));
  }
  HERD_RETURN_IF_ERROR(hex.status());
  return DecodeId(key, *hex);
}

// ncclCommInitRankConfig with blocking = 0 returns at once; the connection to the other ranks
// completes in NCCL's threads while this polls, so a missing rank ends at the deadline.
absl::StatusOr<ncclComm_t> InitComm(int rank, int size, const ncclUniqueId& id, Deadline deadline,
                                    std::chrono::milliseconds timeout) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t res = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  absl::Status s = NcclStatus("ncclCommInitRankConfig", res, comm);
  nccl::PollBackoff backoff(std::chrono::milliseconds(5));
  while (s.ok()) {
    ncclResult_t async = ncclSuccess;
    s = NcclStatus("ncclCommGetAsyncError", ncclCommGetAsyncError(comm, &async), comm);
    if (!s.ok()) break;
    if (async == ncclSuccess) return comm;
    if (async != ncclInProgress) {
      s = NcclStatus("ncclCommInitRankConfig", async, comm);
      break;
    }
    if (deadline.expired()) {
      s = absl::DeadlineExceededError(absl::StrFormat(
          "ncclCommInitRankConfig did not finish within %d ms: not every rank of %d joined or "
          "they cannot reach each other (every rank must be started with the same store, "
          "prefix and size)",
          timeout.count(), size));
      break;
    }
    backoff.Wait(deadline);
  }
  // NCCL allows aborting a non-blocking init that is still running; it stops its threads.
  if (comm != nullptr) ncclCommAbort(comm);
  return s;
}

}  // namespace

bool NcclUsable(std::string* why) {
  auto say = [why](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return false;
  };
  absl::StatusOr<int> devices = DeviceCount();
  if (!devices.ok()) {
    return say(
        absl::StrFormat("no usable CUDA device: %s", std::string(devices.status().message())));
  }
  if (*devices == 0) {
    return say(
        "no CUDA device is visible (cudaGetDeviceCount found 0; check CUDA_VISIBLE_DEVICES)");
  }
  int version = 0;
  absl::Status s = NcclStatus("ncclGetVersion", ncclGetVersion(&version));
  if (!s.ok()) return say(std::string(s.message()));
  return true;
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(int rank, int size,
                                                                     std::shared_ptr<Store> store,
                                                                     const NcclOptions& options) {
  const Deadline deadline = Deadline::After(options.bootstrap_timeout);
  const std::string context = absl::StrFormat("NCCL bootstrap of rank %d of %d", rank, size);
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: rank must be in [0, size) and size >= 1", context));
  }
  if (store == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: the store is null", context));
  }
  // Before the store: a rank without a device must fail now, not after waiting for an id it
  // could never use.
  std::string why;
  if (!NcclUsable(&why)) {
    return absl::FailedPreconditionError(absl::StrFormat("%s: %s", context, why));
  }
  HERD_ASSIGN_OR_RETURN(int devices, DeviceCount());
  const int device = options.device >= 0 ? options.device : rank % devices;
  if (device >= devices) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: CUDA device %d was asked for, but %d are visible (check NcclOptions::device and "
        "CUDA_VISIBLE_DEVICES)",
        context, device, devices));
  }
  HERD_RETURN_IF_ERROR(nccl::WithContext(
      context, CudaStatus(absl::StrFormat("cudaSetDevice(%d)", device), cudaSetDevice(device))));

  const std::string key = absl::StrFormat("%s/nccl/unique_id", options.prefix);
  absl::StatusOr<ncclUniqueId> id = ShareUniqueId(rank, *store, key, deadline);
  if (!id.ok()) return nccl::WithContext(context, id.status());
  absl::StatusOr<ncclComm_t> comm = InitComm(rank, size, *id, deadline, options.bootstrap_timeout);
  if (!comm.ok()) return nccl::WithContext(context, comm.status());

  // Non-blocking with respect to the legacy default stream, so other libraries' work on it does
  // not serialise with the collectives.
  cudaStream_t stream = nullptr;
  absl::Status s = CudaStatus("cudaStreamCreateWithFlags",
                              cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (!s.ok()) {
    ncclCommAbort(*comm);
    return nccl::WithContext(context, s);
  }
  return std::make_unique<nccl::NcclCommunicator>(rank, size, device, *comm, stream);
}

// Lives here, beside the other entry points, because only this backend's communicators can
// flush; the fallback build answers UNIMPLEMENTED.
absl::Status FlushNccl(Communicator& comm, Deadline deadline) {
  auto* nccl_comm = dynamic_cast<nccl::NcclCommunicator*>(&comm);
  if (nccl_comm == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("FlushNccl needs an NCCL communicator, got a %s one", comm.backend()));
  }
  return nccl_comm->Flush(deadline);
}

}  // namespace herd::transport
