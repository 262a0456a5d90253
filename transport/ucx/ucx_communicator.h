#pragma once
// The UCX backend of transport::Communicator: UCP tag messages between processes, on one machine
// (shared memory) or across machines (TCP, RDMA), whichever UCX finds; nothing is hard-coded.
//
// Wire tags: the 48-bit herd tag in the low bits, the sender's rank in the top 16, because UCP
// tag matching is per worker and cannot filter by endpoint. Receives match all 64 bits.
//
// Waiting: wait() progresses the UCP worker itself (no progress thread). It spins while UCX
// makes progress, then sleeps on the worker's event fd (UCP_FEATURE_WAKEUP), so that 4-8 ranks
// sharing two cores do not starve each other. Several threads may wait at once: one of them
// progresses the worker, the others sleep until their request completes.
//
// Failures: every peer is watched through an endpoint with UCP_ERR_HANDLING_MODE_PEER. When it
// fails (the process died or its host is unreachable) that peer is marked dead: its pending
// requests fail with UNAVAILABLE naming it, later ones fail at once, and deadline errors on
// other peers mention it. See docs of UcxOptions::same_host_zero_copy for what UCX 1.13 allows
// between processes of one host.
//
// Scale: at most 65536 ranks (the rank field of the wire tag).

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "transport/communicator.h"
#include "transport/store/store.h"

namespace herd::transport {

struct UcxOptions {
  std::string prefix = "herd";  // key prefix in the store, so several communicators can share one
  std::chrono::milliseconds bootstrap_timeout{std::chrono::seconds(60)};

  // How large messages move between two processes of the same host.
  //  false (default): UCX's rendezvous over the shared-memory FIFO (UCX_RNDV_SCHEME=am), one
  //    copy on each side. A peer that dies mid-transfer costs this rank an UNAVAILABLE error.
  //  true: UCX's default cross-memory-attach rendezvous (cma, one kernel copy, zero-copy for
  //    the user buffers), faster for messages of megabytes. But UCX 1.13 cannot report a cma
  //    failure on an endpoint without peer error handling, and shared memory is offered only on
  //    such endpoints: if a peer dies while its memory is being copied, UCX aborts this process.
  //    Use it where a crashed rank ends the whole job anyway.
  // An explicit UCX_RNDV_SCHEME in the environment wins over both.
  bool same_host_zero_copy = false;

  // Spin on the worker without ever sleeping in wait(): the lowest latency when every rank has
  // a core of its own; wasteful (and slower) when ranks share cores.
  bool busy_poll = false;
};

// Creates this rank's endpoint of a `size`-rank communicator: publishes this rank's UCP worker
// address in `store` under "<prefix>/ucx/<rank>", reads every peer's, and connects. Fails with a
// clear status (which peer did not show up) by the bootstrap deadline.
absl::StatusOr<std::unique_ptr<Communicator>> CreateUcxCommunicator(int rank, int size,
                                                                    std::shared_ptr<Store> store,
                                                                    const UcxOptions& options = {});

}  // namespace herd::transport
