#pragma once
// What each rank publishes in the bootstrap store under "<prefix>/ucx/<rank>": its UCP worker
// address, plus the identity of its host so that peers know whether they share memory with it.
// A record comes from another process, so decoding validates everything and never crashes.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace herd::transport::ucx {

struct PeerRecord {
  // Equal for two processes exactly when UCX can give them shared-memory transports: the
  // machine (UCX's system id) and the IPC and PID namespaces (containers) all match.
  std::string host;
  int64_t pid = 0;
  std::string worker_address;  // opaque bytes from ucp_worker_get_address
};

// This process's host identity, as in PeerRecord::host. HERD_UCX_HOST_ID, if set, replaces it:
// processes of one machine with different values treat each other as remote (one endpoint with
// peer error handling, no shared memory), which is how tests exercise the cross-host path.
std::string LocalHostIdentity();

std::string EncodePeerRecord(const PeerRecord& record);
// INVALID_ARGUMENT (naming `what`, e.g. "the record of rank 3") if `bytes` is not a record.
absl::StatusOr<PeerRecord> DecodePeerRecord(std::string_view bytes, std::string_view what);

}  // namespace herd::transport::ucx
