#pragma once
// The benchmarks' own synchronisation over a Communicator: a barrier before each timed loop
// and the gather of every rank's report to rank 0. Both use tags no collective uses
// (OpKind::kBarrier, and OpKind::kUser id kReportTagId), so they cannot match a collective's
// messages.

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "common/bytes.h"
#include "common/deadline.h"
#include "transport/communicator.h"

namespace herd::bench {

// Dissemination barrier: ceil(log2 P) rounds of one-byte messages; in round k rank r signals
// r + 2^k and waits for r - 2^k. No rank leaves before every rank has entered. Errors name the
// round and the peer (from the transport), and abort the communicator.
absl::Status Barrier(transport::Communicator& comm, Deadline deadline);

inline constexpr uint32_t kReportTagId = 0xbe;

// On rank 0: every rank's `bytes` bytes, rank r's at offset r * bytes. Elsewhere: sends `mine`
// and returns an empty vector.
absl::StatusOr<std::vector<std::byte>> GatherBytes(transport::Communicator& comm, ConstBytes mine,
                                                   Deadline deadline);

// GatherBytes of plain data (every rank is the same binary): on rank 0 every rank's `mine`
// (index = rank), elsewhere an empty vector.
template <typename T>
absl::StatusOr<std::vector<T>> GatherToRoot(transport::Communicator& comm, const T& mine,
                                            Deadline deadline) {
  static_assert(std::is_trivially_copyable_v<T>);
  auto bytes = GatherBytes(comm, AsBytes(&mine, sizeof mine), deadline);
  if (!bytes.ok()) return bytes.status();
  std::vector<T> all(bytes->size() / sizeof(T));
  // Ranks other than 0 get nothing back, and memcpy from an empty vector's null data() is
  // undefined even for zero bytes.
  if (!all.empty()) std::memcpy(all.data(), bytes->data(), all.size() * sizeof(T));
  return all;
}

}  // namespace herd::bench
