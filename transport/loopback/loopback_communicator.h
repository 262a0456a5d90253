#pragma once
// Loopback backend: the ranks are threads of one process sharing a LoopbackFabric. Used by the
// unit tests of every algorithm.
//
// Matching is rendezvous-like on purpose: a send completes only once a matching receive has
// copied it, and nothing is buffered. That is the strictest behaviour a real transport shows
// for large messages, so an algorithm that would deadlock over UCX deadlocks here too.
// kill(rank) stands in for a crashed process: its peers' requests fail with UNAVAILABLE.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "transport/communicator.h"

namespace herd::transport {

class LoopbackFabric {
 public:
  static std::shared_ptr<LoopbackFabric> Create(int size);
  // `hosts[r]` labels rank r's host: ranks with equal, non-empty labels count as one host
  // (collectives then use shared memory among them, the threads standing for processes of one
  // machine). Without labels every rank is a host of its own.
  static std::shared_ptr<LoopbackFabric> Create(int size, std::vector<std::string> hosts);
  virtual ~LoopbackFabric() = default;

  virtual int size() const = 0;
  // The communicator of `rank` (0 <= rank < size). It shares ownership of the fabric.
  virtual std::unique_ptr<Communicator> communicator(int rank) = 0;
  // Marks `rank` as crashed: everything pending to, from or of it fails; later operations
  // with it fail at once.
  virtual void kill(int rank, absl::Status why) = 0;
};

// Convenience: one communicator per rank of a new fabric (with host labels, see Create).
std::vector<std::unique_ptr<Communicator>> MakeLoopbackCommunicators(int size);
std::vector<std::unique_ptr<Communicator>> MakeLoopbackCommunicators(
    int size, std::vector<std::string> hosts);

// The host label of a loopback communicator's rank ("" for no label or another backend).
std::string LoopbackHost(const Communicator& comm);
// UNAVAILABLE (with the reason) once `peer` of a loopback communicator's fabric was killed;
// OK otherwise and for other backends.
absl::Status LoopbackPeerStatus(const Communicator& comm, int peer);

}  // namespace herd::transport
