#include "transport/shm/host_identity.h"

#include "transport/loopback/loopback_communicator.h"
#include "transport/ucx/peer_record.h"

namespace herd::transport::shm {

std::string HostIdentityOf(const Communicator& comm) {
  if (comm.memory() != MemoryKind::kHost) return {};
  if (comm.backend() == "ucx") return ucx::LocalHostIdentity();
  if (comm.backend() == "loopback") return LoopbackHost(comm);
  return {};
}

}  // namespace herd::transport::shm
