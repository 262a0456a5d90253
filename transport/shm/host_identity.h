#pragma once
// Which ranks of a communicator can share memory: each rank's host identity, compared by the
// collectives' host-layout discovery (algorithms/collectives/topology.h).

#include <string>

#include "transport/communicator.h"

namespace herd::transport::shm {

// This rank's host identity on `comm`, or "" where its ranks cannot share host memory with
// anyone (every rank then counts as a host of its own):
//   ucx       the machine and its IPC and PID namespaces (ucx::LocalHostIdentity; the
//             environment's HERD_UCX_HOST_ID replaces it, which is how tests and herd-emu put
//             the processes of one machine on several emulated hosts);
//   loopback  the fabric's label for the rank (LoopbackFabric::Create with hosts), else "";
//   others    "" (NCCL's buffers live on the devices).
// The same for every rank of one backend in kind: either every rank of a communicator has an
// identity or none has, so all or none run the discovery.
std::string HostIdentityOf(const Communicator& comm);

}  // namespace herd::transport::shm
