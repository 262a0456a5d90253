#pragma once
// UCX communicators as threads of one process, bootstrapped through an in-process store.

#include <memory>
#include <vector>

#include "transport/store/store.h"
#include "transport/ucx/ucx_communicator.h"

namespace herd::testing {

// Keeps UCX off the machine's real network interfaces: the tests run on loopback TCP and
// shared memory only. UCX offers TCP on every interface by default; UCX_NET_DEVICES selects
// network devices only, so the shared-memory transports stay available. A value already in the
// environment wins. Call before the first UCX context is created.
void UseLoopbackNetworkOnly();

// One communicator per rank of a `size`-rank UCX communicator (each built on its own thread,
// since bootstrap waits for every rank). Fails the current test and returns an empty vector if
// any rank cannot be built.
std::vector<std::unique_ptr<transport::Communicator>> MakeUcxCommunicators(
    int size, transport::UcxOptions options = {});

}  // namespace herd::testing
