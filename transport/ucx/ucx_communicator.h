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
// Connections: a rank connects to its bootstrap peers (bootstrap_peers.h: r +- 2^k mod P,
// which covers the ring, Bruck, recursive doubling/halving and every binomial tree) while the
// communicator is built, and to any other peer on its first isend/irecv with it (one store Get
// for that peer's record, once per communicator). So a rank holds about 2 log2(P) peers'
// endpoints unless its algorithm talks to more (alltoall, one-shot, random decentralized
// pairs).
//
// Failures: every connected peer is watched through an endpoint with UCP_ERR_HANDLING_MODE_PEER
// (for a peer on the same host a second, data-less endpoint over TCP loopback, since UCX 1.13
// gives shared memory only to endpoints without it; see ucx_bootstrap.cc). When it fails (the
// process died, or closed its communicator) that peer is marked dead: its pending requests fail
// with UNAVAILABLE naming it, later ones fail at once, and errors on other peers mention it.
// A peer this rank never talked to is not watched by it: its death is the scheduler's failure
// detector's to find (the worker's session aborts the communicator when the scheduler
// declares a member dead). A peer that is dead when first used fails that operation (its
// endpoints fail, or its record never appears). Without TCP (UCX_TLS excludes it) peers cannot
// be watched and a dead peer shows as deadline errors.
//
// Scale: at most 65535 ranks (the rank field of the wire tag; its last value marks the notices
// by which an aborting rank tells its peers why).

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

  // How messages move between two processes of the same host.
  //  false (default): as eager fragments through the receiver's shared-memory FIFO, copied in
  //    by the sender and out by the receiver (no rendezvous: UCX_RNDV_THRESH=inf, 16 KiB
  //    fragments). No process ever touches another's memory, so a peer that dies mid-transfer
  //    costs this rank an UNAVAILABLE error and nothing else.
  //  true: UCX's defaults, rendezvous by cross-memory attach (cma: one kernel copy straight
  //    between the user buffers). But UCX 1.13 offers shared memory only on endpoints without
  //    peer error handling, and aborts the process when a cma copy on such an endpoint fails:
  //    a peer dying mid-transfer kills this process too (and its own peers in turn). Measured
  //    on this machine it is not faster either (see tests/integration/ucx_bandwidth_test.cc).
  // Both settings apply to the whole UCX context; explicit UCX_RNDV_THRESH / UCX_MM_SEG_SIZE
  // in the environment win.
  bool same_host_zero_copy = false;

  // Spin on the worker without ever sleeping in wait(): the lowest latency when every rank has
  // a core of its own; wasteful (and slower) when ranks share cores.
  bool busy_poll = false;
};

// Creates this rank's endpoint of a `size`-rank communicator: publishes this rank's UCP worker
// address in `store` under "<prefix>/ucx/<rank>" (one Set), reads its bootstrap peers' records
// (one GetMany) and connects to them. Fails with a clear status (which peer did not show up) by
// the bootstrap deadline. The communicator keeps `store` to read the records of the peers it
// connects on first use (each gets bootstrap_timeout from then to show up).
absl::StatusOr<std::unique_ptr<Communicator>> CreateUcxCommunicator(int rank, int size,
                                                                    std::shared_ptr<Store> store,
                                                                    const UcxOptions& options = {});

// What a UCX communicator is connected to, for logs, tests and the docs' figures.
struct UcxEndpointStats {
  int bootstrap_peers = 0;  // peers connected while the communicator was built
  int lazy_peers = 0;       // peers connected on first use since
  int endpoints = 0;        // UCP endpoints this rank created (its loopback one included)
};
// INVALID_ARGUMENT when `comm` is not a UCX communicator.
absl::StatusOr<UcxEndpointStats> GetUcxEndpointStats(const Communicator& comm);

}  // namespace herd::transport
